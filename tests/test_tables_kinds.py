"""apply on every table kind, mixed columns passing through zero-copy, sliced input, nulls."""

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

import lodarrow as la
from tables_cases import CASES, addresses, assert_rows_equal, make_table

CASE_IDS = [c[0] for c in CASES]


class Stream:
    """A minimal Arrow stream producer (what a DuckDB relation or nanoarrow stream is)."""

    def __init__(self, table):
        self.table = table

    def __arrow_c_stream__(self, requested_schema=None):
        return self.table.__arrow_c_stream__(requested_schema)


def mixed_table(n=9, seed=4):
    """make_table plus a struct and a dictionary column, with schema and field metadata."""
    table = make_table(np.random.default_rng(seed), n)
    struct = pa.StructArray.from_arrays([pa.array(np.arange(n)), pa.array([str(i) for i in
                                                                          range(n)])],
                                        names=["a", "b"])
    cat = pa.array(["u", "v", "w"] * (n // 3) + ["u"] * (n % 3)).dictionary_encode()
    table = table.append_column("meta", struct).append_column("cat", cat)
    fields = [f.with_metadata({b"why": b"kept"}) if f.name == "title" else f
              for f in table.schema]
    return table.cast(pa.schema(fields, metadata={b"origin": b"test"}))


def _out_values(result, name):
    if isinstance(result, pd.DataFrame):
        assert isinstance(result[name].dtype, pd.ArrowDtype)
        return result[name].array.__arrow_array__().to_pylist()
    if isinstance(result, pl.DataFrame):
        return result.get_column(name).to_arrow().to_pylist()
    return result.column(name).to_pylist()


def _object_frame(table):
    """What pd.read_parquet gives (object columns of arrays), except that fixed-size columns
    stay pd.ArrowDtype: an object column of arrays is a list column, it has no fixed width."""
    frame = table.to_pandas()
    for field in table.schema:
        if "fixed_size_list" in str(field.type):
            frame[field.name] = pd.Series(pd.arrays.ArrowExtensionArray(
                table.column(field.name)), index=frame.index)
    return frame


KINDS = {
    "record_batch": (lambda t: t.combine_chunks().to_batches()[0], pa.RecordBatch),
    "pandas_arrow": (lambda t: t.to_pandas(types_mapper=pd.ArrowDtype), pd.DataFrame),
    "pandas_object": (lambda t: _object_frame(t), pd.DataFrame),
    "polars": (lambda t: pl.from_arrow(t), pl.DataFrame),
    "stream": (lambda t: Stream(t), pa.Table),
}


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_every_operator_on_every_table_kind(kind, case):
    cid, op, args, out = case
    table = mixed_table()
    convert, result_type = KINDS[kind]
    want = la.apply(table, op, out=out, **args)
    got = la.apply(convert(table), op, out=out, **args)
    assert type(got) is result_type
    for o in (out if isinstance(out, tuple) else (out,)):
        assert_rows_equal(_out_values(got, o), want.column(o).to_pylist(), f"{kind} {cid} {o}")
    f = la.udf(op, out=out, **args)
    got = f(convert(table))
    assert type(got) is result_type


def test_other_columns_pass_through_zero_copy_with_metadata():
    table = mixed_table()
    f = la.udf(la.sequence_pool, input=la.col("emb"), pool_type="sum", out="title")
    g = la.udf(la.sequence_reverse, x=la.col("x"), out="rx")
    # pyarrow: the same buffers, schema and field metadata
    out = g(table)
    for name in table.schema.names:
        assert addresses(out.column(name)) == addresses(table.column(name)), name
    assert out.schema.metadata == {b"origin": b"test"}
    assert out.schema.field("title").metadata == {b"why": b"kept"}
    replaced = f(table)
    assert replaced.schema.names == table.schema.names  # replaced in place
    assert replaced.schema.field("title").type == pa.list_(pa.float32(), 3)
    batch = table.combine_chunks().to_batches()[0]
    out = g(batch)
    for i, name in enumerate(batch.schema.names):
        assert addresses(out.column(i)) == addresses(batch.column(i)), name
    assert out.schema.metadata == {b"origin": b"test"}
    # pandas (ArrowDtype): the same Arrow memory, the index kept
    df = table.to_pandas(types_mapper=pd.ArrowDtype)
    df.index = pd.RangeIndex(100, 100 + len(df))
    out = g(df)
    for name in ("title", "meta", "cat", "x", "emb"):
        assert addresses(out[name].array.__arrow_array__()) == \
            addresses(df[name].array.__arrow_array__()), name
    assert out.index.equals(df.index)
    # polars: the other columns are polars' own
    pf = pl.from_arrow(table)
    out = g(pf)
    newest = pl.CompatLevel.newest()  # string views as polars holds them (no conversion)
    for name in ("title", "meta", "x", "id"):  # (a Categorical is re-encoded by to_arrow)
        assert addresses(out.get_column(name).to_arrow(compat_level=newest)) == \
            addresses(pf.get_column(name).to_arrow(compat_level=newest)), name


def test_list_columns_are_read_zero_copy():
    table = pa.table({"x": pa.array([[1.0, 2.0], [3.0]], type=pa.large_list(pa.float64()))})
    values = table.column("x").chunk(0).values.buffers()[1].address
    out = la.apply(table, la.lod_reset, x=la.col("x"), y=la.col("x"), out="r")
    assert out.column("r").chunk(0).values.buffers()[1].address == values
    df = table.to_pandas(types_mapper=pd.ArrowDtype)
    out = la.apply(df, la.lod_reset, x=la.col("x"), y=la.col("x"), out="r")
    assert out["r"].array.__arrow_array__().chunk(0).values.buffers()[1].address == values


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_sliced_and_chunked_inputs(case):
    cid, op, args, out = case
    table = make_table(np.random.default_rng(8), 20)
    sliced = table.slice(3, 12)
    chunked = pa.concat_tables([table.slice(3, 5), table.slice(8, 0), table.slice(8, 7)])
    assert chunked.column("x").num_chunks == 3
    want = la.apply(sliced.combine_chunks(), op, out=out, **args)  # offsets rebased
    for t in (sliced, chunked):
        got = la.apply(t, op, out=out, **args)
        for o in (out if isinstance(out, tuple) else (out,)):
            assert_rows_equal(got.column(o).to_pylist(), want.column(o).to_pylist(), cid)


# ---------------------------------------------------------------------------- object columns
def test_object_columns_at_any_depth_as_pd_read_parquet_gives_them():
    table = pa.table({"tok": pa.array([[[1, 2], [3]], [], None, [[4]]]),
                      "x": pa.array([[1.5, 2.5], [], None, [4.0]])})
    df = table.to_pandas()
    assert df["tok"].dtype == object and isinstance(df["tok"][0], np.ndarray)
    out = la.apply(df, la.sequence_pool, input=la.col("tok"), pool_type="sum", out="s")
    assert out["s"].array.__arrow_array__().to_pylist() == [[3, 3], [], None, [4]]
    assert out["s"].dtype == pd.ArrowDtype(pa.list_(pa.int64()))  # object counts as List
    out = la.apply(df, la.sequence_reverse, x=la.col("x"), out="r")
    assert out["r"].array.__arrow_array__().to_pylist() == [[2.5, 1.5], [], None, [4.0]]


def test_object_columns_of_dense_arrays_are_rows_with_feature_dimensions():
    df = pd.DataFrame({"emb": [np.arange(16.0).reshape(2, 8), np.zeros((0, 8)),
                               np.ones((3, 8))]})
    out = la.apply(df, la.sequence_pool, input=la.col("emb"), pool_type="sum", out="s")
    assert out["s"].dtype == pd.ArrowDtype(pa.list_(pa.float64(), 8))
    sums = out["s"].array.__arrow_array__().to_pylist()
    assert sums[0] == (np.arange(8.0) + np.arange(8.0, 16.0)).tolist()
    assert sums[1] == [0.0] * 8 and sums[2] == [3.0] * 8
    # Python lists, nested
    df = pd.DataFrame({"d": [[[1.0], [2.0, 3.0]], [[4.0]]]})
    out = la.apply(df, la.sequence_pool, input=la.col("d"), pool_type="sum", out="s")
    assert out["s"].array.__arrow_array__().to_pylist() == [[1.0, 5.0], [4.0]]


def test_object_column_errors_name_column_row_and_level():
    df = pd.DataFrame({"x": [[1.0, None], [2.0]]})
    with pytest.raises(ValueError, match=r"column 'x' has a null inside row 0 at level 1"):
        la.apply(df, la.sequence_reverse, x=la.col("x"), out="r")
    df = pd.DataFrame({"x": [[[1.0]], [None]]})
    with pytest.raises(ValueError, match=r"column 'x' has a null inside row 1 at level 1"):
        la.apply(df, la.sequence_reverse, x=la.col("x"), out="r")
    df = pd.DataFrame({"x": [np.zeros((2, 3)), np.zeros((1, 4))]})
    with pytest.raises(ValueError, match=r"column 'x', row 1: an array of shape \(1, 4\)"):
        la.apply(df, la.sequence_reverse, x=la.col("x"), out="r")
    df = pd.DataFrame({"x": [["a"], ["b"]]})
    with pytest.raises(TypeError, match=r"column 'x': the values at level 1 are not numeric"):
        la.apply(df, la.sequence_reverse, x=la.col("x"), out="r")
    df = pd.DataFrame({"x": [[1.0], 3]})
    with pytest.raises(TypeError, match=r"column 'x', row 1: the items at level 0 must be "
                                        r"sequences, got items of Arrow type int64"):
        la.apply(df, la.sequence_reverse, x=la.col("x"), out="r")


# ---------------------------------------------------------------------------- nulls
def _list_refs(args, schema):
    return [v for v in la._tables._apply.refs_in(args)
            if pa.types.is_list(schema.field(v.name).type)]


_SCHEMA = make_table(np.random.default_rng(0), 1).schema
LIST_CASES = [c for c in CASES if _list_refs(c[2], _SCHEMA)]  # (not mask, unpad: plain only)


@pytest.mark.parametrize("case", LIST_CASES, ids=[c[0] for c in LIST_CASES])
def test_a_null_row_of_a_list_column_is_a_null_row_of_every_output(case):
    cid, op, args, out = case
    table = make_table(np.random.default_rng(2), 8)
    lists = _list_refs(args, table.schema)
    nulls = np.zeros(8, dtype=bool)
    nulls[[1, 6]] = True
    for ref in lists[:1]:
        i = table.schema.get_field_index(ref.name)
        column = table.column(i).chunk(0)
        # the null rows keep their values behind them: they must be ignored, not read
        masked = pa.Array.from_buffers(column.type, len(column),
                                       [pa.py_buffer(np.packbits(~nulls, bitorder="little")),
                                        column.buffers()[1]], children=[column.values])
        table = table.set_column(i, ref.name, masked)
    got = la.apply(table, op, out=out, **args)
    # the reference: the row empty in every list column the call reads, zero in plain ones
    emptied = table
    for ref in la._tables._apply.refs_in(args):
        j = emptied.schema.get_field_index(ref.name)
        emptied = emptied.set_column(j, ref.name, _empty_where(emptied.column(j), nulls))
    want = la.apply(emptied, op, out=out, **args)
    for o in (out if isinstance(out, tuple) else (out,)):
        rows = got.column(o).to_pylist()
        ref = want.column(o).to_pylist()
        assert [r is None for r in rows] == nulls.tolist(), cid
        assert_rows_equal([r for r, m in zip(rows, nulls) if not m],
                          [r for r, m in zip(ref, nulls) if not m], cid)


def _empty_where(column, nulls):
    rows = column.to_pylist()
    if pa.types.is_list(column.type):
        return pa.array([[] if m else r for r, m in zip(rows, nulls)], type=column.type)
    zero = [0.0] * column.type.list_size if pa.types.is_fixed_size_list(column.type) else 0
    return pa.array([zero if m else r for r, m in zip(rows, nulls)], type=column.type)


def test_null_rows_out_for_every_kind():
    table = pa.table({"id": [1, 2, 3], "x": pa.array([[1.0, 2.0], None, [3.0]])})
    want = [[2.0, 1.0], None, [3.0]]
    for convert, _ in KINDS.values():
        out = la.apply(convert(table), la.sequence_reverse, x=la.col("x"), out="r")
        assert _out_values(out, "r") == want
    out = la.apply(table, la.sequence_pool, input=la.col("x"), pool_type="max", out="m",
                   pad_value=-1.0)
    assert out.column("m").to_pylist() == [2.0, None, 3.0]


def test_null_values_inside_lists_are_value_errors():
    t = pa.table({"x": pa.array([[1.0], [2.0, None]]), "n": pa.array([1, None]),
                  "d": pa.array([[[1.0]], [None, [2.0]]]),
                  "f": pa.array([[[1.0, 2.0]], [None]], type=pa.list_(pa.list_(pa.float64(),
                                                                                2)))})
    with pytest.raises(ValueError, match=r"apply: column 'x' has a null value inside row 1 at "
                                         r"level 1"):
        la.apply(t, la.sequence_reverse, x=la.col("x"), out="r")
    # a null row of a plain column is a null row of the result (docs/tables.md#nulls)
    assert la.apply(t, la.sequence_mask, x=la.col("n"), maxlen=2, out="m").column(
        "m").to_pylist() == [[1, 0], None]
    with pytest.raises(ValueError, match=r"column 'd' has a null list inside row 1 at level 1"):
        la.apply(t, la.sequence_pool, input=la.col("d"), pool_type="sum", out="s")
    with pytest.raises(ValueError, match=r"column 'f' has a null fixed-size row inside row 1 "
                                         r"at level 1"):
        la.apply(t, la.sequence_pool, input=la.col("f"), pool_type="sum", out="s")
    # also when the row itself is null elsewhere in the column
    t2 = pa.table({"x": pa.array([None, [2.0, None]])})
    with pytest.raises(ValueError, match=r"column 'x' has a null value inside row 1 at level 1"):
        la.apply(t2, la.sequence_reverse, x=la.col("x"), out="r")


def _two_level(rows, null_rows, hidden):
    """``list<list<float64>>`` of ``rows`` (Python lists, None inside allowed); the rows in
    ``null_rows`` are null and, where ``hidden`` holds them, backed by those lists."""
    inner, outer = [0], [0]
    leaves, leaf_valid, inner_valid = [], [], []
    for i, r in enumerate(rows):
        cells = hidden.get(i, []) if i in null_rows else r
        for c in cells:
            inner_valid.append(c is not None)
            for v in c or []:
                leaves.append(0.0 if v is None else v)
                leaf_valid.append(v is not None)
            inner.append(len(leaves))
        outer.append(len(inner) - 1)
    values = pa.array(leaves, mask=~np.array(leaf_valid, dtype=bool), type=pa.float64())
    lists = pa.ListArray.from_arrays(pa.array(inner, pa.int32()), values,
                                     mask=pa.array(~np.array(inner_valid, dtype=bool)))
    valid = np.array([i not in null_rows for i in range(len(rows))])
    return pa.Array.from_buffers(pa.list_(pa.list_(pa.float64())), len(rows),
                                 [pa.py_buffer(np.packbits(valid, bitorder="little")),
                                  pa.py_buffer(np.array(outer, dtype=np.int32))],
                                 null_count=int((~valid).sum()), children=[lists])


@pytest.mark.parametrize("where", [0, 3, 7])
@pytest.mark.parametrize("level", [1, 2])
def test_an_inner_null_in_any_row_is_found_among_null_rows(where, level):
    rows = [[[float(i), 1.0], [2.0]] for i in range(8)]
    if level == 1:
        rows[where] = [[1.0], None]
        what = "a null list"
    else:
        rows[where] = [[1.0], [2.0, None, 3.0]]
        what = "a null value"
    nulls = {1, 5} - {where}
    arr = _two_level(rows, nulls, hidden={1: [[9.0, 9.0]], 5: [[8.0]]})
    table = pa.table({"x": arr})
    with pytest.raises(ValueError, match=rf"column 'x' has {what} inside row {where} at level "
                                         rf"{level}"):
        la.apply(table, la.sequence_pool, input=la.col("x"), pool_type="sum", out="s")
    # a slice that leaves the row out reads; one that keeps it counts rows from the slice
    if where:
        out = la.apply(table.slice(0, where), la.sequence_pool, input=la.col("x"),
                       pool_type="sum", out="s")
        assert out.column("s").to_pylist() == [
            None if i in nulls else [float(i) + 1.0, 2.0] for i in range(where)]
        with pytest.raises(ValueError, match=rf"inside row {where - 1} at level {level}"):
            la.apply(table.slice(1), la.sequence_pool, input=la.col("x"), pool_type="sum",
                     out="s")
    # in the second chunk of a chunked column: rows count across the chunks
    clean = _two_level([[[1.0]], [[2.0]]], set(), {})
    chunked = pa.table({"x": pa.chunked_array([clean, arr])})
    with pytest.raises(ValueError, match=rf"inside row {where + 2} at level {level}"):
        la.apply(chunked, la.sequence_pool, input=la.col("x"), pool_type="sum", out="s")


def test_inner_nulls_under_a_null_row_are_not_read():
    rows = [[[1.0, 2.0]], None, [[3.0], []], None]
    # the null rows are backed by lists holding a null list and a null value
    arr = _two_level(rows, {1, 3}, hidden={1: [None, [4.0]], 3: [[5.0, None]]})
    assert arr.values.null_count == 1 and arr.values.values.null_count == 1
    for table in (pa.table({"x": arr}), pa.table({"x": arr}).slice(1),
                  pa.table({"x": pa.chunked_array([arr.slice(0, 1), arr.slice(1)])})):
        out = la.apply(table, la.sequence_pool, input=la.col("x"), pool_type="sum", out="s")
        want = [[3.0], None, [3.0, 0.0], None]
        assert out.column("s").to_pylist() == want[4 - table.num_rows:]
    # a null list in a row that is not null, after the null rows' hidden ones
    arr = _two_level([[[1.0]], None, [[2.0], None]], {1}, hidden={1: [None, [None]]})
    with pytest.raises(ValueError, match=r"column 'x' has a null list inside row 2 at level 1"):
        la.apply(pa.table({"x": arr}), la.sequence_pool, input=la.col("x"), pool_type="sum",
                 out="s")


def test_a_null_fixed_size_row_is_found_in_a_sliced_column():
    values = pa.array(np.arange(12.0))
    fixed = pa.FixedSizeListArray.from_arrays(values, 2,
                                              mask=pa.array([False] * 4 + [True, False]))
    arr = pa.ListArray.from_arrays(pa.array([0, 2, 3, 6], pa.int32()), fixed)
    table = pa.table({"x": arr})
    with pytest.raises(ValueError, match=r"column 'x' has a null fixed-size row inside row 2 "
                                         r"at level 1"):
        la.apply(table, la.sequence_pool, input=la.col("x"), pool_type="sum", out="s")
    with pytest.raises(ValueError, match=r"has a null fixed-size row inside row 1 at level 1"):
        la.apply(table.slice(1), la.sequence_pool, input=la.col("x"), pool_type="sum", out="s")
    out = la.apply(table.slice(0, 2), la.sequence_pool, input=la.col("x"), pool_type="sum",
                   out="s")
    assert out.column("s").to_pylist() == [[2.0, 4.0], [4.0, 5.0]]
