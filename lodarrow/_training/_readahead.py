"""Parquet blocks read ahead in one background thread (docs/training.md#loader).

A pass reads its blocks in order; while one block's batches are made, the next block is
decoded (Parquet decoding releases the GIL).  At the last block of a pass, the first block
of the likely next pass (the next epoch, from its start) is read too and kept: a pass that
starts with the same rows takes it, any other drops it.  What a read returns depends only on
the rows it reads, so reading ahead never changes a batch, only when the decoding happens.
A read made ahead that failed is made again where its block is taken, so what is raised,
and where, is what reading then would raise (a passing error, say of a remote store, is
not raised at all).  A pass that reaches a block still being read, or waits for a read at
its end, decodes the row groups left itself (:class:`Shared`) rather than wait idle for the
read-ahead thread alone.  A pass waits for the reads it started: none runs on between passes
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

__all__ = ["DEFERRED", "ReadAhead", "Shared", "Stopped", "reading"]


class Stopped(Exception):
    """A read made ahead that was stopped (its block is read again where it is due)."""


#: What a row group's read returns in a block's first pass when another ``DataLoader`` worker
#: is decoding it (:mod:`._exchange`): it is read in the second pass
DEFERRED = object()

_phase = threading.local()


class reading:
    """``with reading(first=True)``: this thread's row group reads return :data:`DEFERRED`
    for a row group another worker is decoding (a block's first pass); ``first=False`` (its
    second pass): they wait for it, until ``stop`` (a ``threading.Event``) is set."""

    def __init__(self, first, stop=None):
        self.first, self.stop = first, stop

    def __enter__(self):
        self._saved = getattr(_phase, "now", None)
        _phase.now = self
        return self

    def __exit__(self, *exc):
        _phase.now = self._saved

    @staticmethod
    def now():
        """This thread's phase (a ``reading``), or None outside one."""
        return getattr(_phase, "now", None)


class Shared:
    """The pieces of one read (a block's row groups), each decoded by whichever thread takes
    it first: the reading thread, its helpers, and a thread waiting for the read (its
    :meth:`help`).

    A consumer that has made its batches before the next block is read would otherwise
    sleep while the read-ahead thread alone decodes the rest; on two cores that thread's
    decoding is then the loader's pace.  Pieces are taken in order, so the first error in
    order is the one raised; after an error no further piece is begun.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._fn = self._items = self._out = None
        self._taken = self._finished = 0
        self._failed = self._closed = False

    def run(self, fn, items, threads=1):
        """``[fn(item) for item in items]``, the items taken by this thread, ``threads - 1``
        more and any thread in :meth:`help`; the first error (in order) is raised."""
        items = list(items)
        with self._lock:
            if self._closed:  # one read per Shared: a second run would wait forever
                raise RuntimeError("Shared.run: this read's pieces were run already")
            self._fn, self._items, self._out = fn, items, [None] * len(items)
            self._changed.notify_all()  # a waiter in help() starts taking pieces
        pool = None
        more = min(threads, len(items)) - 1
        if more > 0:
            pool = ThreadPoolExecutor(more)
            for _ in range(more):
                pool.submit(self.help)
        try:
            self.help()
            with self._lock:
                while self._finished < self._taken or not (
                        self._failed or self._taken == len(items)):
                    self._changed.wait()
                self._closed = True  # a helper arriving late takes nothing
                done, self._out = self._out[:self._taken], None  # not kept with the future
                self._fn = self._items = None
        finally:
            if pool is not None:
                pool.shutdown()
        out = []
        for ok, value in done:
            if not ok:
                raise value
            out.append(value)
        return out

    def help(self, may=None):
        """Take pieces until none is left (or ``may()``, asked before each, is false); first
        wait for the read to list them, unless it ends (:meth:`close`) first."""
        with self._lock:
            while self._items is None and not self._closed:
                self._changed.wait()
        while may is None or may():
            with self._lock:
                i = self._taken
                if self._closed or self._failed or i >= len(self._items):
                    return
                self._taken += 1
                fn, item = self._fn, self._items[i]
            try:
                done = (True, fn(item))
            except Exception as exc:  # raised by the reader, in order
                done = (False, exc)
            except BaseException:  # an interrupt of a helping thread: its own to raise
                self._end(i, (False, Stopped("a piece's reader was interrupted")))
                raise
            self._end(i, done)

    def _end(self, i, done):
        with self._lock:
            self._out[i] = done
            self._finished += 1
            self._failed |= not done[0]
            self._changed.notify_all()

    def close(self):
        """The read ended (or never began): a thread waiting in :meth:`help` returns."""
        with self._lock:
            self._closed = True
            self._changed.notify_all()


def _spare_cpu():
    """Whether a thread waiting for a read may decode beside the read-ahead thread: two
    threads allowed (``LODARROW_NUM_THREADS``, taken as it is; else the CPUs this process
    may use) and a CPU free of other work, the read-ahead thread (decoding) not counted.
    On a busy machine a second decoder only takes turns with the others, and two decoders
    at once each take longer than one alone (lodarrow._threads' policy for kernels)."""
    from lodarrow._threads import busy_cpus, num_threads, usable_cpus

    if os.environ.get("LODARROW_NUM_THREADS"):
        return num_threads() >= 2
    return usable_cpus() >= 2 and busy_cpus() <= (os.cpu_count() or 1) - 1


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
        self._shared = {}  # future -> the pieces of its read (Shared), while it runs or waits
        _LIVE.add(self)

    def _executor(self):
        if self._pid != os.getpid():
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="lodarrow-read-ahead")
            self._pid = os.getpid()
            self._stops = {}  # a forked process's own: its parent's reads never end here
            self._shared = {}
        return self._pool

    def submit(self, rows):
        """A future of ``read(rows, stop, shared)``, started now (after the reads before it);
        ``shared`` (a :class:`Shared`) lets the thread that takes it decode with it."""
        stop, shared = threading.Event(), Shared()
        future = self._executor().submit(self._read(), rows, stop, shared)
        stops, helps = self._stops, self._shared  # not self: a future kept must not hold
        stops[future], helps[future] = stop, shared  # its ReadAhead

        def ended(f):
            stops.pop(f, None)
            helps.pop(f, None)
            shared.close()
        future.add_done_callback(ended)
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
        shared = self._shared.get(future) if self._pid == os.getpid() else None
        if shared is not None:  # decode what is left of the block here, not wait for it
            shared.help(_spare_cpu)
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
        """Wait for every read this process submitted (their errors are the takers'),
        decoding their pieces left meanwhile: the pass ends when the next pass's first
        block, read ahead, is read, so waiting idle for it would only slow the epoch."""
        if self._pid == os.getpid():
            futures = list(self._stops)
            for future in futures:
                shared = self._shared.get(future)
                if shared is not None:
                    shared.help(_spare_cpu)
            wait(futures)
