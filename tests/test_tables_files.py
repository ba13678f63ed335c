"""Files and mixed tables: read_parquet / from_table skipping, iter_parquet's argument order,
write_parquet of mixed mappings and tables, from_pandas at any depth, the DuckDB route."""

import warnings

import duckdb
import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lodarrow as la
from test_tables_kinds import Stream


@pytest.fixture
def emb():
    return la.LoDTensor(np.arange(40, dtype=np.float32).reshape(5, 8), lengths=[[2, 0, 3]])


@pytest.fixture
def tok():
    return la.LoDTensor(np.arange(7, dtype=np.int32), lengths=[[2, 0, 1], [3, 0, 4]])


@pytest.fixture
def mixed(tmp_path, emb, tok):
    path = tmp_path / "mixed.parquet"
    meta = pa.array([{"k": 1, "v": "p"}, {"k": 2, "v": "q"}, None])
    la.write_parquet({"doc_id": np.array([10, 11, 12]), "title": ["a", "bb", None],
                      "meta": meta, "emb": emb, "tok": tok}, path)
    return path


# ---------------------------------------------------------------------------- reading
def test_read_parquet_skips_columns_that_cannot_be_tensors_with_one_warning(mixed, emb, tok):
    with pytest.warns(UserWarning, match=r"read_parquet: skipped 2 column\(s\) that cannot be "
                                         r"LoDTensors: 'title' \(string\), 'meta' "
                                         r"\(struct<k: int64, v: string>\)") as record:
        got = la.read_parquet(mixed)
    assert len(record) == 1
    assert list(got) == ["doc_id", "emb", "tok"]
    assert got["emb"].equals(emb) and got["tok"].equals(tok)
    assert got["doc_id"].data.tolist() == [10, 11, 12]
    # asked for by name: a TypeError naming the column and its type
    with pytest.raises(TypeError, match=r"column 'title': from_arrow: values of Arrow type "
                                        r"string"):
        la.read_parquet(mixed, ["emb", "title"])
    with pytest.raises(TypeError, match=r"column 'meta': .*struct<k: int64, v: string>"):
        la.read_parquet(mixed, "meta")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert la.read_parquet(mixed, ["tok", "emb"])["emb"].equals(emb)


def test_from_table_skips_too(mixed, tok):
    table = pq.read_table(mixed)
    with pytest.warns(UserWarning, match=r"from_table: skipped 2 column\(s\)"):
        got = la.from_table(table)
    assert got["tok"].equals(tok)
    only_strings = pa.table({"s": ["a"]})
    with pytest.warns(UserWarning, match=r"'s' \(string\)"):
        assert la.from_table(only_strings) == {}


def test_iter_parquet_takes_columns_second_like_read_parquet(mixed, tok):
    batches = list(la.iter_parquet(mixed, "tok", batch_size=2))
    assert [b.lod()[0] for b in batches] == [[0, 2, 2], [0, 1]]
    batches = list(la.iter_parquet(mixed, ["emb", "tok"], batch_size=5))
    assert batches[0]["tok"].equals(tok)
    with pytest.warns(UserWarning, match=r"iter_parquet: skipped 2 column\(s\)"):
        batches = list(la.iter_parquet(mixed, batch_size=2))
    assert list(batches[0]) == ["doc_id", "emb", "tok"]
    with pytest.raises(TypeError, match=r"columns must be a string or a list of strings, got "
                                        r"int"):
        la.iter_parquet(mixed, 2)


# ---------------------------------------------------------------------------- writing
def test_write_parquet_of_a_mixed_mapping(tmp_path, emb, tok):
    path = tmp_path / "m.parquet"
    la.write_parquet({"id": np.array([1, 2, 3], dtype=np.uint32), "f": np.array([0.5, 1, 2]),
                      "title": np.array(["x", "y", "z"], dtype=object),
                      "arrow": pa.array([[1], [], [2, 3]]),
                      "chunked": pa.chunked_array([["p"], ["q", "r"]]),
                      "polars": pl.Series([1.0, 2.0, None]), "emb": emb, "tok": tok}, path)
    table = pq.read_table(path)
    assert table.column("id").type == pa.uint32()
    assert table.column("title").to_pylist() == ["x", "y", "z"]
    assert table.column("chunked").to_pylist() == ["p", "q", "r"]
    assert table.column("polars").to_pylist() == [1.0, 2.0, None]
    assert table.column("arrow").to_pylist() == [[1], [], [2, 3]]
    assert la.read_parquet(path, "emb").equals(emb)
    assert la.read_parquet(path, "tok").equals(tok)
    assert la.read_parquet(path, "f").data.tolist() == [0.5, 1.0, 2.0]
    with pytest.raises(ValueError, match=r"column 'b' has 2 rows \(top-level sequences\) but "
                                         r"column 'a' has 3"):
        la.write_parquet({"a": tok, "b": ["x", "y"]}, tmp_path / "bad.parquet")
    with pytest.raises(TypeError, match=r"column 'a' of type object cannot be an Arrow column"):
        la.write_parquet({"a": object()}, tmp_path / "bad.parquet")


@pytest.mark.parametrize("kind", ["arrow", "batch", "pandas_arrow", "pandas_object", "polars",
                                  "stream"])
def test_write_parquet_of_a_table_of_any_kind(tmp_path, kind):
    table = pa.table({"id": [1, 2], "title": ["a", "b"], "x": [[1.0, 2.0], []],
                      "d": [[[1], [2, 3]], [[4]]]})
    obj = {"arrow": lambda: table, "batch": lambda: table.to_batches()[0],
           "pandas_arrow": lambda: table.to_pandas(types_mapper=pd.ArrowDtype),
           "pandas_object": lambda: table.to_pandas(), "polars": lambda: pl.from_arrow(table),
           "stream": lambda: Stream(table)}[kind]()
    path = tmp_path / "t.parquet"
    la.write_parquet(obj, path)
    back = pq.read_table(path)
    assert back.column("title").to_pylist() == ["a", "b"]
    assert back.column("d").to_pylist() == [[[1], [2, 3]], [[4]]]
    assert la.read_parquet(path, "x").lod() == [[0, 2, 2]]


def test_write_parquet_of_pandas_dense_object_cells(tmp_path):
    df = pd.DataFrame({"name": ["a", "b"],
                       "emb": [np.ones((3, 8), np.float32), np.zeros((0, 8), np.float32)]})
    path = tmp_path / "p.parquet"
    la.write_parquet(df, path)
    t = la.read_parquet(path, "emb")
    assert t.feature_shape == (8,) and t.lod() == [[0, 3, 3]] and t.dtype == np.float32


# ---------------------------------------------------------------------------- from_pandas
def test_from_pandas_of_dense_cells_keeps_the_feature_dimension():
    cells = [np.random.default_rng(i).normal(size=(50, 8)) for i in range(3)]
    t = la.from_pandas(pd.Series(cells))
    assert t.data.shape == (150, 8) and t.lod() == [[0, 50, 100, 150]]
    # with a null row among them
    t = la.from_pandas(pd.Series([cells[0], None, cells[1]]), nulls="empty")
    assert t.data.shape == (100, 8) and t.lod() == [[0, 50, 50, 100]]


def test_from_pandas_of_what_pd_read_parquet_returns(tmp_path, emb, tok):
    path = tmp_path / "f.parquet"
    la.write_parquet({"emb": emb, "tok": tok}, path)
    df = pd.read_parquet(path)
    assert df["tok"].dtype == object and df["tok"][0].dtype == object  # arrays of arrays
    assert la.from_pandas(df["tok"]).equals(
        la.LoDTensor(tok.data.astype(np.int32), lod=tok.lod()))
    # the fixed-size rows come back as arrays of arrays: lod_level=1 folds them
    two = la.from_pandas(df["emb"])
    assert two.lod_level == 2 and two.data.shape == (40,)
    assert la.from_pandas(df["emb"], lod_level=1).equals(emb)
    assert la.from_pandas(df["emb"], lod_level=1, feature_shape=(8,)).equals(emb)
    with pytest.raises(la.LoDError):
        la.from_pandas(df["emb"], lod_level=1, feature_shape=(4,))


# ---------------------------------------------------------------------------- DuckDB, polars
def _duckdb_table(path):
    result = duckdb.sql(f"select * from '{path}'").arrow()
    return result.read_all() if hasattr(result, "read_all") else result


def test_a_lodarrow_file_read_back_through_duckdb_and_polars(mixed, tmp_path, emb, tok):
    """README's claim: the file read by DuckDB or polars comes back equal through from_arrow
    (with lod_level where the tool turned fixed-size rows into lists)."""
    table = _duckdb_table(mixed)
    assert table.schema.field("emb").type == pa.list_(pa.field("l", pa.list_(
        pa.field("l", pa.float32()))))  # DuckDB: FLOAT[][], the width is gone
    assert la.from_arrow(table.column("emb"), lod_level=1).equals(emb)
    assert la.from_arrow(table.column("emb"), lod_level=1, feature_shape=(8,)).equals(emb)
    assert la.from_arrow(table.column("tok")).equals(tok)
    # polars keeps the width (Array(Float32, 8)) and gives large lists
    frame = pl.read_parquet(mixed)
    assert la.from_arrow(frame["emb"]).equals(emb)
    assert la.from_arrow(frame["tok"]).equals(tok)
    # a file DuckDB wrote itself
    rewritten = tmp_path / "duck.parquet"
    duckdb.sql(f"copy (select * from '{mixed}') to '{rewritten}' (format parquet)")
    assert la.read_parquet(rewritten, "emb", lod_level=1).equals(emb)
    # in table form: col(name, lod_level=1) on DuckDB's result and on polars' frame
    f = la.udf(la.sequence_pool, input=la.col("emb", lod_level=1, feature_shape=(8,)),
               pool_type="sum", out="s")
    want = la.sequence_pool(emb, "sum")
    for got in (f(table).column("s"), f(frame).get_column("s").to_arrow()):
        assert la.from_arrow(got).equals(want)
    assert f.output_schema(table.schema).field("s").type == pa.list_(pa.float32(), 8)
    with pytest.raises(ValueError, match=r"give col\(\.\.\., feature_shape=\(\.\.\.\)\)"):
        la.udf(la.sequence_pool, input=la.col("emb", lod_level=1), pool_type="sum",
               out="s").output_schema(table.schema)


# ---------------------------------------------------------------------------- dask_meta
def test_dask_meta_is_the_empty_output_frame():
    dd = pytest.importorskip("dask.dataframe", reason="dask is not installed (lodarrow[dask])")
    table = pa.table({"id": [1, 2, 3, 4], "title": ["a", "b", "c", "d"],
                      "x": [[1.0, 2.0], [], [3.0], [4.0, 5.0]]})
    df = table.to_pandas(types_mapper=pd.ArrowDtype)
    ddf = dd.from_pandas(df, npartitions=2)
    f = la.pipeline(la.udf(la.sequence_reverse, x=la.col("x"), out="r"),
                    la.udf(la.sequence_pad, x=la.col("r"), pad_value=0.0, maxlen=3,
                           out=("p", "n")))
    meta = f.dask_meta(ddf)
    assert len(meta) == 0 and list(meta.columns) == ["id", "title", "x", "r", "p", "n"]
    assert meta.dtypes["p"] == pd.ArrowDtype(pa.list_(pa.float64(), 3))
    assert meta.dtypes["title"] == df.dtypes["title"]
    got = ddf.map_partitions(f, meta=meta).compute()
    want = f(df)
    assert got["p"].tolist() == want["p"].tolist() and got["n"].tolist() == [2, 0, 1, 2]
    assert f.dask_meta(df).dtypes.equals(meta.dtypes)
    with pytest.raises(TypeError, match=r"column 'x' has dtype object; the columns a udf reads "
                                        r"must be pd.ArrowDtype"):
        f.dask_meta(table.to_pandas())
    with pytest.raises(TypeError, match=r"dask_meta: ddf must be a Dask or pandas DataFrame"):
        f.dask_meta(table)


def test_col_lod_level_folds_regular_levels_and_names_an_irregular_one():
    table = pa.table({"e": pa.array([[[1.0, 2.0], [3.0, 4.0]], [], [[5.0, 6.0]]]),
                      "bad": pa.array([[[1.0, 2.0], [3.0]], [], []])})
    out = la.apply(table, la.sequence_pool, input=la.col("e", lod_level=1), pool_type="sum",
                   out="s")
    assert out.column("s").type == pa.list_(pa.float64(), 2)
    assert out.column("s").to_pylist() == [[4.0, 6.0], [0.0, 0.0], [5.0, 6.0]]
    with pytest.raises(la.LoDError, match=r"apply: column 'bad': .*level 1 must be regular.*"
                                          r"position 1"):
        la.apply(table, la.sequence_pool, input=la.col("bad", lod_level=1), pool_type="sum",
                 out="s")
    with pytest.raises(la.LoDError):
        la.apply(table, la.sequence_pool, input=la.col("e", lod_level=1, feature_shape=(3,)),
                 pool_type="sum", out="s")
