"""Segmented reductions over LoD offsets: ``sequence_pool`` (sum, average, sqrt, max, min,
first, last, with or without the arg index) and ``sequence_topk_avg_pooling``.

Every kernel writes into outputs the Python layer allocated and trusts its arguments (checked
before the call).  ``offsets`` may be any row offsets (the last LoD level, or composed offsets
that address a whole outer level), so one pass pools either.  Arguments come as outputs,
inputs, then scalars; ``bounds`` (from ``chunk_bounds``) cuts the sequences into chunks of
about equal row count, spread over ``num_threads`` threads with ``prange``; ``bounds=None``
runs every sequence on the calling thread (small inputs, where OpenMP start-up dominates).

Speed: a D == 1 reduction keeps 8 independent accumulators (so the add or compare latency
chain does not bound short sequences) and ends each sequence with a branch-free masked block
instead of a tail loop whose exit would be mispredicted; D > 1 runs a contiguous inner loop
over the features that the compiler vectorises.  float32 sums accumulate in float64, integer
sums in (wrapping) 64-bit integers, float16 (passed as its uint16 bits) in float32.
"""
from cython.parallel cimport prange
from libc.math cimport NAN, sqrt
from libc.string cimport memcpy

from _half cimport f2h, h2f
from _types cimport (floating_t, integral_t, numeric_t, offset_t, int64_t, uint8_t, uint16_t,
                     uint32_t, uint64_t)

cdef extern from *:
    """
    #include <math.h>
    #include <string.h>
    #include <stdint.h>

    /* ---- D == 1 float reductions and D > 1 float32 sums: explicit vectors. ----
     * Geometric sequence lengths make every loop exit a branch mispredict, which costs more
     * than the adds.  A sequence of at most LIM rows (most of them) is therefore reduced as
     * LIM/W fixed vector blocks, masking the lanes past its end (reads stay inside the data),
     * with no data-dependent branch.  GCC/Clang vector extensions; on x86-64 Linux GCC also
     * builds an AVX2 clone chosen at load time (the build targets baseline x86-64). */
    #if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
    #define LA_CLONES __attribute__((target_clones("avx2", "default")))
    #else
    #define LA_CLONES
    #endif
    #if defined(__GNUC__) || defined(__clang__)
    #define LA_HAVE_VEC 1
    #else
    #define LA_HAVE_VEC 0
    #endif
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

    /* Top-m of a row for m <= 8: a branch-free insertion cascade keeps the m largest values
     * seen, in descending order, in registers (m compile-time slots, a max and a min per
     * slot and value).  Rows are short (about as long as m is small), so the branchy
     * "skip if below the smallest kept" test of a heap or insertion sort mispredicts about
     * half the time; this costs 2m cheap ops per value with no branch.  Slots start at
     * -inf; the first min(m, n) are the answer (a -inf value is kept as itself).  Returns
     * 1 if the row holds NaN (the caller then ignores best). */
    /* a > b ? a : b and a < b ? a : b.  GCC compiles a pair of such selects on one compare
     * into a branch, so on x86 they are spelled as maxss/minss, which are exactly these. */
    #if defined(__SSE2__)
    #include <emmintrin.h>
    #define LA_SS(OP, a, b) _mm_cvtss_f32(_mm_##OP##_ss(_mm_set_ss(a), _mm_set_ss(b)))
    #define LA_SD(OP, a, b) _mm_cvtsd_f64(_mm_##OP##_sd(_mm_set_sd(a), _mm_set_sd(b)))
    static inline float la_max_f32(float a, float b) { return LA_SS(max, a, b); }
    static inline float la_min_f32(float a, float b) { return LA_SS(min, a, b); }
    static inline double la_max_f64(double a, double b) { return LA_SD(max, a, b); }
    static inline double la_min_f64(double a, double b) { return LA_SD(min, a, b); }
    #else
    static inline float la_max_f32(float a, float b) { return a > b ? a : b; }
    static inline float la_min_f32(float a, float b) { return a < b ? a : b; }
    static inline double la_max_f64(double a, double b) { return a > b ? a : b; }
    static inline double la_min_f64(double a, double b) { return a < b ? a : b; }
    #endif
    #define LA_TOPK_CASCADE(SUF, T, M)                                                      \
    static inline int la_topk##M##_##SUF(const T* row, int64_t n, T* best) {                \
        T b[M];                                                                             \
        int nan = 0;                                                                        \
        for (int p = 0; p < M; p++) b[p] = -(T)INFINITY;                                    \
        for (int64_t i = 0; i < n; i++) {                                                   \
            T t = row[i];                                                                   \
            nan |= t != t;                                                                  \
            for (int p = 0; p < M; p++) {                                                   \
                T hi = la_max_##SUF(t, b[p]);                                               \
                t = la_min_##SUF(b[p], t);                                                  \
                b[p] = hi;                                                                  \
            }                                                                               \
        }                                                                                   \
        for (int p = 0; p < M; p++) best[p] = b[p];                                         \
        return nan;                                                                         \
    }
    #define LA_TOPK_ALL(SUF, T)                                                             \
    LA_TOPK_CASCADE(SUF, T, 1) LA_TOPK_CASCADE(SUF, T, 2) LA_TOPK_CASCADE(SUF, T, 3)        \
    LA_TOPK_CASCADE(SUF, T, 4) LA_TOPK_CASCADE(SUF, T, 5) LA_TOPK_CASCADE(SUF, T, 6)        \
    LA_TOPK_CASCADE(SUF, T, 7) LA_TOPK_CASCADE(SUF, T, 8)                                   \
    static int la_topk_##SUF(const T* row, int64_t n, int64_t m, T* best) {                 \
        switch (m) {                                                                        \
        case 1: return la_topk1_##SUF(row, n, best);                                        \
        case 2: return la_topk2_##SUF(row, n, best);                                        \
        case 3: return la_topk3_##SUF(row, n, best);                                        \
        case 4: return la_topk4_##SUF(row, n, best);                                        \
        case 5: return la_topk5_##SUF(row, n, best);                                        \
        case 6: return la_topk6_##SUF(row, n, best);                                        \
        case 7: return la_topk7_##SUF(row, n, best);                                        \
        default: return la_topk8_##SUF(row, n, best);                                       \
        }                                                                                   \
    }
    LA_TOPK_ALL(f32, float)
    LA_TOPK_ALL(f64, double)
    """
    void la_sum1_f32(float* out, const float* x, const offset_t* off, Py_ssize_t lo,
                     Py_ssize_t hi, offset_t n_rows, float pad, int mode) noexcept nogil
    void la_sum1_f64(double* out, const double* x, const offset_t* off, Py_ssize_t lo,
                     Py_ssize_t hi, offset_t n_rows, double pad, int mode) noexcept nogil
    void la_max1_f32(float* out, const float* x, const offset_t* off, Py_ssize_t lo,
                     Py_ssize_t hi, offset_t n_rows, float pad) noexcept nogil
    void la_min1_f32(float* out, const float* x, const offset_t* off, Py_ssize_t lo,
                     Py_ssize_t hi, offset_t n_rows, float pad) noexcept nogil
    void la_max1_f64(double* out, const double* x, const offset_t* off, Py_ssize_t lo,
                     Py_ssize_t hi, offset_t n_rows, double pad) noexcept nogil
    void la_min1_f64(double* out, const double* x, const offset_t* off, Py_ssize_t lo,
                     Py_ssize_t hi, offset_t n_rows, double pad) noexcept nogil
    void la_sumd_f32(float* out, const float* x, const offset_t* off, Py_ssize_t lo,
                     Py_ssize_t hi, Py_ssize_t d, const float* pad, int mode) noexcept nogil
    int la_topk_f32(const float* row, Py_ssize_t n, Py_ssize_t m, float* best) noexcept nogil
    int la_topk_f64(const double* row, Py_ssize_t n, Py_ssize_t m, double* best) noexcept nogil
    enum: TOPK_CASCADE_MAX "8"
    void la_sumd8x1(float* out, const float* x, const offset_t* off, Py_ssize_t lo,
                     Py_ssize_t hi, const float* pad, int mode) noexcept nogil
    void la_sumd8x2(float* out, const float* x, const offset_t* off, Py_ssize_t lo,
                     Py_ssize_t hi, const float* pad, int mode) noexcept nogil
    void la_sumd8x3(float* out, const float* x, const offset_t* off, Py_ssize_t lo,
                     Py_ssize_t hi, const float* pad, int mode) noexcept nogil
    void la_sumd8x4(float* out, const float* x, const offset_t* off, Py_ssize_t lo,
                     Py_ssize_t hi, const float* pad, int mode) noexcept nogil
    void la_sumd8x6(float* out, const float* x, const offset_t* off, Py_ssize_t lo,
                     Py_ssize_t hi, const float* pad, int mode) noexcept nogil
    void la_sumd8x8(float* out, const float* x, const offset_t* off, Py_ssize_t lo,
                     Py_ssize_t hi, const float* pad, int mode) noexcept nogil


cdef enum:
    FBLOCK = 256       # features accumulated at once on the stack (D > 1)
    # Pool modes of the sum family.
    MODE_SUM = 0
    MODE_MEAN = 1
    MODE_SQRT = 2


cdef inline double _scale_div(int mode, offset_t n) noexcept nogil:
    """The divisor of the sum family for a sequence of ``n > 0`` rows."""
    if mode == MODE_MEAN:
        return <double>n
    if mode == MODE_SQRT:
        return sqrt(<double>n)
    return 1.0


def half_to_float(const uint16_t[::1] bits, float[::1] out):
    """Decode float16 bit patterns (for tests of the conversion helpers)."""
    cdef Py_ssize_t i
    for i in range(bits.shape[0]):
        out[i] = h2f(bits[i])


def float_to_half(const float[::1] values, uint16_t[::1] out):
    """Encode floats as float16 bit patterns, rounding to nearest even."""
    cdef Py_ssize_t i
    for i in range(values.shape[0]):
        out[i] = f2h(values[i])


# --------------------------------------------------------------------------- sum family
cdef void _sum_f64_rows(double* out, const double* x, const offset_t* off, const double* pad,
                        Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t d, int mode) noexcept nogil:
    """float64 sums over D > 1 features, accumulated in the output row."""
    cdef double div
    cdef Py_ssize_t s, j
    cdef offset_t a, b, i
    cdef const double* row
    cdef double* o
    for s in range(lo, hi):
        a = off[s]
        b = off[s + 1]
        o = out + s * d
        if a == b:
            memcpy(o, pad, d * sizeof(double))
            continue
        div = _scale_div(mode, b - a)
        for j in range(d):
            o[j] = 0.0
        for i in range(a, b):
            row = x + i * d
            for j in range(d):
                o[j] += row[j]
        if mode != MODE_SUM:
            for j in range(d):
                o[j] /= div


cdef void _sum_float_range(floating_t* out, const floating_t* x, const offset_t* off,
                           const floating_t* pad, Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t d,
                           offset_t n_rows, int mode) noexcept nogil:
    if floating_t is float:
        if d == 1:
            la_sum1_f32(out, x, off, lo, hi, n_rows, pad[0], mode)
        elif d == 16:
            la_sumd8x2(out, x, off, lo, hi, pad, mode)
        elif d == 8:
            la_sumd8x1(out, x, off, lo, hi, pad, mode)
        elif d == 32:
            la_sumd8x4(out, x, off, lo, hi, pad, mode)
        elif d == 24:
            la_sumd8x3(out, x, off, lo, hi, pad, mode)
        elif d == 48:
            la_sumd8x6(out, x, off, lo, hi, pad, mode)
        elif d == 64:
            la_sumd8x8(out, x, off, lo, hi, pad, mode)
        else:
            la_sumd_f32(out, x, off, lo, hi, d, pad, mode)
    else:
        if d == 1:
            la_sum1_f64(out, x, off, lo, hi, n_rows, pad[0], mode)
        else:
            _sum_f64_rows(out, x, off, pad, lo, hi, d, mode)


def pool_sum_float(floating_t[:, ::1] out, const floating_t[:, ::1] data,
                   const offset_t[::1] offsets, const floating_t[::1] pad, int mode,
                   const offset_t[::1] bounds=None, int num_threads=1):
    """Sum (``mode`` 0), average (1) or sqrt-scaled sum (2) of float32/float64 sequences.

    ``out`` is ``(n_seq, D)``; an empty sequence gets ``pad`` (``D`` values).
    """
    cdef Py_ssize_t n = offsets.shape[0] - 1, d = out.shape[1], c
    if n <= 0 or d == 0:
        return
    cdef floating_t* op = &out[0, 0]
    cdef const floating_t* xp = &data[0, 0] if data.shape[0] else NULL
    cdef const offset_t* of = &offsets[0]
    cdef const floating_t* pp = &pad[0]
    cdef offset_t n_rows = data.shape[0]
    cdef const offset_t* bp
    if bounds is None:
        with nogil:
            _sum_float_range(op, xp, of, pp, 0, n, d, n_rows, mode)
        return
    bp = &bounds[0]
    with nogil:
        for c in prange(bounds.shape[0] - 1, num_threads=num_threads, schedule="dynamic"):
            _sum_float_range(op, xp, of, pp, bp[c], bp[c + 1], d, n_rows, mode)


cdef inline uint64_t _sum1_int(const integral_t* x, offset_t a, offset_t b,
                               offset_t n_rows) noexcept nogil:
    """Wrapping 64-bit sum of ``x[a:b]`` (D == 1), 8 accumulators, masked last block."""
    cdef uint64_t acc[8]
    cdef uint64_t v
    cdef offset_t i = a, rem
    cdef int j
    for j in range(8):
        acc[j] = 0
    while i + 8 <= b:
        for j in range(8):
            acc[j] += <uint64_t><int64_t>x[i + j]
        i += 8
    rem = b - i
    if i + 8 <= n_rows:
        for j in range(8):
            v = <uint64_t><int64_t>x[i + j]
            acc[j] += v if j < rem else 0
    else:
        for j in range(rem):
            acc[j] += <uint64_t><int64_t>x[i + j]
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))


cdef void _sum_int_range(integral_t* out, double* mean_out, const integral_t* x,
                         const offset_t* off, const integral_t* ipad, const double* dpad,
                         Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t d, offset_t n_rows,
                         int mode) noexcept nogil:
    """Integer sums into ``out`` (mode 0, cast back to the input type: wraps like C) or
    sums divided as float64 into ``mean_out`` (modes 1, 2)."""
    cdef uint64_t acc[FBLOCK]
    cdef uint64_t total
    cdef double div
    cdef Py_ssize_t s, j, j0, jb, w
    cdef offset_t a, b, i
    cdef const integral_t* row
    for s in range(lo, hi):
        a = off[s]
        b = off[s + 1]
        if a == b:
            if mode == MODE_SUM:
                memcpy(out + s * d, ipad, d * sizeof(integral_t))
            else:
                memcpy(mean_out + s * d, dpad, d * sizeof(double))
            continue
        div = _scale_div(mode, b - a)
        for jb in range((d + FBLOCK - 1) // FBLOCK):
            j0 = jb * FBLOCK
            w = min(FBLOCK, d - j0)
            if d == 1:
                acc[0] = _sum1_int(x, a, b, n_rows)
            else:
                for j in range(w):
                    acc[j] = 0
                for i in range(a, b):
                    row = x + i * d + j0
                    for j in range(w):
                        acc[j] += <uint64_t><int64_t>row[j]
            if mode == MODE_SUM:
                for j in range(w):
                    out[s * d + j0 + j] = <integral_t>acc[j]
            else:
                for j in range(w):
                    mean_out[s * d + j0 + j] = <double><int64_t>acc[j] / div


def pool_sum_int(integral_t[:, ::1] out, const integral_t[:, ::1] data,
                 const offset_t[::1] offsets, const integral_t[::1] pad,
                 const offset_t[::1] bounds=None, int num_threads=1):
    """Integer sums (accumulated in int64, cast back to the input dtype)."""
    cdef Py_ssize_t n = offsets.shape[0] - 1, d = out.shape[1], c
    if n <= 0 or d == 0:
        return
    cdef integral_t* op = &out[0, 0]
    cdef const integral_t* xp = &data[0, 0] if data.shape[0] else NULL
    cdef const offset_t* of = &offsets[0]
    cdef const integral_t* pp = &pad[0]
    cdef offset_t n_rows = data.shape[0]
    cdef const offset_t* bp
    if bounds is None:
        with nogil:
            _sum_int_range(op, NULL, xp, of, pp, NULL, 0, n, d, n_rows, MODE_SUM)
        return
    bp = &bounds[0]
    with nogil:
        for c in prange(bounds.shape[0] - 1, num_threads=num_threads, schedule="dynamic"):
            _sum_int_range(op, NULL, xp, of, pp, NULL, bp[c], bp[c + 1], d, n_rows, MODE_SUM)


def pool_mean_int(double[:, ::1] out, const integral_t[:, ::1] data,
                  const offset_t[::1] offsets, const double[::1] pad, int mode,
                  const offset_t[::1] bounds=None, int num_threads=1):
    """Average (``mode`` 1) or sqrt-scaled sum (2) of integer sequences, as float64."""
    cdef Py_ssize_t n = offsets.shape[0] - 1, d = out.shape[1], c
    if n <= 0 or d == 0:
        return
    cdef double* op = &out[0, 0]
    cdef const integral_t* xp = &data[0, 0] if data.shape[0] else NULL
    cdef const offset_t* of = &offsets[0]
    cdef const double* pp = &pad[0]
    cdef offset_t n_rows = data.shape[0]
    cdef const offset_t* bp
    if bounds is None:
        with nogil:
            _sum_int_range(<integral_t*>NULL, op, xp, of, <const integral_t*>NULL, pp, 0, n, d,
                           n_rows, mode)
        return
    bp = &bounds[0]
    with nogil:
        for c in prange(bounds.shape[0] - 1, num_threads=num_threads, schedule="dynamic"):
            _sum_int_range(<integral_t*>NULL, op, xp, of, <const integral_t*>NULL, pp,
                           bp[c], bp[c + 1], d, n_rows, mode)


cdef void _sum_half_range(uint16_t* out, const uint16_t* x, const offset_t* off,
                          const uint16_t* pad, Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t d,
                          int mode) noexcept nogil:
    cdef float acc[FBLOCK]
    cdef float div
    cdef Py_ssize_t s, j, j0, jb, w
    cdef offset_t a, b, i
    cdef const uint16_t* row
    for s in range(lo, hi):
        a = off[s]
        b = off[s + 1]
        if a == b:
            memcpy(out + s * d, pad, d * sizeof(uint16_t))
            continue
        div = <float>_scale_div(mode, b - a)
        for jb in range((d + FBLOCK - 1) // FBLOCK):
            j0 = jb * FBLOCK
            w = min(FBLOCK, d - j0)
            for j in range(w):
                acc[j] = 0.0
            for i in range(a, b):
                row = x + i * d + j0
                for j in range(w):
                    acc[j] += h2f(row[j])
            for j in range(w):
                out[s * d + j0 + j] = f2h(acc[j] / div)


def pool_sum_half(uint16_t[:, ::1] out, const uint16_t[:, ::1] data,
                  const offset_t[::1] offsets, const uint16_t[::1] pad, int mode,
                  const offset_t[::1] bounds=None, int num_threads=1):
    """The sum family for float16 (bit patterns in uint16), computed in float32."""
    cdef Py_ssize_t n = offsets.shape[0] - 1, d = out.shape[1], c
    if n <= 0 or d == 0:
        return
    cdef uint16_t* op = &out[0, 0]
    cdef const uint16_t* xp = &data[0, 0] if data.shape[0] else NULL
    cdef const offset_t* of = &offsets[0]
    cdef const uint16_t* pp = &pad[0]
    cdef const offset_t* bp
    if bounds is None:
        with nogil:
            _sum_half_range(op, xp, of, pp, 0, n, d, mode)
        return
    bp = &bounds[0]
    with nogil:
        for c in prange(bounds.shape[0] - 1, num_threads=num_threads, schedule="dynamic"):
            _sum_half_range(op, xp, of, pp, bp[c], bp[c + 1], d, mode)


# --------------------------------------------------------------------------- max / min
# ``better(v, m)``: v replaces m when it is larger (smaller for min) or NaN; once m is NaN
# nothing replaces it, so NaN propagates as in ``np.max``.  Ties keep the earlier value.

cdef inline bint _better(numeric_t v, numeric_t m, bint is_min) noexcept nogil:
    if numeric_t is float or numeric_t is double:
        return (v < m if is_min else v > m) or v != v
    else:
        return v < m if is_min else v > m


cdef inline numeric_t _extreme1(const numeric_t* x, offset_t a, offset_t b, offset_t n_rows,
                                bint is_min) noexcept nogil:
    """Max (min) of ``x[a:b]`` (D == 1, b > a): 8 running extremes, masked last block."""
    cdef numeric_t acc[8]
    cdef numeric_t v, m
    cdef offset_t i = a, rem
    cdef int j
    for j in range(8):
        acc[j] = x[a]
    if is_min:
        while i + 8 <= b:
            for j in range(8):
                v = x[i + j]
                acc[j] = v if _better(v, acc[j], True) else acc[j]
            i += 8
    else:
        while i + 8 <= b:
            for j in range(8):
                v = x[i + j]
                acc[j] = v if _better(v, acc[j], False) else acc[j]
            i += 8
    rem = b - i
    if i + 8 <= n_rows:
        for j in range(8):
            v = x[i + j]
            acc[j] = v if (j < rem) & _better(v, acc[j], is_min) else acc[j]
    else:
        for j in range(rem):
            v = x[i + j]
            acc[j] = v if _better(v, acc[j], is_min) else acc[j]
    m = acc[0]
    for j in range(1, 8):
        m = acc[j] if _better(acc[j], m, is_min) else m
    return m


cdef void _extreme_range(numeric_t* out, const numeric_t* x, const offset_t* off,
                         const numeric_t* pad, Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t d,
                         offset_t n_rows, bint is_min) noexcept nogil:
    cdef Py_ssize_t s, j
    cdef offset_t a, b, i
    cdef const numeric_t* row
    cdef numeric_t* o
    cdef numeric_t v
    if d == 1:
        if numeric_t is float:
            if is_min:
                la_min1_f32(out, x, off, lo, hi, n_rows, pad[0])
            else:
                la_max1_f32(out, x, off, lo, hi, n_rows, pad[0])
            return
        elif numeric_t is double:
            if is_min:
                la_min1_f64(out, x, off, lo, hi, n_rows, pad[0])
            else:
                la_max1_f64(out, x, off, lo, hi, n_rows, pad[0])
            return
    for s in range(lo, hi):
        a = off[s]
        b = off[s + 1]
        o = out + s * d
        if a == b:
            memcpy(o, pad, d * sizeof(numeric_t))
            continue
        if d == 1:
            o[0] = _extreme1(x, a, b, n_rows, is_min)
            continue
        memcpy(o, x + a * d, d * sizeof(numeric_t))
        if is_min:
            for i in range(a + 1, b):
                row = x + i * d
                for j in range(d):
                    v = row[j]
                    o[j] = v if _better(v, o[j], True) else o[j]
        else:
            for i in range(a + 1, b):
                row = x + i * d
                for j in range(d):
                    v = row[j]
                    o[j] = v if _better(v, o[j], False) else o[j]


def pool_extreme(numeric_t[:, ::1] out, const numeric_t[:, ::1] data,
                 const offset_t[::1] offsets, const numeric_t[::1] pad, bint is_min,
                 const offset_t[::1] bounds=None, int num_threads=1):
    """Element-wise max (``is_min`` False) or min of each sequence; NaN propagates."""
    cdef Py_ssize_t n = offsets.shape[0] - 1, d = out.shape[1], c
    if n <= 0 or d == 0:
        return
    cdef numeric_t* op = &out[0, 0]
    cdef const numeric_t* xp = &data[0, 0] if data.shape[0] else NULL
    cdef const offset_t* of = &offsets[0]
    cdef const numeric_t* pp = &pad[0]
    cdef offset_t n_rows = data.shape[0]
    cdef const offset_t* bp
    if bounds is None:
        with nogil:
            _extreme_range(op, xp, of, pp, 0, n, d, n_rows, is_min)
        return
    bp = &bounds[0]
    with nogil:
        for c in prange(bounds.shape[0] - 1, num_threads=num_threads, schedule="dynamic"):
            _extreme_range(op, xp, of, pp, bp[c], bp[c + 1], d, n_rows, is_min)


cdef void _arg_extreme_range(numeric_t* out, offset_t* index, const numeric_t* x,
                             const offset_t* off, const numeric_t* pad, Py_ssize_t lo,
                             Py_ssize_t hi, Py_ssize_t d, bint is_min) noexcept nogil:
    """Extremes with their absolute row numbers: ties keep the first row; the first NaN wins
    and then nothing replaces it."""
    cdef Py_ssize_t s, j
    cdef offset_t a, b, i
    cdef const numeric_t* row
    cdef numeric_t* o
    cdef offset_t* ix
    cdef numeric_t v
    cdef bint take
    for s in range(lo, hi):
        a = off[s]
        b = off[s + 1]
        o = out + s * d
        ix = index + s * d
        if a == b:
            memcpy(o, pad, d * sizeof(numeric_t))
            for j in range(d):
                ix[j] = -1
            continue
        memcpy(o, x + a * d, d * sizeof(numeric_t))
        for j in range(d):
            ix[j] = a
        for i in range(a + 1, b):
            row = x + i * d
            for j in range(d):
                v = row[j]
                if numeric_t is float or numeric_t is double:
                    take = (v < o[j] if is_min else v > o[j]) or (v != v and o[j] == o[j])
                else:
                    take = v < o[j] if is_min else v > o[j]
                if take:
                    o[j] = v
                    ix[j] = i


def pool_arg_extreme(numeric_t[:, ::1] out, offset_t[:, ::1] index,
                     const numeric_t[:, ::1] data, const offset_t[::1] offsets,
                     const numeric_t[::1] pad, bint is_min, const offset_t[::1] bounds=None,
                     int num_threads=1):
    """Max (min) and its absolute row number per element; -1 for an empty sequence."""
    cdef Py_ssize_t n = offsets.shape[0] - 1, d = out.shape[1], c
    if n <= 0 or d == 0:
        return
    cdef numeric_t* op = &out[0, 0]
    cdef offset_t* ip = &index[0, 0]
    cdef const numeric_t* xp = &data[0, 0] if data.shape[0] else NULL
    cdef const offset_t* of = &offsets[0]
    cdef const numeric_t* pp = &pad[0]
    cdef const offset_t* bp
    if bounds is None:
        with nogil:
            _arg_extreme_range(op, ip, xp, of, pp, 0, n, d, is_min)
        return
    bp = &bounds[0]
    with nogil:
        for c in prange(bounds.shape[0] - 1, num_threads=num_threads, schedule="dynamic"):
            _arg_extreme_range(op, ip, xp, of, pp, bp[c], bp[c + 1], d, is_min)


cdef void _extreme_half_range(uint16_t* out, offset_t* index, const uint16_t* x,
                              const offset_t* off, const uint16_t* pad, Py_ssize_t lo,
                              Py_ssize_t hi, Py_ssize_t d, bint is_min) noexcept nogil:
    """float16 max/min (compared in float32; the winning bits are copied, not re-rounded);
    ``index`` may be NULL."""
    cdef Py_ssize_t s, j
    cdef offset_t a, b, i
    cdef float v, m
    cdef uint16_t* o
    cdef bint take
    for s in range(lo, hi):
        a = off[s]
        b = off[s + 1]
        o = out + s * d
        if a == b:
            memcpy(o, pad, d * sizeof(uint16_t))
            if index != NULL:
                for j in range(d):
                    index[s * d + j] = -1
            continue
        memcpy(o, x + a * d, d * sizeof(uint16_t))
        if index != NULL:
            for j in range(d):
                index[s * d + j] = a
        for i in range(a + 1, b):
            for j in range(d):
                v = h2f(x[i * d + j])
                m = h2f(o[j])
                take = (v < m if is_min else v > m) or (v != v and m == m)
                if take:
                    o[j] = x[i * d + j]
                    if index != NULL:
                        index[s * d + j] = i


def pool_extreme_half(uint16_t[:, ::1] out, offset_t[:, ::1] index,
                      const uint16_t[:, ::1] data, const offset_t[::1] offsets,
                      const uint16_t[::1] pad, bint is_min, const offset_t[::1] bounds=None,
                      int num_threads=1):
    """float16 max/min (bit patterns in uint16); ``index`` may be None."""
    cdef Py_ssize_t n = offsets.shape[0] - 1, d = out.shape[1], c
    if n <= 0 or d == 0:
        return
    cdef uint16_t* op = &out[0, 0]
    cdef offset_t* ip = &index[0, 0] if index is not None else NULL
    cdef const uint16_t* xp = &data[0, 0] if data.shape[0] else NULL
    cdef const offset_t* of = &offsets[0]
    cdef const uint16_t* pp = &pad[0]
    cdef const offset_t* bp
    if bounds is None:
        with nogil:
            _extreme_half_range(op, ip, xp, of, pp, 0, n, d, is_min)
        return
    bp = &bounds[0]
    with nogil:
        for c in prange(bounds.shape[0] - 1, num_threads=num_threads, schedule="dynamic"):
            _extreme_half_range(op, ip, xp, of, pp, bp[c], bp[c + 1], d, is_min)


# --------------------------------------------------------------------------- first / last
cdef void _pick_range(uint8_t* out, const uint8_t* rows, const offset_t* off,
                      const uint8_t* pad, Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t width,
                      bint last) noexcept nogil:
    cdef Py_ssize_t s
    cdef offset_t a, b
    cdef const uint8_t* src
    for s in range(lo, hi):
        a = off[s]
        b = off[s + 1]
        src = pad if a == b else rows + (b - 1 if last else a) * width
        # Constant-size copies for the common narrow rows: no memcpy call per sequence.
        if width == 4:
            memcpy(out + s * 4, src, 4)
        elif width == 8:
            memcpy(out + s * 8, src, 8)
        else:
            memcpy(out + s * width, src, <size_t>width)


def pool_pick(uint8_t[:, ::1] out, const uint8_t[:, ::1] rows, const offset_t[::1] offsets,
              const uint8_t[::1] pad, bint last, const offset_t[::1] bounds=None,
              int num_threads=1):
    """Copy each sequence's first (``last`` False) or last row, ``pad`` for an empty one.

    Works on ``row_bytes`` views, so it serves every dtype.
    """
    cdef Py_ssize_t n = offsets.shape[0] - 1, width = out.shape[1], c
    if n <= 0 or width == 0:
        return
    cdef uint8_t* op = &out[0, 0]
    cdef const uint8_t* rp = &rows[0, 0] if rows.shape[0] else NULL
    cdef const offset_t* of = &offsets[0]
    cdef const uint8_t* pp = &pad[0]
    cdef const offset_t* bp
    if bounds is None:
        with nogil:
            _pick_range(op, rp, of, pp, 0, n, width, last)
        return
    bp = &bounds[0]
    with nogil:
        for c in prange(bounds.shape[0] - 1, num_threads=num_threads, schedule="dynamic"):
            _pick_range(op, rp, of, pp, bp[c], bp[c + 1], width, last)


# --------------------------------------------------------------------------- top-k average
cdef inline void _sift_down(double* heap, Py_ssize_t n, Py_ssize_t i) noexcept nogil:
    """Restore the min-heap property below ``i``."""
    cdef Py_ssize_t child
    cdef double v = heap[i]
    while True:
        child = 2 * i + 1
        if child >= n:
            break
        if child + 1 < n and heap[child + 1] < heap[child]:
            child += 1
        if heap[child] >= v:
            break
        heap[i] = heap[child]
        i = child
    heap[i] = v


cdef inline Py_ssize_t _top_values(const floating_t* row, Py_ssize_t n, Py_ssize_t m,
                                   double* heap, bint* has_nan) noexcept nogil:
    """Write the ``min(m, n)`` largest of ``row[:n]`` into ``heap``, largest first; return how
    many.  Ties do not matter (only sums are used)."""
    cdef Py_ssize_t size = 0, i, k
    cdef double v, t
    has_nan[0] = False
    for i in range(n):
        v = row[i]
        if v != v:
            has_nan[0] = True
            return 0
        if size < m:
            # Sift up into the min-heap.
            k = size
            size += 1
            while k > 0 and heap[(k - 1) // 2] > v:
                heap[k] = heap[(k - 1) // 2]
                k = (k - 1) // 2
            heap[k] = v
        elif v > heap[0]:
            heap[0] = v
            _sift_down(heap, size, 0)
    # Heap sort with a min-heap leaves the values in descending order.
    k = size
    while k > 1:
        t = heap[0]
        heap[0] = heap[k - 1]
        heap[k - 1] = t
        k -= 1
        _sift_down(heap, k, 0)
    return size


cdef void _topk_range(floating_t* out, const floating_t* x, const offset_t* in_off,
                      const offset_t* row_off, const offset_t* col_off, const offset_t* topks,
                      Py_ssize_t n_k, Py_ssize_t channels, Py_ssize_t m, double* heap,
                      Py_ssize_t lo, Py_ssize_t hi) noexcept nogil:
    cdef Py_ssize_t s, ch, r, q, got, n_rows, n_cols, width = channels * n_k
    cdef offset_t k
    cdef bint has_nan
    cdef const floating_t* seq
    cdef const floating_t* row
    cdef floating_t* o
    cdef floating_t best[TOPK_CASCADE_MAX]
    for s in range(lo, hi):
        n_rows = row_off[s + 1] - row_off[s]
        n_cols = col_off[s + 1] - col_off[s]
        seq = x + in_off[s]
        for ch in range(channels):
            for r in range(n_rows):
                row = seq + (ch * n_rows + r) * n_cols
                if m <= TOPK_CASCADE_MAX:
                    if floating_t is float:
                        has_nan = la_topk_f32(row, n_cols, m, best)
                    else:
                        has_nan = la_topk_f64(row, n_cols, m, best)
                    got = min(m, n_cols)
                    for q in range(got):
                        heap[q] = best[q]
                else:
                    got = _top_values(row, n_cols, m, heap, &has_nan)
                # Prefix sums in place: heap[i] = sum of the i + 1 largest.
                for q in range(1, got):
                    heap[q] += heap[q - 1]
                o = out + (row_off[s] + r) * width + ch * n_k
                for q in range(n_k):
                    k = topks[q]
                    if has_nan:
                        o[q] = <floating_t>NAN
                    elif got == 0:
                        o[q] = 0
                    else:
                        # Missing values (k beyond the row) count as 0; divide by k anyway.
                        o[q] = <floating_t>(heap[min(k, <offset_t>got) - 1] / <double>k)


def topk_avg_pool(floating_t[:, ::1] out, double[:, ::1] work, const floating_t[::1] data,
                  const offset_t[::1] in_off, const offset_t[::1] row_off,
                  const offset_t[::1] col_off, const offset_t[::1] topks, Py_ssize_t channels,
                  const offset_t[::1] bounds=None, int num_threads=1):
    """``sequence_topk_avg_pooling``: for every channel and row of each sequence's
    ``[channels, rows, cols]`` block, the mean of its ``k`` largest values for each ``k`` in
    ``topks`` (a row with NaN gives NaN).

    ``work`` is ``(n_chunks, m)`` scratch, one row per chunk (``m = min(max(topks),
    longest col)``, at least 1); ``out`` is ``(sum(rows), channels * len(topks))``.
    """
    cdef Py_ssize_t n = in_off.shape[0] - 1, c, m = work.shape[1]
    cdef Py_ssize_t n_k = topks.shape[0]
    if n <= 0 or out.shape[0] == 0 or out.shape[1] == 0:
        return
    cdef floating_t* op = &out[0, 0]
    cdef double* wp = &work[0, 0]
    cdef const floating_t* xp = &data[0] if data.shape[0] else NULL
    cdef const offset_t* io = &in_off[0]
    cdef const offset_t* ro = &row_off[0]
    cdef const offset_t* co = &col_off[0]
    cdef const offset_t* kp = &topks[0]
    cdef const offset_t* bp
    if bounds is None:
        with nogil:
            _topk_range(op, xp, io, ro, co, kp, n_k, channels, m, wp, 0, n)
        return
    bp = &bounds[0]
    with nogil:
        for c in prange(bounds.shape[0] - 1, num_threads=num_threads, schedule="dynamic"):
            _topk_range(op, xp, io, ro, co, kp, n_k, channels, m, wp + c * m, bp[c], bp[c + 1])
