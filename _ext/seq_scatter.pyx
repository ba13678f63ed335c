"""``sequence_scatter``: add each index sequence's updates into its own row of the output.

The Python layer has checked every id against the row width and cast the updates to the
output's dtype (float16 works in float32), so the kernel trusts them.  Sequence ``i`` only
ever writes row ``i``: threads own disjoint rows, and each row's updates are added in order,
so duplicates accumulate deterministically.
"""
from cython.parallel cimport prange
from libc.stdint cimport int64_t, uint64_t
from libc.string cimport memcpy

from _types cimport numeric_t, offset_t


cdef inline void _scatter_range(numeric_t* out, const numeric_t* src, bint copy,
                                Py_ssize_t width, const int64_t* ids,
                                const numeric_t* updates, const offset_t* offsets,
                                Py_ssize_t lo, Py_ssize_t hi) noexcept nogil:
    cdef Py_ssize_t i, p
    cdef numeric_t* row
    for i in range(lo, hi):
        row = out + i * width
        if copy:  # copy the row just before updating it, while it is in cache
            memcpy(row, src + i * width, <size_t>width * sizeof(numeric_t))
        for p in range(offsets[i], offsets[i + 1]):
            row[ids[p]] += updates[p]


def sequence_scatter(numeric_t[:, ::1] out, const numeric_t[:, ::1] src,
                     const int64_t[::1] ids, const numeric_t[::1] updates,
                     const offset_t[::1] offsets, const offset_t[::1] bounds=None,
                     int num_threads=1):
    """``out[i] = src[i]``, then ``out[i, ids[p]] += updates[p]`` for every position ``p`` of
    index sequence ``i`` (``i < len(offsets) - 1``; the caller copies any further rows).

    ``out`` and ``src`` are ``(rows, width)``; ``src`` may be ``out`` itself (already filled,
    nothing is copied).  ``ids`` and ``updates`` have ``offsets[-1]`` entries, every id in
    ``[0, width)``.
    """
    cdef Py_ssize_t width = out.shape[1]
    cdef Py_ssize_t n = offsets.shape[0] - 1
    cdef Py_ssize_t c, n_chunks
    if n <= 0 or width == 0:
        return
    cdef numeric_t* op = &out[0, 0]
    cdef const numeric_t* sp = &src[0, 0]
    cdef bint copy = <const void*>sp != <const void*>op
    cdef const int64_t* ip = &ids[0] if ids.shape[0] else NULL
    cdef const numeric_t* up = &updates[0] if updates.shape[0] else NULL
    cdef const offset_t* oo = &offsets[0]
    if bounds is None:
        with nogil:
            _scatter_range(op, sp, copy, width, ip, up, oo, 0, n)
        return
    cdef const offset_t* bp = &bounds[0]
    n_chunks = bounds.shape[0] - 1
    with nogil:
        for c in prange(n_chunks, num_threads=num_threads, schedule="dynamic"):
            _scatter_range(op, sp, copy, width, ip, up, oo, bp[c], bp[c + 1])


def first_bad_id(const int64_t[::1] ids, int64_t width):
    """The first position whose id is outside ``[0, width)``, or -1 (one pass, no temporaries)."""
    cdef Py_ssize_t p, n = ids.shape[0]
    cdef Py_ssize_t bad = -1
    with nogil:
        for p in range(n):
            # One unsigned compare covers both ends: a negative id wraps to a huge value.
            if <uint64_t>ids[p] >= <uint64_t>width:
                bad = p
                break
    return bad
