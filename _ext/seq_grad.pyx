"""Backward kernels of the differentiable sequence operators (docs/gradients.md): the pooling
family, ``sequence_softmax``, the block form of ``sequence_expand``, ``sequence_slice``,
``sequence_conv``'s input and padding gradients and ``sequence_topk_avg_pooling``.

Like the forward kernels, each writes into outputs the Python layer allocated (every element
of them), trusts its arguments (checked before the call) and takes outputs, inputs, then
scalars; ``bounds`` (from ``chunk_bounds``) cuts the sequences into chunks spread over
``num_threads`` threads with ``prange``; ``bounds=None`` runs on the calling thread.

Deterministic: every output element is computed by one thread, from a fixed order of terms,
so the bits do not depend on the thread count (no atomics, no reductions split across
threads).  Sums of float32 terms accumulate in float64 (as the forward's sums do); float16
reaches these kernels as float32 (converted by the launcher).
"""
cimport numpy as cnp
from cython.parallel cimport prange
from libc.math cimport sqrt
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset

from _types cimport floating_t, offset_t, int64_t, uint8_t

cnp.import_array()


cdef extern from "lodarrow_stream.h" nogil:
    # Streaming (non-temporal) stores for outputs larger than the cache (see the header).
    ctypedef struct la_stream_t:
        pass
    bint la_stream_worth(size_t out_bytes)
    void la_stream_begin(la_stream_t* s, void* dst)
    void la_stream_put(la_stream_t* s, const void* src, size_t n, const void* src_limit)
    void la_stream_repeat(la_stream_t* s, const void* row, size_t w, size_t count)
    void la_stream_end(la_stream_t* s)


cdef extern from "seq_pool.h" nogil:
    # D == 1: each sequence's value as whole vectors (the header says why)
    void la_pool_bcast1_f32(float* dx, const float* g, const offset_t* off, Py_ssize_t lo,
                            Py_ssize_t hi, int mode) noexcept nogil
    void la_pool_bcast1_f64(double* dx, const double* g, const offset_t* off, Py_ssize_t lo,
                            Py_ssize_t hi, int mode) noexcept nogil


cdef enum:
    # The widest row (elements) the pool-sum backward streams: its scaled row is kept on
    # the stack (wider rows are stored plainly).
    STREAM_ROW_ITEMS = 128


cdef enum:
    # Pool modes of the sum family (as ``seq_pool.pyx``'s).
    MODE_SUM = 0
    MODE_MEAN = 1
    MODE_SQRT = 2


# --------------------------------------------------------------------------- pooling
cdef inline const floating_t* _grad_row(const floating_t* g, offset_t n, Py_ssize_t d,
                                       int mode, floating_t* scaled) noexcept nogil:
    """The gradient of each row of a sequence of ``n`` rows: ``g`` itself (sum), else
    ``g / n`` (average) or ``g / sqrt(n)`` (sqrt), written into ``scaled``."""
    cdef Py_ssize_t j
    cdef double div
    if mode == MODE_SUM:
        return g
    div = <double>n if mode == MODE_MEAN else sqrt(<double>n)
    for j in range(d):
        scaled[j] = <floating_t>(<double>g[j] / div)
    return scaled


cdef void _pool_sum_range(floating_t* dx, const floating_t* dout, const offset_t* off,
                          Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t d, int mode,
                          bint stream) noexcept nogil:
    """Sequences ``[lo, hi)``, whose rows are one contiguous range of ``dx``.  ``stream``:
    that range goes out through streaming stores (``lodarrow_stream.h``), each row once;
    else plain stores."""
    cdef Py_ssize_t s, j
    cdef offset_t a, b, i
    cdef const floating_t* g
    cdef floating_t* row
    cdef la_stream_t st
    cdef floating_t scaled[STREAM_ROW_ITEMS]
    if d == 1 and not stream:
        if floating_t is float:
            la_pool_bcast1_f32(dx, dout, off, lo, hi, mode)
        else:
            la_pool_bcast1_f64(dx, dout, off, lo, hi, mode)
        return
    if stream:
        la_stream_begin(&st, dx + off[lo] * d)
    for s in range(lo, hi):
        a = off[s]
        b = off[s + 1]
        if a == b:
            continue
        if stream:
            g = _grad_row(dout + s * d, b - a, d, mode, scaled)
            la_stream_repeat(&st, g, <size_t>d * sizeof(floating_t), <size_t>(b - a))
            continue
        row = dx + a * d
        g = _grad_row(dout + s * d, b - a, d, mode, row)
        if g != row:
            for j in range(d):
                row[j] = g[j]
        if d == 1:  # a store a row: a memcpy call of one element costs several times that
            for i in range(a + 1, b):
                dx[i] = row[0]
        else:
            for i in range(a + 1, b):
                memcpy(dx + i * d, row, d * sizeof(floating_t))
    if stream:
        la_stream_end(&st)


cdef inline bint _pool_stream(Py_ssize_t n_rows, Py_ssize_t d, size_t item) noexcept nogil:
    """Whether the pool-sum backward streams its output: large (``la_stream_worth``) and
    rows of 16 bytes or more (narrower rows change sequence every few bytes, where the
    stream's bookkeeping costs more than the reads for ownership it saves) that fit
    ``scaled``."""
    cdef size_t w = <size_t>d * item
    return w >= 16 and d <= STREAM_ROW_ITEMS and la_stream_worth(<size_t>n_rows * w)


def pool_sum_backward(floating_t[:, ::1] dx, const floating_t[:, ::1] dout,
                      const offset_t[::1] offsets, int mode, const offset_t[::1] bounds=None,
                      int num_threads=1):
    """Sum (``mode`` 0), average (1) or sqrt (2) pooling backward: row ``i`` of sequence
    ``s`` gets ``dout[s]`` (divided by ``L`` or ``sqrt(L)``).

    ``dx`` is ``(N, D)`` with ``N == offsets[-1]``; ``dout`` is ``(n_seq, D)``.
    """
    cdef Py_ssize_t n = offsets.shape[0] - 1, d = dx.shape[1], c
    if n <= 0 or d == 0 or dx.shape[0] == 0:
        return
    cdef floating_t* xp = &dx[0, 0]
    cdef const floating_t* gp = &dout[0, 0]
    cdef const offset_t* of = &offsets[0]
    cdef const offset_t* bp
    cdef bint stream = _pool_stream(dx.shape[0], d, sizeof(floating_t))
    if bounds is None:
        with nogil:
            _pool_sum_range(xp, gp, of, 0, n, d, mode, stream)
        return
    bp = &bounds[0]
    with nogil:
        for c in prange(bounds.shape[0] - 1, num_threads=num_threads, schedule="dynamic"):
            _pool_sum_range(xp, gp, of, bp[c], bp[c + 1], d, mode, stream)


cdef inline bint _plain(cnp.ndarray a, int type_num) noexcept:
    """``a`` is a C-contiguous, aligned array of that element type."""
    return (cnp.PyArray_TYPE(a) == type_num and cnp.PyArray_IS_C_CONTIGUOUS(a)
            and cnp.PyArray_ISALIGNED(a))


def pool_sum_backward_serial(cnp.ndarray dx not None, cnp.ndarray dout not None,
                             cnp.ndarray offsets not None, int mode):
    """``pool_sum_backward`` on the calling thread, for float32 / float64, without typed
    memoryviews (the small-call path, as ``seq_pool.pool_float_serial``): the same inner
    routine (``_pool_sum_range``) on the arrays' data pointers.

    ``dx`` and ``dout`` may have any shapes of ``offsets[-1] * D`` and ``n_seq * D``
    elements (``D`` from ``dout``; no reshape to 2-D needed).  Checks in C what the
    memoryviews would: one dtype, C-contiguity, alignment, a writable ``dx``, 1-D int64
    ``offsets`` and those sizes.  Returns False, having done nothing, when an argument is not
    as the kernel takes it (the caller then calls ``pool_sum_backward``, whose errors it
    keeps); True when written.
    """
    cdef int t = cnp.PyArray_TYPE(dx)
    if (t != cnp.NPY_FLOAT and t != cnp.NPY_DOUBLE) or mode < MODE_SUM or mode > MODE_SQRT:
        return False
    if not (_plain(dx, t) and _plain(dout, t) and _plain(offsets, cnp.NPY_INT64)
            and cnp.PyArray_NDIM(offsets) == 1 and cnp.PyArray_ISWRITEABLE(dx)):
        return False
    cdef cnp.npy_intp n = cnp.PyArray_DIMS(offsets)[0] - 1
    cdef cnp.npy_intp size = cnp.PyArray_SIZE(dout)
    if n <= 0 or size == 0 or size % n != 0:
        return False
    cdef cnp.npy_intp d = size // n
    cdef const offset_t* of = <const offset_t*>cnp.PyArray_DATA(offsets)
    if of[n] < 0 or of[n] * d != cnp.PyArray_SIZE(dx):
        return False
    cdef void* xp = cnp.PyArray_DATA(dx)
    cdef const void* gp = cnp.PyArray_DATA(dout)
    cdef size_t item = 4 if t == cnp.NPY_FLOAT else 8
    cdef bint stream = _pool_stream(of[n], d, item)
    with nogil:
        if t == cnp.NPY_FLOAT:
            _pool_sum_range(<float*>xp, <const float*>gp, of, 0, n, d, mode, stream)
        else:
            _pool_sum_range(<double*>xp, <const double*>gp, of, 0, n, d, mode, stream)
    return True


cdef void _pool_index_range(floating_t* dx, const floating_t* dout, const int64_t* index,
                            const offset_t* off, Py_ssize_t lo, Py_ssize_t hi,
                            Py_ssize_t d) noexcept nogil:
    cdef Py_ssize_t s, j
    cdef offset_t a, b
    cdef int64_t r
    for s in range(lo, hi):
        a = off[s]
        b = off[s + 1]
        if a == b:
            continue
        memset(dx + a * d, 0, <size_t>(b - a) * d * sizeof(floating_t))
        for j in range(d):
            r = index[s * d + j]
            if r >= 0:
                dx[r * d + j] = dout[s * d + j]


def pool_index_backward(floating_t[:, ::1] dx, const floating_t[:, ::1] dout,
                        const int64_t[:, ::1] index, const offset_t[::1] offsets,
                        const offset_t[::1] bounds=None, int num_threads=1):
    """Max / min pooling backward: ``dout[s, j]`` to ``dx[index[s, j], j]`` (the forward's
    winning row, inside sequence ``s``), zeros elsewhere; ``index`` -1 (an empty sequence)
    gives nothing."""
    cdef Py_ssize_t n = offsets.shape[0] - 1, d = dx.shape[1], c
    if n <= 0 or d == 0 or dx.shape[0] == 0:
        return
    cdef floating_t* xp = &dx[0, 0]
    cdef const floating_t* gp = &dout[0, 0]
    cdef const int64_t* ip = &index[0, 0]
    cdef const offset_t* of = &offsets[0]
    cdef const offset_t* bp
    if bounds is None:
        with nogil:
            _pool_index_range(xp, gp, ip, of, 0, n, d)
        return
    bp = &bounds[0]
    with nogil:
        for c in prange(bounds.shape[0] - 1, num_threads=num_threads, schedule="dynamic"):
            _pool_index_range(xp, gp, ip, of, bp[c], bp[c + 1], d)


cdef enum:
    # The first / last backward zeroes its rows this many bytes at a time, each block just
    # before the picked rows inside it are written: they are then still in L1, so the output
    # is written once, front to back, not zeroed and then revisited row by row.
    PICK_BLOCK_BYTES = 16384


cdef inline void _put_row(uint8_t* dst, const uint8_t* src, Py_ssize_t w) noexcept nogil:
    """One row of ``w`` bytes: a fixed-size copy (no call) for the D == 1 widths."""
    if w == 4:
        memcpy(dst, src, 4)
    elif w == 8:
        memcpy(dst, src, 8)
    elif w == 2:
        memcpy(dst, src, 2)
    else:
        memcpy(dst, src, <size_t>w)


cdef void _pool_pick_range(uint8_t* dx, const uint8_t* dout, const offset_t* off,
                           Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t w, bint last,
                           bint zeroed) noexcept nogil:
    """Sequences ``[lo, hi)``, whose rows are one contiguous range of ``dx``: zeros but the
    picked row of each non-empty sequence, which gets ``dout[s]``.  ``zeroed``: the range is
    zero already; only the picked rows are written."""
    cdef Py_ssize_t s = lo
    cdef offset_t a, b, r, r0 = off[lo], r1, end = off[hi]
    cdef offset_t block = PICK_BLOCK_BYTES // w if w < PICK_BLOCK_BYTES else 1
    if zeroed:
        for s in range(lo, hi):
            a = off[s]
            b = off[s + 1]
            if a != b:
                _put_row(dx + ((b - 1) if last else a) * w, dout + s * w, w)
        return
    while r0 < end:
        r1 = r0 + block if end - r0 > block else end
        memset(dx + r0 * w, 0, <size_t>(r1 - r0) * w)
        while s < hi:
            a = off[s]
            b = off[s + 1]
            if a != b:
                r = (b - 1) if last else a
                if r >= r1:
                    break
                _put_row(dx + r * w, dout + s * w, w)
            s += 1
        r0 = r1


def pool_pick_backward(uint8_t[:, ::1] dx, const uint8_t[:, ::1] dout,
                       const offset_t[::1] offsets, bint last,
                       const offset_t[::1] bounds=None, int num_threads=1, bint zeroed=False):
    """First / last pooling backward on rows of bytes: ``dout[s]`` to the first (last) row of
    sequence ``s``, zero bytes (0.0 in every float format) elsewhere, in one pass over ``dx``
    (a block of zeros, then the picked rows inside it, while cached); ``zeroed``: ``dx`` is
    zero already, only the picked rows are written."""
    cdef Py_ssize_t n = offsets.shape[0] - 1, w = dx.shape[1], c
    if n <= 0 or w == 0 or dx.shape[0] == 0:
        return
    cdef uint8_t* xp = &dx[0, 0]
    cdef const uint8_t* gp = &dout[0, 0]
    cdef const offset_t* of = &offsets[0]
    cdef const offset_t* bp
    if bounds is None:
        with nogil:
            _pool_pick_range(xp, gp, of, 0, n, w, last, zeroed)
        return
    bp = &bounds[0]
    with nogil:
        for c in prange(bounds.shape[0] - 1, num_threads=num_threads, schedule="dynamic"):
            _pool_pick_range(xp, gp, of, bp[c], bp[c + 1], w, last, zeroed)


# --------------------------------------------------------------------------- slice
cdef inline void _zero_block(uint8_t* dst, size_t nbytes, const uint8_t* dst_limit) noexcept nogil:
    """Zero a short block in 32-byte pieces where writing past its end is harmless (up to
    ``dst_limit``: bytes this thread writes later), else one ``memset``."""
    cdef size_t b
    cdef size_t padded = (nbytes + 31) & ~(<size_t>31)
    if nbytes == 0:
        return
    if nbytes <= 256 and dst + padded <= dst_limit:
        b = 0
        while b < padded:
            memset(dst + b, 0, 32)
            b = b + 32
    else:
        memset(dst, 0, nbytes)


cdef inline void _copy_block(uint8_t* dst, const uint8_t* src, size_t nbytes,
                             const uint8_t* dst_limit, const uint8_t* src_limit) noexcept nogil:
    """Copy a short block in 32-byte pieces where running past its end is harmless (as
    ``seq_gather``'s): reads stay before ``src_limit``, writes before ``dst_limit``."""
    cdef size_t b
    cdef size_t padded = (nbytes + 31) & ~(<size_t>31)
    if nbytes == 0:
        return
    if nbytes <= 256 and dst + padded <= dst_limit and src + padded <= src_limit:
        b = 0
        while b < padded:
            memcpy(dst + b, src + b, 32)
            b = b + 32
    else:
        memcpy(dst, src, nbytes)


cdef void _slice_range(uint8_t* dx, const uint8_t* dout, const offset_t* start,
                       const offset_t* out_off, Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t n,
                       offset_t n_rows, Py_ssize_t w, const uint8_t* src_limit) noexcept nogil:
    """Sequences ``[lo, hi)``: the zero rows before each slice (from the previous slice's
    end), the slice, and for the last chunk the zero rows after the last slice.

    The chunk's rows are written in order, each range from its first byte, so a short
    range may spill up to 31 bytes into the next (rewritten right after by its owner): the
    last writer of every byte is its own range.  Nothing spills past the chunk's end."""
    cdef Py_ssize_t s
    cdef offset_t gap = 0 if lo == 0 else start[lo - 1] + (out_off[lo] - out_off[lo - 1])
    cdef offset_t last = n_rows if hi == n else start[hi - 1] + (out_off[hi] - out_off[hi - 1])
    cdef const uint8_t* dst_limit = dx + last * w
    cdef offset_t a, length
    for s in range(lo, hi):
        a = start[s]
        length = out_off[s + 1] - out_off[s]
        _zero_block(dx + gap * w, <size_t>(a - gap) * w, dst_limit)
        _copy_block(dx + a * w, dout + out_off[s] * w, <size_t>length * w, dst_limit, src_limit)
        gap = a + length
    if last > gap:
        _zero_block(dx + gap * w, <size_t>(last - gap) * w, dst_limit)


def slice_backward(uint8_t[:, ::1] dx, const uint8_t[:, ::1] dout, const offset_t[::1] start,
                   const offset_t[::1] out_offsets, const offset_t[::1] bounds=None,
                   int num_threads=1):
    """``sequence_slice`` backward on rows as bytes (every dtype): ``dout``'s rows
    ``[out_offsets[i], out_offsets[i + 1])`` to ``dx``'s rows from ``start[i]``, zeros (all
    bits 0) elsewhere; every byte of ``dx`` written once.

    The slices must lie in order without overlap inside ``dx`` (a slice of each sequence of
    a LoD, in sequence order): checked first, in one pass (``ValueError``), so a wrong
    argument is never a write out of bounds.  ``bounds`` chunks the sequences.
    """
    cdef Py_ssize_t n = start.shape[0], c, s, w = dx.shape[1]
    cdef offset_t n_rows = dx.shape[0], end = 0
    if out_offsets.shape[0] != n + 1:
        raise ValueError(f"slice_backward: out_offsets has {out_offsets.shape[0]} entries "
                         f"for {n} slices (expected {n + 1})")
    if dout.shape[1] != w:
        raise ValueError(f"slice_backward: rows of {dout.shape[1]} bytes into rows of {w}")
    cdef const offset_t* sp = &start[0] if n else NULL
    cdef const offset_t* op = &out_offsets[0]
    if op[0] != 0 or op[n] != dout.shape[0]:
        raise ValueError(f"slice_backward: out_offsets must run from 0 to dout's "
                         f"{dout.shape[0]} rows")
    for s in range(n):
        if sp[s] < end or op[s + 1] < op[s] or sp[s] + (op[s + 1] - op[s]) > n_rows:
            raise ValueError(f"slice_backward: slice {s} (rows {sp[s]} + "
                             f"{op[s + 1] - op[s]}) is out of order or outside the "
                             f"{n_rows} rows")
        end = sp[s] + (op[s + 1] - op[s])
    if n_rows == 0 or w == 0:
        return
    cdef uint8_t* xp = &dx[0, 0]
    cdef const uint8_t* gp = &dout[0, 0] if dout.shape[0] else NULL
    cdef const uint8_t* src_limit = gp + dout.shape[0] * w if dout.shape[0] else NULL
    cdef const offset_t* bp
    if n == 0:
        memset(xp, 0, <size_t>n_rows * w)
        return
    if bounds is None:
        with nogil:
            _slice_range(xp, gp, sp, op, 0, n, n, n_rows, w, src_limit)
        return
    bp = &bounds[0]
    with nogil:
        for c in prange(bounds.shape[0] - 1, num_threads=num_threads, schedule="dynamic"):
            _slice_range(xp, gp, sp, op, bp[c], bp[c + 1], n, n_rows, w, src_limit)


# --------------------------------------------------------------------------- scatter
cdef void _scatter_gather_range(floating_t* out, const floating_t* g, const int64_t* ids,
                                const offset_t* off, Py_ssize_t lo, Py_ssize_t hi,
                                Py_ssize_t w) noexcept nogil:
    cdef Py_ssize_t s
    cdef offset_t p
    cdef const floating_t* row
    for s in range(lo, hi):
        row = g + s * w
        for p in range(off[s], off[s + 1]):
            out[p] = row[ids[p]]


def scatter_backward(floating_t[::1] dupd, const floating_t[:, ::1] dout,
                     const int64_t[::1] ids, const offset_t[::1] offsets,
                     const offset_t[::1] bounds=None, int num_threads=1):
    """``sequence_scatter``'s updates gradient: ``dupd[p] = dout[s, ids[p]]`` for each
    position ``p`` of index sequence ``s`` (``offsets``), one pass in position order (the
    gather NumPy's ``dout[seq, ids]`` makes, without the per-position sequence array).

    ``ids`` lie in ``[0, dout.shape[1])`` (the forward checked them); the shapes are checked
    here.  ``bounds`` chunks the index sequences.
    """
    cdef Py_ssize_t n = offsets.shape[0] - 1, c, w = dout.shape[1]
    if n < 0 or n > dout.shape[0]:
        raise ValueError(f"scatter_backward: {n} index sequences for {dout.shape[0]} rows")
    if offsets[0] != 0 or offsets[n] != ids.shape[0] or dupd.shape[0] != ids.shape[0]:
        raise ValueError(f"scatter_backward: offsets must run from 0 to the {ids.shape[0]} "
                         f"ids, and dupd hold as many ({dupd.shape[0]})")
    if n == 0 or ids.shape[0] == 0:
        return
    cdef floating_t* op = &dupd[0]
    cdef const floating_t* gp = &dout[0, 0]
    cdef const int64_t* ip = &ids[0]
    cdef const offset_t* of = &offsets[0]
    cdef const offset_t* bp
    if bounds is None:
        with nogil:
            _scatter_gather_range(op, gp, ip, of, 0, n, w)
        return
    bp = &bounds[0]
    with nogil:
        for c in prange(bounds.shape[0] - 1, num_threads=num_threads, schedule="dynamic"):
            _scatter_gather_range(op, gp, ip, of, bp[c], bp[c + 1], w)


# --------------------------------------------------------------------------- softmax
cdef void _softmax_range(floating_t* dx, const floating_t* y, const floating_t* g,
                         const offset_t* off, Py_ssize_t lo, Py_ssize_t hi) noexcept nogil:
    cdef Py_ssize_t s
    cdef offset_t i
    cdef double acc
    for s in range(lo, hi):
        acc = 0.0
        for i in range(off[s], off[s + 1]):
            acc += <double>y[i] * <double>g[i]
        for i in range(off[s], off[s + 1]):
            dx[i] = <floating_t>(<double>y[i] * (<double>g[i] - acc))


def softmax_backward(floating_t[::1] dx, const floating_t[::1] y, const floating_t[::1] dout,
                     const offset_t[::1] offsets, const offset_t[::1] bounds=None,
                     int num_threads=1):
    """``dx = y * (dout - sum_seq(y * dout))`` per sequence (``y`` the forward's output),
    computed in float64."""
    cdef Py_ssize_t n = offsets.shape[0] - 1, c
    if n <= 0 or dx.shape[0] == 0:
        return
    cdef floating_t* xp = &dx[0]
    cdef const floating_t* yp = &y[0]
    cdef const floating_t* gp = &dout[0]
    cdef const offset_t* of = &offsets[0]
    cdef const offset_t* bp
    if bounds is None:
        with nogil:
            _softmax_range(xp, yp, gp, of, 0, n)
        return
    bp = &bounds[0]
    with nogil:
        for c in prange(bounds.shape[0] - 1, num_threads=num_threads, schedule="dynamic"):
            _softmax_range(xp, yp, gp, of, bp[c], bp[c + 1])


# --------------------------------------------------------------------------- expand
cdef void _expand_blocks_range(floating_t* dx, const floating_t* g, const offset_t* x_off,
                               const offset_t* rep_off, const offset_t* out_lod,
                               Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t d) noexcept nogil:
    cdef Py_ssize_t i, j
    cdef offset_t a, k, c, r0, r1, n
    cdef double acc
    for i in range(lo, hi):
        a = x_off[i]
        n = x_off[i + 1] - a
        r0 = rep_off[i]
        r1 = rep_off[i + 1]
        for k in range(n):
            for j in range(d):
                acc = 0.0
                for c in range(r0, r1):
                    acc += <double>g[(out_lod[c] + k) * d + j]
                dx[(a + k) * d + j] = <floating_t>acc


def expand_blocks_backward(floating_t[:, ::1] dx, const floating_t[:, ::1] dout,
                           const offset_t[::1] x_off, const offset_t[::1] rep_off,
                           const offset_t[::1] out_lod, const offset_t[::1] bounds=None,
                           int num_threads=1):
    """``sequence_expand`` backward for an ``x`` with a LoD: row ``k`` of block ``i`` of
    ``dx`` is the sum, in copy order, of row ``k`` of the ``rep_off[i + 1] - rep_off[i]``
    copies of that block in ``dout`` (copy ``c`` starts at ``dout`` row ``out_lod[c]``)."""
    cdef Py_ssize_t n = x_off.shape[0] - 1, d = dx.shape[1], c
    if n <= 0 or d == 0 or dx.shape[0] == 0:
        return
    cdef floating_t* xp = &dx[0, 0]
    cdef const floating_t* gp = &dout[0, 0] if dout.shape[0] else NULL
    cdef const offset_t* xo = &x_off[0]
    cdef const offset_t* ro = &rep_off[0]
    cdef const offset_t* ol = &out_lod[0]
    cdef const offset_t* bp
    if bounds is None:
        with nogil:
            _expand_blocks_range(xp, gp, xo, ro, ol, 0, n, d)
        return
    bp = &bounds[0]
    with nogil:
        for c in prange(bounds.shape[0] - 1, num_threads=num_threads, schedule="dynamic"):
            _expand_blocks_range(xp, gp, xo, ro, ol, bp[c], bp[c + 1], d)


# --------------------------------------------------------------------------- conv
cdef extern from *:
    """
    /* Row p of conv_input_backward: the sum, in order, of `terms` context blocks, each
       `step` elements after the previous (restrict: the context gradient is scratch of its
       own, so the loops vectorise without overlap checks). */
    #define LA_CONV_ROW(NAME, T)                                                          \
    static inline void NAME(T* __restrict row, const T* __restrict src, ptrdiff_t step,  \
                            Py_ssize_t terms, Py_ssize_t d) {                            \
        Py_ssize_t j, k;                                                                  \
        if (terms == 3) {                                                                 \
            const T* __restrict s1 = src + step;                                          \
            const T* __restrict s2 = src + 2 * step;                                      \
            for (j = 0; j < d; j++) row[j] = (src[j] + s1[j]) + s2[j];                    \
        } else if (terms == 2) {                                                          \
            const T* __restrict s1 = src + step;                                          \
            for (j = 0; j < d; j++) row[j] = src[j] + s1[j];                              \
        } else {                                                                          \
            for (j = 0; j < d; j++) row[j] = src[j];                                      \
            for (k = 1; k < terms; k++)                                                   \
                for (j = 0; j < d; j++) row[j] += src[k * step + j];                      \
        }                                                                                 \
    }
    LA_CONV_ROW(la_conv_row_f, float)
    LA_CONV_ROW(la_conv_row_d, double)
    """
    void la_conv_row_f(float* row, const float* src, Py_ssize_t step, Py_ssize_t terms,
                       Py_ssize_t d) noexcept nogil
    void la_conv_row_d(double* row, const double* src, Py_ssize_t step, Py_ssize_t terms,
                       Py_ssize_t d) noexcept nogil


cdef void _conv_input_range(floating_t* dx, const floating_t* dctx, const offset_t* off,
                            Py_ssize_t lo, Py_ssize_t hi, offset_t cs, Py_ssize_t cl,
                            Py_ssize_t d) noexcept nogil:
    """Row ``p`` of sequence ``[a, b)`` = sum over ``k`` of block ``k`` of context row
    ``t = p - cs - k`` where ``a <= t < b`` (the transposed gather): the ``k`` that qualify
    are one run ``[k0, k1]``, summed in increasing ``k``, each row written once."""
    cdef Py_ssize_t s
    cdef offset_t a, b, p, k0, k1
    cdef Py_ssize_t width = cl * d
    cdef floating_t* row
    for s in range(lo, hi):
        a = off[s]
        b = off[s + 1]
        for p in range(a, b):
            row = dx + p * d
            # a <= p - cs - k < b  <=>  p - cs - b < k <= p - cs - a
            k0 = max(<offset_t>0, p - cs - b + 1)
            k1 = min(<offset_t>(cl - 1), p - cs - a)
            if k0 > k1:
                memset(row, 0, <size_t>d * sizeof(floating_t))
                continue
            if floating_t is float:
                la_conv_row_f(row, dctx + (p - cs - k0) * width + k0 * d, d - width,
                              k1 - k0 + 1, d)
            else:
                la_conv_row_d(row, dctx + (p - cs - k0) * width + k0 * d, d - width,
                              k1 - k0 + 1, d)


def conv_input_backward(floating_t[:, ::1] dx, const floating_t[:, ::1] dctx,
                        const offset_t[::1] offsets, offset_t context_start,
                        Py_ssize_t context_length, const offset_t[::1] bounds=None,
                        int num_threads=1):
    """``sequence_conv``'s input gradient from the context gradient ``dctx = dout @ W.T``
    (``(N, context_length * D)``): every context block scattered back onto the input row
    it was gathered from, as a gather over the contexts that read each row (no atomics)."""
    cdef Py_ssize_t n = offsets.shape[0] - 1, d = dx.shape[1], c
    if n <= 0 or d == 0 or dx.shape[0] == 0 or context_length <= 0:
        return
    cdef floating_t* xp = &dx[0, 0]
    cdef const floating_t* gp = &dctx[0, 0]
    cdef const offset_t* of = &offsets[0]
    cdef const offset_t* bp
    if bounds is None:
        with nogil:
            _conv_input_range(xp, gp, of, 0, n, context_start, context_length, d)
        return
    bp = &bounds[0]
    with nogil:
        for c in prange(bounds.shape[0] - 1, num_threads=num_threads, schedule="dynamic"):
            _conv_input_range(xp, gp, of, bp[c], bp[c + 1], context_start, context_length, d)


def conv_padding_backward(floating_t[:, ::1] dpad, const floating_t[:, ::1] dctx,
                          const offset_t[::1] offsets, offset_t context_start,
                          Py_ssize_t context_length, offset_t up):
    """``sequence_conv``'s trainable padding gradient: every context block that read padding
    row ``up + (p - a)`` (before its sequence) or ``up + (p - b)`` (after it) adds its
    gradient there.  One thread, sequences in order: the sum over sequences is deterministic
    (the work is the rows within ``context_length`` of a sequence's ends)."""
    cdef Py_ssize_t n = offsets.shape[0] - 1, d = dpad.shape[1], cl = context_length
    cdef Py_ssize_t s
    cdef offset_t a, b, t, head_end, tail_start
    cdef offset_t cs = context_start
    cdef offset_t down = cs + cl - 1
    if down < 0:
        down = 0
    if dpad.shape[0] == 0 or d == 0:
        return
    memset(&dpad[0, 0], 0, <size_t>dpad.shape[0] * d * sizeof(floating_t))
    if n <= 0 or cl <= 0:
        return
    cdef floating_t* pp = &dpad[0, 0]
    cdef const floating_t* gp = &dctx[0, 0] if dctx.shape[0] else NULL
    cdef const offset_t* of = &offsets[0]
    with nogil:
        for s in range(n):
            a = of[s]
            b = of[s + 1]
            # Rows whose context starts before a: t < a + up; ends at or after b: t >= b - down.
            head_end = min(b, a + up)
            tail_start = max(head_end, b - down)
            for t in range(a, head_end):
                _conv_pad_row(pp, gp, t, a, b, cs, cl, up, d)
            for t in range(tail_start, b):
                _conv_pad_row(pp, gp, t, a, b, cs, cl, up, d)


cdef inline void _conv_pad_row(floating_t* pp, const floating_t* gp, offset_t t, offset_t a,
                               offset_t b, offset_t cs, Py_ssize_t cl, offset_t up,
                               Py_ssize_t d) noexcept nogil:
    """Context row ``t``'s blocks that read padding, added to their padding rows."""
    cdef Py_ssize_t j, k
    cdef offset_t p, r
    cdef const floating_t* src
    for k in range(cl):
        p = t + cs + k
        if p < a:
            r = up + p - a
        elif p >= b:
            r = up + p - b
        else:
            continue
        src = gp + t * cl * d + k * d
        for j in range(d):
            pp[r * d + j] += src[j]


# --------------------------------------------------------------------------- top-k
cdef inline bint _before(double v, int64_t i, double w, int64_t q) noexcept nogil:
    """Does value ``v`` at ``i`` rank before ``w`` at ``q`` (larger first, ties: lower index)?"""
    return v > w or (v == w and i < q)


cdef Py_ssize_t _top_positions(const floating_t* row, Py_ssize_t n, Py_ssize_t m,
                               double* vals, int64_t* pos) noexcept nogil:
    """The positions of the ``min(m, n)`` largest of ``row[:n]`` in rank order (ties: the
    lower position first, Paddle's ``get_topk_pos``); -1 for all when a NaN is present."""
    cdef Py_ssize_t size = 0, i, k
    cdef double v
    for i in range(n):
        v = row[i]
        if v != v:
            return -1
        if size < m:
            k = size
            size += 1
        elif _before(v, i, vals[size - 1], pos[size - 1]):
            k = size - 1
        else:
            continue
        while k > 0 and _before(v, i, vals[k - 1], pos[k - 1]):
            vals[k] = vals[k - 1]
            pos[k] = pos[k - 1]
            k -= 1
        vals[k] = v
        pos[k] = i
    return size


cdef void _topk_pos_range(int64_t* pos, const floating_t* x, const offset_t* in_off,
                          const offset_t* row_off, const offset_t* col_off, Py_ssize_t channels,
                          Py_ssize_t m, double* vals, Py_ssize_t lo,
                          Py_ssize_t hi) noexcept nogil:
    cdef Py_ssize_t s, ch, r, q, got, n_rows, n_cols
    cdef int64_t* p
    for s in range(lo, hi):
        n_rows = row_off[s + 1] - row_off[s]
        n_cols = col_off[s + 1] - col_off[s]
        for ch in range(channels):
            for r in range(n_rows):
                p = pos + ((row_off[s] + r) * channels + ch) * m
                got = _top_positions(x + in_off[s] + (ch * n_rows + r) * n_cols, n_cols, m,
                                     vals, p)
                if got < 0:
                    got = 0
                for q in range(got, m):
                    p[q] = -1


def topk_positions(int64_t[:, ::1] pos, double[:, ::1] work, const floating_t[::1] data,
                   const offset_t[::1] in_off, const offset_t[::1] row_off,
                   const offset_t[::1] col_off, Py_ssize_t channels,
                   const offset_t[::1] bounds=None, int num_threads=1):
    """``sequence_topk_avg_pooling``'s selected positions: row ``(row_off[s] + r) * channels
    + ch`` of ``pos`` (``(sum(rows) * channels, m)``) holds the columns of the ``m`` largest
    values of that block row in rank order, -1 past the row's end and for a row with NaN.
    ``work`` is ``(n_chunks, m)`` float64 scratch."""
    cdef Py_ssize_t n = in_off.shape[0] - 1, c, m = pos.shape[1]
    if n <= 0 or pos.shape[0] == 0 or m == 0:
        return
    cdef int64_t* pp = &pos[0, 0]
    cdef double* wp = &work[0, 0]
    cdef const floating_t* xp = &data[0] if data.shape[0] else NULL
    cdef const offset_t* io = &in_off[0]
    cdef const offset_t* ro = &row_off[0]
    cdef const offset_t* co = &col_off[0]
    cdef const offset_t* bp
    if bounds is None:
        with nogil:
            _topk_pos_range(pp, xp, io, ro, co, channels, m, wp, 0, n)
        return
    bp = &bounds[0]
    with nogil:
        for c in prange(bounds.shape[0] - 1, num_threads=num_threads, schedule="dynamic"):
            _topk_pos_range(pp, xp, io, ro, co, channels, m, wp + c * m, bp[c], bp[c + 1])


cdef void _topk_back_range(floating_t* dx, const floating_t* g, const int64_t* pos,
                           const offset_t* in_off, const offset_t* row_off,
                           const offset_t* col_off, const offset_t* topks, Py_ssize_t n_k,
                           Py_ssize_t channels, Py_ssize_t m, Py_ssize_t lo,
                           Py_ssize_t hi) noexcept nogil:
    cdef Py_ssize_t s, ch, r, q, kq, n_rows, n_cols, width = channels * n_k
    cdef int64_t col
    cdef double acc
    cdef floating_t* row
    cdef const floating_t* o
    cdef const int64_t* p
    for s in range(lo, hi):
        n_rows = row_off[s + 1] - row_off[s]
        n_cols = col_off[s + 1] - col_off[s]
        if n_rows * n_cols * channels:
            memset(dx + in_off[s], 0, <size_t>(n_rows * n_cols * channels) * sizeof(floating_t))
        for ch in range(channels):
            for r in range(n_rows):
                row = dx + in_off[s] + (ch * n_rows + r) * n_cols
                o = g + (row_off[s] + r) * width + ch * n_k
                p = pos + ((row_off[s] + r) * channels + ch) * m
                for q in range(m):
                    col = p[q]
                    if col < 0:
                        break
                    # Rank q counts in every k > q: dout_k / k, summed in topks' order.
                    acc = 0.0
                    for kq in range(n_k):
                        if topks[kq] > q:
                            acc += <double>o[kq] / <double>topks[kq]
                    row[col] = <floating_t>acc


def topk_avg_pool_backward(floating_t[::1] dx, const floating_t[:, ::1] dout,
                           const int64_t[:, ::1] pos, const offset_t[::1] in_off,
                           const offset_t[::1] row_off, const offset_t[::1] col_off,
                           const offset_t[::1] topks, Py_ssize_t channels,
                           const offset_t[::1] bounds=None, int num_threads=1):
    """``sequence_topk_avg_pooling`` backward: the value of rank ``q`` in its block row gets
    ``sum(dout_k / k for every k in topks with k > q)``; every other value 0."""
    cdef Py_ssize_t n = in_off.shape[0] - 1, c, m = pos.shape[1], n_k = topks.shape[0]
    if n <= 0 or dx.shape[0] == 0:
        return
    cdef floating_t* xp = &dx[0]
    cdef const floating_t* gp = &dout[0, 0] if dout.shape[0] and dout.shape[1] else NULL
    cdef const int64_t* pp = &pos[0, 0] if pos.shape[0] and m else NULL
    cdef const offset_t* io = &in_off[0]
    cdef const offset_t* ro = &row_off[0]
    cdef const offset_t* co = &col_off[0]
    cdef const offset_t* kp = &topks[0]
    cdef const offset_t* bp
    if bounds is None:
        with nogil:
            _topk_back_range(xp, gp, pp, io, ro, co, kp, n_k, channels, m, 0, n)
        return
    bp = &bounds[0]
    with nogil:
        for c in prange(bounds.shape[0] - 1, num_threads=num_threads, schedule="dynamic"):
            _topk_back_range(xp, gp, pp, io, ro, co, kp, n_k, channels, m, bp[c], bp[c + 1])


# --------------------------------------------------------------------------- concat
cdef enum:
    # Outputs the concat backward streams at once (a stream each, on the stack).
    SPLIT_STREAMS = 8
    # ... when its pieces average this many bytes or more (shorter ones cost more in the
    # stream's bookkeeping than the reads for ownership they save).
    SPLIT_STREAM_PIECE = 256


cdef void _split_range(uint8_t** outs, const offset_t** offs, Py_ssize_t n_out,
                       const uint8_t* src, const offset_t* src_off, Py_ssize_t lo,
                       Py_ssize_t hi, Py_ssize_t w, const uint8_t* src_limit,
                       bint stream) noexcept nogil:
    """Sequences ``[lo, hi)``: ``src`` read once, front to back; output ``k``'s rows of
    these sequences are one contiguous range, written in order (streamed when ``stream``)."""
    cdef Py_ssize_t i, k
    cdef size_t nbytes
    cdef const uint8_t* p
    cdef const offset_t* off
    cdef la_stream_t st[SPLIT_STREAMS]
    cdef const uint8_t* limits[SPLIT_STREAMS]
    if stream:
        for k in range(n_out):
            la_stream_begin(&st[k], outs[k] + offs[k][lo] * w)
    else:
        for k in range(min(n_out, <Py_ssize_t>SPLIT_STREAMS)):
            limits[k] = outs[k] + offs[k][hi] * w
    for i in range(lo, hi):
        p = src + src_off[i] * w
        for k in range(n_out):
            off = offs[k]
            nbytes = <size_t>((off[i + 1] - off[i]) * w)
            if nbytes == 0:
                continue
            if stream:
                la_stream_put(&st[k], p, nbytes, src_limit)
            elif k < SPLIT_STREAMS:
                _copy_block(outs[k] + off[i] * w, p, nbytes, limits[k], src_limit)
            else:
                memcpy(outs[k] + off[i] * w, p, nbytes)
            p = p + nbytes
    if stream:
        for k in range(n_out):
            la_stream_end(&st[k])


def split_blocks(list outs, const uint8_t[:, ::1] src, list offsets,
                 const offset_t[::1] src_off, const offset_t[::1] bounds=None,
                 int num_threads=1):
    """``sequence_concat`` backward on rows as bytes: sequence ``i`` of ``src`` (rows from
    ``src_off[i]``) back into sequence ``i`` of every output in turn, ``outs[k]`` rows
    ``[offsets[k][i], offsets[k][i + 1])`` (``concat_blocks``' inverse).

    ``outs`` are uint8 row views as wide as ``src``, ``offsets`` their last levels (each with
    ``len(src_off)`` entries; ``src_off[i + 1] - src_off[i]`` their lengths' sum).  One pass
    over ``src``; every output byte written once.  ``bounds`` chunks the sequences.
    """
    cdef Py_ssize_t w = src.shape[1]
    cdef Py_ssize_t n = src_off.shape[0] - 1
    cdef Py_ssize_t n_out = len(outs)
    cdef Py_ssize_t k, c, n_chunks
    cdef const offset_t[::1] off
    cdef uint8_t[:, ::1] out
    if n <= 0 or w == 0 or src.shape[0] == 0 or n_out == 0:
        return
    cdef uint8_t** op = <uint8_t**>malloc(n_out * sizeof(uint8_t*))
    cdef const offset_t** oo = <const offset_t**>malloc(n_out * sizeof(offset_t*))
    if op == NULL or oo == NULL:
        free(op)
        free(oo)
        raise MemoryError()
    cdef const uint8_t* sp = &src[0, 0]
    cdef const uint8_t* src_limit = sp + src.shape[0] * w
    cdef const offset_t* so = &src_off[0]
    cdef const offset_t* bp
    cdef bint stream
    cdef size_t total = <size_t>src.shape[0] * w
    try:
        for k in range(n_out):
            out = outs[k]
            off = offsets[k]
            op[k] = &out[0, 0] if out.shape[0] else NULL
            oo[k] = &off[0]
        stream = (n_out <= SPLIT_STREAMS and la_stream_worth(total)
                  and total >= <size_t>(n * n_out) * SPLIT_STREAM_PIECE)
        if bounds is None:
            with nogil:
                _split_range(op, oo, n_out, sp, so, 0, n, w, src_limit, stream)
        else:
            bp = &bounds[0]
            n_chunks = bounds.shape[0] - 1
            with nogil:
                for c in prange(n_chunks, num_threads=num_threads, schedule="dynamic"):
                    _split_range(op, oo, n_out, sp, so, bp[c], bp[c + 1], w, src_limit,
                                 stream)
    finally:
        free(op)
        free(oo)
