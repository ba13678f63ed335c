"""Gradients of ``sequence_pool`` / ``sequence_first_step`` / ``sequence_last_step`` through
``la.vjp`` against the loop oracle (tests/reference_grad.py) and finite differences: every
pool type, float16/32/64, feature shapes, one and two levels, empty sequences, ties and NaN,
and the same bits for one and several threads."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import lodarrow as la
from conftest import THREAD_COUNTS, threaded_lengths
from reference_grad import numeric_vjp, pool_grad
from strategies import lod_tensors

POOLS = ["sum", "average", "sqrt", "max", "min", "first", "last"]
TOL = {np.float16: 2e-3, np.float32: 1e-6, np.float64: 1e-13}


def _tensor(dtype, fshape, two_levels, seed=0):
    rng = np.random.default_rng(seed)
    lengths = [3, 0, 1, 4, 0, 2]
    data = rng.standard_normal((sum(lengths),) + fshape).astype(dtype)
    lod = [[2, 0, 4], lengths] if two_levels else [lengths]
    return la.LoDTensor(data, lengths=lod)


@pytest.mark.parametrize("pool", POOLS)
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("fshape", [(), (1,), (3,), (2, 3)])
@pytest.mark.parametrize("two_levels", [False, True])
def test_pool_gradient_matches_the_loop_oracle(pool, dtype, fshape, two_levels):
    x = _tensor(dtype, fshape, two_levels)
    out, pullback = la.vjp(la.sequence_pool, x, pool)
    rng = np.random.default_rng(1)
    dout = rng.standard_normal(out.data.shape).astype(dtype)
    dx, none = pullback(dout)
    assert none is None
    assert isinstance(dx, la.LoDTensor)
    assert dx.data.shape == x.data.shape and dx.data.dtype == x.data.dtype and dx.lod() == x.lod()
    want = pool_grad(x.numpy(), x.offsets[-1], pool, dout)
    np.testing.assert_allclose(dx.numpy().astype(np.float64), want, rtol=TOL[dtype],
                               atol=TOL[dtype])


@pytest.mark.parametrize("pool", ["sum", "average", "sqrt", "first", "last"])
def test_smooth_pools_match_finite_differences(pool):
    x = _tensor(np.float64, (2,), False, seed=3)
    off = x.offsets

    def f(data):
        return la.sequence_pool(la.LoDTensor(data, lod=[o.tolist() for o in off]), pool).numpy()

    dout = np.random.default_rng(4).standard_normal((len(off[-1]) - 1, 2))
    dx, _ = la.vjp(la.sequence_pool, x, pool)[1](dout)
    np.testing.assert_allclose(dx.numpy(), numeric_vjp(f, x.numpy(), dout), rtol=1e-7,
                               atol=1e-8)


@pytest.mark.parametrize("pool", ["max", "min"])
def test_ties_go_to_the_first_row_and_nan_wins(pool):
    data = np.array([[2., 1.], [2., np.nan], [1., 5.], [3., 3.], [3., 3.], [7., 7.]])
    x = la.LoDTensor(data, lod=[[0, 3, 3, 5, 6]])
    _out, pullback = la.vjp(la.sequence_pool, x, pool)
    dout = np.arange(1., 9.).reshape(4, 2)
    dx, _ = pullback(dout)
    want = pool_grad(data, x.offsets[-1], pool, dout)
    np.testing.assert_array_equal(dx.numpy(), want)
    # the NaN's row takes sequence 0's column 1 for both max and min
    assert dx.numpy()[1, 1] == 2.0


def test_first_and_last_step_and_return_index():
    x = _tensor(np.float32, (3,), True)
    dout = np.ones((6, 3), np.float32)
    for op, pool in ((la.sequence_first_step, "first"), (la.sequence_last_step, "last")):
        out, pullback = la.vjp(op, x)
        (dx,) = pullback(dout)
        np.testing.assert_array_equal(dx.numpy(), pool_grad(x.numpy(), x.offsets[-1], pool,
                                                            dout))
    (out, index), pullback = la.vjp(la.sequence_pool, x, "max", return_index=True)
    assert index.data.dtype == np.int64
    dx, _ = pullback(out)  # dout is the gradient of ``out``, not of the index
    np.testing.assert_array_equal(dx.numpy(), pool_grad(x.numpy(), x.offsets[-1], "max",
                                                        out.numpy()))


def test_the_pullback_keeps_no_copy_of_the_input():
    import gc
    import weakref

    data = np.random.default_rng(0).standard_normal((50, 4))
    x = la.LoDTensor(data, lod=[[0, 20, 50]])
    ref = weakref.ref(data)
    _, pullback = la.vjp(la.sequence_pool, x, "max")
    del x, data
    gc.collect()
    assert ref() is None  # only the index and the LoD are kept
    assert pullback(np.ones((2, 4)))[0].numpy().sum() == 8


@given(lod_tensors(dtypes=["float32", "float64"], min_levels=1, max_levels=2),
       st.sampled_from(POOLS))
def test_pool_gradient_property(x, pool):
    out, pullback = la.vjp(la.sequence_pool, x, pool)
    dout = np.ones(out.data.shape, out.data.dtype)
    dx, _ = pullback(dout)
    np.testing.assert_allclose(dx.numpy(), pool_grad(x.numpy(), x.offsets[-1], pool, dout),
                               rtol=1e-6)


@pytest.mark.parametrize("pool", POOLS)
@pytest.mark.parametrize("layout", ["many", "few"])
def test_the_same_bits_for_any_thread_count(pool, layout, monkeypatch):
    rng = np.random.default_rng(7)
    lengths = threaded_lengths(rng, 40_000, layout)
    data = rng.standard_normal((int(lengths.sum()), 3)).astype(np.float32)
    x = la.LoDTensor(data, lengths=[lengths.tolist()])
    dout = rng.standard_normal((lengths.size, 3)).astype(np.float32)
    results = []
    for n in (1, 2, *THREAD_COUNTS[1:]):
        monkeypatch.setenv("LODARROW_NUM_THREADS", str(n))
        results.append(la.vjp(la.sequence_pool, x, pool)[1](dout)[0].numpy())
    for r in results[1:]:
        np.testing.assert_array_equal(r, results[0])
    np.testing.assert_allclose(results[0], pool_grad(data, x.offsets[-1], pool, dout),
                               rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("pool", ["sum", "average", "sqrt"])
@pytest.mark.parametrize("dtype, width", [(np.float32, 4), (np.float32, 16), (np.float64, 8),
                                          (np.float32, 40)])
def test_large_outputs_stream_the_same_bits(pool, dtype, width, monkeypatch):
    """An input gradient of 16 MiB or more with rows of 16 bytes or more is written with
    streaming stores (``_ext/include/lodarrow_stream.h``): the same values, for any thread
    count, as the loop oracle, rows of every width and an output not 64-byte aligned."""
    rng = np.random.default_rng(11)
    rows = (17 << 20) // (width * np.dtype(dtype).itemsize) + 1
    lengths = threaded_lengths(rng, rows, "many")
    n = int(lengths.sum())
    dout = rng.standard_normal((lengths.size, width)).astype(dtype)
    off = np.concatenate([[0], np.cumsum(lengths)])
    scale = np.maximum(lengths, 1).astype(np.float64)[:, None]
    scale = {"sum": 1.0, "average": scale, "sqrt": np.sqrt(scale)}[pool]
    want = np.repeat((dout.astype(np.float64) / scale).astype(dtype), lengths, axis=0)
    x = la.LoDTensor(np.zeros((n, width), dtype), lengths=[lengths.tolist()])
    for threads in (1, 3):
        monkeypatch.setenv("LODARROW_NUM_THREADS", str(threads))
        dx = la.vjp(la.sequence_pool, x, pool)[1](dout)[0].numpy()
        np.testing.assert_array_equal(dx, want)
    # the kernel itself into a view one row in (a start off the 64-byte lines)
    from lodarrow._grad import _backward
    big = np.empty((n + 1, width), dtype)
    target = big[1:]
    monkeypatch.setenv("LODARROW_NUM_THREADS", "1")
    _backward._kernel("pool_sum_backward")(target, dout, off, pool)
    np.testing.assert_array_equal(target, want)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("pool_type", ["sum", "average", "sqrt"])
def test_sum_family_one_feature_broadcast_exactly(dtype, pool_type, monkeypatch):
    """D = 1 (the whole-vector broadcast of each sequence's value): every row of sequence
    ``s`` is ``dout[s]`` (over ``L`` or ``sqrt(L)`` in double, then rounded once), for runs
    shorter and longer than a vector, empty sequences, at every thread count."""
    rng = np.random.default_rng(11)
    lengths = rng.integers(0, 41, 4_000)
    lengths[::5] = 0
    lengths[1::9] = rng.integers(1, 9, lengths[1::9].size)  # shorter than a vector
    x = la.LoDTensor(rng.standard_normal((int(lengths.sum()), 1)).astype(dtype),
                     lengths=[lengths.tolist()])
    dout = rng.standard_normal((lengths.size, 1)).astype(dtype)
    div = {"sum": np.ones(lengths.size), "average": lengths.astype(np.float64),
           "sqrt": np.sqrt(lengths.astype(np.float64))}[pool_type]
    per_seq = (dout[:, 0].astype(np.float64) / np.where(lengths, div, 1)).astype(dtype)
    if pool_type == "sum":
        per_seq = dout[:, 0]
    want = np.repeat(per_seq, lengths).reshape(-1, 1)
    for threads in (1, *THREAD_COUNTS[1:]):
        monkeypatch.setenv("LODARROW_NUM_THREADS", str(threads))
        dx = la.vjp(la.sequence_pool, x, pool_type)[1](dout)[0]
        np.testing.assert_array_equal(np.asarray(getattr(dx, "data", dx)), want)
