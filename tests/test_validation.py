"""Shared boundary helpers: index arrays, pad values (OPS.md departure 11), chunking."""

import numpy as np
import pytest

from lodarrow._ops._common import chunk_bounds, row_bytes
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


@pytest.mark.parametrize("value, dtype", [(0.5, "int32"), (300, "int8"), (-1, "uint8"), (2, "bool")])
def test_pad_value_python_scalars_out_of_range(value, dtype):
    with pytest.raises(TypeError, match="pad_value"):
        coerce_pad_value(value, dtype, ())


def test_pad_value_arrays_cast_safely_only():
    assert coerce_pad_value(np.float32(1.5), "float64", (2,)).tolist() == [1.5, 1.5]
    assert coerce_pad_value(np.array([7], dtype=np.int8), "int64", (3,)).tolist() == [7, 7, 7]
    assert coerce_pad_value(np.array([1, 2]), "int64", (2,)).tolist() == [1, 2]
    with pytest.raises(TypeError, match="cannot be cast safely"):
        coerce_pad_value(np.float64(1.5), "float32", ())
    with pytest.raises(ValueError, match=r"must have shape \(\), \(1,\) or the feature shape"):
        coerce_pad_value(np.zeros(3), "float64", (2,))


def test_chunk_bounds_balance_rows():
    offsets = np.array([0, 100, 101, 102, 103, 200], dtype=np.int64)
    b = chunk_bounds(offsets, 2)
    assert b[0] == 0 and b[-1] == 5 and np.all(np.diff(b) >= 0)
    assert chunk_bounds(np.array([0], dtype=np.int64), 4).tolist() == [0, 0]


def test_row_bytes_views_every_row_as_bytes():
    data = np.arange(6, dtype=np.float16).reshape(3, 2)
    rb = row_bytes(data)
    assert rb.shape == (3, 4) and rb.dtype == np.uint8 and np.shares_memory(rb, data)
    assert row_bytes(np.zeros((0, 3))).shape == (0, 24)
    assert row_bytes(np.asfortranarray(np.ones((3, 2)))).flags.c_contiguous
