"""sequence_reverse, sequence_reshape, sequence_mask, sequence_enumerate and sequence_erase
against the oracles in reference_layout.py."""

import numpy as np
import pyarrow as pa
import pytest
from conftest import (ALL_DTYPES, NUMERIC_DTYPES, SEQUENCE_LAYOUTS, on_backend, parallel_min_work,
                      threaded, threaded_lengths, to_host)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference_layout import ref_enumerate, ref_erase, ref_mask, ref_reshape, ref_reverse
from strategies import lod_tensors, values

import lodarrow as la
from lodarrow import LoDError

# The backend fixture is a constant string, so sharing it across examples is safe.
backend_ok = settings(suppress_health_check=[*settings.default.suppress_health_check,
                                             HealthCheck.function_scoped_fixture])
MASK_DTYPES = ["bool", "uint8", "int8", "int16", "uint16", "int32", "int64", "float16",
               "float32", "float64"]


def _same_lod_tensor(t, data, lod, backend):
    t = to_host(t, backend)
    assert t.dtype == data.dtype
    assert t.numpy().shape == data.shape
    np.testing.assert_array_equal(t.numpy(), data)
    assert t.lod() == lod


def _variants(data):
    """The same values as read-only, strided and Fortran-ordered arrays."""
    readonly = data.copy()
    readonly.flags.writeable = False
    wide = np.repeat(data, 2, axis=0)[::2]
    assert not wide.flags.c_contiguous or data.shape[0] <= 1
    out = [readonly, wide]
    if data.ndim == 2:
        out.append(np.asfortranarray(data))
    return out


# ------------------------------------------------------------------ sequence_reverse

def test_reverse_doc_example(backend):
    x = la.LoDTensor(np.arange(1, 21, dtype=np.int64).reshape(5, 4), lod=[[0, 2, 5]])
    y = la.sequence_reverse(on_backend(x, backend))
    expect = np.array([[5, 6, 7, 8], [1, 2, 3, 4], [17, 18, 19, 20], [13, 14, 15, 16],
                       [9, 10, 11, 12]], dtype=np.int64)
    _same_lod_tensor(y, expect, [[0, 2, 5]], backend)


@backend_ok
@given(lod_tensors(min_levels=1, feature_shapes=[(), (1,), (3,), (2, 3), (5,)]))
def test_reverse_matches_reference(backend, t):
    y = la.sequence_reverse(on_backend(t, backend))
    ref, lod = ref_reverse(t.numpy(), t.lod())
    _same_lod_tensor(y, ref, lod, backend)


def test_reverse_layouts_and_inputs_untouched(backend):
    data = np.arange(12, dtype=np.float32).reshape(6, 2)
    for variant in _variants(data):
        before = variant.copy()
        y = la.sequence_reverse(on_backend(la.LoDTensor(variant, lod=[[0, 4, 4, 6]]), backend))
        ref, _ = ref_reverse(data, [[0, 4, 4, 6]])
        _same_lod_tensor(y, ref, [[0, 4, 4, 6]], backend)
        np.testing.assert_array_equal(variant, before)


def test_reverse_errors(backend):
    with pytest.raises(LoDError, match="sequence_reverse: x must have at least 1 LoD level"):
        la.sequence_reverse(on_backend(np.ones((3, 1)), backend))
    with pytest.raises(TypeError, match="x must be a LoDTensor"):
        la.sequence_reverse({"a": 1})


# ------------------------------------------------------------------ sequence_reshape

def test_reshape_doc_example(backend):
    x = la.LoDTensor(np.arange(1, 13, dtype=np.float32).reshape(6, 2), lod=[[0, 2, 6]])
    out = la.sequence_reshape(on_backend(x, backend), new_dim=4)
    _same_lod_tensor(out, np.arange(1, 13, dtype=np.float32).reshape(3, 4), [[0, 1, 3]], backend)


@st.composite
def reshape_cases(draw):
    t = draw(lod_tensors(min_levels=1, feature_shapes=[(), (1,), (2,), (4,), (6,)]))
    width = t.numpy().shape[1] if t.numpy().ndim == 2 else 1
    counts = [int(n) * width for n in np.diff(t.offsets[-1])]
    divisors = [d for d in range(1, 13) if all(c % d == 0 for c in counts)]
    return t, draw(st.sampled_from(divisors))


@backend_ok
@given(reshape_cases())
def test_reshape_matches_reference(backend, case):
    t, new_dim = case
    out = la.sequence_reshape(on_backend(t, backend), new_dim)
    ref, lod = ref_reshape(t.numpy(), t.lod(), new_dim)
    _same_lod_tensor(out, ref, lod, backend)


def test_reshape_copies_and_accepts_layouts(backend):
    data = np.arange(12, dtype=np.int16).reshape(6, 2)
    for variant in _variants(data):
        x = on_backend(la.LoDTensor(variant, lod=[[0, 2, 2, 6]]), backend)
        out = la.sequence_reshape(x, 4)
        _same_lod_tensor(out, data.reshape(3, 4), [[0, 1, 1, 3]], backend)
        to_host(out, backend).numpy()[...] = -1 if backend == "cpu" else 0
        np.testing.assert_array_equal(variant, data)


def test_reshape_multi_level_and_rank1(backend):
    x = la.LoDTensor(np.arange(8), lod=[[0, 1, 2], [0, 4, 8]])
    out = la.sequence_reshape(on_backend(x, backend), 2)
    _same_lod_tensor(out, np.arange(8).reshape(4, 2), [[0, 1, 2], [0, 2, 4]], backend)


def test_reshape_errors(backend):
    x = on_backend(la.LoDTensor(np.ones((5, 2)), lod=[[0, 2, 5]]), backend)
    with pytest.raises(ValueError, match=r"sequence 1 of input has 3 rows of width 2 = 6 "
                                         r"values, not divisible by new_dim=4"):
        la.sequence_reshape(x, 4)
    with pytest.raises(ValueError, match="not divisible by new_dim=1000000000000"):
        la.sequence_reshape(x, 10**12)
    with pytest.raises(ValueError, match="sequence 0 of input has 2 rows of width 2 = 4 "
                                         "values, not divisible by new_dim=10000000000000000000"):
        la.sequence_reshape(x, 10**19)
    empty = on_backend(la.LoDTensor(np.ones((0, 2)), lod=[[0, 0]]), backend)
    assert to_host(la.sequence_reshape(empty, 8), backend).numpy().shape == (0, 8)
    with pytest.raises(ValueError, match="new_dim=10000000000000000000 would make an output"):
        la.sequence_reshape(empty, 10**19)
    with pytest.raises(ValueError, match="new_dim must be >= 1, got 0"):
        la.sequence_reshape(x, 0)
    with pytest.raises(TypeError, match="new_dim must be an integer"):
        la.sequence_reshape(x, 2.0)
    with pytest.raises(ValueError, match=r"input must be of shape \[N, D\]"):
        la.sequence_reshape(on_backend(la.LoDTensor(np.ones((2, 2, 2)), lod=[[0, 2]]),
                                       backend), 2)
    with pytest.raises(LoDError, match="sequence_reshape: input must have at least 1"):
        la.sequence_reshape(on_backend(np.ones((2, 2)), backend), 2)


# ------------------------------------------------------------------ sequence_mask

def test_mask_doc_example(backend):
    out = la.sequence_mask(on_backend(np.array([3, 1, 1, 0]), backend), maxlen=4)
    expect = np.array([[1, 1, 1, 0], [1, 0, 0, 0], [1, 0, 0, 0], [0, 0, 0, 0]], np.int64)
    _same_lod_tensor(out, expect, [], backend)


@backend_ok
@given(st.sampled_from(["int8", "uint8", "int16", "int32", "int64", "uint16", "float16",
                        "float32", "float64"]),
       st.sampled_from(MASK_DTYPES), st.sampled_from([(0,), (4,), (2, 3), ()]),
       st.one_of(st.none(), st.integers(0, 7)), st.data())
def test_mask_matches_reference(backend, x_dtype, out_dtype, shape, maxlen, data):
    elements = (st.floats(-3, 9, width=16) if x_dtype == "float16" else
                st.floats(-3, 9, width=32) if x_dtype.startswith("float") else
                st.integers(0 if x_dtype.startswith("u") else -3, 9))
    x = data.draw(values(x_dtype, shape, elements=elements))
    out = la.sequence_mask(on_backend(x, backend), maxlen=maxlen, dtype=out_dtype)
    _same_lod_tensor(out, ref_mask(x, maxlen, out_dtype), [], backend)


def test_mask_widths_and_forms(backend):
    x = on_backend(np.array([[2, 0], [-1, 5]], dtype=np.int32), backend)
    assert to_host(la.sequence_mask(x), backend).numpy().shape == (2, 2, 5)
    # maxlen=-1 is Paddle's "unset"
    assert to_host(la.sequence_mask(x, maxlen=-1), backend).numpy().shape == (2, 2, 5)
    assert to_host(la.sequence_mask(x, maxlen=0), backend).numpy().shape == (2, 2, 0)
    out = la.sequence_mask(x, maxlen=on_backend(np.array([3], np.int32), backend),
                           dtype=np.dtype("float32"))
    _same_lod_tensor(out, ref_mask(np.array([[2, 0], [-1, 5]]), 3, "float32"), [], backend)
    neg = on_backend(np.array([-2, 0]), backend)
    assert to_host(la.sequence_mask(neg), backend).numpy().shape == (2, 0)
    empty = on_backend(np.zeros((0, 3), np.int64), backend)
    assert to_host(la.sequence_mask(empty), backend).numpy().shape == (0, 3, 0)
    scalar = la.sequence_mask(on_backend(np.array(2), backend), maxlen=3, dtype="bool")
    _same_lod_tensor(scalar, np.array([True, True, False]), [], backend)
    floats = on_backend(np.array([2.5, np.nan, 0.1]), backend)
    _same_lod_tensor(la.sequence_mask(floats, maxlen=4, dtype="int8"),
                     np.array([[1, 1, 1, 0], [0, 0, 0, 0], [1, 0, 0, 0]], np.int8), [], backend)
    # a float max(x) is truncated as Paddle's static_cast<int>: width 2 for 2.5
    assert to_host(la.sequence_mask(on_backend(np.array([2.5]), backend)), backend).numpy().shape \
        == (1, 2)
    lod_x = on_backend(la.LoDTensor(np.array([1, 2]), lod=[[0, 2]]), backend)
    assert to_host(la.sequence_mask(lod_x), backend).lod() == []
    _same_lod_tensor(la.sequence_mask([1, 0]), np.array([[1], [0]], np.int64), [], "cpu")


def test_mask_layouts(backend):
    data = np.array([[1, 3], [0, 2], [2, 2]], dtype=np.int64)
    for variant in _variants(data):
        out = la.sequence_mask(on_backend(variant, backend), maxlen=3)
        _same_lod_tensor(out, ref_mask(data, 3, "int64"), [], backend)


def test_mask_errors(backend):
    x = on_backend(np.array([1, 2]), backend)
    with pytest.raises(TypeError, match="x must hold integer or float lengths, got dtype bool"):
        la.sequence_mask(on_backend(np.array([True]), backend))
    with pytest.raises(TypeError, match="dtype complex64 is not supported"):
        la.sequence_mask(x, dtype="complex64")
    with pytest.raises(TypeError, match="dtype 'nonsense' is not a dtype"):
        la.sequence_mask(x, dtype="nonsense")
    with pytest.raises(TypeError, match="maxlen must be an integer"):
        la.sequence_mask(x, maxlen=2.0)
    with pytest.raises(TypeError, match="maxlen must hold an integer"):
        la.sequence_mask(x, maxlen=np.array([2.0]))
    with pytest.raises(ValueError, match="a maxlen array must hold one value"):
        la.sequence_mask(x, maxlen=np.array([2, 3]))
    with pytest.raises(ValueError, match="a maxlen array must hold a value > 0, got 0"):
        la.sequence_mask(x, maxlen=np.array([0]))
    with pytest.raises(ValueError, match=r"maxlen=1000000000000000 would make an output"):
        la.sequence_mask(x, maxlen=10**15)
    with pytest.raises(ValueError, match="far beyond"):
        la.sequence_mask(on_backend(np.zeros(0, np.int32), backend), maxlen=10**15)
    with pytest.raises(ValueError, match="x holds nan"):
        la.sequence_mask(on_backend(np.array([1.0, np.nan]), backend))
    with pytest.raises(ValueError, match="x holds inf"):
        la.sequence_mask(on_backend(np.array([np.inf]), backend))


# ------------------------------------------------------------------ sequence_enumerate

def test_enumerate_doc_example(backend):
    x = la.LoDTensor(np.array([[1], [2], [3], [4], [5]], dtype=np.int32), lod=[[0, 3, 5]])
    out = la.sequence_enumerate(on_backend(x, backend), win_size=2, pad_value=0)
    expect = np.array([[1, 2], [2, 3], [3, 0], [4, 5], [5, 0]], dtype=np.int32)
    _same_lod_tensor(out, expect, [[0, 3, 5]], backend)


@backend_ok
@given(lod_tensors(min_levels=1, feature_shapes=[(), (1,)]), st.integers(1, 7), st.data())
def test_enumerate_matches_reference(backend, t, win, data):
    pad = data.draw(values(t.dtype, ()))
    out = la.sequence_enumerate(on_backend(t, backend), win, pad)
    ref, lod = ref_enumerate(t.numpy(), t.lod(), win, pad)
    _same_lod_tensor(out, ref, lod, backend)


def test_enumerate_layouts_and_pad_forms(backend):
    data = np.array([[1.5], [2.5], [3.5]], dtype=np.float64)
    for variant in _variants(data):
        x = on_backend(la.LoDTensor(variant, lod=[[0, 2, 3]]), backend)
        for pad in (-1, -1.0, np.float32(-1), np.array([-1.0])):
            out = la.sequence_enumerate(x, 3, pad)
            _same_lod_tensor(out, np.array([[1.5, 2.5, -1], [2.5, -1, -1], [3.5, -1, -1]]),
                             [[0, 2, 3]], backend)


def test_enumerate_win_size_beyond_longest_and_one(backend):
    x = on_backend(la.LoDTensor(np.array([7, 8], np.int64), lod=[[0, 2]]), backend)
    _same_lod_tensor(la.sequence_enumerate(x, 1), np.array([[7], [8]]), [[0, 2]], backend)
    out = la.sequence_enumerate(x, 5, pad_value=9)
    _same_lod_tensor(out, np.array([[7, 8, 9, 9, 9], [8, 9, 9, 9, 9]]), [[0, 2]], backend)


def test_enumerate_errors(backend):
    x = on_backend(la.LoDTensor(np.array([[1], [2]], np.int32), lod=[[0, 2]]), backend)
    with pytest.raises(ValueError, match=r"input must be of shape \[N, 1\] or \[N\], got "
                                         r"shape \(2, 2\)"):
        la.sequence_enumerate(on_backend(la.LoDTensor(np.ones((2, 2)), lod=[[0, 2]]),
                                         backend), 2)
    with pytest.raises(ValueError, match="win_size must be >= 1, got 0"):
        la.sequence_enumerate(x, 0)
    with pytest.raises(TypeError, match="win_size must be an integer"):
        la.sequence_enumerate(x, 2.0)
    with pytest.raises(ValueError, match="win_size=1000000000000000 would make an output"):
        la.sequence_enumerate(x, 10**15)
    with pytest.raises(TypeError, match="is not integral"):
        la.sequence_enumerate(x, 2, pad_value=0.5)
    with pytest.raises(ValueError, match=r"pad_value must have shape \(\), \(1,\)"):
        la.sequence_enumerate(x, 2, pad_value=np.zeros(2, np.int32))
    with pytest.raises(LoDError, match="sequence_enumerate: input must have at least 1"):
        la.sequence_enumerate(on_backend(np.ones((2, 1), np.int32), backend), 2)


# ------------------------------------------------------------------ sequence_erase

def test_erase_doc_examples(backend):
    data = np.array([[2], [2], [6], [1], [3], [9], [6], [1], [0], [1]], dtype=np.int64)
    x = on_backend(la.LoDTensor(data, lod=[[0, 3, 6, 10]]), backend)
    out = la.sequence_erase(x, tokens=[2, 3, 5])
    _same_lod_tensor(out, np.array([[6], [1], [9], [6], [1], [0], [1]]), [[0, 1, 3, 7]], backend)
    x = on_backend(la.LoDTensor(np.array([[1], [2], [3], [4], [5]], np.int32),
                                lod=[[0, 2, 3, 5]]), backend)
    _same_lod_tensor(la.sequence_erase(x, tokens=[]),
                     np.array([[1], [2], [3], [4], [5]], np.int32), [[0, 2, 3, 5]], backend)


@st.composite
def erase_cases(draw):
    t = draw(lod_tensors(dtypes=NUMERIC_DTYPES, min_levels=1, feature_shapes=[(), (1,)],
                         max_len=8, elements=st.integers(0, 6)))
    tokens = draw(st.lists(st.one_of(st.integers(-1, 7), st.sampled_from(
        [0.0, -0.0, 1.0, 2.5, float("nan"), 300, -(2**70)])), max_size=12))
    return t, tokens


@backend_ok
@given(erase_cases())
def test_erase_matches_reference(backend, case):
    t, tokens = case
    out = la.sequence_erase(on_backend(t, backend), tokens)
    ref, lod = ref_erase(t.numpy(), t.lod(), tokens)
    _same_lod_tensor(out, ref, lod, backend)


def test_erase_by_value_and_layouts(backend):
    data = np.array([[0.5], [-0.0], [np.nan], [16777216.0], [3.0]], dtype=np.float32)
    for variant in _variants(data):
        x = on_backend(la.LoDTensor(variant, lod=[[0, 2, 5]]), backend)
        out = la.sequence_erase(x, [0.0, np.nan, 16777217, np.int64(3)])
        _same_lod_tensor(out, np.array([[0.5], [np.nan], [16777216.0]], np.float32),
                         [[0, 1, 3]], backend)
    x = on_backend(la.LoDTensor(np.array([1, 2, 3], np.int8), lod=[[0, 3]]), backend)
    out = la.sequence_erase(x, np.array([2.0, 300.0, 1.5]))
    _same_lod_tensor(out, np.array([1, 3], np.int8), [[0, 2]], backend)


def test_erase_many_tokens_and_multi_level(backend):
    data = np.arange(40, dtype=np.int32) % 13
    x = on_backend(la.LoDTensor(data, lod=[[0, 1, 3], [0, 10, 25, 40]]), backend)
    tokens = list(range(0, 13, 2))  # more than the linear-scan threshold
    out = la.sequence_erase(x, tokens)
    ref, lod = ref_erase(data, [[0, 1, 3], [0, 10, 25, 40]], tokens)
    _same_lod_tensor(out, ref, lod, backend)


@pytest.mark.parametrize("dtype", ["int8", "uint16", "int32", "int64"])
def test_erase_token_lookup_paths(backend, dtype):
    # compact tokens (a table), few spread tokens (a scan), many spread tokens (a search)
    info = np.iinfo(dtype)
    data = np.array([info.min, -1 if info.min else 0, 0, 5, 9, info.max, 7, 5], dtype=dtype)
    x = on_backend(la.LoDTensor(data, lod=[[0, 3, 3, 8]]), backend)
    spread = [int(info.min), int(info.max)] + [int(info.max) - 3 * k for k in range(1, 10)]
    for tokens in ([5, 9, 0], [int(info.min), int(info.max)], spread,
                   [-(2**70), 2**70, 5.0]):
        out = la.sequence_erase(x, tokens)
        ref, lod = ref_erase(data, [[0, 3, 3, 8]], tokens)
        _same_lod_tensor(out, ref, lod, backend)


def test_erase_errors(backend):
    x = on_backend(la.LoDTensor(np.array([[1], [2]], np.int32), lod=[[0, 2]]), backend)
    with pytest.raises(ValueError, match=r"input must be of shape \[N, 1\] or \[N\]"):
        la.sequence_erase(on_backend(la.LoDTensor(np.ones((2, 3)), lod=[[0, 2]]), backend),
                          [1])
    with pytest.raises(TypeError, match="input must hold integers or floats, got dtype bool"):
        la.sequence_erase(on_backend(la.LoDTensor(np.ones(2, bool), lod=[[0, 2]]), backend),
                          [1])
    with pytest.raises(TypeError, match="tokens must be a list or 1-D array of numbers, got int"):
        la.sequence_erase(x, 2)
    with pytest.raises(TypeError, match=r"tokens\[1\] = 'a' is not a number"):
        la.sequence_erase(x, [1, "a"])
    with pytest.raises(TypeError, match="tokens must be numbers, got dtype <U1"):
        la.sequence_erase(x, np.array(["a"]))
    with pytest.raises(ValueError, match="tokens must be 1-D"):
        la.sequence_erase(x, np.ones((2, 2), np.int32))
    with pytest.raises(LoDError, match="sequence_erase: input must have at least 1"):
        la.sequence_erase(on_backend(np.ones((2, 1), np.int32), backend), [1])


# ------------------------------------------------------------------ every dtype moves

@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_data_moving_ops_take_every_dtype(backend, dtype):
    data = np.array([1, 0, 1, 1], dtype=dtype)
    x = on_backend(la.LoDTensor(data, lod=[[0, 1, 4]]), backend)
    _same_lod_tensor(la.sequence_reverse(x), np.array([1, 1, 1, 0], dtype=dtype), [[0, 1, 4]],
                     backend)
    _same_lod_tensor(la.sequence_reshape(x, 1), data.reshape(4, 1), [[0, 1, 4]], backend)
    _same_lod_tensor(la.sequence_enumerate(x, 2, 0),
                     np.array([[1, 0], [0, 1], [1, 1], [1, 0]], dtype=dtype), [[0, 1, 4]], backend)


# ------------------------------------------------------------------ large: threaded chunks

@threaded
@pytest.mark.parametrize("layout", SEQUENCE_LAYOUTS)
def test_threaded_reverse_enumerate_erase(backend, threads, layout):
    rng = np.random.default_rng(2)
    lens = threaded_lengths(rng, parallel_min_work() * 5 // 4, layout)
    offsets = np.concatenate([[0], np.cumsum(lens)])
    seq = np.repeat(np.arange(lens.size), lens)  # the sequence of every row
    n = int(offsets[-1])
    data = rng.integers(0, 50, n).astype(np.int32)
    x = on_backend(la.LoDTensor(data, lod=[offsets]), backend)
    rows = np.arange(n)
    ends = offsets[1:][seq]
    _same_lod_tensor(la.sequence_reverse(x), data[offsets[:-1][seq] + ends - 1 - rows],
                     [offsets.tolist()], backend)
    idx = rows[:, None] + np.arange(3)
    inside = idx < ends[:, None]
    expect = np.where(inside, data[np.minimum(idx, n - 1)], -7).astype(np.int32)
    _same_lod_tensor(la.sequence_enumerate(x, 3, -7), expect, [offsets.tolist()], backend)
    tokens = list(range(0, 50, 3))
    keep = ~np.isin(data, tokens)
    kept_before = np.concatenate([[0], np.cumsum(keep)])
    _same_lod_tensor(la.sequence_erase(x, tokens), data[keep],
                     [kept_before[offsets].tolist()], backend)


@threaded
def test_threaded_mask(backend, threads):
    rng = np.random.default_rng(4)
    x = rng.integers(-2, 30, parallel_min_work() // 20 + 1)  # an odd row count
    out = la.sequence_mask(on_backend(x, backend), maxlen=25, dtype="float16")
    assert x.size * 25 > parallel_min_work()
    _same_lod_tensor(out, ref_mask(x, 25, "float16"), [], backend)


# ------------------------------------------------------------------ Arrow inputs

def test_layout_ops_take_arrow_arrays():
    arr = pa.array([[1, 2, 3], [], [4, 2]], type=pa.list_(pa.int32()))
    lod = [[0, 3, 3, 5]]
    _same_lod_tensor(la.sequence_reverse(arr), np.array([3, 2, 1, 2, 4], np.int32), lod, "cpu")
    _same_lod_tensor(la.sequence_reshape(arr, 1), np.array([[1], [2], [3], [4], [2]],
                                                           np.int32), lod, "cpu")
    _same_lod_tensor(la.sequence_enumerate(arr, 2),
                     np.array([[1, 2], [2, 3], [3, 0], [4, 2], [2, 0]], np.int32), lod, "cpu")
    _same_lod_tensor(la.sequence_erase(arr, [2]), np.array([1, 3, 4], np.int32),
                     [[0, 2, 2, 3]], "cpu")
    _same_lod_tensor(la.sequence_mask(pa.array([2, 0], type=pa.uint8()), maxlen=2),
                     np.array([[1, 1], [0, 0]], np.int64), [], "cpu")
