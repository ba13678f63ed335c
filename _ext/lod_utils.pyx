"""O(n) LoD kernels: offset validation, lengths <-> offsets.

Every function trusts its arguments' types and shapes (the Python layer checks them) and
reports a problem as a position, never by raising from inside a loop.
"""
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


def first_bad_offset(const offset_t[::1] offsets):
    """Return the first position that breaks "starts at 0, non-decreasing", or -1.

    Position 0 is returned when ``offsets[0] != 0``; position ``i > 0`` when
    ``offsets[i] < offsets[i - 1]``.  An empty array is reported at position 0.
    """
    cdef Py_ssize_t i, n = offsets.shape[0]
    cdef Py_ssize_t bad = -1
    if n == 0 or offsets[0] != 0:
        return 0
    with nogil:
        for i in range(1, n):
            if offsets[i] < offsets[i - 1]:
                bad = i
                break
    return bad


def lengths_to_offsets(const offset_t[::1] lengths, offset_t[::1] out):
    """Write the running sum of ``lengths`` into ``out`` (``len(lengths) + 1``).

    Returns the position of the first negative length, or -1 (then ``out`` is complete).
    """
    cdef Py_ssize_t i, n = lengths.shape[0]
    cdef Py_ssize_t bad = -1
    cdef offset_t acc = 0
    with nogil:
        out[0] = 0
        for i in range(n):
            if lengths[i] < 0:
                bad = i
                break
            acc = acc + lengths[i]
            out[i + 1] = acc
    return bad


def offsets_to_lengths(const offset_t[::1] offsets, offset_t[::1] out):
    """Write ``offsets[i + 1] - offsets[i]`` into ``out`` (``len(offsets) - 1``)."""
    cdef Py_ssize_t i, n = out.shape[0]
    with nogil:
        for i in range(n):
            out[i] = offsets[i + 1] - offsets[i]
