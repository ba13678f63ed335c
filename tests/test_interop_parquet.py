"""Tables and Parquet: ``to_table``, ``from_table``, ``write_parquet``, ``read_parquet``,
``iter_parquet`` (docs/data-model.md#tables-and-parquet)."""

import duckdb
import itertools

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import on_backend
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import lod_tensors

import lodarrow as la

HSET = settings(suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow, HealthCheck.data_too_large])


_COUNTER = itertools.count()


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """One directory per module (hypothesis examples cannot use function-scoped tmp_path)."""
    return tmp_path_factory.mktemp("parquet")


def _tmp(workdir):
    return str(workdir / f"t{next(_COUNTER)}.parquet")


def _joined(batches, t):
    """True if ``batches`` are consecutive slices of ``t`` covering all of it."""
    start = 0
    for b in batches:
        if not b.equals(t[start:start + len(b)]):
            return False
        start += len(b)
    return start == len(t)


def _example():
    x = la.LoDTensor(np.arange(14.0, dtype=np.float32).reshape(7, 2),
                     lod=[[0, 2, 3, 3], [0, 2, 4, 7]])
    y = la.LoDTensor(np.array([1, 0, 1], dtype=np.int8))
    z = la.LoDTensor(np.array([True, False, True, True]), lengths=[[0, 3, 1]])
    return x, y, z


# ---------------------------------------------------------------- tables
def test_to_table_and_back(backend):
    x, y, z = _example()
    tab = la.to_table({"x": on_backend(x, backend), "y": on_backend(y, backend), "z": z})
    assert tab.column_names == ["x", "y", "z"]
    assert tab.schema.field("x").type == pa.large_list(pa.large_list(pa.list_(pa.float32(), 2)))
    assert tab.column("y").to_pylist() == [1, 0, 1]
    assert tab.column("z").to_pylist() == [[], [True, False, True], [True]]
    back = la.from_table(tab)
    assert list(back) == ["x", "y", "z"]
    assert back["x"].equals(x) and back["y"].equals(y) and back["z"].equals(z)
    assert la.from_table(tab, "z").equals(z)
    assert list(la.from_table(tab, ["z", "x"])) == ["z", "x"]
    assert la.from_table(pa.table({"only": x.to_arrow()})).equals(x)
    assert la.from_table(tab.to_batches()[0], "x").equals(x)


def test_to_table_is_zero_copy():
    x, _, _ = _example()
    tab = la.to_table({"x": x})
    assert tab.column("x").chunk(0).buffers()[-1].address == x.data.ctypes.data


def test_from_table_polars_and_duckdb():
    x, y, _ = _example()
    df = pl.from_arrow(la.to_table({"x": x, "y": y}))
    back = la.from_table(df)
    assert back["x"].equals(x) and back["y"].equals(y)
    tab = la.to_table({"x": x, "y": y})  # noqa: F841 (DuckDB finds it by name)
    back = la.from_table(duckdb.sql("select y, x from tab"))
    assert list(back) == ["y", "x"] and back["x"].equals(x)


def test_to_table_errors():
    x, _, z = _example()
    with pytest.raises(ValueError, match=r"column 'w' has 2 top-level sequences but column "
                                         r"'x' has 3"):
        la.to_table({"x": x, "w": la.LoDTensor(np.arange(2))})
    with pytest.raises(TypeError, match=r"tensors must be a mapping"):
        la.to_table([x])
    with pytest.raises(TypeError, match=r"column names must be strings, got 1"):
        la.to_table({1: x})
    with pytest.raises(TypeError, match=r"column 'a' must be a LoDTensor, got ndarray"):
        la.to_table({"a": np.arange(3)})


def test_from_table_errors():
    x, y, _ = _example()
    tab = la.to_table({"x": x, "y": y})
    with pytest.raises(KeyError, match=r"no column 'q'; the columns are \['x', 'y'\]"):
        la.from_table(tab, "q")
    with pytest.raises(TypeError, match=r"columns must be a string or a list of strings"):
        la.from_table(tab, 3)
    with pytest.raises(TypeError, match=r"columns must be strings, got 0"):
        la.from_table(tab, [0])
    with pytest.raises(ValueError, match=r"column 'x' is requested twice"):
        la.from_table(tab, ["x", "x"])
    with pytest.raises(TypeError, match=r"table must be a pyarrow Table"):
        la.from_table({"x": x})
    bad = pa.table({"s": pa.array([["a"], []]), "n": pa.array([[1], None])})
    with pytest.raises(TypeError, match=r"column 's': from_arrow: values of Arrow type string"):
        la.from_table(bad, "s")
    with pytest.raises(ValueError, match=r"column 'n': from_arrow: null list at level 0, "
                                         r"position 1"):
        la.from_table(bad, "n")
    assert la.from_table(bad, "n", nulls="empty").lod() == [[0, 1, 1]]


# ---------------------------------------------------------------- parquet round trips
@HSET
@given(t=lod_tensors())
def test_parquet_round_trip_is_exact(backend, t, workdir):
    path = _tmp(workdir)
    la.write_parquet(on_backend(t, backend), path)
    back = la.read_parquet(path)
    assert back.equals(t)
    assert pq.read_schema(path).names == ["data"]
    assert pq.read_table(path).column("data").type == t.to_arrow().type


@given(t=lod_tensors(min_levels=1), store_schema=st.booleans(),
       compression=st.sampled_from(["snappy", "zstd", "none"]))
def test_parquet_round_trip_with_writer_options(t, store_schema, compression, workdir):
    path = _tmp(workdir)
    la.write_parquet(t, path, store_schema=store_schema, compression=compression,
                     row_group_size=3)
    assert la.read_parquet(path).equals(t)
    assert _joined(la.iter_parquet(path, batch_size=2), t)


@given(x=lod_tensors(min_levels=2, max_levels=2, min_top=2, max_seqs=2),
       y=lod_tensors(min_levels=1, max_levels=1, min_top=2, max_seqs=2))
def test_parquet_dict_round_trip(x, y, workdir):
    w = la.LoDTensor(np.array([[0.5, 1.5], [2.5, 3.5]]))
    path = _tmp(workdir)
    la.write_parquet({"x": x, "y": y, "w": w}, path)
    back = la.read_parquet(path)
    assert list(back) == ["x", "y", "w"]
    assert back["x"].equals(x) and back["y"].equals(y) and back["w"].equals(w)
    assert la.read_parquet(path, "y").equals(y)
    only = la.read_parquet(path, ["y"])
    assert list(only) == ["y"] and only["y"].equals(y)


def test_files_are_plain_nested_lists_for_other_readers(workdir):
    x, y, z = _example()
    half = la.LoDTensor(np.arange(6, dtype=np.float16).reshape(3, 2), lengths=[[2, 0, 1]])
    path = _tmp(workdir)
    la.write_parquet({"x": x, "y": y, "z": z, "h": half}, path)
    expected = {"x": x.to_list(), "y": y.to_list(), "z": z.to_list(), "h": half.to_list()}
    assert pq.read_table(path).to_pydict() == expected
    assert pl.read_parquet(path).to_dict(as_series=False) == expected
    rows = duckdb.sql(f"select x, y, z, h from read_parquet('{path}')").fetchall()
    assert [list(r) for r in rows] == [list(v) for v in zip(*expected.values())]


def _column_chunks(path):
    """``{path_in_schema: (uses a dictionary, has statistics)}`` of the first row group."""
    rg = pq.ParquetFile(path).metadata.row_group(0)
    return {rg.column(i).path_in_schema: ("RLE_DICTIONARY" in rg.column(i).encodings
                                          or "PLAIN_DICTIONARY" in rg.column(i).encodings,
                                          rg.column(i).is_stats_set)
            for i in range(rg.num_columns)}


@pytest.mark.parametrize("store_schema", [True, False])
@pytest.mark.parametrize("compliant", [True, False])
def test_write_parquet_default_encodings(store_schema, compliant, workdir):
    """Float LoDTensor values: plain pages, no statistics; integer LoDTensor values keep the
    dictionary; other columns (nested ones included) keep pyarrow's defaults."""
    x, y, _ = _example()
    ids = la.LoDTensor(np.array([5, 5, 5, 7, 7, 5], dtype=np.int64), lengths=[[2, 4, 0]])
    struct = pa.array([{"a": 1, "b": [1.5]}, {"a": None, "b": []}, None])
    path = _tmp(workdir)
    la.write_parquet({"x": x, "y": y, "ids": ids, "n": np.array([1, 2, 3], np.uint32),
                      "s": struct, "title": ["a", None, "c"]}, path,
                     store_schema=store_schema, use_compliant_nested_type=compliant)
    item = ".list.element" if compliant else ".list.item"
    assert _column_chunks(path) == {
        "x" + item * 3: (False, False), "y": (True, False), "ids" + item: (True, False),
        "n": (True, True), "s.a": (True, True), "s.b" + item: (True, True),
        "title": (True, True)}
    back = la.read_parquet(path, ["x", "y", "ids"])
    assert back["x"].equals(x) and back["y"].equals(y) and back["ids"].equals(ids)
    table = pq.read_table(path, columns=["s", "title"])
    assert table.column("s").to_pylist() == struct.to_pylist()
    assert table.column("title").to_pylist() == ["a", None, "c"]
    assert pl.read_parquet(path)["x"].to_list() == x.to_list()
    assert duckdb.sql(f"select ids from read_parquet('{path}')").fetchall() == \
        [(v,) for v in ids.to_list()]


def test_write_parquet_options_replace_the_defaults(workdir):
    x, y, _ = _example()
    path = _tmp(workdir)
    la.write_parquet({"x": x, "y": y}, path, use_dictionary=True, write_statistics=True,
                     compression="zstd")
    assert _column_chunks(path) == {"x.list.element.list.element.list.element": (True, True),
                                    "y": (True, True)}
    assert pq.ParquetFile(path).metadata.row_group(0).column(0).compression == "ZSTD"
    path = _tmp(workdir)
    la.write_parquet({"x": x, "y": y}, path, use_dictionary=["y"])
    assert _column_chunks(path) == {"x.list.element.list.element.list.element": (False, False),
                                    "y": (True, False)}
    assert la.read_parquet(path, "x").equals(x)


def test_read_parquet_written_by_pyarrow_and_polars(workdir):
    path = _tmp(workdir)
    pq.write_table(pa.table({"a": [[1.5, 2.5], [], [3.5]], "b": [1, 2, 3]}), path)
    back = la.read_parquet(path)
    assert back["a"].lod() == [[0, 2, 2, 3]] and back["a"].data.tolist() == [1.5, 2.5, 3.5]
    assert back["b"].lod_level == 0 and back["b"].data.tolist() == [1, 2, 3]
    path = _tmp(workdir)
    pl.DataFrame({"v": [[[1, 2]], [], [[3], []]]}, schema={"v": pl.List(pl.List(pl.Int32))}) \
        .write_parquet(path)
    t = la.read_parquet(path)
    assert t.dtype == np.int32 and t.lod() == [[0, 1, 1, 3], [0, 2, 3, 3]]


def test_read_parquet_many_row_groups_is_one_tensor(workdir):
    t = la.LoDTensor(np.arange(300, dtype=np.int64), lengths=[[3] * 100])
    path = _tmp(workdir)
    la.write_parquet(t, path, row_group_size=7)
    assert pq.ParquetFile(path).metadata.num_row_groups == 15
    assert la.read_parquet(path).equals(t)


def test_read_parquet_errors(workdir):
    x, y, _ = _example()
    path = _tmp(workdir)
    la.write_parquet({"x": x, "y": y}, path)
    with pytest.raises(KeyError, match=r"read_parquet: no column 'nope'"):
        la.read_parquet(path, "nope")
    with pytest.raises(TypeError, match=r"read_parquet: columns must be a string"):
        la.read_parquet(path, 1.5)
    path = _tmp(workdir)
    pq.write_table(pa.table({"n": pa.array([[1], None])}), path)
    with pytest.raises(ValueError, match=r"column 'n': from_arrow: null list"):
        la.read_parquet(path)
    assert la.read_parquet(path, nulls="empty").lod() == [[0, 1, 1]]


def test_write_parquet_errors(workdir):
    with pytest.raises(TypeError, match=r"t_or_dict must be a LoDTensor or a mapping"):
        la.write_parquet(np.arange(3), _tmp(workdir))
    x, _, _ = _example()
    with pytest.raises(ValueError, match=r"top-level sequences"):
        la.write_parquet({"x": x, "w": la.LoDTensor(np.arange(5))}, _tmp(workdir))


# ---------------------------------------------------------------- iter_parquet
@given(t=lod_tensors(min_levels=1, max_seqs=12), batch_size=st.integers(1, 5))
def test_iter_parquet_batches_concatenate_to_the_file(t, batch_size, workdir):
    path = _tmp(workdir)
    la.write_parquet(t, path, row_group_size=4)
    batches = list(la.iter_parquet(path, batch_size=batch_size))
    assert all(1 <= len(b) <= batch_size for b in batches)
    assert _joined(batches, t)


def test_iter_parquet_columns(workdir):
    x, y, z = _example()
    path = _tmp(workdir)
    la.write_parquet({"x": x, "y": y, "z": z}, path)
    got = list(la.iter_parquet(path, batch_size=2, columns=["z", "y"]))
    assert [list(b) for b in got] == [["z", "y"], ["z", "y"]]
    assert got[1]["z"].equals(z[2:])
    single = list(la.iter_parquet(path, batch_size=2, columns="x"))
    assert single[0].equals(x[:2]) and single[1].equals(x[2:])


def test_iter_parquet_memory_is_bounded_by_the_batch(workdir):
    n_seq, seq_len = 200_000, 4
    t = la.LoDTensor(np.arange(n_seq * seq_len, dtype=np.float64).reshape(-1, 2),
                     lengths=[[seq_len // 2] * n_seq])
    path = _tmp(workdir)
    la.write_parquet(t, path, row_group_size=20_000, compression="none")
    file_bytes = t.data.nbytes  # 6.4 MB of values once decoded, in 10 row groups
    del t
    base = pa.total_allocated_bytes()
    peak = 0
    total = 0
    for batch in la.iter_parquet(path, batch_size=2_000):
        peak = max(peak, pa.total_allocated_bytes() - base)
        total += len(batch)
    assert total == n_seq
    assert peak < file_bytes / 3  # about one row group: 1.6 MB


def test_iter_parquet_validates_eagerly(workdir):
    x, _, _ = _example()
    path = _tmp(workdir)
    la.write_parquet(x, path)
    with pytest.raises(ValueError, match=r"batch_size must be >= 1, got 0"):
        la.iter_parquet(path, batch_size=0)
    with pytest.raises(TypeError, match=r"batch_size must be an integer, got float"):
        la.iter_parquet(path, batch_size=2.0)
    with pytest.raises(KeyError, match=r"iter_parquet: no column 'q'"):
        la.iter_parquet(path, columns="q")
