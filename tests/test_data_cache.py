"""The local cache of remote corpora (docs/training.md#a-local-cache-for-remote-corpora).

On the local S3 server (moto's server mode, conftest.py), with the bytes fetched counted: a
second epoch fetches nothing, and runs with the object store stopped; the size limit holds
while entries are evicted; several processes (ranks) share one cache directory at once and
every byte it holds is the object's; a changed object is never served from the old copy; a
read the column chunk ranges did not foresee is fetched, never read from a hole.
"""

import itertools
import json
import os
import sys

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

import lodarrow as la
from lodarrow._tables import _data_cache
from lodarrow._tables._data_cache import DataCache, column_chunk_ranges
from lodarrow._training._source import ParquetParts
from test_remote_sources import CountingHandler, token_table, upload

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX file locks")

#: The loader's arguments in these tests (an extra column: two columns read per row group).
ARGS = dict(max_tokens=400, seed=3, extra_columns=["label"])


@pytest.fixture
def files(tmp_path):
    """Three Parquet files written by pyarrow (no recorded lengths), 4 row groups each, with a
    wide column no reader here asks for."""
    rng = np.random.default_rng(7)
    root = tmp_path / "local"
    root.mkdir()
    for k in range(3):
        table, _ = token_table(rng, 480)
        pq.write_table(table, root / f"part-{k}.parquet", row_group_size=120)
    return root


def _read_bytes(files):
    """The bytes a loader of ``ARGS`` reads: its columns' chunks, every row group."""
    total = 0
    for path in sorted(files.glob("*.parquet")):
        meta = pq.read_metadata(path)
        for g in range(meta.num_row_groups):
            total += sum(b - a for a, b in column_chunk_ranges(meta, g, ["ids", "label"]))
    return total


def _same_batches(a, b):
    n = 0
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x["values"], y["values"])
        np.testing.assert_array_equal(x["label"], y["label"])
        n += 1
    assert n > 0


def _entries(cache):
    """``{file name: ranges}`` of the entries under ``cache``, and usage.json's bytes."""
    root = os.path.join(cache, "data-v1")
    out = {}
    for name in os.listdir(root):
        if name.endswith(".json") and name != "usage.json":
            with open(os.path.join(root, name)) as f:
                idx = json.load(f)
            assert not idx["pending"], idx  # no reservation is left behind
            out[idx["name"]] = (name[:-5], [tuple(r) for r in idx["ranges"]])
    usage = 0  # none written yet: nothing was ever kept
    if os.path.exists(os.path.join(root, "usage.json")):
        with open(os.path.join(root, "usage.json")) as f:
            usage = json.load(f)["bytes"]
    return out, usage


def _check_copies(cache, local):
    """Every byte an index vouches for is the object's; usage.json is the bytes present.
    Returns the bytes present."""
    entries, usage = _entries(cache)
    present = 0
    for name, (key, ranges) in entries.items():
        original = (local / name.split(" (on ")[0].rpartition("/")[2]).read_bytes()
        with open(os.path.join(cache, "data-v1", f"{key}.data"), "rb") as f:
            copy = f.read()
        assert len(copy) == len(original)
        for a, b in ranges:
            assert copy[a:b] == original[a:b], (name, a, b)
            present += b - a
    assert usage == present
    return present


@pytest.fixture
def own_s3(monkeypatch):
    """``(filesystem, bucket, stop)``: a bucket on an S3 server of this test's own, and what
    stops the server (the object store goes away mid-test)."""
    server = pytest.importorskip("moto.server", reason="needs moto[server] (the test extra)")
    # port 0: the server binds a free port itself (a port found free and bound later could
    # be taken in between by another process, and the server's start would wait forever)
    srv = server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    srv.start()
    port = srv.get_host_and_port()[1]
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    fs = pafs.S3FileSystem(access_key="testing", secret_key="testing", region="us-east-1",
                           endpoint_override=f"127.0.0.1:{port}", scheme="http",
                           allow_bucket_creation=True, connect_timeout=1, request_timeout=30,
                           retry_strategy=pafs.AwsDefaultS3RetryStrategy(max_attempts=1))
    fs.create_dir("stopped")
    stopped = []

    def stop():
        srv.stop()
        stopped.append(True)

    yield fs, "stopped", stop
    if not stopped:
        srv.stop()


# ---------------------------------------------------------------------------- epochs
def test_second_epoch_fetches_nothing_and_runs_with_the_store_stopped(files, own_s3, tmp_path):
    fs, bucket, stop = own_s3
    upload(files, fs, f"{bucket}/corpus")
    handler = CountingHandler(fs)
    cache = tmp_path / "cache"
    remote = la.batch_loader(f"{bucket}/corpus", "ids", filesystem=pafs.PyFileSystem(handler),
                             cache_dir=cache, cache_bytes=1 << 30, **ARGS)
    here = la.batch_loader(files, "ids", cache_dir=False, **ARGS)
    _same_batches(remote, here)
    first = handler.counter["bytes"]
    counts = remote._parts.cache.counters()
    # the lengths pass and epoch 0 fetched each needed column chunk once, and only those
    assert counts["fetched_bytes"] == counts["stored_bytes"] == _read_bytes(files) < first
    assert counts["unplanned_bytes"] == counts["uncached_bytes"] == 0
    assert _check_copies(cache, files) == _read_bytes(files)

    stop()  # the object store goes away: epoch 1 reads the local copies only
    handler.reset()
    for epoch in (1, 2):
        remote.set_epoch(epoch)
        here.set_epoch(epoch)
        _same_batches(remote, here)
    assert handler.counter["bytes"] == handler.counter["reads"] == 0
    assert remote._parts.cache.counters()["fetched_bytes"] == counts["fetched_bytes"]
    # without the cache the same epoch needs the store
    remote._parts.cache = None
    remote.set_epoch(3)
    with pytest.raises(ValueError, match=rf"cannot read row group \d+ of '{bucket}/corpus/part"):
        list(remote)


def test_a_later_run_reads_the_cache_and_a_local_source_is_never_cached(files, s3, tmp_path):
    fs, bucket = s3
    upload(files, fs, f"{bucket}/corpus")
    cache = tmp_path / "cache"
    # the same filesystem each run: an entry is named by the file's URI (or path and
    # filesystem), as the lengths cache's entries are
    first = la.batch_loader(f"{bucket}/corpus", "ids",
                            filesystem=pafs.PyFileSystem(CountingHandler(fs)), cache_dir=cache,
                            cache_bytes=1 << 30, **ARGS)
    list(first)
    handler = CountingHandler(fs)
    later = la.batch_loader(f"{bucket}/corpus", "ids", filesystem=pafs.PyFileSystem(handler),
                            cache_dir=cache, cache_bytes=1 << 30, **ARGS)
    start = handler.counter["bytes"]  # each file's listing and tail: its fingerprint
    assert start <= 3 * (64 << 10)
    _same_batches(later, la.batch_loader(files, "ids", cache_dir=False, **ARGS))
    assert handler.counter["bytes"] == start
    assert later._parts.cache.counters()["fetched_bytes"] == 0

    local = la.batch_loader(files, "ids", cache_dir=tmp_path / "other", cache_bytes=1 << 30,
                            **ARGS)
    assert local._parts.cache is None
    list(local)
    assert not (tmp_path / "other" / "data-v1").exists()



def test_a_remote_source_through_the_decoded_cache_reads_only_footers_later(files, s3,
                                                                             tmp_path):
    """decoded_cache=True over a remote corpus (docs/training.md#a-decoded-cache): the first
    run fetches and decodes; a later run fetches only each file's listing and tail."""
    fs, bucket = s3
    upload(files, fs, f"{bucket}/corpus")
    cache = tmp_path / "cache"
    want = la.batch_loader(files, "ids", cache_dir=False, **ARGS)
    first = la.batch_loader(f"{bucket}/corpus", "ids",
                            filesystem=pafs.PyFileSystem(CountingHandler(fs)), cache_dir=cache,
                            decoded_cache=True, **ARGS)
    _same_batches(first, want)
    handler = CountingHandler(fs)
    later = la.batch_loader(f"{bucket}/corpus", "ids", filesystem=pafs.PyFileSystem(handler),
                            cache_dir=cache, decoded_cache=True, **ARGS)
    start = handler.counter["bytes"]
    assert start <= 3 * (64 << 10)
    for epoch in (0, 1):
        later.set_epoch(epoch)
        want.set_epoch(epoch)
        _same_batches(later, want)
    assert handler.counter["bytes"] == start  # no column chunk fetched


# ---------------------------------------------------------------------------- the limit
def test_the_size_limit_holds_under_eviction(files, s3, tmp_path):
    fs, bucket = s3
    upload(files, fs, f"{bucket}/corpus")
    cache = tmp_path / "cache"
    need = _read_bytes(files)
    limit = need // 2  # one file's chunks and a half
    # prefetch=0: no batch is being made while the test reads the directory
    remote = la.batch_loader(f"s3://{bucket}/corpus", "ids", cache_dir=cache, cache_bytes=limit,
                             prefetch=0, **ARGS)
    here = la.batch_loader(files, "ids", cache_dir=False, **ARGS)
    for epoch in range(3):
        remote.set_epoch(epoch)
        here.set_epoch(epoch)
        for x, y in zip(remote, here, strict=True):
            np.testing.assert_array_equal(x["values"], y["values"])
            present = _check_copies(cache, files)
            assert present <= limit
        blocks = sum(os.stat(cache / "data-v1" / n).st_blocks * 512
                     for n in os.listdir(cache / "data-v1") if n.endswith(".data"))
        assert blocks <= limit + 2 * 4096 * 3 * 4 * 2  # sparse files: each range's edges
    counts = remote._parts.cache.counters()
    assert counts["evicted_entries"] > 0
    assert counts["stored_bytes"] > need  # what was evicted came back
    assert counts["cached_bytes"] > 0


def test_row_groups_larger_than_the_limit_are_read_uncached(files, s3, tmp_path):
    fs, bucket = s3
    upload(files, fs, f"{bucket}/corpus")
    cache = tmp_path / "cache"
    remote = la.batch_loader(f"s3://{bucket}/corpus", "ids", cache_dir=cache, cache_bytes=100,
                             **ARGS)
    _same_batches(remote, la.batch_loader(files, "ids", cache_dir=False, **ARGS))
    counts = remote._parts.cache.counters()
    assert counts["stored_bytes"] == 0 and counts["uncached_bytes"] == counts["fetched_bytes"]
    assert _entries(cache)[1] == 0


# ---------------------------------------------------------------------------- processes
_RANK = r"""
import json, sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow.fs as pafs
import lodarrow as la
from lodarrow._tables._data_cache import DataCache
from lodarrow._training._source import ParquetParts

endpoint, bucket, local, cache = sys.argv[1:5]
limit, rank, world = map(int, sys.argv[5:8])
fs = pafs.S3FileSystem(access_key="testing", secret_key="testing", region="us-east-1",
                       endpoint_override=endpoint, scheme="http")
args = dict(max_tokens=400, seed=3, extra_columns=["label"], num_replicas=world, rank=rank)
remote = la.batch_loader(f"{bucket}/corpus", "ids", filesystem=fs, cache_dir=cache,
                         cache_bytes=limit, **args)
here = la.batch_loader(local, "ids", cache_dir=False, **args)
for epoch in range(2):
    remote.set_epoch(epoch)
    here.set_epoch(epoch)
    for x, y in zip(remote, here, strict=True):
        assert np.array_equal(x["values"], y["values"]) and np.array_equal(x["label"], y["label"])
# every row group in an order of this rank's, two threads at once, other columns too
parts = ParquetParts(f"{bucket}/corpus", "x", filesystem=fs, cache=DataCache(limit, cache))
mine = ParquetParts(local, "x")
order = np.random.default_rng(rank).permutation(np.tile(np.arange(len(parts.parts)), 2))
columns = [["ids", "label"], ["label"], ["emb"]]

def check(k):
    cols = columns[(k + rank) % 3]
    assert parts.read_group(k, cols).equals(mine.read_group(k, cols)), (rank, k, cols)

with ThreadPoolExecutor(2) as pool:
    list(pool.map(check, order))
counts = {k: a + b for (k, a), b in zip(remote._parts.cache.counters().items(),
                                        parts.cache.counters().values())}
print(json.dumps(counts))
"""


@pytest.mark.parametrize("room", ["roomy", "tight"])
def test_several_processes_share_one_cache(files, s3, s3_endpoint, tmp_path, room):
    import subprocess

    fs, bucket = s3
    upload(files, fs, f"{bucket}/corpus")
    cache = tmp_path / "cache"
    whole = sum(os.path.getsize(p) for p in files.glob("*.parquet"))
    limit = 2 * whole if room == "roomy" else whole // 3
    script = tmp_path / "rank.py"
    script.write_text(_RANK)
    world = 3
    from pathlib import Path

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        filter(None, [str(Path(la.__file__).parent.parent), os.environ.get("PYTHONPATH")])),
        LODARROW_NUM_THREADS="1")
    procs = [subprocess.Popen([sys.executable, str(script), s3_endpoint.split("://")[1],
                               bucket, str(files), str(cache), str(limit), str(rank),
                               str(world)], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
             for rank in range(world)]
    counts = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-3000:]
        counts.append(json.loads(out.strip().splitlines()[-1]))
    present = _check_copies(cache, files)  # every byte held is the object's
    assert present <= limit
    assert all(c["unplanned_bytes"] == 0 for c in counts)
    if room == "tight":
        assert sum(c["evicted_entries"] for c in counts) > 0
        return
    assert sum(c["evicted_entries"] for c in counts) == 0
    # every rank's next epoch, in this process: nothing is fetched
    for rank in range(world):
        args = dict(ARGS, num_replicas=world, rank=rank)
        remote = la.batch_loader(f"{bucket}/corpus", "ids", filesystem=fs, cache_dir=cache,
                                 cache_bytes=limit, **args)
        remote.set_epoch(2)
        here = la.batch_loader(files, "ids", cache_dir=False, **args)
        here.set_epoch(2)
        _same_batches(remote, here)
        counts = remote._parts.cache.counters()
        assert counts["fetched_bytes"] == 0 and counts["cached_bytes"] > 0


def test_a_process_that_died_mid_write_leaves_no_lasting_reservation(files, s3, tmp_path):
    fs, bucket = s3
    upload(files, fs, f"{bucket}/corpus")
    cache = tmp_path / "cache"
    list(la.batch_loader(f"s3://{bucket}/corpus", "ids", cache_dir=cache, cache_bytes=1 << 30,
                         **ARGS))
    entries, usage = _entries(cache)
    key = entries[f"s3://{bucket}/corpus/part-2.parquet"][0]  # not the entry read below
    path = cache / "data-v1" / f"{key}.json"
    idx = json.loads(path.read_text())
    idx["pending"] = {"dead": 10 << 20}  # reserved, never written: the writer was killed
    path.write_text(json.dumps(idx))
    ledger = json.loads((cache / "data-v1" / "usage.json").read_text())
    ledger["bytes"] += 10 << 20
    (cache / "data-v1" / "usage.json").write_text(json.dumps(ledger))
    # the next process short of room counts again before it evicts: the room was there
    meta = pq.read_metadata(files / "part-0.parquet")
    emb = sum(b - a for a, b in column_chunk_ranges(meta, 0, ["emb"]))
    cache_obj = DataCache(usage + emb + 1000, cache)
    parts = ParquetParts(f"s3://{bucket}/corpus", "x", cache=cache_obj)
    parts.read_group(0, ["emb"])
    counts = cache_obj.counters()
    assert counts["stored_bytes"] == emb and counts["evicted_entries"] == 0
    assert _check_copies(cache, files) == usage + emb


# ---------------------------------------------------------------------------- staleness
def test_a_changed_object_is_not_served_stale(files, s3, tmp_path):
    fs, bucket = s3
    upload(files, fs, f"{bucket}/corpus")
    cache = tmp_path / "cache"
    counting = pafs.PyFileSystem(CountingHandler(fs))
    list(la.batch_loader(f"{bucket}/corpus", "ids", filesystem=counting, cache_dir=cache,
                         cache_bytes=1 << 30, **ARGS))
    # the same name, other rows of the same shape
    table, _ = token_table(np.random.default_rng(99), 480)
    pq.write_table(table, files / "part-1.parquet", row_group_size=120)
    with fs.open_output_stream(f"{bucket}/corpus/part-1.parquet") as out:
        out.write((files / "part-1.parquet").read_bytes())
    handler = CountingHandler(fs)
    again = la.batch_loader(f"{bucket}/corpus", "ids", filesystem=pafs.PyFileSystem(handler),
                            cache_dir=cache, cache_bytes=1 << 30, **ARGS)
    _same_batches(again, la.batch_loader(files, "ids", cache_dir=False, **ARGS))
    counts = again._parts.cache.counters()
    meta = pq.read_metadata(files / "part-1.parquet")
    changed = sum(sum(b - a for a, b in column_chunk_ranges(meta, g, ["ids", "label"]))
                  for g in range(meta.num_row_groups))
    assert counts["fetched_bytes"] == changed  # the new object only; the others from cache
    # the old copy's entry stays (under its old fingerprint's name), evicted in its turn
    names = os.listdir(cache / "data-v1")
    assert sum(n.endswith(".data") for n in names) == 4


def test_an_object_rewritten_under_a_loader_is_refused_not_mixed(files, tmp_path):
    """An object rewritten after the loader read its footer (another size) fails the read
    that would fetch its row groups, naming it, instead of filling the copy with another
    version's bytes at the old footer's offsets."""
    store = pafs.SubTreeFileSystem(str(files), pafs.LocalFileSystem())  # read as remote
    loader = la.batch_loader(".", "ids", filesystem=store, cache_dir=tmp_path / "cache",
                             cache_bytes=1 << 30, prefetch=0, **ARGS)
    assert loader._parts.cache is not None
    table, _ = token_table(np.random.default_rng(99), 300)  # fewer rows: a smaller object
    pq.write_table(table, files / "part-1.parquet", row_group_size=120)
    with pytest.raises(ValueError, match=r"part-1\.parquet.*': changed after the loader read "
                                         r"its footer \(\d+ bytes then, \d+ now\).*new loader"):
        list(loader)


# ---------------------------------------------------------------------------- safety nets
def test_a_read_no_range_foresaw_is_fetched_not_read_from_a_hole(files, s3, tmp_path,
                                                                  monkeypatch):
    fs, bucket = s3
    upload(files, fs, f"{bucket}/corpus")
    monkeypatch.setattr(_data_cache, "column_chunk_ranges", lambda meta, g, columns: [])
    cache = DataCache(1 << 30, tmp_path / "cache")
    parts = ParquetParts(f"s3://{bucket}/corpus", "x", cache=cache)
    mine = ParquetParts(files, "x")
    for k in range(len(parts.parts)):
        assert parts.read_group(k, ["ids"]).equals(mine.read_group(k, ["ids"]))
    counts = cache.counters()
    assert counts["unplanned_bytes"] == counts["fetched_bytes"] > 0
    for k in range(len(parts.parts)):  # now kept
        assert parts.read_group(k, ["ids"]).equals(mine.read_group(k, ["ids"]))
    assert cache.counters()["fetched_bytes"] == counts["fetched_bytes"]


def test_a_local_failure_reads_from_the_store_with_a_warning(files, s3, tmp_path,
                                                             monkeypatch):
    fs, bucket = s3
    upload(files, fs, f"{bucket}/corpus")

    def full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fdatasync", full)
    cache = DataCache(1 << 30, tmp_path / "cache")
    parts = ParquetParts(f"s3://{bucket}/corpus", "x", cache=cache)
    mine = ParquetParts(files, "x")
    with pytest.warns(RuntimeWarning, match="cannot keep what it fetches.*No space left"):
        for k in range(len(parts.parts)):
            assert parts.read_group(k, ["ids"]).equals(mine.read_group(k, ["ids"]))
    counts = cache.counters()
    assert counts["stored_bytes"] == 0 and counts["uncached_bytes"] == counts["fetched_bytes"]
    assert _check_copies(tmp_path / "cache", files) == 0  # no index vouches for a byte


# ---------------------------------------------------------------------------- clearing
def test_clear_data_cache_leaves_the_entries_in_use(files, s3, tmp_path):
    fs, bucket = s3
    upload(files, fs, f"{bucket}/corpus")
    cache = tmp_path / "cache"
    loader = la.batch_loader(f"s3://{bucket}/corpus", "ids", cache_dir=cache,
                             cache_bytes=1 << 30, **ARGS)
    list(loader)
    fp = loader._parts.fingerprints[0]
    with loader._parts.cache._pinned(fp.key(), "test"):  # a process reading it now
        assert la.clear_data_cache(cache) == 2
    entries, usage = _entries(cache)
    assert list(entries) == [fp.name] and usage == _check_copies(cache, files) > 0
    assert la.clear_data_cache(cache) == 1
    assert _entries(cache) == ({}, 0)
    assert la.clear_data_cache(tmp_path / "none") == 0
    assert not (tmp_path / "none").exists()


# ---------------------------------------------------------------------------- arguments
def test_cache_bytes_is_checked():
    table = pa.table({"x": pa.array([[1], [2, 3]])})
    with pytest.raises(TypeError, match="batch_loader: cache_bytes must be an integer, got str"):
        la.batch_loader(table, "x", batch_size=1, cache_bytes="10GB")
    with pytest.raises(TypeError, match="cache_bytes must be an integer, got bool"):
        la.batch_loader(table, "x", batch_size=1, cache_bytes=True)
    with pytest.raises(ValueError, match="cache_bytes must be >= 1, got 0"):
        la.batch_loader(table, "x", batch_size=1, cache_bytes=0)
    with pytest.raises(ValueError, match="cache_bytes=100 keeps remote row groups in the cache "
                                         "directory, but cache_dir=False"):
        la.batch_loader(table, "x", batch_size=1, cache_bytes=100, cache_dir=False)
    with pytest.raises(TypeError, match="clear_data_cache: cache_dir must be a path"):
        la.clear_data_cache(3)


# ---------------------------------------------------------------------------- ranges
_RANGES = st.lists(st.tuples(st.integers(0, 200), st.integers(0, 40)), max_size=8).map(
    lambda xs: [(a, a + n) for a, n in xs])


def _bytes_of(ranges):
    return {i for a, b in ranges for i in range(a, b)}


@given(_RANGES, _RANGES, st.integers(0, 10))
def test_range_arithmetic(a, b, hole):
    merged = _data_cache._merge(a)
    assert _bytes_of(merged) == _bytes_of(a)
    assert all(x[1] < y[0] for x, y in itertools.pairwise(merged))  # disjoint, not touching
    have = _data_cache._merge(b)
    missing = _data_cache._subtract(merged, have)
    assert _bytes_of(missing) == _bytes_of(a) - _bytes_of(b)
    coalesced = _data_cache._merge(missing, hole)
    assert _bytes_of(coalesced) >= _bytes_of(missing)
    assert all(y[0] - x[1] > hole for x, y in itertools.pairwise(coalesced))
    for i in range(0, 250, 7):
        found = _data_cache._covering(have, i)
        assert (found is not None) == (i in _bytes_of(b))


# ---------------------------------------------------------------------------- integrity
def test_a_damaged_local_copy_is_fetched_again_never_served(s3, tmp_path):
    """Bits flipped in a cached uncompressed column chunk would read as other token ids,
    silently: each piece of the copy is kept with its checksum, checked when read; a damaged
    one is dropped from the index and fetched again."""
    fs, bucket = s3
    rng = np.random.default_rng(11)
    root = tmp_path / "local"
    root.mkdir()
    table, _ = token_table(rng, 480, extra=False)
    pq.write_table(table, root / "plain.parquet", row_group_size=120, compression="none",
                   use_dictionary=False)
    upload(root, fs, f"{bucket}/plain")
    cache = tmp_path / "cache"
    args = dict(max_tokens=400, seed=3, extra_columns=["label"], cache_dir=cache,
                cache_bytes=1 << 30)
    remote = la.batch_loader(f"s3://{bucket}/plain", "ids", **args)
    here = la.batch_loader(str(root), "ids", cache_dir=False, max_tokens=400, seed=3,
                           extra_columns=["label"])
    _same_batches(remote, here)
    entries, _ = _entries(cache)
    key, _ = entries[f"s3://{bucket}/plain/plain.parquet"]
    data = cache / "data-v1" / f"{key}.data"
    raw = bytearray(data.read_bytes())
    # 16 bits flipped in the values of row group 0's token ids (the page's end: past its
    # header and levels), as a bad disk would
    (a, b), = column_chunk_ranges(pq.read_metadata(root / "plain.parquet"), 0, ["ids"])
    for k in range(16):
        raw[a + (b - a) * (k + 20) // 40] ^= 1 << (k % 8)
    data.write_bytes(bytes(raw))
    reader = la.batch_loader(f"s3://{bucket}/plain", "ids", **args)
    for epoch in (1, 2):
        reader.set_epoch(epoch)
        here.set_epoch(epoch)
        _same_batches(reader, here)
    counts = reader._parts.cache.counters()
    assert counts["damaged_bytes"] > 0 and counts["fetched_bytes"] > 0
    assert _check_copies(cache, root) > 0  # repaired: every byte vouched for is right


_TOGETHER = r"""
import json, os, sys, time

import pyarrow.fs as pafs
from lodarrow._tables import _data_cache
from lodarrow._tables._data_cache import DataCache
from lodarrow._training._source import ParquetParts

endpoint, bucket, cache, folder, rank = sys.argv[1:6]
fs = pafs.S3FileSystem(access_key="testing", secret_key="testing", region="us-east-1",
                       endpoint_override=endpoint, scheme="http")
opened = _data_cache.open_input


class Slow:  # each fetch takes a while: every process is under way at once
    def __init__(self, f):
        self.f = f

    def read_at(self, n, at):
        time.sleep(0.5)
        return self.f.read_at(n, at)

    def __getattr__(self, name):
        return getattr(self.f, name)


_data_cache.open_input = lambda *a: Slow(opened(*a))
cache = DataCache(1 << 30, cache)
parts = ParquetParts(f"{bucket}/corpus", "x", filesystem=fs, cache=cache)
open(os.path.join(folder, f"ready-{rank}"), "w").close()
while not os.path.exists(os.path.join(folder, "go")):
    time.sleep(0.005)
for k in range(2):
    parts.read_group(k, ["ids"])
print(json.dumps(cache.counters()))
"""


def test_processes_starting_together_fetch_each_range_once(files, s3, s3_endpoint, tmp_path):
    """Three processes on one cache directory that need the same row groups at once (ranks
    started together, each reading the sequence column) fetch each range once: the first
    takes the range's fetch lock, the others wait for it and read what it kept."""
    import subprocess
    import time
    from pathlib import Path

    fs, bucket = s3
    upload(files, fs, f"{bucket}/corpus")
    script = tmp_path / "together.py"
    script.write_text(_TOGETHER)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        filter(None, [str(Path(la.__file__).parent.parent), os.environ.get("PYTHONPATH")])))
    procs = [subprocess.Popen([sys.executable, str(script), s3_endpoint.split("://")[1],
                               bucket, str(tmp_path / "cache"), str(tmp_path), str(rank)],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for rank in range(3)]
    deadline = time.monotonic() + 120
    while not all((tmp_path / f"ready-{r}").exists() for r in range(3)):
        assert time.monotonic() < deadline and all(p.poll() is None for p in procs), \
            [p.communicate()[1][-2000:] for p in procs if p.poll() is not None]
        time.sleep(0.01)
    (tmp_path / "go").touch()
    counts = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err[-3000:]
        counts.append(json.loads(out.strip().splitlines()[-1]))
    meta = pq.read_metadata(files / "part-0.parquet")
    once = sum(b - a for g in range(2) for a, b in column_chunk_ranges(meta, g, ["ids"]))
    assert sum(c["fetched_bytes"] for c in counts) == once
    assert sum(c["cached_bytes"] for c in counts) >= 2 * once  # the others read the copy
    assert _check_copies(tmp_path / "cache", files) == once
