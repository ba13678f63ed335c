"""``lod_append``: add one LoD level under a tensor's existing levels.

Semantics, edge cases, errors and departures from Paddle: docs/operators.md#lod_append.
"""

import numpy as np

from lodarrow._backends import backend_of
from lodarrow._errors import LoDError
from lodarrow._errors import ArgumentError
from lodarrow._ops._common import (as_lod_tensor, as_tensor_or_array, check_ends_at_rows,
                                   check_new_level, data_of, flat_offsets)
from lodarrow._ops._contract import TableContract
from lodarrow._tensor import LoDTensor, _freeze

__all__ = ["lod_append"]


def lod_append(x, level, name=None):
    """Append one level of offsets after ``x``'s LoD levels (``lod_reset`` with ``append``).

    The output **shares x's data** (no copy): only the LoD is new.

    Parameters
    ----------
    x : LoDTensor, array_like or Arrow array
        The data; its levels are kept and the new level is appended after them (a tensor
        without LoD gets just the new level).
    level : sequence of int, array or LoDTensor
        The new level as offsets (not lengths), of any integer dtype: a flat list or 1-D
        array, or a tensor whose data is read flat.  A LoDTensor **with** a LoD instead
        replaces ``x``'s whole LoD by its own (Paddle's behaviour for a ``Y`` with a LoD).
    name : str, optional
        Accepted for Paddle compatibility and ignored.

    Returns
    -------
    LoDTensor
        ``x``'s data (the same array) with ``lod_level + 1`` levels, on ``x``'s place.

    Raises
    ------
    TypeError
        If ``level`` is None or a scalar (also a ``ValueError``, as Paddle's), or its
        values are not integers.
    LoDError
        If the new level is empty, does not start at 0 (the message suggests the offsets the
        values would make as lengths), decreases, or does not end at ``x``'s row count; or
        if ``x``'s last level does not end at the new level's sequence count, so that the
        levels would not chain.
    ValueError
        If ``x`` and ``level`` live on different devices, or a list ``level`` is not flat.

    See Also
    --------
    lod_reset : Replace the LoD instead.
    lodarrow.torch.lod_append : The same operator on torch tensors, differentiable.

    Examples
    --------
    >>> import numpy as np, lodarrow as la
    >>> x = la.LoDTensor(np.arange(6.0))
    >>> la.lod_append(x, [0, 1, 3, 6]).lod()
    [[0, 1, 3, 6]]

    Under an existing level, the new one must have one sequence per row of ``x``:

    >>> x = la.LoDTensor(np.arange(6.0), lod=[[0, 2, 6]])
    >>> la.lod_append(x, [0, 0, 2, 3, 4, 5, 6]).lod()
    [[0, 2, 6], [0, 0, 2, 3, 4, 5, 6]]
    >>> la.lod_append(x, [0, 2, 6])
    Traceback (most recent call last):
    ...
    lodarrow.LoDError: lod_append: x's last LoD level (level 0) ends at 6, so the \
appended level must have 6 sequences (7 offsets), got 2 sequences
    """
    x = as_lod_tensor(x, "x")
    rows = x.data.shape[0]
    if level is None or isinstance(level, (bool, int, float, np.generic)):
        raise ArgumentError(f"lod_append: level must be offsets (a list, array or LoDTensor), "
                            f"got {type(level).__name__}")
    if isinstance(level, (list, tuple)):
        new = flat_offsets(level, "level", "lod_append", flat_only=True)
    else:
        y = as_tensor_or_array(level, "level")
        backend_of("lod_append", x=x.data, level=data_of(y))
        if isinstance(y, LoDTensor) and y.lod_level:
            check_ends_at_rows(y, rows, "lod_append", "level")
            return x._derive(x.data, y.offsets)
        # An array or a plain tensor is read flat, as Paddle's operator reads Y.
        new = flat_offsets(y, "level", "lod_append")
    check_new_level(new, rows, "level", "lod_append")
    if x.lod_level:
        k = x.lod_level - 1
        end = int(x.offsets[-1][-1])
        if end != new.shape[0] - 1:
            raise LoDError(f"lod_append: x's last LoD level (level {k}) ends at {end}, so the "
                           f"appended level must have {end} sequences ({end + 1} offsets), got "
                           f"{new.shape[0] - 1} sequences")
    return x._derive(x.data, x.offsets + _freeze([new]))

#: The table form (docs/tables.md).
TABLE = {"lod_append": TableContract(("x", "level"), udf_columns=("level",))}
