"""``sequence_mask``: a 0/1 mask of positions below each length.

Semantics, edge cases, errors and departures from Paddle: docs/operators.md#sequence_mask.
"""

import math

import numpy as np

from lodarrow._backends import backend_of_array
from lodarrow._cupy import is_cupy_array
from lodarrow._ops._common import as_lod_tensor, check_growth, require
from lodarrow._ops._contract import TableContract
from lodarrow._ops._out import into, landed
from lodarrow._tensor import LoDTensor
from lodarrow._validation import as_int, check_dtype

__all__ = ["sequence_mask"]

_OUT_DTYPES = {}  # the dtype argument -> its checked np.dtype


def sequence_mask(x, maxlen=None, dtype="int64", name=None, *, out=None):
    """Build the mask ``out[..., j] = j < x[...]`` for ``j`` in ``[0, M)``.

    Parameters
    ----------
    x : array_like or LoDTensor
        Lengths: an integer (or float) array of any shape.  A LoDTensor's LoD is ignored.
    maxlen : int or array_like, optional
        The mask width ``M``.  None, or a negative int (Paddle's "unset"), means ``max(x)``
        (0 when ``x`` is empty or has no positive value; a float maximum is truncated as
        Paddle's ``static_cast<int>``).  A 1-element integer array must hold a value > 0, as
        in Paddle.  ``M`` above ``max(x)`` is allowed while the output stays within
        ``max(1 GiB, 16 x`` the output at ``max(x))``.
    dtype : str or numpy.dtype, default "int64"
        Output dtype: bool, int8, uint8, int16, uint16, int32, int64, float16, float32 or
        float64.
    name : str, optional
        Ignored (Paddle compatibility).
    out : numpy.ndarray or cupy.ndarray, optional
        Keyword-only: a preallocated array that receives the result's data (exactly its shape
        and dtype, on the input's device, C-contiguous, writable)
        (docs/operators.md#out-writing-into-a-preallocated-array).

    Returns
    -------
    LoDTensor
        Shape ``x.shape + (M,)``, no LoD, on the device of ``x``.  Lengths above ``M`` are
        clipped; negative (or NaN) lengths give all-zero rows.

    Raises
    ------
    TypeError
        If ``x`` is not numeric (bool included), ``dtype`` is not supported, or ``maxlen``
        is not an integer.
    ValueError
        If ``maxlen`` is an array of a size other than 1 or with a value <= 0, or is absurdly
        large; if ``maxlen`` is None and ``x`` holds NaN or infinity.

    See Also
    --------
    sequence_pad : Pad the sequences themselves (it also returns their lengths).

    Examples
    --------
    >>> import numpy as np, lodarrow as la
    >>> la.sequence_mask(np.array([3, 1, 1, 0]), maxlen=4).numpy()
    array([[1, 1, 1, 0],
           [1, 0, 0, 0],
           [1, 0, 0, 0],
           [0, 0, 0, 0]])
    """
    lengths, place = _lengths_of(x)
    if lengths.dtype.kind not in "iuf":
        raise TypeError(f"sequence_mask: x must hold integer or float lengths, got dtype "
                        f"{lengths.dtype}")
    be = backend_of_array(lengths)
    out_dtype = _out_dtype(dtype)
    width = _maxlen_value(maxlen)
    if width is None:
        width = _data_max(lengths)
    else:
        check_growth("sequence_mask", "maxlen", width, lambda: _data_max(lengths, strict=False),
                     lengths.size * out_dtype.itemsize)
    with be.device(lengths):
        shape = (*lengths.shape, width)
        res = (be.empty(shape, out_dtype) if out is None
               else into(out, "sequence_mask", shape, out_dtype, be, lengths, (lengths,)))
        if res.size:
            be.kernel("mask")(res, _kernel_lengths(lengths, be.xp), width)
    if out is not None:
        res = landed(res, out)
    return LoDTensor._from_trusted(res, (), place)


def _lengths_of(x):
    """``(array of any rank, place or None)`` from the accepted forms of ``x``."""
    if isinstance(x, LoDTensor):
        x._check_valid("x")
        return x.data, x.place
    if isinstance(x, np.ndarray) or is_cupy_array(x):
        return x, None
    if isinstance(x, (list, tuple, int, float, np.generic)):
        try:
            return np.asarray(x), None
        except ValueError:  # ragged lists
            raise TypeError("sequence_mask: x must be a rectangular array of lengths") from None
    t = as_lod_tensor(x, "x")  # Arrow arrays; their LoD is ignored
    return t.data, t.place


def _out_dtype(dtype):
    try:
        return _OUT_DTYPES[dtype]
    except (KeyError, TypeError):  # not seen yet, or unhashable
        pass
    try:
        dt = np.dtype(require(dtype, "dtype", "sequence_mask"))
    except (TypeError, ValueError):
        raise TypeError(f"sequence_mask: dtype {dtype!r} is not a dtype") from None
    dt = check_dtype(dt, "sequence_mask: dtype")
    if isinstance(dtype, (str, type, np.dtype)) and len(_OUT_DTYPES) < 64:
        _OUT_DTYPES[dtype] = dt
    return dt


def _maxlen_value(maxlen):
    """The width asked for, or None for "use max(x)"."""
    if maxlen is None:
        return None
    if isinstance(maxlen, LoDTensor):
        maxlen = maxlen.data
    if hasattr(maxlen, "shape") and hasattr(maxlen, "dtype") and not isinstance(maxlen,
                                                                                np.generic):
        if maxlen.dtype.kind not in "iu":
            raise TypeError(f"sequence_mask: maxlen must hold an integer, got dtype "
                            f"{maxlen.dtype}")
        if maxlen.size != 1:
            raise ValueError(f"sequence_mask: a maxlen array must hold one value, got shape "
                             f"{tuple(maxlen.shape)}")
        value = int(maxlen.reshape(-1)[0])
        if value <= 0:  # Paddle's MaxLenTensor check
            raise ValueError(f"sequence_mask: a maxlen array must hold a value > 0, got "
                             f"{value}")
        return value
    value = as_int(maxlen, "maxlen")
    return None if value < 0 else value  # Paddle: maxlen < 0 means max(x)


def _data_max(lengths, strict=True):
    """``max(x)`` as Paddle's ``static_cast<int>`` does it, floored at 0.

    A NaN or infinite maximum raises, or counts as 0 when not ``strict``.
    """
    if not lengths.size:
        return 0
    top = lengths.max()
    if lengths.dtype.kind == "f":
        top = float(top)
        if not math.isfinite(top):
            if not strict:
                return 0
            raise ValueError(f"sequence_mask: x holds {top}, so max(x) gives no mask width; "
                             f"pass maxlen")
    return max(int(top), 0)


def _kernel_lengths(lengths, xp):
    """Flat, contiguous lengths in a dtype the kernels take."""
    flat = xp.ascontiguousarray(lengths).reshape(-1)
    if flat.dtype == np.float16:
        return flat.astype(np.float32)
    if flat.dtype == np.uint64:
        return xp.minimum(flat, np.iinfo(np.int64).max).astype(np.int64)
    if flat.dtype == np.uint32:
        return flat.astype(np.int64)
    return flat


def _check_literals(args):
    if "dtype" in args:
        _out_dtype(args["dtype"])
    if "maxlen" in args:
        _maxlen_value(args["maxlen"])


def _table_result(i, result, call, columns, fn):
    """A mask of a list column's values keeps that column's rows (one mask per value)."""
    if columns.get("x"):
        return LoDTensor._from_trusted(result.data, call["x"].offsets)
    return result


#: The table form (docs/tables.md); the width is maxlen's.
TABLE = {"sequence_mask": TableContract(("x",), width="maxlen", check=_check_literals,
                                        fixup=_table_result)}
