"""``write_parquet(..., engine=)``: polars' writer where it writes pyarrow's file, pyarrow's
otherwise; the two files read back the same (docs/performance.md#parquet-writes)."""

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from strategies import lod_tensors

import lodarrow as la
from lodarrow._tables._parquet_writers import polars_writes_type

HSET = settings(max_examples=40, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def _writer(path):
    """Which library wrote the file (Parquet's ``created_by``)."""
    created_by = pq.ParquetFile(path).metadata.created_by.lower()
    if "polars" in created_by:
        return "polars"
    return "pyarrow" if "arrow" in created_by else created_by


def _trial_table():
    """The table kinds of docs/tables.md: ids, keys, strings with nulls, two-level int32
    lists with null and empty rows, vectors as fixed-size lists, a float16 tensor."""
    tokens = pa.array([[[1, 2], [3]], None, [], [[]], [[4, 5, 6]]], pa.list_(pa.list_(pa.int32())))
    emb = pa.array([[[1, 2]], [], None, [[3, 4], [5, 6]], [[7, 8]]],
                   pa.list_(pa.list_(pa.float32(), 2)))
    return pa.table({
        "id": pa.array([10, 11, 12, 13, 14], pa.int64()),
        "key": pa.array(["a", "b", "a", "c", "b"]),
        "title": pa.array(["x", None, "z", "", "w"], pa.large_string()),
        "score": pa.array([1.5, None, 2.0, 3.0, -0.0], pa.float64()),
        "tokens": tokens, "emb": emb,
        "half": pa.array([[1.0], [], [2.0, 3.0], None, [4.0]], pa.large_list(pa.float16())),
        "when": pa.array([1, 2, None, 4, 5], pa.timestamp("us", tz="UTC")),
        "meta": pa.array([{"n": 1}, None, {"n": 3}, {"n": 4}, {"n": 5}],
                         pa.struct([("n", pa.int16())])),
    }).replace_schema_metadata({"owner": "lodarrow tests"})


def _same_file_contents(a, b):
    """Both files read back the same by pyarrow (types, metadata) and DuckDB (values)."""
    ta, tb = pq.read_table(a), pq.read_table(b)
    assert ta.schema.equals(tb.schema, check_metadata=True), (ta.schema, tb.schema)
    assert ta.equals(tb)
    assert (duckdb.sql(f"select * from '{a}' order by id").fetchall()
            == duckdb.sql(f"select * from '{b}' order by id").fetchall())
    assert pl.read_parquet(a).equals(pl.read_parquet(b))


def test_a_table_is_written_by_polars_and_reads_back_as_pyarrow_writes_it(tmp_path):
    table = _trial_table()
    auto, ref = str(tmp_path / "auto.parquet"), str(tmp_path / "ref.parquet")
    la.write_parquet(table, auto)
    la.write_parquet(table, ref, engine="pyarrow")
    assert (_writer(auto), _writer(ref)) == ("polars", "pyarrow")
    _same_file_contents(auto, ref)
    assert pq.read_table(auto).equals(table)
    assert pq.read_table(auto).schema.field("tokens").type == table.schema.field("tokens").type


@pytest.mark.parametrize("compression", [None, "snappy", "zstd", "gzip", "none"])
def test_mapping_of_tensors_is_the_same_through_both_writers(tmp_path, compression):
    emb = la.LoDTensor(np.arange(24, dtype=np.float32).reshape(6, 4), lengths=[[2, 0, 3, 1]])
    tokens = la.LoDTensor(np.arange(9, dtype=np.int32), lengths=[[2, 1, 0, 1], [3, 0, 4, 2]])
    columns = {"id": np.arange(4), "emb": emb, "tokens": tokens}
    options = {} if compression is None else {"compression": compression}
    auto, ref = str(tmp_path / "auto.parquet"), str(tmp_path / "ref.parquet")
    la.write_parquet(columns, auto, **options)
    la.write_parquet(columns, ref, engine="pyarrow", **options)
    assert _writer(auto) == "polars"
    _same_file_contents(auto, ref)
    assert la.read_parquet(auto, "emb").equals(emb)
    assert la.read_parquet(auto, "tokens").equals(tokens)
    codec = pq.ParquetFile(auto).metadata.row_group(0).column(0).compression
    assert codec == {None: "SNAPPY", "none": "UNCOMPRESSED"}.get(compression,
                                                                (compression or "").upper())


def test_32_bit_lists_stay_32_bit_through_polars(tmp_path):
    """polars holds large lists; the stored schema gives the file's widths back."""
    path = str(tmp_path / "narrow.parquet")
    t = la.from_arrow(pa.array([[1.0, 2.0], [], [3.0]], pa.list_(pa.float32())))
    la.write_parquet(t, path)
    assert _writer(path) == "polars"
    assert pa.types.is_list(pq.read_schema(path).field("data").type)
    back = la.read_parquet(path)
    assert back.equals(t) and pa.types.is_list(back.to_arrow().type)


@pytest.mark.parametrize("options", [{"use_dictionary": False}, {"write_statistics": True},
                                     {"store_schema": False}, {"data_page_size": 1 << 16},
                                     {"compression": {"data": "zstd"}}])
def test_options_only_pyarrow_knows_go_to_pyarrow(tmp_path, options):
    t = la.LoDTensor(np.arange(6.0), lengths=[[2, 4]])
    path = str(tmp_path / "t.parquet")
    la.write_parquet(t, path, **options)
    assert _writer(path) == "pyarrow"
    assert la.read_parquet(path).equals(t)
    with pytest.raises(ValueError, match=r"engine='polars' cannot write this table: "):
        la.write_parquet(t, path, engine="polars", **options)


@pytest.mark.parametrize("arr", [
    pa.array([b"ab", b"cd"], pa.binary(2)), pa.array([1, 2], pa.time32("s")),
    pa.array([86_400_000, 0], pa.date64()), pa.array([1, 2], pa.duration("s")),
    pa.array([1, 2], pa.timestamp("s")), pa.array(["x", "y"]).dictionary_encode(),
    pa.array([[("a", 1)], []], pa.map_(pa.string(), pa.int32())),
    pa.array([[b"ab"], []], pa.list_(pa.binary(2))),
], ids=lambda a: str(a.type))
def test_types_polars_would_convert_are_written_by_pyarrow(tmp_path, arr):
    """polars changes these (a unit, a width, a kind): pyarrow writes them, and the file is
    the one pyarrow gives."""
    assert not polars_writes_type(arr.type)
    table = pa.table({"id": [1, 2], "c": arr})
    path = str(tmp_path / "t.parquet")
    la.write_parquet(table, path)
    assert _writer(path) == "pyarrow"
    assert pq.read_table(path).column("c").type == pq.read_table(
        _pyarrow_file(table, tmp_path)).column("c").type
    with pytest.raises(ValueError, match=r"column 'c' is of type .*which polars converts"):
        la.write_parquet(table, path, engine="polars")


def _pyarrow_file(table, tmp_path):
    path = str(tmp_path / "pyarrow.parquet")
    pq.write_table(table, path)
    return path


def test_engine_is_checked():
    t = la.LoDTensor(np.arange(3.0))
    with pytest.raises(ValueError, match=r"engine must be one of 'auto', 'pyarrow', 'polars', "
                                         r"got 'fastparquet'"):
        la.write_parquet(t, "unused.parquet", engine="fastparquet")
    with pytest.raises(TypeError, match=r"engine must be one of .* got int"):
        la.write_parquet(t, "unused.parquet", engine=1)


def test_without_polars_auto_is_pyarrow(tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_polars(name, *args, **kwargs):
        if name == "polars":
            raise ImportError("no polars here")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_polars)
    t = la.LoDTensor(np.arange(6.0), lengths=[[2, 4]])
    path = str(tmp_path / "t.parquet")
    la.write_parquet(t, path)
    assert _writer(path) == "pyarrow"
    with pytest.raises(ValueError, match=r"polars is not installed"):
        la.write_parquet(t, path, engine="polars")


def test_a_failed_write_leaves_no_file(tmp_path, monkeypatch):
    path = tmp_path / "t.parquet"

    def broken(self, *args, **kwargs):
        with open(args[0], "wb") as f:
            f.write(b"PAR1 half")
        raise OSError("disk full")

    monkeypatch.setattr(pl.DataFrame, "write_parquet", broken)
    with pytest.raises(OSError, match="disk full"):
        la.write_parquet(la.LoDTensor(np.arange(3.0)), str(path), engine="polars")
    assert not path.exists()


@HSET
@given(t=lod_tensors())
def test_round_trip_through_polars_writer(tmp_path, t):
    auto, ref = str(tmp_path / "auto.parquet"), str(tmp_path / "ref.parquet")
    la.write_parquet(t, auto, engine="polars")
    la.write_parquet(t, ref, engine="pyarrow")
    back = la.read_parquet(auto)
    assert back.equals(t)
    assert back.to_arrow().type == la.read_parquet(ref).to_arrow().type
    assert pq.read_table(auto).schema.equals(pq.read_table(ref).schema, check_metadata=True)
