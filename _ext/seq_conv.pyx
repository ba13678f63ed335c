"""``sequence_conv``'s context gather: rows of the input into ``[rows, context_length * D]``
context blocks, which the Python layer multiplies by the filter in one BLAS product.

Row ``t`` of sequence ``[a, b)`` gets, in block ``k``, input row ``p = t + context_start + k``
when ``a <= p < b``; otherwise zeros, or with padding data (Paddle's trainable padding) the
padding row ``up + (p - a)`` before the sequence and ``up + (p - b)`` after it, where
``up = max(0, -context_start)`` (Paddle's ``context_project.h`` writes exactly these rows).
Each of the three runs (before, inside, after) is one ``memcpy``/``memset``.

The kernel trusts its arguments (checked by the Python layer) and writes into ``ctx``.
"""
from cython.parallel cimport prange
from libc.string cimport memcpy, memset

from _types cimport floating_t, offset_t

cdef enum:
    ROW_BLOCK = 512    # rows per parallel work item


cdef inline offset_t _seq_of_row(const offset_t* off, Py_ssize_t n_seq, offset_t t) noexcept nogil:
    """The sequence holding row ``t``: the last ``s`` with ``off[s] <= t``."""
    cdef Py_ssize_t lo = 0, hi = n_seq - 1, mid
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if off[mid] <= t:
            lo = mid
        else:
            hi = mid - 1
    return lo


cdef void _gather_rows(floating_t* ctx, const floating_t* src, offset_t base,
                       const offset_t* off, Py_ssize_t n_seq, offset_t t0, offset_t t1,
                       offset_t r0, offset_t cs, Py_ssize_t cl, Py_ssize_t d,
                       const floating_t* pad, offset_t up, bint use_pad) noexcept nogil:
    cdef offset_t s = _seq_of_row(off, n_seq, t0)
    cdef offset_t t, a, b, w0, w1, p0, p1
    cdef size_t row_size = <size_t>d * sizeof(floating_t)
    cdef floating_t* row
    for t in range(t0, t1):
        while off[s + 1] <= t:
            s += 1
        a = off[s]
        b = off[s + 1]
        row = ctx + (t - r0) * cl * d
        w0 = t + cs
        w1 = w0 + cl
        # Before the sequence: positions [w0, min(w1, a)).
        p1 = min(w1, a)
        if p1 > w0:
            if use_pad:
                memcpy(row, pad + (up + w0 - a) * d, <size_t>(p1 - w0) * row_size)
            else:
                memset(row, 0, <size_t>(p1 - w0) * row_size)
        # Inside: [max(w0, a), min(w1, b)).
        p0 = max(w0, a)
        p1 = min(w1, b)
        if p1 > p0:
            memcpy(row + (p0 - w0) * d, src + (p0 - base) * d, <size_t>(p1 - p0) * row_size)
        # After the sequence: [max(w0, b), w1).
        p0 = max(w0, b)
        if w1 > p0:
            if use_pad:
                memcpy(row + (p0 - w0) * d, pad + (up + p0 - b) * d,
                       <size_t>(w1 - p0) * row_size)
            else:
                memset(row + (p0 - w0) * d, 0, <size_t>(w1 - p0) * row_size)


def conv_gather(floating_t[:, ::1] ctx, const floating_t[:, ::1] src, offset_t base,
                const offset_t[::1] offsets, offset_t r0, offset_t context_start,
                Py_ssize_t context_length, const floating_t[:, ::1] padding, offset_t up,
                bint use_padding, int num_threads=1):
    """Fill ``ctx`` (``r1 - r0`` rows of ``context_length * D``) with the contexts of rows
    ``[r0, r0 + len(ctx))``.

    ``src`` holds input rows ``[base, base + len(src))`` (every row a context can reach);
    ``padding`` is ``(up + down, D)`` and read only when ``use_padding``.
    """
    cdef Py_ssize_t rows = ctx.shape[0], width = ctx.shape[1], n_seq = offsets.shape[0] - 1
    cdef Py_ssize_t d, n_blocks, blk
    cdef offset_t t0, t1
    if rows == 0 or width == 0 or context_length <= 0:
        return
    d = width // context_length
    cdef floating_t* cp = &ctx[0, 0]
    cdef const floating_t* sp = &src[0, 0] if src.shape[0] else NULL
    cdef const floating_t* pp = &padding[0, 0] if use_padding and padding.shape[0] else NULL
    cdef const offset_t* of = &offsets[0]
    n_blocks = (rows + ROW_BLOCK - 1) // ROW_BLOCK
    with nogil:
        for blk in prange(n_blocks, num_threads=num_threads, schedule="static"):
            t0 = r0 + blk * ROW_BLOCK
            t1 = min(t0 + ROW_BLOCK, r0 + rows)
            _gather_rows(cp, sp, base, of, n_seq, t0, t1, r0, context_start, context_length,
                         d, pp, up, use_padding)
