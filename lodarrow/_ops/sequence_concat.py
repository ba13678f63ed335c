"""``sequence_concat``: join the i-th sequences of several inputs.

Semantics, edge cases, errors and departures from Paddle: docs/operators.md#sequence_concat.
"""

import numpy as np

from lodarrow._backends import backend_of, row_bytes
from lodarrow._errors import LoDError
from lodarrow._ops._common import as_lod_tensor
from lodarrow._ops._contract import TableContract
from lodarrow._ops._out import into, landed
from lodarrow._tensor import _freeze

__all__ = ["sequence_concat"]


def sequence_concat(input, name=None, *, out=None):
    """Concatenate several LoDTensors sequence by sequence.

    Output sequence ``i`` is input 0's sequence ``i``, then input 1's sequence ``i``, and so
    on.

    Parameters
    ----------
    input : list or tuple of LoDTensor (or Arrow arrays)
        One or more tensors (a single one gives a copy) with the same dtype, the same feature
        shape and the same number of last-level sequences.  Each has one LoD level, or
        several levels whose outer levels are identical across the inputs (they are kept).
    name : str, optional
        Accepted for Paddle compatibility and ignored.
    out : numpy.ndarray or cupy.ndarray, optional
        Keyword-only: a preallocated array that receives the result's data (exactly its shape
        and dtype, on the input's device, C-contiguous, writable)
        (docs/operators.md#out-writing-into-a-preallocated-array).

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

    See Also
    --------
    lodarrow.torch.sequence_concat : The same operator on torch tensors, differentiable.

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
    be = backend_of("sequence_concat", **{f"input[{k}]": t.data for k, t in enumerate(ts)})
    first = ts[0]
    levels = first.lod_level
    dtype, fshape = first.data.dtype, first.data.shape[1:]
    for k, t in enumerate(ts):
        if not t.lod_level:
            raise LoDError(f"sequence_concat: input[{k}] has no LoD; every input needs at "
                           f"least 1 LoD level")
        if t.lod_level != levels:
            raise LoDError(f"sequence_concat: input[{k}] has {t.lod_level} LoD levels but "
                           f"input[0] has {levels}; all inputs need the same level count")
        if t.data.dtype != dtype:
            raise TypeError(f"sequence_concat: input[{k}] has dtype {t.data.dtype} but "
                            f"input[0] has {dtype}; all inputs need one dtype")
        if t.data.shape[1:] != fshape:
            raise ValueError(f"sequence_concat: input[{k}] has feature shape "
                             f"{tuple(t.data.shape[1:])} but input[0] has "
                             f"{tuple(fshape)}; they must match")
        for j in range(levels - 1):
            a, b = t.offsets[j], first.offsets[j]
            if not np.array_equal(a, b):
                raise LoDError(_outer_mismatch(k, j, a, b, levels))
        n_k, n_0 = t.offsets[-1].shape[0] - 1, first.offsets[-1].shape[0] - 1
        if n_k != n_0:
            raise ValueError(f"sequence_concat: input[{k}] has {n_k} sequences but input[0] "
                             f"has {n_0}; all inputs need the same number of sequences")
    # Summing offsets sums lengths: out_off[i] = sum_k off_k[i].
    out_off = first.offsets[-1].copy()
    for t in ts[1:]:
        out_off += t.offsets[-1]
    last = levels - 1
    shape = (int(out_off[-1]),) + fshape
    with be.device(first.data):
        res = (be.empty(shape, dtype) if out is None
               else into(out, "sequence_concat", shape, dtype, be, first.data,
                         [t.data for t in ts]))
        result = first._derive(res, first.offsets[:-1] + _freeze([out_off]))
        be.kernel("concat")(row_bytes(res), [row_bytes(t.data) for t in ts],
                            [be.offsets(t, last) for t in ts], be.offsets(result, last))
    if out is not None and res is not out:
        result = first._derive(landed(res, out), result.offsets)
    return result


def _outer_mismatch(k, j, a, b, levels):
    if a.shape != b.shape:
        where = f"it has {a.shape[0] - 1} sequences, input[0]'s {b.shape[0] - 1}"
    else:
        pos = int(np.argmax(a != b))
        where = f"first difference at position {pos} ({int(a[pos])} != {int(b[pos])})"
    return (f"sequence_concat: inputs with {levels} LoD levels must share their outer levels; "
            f"input[{k}]'s level {j} differs from input[0]'s: {where}")

#: The table form (docs/tables.md).
TABLE = {"sequence_concat": TableContract(("input",))}
