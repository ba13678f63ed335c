"""Segmented reductions over LoD offsets: ``sequence_pool`` (sum, average, sqrt, max, min,
first, last, with or without the arg index).  The float vector kernels are C, in
``_ext/include/seq_pool.h``.

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
cimport numpy as cnp
from cython.parallel cimport prange
from libc.math cimport sqrt
from libc.string cimport memcpy

from _half cimport f2h, h2f
from _types cimport (floating_t, integral_t, numeric_t, offset_t, int64_t, uint8_t, uint16_t,
                     uint32_t, uint64_t)

cdef extern from "seq_pool.h" nogil:
    void la_pick_u16(uint16_t* out, const uint16_t* x, const offset_t* off, Py_ssize_t lo,
                     Py_ssize_t hi, uint16_t pad, int last) noexcept nogil
    void la_pick_u32(uint32_t* out, const uint32_t* x, const offset_t* off, Py_ssize_t lo,
                     Py_ssize_t hi, uint32_t pad, int last) noexcept nogil
    void la_pick_u64(uint64_t* out, const uint64_t* x, const offset_t* off, Py_ssize_t lo,
                     Py_ssize_t hi, uint64_t pad, int last) noexcept nogil
    void la_pick_bytes(uint8_t* out, const uint8_t* x, const offset_t* off, const uint8_t* pad,
                       Py_ssize_t lo, Py_ssize_t hi, size_t w, int last) noexcept nogil
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


cnp.import_array()


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
    cdef Py_ssize_t s, j, j0, w
    cdef offset_t a, b, i
    cdef const numeric_t* row
    cdef numeric_t* o
    cdef numeric_t v
    cdef numeric_t acc[64]
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
        # the running extremes in a local array, 64 columns at a time: the compiler cannot
        # tell ``out`` from ``x`` apart, and with them in ``out`` it loads and stores every one
        # each row instead of keeping them in vector registers
        for j0 in range(0, d, 64):
            w = min(64, d - j0)
            memcpy(acc, x + a * d + j0, w * sizeof(numeric_t))
            if is_min:
                for i in range(a + 1, b):
                    row = x + i * d + j0
                    for j in range(w):
                        v = row[j]
                        acc[j] = v if _better(v, acc[j], True) else acc[j]
            else:
                for i in range(a + 1, b):
                    row = x + i * d + j0
                    for j in range(w):
                        v = row[j]
                        acc[j] = v if _better(v, acc[j], False) else acc[j]
            memcpy(o + j0, acc, w * sizeof(numeric_t))


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
    """Sequences ``[lo, hi)``; ``rows`` is NULL only when there are no rows (every sequence
    empty).  Rows of 2, 4 and 8 bytes (every dtype's D == 1) in the typed loops of
    ``seq_pool.h`` where ``out`` and ``rows`` are aligned to that size (as arrays of those
    dtypes are), others by ``memcpy``; both prefetch the picked rows ahead."""
    cdef Py_ssize_t s
    cdef size_t mis = (<size_t>out | <size_t>rows) & <size_t>(width - 1)
    cdef uint16_t p16
    cdef uint32_t p32
    cdef uint64_t p64
    if rows == NULL:
        for s in range(lo, hi):
            memcpy(out + s * width, pad, <size_t>width)
        return
    if mis != 0 or width > 8:
        la_pick_bytes(out, rows, off, pad, lo, hi, <size_t>width, last)
    elif width == 4:
        memcpy(&p32, pad, 4)
        la_pick_u32(<uint32_t*>out, <const uint32_t*>rows, off, lo, hi, p32, last)
    elif width == 8:
        memcpy(&p64, pad, 8)
        la_pick_u64(<uint64_t*>out, <const uint64_t*>rows, off, lo, hi, p64, last)
    elif width == 2:
        memcpy(&p16, pad, 2)
        la_pick_u16(<uint16_t*>out, <const uint16_t*>rows, off, lo, hi, p16, last)
    else:
        la_pick_bytes(out, rows, off, pad, lo, hi, <size_t>width, last)


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


# --------------------------------------------------------------------------- small-call path
cdef inline bint _plain(cnp.ndarray a, int type_num) noexcept:
    """``a`` is a C-contiguous, aligned array of that element type."""
    return (cnp.PyArray_TYPE(a) == type_num and cnp.PyArray_IS_C_CONTIGUOUS(a)
            and cnp.PyArray_ISALIGNED(a))


def pool_float_serial(cnp.ndarray out not None, cnp.ndarray data not None,
                      cnp.ndarray offsets not None, cnp.ndarray pad not None, Py_ssize_t d,
                      int op):
    """``pool_sum_float`` (``op`` 0-2: its ``mode``) or ``pool_extreme`` (3 max, 4 min) on
    the calling thread, for float32 / float64, without typed memoryviews.

    Acquiring a memoryview costs ~1.5k instructions per argument, a fifth of a small
    operator call; this entry reads the data pointers instead and runs the same inner C
    routines (``_sum_float_range``, ``_extreme_range``).  ``out``, ``data`` and ``pad`` may
    have any shape whose size is ``n_seq * d``, ``n_rows * d`` and ``d`` (no reshape to
    2-D needed).  It checks, in C, what the memoryviews would: dtypes, C-contiguity,
    alignment, a writable ``out``, 1-D int64 ``offsets`` and those sizes.  Returns False,
    having done nothing, when an argument is not as those kernels take it (the caller then
    calls them, whose errors it keeps); True when pooled.
    """
    cdef int t = cnp.PyArray_TYPE(out)
    if (t != cnp.NPY_FLOAT and t != cnp.NPY_DOUBLE) or op < 0 or op > 4 or d <= 0:
        return False
    if not (_plain(out, t) and _plain(data, t) and _plain(pad, t)
            and _plain(offsets, cnp.NPY_INT64) and cnp.PyArray_NDIM(offsets) == 1
            and cnp.PyArray_ISWRITEABLE(out)):
        return False
    cdef cnp.npy_intp n = cnp.PyArray_DIMS(offsets)[0] - 1
    cdef cnp.npy_intp size = cnp.PyArray_SIZE(data)
    if (n < 0 or cnp.PyArray_SIZE(out) != n * d or cnp.PyArray_SIZE(pad) != d
            or size % d != 0):
        return False
    cdef offset_t n_rows = size // d
    if n == 0:
        return True
    cdef void* op_ = cnp.PyArray_DATA(out)
    cdef const void* xp = cnp.PyArray_DATA(data) if n_rows else NULL
    cdef const offset_t* of = <const offset_t*>cnp.PyArray_DATA(offsets)
    cdef const void* pp = cnp.PyArray_DATA(pad)
    with nogil:
        if t == cnp.NPY_FLOAT:
            if op < 3:
                _sum_float_range(<float*>op_, <const float*>xp, of, <const float*>pp, 0, n, d,
                                 n_rows, op)
            else:
                _extreme_range(<float*>op_, <const float*>xp, of, <const float*>pp, 0, n, d,
                               n_rows, op == 4)
        else:
            if op < 3:
                _sum_float_range(<double*>op_, <const double*>xp, of, <const double*>pp, 0, n,
                                 d, n_rows, op)
            else:
                _extreme_range(<double*>op_, <const double*>xp, of, <const double*>pp, 0, n,
                               d, n_rows, op == 4)
    return True
