"""Parquet sources on S3 and on any filesystem (docs/scale-out.md#remote-corpora).

Against a real S3-compatible server the tests start on 127.0.0.1 (moto's server mode, the
``s3`` fixture of conftest.py), and against an fsspec filesystem (fsspec's in-memory one):
the resolver's rules, read_parquet / iter_parquet, map_parquet from and to S3 (what a reader
sees mid-run), sequence_lengths and the loader, and the bytes fetched against the column's
compressed size.
"""

import shutil
import threading

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

import lodarrow as la
from lodarrow._tables._sources import resolve_source


# ---------------------------------------------------------------------------- helpers
class _CountingFile:
    """A file whose reads are counted (bytes and requests) in ``counter``."""

    def __init__(self, f, counter):
        self._f, self._c = f, counter

    def read(self, n=-1):
        data = self._f.read() if n is None or n < 0 else self._f.read(n)
        with self._c["lock"]:
            self._c["bytes"] += len(data)
            self._c["reads"] += 1
        return data

    def seek(self, pos, whence=0):
        return self._f.seek(pos, whence)

    def tell(self):
        return self._f.tell()

    def close(self):
        self._f.close()

    @property
    def closed(self):
        return self._f.closed

    def readable(self):
        return True

    def seekable(self):
        return True

    def writable(self):
        return False

    def size(self):
        return self._f.size()


class CountingHandler(pafs.FileSystemHandler):
    """A ``pyarrow.fs.PyFileSystem`` handler over another filesystem that counts the bytes
    read from its files: what a remote reader fetches."""

    def __init__(self, fs):
        self.fs = fs
        self.counter = {"bytes": 0, "reads": 0, "lock": threading.Lock()}

    def reset(self):
        self.counter["bytes"] = self.counter["reads"] = 0

    def get_type_name(self):
        return "counting"

    def normalize_path(self, path):
        return self.fs.normalize_path(path)

    def equals(self, other):
        return isinstance(other, CountingHandler) and other.fs.equals(self.fs)

    def get_file_info(self, paths):
        return self.fs.get_file_info(paths)

    def get_file_info_selector(self, selector):
        return self.fs.get_file_info(selector)

    def create_dir(self, path, recursive):
        self.fs.create_dir(path, recursive=recursive)

    def delete_dir(self, path):
        self.fs.delete_dir(path)

    def delete_dir_contents(self, path, missing_dir_ok=False):
        self.fs.delete_dir_contents(path, missing_dir_ok=missing_dir_ok)

    def delete_root_dir_contents(self):
        raise NotImplementedError

    def delete_file(self, path):
        self.fs.delete_file(path)

    def move(self, src, dest):
        self.fs.move(src, dest)

    def copy_file(self, src, dest):
        self.fs.copy_file(src, dest)

    def open_input_stream(self, path):
        return pa.PythonFile(_CountingFile(self.fs.open_input_stream(path), self.counter),
                             mode="r")

    def open_input_file(self, path):
        return pa.PythonFile(_CountingFile(self.fs.open_input_file(path), self.counter),
                             mode="r")

    def open_output_stream(self, path, metadata):
        return self.fs.open_output_stream(path, metadata=metadata)

    def open_append_stream(self, path, metadata):
        return self.fs.open_append_stream(path, metadata=metadata)


def upload(local_root, fs, prefix):
    """Copy a local directory tree to ``prefix`` on ``fs`` (hidden files too)."""
    pafs.copy_files(str(local_root), prefix, source_filesystem=pafs.LocalFileSystem(),
                    destination_filesystem=fs)


def token_table(rng, n, extra=True):
    lengths = rng.integers(0, 40, n)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    ids = pa.ListArray.from_arrays(pa.array(offsets),
                                   pa.array(rng.integers(0, 50000, offsets[-1]), pa.int32()))
    cols = {"ids": ids, "label": pa.array(rng.integers(0, 2, n))}
    if extra:  # a wide column the lengths pass must not fetch
        cols["emb"] = pa.array(list(rng.random((n, 32)).astype(np.float32)),
                               pa.list_(pa.float32(), 32))
    return pa.table(cols), lengths


@pytest.fixture
def corpus(tmp_path):
    """A hive-partitioned corpus with the files a real dataset directory holds beside the
    data: a card, JSON, _SUCCESS, .crc, an extension-less part file, a hidden directory."""
    rng = np.random.default_rng(0)
    root = tmp_path / "corpus"
    tables, lengths = {}, {}
    for rel in ("lang=de/part-0.parquet", "lang=en/part-0.parquet", "lang=en/part-1.parquet",
                "lang=fr/part-00000"):
        t, n = token_table(rng, 300)
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(t, root / rel, row_group_size=128)
        tables[rel], lengths[rel] = t, n
    (root / "README.md").write_text("# corpus card\n")
    (root / "dataset_info.json").write_text("{}")
    (root / "_SUCCESS").write_text("")
    (root / "lang=en" / ".part-0.parquet.crc").write_bytes(b"crc")
    (root / ".staging").mkdir()
    pq.write_table(tables["lang=de/part-0.parquet"], root / ".staging" / "x.parquet")
    return root, tables, lengths


# ---------------------------------------------------------------------------- resolver
def test_resolver_rules_are_the_same_on_s3(corpus, s3):
    root, tables, _ = corpus
    fs, bucket = s3
    upload(root, fs, f"{bucket}/corpus")
    local = resolve_source(root, "read_parquet")
    for source, kw in ((f"s3://{bucket}/corpus", {}), (f"{bucket}/corpus/", {"filesystem": fs}),
                       (f"s3://{bucket}/corpus", {"filesystem": fs})):
        remote = resolve_source(source, "read_parquet", **kw)
        assert remote.kind == "directory" and remote.base == f"{bucket}/corpus"
        assert [rel for _, rel in remote.files] == [rel for _, rel in local.files] \
            == sorted(tables)
    glob = resolve_source(f"s3://{bucket}/corpus/lang=*/part-*.parquet", "read_parquet")
    assert [rel for _, rel in glob.files] == ["lang=de/part-0.parquet", "lang=en/part-0.parquet",
                                              "lang=en/part-1.parquet"]
    deep = resolve_source(f"s3://{bucket}/corpus/**/*", "read_parquet")
    assert [rel for _, rel in deep.files] == sorted(tables)
    listed = resolve_source([f"s3://{bucket}/corpus/lang=en/part-1.parquet",
                             f"s3://{bucket}/corpus/lang=de/part-0.parquet"], "x")
    assert listed.kind == "list" and listed.base == f"{bucket}/corpus"
    assert [rel for _, rel in listed.files] == ["lang=en/part-1.parquet", "lang=de/part-0.parquet"]
    with pytest.raises(FileNotFoundError, match=rf"read_parquet: path 's3://{bucket}/nope' does "
                                                rf"not exist"):
        la.read_parquet(f"s3://{bucket}/nope")
    with pytest.raises(FileNotFoundError, match="matches no files"):
        la.read_parquet(f"s3://{bucket}/corpus/*.nope")
    with pytest.raises(ValueError, match="listed twice"):
        resolve_source([f"s3://{bucket}/corpus/lang=de/part-0.parquet"] * 2, "x")
    with pytest.raises(ValueError, match="mixes URIs and local paths"):
        resolve_source([f"s3://{bucket}/corpus/lang=de/part-0.parquet", str(root)], "x")
    with pytest.raises(TypeError, match="filesystem must be a pyarrow.fs.FileSystem or an "
                                        "fsspec filesystem, got str"):
        resolve_source("x", "x", filesystem="s3")


def test_bad_remote_files_name_themselves(s3):
    fs, bucket = s3
    good = pa.table({"x": [[1, 2]]})
    with fs.open_output_stream(f"{bucket}/d/a.parquet") as f:
        pq.write_table(good, f)
    for data, why in ((b"", "0 bytes, too short"), (b"PAR1" + b"z" * 30, "magic bytes")):
        with fs.open_output_stream(f"{bucket}/d/b.parquet") as f:
            f.write(data)
        for fn in (la.read_parquet, la.iter_parquet, la.sequence_lengths):
            with pytest.raises(pa.ArrowInvalid, match=rf"'s3://{bucket}/d/b.parquet'.*{why}"):
                fn(f"s3://{bucket}/d")


# ---------------------------------------------------------------------------- readers
def test_read_and_iter_parquet_from_s3_and_fsspec(corpus, s3):
    fsspec = pytest.importorskip("fsspec")
    root, _, _ = corpus
    fs, bucket = s3
    upload(root, fs, f"{bucket}/corpus")
    want = la.read_parquet(root, "ids")
    mem = fsspec.filesystem("memory")
    mem.rm("/", recursive=True) if mem.exists("/corpus") else None
    mem_fs = pafs.PyFileSystem(pafs.FSSpecHandler(mem))
    upload(root, mem_fs, "/corpus")
    for source, kw in ((f"s3://{bucket}/corpus", {}), (f"{bucket}/corpus", {"filesystem": fs}),
                       ("/corpus", {"filesystem": mem})):
        got = la.read_parquet(source, "ids", **kw)
        assert got.equals(want)
        parts = list(la.iter_parquet(source, "ids", batch_size=100, **kw))
        assert sum(len(p.recursive_sequence_lengths()[0]) for p in parts) == 1200
    one = la.read_parquet(f"s3://{bucket}/corpus/lang=en/part-1.parquet", "ids")
    assert one.equals(la.read_parquet(root / "lang=en/part-1.parquet", "ids"))
    mem.rm("/corpus", recursive=True)


def test_only_the_needed_column_chunks_are_fetched(s3):
    """sequence_lengths fetches the footer and one leaf column; read_parquet of one column
    fetches that column's chunks: measured against the chunks' compressed size."""
    fs, bucket = s3
    rng = np.random.default_rng(1)
    table, lengths = token_table(rng, 20000)
    path = f"{bucket}/wide/part-0.parquet"
    with fs.open_output_stream(path) as f:
        pq.write_table(table, f, row_group_size=5000)
    size = fs.get_file_info(path).size
    meta = pq.read_metadata(fs.open_input_file(path))
    ids = sum(meta.row_group(g).column(0).total_compressed_size
              for g in range(meta.num_row_groups))
    footer = meta.serialized_size + 8
    handler = CountingHandler(fs)
    counting = pafs.PyFileSystem(handler)
    got = la.sequence_lengths(path, "ids", filesystem=counting, cache_dir=False)
    np.testing.assert_array_equal(got, lengths)
    fetched = handler.counter["bytes"]
    # the column's chunks, the footer (read once, 64 KiB tail at most), nothing else
    assert ids <= fetched <= ids + footer + (64 << 10), (fetched, ids, footer, size)
    assert fetched < size / 3
    handler.reset()
    la.read_parquet(path, "ids", filesystem=counting)
    assert ids <= handler.counter["bytes"] <= ids + 2 * footer + (64 << 10)


# ---------------------------------------------------------------------------- map_parquet
def _reverse(batch):
    return la.apply(batch, la.sequence_reverse, x=la.col("ids"), out="ids")


def test_map_parquet_s3_to_s3(corpus, s3, tmp_path):
    root, tables, _ = corpus
    fs, bucket = s3
    upload(root, fs, f"{bucket}/corpus")
    local = la.map_parquet(root, tmp_path / "local-out", _reverse, batch_rows=100)
    seen = []

    def watching(batch):  # what a reader sees under dest while the run is going
        seen.append(fs.get_file_info(pafs.FileSelector(f"{bucket}/out", allow_not_found=True)))
        return _reverse(batch)

    summary = la.map_parquet(f"s3://{bucket}/corpus", f"s3://{bucket}/out", watching,
                             batch_rows=100, threads=2)
    assert summary.dest == f"s3://{bucket}/out" and summary.files == 4
    assert summary.rows == local.rows == 1200 and summary.bytes_in == local.bytes_in
    assert seen and all(s == [] for s in seen)  # nothing under dest until every file is up
    listing = sorted(i.path for i in fs.get_file_info(
        pafs.FileSelector(bucket, recursive=True)) if i.type == pafs.FileType.File
        and "/out/" in i.path)
    data = sorted(tables)
    assert listing == sorted([f"{bucket}/out/_SUCCESS"] + [f"{bucket}/out/{r}" for r in data])
    assert not [i for i in fs.get_file_info(pafs.FileSelector(bucket))
                if "lodarrow-tmp" in i.path]  # the staging prefix is gone
    got = la.read_parquet(f"s3://{bucket}/out", "ids")
    assert got.equals(la.read_parquet(tmp_path / "local-out", "ids"))
    # the lengths recorded in the footers are valid: the same as decoded
    np.testing.assert_array_equal(
        la.sequence_lengths(f"s3://{bucket}/out", "ids", cache_dir=False),
        la.sequence_lengths(tmp_path / "local-out", "ids", cache_dir=False))
    # dest exists: refused unless overwrite, which replaces it whole
    with pytest.raises(FileExistsError, match=rf"dest '{bucket}/out' exists|dest 's3://"):
        la.map_parquet(f"s3://{bucket}/corpus", f"s3://{bucket}/out", _reverse)
    la.map_parquet(f"s3://{bucket}/corpus/lang=de", f"s3://{bucket}/out", _reverse,
                   overwrite=True)
    assert [rel for _, rel in resolve_source(f"s3://{bucket}/out", "x").files] == \
        ["part-0.parquet"]
    with pytest.raises(ValueError, match="is inside the source directory"):
        la.map_parquet(f"s3://{bucket}/corpus", f"s3://{bucket}/corpus/out", _reverse)


def test_map_parquet_to_s3_fails_whole(corpus, s3):
    root, _, _ = corpus
    fs, bucket = s3
    calls = []

    def failing(batch):
        calls.append(1)
        if len(calls) == 4:
            raise ValueError("boom")
        return _reverse(batch)

    with pytest.raises(ValueError, match="boom"):
        la.map_parquet(root, f"s3://{bucket}/out", failing, batch_rows=100)
    left = fs.get_file_info(pafs.FileSelector(bucket, recursive=True))
    assert left == []  # no dest, no staging prefix


def test_map_parquet_between_local_and_s3(corpus, s3, tmp_path):
    root, _, _ = corpus
    fs, bucket = s3
    la.map_parquet(root, f"s3://{bucket}/up", _reverse, record_lengths=False)
    assert not [i for i in fs.get_file_info(pafs.FileSelector(f"{bucket}/up", recursive=True))
                if "lodarrow-lengths" in i.path]
    la.map_parquet(f"s3://{bucket}/up", tmp_path / "down", _reverse)  # reversed twice
    assert la.read_parquet(tmp_path / "down", "ids").equals(la.read_parquet(root, "ids"))


# ---------------------------------------------------------------------------- training
def test_loader_and_lengths_cache_on_s3(corpus, s3, tmp_path):
    root, tables, lengths = corpus
    fs, bucket = s3
    clean = tmp_path / "clean"  # written by pyarrow: no recorded lengths
    shutil.copytree(root, clean)
    upload(clean, fs, f"{bucket}/corpus")
    handler = CountingHandler(fs)
    counting = pafs.PyFileSystem(handler)
    cache = tmp_path / "cache"
    want = np.concatenate([lengths[r] for r in sorted(tables)])
    cold = la.sequence_lengths(f"{bucket}/corpus", "ids", filesystem=counting, cache_dir=cache)
    cold_bytes = handler.counter["bytes"]
    np.testing.assert_array_equal(cold, want)
    handler.reset()
    warm = la.sequence_lengths(f"{bucket}/corpus", "ids", filesystem=counting, cache_dir=cache)
    np.testing.assert_array_equal(warm, want)
    # a cached start reads each file's tail (its footer: 64 KiB at most) and the four
    # bytes of the files that are not named *.parquet, no column chunk
    files = resolve_source(f"s3://{bucket}/corpus", "x").files
    assert handler.counter["bytes"] <= len(files) * (64 << 10) + 3 * 4 < cold_bytes
    args = dict(max_tokens=200, shuffle=True, seed=3, extra_columns=["label"])
    remote = la.batch_loader(f"s3://{bucket}/corpus", "ids", cache_dir=cache, **args)
    here = la.batch_loader(clean, "ids", cache_dir=False, **args)
    assert len(remote) == len(here) > 0
    for a, b in zip(remote, here):
        np.testing.assert_array_equal(a["values"], b["values"])
        np.testing.assert_array_equal(a["label"], b["label"])
    state = remote.state_dict()
    assert len(str(state)) < 4096
