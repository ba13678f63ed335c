"""``sequence_reverse``: reverse the rows of every sequence (OPS.md section 12)."""

import numpy as np

from lodarrow._backend import get_cupy
from lodarrow._ext import seq_layout
from lodarrow._ops._common import (ANY_LEVELS, as_lod_tensor, backend_of_data, flat_bytes,
                                   plan_threads, require_lod_levels)
from lodarrow._tensor import LoDTensor

__all__ = ["sequence_reverse"]


def sequence_reverse(x, name=None):
    """Reverse the order of the rows inside every last-level sequence of ``x``.

    Parameters
    ----------
    x : LoDTensor or Arrow array of lists
        Data of shape ``(N, *feature_shape)`` (rank 1 allowed), any dtype (bool included:
        the rows only move), with at least one LoD level.  Outer levels are carried through
        (OPS.md departure 6).
    name : str, optional
        Ignored (Paddle compatibility).

    Returns
    -------
    LoDTensor
        Same shape, dtype and full LoD as ``x``; rows ``[a, b)`` of each last-level sequence
        in the order ``b - 1, ..., a``.  Empty sequences stay empty.

    Raises
    ------
    LoDError
        If ``x`` has no LoD.

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
    data = x._data
    backend = backend_of_data(data)
    offsets = x._offsets[-1]
    if backend == "cpu":
        out = np.empty(data.shape, dtype=data.dtype)
        if out.size:
            _cpu(out, data, offsets)
        return LoDTensor._from_trusted(out, x._offsets, x.place)
    cupy = get_cupy()
    with data.device:
        out = cupy.empty(data.shape, dtype=data.dtype)
        if out.size:
            _cuda(out, data, x._device_offsets_for(x.lod_level - 1))
    result = LoDTensor._from_trusted(out, x._offsets, x.place)
    result._device_offsets.update(x._device_offsets)  # same LoD, same device copies
    return result


def _cpu(out, data, offsets):
    n_threads, bounds = plan_threads(offsets, out.size)
    width = out.nbytes // out.shape[0]
    seq_layout.reverse(flat_bytes(out), flat_bytes(data), offsets, bounds, width, n_threads)


def _cuda(out, data, offsets):
    from lodarrow._cuda import layout

    layout.reverse(out, get_cupy().ascontiguousarray(data), offsets)
