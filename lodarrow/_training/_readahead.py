"""Parquet blocks read ahead in one background thread (docs/training.md#loader).

A pass reads its blocks in order; while one block's batches are made, the next block is
decoded (Parquet decoding releases the GIL).  At the last block of a pass, the first block
of the likely next pass (the next epoch, from its start) is read too and kept: a pass that
starts with the same rows takes it, any other drops it.  What a read returns depends only on
the rows it reads, so reading ahead never changes a batch, only when the decoding happens.
A read made ahead that failed is made again where its block is taken, so what is raised,
and where, is what reading then would raise (a passing error, say of a remote store, is
not raised at all).  A pass, ended or broken off, waits for the reads it started: none runs
on between passes (against a cache being cleared, files being replaced, the interpreter
exiting), and what is kept is whole.
"""

import os
import weakref
from concurrent.futures import ThreadPoolExecutor, wait

import numpy as np

__all__ = ["ReadAhead"]


class ReadAhead:
    """Reads of ``read(rows)`` in a thread of this process, and one read kept for later.

    A process forked from this one (a ``DataLoader`` worker) has none of its threads: there
    the reads start afresh and nothing kept is used.
    """

    def __init__(self, read):
        # the loader's method, held weakly: a loader dropped is freed at once (with what it
        # kept and its thread), not by the cycle collector
        self._read = weakref.WeakMethod(read)
        self._pool = None
        self._pid = None
        self._kept = None  # (rows, future, pid) of a read made for a pass not begun
        self._last = None  # the read submitted last: one thread, so the others ran before

    def _executor(self):
        if self._pid != os.getpid():
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="lodarrow-read-ahead")
            self._pid = os.getpid()
        return self._pool

    def submit(self, rows):
        """A future of ``read(rows)``, started now (after the reads before it)."""
        self._last = self._executor().submit(self._read(), rows)
        return self._last

    def take(self, rows):
        """The read kept, if it is of ``rows`` (else None: the kept read is dropped, and the
        caller reads in its own thread, which waits for it anyway)."""
        kept, self._kept = self._kept, None
        if kept is not None and kept[2] == os.getpid():
            if np.array_equal(kept[0], rows):
                return kept[1]
            kept[1].cancel()
        return None

    def result(self, future, rows):
        """What ``future`` (a read of ``rows``; None: none made) read; if it failed, ``rows``
        read again now, as without reading ahead (an error then is this read's: a passing
        one is gone)."""
        if future is None:
            return self._read()(rows)
        try:
            return future.result()
        except Exception:
            return self._read()(rows)

    def keep(self, rows, future=None):
        """Keep ``future`` (a read of ``rows``; None: start one) for a later :meth:`take`."""
        self.drop()
        self._kept = (rows, self.submit(rows) if future is None else future, os.getpid())

    def drop(self):
        """Forget the kept read (a running one finishes, unused, by :meth:`settle`)."""
        if self._kept is not None and self._kept[2] == os.getpid():
            self._kept[1].cancel()
        self._kept = None

    def settle(self):
        """Wait for every read this process submitted (their errors are the takers')."""
        last, self._last = self._last, None
        if last is not None and self._pid == os.getpid():
            wait([last])
