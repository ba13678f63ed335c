"""``sequence_conv``: convolve every sequence with a filter along its rows.

Semantics, edge cases, errors and departures from Paddle: docs/operators.md#sequence_conv.
"""

import numpy as np

from lodarrow._backends import backend_of
from lodarrow._cupy import is_cupy_array
from lodarrow._errors import LoDError
from lodarrow._ops._common import as_lod_tensor, require
from lodarrow._ops._contract import TableContract
from lodarrow._ops._out import into, landed
from lodarrow._tensor import LoDTensor
from lodarrow._validation import as_int

__all__ = ["sequence_conv"]

#: Context-matrix elements gathered per block before its matrix product: bounds the scratch
#: memory (8 MiB of float64) whatever the input size, and keeps the block in cache for BLAS.
CHUNK_ELEMENTS = 1 << 20

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)


def sequence_conv(input, filter, context_start=None, context_length=None, context_stride=1,
                  padding_data=None, bias=None, name=None, *, out=None):
    """Convolve every sequence of the last LoD level with ``filter`` along its rows.

    Row ``t`` of a sequence spanning rows ``[a, b)`` gets the context vector of
    ``context_length`` blocks of ``D`` values, block ``k`` being input row
    ``p = t + context_start + k`` when ``a <= p < b``; outside the sequence the block is zeros,
    or, with ``padding_data``, padding row ``up + (p - a)`` before the sequence and
    ``up + (p - b)`` after it (``up = max(0, -context_start)``: Paddle's trainable padding).
    Output row ``t`` is ``context @ filter (+ bias)``.  The contexts are gathered in blocks and
    multiplied by the filter with one BLAS product per block.

    Parameters
    ----------
    input : LoDTensor or Arrow array of lists
        Shape ``(N, D)`` (or ``(N,)``, read as ``D = 1``) with at least one LoD level;
        contexts never cross the sequences of the last level.  float16, float32, float64 or
        an integer dtype.
    filter : array_like or LoDTensor
        Shape ``(context_length * D, F)`` (lodarrow has no parameters, so the filter is an argument:
        docs/operators.md#filter-argument-of-sequence_conv).  Cast to the computation dtype.
    context_start : int, optional
        Offset of the first context row; default ``-(context_length // 2)``.
    context_length : int, optional
        Rows per context, at least 1; default ``filter.shape[0] // D``.
    context_stride : int, default 1
        Must be 1 (as in Paddle).
    padding_data : array_like, optional
        Shape ``(up + down, D)`` with ``up = max(0, -context_start)`` and
        ``down = max(0, context_start + context_length - 1)``: rows used instead of zeros
        outside the sequences (Paddle's ``PaddingData`` with ``paddingTrainable``).
    bias : array_like, optional
        Shape ``(F,)`` or ``(1, F)``, added to every output row.
    name : str, optional
        Ignored (Paddle compatibility).
    out : numpy.ndarray or cupy.ndarray, optional
        Keyword-only: a preallocated array that receives the result's data (exactly its shape
        and dtype, on the input's device, C-contiguous, writable)
        (docs/operators.md#out-writing-into-a-preallocated-array).

    Returns
    -------
    LoDTensor
        Shape ``(N, F)`` with the input's full LoD, on its place.  dtype: the input's for
        floats (float16 is computed in float32), float64 for integer input.

    Raises
    ------
    LoDError
        If ``input`` has no LoD.
    TypeError
        If an input is bool or not numeric, or an integer argument is not an integer.
    ValueError
        If a shape does not match (``filter`` rows vs ``context_length * D``, padding rows,
        bias width), ``context_length < 1``, ``context_stride != 1``, the input has rank > 2,
        or the inputs live on different devices.

    See Also
    --------
    lodarrow.torch.sequence_conv : The same operator on torch tensors, differentiable.

    Examples
    --------
    With ``context_length=3`` (``context_start=-1``) every row sees its predecessor, itself and
    its successor within its sequence; an identity-like filter picks them out:

    >>> import numpy as np, lodarrow as la
    >>> x = la.LoDTensor(np.array([[1.], [2.], [3.], [4.]], dtype="float32"), lod=[[0, 3, 4]])
    >>> w = np.array([[1., 0., 0.], [0., 1., 0.], [0., 0., 1.]], dtype="float32")
    >>> la.sequence_conv(x, w).numpy().tolist()
    [[0.0, 1.0, 2.0], [1.0, 2.0, 3.0], [2.0, 3.0, 0.0], [0.0, 4.0, 0.0]]
    """
    x = as_lod_tensor(input, "input")
    if not x.lod_level:
        raise LoDError("sequence_conv: input must have at least 1 LoD level, got 0")
    data = x.data
    if data.ndim > 2:
        raise ValueError(f"sequence_conv: input must have shape [N, D] (or [N]), got "
                         f"{list(data.shape)}")
    kind = data.dtype.kind
    if kind == "b":
        raise TypeError("sequence_conv: input of dtype bool cannot be convolved; cast it to a "
                        "numeric dtype first")
    n = data.shape[0]
    d = data.shape[1] if data.ndim == 2 else 1
    compute = _F64 if kind in "iu" or data.dtype == _F64 else _F32
    out_dtype = data.dtype if kind == "f" else _F64

    w = _plain(require(filter, "filter", "sequence_conv"), "filter")
    be = backend_of("sequence_conv", input=x.data, filter=w,
                    padding_data=_plain(padding_data, "padding_data"), bias=_plain(bias, "bias"))
    if w.ndim != 2:
        raise ValueError(f"sequence_conv: filter must be 2-D [context_length * D, F], got "
                         f"shape {list(w.shape)}")
    if context_length is None:
        if d == 0 or w.shape[0] % d:
            raise ValueError(f"sequence_conv: cannot infer context_length: filter has "
                             f"{w.shape[0]} rows, not a multiple of the input width D = {d}")
        cl = w.shape[0] // d
    else:
        cl = as_int(context_length, "sequence_conv: context_length")
    if cl < 1:
        raise ValueError(f"sequence_conv: context_length must be >= 1, got {cl}")
    if w.shape[0] != cl * d:
        raise ValueError(f"sequence_conv: filter must have context_length * D = {cl} * {d} = "
                         f"{cl * d} rows, got {w.shape[0]}")
    cs = -(cl // 2) if context_start is None else as_int(context_start,
                                                          "sequence_conv: context_start")
    stride = as_int(context_stride, "sequence_conv: context_stride")
    if stride != 1:
        raise ValueError(f"sequence_conv: context_stride must be 1 (as in Paddle), got "
                         f"{stride}")
    up = max(0, -cs)
    down = max(0, cs + cl - 1)
    f_out = w.shape[1]
    pad = None
    if padding_data is not None:
        pad = _plain(padding_data, "padding_data")
        if pad.ndim == 1 and d == 1:
            pad = pad.reshape(-1, 1)
        if pad.shape != (up + down, d):
            raise ValueError(f"sequence_conv: padding_data must have shape [up + down, D] = "
                             f"[{up} + {down}, {d}] for context_start={cs}, "
                             f"context_length={cl}, got {list(pad.shape)}")
    b = None
    if bias is not None:
        b = _plain(bias, "bias")
        if b.shape not in ((f_out,), (1, f_out)):
            raise ValueError(f"sequence_conv: bias must have shape [F] or [1, F] with F = "
                             f"{f_out}, got {list(b.shape)}")
    if pad is None:
        # Without padding rows only "inside or not" matters: clamping keeps every result and
        # keeps t + context_start + k far from int64 overflow.
        cs = min(max(cs, -(n + cl)), n + 1)

    with be.device(data):
        xp = be.xp
        w = xp.ascontiguousarray(w, dtype=compute)
        pad = None if pad is None else xp.ascontiguousarray(pad, dtype=compute)
        b = None if b is None else xp.asarray(b, dtype=compute).reshape(1, f_out)
        res = (be.empty((n, f_out), out_dtype) if out is None
               else into(out, "sequence_conv", (n, f_out), out_dtype, be, data,
                         (data, w, pad, b)))
        be.kernel("conv")(res, data.reshape(n, d), be.offsets(x, -1), w, pad, b, cs, cl, up,
                          CHUNK_ELEMENTS)
    if out is not None:
        res = landed(res, out)
    return x._derive(res)


def _plain(obj, name):
    """A NumPy/CuPy array from an array-like or LoDTensor argument (None stays None)."""
    if obj is None:
        return None
    if isinstance(obj, LoDTensor):
        obj = obj.data
    if not (isinstance(obj, np.ndarray) or is_cupy_array(obj)):
        try:
            obj = np.asarray(obj)
        except (TypeError, ValueError):
            raise TypeError(f"sequence_conv: {name} must be an array, got "
                            f"{type(obj).__name__}") from None
    if obj.dtype.kind not in "iuf":
        raise TypeError(f"sequence_conv: {name} must be a numeric array (integer or float), "
                        f"got dtype {obj.dtype}")
    return obj

#: The table form (docs/tables.md).
TABLE = {"sequence_conv": TableContract(("input",))}
