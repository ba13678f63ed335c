"""lodarrow.torch: every differentiable operator on torch tensors.

See docs/gradients.md#pytorch-lodarrowtorch.

gradcheck in float64 on every operator (empty sequences, two levels, several feature
shapes), torch.library.opcheck on every custom operator (forwards and backwards), the
forward against lodarrow's own operator, nested tensors in and out, and bad input.  The
torch.compile test and the training test are in tests/test_torch_compile.py and
tests/test_torch_training.py.
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import lodarrow as la
import lodarrow.torch as lt
from lodarrow.torch import _library

F64 = torch.float64


@pytest.fixture(params=["eager", "custom-op"])
def path(request, monkeypatch):
    """Both ways a call runs: eager calls run the kernels under an autograd.Function
    (``_library.FAST_EAGER``), compiled ones (and ``FAST_EAGER = False``) the custom
    operators and their registered autograd formulas."""
    monkeypatch.setattr(_library, "FAST_EAGER", request.param == "eager")
    return request.param


def _off(*values):
    return torch.tensor(values, dtype=torch.int64)


def _x(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    # distinct values: max / min have no ties under gradcheck's perturbation
    return (torch.randperm(int(np.prod(shape)), generator=g).to(F64).reshape(shape) * 0.37
            - 1.0).requires_grad_()


def _values(out):
    """The differentiable part of a result: values of (values, offsets), of a nested tensor."""
    if isinstance(out, tuple):
        out = out[0]
    if out.is_nested:
        out = out.values()
    return out


#: top-k pooling: 2 channels of rows x cols = 2 x 3, 1 x 0 and 1 x 3 values
TOPK_IN, TOPK_ROW, TOPK_COL = _off(0, 12, 12, 18), _off(0, 2, 3, 4), _off(0, 3, 3, 6)
ONE = _off(0, 2, 2, 5, 6)               # 4 sequences, one empty
OUTER = _off(0, 1, 1, 4)                 # over ONE's 4 sequences, one empty document
POOLS = ["sum", "average", "sqrt", "max", "min", "first", "last"]

# (id, function of the differentiable tensors, the tensors)
GRAD_CASES = [
    *[(f"pool-{p}", lambda x, p=p: lt.sequence_pool(x, ONE, p, pad_value=0.5), [_x(6)])
      for p in POOLS],
    *[(f"pool-{p}-features", lambda x, p=p: lt.sequence_pool(x, ONE, p), [_x(6, 2, 3)])
      for p in POOLS],
    *[(f"pool-{p}-two-levels", lambda x, p=p: _values(lt.sequence_pool(x, [OUTER, ONE], p)),
       [_x(6, 2)]) for p in POOLS],
    ("first-step", lambda x: lt.sequence_first_step(x, ONE), [_x(6, 2)]),
    ("last-step", lambda x: lt.sequence_last_step(x, [OUTER, ONE])[0], [_x(6)]),
    ("softmax", lambda x: _values(lt.sequence_softmax(x, ONE)), [_x(6)]),
    ("softmax-n1-two-levels", lambda x: _values(lt.sequence_softmax(x, [OUTER, ONE])),
     [_x(6, 1)]),
    ("expand-rows", lambda x: _values(lt.sequence_expand(x, _off(0, 2, 2, 5))), [_x(3, 2)]),
    ("expand-rows-ref0", lambda x: _values(lt.sequence_expand(x, [_off(0, 2, 4), ONE], 0)),
     [_x(2, 2)]),
    ("expand-blocks", lambda x: _values(lt.sequence_expand(
        x, [_off(0, 2, 3), _off(0, 3, 3, 5)], x_offsets=_off(0, 2, 2, 5))), [_x(5, 2)]),
    ("expand-as", lambda x: _values(lt.sequence_expand_as(x, ONE)), [_x(4, 3)]),
    ("pad", lambda x: lt.sequence_pad(x, ONE, 0.25)[0], [_x(6, 2)]),
    ("pad-rank1-maxlen", lambda x: lt.sequence_pad(x, ONE, maxlen=5)[0], [_x(6)]),
    ("pad-two-levels", lambda x: lt.sequence_pad(x, [OUTER, ONE])[0], [_x(6, 2)]),
    ("unpad", lambda x: _values(lt.sequence_unpad(x, [2, 0, 3])), [_x(3, 4, 2)]),
    ("unpad-2d", lambda x: _values(lt.sequence_unpad(x, torch.tensor([1, 3]))), [_x(2, 3)]),
    ("concat", lambda a, b: _values(lt.sequence_concat([a, b], [ONE, _off(0, 1, 3, 3, 3)])),
     [_x(6, 2), _x(3, 2, seed=1)]),
    ("concat-two-levels", lambda a, b: _values(lt.sequence_concat(
        [a, b], [[OUTER, ONE], [OUTER, _off(0, 0, 1, 1, 2)]])), [_x(6), _x(2, seed=1)]),
    ("slice", lambda x: _values(lt.sequence_slice(x, ONE, [1, 0, 0, 0], [1, 0, 2, 1])),
     [_x(6, 2)]),
    ("reverse", lambda x: _values(lt.sequence_reverse(x, [OUTER, ONE])), [_x(6, 2)]),
    ("reshape", lambda x: _values(lt.sequence_reshape(x, ONE, 1)), [_x(6, 2)]),
    ("reshape-wider", lambda x: _values(lt.sequence_reshape(x, _off(0, 2, 2, 6), 4)),
     [_x(6, 2)]),
    ("lod-reset", lambda x: lt.sequence_pool(*lt.lod_reset(x, _off(0, 3, 6)), "sqrt"),
     [_x(6)]),
    ("lod-append", lambda x: lt.sequence_pool(
        lt.lod_append(x, ONE, x_offsets=OUTER)[0], [OUTER, ONE], "max")[0], [_x(6, 2)]),
    ("scatter", lambda x, u: lt.sequence_scatter(
        x, torch.tensor([0, 2, 2, 1]), u, index_offsets=_off(0, 1, 1, 4)), [_x(3, 3),
                                                                              _x(4, seed=1)]),
    ("conv", lambda x, w: _values(lt.sequence_conv(x, ONE, w)), [_x(6, 2), _x(6, 3, seed=1)]),
    ("conv-bias-start", lambda x, w, b: _values(lt.sequence_conv(
        x, [OUTER, ONE], w, context_start=-2, context_length=2, bias=b)),
     [_x(6, 2), _x(4, 3, seed=1), _x(3, seed=2)]),
    ("conv-padding", lambda x, w, p: _values(lt.sequence_conv(
        x, ONE, w, context_start=-1, context_length=4, padding_data=p)),
     [_x(6, 2), _x(8, 3, seed=1), _x(3, 2, seed=2)]),
    ("conv-no-rows", lambda x, w: _values(lt.sequence_conv(x, _off(0, 0, 0), w)),
     [_x(0, 2), _x(6, 3, seed=1)]),
    ("pool-no-rows", lambda x: lt.sequence_pool(x, _off(0, 0, 0), "max"), [_x(0, 2)]),
    ("conv-rank1", lambda x, w: _values(lt.sequence_conv(x, ONE, w)), [_x(6), _x(3, 2)]),
    ("topk", lambda x: _values(lt.sequence_topk_avg_pooling(
        x, TOPK_IN, TOPK_ROW, TOPK_COL, [1, 2, 4], 2)), [_x(18)]),
]


@pytest.mark.parametrize("fn, inputs", [c[1:] for c in GRAD_CASES],
                         ids=[c[0] for c in GRAD_CASES])
def test_gradcheck(fn, inputs, path):
    assert torch.autograd.gradcheck(fn, inputs, eps=1e-6, atol=1e-8, rtol=1e-7)


def test_every_operator_has_a_gradcheck():
    ids = " ".join(c[0] for c in GRAD_CASES)
    for name, key in [("sequence_pool", "pool-"), ("sequence_first_step", "first-step"),
                      ("sequence_last_step", "last-step"), ("sequence_softmax", "softmax"),
                      ("sequence_expand", "expand-rows"), ("sequence_expand_as", "expand-as"),
                      ("sequence_pad", "pad"), ("sequence_unpad", "unpad"),
                      ("sequence_concat", "concat"), ("sequence_slice", "slice"),
                      ("sequence_reverse", "reverse"), ("sequence_reshape", "reshape"),
                      ("lod_reset", "lod-reset"), ("lod_append", "lod-append"),
                      ("sequence_scatter", "scatter"), ("sequence_conv", "conv"),
                      ("sequence_topk_avg_pooling", "topk")]:
        assert name in lt.__all__ and key in ids, name


# ------------------------------------------------------------------ opcheck
def _f(*shape, seed=0, grad=True):
    x = _x(*shape, seed=seed).detach()
    return x.requires_grad_(grad)


OPS = torch.ops.lodarrow
OPCHECK_CASES = [
    ("sequence_pool", (_f(6, 2), [ONE], "max", 0.0)),
    ("sequence_pool", (_f(6), [OUTER, ONE], "average", 1.0)),
    ("sequence_softmax", (_f(6), [ONE])),
    ("sequence_expand", (_f(4, 2), [], [ONE], 0)),
    ("sequence_expand", (_f(5), [_off(0, 2, 2, 5)], [_off(0, 2, 3), _off(0, 3, 3, 5)], -1)),
    ("sequence_expand_as", (_f(4, 2), ONE)),
    ("sequence_pad", (_f(6, 2), [ONE], 0.0, -1)),
    ("sequence_pad", (_f(6), [OUTER, ONE], 0.0, 4)),
    ("sequence_pad", (_f(6, 2), [ONE], 0.0, -1, torch.tensor([-1.0, 2.0]))),
    ("sequence_pool", (_f(6, 2), [ONE], "sum", 0.0, torch.tensor(3.0))),
    ("sequence_unpad", (_f(3, 4, 2), _off(2, 0, 3))),
    ("sequence_concat", ([_f(6), _f(3, seed=1)], [], [ONE, _off(0, 1, 3, 3, 3)])),
    ("sequence_slice", (_f(6, 2), [ONE], _off(1, 0, 0, 0), _off(1, 0, 2, 1))),
    ("sequence_reverse", (_f(6, 2), [ONE])),
    ("sequence_reshape", (_f(6, 2), [ONE], 1)),
    ("lod_check", (_f(6), [OUTER, ONE], "lod_reset", "y")),
    ("sequence_scatter", (_f(3, 3), _off(0, 2, 2, 1), _off(0, 1, 1, 4), _f(4, seed=1))),
    ("sequence_conv", (_f(6, 2), [ONE], _f(6, 3, seed=1), None, _f(3, seed=2), -1, 3)),
    ("sequence_conv", (_f(6, 2), [ONE], _f(8, 3, seed=1), _f(3, 2, seed=2), None, -1, 4)),
    ("sequence_topk_avg_pooling", (_f(18), [TOPK_IN], TOPK_ROW, TOPK_COL, [1, 2, 4], 2)),
    # the backwards, each a custom operator of its own
    ("sequence_pool_backward", (_f(4, 2, grad=False), ONE, _off(1, -1, 3, 5, 0, -1, 2, 5)
                                .reshape(4, 2), "max", 6)),
    ("sequence_pool_backward", (_f(4, grad=False), ONE, _off(), "sqrt", 6)),
    ("sequence_softmax_backward", (_f(6, grad=False), _f(6, seed=1, grad=False), ONE)),
    ("sequence_expand_backward", (_f(5, 2, grad=False), ONE[:4], None, None, 3)),
    ("sequence_expand_backward", (_f(7, grad=False), _off(0, 2, 3), _off(0, 2, 5),
                                  _off(0, 2, 4, 7), 5)),
    ("sequence_expand_as_backward", (_f(6, 2, grad=False), ONE)),
    ("sequence_pad_backward", (_f(4, 3, 2, grad=False), ONE, 6)),
    ("sequence_unpad_backward", (_f(5, 2, grad=False), _off(0, 2, 2, 5), [3, 4, 2])),
    ("sequence_concat_backward", (_f(9, grad=False), [ONE, _off(0, 1, 3, 3, 3)], [6, 3])),
    ("sequence_slice_backward", (_f(4, grad=False), ONE, _off(1, 0, 0, 0),
                                 _off(0, 1, 1, 3, 4), 6)),
    ("sequence_reverse_backward", (_f(6, grad=False), ONE)),
    ("sequence_scatter_backward", (_f(3, 3, grad=False), _off(0, 2, 2, 1), _off(0, 1, 1, 4),
                                   [4])),
    ("sequence_conv_backward", (_f(6, 3, grad=False), _f(6, 2, grad=False), ONE,
                                _f(6, 3, seed=1, grad=False), None, True, -1, 3)),
    ("sequence_topk_avg_pooling_backward", (
        _f(4, 6, grad=False), OPS.sequence_topk_avg_pooling(_f(18), [TOPK_IN], TOPK_ROW,
                                                            TOPK_COL, [1, 2, 4], 2)[1],
        TOPK_IN, TOPK_ROW, TOPK_COL, [1, 2, 4], 2, [18])),
]


@pytest.mark.parametrize("name, args", OPCHECK_CASES,
                         ids=[f"{c[0]}-{k}" for k, c in enumerate(OPCHECK_CASES)])
def test_opcheck(name, args):
    torch.library.opcheck(getattr(OPS, name).default, args)


def test_every_custom_operator_is_opchecked():
    ours = {n for n in dir(OPS) if hasattr(getattr(OPS, n), "default")}
    assert ours == {c[0] for c in OPCHECK_CASES}


# ------------------------------------------------------------------ the same bits as la.vjp
VJP_CASES = [
    ("pool-max", lambda x: lt.sequence_pool(x, ONE, "max"),
     lambda x: la.vjp(la.sequence_pool, la.LoDTensor(x, lod=[ONE.numpy()]), "max"), (6, 3)),
    ("pool-sqrt", lambda x: lt.sequence_pool(x, ONE, "sqrt"),
     lambda x: la.vjp(la.sequence_pool, la.LoDTensor(x, lod=[ONE.numpy()]), "sqrt"), (6, 2)),
    ("softmax", lambda x: lt.sequence_softmax(x, ONE)[0],
     lambda x: la.vjp(la.sequence_softmax, la.LoDTensor(x, lod=[ONE.numpy()])), (6,)),
    ("expand-blocks", lambda x: lt.sequence_expand(x, ONE[:4], x_offsets=_off(0, 1, 1, 3))[0],
     lambda x: la.vjp(la.sequence_expand, la.LoDTensor(x, lod=[[0, 1, 1, 3]]),
                      la.LoDTensor(np.zeros(5), lod=[ONE.numpy()[:4]])), (3, 2)),
    ("pad", lambda x: lt.sequence_pad(x, ONE, maxlen=4)[0],
     lambda x: la.vjp(la.sequence_pad, la.LoDTensor(x, lod=[ONE.numpy()]), 0.0, 4), (6, 2)),
]


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
@pytest.mark.parametrize("fn, pullback, shape", [c[1:] for c in VJP_CASES],
                         ids=[c[0] for c in VJP_CASES])
def test_gradients_are_the_bits_of_la_vjp(fn, pullback, shape, dtype, path):
    x = torch.randn(shape).to(dtype).requires_grad_()
    y = fn(x)
    dout = torch.randn(y.shape).to(dtype)
    y.backward(dout)
    out, back = pullback(x.detach().numpy())
    data = out[0].data if isinstance(out, tuple) else out.data
    np.testing.assert_array_equal(y.detach().numpy(), data)
    assert x.grad.dtype == dtype
    np.testing.assert_array_equal(x.grad.numpy(), back(dout.numpy())[0])


def test_conv_gradients_are_the_bits_of_la_vjp():
    x, w, b = torch.randn(6, 2), torch.randn(6, 3), torch.randn(3)
    for t in (x, w, b):
        t.requires_grad_()
    y, _ = lt.sequence_conv(x, ONE, w, bias=b)
    dout = torch.randn(6, 3)
    y.backward(dout)
    _, back = la.vjp(la.sequence_conv, la.LoDTensor(x.detach().numpy(), lod=[ONE.numpy()]),
                     w.detach().numpy(), None, None, 1, None, b.detach().numpy())
    dx, dw, *rest = back(dout.numpy())
    np.testing.assert_array_equal(x.grad.numpy(), dx.data)
    np.testing.assert_array_equal(w.grad.numpy(), dw)
    np.testing.assert_array_equal(b.grad.numpy(), rest[-1])


# ------------------------------------------------------------------ forward = lodarrow's
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.float64])
@pytest.mark.parametrize("pool", POOLS)
def test_pool_equals_lodarrow(pool, dtype):
    x = torch.randn(6, 3).to(dtype)
    want = la.sequence_pool(la.LoDTensor(x.numpy(), lod=[ONE.numpy()]), pool, pad_value=2.0)
    got = lt.sequence_pool(x, ONE, pool, pad_value=2.0)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("pad", [torch.tensor(-1.5), torch.tensor([-1.5]),
                                 torch.tensor([-1.0, 2.0, 0.5]),
                                 torch.tensor([-1, 2, 0], dtype=torch.int32)])
def test_a_pad_value_tensor_as_lodarrow_takes_it(pad, grad):
    # a 0-d tensor, or one value per feature (Paddle's and la.sequence_pad's pad tensor)
    x = torch.randn(6, 3, dtype=torch.float64, requires_grad=grad)
    arr = pad.numpy().astype(np.float64)
    lx = la.LoDTensor(x.detach().numpy(), lod=[ONE.numpy()])
    for pool in ("sum", "max", "first"):
        want = la.sequence_pool(lx, pool, pad_value=arr)
        got = lt.sequence_pool(x, ONE, pool, pad_value=pad)
        np.testing.assert_array_equal(got.detach().numpy(), want.numpy())
        got = lt.sequence_pool(x, [ONE], pool, pad_value=pad)       # the general path
        np.testing.assert_array_equal(got.detach().numpy(), want.numpy())
    want, _ = la.sequence_pad(lx, arr)
    got, _ = lt.sequence_pad(x, ONE, pad)
    np.testing.assert_array_equal(got.detach().numpy(), want.numpy())
    if pad.is_floating_point():      # after a nested tensor, its second positional argument
        nested, _ = lt.sequence_pad(torch.nested.nested_tensor_from_jagged(x.detach(), ONE),
                                    pad)
        np.testing.assert_array_equal(nested.numpy(), want.numpy())
    if grad:
        got.sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), np.ones((6, 3)))


def test_bad_pad_value_tensors():
    x = _x(6, 3).float()
    with pytest.raises(ValueError, match=r"sequence_pool: pad_value must have shape \(\), "
                                         r"\(1,\) or the feature shape \(3,\), got \(2,\)"):
        lt.sequence_pool(x, ONE, "sum", pad_value=torch.zeros(2))
    with pytest.raises(TypeError, match=r"sequence_pad: pad_value of dtype torch.float64 "
                                        r"cannot be cast safely to the values' dtype "
                                        r"torch.float32"):
        lt.sequence_pad(x, ONE, torch.zeros(3, dtype=torch.float64))
    with pytest.raises(TypeError, match=r"sequence_pad: pad_value must be a real number or "
                                        r"a real tensor, got torch.bool"):
        lt.sequence_pad(x, ONE, torch.tensor(True))
    with pytest.raises(TypeError, match=r"sequence_pool: pad_value must be a Python number, "
                                        r"got bool"):
        lt.sequence_pool(x, ONE, "sum", pad_value=True)


def test_ragged_results_in_the_form_they_came_in():
    x = _x(6)
    y, off = lt.sequence_softmax(x, ONE)
    assert off is ONE
    y2, lod = lt.sequence_softmax(x, [OUTER, ONE])
    assert isinstance(lod, list) and lod[0] is OUTER and torch.equal(y, y2)
    out, outer = lt.sequence_pool(x, [OUTER, ONE], "sum")
    assert outer == [OUTER] and out.shape == (4,)
    want = la.sequence_expand(la.LoDTensor(np.arange(5.0), lod=[[0, 2, 2, 5]]),
                              la.LoDTensor(np.zeros(4), lod=[[0, 2, 3], [0, 3, 3, 4]]))
    v, o = lt.sequence_expand(torch.arange(5.0, dtype=F64), [_off(0, 2, 3), _off(0, 3, 3, 4)],
                              x_offsets=_off(0, 2, 2, 5))
    np.testing.assert_array_equal(v.numpy(), want.numpy())
    assert o.tolist() == want.lod()[0]


def test_nested_tensors_in_and_out(path):
    x = _x(6, 2)
    nt = torch.nested.nested_tensor_from_jagged(x, _off(0, 2, 2, 5, 6))
    y = lt.sequence_reverse(nt)
    assert y.is_nested and torch.equal(y.offsets(), nt.offsets())
    # the nested tensor's second positional argument is the operator's next one
    pooled = lt.sequence_pool(nt, "max")
    assert torch.equal(pooled, lt.sequence_pool(x, ONE, "max"))
    (y.values().sum() + pooled.sum()).backward()
    _, index = lt.sequence_pool(x, ONE, "max", return_index=True)
    want = torch.ones(6, 2, dtype=F64)
    for col in range(2):
        want[index[:, col][index[:, col] >= 0], col] += 1
    torch.testing.assert_close(x.grad, want)
    s = lt.sequence_softmax(torch.nested.nested_tensor_from_jagged(_x(6), ONE))
    assert s.is_nested
    e = lt.sequence_expand_as(_x(4, 2), nt)
    assert e.is_nested and e.values().shape == (6, 2)
    padded, length = lt.sequence_pad(nt)
    assert padded.shape == (4, 3, 2) and length.tolist() == [2, 0, 3, 1]


def test_non_contiguous_values_are_copied_once():
    base = _x(2, 6).detach()
    x = base.T.requires_grad_()          # (6, 2), not contiguous: a documented copy
    assert not x.is_contiguous()
    y = lt.sequence_pool(x, ONE, "sum")
    torch.testing.assert_close(y, lt.sequence_pool(x.detach().contiguous(), ONE, "sum"))
    y.sum().backward()
    assert x.grad.shape == (6, 2)


def test_overlapping_values_are_copied_once():
    row = torch.tensor([[1.0, 2.0]], dtype=F64, requires_grad=True)
    x = row.expand(6, 2)                 # stride 0: six views of one row
    y, _ = lt.sequence_softmax(x[:, :1], ONE)
    y.sum().backward()
    assert row.grad.shape == (1, 2)
    torch.testing.assert_close(y, lt.sequence_softmax(x.detach()[:, :1].clone(), ONE)[0])


def test_a_gradient_of_the_wrong_shape_is_torchs_error(path):
    y = lt.sequence_pool(_x(6), ONE, "sum")
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        y.backward(torch.ones(3, dtype=F64))


def test_zero_copy_on_the_cpu():
    x = torch.arange(6.0, dtype=F64)
    y, _ = lt.lod_reset(x, _off(0, 3, 6))
    assert y is x                          # the values pass through
    from lodarrow.torch import _bridge
    assert np.shares_memory(_bridge.array(x), x.numpy())


# ------------------------------------------------------------------ bad input
def test_integer_values_are_a_type_error_naming_the_argument():
    with pytest.raises(TypeError, match=r"sequence_pool: input must be a floating-point"):
        lt.sequence_pool(torch.arange(6), ONE, "sum")
    with pytest.raises(TypeError, match=r"sequence_conv: filter must be a floating-point"):
        lt.sequence_conv(_x(6, 2), ONE, torch.ones(6, 3, dtype=torch.int64))
    with pytest.raises(TypeError, match=r"sequence_expand_as: x must be"):
        lt.sequence_expand_as(torch.ones(4, dtype=torch.int32), ONE)


def test_offsets_with_requires_grad_or_floats_are_type_errors():
    with pytest.raises(TypeError, match=r"sequence_pool: offsets requires grad"):
        lt.sequence_pool(_x(6), ONE.to(F64).requires_grad_(), "sum")
    with pytest.raises(TypeError, match=r"sequence_softmax: offsets\[1\] must be an int64 or "
                                        r"int32 tensor, got torch.float64$"):
        lt.sequence_softmax(_x(6), [OUTER, ONE.to(F64)])
    with pytest.raises(TypeError, match=r"sequence_pad: offsets must be an int64 tensor"):
        lt.sequence_pad(_x(6), "0, 6")


@pytest.mark.parametrize("dtype", [torch.int16, torch.uint8, torch.int8])
def test_offsets_of_other_integer_dtypes_are_refused(dtype):
    # int64 and int32 only: a narrow dtype is refused, not cast, naming the argument
    with pytest.raises(TypeError, match=rf"sequence_pool: offsets must be an int64 or int32 "
                                        rf"tensor, got {dtype}; cast it first"):
        lt.sequence_pool(_x(6), ONE.to(dtype), "sum")
    with pytest.raises(TypeError, match=rf"sequence_softmax: offsets\[0\] must be an int64 "
                                        rf"or int32 tensor, got {dtype}"):
        lt.sequence_softmax(_x(6), [OUTER.to(dtype), ONE])
    with pytest.raises(TypeError, match=rf"sequence_expand: y must be an int64 or int32 "
                                        rf"tensor, got {dtype}"):
        lt.sequence_expand(_x(4), ONE.to(dtype))
    lt.sequence_pool(_x(6), ONE.to(torch.int32), "sum")      # int32: accepted (cast)


def test_bfloat16_and_complex_values_say_what_to_do():
    with pytest.raises(TypeError, match=r"sequence_pool: input is bfloat16, which lodarrow's "
                                        r"kernels do not take; cast it to float32 or float64"):
        lt.sequence_pool(_x(6).to(torch.bfloat16), ONE, "sum")
    with pytest.raises(TypeError, match=r"sequence_softmax: input is torch.complex64; "
                                        r"lodarrow.torch takes real floating-point"):
        lt.sequence_softmax(_x(6).to(torch.complex64), ONE)


@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("pool", ["sum", "average", "max", "first"])
def test_a_negative_zero_pad_value_keeps_its_sign(pool, grad):
    # the short path (a plain tensor, one int64 offsets tensor) and the general one alike
    x = _x(6).requires_grad_(grad)
    for offsets in (ONE, [ONE]):
        out = lt.sequence_pool(x, offsets, pool, pad_value=-0.0)
        assert out[1].item() == 0.0 and torch.signbit(out[1]).item(), (pool, offsets)
        out = lt.sequence_pool(x, offsets, pool)
        assert not torch.signbit(out[1]).item()


@pytest.mark.parametrize("offsets, match", [
    # one offsets tensor is named ``offsets``, the levels of a list ``offsets[k]``
    (_off(0, 3, 2, 6), (r"sequence_pool: invalid LoD: offsets must be non-decreasing; "
                        r"first violation at position 2 \(3 > 2\)")),
    (_off(1, 6), r"sequence_pool: invalid LoD: offsets must start at 0"),
    (_off(0, 2, 5), (r"sequence_pool: invalid LoD: offsets ends at 5 but the data has 6 rows")),
    ([_off(0, 2, 5)], (r"sequence_pool: invalid LoD: offsets ends at 5 but the data has 6 "
                       r"rows")),
    ([_off(0, 3), ONE], (r"sequence_pool: invalid LoD: offsets\[0\] ends at 3 but "
                         r"offsets\[1\] has 4 sequences")),
    ([_off(0, 1, 2), _off(0, 2, 5)], (r"sequence_pool: invalid LoD: offsets\[1\] \(the last "
                                      r"level\) ends at 5 but the data has 6 rows")),
])
def test_invalid_offsets_name_the_level_and_position(offsets, match):
    with pytest.raises(la.LoDError, match=match):
        lt.sequence_pool(_x(6), offsets, "sum")


def test_other_bad_arguments():
    with pytest.raises(ValueError, match="unknown pool_type 'median'"):
        lt.sequence_pool(_x(6), ONE, "median")
    with pytest.raises(TypeError, match="sequence_pool: pool_type is required"):
        lt.sequence_pool(_x(6), ONE)
    with pytest.raises(TypeError, match="offsets is required"):
        lt.sequence_softmax(_x(6))
    with pytest.raises(TypeError, match="nested tensor, which carries its offsets"):
        lt.sequence_softmax(torch.nested.nested_tensor_from_jagged(_x(6), ONE), ONE)
    with pytest.raises(ValueError, match="sequence_softmax: input must have shape"):
        lt.sequence_softmax(_x(6, 2), ONE)
    with pytest.raises(ValueError, match="ref_level must be -1 or in"):
        lt.sequence_expand(_x(4), ONE, ref_level=1)
    with pytest.raises(ValueError, match=r"length\[1\] = 5 exceeds"):
        lt.sequence_unpad(_x(2, 4), [1, 5])
    with pytest.raises(IndexError, match="runs past its end"):
        lt.sequence_slice(_x(6), ONE, [0, 0, 0, 0], [3, 0, 0, 0])
    with pytest.raises(la.LoDError, match=r"lod_reset: invalid LoD: y ends at 5"):
        lt.lod_reset(_x(6), _off(0, 5))
    with pytest.raises(TypeError, match="updates has dtype torch.float32"):
        lt.sequence_scatter(_x(3, 3), _off(0, 1), torch.ones(2), index_offsets=_off(0, 2))
    with pytest.raises(ValueError, match="context_stride must be 1"):
        lt.sequence_conv(_x(6, 2), ONE, _x(6, 3), context_stride=2)


def test_double_backward_raises_in_the_backward_operator(path):
    x = _x(6)
    y, _ = lt.sequence_softmax(x, ONE)
    (g,) = torch.autograd.grad((y * torch.arange(6.0)).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="backward through "
                                           "lodarrow.sequence_softmax_backward.default but no "
                                           "autograd formula"):
        g.sum().backward()


def test_eager_calls_skip_the_dispatcher_and_compiled_ones_do_not(monkeypatch):
    x = _x(6)
    assert type(lt.sequence_pool(x, ONE, "sum").grad_fn).__name__ == "sequence_pool_eagerBackward"
    monkeypatch.setattr(_library, "FAST_EAGER", False)
    assert "lodarrow_sequence_pool" in type(lt.sequence_pool(x, ONE, "sum").grad_fn).__name__
    with torch.no_grad():
        assert lt.sequence_pool(x, ONE, "sum").grad_fn is None


# ------------------------------------------------------------------ CUDA (where lent)
@pytest.mark.cuda
def test_cuda_tensors_run_on_their_device(path):
    from conftest import cuda_unavailable_reason

    reason = cuda_unavailable_reason() or (None if torch.cuda.is_available()
                                           else "torch has no CUDA device")
    if reason:
        pytest.skip(reason)
    x = _x(6, 2).detach().cuda().requires_grad_()
    off = ONE.cuda()
    y = lt.sequence_pool(x, off, "max")
    assert y.device == x.device
    torch.testing.assert_close(y.cpu(), lt.sequence_pool(x.detach().cpu(), ONE, "max"))
    padded, length = lt.sequence_pad(x, off, 0.5)          # its backward is unpad's kernel
    padded.sum().backward()
    assert x.grad.device == x.device
    torch.testing.assert_close(x.grad.cpu(), torch.ones(6, 2, dtype=F64))
    v, o = lt.sequence_unpad(padded, length)
    assert v.device == x.device and o.device == x.device
    with pytest.raises(NotImplementedError, match="sequence_pool: the backward has no GPU"):
        lt.sequence_pool(x, off, "max").sum().backward()
    with pytest.raises(ValueError, match="offsets is on cpu but the values are on cuda"):
        lt.sequence_pool(x, ONE, "max")


def test_the_public_names_and_their_stub_agree():
    import ast
    import pathlib

    stub = pathlib.Path(lt.__file__).with_suffix(".pyi")
    listed = next(node.value for node in ast.parse(stub.read_text()).body
                  if isinstance(node, ast.Assign) and node.targets[0].id == "__all__")
    assert ast.literal_eval(listed) == lt.__all__
    assert all(callable(getattr(lt, name)) for name in lt.__all__)


@pytest.mark.parametrize("pool", ["sum", "average", "sqrt", "max", "min", "first", "last"])
@pytest.mark.parametrize("shape", [(6,), (6, 3)])
def test_the_small_call_path_equals_the_general_one(pool, shape):
    """lt.sequence_pool(x, offsets, pool) on a plain CPU tensor takes _library.pool_small;
    int32 offsets (a cast first) take the general path: same values, gradients and node."""
    dout = _x(4, *shape[1:], seed=1).detach()
    results = []
    for off in (ONE, ONE.to(torch.int32)):
        x = _x(*shape)
        y = lt.sequence_pool(x, off, pool)
        assert type(y.grad_fn).__name__ == "sequence_pool_eagerBackward"
        y.backward(dout)
        results.append((y.detach(), x.grad))
    torch.testing.assert_close(results[0], results[1], rtol=0, atol=0)
    with pytest.raises(la.LoDError, match=r"sequence_pool: invalid LoD: offsets ends at 6 "
                                          r"but the data has 5 rows"):
        lt.sequence_pool(_x(5, *shape[1:]), ONE, pool)
