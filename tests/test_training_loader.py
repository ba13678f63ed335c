"""The loader (docs/training.md#loader): a Parquet dataset or a table streamed as batches from
the plan; every sequence once per epoch across ranks and DataLoader workers; memory bounded
by blocks of row groups; Hugging Face datasets zero-copy; Ray Data through iter_batches."""

import os
import subprocess
import sys
import threading
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lodarrow as la

N = 600


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """Two Parquet files (several row groups each) of token ids, a label = the row number."""
    rng = np.random.default_rng(7)
    folder = tmp_path_factory.mktemp("train")
    start = 0
    for k, n in enumerate((350, 250)):
        lengths = rng.integers(0, 40, n)
        ids = pa.array([list(range(start + i, start + i + int(m))) for i, m in enumerate(lengths)],
                       type=pa.list_(pa.int32()))
        table = pa.table({"ids": ids, "label": np.arange(start, start + n)})
        pq.write_table(table, folder / f"part-{k}.parquet", row_group_size=60)
        start += n
    return str(folder)


def _rows_of(batches):
    return np.concatenate([np.asarray(b["rows"]) for b in batches])


def _check_batch(b, max_tokens=None, key="rows"):
    if key == "rows":
        np.testing.assert_array_equal(np.asarray(b["label"]), np.asarray(b["rows"]))
    lengths = np.asarray(b["lengths"])
    for k, row in enumerate(np.asarray(b[key])):  # the values are that row's ids
        np.testing.assert_array_equal(np.asarray(b["values"])[k, :lengths[k]],
                                      np.arange(row, row + lengths[k]))
    if max_tokens is not None and len(lengths) > 1:
        assert len(lengths) * lengths.max() <= max_tokens


@pytest.mark.parametrize("num_replicas", [1, 2, 3])
def test_every_sequence_once_per_epoch_across_ranks(dataset, num_replicas):
    seen, counts = [], []
    for rank in range(num_replicas):
        loader = la.batch_loader(dataset, "ids", max_tokens=300, extra_columns=["label"],
                                 row_groups=2, seed=5, num_replicas=num_replicas, rank=rank)
        batches = list(loader)
        assert len(batches) == len(loader)
        counts.append(len(batches))
        for b in batches:
            _check_batch(b, 300)
        seen.append(_rows_of(batches))
    rows = np.concatenate(seen)
    assert np.array_equal(np.sort(rows), np.arange(N))
    assert len(set(counts)) == 1


def test_blocks_bound_memory_and_plans_repeat(dataset):
    loader = la.batch_loader(dataset, "ids", batch_size=16, row_groups=2, seed=1)
    plan = loader.plan()
    # each block's batches lie in about row_groups row groups (cells of ~2 row groups)
    parts = loader._part_starts
    for w in np.unique(plan.windows):
        rows = np.concatenate([plan[b] for b in np.flatnonzero(plan.windows == w)])
        groups = np.unique(np.searchsorted(parts, rows, side="right") - 1)
        assert len(groups) <= 3
    again = la.batch_loader(dataset, "ids", batch_size=16, row_groups=2, seed=1).plan()
    assert np.array_equal(plan.indices, again.indices)
    loader.set_epoch(1)
    assert not np.array_equal(plan.indices, loader.plan().indices)


def _parquet_batches(dataset, prefetch, epoch=0, **kw):
    loader = la.batch_loader(dataset, "ids", batch_size=16, row_groups=2, seed=4,
                             prefetch=prefetch, progress=False, **kw)
    loader.set_epoch(epoch)
    return loader, list(loader)


@pytest.mark.parametrize("mode", ["padded", "packed"])
def test_reading_the_next_block_ahead_changes_no_batch(dataset, mode):
    for epoch in range(2):
        _, ahead = _parquet_batches(dataset, 2, epoch, mode=mode)
        _, inline = _parquet_batches(dataset, 0, epoch, mode=mode)
        assert len(ahead) == len(inline) > 10
        for a, b in zip(ahead, inline):
            assert a.keys() == b.keys()
            for key in a:
                np.testing.assert_array_equal(np.asarray(a[key]), np.asarray(b[key]))


@pytest.mark.parametrize("prefetch", [0, 2])
def test_a_read_error_comes_where_its_block_starts(dataset, monkeypatch, prefetch):
    """Every batch of the blocks before the failing one is delivered, then the error (read
    ahead or not), naming the file and the row group."""
    from lodarrow._training._source import ParquetParts

    loader, batches = _parquet_batches(dataset, 0)
    plan, _ = loader._epoch_plan()
    # the row group of the second block's first batch fails to read
    steps_of_first = int(np.sum(plan.block[0] == plan.block[0, 0]))
    second = loader._source_rows(plan.batch(0, steps_of_first))
    bad = int(np.searchsorted(loader._part_starts, second[0], side="right") - 1)
    read_group = ParquetParts.read_group

    def failing(self, k, columns, keep=True):
        if k == bad:
            raise ValueError(f"batch_loader: cannot read row group {self.parts[k][1]} of "
                             f"'part': broken")
        return read_group(self, k, columns, keep)

    monkeypatch.setattr(ParquetParts, "read_group", failing)
    loader = la.batch_loader(dataset, "ids", batch_size=16, row_groups=2, seed=4,
                             prefetch=prefetch, progress=False)
    got = []
    with pytest.raises(ValueError, match="cannot read row group .* broken"):
        for b in loader:
            got.append(b)
    assert len(got) == steps_of_first
    for a, b in zip(got, batches):
        np.testing.assert_array_equal(np.asarray(a["rows"]), np.asarray(b["rows"]))


def _token_file(path, shift=0, n=200, compression="none"):
    """Token rows in plain, uncompressed pages: a file of other values is the same size."""
    ids = pa.array([list(range(i + shift, i + shift + 1 + i % 30)) for i in range(n)],
                   pa.list_(pa.int32()))
    pq.write_table(pa.table({"ids": ids}), path, row_group_size=50, compression=compression,
                   use_dictionary=False)


def _epoch(loader, epoch):
    loader.set_epoch(epoch)
    return list(loader)


@pytest.mark.parametrize("remote", [False, True])
def test_a_file_rewritten_under_the_loader_is_refused_not_mixed(tmp_path, remote):
    """A Parquet file rewritten after the loader read its footer (another size; locally
    also the same size with another footer, whatever its modification time) fails the next
    read of its row groups, naming the file, instead of being read as rows of two versions;
    a file only touched reads as before."""
    import pyarrow.fs as pafs

    path = tmp_path / "d.parquet"
    _token_file(path)
    # a filesystem object other than the local one is read as a remote store is
    kw = {"filesystem": pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem())} \
        if remote else {}
    src = "d.parquet" if remote else str(path)

    def loader_of(prefetch=0):
        return la.batch_loader(src, "ids", batch_size=8, row_groups=2, seed=0,
                               prefetch=prefetch, progress=False, **kw)

    loader = loader_of()
    assert (loader._parts.filesystem is not None) == remote
    first = _epoch(loader, 0)
    later = time.time_ns() + 10**9
    os.utime(path, ns=(later, later))  # touched: the same footer
    _equal_batches(_epoch(loader, 0), first)
    changed = r"d\.parquet.*': changed after the loader read its footer \({}\).*new loader"
    if not remote:
        # the same size, other values (the statistics in the footer differ), put in place
        # with the old modification time, as `cp -p` or `rsync -t` would
        mtime = os.stat(path).st_mtime_ns
        _token_file(tmp_path / "new.parquet", shift=7)
        os.utime(tmp_path / "new.parquet", ns=(mtime, mtime))
        os.replace(tmp_path / "new.parquet", path)
        assert os.path.getsize(path) == loader._parts.sizes[0]
        with pytest.raises(ValueError, match=changed.format("its footer differs")):
            _epoch(loader, 1)
    _token_file(path, n=260)
    for prefetch in (0, 2):
        loader = loader_of(prefetch)
        _epoch(loader, 0)
        _token_file(path, n=220)
        with pytest.raises(ValueError, match=r"cannot read row group \d of '.*" + changed.format(
                r"\d+ bytes then, \d+ now")):
            _epoch(loader, 1)
        _token_file(path, n=260)


def test_a_file_deleted_under_the_loader_is_named_once(tmp_path):
    path = tmp_path / "d.parquet"
    _token_file(path)
    loader = la.batch_loader(str(path), "ids", batch_size=8, row_groups=2, seed=0,
                             prefetch=0, progress=False)
    _epoch(loader, 0)
    os.remove(path)
    with pytest.raises(ValueError, match=r"cannot read row group \d of '.*d\.parquet': the "
                                         r"file is gone \(deleted or moved since the loader "
                                         r"was made\)$"):
        _epoch(loader, 1)


def test_a_file_replaced_while_a_row_group_is_read_is_refused(tmp_path, monkeypatch):
    """The check runs after the read too: a file replaced between the check and the open
    is not read as the planned one."""
    from lodarrow._tables import _filesystems

    path = tmp_path / "d.parquet"
    _token_file(path)
    loader = la.batch_loader(str(path), "ids", batch_size=8, row_groups=2, seed=0,
                             prefetch=0, progress=False)
    first = _epoch(loader, 0)
    _token_file(tmp_path / "new.parquet", shift=7)
    opened = _filesystems.open_parquet
    swap = threading.Lock()
    pending = [tmp_path / "new.parquet"]

    def replacing(*args, **kwargs):  # the swap lands just after the check
        # a block's row groups are read on several threads, each through here: the swap is
        # made once, by whichever comes first (an exists()-then-replace is not atomic across
        # threads: the second replace found no file, and the read said "the file is gone")
        with swap:
            if pending:
                os.replace(pending.pop(), path)
        return opened(*args, **kwargs)

    monkeypatch.setattr(_filesystems, "open_parquet", replacing)
    got = []
    with pytest.raises(ValueError, match=r"changed after the loader read its footer"):
        loader.set_epoch(0)
        for b in loader:
            got.append(b)
    _equal_batches(got, first[:len(got)])


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_a_file_replaced_while_two_threads_read_its_row_groups_is_refused(tmp_path,
                                                                         monkeypatch,
                                                                         compression):
    """Two threads reading row groups of one file, the file replaced while both are inside
    the read: each read is refused as a changed file, neither as a vanished one nor with
    another version's rows.  Replaced by a file of the same size (uncompressed), the read
    succeeds and the check after it refuses; by a compressed one, Arrow fails reading pages
    that are no longer where the footer says, and the error still names the change."""
    from lodarrow._tables import _filesystems
    from lodarrow._training._source import ParquetParts

    path = tmp_path / "d.parquet"
    _token_file(path)
    parts = ParquetParts(str(path), "batch_loader")
    _token_file(tmp_path / "new.parquet", shift=7, compression=compression)
    # both threads are past the check before the read when the swap is made, once
    both_in = threading.Barrier(2, action=lambda: os.replace(tmp_path / "new.parquet", path),
                                timeout=30)
    opened = _filesystems.open_parquet

    def replaced_under(*args, **kwargs):
        both_in.wait()
        return opened(*args, **kwargs)

    monkeypatch.setattr(_filesystems, "open_parquet", replaced_under)
    errors = [None, None]

    def read(k):
        try:
            parts.read_group(k, ["ids"])
        except ValueError as exc:
            errors[k] = str(exc)

    threads = [threading.Thread(target=read, args=(k,)) for k in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for k, message in enumerate(errors):
        assert message is not None, f"row group {k} was read from the replaced file"
        assert f"cannot read row group {k} of" in message
        assert "changed after the loader read its footer" in message, message


def _equal_batches(got, want):
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert a.keys() == b.keys()
        for key in a:
            np.testing.assert_array_equal(np.asarray(a[key]), np.asarray(b[key]))


def _counting_reads(monkeypatch):
    """A list that grows by one per row group read (in any thread)."""
    from lodarrow._training._source import ParquetParts

    reads, read_group = [], ParquetParts.read_group

    def counted(self, k, columns, keep=True):
        reads.append(k)
        return read_group(self, k, columns, keep)

    monkeypatch.setattr(ParquetParts, "read_group", counted)
    return reads


@pytest.mark.parametrize("row_groups", [2, 100])  # several blocks an epoch, and one
def test_the_next_epochs_first_block_is_read_once_while_this_epoch_ends(dataset, monkeypatch,
                                                                         row_groups):
    kw = dict(batch_size=16, row_groups=row_groups, seed=4, progress=False, mode="packed")
    # the lengths first: where no test before this one read them (the cache cold), the
    # first loader made would count the lengths pass's reads among its blocks'
    la.sequence_lengths(dataset, "ids")
    reads = _counting_reads(monkeypatch)
    inline = la.batch_loader(dataset, "ids", prefetch=0, **kw)
    want = []
    for epoch in range(3):
        inline.set_epoch(epoch)
        want.append(list(inline))
    read_inline = len(reads)
    inline.set_epoch(3)
    next(iter(inline))
    first_block = len(reads) - read_inline
    del reads[:]
    ahead = la.batch_loader(dataset, "ids", prefetch=2, **kw)
    for epoch in range(3):
        ahead.set_epoch(epoch)
        _equal_batches(list(ahead), want[epoch])
    ahead._ahead._kept[1].result()  # epoch 3's first block, read while epoch 2 ended
    assert len(reads) == read_inline + first_block  # each block read once, none twice


def test_reading_ahead_changes_no_batch_whatever_the_next_pass(dataset):
    """The pass after an epoch is not always the next epoch: the same epoch again, one
    further on, a resume mid-epoch, a pass broken off and taken up: every batch as without
    reading ahead."""
    kw = dict(batch_size=16, row_groups=2, seed=4, progress=False, extra_columns=["label"])
    loaders = [la.batch_loader(dataset, "ids", prefetch=p, **kw) for p in (2, 0)]
    saved = None
    for step, action in enumerate(["epoch 0", "all", "epoch 1", "all", "epoch 1", "all",
                                   "epoch 3", "break 5", "save", "all", "epoch 2", "break 3",
                                   "all", "load", "all", "epoch 4", "break 100", "epoch 5",
                                   "all"]):
        got = []
        for loader in loaders:
            if action.startswith("epoch"):
                loader.set_epoch(int(action.split()[1]))
            elif action == "save":
                saved = loader.state_dict()
            elif action == "load":
                loader.load_state_dict(saved)
            else:
                limit = None if action == "all" else int(action.split()[1])
                out = []
                for b in loader:
                    out.append(b)
                    if len(out) == limit:
                        break
                got.append(out)
        if got:
            assert len(got[0]) > 0, action
            _equal_batches(*got)


def test_a_next_epochs_read_that_fails_is_made_again_where_its_block_starts(dataset,
                                                                           monkeypatch):
    """A read made ahead that failed is read again when its block is due: a passing error
    is not raised at all, a lasting one where the block starts (the epoch before whole)."""
    from lodarrow._training._source import ParquetParts

    kw = dict(batch_size=16, row_groups=2, seed=4, progress=False)
    want = []
    inline = la.batch_loader(dataset, "ids", prefetch=0, **kw)
    for epoch in range(2):
        inline.set_epoch(epoch)
        want.append(list(inline))
    read_group = ParquetParts.read_group
    calls, failing = [0], [None]

    def flaky(self, k, columns, keep=True):
        calls[0] += 1
        if failing[0] is not None and failing[0](calls[0]):
            raise ValueError("batch_loader: cannot read row group 0 of 'part': broken")
        return read_group(self, k, columns, keep)

    monkeypatch.setattr(ParquetParts, "read_group", flaky)
    loader = la.batch_loader(dataset, "ids", prefetch=2, **kw)
    _equal_batches(list(loader), want[0])  # epoch 0; epoch 1's first block read ahead
    kept = loader._ahead._kept[1]
    kept.result()
    first_read = calls[0]

    # the read of the next epoch's first block fails once: nothing is raised
    loader.set_epoch(0)
    calls[0] = 0
    failing[0] = lambda n: n == first_read
    _equal_batches(list(loader), want[0])
    assert loader._ahead._kept[1].exception() is not None
    loader.set_epoch(1)
    _equal_batches(list(loader), want[1])

    # from the next epoch's first block on every read fails: the epoch ends whole, the
    # next one raises at its first batch
    loader.set_epoch(0)
    calls[0] = 0
    failing[0] = lambda n: n >= first_read
    _equal_batches(list(loader), want[0])
    loader.set_epoch(1)
    with pytest.raises(ValueError, match="cannot read row group .* broken"):
        next(iter(loader))


def test_a_loader_dropped_is_freed_with_what_it_read_ahead(dataset):
    """No reference cycle through the read-ahead: ``del`` frees the loader, the block kept
    for the next epoch and the thread, without the cycle collector."""
    import gc
    import threading
    import weakref

    def read_ahead_threads():  # the loader's own (a session's Ray, Dask or S3 server may
        return [t for t in threading.enumerate()  # start threads of their own meanwhile)
                if t.name.startswith("lodarrow-read-ahead")]

    before = len(read_ahead_threads())
    gc.disable()
    try:
        loader = la.batch_loader(dataset, "ids", batch_size=16, row_groups=2, seed=4,
                                 progress=False, prefetch=2)
        list(loader)
        kept = loader._ahead._kept[1]
        kept.result()
        gone = weakref.ref(loader)
        del loader
        assert gone() is None
        for _ in range(100):  # the idle thread ends once its pool is dropped
            if len(read_ahead_threads()) <= before:
                break
            threading.Event().wait(0.01)
        assert len(read_ahead_threads()) <= before
    finally:
        gc.enable()


def test_no_read_outlives_its_pass(dataset, monkeypatch):
    """A pass ended or broken off has waited for every read it started: nothing reads
    between passes (a cache cleared, a file replaced, the interpreter exiting)."""
    from lodarrow._training._loader import BatchLoader

    read = BatchLoader._read

    def slow(self, rows):
        time.sleep(0.05)
        return read(self, rows)

    monkeypatch.setattr(BatchLoader, "_read", slow)
    kw = dict(batch_size=16, row_groups=2, seed=4, progress=False, prefetch=2)
    loader = la.batch_loader(dataset, "ids", **kw)
    list(loader)
    assert loader._ahead._kept[1].done()  # the next epoch's first block, read
    loader.set_epoch(1)
    for i, _ in enumerate(loader):
        if i == 1:  # the block after the first is being read
            break
    assert loader._ahead._kept[1].done()


def test_a_pass_broken_off_begins_no_further_row_group(dataset, monkeypatch):
    """A break stops the next block's read at the row group in flight (not the whole block);
    the next pass reads what it needs and its batches are as without reading ahead."""
    from lodarrow._training._source import ParquetParts

    monkeypatch.setenv("LODARROW_NUM_THREADS", "1")  # a block's row groups one by one
    reads, read_group = [], ParquetParts.read_group

    def slow(self, k, columns, keep=True):
        reads.append(k)
        time.sleep(0.05)
        return read_group(self, k, columns, keep)

    kw = dict(batch_size=16, row_groups=4, seed=4, progress=False)
    want = list(la.batch_loader(dataset, "ids", prefetch=0, **kw))
    monkeypatch.setattr(ParquetParts, "read_group", slow)
    loader = la.batch_loader(dataset, "ids", prefetch=2, **kw)
    for _ in loader:
        first = len(reads)  # the first block's row groups; the second block's begun
        break
    begun = len(reads) - first
    it = iter(loader)
    _equal_batches([next(it)], want[1:2])
    second = len(reads) - first - begun  # the second block, read again in full
    assert begun <= 2 < second  # the row group in flight at most (and one after it)
    _equal_batches(list(it), want[2:])


def test_a_pass_waiting_for_a_block_decodes_its_row_groups_left(dataset, monkeypatch):
    """The consumer, reaching a block still being read (and, at the epoch's end, the next
    epoch's first block), decodes row groups of it beside the read-ahead thread: each row
    group read once, the batches as without reading ahead."""
    from lodarrow._training._source import ParquetParts

    # two threads: the read-ahead thread decodes alone (the consumer's left to it), and the
    # consumer may help whatever the machine's load
    monkeypatch.setenv("LODARROW_NUM_THREADS", "2")
    kw = dict(batch_size=16, row_groups=4, seed=4, progress=False)
    inline = la.batch_loader(dataset, "ids", prefetch=0, **kw)
    loader = la.batch_loader(dataset, "ids", prefetch=2, **kw)  # their lengths read, uncounted
    reads, read_group = [], ParquetParts.read_group

    def slow(self, k, columns, keep=True):
        reads.append(threading.current_thread().name.startswith("lodarrow-read-ahead"))
        time.sleep(0.05)
        return read_group(self, k, columns, keep)

    monkeypatch.setattr(ParquetParts, "read_group", slow)
    want = list(inline)
    epoch_reads = len(reads)
    inline.set_epoch(1)
    next(iter(inline))
    next_first = len(reads) - epoch_reads
    del reads[:]
    _equal_batches(list(loader), want)
    assert len(reads) == epoch_reads + next_first  # none twice
    # the first block is read by the consumer as the pass starts, the others ahead: a row
    # group the consumer read after the read-ahead's first is one it helped with
    ahead = reads.index(True)
    assert False in reads[ahead:]


def test_shared_pieces_keep_their_order_and_the_first_error():
    """A read's pieces (:class:`Shared`): results in order whoever decoded them, a helper
    waiting before they are listed takes some (one whose ``may`` says no takes none), the
    first error in order is raised and no piece is begun after it, and a read that ends
    unlisted releases its helpers."""
    from lodarrow._training._readahead import Shared

    def slow(i):
        time.sleep(0.01)
        return i * 10

    shared, took = Shared(), []
    helper = threading.Thread(target=shared.help)
    helper.start()  # waits for the pieces
    refusing = threading.Thread(target=shared.help, args=(lambda: took.append(1) and False,))
    refusing.start()  # asked before each piece: takes none
    assert shared.run(slow, range(12), threads=2) == [i * 10 for i in range(12)]
    for t in (helper, refusing):
        t.join(5)
        assert not t.is_alive()
    assert took == [1]
    shared.help()  # arriving after the read: takes nothing

    begun = []

    def failing(i):
        begun.append(i)
        if i in (2, 4):
            raise ValueError(f"piece {i}")
        return i

    with pytest.raises(ValueError, match="piece 2"):
        Shared().run(failing, range(6))
    assert begun == [0, 1, 2]

    unlisted = Shared()
    helper = threading.Thread(target=unlisted.help)
    helper.start()
    unlisted.close()
    helper.join(5)
    assert not helper.is_alive()


def test_exiting_with_a_pass_open_stops_its_reads(dataset, tmp_path):
    """The interpreter, exiting with a pass still open, waits for no more than the row group
    in flight (the read-ahead's thread is joined at exit)."""
    log = tmp_path / "reads"
    script = f"""
import time
import lodarrow as la
from lodarrow._training._source import ParquetParts

read_group = ParquetParts.read_group

def slow(self, k, columns, keep=True):
    with open({str(log)!r}, "a") as f:
        f.write(f"{{k}}\\n")
    time.sleep(0.1)
    return read_group(self, k, columns, keep)

ParquetParts.read_group = slow
loader = la.batch_loader({dataset!r}, "ids", batch_size=16, row_groups=4, seed=4,
                         progress=False, prefetch=2)
it = iter(loader)
next(it)
with open({str(log)!r}, "a") as f:
    f.write("first\\n")
time.sleep(0.15)  # the next block's read is under way
with open({str(log)!r}, "a") as f:
    f.write("exit\\n")
"""
    env = dict(os.environ, LODARROW_NUM_THREADS="1")
    subprocess.run([sys.executable, "-c", script], check=True, env=env, timeout=120)
    lines = log.read_text().split()
    first, end = lines.index("first"), lines.index("exit")
    assert len(lines) - end - 1 <= 1  # none begun after the one in flight
    # of the next block's row groups (4 a block, row_groups=4) at most 3 were read
    assert 1 <= len(lines) - first - 2 <= 3


@pytest.mark.parametrize("persistent", [False, True])
def test_only_workers_that_outlive_their_pass_read_the_next_epoch_ahead(dataset, tmp_path,
                                                                        monkeypatch,
                                                                        persistent):
    """A worker that exits with its pass (the ``DataLoader`` default) reads no block of the
    next epoch; a persistent one does from its second pass on."""
    torch = pytest.importorskip("torch")
    import multiprocessing

    from lodarrow._training._produce import Producer

    log = tmp_path / "next-pass"
    log.touch()
    read_next = Producer._read_next_pass

    def logged(self, first, stride, next_plan):
        with open(log, "a") as f:
            f.write(f"{os.getpid()}\n")
        return read_next(self, first, stride, next_plan)

    monkeypatch.setattr(Producer, "_read_next_pass", logged)
    kw = dict(batch_size=16, row_groups=2, seed=4, progress=False)
    inline = la.batch_loader(dataset, "ids", prefetch=0, **kw)
    ds = la.batch_loader(dataset, "ids", prefetch=2, **kw).torch()
    data = torch.utils.data.DataLoader(
        ds, batch_size=None, num_workers=2, persistent_workers=persistent,
        multiprocessing_context=multiprocessing.get_context("fork"))
    for epoch in range(3):
        inline.set_epoch(epoch)
        ds.set_epoch(epoch)
        _equal_batches(list(data), list(inline))
    pids = log.read_text().split()
    assert len(pids) == (4 if persistent else 0)  # 2 workers, epochs 1 and 2
    assert os.getpid() not in map(int, pids)


def test_nothing_is_read_ahead_past_the_bound(dataset, monkeypatch):
    from lodarrow._training import _produce

    monkeypatch.setattr(_produce, "_AHEAD_BYTES", 0)
    kw = dict(batch_size=16, row_groups=2, seed=4, progress=False)
    loader = la.batch_loader(dataset, "ids", prefetch=2, **kw)
    list(loader)
    assert loader._ahead._kept is None
    loader.set_epoch(1)
    _equal_batches(list(loader), _parquet_batches(dataset, 0, 1)[1])


def test_workers_forked_while_a_read_is_kept_read_for_themselves(dataset):
    """A process forked from one that read ahead has none of its threads: its workers
    read their own blocks (here, epoch 1's first block kept by the training process)."""
    torch = pytest.importorskip("torch")
    import multiprocessing

    kw = dict(batch_size=16, row_groups=2, seed=4, progress=False)
    loader = la.batch_loader(dataset, "ids", prefetch=2, **kw)
    list(loader)
    assert loader._ahead._kept is not None
    loader.set_epoch(1)
    data = torch.utils.data.DataLoader(
        loader.torch(), batch_size=None, num_workers=2,
        multiprocessing_context=multiprocessing.get_context("fork"))
    _equal_batches(list(data), _parquet_batches(dataset, 0, 1)[1])


@pytest.mark.parametrize("num_workers", [1, 2])
def test_persistent_workers_read_their_next_epochs_first_block_ahead(dataset, num_workers):
    """Each worker reads ahead the first block of its own share of the next epoch; an epoch
    run again or skipped to takes nothing of it."""
    torch = pytest.importorskip("torch")
    kw = dict(batch_size=16, row_groups=2, seed=4, progress=False, to="torch", mode="packed")
    inline = la.batch_loader(dataset, "ids", prefetch=0, **kw)
    dataset_ = la.batch_loader(dataset, "ids", prefetch=2, **kw).torch()
    data = torch.utils.data.DataLoader(dataset_, batch_size=None, num_workers=num_workers,
                                       persistent_workers=True)
    for epoch in (0, 1, 1, 3, 4):
        inline.set_epoch(epoch)
        dataset_.set_epoch(epoch)
        _equal_batches(list(data), list(inline))


def test_modes_and_levels_from_parquet(dataset):
    packed = list(la.batch_loader(dataset, "ids", max_tokens=200, cost="packed",
                                  mode="packed", seed=2))
    assert all(int(b["cu_seqlens"][-1]) <= 200 or len(b["rows"]) == 1 for b in packed)
    assert np.array_equal(np.sort(_rows_of(packed)), np.arange(N))
    rows = list(la.batch_loader(dataset, "ids", max_tokens=256, cost="packed",
                                mode="packed_rows", row_length=64, seed=2))
    assert all(b["values"].shape[1] == 64 for b in rows)


def test_table_source_and_workers_share(dataset):
    table = pq.read_table(dataset)
    loader = la.batch_loader(table, "ids", batch_size=32, extra_columns=["label"], window=100)
    whole = list(loader)
    for b in whole:
        _check_batch(b)
    loader.set_epoch(0)
    plan, _ = loader._epoch_plan()
    parts = [[b for _, b, _ in loader._produce(plan, range(w, plan.steps, 3))] for w in range(3)]
    assert sorted(_rows_of(sum(parts, [])).tolist()) == sorted(_rows_of(whole).tolist())


def test_pytorch_dataloader_two_workers(dataset):
    torch = pytest.importorskip("torch")
    loader = la.batch_loader(dataset, "ids", max_tokens=400, extra_columns=["label"],
                             row_groups=1, to="torch", seed=3)
    dl = torch.utils.data.DataLoader(loader.torch(), batch_size=None, num_workers=2)
    batches = list(dl)
    assert len(batches) == len(loader)
    assert all(isinstance(b["values"], torch.Tensor) for b in batches)
    rows = _rows_of([{"rows": b["rows"].numpy()} for b in batches])
    assert np.array_equal(np.sort(rows), np.arange(N)), "no duplicates, nothing missing"
    for b in batches:
        assert torch.equal(b["label"], b["rows"])


def test_hugging_face_dataset_zero_copy():
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_dict({"ids": [[1, 2, 3], [4], [], [5, 6]], "label": [0, 1, 2, 3]})
    loader = la.batch_loader(ds, "ids", batch_size=2, extra_columns=["label"], shuffle=False,
                             bucket=False)
    table_values = ds.data.table.column("ids").chunk(0).values
    buf = np.frombuffer(table_values.buffers()[1], dtype=np.int64)
    assert np.shares_memory(loader._seqs.values, buf)
    out = list(loader)
    assert [b["values"].tolist() for b in out] == [[[1, 2, 3], [4, 0, 0]], [[0, 0], [5, 6]]]
    assert [b["label"].tolist() for b in out] == [[0, 1], [2, 3]]


def test_progress_bar(dataset, capsys):
    list(la.batch_loader(dataset, "ids", batch_size=64, progress=True))
    err = capsys.readouterr().err
    assert "batch_loader [####################]" in err and "10/10 batches" in err
    assert "tokens/s" in err


def test_progress_bar_ends_its_line_before_the_last_batch_is_used(dataset, capsys):
    """The bar's last state ends with a newline once the last block is read, so what the
    caller prints with the last batch starts a line of its own (not after the bar)."""
    import sys

    for batch in la.batch_loader(dataset, "ids", batch_size=64, progress=True):
        sys.stderr.write("USER\n")
    err = capsys.readouterr().err
    assert err.endswith("\nUSER\n") and err.count("\n") == err.count("USER") + 1
    assert "10/10 batches" in err.splitlines()[-2]


def test_progress_bar_counts_a_batch_with_its_rows_and_clears_the_longer_line():
    """One draw per batch with that batch counted (no count lagging its rows), each redraw
    as wide as the widest before it (no end of a longer line left behind)."""
    import io

    from lodarrow._progress import Progress

    out = io.StringIO()
    bar = Progress(3, 300, True, stream=out, label="batch_loader", unit="batches")
    bar.step_done(10, 100)
    bar._draw(force=True)               # a mid-epoch redraw
    bar.step_done(10, 100)
    bar.step_done(10, 100)              # the last: drawn and its line ended
    bar.close(True)
    text = out.getvalue()
    assert text.endswith("\n") and text.count("\n") == 1
    lines = text.rstrip("\n").split("\r")[1:]
    assert "1/3 batches  10 rows" in lines[0] and "3/3 batches  30 rows" in lines[-1]
    assert all(len(b) >= len(a) for a, b in zip(lines, lines[1:]))


def test_loader_errors(dataset):
    with pytest.raises(ValueError, match="batch_size, max_tokens or both"):
        la.batch_loader(dataset, "ids")
    with pytest.raises(ValueError, match="'nope' is not in"):
        la.batch_loader(dataset, "nope", batch_size=2)
    with pytest.raises(ValueError, match="extra_columns need level=0"):
        la.batch_loader(dataset, "ids", batch_size=2, level=1, extra_columns=["label"])
    with pytest.raises(ValueError, match="rank must be in"):
        la.batch_loader(dataset, "ids", batch_size=2, num_replicas=2, rank=5)
    with pytest.raises(TypeError, match="extra_columns"):
        la.batch_loader(dataset, "ids", batch_size=2, extra_columns="label")


@pytest.mark.parametrize("mode", ["padded", "packed", "packed_rows", "segments", "blocks"])
def test_an_extra_column_may_not_take_a_batch_key(mode):
    """A column named as a key the mode's batches hold (a tokenized dataset's
    ``attention_mask``, a ``lengths`` column), or whose null mask would be one, is refused
    when the loader is made: delivered, it would replace lodarrow's own array in one process
    and be replaced by it from ``DataLoader`` workers."""
    from lodarrow._training._select import BATCH_KEYS

    kw = {"padded": dict(batch_size=2), "packed": dict(batch_size=2),
          "packed_rows": dict(max_tokens=8, row_length=4), "segments": dict(max_tokens=8),
          "blocks": dict(max_tokens=8, row_length=4)}[mode]
    keys = sorted(BATCH_KEYS[mode])
    table = pa.table({"ids": [[1, 2], [3]], "label": [1, None], "label_mask": [1, 1],
                      "attention": [1, 2], **{k: [0, 1] for k in keys}})
    assert {"values", "lengths", "rows", "source"} <= set(keys)
    for k in keys:
        with pytest.raises(ValueError, match=rf"extra_columns\[1\] '{k}' would be delivered "
                                             rf"as the batch key '{k}', which mode='{mode}'"):
            la.batch_loader(table, "ids", mode=mode, extra_columns=["label", k], **kw)
    with pytest.raises(ValueError, match="its null mask is delivered as 'label_mask'"):
        la.batch_loader(table, "ids", mode=mode, extra_columns=["label", "label_mask"], **kw)
    if "attention_mask" in keys:
        with pytest.raises(ValueError, match="where it has nulls, 'attention_mask'"):
            la.batch_loader(table, "ids", mode=mode, extra_columns=["attention"], **kw)
    batch = next(iter(la.batch_loader(table, "ids", mode=mode, progress=False,
                                      extra_columns=["label"], **kw)))
    assert set(batch) <= set(keys) | {"label", "label_mask"}


@pytest.mark.engines
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_ray_data_iter_batches(dataset):
    ray = pytest.importorskip("ray")
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 configure_logging=False)
    try:
        ray.data.DataContext.get_current().enable_progress_bars = False
        ds = ray.data.from_arrow(pq.read_table(dataset))
        batches = list(la.batch_loader(ds, "ids", max_tokens=300, extra_columns=["label"],
                                       window=200))
        for b in batches:
            _check_batch(b, 300, key="label")  # rows are positions in Ray's block
        labels = np.concatenate([b["label"] for b in batches])
        assert np.array_equal(np.sort(labels), np.arange(N))
    finally:
        if started:
            ray.shutdown()


def test_level_one_sequences_from_parquet(tmp_path):
    """Documents of sentences: with level=1 each sentence is a sequence, once per epoch."""
    rng = np.random.default_rng(3)
    docs, token = [], 0
    for _ in range(120):
        doc = []
        for _ in range(int(rng.integers(0, 4))):
            k = int(rng.integers(1, 9))
            doc.append(list(range(token, token + k)))
            token += k
        docs.append(doc)
    pq.write_table(pa.table({"doc": pa.array(docs)}), tmp_path / "d.parquet", row_group_size=25)
    sentences = [s for d in docs for s in d]
    for num_replicas in (1, 2):
        got = []
        for rank in range(num_replicas):
            for b in la.batch_loader(str(tmp_path / "d.parquet"), "doc", level=1,
                                     max_tokens=20, cost="packed", mode="packed",
                                     num_replicas=num_replicas, rank=rank, row_groups=2):
                cu = np.asarray(b["cu_seqlens"])
                assert cu[-1] <= 20 or len(cu) == 2
                values = np.asarray(b["values"])
                for k, row in enumerate(np.asarray(b["rows"])):
                    assert values[cu[k]:cu[k + 1]].tolist() == sentences[row]
                got.extend(np.asarray(b["rows"]).tolist())
        assert sorted(got) == list(range(len(sentences)))


def test_token_balance_evens_ranks_from_parquet(dataset):
    """balance="tokens": cells of equal tokens and steps of matched batches; still every
    sequence once and as many batches per rank."""
    spread = {}
    for balance in ("batches", "tokens"):
        plans = [la.batch_loader(dataset, "ids", max_tokens=300, row_groups=1, seed=2,
                                 num_replicas=3, rank=r, balance=balance).plan()
                 for r in range(3)]
        rows = np.concatenate([p.indices for p in plans])
        assert np.array_equal(np.sort(rows), np.arange(N))
        assert len({len(p) for p in plans}) == 1
        per_step = np.stack([p.tokens for p in plans])
        spread[balance] = np.median(per_step.max(0) / per_step.mean(0))
    assert spread["tokens"] <= spread["batches"]


def test_reading_parquet_does_not_import_pandas(dataset, tmp_path):
    """pyarrow imports pandas, where installed, at its first ``pa.array``, ``pa.scalar`` or
    ``to_numpy`` (a few tenths of a second); a loader over Parquet files never needs it: not
    to start, not for its batches in any mode, not to resume, not for extra columns with
    nulls or null values read as 0."""
    pytest.importorskip("pandas")
    nulls = str(tmp_path / "nulls.parquet")
    ids = pa.array([[1, 2], [3, None], [4], [5, 6, 7], [None], [8]] * 100,
                   pa.list_(pa.int32()))
    pq.write_table(pa.table({"ids": ids, "y": pa.array([1, None, 3, 4, None, 6] * 100),
                             "ok": pa.array([True, None, False, True, True, None] * 100),
                             "f": pa.array([0.5, 1.5, None, 2.5, 3.5, 4.5] * 100, pa.float16())}),
                   nulls, row_group_size=100)
    script = f"""
import sys
import lodarrow as la

shapes = [dict(batch_size=16), dict(batch_size=16, mode="packed"),
          dict(mode="packed_rows", row_length=64, max_tokens=256),
          dict(mode="segments", max_tokens=256, pad_to_multiple_of=256),
          dict(mode="blocks", row_length=64, max_tokens=256)]
sources = [({dataset!r}, [[], ["label"]], {{}}),
           ({nulls!r}, [["y", "ok", "f"]], dict(nulls="drop"))]
for path, extras, more in sources:
    for kw in shapes:
        for extra in extras:
            args = dict(extra_columns=extra, seed=1, progress=False, row_groups=2, **more, **kw)
            loader = la.batch_loader(path, "ids", **args)
            it = iter(loader)
            next(it)
            state = loader.state_dict()
            for batch in it:
                pass
            again = la.batch_loader(path, "ids", **args)
            again.load_state_dict(state)
            next(iter(again))
            assert "pandas" not in sys.modules, (path, kw, extra)
print("ok")
"""
    env = dict(os.environ, LODARROW_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", script], env=env, timeout=120,
                         capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
