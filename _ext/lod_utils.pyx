"""O(n) LoD kernels: offset validation, lengths <-> offsets.

Every function trusts its arguments' types and shapes (the Python layer checks them) and
reports a problem as a position, never by raising from inside a loop.
"""
from cython.parallel cimport parallel, prange
from libc.stdint cimport INT64_MAX, int64_t, uint64_t
from libc.stdlib cimport free, malloc

from _types cimport offset_t

cdef extern from *:
    """
    #ifdef _OPENMP
    #define LODARROW_HAVE_OPENMP 1
    #else
    #define LODARROW_HAVE_OPENMP 0
    #endif
    """
    const int LODARROW_HAVE_OPENMP


def openmp_enabled():
    """Return True when the extension was compiled with OpenMP.

    Without OpenMP (a compiler without it, or ``LODARROW_NO_OPENMP=1`` at build time) the
    kernels run on one thread.

    Returns
    -------
    bool
        Whether the ``prange`` loops of the kernels run in parallel.

    Examples
    --------
    >>> import lodarrow as la
    >>> isinstance(la.openmp_enabled(), bool)
    True
    """
    return bool(LODARROW_HAVE_OPENMP)


cdef extern from *:
    """
    #if defined(__linux__)
    #include <sys/syscall.h>
    #include <unistd.h>
    static long la_gettid(void) { return (long)syscall(SYS_gettid); }
    #else
    static long la_gettid(void) { return 0; }
    #endif
    #ifdef _OPENMP
    #include <omp.h>
    static int la_thread_num(void) { return omp_get_thread_num(); }
    #else
    static int la_thread_num(void) { return 0; }
    #endif
    """
    long la_gettid() nogil
    int la_thread_num() nogil


def openmp_team_ids(int num_threads):
    """The OS thread ids of the calling thread's OpenMP team of ``num_threads`` threads.

    GNU OpenMP keeps one pool of worker threads per thread that opens a parallel region and
    reuses it, so these are the threads that run this caller's kernels (the thread policy,
    ``lodarrow/_threads.py``, watches whether they are running).  Entry ``i`` is team member
    ``i`` (0: the caller); 0 where the runtime gave fewer threads or the platform has no
    thread ids (not Linux).
    """
    cdef int n = max(1, num_threads)
    cdef int64_t* ids = <int64_t*>malloc(n * sizeof(int64_t))
    cdef int i, t
    if ids == NULL:
        raise MemoryError()
    for i in range(n):
        ids[i] = 0
    with nogil, parallel(num_threads=n):
        t = la_thread_num()
        if t < n:
            ids[t] = la_gettid()
    result = [ids[i] for i in range(n)]
    free(ids)
    return result


cdef extern from "lod_utils.h" nogil:
    const int LA_SCAN_BLOCK
    int64_t la_first_decrease(const int64_t* p, int64_t lo, int64_t hi)
    int64_t la_first_decrease_portable(const int64_t* p, int64_t lo, int64_t hi)

ctypedef int64_t (*scan_fn)(const int64_t*, int64_t, int64_t) noexcept nogil


cdef Py_ssize_t _first_bad(const offset_t[::1] offsets, int num_threads, scan_fn scan):
    """See ``first_bad_offset``; ``scan`` finds the first decrease in one range."""
    cdef Py_ssize_t n = offsets.shape[0]
    if n == 0 or offsets[0] != 0:
        return 0
    cdef const offset_t* p = &offsets[0]
    cdef Py_ssize_t bad = -1, per, c, lo, hi
    cdef int parts = num_threads
    cdef int64_t* found
    if parts <= 1 or n < 2 * LA_SCAN_BLOCK:
        with nogil:
            bad = scan(p, 1, n)
        return bad
    # One contiguous part per thread, cut at block boundaries.  Each thread stops at the first
    # decrease in its part; the first part that has one holds the first overall.
    per = (n - 1 + parts - 1) // parts
    per = (per + LA_SCAN_BLOCK - 1) // LA_SCAN_BLOCK * LA_SCAN_BLOCK
    found = <int64_t*>malloc(parts * sizeof(int64_t))
    if found == NULL:
        raise MemoryError()
    with nogil:
        for c in prange(parts, num_threads=num_threads, schedule="static"):
            lo = 1 + c * per
            hi = lo + per if lo + per < n else n
            found[c] = scan(p, lo, hi) if lo < hi else -1
    for c in range(parts):
        if found[c] >= 0:
            bad = found[c]
            break
    free(found)
    return bad


def first_bad_offset(const offset_t[::1] offsets, int num_threads=1):
    """Return the first position that breaks "starts at 0, non-decreasing", or -1.

    Position 0 is returned when ``offsets[0] != 0``; position ``i > 0`` when
    ``offsets[i] < offsets[i - 1]``.  An empty array is reported at position 0.

    The scan tests blocks of offsets branch-free (vectorised) and searches only the first bad
    block; with ``num_threads > 1`` each thread scans one contiguous part (the caller decides
    when an array is large enough to pay for threads).
    """
    return _first_bad(offsets, num_threads, la_first_decrease)


def first_bad_offset_portable(const offset_t[::1] offsets, int num_threads=1):
    """``first_bad_offset`` through the portable (baseline x86-64 / non-GCC) scan.

    ``first_bad_offset`` runs the AVX2 scan where the CPU has it; the tests check this one
    against the same references.
    """
    return _first_bad(offsets, num_threads, la_first_decrease_portable)


def lengths_to_offsets(const offset_t[::1] lengths, offset_t[::1] out):
    """Write the running sum of ``lengths`` into ``out`` (``len(lengths) + 1``).

    Returns ``(negative, overflow)``: the position of the first negative length and the first
    position whose running sum exceeds int64, each -1 if there is none.  ``out`` is complete
    when both are -1.  The scan stops at a negative length, so an overflow is only reported
    before the first negative one.
    """
    cdef Py_ssize_t i, n = lengths.shape[0]
    cdef Py_ssize_t bad = -1, overflow = -1
    cdef uint64_t acc = 0  # wraps past int64 (well defined); ``overflow`` says where
    cdef uint64_t top = <uint64_t>INT64_MAX
    with nogil:
        out[0] = 0
        for i in range(n):
            if lengths[i] < 0:
                bad = i
                break
            if overflow < 0 and <uint64_t>lengths[i] > top - acc:
                overflow = i
            acc = acc + <uint64_t>lengths[i]
            out[i + 1] = <offset_t>acc
    return bad, overflow


def offsets_to_lengths(const offset_t[::1] offsets, offset_t[::1] out):
    """Write ``offsets[i + 1] - offsets[i]`` into ``out`` (``len(offsets) - 1``)."""
    cdef Py_ssize_t i, n = out.shape[0]
    with nogil:
        for i in range(n):
            out[i] = offsets[i + 1] - offsets[i]
