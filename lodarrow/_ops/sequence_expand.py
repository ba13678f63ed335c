"""``sequence_expand``: repeat rows or sequences of ``x`` as a level of ``y`` says.

Semantics, edge cases, errors and departures from Paddle: docs/operators.md#sequence_expand.
"""

import numpy as np

from lodarrow._backends import backend_of, row_bytes
from lodarrow._errors import LoDError
from lodarrow._ops._common import as_lod_tensor, composed_offsets, require_lod_levels
from lodarrow._ops._contract import TableContract
from lodarrow._ops._out import into, landed
from lodarrow._plan import expand_lod
from lodarrow._tensor import LoDTensor, _freeze
from lodarrow._validation import as_int

__all__ = ["sequence_expand"]


def sequence_expand(x, y, ref_level=-1, name=None, *, out=None):
    """Repeat each row (or sequence) of ``x`` as many times as ``y``'s level ``ref_level`` says.

    Let ``r[i]`` be the lengths of ``y``'s level ``ref_level`` (``n`` sequences).

    * ``x`` without LoD (``n`` rows): row ``i`` is repeated ``r[i]`` times; the output has
      **no LoD**, even when ``y`` has several levels.
    * ``x`` with one LoD level (``n`` sequences): sequence ``i`` is repeated whole ``r[i]``
      times; the output has one level with ``r[i]`` entries ``len(x seq i)`` for each ``i``
      (``r[i] == 0`` adds nothing; an empty ``x`` sequence adds ``r[i]`` empty ones).

    Parameters
    ----------
    x : LoDTensor, array_like or Arrow array
        The data, of any dtype and rank >= 1 (trailing axes are kept), with 0 or 1 LoD level.
    y : LoDTensor or Arrow array
        Gives the repeat counts; it needs at least one LoD level.  Its data is not read.
    ref_level : int, default -1
        The level of ``y`` to follow, in ``[0, y.lod_level)``; -1 means the last.
    name : str, optional
        Accepted for Paddle compatibility and ignored.
    out : numpy.ndarray or cupy.ndarray, optional
        Keyword-only: a preallocated array that receives the result's data (exactly its shape
        and dtype, on the input's device, C-contiguous, writable)
        (docs/operators.md#out-writing-into-a-preallocated-array).

    Returns
    -------
    LoDTensor
        ``sum(r[i] * len(x seq i))`` rows of ``x``'s dtype and feature shape, on ``x``'s place.

    Raises
    ------
    LoDError
        If ``x`` has more than one LoD level, ``y`` has none, or ``x``'s rows (no LoD) or
        sequences (one level) do not match ``y``'s level ``ref_level``.
    ValueError
        If ``ref_level`` is out of range, or ``x`` and ``y`` live on different devices.
    TypeError
        If ``ref_level`` is not an integer.

    See Also
    --------
    sequence_expand_as : Repeat row ``i`` of ``x`` as many times as ``y``'s sequence ``i`` is long.
    lodarrow.torch.sequence_expand : The same operator on torch tensors, differentiable.

    Examples
    --------
    Paddle's case 1 (repeat whole sequences by ``y``'s level 0) and case 2 (repeat rows):

    >>> import numpy as np, lodarrow as la
    >>> x = la.create_lod_tensor(np.array([[1], [2], [3], [4]], np.float32), [[2, 2]],
    ...                          la.CPUPlace())
    >>> y = la.create_lod_tensor(np.arange(1, 9, dtype=np.float32).reshape(8, 1),
    ...                          [[2, 2], [3, 3, 1, 1]], la.CPUPlace())
    >>> print(la.sequence_expand(x, y, ref_level=0))
    - lod: {{0, 2, 4, 6, 8}}
    - place: Place(cpu)
    - shape: [8, 1]
    - layout: NCHW
    - dtype: float32
    - data: [1 2 1 2 3 4 3 4]
    >>> x = la.LoDTensor(np.array([[1.0], [2.0], [3.0]]))
    >>> y = la.LoDTensor(np.zeros((5, 1)), lengths=[[2, 0, 3]])
    >>> out = la.sequence_expand(x, y)
    >>> out.numpy().ravel().tolist(), out.lod()
    ([1.0, 1.0, 3.0, 3.0, 3.0], [])
    """
    x = as_lod_tensor(x, "x")
    y = as_lod_tensor(y, "y")
    be = backend_of("sequence_expand", x=x.data, y=y.data)
    require_lod_levels(x, "x", "sequence_expand", (0, 1))
    levels = y.lod_level
    if not levels:
        raise LoDError("sequence_expand: y must have at least 1 LoD level, got 0")
    ref_level = as_int(ref_level, "ref_level")
    if not (ref_level == -1 or 0 <= ref_level < levels):
        raise ValueError(f"sequence_expand: ref_level must be -1 or in [0, {levels}) for a y "
                         f"with {levels} LoD level(s), got {ref_level}")
    if ref_level == -1:
        ref_level = levels - 1
    ref = y.offsets[ref_level]
    n = ref.shape[0] - 1
    data = x.data
    if not x.lod_level:
        # Row i of x repeated len(y seq i) times; the output has no LoD.
        if data.shape[0] != n:
            raise LoDError(f"sequence_expand: x has no LoD, so it needs one row per sequence "
                           f"of y's level {ref_level} ({n}), got {data.shape[0]} rows")
        shape = (int(ref[-1]),) + data.shape[1:]
        with be.device(data):
            res = (be.empty(shape, data.dtype) if out is None
                   else into(out, "sequence_expand", shape, data.dtype, be, data, (data,)))
            be.kernel("expand_rows")(row_bytes(res), row_bytes(data), be.offsets(y, ref_level))
        if out is not None:
            res = landed(res, out)
        return x._derive(res, ())
    # Sequence i of x repeated whole len(y seq i) times.
    x_off = x.offsets[0]
    if x_off.shape[0] - 1 != n:
        raise LoDError(f"sequence_expand: x has {x_off.shape[0] - 1} sequences but y's level "
                       f"{ref_level} has {n}; they must match")
    out_lod = np.empty(int(ref[-1]) + 1, dtype=np.int64)
    expand_lod(x_off, ref, out_lod)
    shape = (int(out_lod[-1]),) + data.shape[1:]
    with be.device(data):
        res = (be.empty(shape, data.dtype) if out is None
               else into(out, "sequence_expand", shape, data.dtype, be, data, (data,)))
        result = x._derive(res, _freeze([out_lod]))
        be.kernel("expand_blocks")(row_bytes(res), row_bytes(data), be.offsets(x, 0),
                                   be.offsets(y, ref_level), be.offsets(result, 0))
    if out is not None and res is not out:
        result = x._derive(landed(res, out), result.offsets)
    return result


def _check_literals(args):
    if "ref_level" in args:
        as_int(args["ref_level"], "ref_level")


def _broadcast(i, result, call, columns, fn):
    """The table form of a ``y`` column: row ``i`` of ``x`` repeated within row ``i`` of
    ``y``; a result with several top-level sequences per table row is an error (the table
    engine names the row)."""
    if "y" not in columns:
        return result
    x, y = call["x"], call["y"]
    ref_level = call.get("ref_level", -1)
    ref = y.lod_level - 1 if ref_level == -1 else ref_level
    if ref > 0:
        per_row = np.diff(composed_offsets(y, ref))
        if per_row.size and not np.all(per_row == 1):
            r = int(np.argmax(per_row != 1))
            raise ValueError(f"{fn}: sequence_expand with ref_level={ref_level} repeats within "
                             f"{int(per_row[r])} sequences of level {ref} of one table row; "
                             f"in table form each row needs exactly one (use ref_level=0)")
    offsets = np.asarray(y.offsets[ref])
    if x.lod_level == 0:
        # Paddle's result has no LoD: row i's copies are the ref level's sequence i.
        return LoDTensor._from_trusted(result.data, (offsets,), result.place)
    lengths = np.diff(offsets)
    if lengths.size and not np.all(lengths == 1):
        r = int(np.argmax(lengths != 1))
        raise ValueError(f"{fn}: sequence_expand repeats x's sequence {int(lengths[r])} times "
                         f"within one table row, giving {int(lengths[r])} top-level sequences "
                         f"for it; in table form a result needs one sequence per table row")
    return result


#: The table form (docs/tables.md).
TABLE = {"sequence_expand": TableContract(("x", "y"), check=_check_literals,
                                          fixup=_broadcast)}
