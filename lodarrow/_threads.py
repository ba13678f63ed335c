"""The CPU kernels' thread policy, in one place (a leaf module).

A kernel runs on ``threads_for(work)`` OpenMP threads: one below ``PARALLEL_MIN_WORK``
elements of work, else ``LODARROW_NUM_THREADS`` or the CPUs this process may run on (read on
every call, so a test or a user can change it at run time).  Threaded kernels take chunks of
sequences balanced by rows (:func:`chunk_bounds`, :func:`plan_threads`).  Whether the build
has OpenMP at all is ``lodarrow.openmp_enabled()``; without it every count is honoured
serially.
"""

import os

import numpy as np

__all__ = ["PARALLEL_MIN_WORK", "num_threads", "threads_for", "chunk_bounds", "plan_threads",
           "row_bounds"]

#: Below this many elements of work a kernel runs on one thread: OpenMP's start-up would
#: cost more than it saves on calls that take a few microseconds.
PARALLEL_MIN_WORK = 1 << 16


def num_threads():
    """Threads a kernel may use: ``LODARROW_NUM_THREADS`` or the CPUs this process may run on."""
    env = os.environ.get("LODARROW_NUM_THREADS")
    if env:
        return max(1, int(env))
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def threads_for(work):
    """1 for small work (see ``PARALLEL_MIN_WORK``), else :func:`num_threads`."""
    return 1 if work < PARALLEL_MIN_WORK else num_threads()


def chunk_bounds(offsets, n_chunks):
    """Split the sequences of ``offsets`` into ``n_chunks`` runs of about equal row count.

    Returns int64 sequence indices ``b`` with ``b[0] == 0`` and ``b[-1] == n_sequences``;
    chunk ``c`` is sequences ``[b[c], b[c + 1])``.  Balancing by rows, not by sequence count,
    keeps one thread from getting all the long sequences.
    """
    n_seq = offsets.shape[0] - 1
    n_chunks = max(1, min(int(n_chunks), n_seq))
    # int64 targets: float ones would make searchsorted cast all of ``offsets`` to float64.
    targets = np.linspace(0, int(offsets[-1]), n_chunks + 1).astype(np.int64)
    bounds = np.searchsorted(offsets, targets, side="left").astype(np.int64)
    bounds[0], bounds[-1] = 0, n_seq
    np.clip(bounds, 0, n_seq, out=bounds)
    return np.maximum.accumulate(bounds)


def row_bounds(offsets, threads):
    """Row-balanced chunks for ``threads`` > 1, None (one chunk) for a single thread."""
    return chunk_bounds(offsets, threads * 4) if threads > 1 else None


def plan_threads(offsets, work, by_rows=True):
    """``(n_threads, bounds)``: threads for ``work`` elements and the sequence chunks.

    One chunk of all sequences when single-threaded; else ``4 * n_threads`` chunks balanced
    by rows (``by_rows``), or by sequence count where every sequence costs the same.
    """
    n_threads = threads_for(work)
    n_seq = offsets.shape[0] - 1
    if n_threads == 1 or n_seq < 2:
        return 1, _one_chunk(n_seq)
    if not by_rows:
        n_chunks = min(n_threads * 4, n_seq)
        return n_threads, np.arange(n_chunks + 1, dtype=np.int64) * n_seq // n_chunks
    return n_threads, chunk_bounds(offsets, n_threads * 4)


# n_seq -> read-only [0, n_seq]: single-threaded calls are the small, frequent ones, where a
# fresh array per call would be a noticeable share of the call.
_ONE_CHUNK = {}
_ONE_CHUNK_SIZE = 256


def _one_chunk(n_seq):
    """The bounds ``[0, n_seq]`` of a single chunk (read-only; the kernels only read it)."""
    bounds = _ONE_CHUNK.get(n_seq)
    if bounds is None:
        bounds = np.array([0, n_seq], dtype=np.int64)
        bounds.flags.writeable = False
        if len(_ONE_CHUNK) >= _ONE_CHUNK_SIZE:
            _ONE_CHUNK.clear()
        _ONE_CHUNK[n_seq] = bounds
    return bounds
