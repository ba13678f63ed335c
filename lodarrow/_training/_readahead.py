"""Parquet blocks read ahead in one background thread (docs/training.md#loader).

A pass reads its blocks in order; while one block's batches are made, the next block is
decoded (Parquet decoding releases the GIL).  At the last block of a pass, the first block
of the likely next pass (the next epoch, from its start) is read too and kept: a pass that
starts with the same rows takes it, any other drops it.  What a read returns depends only on
the rows it reads, so reading ahead never changes a batch, only when the decoding happens.
A read made ahead that failed is made again where its block is taken, so what is raised,
and where, is what reading then would raise (a passing error, say of a remote store, is
not raised at all).  A pass waits for the reads it started: none runs on between passes
(while a cache is cleared, or the interpreter exits).  A pass broken off, and the
interpreter exiting, stop them first: a read stopped begins no further row group, and the
pass that needs its block reads it again.
"""

import os
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor, wait
from concurrent.futures import thread as _pool_thread  # noqa: F401  (its exit hook: first)

import numpy as np

__all__ = ["ReadAhead", "Stopped"]


class Stopped(Exception):
    """A read made ahead that was stopped (its block is read again where it is due)."""


_LIVE = weakref.WeakSet()  # the ReadAheads of this process


def _stop_all():
    for ahead in list(_LIVE):
        ahead.stop()


# at exit, reads in flight stop before their next row group: registered after
# concurrent.futures' own hook (imported above), so run before it joins the pool's threads
if hasattr(threading, "_register_atexit"):
    threading._register_atexit(_stop_all)


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
        self._stops = {}  # future -> its stop event, while it runs or waits
        _LIVE.add(self)

    def _executor(self):
        if self._pid != os.getpid():
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="lodarrow-read-ahead")
            self._pid = os.getpid()
            self._stops = {}  # a forked process's own: its parent's reads never end here
        return self._pool

    def submit(self, rows):
        """A future of ``read(rows)``, started now (after the reads before it)."""
        stop = threading.Event()
        future = self._executor().submit(self._read(), rows, stop)
        stops = self._stops  # not self: a future kept must not hold its ReadAhead
        stops[future] = stop
        future.add_done_callback(lambda f: stops.pop(f, None))
        return future

    def take(self, rows):
        """The read kept, if it is of ``rows`` (else None: the kept read is dropped, and the
        caller reads in its own thread, which waits for it anyway)."""
        kept, self._kept = self._kept, None
        if kept is not None and kept[2] == os.getpid():
            if np.array_equal(kept[0], rows):
                return kept[1]
            self._discard(kept[1])
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
        """Forget the kept read (one running is stopped; :meth:`settle` waits for it)."""
        if self._kept is not None and self._kept[2] == os.getpid():
            self._discard(self._kept[1])
        self._kept = None

    def _discard(self, future):
        future.cancel()
        stop = self._stops.get(future)
        if stop is not None:
            stop.set()

    def stop(self):
        """Stop the reads submitted: each begins no further row group (and fails with
        :class:`Stopped`; one taken later is read again)."""
        if self._pid == os.getpid():
            for stop in list(self._stops.values()):
                stop.set()

    def settle(self):
        """Wait for every read this process submitted (their errors are the takers')."""
        if self._pid == os.getpid():
            wait(list(self._stops))
