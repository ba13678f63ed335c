"""sequence_softmax (docs/operators.md#sequence_softmax, #stable-softmax, #fewer-restrictions)."""

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lodarrow as la
from conftest import (NUMERIC_DTYPES, SEQUENCE_LAYOUTS, on_backend, parallel_min_work, threaded,
                      threaded_lengths, to_host)
from reference_numeric import ref_softmax
from strategies import lod_tensors

fixture_ok = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])

# float32 rounds x - max: the relative error of exp grows with |x - max| (about 1e-5 at 100).
TOL = {"float16": dict(rtol=2e-3, atol=1e-6), "float32": dict(rtol=1e-5, atol=1e-30),
       "float64": dict(rtol=1e-13, atol=1e-300)}


def assert_softmax(out, x):
    want = ref_softmax(x.numpy(), x.offsets[-1])
    got = out.numpy()
    assert out.dtype == want.dtype and got.shape == x.numpy().shape
    assert out.lod() == x.lod()
    tol = TOL.get(str(want.dtype), TOL["float64"])
    np.testing.assert_allclose(got, want, **tol)


def test_paddle_unit_test_values(backend):
    """Paddle's own test: values in [0.1, 1], the plain (unshifted) formula."""
    rng = np.random.default_rng(0)
    data = rng.uniform(0.1, 1, (11, 1)).astype(np.float32)
    lod = [[0, 4, 5, 8, 11]]
    x = la.LoDTensor(data, lod=lod)
    out = to_host(la.sequence_softmax(on_backend(x, backend)), backend)
    want = np.empty_like(data)
    for a, b in zip(lod[0][:-1], lod[0][1:]):
        e = np.exp(data[a:b])
        want[a:b] = e / e.sum()
    assert out.dtype == np.float32 and out.shape() == [11, 1] and out.lod() == lod
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-6)


def test_large_inputs_do_not_overflow(backend):
    data = np.array([1000., 1001., 999., -1000., -1001., 88.7, 89.0, 1e30, 1e30],
                    dtype=np.float32)
    x = la.LoDTensor(data, lod=[[0, 3, 5, 7, 9]])
    out = to_host(la.sequence_softmax(on_backend(x, backend)), backend).numpy()
    assert not np.isnan(out).any()
    e = np.exp(np.array([-1., 0., -2.]))
    np.testing.assert_allclose(out[:3], e / e.sum(), rtol=1e-6)
    np.testing.assert_allclose(out[3:5], [1 / (1 + np.exp(-1)), np.exp(-1) / (1 + np.exp(-1))],
                               rtol=1e-6)
    np.testing.assert_allclose(out[7:], [0.5, 0.5])


@fixture_ok
@given(x=lod_tensors(dtypes=NUMERIC_DTYPES, feature_shapes=[(), (1,)], min_levels=1,
                     max_levels=3))
def test_matches_reference(backend, x):
    out = to_host(la.sequence_softmax(on_backend(x, backend)), backend)
    assert_softmax(out, x)


@fixture_ok
@given(x=lod_tensors(dtypes=["float16", "float32", "float64"], feature_shapes=[(), (1,)],
                     min_levels=1, max_levels=2,
                     elements=st.sampled_from([np.nan, np.inf, -np.inf, 0.0, -3.0, 1e3, 2.5])))
def test_nan_and_inf_like_the_stable_formula(backend, x):
    out = to_host(la.sequence_softmax(on_backend(x, backend)), backend).numpy()
    want = ref_softmax(x.numpy(), x.offsets[-1])
    np.testing.assert_array_equal(np.isnan(out), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_allclose(out[ok], want[ok], rtol=2e-3)


def test_nan_makes_the_whole_sequence_nan(backend):
    x = la.LoDTensor(np.array([1., np.nan, 2., 3., 4.]), lod=[[0, 3, 5]])
    out = to_host(la.sequence_softmax(on_backend(x, backend)), backend).numpy()
    assert np.isnan(out[:3]).all() and not np.isnan(out[3:]).any()


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int8", "int64"])
def test_long_and_many_sequences(backend, dtype):
    rng = np.random.default_rng(1)
    lengths = rng.choice([0, 1, 7, 8, 9, 300, 5000], size=300)
    n = int(lengths.sum())
    if np.dtype(dtype).kind == "f":
        data = (rng.standard_normal(n) * 30).astype(dtype)
    else:
        data = rng.integers(-100, 100, n).astype(dtype)
    x = la.LoDTensor(data, lengths=[lengths])
    assert_softmax(to_host(la.sequence_softmax(on_backend(x, backend)), backend), x)


@threaded
@pytest.mark.parametrize("layout", SEQUENCE_LAYOUTS)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int16"])
def test_threaded_chunks(backend, threads, layout, dtype):
    rng = np.random.default_rng(5)
    lengths = threaded_lengths(rng, parallel_min_work() * 5 // 4, layout)
    n = int(lengths.sum())
    data = (rng.standard_normal(n) * 30).astype(dtype)
    x = la.LoDTensor(data, lengths=[lengths])
    assert_softmax(to_host(la.sequence_softmax(on_backend(x, backend)), backend), x)


def test_int_output_is_float64(backend):
    x = la.LoDTensor(np.array([[1], [1], [5]], dtype=np.int16), lod=[[0, 2, 3]])
    out = to_host(la.sequence_softmax(on_backend(x, backend)), backend)
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out.numpy(), [[0.5], [0.5], [1.0]])


def test_levels_shapes_and_empties(backend):
    x = la.LoDTensor(np.arange(5, dtype=np.float64), lengths=[[1, 2], [0, 3, 2]])
    out = to_host(la.sequence_softmax(on_backend(x, backend)), backend)
    assert out.lod() == x.lod() and out.shape() == [5]
    assert_softmax(out, x)
    empty = la.LoDTensor(np.zeros((0, 1), np.float32), lod=[[0]])
    out = to_host(la.sequence_softmax(on_backend(empty, backend)), backend)
    assert out.shape() == [0, 1] and out.lod() == [[0]]
    zeros = la.LoDTensor(np.zeros((0,), np.float32), lod=[[0, 0, 0]])
    assert to_host(la.sequence_softmax(on_backend(zeros, backend)), backend).lod() == [[0, 0, 0]]


def test_errors():
    with pytest.raises(la.LoDError, match="sequence_softmax: input must have at least 1 LoD "
                                          "level, got 0"):
        la.sequence_softmax(np.ones(3, np.float32))
    wide = la.LoDTensor(np.ones((3, 2), np.float32), lod=[[0, 3]])
    with pytest.raises(ValueError, match=r"input must have shape \[N\] or \[N, 1\] \(one "
                                         r"value per row\), got \[3, 2\]"):
        la.sequence_softmax(wide)
    deep = la.LoDTensor(np.ones((3, 1, 1), np.float32), lod=[[0, 3]])
    with pytest.raises(ValueError, match=r"got \[3, 1, 1\]"):
        la.sequence_softmax(deep)
    flags = la.LoDTensor(np.ones(3, bool), lod=[[0, 3]])
    with pytest.raises(TypeError, match="input of dtype bool cannot be softmaxed"):
        la.sequence_softmax(flags)
    with pytest.raises(TypeError, match="input must be a LoDTensor"):
        la.sequence_softmax("abc")


def test_readonly_strided_fortran_inputs_untouched(backend):
    rng = np.random.default_rng(2)
    base = rng.standard_normal((9, 3)).astype(np.float32)
    readonly = base[:, 1:2].copy()
    readonly.flags.writeable = False
    lod = [[0, 4, 4, 9]]
    for data in (base[:, 1:2], np.asfortranarray(base[:, 1:2]), readonly, base[::1, 2]):
        snapshot = data.copy()
        x = la.LoDTensor(data, lod=lod)
        assert_softmax(to_host(la.sequence_softmax(on_backend(x, backend)), backend), x)
        np.testing.assert_array_equal(data, snapshot)


def test_arrow_input_and_ignored_arguments():
    arr = pa.array([[1.0, 1.0], [], [3.0]], type=pa.list_(pa.float64()))
    out = la.sequence_softmax(arr, use_cudnn=True, name="s")
    np.testing.assert_array_equal(out.numpy(), [0.5, 0.5, 1.0])
    assert out.lod() == [[0, 2, 2, 3]]


def test_kernel_exp_is_accurate():
    from lodarrow._ext import seq_softmax

    x = -np.linspace(0, 103, 400_001, dtype=np.float32)
    out = np.empty_like(x)
    seq_softmax.expf_values(x, out)
    want = np.exp(x.astype(np.float64))
    normal = want > 1.2e-38
    ulps = np.abs(out[normal] - want[normal]) / np.spacing(want[normal].astype(np.float32))
    assert ulps.max() < 2
    np.testing.assert_allclose(out[~normal], want[~normal], rtol=0, atol=2.0**-149)
    special = np.array([-np.inf, np.nan, -0.0, -1e30], np.float32)
    seq_softmax.expf_values(special, out[:4])
    np.testing.assert_array_equal(out[:4], [0.0, np.nan, 1.0, 0.0])
