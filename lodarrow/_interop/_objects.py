"""Python objects to Arrow: the cells of an object column (pandas ``object`` dtype, lists of
lists, lists of NumPy arrays) as one Arrow list array, for ``from_pandas`` and the tables'
writers alike."""

import numpy as np
import pyarrow as pa

__all__ = ["objects_to_arrow"]

_INT32_MAX = np.iinfo(np.int32).max


def _is_missing(v):
    return v is None or (isinstance(v, float) and v != v)


def _is_scalar(v):
    return isinstance(v, (bool, int, float, np.generic)) and not isinstance(v, np.ndarray)


def _arrow_type_of(v):
    try:
        return pa.array([v]).type
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError):
        return type(v).__name__


def _is_sequence(v):
    return isinstance(v, (list, tuple, np.ndarray))


def objects_to_arrow(items, name, fn):
    """An object array of per-row sequences as an Arrow list array (``List`` offsets).

    What ``pd.read_parquet`` returns by default, or what a user builds: each item is a
    sequence -- a Python list / tuple, a 1-D NumPy array (object arrays nest further), or a
    numeric NumPy array of rank >= 2 whose trailing axes are feature dimensions
    (``FixedSizeList``) -- or ``None`` / NaN for a null row.  Every nesting of lists or 1-D
    arrays is one list level; values are the leaves (Python ints give int64, floats float64;
    NumPy arrays keep their dtype).  A missing item below the top level is a ``ValueError``
    naming the column, the row and the level.
    """
    n = items.shape[0]
    valid = np.fromiter((not _is_missing(v) for v in items), dtype=np.bool_, count=n)
    cells = list(items[valid]) if not valid.all() else list(items)
    rows = np.flatnonzero(valid)
    arr = _level(cells, rows, 0, name, fn)
    if valid.all():
        return arr
    # spread the valid rows back over all rows, nulls as empty null slots (List offsets)
    lengths = np.zeros(n, dtype=np.int64)
    offs = np.asarray(arr.offsets).astype(np.int64)
    lengths[valid] = np.diff(offs)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    mask = pa.array(~valid)
    offsets_arr = pa.array(offsets.astype(np.int32) if offsets[-1] <= _INT32_MAX else offsets)
    make = pa.ListArray if offsets_arr.type == pa.int32() else pa.LargeListArray
    return make.from_arrays(offsets_arr, arr.values, mask=mask)


def _level(cells, rows, depth, name, fn):
    """One list level over ``cells`` (each a non-missing sequence of table row ``rows[i]``)."""
    if cells and all(isinstance(c, np.ndarray) and c.ndim >= 1 and c.dtype != object
                     for c in cells):
        return _dense_level(cells, rows, depth, name, fn)
    lengths = np.empty(len(cells), dtype=np.int64)
    children = []
    for i, c in enumerate(cells):
        if isinstance(c, (list, tuple)) or (isinstance(c, np.ndarray) and c.ndim == 1):
            lengths[i] = len(c)
            children.extend(c)
        elif isinstance(c, np.ndarray) and c.ndim > 1:  # object array of rank >= 2
            lengths[i] = c.shape[0]
            children.extend(c)
        else:
            raise TypeError(f"{fn}: column {name!r}, row {int(rows[i])}: the items at level "
                            f"{depth} must be sequences, got items of Arrow type "
                            f"{_arrow_type_of(c)} (expected a list or NumPy array)")
    child_rows = np.repeat(rows, lengths)
    offsets = np.zeros(len(cells) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    missing = [j for j, v in enumerate(children) if v is None]  # NaN values stay NaN
    if missing:
        j = missing[0]
        raise ValueError(f"{fn}: column {name!r} has a null inside row {int(child_rows[j])} at "
                         f"level {depth + 1}; only whole rows may be null (fill or drop the "
                         f"null values first)")
    other = next((v for v in children if not (_is_scalar(v) or _is_sequence(v))), None)
    if other is not None:
        raise TypeError(f"{fn}: column {name!r}: the values at level {depth + 1} are not "
                        f"numeric (values of Arrow type {_arrow_type_of(other)} are not "
                        f"supported)")
    if not children:
        values = pa.array([], type=pa.float64())
    elif all(_is_scalar(v) for v in children):
        try:
            values = pa.array(children)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise TypeError(f"{fn}: column {name!r}: the values at level {depth + 1} are not "
                            f"numeric ({exc})") from None
    elif any(_is_scalar(v) for v in children):
        j = next(j for j, v in enumerate(children) if _is_scalar(v))
        raise TypeError(f"{fn}: column {name!r}, row {int(child_rows[j])}: level {depth + 1} "
                        f"mixes values and sequences")
    else:
        values = _level(children, child_rows, depth + 1, name, fn)
    return _wrap(offsets, values)


def _dense_level(cells, rows, depth, name, fn):
    """Numeric ndarrays of shape ``(length, *feature_shape)``: one level over their rows."""
    first = cells[0]
    for i, c in enumerate(cells):
        if c.shape[1:] != first.shape[1:]:
            raise ValueError(f"{fn}: column {name!r}, row {int(rows[i])}: an array of shape "
                             f"{c.shape} at level {depth}, but row {int(rows[0])} has rows of "
                             f"shape {first.shape[1:]}; every row needs the same feature shape")
        if c.dtype != first.dtype:
            raise ValueError(f"{fn}: column {name!r}, row {int(rows[i])}: dtype {c.dtype} at "
                             f"level {depth}, but row {int(rows[0])} has {first.dtype}; every "
                             f"row needs the same dtype")
    lengths = np.fromiter((c.shape[0] for c in cells), dtype=np.int64, count=len(cells))
    offsets = np.zeros(len(cells) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    data = np.concatenate(cells)
    try:
        values = pa.array(data.reshape(-1))
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
        raise TypeError(f"{fn}: column {name!r}: values of dtype {data.dtype} are not "
                        f"supported ({exc})") from None
    for size in reversed(data.shape[1:]):
        values = pa.FixedSizeListArray.from_arrays(values, size)
    return _wrap(offsets, values)


def _wrap(offsets, values):
    if offsets[-1] <= _INT32_MAX:
        return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), values)
    return pa.LargeListArray.from_arrays(pa.array(offsets), values)
