"""The custom operators (namespace ``lodarrow``): each forward with its fake (shape) kernel,
its autograd formula and its backward, itself a custom operator so that
``torch.compile(fullgraph=True)`` traces through both without a graph break.

A forward kernel validates the LoD once (``_bridge.checked_lod``, the checks and messages of
a LoDTensor's LoD) and runs lodarrow's operator on views of the tensors; a backward kernel
trusts what its forward checked and runs the array-level backward of ``lodarrow._grad``.
Every output is a fresh tensor (a custom operator's outputs never alias its inputs).
Output sizes that depend on the data are the fake context's dynamic sizes.
"""


import numpy as np
import torch
from torch import Tensor
from torch.utils._python_dispatch import _get_current_dispatch_mode

from lodarrow import _ops
from lodarrow._backends import CPU
from lodarrow._cupy import get_cupy
from lodarrow._grad import _backward
from lodarrow._grad._rules import RULES
from lodarrow._ops._common import pad_array
from lodarrow._ops.sequence_pool import POOL_TYPES
from lodarrow._tensor import LoDTensor
from lodarrow.torch import _bridge

_LIB = "lodarrow"


#: Eager calls skip torch.library's dispatch (about half the cost of a small call): the
#: kernel runs directly, under a ``torch.autograd.Function`` with the same formula when a
#: gradient is needed.  Under ``torch.compile`` (and for ``torch.ops.lodarrow.*`` called
#: directly) the custom operators run.  False: always the custom operators.
FAST_EAGER = True

#: custom operator -> its kernel function; custom operator -> its eager autograd.Function
_KERNELS = {}
_FUNCTIONS = {}


def _op(name):
    def register(fn):
        op = torch.library.custom_op(f"{_LIB}::{name}", mutates_args=())(fn)
        _KERNELS[op] = fn
        return op
    return register


def _requires_grad(args):
    for a in args:
        if isinstance(a, Tensor):
            if a.requires_grad:
                return True
        elif isinstance(a, (list, tuple)):
            for t in a:
                if isinstance(t, Tensor) and t.requires_grad:
                    return True
    return False


#: torch.compiler.is_exporting (torch >= 2.5); before it, export runs under dynamo
_is_exporting = getattr(torch.compiler, "is_exporting", lambda: False)


def _traced(args):
    """Whether this call is being traced rather than run: ``torch.compile`` or export, a
    dispatch mode (``make_fx``, fake tensors), or a tensor subclass among the arguments."""
    if (torch.compiler.is_compiling() or _is_exporting()
            or _get_current_dispatch_mode() is not None):
        return True
    for a in args:  # loops, not any(generator): this runs on every eager call
        if isinstance(a, Tensor):
            if type(a) is not Tensor:
                return True
        elif isinstance(a, (list, tuple)):
            for t in a:
                if isinstance(t, Tensor) and type(t) is not Tensor:
                    return True
    return False


def call(op, *args):
    """Run custom operator ``op``: itself when traced (``torch.compile``, export, fake
    tensors), else (``FAST_EAGER``) its kernel, inside its autograd.Function when an input
    requires grad."""
    if not FAST_EAGER or _traced(args):
        return op(*args)
    if torch.is_grad_enabled() and _requires_grad(args):
        fn = _FUNCTIONS.get(op)
        if fn is None:  # a list of differentiable inputs (concat): the operator's autograd
            return op(*args)
        return fn.apply(*args)
    return _KERNELS[op](*args)


def _backward_call(ctx, op, *args):
    """A backward operator from an autograd formula: its kernel on the eager path, the
    operator itself on the custom operator's (so that compiled backwards trace it) and under
    ``create_graph`` (where differentiating through it raises torch's error naming it, never
    a silent zero)."""
    if getattr(ctx, "eager", False) and not (torch.is_grad_enabled() and _requires_grad(args)):
        return _KERNELS[op](*args)
    return op(*args)


def _autograd(op, backward, setup_context, eager=True):
    """``op.register_autograd`` and the eager autograd.Function of the same formula
    (``eager=False``: none, for an operator whose differentiable inputs come in a list,
    which an autograd.Function does not track)."""
    op.register_autograd(backward, setup_context=setup_context)
    if not eager:
        return

    def forward(ctx, *args):
        ctx.eager = True
        out = _KERNELS[op](*args)
        setup_context(ctx, args, out)
        return out

    def backward_(ctx, *grads):
        # a list input (the LoD levels) gets one None, as autograd.Function wants
        return tuple([None if type(g) is list else g for g in backward(ctx, *grads)])

    # named after the operator (its graph nodes read sequence_pool_eagerBackward)
    Function = type(f"{op._name.split('::')[-1]}_eager", (torch.autograd.Function,),
                    {"forward": staticmethod(forward), "backward": staticmethod(backward_),
                     "__module__": __name__})
    _FUNCTIONS[op] = Function


def _empty_like_rows(values, rows):
    return values.new_empty((rows, *values.shape[1:]))


def _dynamic():
    return torch.library.get_ctx().new_dynamic_size()


def _run(values, fn):
    if not values.is_cuda:  # the CPU has no stream: no context manager on every call
        return fn()
    with _bridge.stream_of(values):
        return fn()


# ============================================================================ sequence_pool
@_op("sequence_pool")
def sequence_pool(values: Tensor, lod: list[Tensor], pool_type: str,
                  pad_value: float, pad: Tensor | None = None) -> tuple[Tensor, Tensor]:
    def go():
        levels = _bridge.checked_lod(lod, values.shape[0], "sequence_pool", "offsets")
        x = _bridge.lod_tensor(values, levels)
        pv = _pad_of(pad_value, pad, values)
        if pool_type in ("max", "min"):
            out, index = _ops.sequence_pool(x, pool_type, pad_value=pv, return_index=True)
            return _bridge.tensor(out.data, values), _bridge.tensor(index.data, values)
        out = _ops.sequence_pool(x, pool_type, pad_value=pv)
        return _bridge.tensor(out.data, values), values.new_empty((0,), dtype=torch.int64)
    if values.is_cpu and lod and values.dtype in _bridge.FLOAT_DTYPES and pool_type in _POOLS:
        out, index = _pool_host(values, lod, pool_type, pad_value, pad)
        return out, (values.new_empty((0,), dtype=torch.int64) if index is None else index)
    return _run(values, go)


_POOLS = frozenset(POOL_TYPES)
_I64 = np.dtype(np.int64)


def _pad_of(pad_value, pad, values):
    """The pad value as lodarrow's operators take it: the Python float, or the pad tensor
    (checked by the public function: shape (), (1,) or the feature shape, a dtype that casts
    safely) as a host array of the values' dtype (a few numbers: copied to the host)."""
    if pad is None:
        return pad_value
    return _bridge.host_array(pad.to(values.dtype))


def _pool_host(values, lod, pool_type, pad_value, pad=None):
    """``sequence_pool`` of CPU float values: the CPU pool kernel on the validated offsets,
    as ``lodarrow.sequence_pool`` runs it for them (the input's dtype out, the pad value
    converted by ``pad_array``), without building and wrapping LoDTensors (a third of a
    small call).  The index is None unless the pool is max or min."""
    levels = _bridge.checked_lod(lod, values.shape[0], "sequence_pool", "offsets")
    data = _bridge.array(values)
    feat = data.shape[1:]
    offsets = levels[-1]
    shape = (offsets.shape[0] - 1, *feat)
    out = CPU.empty(shape, data.dtype)
    pad = pad_array(_pad_of(pad_value, pad, values), data.dtype, feat, np)
    if pool_type in ("max", "min"):
        index = CPU.empty(shape, _I64)
        CPU.kernel("pool")(out, index, data, offsets, pad, pool_type)
        return torch.from_numpy(out), torch.from_numpy(index)
    CPU.kernel("pool")(out, None, data, offsets, pad, pool_type)
    return torch.from_numpy(out), None


@sequence_pool.register_fake
def _(values, lod, pool_type, pad_value, pad=None):
    out = _empty_like_rows(values, lod[-1].shape[0] - 1)
    index = (out.new_empty(out.shape, dtype=torch.int64) if pool_type in ("max", "min")
             else values.new_empty((0,), dtype=torch.int64))
    return out, index


# ========================================================================= sequence_softmax
@_op("sequence_softmax")
def sequence_softmax(values: Tensor, lod: list[Tensor]) -> Tensor:
    def go():
        levels = _bridge.checked_lod(lod, values.shape[0], "sequence_softmax", "offsets")
        return _bridge.tensor(_ops.sequence_softmax(_bridge.lod_tensor(values, levels)).data,
                              values)
    return _run(values, go)


@sequence_softmax.register_fake
def _(values, lod):
    return torch.empty_like(values)


# ========================================================================== sequence_expand
@_op("sequence_expand")
def sequence_expand(x: Tensor, x_lod: list[Tensor], y_lod: list[Tensor],
                    ref_level: int) -> tuple[Tensor, Tensor]:
    def go():
        xl = _bridge.checked_lod(x_lod, x.shape[0], "sequence_expand", "x_offsets")
        yl = _bridge.checked_lod(y_lod, None, "sequence_expand", "y")
        xt = _bridge.lod_tensor(x, xl)
        yt = _ops_y(yl, x)
        out = _ops.sequence_expand(xt, yt, ref_level)
        new = (_bridge.offsets_tensor(out.offsets[0], x) if x_lod
               else x.new_empty((0,), dtype=torch.int64))
        return _bridge.tensor(out.data, x), new
    return _run(x, go)


def _ops_y(levels, like):
    """A LoDTensor that only carries ``levels`` (its data is never read): a zero-stride view
    of one element, ``levels[-1][-1]`` rows long."""
    rows = int(levels[-1][-1])
    data = np.lib.stride_tricks.as_strided(np.zeros(1, dtype=np.int8), (rows,), (0,))
    if like.device.type == "cuda":
        cupy = get_cupy("a CUDA tensor in lodarrow.torch")
        data = cupy.zeros(1, dtype=cupy.int8)
        data = cupy.lib.stride_tricks.as_strided(data, (rows,), (0,))
    return LoDTensor._from_trusted(data, tuple(levels))


@sequence_expand.register_fake
def _(x, x_lod, y_lod, ref_level):
    out = _empty_like_rows(x, _dynamic())
    new = (x.new_empty((_dynamic(),), dtype=torch.int64) if x_lod
           else x.new_empty((0,), dtype=torch.int64))
    return out, new


# ======================================================================= sequence_expand_as
@_op("sequence_expand_as")
def sequence_expand_as(x: Tensor, y_offsets: Tensor) -> Tensor:
    def go():
        yl = _bridge.checked_lod([y_offsets], None, "sequence_expand_as", "y")
        out = _ops.sequence_expand_as(_bridge.array(x), _ops_y(yl, x))
        return _bridge.tensor(out.data, x)
    return _run(x, go)


@sequence_expand_as.register_fake
def _(x, y_offsets):
    return _empty_like_rows(x, _dynamic())


# ============================================================================= sequence_pad
@_op("sequence_pad")
def sequence_pad(x: Tensor, lod: list[Tensor], pad_value: float,
                 maxlen: int, pad: Tensor | None = None) -> tuple[Tensor, Tensor]:
    def go():
        levels = _bridge.checked_lod(lod, x.shape[0], "sequence_pad", "offsets")
        out, length = _ops.sequence_pad(_bridge.lod_tensor(x, levels),
                                        _pad_of(pad_value, pad, x),
                                        None if maxlen < 0 else maxlen)
        return _bridge.tensor(out.data, x), _bridge.tensor(length.data, x)
    return _run(x, go)


@sequence_pad.register_fake
def _(x, lod, pad_value, maxlen, pad=None):
    n = lod[-1].shape[0] - 1
    width = _dynamic() if maxlen < 0 else maxlen
    return x.new_empty((n, width, *x.shape[1:])), x.new_empty((n,), dtype=torch.int64)


# =========================================================================== sequence_unpad
@_op("sequence_unpad")
def sequence_unpad(x: Tensor, length: Tensor) -> tuple[Tensor, Tensor]:
    def go():
        # the lengths on x's device, as lodarrow takes them (it reads them on the host)
        out = _ops.sequence_unpad(_bridge.array(x), _bridge.array(length))
        return _bridge.tensor(out.data, x), _bridge.offsets_tensor(out.offsets[-1], x)
    return _run(x, go)


@sequence_unpad.register_fake
def _(x, length):
    feature = tuple(x.shape[2:]) if x.ndim > 2 else (1,)
    return (x.new_empty((_dynamic(), *feature)),
            x.new_empty((length.shape[0] + 1,), dtype=torch.int64))


# ========================================================================== sequence_concat
@_op("sequence_concat")
def sequence_concat(inputs: list[Tensor], outer: list[Tensor],
                    last: list[Tensor]) -> tuple[Tensor, Tensor]:
    def go():
        ts = []
        for k, (v, off) in enumerate(zip(inputs, last)):
            levels = _bridge.checked_lod([*outer, off], v.shape[0], "sequence_concat",
                                         f"input[{k}].offsets")
            ts.append(_bridge.lod_tensor(v, levels))
        out = _ops.sequence_concat(ts)
        return _bridge.tensor(out.data, inputs[0]), _bridge.offsets_tensor(out.offsets[-1],
                                                                          inputs[0])
    return _run(inputs[0], go)


@sequence_concat.register_fake
def _(inputs, outer, last):
    rows = inputs[0].shape[0]
    for v in inputs[1:]:
        rows = rows + v.shape[0]
    return (_empty_like_rows(inputs[0], rows),
            inputs[0].new_empty((last[0].shape[0],), dtype=torch.int64))


# =========================================================================== sequence_slice
@_op("sequence_slice")
def sequence_slice(values: Tensor, lod: list[Tensor], offset: Tensor,
                   length: Tensor) -> tuple[Tensor, Tensor]:
    def go():
        levels = _bridge.checked_lod(lod, values.shape[0], "sequence_slice", "offsets")
        out = _ops.sequence_slice(_bridge.lod_tensor(values, levels), _bridge.array(offset),
                                  _bridge.array(length))
        return _bridge.tensor(out.data, values), _bridge.offsets_tensor(out.offsets[-1],
                                                                       values)
    return _run(values, go)


@sequence_slice.register_fake
def _(values, lod, offset, length):
    return (_empty_like_rows(values, _dynamic()),
            values.new_empty((lod[-1].shape[0],), dtype=torch.int64))


# ========================================================================= sequence_reverse
@_op("sequence_reverse")
def sequence_reverse(values: Tensor, lod: list[Tensor]) -> Tensor:
    def go():
        levels = _bridge.checked_lod(lod, values.shape[0], "sequence_reverse", "offsets")
        return _bridge.tensor(_ops.sequence_reverse(_bridge.lod_tensor(values, levels)).data,
                              values)
    return _run(values, go)


@sequence_reverse.register_fake
def _(values, lod):
    return torch.empty_like(values)


# ========================================================================= sequence_reshape
@_op("sequence_reshape")
def sequence_reshape(values: Tensor, lod: list[Tensor], new_dim: int) -> tuple[Tensor, Tensor]:
    def go():
        levels = _bridge.checked_lod(lod, values.shape[0], "sequence_reshape", "offsets")
        out = _ops.sequence_reshape(_bridge.lod_tensor(values, levels), new_dim)
        return _bridge.tensor(out.data, values), _bridge.offsets_tensor(out.offsets[-1],
                                                                       values)
    return _run(values, go)


@sequence_reshape.register_fake
def _(values, lod, new_dim):
    return (values.new_empty((_dynamic(), new_dim)),
            values.new_empty((lod[-1].shape[0],), dtype=torch.int64))


# ================================================================== lod_reset / lod_append
@_op("lod_check")
def lod_check(values: Tensor, lod: list[Tensor], op: str, name: str) -> list[Tensor]:
    """Validate ``lod`` against ``values``' rows; returns the levels (fresh int64 tensors: a
    custom operator's outputs never alias its inputs, and an unused result could be dropped
    from a compiled graph with its check)."""
    levels = _bridge.checked_lod(lod, values.shape[0], op, name)
    return [_bridge.offsets_tensor(level, values) for level in levels]


@lod_check.register_fake
def _(values, lod, op, name):
    return [torch.empty_like(level, dtype=torch.int64) for level in lod]


# ========================================================================= sequence_scatter
@_op("sequence_scatter")
def sequence_scatter(input: Tensor, index: Tensor, index_offsets: Tensor,
                     updates: Tensor) -> Tensor:
    def go():
        levels = _bridge.checked_lod([index_offsets], index.shape[0], "sequence_scatter",
                                     "index_offsets")
        idx = LoDTensor._from_trusted(_bridge.array(index), tuple(levels))
        out = _ops.sequence_scatter(_bridge.array(input), idx, _bridge.array(updates))
        return _bridge.tensor(out.data, input)
    return _run(input, go)


@sequence_scatter.register_fake
def _(input, index, index_offsets, updates):
    return torch.empty_like(input)


# ============================================================================ sequence_conv
@_op("sequence_conv")
def sequence_conv(values: Tensor, lod: list[Tensor], filter: Tensor,
                  padding_data: Tensor | None, bias: Tensor | None, context_start: int,
                  context_length: int) -> Tensor:
    def go():
        levels = _bridge.checked_lod(lod, values.shape[0], "sequence_conv", "offsets")
        out = _ops.sequence_conv(
            _bridge.lod_tensor(values, levels), _bridge.array(filter), context_start,
            context_length, 1, None if padding_data is None else _bridge.array(padding_data),
            None if bias is None else _bridge.array(bias))
        return _bridge.tensor(out.data, values)
    return _run(values, go)


@sequence_conv.register_fake
def _(values, lod, filter, padding_data, bias, context_start, context_length):
    return values.new_empty((values.shape[0], filter.shape[1]))


# ================================================================ sequence_topk_avg_pooling
@_op("sequence_topk_avg_pooling")
def sequence_topk_avg_pooling(values: Tensor, lod: list[Tensor], row: Tensor, col: Tensor,
                              topks: list[int], channel_num: int) -> tuple[Tensor, Tensor]:
    def go():
        op = "sequence_topk_avg_pooling"
        levels = _bridge.checked_lod(lod, values.shape[0], op, "offsets")
        rl = _bridge.checked_lod([row], None, op, "row")
        cl = _bridge.checked_lod([col], None, op, "col")
        # the rule's forward: the operator and the selected positions its backward reads
        out, residuals = RULES[op].forward(_bridge.lod_tensor(values, levels),
                                           _ops_y(rl, values), _ops_y(cl, values), topks,
                                           channel_num)
        return _bridge.tensor(out.data, values), _bridge.tensor(residuals[0], values)
    return _run(values, go)


@sequence_topk_avg_pooling.register_fake
def _(values, lod, row, col, topks, channel_num):
    rows = _dynamic()
    return (values.new_empty((rows, channel_num * len(topks))),
            values.new_empty((rows * channel_num, _dynamic()), dtype=torch.int64))


# ============================================================================ backwards
# Each backward is a custom operator of its own (``<forward>_backward``) over the array-level
# backward of ``lodarrow._grad._backward``; the autograd formulas save only what it reads
# (offsets, the max index, the softmax output), never an input they do not need.  The
# backwards have no autograd formula themselves: double backward raises in them.

def _grad_in(dout):
    """An upstream gradient as the backward kernels take it: contiguous (``y.sum()``'s is an
    expanded, stride-0 tensor; this is its one copy)."""
    return dout.contiguous()


def _maybe(arr):
    return None if arr is None or arr.numel() == 0 else arr


#: How a backward operator's argument reaches its array-level backward (``_simple``).
_READS = {"array": _bridge.array, "host": _bridge.host, "value": lambda v: v, "tuple": tuple}


def _simple(name, backward, schema, reads, fake):
    """Backward operator ``lodarrow::<name>`` that is one array-level backward of
    ``lodarrow._grad``: ``backward(array(dout), *args)``, each argument after ``dout`` as
    ``reads`` says (a key of ``_READS``), its result a tensor on ``dout``'s device."""
    convert = [_READS[r] for r in reads]

    def kernel(dout, *args):
        return _run(dout, lambda: _bridge.tensor(backward(
            _bridge.array(dout), *[c(a) for c, a in zip(convert, args)]), dout))

    op = torch.library.custom_op(f"{_LIB}::{name}", kernel, mutates_args=(), schema=schema)
    op.register_fake(fake)
    _KERNELS[op] = kernel
    return op


# name, array-level backward, schema (what torch.library infers from annotations), what each
# argument after dout is, the fake kernel
sequence_softmax_backward = _simple(
    "sequence_softmax_backward", _backward.softmax_backward,
    "(Tensor dout, Tensor y, Tensor offsets) -> Tensor", ("array", "host"),
    lambda dout, y, offsets: torch.empty_like(dout))
sequence_expand_as_backward = _simple(
    "sequence_expand_as_backward", _backward.expand_as_backward,
    "(Tensor dout, Tensor y_offsets) -> Tensor", ("host",),
    lambda dout, y_offsets: dout.new_empty((y_offsets.shape[0] - 1, *dout.shape[1:])))
sequence_pad_backward = _simple(
    "sequence_pad_backward", _backward.pad_backward,
    "(Tensor dout, Tensor offsets, SymInt n_rows) -> Tensor", ("host", "value"),
    lambda dout, offsets, n_rows: dout.new_empty((n_rows, *dout.shape[2:])))
sequence_unpad_backward = _simple(
    "sequence_unpad_backward", _backward.unpad_backward,
    "(Tensor dout, Tensor offsets, SymInt[] x_shape) -> Tensor", ("host", "tuple"),
    lambda dout, offsets, x_shape: dout.new_empty(tuple(x_shape)))
sequence_reverse_backward = _simple(
    "sequence_reverse_backward", _backward.reverse_backward,
    "(Tensor dout, Tensor offsets) -> Tensor", ("host",),
    lambda dout, offsets: torch.empty_like(dout))


@_op("sequence_pool_backward")
def sequence_pool_backward(dout: Tensor, offsets: Tensor, index: Tensor, pool_type: str,
                           n_rows: int) -> Tensor:
    def go():
        index_arr = _bridge.array(index) if pool_type in ("max", "min") else None
        return _bridge.tensor(_backward.pool_backward(_bridge.array(dout),
                                                      _bridge.host(offsets), pool_type,
                                                      n_rows, index_arr), dout)
    return _run(dout, go)


@sequence_pool_backward.register_fake
def _(dout, offsets, index, pool_type, n_rows):
    return dout.new_empty((n_rows, *dout.shape[1:]))


def _rest_none(inputs, full):
    """The Nones a backward returns after ``dx`` and the LoD's list, one per argument as the
    call gave them: the dispatcher drops a trailing argument equal to its default (``pad``
    None) though ``setup_context`` sees it filled in again; an eager call passes it only when
    it is a tensor."""
    n = len(inputs)
    if n == full and inputs[-1] is None:
        n -= 1
    return (None,) * (n - 2)


def _pool_setup(ctx, inputs, output):
    values, lod, pool_type = inputs[:3]
    ctx.save_for_backward(lod[-1], output[1])
    ctx.pool_type, ctx.n_rows = pool_type, values.shape[0]
    ctx.lod_none = [None] * len(lod)
    ctx.rest_none = _rest_none(inputs, 5)      # pool_type, pad_value[, pad]


def _pool_backward(ctx, dout, _dindex):
    offsets, index = ctx.saved_tensors
    dx = _backward_call(ctx, sequence_pool_backward, _grad_in(dout), offsets, index,
                        ctx.pool_type, ctx.n_rows)
    return dx, ctx.lod_none, *ctx.rest_none


class sequence_pool_eager(torch.autograd.Function):  # named as its graph node reads
    """``sequence_pool``'s eager autograd.Function (the formula of ``_pool_backward``) with
    the CPU's small-call path inlined: the forward kernel straight on the validated offsets,
    the backward kernel straight on the saved ones (no backend lookup, no closure, no
    wrapping).  A small call's cost is these Python steps, not the kernels."""

    @staticmethod
    def forward(ctx, values, lod, pool_type, pad_value, pad=None):
        # (out, None) but for max / min: no index tensor to make and track for the others
        if values.is_cpu and values.dtype in _bridge.FLOAT_DTYPES and pool_type in _POOLS:
            out, index = _pool_host(values, lod, pool_type, pad_value, pad)
        else:
            out, index = _KERNELS[sequence_pool](values, lod, pool_type, pad_value, pad)
            if pool_type not in ("max", "min"):
                index = None
        ctx.save_for_backward(lod[-1], index)
        ctx.pool_type, ctx.n_rows, ctx.eager = pool_type, values.shape[0], True
        ctx.rest_none = (None,) if pad is None else (None, None)
        return out, index

    @staticmethod
    def backward(ctx, dout, _dindex):
        offsets, index = ctx.saved_tensors
        pool = ctx.pool_type
        if (dout.is_cpu and pool in _POOLS and dout.dtype in _bridge.FLOAT_DTYPES
                and not (dout.requires_grad and torch.is_grad_enabled())):
            dx = torch.from_numpy(_backward.pool_backward_host(
                _bridge.array(dout), offsets.numpy(), pool, ctx.n_rows,
                None if index is None else index.numpy()))
        else:
            if index is None:
                index = offsets.new_empty((0,))
            dx = _backward_call(ctx, sequence_pool_backward, _grad_in(dout), offsets, index,
                                pool, ctx.n_rows)
        return dx, None, None, None, *ctx.rest_none



#: pool type names as :func:`pool_small` takes them without parsing (any other spelling takes
#: the general path, which parses it)
_POOL_NAMES = {p: p for p in POOL_TYPES}


def pool_small(values, offsets, pool_type, pad_value=0.0):
    """``lodarrow.torch.sequence_pool(values, offsets, pool_type, pad_value=pad_value)`` (a
    Python float, passed through as is: -0.0 keeps its sign) by the shortest path, for
    the common small call: a plain CPU float tensor, one C-contiguous int64 CPU offsets
    tensor without grad, a lower-case pool type, eager.  None when any of that does not hold:
    then the general path runs, with every check and error message.  The LoD is validated
    here all the same (``_pool_host``)."""
    pool = _POOL_NAMES.get(pool_type) if type(pool_type) is str else None
    if (pool is None or not FAST_EAGER or not values.is_cpu or offsets.dtype is not _INT64
            or values.dtype not in _bridge.FLOAT_DTYPES or offsets.ndim != 1
            or offsets.requires_grad or not offsets.is_cpu or values.ndim == 0
            or not values.is_contiguous() or not offsets.is_contiguous()
            or torch.compiler.is_compiling() or _is_exporting()
            or _get_current_dispatch_mode() is not None):
        return None
    if values.requires_grad and torch.is_grad_enabled():
        return sequence_pool_eager.apply(values, [offsets], pool, pad_value)[0]
    return _pool_host(values, [offsets], pool, pad_value)[0]


_INT64 = torch.int64


def _softmax_setup(ctx, inputs, output):
    ctx.save_for_backward(output, inputs[1][-1])
    ctx.lod_none = [None] * len(inputs[1])


def _softmax_backward(ctx, dout):
    y, offsets = ctx.saved_tensors
    return _backward_call(ctx, sequence_softmax_backward, _grad_in(dout), y, offsets), ctx.lod_none


@_op("sequence_expand_backward")
def sequence_expand_backward(dout: Tensor, ref_offsets: Tensor, x_offsets: Tensor | None,
                             out_offsets: Tensor | None, n_rows: int) -> Tensor:
    def go():
        if x_offsets is None:
            dx = _backward.expand_backward(_bridge.array(dout), _bridge.host(ref_offsets))
        else:
            dx = _backward.expand_backward(_bridge.array(dout), _bridge.host(ref_offsets),
                                           _bridge.host(x_offsets), _bridge.host(out_offsets))
        return _bridge.tensor(dx, dout)
    return _run(dout, go)


@sequence_expand_backward.register_fake
def _(dout, ref_offsets, x_offsets, out_offsets, n_rows):
    return dout.new_empty((n_rows, *dout.shape[1:]))


def _expand_setup(ctx, inputs, output):
    x, x_lod, y_lod, ref_level = inputs
    ref = y_lod[ref_level]
    if x_lod:
        ctx.save_for_backward(ref, x_lod[0], output[1])
    else:
        ctx.save_for_backward(ref, None, None)
    ctx.n_rows = x.shape[0]
    ctx.lod_none = ([None] * len(x_lod), [None] * len(y_lod))


def _expand_backward(ctx, dout, _dnew):
    ref, x_off, out_off = ctx.saved_tensors
    dx = _backward_call(ctx, sequence_expand_backward, _grad_in(dout), ref, x_off, out_off,
                        ctx.n_rows)
    return dx, *ctx.lod_none, None


def _expand_as_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[1])


def _expand_as_backward(ctx, dout):
    (y_offsets,) = ctx.saved_tensors
    return _backward_call(ctx, sequence_expand_as_backward, _grad_in(dout), y_offsets), None


def _pad_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[1][-1])
    ctx.n_rows = inputs[0].shape[0]
    ctx.lod_none = [None] * len(inputs[1])
    ctx.rest_none = _rest_none(inputs, 5)      # pad_value, maxlen[, pad]


def _pad_backward(ctx, dout, _dlength):
    (offsets,) = ctx.saved_tensors
    dx = _backward_call(ctx, sequence_pad_backward, _grad_in(dout), offsets, ctx.n_rows)
    return dx, ctx.lod_none, *ctx.rest_none


def _unpad_setup(ctx, inputs, output):
    ctx.save_for_backward(output[1])
    ctx.x_shape = tuple(inputs[0].shape)


def _unpad_backward(ctx, dout, _doffsets):
    (offsets,) = ctx.saved_tensors
    return _backward_call(ctx, sequence_unpad_backward, _grad_in(dout), offsets, ctx.x_shape), None


@_op("sequence_concat_backward")
def sequence_concat_backward(dout: Tensor, last: list[Tensor],
                             n_rows: list[int]) -> list[Tensor]:
    return _run(dout, lambda: [_bridge.tensor(g, dout) for g in _backward.concat_backward(
        _bridge.array(dout), [_bridge.host(o) for o in last])])


@sequence_concat_backward.register_fake
def _(dout, last, n_rows):
    return [dout.new_empty((n, *dout.shape[1:])) for n in n_rows]


def _concat_setup(ctx, inputs, output):
    values, _, last = inputs
    ctx.save_for_backward(*last)
    ctx.n_rows = [v.shape[0] for v in values]
    ctx.lod_none = ([None] * len(inputs[1]), [None] * len(last))


def _concat_backward(ctx, dout, _dnew):
    grads = _backward_call(ctx, sequence_concat_backward, _grad_in(dout),
                           list(ctx.saved_tensors), ctx.n_rows)
    return grads, *ctx.lod_none


@_op("sequence_slice_backward")
def sequence_slice_backward(dout: Tensor, offsets: Tensor, offset: Tensor,
                            out_offsets: Tensor, n_rows: int) -> Tensor:
    def go():
        start = _bridge.host(offsets)[:-1] + _bridge.host(offset)
        return _bridge.tensor(_backward.slice_backward(_bridge.array(dout), start,
                                                       _bridge.host(out_offsets), n_rows),
                              dout)
    return _run(dout, go)


@sequence_slice_backward.register_fake
def _(dout, offsets, offset, out_offsets, n_rows):
    return dout.new_empty((n_rows, *dout.shape[1:]))


def _slice_setup(ctx, inputs, output):
    values, lod, offset, _ = inputs
    ctx.save_for_backward(lod[-1], offset, output[1])
    ctx.n_rows = values.shape[0]
    ctx.lod_none = [None] * len(lod)


def _slice_backward(ctx, dout, _dnew):
    offsets, offset, out_offsets = ctx.saved_tensors
    dx = _backward_call(ctx, sequence_slice_backward, _grad_in(dout), offsets, offset,
                        out_offsets, ctx.n_rows)
    return dx, ctx.lod_none, None, None


def _reverse_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[1][-1])
    ctx.lod_none = [None] * len(inputs[1])


def _reverse_backward(ctx, dout):
    (offsets,) = ctx.saved_tensors
    return _backward_call(ctx, sequence_reverse_backward, _grad_in(dout), offsets), ctx.lod_none


def _reshape_setup(ctx, inputs, output):
    ctx.x_shape = tuple(inputs[0].shape)
    ctx.lod_none = [None] * len(inputs[1])


def _reshape_backward(ctx, dout, _dnew):
    # the data was re-viewed row-major: its gradient is dout re-viewed back (a torch view,
    # as lodarrow._grad's reshape_backward, inside the graph)
    return dout.reshape(ctx.x_shape), ctx.lod_none, None


@_op("sequence_scatter_backward")
def sequence_scatter_backward(dout: Tensor, index: Tensor, index_offsets: Tensor,
                              updates_shape: list[int]) -> Tensor:
    def go():
        ids = _bridge.array(index).reshape(-1)
        g = _bridge.array(dout)
        _, dupd = _backward.scatter_backward(g, ids, _bridge.host(index_offsets),
                                             tuple(updates_shape), g.dtype)
        # a fresh array (the CPU kernel's, or CuPy's gather): copied only if it could alias
        # dout, which an operator's output must not
        aliased = isinstance(dupd, np.ndarray) and np.may_share_memory(dupd, g)
        return _bridge.tensor(dupd.copy() if aliased else dupd, dout)
    return _run(dout, go)


@sequence_scatter_backward.register_fake
def _(dout, index, index_offsets, updates_shape):
    return dout.new_empty(tuple(updates_shape))


def _scatter_setup(ctx, inputs, output):
    _, index, index_offsets, updates = inputs
    ctx.save_for_backward(index, index_offsets)
    ctx.updates_shape = tuple(updates.shape)


def _scatter_backward(ctx, dout):
    index, index_offsets = ctx.saved_tensors
    dupd = None
    if ctx.needs_input_grad[3]:
        dupd = _backward_call(ctx, sequence_scatter_backward, _grad_in(dout), index,
                              index_offsets, ctx.updates_shape)
    # the input's gradient is dout itself (the output started as a copy of the input)
    return dout, None, None, dupd


@_op("sequence_conv_backward")
def sequence_conv_backward(dout: Tensor, values: Tensor, offsets: Tensor, filter: Tensor,
                           padding_data: Tensor | None, has_bias: bool, context_start: int,
                           context_length: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    def go():
        x = _bridge.array(values)
        d = x.shape[1] if x.ndim == 2 else 1
        x = x.reshape(x.shape[0], d)
        compute = np.float64 if x.dtype == np.float64 else np.float32
        w = _bridge.array(filter).astype(compute, copy=False)
        pad = (None if padding_data is None else _bridge.array(padding_data).reshape(
            padding_data.shape[0], d).astype(compute, copy=False))
        dx, dw, dpad, dbias = _backward.conv_backward(
            _bridge.array(dout), x, _bridge.host(offsets), w, pad, context_start,
            context_length, bias=has_bias)
        dtype = _bridge.array(dout).dtype
        empty = np.empty((0,), dtype=dtype)
        return (_bridge.tensor(dx.reshape(tuple(values.shape)), dout),
                _bridge.tensor(dw.astype(dtype, copy=False), dout),
                _bridge.tensor(empty if dpad is None else dpad.astype(dtype, copy=False).reshape(
                    tuple(padding_data.shape)), dout),
                _bridge.tensor(empty if dbias is None else dbias.astype(dtype, copy=False),
                               dout))
    return _run(dout, go)


@sequence_conv_backward.register_fake
def _(dout, values, offsets, filter, padding_data, has_bias, context_start, context_length):
    return (torch.empty_like(values), torch.empty_like(filter),
            (dout.new_empty((0,)) if padding_data is None else torch.empty_like(padding_data)),
            (dout.new_empty((filter.shape[1],)) if has_bias else dout.new_empty((0,))))


def _conv_setup(ctx, inputs, output):
    values, lod, filter, padding_data, bias, context_start, context_length = inputs
    ctx.save_for_backward(values, lod[-1], filter, padding_data)
    ctx.has_bias = bias is not None
    ctx.context = (context_start, context_length)
    ctx.lod_none = [None] * len(lod)


def _conv_backward(ctx, dout):
    values, offsets, filter, padding_data = ctx.saved_tensors
    dx, dw, dpad, dbias = _backward_call(ctx, sequence_conv_backward, _grad_in(dout), values,
                                         offsets, filter, padding_data, ctx.has_bias,
                                         *ctx.context)
    return (dx, ctx.lod_none, dw, None if padding_data is None else dpad,
            dbias if ctx.has_bias else None, None, None)


@_op("sequence_topk_avg_pooling_backward")
def sequence_topk_avg_pooling_backward(dout: Tensor, pos: Tensor, offsets: Tensor, row: Tensor,
                                       col: Tensor, topks: list[int], channel_num: int,
                                       x_shape: list[int]) -> Tensor:
    def go():
        n = 1
        for s in x_shape:
            n *= s
        dx = _backward.topk_avg_pool_backward(
            _bridge.array(dout), _bridge.array(pos), _bridge.host(offsets), _bridge.host(row),
            _bridge.host(col), np.asarray(topks, dtype=np.int64), channel_num, n)
        return _bridge.tensor(dx.reshape(tuple(x_shape)), dout)
    return _run(dout, go)


@sequence_topk_avg_pooling_backward.register_fake
def _(dout, pos, offsets, row, col, topks, channel_num, x_shape):
    return dout.new_empty(tuple(x_shape))


def _topk_setup(ctx, inputs, output):
    values, lod, row, col, topks, channel_num = inputs
    ctx.save_for_backward(output[1], lod[-1], row, col)
    ctx.args = (list(topks), channel_num, list(values.shape))
    ctx.lod_none = [None] * len(lod)


def _topk_backward(ctx, dout, _dpos):
    pos, offsets, row, col = ctx.saved_tensors
    dx = _backward_call(ctx, sequence_topk_avg_pooling_backward, _grad_in(dout), pos, offsets,
                        row, col, *ctx.args)
    return dx, ctx.lod_none, None, None, None, None


# ================================================================ the autograd formulas
#: forward operator -> its autograd formula and setup_context (registered on the operator,
#: and as its eager autograd.Function unless the last entry is False: concat's
#: differentiable inputs come in a list, which an autograd.Function does not track)
_FORMULAS = (
    (sequence_pool, _pool_backward, _pool_setup),
    (sequence_softmax, _softmax_backward, _softmax_setup),
    (sequence_expand, _expand_backward, _expand_setup),
    (sequence_expand_as, _expand_as_backward, _expand_as_setup),
    (sequence_pad, _pad_backward, _pad_setup),
    (sequence_unpad, _unpad_backward, _unpad_setup),
    (sequence_concat, _concat_backward, _concat_setup, False),
    (sequence_slice, _slice_backward, _slice_setup),
    (sequence_reverse, _reverse_backward, _reverse_setup),
    (sequence_reshape, _reshape_backward, _reshape_setup),
    (sequence_scatter, _scatter_backward, _scatter_setup),
    (sequence_conv, _conv_backward, _conv_setup),
    (sequence_topk_avg_pooling, _topk_backward, _topk_setup),
)

for _forward, _formula, _setup, *_eager in _FORMULAS:
    _autograd(_forward, _formula, _setup, *_eager)
del _forward, _formula, _setup, _eager
_FUNCTIONS[sequence_pool] = sequence_pool_eager   # its own eager Function (above)
