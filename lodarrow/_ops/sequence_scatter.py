"""``sequence_scatter``: add index sequence ``i``'s updates into row ``i``.

Semantics, edge cases, errors and departures from Paddle: docs/operators.md#sequence_scatter.
"""

import math

import numpy as np

from lodarrow._backends import backend_of
from lodarrow._ops._common import as_lod_tensor, require_lod_levels
from lodarrow._ops._contract import TableContract
from lodarrow._ops._out import check, into, overlaps, same_buffer
from lodarrow._validation import as_index_array

__all__ = ["sequence_scatter"]


class _TooManySequencesError(IndexError, ValueError):
    """More index sequences than input rows: an ``IndexError`` (a row out of range) that is
    also a ``ValueError`` (mismatched inputs)."""


def sequence_scatter(input, index, updates, name=None, *, out=None):
    """Add each index sequence's updates into its row: ``out[i, index[p]] += updates[p]``.

    The output starts as a copy of ``input`` (viewed as ``N`` rows of width
    ``W = prod(input.shape[1:])``); for every position ``p`` of index sequence ``i``,
    ``updates[p]`` is added at column ``index[p]`` of row ``i``.  Repeated ids accumulate,
    in order (deterministic on every backend).  Rows without an index sequence are copied
    unchanged.

    Parameters
    ----------
    input : LoDTensor or array_like
        ``[N, ...]`` of any numeric dtype (not bool); a LoD is ignored.
    index : LoDTensor or Arrow array
        Ids of shape ``[M, 1]`` or ``[M]``, any integer dtype, each in ``[0, W)``, with
        exactly one LoD level of at most ``N`` sequences.
    updates : LoDTensor or array_like
        ``[M, 1]`` or ``[M]``; its dtype must cast safely to ``input``'s
        (``numpy.can_cast(..., "safe")``: float32 updates into float64 input, int8 into
        int32; not float64 into float32).  If it has a LoD, it must equal ``index``'s.
    name : str, optional
        Accepted for Paddle compatibility and ignored.
    out : numpy.ndarray or cupy.ndarray, optional
        Keyword-only: a preallocated array that receives the result's data (exactly
        ``input``'s shape and dtype, on its device, C-contiguous, writable).  ``out=`` the
        C-contiguous data of ``input`` itself scatters in place, without a copy
        (docs/operators.md#out-writing-into-a-preallocated-array).

    Returns
    -------
    LoDTensor
        Without LoD, of ``input``'s shape and dtype, on ``input``'s place.  float16 is
        accumulated in float32 and rounded once.

    Raises
    ------
    TypeError
        If ``input`` is bool or not numeric, ``index`` is not integer, or ``updates`` cannot
        be cast safely to ``input``'s dtype.
    IndexError
        If an id is outside ``[0, W)`` (the message gives its position, sequence and value),
        or ``index`` has more sequences than ``input`` has rows (also a ``ValueError``).
    LoDError
        If ``index`` does not have exactly one LoD level.
    ValueError
        If ``index`` or ``updates`` has the wrong shape, ``updates`` has a different row count
        or LoD than ``index``, or the inputs live on different devices.

    See Also
    --------
    lodarrow.torch.sequence_scatter : The same operator on torch tensors, differentiable.

    Examples
    --------
    Paddle's example:

    >>> import numpy as np, lodarrow as la
    >>> x = np.ones((3, 6), np.float32)
    >>> index = la.LoDTensor(np.array([[0], [1], [2], [5], [4], [3], [2], [1], [3], [2], [5],
    ...                                [4]]), lod=[[0, 3, 8, 12]])
    >>> updates = la.LoDTensor(np.array([[0.3], [0.3], [0.4], [0.1], [0.2], [0.3], [0.4],
    ...                                  [0.0], [0.2], [0.3], [0.1], [0.4]], np.float32),
    ...                        lod=[[0, 3, 8, 12]])
    >>> print(la.sequence_scatter(x, index, updates).numpy())
    [[1.3 1.3 1.4 1.  1.  1. ]
     [1.  1.  1.4 1.3 1.2 1.1]
     [1.  1.  1.3 1.2 1.4 1.1]]
    """
    inp = as_lod_tensor(input, "input")
    index = as_lod_tensor(index, "index")
    updates = as_lod_tensor(updates, "updates")
    be = backend_of("sequence_scatter", input=inp.data, index=index.data, updates=updates.data)
    data = inp.data
    dtype = data.dtype
    if dtype.kind not in "iuf":
        raise TypeError(f"sequence_scatter: input must be numeric (an integer or float dtype), "
                        f"got dtype {dtype}")
    require_lod_levels(index, "index", "sequence_scatter", 1)
    # float16 is accumulated in float32 (no portable C half type); the rest as they are.
    work = np.dtype(np.float32) if dtype == np.float16 else dtype
    if out is not None:
        check(out, "sequence_scatter", data.shape, dtype, data)
    with be.device(data):
        ids = as_index_array(index.data, "sequence_scatter: index", xp=be.xp)
        upd = _check_updates(updates, ids.shape[0], index, dtype)
        n_rows = data.shape[0]
        off = index.offsets[0]
        if off.shape[0] - 1 > n_rows:
            raise _TooManySequencesError(
                f"sequence_scatter: index has {off.shape[0] - 1} sequences but input has only "
                f"{n_rows} rows; sequence i updates row i")
        width = math.prod(data.shape[1:])
        src = data.reshape(n_rows, width)
        upd = be.xp.ascontiguousarray(upd.reshape(-1), dtype=work)
        in_place = (out is not None and work == dtype and same_buffer(out, data)
                    and not overlaps(out, (ids, upd)))
        if out is None or work != dtype:  # float16: out receives the rounded result below
            buf = be.empty((n_rows, width), work)
        elif in_place:
            buf = out
        else:
            buf = into(out, "sequence_scatter", data.shape, dtype, be, data, (data, ids, upd))
        res = buf.reshape(n_rows, width)
        if in_place:
            src = res  # the kernel then only adds the updates
        elif work != dtype or not src.flags.c_contiguous:
            res[...] = src  # convert or gather once; the kernel then updates in place
            src = res
        # The kernel checks the ids as it uses them (one pass, not two): raise before
        # returning anything (a given ``out`` is then left part-written, as documented).
        bad = be.kernel("scatter")(res, src, ids, upd, be.offsets(index, 0))
        if bad >= 0:
            _raise_bad_id(ids, off, width, bad)
        if out is None:
            buf = (buf if work == dtype else buf.astype(dtype)).reshape(data.shape)
        elif buf is not out:
            out[...] = buf.reshape(out.shape)  # float16 rounds here as astype does
            buf = out
    return inp._derive(buf, ())


def _check_updates(updates, m, index, dtype):
    """``updates``' data, checked against ``index`` (rows, LoD) and ``input``'s dtype."""
    upd = updates.data
    if not (upd.ndim == 1 or (upd.ndim == 2 and upd.shape[1] == 1)):
        raise ValueError(f"sequence_scatter: updates must have shape [M, 1] or [M], got "
                         f"{tuple(upd.shape)}")
    if upd.shape[0] != m:
        raise ValueError(f"sequence_scatter: updates has {upd.shape[0]} rows but index has "
                         f"{m}; they must match")
    if updates.lod_level and not (updates.lod_level == 1
                                  and np.array_equal(updates.offsets[0], index.offsets[0])):
        raise ValueError(f"sequence_scatter: updates has a LoD {updates.lod()} different from "
                         f"index's {index.lod()}; it must be equal (or absent)")
    if upd.dtype.kind not in "biuf" or not np.can_cast(upd.dtype, dtype, "safe"):
        raise TypeError(f"sequence_scatter: updates of dtype {upd.dtype} cannot be cast safely "
                        f"to input's dtype {dtype}")
    return upd


def _raise_bad_id(ids, off, width, pos):
    """Raise for the first id outside ``[0, width)``, at ``pos``, naming its sequence."""
    seq = int(np.searchsorted(off, pos, side="right")) - 1
    raise IndexError(f"sequence_scatter: index[{pos}] = {int(ids[pos])} (in sequence "
                     f"{seq}) is out of range for input rows of width {width}; ids must "
                     f"be in [0, {width})")

#: The table form (docs/tables.md).
TABLE = {"sequence_scatter": TableContract(("input", "index", "updates"), plain=("input",))}
