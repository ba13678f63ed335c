"""``sequence_topk_avg_pooling``: per row of each sequence's ``[channels, rows, cols]`` block,
the mean of its ``k`` largest values for every requested ``k``.

The kernel writes into an output the Python layer allocated and trusts its arguments (checked
before the call).  ``bounds`` (from ``chunk_bounds``) spreads chunks of sequences over
``num_threads`` threads with ``prange``; ``bounds=None`` runs on the calling thread.

Speed: for ``m = min(max(topks), cols) <= 8`` each row goes through a branch-free insertion
cascade (C, in ``_ext/include/seq_topk.h``); larger ``m`` uses a bounded min-heap in the
chunk's ``work`` row.
"""
from cython.parallel cimport prange
from libc.math cimport NAN

from _types cimport floating_t, offset_t

cdef extern from "seq_topk.h" nogil:
    int la_topk_f32(const float* row, Py_ssize_t n, Py_ssize_t m, float* best) noexcept nogil
    int la_topk_f64(const double* row, Py_ssize_t n, Py_ssize_t m, double* best) noexcept nogil
    enum: LA_TOPK_CASCADE_MAX


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
    cdef floating_t best[LA_TOPK_CASCADE_MAX]
    for s in range(lo, hi):
        n_rows = row_off[s + 1] - row_off[s]
        n_cols = col_off[s + 1] - col_off[s]
        seq = x + in_off[s]
        for ch in range(channels):
            for r in range(n_rows):
                row = seq + (ch * n_rows + r) * n_cols
                if m <= LA_TOPK_CASCADE_MAX:
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
