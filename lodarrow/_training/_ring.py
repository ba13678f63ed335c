"""Batches from ``DataLoader`` workers through shared memory (docs/training.md#loader).

A batch's arrays pickled through a worker's pipe cost the main process time for every KiB (the
pipe's 64 KiB reads, each waking the worker, and the unpickling copy), and the main process is
what limits a loader with workers.  So each worker writes a batch's arrays into a ring of its
own in one shared mapping (an anonymous memory file, ``memfd``), made by the dataset in the
main process and handed to the workers when they start (inherited by a fork, its descriptor
duplicated for ``spawn`` and ``forkserver``); the pipe carries only where the arrays lie
(:class:`RingBatch`), and the main process copies them out into arrays of its own (one
``memcpy`` an array: the training loop may keep a batch as long as it likes) and frees their
room.

- **Who writes where.**  A worker claims one of ``RING_COUNT`` rings when it makes its first
  batch, under a lock shared with the main process: a ring no process holds, or one whose
  holder has exited (batches it wrote that were not read went with its ``DataLoader``
  iterator).  A worker writes only in its own ring, in
  the order it sends; the main process reads each worker's batches in that order (one pipe
  a worker), so the room a batch held is free once the main process has read it (``read``,
  the batch's serial number, in the ring's header).
- **Never waits, never blocks.**  A batch that does not fit the room left (the training loop
  is behind by more batches than the ring holds), one larger than half a ring, a worker with no
  ring left, or a dataset pickled other than to start a worker (the mapping cannot cross
  then) go pickled through the pipe as before.
- **A worker killed holding the lock.**  The rings' header and the workers' shared position are
  guarded by a :class:`SharedLock`, which records its holder: a process that waits for it finds
  a holder that has exited (a worker killed by the OOM killer or a ``SIGKILL`` in its few
  microseconds under the lock) and takes the lock over, so the main process never hangs
  unpickling a batch or publishing a position; ``DataLoader`` then reports the dead worker as
  usual.  What the dead holder was changing is its own ring (freed with it) or a whole value
  written again.
- **Memory.**  The mapping is reserved, not used: a worker touches at most the room its
  batches in flight need (the ring grows to 8 of the largest batch it made, at least 4 MiB),
  so the resident memory is a few batches a worker, counted in the worker's and the main
  process's resident set alike (shared pages).
"""

import itertools
import mmap
import multiprocessing
import os
import weakref

import numpy as np

__all__ = ["BatchRing", "RingBatch", "SharedLock", "alive", "shared_array"]

#: Rings in one dataset's mapping (at most this many workers write through shared memory).
RING_COUNT = 16
#: Bytes reserved for each ring (address space only until written).
RING_BYTES = 64 << 20
#: A ring's room starts at this and grows to 8 of the largest batch, up to RING_BYTES.
_MIN_ROOM = 4 << 20
_ALIGN = 64
# a ring's header, int64 words: holder pid, generation, batches written, batches read
_PID, _GEN, _WRITTEN, _READ, _WORDS = 0, 1, 2, 3, 4

#: The rings of this process's datasets, by id (the main process finds a batch's ring here).
_RINGS = weakref.WeakValueDictionary()
_IDS = itertools.count()


class BatchRing:
    """The shared mapping of one dataset's rings, made in the main process.

    Forked workers inherit it; a worker started by ``spawn`` or ``forkserver`` maps the same
    memory file (its descriptor duplicated by ``multiprocessing``).  Pickled otherwise, it
    arrives disabled and batches go pickled.
    """

    def __init__(self):
        self.id = (os.getpid(), next(_IDS))
        self._header, self._lock = shared_array("q", RING_COUNT * _WORDS), SharedLock()
        self._fd = -1
        try:
            self._fd = os.memfd_create("lodarrow-batches", os.MFD_CLOEXEC)
            os.ftruncate(self._fd, RING_COUNT * RING_BYTES)   # sparse: no memory yet
            self._attach(self._fd)
        except (AttributeError, OSError, ValueError, OverflowError):
            self._map = self._bytes = None   # no memfd or no address space: pickled
        self._init_writer()
        _RINGS[self.id] = self

    def _attach(self, fd):
        self._map = mmap.mmap(fd, RING_COUNT * RING_BYTES)    # MAP_SHARED
        self._bytes = np.frombuffer(self._map, np.uint8)

    def _init_writer(self):
        self._ring = None        # worker: the ring it claimed (index, generation)
        self._live = []          # worker: (serial, start, end) of the batches not yet read
        self._serial = 0
        self._room = _MIN_ROOM

    def __reduce__(self):
        from multiprocessing import context, reduction

        if self._map is None or context.get_spawning_popen() is None:
            return _disabled, ()
        return _attached, (self.id, self._header, self._lock, reduction.DupFd(self._fd))

    def __del__(self, _close=os.close):   # (os may be gone at interpreter exit)
        if getattr(self, "_fd", -1) >= 0:
            _close(self._fd)

    # --- the worker side ------------------------------------------------------------------
    def put(self, arrays, rest):
        """A worker's batch as a :class:`RingBatch`, or None where it goes pickled."""
        if self._map is None:
            return None
        layout, size = [], 0
        for key, value in arrays.items():
            layout.append((key, value.dtype.str, value.shape, size, value.nbytes))
            size += -(-value.nbytes // _ALIGN) * _ALIGN
        if size > RING_BYTES // 2:
            return None
        with self._lock:
            if self._ring is None and not self._claim():
                self._map = None    # every ring held: this worker goes pickled
                return None
            ring, generation = self._ring
            words = self._header
            read = words[ring * _WORDS + _READ]
            start = self._place(size, read)
            if start is None:
                return None
            self._serial += 1
            self._live.append((self._serial, start, start + size))
            words[ring * _WORDS + _WRITTEN] = self._serial
        base = ring * RING_BYTES + start
        for value, (_, _, _, offset, nbytes) in zip(arrays.values(), layout):
            if nbytes:
                dst = self._bytes[base + offset:base + offset + nbytes]
                dst[:] = np.ascontiguousarray(value).reshape(-1).view(np.uint8)
        return RingBatch(self.id, ring, generation, self._serial, start, layout, rest)

    def _claim(self):
        """Take a free ring (under the lock): no holder, or a holder gone with all read."""
        words = self._header
        me = os.getpid()
        for ring in range(RING_COUNT):
            pid = words[ring * _WORDS + _PID]
            # a holder gone leaves its ring free: the batches it wrote and no one read were
            # dropped with its DataLoader iterator (read later, the generation would differ)
            free = pid == 0 or (pid != me and not alive(pid))
            if free:
                generation = words[ring * _WORDS + _GEN] + 1
                words[ring * _WORDS + _PID] = me
                words[ring * _WORDS + _GEN] = generation
                words[ring * _WORDS + _WRITTEN] = words[ring * _WORDS + _READ] = 0
                self._ring = (ring, generation)
                self._live, self._serial = [], 0
                return True
        return False

    def _place(self, size, read):
        """Where in the ring a batch of ``size`` bytes goes, or None if it does not fit."""
        live = self._live
        while live and live[0][0] <= read:
            live.pop(0)
        self._room = min(RING_BYTES, max(self._room, 8 * size))
        if not live:
            return 0 if size <= self._room else None
        first, last = live[0][1], live[-1][2]
        if live[-1][1] >= first:             # in order: room after the newest, or wrap
            if last + size <= self._room:
                return last
            return 0 if size <= first else None
        return last if last + size <= first else None   # wrapped: the gap before the oldest

    # --- the main process's side ---------------------------------------------------------
    def take(self, batch):
        """The batch's arrays, copied out of its ring; its room freed."""
        base = batch.ring * RING_BYTES + batch.start
        out = {}
        words = self._header
        with self._lock:
            if words[batch.ring * _WORDS + _GEN] != batch.generation:
                raise RuntimeError("BatchLoader.torch: a DataLoader worker's batch was "
                                   "overwritten in shared memory before it was read (its ring "
                                   "was claimed again)")
            for key, dtype, shape, offset, nbytes in batch.layout:
                value = np.empty(shape, dtype)
                if nbytes:
                    value.reshape(-1).view(np.uint8)[:] = \
                        self._bytes[base + offset:base + offset + nbytes]
                out[key] = value
            words[batch.ring * _WORDS + _READ] = batch.serial
        return out


def shared_array(typecode, size):
    """A shared array (no lock of its own: :class:`SharedLock` guards it) that reaches
    workers of any start method: made in the ``spawn`` context (shared memory made in the
    ``fork`` context is refused by ``spawn`` and ``forkserver`` workers; forked ones inherit
    either)."""
    return multiprocessing.get_context("spawn").RawArray(typecode, size)


class SharedLock:
    """A lock of the main process and its ``DataLoader`` workers that a holder killed while
    holding it does not leave held forever (see the module's docstring).

    A context manager, as ``multiprocessing.Lock``.  It records its holder's pid; a process
    waiting for it looks every :attr:`POLL` seconds whether the holder still exists, and if
    not takes the lock over.  Reaches workers of any start method (made in the ``spawn``
    context, as :func:`shared_array`).
    """

    #: Seconds between looks at the holder while waiting.
    POLL = 0.2
    #: Seconds after which a lock taken with no holder recorded (a holder killed between
    #: taking it and recording itself) is taken over; every holder keeps it microseconds
    #: to milliseconds.
    STALE = 30.0

    def __init__(self):
        ctx = multiprocessing.get_context("spawn")
        self._lock = ctx.Lock()               # a semaphore: any process may release it
        self._holder = ctx.RawValue("q", 0)   # the holder's pid (0: none)

    def __enter__(self):
        me, waited = os.getpid(), 0.0
        while not self._lock.acquire(timeout=self.POLL):
            waited += self.POLL
            holder = self._holder.value
            if (holder and holder != me and not alive(holder)) or (not holder
                                                                   and waited >= self.STALE):
                break   # killed holding it: the lock (still taken) is ours now
        self._holder.value = me
        return self

    def __exit__(self, *exc):
        self._holder.value = 0
        self._lock.release()


def _disabled():
    ring = BatchRing.__new__(BatchRing)
    ring._map = ring._bytes = None
    ring._fd = -1
    ring._init_writer()
    return ring


def _attached(ring_id, header, lock, dup_fd):
    """The ring in a worker started by ``spawn`` or ``forkserver``."""
    ring = BatchRing.__new__(BatchRing)
    ring.id, ring._header, ring._lock = tuple(ring_id), header, lock
    ring._fd = dup_fd.detach()
    ring._attach(ring._fd)
    ring._init_writer()
    _RINGS[ring.id] = ring   # a trainer process given the dataset reads its workers' batches
    return ring


def alive(pid):
    """Whether process ``pid`` is running (another user's counts): not gone, and not a zombie
    (a killed ``DataLoader`` worker stays one until its parent reaps it, which may be never
    while the parent waits for a lock the worker held)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:  # not Linux, or gone meanwhile: kill's answer stands
        return True
    # "pid (comm) S ...": the state follows the last ")" (comm may hold any byte)
    return stat[stat.rfind(b")") + 2:stat.rfind(b")") + 3] not in (b"Z", b"X")


class RingBatch:
    """Where a worker's batch lies in its ring, and its other values: crosses the pipe
    pickled (a few hundred bytes) and becomes the batch (a dict of torch tensors) when the
    main process unpickles it."""

    __slots__ = ("ring_id", "ring", "generation", "serial", "start", "layout", "rest")

    def __init__(self, ring_id, ring, generation, serial, start, layout, rest):
        self.ring_id, self.ring, self.generation, self.serial = ring_id, ring, generation, serial
        self.start, self.layout, self.rest = start, layout, rest

    def __reduce__(self):
        return _from_ring, (self.ring_id, self.ring, self.generation, self.serial, self.start,
                            self.layout, self.rest)


def _from_ring(ring_id, ring, generation, serial, start, layout, rest):
    owner = _RINGS.get(tuple(ring_id))
    if owner is None or owner._map is None:
        raise RuntimeError("BatchLoader.torch: a DataLoader worker's batch arrived in a process "
                           "without its shared memory (the dataset was made in another "
                           "process)")
    arrays = owner.take(RingBatch(ring_id, ring, generation, serial, start, layout, rest))
    return as_tensors(arrays, rest)


#: The entry of a worker's ``rest`` holding its batch's keys in order (arrays and the rest
#: travel apart).
KEY_ORDER = "_lodarrow_key_order"


def as_tensors(arrays, rest):
    """A worker's batch in the main process, through the ring or pickled: its NumPy
    ``arrays`` as tensors (no copy) and its other entries ``rest``.  A padded, packed,
    packed-rows, blocks or segments batch crosses without its per-token arrays: made here
    (from ``lengths`` or ``cu_seqlens``, :func:`~lodarrow._training._collate.rows_tokens`)."""
    import torch

    from lodarrow._training._collate import rows_tokens

    batch = {**arrays, **rest}
    order = batch.pop(KEY_ORDER, None)
    if order is not None:  # as the worker made it, so the rebuilt batch's keys are in order
        batch = {key: batch[key] for key in order}
    return {key: torch.from_numpy(value) if isinstance(value, np.ndarray) else value
            for key, value in rows_tokens(batch).items()}
