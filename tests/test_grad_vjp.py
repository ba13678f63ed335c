"""``la.vjp``'s surface: every differentiable operator has a rule, the errors (dout of the
wrong shape / dtype / device / LoD, integer inputs, non-differentiable operators), Arrow
inputs, residuals that are plain arrays, and CuPy data reaching a backward without a GPU
kernel (a fake backend standing in for the GPU)."""

import contextlib
import inspect

import numpy as np
import pyarrow as pa
import pytest

import lodarrow as la
from lodarrow._grad import _backward, _rules
from lodarrow._grad._rules import NOT_DIFFERENTIABLE, RESIDUALS, RULES, Rule

#: The operators docs/gradients.md lists as differentiable.
DIFFERENTIABLE = {"sequence_pool", "sequence_first_step", "sequence_last_step",
                  "sequence_softmax", "sequence_expand", "sequence_expand_as", "sequence_pad",
                  "sequence_unpad", "sequence_concat", "sequence_slice", "sequence_reverse",
                  "sequence_reshape", "lod_reset", "lod_append", "sequence_scatter",
                  "sequence_conv", "sequence_topk_avg_pooling"}


def _x(dtype=np.float64):
    return la.LoDTensor(np.arange(10, dtype=dtype).reshape(5, 2), lod=[[0, 2, 2, 5]])


def test_every_operator_is_differentiable_or_refused():
    assert set(RULES) == DIFFERENTIABLE
    assert NOT_DIFFERENTIABLE | DIFFERENTIABLE == set(la._ops.__all__)
    assert set(RESIDUALS) == set(RULES)
    for name, rule in RULES.items():
        assert isinstance(rule, Rule)
        op = getattr(la, name)
        # the rule's forward takes the operator's arguments
        assert list(inspect.signature(rule.forward).parameters) == \
            list(inspect.signature(op).parameters), name


@pytest.mark.parametrize("name", sorted(NOT_DIFFERENTIABLE))
def test_non_differentiable_operators_are_a_type_error(name):
    with pytest.raises(TypeError, match=rf"^{name} is not differentiable"):
        la.vjp(getattr(la, name), _x(np.int64))


def test_op_must_be_an_operator_and_out_is_refused():
    with pytest.raises(TypeError, match="op must be a lodarrow operator"):
        la.vjp(np.sum, _x())
    with pytest.raises(TypeError, match="out= is not supported"):
        la.vjp(la.sequence_pool, _x(), "sum", out=np.empty((3, 2)))


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8])
def test_integer_data_is_a_type_error_naming_the_argument(dtype):
    with pytest.raises(TypeError, match=r"^sequence_pool: input has dtype"):
        la.vjp(la.sequence_pool, _x(dtype), "sum")
    with pytest.raises(TypeError, match=r"^sequence_expand: x has dtype"):
        la.vjp(la.sequence_expand, _x(dtype), _x())
    with pytest.raises(TypeError, match=r"^sequence_concat: input\[1\] has dtype"):
        la.vjp(la.sequence_concat, [_x(), _x(dtype)])
    with pytest.raises(TypeError, match=r"^sequence_conv: filter has dtype"):
        la.vjp(la.sequence_conv, _x(), np.ones((6, 2), dtype))


def test_dout_is_checked_before_any_work(monkeypatch):
    _out, pullback = la.vjp(la.sequence_pool, _x(), "average")

    def boom(*args):
        raise AssertionError("the backward ran")

    monkeypatch.setattr(_backward, "pool_backward", boom)
    with pytest.raises(ValueError, match=r"sequence_pool: dout has shape \[3\] but the output "
                                         r"has \[3, 2\]"):
        pullback(np.ones(3))
    with pytest.raises(TypeError, match="sequence_pool: dout has dtype float32 but the output "
                                        "has float64"):
        pullback(np.ones((3, 2), np.float32))
    with pytest.raises(TypeError, match="sequence_pool: dout must be a NumPy or CuPy array"):
        pullback([[1.0, 2.0]] * 3)
    with pytest.raises(ValueError, match="sequence_pool: dout has the LoD"):
        pullback(la.LoDTensor(np.ones((3, 2)), lod=[[0, 3]]))


def test_dout_on_another_device_names_dout(monkeypatch):
    from lodarrow._grad import _vjp

    _out, pullback = la.vjp(la.sequence_softmax, la.LoDTensor(np.ones(3), lod=[[0, 3]]))
    # a dout "on GPU 0" (the device probe faked): refused before any work
    monkeypatch.setattr(_vjp, "_device", lambda a: 0)
    monkeypatch.setattr(_vjp, "is_cupy_array", lambda a: True)
    with pytest.raises(ValueError, match=r"sequence_softmax: dout is on the GPU \(cuda:0\) but "
                                         r"the output is on the CPU"):
        pullback(np.ones(3))


def test_dout_as_a_lodtensor_and_two_results():
    x = _x()
    (padded, _length), pullback = la.vjp(la.sequence_pad, x, 0.0)
    (dx, dpad) = pullback(padded)  # dout of the padded output: a LoDTensor (no LoD) works
    assert dpad is None
    np.testing.assert_array_equal(dx.numpy(), x.numpy())
    out, pullback = la.vjp(la.sequence_reverse, x)
    (dx,) = pullback(out)
    np.testing.assert_array_equal(dx.numpy(), x.numpy())


def test_arrow_input_and_plain_array_input():
    arr = pa.array([[1.0, 2.0], [], [3.0]])
    out, pullback = la.vjp(la.sequence_pool, arr, "sum")
    assert out.numpy().tolist() == [3.0, 0.0, 3.0]
    (dx, _) = pullback(np.array([1.0, 2.0, 3.0]))
    assert isinstance(dx, la.LoDTensor) and dx.lod() == [[0, 2, 2, 3]]
    np.testing.assert_array_equal(dx.numpy(), [1.0, 1.0, 3.0])
    y = la.LoDTensor(np.zeros(3), lod=[[0, 1, 3]])
    _out, pullback = la.vjp(la.sequence_expand_as, np.array([1.0, 2.0]), y)
    dx, dy = pullback(np.ones(3))
    assert isinstance(dx, np.ndarray) and dy is None  # an array's gradient is an array
    np.testing.assert_array_equal(dx, [1.0, 2.0])


def _plain(value):
    if isinstance(value, (tuple, list)):
        return all(_plain(v) for v in value)
    return value is None or isinstance(value, (np.ndarray, int, float, str, np.integer))


@pytest.mark.parametrize("name", sorted(DIFFERENTIABLE))
def test_residuals_are_plain_arrays_and_scalars(name):
    x = _x()
    y = la.LoDTensor(np.zeros(5), lod=[[0, 1, 1, 3, 5]])
    args = {
        "sequence_pool": (x, "max"), "sequence_first_step": (x,), "sequence_last_step": (x,),
        "sequence_softmax": (la.LoDTensor(np.ones(5), lod=[[0, 2, 5]]),),
        "sequence_expand": (x, la.LoDTensor(np.zeros(6), lod=[[0, 1, 1, 3], [0, 1, 2, 6]])),
        "sequence_expand_as": (np.ones((4, 2)), y), "sequence_pad": (x, 0.0),
        "sequence_unpad": (np.ones((2, 3, 2)), np.array([1, 3])),
        "sequence_concat": ([x, x],), "sequence_slice": (x, [0, 0, 1], [1, 0, 2]),
        "sequence_reverse": (x,), "sequence_reshape": (x, 1), "lod_reset": (x, None, [0, 5]),
        "lod_append": (la.LoDTensor(np.ones(3)), [0, 1, 3]),
        "sequence_scatter": (np.ones((2, 3)), la.LoDTensor(np.array([0, 2]), lod=[[0, 1, 2]]),
                             np.ones(2)),
        "sequence_conv": (x, np.ones((6, 1))),
        "sequence_topk_avg_pooling": (la.LoDTensor(np.ones(4), lod=[[0, 4]]),
                                      la.LoDTensor(np.ones(2), lod=[[0, 2]]),
                                      la.LoDTensor(np.ones(2), lod=[[0, 2]]), [1], 1),
    }[name]
    result, residuals = RULES[name].forward(*args)
    assert isinstance(residuals, tuple) and len(residuals) == len(RESIDUALS[name])
    assert _plain(residuals), residuals
    primary = result[0] if isinstance(result, tuple) else result
    grads = RULES[name].backward(residuals, np.ones(primary.data.shape))
    params = list(inspect.signature(getattr(la, name)).parameters)
    assert isinstance(grads, tuple) and grads and len(grads) <= params.index("name")
    assert grads[0] is not None


class _FakeGPU:
    """The CPU's arrays with the CUDA launchers' kernel table: what a CuPy array meets."""

    name = "cuda"
    xp = np
    empty = staticmethod(np.empty)
    asarray = staticmethod(np.asarray)

    def __init__(self):
        from lodarrow._backends import cpu
        from lodarrow._cuda import seq_grad

        self._table = {**cpu.KERNELS, **seq_grad.ENTRIES}

    def kernel(self, name):
        return self._table[name]

    def device(self, data):
        return contextlib.nullcontext()


@pytest.mark.parametrize("op, args, name", [
    (la.sequence_softmax, (la.LoDTensor(np.ones(3), lod=[[0, 3]]),), "sequence_softmax"),
    (la.sequence_pool, (_x(), "max"), "sequence_pool"),
    (la.sequence_pool, (_x(), "sum"), "sequence_pool"),
    (la.sequence_conv, (_x(), np.ones((6, 1))), "sequence_conv"),
    (la.sequence_expand, (_x(), la.LoDTensor(np.zeros(3), lod=[[0, 1, 2, 3]])),
     "sequence_expand"),
])
def test_a_gpu_array_without_a_gpu_kernel_raises_not_implemented(monkeypatch, op, args, name):
    out, pullback = la.vjp(op, *args)
    monkeypatch.setattr(_backward, "backend_of_array", lambda a: _FakeGPU())
    with pytest.raises(NotImplementedError, match=rf"^{name}: the backward has no GPU kernel"):
        pullback(np.ones(out.data.shape))


def test_backwards_made_of_operator_kernels_take_the_gpu_kernels(monkeypatch):
    """pad / unpad / reverse / concat / slice / expand of rows use kernels the GPU has."""
    monkeypatch.setattr(_backward, "backend_of_array", lambda a: _FakeGPU())
    x = _x()
    for op, args in ((la.sequence_pad, (x, 0.0)), (la.sequence_reverse, (x,)),
                     (la.sequence_concat, ([x, x],)), (la.sequence_slice, (x, [0, 0, 1],
                                                                            [1, 0, 1])),
                     (la.sequence_expand_as, (np.ones((3, 2)), x))):
        out, pullback = la.vjp(op, *args)
        primary = out[0] if isinstance(out, tuple) else out
        assert pullback(np.ones(primary.data.shape))[0] is not None


def test_rules_module_exports():
    assert _rules.__all__ and la.vjp.__module__ == "lodarrow._grad._vjp"
    assert "vjp" in la.__all__
