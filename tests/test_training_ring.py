"""Batches from DataLoader workers through shared memory (lodarrow/_training/_ring.py,
docs/training.md#loader): the ring against a model of its room (every batch read back as
written, however they wrap), and DataLoader workers' batches equal to the loader's own in
process, through the ring, pickled where the ring cannot take a batch, with two iterators
alive at once and with workers started by ``spawn`` and ``forkserver``."""

import multiprocessing
import os
import pickle
import time

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lodarrow as la
from lodarrow._training import _ring

torch = pytest.importorskip("torch")


def _arrays(rng, size):
    return {"values": rng.integers(0, 1 << 30, size, dtype=np.int32),
            "position_ids": np.arange(size, dtype=np.int64).reshape(-1, 1),
            "mask": rng.random(size) < 0.5}


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(0, 300_000), min_size=1, max_size=60),
       lag=st.integers(0, 12), seed=st.integers(0, 2**16))
def test_every_batch_reads_back_as_written_however_the_ring_wraps(sizes, lag, seed):
    """A writer runs up to ``lag`` batches ahead of the reader; each batch is taken from the
    ring (or goes pickled where it does not fit) and equals what was put."""
    ring = _ring.BatchRing()
    rng = np.random.default_rng(seed)
    in_flight, put_pickled = [], 0
    for size in sizes:
        arrays = _arrays(rng, size)
        batch = ring.put(arrays, {"n": size})
        if batch is None:
            put_pickled += 1
        else:
            in_flight.append((pickle.dumps(batch), arrays))
        while len(in_flight) > lag:
            wire, expected = in_flight.pop(0)
            _same(pickle.loads(wire), expected)
    for wire, expected in in_flight:
        _same(pickle.loads(wire), expected)
    assert put_pickled <= len(sizes)


def _same(got, expected):
    assert set(got) - {"n"} == set(expected)
    for key, value in expected.items():
        assert isinstance(got[key], torch.Tensor)
        assert np.array_equal(got[key].numpy(), value), key
        assert got[key].numpy().dtype == value.dtype and got[key].shape == value.shape


def test_a_full_ring_sends_pickled_and_frees_its_room_as_batches_are_read():
    ring = _ring.BatchRing()
    rng = np.random.default_rng(0)
    size = 1 << 18          # 2.25 MiB a batch: 8 fill the room the ring grows to
    wires = []
    while True:
        batch = ring.put(_arrays(rng, size), {})
        if batch is None:
            break
        wires.append(pickle.dumps(batch))
    assert 4 <= len(wires) <= 8
    pickle.loads(wires[0])                        # the oldest read: room again
    assert ring.put(_arrays(rng, size), {}) is not None


def test_a_batch_larger_than_half_a_ring_goes_pickled():
    ring = _ring.BatchRing()
    big = {"values": np.zeros(_ring.RING_BYTES // 2 // 4 + 1, np.int32)}
    assert ring.put(big, {}) is None


def test_a_ring_that_crossed_pickled_is_disabled():
    ring = pickle.loads(pickle.dumps(_ring.BatchRing()))
    assert ring.put({"values": np.zeros(3, np.int32)}, {}) is None


# --- DataLoader workers ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def table():
    rng = np.random.default_rng(5)
    lengths = rng.integers(1, 700, 3000)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    values = np.arange(offsets[-1], dtype=np.int32)
    return pa.table({"ids": pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)),
                                                      pa.array(values))})


MODES = [dict(mode="padded", batch_size=16), dict(mode="packed", batch_size=16),
         dict(mode="packed_rows", max_tokens=4096, row_length=1024),
         dict(mode="segments", max_tokens=4096, pad_to_multiple_of=4096),
         # a batch of rows crosses without position_ids, attention_mask and seq_idx, which
         # the main process makes from cu_seqlens (and each piece's sequence)
         {"mode": "blocks", "max_tokens": 4096, "row_length": 1024, "separator": -1}]


def _loader(table, **kw):
    return la.batch_loader(table, "ids", to="torch", seed=3, progress=False, **kw)


def _holders(dataset):
    """Each ring's (holder pid, batches written, batches read)."""
    words = list(dataset._ring._header)
    return [(words[i], words[i + 2], words[i + 3]) for i in range(0, len(words), 4)]


def _equal_batches(got, expected):
    assert len(got) == len(expected)
    for k, (a, b) in enumerate(zip(got, expected)):
        assert list(a) == list(b), k  # the same keys in the same order
        for key in a:
            if isinstance(a[key], torch.Tensor):
                assert a[key].dtype == b[key].dtype and torch.equal(a[key], b[key]), (k, key)
            else:
                assert a[key] == b[key], (k, key)


@pytest.mark.parametrize("kw", MODES, ids=[m["mode"] for m in MODES])
def test_workers_batches_through_the_ring_equal_the_loaders_own(table, kw):
    loader = _loader(table, **kw)
    own = []
    for epoch in range(3):
        loader.set_epoch(epoch)
        own.append(list(loader))
    dataset = _loader(table, **kw).torch()
    data = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=2,
                                       persistent_workers=True, prefetch_factor=4)
    for epoch in range(3):    # the rings wrap many times over three epochs
        dataset.set_epoch(epoch)
        _equal_batches(list(data), own[epoch])
    written = [w for pid, w, r in _holders(dataset) if pid]
    assert len(written) == 2 and sum(written) == sum(map(len, own))  # none pickled


def test_batches_too_large_for_the_ring_cross_pickled_among_the_others(table, monkeypatch):
    kw = MODES[0]
    own = list(_loader(table, **kw))
    sizes = sorted(sum(v.nbytes for v in b.values() if isinstance(v, torch.Tensor))
                   for b in own)
    # rings of twice the median batch: the larger half crosses pickled (set before the fork)
    monkeypatch.setattr(_ring, "RING_BYTES", 2 * sizes[len(sizes) // 2])
    dataset = _loader(table, **kw).torch()
    data = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=2,
                                       persistent_workers=True)
    _equal_batches(list(data), own)
    through_ring = sum(w for pid, w, r in _holders(dataset) if pid)
    assert 0 < through_ring < len(own)


@pytest.mark.parametrize("kw", MODES[1:], ids=[m["mode"] for m in MODES[1:]])
def test_batches_crossing_pickled_are_made_whole_in_the_main_process(table, monkeypatch, kw):
    """A batch pickled through the pipe (no room in a ring) also travels without its
    per-token arrays, made again in the main process."""
    own = list(_loader(table, **kw))
    monkeypatch.setattr(_ring, "RING_BYTES", 64)  # every batch over half a ring
    dataset = _loader(table, **kw).torch()
    data = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=2,
                                       persistent_workers=True)
    _equal_batches(list(data), own)
    assert sum(w for pid, w, r in _holders(dataset) if pid) == 0


@pytest.mark.filterwarnings("ignore:batch_loader. epoch 0 is iterated again")
def test_two_iterators_alive_at_once_write_in_rings_of_their_own(table):
    kw = MODES[1]
    own = list(_loader(table, **kw))
    data = torch.utils.data.DataLoader(_loader(table, **kw).torch(), batch_size=None,
                                       num_workers=2)
    first, second = iter(data), iter(data)     # four workers alive, four rings
    got_first, got_second = [], []
    for a, b in zip(first, second):
        got_first.append(a)
        got_second.append(b)
        if len(got_first) == 5:
            assert len([h for h in _holders(data.dataset) if h[0]]) == 4
    _equal_batches(got_first, own)
    _equal_batches(got_second, own)


@pytest.mark.parametrize("start", ["spawn", "forkserver"])
def test_workers_of_every_start_method_write_in_the_ring(table, start):
    kw = MODES[3]
    own = list(_loader(table, **kw))
    dataset = _loader(table, **kw).torch()
    data = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=2,
                                       multiprocessing_context=start)
    _equal_batches(list(data), own)
    assert sum(w for pid, w, r in _holders(dataset) if pid) == len(own)


def test_a_pass_broken_off_leaves_persistent_workers_at_the_next_epoch(table):
    """``break`` halfway through an epoch, then ``set_epoch``: persistent workers start the
    new epoch from its first step (they used to carry on with the old one)."""
    kw = MODES[0]
    loader = _loader(table, **kw)
    loader.set_epoch(1)
    own = list(loader)
    dataset = _loader(table, **kw).torch()
    data = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=2,
                                       persistent_workers=True)
    dataset.set_epoch(0)
    for k, _ in enumerate(data):
        if k == 9:
            break
    dataset.set_epoch(1)
    _equal_batches(list(data), own)


@pytest.mark.filterwarnings("ignore:batch_loader. epoch 2 is iterated again")  # the workers'
def test_workers_after_a_whole_pass_in_process_repeat_the_epoch(table):
    """A dataset made after the loader went through its epoch in this process: the workers'
    pass is that epoch again, as a second pass in process is (it used to give no batch)."""
    kw = MODES[1]
    loader = _loader(table, **kw)
    loader.set_epoch(2, start_step=3)
    own = list(loader)
    data = torch.utils.data.DataLoader(loader.torch(), batch_size=None, num_workers=2)
    _equal_batches(list(data), own)
    with pytest.warns(UserWarning, match="epoch 2 is iterated again from step 3"):
        again = list(loader)
    _equal_batches(again, own)
    # the dataset made first, the pass in process after: the workers' pass from the start
    loader.set_epoch(2, start_step=3)
    dataset = loader.torch()
    list(loader)
    data = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=2)
    _equal_batches(list(data), own)


@pytest.mark.filterwarnings("ignore:batch_loader. epoch 0 is iterated again")
def test_rings_of_workers_gone_are_taken_again(table, monkeypatch):
    """Each broken-off epoch of non-persistent workers leaves batches unread in their rings;
    the next workers take those rings again, so every batch still goes through a ring."""
    kw = MODES[1]
    own = list(_loader(table, **kw))
    dataset = _loader(table, **kw).torch()
    data = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=2)
    for _ in range(_ring.RING_COUNT // 2 + 2):   # more workers in all than there are rings
        it = iter(data)
        for k, _ in enumerate(it):
            if k == 10:
                break
        del it
    dataset.set_epoch(0)
    from_ring = []
    take = _ring.BatchRing.take

    def counted(self, batch):
        from_ring.append(1)
        return take(self, batch)

    monkeypatch.setattr(_ring.BatchRing, "take", counted)  # the main process's side
    _equal_batches(list(data), own)
    assert len(from_ring) == len(own)


def _hold_and_die(locks, ready):
    """Take every lock, say so, and die holding them (as a worker the OOM killer takes)."""
    import signal

    for lock in locks:
        lock.__enter__()
    ready.set()
    os.kill(os.getpid(), signal.SIGKILL)


def _killed_holding(*locks):
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    proc = ctx.Process(target=_hold_and_die, args=(locks, ready))
    proc.start()
    assert ready.wait(60)
    proc.join(60)
    assert proc.exitcode == -9


def test_a_lock_whose_holder_was_killed_is_taken_over():
    lock = _ring.SharedLock()
    _killed_holding(lock)
    start = time.monotonic()
    with lock:
        assert lock._holder.value == os.getpid()
    assert time.monotonic() - start < 10 * _ring.SharedLock.POLL + 5
    with lock:  # released as usual afterwards
        pass


def test_a_worker_killed_holding_the_locks_hangs_nothing(table):
    """A worker killed while it holds the rings' lock or the shared position's (a few
    microseconds a batch) leaves neither held: the main process publishes a new epoch and
    reads its workers' batches through the rings as before."""
    kw = MODES[1]
    loader = _loader(table, **kw)
    loader.set_epoch(1)
    own = list(loader)
    dataset = _loader(table, **kw).torch()
    _killed_holding(dataset._ring._lock, dataset._lock)
    dataset.set_epoch(1)   # publishes under the position's lock
    data = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=2)
    _equal_batches(list(data), own)
    assert any(written for _, written, _ in _holders(dataset))  # through the rings


def test_a_holder_killed_and_not_yet_reaped_is_taken_over():
    """A killed worker stays a zombie until its parent reaps it, which a main process waiting
    for the lock the worker held does not do: a zombie holder counts as gone."""
    import signal

    lock = _ring.SharedLock()
    pid = os.fork()
    if pid == 0:  # the worker: dies holding the lock
        try:
            lock.__enter__()
            os.kill(os.getpid(), signal.SIGKILL)
        finally:
            os._exit(1)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # until it is a zombie holding the lock
            with open(f"/proc/{pid}/stat", "rb") as fh:
                stat = fh.read()
            if stat[stat.rfind(b")") + 2:stat.rfind(b")") + 3] == b"Z":
                break
            time.sleep(0.01)
        assert lock._holder.value == pid and not _ring.alive(pid)
        start = time.monotonic()
        with lock:
            assert lock._holder.value == os.getpid()
        assert time.monotonic() - start < 10 * _ring.SharedLock.POLL + 5
    finally:
        os.waitpid(pid, 0)
