"""The decoder's lean branch (one List / LargeList level of numeric values, no nulls) gives
exactly the LoDTensor parts of the general path, and declines everything else."""

import numpy as np
import pyarrow as pa
import pytest

import lodarrow as la
from lodarrow._interop import _arrow_decode as dec
from lodarrow._interop._arrow_layout import plan

DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16",
          "float16", "float32", "float64"]


def _lists(dtype, kind, lengths, seed=0):
    rng = np.random.default_rng(seed)
    values = (rng.standard_normal(int(sum(lengths))) * 50).astype(dtype)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    if kind == "list":
        return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pa.array(values))
    return pa.LargeListArray.from_arrays(pa.array(offsets.astype(np.int64)), pa.array(values))


def _both(arr):
    """(lean result or None, general result) of decoding ``arr``."""
    p = plan(arr.type)
    bufs = arr.buffers()
    lean = dec._lean_list(arr, bufs, p.buffer_pos, p.levels[0][0], p.dtype) \
        if len(p.levels) == 1 and not p.features else None
    general = dec.decode(dec._HostMemory(), arr, bufs, p, "error", p.widths)  # not HOST
    return lean, general


def _same(a, b):
    (da, la_), (db, lb) = a, b
    assert da.dtype == db.dtype and da.shape == db.shape
    np.testing.assert_array_equal(da, db)
    assert da.flags.writeable == db.flags.writeable
    assert len(la_) == len(lb)
    for x, y in zip(la_, lb):
        assert x.dtype == y.dtype == np.int64
        np.testing.assert_array_equal(x, y)
        assert x.flags.writeable == y.flags.writeable


def _tensor_same(t, u):
    assert t.dtype == u.dtype and t.lod_level == u.lod_level
    assert t.feature_shape == u.feature_shape
    np.testing.assert_array_equal(t.data, u.data)
    assert t.data.flags.writeable == u.data.flags.writeable
    for x, y in zip(t._offsets, u._offsets):
        assert x.dtype == y.dtype and x.flags.writeable == y.flags.writeable
        np.testing.assert_array_equal(x, y)
    assert t._unchecked == u._unchecked
    assert t.lod() == u.lod()


@pytest.mark.parametrize("kind", ["list", "large_list"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lengths", [[3, 0, 2, 5], [0, 0], [], [1], [0, 4, 0]])
def test_lean_equals_general(kind, dtype, lengths):
    arr = _lists(dtype, kind, lengths)
    lean, general = _both(arr)
    if sum(lengths):  # no values at all: declined (the general path views no buffer)
        assert lean is not None
        _same(lean, general)
    else:
        assert lean is None
    t = la.from_arrow(arr)
    assert not t._unchecked  # a small array is scanned while converted (valid)
    assert t.lod() == [list(np.concatenate([[0], np.cumsum(lengths)]).astype(int))]


@pytest.mark.parametrize("kind", ["list", "large_list"])
@pytest.mark.parametrize("start,stop", [(1, 4), (2, 2), (0, 3), (3, 6), (5, 6)])
def test_lean_sliced(kind, start, stop):
    arr = _lists("float32", kind, [3, 0, 2, 5, 1, 4])[start:stop]
    lean, general = _both(arr)
    assert lean is not None  # a slice of empty sequences still views the values buffer
    _same(lean, general)
    # a sliced child too: the values offset
    child = pa.array(np.arange(20, dtype=np.int64))[3:]
    inner = pa.LargeListArray.from_arrays(pa.array([0, 2, 5, 9], pa.int64()), child)
    lean, general = _both(inner[1:])
    assert lean is not None
    _same(lean, general)
    assert lean[0].tolist() == [5, 6, 7, 8, 9, 10, 11]


def test_lean_chunked():
    parts = [_lists("float64", "large_list", [2, 1]), _lists("float64", "large_list", [0, 3])]
    chunked = pa.chunked_array(parts)
    t = la.from_arrow(chunked)
    assert t.lod() == [[0, 2, 3, 3, 6]]
    np.testing.assert_array_equal(t.data, np.concatenate([p.values.to_numpy() for p in parts]))
    one = la.from_arrow(pa.chunked_array(parts[:1]))
    _tensor_same(one, la.from_arrow(parts[0]))


def test_lean_from_arrow_matches_general(monkeypatch):
    arrays = [_lists(d, k, [4, 0, 1, 3], seed=i)[1:]
              for i, d in enumerate(DTYPES) for k in ("list", "large_list")]
    lean = [la.from_arrow(a) for a in arrays]
    monkeypatch.setattr(dec, "_lean_list", lambda *args: None)
    for a, t in zip(arrays, lean):
        _tensor_same(t, la.from_arrow(a))


@pytest.mark.parametrize("arr", [
    pa.array([[1.0], None, [2.0]], pa.large_list(pa.float64())),  # a null list
    pa.array([[1.0, None]], pa.large_list(pa.float64())),  # a null value
    pa.array([[True, False]], pa.large_list(pa.bool_())),  # bool: bit-packed
    pa.array([[1, 2]], pa.list_(pa.int32(), 2)),  # fixed-size list
    pa.array([[[1], [2]]], pa.large_list(pa.large_list(pa.int64()))),  # two levels
    pa.array([[[1, 2]]], pa.large_list(pa.list_(pa.int64(), 2))),  # a feature dimension
    pa.array([[1, 2], [3]], pa.large_list(pa.dictionary(pa.int8(), pa.int64()))),
    pa.array([{"a": [1]}], pa.struct([("a", pa.large_list(pa.int64()))])),
])
def test_lean_declines(arr, monkeypatch):
    p = plan(arr.type) if not pa.types.is_struct(arr.type) else None
    if p is not None and len(p.levels) == 1 and not p.features and not arr.null_count:
        assert dec._lean_list(arr, arr.buffers(), p.buffer_pos, p.levels[0][0], p.dtype) \
            is None

    def outcome():
        try:
            return la.from_arrow(arr)
        except (ValueError, TypeError) as exc:
            return exc

    got = outcome()
    monkeypatch.setattr(dec, "_lean_list", lambda *args: None)
    want = outcome()
    if isinstance(want, Exception):
        assert type(got) is type(want) and str(got) == str(want)
    else:
        _tensor_same(got, want)


def test_lean_declines_list_view():
    if not hasattr(pa, "ListViewArray"):
        pytest.skip("pyarrow without list views")
    arr = pa.ListViewArray.from_arrays(pa.array([0, 2], pa.int32()), pa.array([2, 1], pa.int32()),
                                       pa.array([1.0, 2.0, 3.0]))
    p = plan(arr.type)
    assert dec._lean_list(arr, arr.buffers(), p.buffer_pos, p.levels[0][0], p.dtype) is None
    assert la.from_arrow(arr).lod() == [[0, 2, 3]]


def test_lean_keeps_deferred_scan():
    # decreasing offsets: O(1) bounds hold, the O(n) scan is deferred to the first read
    arr = pa.LargeListArray.from_arrays(pa.array([0, 3, 1, 4], pa.int64()),
                                        pa.array(np.arange(4.0)))
    lean, general = _both(arr)
    assert lean is not None
    _same(lean, general)
    t = la.from_arrow(arr)
    with pytest.raises(la.LoDError, match="checked when first read"):
        t.lod()


def test_lean_declines_bad_bounds():
    na = pytest.importorskip("nanoarrow")
    child = na.c_array(pa.array([1.0, 2.0]))
    bad = na.c_array_from_buffers(na.large_list(na.float64()), 1,
                                  [None, np.array([0, 5], np.int64).tobytes()],
                                  children=[child], validation_level="none")
    arr = pa.Array._import_from_c_capsule(*bad.__arrow_c_array__())  # not validated
    p = plan(arr.type)
    assert dec._lean_list(arr, arr.buffers(), p.buffer_pos, p.levels[0][0], p.dtype) is None
    with pytest.raises(ValueError, match="reaches 5 but the array below has only 2"):
        la.from_arrow(arr)
