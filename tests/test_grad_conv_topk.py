"""Gradients of ``sequence_conv`` (input, filter, trainable padding, bias) and
``sequence_topk_avg_pooling`` through ``la.vjp``, against the loop oracles of
tests/reference_grad.py and finite differences; threads give the same bits."""

import numpy as np
import pytest

import lodarrow as la
from conftest import THREAD_COUNTS
from lodarrow._grad._rules import RULES
from reference_grad import conv_grad, numeric_vjp, topk_grad

CONTEXTS = [(None, 3), (-2, 4), (0, 2), (-3, 2), (2, 2), (0, 1)]


def _conv_case(d, dtype, seed=0, lengths=(3, 0, 1, 5, 2), outer=None):
    rng = np.random.default_rng(seed)
    data = rng.standard_normal((sum(lengths), d)).astype(dtype)
    lod = [outer, list(lengths)] if outer else [list(lengths)]
    return la.LoDTensor(data, lengths=lod), rng


@pytest.mark.parametrize("context", CONTEXTS)
@pytest.mark.parametrize("d", [1, 3])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("trainable", [False, True])
def test_conv_gradients_match_the_loop_oracle(context, d, dtype, trainable):
    cs, cl = context
    x, rng = _conv_case(d, dtype)
    w = rng.standard_normal((cl * d, 4)).astype(dtype)
    start = -(cl // 2) if cs is None else cs
    up, down = max(0, -start), max(0, start + cl - 1)
    pad = rng.standard_normal((up + down, d)).astype(dtype) if trainable else None
    bias = rng.standard_normal(4).astype(dtype)
    out, pullback = la.vjp(la.sequence_conv, x, w, cs, cl, 1, pad, bias)
    dout = rng.standard_normal(out.data.shape).astype(dtype)
    dx, dw, dcs, dcl, dstride, dpad, dbias = pullback(dout)
    assert dcs is None and dcl is None and dstride is None
    want_dx, want_dw, want_dpad, want_db = conv_grad(x.numpy(), x.offsets[-1], w, dout, start,
                                                      cl, pad)
    tol = 1e-12 if dtype == np.float64 else 2e-5
    assert dx.lod() == x.lod() and dx.data.dtype == dtype and dw.dtype == dtype
    np.testing.assert_allclose(dx.numpy(), want_dx, rtol=tol, atol=tol)
    np.testing.assert_allclose(dw, want_dw, rtol=tol, atol=tol)
    np.testing.assert_allclose(dbias, want_db, rtol=tol, atol=tol)
    if trainable:
        assert dpad.shape == pad.shape
        np.testing.assert_allclose(dpad, want_dpad, rtol=tol, atol=tol)
    else:
        assert dpad is None


def test_conv_matches_finite_differences_in_every_argument():
    x, rng = _conv_case(2, np.float64, lengths=(2, 0, 4, 1))
    w = rng.standard_normal((6, 3))
    pad = rng.standard_normal((2, 2))
    bias = rng.standard_normal(3)
    args = [x, w, -1, 3, 1, pad, bias]
    out, pullback = la.vjp(la.sequence_conv, *args)
    dout = rng.standard_normal(out.data.shape)
    grads = pullback(dout)
    for i in (0, 1, 5, 6):
        def f(values, i=i):
            call = list(args)
            call[i] = la.LoDTensor(values, lod=x.lod()) if i == 0 else values
            return la.sequence_conv(*call).numpy()

        data = x.numpy() if i == 0 else args[i]
        got = grads[i].numpy() if i == 0 else grads[i]
        np.testing.assert_allclose(got, numeric_vjp(f, data, dout), rtol=1e-7, atol=1e-8)


def test_conv_rank1_two_levels_float16_and_mixed_dtypes():
    x, rng = _conv_case(1, np.float64, outer=[2, 0, 3])
    x1 = la.LoDTensor(x.numpy().ravel(), lod=x.lod())  # rank-1 data
    w = rng.standard_normal((3, 2)).astype(np.float32)  # computed in float64, dw as float32
    out, pullback = la.vjp(la.sequence_conv, x1, w)
    dout = rng.standard_normal(out.data.shape)
    dx, dw = pullback(dout)
    assert dx.data.shape == (11,) and dx.lod() == x.lod() and dw.dtype == np.float32
    want_dx, want_dw, _, _ = conv_grad(x.numpy(), x.offsets[-1], w, dout, -1, 3)
    np.testing.assert_allclose(dx.numpy(), want_dx.ravel(), rtol=1e-6)
    np.testing.assert_allclose(dw, want_dw, rtol=1e-6)
    h = la.LoDTensor(x.numpy().astype(np.float16), lod=x.lod())
    out, pullback = la.vjp(la.sequence_conv, h, w)
    dx, dw = pullback(dout.astype(np.float16))
    assert dx.data.dtype == np.float16
    want_dx, _, _, _ = conv_grad(h.numpy(), x.offsets[-1], w, dout.astype(np.float16), -1, 3)
    np.testing.assert_allclose(dx.numpy().astype(np.float64), want_dx, rtol=5e-3, atol=5e-3)


def test_conv_same_bits_for_any_thread_count(monkeypatch):
    rng = np.random.default_rng(9)
    lengths = rng.integers(0, 40, 1500)
    x = la.LoDTensor(rng.standard_normal((int(lengths.sum()), 8)).astype(np.float32),
                     lengths=[lengths.tolist()])
    w = rng.standard_normal((24, 5)).astype(np.float32)
    pad = rng.standard_normal((2, 8)).astype(np.float32)
    out, pullback = la.vjp(la.sequence_conv, x, w, None, None, 1, pad)
    dout = rng.standard_normal(out.data.shape).astype(np.float32)
    results = []
    for n in (1, 2, *THREAD_COUNTS[1:]):
        monkeypatch.setenv("LODARROW_NUM_THREADS", str(n))
        dx, dw, *_, dpad, _ = pullback(dout)
        results.append((dx.numpy(), dw, dpad))
    for r in results[1:]:
        for a, b in zip(r, results[0]):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("context", [(-1, 3), (-3, 2), (2, 2), (0, 5)])
def test_conv_gradients_are_the_same_for_any_block_size(context):
    """The context gradient is made a block of whole sequences at a time (in cache), the
    contexts for the filter gradient gathered a block of rows at a time: blocks of one row,
    blocks smaller than the longest sequence, empty sequences on the blocks' edges and one
    block give the oracle's gradients."""
    from lodarrow._grad._backward import conv_backward

    cs, cl = context
    lengths = [0, 7, 1, 0, 0, 12, 3, 0, 2, 1, 0]
    x, rng = _conv_case(3, np.float64, seed=4, lengths=lengths)
    off = x.offsets[-1]
    w = rng.standard_normal((cl * 3, 2))
    pad = rng.standard_normal((max(0, -cs) + max(0, cs + cl - 1), 3))
    dout = rng.standard_normal((x.numpy().shape[0], 2))
    for block in (1, cl * 3, 4 * cl * 3, 1 << 16):
        for padding in (pad, None):
            want_dx, want_dw, want_dpad, _ = conv_grad(x.numpy(), off, w, dout, cs, cl,
                                                       padding)
            dx, dw, dpad, _ = conv_backward(dout, x.numpy(), off, w, padding, cs, cl,
                                            chunk_elements=block)
            np.testing.assert_allclose(dx, want_dx, rtol=1e-12, atol=1e-12, err_msg=str(block))
            np.testing.assert_allclose(dw, want_dw, rtol=1e-12, atol=1e-12, err_msg=str(block))
            if padding is not None:
                np.testing.assert_allclose(dpad, want_dpad, rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------------------- top-k
def _topk_case(channels, rows, cols, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    sizes = [channels * r * c for r, c in zip(rows, cols)]
    x = la.LoDTensor(rng.standard_normal(sum(sizes)).astype(dtype), lengths=[sizes])
    r = la.LoDTensor(np.zeros(sum(rows)), lengths=[list(rows)])
    c = la.LoDTensor(np.zeros(sum(cols)), lengths=[list(cols)])
    return x, r, c, rng


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("topks", [[1], [1, 3], [2, 7, 1]])
@pytest.mark.parametrize("channels", [1, 2])
def test_topk_gradient_matches_the_loop_oracle(dtype, topks, channels):
    x, r, c, rng = _topk_case(channels, [2, 0, 3, 1], [4, 2, 0, 6], dtype)
    out, pullback = la.vjp(la.sequence_topk_avg_pooling, x, r, c, topks, channels)
    dout = rng.standard_normal(out.data.shape).astype(dtype)
    dx, dr, dc, dk, dch = pullback(dout)
    assert dr is dc is dk is dch is None
    assert dx.lod() == x.lod() and dx.data.dtype == dtype
    want = topk_grad(x.numpy(), x.offsets[0], r.offsets[0], c.offsets[0], topks, channels,
                     dout)
    tol = {np.float16: 2e-3, np.float32: 1e-6, np.float64: 1e-13}[dtype]
    np.testing.assert_allclose(dx.numpy().astype(np.float64), want, rtol=tol, atol=tol)


def test_topk_finite_differences_ties_and_nan():
    x, r, c, rng = _topk_case(2, [2, 1], [5, 3])
    args = (x, r, c, [1, 2, 4], 2)
    out, pullback = la.vjp(la.sequence_topk_avg_pooling, *args)
    dout = rng.standard_normal(out.data.shape)

    def f(values):
        return la.sequence_topk_avg_pooling(la.LoDTensor(values, lod=x.lod()),
                                            *args[1:]).numpy()

    np.testing.assert_allclose(pullback(dout)[0].numpy(), numeric_vjp(f, x.numpy(), dout),
                               rtol=1e-7, atol=1e-8)
    # ties: the lower column ranks first; a row with NaN gets nothing
    vals = np.array([3., 5., 5., 1., np.nan, 2., 0.5, 9.])
    t = la.LoDTensor(vals, lengths=[[8]])
    rows = la.LoDTensor(np.zeros(2), lengths=[[2]])
    cols = la.LoDTensor(np.zeros(4), lengths=[[4]])
    out, pullback = la.vjp(la.sequence_topk_avg_pooling, t, rows, cols, [1, 2], 1)
    (dx, *_) = pullback(np.array([[2., 4.], [6., 8.]]))
    np.testing.assert_array_equal(dx.numpy(), [0., 2. + 2., 2., 0., 0., 0., 0., 0.])


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("topks", [[1, 3], [2, 7, 1], [12, 1]])   # 12: beyond the cascade
def test_topk_forward_averages_its_residual_positions(dtype, topks):
    """The rule's forward selects once: its result is the operator's, and it averages
    exactly the positions kept for the backward (ties, -inf, NaN, empty rows and k past a
    row's end included)."""
    rng = np.random.default_rng(7)
    rows = rng.integers(0, 4, 40)
    cols = rng.integers(0, 15, 40)
    sizes = 2 * rows * cols
    values = rng.choice([0.0, -0.0, 1.0, 2.0, -1.5, -np.inf, np.inf, np.nan], int(sizes.sum()),
                        p=[.2, .2, .15, .15, .15, .06, .06, .03])
    x = la.LoDTensor(values.astype(dtype), lengths=[list(sizes)])
    r = la.LoDTensor(np.zeros(int(rows.sum())), lengths=[list(rows)])
    c = la.LoDTensor(np.zeros(int(cols.sum())), lengths=[list(cols)])
    out, residuals = RULES["sequence_topk_avg_pooling"].forward(x, r, c, topks, 2)
    want = la.sequence_topk_avg_pooling(x, r, c, topks, 2).numpy()
    np.testing.assert_array_equal(out.numpy(), want)
    assert out.numpy().dtype == want.dtype
    pos = residuals[0]
    # The positions, in the block rows' order, against a stable sort (ties: lower column).
    data, k = x.numpy().astype(np.float64), 0
    for s in range(40):
        block = data[x.offsets[0][s]:x.offsets[0][s + 1]].reshape(2, rows[s], cols[s])
        for i in range(rows[s]):
            for ch in range(2):
                row, p = block[ch, i], pos[k]
                k += 1
                if np.isnan(row).any() or not cols[s]:
                    assert (p == -1).all()
                    continue
                top = np.argsort(-row, kind="stable")[:pos.shape[1]]
                np.testing.assert_array_equal(p[:top.shape[0]], top)
                assert (p[top.shape[0]:] == -1).all()
    assert k == pos.shape[0]


def test_topk_same_bits_for_any_thread_count(monkeypatch):
    rng = np.random.default_rng(4)
    rows = rng.integers(0, 6, 600)
    cols = rng.integers(0, 30, 600)
    x, r, c, _ = _topk_case(3, rows, cols, np.float32, seed=4)
    out, pullback = la.vjp(la.sequence_topk_avg_pooling, x, r, c, [1, 3, 5], 3)
    dout = rng.standard_normal(out.data.shape).astype(np.float32)
    results = []
    for n in (1, 2, *THREAD_COUNTS[1:]):
        monkeypatch.setenv("LODARROW_NUM_THREADS", str(n))
        out, pullback = la.vjp(la.sequence_topk_avg_pooling, x, r, c, [1, 3, 5], 3)
        results.append(pullback(dout)[0].numpy())
    for res in results[1:]:
        np.testing.assert_array_equal(res, results[0])
