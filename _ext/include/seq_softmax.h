/* seq_softmax's float32 kernel and its exp (cimported by _ext/seq_softmax.pyx).
 *
 * float32 softmax is bound by exp: a branch-free Cephes-style expf (about 1 ulp) that the
 * compiler vectorises, in an AVX2 clone where GCC supports it. */
#ifndef LODARROW_SEQ_SOFTMAX_H
#define LODARROW_SEQ_SOFTMAX_H
#include "lodarrow_simd.h"

typedef union { float f; int32_t i; uint32_t u; } la_bits;

/* exp(x) for x <= 0: Cody-Waite reduction by ln 2, Cephes' degree-5 polynomial (about
 * 1 ulp), and 2**n applied in two halves so results down to the subnormals are right.
 * x < -104 (exp below the smallest subnormal), -inf and NaNs with the sign bit set give
 * 0, other NaNs NaN; the clamp is an integer compare on the bits (a float compare would
 * stop GCC from vectorising), which orders negative floats by magnitude. */
static inline float la_expf_nonpos(float x) {
    la_bits c, big, s1, s2;
    float n, r, z, p;
    int32_t n1, half;
    c.f = x;
    c.u = c.u > 0xC2D00000u ? 0xC2D00000u : c.u;          /* bits of -104.0f */
    x = c.f;
    big.f = x * 1.44269504088896341f + 12582912.0f;      /* 1.5 * 2**23: round to int */
    n1 = big.i - 0x4B400000;
    n = big.f - 12582912.0f;
    r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    z = r * r;
    p = (((((1.9875691500e-4f * r + 1.3981999507e-3f) * r + 8.3334519073e-3f) * r
           + 4.1665795894e-2f) * r + 1.6666665459e-1f) * r + 5.0000001201e-1f) * z
        + r + 1.0f;
    half = n1 >> 1;
    s1.u = (uint32_t)(half + 127) << 23;
    s2.u = (uint32_t)(n1 - half + 127) << 23;
    return p * s1.f * s2.f;
}

#if LA_HAVE_VEC
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"      /* 32-byte vectors in inlined helpers only */
#endif
typedef float la_vf __attribute__((vector_size(32)));
typedef int32_t la_vi __attribute__((vector_size(32)));
typedef uint32_t la_vu __attribute__((vector_size(32)));
#define LA_LD(p) (__extension__({ la_vf v_; memcpy(&v_, (p), sizeof v_); v_; }))
#define LA_ST(p, v) do { la_vf w_ = (v); memcpy((p), &w_, sizeof w_); } while (0)
#define LA_VSEL(m, a, b) ((la_vf)(((la_vi)(a) & (m)) | ((la_vi)(b) & ~(m))))
/* NaN-sticky max: a NaN lane stays NaN */
#define LA_MAXN(a, b) LA_VSEL(((a) > (b)) | ((a) != (a)), a, b)
#if defined(__has_builtin)
#if __has_builtin(__builtin_shufflevector)
#define LA_HAVE_SHUFFLE 1
#endif
#endif
#ifdef LA_HAVE_SHUFFLE
/* horizontal max / sum, the result in every lane */
#define LA_HMAX(v) (__extension__({ la_vf h_ = (v);                                  \
    h_ = LA_MAXN(h_, __builtin_shufflevector(h_, h_, 4, 5, 6, 7, 0, 1, 2, 3));          \
    h_ = LA_MAXN(h_, __builtin_shufflevector(h_, h_, 2, 3, 0, 1, 6, 7, 4, 5));          \
    h_ = LA_MAXN(h_, __builtin_shufflevector(h_, h_, 1, 0, 3, 2, 5, 4, 7, 6)); h_; }))
#define LA_HSUM(v) (__extension__({ la_vf h_ = (v);                                  \
    h_ = h_ + __builtin_shufflevector(h_, h_, 4, 5, 6, 7, 0, 1, 2, 3);                  \
    h_ = h_ + __builtin_shufflevector(h_, h_, 2, 3, 0, 1, 6, 7, 4, 5);                  \
    h_ = h_ + __builtin_shufflevector(h_, h_, 1, 0, 3, 2, 5, 4, 7, 6); h_; }))
#else
#define LA_HMAX(v) (__extension__({ la_vf h_ = (v); float m_ = h_[0];                \
    for (int j_ = 1; j_ < 8; j_++) m_ = (h_[j_] > m_ || h_[j_] != h_[j_]) ? h_[j_] : m_; \
    (la_vf){0} + m_; }))
#define LA_HSUM(v) (__extension__({ la_vf h_ = (v);                                  \
    (la_vf){0} + (((h_[0] + h_[1]) + (h_[2] + h_[3])) + ((h_[4] + h_[5]) + (h_[6] + h_[7]))); }))
#endif

/* la_expf_nonpos on 8 lanes */
static inline __attribute__((always_inline)) la_vf la_vexp_nonpos(la_vf x) {
    la_vi low = (la_vi)((la_vu)x > 0xC2D00000u);
    la_vf big, n, r, z, p, s1, s2;
    la_vi n1, half;
    x = (la_vf)(((la_vi)x & ~low) | (((la_vi){0} + (int32_t)0xC2D00000u) & low));
    big = x * 1.44269504088896341f + 12582912.0f;
    n1 = (la_vi)big - 0x4B400000;
    n = big - 12582912.0f;
    r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    z = r * r;
    p = (((((1.9875691500e-4f * r + 1.3981999507e-3f) * r + 8.3334519073e-3f) * r
           + 4.1665795894e-2f) * r + 1.6666665459e-1f) * r + 5.0000001201e-1f) * z
        + r + 1.0f;
    half = n1 >> 1;
    s1 = (la_vf)((la_vu)(half + 127) << 23);
    s2 = (la_vf)((la_vu)(n1 - half + 127) << 23);
    return p * s1 * s2;
}

/* Softmax of each sequence in [lo, hi).  No NaN / inf tests: a NaN makes the maximum
 * NaN, and a NaN or infinite maximum makes every shifted value NaN or -inf, so the sum
 * is NaN or 0 and every quotient NaN.  A sequence of at most 32 values (most of them) is
 * done in four masked 8-lane blocks with no data-dependent branch; its full-width
 * stores spill into the next sequences' rows, which are written afterwards by this same
 * call (spills never pass `end`, the chunk's last row). */
LA_CLONES static void la_softmax_f32(float* out, const float* x, const int64_t* off,
                                     int64_t lo, int64_t hi) {
    const int64_t end = off[hi];
    const la_vi lane = {0, 1, 2, 3, 4, 5, 6, 7};
    const la_vf ninf = (la_vf){0} - INFINITY;
    for (int64_t s = lo; s < hi; s++) {
        int64_t a = off[s], n = off[s + 1] - a, i;
        const float* xs = x + a;
        float* o = out + a;
        if (n <= 32 && a + 32 <= end) {
            la_vi rest = lane - (int32_t)n, mk[4];
            la_vf v[4], vm = ninf, m, acc = {0}, d;
            for (int k = 0; k < 4; k++) {
                v[k] = LA_LD(xs + 8 * k);
                mk[k] = rest + 8 * k < 0;
                vm = LA_MAXN(LA_VSEL(mk[k], v[k], ninf), vm);
            }
            m = LA_HMAX(vm);
            for (int k = 0; k < 4; k++) {
                v[k] = (la_vf)((la_vi)la_vexp_nonpos(v[k] - m) & mk[k]);
                acc += v[k];
            }
            d = LA_HSUM(acc);
            for (int k = 0; k < 4; k++) LA_ST(o + 8 * k, v[k] / d);
            continue;
        }
        if (n == 0) continue;
        {
            la_vf vm = ninf, acc = {0};
            float m, lane_sum, d;
            double total = 0.0;
            int blocks = 0;
            for (i = 0; i + 8 <= n; i += 8) vm = LA_MAXN(LA_LD(xs + i), vm);
            m = LA_HMAX(vm)[0];
            for (; i < n; i++) m = (xs[i] > m || xs[i] != xs[i]) ? xs[i] : m;
            for (i = 0; i + 8 <= n; i += 8) {
                la_vf e = la_vexp_nonpos(LA_LD(xs + i) - m);
                LA_ST(o + i, e);
                acc += e;
                if (++blocks == 32) {         /* float lanes add at most 32 values */
                    total += LA_HSUM(acc)[0];
                    acc = (la_vf){0};
                    blocks = 0;
                }
            }
            lane_sum = LA_HSUM(acc)[0];
            for (; i < n; i++) {
                o[i] = la_expf_nonpos(xs[i] - m);
                lane_sum += o[i];
            }
            d = (float)(total + lane_sum);
            for (i = 0; i + 8 <= n; i += 8) LA_ST(o + i, LA_LD(o + i) / d);
            for (; i < n; i++) o[i] = o[i] / d;
        }
    }
}
#else
LA_CLONES static void la_softmax_f32(float* out, const float* x, const int64_t* off,
                                     int64_t lo, int64_t hi) {
    for (int64_t s = lo; s < hi; s++) {
        int64_t a = off[s], n = off[s + 1] - a, i;
        float m;
        double total = 0.0;
        if (n == 0) continue;
        m = x[a];
        for (i = 0; i < n; i++) m = (x[a + i] > m || x[a + i] != x[a + i]) ? x[a + i] : m;
        for (i = 0; i < n; i++) { out[a + i] = la_expf_nonpos(x[a + i] - m); total += out[a + i]; }
        for (i = 0; i < n; i++) out[a + i] = out[a + i] / (float)total;
    }
}
#endif

#endif
