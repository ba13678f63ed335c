"""A udf on a table whose columns come in several chunks runs batch by batch (no join):
the same result, warnings and errors as the whole table, for every operator."""

import warnings
from unittest import mock

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tables_cases import CASES, addresses, assert_tables_equal, make_table

import lodarrow as la
from lodarrow._interop import _arrow_decode
from lodarrow._tables import _udf


def batch_by_batch(min_bytes=1):
    """Map chunked tables batch by batch from ``min_bytes`` a batch (the default threshold
    keeps small test tables whole)."""
    return mock.patch.object(_udf, "_MIN_BATCH_BYTES", min_bytes)


def whole():
    """Run every table whole (what a udf did before it mapped chunked tables by batch)."""
    return mock.patch.object(_udf, "_MIN_BATCH_BYTES", 2**62)


def by_batch(result, out, table):
    """Whether ``result`` was made batch by batch: its output column has one chunk per
    batch of ``table`` with rows (the whole table gives one)."""
    n = sum(1 for b in table.to_batches() if b.num_rows)
    return n > 1 and result.column(out).num_chunks == n


def chunked(table, bounds):
    """``table`` cut at ``bounds`` into a table of several chunks per column."""
    cuts = sorted({0, table.num_rows, *(min(b, table.num_rows) for b in bounds)})
    return pa.concat_tables(table.slice(a, b - a) for a, b in zip(cuts[:-1], cuts[1:]))


def no_join():
    """Fail the test if a chunked column is joined into one copy."""
    def refuse(*args):
        raise AssertionError("a chunked column was joined")
    return mock.patch.object(_arrow_decode, "join", refuse)


# ---------------------------------------------------------------------------- results
# random short lists are now and then all of one length: that warning is tested below
@pytest.mark.filterwarnings("ignore::lodarrow.RegularLevelWarning")
@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 30),
       cuts=st.lists(st.integers(1, 29), min_size=1, max_size=4))
def test_every_operator_batch_by_batch_equals_the_whole_table(seed, n, cuts):
    table = make_table(np.random.default_rng(seed), n)
    parts = chunked(table, cuts)
    whole = table.combine_chunks()
    for cid, op, args, out in CASES:
        f = la.udf(op, out=out, **args)
        want = f(whole)  # one chunk per column: the whole-table path
        with batch_by_batch():
            got = f(parts)
        first = out[0] if isinstance(out, tuple) else out
        assert by_batch(got, first, parts) is (len(parts.to_batches()) > 1), cid
        assert_tables_equal(got.combine_chunks(), want, cid)
        assert got.schema == f.output_schema(table.schema), cid


def _block(rng, rows, chunks):
    """A Ray-block-like table: ``chunks`` chunks of ``rows`` rows, token ids and vectors."""
    parts = []
    for _ in range(chunks):
        lens = rng.integers(0, 60, rows)
        off = pa.array(np.concatenate([[0], np.cumsum(lens)]).astype(np.int32))
        tok = pa.ListArray.from_arrays(off, pa.array(rng.integers(0, 50000, int(lens.sum()))))
        vec = pa.FixedSizeListArray.from_arrays(
            pa.array(rng.normal(size=3 * int(lens.sum())).astype(np.float32)), 3)
        parts.append(pa.table({"tok": tok, "emb": pa.ListArray.from_arrays(off, vec)}))
    return pa.concat_tables(parts)


@pytest.mark.filterwarnings("ignore::lodarrow.RegularLevelWarning")
@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 30),
       cuts=st.lists(st.integers(1, 29), min_size=1, max_size=3))
def test_null_rows_batch_by_batch_are_the_whole_table_s(seed, n, cuts):
    rng = np.random.default_rng(seed)
    table = make_table(rng, n)
    # each column its own null rows: a row null in any column read is left out of the call
    # and null in the results (docs/tables.md#nulls), in every batch as in the whole table
    table = pa.table({name: pc.if_else(pa.array(rng.random(n) < 0.2),
                                       pa.scalar(None, type=column.type), column)
                      for name, column in zip(table.column_names, table.columns)})
    parts = chunked(table, cuts)
    for cid, op, args, out in CASES:
        f = la.udf(op, out=out, **args)
        with whole():
            want = f(parts)
        with batch_by_batch():
            got = f(parts)
        assert_tables_equal(got.combine_chunks(), want.combine_chunks(), cid)


def test_a_ray_block_is_read_zero_copy_and_gives_the_whole_table_s_rows():
    block = _block(np.random.default_rng(5), 8192, 3)  # about 3 MiB a batch
    f = la.pipeline(
        la.udf(la.sequence_pool, input=la.col("emb"), pool_type="average", out="avg"),
        la.udf(la.sequence_reverse, x=la.col("tok"), out="rev"),
        la.udf(la.sequence_last_step, input=la.col("rev"), out="last"))
    with no_join():
        got = f(block)
    assert got.column("avg").num_chunks == 3
    # the columns it did not write are the input's chunks, unchanged
    for name in block.column_names:
        assert addresses(got.column(name)) == addresses(block.column(name))
    assert_tables_equal(got.combine_chunks(), f(block.combine_chunks()))
    # small batches are run whole (the join costs less than a call per batch)
    small = chunked(block.slice(0, 400), [100, 200, 300])
    with pytest.raises(AssertionError, match="joined"), no_join():
        f(small)


def test_record_batches_pandas_and_single_chunk_tables_are_run_as_they_are():
    table = make_table(np.random.default_rng(6), 12)
    f = la.udf(la.sequence_pool, input=la.col("x"), pool_type="sum", out="s")
    title = table.column("title").chunk(0)
    with batch_by_batch():
        # only a column it does not read is chunked
        other = table.set_column(1, "title", pa.chunked_array([title[:5], title[5:]]))
        assert not by_batch(f(other), "s", other)
        assert f(table.to_batches()[0]).num_rows == 12
        frame = f(table.to_pandas(types_mapper=pd_arrow_dtype()))
    assert frame["s"].tolist() == f(table).column("s").to_pylist()


def pd_arrow_dtype():
    import pandas as pd
    return pd.ArrowDtype


def test_a_column_missing_or_named_twice_is_the_whole_table_s_key_error():
    table = chunked(make_table(np.random.default_rng(8), 12), [6])
    twice = pa.Table.from_arrays([table.column("x"), table.column("x")], names=["x", "x"])
    f = la.udf(la.sequence_pool, input=la.col("x"), pool_type="sum", out="s")
    g = la.udf(la.sequence_pool, input=la.col("nope"), pool_type="sum", out="s")
    for u, t in ((f, twice), (g, table)):
        with whole():
            want = _error(u, t)
        with batch_by_batch():
            got = _error(u, t)
        assert got == want and want[0] is KeyError and "udf: no column" in want[1]


def test_batches_with_no_rows_are_skipped_and_an_empty_table_keeps_its_schema():
    table = make_table(np.random.default_rng(7), 9)
    f = la.udf(la.sequence_reverse, x=la.col("x"), out="r")
    parts = pa.concat_tables([table.slice(0, 0), table.slice(0, 4), table.slice(4, 0),
                              table.slice(4, 5)])
    with batch_by_batch():
        got = f(parts)
        empty = f(pa.concat_tables([table.slice(0, 0), table.slice(0, 0)]))
    assert by_batch(got, "r", parts)
    assert_tables_equal(got.combine_chunks(), f(table))
    assert empty.num_rows == 0 and empty.schema == f.output_schema(table.schema)


# ---------------------------------------------------------------------------- warnings
def _warnings(f, table):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        f(table)
    return [(w.category, str(w.message), w.filename) for w in caught]


def _quiet(f, table):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return f(table)


def _regular(widths):
    """A table of one ``list<list<float64>>`` column, one chunk per entry of ``widths``
    (``k`` rows of two innermost lists of that width), cut as given."""
    chunks = [pa.array([[[1.0] * w, [2.0] * w]] * k, pa.list_(pa.list_(pa.float64())))
              for w, k in widths]
    return pa.table({"doc": pa.chunked_array(chunks)})


@pytest.mark.parametrize("widths, warns", [
    ([(3, 2), (3, 5)], True),       # regular throughout: the lost feature dimension
    ([(3, 2), (4, 5)], False),      # each batch regular, the whole column not
    ([(1, 2), (1, 3)], False),      # innermost lists of one entry never warn
    ([(3, 1), (3, 1)], True),       # one row a batch, two innermost lists each
])
def test_a_regular_innermost_level_warns_as_the_whole_table_does(widths, warns):
    table = _regular(widths)
    f = la.udf(la.sequence_pool, input=la.col("doc"), pool_type="sum", out="s")
    g = la.pipeline(f, la.udf(la.sequence_reverse, x=la.col("doc"), out="r"))
    for u in (f, g):
        with whole():
            want = _warnings(u, table)
        with batch_by_batch():
            got = _warnings(u, table)
            assert by_batch(_quiet(u, table), "s", table)
        assert got == want
        assert bool(got) is warns
        assert all(name == __file__ for _, _, name in got)  # the caller's line


def test_an_innermost_list_of_one_row_alone_does_not_warn_but_counts_toward_two():
    # one innermost list per batch: alone no batch would warn (fewer than two lists);
    # together they are two lists of 3: the whole table warns, so batch by batch does
    table = pa.table({"doc": pa.chunked_array([pa.array([[[1.0, 2.0, 3.0]]]),
                                               pa.array([[[4.0, 5.0, 6.0]]])])})
    f = la.udf(la.sequence_pool, input=la.col("doc"), pool_type="sum", out="s")
    with whole():
        want = _warnings(f, table)
    with batch_by_batch():
        got = _warnings(f, table)
        assert by_batch(_quiet(f, table), "s", table)
    assert got == want and len(got) == 1


# ---------------------------------------------------------------------------- errors
def _error(f, table):
    with pytest.raises(Exception) as info:
        f(table)
    return type(info.value), str(info.value), getattr(info.value, "table_row", None)


def test_an_error_names_the_table_row_the_whole_table_names():
    # row 7 (in the second batch) has an index past its base row
    n = 10
    base = pa.FixedSizeListArray.from_arrays(pa.array(np.zeros(3 * n)), 3)
    ids = pa.array([[0, 1]] * 7 + [[5]] + [[2]] * 2, pa.list_(pa.int64()))
    upd = pa.array([[1.0, 2.0]] * 7 + [[1.0]] + [[1.0]] * 2, pa.list_(pa.float64()))
    table = chunked(pa.table({"base": base, "ids": ids, "upd": upd}), [4, 6])
    f = la.udf(la.sequence_scatter, input=la.col("base"), index=la.col("ids"),
               updates=la.col("upd"), out="r")
    with whole():
        want = _error(f, table)
    with batch_by_batch():
        got = _error(f, table)
    assert got == want and want[2] == 7 and "table row 7" in want[1]


@pytest.mark.filterwarnings("ignore::lodarrow.RegularLevelWarning")
def test_a_pipeline_raises_the_error_of_the_step_that_fails_first_on_the_whole_table():
    # step 1 fails on row 8 (second batch), step 2 on row 0 (first batch): the whole table
    # runs step 1 on every row first, so step 1's error is the one to give
    x = pa.array([[1.0, 2.0]] * 10, pa.list_(pa.float64()))
    cut = pa.array([[[0, 1], [0]]] + [[[0, 1]]] * 9, pa.list_(pa.list_(pa.int32())))
    y = pa.array([[[0, 1]]] * 8 + [[[0, 1, 2]]] + [[[0, 1]]], pa.list_(pa.list_(pa.int32())))
    table = chunked(pa.table({"x": x, "cut": cut, "y": y}), [5])
    g = la.pipeline(la.udf(la.lod_reset, x=la.col("x"), y=la.col("y"), out="a"),
                    la.udf(la.lod_reset, x=la.col("x"), y=la.col("cut"), out="b"))
    with whole():
        want = _error(g, table)
    with batch_by_batch():
        got = _error(g, table)
    assert got == want and want[2] == 8


@pytest.mark.filterwarnings("ignore::lodarrow.RegularLevelWarning")
def test_feature_widths_that_differ_between_batches_fail_as_the_whole_column_does():
    # col(lod_level=1) folds the innermost level into a feature width: 3 in one chunk, 4 in
    # the other; each batch alone is fine, the whole column is not, even where the result
    # does not show the width (sequence_pad's lengths alone)
    table = _regular([(3, 2), (4, 2)])
    x = la.col("doc", lod_level=1)
    for f in (la.udf(la.sequence_pool, input=x, pool_type="sum", out="s"),
              la.udf(la.sequence_pad, x=x, pad_value=0.0, maxlen=4, out=(None, "n"))):
        with whole():
            want = _error(f, table)
        with batch_by_batch():
            got = _error(f, table)
        assert got == want and "must be regular" in want[1]
