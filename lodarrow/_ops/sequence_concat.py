"""``sequence_concat``: join the i-th sequences of several inputs (OPS.md 10, departures 6, 12)."""

from contextlib import nullcontext

import numpy as np

from lodarrow._backend import array_namespace, backend_of
from lodarrow._errors import LoDError
from lodarrow._ext import seq_gather
from lodarrow._ops._common import as_lod_tensor, chunk_bounds, row_bytes, threads_for
from lodarrow._tensor import LoDTensor, _freeze

__all__ = ["sequence_concat"]

_HOST = nullcontext()  # the CUDA path runs under the data's device instead


def sequence_concat(input, name=None):
    """Concatenate sequence by sequence: output sequence ``i`` is input 0's sequence ``i``,
    then input 1's sequence ``i``, and so on.

    Parameters
    ----------
    input : list or tuple of LoDTensor (or Arrow arrays)
        One or more tensors (a single one gives a copy) with the same dtype, the same feature
        shape and the same number of last-level sequences.  Each has one LoD level, or
        several levels whose outer levels are identical across the inputs (they are kept).
    name : str, optional
        Accepted for Paddle compatibility and ignored.

    Returns
    -------
    LoDTensor
        The rows of all inputs, on their place; its last level's lengths are the element-wise
        sums of the inputs' last-level lengths, its outer levels those of the inputs.

    Raises
    ------
    TypeError
        If ``input`` is not a list or tuple, or the inputs' dtypes differ (naming the input).
    ValueError
        If ``input`` is empty, the feature shapes or sequence counts differ (naming the
        input), or the inputs live on different devices.
    LoDError
        If an input has no LoD, the level counts differ, or multi-level inputs do not share
        their outer levels.

    Examples
    --------
    >>> import numpy as np, lodarrow as la
    >>> a = la.LoDTensor(np.array([1, 2, 3]), lengths=[[2, 0, 1]])
    >>> b = la.LoDTensor(np.array([10, 20, 30]), lengths=[[1, 2, 0]])
    >>> out = la.sequence_concat([a, b])
    >>> out.numpy().tolist(), out.lod()
    ([1, 2, 10, 20, 30, 3], [[0, 3, 5, 6]])
    """
    if not isinstance(input, (list, tuple)):
        raise TypeError(f"sequence_concat: input must be a list or tuple of LoDTensors, got "
                        f"{type(input).__name__}")
    if not input:
        raise ValueError("sequence_concat: input is empty; give at least one LoDTensor")
    ts = [as_lod_tensor(t, f"input[{k}]") for k, t in enumerate(input)]
    backend = backend_of("sequence_concat", **{f"input[{k}]": t for k, t in enumerate(ts)})
    first = ts[0]
    levels = len(first._offsets)
    for k, t in enumerate(ts):
        if not t._offsets:
            raise LoDError(f"sequence_concat: input[{k}] has no LoD; every input needs at "
                           f"least 1 LoD level")
        if len(t._offsets) != levels:
            raise LoDError(f"sequence_concat: input[{k}] has {len(t._offsets)} LoD levels but "
                           f"input[0] has {levels}; all inputs need the same level count")
        if t._data.dtype != first._data.dtype:
            raise TypeError(f"sequence_concat: input[{k}] has dtype {t._data.dtype} but "
                            f"input[0] has {first._data.dtype}; all inputs need one dtype")
        if t._data.shape[1:] != first._data.shape[1:]:
            raise ValueError(f"sequence_concat: input[{k}] has feature shape "
                             f"{tuple(t._data.shape[1:])} but input[0] has "
                             f"{tuple(first._data.shape[1:])}; they must match")
        for j in range(levels - 1):
            a, b = t._offsets[j], first._offsets[j]
            if not np.array_equal(a, b):
                raise LoDError(_outer_mismatch(k, j, a, b, levels))
        n_k, n_0 = t._offsets[-1].shape[0] - 1, first._offsets[-1].shape[0] - 1
        if n_k != n_0:
            raise ValueError(f"sequence_concat: input[{k}] has {n_k} sequences but input[0] "
                             f"has {n_0}; all inputs need the same number of sequences")
    # Summing offsets sums lengths: out_off[i] = sum_k off_k[i].
    out_off = first._offsets[-1].copy()
    for t in ts[1:]:
        out_off += t._offsets[-1]
    data = first._data
    with data.device if backend == "cuda" else _HOST:
        out = array_namespace(backend).empty((int(out_off[-1]),) + data.shape[1:], data.dtype)
        result = LoDTensor._from_trusted(out, first._offsets[:-1] + _freeze([out_off]),
                                         first._place)
        (_cuda if backend == "cuda" else _cpu)(out, ts, result)
    return result


def _outer_mismatch(k, j, a, b, levels):
    if a.shape != b.shape:
        where = f"it has {a.shape[0] - 1} sequences, input[0]'s {b.shape[0] - 1}"
    else:
        pos = int(np.argmax(a != b))
        where = f"first difference at position {pos} ({int(a[pos])} != {int(b[pos])})"
    return (f"sequence_concat: inputs with {levels} LoD levels must share their outer levels; "
            f"input[{k}]'s level {j} differs from input[0]'s: {where}")


def _cpu(out, ts, result):
    """One pass over the output: sequence i gathers every input's sequence i."""
    if out.size == 0:
        return
    out_off = result._offsets[-1]
    threads = threads_for(out.size)
    bounds = chunk_bounds(out_off, threads * 4) if threads > 1 else None
    seq_gather.concat_blocks(row_bytes(out), [row_bytes(t._data) for t in ts],
                             [t._offsets[-1] for t in ts], out_off, bounds, threads)


def _cuda(out, ts, result):
    if out.size == 0:
        return
    from lodarrow._cuda import gather

    level = len(result._offsets) - 1
    dst = row_bytes(out)
    cursor = result._device_offsets_for(level)[:-1].copy()
    for t in ts:
        gather.place_blocks(dst, row_bytes(t._data), t._device_offsets_for(level), cursor)
