"""``sequence_slice``: a sub-range of every last-level sequence.

Semantics, edge cases, errors and departures from Paddle: docs/operators.md#sequence_slice.
"""

import numpy as np

from lodarrow._backends import backend_of, row_bytes
from lodarrow._ops._common import as_lod_tensor, data_of, host_indices, require_lod_levels
from lodarrow._ops._contract import TableContract
from lodarrow._ops._out import into, landed
from lodarrow._plan import slice_plan
from lodarrow._tensor import _freeze

__all__ = ["sequence_slice"]


class _NegativeSliceError(ValueError, IndexError):
    """A negative offset or length: a ``ValueError`` (an invalid argument) that is also an
    ``IndexError`` (Paddle reports slice bounds as out of range)."""


def sequence_slice(input, offset, length, name=None, *, out=None):
    """Keep rows ``[offset[i], offset[i] + length[i])`` of every last-level sequence ``i``.

    Parameters
    ----------
    input : LoDTensor or Arrow array
        At least one LoD level; the last level is sliced, outer levels are kept.  Any dtype
        and rank >= 1.
    offset, length : array_like or LoDTensor
        One entry per last-level sequence, of shape ``[n]`` or ``[n, 1]`` and any integer
        dtype; non-negative, with ``offset[i] + length[i] <= len(seq i)``.  Zero lengths
        (also at ``offset == len(seq i)``) give empty sequences.
    name : str, optional
        Accepted for Paddle compatibility and ignored.
    out : numpy.ndarray or cupy.ndarray, optional
        Keyword-only: a preallocated array that receives the result's data (exactly its shape
        and dtype, on the input's device, C-contiguous, writable)
        (docs/operators.md#out-writing-into-a-preallocated-array).

    Returns
    -------
    LoDTensor
        ``sum(length)`` rows; the last level's lengths are ``length``.

    Raises
    ------
    LoDError
        If ``input`` has no LoD.
    ValueError
        If ``offset`` or ``length`` has the wrong shape or count, or a negative entry (also an
        ``IndexError``), or the inputs live on different devices.
    IndexError
        If ``offset[i] + length[i]`` runs past the end of sequence ``i``.
    TypeError
        If ``offset`` or ``length`` is not of an integer dtype.

    See Also
    --------
    lodarrow.torch.sequence_slice : The same operator on torch tensors, differentiable.

    Examples
    --------
    >>> import numpy as np, lodarrow as la
    >>> x = la.LoDTensor(np.arange(10), lengths=[[3, 2, 4, 1]])
    >>> out = la.sequence_slice(x, offset=[[0], [1], [1], [1]], length=[[2], [1], [3], [0]])
    >>> out.numpy().tolist(), out.lod()
    ([0, 1, 4, 6, 7, 8], [[0, 2, 3, 6, 6]])
    """
    x = as_lod_tensor(input, "input")
    be = backend_of("sequence_slice", input=x.data, offset=_array_or_none(offset),
                    length=_array_or_none(length))
    require_lod_levels(x, "input", "sequence_slice", range(1, 1 << 16))
    last = x.offsets[-1]
    n = last.shape[0] - 1
    off = host_indices(offset, "offset", n, "sequence_slice")
    lens = host_indices(length, "length", n, "sequence_slice")
    src_start = np.empty(n, dtype=np.int64)
    out_off = np.empty(n + 1, dtype=np.int64)
    bad = slice_plan(last, off, lens, src_start, out_off)
    if bad >= 0:
        _raise_bad_slice(bad, last, off, lens)
    data = x.data
    level = x.lod_level - 1
    shape = (int(out_off[-1]),) + data.shape[1:]
    with be.device(data):
        res = (be.empty(shape, data.dtype) if out is None
               else into(out, "sequence_slice", shape, data.dtype, be, data, (data,)))
        result = x._derive(res, x.offsets[:-1] + _freeze([out_off]))
        be.kernel("gather_blocks")(row_bytes(res), row_bytes(data), src_start,
                                   be.offsets(result, level))
    if out is not None and res is not out:
        result = x._derive(landed(res, out), result.offsets)
    return result


def _raise_bad_slice(i, last, off, lens):
    """Explain why sequence ``i``'s slice is invalid (the first invalid one)."""
    for arg, name in ((off, "offset"), (lens, "length")):
        if arg[i] < 0:
            raise _NegativeSliceError(f"sequence_slice: {name}[{i}] = {int(arg[i])} is negative")
    raise IndexError(f"sequence_slice: sequence {i} has {int(last[i + 1] - last[i])} rows, but "
                     f"offset[{i}] + length[{i}] = {int(off[i])} + {int(lens[i])} runs past its "
                     f"end")


def _array_or_none(obj):
    """An array argument for the device check; Python lists are neutral."""
    return None if isinstance(obj, (list, tuple, int)) else data_of(obj)


#: The table form (docs/tables.md).
TABLE = {"sequence_slice": TableContract(("input", "offset", "length"),
                                     plain=("offset", "length"))}
