"""apply / udf / pipeline on pyarrow tables: every operator, row-locality, schemas, errors."""

import pickle

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

import lodarrow as la
from tables_cases import CASES, COVERED, addresses, assert_rows_equal, assert_tables_equal, \
    make_table

CASE_IDS = [c[0] for c in CASES]
#: Cases whose Paddle result for one row has no LoD but is a list column in table form.
_BROADCAST = {"expand_plain", "expand_fsl_ref0", "mask_list"}


def test_cases_cover_every_operator():
    assert COVERED == set(la._ops.__all__)


def _row_reference(case, table):
    """Each row's result computed alone with the tensor operator (no apply)."""
    cid, op, args, out = case
    outs = out if isinstance(out, tuple) else (out,)
    rows = {o: [] for o in outs}
    for i in range(table.num_rows):
        one = table.slice(i, 1)
        call = {}
        for k, v in args.items():
            if isinstance(v, list) and v and isinstance(v[0], la._tables._apply.ColumnRef):
                call[k] = [la.from_arrow(one.column(c.name)) for c in v]
            elif isinstance(v, la._tables._apply.ColumnRef):
                call[k] = la.from_arrow(one.column(v.name))
            else:
                call[k] = v
        res = op(**call)
        res = res if isinstance(res, tuple) else (res,)
        for o, t in zip(outs, res):
            if t.lod_level:
                assert len(t) == 1
                rows[o].append(t.to_arrow()[0].as_py())
            elif cid in _BROADCAST:
                rows[o].append(t.data.tolist())
            else:
                rows[o].append(np.asarray(t.data)[0].tolist())
    return rows


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("n", [0, 1, 9])
def test_every_operator_matches_the_operator_row_by_row(case, n):
    cid, op, args, out = case
    table = make_table(np.random.default_rng(n + 11), n)
    result = la.apply(table, op, out=out, **args)
    ref = _row_reference(case, table)
    for o, rows in ref.items():
        assert_rows_equal(result.column(o).to_pylist(), rows, cid)
    # every input column passes through as the same object
    for name in table.schema.names:
        assert addresses(result.column(name)) == addresses(table.column(name))
    # the operator given by name does the same
    assert la.apply(table, op.__name__, out=out, **args).equals(result)


def _concat(tables):
    return pa.concat_tables(tables).combine_chunks()


# random short lists are now and then all of one length: the warning for a lost feature
# dimension is right to fire, and beside the point here
@pytest.mark.filterwarnings("ignore::lodarrow.RegularLevelWarning")
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 24),
       cuts=st.lists(st.integers(0, 24), max_size=4))
def test_split_at_any_row_boundary_gives_the_same_result(seed, n, cuts):
    """apply(concat(parts)) == concat(apply(parts)) for every operator (docs/tables.md)."""
    table = make_table(np.random.default_rng(seed), n)
    bounds = sorted({0, n, *(min(c, n) for c in cuts)})
    parts = [table.slice(a, b - a) for a, b in zip(bounds[:-1], bounds[1:])] or [table]
    chunked = pa.concat_tables(parts)  # several chunks, sliced offsets
    for cid, op, args, out in CASES:
        f = la.udf(op, out=out, **args)
        whole = f(chunked)
        pieces = [f(p) for p in parts]
        assert_tables_equal(_concat([whole]), _concat(pieces), cid)
        assert whole.schema == f.output_schema(table.schema), cid


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_udf_pickles_small_and_its_schema_is_the_result_schema(case):
    cid, op, args, out = case
    f = la.udf(op, out=out, **args)
    blob = pickle.dumps(f)
    assert len(blob) < 1200  # names and arguments, never data
    g = pickle.loads(blob)
    assert g == f
    table = make_table(np.random.default_rng(3), 7)
    schema = table.schema.with_metadata({b"k": b"v"})
    table = table.replace_schema_metadata(schema.metadata)
    result = g(table)
    assert result.schema == g.output_schema(schema)
    assert result.schema.metadata == {b"k": b"v"}
    assert result.equals(la.apply(table, op, out=out, **args))


def test_output_schema_of_an_empty_table_and_a_record_batch():
    f = la.udf(la.sequence_pool, input=la.col("emb"), pool_type="max", return_index=True,
               out=("m", "im"))
    table = make_table(np.random.default_rng(0), 5)
    schema = f.output_schema(table.schema)
    assert schema.field("m").type == pa.list_(pa.float32(), 3)
    assert schema.field("im").type == pa.list_(pa.int64(), 3)
    batch = table.to_batches()[0]
    out = f(batch)
    assert isinstance(out, pa.RecordBatch)
    assert out.schema == schema
    assert f.output_schema(batch) == schema


def test_return_index_is_relative_to_the_row():
    table = pa.table({"x": pa.array([[1.0, 5.0, 2.0], [], [7.0, 9.0]])})
    out = la.apply(table, la.sequence_pool, input=la.col("x"), pool_type="max",
                   return_index=True, out=("m", "i"))
    assert out.column("i").to_pylist() == [1, -1, 1]
    # the tensor form keeps absolute row numbers
    _, index = la.sequence_pool(la.from_arrow(table.column("x")), "max", return_index=True)
    assert index.data.tolist() == [1, -1, 4]


def test_out_replaces_in_place_and_appends_in_order():
    table = pa.table({"a": [1, 2], "x": [[1.0, 2.0], [3.0]], "z": ["p", "q"]})
    out = la.apply(table, la.sequence_reverse, x=la.col("x"), out="x")
    assert out.schema.names == ["a", "x", "z"]
    assert out.column("x").to_pylist() == [[2.0, 1.0], [3.0]]
    out = la.apply(table, la.sequence_pad, x=la.col("x"), pad_value=0.0, out=("p", "n"))
    assert out.schema.names == ["a", "x", "z", "p", "n"]
    assert out.column("p").to_pylist() == [[1.0, 2.0], [3.0, 0.0]]  # apply: the data's width
    out = la.apply(table, la.sequence_pad, x=la.col("x"), pad_value=0.0, out=(None, "n"))
    assert out.schema.names == ["a", "x", "z", "n"]


def test_pipeline_applies_in_order_and_composes_schemas():
    g = la.pipeline(
        la.udf(la.sequence_erase, input=la.col("tok"), tokens=[0], out="clean"),
        la.pipeline(la.udf(la.sequence_pad, x=la.col("clean"), pad_value=-1, maxlen=6,
                           out=("padded", "len"))),
    )
    assert len(g.udfs) == 2
    table = make_table(np.random.default_rng(5), 10)
    out = g(table)
    assert out.schema == g.output_schema(table.schema)
    step = la.apply(table, la.sequence_erase, input=la.col("tok"), tokens=[0], out="clean")
    step = la.apply(step, la.sequence_pad, x=la.col("clean"), pad_value=-1, maxlen=6,
                    out=("padded", "len"))
    assert out.equals(step)
    assert pickle.loads(pickle.dumps(g)) == g


def _pool(column, pool_type="sum"):
    """sequence_pool of a list<double> column, row by row (NumPy, nulls stay None)."""
    reduce = {"sum": np.sum, "max": np.max}[pool_type]
    return [None if r is None else float(reduce(r)) if r else 0.0 for r in column.to_pylist()]


def test_a_udf_over_batches_of_different_schemas_reads_each_batch_s_own():
    f = la.udf(la.sequence_pool, input=la.col("x"), pool_type="sum", out="s")
    rows = [[1.0, 2.0], [], [3.0]]
    x = pa.array(rows)
    batches = [
        pa.table({"x": x}),
        pa.table({"id": pa.array([7, 8, 9]), "x": pa.array(rows, pa.large_list(pa.float64()))}),
        pa.record_batch({"x": pa.array([[5.0], None, [1.0, 1.0]]), "s": pa.array([0, 0, 0])}),
        pa.table({"x": pa.array([[[1.0, 2.0]], [[3.0, 4.0]], []],
                                pa.list_(pa.list_(pa.float64(), 2)))}),
        pa.table({"x": x}),
    ]
    for _ in range(2):
        for b in batches:
            out = f(b)
            assert out.schema == f.output_schema(b.schema)
            if b.schema.field("x").type.value_type == pa.float64():
                assert out.column("s").to_pylist() == _pool(b.column("x"))
            else:
                assert out.column("s").to_pylist() == [[1.0, 2.0], [3.0, 4.0], [0.0, 0.0]]
    # the replaced column "s" of the record batch is replaced in place
    assert f(batches[2]).schema.names == ["x", "s"]


def test_a_udf_s_kept_call_follows_changed_arguments():
    table = pa.table({"x": pa.array([[1.0, 5.0], [2.0]]), "y": pa.array([[4.0], [3.0, 1.0]])})
    f = la.udf(la.sequence_pool, input=la.col("x"), pool_type="sum", out="s")
    assert f(table).column("s").to_pylist() == [6.0, 2.0]
    f.args["input"].name = "y"  # a reference changed in place
    assert f(table).column("s").to_pylist() == [4.0, 4.0]
    f.args["pool_type"] = "max"  # an argument replaced
    assert f(table).column("s").to_pylist() == [4.0, 3.0]
    f.args = {"input": la.col("x"), "pool_type": "sum"}  # the arguments replaced
    assert f(table).column("s").to_pylist() == [6.0, 2.0]
    f.out = ("t",)
    assert f(table).column_names == ["x", "y", "t"]
    # two references to one column, one of them renamed: each reads its own column now
    g = la.udf(la.sequence_concat, input=[la.col("x"), la.col("x")], out="c")
    assert g(table).column("c").to_pylist() == [[1.0, 5.0, 1.0, 5.0], [2.0, 2.0]]
    g.args["input"][1] = la.col("y")  # the list changed in place
    assert g(table).column("c").to_pylist() == [[1.0, 5.0, 4.0], [2.0, 3.0, 1.0]]
    g.args["input"][0].name = "y"
    assert g(table).column("c").to_pylist() == [[4.0, 4.0], [3.0, 1.0, 3.0, 1.0]]
    # a pickled copy works out its own call
    h = pickle.loads(pickle.dumps(f))
    assert h(table).equals(f(table))


def test_apply_s_recent_calls_follow_changed_references():
    """apply reuses the work of a recent call with equal arguments, never a stale one."""
    table = pa.table({"x": pa.array([[1.0, 5.0], [2.0]]), "y": pa.array([[4.0], [3.0, 1.0]])})
    r = la.col("x")
    assert la.apply(table, la.sequence_pool, input=r, pool_type="sum",
                    out="s").column("s").to_pylist() == [6.0, 2.0]
    # a fresh, equal reference fits the remembered call
    assert la.apply(table, la.sequence_pool, input=la.col("x"), pool_type="sum",
                    out="s").column("s").to_pylist() == [6.0, 2.0]
    r.name = "y"  # the remembered reference changed in place
    assert la.apply(table, la.sequence_pool, input=la.col("x"), pool_type="sum",
                    out="s").column("s").to_pylist() == [6.0, 2.0]
    assert la.apply(table, la.sequence_pool, input=r, pool_type="sum",
                    out="s").column("s").to_pylist() == [4.0, 4.0]
    both = [la.col("x"), la.col("x")]
    assert la.apply(table, la.sequence_concat, input=both,
                    out="c").column("c").to_pylist() == [[1.0, 5.0, 1.0, 5.0], [2.0, 2.0]]
    both[1] = la.col("y")  # the list changed in place
    assert la.apply(table, la.sequence_concat, input=both,
                    out="c").column("c").to_pylist() == [[1.0, 5.0, 4.0], [2.0, 3.0, 1.0]]


# ---------------------------------------------------------------------------- offset width
@pytest.mark.parametrize("make, large", [
    (lambda v: pa.array(v, type=pa.list_(pa.float64())), False),
    (lambda v: pa.array(v, type=pa.large_list(pa.float64())), True),
    (lambda v: pa.array(v, type=pa.list_view(pa.float64())), False),
    (lambda v: pa.array(v, type=pa.large_list_view(pa.float64())), True),
])
def test_list_outputs_keep_the_inputs_offset_width(make, large):
    table = pa.table({"x": make([[1.0, 2.0], [], [3.0]])})
    out = la.apply(table, la.sequence_reverse, x=la.col("x"), out="r")
    want = pa.large_list(pa.float64()) if large else pa.list_(pa.float64())
    assert out.schema.field("r").type == want
    assert out.column("r").to_pylist() == [[2.0, 1.0], [], [3.0]]


def test_a_large_list_input_makes_every_list_output_large():
    table = pa.table({"x": pa.array([[1.0], [2.0]], type=pa.list_(pa.float64())),
                      "y": pa.array([[1.0], []], type=pa.large_list(pa.float64()))})
    out = la.apply(table, la.sequence_concat, input=[la.col("x"), la.col("y")], out="c")
    assert out.schema.field("c").type == pa.large_list(pa.float64())


def test_outputs_from_plain_columns_only_are_list():
    table = pa.table({"p": pa.FixedSizeListArray.from_arrays(pa.array([1.0, 2, 3, 4]), 2),
                      "n": pa.array([2, 1])})
    out = la.apply(table, la.sequence_unpad, x=la.col("p"), length=la.col("n"), out="u")
    assert out.schema.field("u").type == pa.list_(pa.list_(pa.float64(), 1))  # [sum, 1]
    assert out.column("u").to_pylist() == [[[1.0], [2.0]], [[3.0]]]


# ---------------------------------------------------------------------------- broadcasts
def test_expand_and_expand_as_repeat_row_i_of_x_within_row_i_of_y():
    table = pa.table({"v": [10, 20, 30], "y": [[1, 1], [], [2, 2, 2]]})
    out = la.apply(table, la.sequence_expand, x=la.col("v"), y=la.col("y"), out="e")
    assert out.column("e").to_pylist() == [[10, 10], [], [30, 30, 30]]
    out = la.apply(table, la.sequence_expand_as, x=la.col("v"), y=la.col("y"), out="e")
    assert out.column("e").to_pylist() == [[10, 10], [], [30, 30, 30]]


def test_expand_with_several_top_level_sequences_per_row_is_a_value_error():
    table = pa.table({"x": [[1.0], [2.0]], "y": [[1, 1], [2]]})
    with pytest.raises(ValueError, match=r"apply: table row 0: sequence_expand repeats x's "
                                         r"sequence 2 times within one table row"):
        la.apply(table, la.sequence_expand, x=la.col("x"), y=la.col("y"), out="e")
    doc = pa.table({"v": [1.0, 2.0], "d": [[[1], [2, 3]], []]})
    # on row 0 alone x has one row for the two sequences of y's level 1
    with pytest.raises(ValueError, match=r"apply: table row 0: sequence_expand: x has no LoD, "
                                         r"so it needs one row per sequence of y's level 1 "
                                         r"\(2\), got 1 rows"):
        la.apply(doc, la.sequence_expand, x=la.col("v"), y=la.col("d"), ref_level=1, out="e")


def test_a_result_that_is_not_row_aligned_names_operator_output_and_counts():
    table = pa.table({"x": pa.array([[1.0, 2.0], [3.0]])})
    with pytest.raises(ValueError, match=r"apply: lod_reset gives output 'r' with 3 top-level "
                                         r"sequences for a table of 2 rows"):
        la.apply(table, la.lod_reset, x=la.col("x"), target_lod=[0, 1, 2, 3], out="r")
    # a target with one sequence per row is row-aligned
    out = la.apply(table, la.lod_reset, x=la.col("x"), target_lod=[0, 1, 3], out="r")
    assert out.column("r").to_pylist() == [[1.0], [2.0, 3.0]]


def test_a_list_column_where_rows_are_read_is_a_value_error():
    table = pa.table({"x": [[1.0], [2.0]], "y": [[1, 1], [2]]})
    with pytest.raises(ValueError, match=r"sequence_expand_as's x must be a plain column.*"
                                         r"column 'x' is a list column"):
        la.apply(table, la.sequence_expand_as, x=la.col("x"), y=la.col("y"), out="e")


# ---------------------------------------------------------------------------- arguments
def test_udf_asks_for_maxlen_where_the_width_depends_on_the_data():
    with pytest.raises(ValueError, match=r"udf: sequence_pad without maxlen .* pass maxlen="):
        la.udf(la.sequence_pad, x=la.col("x"), pad_value=0, out=("p", "n"))
    with pytest.raises(ValueError, match=r"udf: sequence_mask without maxlen"):
        la.udf("sequence_mask", x=la.col("n"), out="m")
    with pytest.raises(ValueError, match=r"udf: lod_reset with no y cannot fit every batch"):
        la.udf(la.lod_reset, x=la.col("x"), target_lod=[0, 1], out="r")
    with pytest.raises(ValueError, match=r"udf: lod_append with a literal level"):
        la.udf(la.lod_append, x=la.col("x"), level=[0, 1], out="r")


def test_argument_errors():
    table = pa.table({"x": [[1.0]]})
    with pytest.raises(ValueError, match=r"unknown operator 'sequence_nope'"):
        la.apply(table, "sequence_nope", input=la.col("x"), out="r")
    with pytest.raises(TypeError, match=r"op must be a lodarrow operator"):
        la.apply(table, np.sum, input=la.col("x"), out="r")
    with pytest.raises(ValueError, match=r"sequence_pad returns 2 results here, so out needs "
                                         r"2 name\(s\)"):
        la.apply(table, la.sequence_pad, x=la.col("x"), pad_value=0.0, out="p")
    with pytest.raises(ValueError, match=r"out names a column twice"):
        la.apply(table, la.sequence_pad, x=la.col("x"), pad_value=0.0, out=("p", "p"))
    with pytest.raises(TypeError, match=r"out must be a column name"):
        la.apply(table, la.sequence_reverse, x=la.col("x"), out=3)
    with pytest.raises(TypeError, match=r"missing 1 required keyword-only argument: 'out'"):
        la.apply(table, la.sequence_reverse, x=la.col("x"))
    with pytest.raises(KeyError, match=r"apply: no column 'nope'; the columns are \['x'\]"):
        la.apply(table, la.sequence_reverse, x=la.col("nope"), out="r")
    with pytest.raises(TypeError, match=r"table must be a pyarrow Table or RecordBatch, a "
                                        r"pandas or polars DataFrame"):
        la.apply({"x": [1]}, la.sequence_reverse, x=la.col("x"), out="r")
    with pytest.raises(TypeError, match=r"column 'x': .*values of Arrow type string"):
        la.apply(pa.table({"x": [["a"]]}), la.sequence_reverse, x=la.col("x"), out="r")
    with pytest.raises(TypeError, match=r"col: name must be a string"):
        la.col(1)
    with pytest.raises(ValueError, match=r"col: lod_level must be >= 0"):
        la.col("x", lod_level=-1)
    with pytest.raises(ValueError, match=r"col: feature_shape .* give lod_level too"):
        la.col("x", feature_shape=(2,))
    with pytest.raises(TypeError, match=r"pipeline: udfs\[0\] must be a udf"):
        la.pipeline(len)
    with pytest.raises(ValueError, match=r"pipeline: give at least one udf"):
        la.pipeline()


def test_col_is_small_and_picklable():
    c = la.col("emb", lod_level=1, feature_shape=[8])
    assert c.feature_shape == (8,)
    assert pickle.loads(pickle.dumps(c)) == c
    assert repr(c) == "col('emb', lod_level=1, feature_shape=(8,))"
    assert hash(c) == hash(la.col("emb", lod_level=1, feature_shape=(8,)))


def test_device_cuda_runs_on_a_gpu_or_is_a_backend_error():
    from conftest import cuda_unavailable_reason

    table = pa.table({"x": [[1.0, 2.0]]})
    f = la.udf(la.sequence_reverse, x=la.col("x"), out="r", device="cuda")
    if cuda_unavailable_reason() is None:  # a GPU: the same host columns as on the CPU
        want = la.apply(table, la.sequence_reverse, x=la.col("x"), out="r")
        assert la.apply(table, la.sequence_reverse, x=la.col("x"), out="r",
                        device="cuda").equals(want)
        assert f(table).equals(want)
        return
    with pytest.raises(la.BackendError, match=r"CuPy|GPU"):
        la.apply(table, la.sequence_reverse, x=la.col("x"), out="r", device="cuda")
    with pytest.raises(la.BackendError):
        f(table)
