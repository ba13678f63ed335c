"""``sequence_pad``: pad every last-level sequence to one length.

Semantics, edge cases, errors and departures from Paddle: docs/operators.md#sequence_pad.
"""

import math

import numpy as np

from lodarrow._backends import backend_of_array
from lodarrow._ops._common import (ANY_LEVELS, as_lod_tensor, check_growth, pad_array,
                                   require_lod_levels)
from lodarrow._ops._contract import TableContract
from lodarrow._ops._out import into, landed, split
from lodarrow._validation import as_int

__all__ = ["sequence_pad"]


def sequence_pad(x, pad_value, maxlen=None, name=None, *, out=None):
    """Pad every last-level sequence of ``x`` to the same length.

    Sequence ``i`` (rows ``[off[i], off[i + 1])`` of the last LoD level) becomes
    ``out[i, :len_i]``; the remaining ``P - len_i`` rows are filled with ``pad_value``.
    Empty sequences give rows of padding only.

    Parameters
    ----------
    x : LoDTensor or Arrow array of lists
        Data of shape ``(N, *feature_shape)`` (rank 1 allowed) with at least one LoD level;
        any dtype.
    pad_value : scalar or array_like
        The padding: a Python scalar (converted by value, exactly), or an array of shape
        ``()``, ``(1,)`` or ``feature_shape`` whose dtype casts safely to ``x``'s dtype
        (docs/operators.md#exact-pad-values).  A small parameter: it may live on either device.
    maxlen : int, optional
        The padded length ``P``.  None (or Paddle's ``-1``) means the longest sequence.
        It may exceed the longest sequence, as long as the output stays within
        ``max(1 GiB, 16 x`` the output at ``maxlen=None)``.
    name : str, optional
        Ignored (Paddle compatibility).
    out : tuple of (numpy.ndarray, cupy.ndarray or None), optional
        Keyword-only: ``(out, length)``, a preallocated array for each result's data or None
        to allocate it; each of exactly that result's shape and dtype, on the input's device,
        C-contiguous, writable (docs/operators.md#out-writing-into-a-preallocated-array).

    Returns
    -------
    out : LoDTensor
        Shape ``(n, P, *feature_shape)`` for ``n`` last-level sequences (``(n, P)`` for rank-1
        data), ``x``'s dtype.  No LoD for a 1-level ``x`` (a LoDTensor with ``lod_level == 0``;
        Paddle returns a plain tensor); for a multi-level ``x`` its LoD is ``x.lod()[:-1]``,
        over one padded row per last-level sequence.
    length : LoDTensor
        An int64 tensor of shape ``(n,)``: every sequence's length (zeros kept), with the same LoD
        as ``out``.

    Raises
    ------
    LoDError
        If ``x`` has no LoD.
    ValueError
        If ``maxlen`` is shorter than the longest sequence, negative (other than -1) or
        absurdly large; if ``pad_value`` has a wrong shape.
    TypeError
        If ``maxlen`` is not an integer, or ``pad_value`` does not convert exactly to the
        dtype of ``x``.

    See Also
    --------
    sequence_unpad : The inverse: padded rows back to sequences.
    sequence_mask : A mask of the valid steps, from the lengths.
    lodarrow.torch.sequence_pad : The same operator on torch tensors, differentiable.

    Examples
    --------
    >>> import numpy as np, lodarrow as la
    >>> x = la.LoDTensor(np.array([[1.], [2.], [3.], [4.], [5.]]), lod=[[0, 2, 5]])
    >>> out, length = la.sequence_pad(x, np.array([0.0]), maxlen=4)
    >>> out.numpy()[..., 0]
    array([[1., 2., 0., 0.],
           [3., 4., 5., 0.]])
    >>> length.numpy()
    array([2, 3])
    """
    x = as_lod_tensor(x, "x")
    require_lod_levels(x, "x", "sequence_pad", ANY_LEVELS)
    data = x.data
    be = backend_of_array(data)
    lod = x.offsets
    offsets = lod[-1]
    n = offsets.shape[0] - 1
    lengths = offsets[1:] - offsets[:-1]
    longest = int(lengths.max()) if n else 0
    fshape = tuple(data.shape[1:])
    padded = None if maxlen is None else _maxlen(maxlen)
    if padded is None:
        padded = longest
    else:
        if padded < longest:
            seq = int(np.argmax(lengths))
            raise ValueError(f"sequence_pad: maxlen={padded} is shorter than the longest "
                             f"sequence of x (sequence {seq} has {longest} rows)")
        check_growth("sequence_pad", "maxlen", padded, longest,
                     n * data.itemsize * math.prod(fshape))
    outer = lod[:-1]
    with be.device(data):
        pad = pad_array(pad_value, data.dtype, fshape, be.xp)
        shape = (n, padded, *fshape)
        if out is None:
            res = be.empty(shape, data.dtype)
        else:
            out = split(out, 2, "sequence_pad")
            res = into(out[0], "sequence_pad", shape, data.dtype, be, data, (data, pad), "out[0]")
            if out[1] is not None:
                into(out[1], "sequence_pad", (n,), lengths.dtype, be, data, (), "out[1]")
        be.kernel("pad")(res, data, pad, be.offsets(x, -1), padded)
        length = be.asarray(lengths)
    if out is not None:
        res = landed(res, out[0])
        if out[1] is not None:
            out[1][...] = length  # after the kernel: out[1] may overlap data or pad
            length = out[1]
    return x._derive(res, outer), x._derive(length, outer)


def _maxlen(maxlen):
    """The width asked for, or None for "the longest sequence" (None or Paddle's -1)."""
    if maxlen is None:
        return None
    padded = as_int(maxlen, "maxlen")
    if padded == -1:  # Paddle's "unset"
        return None
    if padded < 0:
        raise ValueError(f"sequence_pad: maxlen must be None, -1 or >= 0, got {padded}")
    return padded


def _check_literals(args):
    if "maxlen" in args:
        _maxlen(args["maxlen"])


#: The table form (docs/tables.md): (padded, length); the width is maxlen's.
TABLE = {"sequence_pad": TableContract(("x",), results=2, width="maxlen",
                                       check=_check_literals)}
