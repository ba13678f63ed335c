"""``sequence_erase``: drop every row whose value is one of ``tokens``.

Semantics, edge cases, errors and departures from Paddle: docs/operators.md#sequence_erase.
"""

import functools
import numbers

import numpy as np

from lodarrow._backends import backend_of_array
from lodarrow._cupy import is_cupy_array
from lodarrow._ops._common import ANY_LEVELS, as_lod_tensor, require_lod_levels
from lodarrow._ops._contract import TableContract
from lodarrow._ops._out import check, check_shape, into, landed

__all__ = ["sequence_erase"]


def sequence_erase(input, tokens, name=None, *, out=None):
    """Remove the rows of ``input`` whose value is in ``tokens``, keeping the order.

    Parameters
    ----------
    input : LoDTensor or Arrow array of lists
        Data of shape ``(N, 1)`` or ``(N,)`` (docs/operators.md#fewer-restrictions), any integer or
        float dtype, with at least one LoD level.
    tokens : list or 1-D array of numbers
        The values to erase, compared by value with the data: ``2.0`` erases an integer 2,
        a token the dtype cannot hold exactly (``2.5`` for integers, ``300`` for int8)
        erases nothing, NaN never matches, ``-0.0`` matches ``0.0``.  Empty: a copy.
    name : str, optional
        Ignored (Paddle compatibility).
    out : numpy.ndarray or cupy.ndarray, optional
        Keyword-only: a preallocated array that receives the kept rows (exactly the result's
        shape and dtype, on the input's device, C-contiguous, writable); the rows are copied
        into it once counted (docs/operators.md#out-writing-into-a-preallocated-array).

    Returns
    -------
    LoDTensor
        The kept rows, shape ``(M, 1)`` or ``(M,)``, ``input``'s dtype.  LoD: ``input``'s
        outer levels unchanged, the last level counting the kept rows of each sequence
        (sequences may become empty).

    Raises
    ------
    LoDError
        If ``input`` has no LoD.
    ValueError
        If the data is not of shape ``(N, 1)`` or ``(N,)``, or ``tokens`` is not 1-D.
    TypeError
        If the data is bool, or ``tokens`` is not a list or array of numbers.

    Examples
    --------
    >>> import numpy as np, lodarrow as la
    >>> x = la.LoDTensor(np.array([[2], [2], [6], [1], [3], [9], [6], [1], [0], [1]]),
    ...                  lod=[[0, 3, 6, 10]])
    >>> out = la.sequence_erase(x, tokens=[2, 3, 5])
    >>> out.numpy()[:, 0]
    array([6, 1, 9, 6, 1, 0, 1])
    >>> out.lod()
    [[0, 1, 3, 7]]
    """
    x = as_lod_tensor(input, "input")
    require_lod_levels(x, "input", "sequence_erase", ANY_LEVELS)
    data = x.data
    be = backend_of_array(data)
    if data.ndim > 2 or (data.ndim == 2 and data.shape[1] != 1):
        raise ValueError(f"sequence_erase: input must be of shape [N, 1] or [N], got shape "
                         f"{tuple(data.shape)}")
    if data.dtype.kind not in "iuf":
        raise TypeError(f"sequence_erase: input must hold integers or floats, got dtype "
                        f"{data.dtype}")
    # float16 is compared in float32 (exact: every float16 is a float32).
    cmp_dtype = np.dtype(np.float32) if data.dtype == np.float16 else data.dtype
    toks = _tokens_for(tokens, data.dtype, cmp_dtype)
    if out is not None:  # everything but the row count, which only the kernel knows
        check(out, "sequence_erase", None, data.dtype, data)
    with be.device(data):
        if not toks.size or not data.shape[0]:
            if out is None:
                return x._derive(data.copy())
            res = into(out, "sequence_erase", data.shape, data.dtype, be, data, (data,))
            res[...] = data
            return x._derive(landed(res, out))
        values = be.xp.ascontiguousarray(data).reshape(-1)
        cmp = values if cmp_dtype == values.dtype else values.astype(cmp_dtype)
        kept, new_offsets = be.kernel("erase")(values, cmp, toks, be.offsets(x, -1))
    new_offsets.flags.writeable = False
    kept = kept.reshape((-1, *data.shape[1:]))
    if out is not None:  # the kernel wrote its own buffer: data is read, out is free to take it
        check_shape(out, "sequence_erase", kept.shape)
        kept = landed(kept, out)
    return x._derive(kept, (*x.offsets[:-1], new_offsets))


def _tokens_for(tokens, dtype, cmp_dtype):
    """The tokens the data can equal, exactly, as a sorted unique ``cmp_dtype`` array."""
    if is_cupy_array(tokens):
        tokens = tokens.get()
    if isinstance(tokens, np.ndarray):
        if tokens.ndim > 1:
            raise ValueError(f"sequence_erase: tokens must be 1-D, got shape {tokens.shape}")
        if tokens.dtype.kind not in "biuf":
            raise TypeError(f"sequence_erase: tokens must be numbers, got dtype "
                            f"{tokens.dtype}")
        values = tokens.reshape(-1).tolist()
    elif isinstance(tokens, (list, tuple)):
        values = list(tokens)
    else:
        raise TypeError(f"sequence_erase: tokens must be a list or 1-D array of numbers, got "
                        f"{type(tokens).__name__}")
    kept = []
    for pos, value in enumerate(values):
        if isinstance(value, np.generic):
            value = value.item()
        if not isinstance(value, numbers.Real):
            raise TypeError(f"sequence_erase: tokens[{pos}] = {value!r} is not a number")
        if _representable(value, dtype):
            kept.append(value)
    # A set dedups by value (-0.0 == 0.0; NaN never gets here); the kernels want them sorted.
    return np.array(sorted(set(kept)), dtype=cmp_dtype)


@functools.cache
def _int_range(dtype):
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)


def _representable(value, dtype):
    """True if ``dtype`` holds a value equal to ``value`` (so a row could match it)."""
    if dtype.kind in "iu":
        if isinstance(value, float):
            if not value.is_integer():  # NaN, infinities and fractions
                return False
            value = int(value)
        low, high = _int_range(dtype)
        return low <= int(value) <= high
    if value != value:  # NaN equals nothing
        return False
    try:
        with np.errstate(over="ignore"):
            cast = dtype.type(value)
    except OverflowError:  # an int beyond every float
        return False
    return float(cast) == value

#: The table form (docs/tables.md).
TABLE = {"sequence_erase": TableContract(("input",))}
