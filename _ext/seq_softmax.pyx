"""``sequence_softmax``: a numerically stable softmax over each sequence of a flat array.

Every sequence is shifted by its maximum before ``exp`` (no overflow for large inputs; a NaN
anywhere in a sequence makes the whole sequence NaN, an empty one writes nothing).  The
kernels write into an output the Python layer allocated and trust their arguments; ``bounds``
(from ``chunk_bounds``) spreads chunks of sequences over ``num_threads`` threads with
``prange``, ``bounds=None`` runs on the calling thread.

float32 is bound by ``exp``: it uses a branch-free Cephes-style ``expf`` (about 1 ulp) that
the compiler vectorises, with an AVX2 clone picked at load time where GCC supports it (C, in
``_ext/include/seq_softmax.h``).
float16 is computed in float32, integers in float64 (``libm``'s ``exp``).
"""
from cython.parallel cimport prange
from libc.math cimport exp

from _half cimport f2h, h2f
from _types cimport floating_t, integral_t, offset_t, uint16_t

cdef extern from "seq_softmax.h" nogil:
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
