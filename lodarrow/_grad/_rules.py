"""The gradient rules: for every differentiable operator, a forward that runs the operator and
keeps its residuals, and a backward from those residuals (docs/gradients.md).

``RULES[name]`` is a :class:`Rule` for the operator ``lodarrow.<name>``:

``forward(*args, **kwargs) -> (result, residuals)``
    The operator's own signature.  It checks that the differentiable arguments hold floats
    (``TypeError`` naming the argument otherwise), calls the operator once (every other
    check happens there; for ``sequence_topk_avg_pooling`` its internal form, which also
    returns the positions it selected) and returns its usual result with the residuals.
``backward(residuals, dout) -> tuple``
    ``dout`` is the upstream gradient of the differentiable output (an array of its data
    shape and dtype, on its device: the padded output of ``sequence_pad``, ``out`` of
    ``sequence_pool(..., return_index=True)``), checked by the caller.  The tuple holds one
    entry per positional parameter of the operator, in order, up to the last differentiable
    one: a gradient array (data only: the input's shape and dtype), None for a
    non-differentiable parameter, or for ``sequence_concat``'s ``input`` a tuple of arrays,
    one per input.

Residuals are a tuple of plain arrays (NumPy, or CuPy where the data is on the GPU: int64
offsets on the host, the max index, the softmax output, ...) and Python scalars, strings,
tuples and None: never LoDTensors or closures, and never a copy of an input the backward does
not read.  :data:`RESIDUALS` names them, per operator, for the torch layer.
"""

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from lodarrow._backends import backend_of_array, is_cupy_array
from lodarrow._grad import _backward as B
from lodarrow._ops import (
    lod_append,
    lod_reset,
    sequence_concat,
    sequence_conv,
    sequence_expand,
    sequence_expand_as,
    sequence_first_step,
    sequence_last_step,
    sequence_pad,
    sequence_pool,
    sequence_reshape,
    sequence_reverse,
    sequence_scatter,
    sequence_slice,
    sequence_softmax,
    sequence_unpad,
)
from lodarrow._ops._common import as_lod_tensor, data_of, host_indices
from lodarrow._ops.sequence_topk_avg_pooling import topk_avg_pool, topks_array
from lodarrow._tensor import LoDTensor

__all__ = ["NOT_DIFFERENTIABLE", "RESIDUALS", "RULES", "Rule", "check_float"]

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)


class Rule(NamedTuple):
    """How one operator is differentiated (see the module docstring)."""

    #: Same signature as the operator; returns ``(result, residuals)``.
    forward: Callable
    #: ``backward(residuals, dout_array)`` -> tuple of gradient arrays or None, one per
    #: positional input (up to the last differentiable one).
    backward: Callable


#: Operators whose outputs hold integers or booleans: asking for their gradient is a
#: ``TypeError`` naming the operator.
NOT_DIFFERENTIABLE = frozenset({"sequence_mask", "sequence_enumerate", "sequence_erase"})


def check_float(obj, arg, op):
    """The dtype of argument ``arg`` (a LoDTensor or array); ``TypeError`` unless float."""
    data = obj.data if isinstance(obj, LoDTensor) else obj
    dtype = getattr(data, "dtype", None)
    if dtype is None:
        dtype = np.asarray(data).dtype
    if dtype.kind != "f":
        raise TypeError(f"{op}: {arg} has dtype {dtype}; gradients exist for float16, float32 "
                        f"and float64 only (cast {arg} to a float dtype to differentiate it)")
    return dtype


def _float_tensor(obj, arg, op):
    """``obj`` as a LoDTensor (zero-copy) whose data is float."""
    t = as_lod_tensor(obj, arg)
    check_float(t, arg, op)
    return t


# --------------------------------------------------------------------------- pooling
def _pool_forward(input, pool_type, is_test=False, pad_value=0.0, return_index=False,
                  name=None, *, out=None):
    x = _float_tensor(input, "input", "sequence_pool")
    pool = pool_type.lower() if isinstance(pool_type, str) else pool_type
    if pool in ("max", "min"):
        res, index = sequence_pool(x, pool_type, is_test, pad_value, True, name, out=(
            None if out is None else out if return_index else (out, None)))
        result = (res, index) if return_index else res
        idx = index.data
    else:
        result = sequence_pool(x, pool_type, is_test, pad_value, return_index, name, out=out)
        idx = None
    return result, (x.offsets[-1], pool, x.data.shape[0], idx)


def _pool_backward(residuals, dout):
    offsets, pool, n_rows, index = residuals
    return (B.pool_backward(dout, offsets, pool, n_rows, index),)


def _step_forward(op, pool):
    def forward(input, name=None, *, out=None):
        x = _float_tensor(input, "input", op.__name__)
        return op(x, name, out=out), (x.offsets[-1], pool, x.data.shape[0], None)
    forward.__name__ = f"_{op.__name__}_forward"
    return forward


# --------------------------------------------------------------------------- softmax
def _softmax_forward(input, use_cudnn=False, name=None, *, out=None):
    x = _float_tensor(input, "input", "sequence_softmax")
    result = sequence_softmax(x, use_cudnn, name, out=out)
    return result, (result.data, x.offsets[-1])


def _softmax_backward(residuals, dout):
    y, offsets = residuals
    return (B.softmax_backward(dout, y, offsets),)


# --------------------------------------------------------------------------- expand
def _expand_forward(x, y, ref_level=-1, name=None, *, out=None):
    xt = _float_tensor(x, "x", "sequence_expand")
    yt = as_lod_tensor(y, "y")
    result = sequence_expand(xt, yt, ref_level, name, out=out)
    level = int(ref_level)
    ref = yt.offsets[level if level >= 0 else yt.lod_level - 1]
    if not xt.lod_level:
        return result, (ref, None, None)
    return result, (ref, xt.offsets[0], result.offsets[0])


def _expand_backward(residuals, dout):
    ref, x_off, out_off = residuals
    return (B.expand_backward(dout, ref, x_off, out_off),)


def _expand_as_forward(x, y, name=None, *, out=None):
    xt = _float_tensor(x, "x", "sequence_expand_as")
    result = sequence_expand_as(xt, y, name, out=out)
    return result, (result.offsets[0],)


def _expand_as_backward(residuals, dout):
    return (B.expand_as_backward(dout, residuals[0]),)


# --------------------------------------------------------------------------- layout
def _pad_forward(x, pad_value, maxlen=None, name=None, *, out=None):
    xt = _float_tensor(x, "x", "sequence_pad")
    result = sequence_pad(xt, pad_value, maxlen, name, out=out)
    return result, (xt.offsets[-1], xt.data.shape[0])


def _pad_backward(residuals, dout):
    offsets, n_rows = residuals
    return (B.pad_backward(dout, offsets, n_rows),)


def _unpad_forward(x, length, name=None, *, out=None):
    xt = _float_tensor(x, "x", "sequence_unpad")
    result = sequence_unpad(xt, length, name, out=out)
    return result, (result.offsets[-1], tuple(xt.data.shape))


def _unpad_backward(residuals, dout):
    offsets, x_shape = residuals
    return (B.unpad_backward(dout, offsets, x_shape),)


def _concat_forward(input, name=None, *, out=None):
    if isinstance(input, (list, tuple)):
        ts = [_float_tensor(t, f"input[{k}]", "sequence_concat") for k, t in enumerate(input)]
    else:
        ts = input  # the operator's own error
    result = sequence_concat(ts, name, out=out)
    return result, (tuple(t.offsets[-1] for t in ts),)


def _concat_backward(residuals, dout):
    return (B.concat_backward(dout, residuals[0]),)


def _slice_forward(input, offset, length, name=None, *, out=None):
    x = _float_tensor(input, "input", "sequence_slice")
    result = sequence_slice(x, offset, length, name, out=out)
    last = x.offsets[-1]
    start = last[:-1] + host_indices(offset, "offset", last.shape[0] - 1, "sequence_slice")
    return result, (start, result.offsets[-1], x.data.shape[0])


def _slice_backward(residuals, dout):
    start, out_off, n_rows = residuals
    return (B.slice_backward(dout, start, out_off, n_rows),)


def _reverse_forward(x, name=None, *, out=None):
    xt = _float_tensor(x, "x", "sequence_reverse")
    return sequence_reverse(xt, name, out=out), (xt.offsets[-1],)


def _reverse_backward(residuals, dout):
    return (B.reverse_backward(dout, residuals[0]),)


def _reshape_forward(input, new_dim, name=None, *, out=None):
    x = _float_tensor(input, "input", "sequence_reshape")
    return sequence_reshape(x, new_dim, name, out=out), (tuple(x.data.shape),)


def _reshape_backward(residuals, dout):
    return (B.reshape_backward(dout, residuals[0]),)


def _lod_reset_forward(x, y=None, target_lod=None, name=None):
    xt = _float_tensor(x, "x", "lod_reset")
    return lod_reset(xt, y, target_lod, name), ()


def _lod_append_forward(x, level, name=None):
    xt = _float_tensor(x, "x", "lod_append")
    return lod_append(xt, level, name), ()


def _identity_backward(residuals, dout):
    return (B.identity_backward(dout),)


# --------------------------------------------------------------------------- scatter
def _scatter_forward(input, index, updates, name=None, *, out=None):
    x = _float_tensor(input, "input", "sequence_scatter")
    idx = as_lod_tensor(index, "index")
    result = sequence_scatter(x, idx, updates, name, out=out)
    upd = data_of(updates)
    if not (isinstance(upd, np.ndarray) or is_cupy_array(upd)):
        upd = np.asarray(upd)
    ids = idx.data.reshape(-1)
    xp = backend_of_array(result.data).xp
    ids = xp.ascontiguousarray(xp.asarray(ids), dtype=np.int64)
    # integer updates (which the operator casts safely) are not differentiable
    upd_dtype = upd.dtype.name if upd.dtype.kind == "f" else None
    return result, (ids, idx.offsets[0], tuple(upd.shape), upd_dtype)


def _scatter_backward(residuals, dout):
    ids, index_offsets, upd_shape, upd_dtype = residuals
    if upd_dtype is None:
        return (dout, None, None)
    dinput, dupd = B.scatter_backward(dout, ids, index_offsets, upd_shape, upd_dtype)
    return (dinput, None, dupd)


# --------------------------------------------------------------------------- conv
def _conv_forward(input, filter, context_start=None, context_length=None, context_stride=1,
                  padding_data=None, bias=None, name=None, *, out=None):
    op = "sequence_conv"
    x = _float_tensor(input, "input", op)
    w_dtype = check_float(filter, "filter", op)
    pad_dtype = None if padding_data is None else check_float(padding_data, "padding_data", op)
    b_dtype = None if bias is None else check_float(bias, "bias", op)
    result = sequence_conv(x, filter, context_start, context_length, context_stride,
                           padding_data, bias, name, out=out)
    data = x.data
    n = data.shape[0]
    d = data.shape[1] if data.ndim == 2 else 1
    xp = backend_of_array(data).xp
    compute = _F64 if data.dtype == _F64 else _F32
    w = data_of(filter)
    w = xp.ascontiguousarray(xp.asarray(w), dtype=compute)
    cl = w.shape[0] // d if context_length is None else int(context_length)
    cs = -(cl // 2) if context_start is None else int(context_start)
    pad = None
    pad_shape = None
    if padding_data is not None:
        p = xp.asarray(data_of(padding_data))
        pad_shape = tuple(p.shape)
        pad = xp.ascontiguousarray(p.reshape(-1, d), dtype=compute)
    b_shape = None if bias is None else tuple(xp.asarray(data_of(bias)).shape)
    residuals = (data.reshape(n, d), x.offsets[-1], w, pad, cs, cl, tuple(data.shape),
                 w_dtype.name, None if pad_dtype is None else pad_dtype.name, pad_shape,
                 None if b_dtype is None else b_dtype.name, b_shape)
    return result, residuals


def _conv_backward(residuals, dout):
    (x, offsets, w, pad, cs, cl, x_shape, w_dtype, pad_dtype, pad_shape, b_dtype,
     b_shape) = residuals
    dx, dw, dpad, dbias = B.conv_backward(dout, x, offsets, w, pad, cs, cl,
                                          bias=b_dtype is not None)
    dx = dx.reshape(x_shape)
    dw = dw.astype(w_dtype, copy=False)
    if dpad is not None:
        dpad = dpad.astype(pad_dtype, copy=False).reshape(pad_shape)
    if dbias is not None:
        dbias = dbias.astype(b_dtype, copy=False).reshape(b_shape)
    return (dx, dw, None, None, None, dpad, dbias)


# --------------------------------------------------------------------------- top-k
def _topk_forward(input, row, col, topks, channel_num, name=None, *, out=None):
    op = "sequence_topk_avg_pooling"
    x = _float_tensor(input, "input", op)
    r = as_lod_tensor(row, "row")
    c = as_lod_tensor(col, "col")
    # One selection: the positions the result averages are the residual.
    result, pos = topk_avg_pool(x, r, c, topks, channel_num, out=out, positions=True)
    return result, (pos, x.offsets[0], r.offsets[0], c.offsets[0], topks_array(topks),
                    int(channel_num), tuple(x.data.shape))


def _topk_backward(residuals, dout):
    pos, in_off, row_off, col_off, ks, channels, x_shape = residuals
    dx = B.topk_avg_pool_backward(dout, pos, in_off, row_off, col_off, ks, channels,
                                  int(np.prod(x_shape)))
    return (dx.reshape(x_shape),)


#: Operator name -> its :class:`Rule`.
RULES = {
    "sequence_pool": Rule(_pool_forward, _pool_backward),
    "sequence_first_step": Rule(_step_forward(sequence_first_step, "first"), _pool_backward),
    "sequence_last_step": Rule(_step_forward(sequence_last_step, "last"), _pool_backward),
    "sequence_softmax": Rule(_softmax_forward, _softmax_backward),
    "sequence_expand": Rule(_expand_forward, _expand_backward),
    "sequence_expand_as": Rule(_expand_as_forward, _expand_as_backward),
    "sequence_pad": Rule(_pad_forward, _pad_backward),
    "sequence_unpad": Rule(_unpad_forward, _unpad_backward),
    "sequence_concat": Rule(_concat_forward, _concat_backward),
    "sequence_slice": Rule(_slice_forward, _slice_backward),
    "sequence_reverse": Rule(_reverse_forward, _reverse_backward),
    "sequence_reshape": Rule(_reshape_forward, _reshape_backward),
    "lod_reset": Rule(_lod_reset_forward, _identity_backward),
    "lod_append": Rule(_lod_append_forward, _identity_backward),
    "sequence_scatter": Rule(_scatter_forward, _scatter_backward),
    "sequence_conv": Rule(_conv_forward, _conv_backward),
    "sequence_topk_avg_pooling": Rule(_topk_forward, _topk_backward),
}

#: Operator name -> the names of its residuals, in order (what each rule's forward keeps).
RESIDUALS = {
    "sequence_pool": ("offsets", "pool_type", "n_rows", "index"),
    "sequence_first_step": ("offsets", "pool_type", "n_rows", "index"),
    "sequence_last_step": ("offsets", "pool_type", "n_rows", "index"),
    "sequence_softmax": ("y", "offsets"),
    "sequence_expand": ("ref_offsets", "x_offsets", "out_offsets"),
    "sequence_expand_as": ("y_offsets",),
    "sequence_pad": ("offsets", "n_rows"),
    "sequence_unpad": ("out_offsets", "x_shape"),
    "sequence_concat": ("input_offsets",),
    "sequence_slice": ("src_start", "out_offsets", "n_rows"),
    "sequence_reverse": ("offsets",),
    "sequence_reshape": ("x_shape",),
    "lod_reset": (),
    "lod_append": (),
    "sequence_scatter": ("ids", "index_offsets", "updates_shape", "updates_dtype"),
    "sequence_conv": ("x", "offsets", "filter", "padding", "context_start", "context_length",
                      "x_shape", "filter_dtype", "padding_dtype", "padding_shape",
                      "bias_dtype", "bias_shape"),
    "sequence_topk_avg_pooling": ("pos", "in_offsets", "row_offsets", "col_offsets", "topks",
                                  "channels", "x_shape"),
}
