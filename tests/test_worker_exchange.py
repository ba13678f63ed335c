"""DataLoader workers decode each Parquet row group once and hand it to the others
(lodarrow/_training/_exchange.py): the same batches, fewer decodes, and every failure a
decode rather than a wrong batch or a hang."""

import errno
import gc
import os
import subprocess
import sys
import threading
import time
import types

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lodarrow as la
from lodarrow._training import _exchange, _source
from lodarrow._training._exchange import Exchange
from lodarrow._training._readahead import DEFERRED, Stopped, reading

torch = pytest.importorskip("torch")

FP = types.SimpleNamespace(name="/data/a.parquet", key=lambda: "v1")
COLS = ["ids"]


def _table(n=50, seed=0):
    rng = np.random.default_rng(seed)
    lens = rng.integers(0, 9, n)
    off = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    values = pa.array(rng.integers(0, 1000, int(lens.sum())), pa.int32())
    return pa.table({"ids": pa.ListArray.from_arrays(off, values)})


class Decoder:
    """A row group's decode, counted; ``gate`` (an Event) holds it until set."""

    def __init__(self, table, gate=None):
        self.table, self.gate, self.calls = table, gate, 0

    def __call__(self):
        self.calls += 1
        if self.gate is not None:
            assert self.gate.wait(30)
        return self.table


def _dead_pid():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.fixture
def pair(tmp_path):
    root = str(tmp_path / "x")
    os.makedirs(root)
    return Exchange(root, 0, 2), Exchange(root, 1, 2)


def test_a_row_group_decoded_by_one_worker_is_taken_by_the_other(pair):
    a, b = pair
    t = _table()
    dec_a, dec_b = Decoder(t), Decoder(t)
    assert a.read(FP, 3, COLS, t.num_rows, dec_a).equals(t)
    got = b.read(FP, 3, COLS, t.num_rows, dec_b)
    assert got.equals(t) and dec_a.calls == 1 and dec_b.calls == 0
    # taken: its file is gone, and nothing else is left but the folder
    assert os.listdir(a.root) == []
    # the next epoch decodes it again (once)
    assert b.read(FP, 3, COLS, t.num_rows, dec_b).equals(t) and dec_b.calls == 1
    assert a.read(FP, 3, COLS, t.num_rows, dec_a).equals(t) and dec_a.calls == 1


def test_a_claimed_row_group_is_deferred_then_waited_for(pair):
    a, b = pair
    t = _table()
    gate = threading.Event()
    dec_a, dec_b = Decoder(t, gate), Decoder(t)
    out = {}
    th = threading.Thread(target=lambda: out.setdefault("a", a.read(FP, 0, COLS, 50, dec_a)))
    th.start()
    while not os.path.exists(os.path.join(a.root, os.path.basename(a._base(FP, 0, COLS))
                                          + ".claim")):
        time.sleep(0.001)
    with reading(first=True):
        assert b.read(FP, 0, COLS, 50, dec_b) is DEFERRED
    threading.Timer(0.05, gate.set).start()
    with reading(first=False):
        got = b.read(FP, 0, COLS, 50, dec_b)
    th.join()
    assert got.equals(t) and out["a"].equals(t)
    assert dec_a.calls == 1 and dec_b.calls == 0


def test_a_claim_of_a_dead_process_is_taken_over(pair):
    a, b = pair
    t = _table()
    base = b._base(FP, 1, COLS)
    with open(base + ".claim", "w") as f:
        f.write(str(_dead_pid()))
    dec = Decoder(t)
    with reading(first=True):
        assert b.read(FP, 1, COLS, 50, dec) is DEFERRED
    with reading(first=False):
        assert b.read(FP, 1, COLS, 50, dec).equals(t)
    assert dec.calls == 1
    # and handed on: the other worker takes it
    dec_a = Decoder(t)
    assert a.read(FP, 1, COLS, 50, dec_a).equals(t) and dec_a.calls == 0


def test_a_claim_released_without_a_file_is_decoded_by_the_waiter(pair):
    a, b = pair
    t = _table()
    a.off = True  # its folder full, say: nothing handed
    gate = threading.Event()
    base = b._base(FP, 2, COLS)
    with open(base + ".claim", "w") as f:
        f.write(str(os.getpid()))
    threading.Timer(0.05, lambda: os.unlink(base + ".claim")).start()
    dec = Decoder(t, gate)
    gate.set()
    assert b.read(FP, 2, COLS, 50, dec).equals(t) and dec.calls == 1


def test_a_stopped_wait_raises_stopped_and_leaves_nothing(pair):
    a, b = pair
    base = b._base(FP, 4, COLS)
    with open(base + ".claim", "w") as f:
        f.write(str(os.getpid()))  # a live claim never released
    stop = threading.Event()
    threading.Timer(0.05, stop.set).start()
    start = time.monotonic()
    with pytest.raises(Stopped), reading(first=False, stop=stop):
        b.read(FP, 4, COLS, 50, Decoder(_table()))
    assert time.monotonic() - start < 10
    assert sorted(os.listdir(b.root)) == [os.path.basename(base) + ".claim"]


def test_a_wait_is_bounded(pair, monkeypatch):
    a, b = pair
    base = b._base(FP, 5, COLS)
    with open(base + ".claim", "w") as f:
        f.write(str(os.getpid()))
    monkeypatch.setattr(_exchange, "WAIT_S", 0.05)
    dec = Decoder(_table())
    assert b.read(FP, 5, COLS, 50, dec).num_rows == 50 and dec.calls == 1


@pytest.mark.parametrize("damage", ["rows", "garbage", "empty"])
def test_a_file_not_of_the_row_group_is_not_used(pair, damage):
    a, b = pair
    t = _table()
    a.read(FP, 6, COLS, 50, Decoder(t))
    path = b._base(FP, 6, COLS) + ".for-1"
    if damage == "rows":  # another row group's file in its place
        with pa.OSFile(path + ".tmp", "wb") as sink, \
                pa.ipc.new_file(sink, t.schema) as writer:
            writer.write_table(t.slice(0, 7))
        os.replace(path + ".tmp", path)
    else:
        with open(path, "wb") as f:
            f.write(b"" if damage == "empty" else b"not an arrow file" * 10)
    dec = Decoder(t)
    assert b.read(FP, 6, COLS, 50, dec).equals(t) and dec.calls == 1


def test_a_folder_that_cannot_be_made_turns_sharing_off(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    ex = Exchange(str(blocker / "x"), 0, 2)
    t = _table()
    dec = Decoder(t)
    assert ex.off and ex.read(FP, 0, COLS, 50, dec).equals(t) and dec.calls == 1


def test_files_not_taken_since_the_previous_block_are_dropped(pair):
    a, b = pair
    t = _table()
    b.begin()
    a.read(FP, 7, COLS, 50, Decoder(t))  # handed to b, which never reads it
    time.sleep(0.02)
    b.begin()  # the next block: kept (handed after the previous block began)
    handed = [n for n in os.listdir(b.root) if n.endswith(".for-1")]
    assert handed
    # one more block, begun well after it was handed (a second's margin for the clock)
    os.utime(os.path.join(b.root, handed[0]), (time.time() - 60,) * 2)
    b.begin()
    assert not any(n.endswith(".for-1") for n in os.listdir(b.root))


def test_a_claim_that_names_no_process_is_taken_over_at_once(pair):
    a, b = pair
    base = b._base(FP, 8, COLS)
    open(base + ".claim", "w").close()  # empty: not one this module writes
    dec = Decoder(_table())
    start = time.monotonic()
    assert b.read(FP, 8, COLS, 50, dec).num_rows == 50 and dec.calls == 1
    assert time.monotonic() - start < 5


def test_a_full_folder_turns_sharing_off_with_a_decode_and_nothing_left(pair, monkeypatch):
    a, b = pair
    t = _table()

    def full(*args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(_exchange.os, "link", full)
    dec = Decoder(t)
    assert b.read(FP, 9, COLS, 50, dec).equals(t) and dec.calls == 1 and b.off
    assert sorted(os.listdir(b.root)) == ["off-1"]
    monkeypatch.undo()
    # the other worker hands nothing to it from then on
    assert a.read(FP, 9, COLS, 50, Decoder(t)).equals(t)
    assert sorted(os.listdir(a.root)) == ["off-1"]


def test_files_handed_to_a_worker_whose_sharing_is_off_are_still_dropped(pair):
    a, b = pair
    b.begin()
    a.read(FP, 10, COLS, 50, Decoder(_table()))  # handed before b turned off
    b.off = True
    for name in os.listdir(b.root):
        os.utime(os.path.join(b.root, name), (time.time() - 60,) * 2)
    b.begin()
    assert not any(n.endswith(".for-1") for n in os.listdir(b.root))


def test_folders_whose_owner_is_gone_are_removed_and_only_the_maker_removes_its_own(
        tmp_path, monkeypatch):
    monkeypatch.setattr(_exchange, "_base_dir", lambda: str(tmp_path))
    # a killed trainer's folder: its lock file, not held (whatever its pid: 1 in a container)
    gone = tmp_path / f"{_exchange._PREFIX}1-abc"
    gone.mkdir()
    (gone / ".owner").write_text("")
    (gone / "3-x.for-1").write_bytes(b"x" * 100)
    live = _exchange.ExchangeRoot()  # removes the gone one, holds its own lock
    assert not gone.exists() and os.path.isdir(live.path)
    assert os.path.dirname(live.path) == str(tmp_path)
    other = _exchange.ExchangeRoot()  # another dataset: the live folder stays
    assert os.path.isdir(live.path) and os.path.isdir(other.path)
    # a forked worker's copy removes nothing
    child = os.fork()
    if child == 0:
        live.remove()
        os._exit(0)
    os.waitpid(child, 0)
    assert os.path.isdir(live.path)
    live.remove()
    other.remove()
    assert not os.path.exists(live.path) and not os.path.exists(other.path)


def test_a_base_that_takes_no_folder_shares_nothing(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setattr(_exchange, "_base_dir", lambda: str(blocker))
    root = _exchange.ExchangeRoot()
    assert root.path is None and Exchange(root.path, 0, 2).off


# --- DataLoader workers ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("xchg") / "c.parquet"
    rng = np.random.default_rng(3)
    lens = rng.integers(1, 60, 6000)
    off = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    values = pa.array(rng.integers(0, 30000, int(lens.sum())), pa.int32())
    pq.write_table(pa.table({"ids": pa.ListArray.from_arrays(off, values),
                             "doc": np.arange(6000)}),
                   path, row_group_size=400)
    return str(path)


@pytest.fixture
def decodes(monkeypatch, tmp_path):
    """Every decode of a row group, in any process (a line each in a file)."""
    log = tmp_path / "decodes.log"
    log.write_text("")
    original = _source.ParquetParts._decode_group

    def counted(self, k, columns):
        with open(log, "a") as f:
            f.write(f"{os.getpid()} {k}\n")
        return original(self, k, columns)

    monkeypatch.setattr(_source.ParquetParts, "_decode_group", counted)
    return lambda: len(log.read_text().split("\n")) - 1


def _same(got, want):
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert list(a) == list(b)
        for k in a:
            if isinstance(a[k], torch.Tensor):
                assert torch.equal(a[k], b[k]), k
            else:
                assert a[k] == b[k], k


@pytest.mark.parametrize("kw", [dict(mode="packed", batch_size=16),
                                dict(mode="blocks", row_length=256, max_tokens=2048,
                                     extra_columns=["doc"]),
                                dict(mode="padded", batch_size=8, prefetch=0)])
def test_workers_decode_each_row_group_about_once_and_deliver_the_same_batches(
        corpus, decodes, tmp_path, kw):
    loader = la.batch_loader(corpus, "ids", to="torch", progress=False,
                             cache_dir=str(tmp_path / "c"), **kw)
    want = []
    for epoch in range(2):
        loader.set_epoch(epoch)
        want.append(list(loader))
    groups = pq.ParquetFile(corpus).num_row_groups
    before = decodes()
    dataset = loader.torch()
    data = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=2,
                                       persistent_workers=True)
    for epoch in range(2):
        dataset.set_epoch(epoch)
        _same(list(data), want[epoch])
    made = decodes() - before
    # each of the two workers decoding all it reads: about 2 x groups an epoch
    assert groups * 2 <= made <= groups * 2 * 1.5, (made, groups)
    root = dataset._xroot.path
    # between epochs at most the next epoch's first block's row groups, read ahead
    assert len([n for n in os.listdir(root) if ".for-" in n]) <= 2 * 4
    del data, dataset
    gc.collect()
    assert not os.path.exists(root)


def test_one_worker_or_a_decoded_cache_shares_nothing(corpus, tmp_path):
    loader = la.batch_loader(corpus, "ids", to="torch", progress=False, mode="packed",
                             batch_size=16, cache_dir=str(tmp_path / "c"))
    dataset = loader.torch()
    list(torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=1))
    assert os.listdir(dataset._xroot.path) == [".owner"]
    cached = la.batch_loader(corpus, "ids", to="torch", progress=False, mode="packed",
                             batch_size=16, cache_dir=str(tmp_path / "c"), decoded_cache=True)
    dataset = cached.torch()
    _same(list(torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=2)),
          list(cached))
    assert os.listdir(dataset._xroot.path) == [".owner"]
