"""Checks and helpers shared by the conversion hub's modules (docs/interop.md).

Every ``to_*`` takes a LoDTensor or a table and a column name; every ``from_*`` ends in
:func:`build`, which trusts offsets that it has checked itself (one O(levels x rows) pass).
"""

import numpy as np

from lodarrow._cupy import array_module, is_cupy_array
from lodarrow._interop._arrow import from_arrow
from lodarrow._ops import sequence_unpad
from lodarrow._tables._adapters import adapt
from lodarrow._tensor import LoDTensor, _freeze
from lodarrow._validation import check_choice, check_dtype

__all__ = ["INT32_MAX", "as_tensor", "build", "check_maxlen", "check_offsets",
           "check_pad_value", "exportable", "host_array", "host_offsets", "is_cupy", "parts",
           "rebase_levels", "unpad"]

INT32_MAX = int(np.iinfo(np.int32).max)


def check_maxlen(maxlen, fn):
    """None or a non-negative int (``TypeError`` / ``ValueError`` naming ``maxlen``)."""
    if maxlen is None:
        return None
    if isinstance(maxlen, bool) or not isinstance(maxlen, (int, np.integer)):
        raise TypeError(f"{fn}: maxlen must be an int or None, got {type(maxlen).__name__}")
    if maxlen < 0:
        raise ValueError(f"{fn}: maxlen must be >= 0, got {maxlen}")
    return int(maxlen)


def check_pad_value(pad_value, fn):
    """A number or an array of numbers (``TypeError`` naming ``pad_value`` otherwise)."""
    ok = isinstance(pad_value, (bool, int, float, np.generic, np.ndarray, list, tuple))
    if not ok and not hasattr(pad_value, "__array__"):
        raise TypeError(f"{fn}: pad_value must be a number or an array of numbers, got "
                        f"{type(pad_value).__name__}")
    return pad_value


def as_tensor(obj, column, fn, nulls="error"):
    """``obj`` as a LoDTensor: itself, or column ``column`` of a table (zero-copy for one chunk).

    A table is a pyarrow Table / RecordBatch, a pandas or polars DataFrame or an Arrow stream
    producer (the adapters of ``la.apply``); the column is read through
    :func:`lodarrow.from_arrow`, so no Python list is built.  A null list raises ``ValueError``
    naming the column and the table row (``nulls="empty"`` reads it as an empty sequence).
    """
    check_choice(nulls, f"{fn}: nulls", ("error", "empty"))
    if column is not None and not isinstance(column, str):
        raise TypeError(f"{fn}: column must be a str or None, got {type(column).__name__}")
    if isinstance(obj, LoDTensor):
        if column is not None:
            raise TypeError(f"{fn}: column={column!r} is for tables; a LoDTensor is converted "
                            f"as a whole (give a layout by keyword: layout=...)")
        return obj
    if column is None:
        raise TypeError(f"{fn}: obj must be a LoDTensor, or a table with column=NAME; got "
                        f"{type(obj).__name__}")
    data, _ = adapt(obj, fn).column(column, fn)
    try:
        return from_arrow(data, nulls=nulls)
    except (TypeError, ValueError) as exc:
        if type(exc) not in (TypeError, ValueError):
            raise
        raise type(exc)(f"{fn}: column {column!r}: {exc}") from None


def parts(t, fn):
    """``(data, offsets)`` of a LoDTensor whose LoD is valid and covers its rows."""
    if t._data is None:
        raise ValueError(f"{fn}: this LoDTensor is empty (no data has been set)")
    t._readable(fn)
    return t._data, t._offsets


def sequence_parts(obj, column, nulls, fn, plain_way):
    """``(t, data, offsets)`` of ``obj`` (see :func:`as_tensor`) for a layout of sequences:
    a tensor without LoD is a ``ValueError`` pointing to ``plain_way``, the target's own
    conversion of a plain array."""
    t = as_tensor(obj, column, fn, nulls)
    data, offsets = parts(t, fn)
    if not offsets:
        raise ValueError(f"{fn}: the tensor has no LoD level; use {plain_way} for a plain "
                         f"tensor")
    return t, data, offsets


def host_offsets(t, k):
    """Level ``k``'s offsets on the device of the data (CuPy data: cached device copy)."""
    return t._device_offsets_for(k) if is_cupy_array(t._data) else t._offsets[k]


def check_offsets(off, fn, what="offsets"):
    """A 1-D integer offsets array (NumPy) -> int64 (a copy only for other widths).

    ``ValueError`` unless it has at least one entry and never decreases; the first entry may
    be non-zero (a slice: see :func:`rebase_levels`).
    """
    off = np.asarray(off)
    if off.ndim != 1 or off.dtype.kind not in "iu":
        raise TypeError(f"{fn}: {what} must be a 1-D integer array, got dtype {off.dtype} and "
                        f"shape {off.shape}")
    if off.shape[0] == 0:
        raise ValueError(f"{fn}: {what} must hold at least one entry (the 0 that starts them)")
    off = off.astype(np.int64, copy=False)
    if off.shape[0] > 1:
        step = off[1:] < off[:-1]
        if step.any():
            i = int(np.argmax(step))
            raise ValueError(f"{fn}: {what} decrease at position {i + 1} "
                             f"({int(off[i])} -> {int(off[i + 1])})")
    if int(off[0]) < 0:
        raise ValueError(f"{fn}: {what} start at {int(off[0])} < 0")
    return off


def rebase_levels(levels, n_rows, fn):
    """Cut checked offset levels (outermost first) to the rows they cover and rebase to 0.

    Returns ``(levels, lo, hi)``: offsets that start at 0 (a copy only for a level that did
    not, i.e. a slice), and the row range ``[lo, hi)`` of the data that they cover.  Level
    ``k + 1`` is first cut to ``[levels[k][0], levels[k][-1]]``; ``ValueError`` if a level
    points past the entries of the next one (or past ``n_rows`` rows for the last).
    """
    out = []
    lo, hi = None, None
    for k, off in enumerate(levels):
        size = int(off.shape[0]) - 1
        if lo is not None:
            if hi > size:
                raise ValueError(f"{fn}: level {k - 1} ends at {hi} but level {k} has only "
                                 f"{size} sequences")
            off = off[lo:hi + 1]
        a, b = int(off[0]), int(off[-1])
        out.append(off - a if a else off)
        lo, hi = a, b
    if lo is None:
        return out, 0, n_rows
    if hi > n_rows:
        raise ValueError(f"{fn}: the last offsets level ends at {hi} but the values have only "
                         f"{n_rows} rows")
    return out, lo, hi


def build(data, levels, fn, place=None):
    """A LoDTensor over ``data`` (NumPy or CuPy) and offset levels checked by the caller.

    ``levels`` are int64 NumPy offsets that start at 0 and never decrease (see
    :func:`check_offsets` / :func:`rebase_levels`); the data rows must match the last.
    """
    check_dtype(data.dtype, fn)
    if data.ndim == 0:
        raise ValueError(f"{fn}: the values must have rank >= 1 (rows first), got a scalar")
    if levels and int(levels[-1][-1]) != data.shape[0]:
        raise ValueError(f"{fn}: the offsets end at {int(levels[-1][-1])} but the values have "
                         f"{data.shape[0]} rows")
    return LoDTensor._from_trusted(data, _freeze(levels), place)


def host_array(x, fn):
    """A NumPy array of ``x`` (NumPy, CuPy or anything with ``__array__``) for offsets."""
    if is_cupy_array(x):
        return x.get()
    return np.asarray(x)


class _Alias:
    """An ``__array_interface__`` over another array's memory, marked writable.

    NumPy refuses to export a read-only array through DLPack (older DLPack versions cannot
    signal read-only), and LoD offsets and Arrow buffers are read-only.  JAX and TensorFlow
    only take DLPack, so they get this alias of the same memory; ``base`` keeps the original
    alive as long as the alias (and the tensor made from it) lives.  docs/interop.md#copies
    states the rule that follows: do not write into a converted tensor in place.
    """

    __slots__ = ("__array_interface__", "base")

    def __init__(self, array):
        spec = dict(array.__array_interface__)
        spec["data"] = (spec["data"][0], False)
        self.__array_interface__ = spec
        self.base = array


def exportable(array):
    """``array`` itself if DLPack can export it, else a writable alias of its memory."""
    if is_cupy(array) or array.flags.writeable:
        return array
    return np.asarray(_Alias(array))


def is_cupy(array):
    return is_cupy_array(array)


def unpad(values, lens, outer, fn):
    """The LoDTensor of padded ``values`` (N, P, ...) with ``lens`` per row, under the checked
    offset levels ``outer`` (possibly a slice of a larger LoD: rebased, and the rows they cover
    taken): what every ``from_*(..., layout="padded")`` ends in."""
    if outer:
        outer, lo, hi = rebase_levels(outer, values.shape[0], fn)
        values, lens = values[lo:hi], lens[lo:hi]
    if is_cupy_array(values):  # lengths read on the host go beside GPU values (DLPack'd)
        lens = array_module(values).asarray(lens)
    out = sequence_unpad(LoDTensor(values, lod=outer or None), lens)
    if values.ndim == 2:  # Paddle's unpad gives (T, 1) for (N, P): rows were scalars
        return build(out._data.reshape(-1), list(out._offsets), fn)
    return out
