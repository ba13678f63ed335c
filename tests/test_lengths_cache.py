"""The lengths cache and the sidecars of lodarrow's writers (docs/training.md#lengths-cache).

What is checked: a cached or recorded start reads no column and gives the decoded lengths
(every level, null rows included); a changed file is never served stale lengths (size,
modification time, footer); entries are whole under concurrent writers; the directory's
resolution and clearing; the Parquet files are byte-for-byte the same with or without
sidecars, and other readers see the same rows.
"""

import json
import multiprocessing
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lodarrow as la
from lodarrow._tables._lengths_store import (LengthsStore, cache_root, fingerprint,
                                             read_sidecar, sidecar_path)
from lodarrow._training import _source


def reference_lengths(pylist, level, depth):
    """Tokens per level-``level`` sequence of a nested Python list column of ``depth`` list
    levels (None: empty, and its children do not exist)."""
    def tokens(x, depth):
        if x is None:
            return 0
        return len(x) if depth == 1 else sum(tokens(y, depth - 1) for y in x)

    def sequences(rows, lv):
        if lv == 0:
            return [r for r in rows]
        return [s for r in rows if r is not None for s in sequences(r, lv - 1)]

    return np.array([tokens(s, depth - level) for s in sequences(pylist, level)], np.int64)


@pytest.fixture
def no_decoding(monkeypatch):
    """Make any read of a row group's column fail: what a cached start must not do."""
    def refuse(self, k, columns):
        raise AssertionError(f"row group {k} was read: {columns}")

    monkeypatch.setattr(_source.ParquetParts, "read_group", refuse)


def write_tokens(path, n, seed=0, row_group_size=1000, nulls=False):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 30, n)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    mask = None
    if nulls:
        mask = pa.array(rng.random(n) < 0.1)
    ids = pa.ListArray.from_arrays(pa.array(offsets), pa.array(
        rng.integers(0, 1000, offsets[-1]), pa.int32()), mask=mask)
    pq.write_table(pa.table({"ids": ids}), path, row_group_size=row_group_size)
    out = lengths.copy()
    if nulls:
        out[np.asarray(mask)] = 0
    return out, (np.flatnonzero(np.asarray(mask)) if nulls else np.zeros(0, np.int64))


# ---------------------------------------------------------------------------- the cache
def test_cached_start_reads_no_column(tmp_path, monkeypatch):
    path = tmp_path / "a.parquet"
    want, _ = write_tokens(path, 5000)
    cache = tmp_path / "cache"
    np.testing.assert_array_equal(la.sequence_lengths(path, cache_dir=cache), want)
    entries = list((cache / "lengths-v1").rglob("*.lengths"))
    assert len(entries) == 1  # one entry per file, column and level
    monkeypatch.setattr(_source.ParquetParts, "read_group",
                        lambda *a: (_ for _ in ()).throw(AssertionError("decoded")))
    np.testing.assert_array_equal(la.sequence_lengths(path, cache_dir=cache), want)
    np.testing.assert_array_equal(la.sequence_lengths(str(path), "ids", cache_dir=cache), want)
    with pytest.raises(AssertionError, match="decoded"):  # no cache: decoded
        la.sequence_lengths(path, cache_dir=False)


def test_a_changed_file_is_decoded_again(tmp_path):
    path = tmp_path / "a.parquet"
    cache = tmp_path / "cache"
    first, _ = write_tokens(path, 3000, seed=1)
    np.testing.assert_array_equal(la.sequence_lengths(path, cache_dir=cache), first)
    stat = os.stat(path)
    # other lengths in a file of the same size and modification time: the footer differs
    second, _ = write_tokens(path, 3000, seed=2)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert not np.array_equal(first, second)
    np.testing.assert_array_equal(la.sequence_lengths(path, cache_dir=cache), second)
    # the same bytes touched: a new fingerprint (the entry is decoded and written again)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    np.testing.assert_array_equal(la.sequence_lengths(path, cache_dir=cache), second)
    assert len(list((cache / "lengths-v1").rglob("*.lengths"))) == 3  # stale ones never read
    assert la.clear_lengths_cache(cache) == 3
    assert not (cache / "lengths-v1").exists()
    assert la.clear_lengths_cache(cache) == 0


def test_fingerprint_names_what_identifies_a_file(tmp_path):
    path = tmp_path / "a.parquet"
    write_tokens(path, 100)
    fp, meta = fingerprint(str(path))
    assert fp.size == os.path.getsize(path) and fp.mtime_ns == os.stat(path).st_mtime_ns
    assert fp.num_row_groups == meta.num_row_groups == 1 and len(fp.footer) == 64
    assert fp.key() == fingerprint(str(path))[0].key()
    with pytest.raises(FileNotFoundError, match=r"sequence_lengths: cannot open '.*nope'"):
        fingerprint(str(tmp_path / "nope"))


def test_null_rows_are_kept_with_the_lengths(tmp_path, monkeypatch):
    path = tmp_path / "n.parquet"
    cache = tmp_path / "cache"
    want, nulls = write_tokens(path, 4000, nulls=True, row_group_size=700)
    cold = la.batch_loader(path, "ids", batch_size=64, nulls="drop", cache_dir=cache)
    monkeypatch.setattr(_source.ParquetParts, "read_group",
                        lambda *a: (_ for _ in ()).throw(AssertionError("decoded")))
    warm = la.batch_loader(path, "ids", batch_size=64, nulls="drop", cache_dir=cache)
    assert warm.statistics()["dropped"]["nulls"] == cold.statistics()["dropped"]["nulls"] \
        == len(nulls) > 0
    np.testing.assert_array_equal(warm.plan().indices, cold.plan().indices)
    with pytest.raises(ValueError, match=r"null"):  # nulls="error" knows before any batch
        la.batch_loader(path, "ids", batch_size=64, cache_dir=cache)
    # what the store gives: per row group, the lengths and the null rows' mask
    fp, _ = fingerprint(str(path))
    store = LengthsStore(cache)
    got = [store.get(fp, g, "ids", 0) for g in range(fp.num_row_groups)]
    assert store.hits == 1 and store.misses == 0
    np.testing.assert_array_equal(np.concatenate([x[0] for x in got]), want)
    starts = np.arange(0, 4000, 700)
    found = np.concatenate([np.flatnonzero(m) + s for (_, m), s in zip(got, starts)
                            if m is not None])
    np.testing.assert_array_equal(found, nulls)


def _put_many(args):
    cache, path, n = args
    fp, _ = fingerprint(path)
    store = LengthsStore(cache)
    lengths = np.arange(n, dtype=np.int64)
    for _ in range(20):
        store.put_file(fp, "ids", 0, [(lengths, None)])
        got = LengthsStore(cache).file(fp, "ids", 0)
        if got is not None:
            np.testing.assert_array_equal(got[0][0], lengths)
    return True


def test_concurrent_writers_leave_whole_entries(tmp_path):
    path = tmp_path / "a.parquet"
    write_tokens(path, 10, row_group_size=10)
    cache = str(tmp_path / "cache")
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(4) as pool:
        assert all(pool.map(_put_many, [(cache, str(path), 200000)] * 4))
    names = [n for _, _, ns in os.walk(cache) for n in ns]
    assert len(names) == 1 and names[0].endswith(".lengths")  # no temporary file left


def test_cache_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("LODARROW_CACHE_DIR", str(tmp_path / "env"))
    assert cache_root() == str(tmp_path / "env")
    assert cache_root(tmp_path / "arg") == str(tmp_path / "arg")
    monkeypatch.delenv("LODARROW_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == str(tmp_path / "xdg" / "lodarrow")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_root() == str(tmp_path / "home" / ".cache" / "lodarrow")
    with pytest.raises(TypeError, match="sequence_lengths: cache_dir must be a path, None"):
        la.sequence_lengths(tmp_path / "x.parquet", cache_dir=3)
    with pytest.raises(TypeError, match="batch_loader: cache_dir must be a path"):
        la.batch_loader(tmp_path, batch_size=2, cache_dir=b"x")


# ---------------------------------------------------------------------------- sidecars
def test_write_parquet_records_lengths(tmp_path, no_decoding):
    t = la.LoDTensor(np.arange(10), lengths=[[3, 0, 2, 5]])
    path = tmp_path / "t.parquet"
    la.write_parquet({"x": t, "id": np.arange(4)}, path, row_group_size=3)
    assert os.path.exists(sidecar_path(str(path)))
    np.testing.assert_array_equal(la.sequence_lengths(path, "x", cache_dir=False), [3, 0, 2, 5])
    docs = la.LoDTensor(np.arange(9), lengths=[[2, 1], [2, 3, 4]])
    la.write_parquet({"d": docs}, path)  # rewritten: the sidecar with it
    np.testing.assert_array_equal(la.sequence_lengths(path, "d", cache_dir=False), [5, 4])
    np.testing.assert_array_equal(la.sequence_lengths(path, "d", level=1, cache_dir=False),
                                  [2, 3, 4])


def test_a_sidecar_of_another_file_version_is_not_used(tmp_path):
    path = tmp_path / "t.parquet"
    la.write_parquet({"x": la.LoDTensor(np.arange(6), lengths=[[1, 5]])}, path)
    side = sidecar_path(str(path))
    assert read_sidecar(fingerprint(str(path))[0]) is not None
    # another tool rewrites the file (the sidecar stays behind)
    pq.write_table(pa.table({"x": pa.array([[1, 2, 3], [4, 5, 6]])}), path)
    assert os.path.exists(side) and read_sidecar(fingerprint(str(path))[0]) is None
    np.testing.assert_array_equal(la.sequence_lengths(path, cache_dir=False), [3, 3])
    # a damaged sidecar is not used either
    with open(side, "wb") as f:
        f.write(b"garbage")
    np.testing.assert_array_equal(la.sequence_lengths(path, cache_dir=False), [3, 3])


def test_files_are_the_same_with_or_without_sidecars(tmp_path):
    rng = np.random.default_rng(0)
    t = la.LoDTensor(rng.random((50, 4)).astype(np.float32),
                     lengths=[rng.multinomial(50, [0.1] * 10).tolist()])
    for engine in ("pyarrow", "polars"):
        a, b = tmp_path / f"{engine}-a", tmp_path / f"{engine}-b"
        a.mkdir()
        b.mkdir()
        la.write_parquet({"emb": t, "id": np.arange(10)}, a / "x.parquet", engine=engine)
        la.write_parquet({"emb": t, "id": np.arange(10)}, b / "x.parquet", engine=engine,
                         record_lengths=False)
        assert (a / "x.parquet").read_bytes() == (b / "x.parquet").read_bytes()
        assert sorted(os.listdir(a)) == [".x.parquet.lodarrow-lengths", "x.parquet"]
        assert os.listdir(b) == ["x.parquet"]
        # readers of the directory see the data file only
        assert pq.read_table(a).equals(pq.read_table(b))
    duckdb = pytest.importorskip("duckdb")
    rows = duckdb.sql(f"select count(*) from read_parquet('{tmp_path}/pyarrow-a/*.parquet')")
    assert rows.fetchall() == [(10,)]
    with pytest.raises(TypeError, match="record_lengths must be a bool"):
        la.write_parquet({"emb": t}, tmp_path / "y.parquet", record_lengths=1)


def test_map_parquet_records_lengths(tmp_path, no_decoding):
    src = tmp_path / "src"
    src.mkdir()
    want, null = {}, {}
    for k in range(3):
        want[k], null[k] = write_tokens(src / f"p{k}.parquet", 2000 + k, seed=k, nulls=k == 1)
    for engine in ("pyarrow", "polars"):
        out = tmp_path / f"out-{engine}"

        def double(batch):
            ids = batch.column("ids")
            return batch.append_column("pairs", pa.array(
                [None if x is None else [x, x] for x in ids.to_pylist()],
                pa.list_(pa.list_(pa.int32()))))

        la.map_parquet(src, out, double, batch_rows=333, engine=engine)
        got = la.sequence_lengths(out, "ids", cache_dir=False)
        np.testing.assert_array_equal(got, np.concatenate([want[k] for k in range(3)]))
        np.testing.assert_array_equal(la.sequence_lengths(out, "pairs", cache_dir=False),
                                      2 * got)
        np.testing.assert_array_equal(la.sequence_lengths(out, "pairs", level=1,
                                                          cache_dir=False),
                                      np.concatenate([np.repeat(np.delete(want[k], null[k]),
                                                                2) for k in range(3)]))


nested = st.recursive(st.lists(st.integers(0, 9), max_size=4) | st.none(),
                      lambda inner: st.lists(inner, max_size=4) | st.none(), max_leaves=20)


@settings(max_examples=40)
@given(rows=st.lists(st.lists(st.one_of(st.none(), st.lists(st.integers(0, 9), max_size=5)),
                              max_size=4) | st.none(), min_size=1, max_size=30),
       row_group_size=st.integers(1, 8))
def test_sidecar_lengths_are_the_decoded_ones(tmp_path_factory, rows, row_group_size):
    """Every level, nulls at each level, any row groups: the sidecar equals decoding, and
    both equal an independent reference."""
    root = tmp_path_factory.mktemp("side")
    path = root / "x.parquet"
    column = pa.array(rows, pa.list_(pa.list_(pa.int64())))
    la.write_parquet(pa.table({"x": column}), path, row_group_size=row_group_size)
    for level in (0, 1):
        recorded = la.sequence_lengths(path, cache_dir=False, level=level)
        os.replace(sidecar_path(str(path)), root / "aside")
        decoded = la.sequence_lengths(path, cache_dir=False, level=level)
        os.replace(root / "aside", sidecar_path(str(path)))
        np.testing.assert_array_equal(recorded, decoded)
        np.testing.assert_array_equal(decoded, reference_lengths(rows, level, 2))
    fp, _ = fingerprint(str(path))
    side = read_sidecar(fp)
    nulls = [np.flatnonzero(m) if m is not None else [] for _, m in side[("x", 0)]]
    starts = np.arange(0, len(rows), row_group_size)
    found = [int(i) + int(s) for n, s in zip(nulls, starts) for i in n]
    assert found == [i for i, r in enumerate(rows) if r is None]
    assert json.loads(pq.read_schema(sidecar_path(str(path))).metadata[b"lodarrow.lengths"])[
        "footer"] == fp.footer


def test_an_unwritable_cache_warns_and_decodes(tmp_path):
    path = tmp_path / "a.parquet"
    want, _ = write_tokens(path, 100)
    blocker = tmp_path / "file-not-dir"
    blocker.write_text("")
    with pytest.warns(RuntimeWarning, match="cannot write the lengths cache"):
        got = la.sequence_lengths(path, cache_dir=blocker / "cache")
    np.testing.assert_array_equal(got, want)
