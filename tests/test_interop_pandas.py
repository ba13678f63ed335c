"""pandas: ``LoDTensor.to_pandas`` and ``from_pandas`` (docs/data-model.md#pandas)."""


import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from conftest import on_backend
from hypothesis import HealthCheck, given, settings
from strategies import lod_tensors

import lodarrow as la

HSET = settings(suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow, HealthCheck.data_too_large])


def test_to_pandas_example(backend):
    t = la.LoDTensor(np.arange(14.0).reshape(7, 2), lod=[[0, 2, 3], [0, 2, 4, 7]])
    s = on_backend(t, backend).to_pandas()
    assert isinstance(s, pd.Series) and len(s) == 2
    assert isinstance(s.dtype, pd.ArrowDtype)
    assert s.dtype.pyarrow_dtype == pa.large_list(pa.large_list(pa.list_(pa.float64(), 2)))
    assert s.tolist() == [[[[0.0, 1.0], [2.0, 3.0]], [[4.0, 5.0], [6.0, 7.0]]],
                          [[[8.0, 9.0], [10.0, 11.0], [12.0, 13.0]]]]
    assert la.from_pandas(s).equals(t)


@HSET
@given(t=lod_tensors())
def test_round_trip(backend, t):
    s = on_backend(t, backend).to_pandas()
    assert len(s) == len(t)  # a row per top-level sequence (per data row without LoD)
    assert s.dtype == pd.ArrowDtype(t.to_arrow().type)
    back = la.from_pandas(s)
    assert back.equals(t)
    if backend == "cpu" and t.dtype != np.bool_ and t.data.nbytes:
        assert back.data.ctypes.data == t.data.ctypes.data  # zero-copy both ways


def test_plain_tensor_is_a_row_per_data_row():
    t = la.LoDTensor(np.array([[1, 2], [3, 4], [5, 6]], np.int16))
    s = t.to_pandas()
    assert len(s) == 3 and s.tolist() == [[1, 2], [3, 4], [5, 6]]
    assert la.from_pandas(s).equals(t)


def test_object_series_of_lists():
    t = la.from_pandas(pd.Series([[1.0, np.nan], [], [3.0]], index=[10, 20, 30]))
    assert t.lod() == [[0, 2, 2, 3]] and t.dtype == np.float64
    np.testing.assert_array_equal(t.data, [1.0, np.nan, 3.0])  # NaN stays NaN
    t = la.from_pandas(pd.Series([[[1, 2], []], [[3]]]))
    assert t.lod() == [[0, 2, 3], [0, 2, 2, 3]] and t.dtype == np.int64
    t = la.from_pandas(pd.Series([[True], [False, True]]))
    assert t.dtype == np.bool_ and t.data.tolist() == [True, False, True]


def test_object_series_of_numpy_arrays():
    items = [np.zeros((2, 3), np.float32), np.ones((0, 3), np.float32),
             np.full((1, 3), 2, np.float32)]
    t = la.from_pandas(pd.Series(items))
    assert t.lod() == [[0, 2, 2, 3]] and t.feature_shape == (3,) and t.dtype == np.float32
    np.testing.assert_array_equal(t.data, np.concatenate(items))
    t = la.from_pandas(pd.Series([np.arange(3, dtype=np.uint8), np.arange(1, dtype=np.uint8)]))
    assert t.lod() == [[0, 3, 4]] and t.dtype == np.uint8


def test_numeric_and_empty_series():
    t = la.from_pandas(pd.Series([1.5, np.nan, 2.0], dtype=np.float32))
    assert t.lod_level == 0 and t.dtype == np.float32
    np.testing.assert_array_equal(t.data, np.array([1.5, np.nan, 2.0], np.float32))
    t = la.from_pandas(pd.Series([1, 2], dtype="Int64"))
    assert t.dtype == np.int64 and t.data.tolist() == [1, 2]
    t = la.from_pandas(pd.Series([], dtype=object))
    assert t.lod() == [[0]] and t.dtype == np.float64 and t.data.shape == (0,)


def test_missing_items():
    s = pd.Series([[1, 2], None, [3]])
    with pytest.raises(ValueError, match=r"null list at level 0, position 1"):
        la.from_pandas(s)
    assert la.from_pandas(s, nulls="empty").lod() == [[0, 2, 2, 3]]
    assert la.from_pandas(pd.Series([None, None]), nulls="empty").lod() == [[0, 0, 0]]
    with pytest.raises(ValueError, match=r"null value at row 1"):
        la.from_pandas(pd.Series([1, None], dtype="Int64"))
    arrow = pd.Series(pd.arrays.ArrowExtensionArray(pa.array([[1], None])))
    with pytest.raises(ValueError, match=r"null list at level 0, position 1"):
        la.from_pandas(arrow)


def test_errors():
    with pytest.raises(TypeError, match=r"series must be a pandas.Series, got list"):
        la.from_pandas([[1, 2]])
    with pytest.raises(TypeError, match=r"series must be a pandas.Series, got DataFrame"):
        la.from_pandas(pd.DataFrame({"a": [1]}))
    with pytest.raises(TypeError, match=r"values of Arrow type string"):
        la.from_pandas(pd.Series([["a"], ["b"]]))
    with pytest.raises(TypeError, match=r"must be sequences, got items of Arrow type int64"):
        la.from_pandas(pd.Series([1, "a"], dtype=object).iloc[:1])
    with pytest.raises(ValueError, match=r"null list at level 0, position 1"):  # a null row
        la.from_pandas(pd.Series([np.zeros((2, 2)), None]))
    with pytest.raises(ValueError, match=r"item 1 has rows of shape \(2,\), item 0 of shape "
                                         r"\(3,\)"):
        la.from_pandas(pd.Series([np.zeros((1, 3)), np.zeros((1, 2))]))
    with pytest.raises(ValueError, match=r"item 1 has dtype int32, item 0 float64"):
        la.from_pandas(pd.Series([np.zeros(2), np.zeros(2, np.int32)]))
    with pytest.raises(TypeError, match=r"values of Arrow type timestamp"):
        la.from_pandas(pd.Series(pd.to_datetime(["2024-01-01"])))
    with pytest.raises(TypeError, match=r"cannot convert a Series of dtype complex128"):
        la.from_pandas(pd.Series([1 + 2j]))
    with pytest.raises(TypeError, match=r"t must be a LoDTensor"):
        la._interop._pandas.to_pandas(np.arange(3))
