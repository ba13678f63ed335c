"""``sequence_softmax``: a numerically stable softmax over each sequence of a flat array.

Every sequence is shifted by its maximum before ``exp`` (no overflow for large inputs; a NaN
anywhere in a sequence makes the whole sequence NaN, an empty one writes nothing).  The
kernels write into an output the Python layer allocated and trust their arguments; ``bounds``
(from ``chunk_bounds``) spreads chunks of sequences over ``num_threads`` threads with
``prange``, ``bounds=None`` runs on the calling thread.

float32 is bound by ``exp``: it uses a branch-free Cephes-style ``expf`` (about 1 ulp) that
the compiler vectorises, with an AVX2 clone picked at load time where GCC supports it.
float16 is computed in float32, integers in float64 (``libm``'s ``exp``).
"""
from cython.parallel cimport prange
from libc.math cimport exp

from _half cimport f2h, h2f
from _types cimport floating_t, integral_t, offset_t, uint16_t

cdef extern from *:
    """
    #include <math.h>
    #include <string.h>
    #include <stdint.h>

    #if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
    #define LA_CLONES __attribute__((target_clones("avx2", "default")))
    #else
    #define LA_CLONES
    #endif

    /* exp(x) for x <= 0 (and NaN -> NaN): Cody-Waite reduction by ln 2, Cephes' degree-5
     * polynomial, and 2**n applied in two halves so results down to the subnormals are
     * right.  No branches, no calls: the loop calling it vectorises. */
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

    #if defined(__GNUC__) || defined(__clang__)
    #if defined(__GNUC__) && !defined(__clang__)
    #pragma GCC diagnostic ignored "-Wpsabi"      /* 32-byte vectors in inlined helpers only */
    #endif
    typedef float la_vf __attribute__((vector_size(32)));
    typedef int32_t la_vi __attribute__((vector_size(32)));
    typedef uint32_t la_vu __attribute__((vector_size(32)));
    #define LA_LD(p) (__extension__({ la_vf v_; memcpy(&v_, (p), sizeof v_); v_; }))
    #define LA_ST(p, v) do { la_vf w_ = (v); memcpy((p), &w_, sizeof w_); } while (0)
    #define LA_SEL(m, a, b) ((la_vf)(((la_vi)(a) & (m)) | ((la_vi)(b) & ~(m))))
    /* NaN-sticky max: a NaN lane stays NaN */
    #define LA_MAXN(a, b) LA_SEL(((a) > (b)) | ((a) != (a)), a, b)
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
                    vm = LA_MAXN(LA_SEL(mk[k], v[k], ninf), vm);
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
    """
    float expf_nonpos "la_expf_nonpos"(float x) noexcept nogil
    void la_softmax_f32(float* out, const float* x, const offset_t* off, Py_ssize_t lo,
                        Py_ssize_t hi) noexcept nogil



def expf_values(const float[::1] x, float[::1] out):
    """Apply the kernels' ``exp`` to ``x <= 0`` (for accuracy tests)."""
    cdef Py_ssize_t i
    for i in range(x.shape[0]):
        out[i] = expf_nonpos(x[i])


cdef void _softmax_f64_range(double* out, const double* x, const offset_t* off,
                             Py_ssize_t lo, Py_ssize_t hi) noexcept nogil:
    cdef Py_ssize_t s, i
    cdef offset_t a, n
    cdef double m, total, v
    for s in range(lo, hi):
        a = off[s]
        n = off[s + 1] - a
        if n == 0:
            continue
        m = x[a]
        for i in range(a + 1, a + n):
            v = x[i]
            if v > m or v != v:
                m = v
                if v != v:
                    break
        total = 0.0
        for i in range(a, a + n):
            out[i] = exp(x[i] - m)
            total += out[i]
        for i in range(a, a + n):
            out[i] = out[i] / total


def softmax_float(floating_t[::1] out, const floating_t[::1] data,
                  const offset_t[::1] offsets, const offset_t[::1] bounds=None,
                  int num_threads=1):
    """Softmax of every sequence of a float32 / float64 array (rows = elements)."""
    cdef Py_ssize_t n = offsets.shape[0] - 1, c
    if n <= 0 or out.shape[0] == 0:
        return
    cdef floating_t* op = &out[0]
    cdef const floating_t* xp = &data[0]
    cdef const offset_t* of = &offsets[0]
    cdef const offset_t* bp
    if bounds is None:
        with nogil:
            if floating_t is float:
                la_softmax_f32(op, xp, of, 0, n)
            else:
                _softmax_f64_range(op, xp, of, 0, n)
        return
    bp = &bounds[0]
    with nogil:
        for c in prange(bounds.shape[0] - 1, num_threads=num_threads, schedule="dynamic"):
            if floating_t is float:
                la_softmax_f32(op, xp, of, bp[c], bp[c + 1])
            else:
                _softmax_f64_range(op, xp, of, bp[c], bp[c + 1])


cdef void _softmax_int_range(double* out, const integral_t* x, const offset_t* off,
                             Py_ssize_t lo, Py_ssize_t hi) noexcept nogil:
    cdef Py_ssize_t s, i
    cdef offset_t a, n
    cdef double m, total
    for s in range(lo, hi):
        a = off[s]
        n = off[s + 1] - a
        if n == 0:
            continue
        m = <double>x[a]
        for i in range(a + 1, a + n):
            if <double>x[i] > m:
                m = <double>x[i]
        total = 0.0
        for i in range(a, a + n):
            out[i] = exp(<double>x[i] - m)
            total += out[i]
        for i in range(a, a + n):
            out[i] = out[i] / total


def softmax_int(double[::1] out, const integral_t[::1] data, const offset_t[::1] offsets,
                const offset_t[::1] bounds=None, int num_threads=1):
    """Softmax of integer sequences, computed and returned in float64."""
    cdef Py_ssize_t n = offsets.shape[0] - 1, c
    if n <= 0 or out.shape[0] == 0:
        return
    cdef double* op = &out[0]
    cdef const integral_t* xp = &data[0]
    cdef const offset_t* of = &offsets[0]
    cdef const offset_t* bp
    if bounds is None:
        with nogil:
            _softmax_int_range(op, xp, of, 0, n)
        return
    bp = &bounds[0]
    with nogil:
        for c in prange(bounds.shape[0] - 1, num_threads=num_threads, schedule="dynamic"):
            _softmax_int_range(op, xp, of, bp[c], bp[c + 1])


cdef void _softmax_half_range(uint16_t* out, const uint16_t* x, const offset_t* off,
                              Py_ssize_t lo, Py_ssize_t hi) noexcept nogil:
    """float16 in float32: the exps are recomputed for the output (no scratch buffer)."""
    cdef Py_ssize_t s, i
    cdef offset_t a, n
    cdef float m, v
    cdef double total
    for s in range(lo, hi):
        a = off[s]
        n = off[s + 1] - a
        if n == 0:
            continue
        m = h2f(x[a])
        for i in range(a + 1, a + n):
            v = h2f(x[i])
            if v > m or v != v:
                m = v
                if v != v:
                    break
        total = 0.0
        for i in range(a, a + n):
            total += expf_nonpos(h2f(x[i]) - m)
        for i in range(a, a + n):
            out[i] = f2h(<float>(expf_nonpos(h2f(x[i]) - m) / total))


def softmax_half(uint16_t[::1] out, const uint16_t[::1] data, const offset_t[::1] offsets,
                 const offset_t[::1] bounds=None, int num_threads=1):
    """Softmax of float16 sequences (bit patterns in uint16), computed in float32."""
    cdef Py_ssize_t n = offsets.shape[0] - 1, c
    if n <= 0 or out.shape[0] == 0:
        return
    cdef uint16_t* op = &out[0]
    cdef const uint16_t* xp = &data[0]
    cdef const offset_t* of = &offsets[0]
    cdef const offset_t* bp
    if bounds is None:
        with nogil:
            _softmax_half_range(op, xp, of, 0, n)
        return
    bp = &bounds[0]
    with nogil:
        for c in prange(bounds.shape[0] - 1, num_threads=num_threads, schedule="dynamic"):
            _softmax_half_range(op, xp, of, bp[c], bp[c + 1])
