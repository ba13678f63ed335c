"""The Arrow C Device data interface: ``LoDTensor.__arrow_c_device_array__`` and
``lodarrow._interop._cdevice.import_device_array``.

Expected Arrow arrays are built here directly with pyarrow (``LargeListArray.from_arrays``,
``FixedSizeListArray.from_arrays``), independently of ``to_arrow``.
"""

import ctypes
import gc
import sys
import weakref

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

import lodarrow as la
from lodarrow import LoDError
from lodarrow._interop._cdevice import (
    ARROW_DEVICE_CPU,
    ARROW_DEVICE_CUDA,
    ArrowArray,
    ArrowDeviceArray,
    device_type_of,
    export_device_array,
    import_device_array,
)
from strategies import lod_tensors

from conftest import ALL_DTYPES, NUMERIC_DTYPES, cuda_only, on_backend, to_host

FEATURE_SHAPES = [(), (3,), (2, 3)]


# ---------------------------------------------------------------- helpers
class Producer:
    """A minimal object of the device PyCapsule interface (pyarrow's ``ArrayWrapper``)."""

    def __init__(self, arr):
        self.arr = arr

    def __arrow_c_device_array__(self, requested_schema=None, **kwargs):
        return self.arr.__arrow_c_device_array__(requested_schema, **kwargs)


class Patched:
    """Exports ``source`` and lets ``patch(device_array_struct, keep)`` edit the struct."""

    def __init__(self, source, patch):
        self.source, self.patch, self.keep = source, patch, []

    def __arrow_c_device_array__(self, requested_schema=None, **kwargs):
        schema, capsule = self.source.__arrow_c_device_array__()
        self.patch(_device_struct(capsule), self.keep)
        return schema, capsule


def _device_struct(capsule):
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return ArrowDeviceArray.from_address(get(capsule, b"arrow_device_array"))


def expected_arrow(t):
    """The Arrow array (docs/data-model.md#arrow-mapping) of a host tensor, built with
    pyarrow's own constructors."""
    data = np.ascontiguousarray(t.data)
    typ = pa.from_numpy_dtype(data.dtype)
    arr = pa.array(data.reshape(-1), type=typ)
    shape = data.shape[1:]
    for i in range(len(shape) - 1, -1, -1):
        if shape[i]:
            arr = pa.FixedSizeListArray.from_arrays(arr, shape[i])
        else:  # from_arrays refuses size 0
            arr = pa.Array.from_buffers(pa.list_(arr.type, 0), int(np.prod(shape[:i]) * len(data)),
                                        [None], children=[arr])
    for off in reversed(t.offsets):
        arr = pa.LargeListArray.from_arrays(pa.array(off, type=pa.int64()), arr)
    return arr


def export_to_pyarrow(t, requested=None):
    schema = None if requested is None else requested.__arrow_c_schema__()
    return pa.Array._import_from_c_device_capsule(*t.__arrow_c_device_array__(schema))


def make_tensor(dtype, feature_shape, depth, n_top=4):
    """A tensor with empty sequences at every level (and data of every sign)."""
    rng = np.random.default_rng(depth * 7 + len(feature_shape))
    lengths, count = [], n_top
    for _ in range(depth):
        lens = rng.integers(0, 4, size=count)
        lens[0] = 0  # an empty sequence at every level
        lengths.append(lens.tolist())
        count = int(lens.sum())
    raw = rng.integers(-50, 50, size=(count, *feature_shape))
    data = (raw > 0) if dtype == "bool" else raw.astype(dtype)
    if np.dtype(dtype).kind == "u":
        data = np.abs(raw).astype(dtype)
    return la.LoDTensor(data, lengths=lengths)


def leaf_and_offsets(arr, depth, n_features):
    """The pyarrow offset buffers of each level and the values array, walking down."""
    offsets = []
    for _ in range(depth):
        offsets.append(arr.buffers()[1])
        arr = arr.values
    for _ in range(n_features):
        arr = arr.values
    return offsets, arr


# ---------------------------------------------------------------- export to pyarrow
def test_spec_example_y():
    y = la.LoDTensor(np.arange(14.0).reshape(7, 2), [[0, 2, 3], [0, 2, 4, 7]])
    arr = export_to_pyarrow(y)
    assert arr.type == pa.large_list(pa.large_list(pa.list_(pa.float64(), 2)))
    assert arr.to_pylist() == [[[[0.0, 1.0], [2.0, 3.0]], [[4.0, 5.0], [6.0, 7.0]]],
                               [[[8.0, 9.0], [10.0, 11.0], [12.0, 13.0]]]]


@pytest.mark.parametrize("depth", [0, 1, 2, 3])
@pytest.mark.parametrize("feature_shape", FEATURE_SHAPES)
@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_export_matches_pyarrow_construction(dtype, feature_shape, depth):
    t = make_tensor(dtype, feature_shape, depth)
    arr = export_to_pyarrow(t)
    arr.validate(full=True)
    expected = expected_arrow(t)
    assert arr.type == expected.type
    assert arr.equals(expected)
    assert arr.null_count == 0


@pytest.mark.parametrize("feature_shape", FEATURE_SHAPES)
@pytest.mark.parametrize("dtype", NUMERIC_DTYPES)
def test_export_is_zero_copy(dtype, feature_shape):
    t = make_tensor(dtype, feature_shape, 2)
    arr = export_to_pyarrow(t)
    offsets, leaf = leaf_and_offsets(arr, 2, len(feature_shape))
    assert [b.address for b in offsets] == [off.ctypes.data for off in t.offsets]
    assert leaf.buffers()[1].address == t.data.ctypes.data
    assert leaf.buffers()[0] is None  # no validity bitmap


def test_bool_is_bit_packed_lsb_first():
    t = la.LoDTensor(np.array([1, 0, 0, 1, 1, 1, 0, 1, 1, 0], dtype=bool), lengths=[[10]])
    leaf = export_to_pyarrow(t).values
    assert bytes(leaf.buffers()[1])[:2] == bytes([0b10111001, 0b01])
    assert leaf.to_pylist() == t.data.tolist()


@pytest.mark.parametrize("top", [[0], [0, 0, 0]])
@pytest.mark.parametrize("depth", [1, 2, 3])
def test_zero_sequences_and_empty_sequences(depth, top):
    t = la.LoDTensor(np.zeros((0, 3), dtype=np.float32), [top] + [[0]] * (depth - 1))
    arr = export_to_pyarrow(t)
    assert arr.equals(expected_arrow(t))
    assert len(arr) == len(t) == len(top) - 1
    assert import_device_array(arr).equals(t)


def test_plain_tensor_with_no_rows():
    t = la.LoDTensor(np.zeros((0, 2, 3), dtype=np.int16))
    arr = export_to_pyarrow(t)
    assert arr.type == pa.list_(pa.list_(pa.int16(), 3), 2) and len(arr) == 0


def test_zero_width_feature_dimension():
    t = la.LoDTensor(np.zeros((3, 0), dtype=np.float32), lengths=[[1, 2]])
    arr = export_to_pyarrow(t)
    assert arr.equals(expected_arrow(t))
    assert arr.to_pylist() == [[[]], [[], []]]


@given(lod_tensors())
def test_export_matches_pyarrow_construction_hypothesis(t):
    arr = export_to_pyarrow(t)
    arr.validate(full=True)
    assert arr.equals(expected_arrow(t))


def test_pyarrow_array_uses_the_device_interface():
    t = make_tensor("float32", (3,), 2)
    assert pa.array(t).equals(expected_arrow(t))
    cast = pa.array(t, type=pa.large_list(pa.large_list(pa.list_(pa.float64(), 3))))
    assert cast.to_pylist() == expected_arrow(t).to_pylist()


def _read_only(a):
    out = a.copy()
    out.flags.writeable = False
    return out


@pytest.mark.parametrize("make", [lambda a: a[::2], np.asfortranarray, _read_only],
                         ids=["strided", "fortran", "read-only"])
def test_non_contiguous_fortran_and_read_only_data(make):
    base = np.arange(40, dtype=np.float64).reshape(10, 4)
    data = make(base)
    lengths = [[1, data.shape[0] - 1]]
    arr = export_to_pyarrow(la.LoDTensor(data, lengths=lengths))
    assert arr.equals(expected_arrow(la.LoDTensor(np.ascontiguousarray(data), lengths=lengths)))
    assert arr.to_pylist() == [[r.tolist() for r in data[:1]], [r.tolist() for r in data[1:]]]
    np.testing.assert_array_equal(base, np.arange(40.0).reshape(10, 4))  # inputs untouched


def test_sliced_tensor_view_exports_its_rows():
    t = make_tensor("int32", (), 2, n_top=6)[2:5]
    arr = export_to_pyarrow(t)
    assert arr.equals(expected_arrow(t))
    assert arr.to_pylist() == t.to_list()


# ---------------------------------------------------------------- requested_schema, kwargs
def test_requested_schema_equal_type_is_zero_copy():
    t = make_tensor("float64", (), 1)
    arr = export_to_pyarrow(t, pa.large_list(pa.float64()))
    assert arr.values.buffers()[1].address == t.data.ctypes.data


def test_requested_schema_with_other_field_names_keeps_the_buffers():
    t = make_tensor("int64", (), 1)
    requested = pa.large_list(pa.field("element", pa.int64(), nullable=False))
    arr = export_to_pyarrow(t, requested)
    assert arr.type == requested
    assert arr.values.buffers()[1].address == t.data.ctypes.data


@pytest.mark.parametrize("requested", [
    pa.large_list(pa.float32()),
    pa.list_(pa.float64()),
    pa.list_(pa.float32()),
    pa.large_list(pa.int64()),  # integral values: a safe cast
])
def test_requested_schema_is_cast_on_the_host(requested):
    t = make_tensor("float64", (), 1)
    arr = export_to_pyarrow(t, requested)
    assert arr.type == requested
    assert arr.to_pylist() == t.to_list()


def test_requested_schema_that_cannot_be_reached():
    t = make_tensor("float64", (), 1)
    with pytest.raises(ValueError, match="cannot cast .* to the requested"):
        t.__arrow_c_device_array__(pa.int64().__arrow_c_schema__())
    halves = la.LoDTensor(np.array([0.5, 1.0]), lengths=[[2]])
    with pytest.raises(ValueError, match="cannot cast .*: Float value 0.5.* was truncated"):
        halves.__arrow_c_device_array__(pa.large_list(pa.int64()).__arrow_c_schema__())


def test_requested_schema_must_be_a_schema_capsule():
    t = make_tensor("float64", (), 1)
    with pytest.raises(TypeError, match="requested_schema must be a PyCapsule named "
                                        "'arrow_schema'"):
        t.__arrow_c_device_array__("large_list<double>")


def test_keywords_none_accepted_others_not_implemented():
    t = make_tensor("int8", (), 1)
    arr = pa.Array._import_from_c_device_capsule(*t.__arrow_c_device_array__(stream=None))
    assert arr.equals(expected_arrow(t))
    with pytest.raises(NotImplementedError, match=r"unsupported keyword argument\(s\) "
                                                  r"\['stream'\]"):
        t.__arrow_c_device_array__(stream=3)


def test_export_errors():
    with pytest.raises(ValueError, match="the LoDTensor is empty"):
        la.LoDTensor().__arrow_c_device_array__()
    stale = la.LoDTensor(np.arange(5.0), lengths=[[2, 3]])
    stale.set(np.arange(4.0))
    with pytest.raises(LoDError, match="ends at 5 but its data has 4 rows"):
        stale.__arrow_c_device_array__()
    with pytest.raises(TypeError, match="t must be a LoDTensor, got ndarray"):
        export_device_array(np.arange(3))


# ---------------------------------------------------------------- release and lifetime
def test_unconsumed_capsules_release_the_buffers():
    data = np.arange(10.0)
    t = la.LoDTensor(data, lengths=[[4, 6]])
    data_ref, off_ref = weakref.ref(data), weakref.ref(t.offsets[0])
    capsules = t.__arrow_c_device_array__()
    del t, data
    gc.collect()
    assert data_ref() is not None and off_ref() is not None  # the capsules own them
    del capsules
    gc.collect()
    assert data_ref() is None and off_ref() is None


def test_consumer_release_frees_the_buffers():
    data = np.arange(6, dtype=np.int32).reshape(3, 2)
    ref = weakref.ref(data)
    arr = export_to_pyarrow(la.LoDTensor(data, lengths=[[3]]))
    del data
    gc.collect()
    assert ref() is not None and arr.to_pylist() == [[[0, 1], [2, 3], [4, 5]]]
    del arr
    gc.collect()
    assert ref() is None


def test_capsules_dropped_while_an_exception_propagates():
    data = np.arange(4.0)
    ref = weakref.ref(data)
    t = la.LoDTensor(data, lengths=[[4]])
    del data

    def drop_during_unwind(tensor):
        return (tensor.__arrow_c_device_array__(), 1 / 0)

    with pytest.raises(ZeroDivisionError):  # not replaced by a SystemError
        drop_during_unwind(t)
    del t
    gc.collect()
    assert ref() is None


def test_a_child_moved_out_outlives_the_root():
    data = np.arange(6.0)
    ref = weakref.ref(data)
    t = la.LoDTensor(data, lengths=[[1, 1], [2, 4]])
    schema, capsule = t.__arrow_c_device_array__()
    del t, data
    original = _device_struct(capsule).array.children[0].contents
    child = ArrowArray()  # move the child out (C data interface "moving an array")
    ctypes.memmove(ctypes.addressof(child), ctypes.addressof(original), ctypes.sizeof(child))
    original.release = type(original.release)()
    del original, schema, capsule
    gc.collect()  # the unconsumed root is released; the moved child must still own its data
    assert ref() is not None
    arr = pa.Array._import_from_c(ctypes.addressof(child), pa.large_list(pa.float64()))
    assert arr.to_pylist() == [[0.0, 1.0], [2.0, 3.0, 4.0, 5.0]]
    del arr
    gc.collect()
    assert ref() is None


def test_a_capsule_is_consumed_once():
    t = make_tensor("float32", (), 1)
    capsules = t.__arrow_c_device_array__()
    assert import_device_array(capsules).equals(t)
    with pytest.raises(ValueError, match="already released"):
        import_device_array(capsules)


def test_a_failed_import_raises_nothing_unraisable(monkeypatch):
    # The second import fails inside _Imported.__init__; its __del__ must then be silent.
    seen = []
    monkeypatch.setattr(sys, "unraisablehook", seen.append)
    capsules = make_tensor("int16", (2,), 2).__arrow_c_device_array__()
    import_device_array(capsules)
    with pytest.raises(ValueError, match="the ArrowDeviceArray was already released"):
        import_device_array(capsules)
    gc.collect()
    assert seen == []


# ---------------------------------------------------------------- import
def test_import_doc_example():
    arr = pa.array([[[1.0, 2.0], [3.0]], [[4.0]]], pa.large_list(pa.large_list(pa.float64())))
    t = import_device_array(Producer(arr))
    assert t.lod() == [[0, 2, 3], [0, 2, 3, 4]] and t.data.tolist() == [1.0, 2.0, 3.0, 4.0]


@pytest.mark.parametrize("depth", [0, 1, 2, 3])
@pytest.mark.parametrize("feature_shape", FEATURE_SHAPES)
@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_import_pyarrow_arrays(dtype, feature_shape, depth):
    t = make_tensor(dtype, feature_shape, depth)
    got = import_device_array(Producer(expected_arrow(t)))
    assert got.equals(t) and got.dtype == t.dtype and got.lod() == t.lod()
    assert isinstance(got.data, np.ndarray) and got.place == la.CPUPlace()


@pytest.mark.parametrize("dtype", NUMERIC_DTYPES)
def test_import_is_zero_copy_and_read_only(dtype):
    t = make_tensor(dtype, (3,), 1)
    arr = expected_arrow(t)
    got = import_device_array(Producer(arr))
    assert got.data.ctypes.data == arr.values.values.buffers()[1].address
    assert got.offsets[0].ctypes.data == arr.buffers()[1].address
    assert not got.data.flags.writeable and not got.offsets[0].flags.writeable


@given(lod_tensors())
def test_round_trip_through_the_device_interface_hypothesis(t):
    got = import_device_array(t)
    assert got.equals(t) and got.lod() == t.lod() and got.dtype == t.dtype


@given(lod_tensors(min_levels=1), st.data())
def test_import_sliced_and_int32_arrays_hypothesis(t, data):
    n = len(t)
    start = data.draw(st.integers(0, n))
    stop = data.draw(st.integers(start, n))
    arr = expected_arrow(t)
    if data.draw(st.booleans()) and int(t.offsets[0][-1]) < 2**31:
        arr = pa.ListArray.from_arrays(pa.array(t.offsets[0], pa.int32()), arr.values)
    got = import_device_array(Producer(arr.slice(start, stop - start)))
    assert got.equals(t[start:stop]) and got.dtype == t.dtype


@given(lod_tensors(min_levels=1), st.data())
def test_import_nulls_empty_hypothesis(t, data):
    mask = data.draw(st.lists(st.booleans(), min_size=len(t), max_size=len(t)))
    arr = expected_arrow(t)
    masked = pa.LargeListArray.from_arrays(arr.offsets, arr.values, mask=pa.array(mask, pa.bool_()))
    got = import_device_array(Producer(masked), nulls="empty")
    expected = [[] if null else seq for seq, null in zip(t.to_list(), mask)]
    assert got.to_list() == expected and got.dtype == t.dtype
    assert got.feature_shape == t.feature_shape and got.lod_level == t.lod_level
    if any(mask):
        with pytest.raises(ValueError, match="null list at level 0, position"):
            import_device_array(Producer(masked))


def test_import_keeps_the_producer_alive_until_the_tensor_dies():
    values = np.arange(12.0)
    ref = weakref.ref(values)
    arr = pa.LargeListArray.from_arrays(pa.array([0, 5, 12], pa.int64()), pa.array(values))
    del values
    t = import_device_array(Producer(arr))
    del arr
    gc.collect()
    assert ref() is not None and t.to_list() == [[0.0, 1.0, 2.0, 3.0, 4.0],
                                                 [5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0]]
    del t
    gc.collect()
    assert ref() is None


@pytest.mark.parametrize("start, stop", [(0, 5), (1, 4), (2, 2), (4, 5), (0, 0)])
def test_import_sliced_arrays(start, stop):
    arr = pa.array([[[1], [2, 3]], [], [[4, 5, 6]], [[], [7]], [[8, 9]]],
                   pa.large_list(pa.large_list(pa.int64())))
    got = import_device_array(Producer(arr.slice(start, stop - start)))
    assert got.to_list() == arr.to_pylist()[start:stop]
    assert got.lod()[0][0] == 0 and got.data.shape[0] == (got.lod()[-1][-1])


def test_import_offsets_that_do_not_start_at_zero():
    values = pa.array(np.arange(10, dtype=np.int16))
    inner = pa.ListArray.from_arrays(pa.array([3, 5, 5, 9], pa.int32()), values)
    outer = pa.LargeListArray.from_arrays(pa.array([1, 2, 3], pa.int64()), inner)
    got = import_device_array(Producer(outer))
    assert got.lod() == [[0, 1, 2], [0, 0, 4]]
    assert got.data.tolist() == [5, 6, 7, 8]
    assert got.to_list() == outer.to_pylist()


def test_import_int32_list_offsets_are_widened():
    arr = pa.array([[1.5, 2.5], [], [3.5]], pa.list_(pa.float32()))
    got = import_device_array(Producer(arr))
    assert got.offsets[0].dtype == np.int64 and got.lod() == [[0, 2, 2, 3]]


def test_import_fixed_size_list_above_a_variable_level_is_a_level():
    inner = pa.array([[1], [2, 3], [], [4], [5, 6], [7]], pa.list_(pa.int32()))
    arr = pa.FixedSizeListArray.from_arrays(inner, 2)
    got = import_device_array(Producer(arr))
    assert got.lod() == [[0, 2, 4, 6], [0, 1, 3, 3, 4, 6, 7]]
    assert got.data.tolist() == [1, 2, 3, 4, 5, 6, 7]


def test_import_fixed_size_lists_below_are_feature_dimensions():
    values = pa.array(np.arange(24, dtype=np.float32))
    rows = pa.FixedSizeListArray.from_arrays(pa.FixedSizeListArray.from_arrays(values, 4), 3)
    arr = pa.LargeListArray.from_arrays(pa.array([0, 1, 2], pa.int64()), rows)
    got = import_device_array(Producer(arr.slice(1)))
    assert got.feature_shape == (3, 4) and got.lod() == [[0, 1]]
    np.testing.assert_array_equal(got.data, np.arange(12, 24, dtype=np.float32).reshape(1, 3, 4))
    plain = import_device_array(Producer(rows.slice(1, 1)))
    assert plain.lod_level == 0 and plain.data.shape == (1, 3, 4)


def test_import_list_views_contiguous_and_gathered():
    values = pa.array(np.arange(6, dtype=np.int64))
    contiguous = pa.ListViewArray.from_arrays(pa.array([0, 2, 2], pa.int32()),
                                              pa.array([2, 0, 4], pa.int32()), values)
    got = import_device_array(Producer(contiguous))
    assert got.lod() == [[0, 2, 2, 6]] and got.data.tolist() == [0, 1, 2, 3, 4, 5]
    shuffled = pa.LargeListViewArray.from_arrays(pa.array([3, 0, 1], pa.int64()),
                                                 pa.array([2, 1, 2], pa.int64()), values)
    got = import_device_array(Producer(shuffled))
    assert got.lod() == [[0, 2, 3, 5]] and got.data.tolist() == [3, 4, 0, 1, 2]


def test_import_nested_list_views_gather_the_rows_below():
    rows = pa.FixedSizeListArray.from_arrays(pa.array(np.arange(8, dtype=np.int8)), 2)
    inner = pa.LargeListViewArray.from_arrays(pa.array([2, 0], pa.int64()),
                                              pa.array([2, 2], pa.int64()), rows)
    got = import_device_array(Producer(inner))
    assert got.to_list() == inner.to_pylist() == [[[4, 5], [6, 7]], [[0, 1], [2, 3]]]


def test_import_null_list_raises_with_its_position():
    arr = pa.array([[1], [2, 3], None, [4]], pa.large_list(pa.int64()))
    with pytest.raises(ValueError, match=r"null list at level 0, position 2 \(top-level sequence "
                                         r"2\)"):
        import_device_array(Producer(arr))
    nested = pa.array([[[1]], [[2], None]], pa.large_list(pa.large_list(pa.int64())))
    with pytest.raises(ValueError, match=r"null list at level 1, position 2 \(top-level sequence "
                                         r"1\)"):
        import_device_array(Producer(nested))


def test_import_nulls_empty_turns_null_lists_into_empty_sequences():
    # The null list still spans values 1..3: reading it as empty needs a gather.
    arr = pa.LargeListArray.from_arrays(pa.array([0, 1, 3, 4], pa.int64()),
                                        pa.array([10, 20, 30, 40], pa.int32()),
                                        mask=pa.array([False, True, False]))
    got = import_device_array(Producer(arr), nulls="empty")
    assert got.lod() == [[0, 1, 1, 2]] and got.data.tolist() == [10, 40]
    assert import_device_array(Producer(arr.slice(1)), nulls="empty").lod() == [[0, 0, 1]]


def test_import_null_values_always_raise():
    arr = pa.array([[1.0], [2.0, None]], pa.large_list(pa.float64()))
    for nulls in ("error", "empty"):
        with pytest.raises(ValueError, match=r"null value at row 2 \(element 2\) \(top-level "
                                             r"sequence 1\)"):
            import_device_array(Producer(arr), nulls=nulls)
    plain = pa.array([1, None, 3], pa.int8())
    with pytest.raises(ValueError, match=r"null value at row 1 \(element 1\); a LoDTensor cannot "
                                         r"hold null"):
        import_device_array(Producer(plain))
    # A null outside the slice is not read.
    assert import_device_array(Producer(plain.slice(2))).data.tolist() == [3]


def test_import_null_fixed_size_row_raises():
    rows = pa.FixedSizeListArray.from_arrays(pa.array([1, 2, 3, 4], pa.int32()), 2,
                                             mask=pa.array([False, True]))
    arr = pa.LargeListArray.from_arrays(pa.array([0, 2], pa.int64()), rows)
    with pytest.raises(ValueError, match=r"null fixed-size row at row 1 "
                                         r"\(top-level sequence 0\)"):
        import_device_array(Producer(arr), nulls="empty")


def test_import_dictionary_values_are_decoded():
    dictionary = pa.DictionaryArray.from_arrays(pa.array([2, 0, 1, 2], pa.int8()),
                                                pa.array([1.5, 2.5, 3.5]))
    arr = pa.LargeListArray.from_arrays(pa.array([0, 3, 4], pa.int64()), dictionary)
    got = import_device_array(Producer(arr))
    assert got.lod() == [[0, 3, 4]] and got.data.tolist() == [3.5, 1.5, 2.5, 3.5]


@pytest.mark.parametrize("arr, name", [
    (pa.array([["a"], ["b"]], pa.large_list(pa.string())), "string"),
    (pa.array([[1], [2]], pa.large_list(pa.uint32())), "uint32"),
    (pa.array([{"x": 1}]), "struct"),
])
def test_import_unsupported_value_types(arr, name):
    with pytest.raises(TypeError, match=rf"values of Arrow type {name}.* are not supported"):
        import_device_array(Producer(arr))


def test_import_decreasing_offsets_are_a_lod_error_before_any_kernel():
    # As from_arrow: the conversion is O(levels); the O(n) scan runs when an operator starts.
    arr = pa.Array.from_buffers(pa.large_list(pa.int64()), 2,
                                [None, pa.py_buffer(np.array([0, 3, 1], np.int64))],
                                children=[pa.array(np.arange(3))])
    t = import_device_array(Producer(arr))
    assert not t.has_valid_recursive_sequence_lengths()
    with pytest.raises(LoDError, match=r"input.lod\[0\] must be non-decreasing; first "
                                       r"violation at position 2 \(3 > 1\)"):
        la.sequence_pool(t, "sum")


def test_import_offsets_beyond_the_child_array():
    arr = pa.array([[1, 2], [3, 4, 5]], pa.large_list(pa.int64()))

    def shrink_child(dev, keep):
        dev.array.children[0].contents.length = 4

    with pytest.raises(ValueError, match=r"an offset of level 0 reaches 5 but the array below has "
                                         r"only 4 entries"):
        import_device_array(Patched(arr, shrink_child))


def test_import_unsupported_device_type():
    arr = pa.array([[1.0]], pa.large_list(pa.float64()))

    def to_metal(dev, keep):
        dev.device_type = 8

    with pytest.raises(ValueError, match=r"device type 8 \(METAL\) is not supported"):
        import_device_array(Patched(arr, to_metal))


def test_import_argument_errors():
    with pytest.raises(TypeError, match="expected an object with __arrow_c_device_array__"):
        import_device_array([1, 2, 3])
    with pytest.raises(ValueError, match="nulls must be 'error' or 'empty', got 'drop'"):
        import_device_array(make_tensor("int8", (), 1), nulls="drop")
    schema, array = make_tensor("int8", (), 1).__arrow_c_device_array__()
    with pytest.raises(TypeError, match="the device array capsule must be a PyCapsule named "
                                        "'arrow_device_array'"):
        import_device_array((schema, schema))


def test_device_type_of():
    t = make_tensor("float32", (), 1)
    assert device_type_of(t) == ARROW_DEVICE_CPU
    assert device_type_of(expected_arrow(t)) == ARROW_DEVICE_CPU
    assert device_type_of(Producer(expected_arrow(t))) == ARROW_DEVICE_CPU
    assert device_type_of(object()) is None


# ---------------------------------------------------------------- both backends (CUDA skips here)
@pytest.mark.parametrize("depth", [0, 1, 3])
@pytest.mark.parametrize("feature_shape", [(), (2, 3)])
@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_round_trip_on_backend(backend, dtype, feature_shape, depth):
    host = make_tensor(dtype, feature_shape, depth)
    t = on_backend(host, backend)
    schema, capsule = t.__arrow_c_device_array__()
    struct = _device_struct(capsule)
    want_type = ARROW_DEVICE_CUDA if backend == "cuda" else ARROW_DEVICE_CPU
    assert struct.device_type == want_type and struct.sync_event is None
    assert struct.device_id == (t.data.device.id if backend == "cuda" else -1)
    got = import_device_array((schema, capsule))
    assert type(got.data) is type(t.data) and got.place == t.place
    assert to_host(got, backend).equals(host)
    if dtype != "bool":  # the values are the tensor's own memory
        pointer = (lambda a: a.data.ptr) if backend == "cuda" else (lambda a: a.ctypes.data)
        assert pointer(got.data) == pointer(t.data)


def test_sliced_struct_on_backend(backend):
    host = make_tensor("float32", (2,), 2, n_top=6)
    t = on_backend(host, backend)

    def slice_root(dev, keep):
        dev.array.offset = 1
        dev.array.length = 4

    got = import_device_array(Patched(t, slice_root))
    assert to_host(got, backend).equals(host[1:5])


def test_null_bitmap_on_backend(backend):
    host = la.LoDTensor(np.arange(6, dtype=np.int32), lengths=[[2, 0, 3, 1]])
    t = on_backend(host, backend)
    bitmap = on_backend(np.array([0b1011], dtype=np.uint8), backend)  # sequence 2 is null

    def add_nulls(dev, keep):
        keep.append(bitmap)
        dev.array.buffers[0] = bitmap.data.ptr if backend == "cuda" else bitmap.ctypes.data
        dev.array.null_count = 1

    with pytest.raises(ValueError, match=r"null list at level 0, position 2 \(top-level sequence "
                                         r"2\)"):
        import_device_array(Patched(t, add_nulls))
    got = import_device_array(Patched(t, add_nulls), nulls="empty")
    assert got.lod() == [[0, 2, 2, 2, 3]] and to_host(got, backend).data.tolist() == [0, 1, 5]


@cuda_only
def test_gpu_requested_schema_must_match(backend):
    t = make_tensor("float32", (), 1).cuda()
    same = t.__arrow_c_device_array__(pa.large_list(pa.float32()).__arrow_c_schema__())
    assert import_device_array(same).equals(t)
    with pytest.raises(ValueError, match="a GPU LoDTensor is exported only as"):
        t.__arrow_c_device_array__(pa.large_list(pa.float64()).__arrow_c_schema__())
    assert device_type_of(t) == ARROW_DEVICE_CUDA


@cuda_only
def test_gpu_import_from_cupy_buffers(backend):
    import cupy

    values = cupy.arange(10, dtype=cupy.float64) * 1.5
    t = la.LoDTensor(values, lengths=[[3, 0, 7]])
    got = import_device_array(Producer(t))
    assert got.data.data.ptr == values.data.ptr and got.data.device.id == values.device.id
    assert isinstance(got.offsets[0], np.ndarray) and got.lod() == [[0, 3, 3, 10]]
    assert cupy.array_equal(got.data, values)
    flags = la.LoDTensor(cupy.asarray(np.arange(21) % 3 == 0), lengths=[[21]])
    assert import_device_array(flags).equals(flags)


# ---------------------------------------------------------------- malformed or unusual input
def _list_view(offsets, sizes, values):
    return pa.Array.from_buffers(pa.large_list_view(pa.int64()), len(offsets),
                                 [None, pa.py_buffer(np.array(offsets, np.int64)),
                                  pa.py_buffer(np.array(sizes, np.int64))],
                                 children=[pa.array(np.arange(values))])


def test_import_list_view_errors():
    with pytest.raises(ValueError, match="sequence 0 at level 0 has start 0 and length -1"):
        import_device_array(Producer(_list_view([0], [-1], 3)))
    with pytest.raises(ValueError, match=r"a sequence of level 0 reaches 4 but the array below "
                                         r"has only 3 entries"):
        import_device_array(Producer(_list_view([0, 2], [1, 2], 3)))


def test_import_offsets_that_end_before_they_start():
    first_after_last = np.array([2, 5, 1], dtype=np.int64)

    def swap_offsets(dev, keep):
        keep.append(first_after_last)
        dev.array.buffers[1] = first_after_last.ctypes.data

    base = la.LoDTensor(np.arange(6), lengths=[[3, 3]])
    with pytest.raises(ValueError, match=r"invalid Arrow array: offsets at level 0 run from 2 "
                                         r"to 1"):
        import_device_array(Patched(base, swap_offsets))


def test_import_dictionary_errors():
    def wrap(indices, words, **kw):
        encoded = pa.DictionaryArray.from_arrays(pa.array(indices, pa.int8()), words, **kw)
        return Producer(pa.LargeListArray.from_arrays(pa.array([0, 2], pa.int64()), encoded))

    with pytest.raises(ValueError, match=r"dictionary index 5 at row 1 \(element 1\) \(top-level "
                                         r"sequence 0\) is out of range for a dictionary of 2 "
                                         r"values"):
        import_device_array(wrap([0, 5], pa.array([1.0, 2.0]), safe=False))
    with pytest.raises(ValueError, match=r"null value at row 1 \(element 1\) \(top-level sequence "
                                         r"0\)"):
        import_device_array(wrap([0, 1], pa.array([1.0, None])))
    with pytest.raises(ValueError, match=r"null value at row 1 \(element 1\) \(top-level sequence "
                                         r"0\)"):
        import_device_array(wrap([0, None], pa.array([1.0, 2.0])))
    assert import_device_array(wrap([0, 0], pa.array([1.0, None]))).data.tolist() == [1.0, 1.0]
    with pytest.raises(TypeError, match=r"values of Arrow type string.* are not supported"):
        import_device_array(wrap([0, 1], pa.array(["a", "b"])))


def test_import_structural_errors():
    t = la.LoDTensor(np.arange(6.0).reshape(3, 2), lengths=[[1, 2]])

    def drop_child(dev, keep):
        dev.array.n_children = 0

    with pytest.raises(ValueError, match="the list node at level 0 has 0 children, expected 1"):
        import_device_array(Patched(t, drop_child))

    def null_values_buffer(dev, keep):
        dev.array.children[0].contents.children[0].contents.buffers[1] = None

    with pytest.raises(ValueError, match="the values buffer is NULL but must hold 6 items"):
        import_device_array(Patched(t, null_values_buffer))

    def short_values(dev, keep):
        dev.array.children[0].contents.children[0].contents.length = 5

    with pytest.raises(ValueError, match="a fixed-size row of level 1 reaches 6 but the "
                                             "array below "
                                         "has only 5 entries"):
        import_device_array(Patched(t, short_values))

    def nulls_without_bitmap(dev, keep):
        dev.array.null_count = 1

    with pytest.raises(ValueError, match=r"reports 1 nulls but has no validity buffer"):
        import_device_array(Patched(t, nulls_without_bitmap))


def test_import_fixed_size_level_beyond_its_child():
    inner = pa.array([[1], [2], [3], [4]], pa.list_(pa.int8()))
    arr = pa.FixedSizeListArray.from_arrays(inner, 2)
    assert import_device_array(Producer(arr.slice(1))).lod() == [[0, 2], [0, 1, 2]]

    def shrink(dev, keep):
        dev.array.children[0].contents.length = 3

    with pytest.raises(ValueError, match="a fixed-size list of level 0 reaches 4 but the array "
                                         "below has only 3 entries"):
        import_device_array(Patched(arr, shrink))


def test_import_consumed_schema_and_bad_producer():
    schema, capsule = make_tensor("int8", (), 1).__arrow_c_device_array__()
    pa.DataType._import_from_c_capsule(schema)  # moves the schema out
    with pytest.raises(ValueError, match="the ArrowSchema was already released"):
        import_device_array((schema, capsule))

    class Broken:
        def __arrow_c_device_array__(self, requested_schema=None, **kwargs):
            return "capsules"

    with pytest.raises(TypeError, match="returned str, expected a pair of capsules"):
        import_device_array(Broken())
