"""LoDTensor <-> Awkward Array (docs/interop.md#awkward-array): ListOffsetArray levels over a
NumpyArray / RegularArray, zero-copy both ways, against the real awkward."""

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lodarrow as la
from conftest import CUDA
from hub_cases import (ALL_DTYPES, FEATURE_SHAPES, address, all_cases, assert_same, make,
                       reference_list, sliced, table_with_tokens)
from strategies import lod_tensors

ak = pytest.importorskip("awkward")


@pytest.mark.parametrize("t", all_cases(ALL_DTYPES, FEATURE_SHAPES))
def test_round_trip(t):
    a = t.to_awkward()
    assert a.tolist() == reference_list(t)
    assert a.ndim == 1 + t.lod_level + len(t.feature_shape)
    assert_same(la.from_awkward(a), t)


@pytest.mark.parametrize("t", all_cases(("float64", "int16"), ((), (2, 2))))
def test_zero_copy_both_ways(t):
    a = t.to_awkward()
    layout = ak.to_layout(a)
    node = layout
    for k in range(t.lod_level):
        assert type(node).__name__ == "ListOffsetArray"
        assert address(np.asarray(node.offsets.data)) == address(t.offsets[k])
        node = node.content
    while type(node).__name__ == "RegularArray":
        node = node.content
    if t.data.size:
        assert address(np.asarray(node.data)) == address(t.data)
    back = la.from_awkward(a)
    if t.data.size:
        assert address(back.data) == address(t.data)
    for k in range(t.lod_level):
        assert address(back.offsets[k]) == address(t.offsets[k])


def test_awkward_slices_are_rebased():
    a = ak.Array([[1.0, 2.0], [3.0], [], [4.0, 5.0, 6.0]])
    got = la.from_awkward(a[1:])
    assert got.lod() == [[0, 1, 1, 4]]
    assert got.data.tolist() == [3, 4, 5, 6]
    nested = ak.Array([[[1], [2, 3]], [[4, 5, 6]], [[7], [], [8]]])
    got = la.from_awkward(nested[1:])
    assert got.lod() == [[0, 1, 4], [0, 3, 4, 4, 5]]
    assert got.data.tolist() == [4, 5, 6, 7, 8]


def test_sliced_tensor_round_trip():
    t = sliced("int32", (3,))
    assert_same(la.from_awkward(t.to_awkward()), t)


def test_from_arrow_and_list_array_and_regular_levels():
    arr = pa.array([[1, 2], [3]], type=pa.list_(pa.int32()))
    got = la.from_awkward(ak.from_arrow(arr))  # 32-bit offsets, an option-free ?int32
    assert got.lod() == [[0, 2, 3]] and got.dtype == np.int32
    # ListArray (starts / stops): packed
    la_ = ak.contents.ListArray(ak.index.Index64(np.array([2, 0])),
                                ak.index.Index64(np.array([3, 2])),
                                ak.contents.NumpyArray(np.array([1.0, 2.0, 3.0])))
    got = la.from_awkward(ak.Array(la_))
    assert got.lod() == [[0, 1, 3]] and got.data.tolist() == [3, 1, 2]
    # a RegularArray above a ragged level is a LoD level; below, a feature dimension
    reg = ak.to_regular(ak.Array([[[1], [2, 3]], [[4], []]]), axis=1)
    got = la.from_awkward(reg)
    assert got.lod() == [[0, 2, 4], [0, 1, 3, 4, 4]]
    feat = ak.to_regular(ak.Array([[[1, 2], [3, 4]], [[5, 6]]]), axis=2)
    got = la.from_awkward(feat)
    assert got.lod() == [[0, 2, 3]] and got.feature_shape == (2,)


def test_missing_values_are_an_error_naming_the_way_out():
    with pytest.raises(ValueError, match=r"position 1.*fill_none"):
        la.from_awkward(ak.Array([[1, 2], None]))
    with pytest.raises(ValueError, match=r"position 1 of list depth 1"):
        la.from_awkward(ak.Array([[1, None]]))


def test_what_a_lodtensor_cannot_hold_is_refused():
    with pytest.raises(TypeError, match="strings"):
        la.from_awkward(ak.Array([["a", "b"]]))
    with pytest.raises(TypeError, match="RecordArray"):
        la.from_awkward(ak.Array([[{"x": 1}]]))
    with pytest.raises(TypeError, match="array must be an awkward.Array"):
        la.from_awkward([[1, 2]])


@pytest.mark.parametrize("lists, lod", [
    ([[], []], [[0, 0, 0]]),
    ([[]], [[0, 0]]),
    ([[[]], []], [[0, 1, 1], [0, 0]]),
    ([[[], []], []], [[0, 2, 2], [0, 0, 0]]),
    ([[[[]]]], [[0, 1], [0, 1], [0, 0]]),
])
def test_empty_array_is_a_batch_of_empty_sequences(lists, lod):
    a = ak.Array(lists)  # var * ... * unknown: an EmptyArray under the lists
    assert "unknown" in str(a.type)
    got = la.from_awkward(a)
    assert got.lod() == lod
    # Awkward's own reading of unknown: float64 (ak.to_numpy of an EmptyArray)
    assert got.dtype == ak.to_numpy(ak.flatten(a, axis=None)).dtype == np.float64
    assert got.data.shape == (0,)
    assert got.to_awkward().tolist() == lists
    assert_same(la.from_awkward(got.to_awkward()), got)


def test_empty_array_sliced_and_under_a_regular_level():
    got = la.from_awkward(ak.Array([[[], []], [], [[]]])[1:])
    assert got.lod() == [[0, 0, 1], [0, 0]] and got.data.shape == (0,)
    # a RegularArray of size 0 over an EmptyArray: rows of feature shape (0,), no LoD
    got = la.from_awkward(ak.to_regular(ak.Array([[], [], []]), axis=1))
    assert got.lod() == [] and got.data.shape == (3, 0) and got.dtype == np.float64


@pytest.mark.parametrize("dtype", ["int32", "float32", "bool", np.uint8])
def test_dtype_chooses_the_values_dtype(dtype):
    got = la.from_awkward(ak.Array([[], [[]]][1:]), dtype=dtype)
    assert got.dtype == np.dtype(dtype) and got.lod() == [[0, 1], [0, 0]]
    got = la.from_awkward(ak.Array([[1, 2], [], [3]]), dtype=dtype)
    assert got.dtype == np.dtype(dtype)
    assert got.data.tolist() == np.array([1, 2, 3]).astype(dtype).tolist()


def test_dtype_equal_to_the_arrays_keeps_the_values_shared():
    t = make([[2, 0, 3]], "float32", ())
    got = la.from_awkward(t.to_awkward(), dtype=np.float32)
    assert address(got.data) == address(t.data)


def test_bad_dtype_is_refused_naming_it():
    with pytest.raises(TypeError, match=r"from_awkward: dtype='U3'"):
        la.from_awkward(ak.Array([[1.0]]), dtype="U3")
    with pytest.raises(TypeError, match=r"from_awkward: dtype='nope'"):
        la.from_awkward(ak.Array([[]]), dtype="nope")


def test_empty_array_without_a_list_level_says_why():
    with pytest.raises(ValueError, match=r"empty with no list level.*no dtype to read"):
        la.from_awkward(ak.Array([]))
    with pytest.raises(ValueError, match="no list level"):
        la.from_awkward(ak.Array([]), dtype="float32")


def test_table_column_to_awkward():
    a = la.to_awkward(table_with_tokens(), column="tokens")
    assert a.tolist() == [[1, 2], [], [3, 4, 5]]


def test_plain_tensor():
    t = la.LoDTensor(np.arange(6).reshape(3, 2))
    a = t.to_awkward()
    assert a.tolist() == [[0, 1], [2, 3], [4, 5]]
    assert_same(la.from_awkward(a), t)


@settings(max_examples=40)
@given(lod_tensors(), st.data())
def test_hypothesis_round_trip(t, data):
    if t.lod_level and data.draw(st.booleans(), label="slice"):
        lo = data.draw(st.integers(0, len(t)), label="lo")
        t = t[lo:data.draw(st.integers(lo, len(t)), label="hi")]
    a = t.to_awkward()
    assert a.tolist() == reference_list(t)
    assert_same(la.from_awkward(a), t)


@pytest.mark.parametrize("backend", [CUDA])
def test_cuda_round_trip_stays_on_the_device(backend):
    t = make([[2, 0, 3]], "float32", (3,)).cuda()
    a = t.to_awkward()
    assert ak.backend(a) == "cuda"
    back = la.from_awkward(a)
    assert back.place.is_cuda
    assert_same(back.cpu(), t.cpu())
