"""``sequence_scatter``: add each index sequence's updates into its own row of the output.

The Python layer has checked everything but the ids and cast the updates to the output's
dtype (float16 works in float32).  The ids are checked here, in the pass that uses them (one
unsigned compare each, on values already loaded), instead of in a separate pass over all of
them: the kernel reports the first bad position and the caller raises before returning
anything.  Sequence ``i`` only ever writes row ``i``: threads own disjoint rows, and each
row's updates are added in order, so duplicates accumulate deterministically.
"""
from cython.parallel cimport prange
from libc.stdint cimport int64_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy

from _types cimport numeric_t, offset_t


cdef inline int64_t _scatter_range(numeric_t* out, const numeric_t* src, bint copy,
                                   Py_ssize_t width, const int64_t* ids,
                                   const numeric_t* updates, const offset_t* offsets,
                                   Py_ssize_t lo, Py_ssize_t hi) noexcept nogil:
    """Rows ``[lo, hi)``; the first position whose id is outside ``[0, width)`` (the rows from
    there on are left unfinished), or -1."""
    cdef Py_ssize_t i, p
    cdef int64_t c
    cdef uint64_t w = <uint64_t>width
    cdef numeric_t* row
    for i in range(lo, hi):
        row = out + i * width
        if copy:  # copy the row just before updating it, while it is in cache
            memcpy(row, src + i * width, <size_t>width * sizeof(numeric_t))
        for p in range(offsets[i], offsets[i + 1]):
            c = ids[p]
            # One unsigned compare covers both ends: a negative id wraps to a huge value.
            if <uint64_t>c >= w:
                return p
            row[c] += updates[p]
    return -1


cdef inline Py_ssize_t _cost_split(const offset_t* offsets, Py_ssize_t n, int64_t row_cost,
                                   int64_t target) noexcept nogil:
    """The first sequence ``i`` in ``[0, n]`` at which the cumulative cost (its updates plus
    ``row_cost`` per row) reaches ``target`` (a binary search: the cost is nondecreasing)."""
    cdef Py_ssize_t lo = 0, hi = n, mid
    while lo < hi:
        mid = (lo + hi) >> 1
        if offsets[mid] - offsets[0] + mid * row_cost < target:
            lo = mid + 1
        else:
            hi = mid
    return lo


def sequence_scatter(numeric_t[:, ::1] out, const numeric_t[:, ::1] src,
                     const int64_t[::1] ids, const numeric_t[::1] updates,
                     const offset_t[::1] offsets, int num_threads=1):
    """``out = src``, then ``out[i, ids[p]] += updates[p]`` for every position ``p`` of index
    sequence ``i`` (``i < len(offsets) - 1``; rows past the last sequence are copied).

    ``out`` and ``src`` are ``(rows, width)``; ``src`` may be ``out`` itself (already filled,
    nothing is copied).  ``ids`` and ``updates`` have ``offsets[-1]`` entries.  With
    ``num_threads > 1`` the sequences are split into ``4 * num_threads`` chunks of about equal
    work (updates plus copied row elements), taken dynamically.

    Returns the first position ``p`` whose id is outside ``[0, width)``, or -1.  When it is
    not -1, ``out`` is unfinished and must be discarded.
    """
    cdef Py_ssize_t rows = out.shape[0], width = out.shape[1]
    cdef Py_ssize_t n = offsets.shape[0] - 1
    cdef Py_ssize_t m = ids.shape[0]
    if width == 0:  # no id fits a row of width 0
        return 0 if m else -1
    if rows == 0:
        return -1
    cdef numeric_t* op = &out[0, 0]
    cdef const numeric_t* sp = &src[0, 0]
    cdef bint copy = <const void*>sp != <const void*>op
    cdef const int64_t* ip = &ids[0] if m else NULL
    cdef const numeric_t* up = &updates[0] if m else NULL
    cdef const offset_t* oo = &offsets[0]
    cdef int64_t bad = -1
    cdef Py_ssize_t tail = rows - n if copy else 0  # rows without a sequence, to copy
    if num_threads <= 1 or n + tail < 2:
        with nogil:
            if n > 0:
                bad = _scatter_range(op, sp, copy, width, ip, up, oo, 0, n)
            if tail > 0:
                memcpy(op + n * width, sp + n * width, <size_t>(tail * width) * sizeof(numeric_t))
        return bad
    return _scatter_parallel(op, sp, copy, width, ip, up, oo, n, tail, num_threads)


cdef int64_t _scatter_parallel(numeric_t* op, const numeric_t* sp, bint copy,
                               Py_ssize_t width, const int64_t* ip, const numeric_t* up,
                               const offset_t* oo, Py_ssize_t n, Py_ssize_t tail,
                               int num_threads) except -2:
    cdef Py_ssize_t n_chunks = min(4 * <Py_ssize_t>num_threads, n)
    cdef Py_ssize_t n_tail = min(<Py_ssize_t>num_threads, tail)
    cdef int64_t row_cost = width if copy else 0
    cdef int64_t total = (oo[n] - oo[0]) + n * row_cost if n > 0 else 0
    cdef Py_ssize_t c, r0, r1
    cdef int64_t bad = -1
    cdef Py_ssize_t* bounds = <Py_ssize_t*>malloc((n_chunks + 1) * sizeof(Py_ssize_t))
    cdef int64_t* found = <int64_t*>malloc((n_chunks + 1) * sizeof(int64_t))
    if bounds == NULL or found == NULL:
        free(bounds)
        free(found)
        raise MemoryError()
    for c in range(n_chunks + 1):
        bounds[c] = _cost_split(oo, n, row_cost, total * c // n_chunks) if c else 0
    if n_chunks:
        bounds[n_chunks] = n
    with nogil:
        for c in prange(n_chunks + n_tail, num_threads=num_threads, schedule="dynamic"):
            if c < n_chunks:
                found[c] = _scatter_range(op, sp, copy, width, ip, up, oo, bounds[c],
                                          bounds[c + 1])
            else:  # a share of the rows without a sequence
                r0 = n + tail * (c - n_chunks) // n_tail
                r1 = n + tail * (c - n_chunks + 1) // n_tail
                memcpy(op + r0 * width, sp + r0 * width,
                       <size_t>((r1 - r0) * width) * sizeof(numeric_t))
    for c in range(n_chunks):  # chunks are in position order: the first one found is first
        if found[c] >= 0:
            bad = found[c]
            break
    free(bounds)
    free(found)
    return bad
