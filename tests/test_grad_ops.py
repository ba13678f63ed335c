"""Gradients of the softmax, expand and layout operators through ``la.vjp``, against finite
differences of the operators themselves (tests/reference_grad.py) and the softmax Jacobian:
float32 and float64, feature shapes, one and two levels, empty sequences, threads."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import lodarrow as la
from conftest import THREAD_COUNTS, threaded_lengths
from reference_grad import numeric_vjp, softmax_grad
from strategies import lod_tensors


def _rebuild(arg, data):
    if isinstance(arg, la.LoDTensor):
        return la.LoDTensor(data, lod=arg.lod())
    return data


def check_against_finite_differences(op, args, kwargs=None, seed=0, dtype=np.float64,
                                     diff=(0,)):
    """The gradients from ``la.vjp`` of the positional arguments ``diff`` equal finite
    differences of ``op`` (its primary output) computed in float64; returns the gradients."""
    kwargs = kwargs or {}
    result, pullback = la.vjp(op, *args, **kwargs)
    primary = result[0] if isinstance(result, tuple) else result
    rng = np.random.default_rng(seed)
    dout = rng.standard_normal(primary.data.shape).astype(dtype)
    grads = pullback(dout)
    assert len(grads) == len(args)
    wide = [_rebuild(a, (a.data if isinstance(a, la.LoDTensor) else a).astype(np.float64))
            if i in diff else a for i, a in enumerate(args)]
    for i in diff:
        arg = args[i]
        data = arg.data if isinstance(arg, la.LoDTensor) else arg
        g = grads[i]
        assert g is not None, i
        if isinstance(arg, la.LoDTensor):
            assert isinstance(g, la.LoDTensor) and g.lod() == arg.lod()
            g = g.data
        assert g.shape == data.shape and g.dtype == data.dtype

        def f(values, i=i):
            call = list(wide)
            call[i] = _rebuild(args[i], values)
            out = op(*call, **kwargs)
            return (out[0] if isinstance(out, tuple) else out).data

        want = numeric_vjp(f, data, dout)
        tol = {np.float64: 1e-7, np.float32: 1e-5}.get(dtype, 2e-3)
        np.testing.assert_allclose(np.asarray(g, np.float64), want, rtol=tol, atol=tol)
    return grads


def _x(lengths, fshape=(), dtype=np.float64, seed=0, outer=None):
    rng = np.random.default_rng(seed)
    data = rng.standard_normal((sum(lengths),) + fshape).astype(dtype)
    return la.LoDTensor(data, lengths=[outer, lengths] if outer else [lengths])


# --------------------------------------------------------------------------- softmax
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("shape", [(), (1,)])
@pytest.mark.parametrize("outer", [None, [1, 0, 3]])
def test_softmax_gradient(dtype, shape, outer):
    x = _x([3, 0, 1, 5], shape, dtype, outer=outer)
    _out, pullback = la.vjp(la.sequence_softmax, x)
    dout = np.random.default_rng(2).standard_normal(x.data.shape).astype(dtype)
    (dx,) = pullback(dout)
    assert dx.data.dtype == dtype and dx.lod() == x.lod() and dx.data.shape == x.data.shape
    want = softmax_grad(x.numpy(), x.offsets[-1], dout).reshape(x.data.shape)
    tol = {np.float16: 5e-3, np.float32: 1e-6, np.float64: 1e-13}[dtype]
    np.testing.assert_allclose(dx.numpy().astype(np.float64), want, rtol=tol, atol=tol)


def test_softmax_finite_differences_and_large_inputs():
    check_against_finite_differences(la.sequence_softmax, (_x([4, 0, 2]),))
    x = la.LoDTensor(np.array([1000., 1001., 999.]), lod=[[0, 3]])  # stable forward
    (dx,) = la.vjp(la.sequence_softmax, x)[1](np.array([1., 0., 0.]))
    assert np.isfinite(dx.numpy()).all()
    np.testing.assert_allclose(dx.numpy(), softmax_grad(x.numpy(), [0, 3], [1., 0., 0.]))


@pytest.mark.parametrize("layout", ["many", "few"])
def test_softmax_same_bits_for_any_thread_count(layout, monkeypatch):
    rng = np.random.default_rng(5)
    lengths = threaded_lengths(rng, 70_000, layout)
    x = la.LoDTensor(rng.standard_normal(int(lengths.sum())), lengths=[lengths.tolist()])
    dout = rng.standard_normal(x.data.shape)
    results = []
    for n in (1, 2, *THREAD_COUNTS[1:]):
        monkeypatch.setenv("LODARROW_NUM_THREADS", str(n))
        results.append(la.vjp(la.sequence_softmax, x)[1](dout)[0].numpy())
    for r in results[1:]:
        np.testing.assert_array_equal(r, results[0])


# --------------------------------------------------------------------------- expand
@pytest.mark.parametrize("fshape", [(), (3,)])
def test_expand_rows_and_blocks(fshape):
    y = la.LoDTensor(np.zeros(9), lengths=[[2, 0, 3], [2, 1, 0, 3, 3]])
    plain = la.LoDTensor(np.random.default_rng(0).standard_normal((3,) + fshape))
    check_against_finite_differences(la.sequence_expand, (plain, y), {"ref_level": 0})
    blocks = _x([2, 0, 1], fshape)
    grads = check_against_finite_differences(la.sequence_expand, (blocks, y, 0))
    assert grads[1] is None and grads[2] is None
    x5 = _x([1, 2, 0, 1, 2], fshape)
    check_against_finite_differences(la.sequence_expand, (x5, y))  # ref_level -1


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_expand_as_gradient(dtype):
    y = la.LoDTensor(np.zeros(6), lengths=[[2, 0, 4]])
    x = la.LoDTensor(np.random.default_rng(1).standard_normal((3, 2)).astype(dtype))
    dx, dy = check_against_finite_differences(la.sequence_expand_as, (x, y), dtype=dtype)
    assert dy is None
    np.testing.assert_array_equal(dx.numpy()[1], [0., 0.])  # copied 0 times


def test_expand_blocks_same_bits_for_any_thread_count(monkeypatch):
    rng = np.random.default_rng(3)
    x_len = rng.integers(0, 6, 4000)
    reps = rng.integers(0, 4, 4000)
    x = la.LoDTensor(rng.standard_normal((int(x_len.sum()), 4)).astype(np.float32),
                     lengths=[x_len.tolist()])
    y = la.LoDTensor(np.zeros(int(reps.sum())), lengths=[reps.tolist()])
    out, pullback = la.vjp(la.sequence_expand, x, y)
    dout = rng.standard_normal(out.data.shape).astype(np.float32)
    results = []
    for n in (1, 2, *THREAD_COUNTS[1:]):
        monkeypatch.setenv("LODARROW_NUM_THREADS", str(n))
        results.append(pullback(dout)[0].numpy())
    for r in results[1:]:
        np.testing.assert_array_equal(r, results[0])
    # the reference: row k of block i summed over its copies, in copy order
    want = np.zeros(x.data.shape, np.float64)
    out_off, x_off, start = out.offsets[0], x.offsets[0], 0
    for i, r in enumerate(reps):
        for c in range(r):
            a = out_off[start + c]
            want[x_off[i]:x_off[i + 1]] += dout[a:a + x_len[i]]
        start += r
    np.testing.assert_allclose(results[0], want, rtol=1e-5, atol=1e-5)


# --------------------------------------------------------------------------- layout
@pytest.mark.parametrize("fshape", [(), (1,), (2, 2)])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_pad_and_unpad(fshape, dtype):
    x = _x([2, 0, 3, 1], fshape, dtype)
    grads = check_against_finite_differences(la.sequence_pad, (x, 0.5, 4), dtype=dtype)
    assert grads[1] is None and grads[2] is None  # pad_value and maxlen
    if fshape:  # sequence_unpad needs x of rank >= 2 beyond its [B, L] axes
        padded = np.random.default_rng(0).standard_normal((4, 3) + fshape).astype(dtype)
        grads = check_against_finite_differences(la.sequence_unpad,
                                                 (padded, np.array([2, 0, 3, 1])), dtype=dtype)
        assert grads[1] is None
        assert (grads[0][:, 2:][np.array([True, True, False, True])] == 0).all()
    padded2 = np.random.default_rng(0).standard_normal((3, 4)).astype(dtype)  # [B, L]
    check_against_finite_differences(la.sequence_unpad, (padded2, np.array([4, 0, 2])),
                                     dtype=dtype)


def test_pad_of_two_levels():
    x = _x([2, 0, 3, 1], (2,), outer=[3, 1])
    out, _pullback = la.vjp(la.sequence_pad, x, 0.0)
    assert isinstance(out, tuple)
    check_against_finite_differences(la.sequence_pad, (x, 0.0))


@pytest.mark.parametrize("fshape", [(), (3,)])
def test_concat_reverse_slice_reshape(fshape):
    a, b = _x([2, 0, 1], fshape, seed=1), _x([0, 3, 2], fshape, seed=2)
    result, pullback = la.vjp(la.sequence_concat, [a, b])
    dout = np.random.default_rng(0).standard_normal(result.data.shape)
    (grads,) = pullback(dout)
    assert isinstance(grads, tuple) and len(grads) == 2
    for g, t in zip(grads, (a, b)):
        assert g.lod() == t.lod()
    # dout split back: input k's sequence i at its place in output sequence i
    rows = np.concatenate([np.arange(0, 2), np.arange(5, 6)])
    np.testing.assert_array_equal(grads[0].numpy(), dout[rows])
    np.testing.assert_array_equal(grads[1].numpy(), dout[np.r_[2:5, 6:8]])
    check_against_finite_differences(la.sequence_reverse, (_x([3, 0, 2], fshape),))
    grads = check_against_finite_differences(
        la.sequence_slice, (_x([3, 0, 4], fshape), np.array([1, 0, 2]), np.array([2, 0, 1])))
    assert grads[1] is None and grads[2] is None


def test_concat_of_two_levels_and_reshape_and_lod_ops():
    outer = [2, 1]
    a, b = _x([2, 0, 1], (2,), seed=1, outer=outer), _x([1, 3, 0], (2,), seed=2, outer=outer)
    result, pullback = la.vjp(la.sequence_concat, [a, b])
    (grads,) = pullback(result)  # dout as a LoDTensor with the output's LoD
    np.testing.assert_array_equal(grads[0].numpy(), a.numpy())
    np.testing.assert_array_equal(grads[1].numpy(), b.numpy())
    check_against_finite_differences(la.sequence_reshape, (_x([2, 0, 4], (4,)), 2))
    x = _x([2, 0, 4], (2,))
    check_against_finite_differences(la.lod_reset, (x, None, [0, 3, 6]))
    check_against_finite_differences(la.lod_append, (x, [0, 1, 1, 2, 3, 5, 6]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_scatter_gradient(dtype):
    inp = np.random.default_rng(0).standard_normal((3, 4)).astype(dtype)
    index = la.LoDTensor(np.array([[0], [3], [3], [1]]), lengths=[[2, 0, 2]])
    upd = np.random.default_rng(1).standard_normal((4, 1)).astype(dtype)
    grads = check_against_finite_differences(la.sequence_scatter, (inp, index, upd),
                                             dtype=dtype, diff=(0, 2))
    assert grads[1] is None
    ints = np.array([[1], [2], [3], [4]], np.int16)
    _out, pullback = la.vjp(la.sequence_scatter, inp, index, ints)
    _dinp, dindex, dupd = pullback(np.ones((3, 4), dtype))
    assert dupd is None and dindex is None  # integer updates are not differentiable


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_scatter_updates_gradient_is_a_gather_at_any_thread_count(dtype, monkeypatch):
    """The updates' gradient (the CPU kernel's one pass): ``dout[i, ids[p]]`` for each
    position ``p`` of index sequence ``i``, against NumPy's fancy indexing, at every thread
    count, with empty index sequences and a feature shape."""
    rng = np.random.default_rng(7)
    n, width = 3_000, 6
    lengths = rng.integers(0, 60, n)
    lengths[::7] = 0
    ids = rng.integers(0, n and width * 2, int(lengths.sum()))
    inp = np.zeros((n, width, 2), dtype)
    index = la.LoDTensor(ids.reshape(-1, 1), lengths=[lengths.tolist()])
    upd = rng.standard_normal((len(ids), 1)).astype(dtype)
    dout = rng.standard_normal(inp.shape).astype(dtype)
    seq = np.repeat(np.arange(n), lengths)
    want = dout.reshape(n, -1)[seq, ids].reshape(upd.shape)
    for threads in (1, 2, *THREAD_COUNTS[1:]):
        monkeypatch.setenv("LODARROW_NUM_THREADS", str(threads))
        _out, pullback = la.vjp(la.sequence_scatter, inp, index, upd)
        dinp, _dindex, dupd = pullback(dout)
        assert dupd.dtype == upd.dtype and dupd.shape == upd.shape
        np.testing.assert_array_equal(dupd, want)
        np.testing.assert_array_equal(np.asarray(getattr(dinp, "data", dinp)), dout)


@given(lod_tensors(dtypes=["float64"], feature_shapes=[(), (3,)], min_levels=1, max_levels=2),
       st.sampled_from(["reverse", "pad", "sum", "average", "sqrt", "first", "last"]))
def test_linear_operators_pull_back_their_adjoint(x, which):
    """For a linear operator f, <pullback(g), v> == <g, f(v)> for every g and v."""
    def f(t):
        if which == "reverse":
            return la.sequence_reverse(t)
        if which == "pad":
            return la.sequence_pad(t, 0.0)[0]
        return la.sequence_pool(t, which)

    op, args = {"reverse": (la.sequence_reverse, ()), "pad": (la.sequence_pad, (0.0,))}.get(
        which, (la.sequence_pool, (which,)))
    out, pullback = la.vjp(op, x, *args)
    primary = out[0] if isinstance(out, tuple) else out
    rng = np.random.default_rng(0)
    g = rng.standard_normal(primary.data.shape)
    v = la.LoDTensor(rng.standard_normal(x.data.shape), lod=x.lod())
    (dx, *_) = pullback(g)
    np.testing.assert_allclose(np.sum(dx.numpy() * v.numpy()), np.sum(g * f(v).numpy()),
                               rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("n_inputs, fshape, n_rows", [
    (2, (), 30_000),            # short pieces: 32-byte steps
    (3, (2, 3), 30_000),        # rows of any width and dtype
    (11, (5,), 30_000),         # more inputs than the kernel streams at once
    (2, (64,), 150_000),        # 37 MiB of long pieces: streaming stores
    (3, (16,), 400_000),        # ... for three outputs
])
def test_concat_gradients_for_many_inputs_and_threads(n_inputs, fshape, n_rows, monkeypatch):
    """``dout`` split back in one pass (the ``split_blocks`` kernel): each input's sequence
    ``i`` from its place in output sequence ``i``, empty sequences anywhere, the same bits for
    every thread count."""
    rng = np.random.default_rng(5)
    per = [threaded_lengths(rng, n_rows // n_inputs, "many") for _ in range(n_inputs)]
    n = min(p.size for p in per)
    per = [p[:n] for p in per]
    per[0][::7] = 0
    dtype = np.float64 if fshape == (2, 3) else np.float32
    xs = [la.LoDTensor(np.zeros((int(p.sum()),) + fshape, dtype), lengths=[p.tolist()])
          for p in per]
    result, pullback = la.vjp(la.sequence_concat, xs)
    dout = rng.standard_normal(result.data.shape).astype(dtype)
    # the oracle: input k's sequence i sits after inputs 0..k-1's sequence i
    lens = np.stack(per)                                    # (inputs, sequences)
    out_start = np.concatenate([[0], np.cumsum(lens.sum(axis=0))])[:-1]
    before = np.cumsum(lens, axis=0) - lens
    want = [np.concatenate([dout[s:s + m] for s, m in zip(out_start + before[k], lens[k])]
                           + [np.zeros((0,) + fshape, dtype)])
            for k in range(n_inputs)]
    for threads in THREAD_COUNTS:
        monkeypatch.setenv("LODARROW_NUM_THREADS", str(threads))
        (grads,) = pullback(dout)
        assert len(grads) == n_inputs
        for g, w, x in zip(grads, want, xs):
            assert g.lod() == x.lod() and g.data.dtype == dtype
            np.testing.assert_array_equal(g.numpy(), w)
