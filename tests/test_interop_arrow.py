"""Arrow interop: ``to_arrow``, ``from_arrow`` and ``__arrow_c_array__``
(docs/data-model.md#arrow-mapping)."""

import subprocess
import sys

import duckdb
import nanoarrow as na
import numpy as np
import polars as pl
import pyarrow as pa
import pytest
from conftest import ALL_DTYPES, on_backend
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import FEATURE_SHAPES, lod_tensors

import lodarrow as la

HSET = settings(suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow, HealthCheck.data_too_large])
VARIABLE_KINDS = ["list", "large_list", "list_view", "large_list_view"]


# ---------------------------------------------------------------- independent oracles
def expected_type(dtype, feature_shape, lod_level, large=True):
    """The Arrow type of docs/data-model.md#arrow-mapping, with pyarrow's constructors."""
    names = {"bool": pa.bool_(), "int8": pa.int8(), "uint8": pa.uint8(), "int16": pa.int16(),
             "uint16": pa.uint16(), "int32": pa.int32(), "int64": pa.int64(),
             "float16": pa.float16(), "float32": pa.float32(), "float64": pa.float64()}
    t = names[np.dtype(dtype).name]
    for size in reversed(feature_shape):
        t = pa.list_(t, size)
    for _ in range(lod_level):
        t = pa.large_list(t) if large else pa.list_(t)
    return t


def reference_decode(items, n_levels, dtype, feature_shape):
    """Nested Python lists (``to_pylist()``) -> (lod, data, saw_null), with plain loops.

    A null list (``None`` at a level) becomes an empty sequence and sets ``saw_null``.
    """
    offsets = [[0] for _ in range(n_levels)]
    rows = []
    saw_null = False

    def walk(seq, k):
        nonlocal saw_null
        if k == n_levels:
            rows.append(seq)
            return
        if seq is None:
            saw_null = True
            offsets[k].append(offsets[k][-1])
            return
        for child in seq:
            walk(child, k + 1)
        offsets[k].append(offsets[k][-1] + len(seq))

    for item in items:
        walk(item, 0)
    data = np.array(rows, dtype=dtype).reshape((len(rows),) + tuple(feature_shape))
    return offsets, data, saw_null


def assert_matches(t, lod, data):
    assert isinstance(t, la.LoDTensor)
    assert t.place == la.CPUPlace()
    assert t.lod() == lod
    assert t.dtype == data.dtype
    assert t.data.shape == data.shape
    np.testing.assert_array_equal(t.data, data)


def capsule_import(producer, requested=None):
    """Import through ``__arrow_c_array__`` (what ``pa.array`` does), without pa.array."""
    schema = None if requested is None else requested.__arrow_c_schema__()
    return pa.Array._import_from_c_capsule(*producer.__arrow_c_array__(schema))


def data_buffer(arr):
    return arr.buffers()[-1]


# ---------------------------------------------------------------- seed / spec example
def test_spec_example():
    t = la.LoDTensor(np.arange(14.0).reshape(7, 2), lod=[[0, 2, 3], [0, 2, 4, 7]])
    a = t.to_arrow()
    assert a.type == pa.large_list(pa.large_list(pa.list_(pa.float64(), 2)))
    assert a.to_pylist() == [[[[0.0, 1.0], [2.0, 3.0]], [[4.0, 5.0], [6.0, 7.0]]],
                             [[[8.0, 9.0], [10.0, 11.0], [12.0, 13.0]]]]
    assert la.from_arrow(a).equals(t)
    assert la.from_arrow(pa.array([[[1, 2], [3]], [], [[4]]])).lod() == [[0, 2, 2, 3],
                                                                         [0, 2, 3, 4]]


def test_feature_dimensions_outermost_outermost():
    t = la.LoDTensor(np.zeros((4, 2, 3), np.float32), lengths=[[1, 3]])
    assert t.to_arrow().type == pa.large_list(pa.list_(pa.list_(pa.float32(), 3), 2))


# ---------------------------------------------------------------- round trips
@HSET
@given(t=lod_tensors())
def test_round_trip_exact_type_and_zero_copy(backend, t):
    src = on_backend(t, backend)
    a = src.to_arrow()
    assert a.type == expected_type(t.dtype, t.feature_shape, t.lod_level)
    assert len(a) == len(t)
    back = la.from_arrow(a)
    assert back.equals(t)
    assert back.place == la.CPUPlace()
    assert back.to_arrow().equals(a)
    if backend != "cpu" or t.dtype == np.bool_:
        return
    bufs = a.buffers()
    for k in range(t.lod_level):  # to_arrow: the offsets buffer is the level's own memory
        assert bufs[2 * k + 1].address == t.offsets[k].ctypes.data
        assert back.offsets[k].ctypes.data == bufs[2 * k + 1].address
    if t.data.nbytes:
        assert data_buffer(a).address == t.data.ctypes.data
        assert back.data.ctypes.data == data_buffer(a).address


@HSET
@given(t=lod_tensors())
def test_round_trip_int32_offsets(backend, t):
    a = on_backend(t, backend).to_arrow(large_offsets=False)
    assert a.type == expected_type(t.dtype, t.feature_shape, t.lod_level, large=False)
    back = la.from_arrow(a)
    assert back.equals(t)
    for off in back.offsets:
        assert off.dtype == np.int64
    if backend == "cpu" and t.dtype != np.bool_ and t.data.nbytes:
        assert back.data.ctypes.data == data_buffer(a).address == t.data.ctypes.data


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_every_dtype_maps_one_to_one(dtype):
    data = np.array([1, 0, 1, 1], dtype=dtype)
    t = la.LoDTensor(data, lengths=[[3, 0, 1]])
    a = t.to_arrow()
    assert a.type.value_type == expected_type(dtype, (), 0)
    assert a.to_pylist() == [data[:3].tolist(), [], data[3:].tolist()]
    back = la.from_arrow(a)
    assert back.dtype == np.dtype(dtype) and back.equals(t)


def test_zero_sequences_and_plain_tensors(backend):
    t = la.LoDTensor(np.zeros((0, 3), np.int16), lod=[[0]])
    a = on_backend(t, backend).to_arrow()
    assert len(a) == 0 and a.type == expected_type("int16", (3,), 1)
    assert la.from_arrow(a).equals(t)
    plain = la.LoDTensor(np.arange(6, dtype=np.uint8).reshape(3, 2))
    a = on_backend(plain, backend).to_arrow()
    assert a.type == pa.list_(pa.uint8(), 2) and a.to_pylist() == [[0, 1], [2, 3], [4, 5]]
    assert la.from_arrow(a).equals(plain)


def test_canonical_arrays_round_trip_through_lodarrow():
    arrays = [
        pa.array([[1.5, 2.5], [], [3.5]], pa.large_list(pa.float32())),
        pa.array([[[1, 2]], [], [[3, 4], [5, 6]]], pa.large_list(pa.list_(pa.int8(), 2))),
        pa.array([[[True], []], [[False, True]]], pa.large_list(pa.large_list(pa.bool_()))),
        pa.array([1, 2, 3], pa.uint16()),
        pa.array([[1, 2], [3, 4]], pa.list_(pa.float64(), 2)),
    ]
    for a in arrays:
        assert la.from_arrow(a).to_arrow().equals(a)


def test_strided_fortran_and_read_only_data(backend):
    base = np.arange(48, dtype=np.float32).reshape(8, 2, 3)
    lengths = [[2, 2], [1, 0, 5, 2]]
    expected = la.LoDTensor(base.copy(), lengths=lengths).to_arrow()
    fortran = np.asfortranarray(base)
    strided = np.arange(96, dtype=np.float32).reshape(16, 2, 3)[::2]
    strided[...] = base
    read_only = base.copy()
    read_only.flags.writeable = False
    for data in (fortran, strided, read_only):
        t = la.LoDTensor(data, lengths=lengths)
        assert on_backend(t, backend).to_arrow().equals(expected)
    assert np.array_equal(base, fortran)  # inputs untouched


def test_to_arrow_keeps_the_memory_alive_until_its_last_buffer_goes():
    """The array is imported through the Arrow C data interface over the tensor's own arrays:
    it shares them, keeps them alive while it or any buffer sliced from it lives, and lets
    them go after (no reference kept, none dropped early)."""
    import gc
    import weakref

    data = np.arange(12, dtype=np.float32).reshape(6, 2)
    t = la.LoDTensor(data, lengths=[[2, 1], [1, 2, 3]])
    data_ref, offsets_ref = weakref.ref(t.data), weakref.ref(t.offsets[1])
    arr = t.to_arrow()
    assert arr.values.values.values.buffers()[1].address == data.ctypes.data
    assert arr.values.buffers()[1].address == t.offsets[1].ctypes.data
    leaf = arr.values.values.values.buffers()[1]
    del t, data
    gc.collect()
    del arr
    gc.collect()
    assert data_ref() is not None and offsets_ref() is not None  # the buffer holds them
    np.testing.assert_array_equal(np.frombuffer(leaf, np.float32), np.arange(12))
    del leaf
    gc.collect()
    assert data_ref() is None and offsets_ref() is None


def test_to_arrow_leaks_no_reference():
    from lodarrow._cpu._arrow_bridge import import_nested

    data = np.arange(10, dtype=np.int64)
    t = la.LoDTensor(data, lengths=[[4, 6]])
    before = sys.getrefcount(data), sys.getrefcount(t.offsets[0])
    for large in (True, False, None):
        for _ in range(50):
            assert t.to_arrow(large_offsets=large).to_pylist() == [[0, 1, 2, 3], [4, 5, 6, 7,
                                                                                 8, 9]]
    assert (sys.getrefcount(data), sys.getrefcount(t.offsets[0])) == before
    # an import Arrow refuses (a type whose layout is not the structs') releases them too
    with pytest.raises(pa.ArrowInvalid, match=r"children"):
        import_nested(pa.int64(), data, 10, 10, (), (t.offsets[0],))
    assert (sys.getrefcount(data), sys.getrefcount(t.offsets[0])) == before


def test_an_array_alive_at_exit_is_released_cleanly():
    code = ("import numpy as np, lodarrow as la\n"
            "t = la.LoDTensor(np.arange(6.0), lengths=[[2, 4]])\n"
            "KEEP = [t.to_arrow(), t.to_arrow().values.buffers()[1]]\n"
            "print(KEEP[0].to_pylist())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[[0.0, 1.0], [2.0, 3.0, 4.0, 5.0]]"


def test_bool_is_bit_packed_copy():
    data = np.array([True, False, True, True, False, False, True, False, True])
    t = la.LoDTensor(data, lengths=[[4, 5]])
    a = t.to_arrow()
    assert a.values.buffers()[1].to_pybytes()[:2] == np.packbits(data, bitorder="little")[:2] \
        .tobytes()
    back = la.from_arrow(a)
    assert back.equals(t) and back.data.dtype == np.bool_
    sliced = la.from_arrow(a.slice(1))  # a bit offset that is not a byte boundary
    np.testing.assert_array_equal(sliced.data, data[4:])


# ---------------------------------------------------------------- independent arrays
@st.composite
def offsets_into(draw, n, m, start_at_zero=False):
    """``n + 1`` non-decreasing offsets into a child of length ``m`` (not starting at 0)."""
    cuts = sorted(draw(st.lists(st.integers(0, m), min_size=n + 1, max_size=n + 1)))
    if start_at_zero and cuts:
        cuts[0] = 0
    return cuts


@st.composite
def arrow_arrays(draw, nulls=False, slices=True, kinds=None):
    """``(array, n_levels, dtype, feature_shape)``: an array built bottom-up with pyarrow.

    Every list kind, FixedSizeList levels above a variable level and as feature dimensions,
    offsets that do not start at 0, sliced children and sliced parents; optional null lists.
    """
    dtype = np.dtype(draw(st.sampled_from(ALL_DTYPES)))
    fshape = tuple(draw(st.sampled_from(FEATURE_SHAPES)))
    if kinds is None:
        n_var = draw(st.integers(1, 3))
        kinds = [draw(st.sampled_from(VARIABLE_KINDS)) for _ in range(n_var)]
        if draw(st.booleans()):  # a uniform level above some variable-size level
            kinds.insert(draw(st.integers(0, n_var - 1)), "fixed")
    row_size = int(np.prod(fshape, dtype=np.int64))
    n_rows = draw(st.integers(0, 12))
    pad = draw(st.integers(0, 3)) if slices else 0
    raw = np.arange(-pad * row_size, (n_rows + pad) * row_size) % 7
    values = pa.array(raw.astype(dtype))
    arr = values.slice(pad * row_size, n_rows * row_size) if pad else values
    for size in reversed(fshape):
        arr = pa.FixedSizeListArray.from_arrays(arr, size)
    for kind in reversed(kinds):
        m = len(arr)
        if kind == "fixed":
            size = draw(st.integers(1, 3))
            arr = pa.FixedSizeListArray.from_arrays(arr.slice(0, m - m % size), size)
        else:
            n = draw(st.integers(0, 5))
            mask = None
            if nulls and n:
                mask = pa.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
            if kind in ("list", "large_list"):
                cls, ot = ((pa.ListArray, pa.int32()) if kind == "list"
                           else (pa.LargeListArray, pa.int64()))
                offs = draw(offsets_into(n, m, start_at_zero=not slices))
                arr = cls.from_arrays(pa.array(offs, ot), arr, mask=mask)
            else:
                cls, ot = ((pa.ListViewArray, pa.int32()) if kind == "list_view"
                           else (pa.LargeListViewArray, pa.int64()))
                starts = draw(st.lists(st.integers(0, m), min_size=n, max_size=n))
                sizes = [draw(st.integers(0, m - s)) for s in starts]
                arr = cls.from_arrays(pa.array(starts, ot), pa.array(sizes, ot), arr, mask=mask)
        if slices and len(arr) and draw(st.booleans()):
            lo = draw(st.integers(0, len(arr)))
            arr = arr.slice(lo, draw(st.integers(0, len(arr) - lo)))
    return arr, len(kinds), dtype, fshape


@given(case=arrow_arrays(slices=False))
def test_independent_arrays_of_every_list_kind(case):
    arr, n_levels, dtype, fshape = case
    lod, data, _ = reference_decode(arr.to_pylist(), n_levels, dtype, fshape)
    assert_matches(la.from_arrow(arr), lod, data)


@given(case=arrow_arrays(slices=True))
def test_slices_at_every_level(case):
    arr, n_levels, dtype, fshape = case
    lod, data, _ = reference_decode(arr.to_pylist(), n_levels, dtype, fshape)
    assert_matches(la.from_arrow(arr), lod, data)


@given(case=arrow_arrays(nulls=True))
def test_null_lists_error_or_empty(case):
    arr, n_levels, dtype, fshape = case
    lod, data, saw_null = reference_decode(arr.to_pylist(), n_levels, dtype, fshape)
    assert_matches(la.from_arrow(arr, nulls="empty"), lod, data)
    if saw_null:
        with pytest.raises(ValueError, match=r"null list at level \d+, position \d+"):
            la.from_arrow(arr)
    else:
        assert_matches(la.from_arrow(arr), lod, data)


@pytest.mark.parametrize("kind", VARIABLE_KINDS)
def test_each_list_kind_by_pyarrow(kind):
    make = {"list": pa.list_, "large_list": pa.large_list,
            "list_view": pa.list_view, "large_list_view": pa.large_list_view}[kind]
    items = [[[1.0, 2.0], []], [], [[3.0]]]
    arr = pa.array(items, make(make(pa.float32())))
    t = la.from_arrow(arr)
    assert t.lod() == [[0, 2, 2, 3], [0, 2, 2, 3]]
    assert t.data.dtype == np.float32 and t.data.tolist() == [1.0, 2.0, 3.0]


def test_list_views_out_of_order_and_overlapping():
    values = pa.array(np.arange(6, dtype=np.int32))
    arr = pa.ListViewArray.from_arrays(pa.array([3, 0, 1, 5], pa.int32()),
                                       pa.array([2, 3, 0, 1], pa.int32()), values)
    t = la.from_arrow(arr)
    assert t.lod() == [[0, 2, 5, 5, 6]]
    assert t.data.tolist() == [3, 4, 0, 1, 2, 5]
    # contiguous, in-order views keep the values zero-copy
    ordered = pa.LargeListViewArray.from_arrays(pa.array([1, 3, 0], pa.int64()),
                                                pa.array([2, 3, 0], pa.int64()), values)
    t = la.from_arrow(ordered)
    assert t.lod() == [[0, 2, 5, 5]]
    assert t.data.ctypes.data == values.buffers()[1].address + 1 * 4


def test_fixed_size_list_level_above_and_feature_below():
    inner = pa.array([[[1, 2]], [], [[3, 4], [5, 6]], [[7, 8]]],
                     pa.large_list(pa.list_(pa.int16(), 2)))
    arr = pa.FixedSizeListArray.from_arrays(inner, 2)  # uniform level of length 2
    t = la.from_arrow(arr)
    assert t.lod() == [[0, 2, 4], [0, 1, 1, 3, 4]]
    assert t.feature_shape == (2,)
    assert t.data.tolist() == [[1, 2], [3, 4], [5, 6], [7, 8]]
    only_fixed = pa.array([[[1, 2, 3]], [[4, 5, 6]]], pa.list_(pa.list_(pa.int64(), 3), 1))
    t = la.from_arrow(only_fixed)  # no variable-size level: all feature dimensions
    assert t.lod_level == 0 and t.data.shape == (2, 1, 3)


def test_fixed_size_list_levels_with_nulls_and_size_zero():
    inner = pa.array([[1], [2, 3], [], [4]], pa.large_list(pa.int8()))
    arr = pa.FixedSizeListArray.from_arrays(inner, 2, mask=pa.array([True, False]))
    with pytest.raises(ValueError, match=r"null list at level 0, position 0"):
        la.from_arrow(arr)
    t = la.from_arrow(arr, nulls="empty")
    assert t.lod() == [[0, 0, 2], [0, 0, 1]] and t.data.tolist() == [4]
    child = pa.array([], pa.large_list(pa.int8()))
    size_zero = pa.Array.from_buffers(pa.list_(child.type, 0), 2, [None], children=[child])
    t = la.from_arrow(size_zero)
    assert t.lod() == [[0, 0, 0], [0]] and t.data.shape == (0,)


def test_sliced_large_list_keeps_values_zero_copy():
    t = la.LoDTensor(np.arange(20, dtype=np.float64).reshape(10, 2), lengths=[[3, 0, 4, 3]])
    a = t.to_arrow()
    head = la.from_arrow(a.slice(0, 2))  # offsets still start at 0: zero-copy
    assert head.offsets[0].ctypes.data == a.buffers()[1].address
    assert head.lod() == [[0, 3, 3]] and head.data.tolist() == t.data[:3].tolist()
    tail = la.from_arrow(a.slice(2))  # rebased offsets, values a view
    assert tail.lod() == [[0, 4, 7]]
    assert tail.data.ctypes.data == t.data.ctypes.data + 3 * 2 * 8
    np.testing.assert_array_equal(tail.data, t.data[3:])


def test_int32_offsets_are_widened():
    arr = pa.array([[1, 2], [3]], pa.list_(pa.int8()))
    t = la.from_arrow(arr)
    assert t.offsets[0].dtype == np.int64 and t.lod() == [[0, 2, 3]]
    assert t.data.ctypes.data == arr.values.buffers()[1].address


def test_list_of_null_type_is_empty_float64():
    t = la.from_arrow(pa.array([[], []]))
    assert t.lod() == [[0, 0, 0]] and t.dtype == np.float64 and t.data.shape == (0,)
    with pytest.raises(ValueError, match=r"null value at row 0"):
        la.from_arrow(pa.array([[], [None]]))


def test_dictionary_values_are_decoded():
    arr = pa.array([[1.0, 2.0, 1.0], [2.0]], pa.list_(pa.dictionary(pa.int8(), pa.float32())))
    t = la.from_arrow(arr)
    assert t.dtype == np.float32 and t.data.tolist() == [1.0, 2.0, 1.0, 2.0]
    assert t.lod() == [[0, 3, 4]]


def test_extension_storage_is_read():
    storage = pa.array([[1, 2, 3], [4, 5, 6]], pa.list_(pa.float32(), 3))
    arr = pa.ExtensionArray.from_storage(pa.fixed_shape_tensor(pa.float32(), [3]), storage)
    t = la.from_arrow(arr)
    assert t.lod_level == 0 and t.data.tolist() == [[1, 2, 3], [4, 5, 6]]


# ---------------------------------------------------------------- chunked input
@given(parts=st.lists(lod_tensors(min_levels=2, max_levels=2, dtypes=["int32"],
                                  feature_shapes=[(2,)]), max_size=4))
def test_chunked_arrays_are_joined(parts):
    chunks = [p.to_arrow() for p in parts]
    ca = pa.chunked_array(chunks, type=expected_type("int32", (2,), 2))
    lod, data, _ = reference_decode(ca.to_pylist(), 2, np.int32, (2,))
    assert_matches(la.from_arrow(ca), lod, data)


@pytest.mark.parametrize("dtype, feature", [("float32", (3,)), ("bool", ()), ("int64", ())])
def test_large_chunks_are_joined_into_a_writable_copy(dtype, feature):
    """Chunks of over 1 MiB are joined into Arrow's pool (lodarrow._backends.cpu.empty): the
    same values, an ordinary writable array that owns its copy."""
    rng = np.random.default_rng(0)
    tensors = []
    for n in (300_000, 1, 0, 200_000):
        values = rng.integers(0, 2 if dtype == "bool" else 100, (n,) + feature).astype(dtype)
        cut = np.sort(rng.integers(0, n + 1, 9))
        tensors.append(la.LoDTensor(values, lengths=[np.diff(np.r_[0, cut, n]).tolist()]))
    ca = pa.chunked_array([t.to_arrow() for t in tensors])
    back = la.from_arrow(ca)
    want = np.concatenate([t.data for t in tensors])
    assert back.data.dtype == want.dtype and back.data.shape == want.shape
    np.testing.assert_array_equal(back.data, want)
    assert back.lod() == [np.cumsum([0] + [n for t in tensors
                                         for n in t.recursive_sequence_lengths()[0]]).tolist()]
    assert back.data.flags.c_contiguous and back.data.flags.writeable
    back.data[0] = back.data[1] if dtype == "bool" else 7
    np.testing.assert_array_equal(tensors[0].data[0], want[0])  # chunks not written through
    assert la.from_arrow(ca).data.ctypes.data != back.data.ctypes.data


def test_single_chunk_is_zero_copy():
    t = la.LoDTensor(np.arange(5, dtype=np.int64), lengths=[[2, 3]])
    a = t.to_arrow()
    back = la.from_arrow(pa.chunked_array([a]))
    assert back.data.ctypes.data == t.data.ctypes.data
    assert back.offsets[0].ctypes.data == t.offsets[0].ctypes.data


def test_zero_chunks():
    ca = pa.chunked_array([], type=expected_type("float16", (2, 3), 2))
    t = la.from_arrow(ca)
    assert t.lod() == [[0], [0]] and t.data.shape == (0, 2, 3) and t.dtype == np.float16


def test_null_in_a_chunk_names_the_chunk():
    ca = pa.chunked_array([pa.array([[1], [2, 3]]), pa.array([[4], [5], None])])
    with pytest.raises(ValueError, match=r"null list at level 0, position 2 in chunk 1 "
                                         r"\(top-level sequence 4\)"):
        la.from_arrow(ca)
    assert la.from_arrow(ca, nulls="empty").lod() == [[0, 1, 3, 4, 5, 5]]


# ---------------------------------------------------------------- PyCapsule producers
def test_polars_series_through_the_capsule():
    t = la.LoDTensor(np.arange(14.0, dtype=np.float32).reshape(7, 2), lod=[[0, 2, 3],
                                                                         [0, 2, 4, 7]])
    s = pl.Series("x", t.to_arrow())
    assert la.from_arrow(s).equals(t)
    two = pl.concat([s, s], rechunk=False)
    assert two.n_chunks() == 2
    assert la.from_arrow(two).lod() == [[0, 2, 3, 5, 6], [0, 2, 4, 7, 9, 11, 14]]
    ints = pl.Series([[1, 2], [], None, [3]], dtype=pl.List(pl.Int16))
    with pytest.raises(ValueError, match=r"null list at level 0, position 2"):
        la.from_arrow(ints)
    t = la.from_arrow(ints, nulls="empty")
    assert t.dtype == np.int16 and t.lod() == [[0, 2, 2, 2, 3]]


def test_polars_accepts_lodarrow_directly():
    t = la.LoDTensor(np.arange(6, dtype=np.int32), lengths=[[2, 0, 4]])
    assert pl.Series(t).to_list() == [[0, 1], [], [2, 3, 4, 5]]


def test_nanoarrow_and_duckdb_producers():
    t = la.LoDTensor(np.arange(6, dtype=np.float64).reshape(3, 2), lengths=[[1, 2]])
    assert la.from_arrow(na.c_array(t.to_arrow())).equals(t)
    assert la.from_arrow(na.Array(t.to_arrow())).equals(t)
    tab = la.to_table({"x": t})  # noqa: F841  (DuckDB finds it by name)
    assert la.from_arrow(duckdb.sql("select x from tab")).equals(t)


class _StreamOnly:
    def __init__(self, arr):
        self._arr = pa.chunked_array([arr])

    def __arrow_c_stream__(self, requested_schema=None):
        return self._arr.__arrow_c_stream__(requested_schema)


class _ArrayIgnoringRequest:
    """A producer that ignores ``requested_schema`` (consumers must still cope)."""

    def __init__(self, arr):
        self._arr = arr

    def __arrow_c_array__(self, requested_schema=None):
        return self._arr.__arrow_c_array__()


def test_minimal_capsule_producers():
    t = la.LoDTensor(np.arange(4, dtype=np.uint8), lengths=[[1, 3]])
    assert la.from_arrow(_StreamOnly(t.to_arrow())).equals(t)
    assert la.from_arrow(_ArrayIgnoringRequest(t.to_arrow())).equals(t)
    assert la.from_arrow(pa.table({"only": t.to_arrow()})).equals(t)
    assert la.from_arrow(pa.record_batch({"only": t.to_arrow()})).equals(t)
    with pytest.raises(TypeError, match=r"exactly one column"):
        la.from_arrow(pa.table({"a": t.to_arrow(), "b": t.to_arrow()}))
    with pytest.raises(TypeError, match=r"exactly one field"):
        la.from_arrow(pa.array([{"a": 1, "b": 2}]))


# ---------------------------------------------------------------- __arrow_c_array__
def test_arrow_c_array_export(backend):
    t = la.LoDTensor(np.arange(6, dtype=np.int32).reshape(3, 2), lengths=[[2, 1]])
    src = on_backend(t, backend)
    assert capsule_import(src).equals(t.to_arrow())
    assert pa.array(src).equals(t.to_arrow())
    small = capsule_import(src, pa.list_(pa.list_(pa.int32(), 2)))
    assert small.type == pa.list_(pa.list_(pa.int32(), 2))
    assert small.to_pylist() == [[[0, 1], [2, 3]], [[4, 5]]]
    wide = capsule_import(src, pa.large_list(pa.list_(pa.float64(), 2)))
    assert wide.to_pylist() == [[[0.0, 1.0], [2.0, 3.0]], [[4.0, 5.0]]]
    assert pa.array(src, type=pa.list_(pa.list_(pa.int64(), 2))).to_pylist() == \
        small.to_pylist()
    with pytest.raises(ValueError, match=r"cannot cast .* to the requested type string"):
        src.__arrow_c_array__(pa.string().__arrow_c_schema__())


# ---------------------------------------------------------------- nulls and errors
def test_null_messages_name_level_position_and_sequence():
    arr = pa.array([[[1], [2]], [[3], None, [4]]], pa.large_list(pa.large_list(pa.int64())))
    with pytest.raises(ValueError, match=r"null list at level 1, position 3 "
                                         r"\(top-level sequence 1\); pass nulls='empty'"):
        la.from_arrow(arr)
    assert la.from_arrow(arr, nulls="empty").lod() == [[0, 2, 5], [0, 1, 2, 3, 3, 4]]
    top = pa.array([[1.0], None, []])
    with pytest.raises(ValueError, match=r"null list at level 0, position 1 "
                                         r"\(top-level sequence 1\)"):
        la.from_arrow(top)


def test_null_values_always_raise():
    arr = pa.array([[[1.0], []], [[2.0, None]]])
    for nulls in ("error", "empty"):
        with pytest.raises(ValueError, match=r"null value at row 2 \(element 2\) "
                                             r"\(top-level sequence 1\)"):
            la.from_arrow(arr, nulls=nulls)
    with pytest.raises(ValueError, match=r"null value at row 1"):
        la.from_arrow(pa.array([1, None, 3], pa.int8()))


def test_null_fixed_size_row_always_raises():
    arr = pa.array([[[1, 2]], [[3, 4], None]], pa.large_list(pa.list_(pa.int32(), 2)))
    for nulls in ("error", "empty"):
        with pytest.raises(ValueError, match=r"null fixed-size row at row 2 "
                                             r"\(top-level sequence 1\)"):
            la.from_arrow(arr, nulls=nulls)


def test_null_slot_backed_by_values_is_dropped():
    values = pa.array(np.arange(6, dtype=np.float32))
    arr = pa.LargeListArray.from_arrays(pa.array([0, 2, 4, 6], pa.int64()), values,
                                        mask=pa.array([False, True, False]))
    t = la.from_arrow(arr, nulls="empty")
    assert t.lod() == [[0, 2, 2, 4]] and t.data.tolist() == [0.0, 1.0, 4.0, 5.0]


def test_nulls_outside_the_slice_are_ignored():
    arr = pa.array([[1], None, [2, 3]])
    assert la.from_arrow(arr.slice(2)).lod() == [[0, 2]]
    values = pa.array([None, 1, 2, None])
    inner = pa.ListArray.from_arrays(pa.array([1, 3], pa.int32()), values)
    assert la.from_arrow(inner).data.tolist() == [1, 2]


def test_bad_nulls_argument():
    with pytest.raises(ValueError, match=r"nulls must be 'error' or 'empty', got 'skip'"):
        la.from_arrow(pa.array([[1]]), nulls="skip")


@pytest.mark.parametrize("arr, name", [
    (pa.array(["a", "b"]), "string"),
    (pa.array([["a"], []]), "string"),
    (pa.array([[1]], pa.list_(pa.uint32())), "uint32"),
    (pa.array([[{"a": 1, "b": 2.0}]]), "struct"),
    (pa.array([1, 2], pa.timestamp("s")), "timestamp"),
    (pa.array([[1, 2]], pa.list_(pa.decimal128(5, 2))), "decimal"),
])
def test_unsupported_value_types(arr, name):
    with pytest.raises(TypeError, match=rf"values of Arrow type {name}.* are not supported"):
        la.from_arrow(arr)


def test_not_arrow():
    with pytest.raises(TypeError, match=r"obj must be a pyarrow Array or ChunkedArray.*list"):
        la.from_arrow([[1, 2]])
    with pytest.raises(TypeError, match=r"got ndarray"):
        la.from_arrow(np.arange(3))


def test_to_arrow_errors():
    with pytest.raises(TypeError, match=r"t must be a LoDTensor, got ndarray"):
        la._interop._arrow.to_arrow(np.arange(3))
    with pytest.raises(ValueError, match=r"empty LoDTensor"):
        la.LoDTensor().to_arrow()
    # 2**31 + 1 rows of zero-size features: offsets beyond int32 without the memory
    big = la.LoDTensor(np.empty((2**31 + 1, 0), np.float32), lod=[[0, 2**31 + 1]])
    assert big.to_arrow().type == pa.large_list(pa.list_(pa.float32(), 0))
    with pytest.raises(ValueError, match=r"level 0 has offset 2147483649 at position 1, which "
                                         r"does not fit .* use large_offsets=True"):
        big.to_arrow(large_offsets=False)
    with pytest.raises(ValueError, match=r"cannot cast|does not fit"):
        big.__arrow_c_array__(pa.list_(pa.list_(pa.float32(), 0)).__arrow_c_schema__())


def test_malformed_arrays_are_rejected_not_read_out_of_bounds():
    offsets = np.array([0, 2, 9], dtype=np.int64)  # 9 > the 4 values
    child = na.c_array(pa.array(np.arange(4, dtype=np.int32)))
    bad = na.c_array_from_buffers(na.large_list(na.int32()), 2, [None, offsets.tobytes()],
                                  children=[child], validation_level="none")
    arr = pa.Array._import_from_c_capsule(*bad.__arrow_c_array__())  # not validated
    with pytest.raises(ValueError, match=r"invalid Arrow array: an offset of level 0 reaches "
                                         r"9 but the array below has only 4 entries"):
        la.from_arrow(arr)


def test_zero_copy_views_are_read_only():
    t = la.LoDTensor(np.arange(10, dtype=np.int16), lengths=[[4, 6]])
    a = t.to_arrow()
    back = la.from_arrow(a)
    assert not back.data.flags.writeable  # a view of (immutable) Arrow memory
    with pytest.raises(ValueError, match="read-only"):
        back.data[0] = 7
    assert not any(off.flags.writeable for off in back.offsets)
    assert a.to_pylist() == [[0, 1, 2, 3], [4, 5, 6, 7, 8, 9]]


def test_decreasing_arrow_offsets_are_caught_before_any_kernel():
    # A malformed array (offsets that go back) converts in O(1), but no operator trusts it.
    offsets = pa.array([0, 3, 1, 4], type=pa.int64())
    values = pa.array(np.arange(4, dtype=np.float32))
    bad = pa.LargeListArray.from_buffers(pa.large_list(pa.float32()), 3,
                                         [None, offsets.buffers()[1]], children=[values])
    t = la.from_arrow(bad)
    assert not t.has_valid_recursive_sequence_lengths()
    with pytest.raises(la.LoDError, match=r"input.lod\[0\] must be non-decreasing; first violation "
                                          r"at position 2 \(3 > 1\)"):
        la.sequence_pool(t, "sum")
    with pytest.raises(la.LoDError, match="non-decreasing"):
        la.sequence_pad(bad, 0.0)
    with pytest.raises(la.LoDError, match="non-decreasing"):
        t.take([0])


# ---------------------------------------------------------------- lod_level / feature_shape
LIST_MAKERS = {"list": pa.list_, "large_list": pa.large_list, "list_view": pa.list_view,
               "large_list_view": pa.large_list_view}


def folded_type(dtype, feature_shape, lod_level, kinds):
    """The Arrow type of a tensor whose feature dimensions are variable-size lists of
    ``kinds`` (what DuckDB/polars/Spark make of FixedSizeLists), spelled with pyarrow."""
    t = pa.from_numpy_dtype(np.dtype(dtype))
    for kind in reversed(kinds):
        t = LIST_MAKERS[kind](t)
    for _ in range(lod_level):
        t = pa.large_list(t)
    return t


def folded_array(t, kinds):
    """``t`` built by pyarrow from nested Python lists, feature dimensions as lists."""
    items = t.data.tolist() if t.lod_level == 0 else t.to_list()
    return pa.array(items, type=folded_type(t.dtype, t.feature_shape, t.lod_level, kinds))


@given(t=lod_tensors(feature_shapes=[(1,), (3,), (2, 3), (0,), (2, 0)], max_levels=2),
       data=st.data())
def test_lod_level_folds_regular_lists_into_feature_dimensions(t, data):
    kinds = [data.draw(st.sampled_from(sorted(LIST_MAKERS))) for _ in t.feature_shape]
    arr = folded_array(t, kinds)
    if data.draw(st.booleans()) and len(arr):  # a slice: offsets that do not start at 0
        lo = data.draw(st.integers(0, len(arr)))
        arr, t = arr.slice(lo), t[lo:]
    stated = la.from_arrow(arr, lod_level=t.lod_level, feature_shape=t.feature_shape)
    assert stated.equals(t) and stated.feature_shape == t.feature_shape
    assert stated.dtype == t.dtype and stated.lod() == t.lod()
    known = 0 not in t.feature_shape[:-1] and len(t.data) > 0
    if known:  # the widths are read from the data
        assert la.from_arrow(arr, lod_level=t.lod_level).equals(t)
        assert la.from_arrow(arr, feature_shape=t.feature_shape).equals(t)
    else:
        with pytest.raises(ValueError, match=r"pass feature_shape=\(\.\.\.\) with the widths"):
            la.from_arrow(arr, lod_level=t.lod_level)
    chunks = pa.chunked_array([arr.slice(0, 1), arr.slice(1, 0), arr.slice(1)], type=arr.type)
    assert la.from_arrow(chunks, lod_level=t.lod_level, feature_shape=t.feature_shape).equals(t)


@pytest.mark.parametrize("kind", sorted(LIST_MAKERS))
def test_folding_a_regular_level_is_zero_copy(kind):
    t = la.LoDTensor(np.arange(24, dtype=np.float32).reshape(6, 4), lengths=[[2, 0, 4]])
    arr = folded_array(t, [kind])
    values = arr.values.values
    got = la.from_arrow(arr, lod_level=1)
    assert got.equals(t) and got.feature_shape == (4,)
    assert got.data.ctypes.data == values.buffers()[1].address  # a view of the child values
    tail = la.from_arrow(arr.slice(2), lod_level=1)
    assert tail.equals(t[2:])  # rows 2.. of the same values: still a view
    assert tail.data.ctypes.data == values.buffers()[1].address + 2 * 4 * 4


def test_fixed_size_lists_keep_their_width_under_lod_level():
    t = la.LoDTensor(np.arange(12, dtype=np.int16).reshape(2, 3, 2), lengths=[[1, 1]])
    arr = t.to_arrow()  # large_list<fixed_size_list<fixed_size_list<int16, 2>, 3>>
    assert la.from_arrow(arr, lod_level=1).equals(t)
    assert la.from_arrow(arr, lod_level=1, feature_shape=(3, 2)).equals(t)
    mixed = pa.array(t.to_list(), pa.large_list(pa.list_(pa.list_(pa.int16(), 2))))
    assert la.from_arrow(mixed, feature_shape=(3, 2)).equals(t)
    with pytest.raises(la.LoDError, match=r"feature_shape\[1\] is 4 but level 2 of .* is a "
                                          r"fixed-size list of 2"):
        la.from_arrow(mixed, lod_level=1, feature_shape=(3, 4))
    plain = la.from_arrow(pa.array([[1, 2], [3, 4], [5, 6]]), lod_level=0)
    assert plain.lod_level == 0 and plain.data.tolist() == [[1, 2], [3, 4], [5, 6]]
    # A FixedSizeList among the outer levels is a level of uniform lengths, as by default.
    two = pa.array([[[1.0], [2.0]]], pa.list_(pa.list_(pa.float64()), 2))
    assert la.from_arrow(two, lod_level=1).lod() == [[0, 2]]


def test_irregular_levels_and_width_mismatches_are_lod_errors():
    arr = pa.array([[[1, 2], [3, 4]], [[5, 6], [7], [8, 9]]], pa.list_(pa.list_(pa.int8())))
    with pytest.raises(la.LoDError, match=r"level 1 must be regular to be feature dimension 0: "
                                          r"its list at position 3 \(row 3, top-level sequence "
                                          r"1\) has length 1, but the first list of the level "
                                          r"has length 2"):
        la.from_arrow(arr, lod_level=1)
    with pytest.raises(la.LoDError, match=r"its list at position 0 \(row 0, top-level sequence "
                                          r"0\) has length 2, but feature_shape\[0\] is 3"):
        la.from_arrow(arr.slice(0, 1), lod_level=1, feature_shape=(3,))
    deep = pa.array([[[[1, 2], [3, 4]], [[5, 6], [7, 8, 9]]]],
                    pa.large_list(pa.list_view(pa.list_(pa.int8()))))
    with pytest.raises(la.LoDError, match=r"level 2 must be regular to be feature dimension 1: "
                                          r"its list at position 3 \(row 1, top-level sequence "
                                          r"0\) has length 3"):
        la.from_arrow(deep, lod_level=1)
    chunks = pa.chunked_array([arr.slice(0, 1), pa.array([[[1, 2, 3]]], arr.type)])
    with pytest.raises(la.LoDError, match=r"position 0 in chunk 1 \(row 0, top-level sequence "
                                          r"1\) has length 3, but the lists of earlier chunks "
                                          r"have length 2"):
        la.from_arrow(chunks, lod_level=1)


def test_widths_from_feature_shape_when_there_are_no_rows():
    typ = pa.list_(pa.list_(pa.float32()))
    for empty in (pa.array([], typ), pa.array([[], []], typ), pa.chunked_array([], typ)):
        t = la.from_arrow(empty, lod_level=1, feature_shape=(8,))
        assert t.data.shape == (0, 8) and t.dtype == np.float32 and t.lod_level == 1
        with pytest.raises(ValueError, match=r"feature dimension 0 is level 1 of "
                                             r"list<item: list<item: float>>, a list whose "
                                             r"width the type does not carry, and there is no "
                                             r"data to read it from; pass feature_shape"):
            la.from_arrow(empty, lod_level=1)
    zero = pa.array([[[]]], pa.list_(pa.list_(pa.list_(pa.int32()))))  # width 0, then unknown
    with pytest.raises(ValueError, match=r"feature dimension 1 is level 2"):
        la.from_arrow(zero, lod_level=1)
    assert la.from_arrow(zero, lod_level=1, feature_shape=(0, 5)).data.shape == (1, 0, 5)


def test_nulls_in_folded_levels_always_raise():
    arr = pa.array([[[1, 2], None]], pa.list_(pa.list_(pa.int8())))
    for nulls in ("error", "empty"):
        with pytest.raises(ValueError, match=r"null list \(feature dimension 0, level 1\) at row "
                                             r"1 \(top-level sequence 0\)"):
            la.from_arrow(arr, nulls=nulls, lod_level=1)
    top = pa.array([[[1, 2]], None, [[3, 4]]], pa.list_(pa.list_(pa.int8())))
    t = la.from_arrow(top, nulls="empty", lod_level=1)
    assert t.lod() == [[0, 1, 1, 2]] and t.data.tolist() == [[1, 2], [3, 4]]


def test_lod_level_and_feature_shape_argument_errors():
    arr = pa.array([[1, 2]], pa.list_(pa.int8()))
    with pytest.raises(ValueError, match=r"lod_level=2 but list<item: int8> has only 1 list "
                                         r"levels"):
        la.from_arrow(arr, lod_level=2)
    with pytest.raises(ValueError, match=r"lod_level must be >= 0, got -1"):
        la.from_arrow(arr, lod_level=-1)
    with pytest.raises(TypeError, match=r"lod_level must be an integer or None, got float"):
        la.from_arrow(arr, lod_level=1.0)
    with pytest.raises(ValueError, match=r"feature_shape \(2, 2\) has 2 dimensions but "
                                         r"lod_level=0 leaves 1 list levels"):
        la.from_arrow(arr, lod_level=0, feature_shape=(2, 2))
    with pytest.raises(ValueError, match=r"feature_shape \(2, 2\) has 2 dimensions but "
                                         r"list<item: int8> has only 1 list levels"):
        la.from_arrow(arr, feature_shape=(2, 2))
    with pytest.raises(ValueError, match=r"feature_shape\[0\] must be >= 0, got -2"):
        la.from_arrow(arr, lod_level=0, feature_shape=(-2,))
    with pytest.raises(TypeError, match=r"feature_shape\[0\] must be an integer, got str"):
        la.from_arrow(arr, lod_level=0, feature_shape=("2",))
    assert la.from_arrow(arr, lod_level=0, feature_shape=2).data.shape == (1, 2)


def test_describe_type_without_data():
    from lodarrow._interop._arrow_layout import arrow_type, describe_type

    typ = pa.list_(pa.list_(pa.float32()))
    layout = describe_type(typ, lod_level=1, feature_shape=(8,))
    assert (layout.lod_level, layout.feature_shape, layout.dtype) == (1, (8,), np.float32)
    assert layout.level_kinds == ("list",) and layout.feature_kinds == ("list",)
    assert describe_type(typ) == describe_type(typ, lod_level=2)
    assert describe_type(typ).feature_shape == () and describe_type(typ).lod_level == 2
    with pytest.raises(ValueError, match=r"pass feature_shape"):
        describe_type(typ, lod_level=1)
    canonical = arrow_type("float16", (2, 3), 2)
    assert canonical == expected_type("float16", (2, 3), 2)
    assert arrow_type(np.int8, (), 1, large_offsets=False) == pa.list_(pa.int8())
    d = describe_type(canonical)
    assert (d.lod_level, d.feature_shape, d.dtype, d.dictionary) == (2, (2, 3), np.float16, False)
    assert d.feature_kinds == ("fixed_size_list",) * 2
    assert describe_type(pa.large_list(pa.dictionary(pa.int8(), pa.int32()))).dictionary
    with pytest.raises(TypeError, match=r"values of Arrow type string .* are not supported"):
        describe_type(pa.list_(pa.string()))
    with pytest.raises(TypeError, match=r"dtype complex128 is not supported"):
        arrow_type(np.complex128)


def test_device_path_folds_as_from_arrow():
    from lodarrow._interop._cdevice import import_device_array

    t = la.LoDTensor(np.arange(12, dtype=np.int32).reshape(4, 3), lengths=[[1, 3]])
    arr = folded_array(t, ["list_view"])
    assert import_device_array(arr, lod_level=1).equals(t)
    with pytest.raises(la.LoDError, match=r"feature_shape\[0\] is 2"):
        import_device_array(arr, lod_level=1, feature_shape=(2,))


# ---------------------------------------------------------------- DuckDB / polars read-back
def test_duckdb_and_polars_read_back_a_lodarrow_parquet_file(tmp_path):
    import duckdb
    import polars as pl

    rng = np.random.default_rng(3)
    t = la.LoDTensor(rng.standard_normal((9, 8)).astype(np.float32), lengths=[[4, 0, 5]])
    path = str(tmp_path / "emb.parquet")
    la.write_parquet({"emb": t}, path)
    from_duckdb = duckdb.sql(f"select emb from read_parquet('{path}')").arrow()
    assert str(from_duckdb.schema.field(0).type) == "list<l: list<l: float>>"  # width lost
    back = la.from_arrow(from_duckdb, lod_level=1)
    assert back.equals(t) and back.feature_shape == (8,)
    series = pl.read_parquet(path)["emb"].cast(pl.List(pl.List(pl.Float32)))
    assert la.from_arrow(series, lod_level=1).equals(t)
    assert la.from_arrow(series, lod_level=1, feature_shape=(8,)).equals(t)
    assert la.from_arrow(pl.read_parquet(path)["emb"], lod_level=1).equals(t)  # Array(8) kept


class _CountingDeviceProducer:
    """A host producer of the device PyCapsule interface that counts its exports."""

    def __init__(self, arr):
        self.arr, self.calls = arr, 0

    def __arrow_c_device_array__(self, requested_schema=None, **kwargs):
        self.calls += 1
        return self.arr.__arrow_c_device_array__(requested_schema, **kwargs)

    def __arrow_c_array__(self, requested_schema=None):
        self.calls += 1
        return self.arr.__arrow_c_array__(requested_schema)


def test_a_capsule_producer_is_exported_once_and_read_in_place():
    t = la.LoDTensor(np.arange(12, dtype=np.float64).reshape(6, 2), lengths=[[2, 4]])
    arr = t.to_arrow()
    producer = _CountingDeviceProducer(arr)
    got = la.from_arrow(producer)
    assert producer.calls == 1 and got.equals(t)
    assert got.data.ctypes.data == t.data.ctypes.data
    assert got.offsets[0].ctypes.data == t.offsets[0].ctypes.data
    folded = _CountingDeviceProducer(folded_array(t, ["list"]))
    assert la.from_arrow(folded, lod_level=1).equals(t) and folded.calls == 1
