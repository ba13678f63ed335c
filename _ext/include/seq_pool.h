/* seq_pool's float kernels (cimported by _ext/seq_pool.pyx).
 *
 * D == 1 float reductions and D > 1 float32 sums: explicit vectors.  Geometric sequence
 * lengths make every loop exit a branch mispredict, which costs more than the adds.  A
 * sequence of at most LIM rows (most of them) is therefore reduced as LIM/W fixed vector
 * blocks, masking the lanes past its end (reads stay inside the data), with no data-dependent
 * branch. */
#ifndef LODARROW_SEQ_POOL_H
#define LODARROW_SEQ_POOL_H
#include "lodarrow_simd.h"

#define LA_FLUSH 256      /* float32 lanes add at most this many rows before a double flush */
#define LA_FBLOCK 256     /* features accumulated at once (D > 1) */

static inline double la_div(int mode, int64_t n) {
    return mode == 1 ? (double)n : mode == 2 ? sqrt((double)n) : 1.0;
}

#if LA_HAVE_VEC
#define LA_VEC_TYPES(SUF, T, IT, W)                                                      \
    typedef T la_v_##SUF __attribute__((vector_size(sizeof(T) * W)));                  \
    typedef IT la_m_##SUF __attribute__((vector_size(sizeof(T) * W)));
/* Unaligned vector load, and "a where m else b" (macros: vectors never cross a call). */
#define la_ld_f32(p) (__extension__({ la_v_f32 v_; memcpy(&v_, (p), sizeof v_); v_; }))
#define la_ld_f64(p) (__extension__({ la_v_f64 v_; memcpy(&v_, (p), sizeof v_); v_; }))
#define LA_SEL(VT, MT, m, a, b) ((VT)(((MT)(a) & (m)) | ((MT)(b) & ~(m))))
#define la_sel_f32(m, a, b) LA_SEL(la_v_f32, la_m_f32, m, a, b)
#define la_sel_f64(m, a, b) LA_SEL(la_v_f64, la_m_f64, m, a, b)
LA_VEC_TYPES(f32, float, int32_t, 8)
LA_VEC_TYPES(f64, double, int64_t, 4)

/* Sum family, D == 1.  mode 0 sum, 1 mean, 2 sqrt; empty sequences get pad. */
#define LA_SUM1(SUF, T, IT, W, LIM)                                                     \
LA_CLONES static void la_sum1_##SUF(T* out, const T* x, const int64_t* off, int64_t lo,  \
                                    int64_t hi, int64_t n_rows, T pad, int mode) {       \
    la_m_##SUF lane;                                                                     \
    for (int j = 0; j < W; j++) lane[j] = (IT)j;                                         \
    for (int64_t s = lo; s < hi; s++) {                                                  \
        int64_t a = off[s], b = off[s + 1], n = b - a, i;                                \
        double total = 0.0;                                                              \
        if (n <= LIM && a + LIM <= n_rows) {                                             \
            la_m_##SUF rest = lane - (IT)n;                                              \
            la_v_##SUF acc0 = {0}, acc1 = {0};                                           \
            for (int k = 0; k < LIM / W; k += 2) {                                       \
                acc0 += (la_v_##SUF)((la_m_##SUF)la_ld_##SUF(x + a + k * W)              \
                                     & (rest + (IT)(k * W) < 0));                        \
                acc1 += (la_v_##SUF)((la_m_##SUF)la_ld_##SUF(x + a + (k + 1) * W)        \
                                     & (rest + (IT)((k + 1) * W) < 0));                  \
            }                                                                            \
            acc0 += acc1;                                                                \
            T t = 0;                                                                     \
            for (int j = 0; j < W; j++) t += acc0[j];                                    \
            out[s] = n ? (T)((double)t / la_div(mode, n ? n : 1)) : pad;                 \
            continue;                                                                    \
        }                                                                                \
        if (n == 0) { out[s] = pad; continue; }                                          \
        for (i = a; i + LA_FLUSH <= b; i += LA_FLUSH) {                                  \
            la_v_##SUF acc0 = {0}, acc1 = {0};                                           \
            for (int k = 0; k < LA_FLUSH; k += 2 * W) {                                  \
                acc0 += la_ld_##SUF(x + i + k);                                          \
                acc1 += la_ld_##SUF(x + i + k + W);                                      \
            }                                                                            \
            acc0 += acc1;                                                                \
            T t = 0;                                                                     \
            for (int j = 0; j < W; j++) t += acc0[j];                                    \
            total += t;                                                                  \
        }                                                                                \
        {                                                                                \
            la_v_##SUF acc0 = {0};                                                       \
            for (; i + W <= b; i += W) acc0 += la_ld_##SUF(x + i);                       \
            T t = 0;                                                                     \
            for (int j = 0; j < W; j++) t += acc0[j];                                    \
            for (; i < b; i++) t += x[i];                                                \
            total += t;                                                                  \
        }                                                                                \
        out[s] = (T)(total / la_div(mode, n));                                           \
    }                                                                                    \
}
LA_SUM1(f32, float, int32_t, 8, 64)
LA_SUM1(f64, double, int64_t, 4, 32)

/* Max (CMP >) or min (CMP <), D == 1; lanes past the end repeat the first row (max and
 * min are idempotent), NaN anywhere gives NaN as np.max does. */
#define LA_EXT1(NAME, SUF, T, IT, W, LIM, CMP)                                          \
LA_CLONES static void la_##NAME##1_##SUF(T* out, const T* x, const int64_t* off,         \
                                         int64_t lo, int64_t hi, int64_t n_rows, T pad) {\
    la_m_##SUF lane;                                                                     \
    for (int j = 0; j < W; j++) lane[j] = (IT)j;                                         \
    for (int64_t s = lo; s < hi; s++) {                                                  \
        int64_t a = off[s], b = off[s + 1], n = b - a, i;                                \
        la_m_##SUF nan = {0};                                                            \
        la_v_##SUF acc0 = {0}, acc1 = {0}, v;                                            \
        T r;                                                                             \
        int any = 0;                                                                     \
        if (a < n_rows) { acc0 = acc1 = acc0 + x[a]; }                                   \
        if (n <= LIM && a + LIM <= n_rows) {                                             \
            la_m_##SUF rest = lane - (IT)n;                                              \
            for (int k = 0; k < LIM / W; k += 2) {                                       \
                v = la_sel_##SUF(rest + (IT)(k * W) < 0, la_ld_##SUF(x + a + k * W), acc0);\
                nan |= v != v;                                                           \
                acc0 = la_sel_##SUF(v CMP acc0, v, acc0);                                \
                v = la_sel_##SUF(rest + (IT)((k + 1) * W) < 0,                           \
                                 la_ld_##SUF(x + a + (k + 1) * W), acc1);                \
                nan |= v != v;                                                           \
                acc1 = la_sel_##SUF(v CMP acc1, v, acc1);                                \
            }                                                                            \
            i = b;                                                                       \
        } else if (n == 0) {                                                             \
            out[s] = pad;                                                                \
            continue;                                                                    \
        } else {                                                                         \
            for (i = a; i + W <= b; i += W) {                                            \
                v = la_ld_##SUF(x + i);                                                  \
                nan |= v != v;                                                           \
                acc0 = la_sel_##SUF(v CMP acc0, v, acc0);                                \
            }                                                                            \
        }                                                                                \
        acc0 = la_sel_##SUF(acc1 CMP acc0, acc1, acc0);                                  \
        r = acc0[0];                                                                     \
        for (int j = 1; j < W; j++) r = acc0[j] CMP r ? acc0[j] : r;                     \
        for (; i < b; i++) { T u = x[i]; any |= u != u; r = u CMP r ? u : r; }           \
        for (int j = 0; j < W; j++) any |= nan[j] != 0;                                  \
        out[s] = n == 0 ? pad : any ? (T)NAN : r;                                        \
    }                                                                                    \
}
LA_EXT1(max, f32, float, int32_t, 8, 64, >)
LA_EXT1(min, f32, float, int32_t, 8, 64, <)
LA_EXT1(max, f64, double, int64_t, 4, 32, >)
LA_EXT1(min, f64, double, int64_t, 4, 32, <)
#else
#define LA_SUM1_SCALAR(SUF, T)                                                          \
static void la_sum1_##SUF(T* out, const T* x, const int64_t* off, int64_t lo,            \
                          int64_t hi, int64_t n_rows, T pad, int mode) {                 \
    (void)n_rows;                                                                        \
    for (int64_t s = lo; s < hi; s++) {                                                  \
        double t[4] = {0, 0, 0, 0};                                                      \
        int64_t a = off[s], b = off[s + 1], i;                                           \
        if (a == b) { out[s] = pad; continue; }                                          \
        for (i = a; i + 4 <= b; i += 4) {                                                \
            t[0] += x[i]; t[1] += x[i + 1]; t[2] += x[i + 2]; t[3] += x[i + 3];          \
        }                                                                                \
        for (; i < b; i++) t[0] += x[i];                                                 \
        out[s] = (T)(((t[0] + t[1]) + (t[2] + t[3])) / la_div(mode, b - a));             \
    }                                                                                    \
}
LA_SUM1_SCALAR(f32, float)
LA_SUM1_SCALAR(f64, double)
#define LA_EXT1_SCALAR(NAME, SUF, T, CMP)                                               \
static void la_##NAME##1_##SUF(T* out, const T* x, const int64_t* off, int64_t lo,       \
                               int64_t hi, int64_t n_rows, T pad) {                      \
    (void)n_rows;                                                                        \
    for (int64_t s = lo; s < hi; s++) {                                                  \
        int64_t a = off[s], b = off[s + 1], i;                                           \
        T r;                                                                             \
        if (a == b) { out[s] = pad; continue; }                                          \
        r = x[a];                                                                        \
        for (i = a + 1; i < b; i++) if (x[i] CMP r || x[i] != x[i]) r = x[i];            \
        out[s] = r;                                                                      \
    }                                                                                    \
}
LA_EXT1_SCALAR(max, f32, float, >)
LA_EXT1_SCALAR(min, f32, float, <)
LA_EXT1_SCALAR(max, f64, double, >)
LA_EXT1_SCALAR(min, f64, double, <)
#endif

/* float32 sums over D > 1 features: float lanes flushed into float64 every LA_FLUSH rows
 * (float32 speed, float64-grade error); the feature loop is vectorised. */
LA_CLONES static void la_sumd_f32(float* out, const float* x, const int64_t* off,
                                  int64_t lo, int64_t hi, int64_t d, const float* pad,
                                  int mode) {
    float acc[LA_FBLOCK];
    double tot[LA_FBLOCK];
    for (int64_t s = lo; s < hi; s++) {
        int64_t a = off[s], b = off[s + 1];
        float* o = out + s * d;
        if (a == b) { memcpy(o, pad, (size_t)d * sizeof(float)); continue; }
        double div = la_div(mode, b - a);
        for (int64_t j0 = 0; j0 < d; j0 += LA_FBLOCK) {
            int64_t w = d - j0 < LA_FBLOCK ? d - j0 : LA_FBLOCK;
            for (int64_t j = 0; j < w; j++) tot[j] = 0.0;
            for (int64_t i0 = a; i0 < b; i0 += LA_FLUSH) {
                int64_t i1 = b - i0 < LA_FLUSH ? b : i0 + LA_FLUSH;
                for (int64_t j = 0; j < w; j++) acc[j] = 0.0f;
                for (int64_t i = i0; i < i1; i++) {
                    const float* row = x + i * d + j0;
                    for (int64_t j = 0; j < w; j++) acc[j] += row[j];
                }
                for (int64_t j = 0; j < w; j++) tot[j] += acc[j];
            }
            for (int64_t j = 0; j < w; j++) o[j0 + j] = (float)(tot[j] / div);
        }
    }
}

/* float32 sums for D = 8 * NV (NV <= 8): the sequence's running sums live in NV vector
 * registers (no store/reload of an accumulator array per row), each row is streamed
 * once, and the float64 flush and divide are constant-width loops the compiler
 * vectorises.  Same summation order as la_sumd_f32, so the results are identical. */
#if LA_HAVE_VEC
#define LA_SUMD_FIX(NV)                                                                 \
LA_CLONES static void la_sumd8x##NV(float* out, const float* x, const int64_t* off,     \
                                    int64_t lo, int64_t hi, const float* pad,           \
                                    int mode) {                                         \
    enum { D = 8 * NV };                                                                \
    for (int64_t s = lo; s < hi; s++) {                                                 \
        int64_t a = off[s], b = off[s + 1];                                             \
        float* o = out + s * D;                                                         \
        double tot[D];                                                                  \
        float f[D];                                                                     \
        if (a == b) { memcpy(o, pad, sizeof f); continue; }                             \
        for (int j = 0; j < D; j++) tot[j] = 0.0;                                       \
        for (int64_t i0 = a; i0 < b; i0 += LA_FLUSH) {                                  \
            int64_t i1 = b - i0 < LA_FLUSH ? b : i0 + LA_FLUSH;                         \
            la_v_f32 acc[NV];                                                           \
            for (int v = 0; v < NV; v++) acc[v] = (la_v_f32){0};                        \
            for (const float* r = x + i0 * D; r < x + i1 * D; r += D)                  \
                for (int v = 0; v < NV; v++) acc[v] += la_ld_f32(r + 8 * v);            \
            memcpy(f, acc, sizeof f);                                                   \
            for (int j = 0; j < D; j++) tot[j] += f[j];                                 \
        }                                                                               \
        if (mode == 0) {            /* x / 1.0 == x: skip the divides */                \
            for (int j = 0; j < D; j++) o[j] = (float)tot[j];                           \
        } else {                                                                        \
            double div = la_div(mode, b - a);                                           \
            for (int j = 0; j < D; j++) o[j] = (float)(tot[j] / div);                   \
        }                                                                               \
    }                                                                                   \
}
#else
#define LA_SUMD_FIX(NV)                                                                 \
static void la_sumd8x##NV(float* out, const float* x, const int64_t* off, int64_t lo,   \
                          int64_t hi, const float* pad, int mode) {                     \
    la_sumd_f32(out, x, off, lo, hi, 8 * NV, pad, mode);                                \
}
#endif
LA_SUMD_FIX(1)
LA_SUMD_FIX(2)
LA_SUMD_FIX(3)
LA_SUMD_FIX(4)
LA_SUMD_FIX(6)
LA_SUMD_FIX(8)


/* First / last (seq_pool.pyx's pool_pick): out[s] = the first (last) row of sequence s, pad
 * for an empty one.  The picked rows lie a sequence apart (hundreds of bytes at D == 1), so
 * the loop waits on memory, not on arithmetic: each picked row is prefetched LA_PICK_AHEAD
 * sequences ahead (the hardware prefetchers do not follow the offsets), and rows of 2, 4
 * or 8 bytes move as one integer of that size (no copy call; the element's bits unchanged
 * in every dtype), each offset read once. */
#define LA_PICK_AHEAD 64
#if defined(__GNUC__) || defined(__clang__)
#define LA_PREFETCH(p) __builtin_prefetch((p), 0, 0)
#else
#define LA_PREFETCH(p) ((void)0)
#endif
#define LA_PICK_T(SUF, T)                                                                \
static void la_pick_##SUF(T* out, const T* x, const int64_t* off, int64_t lo, int64_t hi, \
                          T pad, int last) {                                             \
    int64_t s = lo, a = off[lo], b, q;                                                   \
    int64_t m = hi - lo > LA_PICK_AHEAD ? hi - LA_PICK_AHEAD : lo;                       \
    if (last) {                                                                          \
        for (; s < m; s++) {                                                             \
            q = off[s + LA_PICK_AHEAD + 1];                                              \
            LA_PREFETCH(x + (q > 0 ? q - 1 : 0));                                        \
            b = off[s + 1];                                                              \
            out[s] = a == b ? pad : x[b - 1];                                            \
            a = b;                                                                       \
        }                                                                                \
        for (; s < hi; s++) {                                                            \
            b = off[s + 1];                                                              \
            out[s] = a == b ? pad : x[b - 1];                                            \
            a = b;                                                                       \
        }                                                                                \
    } else {                                                                             \
        for (; s < m; s++) {                                                             \
            LA_PREFETCH(x + off[s + LA_PICK_AHEAD]);                                     \
            b = off[s + 1];                                                              \
            out[s] = a == b ? pad : x[a];                                                \
            a = b;                                                                       \
        }                                                                                \
        for (; s < hi; s++) {                                                            \
            b = off[s + 1];                                                              \
            out[s] = a == b ? pad : x[a];                                                \
            a = b;                                                                       \
        }                                                                                \
    }                                                                                    \
}
LA_PICK_T(u16, uint16_t)
LA_PICK_T(u32, uint32_t)
LA_PICK_T(u64, uint64_t)

/* Rows of any other width: memcpy, the same prefetch (the row's first line). */
static void la_pick_bytes(unsigned char* out, const unsigned char* x, const int64_t* off,
                          const unsigned char* pad, int64_t lo, int64_t hi, size_t w,
                          int last) {
    int64_t s, a, b, q, m = hi - lo > LA_PICK_AHEAD ? hi - LA_PICK_AHEAD : lo;
    for (s = lo; s < hi; s++) {
        if (s < m) {
            q = last ? off[s + LA_PICK_AHEAD + 1] - 1 : off[s + LA_PICK_AHEAD];
            LA_PREFETCH(x + (q > 0 ? q : 0) * (int64_t)w);
        }
        a = off[s];
        b = off[s + 1];
        memcpy(out + s * (int64_t)w, a == b ? pad : x + (last ? b - 1 : a) * (int64_t)w, w);
    }
}


/* The sum / average / sqrt pooling backward at D == 1 (seq_grad.pyx): every row of sequence s
 * gets one value, dout[s] (over L or sqrt(L), in double, as _grad_row does).  Sequences are
 * short runs (tens of rows), so a plain loop pays its alignment peel and scalar tail once per
 * sequence: here a run of L >= LANES rows goes out as whole vectors of the value, the last
 * one overlapping the one before it (unaligned stores; no tail loop). */
#if LA_HAVE_VEC
#define LA_BCAST1(SUF, T)                                                                  \
typedef T la_bcast_##SUF##_v __attribute__((vector_size(32)));                            \
LA_CLONES static void la_pool_bcast1_##SUF(T* dx, const T* g, const int64_t* off,           \
                                           int64_t lo, int64_t hi, int mode) {             \
    enum { LANES = 32 / sizeof(T) };                                                       \
    int64_t s, a, b, i, n;                                                                 \
    T v;                                                                                   \
    la_bcast_##SUF##_v vv;                                                                 \
    for (s = lo; s < hi; s++) {                                                            \
        a = off[s];                                                                        \
        b = off[s + 1];                                                                    \
        n = b - a;                                                                         \
        if (n == 0)                                                                        \
            continue;                                                                      \
        v = mode == 0 ? g[s] : (T)((double)g[s] / (mode == 1 ? (double)n : sqrt((double)n))); \
        if (n < LANES) {                                                                   \
            for (i = a; i < b; i++)                                                        \
                dx[i] = v;                                                                 \
            continue;                                                                      \
        }                                                                                  \
        for (i = 0; i < LANES; i++)                                                        \
            vv[i] = v;                                                                     \
        for (i = a; i + LANES <= b; i += LANES)                                            \
            memcpy(dx + i, &vv, sizeof vv);                                                \
        memcpy(dx + b - LANES, &vv, sizeof vv);                                            \
    }                                                                                      \
}
#else
#define LA_BCAST1(SUF, T)                                                                  \
static void la_pool_bcast1_##SUF(T* dx, const T* g, const int64_t* off, int64_t lo,         \
                                 int64_t hi, int mode) {                                   \
    int64_t s, i, n;                                                                       \
    T v;                                                                                   \
    for (s = lo; s < hi; s++) {                                                            \
        n = off[s + 1] - off[s];                                                           \
        if (n == 0)                                                                        \
            continue;                                                                      \
        v = mode == 0 ? g[s] : (T)((double)g[s] / (mode == 1 ? (double)n : sqrt((double)n))); \
        for (i = off[s]; i < off[s + 1]; i++)                                              \
            dx[i] = v;                                                                     \
    }                                                                                      \
}
#endif
LA_BCAST1(f32, float)
LA_BCAST1(f64, double)

#endif
