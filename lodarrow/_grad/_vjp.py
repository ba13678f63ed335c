"""``lodarrow.vjp``: run an operator and get the pullback of its gradient (docs/gradients.md)."""

import numpy as np

from lodarrow._backends import is_cupy_array
from lodarrow._grad._rules import NOT_DIFFERENTIABLE, RULES
from lodarrow._ops._common import as_lod_tensor
from lodarrow._tensor import LoDTensor

__all__ = ["vjp"]


def _is_arrow_like(obj):
    return (hasattr(obj, "__arrow_c_array__") or hasattr(obj, "__arrow_c_stream__")
            or type(obj).__module__.startswith("pyarrow"))


def _converted(obj, name):
    """An Arrow argument (or list of them, as ``sequence_concat`` takes) as LoDTensors
    (zero-copy), so that the pullback knows its LoD; anything else as it is."""
    if _is_arrow_like(obj):
        return as_lod_tensor(obj, name)
    if isinstance(obj, list) and any(_is_arrow_like(o) for o in obj):
        return [_converted(o, f"{name}[{k}]") for k, o in enumerate(obj)]
    return obj


def _operator_name(op):
    """The name under which ``op`` is a lodarrow operator, or a ``TypeError``."""
    import lodarrow._ops as ops

    name = getattr(op, "__name__", None)
    if not isinstance(name, str) or getattr(ops, name, None) is not op:
        raise TypeError(f"vjp: op must be a lodarrow operator such as lodarrow.sequence_pool, "
                        f"got {op!r}")
    if name in NOT_DIFFERENTIABLE:
        raise TypeError(f"{name} is not differentiable: its output holds integers or booleans "
                        f"(differentiable operators: docs/gradients.md)")
    return name


def _structure(obj):
    """What the pullback keeps of a positional argument to shape its gradient: a LoDTensor's
    LoD and place (not its data), the kind of an array, or a list of those (concat)."""
    if isinstance(obj, LoDTensor):
        return ("lod", obj.offsets, obj.place)
    if isinstance(obj, (list, tuple)) and any(isinstance(t, LoDTensor) for t in obj):
        return ("list", tuple(_structure(t) for t in obj))
    return ("array",)


def _wrap(grad, structure, arg):
    """A gradient array as its input's kind: a LoDTensor with the input's LoD, or an array."""
    if grad is None:
        return None
    kind = structure[0]
    if kind == "list":
        return tuple(_wrap(g, s, arg) for g, s in zip(grad, structure[1]))
    if kind == "lod":
        return LoDTensor._from_trusted(grad, structure[1], structure[2])
    return grad


def _device(a):
    return a.device.id if is_cupy_array(a) else None


def _where(device):
    return "on the CPU" if device is None else f"on the GPU (cuda:{device})"


def _same_lod(a, b):
    return len(a) == len(b) and all(x is y or (x.shape == y.shape and bool((x == y).all()))
                                    for x, y in zip(a, b))


def _check_dout(dout, name, out_shape, out_dtype, out_device, out_offsets):
    """``dout`` as an array of the output's shape, dtype and device; errors name ``dout``."""
    if isinstance(dout, LoDTensor):
        if not _same_lod(dout.offsets, out_offsets):
            raise ValueError(f"{name}: dout has the LoD {dout.lod()} but the output has "
                             f"{[o.tolist() for o in out_offsets]}; pass an array or a "
                             f"LoDTensor with the output's LoD")
        dout = dout.data
    if not (isinstance(dout, np.ndarray) or is_cupy_array(dout)):
        raise TypeError(f"{name}: dout must be a NumPy or CuPy array (or a LoDTensor) of the "
                        f"output's shape, got {type(dout).__name__}")
    want, got = out_device, _device(dout)
    if want != got:
        raise ValueError(f"{name}: dout is {_where(got)} but the output is {_where(want)}; "
                         f"move dout there first")
    if dout.dtype != out_dtype:
        raise TypeError(f"{name}: dout has dtype {dout.dtype} but the output has "
                        f"{out_dtype}; give dout the output's dtype")
    if dout.shape != out_shape:
        raise ValueError(f"{name}: dout has shape {list(dout.shape)} but the output has "
                         f"{list(out_shape)}")
    return dout


def vjp(op, *args, **kwargs):
    """Run a sequence operator and return its result with the pullback of its gradient.

    Like ``jax.vjp``: the forward runs once, keeping only what the backward needs (the LoD,
    the max / min index, the softmax output, never a copy of an input it does not read);
    ``pullback(dout)`` maps an upstream gradient of the output to the gradients of the
    positional arguments (docs/gradients.md#lavjp).

    Parameters
    ----------
    op : callable
        A differentiable lodarrow operator, e.g. ``lodarrow.sequence_pool`` (the table of
        docs/gradients.md#what-is-differentiable).
    *args
        The operator's positional arguments; these are the ones differentiated (as in
        ``jax.vjp``: pass ``padding_data`` or ``bias`` of ``sequence_conv`` positionally to
        get their gradients).
    **kwargs
        The operator's keyword arguments (``out=`` is not accepted).

    Returns
    -------
    result : LoDTensor or tuple
        What ``op(*args, **kwargs)`` returns.
    pullback : callable
        ``pullback(dout)`` returns a tuple with one entry per positional argument: the
        gradient of a float input (a LoDTensor with the input's shape, dtype and LoD when the
        input is a LoDTensor or an Arrow array; an array for an array input; a tuple of them
        for ``sequence_concat``'s list), or None for an argument that is not differentiable
        (pool types, offsets, lengths, index arrays, ``pad_value``, ``y`` of
        ``sequence_expand``).  ``dout`` is an array of the differentiable output's data shape
        and dtype on its device, or a LoDTensor with its LoD; for operators returning two
        results (``sequence_pad``, ``sequence_pool(..., return_index=True)``) it is the
        gradient of the first.  It may be called more than once.

    Raises
    ------
    TypeError
        If ``op`` is not a lodarrow operator, is not differentiable (``sequence_mask``,
        ``sequence_enumerate``, ``sequence_erase``: the message names it), ``out=`` is given,
        or a differentiable argument holds integers (the message names the argument).  The
        pullback: if ``dout`` is not an array or has the wrong dtype.
    ValueError
        From the pullback, if ``dout`` has the wrong shape, LoD or device.
    NotImplementedError
        For CuPy data where the backward has no GPU kernel yet (softmax, conv, max / min /
        sum pooling, the block form of expand, top-k): the message names the operator.

    See Also
    --------
    jax.vjp : The same interface for JAX functions.
    lodarrow.torch.sequence_pool : The operators as torch functions with autograd.

    Notes
    -----
    Every operator's own errors are raised by the forward, once.  float16 gradients are
    computed in float32 and rounded, as the forward computes.  The gradients are
    deterministic: the same bits for any thread count.

    Examples
    --------
    >>> import numpy as np, lodarrow as la
    >>> x = la.LoDTensor(np.array([[1.], [3.], [2.], [4.], [6.]]), lod=[[0, 2, 5]])
    >>> out, pullback = la.vjp(la.sequence_pool, x, "max")
    >>> out.numpy().ravel().tolist()
    [3.0, 6.0]
    >>> dx, none = pullback(np.array([[10.], [20.]]))
    >>> dx.numpy().ravel().tolist(), dx.lod(), none
    ([0.0, 10.0, 0.0, 0.0, 20.0], [[0, 2, 5]], None)
    """
    name = _operator_name(op)
    if "out" in kwargs:
        raise TypeError(f"vjp: {name}'s out= is not supported (the pullback may keep the "
                        f"output, which out= would let later calls overwrite)")
    args = tuple(_converted(a, f"args[{i}]") for i, a in enumerate(args))
    rule = RULES[name]
    result, residuals = rule.forward(*args, **kwargs)
    primary = result[0] if isinstance(result, tuple) else result
    out_data = primary.data  # its shape, dtype and device only: not kept
    out_shape, out_dtype, out_device = out_data.shape, out_data.dtype, _device(out_data)
    out_offsets = primary.offsets
    del out_data, primary
    structures = tuple(_structure(a) for a in args)
    n_args = len(args)
    del args  # the pullback keeps the residuals and the inputs' LoD only

    def pullback(dout):
        dout = _check_dout(dout, name, out_shape, out_dtype, out_device, out_offsets)
        grads = rule.backward(residuals, dout)
        grads = tuple(grads[:n_args]) + (None,) * (n_args - len(grads))
        return tuple(_wrap(g, s, i) for i, (g, s) in enumerate(zip(grads, structures)))

    pullback.__doc__ = f"The pullback of {name}: dout -> one gradient per positional argument."
    return result, pullback
