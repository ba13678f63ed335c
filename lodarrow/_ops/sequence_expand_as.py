"""``sequence_expand_as``: repeat row ``i`` of ``x`` to fill ``y``'s sequence ``i`` (OPS.md 3)."""

from contextlib import nullcontext

from lodarrow._backend import array_namespace, backend_of
from lodarrow._ext import seq_gather
from lodarrow._errors import LoDError
from lodarrow._ops._common import as_lod_tensor, chunk_bounds, require_lod_levels, row_bytes, \
    threads_for
from lodarrow._tensor import LoDTensor

__all__ = ["sequence_expand_as"]

_HOST = nullcontext()  # the CUDA path runs under the data's device instead


def sequence_expand_as(x, y, name=None):
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
    backend = backend_of("sequence_expand_as", x=x, y=y)
    require_lod_levels(y, "y", "sequence_expand_as", 1)
    ref = y._offsets[0]
    n = ref.shape[0] - 1
    data = x._data
    if data.shape[0] != n:
        raise LoDError(f"sequence_expand_as: x needs one row per sequence of y ({n}), "
                       f"got {data.shape[0]} rows")
    with data.device if backend == "cuda" else _HOST:
        out = array_namespace(backend).empty((int(ref[-1]),) + data.shape[1:], data.dtype)
        result = LoDTensor._from_trusted(out, y._offsets, x._place)
        (_cuda if backend == "cuda" else _cpu)(out, x, y)
    return result


def _cpu(out, x, y):
    if out.size == 0:
        return
    ref = y._offsets[0]
    threads = threads_for(out.size)
    bounds = chunk_bounds(ref, threads * 4) if threads > 1 else None
    seq_gather.expand_rows(row_bytes(out), row_bytes(x._data), ref, bounds, threads)


def _cuda(out, x, y):
    if out.size == 0:
        return
    from lodarrow._cuda import gather

    gather.expand_rows(row_bytes(out), row_bytes(x._data), y._device_offsets_for(0))
