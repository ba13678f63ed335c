"""``lod_reset``: the same data under a new LoD.

Semantics, edge cases, errors and departures from Paddle: docs/operators.md#lod_reset.
"""

from lodarrow._backends import backend_of
from lodarrow._errors import ArgumentError
from lodarrow._ops._common import (as_lod_tensor, as_tensor_or_array, check_ends_at_rows,
                                   check_new_level, data_of, flat_offsets)
from lodarrow._ops._contract import TableContract
from lodarrow._tensor import LoDTensor, _freeze

__all__ = ["lod_reset"]


def lod_reset(x, y=None, target_lod=None, name=None):
    """Give the rows of ``x`` a new LoD, taken from ``y`` or ``target_lod``.

    The output **shares x's data** (no copy; Paddle copies): only the LoD is new.

    Parameters
    ----------
    x : LoDTensor, array_like or Arrow array
        The data, with any number of LoD levels (they are all replaced).
    y : LoDTensor, array_like or Arrow array, optional
        With a LoD: the output takes ``y``'s whole LoD (every level; ``y``'s data is
        ignored) and its last level must end at ``x``'s row count.  Without a LoD: ``y``'s
        data, of any integer dtype and any shape, read flat, is one level of offsets.
        ``y`` takes priority over ``target_lod``.
    target_lod : sequence of int, optional
        One level of offsets (not lengths), flat, of any integer dtype.
    name : str, optional
        Accepted for Paddle compatibility and ignored.

    Returns
    -------
    LoDTensor
        ``x``'s data (the same array) with the new LoD, on ``x``'s place.

    Raises
    ------
    TypeError
        If both ``y`` and ``target_lod`` are None (also a ``ValueError``, as Paddle's), or
        the offsets are not integers.
    LoDError
        If the new level is empty, does not start at 0 (the message suggests the offsets the
        values would make if they were lengths), decreases, or does not end at ``x``'s row
        count; or if ``y``'s LoD does not end at ``x``'s row count.
    ValueError
        If ``x`` and ``y`` live on different devices.

    See Also
    --------
    lod_append : Add one level after the existing ones.
    lodarrow.torch.lod_reset : The same operator on torch tensors, differentiable.

    Examples
    --------
    Paddle's examples, with the offsets the operator really takes:

    >>> import numpy as np, lodarrow as la
    >>> x = la.create_lod_tensor(np.arange(1, 7, dtype=np.float32).reshape(6, 1),
    ...                          [[2, 3, 1]], la.CPUPlace())
    >>> la.lod_reset(x, target_lod=[0, 4, 6]).lod()
    [[0, 4, 6]]
    >>> la.lod_reset(x, y=np.array([0, 2, 6], dtype=np.int32)).lod()
    [[0, 2, 6]]
    >>> y = la.create_lod_tensor(np.ones((6, 1), np.float32), [[2, 2], [2, 2, 1, 1]],
    ...                          la.CPUPlace())
    >>> la.lod_reset(x, y=y).lod()
    [[0, 2, 4], [0, 2, 4, 5, 6]]
    """
    x = as_lod_tensor(x, "x")
    rows = x.data.shape[0]
    if y is not None:
        y_t = as_tensor_or_array(y, "y")
        backend_of("lod_reset", x=x.data, y=data_of(y_t))
        if isinstance(y_t, LoDTensor) and y_t.lod_level:
            check_ends_at_rows(y_t, rows, "lod_reset", "y")
            return x._derive(x.data, y_t.offsets)
        level = flat_offsets(y_t, "y", "lod_reset")
    elif target_lod is not None:
        level = flat_offsets(target_lod, "target_lod", "lod_reset", flat_only=True)
    else:
        raise ArgumentError("lod_reset: y and target_lod should not be both none; give y (a "
                            "LoDTensor, or offsets as a tensor) or target_lod (offsets)")
    check_new_level(level, rows, "target_lod" if y is None else "y", "lod_reset")
    return x._derive(x.data, _freeze([level]))

#: The table form (docs/tables.md).
TABLE = {"lod_reset": TableContract(("x", "y"), udf_columns=("y",))}
