"""The CPU backend's output allocation: large outputs from Arrow's memory pool."""

import pickle

import numpy as np
import pyarrow as pa
import pytest
from conftest import run_python

import lodarrow as la
from lodarrow._backends import CPU
from lodarrow._backends.cpu import POOL_MIN_BYTES, empty


def _from_pool(arr):
    """True if ``arr``'s memory is a ``pyarrow.Buffer`` (the chain of ``.base``)."""
    base = arr
    while isinstance(base, np.ndarray):
        base = base.base
    return isinstance(base, pa.Buffer)


SHAPES = [(0,), (0, 7), (5, 0, 3), (3,), (4, 3, 2), (POOL_MIN_BYTES,), (POOL_MIN_BYTES // 8, 3),
          (1000, 300, 4), (POOL_MIN_BYTES - 1,)]
DTYPES = [np.float16, np.float32, np.float64, np.bool_, np.int8, np.uint16, np.int64]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_empty_shape_dtype_flags(shape, dtype):
    a = empty(shape, np.dtype(dtype))
    assert a.shape == shape and a.dtype == np.dtype(dtype)
    assert a.flags.writeable and a.flags.c_contiguous
    pooled = a.nbytes >= POOL_MIN_BYTES
    assert _from_pool(a) == pooled
    if pooled:
        assert a.ctypes.data % 64 == 0
    a[...] = 1  # every element writable
    assert (a == 1).all()


def test_empty_takes_dtype_likes_and_int_shapes():
    assert empty((3,), "float32").dtype == np.float32
    assert empty(5, np.dtype(np.int8)).shape == (5,)
    a = empty((POOL_MIN_BYTES,), np.int8)
    assert a.dtype == np.int8 and _from_pool(a)


def test_pool_memory_lives_with_the_array():
    before = pa.total_allocated_bytes()
    a = empty((POOL_MIN_BYTES // 4, 2), np.dtype(np.float32))
    assert pa.total_allocated_bytes() - before >= a.nbytes
    view = a[1:]
    del a
    assert pa.total_allocated_bytes() - before >= view.nbytes  # the view keeps the buffer
    view[...] = 7.0
    del view
    assert pa.total_allocated_bytes() == before


def test_object_dtype_never_from_pool():
    a = empty((POOL_MIN_BYTES,), np.dtype(object))
    assert not _from_pool(a)
    assert a[0] is None


def test_errors_are_numpys():
    with pytest.raises(ValueError, match="negative dimensions"):
        empty((-1, POOL_MIN_BYTES), np.dtype(np.float64))
    with pytest.raises(Exception) as ours:
        empty((1 << 40, 1 << 30), np.dtype(np.float64))
    with pytest.raises(Exception) as numpys:
        np.empty((1 << 40, 1 << 30), np.float64)
    assert type(ours.value) is type(numpys.value)


def test_above_two_gib():
    a = empty(((1 << 31) + 64,), np.dtype(np.int8))
    assert _from_pool(a) and a.ctypes.data % 64 == 0
    a[0], a[-1] = 1, 2
    assert (int(a[0]), int(a[-1])) == (1, 2)


def test_large_operator_output_is_an_ordinary_array():
    n = POOL_MIN_BYTES // 8
    x = la.LoDTensor(np.arange(2 * n, dtype=np.float64), lod=[[0, n, 2 * n]])
    out = la.sequence_reverse(x)
    assert _from_pool(out.data) and out.data.flags.writeable
    np.testing.assert_array_equal(out.numpy(), np.r_[np.arange(n)[::-1], np.arange(n, 2 * n)[::-1]])
    # Arrow out: zero-copy over the same memory
    arr = out.to_arrow()
    assert arr.values.buffers()[1].address == out.data.ctypes.data
    assert np.asarray(out.data).ctypes.data == out.data.ctypes.data
    assert np.shares_memory(np.from_dlpack(out.data), out.data)
    back = pickle.loads(pickle.dumps(out))
    assert back.equals(out)
    copied = out.data.copy()
    assert not _from_pool(copied)
    np.testing.assert_array_equal(copied, out.data)


def _poisoned_empty(shape, dtype):
    """Allocation full of a byte pattern: an element a kernel leaves unwritten shows."""
    a = np.empty(shape, dtype)
    a.view(np.uint8)[...] = 0xA5
    return a


def _operator_calls():
    rng = np.random.default_rng(5)
    n = 300
    lod = [[0, 40, 40, 170, 300]]
    f = la.LoDTensor(rng.standard_normal((n, 3)).astype(np.float32), lod=lod)
    v = la.LoDTensor(rng.standard_normal(n), lod=lod)
    ids = la.LoDTensor(rng.integers(0, 9, n).astype(np.int64), lod=lod)
    y = la.LoDTensor(np.zeros(4), lod=[[0, 2, 2, 3, 4]])
    padded, length = la.sequence_pad(f, np.float32(0), maxlen=150)
    w = rng.standard_normal((9, 2)).astype(np.float32)
    return [
        lambda: la.sequence_pad(f, np.float32(1.5), maxlen=150),
        lambda: la.sequence_unpad(padded, length),
        lambda: la.sequence_expand(f, y),
        lambda: la.sequence_expand(la.LoDTensor(f.data[:4]), y),
        lambda: la.sequence_expand_as(la.LoDTensor(f.data[:4]), y),
        lambda: la.sequence_concat([f, f]),
        lambda: la.sequence_enumerate(ids, 4, pad_value=0),
        lambda: la.sequence_mask(length, maxlen=160, dtype="float16"),
        lambda: la.sequence_reverse(f),
        lambda: la.sequence_softmax(v),
        lambda: [la.sequence_pool(f, p) for p in ("sum", "average", "sqrt", "max", "min",
                                                  "first", "last")],
        lambda: la.sequence_pool(f, "max", return_index=True),
        lambda: la.sequence_slice(f, np.array([[0], [0], [5], [10]]),
                                  np.array([[3], [0], [100], [2]])),
        lambda: la.sequence_reshape(f, 1),
        lambda: la.sequence_erase(ids, [2, 3]),
        lambda: la.sequence_scatter(la.LoDTensor(np.zeros((4, 9))), ids,
                                    la.LoDTensor(np.ones(n), lod=lod)),
        lambda: la.sequence_conv(f, w, 0, 3),
    ]


def _flat(result):
    if isinstance(result, (list, tuple)):
        return [x for r in result for x in _flat(r)]
    return [(result.numpy(), result.lod())]


@pytest.mark.parametrize("call", range(len(_operator_calls())))
def test_every_output_element_is_written(monkeypatch, call):
    """Pool memory is not zeroed: the result must not depend on what the allocation held."""
    fn = _operator_calls()[call]
    want = _flat(fn())
    monkeypatch.setattr(CPU, "empty", _poisoned_empty)
    got = _flat(fn())
    assert len(got) == len(want)
    for (a, lod_a), (b, lod_b) in zip(got, want):
        assert lod_a == lod_b
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))


@pytest.mark.parametrize("setting, pooled", [("0", False), ("1", True)])
def test_opt_out(setting, pooled):
    code = ("import numpy as np, lodarrow as la, pyarrow as pa\n"
            "n = 1 << 20\n"
            "x = la.LoDTensor(np.arange(n, dtype=np.float64), lod=[[0, n]])\n"
            "b = pa.total_allocated_bytes()\n"
            "out = la.sequence_reverse(x)\n"
            "print(pa.total_allocated_bytes() - b >= out.data.nbytes)\n")
    res = run_python(["-c", code], env={"LODARROW_ARROW_POOL": setting}, check=True)
    assert res.stdout.strip() == str(pooled)
