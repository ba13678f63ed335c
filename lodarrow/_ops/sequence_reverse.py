"""``sequence_reverse``: reverse the rows of every sequence.

Semantics, edge cases, errors and departures from Paddle: docs/operators.md#sequence_reverse.
"""

from lodarrow._backends import backend_of_array
from lodarrow._ops._common import ANY_LEVELS, as_lod_tensor, require_lod_levels
from lodarrow._ops._contract import TableContract
from lodarrow._ops._out import into, landed

__all__ = ["sequence_reverse"]


def sequence_reverse(x, name=None, *, out=None):
    """Reverse the order of the rows inside every last-level sequence of ``x``.

    Parameters
    ----------
    x : LoDTensor or Arrow array of lists
        Data of shape ``(N, *feature_shape)`` (rank 1 allowed), any dtype (bool included:
        the rows only move), with at least one LoD level.  Outer levels are carried through
        (docs/operators.md#multi-level-input).
    name : str, optional
        Ignored (Paddle compatibility).
    out : numpy.ndarray or cupy.ndarray, optional
        Keyword-only: a preallocated array that receives the result's data (exactly its shape
        and dtype, on the input's device, C-contiguous, writable)
        (docs/operators.md#out-writing-into-a-preallocated-array).

    Returns
    -------
    LoDTensor
        Same shape, dtype and full LoD as ``x``; rows ``[a, b)`` of each last-level sequence
        in the order ``b - 1, ..., a``.  Empty sequences stay empty.

    Raises
    ------
    LoDError
        If ``x`` has no LoD.

    See Also
    --------
    lodarrow.torch.sequence_reverse : The same operator on torch tensors, differentiable.

    Examples
    --------
    >>> import numpy as np, lodarrow as la
    >>> x = la.LoDTensor(np.arange(1, 21).reshape(5, 4), lod=[[0, 2, 5]])
    >>> la.sequence_reverse(x).numpy()
    array([[ 5,  6,  7,  8],
           [ 1,  2,  3,  4],
           [17, 18, 19, 20],
           [13, 14, 15, 16],
           [ 9, 10, 11, 12]])
    """
    x = as_lod_tensor(x, "x")
    require_lod_levels(x, "x", "sequence_reverse", ANY_LEVELS)
    data = x.data
    be = backend_of_array(data)
    with be.device(data):
        res = (be.empty(data.shape, data.dtype) if out is None
               else into(out, "sequence_reverse", data.shape, data.dtype, be, data, (data,)))
        be.kernel("reverse")(res, data, be.offsets(x, -1))
    if out is not None:
        res = landed(res, out)
    return x._derive(res)

#: The table form (docs/tables.md).
TABLE = {"sequence_reverse": TableContract(("x",))}
