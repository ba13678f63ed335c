"""``sequence_scatter``: add index sequence ``i``'s updates into row ``i`` (OPS.md 4, 1, 3, 13)."""

import math
from contextlib import nullcontext

import numpy as np

from lodarrow._backend import array_namespace, backend_of
from lodarrow._ext import seq_scatter
from lodarrow._ops._common import as_lod_tensor, chunk_bounds, require_lod_levels, threads_for
from lodarrow._tensor import LoDTensor
from lodarrow._validation import as_index_array

__all__ = ["sequence_scatter"]

_HOST = nullcontext()  # the CUDA path runs under the data's device instead


class _TooManySequencesError(IndexError, ValueError):
    """More index sequences than input rows: an ``IndexError`` (a row out of range) that is
    also a ``ValueError`` (mismatched inputs)."""


def sequence_scatter(input, index, updates, name=None):
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

    Examples
    --------
    The seed's example:

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
    backend = backend_of("sequence_scatter", input=inp, index=index, updates=updates)
    xp = array_namespace(backend)
    data = inp._data
    dtype = data.dtype
    if dtype.kind not in "iuf":
        raise TypeError(f"sequence_scatter: input must be numeric (an integer or float dtype), "
                        f"got dtype {dtype}")
    require_lod_levels(index, "index", "sequence_scatter", 1)
    with data.device if backend == "cuda" else _HOST:
        ids = as_index_array(index._data, "sequence_scatter: index", xp=xp)
        upd = _check_updates(updates, ids.shape[0], index, dtype)
        n_rows = data.shape[0]
        off = index._offsets[0]
        if off.shape[0] - 1 > n_rows:
            raise _TooManySequencesError(
                f"sequence_scatter: index has {off.shape[0] - 1} sequences but input has only "
                f"{n_rows} rows; sequence i updates row i")
        width = math.prod(data.shape[1:])
        _check_ids(ids, off, width)
        # float16 is accumulated in float32 (no portable C half type); the rest as they are.
        work = np.dtype(np.float32) if dtype == np.float16 else dtype
        out = xp.empty((n_rows, width), dtype=work)
        src = data.reshape(n_rows, width)
        if work != dtype or not src.flags.c_contiguous:
            out[...] = src  # convert or gather once; the kernel then updates in place
            src = out
        upd = xp.ascontiguousarray(upd.reshape(-1), dtype=work)
        (_cuda if backend == "cuda" else _cpu)(out, src, ids, upd, index)
        if work != dtype:
            out = out.astype(dtype)
    return LoDTensor._from_trusted(out.reshape(data.shape), (), inp._place)


def _check_updates(updates, m, index, dtype):
    """``updates``' data, checked against ``index`` (rows, LoD) and ``input``'s dtype."""
    upd = updates._data
    if not (upd.ndim == 1 or (upd.ndim == 2 and upd.shape[1] == 1)):
        raise ValueError(f"sequence_scatter: updates must have shape [M, 1] or [M], got "
                         f"{tuple(upd.shape)}")
    if upd.shape[0] != m:
        raise ValueError(f"sequence_scatter: updates has {upd.shape[0]} rows but index has "
                         f"{m}; they must match")
    if updates._offsets and not (len(updates._offsets) == 1
                                 and np.array_equal(updates._offsets[0], index._offsets[0])):
        raise ValueError(f"sequence_scatter: updates has a LoD {updates.lod()} different from "
                         f"index's {index.lod()}; it must be equal (or absent)")
    if upd.dtype.kind not in "biuf" or not np.can_cast(upd.dtype, dtype, "safe"):
        raise TypeError(f"sequence_scatter: updates of dtype {upd.dtype} cannot be cast safely "
                        f"to input's dtype {dtype}")
    return upd


def _check_ids(ids, off, width):
    """Every id in ``[0, width)``; the error names the first bad position and its sequence."""
    if not ids.shape[0]:
        return
    if isinstance(ids, np.ndarray):
        pos = seq_scatter.first_bad_id(ids, width)
    else:  # on the GPU: one reduction, one sync
        bad = (ids < 0) | (ids >= width)
        pos = int(bad.argmax()) if bool(bad.any()) else -1
    if pos >= 0:
        seq = int(np.searchsorted(off, pos, side="right")) - 1
        raise IndexError(f"sequence_scatter: index[{pos}] = {int(ids[pos])} (in sequence "
                         f"{seq}) is out of range for input rows of width {width}; ids must "
                         f"be in [0, {width})")


def _cpu(out, src, ids, updates, index):
    """Rows with an index sequence are copied and updated by the kernel; the rest here."""
    off = index._offsets[0]
    n_seq = off.shape[0] - 1
    if src is not out and n_seq < out.shape[0]:
        out[n_seq:] = src[n_seq:]
    threads = threads_for(ids.shape[0] + out.size)
    bounds = chunk_bounds(off, threads * 4) if threads > 1 else None
    seq_scatter.sequence_scatter(out, src, ids, updates, off, bounds, threads)


def _cuda(out, src, ids, updates, index):
    """One GPU thread per index sequence (``lodarrow._cuda.gather.scatter``)."""
    from lodarrow._cuda import gather

    if src is not out:
        out[...] = src
    gather.scatter(out, ids, updates, index._device_offsets_for(0))
