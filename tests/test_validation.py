"""Shared boundary helpers: index arrays, pad values (docs/operators.md#exact-pad-values),
chunking, exception names."""

import re
import traceback

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import lodarrow as la
from lodarrow import LoDError
from lodarrow._backends import row_bytes
from lodarrow._threads import PARALLEL_MIN_WORK, chunk_bounds, num_threads, plan_threads
from lodarrow._validation import as_index_array, coerce_pad_value


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "uint16", "int32", "uint32",
                                   "int64", "uint64"])
def test_as_index_array_accepts_every_integer_dtype(dtype):
    out = as_index_array(np.array([0, 3, 5], dtype=dtype), "index")
    assert out.dtype == np.int64 and out.tolist() == [0, 3, 5]


def test_as_index_array_rejections():
    with pytest.raises(TypeError, match="index must hold integers, got dtype float64"):
        as_index_array(np.array([0.0, 1.0]), "index")
    with pytest.raises(TypeError, match="got dtype bool"):
        as_index_array(np.array([True]), "index")
    with pytest.raises(ValueError, match="does not fit int64"):
        as_index_array(np.array([2**63], dtype=np.uint64), "index")
    with pytest.raises(ValueError, match=r"must be 1-D \(or of shape \(n, 1\)\)"):
        as_index_array(np.zeros((2, 2), dtype=int), "index")
    assert as_index_array(np.array([[1], [2]]), "index").tolist() == [1, 2]
    assert as_index_array([], "index").dtype == np.int64


@pytest.mark.parametrize(
    "value, dtype, expected",
    [(0.1, "float64", 0.1), (0.1, "float32", np.float32(0.1)), (3, "int8", 3), (2.0, "int32", 2),
     (True, "bool", True), (1, "bool", True), (-1, "float16", -1.0), (1e300, "float64", 1e300)],
)
def test_pad_value_python_scalars_convert_by_value(value, dtype, expected):
    out = coerce_pad_value(value, dtype, ())
    assert out.dtype == np.dtype(dtype) and out.shape == () and out == expected


@pytest.mark.parametrize("value, dtype, match", [
    (0.5, "int32", r"pad_value = 0.5 is not integral; the output dtype is int32"),
    (300, "int8", r"pad_value = 300 is out of range for the output dtype int8 \[-128, 127\]"),
    (-1, "uint8", r"pad_value = -1 is out of range for the output dtype uint8 \[0, 255\]"),
    (2, "bool", r"pad_value = 2 does not fit the output dtype bool"),
])
def test_pad_value_python_scalars_out_of_range(value, dtype, match):
    with pytest.raises(TypeError, match=match):
        coerce_pad_value(value, dtype, ())


def test_pad_value_arrays_cast_safely_only():
    assert coerce_pad_value(np.float32(1.5), "float64", (2,)).tolist() == [1.5, 1.5]
    assert coerce_pad_value(np.array([7], dtype=np.int8), "int64", (3,)).tolist() == [7, 7, 7]
    assert coerce_pad_value(np.array([1, 2]), "int64", (2,)).tolist() == [1, 2]
    with pytest.raises(TypeError, match="cannot be cast safely"):
        coerce_pad_value(np.float64(1.5), "float32", ())
    with pytest.raises(ValueError, match=r"must have shape \(\), \(1,\) or the feature shape"):
        coerce_pad_value(np.zeros(3), "float64", (2,))


def check_chunk_bounds(offsets, n_chunks):
    """``chunk_bounds`` against its definition: ``k = min(n_chunks, n_seq)`` (at least 1) runs
    of sequences ``[b[c], b[c + 1])`` covering every sequence in order, run ``c`` starting at
    the first sequence that starts at or after row ``c * rows / k`` (to within the integer
    rounding of that row), so that every run holds ``rows / k`` rows give or take one
    sequence."""
    offsets = np.asarray(offsets, dtype=np.int64)
    n_seq = offsets.size - 1
    k = max(1, min(n_chunks, n_seq))
    b = chunk_bounds(offsets, n_chunks)
    assert b.dtype == np.int64 and b.shape == (k + 1,)
    assert b[0] == 0 and b[-1] == n_seq and np.all(np.diff(b) >= 0)
    rows = int(offsets[-1])
    longest = int(np.diff(offsets).max()) if n_seq else 0
    for c in range(1, k):
        ideal = c * rows / k
        assert offsets[b[c]] >= ideal - 1, (c, b)  # starts at or after its row
        assert b[c] == 0 or offsets[b[c] - 1] < ideal, (c, b)  # the first such sequence
    chunk_rows = offsets[b[1:]] - offsets[b[:-1]]
    assert chunk_rows.sum() == rows
    assert chunk_rows.max(initial=0) <= rows / k + longest + 1
    return b.tolist()


def test_chunk_bounds_balance_rows():
    # two runs of 100 rows each: the first long sequence alone, then the other four
    assert check_chunk_bounds([0, 100, 101, 102, 103, 200], 2) == [0, 1, 5]
    assert check_chunk_bounds([0, 100, 101, 102, 103, 200], 4) == [0, 1, 1, 5, 5]
    # 100 sequences of 10 rows in 8 runs: 12 or 13 sequences each
    assert check_chunk_bounds(np.arange(101) * 10, 8) == [0, 13, 25, 38, 50, 63, 75, 88, 100]
    # empty sequences go with the run after them
    assert check_chunk_bounds([0, 0, 0, 5, 5, 10, 10], 2) == [0, 3, 6]
    assert check_chunk_bounds([0, 0, 0, 0], 2) == [0, 0, 3]
    # more runs than sequences, no sequences, and n_chunks < 1
    assert check_chunk_bounds([0, 1, 2, 3], 10) == [0, 1, 2, 3]
    assert check_chunk_bounds([0], 4) == [0, 0]
    assert check_chunk_bounds([0, 5, 9], 0) == [0, 2]


@given(st.lists(st.one_of(st.integers(0, 3), st.integers(0, 1000)), max_size=60),
       st.integers(0, 40))
def test_chunk_bounds_balance_rows_property(lengths, n_chunks):
    check_chunk_bounds(np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]), n_chunks)


def test_plan_threads(monkeypatch):
    monkeypatch.setenv("LODARROW_NUM_THREADS", "3")
    offsets = np.concatenate([[0], np.cumsum(np.arange(50, dtype=np.int64) % 7)])
    assert num_threads() == 3
    n, bounds = plan_threads(offsets, PARALLEL_MIN_WORK)
    assert n == 3 and bounds.tolist() == chunk_bounds(offsets, 12).tolist()
    n, bounds = plan_threads(offsets, PARALLEL_MIN_WORK, by_rows=False)
    counts = np.diff(bounds)  # balanced by sequence count: 50 sequences in 12 chunks
    assert n == 3 and bounds[0] == 0 and counts.size == 12 and counts.sum() == 50
    assert counts.min() == 4 and counts.max() == 5
    # small work, or one sequence: a single chunk on one thread
    n, bounds = plan_threads(offsets, PARALLEL_MIN_WORK - 1)
    assert n == 1 and bounds.tolist() == [0, 50]
    n, bounds = plan_threads(np.array([0, 10**6]), 10**6)
    assert n == 1 and bounds.tolist() == [0, 1]
    monkeypatch.setenv("LODARROW_NUM_THREADS", "1")
    assert plan_threads(offsets, 10**9)[0] == 1


def test_row_bytes_views_every_row_as_bytes():
    data = np.arange(6, dtype=np.float16).reshape(3, 2)
    rb = row_bytes(data)
    assert rb.shape == (3, 4) and rb.dtype == np.uint8 and np.shares_memory(rb, data)
    assert row_bytes(np.zeros((0, 3))).shape == (0, 24)
    assert row_bytes(np.asfortranarray(np.ones((3, 2)))).flags.c_contiguous


# ---------------------------------------------------------------- public exception names
def _formatted(exc):
    return "".join(traceback.format_exception_only(type(exc), exc))


@pytest.mark.parametrize("call, bases", [
    (lambda: la.LoDTensor(np.zeros(1), lengths=[[-1]]), (LoDError, TypeError)),
    (lambda: la.create_lod_tensor([[1, 2], [3]], [[1, 2]], la.CPUPlace()),
     (LoDError, AssertionError)),
])
def test_private_error_classes_show_public_names(call, bases):
    with pytest.raises(bases[0]) as info:
        call()
    exc = info.value
    assert all(isinstance(exc, b) for b in bases)  # either except clause still catches it
    shown = _formatted(exc)
    assert shown.startswith("lodarrow.LoDError: "), shown
    assert "_Negative" not in shown and "_Length" not in shown
    assert repr(exc).startswith("LoDError(")


def test_argument_error_shows_as_type_error():
    with pytest.raises(TypeError) as info:
        la.lod_reset(la.LoDTensor(np.zeros(2)))
    assert isinstance(info.value, ValueError)  # Paddle's Python layer raises ValueError
    assert _formatted(info.value).startswith("TypeError: lod_reset: y and target_lod")


@pytest.mark.parametrize("make", [
    lambda: la.LoDTensor(np.arange(5), [[2, 3]]),
    lambda: la.LoDTensor(np.arange(5), [[0, 2, 5]]).set_lod([[2, 3]]),
])
def test_lengths_where_offsets_go_get_the_offsets_hint(make):
    """The hint lod_reset gives (the same words: one helper, _validation.lengths_hint)."""
    with pytest.raises(la.LoDError, match=re.escape(
            "lod[0] must start at 0, found 2 at position 0; if these are sequence lengths, "
            "pass the offsets they make: [0, 2, 5]")):
        make()
    with pytest.raises(la.LoDError, match=re.escape(
            "if these are sequence lengths, pass the offsets they make: [0, 2, 5]")):
        la.lod_reset(la.LoDTensor(np.arange(5)), target_lod=[2, 3])


def test_lengths_hint_only_where_lengths_are_possible():
    with pytest.raises(la.LoDError, match=r"lod\[1\] must start at 0, found 2 at position 0; "
                                          r"if these .* \[0, 2, 4, 7\]\Z"):
        la.LoDTensor(np.arange(7), [[0, 2, 3], [2, 2, 3]])
    long = list(range(1, 12))
    with pytest.raises(la.LoDError, match=re.escape("[0, 1, 3, 6, 10, 15, 21, 28, ...]")):
        la.LoDTensor(np.arange(66), [long])
    with pytest.raises(ValueError, match="negative") as info:
        la.LoDTensor(np.arange(5), [[-1, 5]])
    assert "lengths" not in str(info.value)
