"""``sequence_expand_as``: repeat row ``i`` of ``x`` to fill ``y``'s sequence ``i``.

Semantics, edge cases, errors and departures from Paddle: docs/operators.md#sequence_expand_as.
"""

from lodarrow._backends import backend_of, row_bytes
from lodarrow._errors import LoDError
from lodarrow._ops._common import as_lod_tensor, require_lod_levels
from lodarrow._ops._contract import TableContract
from lodarrow._ops._out import into, landed

__all__ = ["sequence_expand_as"]


def sequence_expand_as(x, y, name=None, *, out=None):
    """Repeat row ``i`` of ``x`` ``len(y seq i)`` times; the output takes ``y``'s LoD.

    Parameters
    ----------
    x : LoDTensor, array_like or Arrow array
        One row per sequence of ``y``, any dtype, rank >= 1 (trailing axes kept).  Its own
        LoD, if any, is ignored.
    y : LoDTensor or Arrow array
        Exactly one LoD level with ``n`` sequences; its data is not read.
    name : str, optional
        Accepted for Paddle compatibility and ignored.
    out : numpy.ndarray or cupy.ndarray, optional
        Keyword-only: a preallocated array that receives the result's data (exactly its shape
        and dtype, on the input's device, C-contiguous, writable)
        (docs/operators.md#out-writing-into-a-preallocated-array).

    Returns
    -------
    LoDTensor
        ``y.lod()[0][-1]`` rows of ``x``'s dtype and feature shape with ``y``'s LoD, on
        ``x``'s place.  A row whose sequence is empty is dropped.

    Raises
    ------
    LoDError
        If ``y`` does not have exactly one LoD level, or ``x`` does not have one row per
        sequence of ``y``.
    ValueError
        If ``x`` and ``y`` live on different devices.

    See Also
    --------
    sequence_expand : Repeat rows or sequences by the lengths of one of ``y``'s levels.
    lodarrow.torch.sequence_expand_as : The same operator on torch tensors, differentiable.

    Examples
    --------
    >>> import numpy as np, lodarrow as la
    >>> x = la.LoDTensor(np.array([[1.0], [2.0], [3.0]]))
    >>> y = la.LoDTensor(np.zeros(5), lengths=[[2, 0, 3]])
    >>> out = la.sequence_expand_as(x, y)
    >>> out.numpy().ravel().tolist(), out.lod()
    ([1.0, 1.0, 3.0, 3.0, 3.0], [[0, 2, 2, 5]])
    """
    x = as_lod_tensor(x, "x")
    y = as_lod_tensor(y, "y")
    be = backend_of("sequence_expand_as", x=x.data, y=y.data)
    require_lod_levels(y, "y", "sequence_expand_as", 1)
    ref = y.offsets[0]
    n = ref.shape[0] - 1
    data = x.data
    if data.shape[0] != n:
        raise LoDError(f"sequence_expand_as: x needs one row per sequence of y ({n}), "
                       f"got {data.shape[0]} rows")
    shape = (int(ref[-1]),) + data.shape[1:]
    with be.device(data):
        res = (be.empty(shape, data.dtype) if out is None
               else into(out, "sequence_expand_as", shape, data.dtype, be, data, (data,)))
        be.kernel("expand_rows")(row_bytes(res), row_bytes(data), be.offsets(y, 0))
    if out is not None:
        res = landed(res, out)
    return x._derive(res, y.offsets)

#: The table form (docs/tables.md).
TABLE = {"sequence_expand_as": TableContract(("x", "y"), plain=("x",))}
