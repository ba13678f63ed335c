"""The engines' writers (lodarrow/_tables/_engine_writers.py, docs/scale-out.md) without a
cluster: the staging directory and its publication, Hive partition directories, the writer
chosen, the checks made before any task starts, and ``la.dask_write_parquet`` on Dask's
synchronous scheduler.  The real local Ray and Dask clusters are in test_engines.py."""

import os

import numpy as np
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest

import lodarrow as la
from lodarrow._tables._engine_writers import NULL_PARTITION, WriteSummary, _Target


def target(dest, partition_cols=None, overwrite=False, engine="auto", **options):
    return _Target(dest, partition_cols, overwrite, engine, options, "test_write")


def table(n=6, seed=0):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 4, n)
    x = pa.ListArray.from_arrays(pa.array(np.concatenate([[0], np.cumsum(lengths)]),
                                          pa.int32()),
                                 pa.array(rng.random(int(lengths.sum()))))
    return pa.table({"id": pa.array(np.arange(n) + 100 * seed), "x": x})


def read_rows(dest):
    """Every row of the dataset at ``dest`` (Hive keys as strings), sorted by id."""
    ds = pads.dataset(dest, format="parquet",
                      partitioning=pads.partitioning(flavor="hive", dictionaries=None))
    return sorted(ds.to_table().to_pylist(), key=lambda r: r["id"])


def no_staging_left(parent):
    return not [n for n in os.listdir(parent) if ".lodarrow-tmp-" in n]


def test_files_are_staged_then_published(tmp_path):
    t = target(tmp_path / "out")
    t.start()
    assert not (tmp_path / "out").exists()  # nothing at dest while tasks write
    first = t.write(iter([table(5, 0), table(0, 1), table(4, 2)]), "part-00000")
    second = t.write(iter([table(3, 3)]), "part-00001")
    assert [f for f, _, _ in first] == ["part-00000-0.parquet"]  # one file per task's run
    assert not (tmp_path / "out").exists()
    summary = t.publish([first, second])
    assert isinstance(summary, WriteSummary)
    assert summary.rows == 12 and summary.files == ("part-00000-0.parquet",
                                                     "part-00001-0.parquet")
    assert summary.bytes == sum(os.path.getsize(tmp_path / "out" / f) for f in summary.files)
    want = sorted(pa.concat_tables([table(5, 0), table(4, 2), table(3, 3)]).to_pylist(),
                  key=lambda r: r["id"])
    assert read_rows(tmp_path / "out") == want
    assert no_staging_left(tmp_path) and "12 rows" in str(summary)


def test_hive_partitions_split_mixed_batches(tmp_path):
    keys = pa.array(["en", "a/b c", None, "en", "fr", "a/b c"])
    t = table(6).append_column("lang", keys)
    w = target(tmp_path / "out", partition_cols=["lang"])
    w.start()
    w.publish([w.write(iter([t, t.slice(4)]), "part-7")])
    dirs = sorted(os.listdir(tmp_path / "out"))
    assert dirs == sorted(["lang=en", "lang=a%2Fb%20c", f"lang={NULL_PARTITION}", "lang=fr"])
    got = pq.read_table(tmp_path / "out" / "lang=en")
    assert "lang" not in got.schema.names  # the key lives in the directory name only
    rows = pads.dataset(tmp_path / "out", format="parquet", partitioning="hive").to_table()
    by_lang = {}
    for r in rows.to_pylist():
        by_lang.setdefault(r["lang"], []).append(r["id"])
    assert sorted(by_lang["a/b c"]) == [1, 5, 5] and sorted(by_lang["en"]) == [0, 3]
    assert by_lang["fr"] == [4, 4]


def test_dictionary_keys_and_two_partition_columns(tmp_path):
    t = table(4).append_column("a", pa.array(["x", "x", "y", "y"]).dictionary_encode())
    t = t.append_column("b", pa.array([1, 2, 1, 1]))
    w = target(tmp_path / "out", partition_cols=["a", "b"])
    w.start()
    files = [f for f, _, _ in w.write(iter([t]), "p")]
    assert sorted(files) == sorted([os.path.join("a=x", "b=1", "p-0.parquet"),
                                    os.path.join("a=x", "b=2", "p-1.parquet"),
                                    os.path.join("a=y", "b=1", "p-2.parquet")])


def test_what_is_checked_before_any_task(tmp_path):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x.parquet").write_text("")
    with pytest.raises(FileExistsError, match="overwrite=True"):
        target(tmp_path / "full")
    target(tmp_path / "full", overwrite=True)
    (tmp_path / "empty").mkdir()
    target(tmp_path / "empty")  # an empty directory is fine, as for map_parquet
    with pytest.raises(TypeError, match="dest must be a local path"):
        target(3)
    with pytest.raises(TypeError, match="partition_cols must be a list"):
        target(tmp_path / "o", partition_cols=[1])
    with pytest.raises(ValueError, match="names a column twice"):
        target(tmp_path / "o", partition_cols=["a", "a"])
    with pytest.raises(TypeError, match="overwrite must be a bool"):
        target(tmp_path / "o", overwrite="yes")
    with pytest.raises(ValueError, match="engine must be one of"):
        target(tmp_path / "o", engine="fast")
    with pytest.raises(TypeError, match="row_group_size is not a write option"):
        target(tmp_path / "o", row_group_size=10)


def test_a_failed_write_leaves_neither_dest_nor_staging(tmp_path):
    w = target(tmp_path / "out")
    w.start()
    other = pa.table({"id": pa.array([1]), "x": pa.array([["a"]])})
    with pytest.raises(ValueError, match="same schema"):
        w.write(iter([table(3), other]), "p")
    w.abort()
    assert not (tmp_path / "out").exists() and no_staging_left(tmp_path)
    w = target(tmp_path / "out", partition_cols=["nope"])
    w.start()
    with pytest.raises(KeyError, match="partition column 'nope'"):
        w.write(iter([table(3)]), "p")
    w.abort()
    assert no_staging_left(tmp_path)


def test_overwrite_replaces_only_when_complete(tmp_path):
    dest = tmp_path / "out"
    dest.mkdir()
    pq.write_table(table(2, 9), dest / "old.parquet")
    w = target(dest, overwrite=True)
    w.start()
    w.write(iter([table(3)]), "p")
    assert os.listdir(dest) == ["old.parquet"]  # the old dataset until the new is whole
    w.publish([])
    assert os.listdir(dest) == ["p-0.parquet"]


@pytest.mark.parametrize("engine", ["auto", "pyarrow"])
def test_the_writer_is_polars_where_it_writes_pyarrows_file(tmp_path, engine):
    pytest.importorskip("polars")
    w = target(tmp_path / "out", engine=engine)
    w.start()
    w.write(iter([table(5)]), "p")
    w.publish([])
    created_by = pq.ParquetFile(tmp_path / "out" / "p-0.parquet").metadata.created_by
    assert ("olars" in created_by) == (engine == "auto"), created_by
    # either writer stores the table's own types (list, not large_list)
    assert pq.read_schema(tmp_path / "out" / "p-0.parquet").field("x").type == \
        table(1).schema.field("x").type


# Dask's Parquet reader calls reset_index(inplace=True), which pandas 3.1 deprecates
# (Pandas4Warning): matched by message, the class does not exist in pandas 2
@pytest.mark.filterwarnings("ignore:The inplace keyword")
def test_dask_write_parquet_on_the_synchronous_scheduler(tmp_path):
    dask = pytest.importorskip("dask")
    dd = pytest.importorskip("dask.dataframe")
    src = tmp_path / "src"
    src.mkdir()
    for k in range(3):
        pq.write_table(table(20, k), src / f"part-{k}.parquet")
    f = la.udf(la.sequence_pool, input=la.col("x", lod_level=1), pool_type="sum", out="s")
    with dask.config.set(scheduler="synchronous"):
        ddf = dd.read_parquet(str(src), dtype_backend="pyarrow")
        out = ddf.map_partitions(f, meta=f.dask_meta(ddf))
        summary = la.dask_write_parquet(out, tmp_path / "out")
        assert summary.rows == 60 and len(summary.files) == ddf.npartitions
        want = f(pa.concat_tables([pq.read_table(src / f"part-{k}.parquet")
                                   for k in range(3)]))
        got = read_rows(tmp_path / "out")
        assert got == sorted(want.to_pylist(), key=lambda r: r["id"])
        with pytest.raises(FileExistsError):
            la.dask_write_parquet(out, tmp_path / "out")

        def broken(frame):
            if frame["id"].iloc[0] >= 100:
                raise RuntimeError("partition failed")
            return f(frame)

        with pytest.raises(RuntimeError, match="partition failed"):
            la.dask_write_parquet(ddf.map_partitions(broken, meta=f.dask_meta(ddf)),
                                  tmp_path / "out2")
        assert not (tmp_path / "out2").exists() and no_staging_left(tmp_path)
    with pytest.raises(TypeError, match="ddf must be a dask.dataframe.DataFrame"):
        la.dask_write_parquet(pa.table({"a": [1]}), tmp_path / "out3")


def test_sliced_fixed_size_lists_with_nulls_are_written(tmp_path):
    """Ray's blocks are slices; polars' Arrow import refuses a sliced FixedSizeList with a
    validity bitmap, so the writer hands it the slice's own values."""
    values = pa.array(np.arange(24, dtype=np.float32))
    mask = pa.array([k % 5 == 1 for k in range(12)])
    fsl = pa.FixedSizeListArray.from_arrays(values, 2, mask=mask)
    whole = pa.table({"id": pa.array(np.arange(12)), "v": fsl})
    for engine in ("auto", "pyarrow"):
        w = target(tmp_path / engine, engine=engine)
        w.start()
        w.write(iter([whole.slice(1, 5), whole.slice(7)]), "p")
        w.publish([])
        got = pq.read_table(tmp_path / engine)
        want = pa.concat_tables([whole.slice(1, 5), whole.slice(7)])
        assert got.to_pylist() == want.to_pylist()
        assert got.schema.field("v").type == fsl.type
    # columns chunked differently (Ray concatenates blocks): their record batches are slices
    ids = pa.chunked_array([pa.array(np.arange(5)), pa.array(np.arange(5, 12))])
    v = pa.chunked_array([fsl.slice(0, 8), fsl.slice(8)])
    w = target(tmp_path / "chunks")
    w.start()
    w.write(iter([pa.table({"id": ids, "v": v})]), "p")
    w.publish([])
    assert pq.read_table(tmp_path / "chunks").to_pylist() == whole.to_pylist()
