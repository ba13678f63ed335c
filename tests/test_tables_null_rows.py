"""Dropping a table's null rows before an operator (lodarrow/_interop/_arrow_nulls.py):
``drop_rows`` gives exactly the rows ``Array.filter`` gives, and keeps a list column's values
without a copy when the dropped rows between kept ones are empty."""

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lodarrow as la
from lodarrow._interop._arrow_nulls import drop_rows


def _lists(lengths, null, large=False, nested=False, start=0):
    """A list column of ``lengths`` (``null``: rows made null, keeping their lengths)."""
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64 if large else np.int32)
    n = int(offsets[-1])
    if nested:  # each entry a list of 0-2 int32 values
        inner = np.concatenate([[0], np.cumsum(np.arange(n) % 3)]).astype(np.int32)
        values = pa.ListArray.from_arrays(pa.array(inner),
                                          pa.array(np.arange(start, start + inner[-1],
                                                             dtype=np.int32)))
    else:
        values = pa.array(np.arange(start, start + n, dtype=np.float32))
    cls = pa.LargeListArray if large else pa.ListArray
    return cls.from_arrays(pa.array(offsets), values, mask=pa.array(null))


def _shares_values(out, arr):
    return out.values.buffers()[-1].address == arr.values.buffers()[-1].address


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.booleans(), st.booleans()), min_size=1,
                max_size=40),
       st.booleans(), st.booleans(), st.integers(0, 3))
def test_drop_rows_is_filter(rows, large, nested, cut):
    lengths = [n for n, _, _ in rows]
    null = [z for _, z, _ in rows]
    keep = np.array([k for _, _, k in rows], dtype=bool)
    arr = _lists(lengths, null, large, nested)
    if cut and len(arr) > cut:  # a slice: offsets that start inside the values
        arr, keep = arr.slice(cut), keep[cut:]
    out = drop_rows(arr, keep)
    want = arr.filter(pa.array(keep))
    assert out.type == arr.type and out.null_count == want.null_count
    assert out.to_pylist() == want.to_pylist()
    # the same through the decoder: offsets that do not start at 0 read as the filter's
    if keep.any() and not nested:
        got, read = la.from_arrow(out, nulls="empty"), la.from_arrow(want, nulls="empty")
        assert got.lod() == read.lod() and np.array_equal(got.data, read.data)


def test_empty_dropped_rows_keep_the_values():
    arr = _lists([2, 0, 3, 0, 1], [False, True, False, True, False])
    keep = np.array([True, False, True, False, True])
    out = drop_rows(arr, keep)
    assert out.to_pylist() == [[0.0, 1.0], [2.0, 3.0, 4.0], [5.0]]
    assert _shares_values(out, arr)
    # leading and trailing dropped rows may hold values: the kept ones still lie end to end
    keep = np.array([False, False, True, False, False])
    out = drop_rows(arr, keep)
    assert out.to_pylist() == [[2.0, 3.0, 4.0]] and _shares_values(out, arr)


def test_a_dropped_row_with_values_between_kept_ones_is_filtered():
    # a row dropped for another column's null holds values here: those are left out (a copy)
    arr = _lists([2, 1, 3], [False, False, False])
    keep = np.array([True, False, True])
    out = drop_rows(arr, keep)
    assert out.to_pylist() == [[0.0, 1.0], [3.0, 4.0, 5.0]]
    assert not _shares_values(out, arr)


def test_chunked_columns_keep_their_chunks():
    a = _lists([1, 0, 2], [False, True, False])
    b = _lists([0, 3], [True, False], start=10)
    data = pa.chunked_array([a, b])
    keep = np.array([True, False, True, False, True])
    out = drop_rows(data, keep)
    assert out.num_chunks == 2 and out.to_pylist() == data.filter(pa.array(keep)).to_pylist()
    assert _shares_values(out.chunk(0), a) and _shares_values(out.chunk(1), b)
    every_row_dropped = drop_rows(data, np.zeros(5, dtype=bool))
    assert len(every_row_dropped) == 0 and every_row_dropped.type == data.type


@pytest.mark.parametrize("data", [
    pa.array([1.0, None, 3.0]),
    pa.FixedSizeListArray.from_arrays(pa.array(np.arange(6, dtype=np.float32)), 2,
                                      mask=pa.array([False, True, False])),
])
def test_other_columns_are_filtered(data):
    keep = np.array([True, False, True])
    assert drop_rows(data, keep).to_pylist() == data.filter(pa.array(keep)).to_pylist()


def test_a_udf_over_null_rows_reads_the_same_without_the_copy():
    # the udf path end to end: null rows dropped, results spread back, rows as before
    emb = _lists([2, 0, 3, 1], [False, True, False, False])
    tokens = _lists([1, 0, 2, 2], [False, True, False, False], start=100)
    table = pa.table({"emb": emb, "tokens": tokens})
    out = la.apply(table, la.sequence_pool, input=la.col("emb"), pool_type="sum", out="s")
    assert out.column("s").to_pylist() == [1.0, None, 9.0, 5.0]
    out = la.apply(table, la.sequence_concat, input=[la.col("emb"), la.col("tokens")],
                   out="both")
    assert out.column("both").to_pylist() == [
        [0.0, 1.0, 100.0], None, [2.0, 3.0, 4.0, 101.0, 102.0], [5.0, 103.0, 104.0]]
