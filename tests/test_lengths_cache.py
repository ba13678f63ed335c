"""Lengths kept once (docs/training.md#lengths-cache, docs/tables.md#where-the-lengths-live):
the lengths lodarrow's writers record in each file's footer, the lengths cache, and the
sidecars of earlier releases.

What is checked: a cached or recorded start reads no column and gives the decoded lengths
(every level, null rows included); a changed file is never served stale lengths (size,
modification time, footer; a rewrite that copies the footer's key-value metadata, into a
file of other row groups or into a byte-identical footer over reordered rows); a damaged
footer entry (one character) is decoded, never served; entries
are whole under concurrent writers; the directory's resolution and clearing; the files hold
the same data pages, schema and rows with or without recorded lengths, and nothing else is
written beside them; an earlier release's sidecars are still read where valid.
"""

import json
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lodarrow as la
from lodarrow._tables import _footer, _lengths_store
from lodarrow._tables._lengths_store import (FOOTER_KEY, LengthsStore, cache_root,
                                             column_counts, fingerprint, read_sidecar,
                                             sidecar_path, sign_record, token_lengths)
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
    def refuse(self, k, columns, keep=True):
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
                        lambda *a, **k: (_ for _ in ()).throw(AssertionError("decoded")))
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
                        lambda *a, **k: (_ for _ in ()).throw(AssertionError("decoded")))
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
    # an executor, not multiprocessing.Pool: a worker that dies (say, importing another
    # lodarrow) raises BrokenProcessPool here where Pool.map would wait for it forever
    with ProcessPoolExecutor(4, mp_context=multiprocessing.get_context("spawn")) as pool:
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


# ---------------------------------------------------------------------------- the footer
def footer_bytes(path):
    with open(path, "rb") as f:
        return _footer.read_tail(f)


def test_write_parquet_records_lengths_in_the_footer(tmp_path, no_decoding):
    t = la.LoDTensor(np.arange(10), lengths=[[3, 0, 2, 5]])
    path = tmp_path / "t.parquet"
    la.write_parquet({"x": t, "id": np.arange(4)}, path, row_group_size=3)
    assert os.listdir(tmp_path) == ["t.parquet"]  # nothing beside the file
    assert FOOTER_KEY in pq.read_metadata(path).metadata
    assert fingerprint(str(path))[0].recorded is not None
    np.testing.assert_array_equal(la.sequence_lengths(path, "x", cache_dir=False), [3, 0, 2, 5])
    docs = la.LoDTensor(np.arange(9), lengths=[[2, 1], [2, 3, 4]])
    la.write_parquet({"d": docs}, path)  # rewritten: its own lengths
    np.testing.assert_array_equal(la.sequence_lengths(path, "d", cache_dir=False), [5, 4])
    np.testing.assert_array_equal(la.sequence_lengths(path, "d", level=1, cache_dir=False),
                                  [2, 3, 4])
    la.write_parquet({"id": np.arange(4)}, path)  # no list column: nothing recorded
    assert FOOTER_KEY not in (pq.read_metadata(path).metadata or {})


def test_files_are_the_same_with_or_without_recorded_lengths(tmp_path):
    """The data pages, the schema, its metadata and the rows: only the footer gains an entry,
    which no reader shows."""
    import pandas as pd
    import polars as pl

    rng = np.random.default_rng(0)
    t = la.LoDTensor(rng.random((50, 4)).astype(np.float32),
                     lengths=[rng.multinomial(50, [0.1] * 10).tolist()])
    for engine in ("pyarrow", "polars"):
        a, b = tmp_path / f"{engine}-a", tmp_path / f"{engine}-b"
        a.mkdir()
        b.mkdir()
        table = pa.table({"emb": t.to_arrow(), "id": np.arange(10)}).replace_schema_metadata(
            {"user": "kept"})
        la.write_parquet(table, a / "x.parquet", engine=engine)
        la.write_parquet(table, b / "x.parquet", engine=engine, record_lengths=False)
        assert os.listdir(a) == os.listdir(b) == ["x.parquet"]
        (_, sa), (_, sb) = footer_bytes(a / "x.parquet"), footer_bytes(b / "x.parquet")
        assert sa == sb and (a / "x.parquet").read_bytes()[:sa] == \
            (b / "x.parquet").read_bytes()[:sb]  # the data pages, byte for byte
        ma, mb = pq.read_metadata(a / "x.parquet"), pq.read_metadata(b / "x.parquet")
        assert set(ma.metadata) - set(mb.metadata) == {FOOTER_KEY}
        assert ma.row_group(0).to_dict() == mb.row_group(0).to_dict()
        got, want = pq.read_table(a / "x.parquet"), pq.read_table(b / "x.parquet")
        assert got.equals(want) and got.schema.metadata == want.schema.metadata
        assert got.schema.metadata[b"user"] == b"kept" and FOOTER_KEY not in got.schema.metadata
        assert pq.read_schema(a / "x.parquet").metadata == want.schema.metadata
        frame = pd.read_parquet(a / "x.parquet")
        assert frame.attrs == pd.read_parquet(b / "x.parquet").attrs
        assert pl.read_parquet(a / "x.parquet").equals(pl.read_parquet(b / "x.parquet"))
    with pytest.raises(TypeError, match="record_lengths must be a bool"):
        la.write_parquet({"emb": t}, tmp_path / "y.parquet", record_lengths=1)


def rewrite_keeping_metadata(path, table, row_group_size):
    """What a tool that copies the footer's key-value metadata does: ``table`` (another
    version of the file's rows) written with the old file's entries."""
    old = pq.read_metadata(path).metadata
    with pq.ParquetWriter(path, table.schema) as w:
        w.write_table(table, row_group_size=row_group_size)
        w.add_key_value_metadata({k: v for k, v in old.items() if k != b"ARROW:schema"})
    assert pq.read_metadata(path).metadata[FOOTER_KEY] == old[FOOTER_KEY]


def test_a_rewritten_file_is_never_served_its_old_lengths(tmp_path):
    path = tmp_path / "t.parquet"
    want, _ = write_tokens(tmp_path / "plain.parquet", 3000, seed=4, row_group_size=700)
    table = pq.read_table(tmp_path / "plain.parquet")
    la.write_parquet(table, path, row_group_size=700)
    np.testing.assert_array_equal(la.sequence_lengths(path, cache_dir=False), want)
    # pyarrow's read_table -> filter -> write_table does not carry the entry over
    kept = pq.read_table(path).filter(pa.array(want > 5))
    pq.write_table(kept, path, row_group_size=700)
    assert FOOTER_KEY not in pq.read_metadata(path).metadata
    np.testing.assert_array_equal(la.sequence_lengths(path, cache_dir=False), want[want > 5])
    # a tool that copies it: the same row count in another order, the same row groups
    la.write_parquet(table, path, row_group_size=700)
    order = np.random.default_rng(0).permutation(len(want))
    rewrite_keeping_metadata(path, table.take(order), row_group_size=700)
    fp, meta = fingerprint(str(path))
    assert fp.recorded is None and meta.num_rows == len(want)
    np.testing.assert_array_equal(la.sequence_lengths(path, cache_dir=False), want[order])
    # ... and filtered
    la.write_parquet(table, path, row_group_size=700)
    rewrite_keeping_metadata(path, table.filter(pa.array(want > 5)), row_group_size=700)
    np.testing.assert_array_equal(la.sequence_lengths(path, cache_dir=False), want[want > 5])


def set_record(path, value):
    """Put ``value`` in the footer entry of the recorded lengths, the data left as it is."""
    with open(path, "r+b") as f:
        footer, start = _footer.read_tail(f)
        _footer.replace_footer(f, start, _footer.with_key_value(footer, FOOTER_KEY, value))


def test_other_tools_rewriting_a_file_drop_the_entry(tmp_path):
    """pyarrow, pandas, polars and DuckDB each build the footer of the file they write: the
    entry of the file they read is not in it."""
    import duckdb
    import pandas as pd
    import polars as pl

    path = tmp_path / "t.parquet"
    la.write_parquet(pa.table({"x": pa.array([[1, 2], [3]] * 10)}), path)
    assert FOOTER_KEY in pq.read_metadata(path).metadata
    pq.write_table(pq.read_table(path), tmp_path / "pyarrow.parquet")
    pd.read_parquet(path).to_parquet(tmp_path / "pandas.parquet")
    pl.read_parquet(path).write_parquet(tmp_path / "polars.parquet")
    duckdb.sql(f"copy (select * from '{path}') to '{tmp_path / 'duckdb.parquet'}' "
               f"(format parquet)")
    for tool in ("pyarrow", "pandas", "polars", "duckdb"):
        assert FOOTER_KEY not in (pq.read_metadata(tmp_path / f"{tool}.parquet").metadata
                                  or {}), tool


def test_a_damaged_record_is_not_used(tmp_path):
    path = tmp_path / "t.parquet"
    want, _ = write_tokens(tmp_path / "plain.parquet", 500, seed=5)
    la.write_parquet(pq.read_table(tmp_path / "plain.parquet"), path)
    meta = pq.read_metadata(path)
    header, payload = meta.metadata[FOOTER_KEY].split(b"\n", 1)
    header = json.loads(header)
    size = os.path.getsize(path)
    got = _lengths_store.recorded_lengths(meta, size)
    assert bytes(got.pop("payload")) == payload and got == header
    assert _lengths_store.recorded_lengths(meta, size + 1) is None  # not where it was
    del header["check"]  # each damage below is signed again: the checks past the checksum
    assert sign_record(header, payload) == meta.metadata[FOOTER_KEY]
    col = header["columns"]["ids"]

    def ids(**change):
        return {"columns": {"ids": {**col, **change}}}

    for damage, data in (({}, payload[:-8]), ({}, b"@@@"), (ids(size=7), payload),
                         ({"codec": "lz9"}, payload), ({"version": 1}, payload),
                         ({"row_groups": [1, 2]}, payload),
                         (ids(levels=[{"n": 3, "const": 1}]), payload),
                         (ids(levels=[{"n": 500, "at": 10 ** 6, "width": 1}]), payload),
                         (ids(blob=[0, 5]), payload),
                         ({"columns": {"ids": {"same_as": "nope"}}}, payload),
                         ({"data": {}}, payload), ({"data": {"ids": [4, 10 ** 9, "0"]}}, payload),
                         ({"data": {"ids": [4, 100, "0" * 64]}}, payload),
                         ({"data": {"ids": None}}, payload)):
        set_record(path, sign_record({**header, **damage}, data))
        store = LengthsStore(False)
        assert store.file(fingerprint(str(path))[0], "ids", 0) is None, damage
        np.testing.assert_array_equal(la.sequence_lengths(path, cache_dir=False), want)
    # the unreleased layout before this one (version 2: no checksum, no data binding)
    old = {k: v for k, v in header.items() if k != "data"}
    set_record(path, json.dumps({**old, "version": 2}, separators=(",", ":")).encode()
               + b"\n" + payload)
    assert fingerprint(str(path))[0].recorded is None
    np.testing.assert_array_equal(la.sequence_lengths(path, cache_dir=False), want)
    set_record(path, b"{oops")  # no record at all
    assert fingerprint(str(path))[0].recorded is None
    np.testing.assert_array_equal(la.sequence_lengths(path, cache_dir=False), want)


def test_one_damaged_character_of_the_entry_is_never_served(tmp_path):
    """zstd frames carry no checksum and the header is plain JSON: the entry's own SHA-256
    catches a change of any one character, in the header or the payload (each would
    otherwise give wrong lengths or none)."""
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 300, 5000)
    ids = pa.ListArray.from_arrays(pa.array(np.r_[0, np.cumsum(lengths)].astype(np.int32)),
                                   pa.array(np.zeros(lengths.sum(), np.int32)))
    path = tmp_path / "t.parquet"
    la.write_parquet(pa.table({"ids": ids}), path)
    value = pq.read_metadata(path).metadata[FOOTER_KEY]
    alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    for pos in list(range(0, len(value), max(1, len(value) // 60))) + [len(value) - 1]:
        damaged = bytearray(value)
        if damaged[pos] in alphabet:  # still base64 (or JSON) text: decodes without error
            damaged[pos] = alphabet[(alphabet.index(damaged[pos]) + 1) % 64]
        else:
            damaged[pos] = ord("A") if damaged[pos] != ord("A") else ord("B")
        set_record(path, bytes(damaged))
        assert fingerprint(str(path))[0].recorded is None, pos
        np.testing.assert_array_equal(la.sequence_lengths(path, cache_dir=False), lengths)
    set_record(path, value)  # the same entry back: served again
    store = LengthsStore(False)
    assert store.file(fingerprint(str(path))[0], "ids", 0) is not None
    assert store.recorded_hits == 1


def rewrite_in_place(path, table, **options):
    """Write ``table`` to ``path`` with pyarrow, copying the footer entry by hand."""
    entry = pq.read_metadata(path).metadata[FOOTER_KEY]
    with pq.ParquetWriter(f"{path}.new", table.schema, **options) as w:
        w.write_table(table)
        w.add_key_value_metadata({FOOTER_KEY: entry})
    os.replace(f"{path}.new", path)


def test_a_rewrite_into_the_same_footer_is_decoded(tmp_path):
    """Rows reordered, the entry copied: the footer (row counts, page sizes, statistics,
    writer) can come out byte for byte the same, so only the data pages tell; the entry is
    bound to the start of the column's first data page."""
    path = tmp_path / "t.parquet"
    lengths = np.array([1, 2, 3, 4, 5, 6, 7] * 20)
    t = pa.table({"ids": pa.array([[7] * int(k) for k in lengths], pa.list_(pa.int32()))})
    opts = dict(compression="none", use_dictionary=False, write_statistics=False)
    la.write_parquet(t, path, engine="pyarrow", **opts)

    def footer():  # what the entry binds to: the footer as pyarrow serializes it, without it
        meta = pq.read_metadata(path)
        return _footer.digest_without(meta, FOOTER_KEY, meta.metadata[FOOTER_KEY])

    before = footer()
    np.testing.assert_array_equal(la.sequence_lengths(path, cache_dir=False), lengths)
    back = pq.read_table(path).cast(t.schema)  # read back: the writer's own schema
    rewrite_in_place(path, back.take(pa.array(np.arange(len(lengths))[::-1])), **opts)
    assert footer() == before  # the same footer, other data pages
    fp, _ = fingerprint(str(path))
    assert fp.recorded is not None  # the footer's checks hold ...
    store = LengthsStore(False)
    assert store.file(fp, "ids", 0) is None  # ... the data's does not
    np.testing.assert_array_equal(la.sequence_lengths(path, cache_dir=False), lengths[::-1])
    loader = la.batch_loader(path, "ids", max_tokens=8, cost="packed", cache_dir=False)
    np.testing.assert_array_equal(loader.lengths, lengths[::-1])
    assert all(int(b["lengths"].sum()) <= 8 for b in loader)  # planned from the real lengths


def test_a_shuffled_rewrite_with_the_entry_copied_is_decoded(tmp_path):
    """The reviewer's case, writer defaults: short lists (tags), la.write_parquet, then
    read_table -> shuffle -> ParquetWriter with the entry copied; some of these footers come
    out byte-identical (3 in 10 with pyarrow 26).  Every one is decoded."""
    rng = np.random.default_rng(0)
    for k in range(10):
        lengths = rng.integers(1, 8, 1000)
        ids = pa.ListArray.from_arrays(
            pa.array(np.r_[0, np.cumsum(lengths)].astype(np.int32)),
            pa.array(rng.integers(0, 1000, lengths.sum(), dtype=np.int32)))
        pq.write_table(pa.table({"ids": ids}), tmp_path / "src.parquet")
        path = tmp_path / f"t{k}.parquet"
        la.write_parquet(pq.read_table(tmp_path / "src.parquet"), path, engine="pyarrow")
        order = rng.permutation(len(lengths))
        rewrite_in_place(path, pq.read_table(path).take(pa.array(order)))
        np.testing.assert_array_equal(la.sequence_lengths(path, cache_dir=False),
                                      lengths[order])
        loader = la.batch_loader(path, "ids", batch_size=8, cache_dir=False)
        np.testing.assert_array_equal(loader.lengths, lengths[order])


def test_the_data_check_is_one_small_read(tmp_path, monkeypatch):
    """The binding to the data pages costs one ranged read of a few KiB per file and column
    asked for, once per store; a column not asked for is not checked."""
    table = pa.table({"a": pa.array([[1, 2, 3]] * 5000), "b": pa.array([[1]] * 5000),
                      "s": pa.array(["x" * 100] * 5000)})
    path = tmp_path / "t.parquet"
    la.write_parquet(table, path, row_group_size=2000)
    header = json.loads(pq.read_metadata(path).metadata[FOOTER_KEY].split(b"\n", 1)[0])
    assert set(header["data"]) == {"a", "b"}
    for at, n, digest in header["data"].values():
        assert n <= _lengths_store.DATA_BYTES + 256 and len(digest) == 64
    reads = []
    real = _lengths_store._bound_to_data

    def counted(fp, record, column):
        reads.append(column)
        return real(fp, record, column)

    monkeypatch.setattr(_lengths_store, "_bound_to_data", counted)
    store = LengthsStore(False)
    fp, _ = fingerprint(str(path))
    for _ in range(3):
        assert store.file(fp, "a", 0) is not None
    assert reads == ["a"]


def test_columns_of_the_same_lengths_are_recorded_once(tmp_path, no_decoding):
    """A tokenizer's ``input_ids``, ``attention_mask`` and ``labels`` share their lengths:
    one column's record, the others naming it; a column of other lengths has its own."""
    rng = np.random.default_rng(2)
    lengths = rng.integers(0, 50, 2000)
    offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))

    def column(values):
        return pa.ListArray.from_arrays(offsets, pa.array(values, pa.int32()))

    n = int(lengths.sum())
    table = pa.table({"input_ids": column(rng.integers(0, 999, n)),
                      "attention_mask": column(np.ones(n, np.int32)),
                      "labels": column(rng.integers(0, 999, n)),
                      "words": pa.array([[1] * (k % 7) for k in range(2000)])})
    la.write_parquet(table, tmp_path / "t.parquet")
    value = pq.read_metadata(tmp_path / "t.parquet").metadata[FOOTER_KEY]
    columns = json.loads(value.split(b"\n", 1)[0])["columns"]
    assert columns["attention_mask"] == columns["labels"] == {"same_as": "input_ids"}
    assert "blob" in columns["input_ids"] and "blob" in columns["words"]
    for name in ("input_ids", "attention_mask", "labels"):
        np.testing.assert_array_equal(
            la.sequence_lengths(tmp_path / "t.parquet", name, cache_dir=False), lengths)
    np.testing.assert_array_equal(la.sequence_lengths(tmp_path / "t.parquet", "words",
                                                      cache_dir=False), np.arange(2000) % 7)


def test_a_failed_stamp_leaves_the_file_as_written(tmp_path, monkeypatch):
    write_tokens(tmp_path / "p.parquet", 300)
    table = pq.read_table(tmp_path / "p.parquet")
    la.write_parquet(table, tmp_path / "plain.parquet", engine="pyarrow", record_lengths=False)
    real = _lengths_store.replace_footer

    def half_then_fail(f, start, footer):
        monkeypatch.setattr(_lengths_store, "replace_footer", real)  # the restore works
        f.seek(start)
        f.write(footer[:10])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(_lengths_store, "replace_footer", half_then_fail)
    with pytest.warns(RuntimeWarning, match="not recorded in its footer.*No space left"):
        la.write_parquet(table, tmp_path / "t.parquet", engine="pyarrow")
    assert (tmp_path / "t.parquet").read_bytes() == (tmp_path / "plain.parquet").read_bytes()
    assert pq.read_table(tmp_path / "t.parquet").equals(table)


def test_nothing_is_recorded_without_a_stored_arrow_schema(tmp_path):
    """There pyarrow shows the footer's entries as the schema's metadata."""
    t = pa.table({"x": pa.array([[1, 2], [3]])})
    la.write_parquet(t, tmp_path / "t.parquet", store_schema=False)
    assert FOOTER_KEY not in (pq.read_metadata(tmp_path / "t.parquet").metadata or {})
    assert pq.read_table(tmp_path / "t.parquet").equals(t)


def test_a_copied_record_in_the_schema_is_not_written_again(tmp_path):
    t = pa.table({"x": pa.array([[1, 2], [3]])}).replace_schema_metadata(
        {FOOTER_KEY: b"{}", b"user": b"u"})
    la.write_parquet(t, tmp_path / "t.parquet")
    assert pq.read_table(tmp_path / "t.parquet").schema.metadata == {b"user": b"u"}
    np.testing.assert_array_equal(la.sequence_lengths(tmp_path / "t.parquet", cache_dir=False),
                                  [2, 1])


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
        assert sorted(os.listdir(out)) == ["p0.parquet", "p1.parquet", "p2.parquet"]
        got = la.sequence_lengths(out, "ids", cache_dir=False)
        np.testing.assert_array_equal(got, np.concatenate([want[k] for k in range(3)]))
        np.testing.assert_array_equal(la.sequence_lengths(out, "pairs", cache_dir=False),
                                      2 * got)
        np.testing.assert_array_equal(la.sequence_lengths(out, "pairs", level=1,
                                                          cache_dir=False),
                                      np.concatenate([np.repeat(np.delete(want[k], null[k]),
                                                                2) for k in range(3)]))
        store = LengthsStore(False)
        for f in sorted(out.iterdir()):
            assert store.file(fingerprint(str(f))[0], "ids", 0) is not None
        assert store.recorded_hits == 3 and store.misses == 0


def test_write_parquet_to_s3_records_lengths(s3, tmp_path, no_decoding):
    fs, bucket = s3
    t = la.LoDTensor(np.arange(10), lengths=[[3, 0, 2, 5]])
    la.write_parquet({"x": t}, f"s3://{bucket}/d/t.parquet", row_group_size=3)
    names = [i.path for i in fs.get_file_info(pafs_selector(f"{bucket}/d"))]
    assert names == [f"{bucket}/d/t.parquet"]
    np.testing.assert_array_equal(
        la.sequence_lengths(f"s3://{bucket}/d/t.parquet", cache_dir=False), [3, 0, 2, 5])
    la.write_parquet({"x": t}, f"s3://{bucket}/d/u.parquet", record_lengths=False)
    assert FOOTER_KEY not in pq.read_metadata(f"{bucket}/d/u.parquet",
                                              filesystem=fs).metadata


def test_a_remote_file_is_checked_against_its_data_once(s3, tmp_path, monkeypatch):
    """On an object store the data check is one more ranged request per file: made at the
    first start, its verdict kept in the cache directory under the file's fingerprint; a
    rewrite into the same footer is decoded there too."""
    fs, bucket = s3
    lengths = np.array([1, 2, 3, 4, 5, 6, 7] * 20)
    t = pa.table({"ids": pa.array([[7] * int(k) for k in lengths], pa.list_(pa.int32()))})
    opts = dict(compression="none", use_dictionary=False, write_statistics=False)
    local = tmp_path / "t.parquet"
    la.write_parquet(t, local, engine="pyarrow", **opts)
    with open(local, "rb") as src, fs.open_output_stream(f"{bucket}/d/t.parquet") as dst:
        dst.write(src.read())
    back = pq.read_table(local).cast(t.schema)
    rewrite_in_place(local, back.take(pa.array(np.arange(len(lengths))[::-1])), **opts)
    with open(local, "rb") as src, fs.open_output_stream(f"{bucket}/e/t.parquet") as dst:
        dst.write(src.read())
    checks = []
    real = _lengths_store._bound_to_data

    def counted(fp, record, column):
        checks.append(fp.name)
        return real(fp, record, column)

    monkeypatch.setattr(_lengths_store, "_bound_to_data", counted)
    cache = tmp_path / "cache"
    for _ in range(3):
        np.testing.assert_array_equal(
            la.sequence_lengths(f"s3://{bucket}/d/t.parquet", cache_dir=cache), lengths)
    assert len(checks) == 1  # the first start only
    for _ in range(2):
        la.sequence_lengths(f"s3://{bucket}/d/t.parquet", cache_dir=False)
    assert len(checks) == 3  # no cache: at every start
    for _ in range(2):  # the rewrite: decoded (then from the lengths cache)
        np.testing.assert_array_equal(
            la.sequence_lengths(f"s3://{bucket}/e/t.parquet", cache_dir=cache), lengths[::-1])
    assert len(checks) == 5


def pafs_selector(path):
    import pyarrow.fs as pafs

    return pafs.FileSelector(path, recursive=True)


# a nested column of every shape: nulls at each level, empty lists, any row groups
nested_rows = st.lists(st.lists(st.one_of(st.none(), st.lists(st.integers(0, 9), max_size=5)),
                                max_size=4) | st.none(), min_size=1, max_size=30)


@settings(max_examples=40)
@given(rows=nested_rows, row_group_size=st.integers(1, 8))
def test_recorded_lengths_are_the_decoded_ones(tmp_path_factory, rows, row_group_size):
    """Every level, nulls at each level, any row groups: the footer's lengths equal decoding,
    and both equal an independent reference."""
    root = tmp_path_factory.mktemp("rec")
    column = pa.array(rows, pa.list_(pa.list_(pa.int64())))
    la.write_parquet(pa.table({"x": column}), root / "a.parquet", row_group_size=row_group_size)
    la.write_parquet(pa.table({"x": column}), root / "b.parquet", row_group_size=row_group_size,
                     record_lengths=False)
    fp, _ = fingerprint(str(root / "a.parquet"))
    assert fp.recorded is not None
    for level in (0, 1):
        recorded = la.sequence_lengths(root / "a.parquet", cache_dir=False, level=level)
        decoded = la.sequence_lengths(root / "b.parquet", cache_dir=False, level=level)
        np.testing.assert_array_equal(recorded, decoded)
        np.testing.assert_array_equal(decoded, reference_lengths(rows, level, 2))
    groups = LengthsStore(False).file(fp, "x", 0)
    starts = np.arange(0, len(rows), row_group_size)
    found = [int(i) + int(s) for (_, m), s in zip(groups, starts) if m is not None
             for i in np.flatnonzero(m)]
    assert found == [i for i, r in enumerate(rows) if r is None]
    assert [len(m) for _, m in groups if m is not None] == \
        [min(row_group_size, len(rows) - s) for (_, m), s in zip(groups, starts) if m is not None]


def test_a_regular_level_is_recorded_as_its_width(tmp_path, no_decoding):
    """A list level whose lists all have one length (feature vectors stored as lists, as
    DuckDB and Spark write them) is recorded as that length, not one count per list."""
    rng = np.random.default_rng(1)
    lengths = rng.integers(0, 40, 3000)
    tokens = int(lengths.sum())
    vectors = pa.ListArray.from_arrays(pa.array(np.arange(tokens + 1) * 8, pa.int32()),
                                       pa.array(rng.random(tokens * 8)))
    offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))
    emb = pa.ListArray.from_arrays(offsets, vectors)
    la.write_parquet(pa.table({"emb": emb}), tmp_path / "e.parquet", row_group_size=1000)
    value = pq.read_metadata(tmp_path / "e.parquet").metadata[FOOTER_KEY]
    record = json.loads(value.split(b"\n", 1)[0])
    assert [lv.get("const") for lv in record["columns"]["emb"]["levels"]] == [None, 8]
    np.testing.assert_array_equal(la.sequence_lengths(tmp_path / "e.parquet", cache_dir=False),
                                  lengths * 8)
    np.testing.assert_array_equal(
        la.sequence_lengths(tmp_path / "e.parquet", cache_dir=False, level=1),
        np.full(tokens, 8))


# ---------------------------------------------------------------------------- the Thrift edit
def test_a_footer_entry_is_set_replaced_and_read_by_every_reader(tmp_path):
    import duckdb
    import polars as pl

    t = pa.table({"x": pa.array([[1, 2], [3], None] * 50), "s": ["a", "b", None] * 50})
    files = {"pyarrow": tmp_path / "a.parquet", "plain": tmp_path / "b.parquet",
             "polars": tmp_path / "c.parquet", "many": tmp_path / "d.parquet"}
    pq.write_table(t, files["pyarrow"], row_group_size=20)
    pq.write_table(t, files["plain"], store_schema=False)  # no key-value list at all
    pl.from_arrow(t).write_parquet(files["polars"], row_group_size=40)
    pq.write_table(t.replace_schema_metadata({f"k{i}": "v" for i in range(20)}), files["many"])
    for name, path in files.items():
        with open(path, "r+b") as f:
            footer, start = _footer.read_tail(f)
            once = _footer.with_key_value(footer, b"lodarrow.test", b"first")
            twice = _footer.with_key_value(once, b"lodarrow.test", "second é".encode())
            _footer.replace_footer(f, start, twice)
        meta = pq.read_metadata(path)
        assert meta.metadata[b"lodarrow.test"] == "second é".encode(), name
        assert len(meta.metadata) == len(pq.read_metadata(path).metadata)
        assert pq.read_table(path).to_pylist() == t.to_pylist(), name
        assert pl.read_parquet(path).to_arrow().to_pylist() == t.to_pylist(), name
        assert pl.read_parquet_metadata(path)["lodarrow.test"] == "second é"
        assert duckdb.sql(f"select count(*) from '{path}'").fetchall() == [(150,)]
    with pytest.raises(ValueError):
        _footer.with_key_value(footer[:-3], b"k", b"v")
    with pytest.raises(ValueError):
        _footer.with_key_value(footer + b"\x00", b"k", b"v")


# ---------------------------------------------------------------------------- old sidecars
def write_legacy_sidecar(path):
    """The sidecar an earlier release wrote beside ``path``: the lengths of every list
    column, level and row group (decoded here), bound to the file's size and footer."""
    fp, meta = fingerprint(str(path))
    pf = pq.ParquetFile(path)
    entries, lengths, nulls, at = [], [], [], 0
    for field in pf.schema_arrow:
        depth, typ = 0, field.type
        while pa.types.is_list(typ) or pa.types.is_large_list(typ):
            depth, typ = depth + 1, typ.value_type
        for g in range(meta.num_row_groups):
            col = pf.read_row_group(g, columns=[field.name]).column(field.name)
            counts, null = column_counts(col)
            for level in range(depth):
                seq = token_lengths(counts, level)
                flag = null if level == 0 and null is not None else np.zeros(len(seq), bool)
                entries.append([field.name, level, g, at, len(seq), col.length()])
                lengths.append(seq)
                nulls.append(flag)
                at += len(seq)
    binding = {"version": 1, "size": fp.size, "footer": fp.footer, "entries": entries}
    table = pa.table({"lengths": pa.array(np.concatenate(lengths)),
                      "null": pa.array(np.concatenate(nulls))})
    pq.write_table(table.replace_schema_metadata({b"lodarrow.lengths": json.dumps(binding)}),
                   sidecar_path(str(path)), compression="zstd")


def test_sidecars_of_earlier_releases_are_still_read(tmp_path, monkeypatch):
    path = tmp_path / "t.parquet"
    want, nulls = write_tokens(path, 2000, seed=3, nulls=True, row_group_size=300)
    write_legacy_sidecar(path)
    assert read_sidecar(fingerprint(str(path))[0]) is not None
    monkeypatch.setattr(_source.ParquetParts, "read_group",
                        lambda *a, **k: (_ for _ in ()).throw(AssertionError("decoded")))
    np.testing.assert_array_equal(la.sequence_lengths(tmp_path, cache_dir=False), want)
    loader = la.batch_loader(tmp_path, "ids", batch_size=64, nulls="drop", cache_dir=False)
    assert loader.statistics()["dropped"]["nulls"] == len(nulls) > 0
    store = LengthsStore(False)
    assert store.file(fingerprint(str(path))[0], "ids", 0) is not None
    assert store.sidecar_hits == 1
    monkeypatch.undo()
    # another tool rewrites the file (the sidecar stays behind): not used
    pq.write_table(pa.table({"ids": pa.array([[1, 2, 3], [4, 5, 6]])}), path)
    assert read_sidecar(fingerprint(str(path))[0]) is None
    np.testing.assert_array_equal(la.sequence_lengths(path, cache_dir=False), [3, 3])
    with open(sidecar_path(str(path)), "wb") as f:  # a damaged sidecar is not used either
        f.write(b"garbage")
    np.testing.assert_array_equal(la.sequence_lengths(path, cache_dir=False), [3, 3])
    # lodarrow writing the file again removes its stale sidecar
    la.write_parquet(pa.table({"ids": pa.array([[1], [2, 3]])}), path)
    assert os.listdir(tmp_path) == ["t.parquet"]


def test_an_unwritable_cache_warns_and_decodes(tmp_path):
    path = tmp_path / "a.parquet"
    want, _ = write_tokens(path, 100)
    blocker = tmp_path / "file-not-dir"
    blocker.write_text("")
    with pytest.warns(RuntimeWarning, match="cannot write the lengths cache"):
        got = la.sequence_lengths(path, cache_dir=blocker / "cache")
    np.testing.assert_array_equal(got, want)
