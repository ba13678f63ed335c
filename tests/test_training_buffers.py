"""The loader's views of Arrow buffers (lodarrow/_training/_buffers.py) against pyarrow's own
conversions, on slices, empty arrays, bools, large lists and chunked arrays."""

import numpy as np
import pyarrow as pa
import pytest

from lodarrow._training._buffers import as_numpy, list_offsets, positions, zero

LISTS = [[1, 2], [], None, [3], [4, 5, 6], []]


@pytest.mark.parametrize("kind", [pa.list_(pa.int32()), pa.large_list(pa.int32())])
@pytest.mark.parametrize("start,stop", [(0, 6), (1, 4), (2, 2), (5, 6), (6, 6)])
def test_list_offsets_are_the_arrays_own(kind, start, stop):
    arr = pa.array(LISTS, type=kind).slice(start, stop - start)
    got = list_offsets(arr)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, arr.offsets.to_numpy())


def test_list_offsets_of_an_array_built_without_offsets():
    arr = pa.Array.from_buffers(pa.list_(pa.int32()), 0, [None, None],
                                children=[pa.array([], pa.int32())])
    np.testing.assert_array_equal(list_offsets(arr), [0])


@pytest.mark.parametrize("arrow_type", [pa.int8(), pa.uint16(), pa.int32(), pa.int64(),
                                        pa.float16(), pa.float32(), pa.float64(), pa.bool_()])
@pytest.mark.parametrize("start,stop", [(0, 11), (3, 10), (9, 9), (1, 2)])
def test_as_numpy_matches_to_numpy(arrow_type, start, stop):
    rng = np.random.default_rng(3)
    raw = rng.integers(0, 2 if arrow_type == pa.bool_() else 100, 11)
    arr = pa.array(raw.astype(arrow_type.to_pandas_dtype())).slice(start, stop - start)
    got = as_numpy(arr)
    want = arr.to_numpy(zero_copy_only=False)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("chunks", [[], [[1, 2]], [[1, 2], [], [3]]])
def test_as_numpy_joins_chunks(chunks):
    arr = pa.chunked_array([pa.array(c, pa.int64()) for c in chunks], pa.int64())
    got = as_numpy(arr)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, [x for c in chunks for x in c])


def test_masks_read_as_bools():
    arr = pa.array([1, None, 3, None, None, 6, 7, 8, None]).slice(1)
    np.testing.assert_array_equal(as_numpy(arr.is_null()), np.asarray(arr.is_null()))
    np.testing.assert_array_equal(as_numpy(arr.is_valid()), np.asarray(arr.is_valid()))


@pytest.mark.parametrize("arrow_type", [pa.int64(), pa.int32()])
def test_positions_take_like_pa_array(arrow_type):
    arr = pa.array(["a", "b", "c", "d"])
    index = np.array([3, 0, 0, 2])
    got = positions(index, arrow_type)
    assert got.type == arrow_type
    assert arr.take(got).equals(arr.take(pa.array(index, arrow_type)))


@pytest.mark.parametrize("arr", [pa.array([1, 2], pa.date32()), pa.array(["a", "b"]),
                                 pa.array([[1], [2]]), pa.array([1, 2], pa.timestamp("ms"))])
def test_as_numpy_refuses_what_its_buffers_do_not_hold(arr):
    with pytest.raises(TypeError, match="not a number or bool"):
        as_numpy(arr)


def test_as_numpy_views_are_read_only():
    arr = pa.array(np.arange(6, dtype=np.int32)).slice(2)
    got = as_numpy(arr)
    assert not got.flags.writeable
    with pytest.raises(ValueError):
        got[0] = 9
    assert not as_numpy(pa.array([True, False])).flags.writeable


@pytest.mark.parametrize("index,arrow_type,error", [
    (np.array([0.7, 1.9]), pa.int64(), TypeError),
    (np.zeros((2, 2), np.int64), pa.int64(), TypeError),
    (np.array([-1]), pa.uint32(), OverflowError),
    (np.array([2**31 + 5]), pa.int32(), OverflowError),
])
def test_positions_refuse_what_they_cannot_hold(index, arrow_type, error):
    with pytest.raises(error):
        positions(index, arrow_type)


def test_positions_of_nothing():
    assert positions(np.zeros(0, np.float64)).equals(pa.array([], pa.int64()))


@pytest.mark.parametrize("arrow_type", [pa.int8(), pa.uint64(), pa.float16(), pa.float64(),
                                        pa.bool_()])
def test_zero_fills_nulls_like_a_scalar(arrow_type):
    arr = pa.array([1, None, 0, None], pa.int8()).cast(arrow_type)
    want = arr.fill_null(pa.scalar(0, pa.int8()).cast(arrow_type))
    assert arr.fill_null(zero(arrow_type)).equals(want)
    with pytest.raises(TypeError):
        zero(pa.string())


def test_as_numpy_refuses_nulls():
    with pytest.raises(ValueError, match="null"):
        as_numpy(pa.array([5, None, 9]))
    with pytest.raises(ValueError, match="null"):
        as_numpy(pa.chunked_array([[1], [None]]))


def test_views_cannot_be_made_writable_again():
    arr = pa.array([1, 2, 3])
    large = pa.array([[1], [2, 3]], pa.large_list(pa.int64()))   # int64 offsets: a view
    for view in (as_numpy(arr), list_offsets(large)):
        with pytest.raises(ValueError):
            view.flags.writeable = True
    assert arr.to_pylist() == [1, 2, 3]
