"""sequence_conv (docs/operators.md#sequence_conv, #filter-argument-of-sequence_conv)."""

import importlib

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lodarrow as la
from conftest import on_backend, to_host
from reference_numeric import ref_conv
from strategies import lod_tensors

# The package attribute of the same name is the function: fetch the module itself.
conv_module = importlib.import_module("lodarrow._ops.sequence_conv")
fixture_ok = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])

TOL = {"float16": dict(rtol=1e-2, atol=0.5), "float32": dict(rtol=1e-5, atol=1e-3),
       "float64": dict(rtol=1e-12, atol=1e-9)}


def check(x, filt, backend, context_start=None, context_length=None, padding=None, bias=None):
    data = x.numpy()
    d = 1 if data.ndim == 1 else data.shape[1]
    cl = filt.shape[0] // d if context_length is None else context_length
    cs = -(cl // 2) if context_start is None else context_start
    args = [on_backend(a, backend) if a is not None else None for a in (filt, padding, bias)]
    out = la.sequence_conv(on_backend(x, backend), args[0], context_start=context_start,
                           context_length=context_length, padding_data=args[1], bias=args[2])
    out = to_host(out, backend)
    want = ref_conv(data, x.offsets[-1], filt, cs, cl, padding, bias)
    out_dtype = data.dtype if data.dtype.kind == "f" else np.dtype(np.float64)
    assert out.dtype == out_dtype
    assert out.shape() == [data.shape[0], filt.shape[1]]
    assert out.lod() == x.lod()
    np.testing.assert_allclose(out.numpy().astype(np.float64), want, **TOL[str(out_dtype)])
    return out


def test_docstring_case_context_project():
    """The example of Paddle's context_project.h: 4 words of width 2, lod [0, 3, 4]."""
    a1, a2, b1, b2, c1, c2, d1, d2 = 1., 2., 3., 4., 5., 6., 7., 8.
    w1, w2, w3, w4 = 10., 20., 30., 40.
    x = la.LoDTensor(np.array([[a1, a2], [b1, b2], [c1, c2], [d1, d2]]), lod=[[0, 3, 4]])
    eye = np.eye(6)
    out = la.sequence_conv(x, eye, context_start=-1, context_length=3).numpy()
    np.testing.assert_array_equal(out, [[0, 0, a1, a2, b1, b2],
                                        [a1, a2, b1, b2, c1, c2],
                                        [b1, b2, c1, c2, 0, 0],
                                        [0, 0, d1, d2, 0, 0]])
    padded = la.sequence_conv(x, eye, context_start=-1, context_length=3,
                              padding_data=np.array([[w1, w2], [w3, w4]])).numpy()
    np.testing.assert_array_equal(padded, [[w1, w2, a1, a2, b1, b2],
                                           [a1, a2, b1, b2, c1, c2],
                                           [b1, b2, c1, c2, w3, w4],
                                           [w1, w2, d1, d2, w3, w4]])


def test_defaults_bias_and_float32(backend):
    rng = np.random.default_rng(0)
    data = rng.standard_normal((9, 4)).astype(np.float32)
    x = la.LoDTensor(data, lod=[[0, 2, 2, 9]])
    filt = rng.standard_normal((12, 5)).astype(np.float32)      # context_length 3
    bias = rng.standard_normal(5).astype(np.float32)
    check(x, filt, backend)
    check(x, filt, backend, bias=bias)
    check(x, filt, backend, bias=bias.reshape(1, 5))


@pytest.mark.parametrize("context_start, context_length",
                         [(-1, 3), (0, 1), (0, 3), (2, 2), (5, 2), (-2, 2), (-3, 2), (-6, 3),
                          (-4, 7), (1, 1), (-1, 1), (3, 4), (-2, 5)])
@pytest.mark.parametrize("with_padding", [False, True])
def test_every_context_sign(backend, context_start, context_length, with_padding):
    rng = np.random.default_rng(context_length * 31 + context_start)
    lengths = [1, 0, 2, 3, 5, 8, 1, 4]
    n = sum(lengths)
    data = rng.standard_normal((n, 2))
    x = la.LoDTensor(data, lengths=[lengths])
    filt = rng.standard_normal((2 * context_length, 3))
    up = max(0, -context_start)
    down = max(0, context_start + context_length - 1)
    padding = rng.standard_normal((up + down, 2)) if with_padding else None
    check(x, filt, backend, context_start, context_length, padding)


@st.composite
def conv_cases(draw):
    x = draw(lod_tensors(dtypes=["float16", "float32", "float64", "int8", "int32", "uint16"],
                         feature_shapes=[(), (1,), (2,), (3,)], min_levels=1, max_levels=3))
    d = 1 if x.numpy().ndim == 1 else x.numpy().shape[1]
    cl = draw(st.integers(1, 5))
    cs = draw(st.integers(-6, 4))
    f_out = draw(st.integers(1, 4))
    filt = draw(st.lists(st.integers(-3, 3), min_size=cl * d * f_out,
                         max_size=cl * d * f_out))
    filt = np.array(filt, dtype=np.float64).reshape(cl * d, f_out) / 4
    padding = None
    if draw(st.booleans()):
        rows = max(0, -cs) + max(0, cs + cl - 1)
        padding = np.arange(rows * d, dtype=np.float64).reshape(rows, d) - 3.5
    bias = np.linspace(-1, 1, f_out) if draw(st.booleans()) else None
    return x, filt, cs, cl, padding, bias


@fixture_ok
@given(case=conv_cases())
def test_matches_reference(backend, case):
    x, filt, cs, cl, padding, bias = case
    dtype = x.numpy().dtype
    if dtype == np.float32 or dtype == np.float16:
        filt = filt.astype(dtype)
        padding = None if padding is None else padding.astype(dtype)
        bias = None if bias is None else bias.astype(dtype)
    check(x, filt, backend, cs, cl, padding, bias)


def test_blocks_of_rows(backend, monkeypatch):
    """Tiny blocks: contexts cross block edges; integer input is converted block by block."""
    monkeypatch.setattr(conv_module, "CHUNK_ELEMENTS", 7)
    rng = np.random.default_rng(4)
    lengths = rng.integers(0, 9, 40)
    n = int(lengths.sum())
    for data in (rng.standard_normal((n, 2)).astype(np.float32),
                 rng.integers(-50, 50, (n, 2)).astype(np.int16),
                 rng.standard_normal((n, 2)).astype(np.float16)):
        x = la.LoDTensor(data, lengths=[lengths])
        for cs, cl in ((-2, 3), (1, 2), (-3, 1)):
            filt = (rng.integers(-2, 3, (2 * cl, 3)) / 2).astype(
                np.float64 if data.dtype.kind == "i" else data.dtype)
            rows = max(0, -cs) + max(0, cs + cl - 1)
            pad = np.ones((rows, 2), filt.dtype)
            check(x, filt, backend, cs, cl)
            check(x, filt, backend, cs, cl, padding=pad, bias=filt[0])


def test_large_input_threads(backend):
    rng = np.random.default_rng(9)
    lengths = rng.geometric(1 / 20, size=5000)
    data = rng.standard_normal((int(lengths.sum()), 8)).astype(np.float32)
    x = la.LoDTensor(data, lengths=[lengths])
    filt = rng.standard_normal((24, 16)).astype(np.float32)
    check(x, filt, backend)


def test_levels_and_rank1(backend):
    data = np.arange(7, dtype=np.float64)
    x = la.LoDTensor(data, lengths=[[2, 1], [3, 0, 4]])
    out = check(x, np.ones((2, 1)), backend, context_start=0)
    assert out.lod() == [[0, 2, 3], [0, 3, 3, 7]]
    np.testing.assert_array_equal(out.numpy().ravel(), [1, 3, 2, 7, 9, 11, 6])


def test_zero_rows_width_and_filters(backend):
    x = la.LoDTensor(np.zeros((0, 3), np.float32), lod=[[0]])
    out = to_host(la.sequence_conv(on_backend(x, backend),
                                   on_backend(np.ones((9, 2), np.float32), backend)), backend)
    assert out.shape() == [0, 2] and out.lod() == [[0]]
    x = la.LoDTensor(np.ones((3, 2), np.float32), lod=[[0, 3]])
    out = to_host(la.sequence_conv(on_backend(x, backend),
                                   on_backend(np.ones((6, 0), np.float32), backend)), backend)
    assert out.shape() == [3, 0]
    flat = la.LoDTensor(np.ones((3, 0), np.float32), lod=[[0, 1, 3]])
    out = to_host(la.sequence_conv(on_backend(flat, backend),
                                   on_backend(np.ones((0, 2), np.float32), backend),
                                   context_length=2,
                                   bias=on_backend(np.array([1., 2.], np.float32), backend)),
                  backend)
    np.testing.assert_array_equal(out.numpy(), [[1, 2]] * 3)


def test_far_context_start_is_all_padding(backend):
    x = la.LoDTensor(np.ones((4, 1)), lod=[[0, 4]])
    for cs in (10**15, -10**15, 2**62):
        out = to_host(la.sequence_conv(on_backend(x, backend), on_backend(np.ones((2, 1)), backend),
                                       context_start=cs), backend)
        np.testing.assert_array_equal(out.numpy(), np.zeros((4, 1)))


def test_errors():
    x = la.LoDTensor(np.ones((4, 2), np.float32), lod=[[0, 4]])
    w = np.ones((6, 3), np.float32)
    with pytest.raises(la.LoDError, match="sequence_conv: input must have at least 1 LoD "
                                          "level, got 0"):
        la.sequence_conv(np.ones((4, 2), np.float32), w)
    deep = la.LoDTensor(np.ones((4, 2, 1), np.float32), lod=[[0, 4]])
    with pytest.raises(ValueError, match=r"input must have shape \[N, D\] \(or \[N\]\), got "
                                         r"\[4, 2, 1\]"):
        la.sequence_conv(deep, w)
    with pytest.raises(TypeError, match="input of dtype bool cannot be convolved"):
        la.sequence_conv(la.LoDTensor(np.ones((4, 2), bool), lod=[[0, 4]]), w)
    with pytest.raises(ValueError, match=r"filter must be 2-D \[context_length \* D, F\], got "
                                         r"shape \[6\]"):
        la.sequence_conv(x, np.ones(6))
    with pytest.raises(ValueError, match="cannot infer context_length: filter has 5 rows, not "
                                         "a multiple of the input width D = 2"):
        la.sequence_conv(x, np.ones((5, 3)))
    with pytest.raises(ValueError, match=r"filter must have context_length \* D = 2 \* 2 = 4 "
                                         r"rows, got 6"):
        la.sequence_conv(x, w, context_length=2)
    with pytest.raises(ValueError, match="context_length must be >= 1, got 0"):
        la.sequence_conv(x, np.ones((0, 3)), context_length=0)
    with pytest.raises(ValueError, match="context_stride must be 1 \\(as in Paddle\\), got 2"):
        la.sequence_conv(x, w, context_stride=2)
    with pytest.raises(TypeError, match="context_start must be an integer, got float"):
        la.sequence_conv(x, w, context_start=1.5)
    with pytest.raises(TypeError, match="context_length must be an integer, got str"):
        la.sequence_conv(x, w, context_length="3")
    with pytest.raises(ValueError, match=r"padding_data must have shape \[up \+ down, D\] = "
                                         r"\[1 \+ 1, 2\] for context_start=-1, "
                                         r"context_length=3, got \[3, 2\]"):
        la.sequence_conv(x, w, padding_data=np.ones((3, 2)))
    with pytest.raises(ValueError, match=r"bias must have shape \[F\] or \[1, F\] with F = 3, "
                                         r"got \[2\]"):
        la.sequence_conv(x, w, bias=np.ones(2))
    with pytest.raises(TypeError, match="filter must be a numeric array \\(integer or "
                                        "float\\), got dtype bool"):
        la.sequence_conv(x, np.ones((6, 3), bool))
    with pytest.raises(TypeError, match="bias must be a numeric array"):
        la.sequence_conv(x, w, bias=np.array(["a", "b", "c"]))


def test_readonly_strided_fortran_inputs_untouched(backend):
    rng = np.random.default_rng(6)
    base = rng.standard_normal((7, 6))
    readonly = base[:, ::3].copy()
    readonly.flags.writeable = False
    filt = np.asfortranarray(rng.standard_normal((6, 4)))[:, ::1]
    filt.flags.writeable = False
    for data in (base[:, ::3], np.asfortranarray(base[:, ::3]), readonly):
        snapshot = data.copy()
        x = la.LoDTensor(data, lod=[[0, 3, 7]])
        check(x, filt, backend)
        check(x, filt[::-1][::-1], backend, padding=np.ones((2, 2)).T.T)
        np.testing.assert_array_equal(data, snapshot)


def test_arrow_input_and_lod_tensor_filter():
    arr = pa.array([[1.0, 2.0, 3.0], [4.0]], type=pa.large_list(pa.float64()))
    w = la.LoDTensor(np.array([[1.0], [10.0], [100.0]]))
    out = la.sequence_conv(arr, w, name="c")
    np.testing.assert_array_equal(out.numpy().ravel(), [210.0, 321.0, 32.0, 40.0])
    assert out.lod() == [[0, 3, 4]]
