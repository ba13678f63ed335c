"""The decoded cache (docs/training.md#a-decoded-cache): row groups kept as Arrow IPC files
once decoded, mapped by every later read.

What is delivered with the cache is what is delivered without it, in every mode, epoch after
epoch, in one process and from ``DataLoader`` workers; a later run decodes nothing (the
Parquet read is made to fail); a changed file is never served from its old entries; a damaged
entry is decoded again; a cache that cannot be written warns once and reads on.
"""

import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lodarrow as la
from lodarrow._training._source import ParquetParts

MODES = {"padded": dict(batch_size=16), "packed": dict(batch_size=16),
         "packed_rows": dict(max_tokens=256, row_length=64),
         "blocks": dict(max_tokens=256, row_length=64),
         "segments": dict(max_tokens=256, pad_to_multiple_of=256)}


def _corpus(root, seed, files=2, rows=300, nulls=False):
    """Parquet files of an int32 token column (some empty sequences) and two others."""
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    for k in range(files):
        lengths = rng.integers(0, 30, rows)
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
        mask = rng.random(rows) < 0.1 if nulls else None
        ids = pa.ListArray.from_arrays(pa.array(offsets),
                                       pa.array(rng.integers(0, 50000, offsets[-1]), pa.int32()),
                                       mask=None if mask is None else pa.array(mask))
        table = pa.table({"ids": ids, "label": pa.array(rng.integers(0, 9, rows)),
                          "doc": pa.array(rng.random(rows))})
        pq.write_table(table, root / f"part-{k}.parquet", row_group_size=64)
    return root


def _batches(loader, epochs=(0, 1)):
    out = []
    for e in epochs:
        loader.set_epoch(e)
        out.extend({k: np.asarray(v).copy() for k, v in b.items() if v is not None}
                   for b in loader)
    return out


def _assert_same(a, b):
    assert len(a) == len(b) and a
    for x, y in zip(a, b):
        assert x.keys() == y.keys()
        for k in x:
            np.testing.assert_array_equal(x[k], y[k], err_msg=k)


def _entries(cache):
    root = os.path.join(cache, "decoded-v1")
    if not os.path.isdir(root):
        return []
    return sorted(os.path.join(d, n) for d, _, names in os.walk(root) for n in names)


@pytest.mark.parametrize("mode", list(MODES))
def test_the_cache_delivers_what_the_files_do_and_a_later_run_decodes_nothing(
        tmp_path, mode, monkeypatch):
    src = _corpus(tmp_path / "data", 1)
    cache = str(tmp_path / "cache")
    args = dict(MODES[mode], mode=mode, seed=5, extra_columns=["label"], cache_dir=cache)
    plain = _batches(la.batch_loader(str(src), "ids", **args))
    first = _batches(la.batch_loader(str(src), "ids", decoded_cache=True, **args))
    _assert_same(plain, first)
    entries = _entries(cache)
    # every row group of both files, once (the same columns at every read), with its CRC-32
    assert len(entries) == 2 * 5 * 2
    assert {e.rpartition(".")[2] for e in entries} == {"arrow", "crc32"}

    def refuse(self, k, columns):
        raise AssertionError(f"row group {k} decoded from its file")

    monkeypatch.setattr(ParquetParts, "_decode_group", refuse)
    again = _batches(la.batch_loader(str(src), "ids", decoded_cache=True, **args))
    _assert_same(plain, again)
    assert _entries(cache) == entries


@settings(max_examples=12, deadline=None)
@given(mode=st.sampled_from(list(MODES)), seed=st.integers(0, 50), nulls=st.booleans(),
       shuffle=st.booleans(), replicas=st.sampled_from([1, 2]), extra=st.booleans(),
       warm=st.booleans())
def test_every_option_delivers_the_same_with_the_cache(tmp_path_factory, mode, seed, nulls,
                                                        shuffle, replicas, extra, warm):
    """Over the product of options: each rank's batches, two epochs, equal with and without
    the cache, whether it starts empty or full (``warm``: filled by a run before)."""
    tmp = tmp_path_factory.mktemp("decoded")
    src = str(_corpus(tmp / "data", seed, nulls=nulls))
    args = dict(MODES[mode], mode=mode, seed=seed, shuffle=shuffle, num_replicas=replicas,
                nulls="drop" if nulls else "error", cache_dir=str(tmp / "cache"),
                extra_columns=["label"] if extra else ())
    for rank in range(replicas):
        plain = _batches(la.batch_loader(src, "ids", rank=rank, **args))
        if warm:
            _batches(la.batch_loader(src, "ids", rank=rank, decoded_cache=True, **args), (0,))
        cached = _batches(la.batch_loader(src, "ids", rank=rank, decoded_cache=True, **args))
        _assert_same(plain, cached)


def test_dataloader_workers_fill_and_read_the_cache(tmp_path):
    torch = pytest.importorskip("torch")
    src = str(_corpus(tmp_path / "data", 2))
    cache = str(tmp_path / "cache")
    args = dict(mode="packed", batch_size=16, seed=1, extra_columns=["label"], cache_dir=cache,
                to="torch")
    want = _batches(la.batch_loader(src, "ids", **args))
    for _ in range(2):  # the workers fill the cache, then read it
        loader = la.batch_loader(src, "ids", decoded_cache=True, **args)
        dl = torch.utils.data.DataLoader(loader.torch(), batch_size=None, num_workers=2)
        got = []
        for e in (0, 1):
            loader.set_epoch(e)
            got.extend({k: np.asarray(v).copy() for k, v in b.items() if v is not None}
                       for b in dl)
        _assert_same(want, got)
        assert len(_entries(cache)) == 20


def _versions(cache):
    """The version folders kept per data file."""
    root = os.path.join(cache, "decoded-v1")
    return {f: sorted(os.listdir(os.path.join(root, f))) for f in os.listdir(root)}


def test_a_changed_file_is_never_served_from_its_old_entries(tmp_path):
    src = _corpus(tmp_path / "data", 3, files=1)
    cache = str(tmp_path / "cache")
    args = dict(batch_size=8, seed=0, cache_dir=cache, decoded_cache=True)
    _batches(la.batch_loader(str(src), "ids", **args))
    (old,) = _versions(cache).values()
    _corpus(tmp_path / "data", 4, files=1)  # rewritten: other values, the same name
    plain = _batches(la.batch_loader(str(src), "ids", batch_size=8, seed=0, cache_dir=cache))
    _assert_same(plain, _batches(la.batch_loader(str(src), "ids", **args)))
    # the old version's entries went with the first entry of the new one: no stale copy
    (new,) = _versions(cache).values()
    assert len(old) == len(new) == 1 and old != new
    os.utime(src / "part-0.parquet")  # touched: a new version, the same values
    _assert_same(plain, _batches(la.batch_loader(str(src), "ids", **args)))
    (touched,) = _versions(cache).values()
    assert len(touched) == 1 and touched != new
    # and a file rewritten while a loader reads it is an error naming it, as without the cache
    loader = la.batch_loader(str(src), "ids", **args)
    _corpus(tmp_path / "data", 5, files=1, rows=301)
    with pytest.raises(ValueError, match=r"part-0\.parquet.*changed after the loader read"):
        _batches(loader)


def test_a_damaged_entry_is_decoded_again_and_replaced(tmp_path):
    src = str(_corpus(tmp_path / "data", 6, files=1))
    cache = str(tmp_path / "cache")
    args = dict(mode="blocks", max_tokens=256, row_length=64, seed=2, cache_dir=cache)
    want = _batches(la.batch_loader(src, "ids", **args))
    _batches(la.batch_loader(src, "ids", decoded_cache=True, **args))
    entries = _entries(cache)
    files = [e for e in entries if e.endswith(".arrow")]
    kept = [pa.ipc.open_file(pa.OSFile(path)).read_all() for path in files]  # in memory
    with open(files[0], "r+b") as f:  # its footer gone
        f.truncate(os.path.getsize(files[0]) // 2)
    with open(files[1], "wb") as f:
        f.write(b"not an arrow file")
    with open(files[2], "r+b") as f:  # a token id changed: a valid file of other values
        values = kept[2].column("ids").chunk(0).values
        raw = bytearray(f.read())
        needle = np.asarray(values[:4]).astype("<i4").tobytes()
        pos = raw.find(needle)
        assert pos > 0
        raw[pos] ^= 0x01
        f.seek(0)
        f.write(raw)
    os.remove(files[3] + ".crc32")  # an entry without its checksum vouches for nothing
    _assert_same(want, _batches(la.batch_loader(src, "ids", decoded_cache=True, **args)))
    assert _entries(cache) == entries
    for path, table in zip(files, kept):  # written again, whole
        assert pa.ipc.open_file(pa.OSFile(path)).read_all().equals(table)


def test_a_cache_that_cannot_be_written_warns_once_and_reads_on(tmp_path):
    src = str(_corpus(tmp_path / "data", 7))
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "decoded-v1").write_text("a file where the cache's folder goes")
    args = dict(batch_size=16, seed=0, cache_dir=str(cache))
    want = _batches(la.batch_loader(src, "ids", **args))
    with pytest.warns(RuntimeWarning, match="decoded cache cannot keep") as record:
        got = _batches(la.batch_loader(src, "ids", decoded_cache=True, **args))
    assert len([w for w in record if "decoded cache" in str(w.message)]) == 1
    _assert_same(want, got)


def test_the_lengths_pass_keeps_nothing_and_the_columns_order_does_not_matter(tmp_path):
    """A start that decodes the lengths (no footer lengths, an empty lengths cache) reads the
    sequence column alone: nothing of it is kept, only what the batches read; extra columns
    asked for in another order read the same entries."""
    src = str(_corpus(tmp_path / "data", 12))
    cache = str(tmp_path / "cache")
    args = dict(batch_size=16, seed=0, cache_dir=cache, decoded_cache=True)
    first = _batches(la.batch_loader(src, "ids", extra_columns=["label", "doc"], **args))
    entries = _entries(cache)
    assert len(entries) == 2 * 5 * 2  # one entry (and its checksum) a row group
    again = _batches(la.batch_loader(src, "ids", extra_columns=["doc", "label"], **args))
    _assert_same(first, again)
    assert _entries(cache) == entries


def test_an_entry_of_another_row_group_is_not_served(tmp_path):
    src = str(_corpus(tmp_path / "data", 13, files=1, rows=300))  # row groups of 64 and 44
    cache = str(tmp_path / "cache")
    args = dict(batch_size=8, seed=0, cache_dir=cache)
    want = _batches(la.batch_loader(src, "ids", **args))
    _batches(la.batch_loader(src, "ids", decoded_cache=True, **args))
    files = sorted(e for e in _entries(cache) if e.endswith(".arrow"))
    first = next(f for f in files if os.path.basename(f).startswith("0-"))
    last = next(f for f in files if os.path.basename(f).startswith("4-"))
    for suffix in ("", ".crc32"):  # a valid entry, with its checksum, of 44 rows for 64
        with open(last + suffix, "rb") as a, open(first + suffix, "wb") as b:
            b.write(a.read())
    _assert_same(want, _batches(la.batch_loader(src, "ids", decoded_cache=True, **args)))
    assert pa.ipc.open_file(pa.OSFile(first)).read_all().num_rows == 64  # written again


def test_arguments_are_checked_where_they_enter(tmp_path):
    src = str(_corpus(tmp_path / "data", 8, files=1))
    got = _batches(la.batch_loader(src, "ids", batch_size=4, decoded_cache=np.True_,
                                   cache_dir=str(tmp_path / "c")), (0,))
    assert got and _entries(str(tmp_path / "c"))
    with pytest.raises(TypeError, match="decoded_cache must be True or False, got str"):
        la.batch_loader(src, "ids", batch_size=4, decoded_cache="yes")
    with pytest.raises(ValueError, match="cache_dir=False turns the cache directory off"):
        la.batch_loader(src, "ids", batch_size=4, decoded_cache=True, cache_dir=False)
    table = pq.read_table(src)
    with pytest.raises(ValueError, match="decoded_cache=True keeps the row groups of Parquet"):
        la.batch_loader(table, "ids", batch_size=4, decoded_cache=True)


def test_a_mixture_of_files_reads_through_the_cache(tmp_path, monkeypatch):
    a = str(_corpus(tmp_path / "a", 9, files=1))
    b = str(_corpus(tmp_path / "b", 10, files=1))
    cache = str(tmp_path / "cache")
    mix = la.mix({"a": a, "b": b}, weights=[0.5, 0.5])
    args = dict(batch_size=8, seed=4, cache_dir=cache)
    want = _batches(la.batch_loader(mix, "ids", **args))
    _assert_same(want, _batches(la.batch_loader(mix, "ids", decoded_cache=True, **args)))
    monkeypatch.setattr(ParquetParts, "_decode_group",
                        lambda self, k, c: pytest.fail("decoded from the file"))
    _assert_same(want, _batches(la.batch_loader(mix, "ids", decoded_cache=True, **args)))


def test_clear_decoded_cache_removes_the_entries(tmp_path):
    src = str(_corpus(tmp_path / "data", 11, files=1))
    cache = str(tmp_path / "cache")
    _batches(la.batch_loader(src, "ids", batch_size=8, cache_dir=cache, decoded_cache=True),
             (0,))
    assert la.clear_decoded_cache(cache) == 5
    assert _entries(cache) == [] and la.clear_decoded_cache(cache) == 0
    assert os.path.isdir(os.path.join(cache, "lengths-v1"))  # the lengths cache is left
    assert la.clear_decoded_cache(False) == 0  # no cache directory: nothing to clear
    with open(os.path.join(cache, "decoded-v1"), "w") as f:  # not a folder: removed
        f.write("x")
    assert la.clear_decoded_cache(cache) == 0
    assert not os.path.exists(os.path.join(cache, "decoded-v1"))
