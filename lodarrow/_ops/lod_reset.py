"""``lod_reset``: the same data under a new LoD (OPS.md section 1, departures 3, 7, 13)."""

import numpy as np

from lodarrow._backend import backend_of, is_cupy_array
from lodarrow._errors import LoDError
from lodarrow._ops._common import as_lod_tensor
from lodarrow._tensor import LoDTensor, _freeze
from lodarrow._validation import as_index_array, lod_problem

__all__ = ["lod_reset"]

_SHOWN = 8  # offsets quoted in an error message before it abbreviates


class _ArgumentError(TypeError, ValueError):
    """A missing or unusable argument: ``TypeError`` as the seed documents, and the
    ``ValueError`` Paddle's Python layer raises."""


def lod_reset(x, y=None, target_lod=None, name=None):
    """Give the rows of ``x`` a new LoD, taken from ``y`` or ``target_lod``.

    The output **shares x's data** (no copy; Paddle copies): only the LoD is new.

    Parameters
    ----------
    x : LoDTensor, array_like or Arrow array
        The data, with any number of LoD levels (they are all replaced).
    y : LoDTensor, array_like or Arrow array, optional
        With a LoD: the output takes ``y``'s whole LoD (every level; ``y``'s data is
        ignored) and its last level must end at ``x``'s row count.  Without a LoD: ``y``'s
        data, of any integer dtype and any shape, read flat, is one level of offsets.
        ``y`` takes priority over ``target_lod``.
    target_lod : sequence of int, optional
        One level of offsets (not lengths), flat, of any integer dtype.
    name : str, optional
        Accepted for Paddle compatibility and ignored.

    Returns
    -------
    LoDTensor
        ``x``'s data (the same array) with the new LoD, on ``x``'s place.

    Raises
    ------
    TypeError
        If both ``y`` and ``target_lod`` are None (also a ``ValueError``, as Paddle's), or
        the offsets are not integers.
    LoDError
        If the new level is empty, does not start at 0 (the message suggests the offsets the
        values would make if they were lengths), decreases, or does not end at ``x``'s row
        count; or if ``y``'s LoD does not end at ``x``'s row count.
    ValueError
        If ``x`` and ``y`` live on different devices.

    Examples
    --------
    The seed's examples, with the offsets the operator really takes:

    >>> import numpy as np, lodarrow as la
    >>> x = la.create_lod_tensor(np.arange(1, 7, dtype=np.float32).reshape(6, 1),
    ...                          [[2, 3, 1]], la.CPUPlace())
    >>> la.lod_reset(x, target_lod=[0, 4, 6]).lod()
    [[0, 4, 6]]
    >>> la.lod_reset(x, y=np.array([0, 2, 6], dtype=np.int32)).lod()
    [[0, 2, 6]]
    >>> y = la.create_lod_tensor(np.ones((6, 1), np.float32), [[2, 2], [2, 2, 1, 1]],
    ...                          la.CPUPlace())
    >>> la.lod_reset(x, y=y).lod()
    [[0, 2, 4], [0, 2, 4, 5, 6]]
    """
    x = as_lod_tensor(x, "x")
    rows = x._data.shape[0]
    if y is not None:
        y_t = _as_tensor_or_array(y, "y")
        backend_of("lod_reset", x=x, y=y_t)
        if isinstance(y_t, LoDTensor) and y_t._offsets:
            _check_ends_at_rows(y_t, rows, "lod_reset", "y")
            return LoDTensor._from_trusted(x._data, y_t._offsets, x._place)
        level = _flat_offsets(y_t, "y", "lod_reset")
    elif target_lod is not None:
        level = _flat_offsets(target_lod, "target_lod", "lod_reset", flat_only=True)
    else:
        raise _ArgumentError("lod_reset: y and target_lod should not be both none; give y (a "
                             "LoDTensor, or offsets as a tensor) or target_lod (offsets)")
    check_new_level(level, rows, "target_lod" if y is None else "y", "lod_reset")
    return LoDTensor._from_trusted(x._data, _freeze([level]), x._place)


def _as_tensor_or_array(obj, name):
    """A LoDTensor (possibly with a LoD) or a bare NumPy/CuPy array, as given."""
    if isinstance(obj, LoDTensor):
        obj._check_valid(name)
        return obj
    if isinstance(obj, np.ndarray) or is_cupy_array(obj):
        return obj
    if isinstance(obj, (list, tuple)):
        return np.asarray(obj)
    return as_lod_tensor(obj, name)


def _check_ends_at_rows(t, rows, op, name):
    end = int(t._offsets[-1][-1])
    if end != rows:
        raise LoDError(f"{op}: {name}'s LoD (last level) ends at {end} but x has {rows} rows; "
                       f"the new LoD must cover x's rows exactly")


def _flat_offsets(obj, name, op, flat_only=False):
    """One level of offsets from a list, array or LoDTensor data, as a private int64 array.

    ``flat_only``: a list or array argument must be 1-D (``target_lod``, ``level``); tensor
    data is read flat whatever its shape, as Paddle's operator reads ``Y``.
    """
    src = obj._data if isinstance(obj, LoDTensor) else obj
    if is_cupy_array(src):
        src = src.get()  # offsets live on the host
    elif not isinstance(src, np.ndarray):
        try:
            src = np.asarray(src)
        except (ValueError, TypeError):  # ragged nesting
            raise ValueError(f"{op}: {name} must be a flat sequence of integer offsets") from None
    empty_list = src.size == 0 and src.dtype == np.float64 and not isinstance(obj, np.ndarray)
    if src.dtype == object or (src.dtype.kind not in "iu" and not empty_list):
        kind = ("a flat sequence of integer offsets" if flat_only
                else "an integer tensor of offsets")
        raise TypeError(f"{op}: {name} must be {kind}, got dtype {src.dtype}")
    if empty_list:
        src = src.astype(np.int64)
    if flat_only and src.ndim != 1:
        raise ValueError(f"{op}: {name} must be flat (1-D offsets), got shape {src.shape}")
    level = as_index_array(src.reshape(-1), name)
    if np.may_share_memory(level, src):
        level = level.copy()  # never hold a caller's array as our (frozen) LoD
    return level


def _show(values):
    items = [str(v) for v in values[:_SHOWN].tolist()]
    if values.shape[0] > _SHOWN:
        items.append("...")
    return "[" + ", ".join(items) + "]"


def check_new_level(level, rows, name, op):
    """Raise ``LoDError`` unless ``level`` is valid offsets ending at ``rows``.

    A level that does not start at 0 usually means lengths were passed (Paddle's own
    docstrings show lengths); the message then suggests the offsets they would make.
    """
    if level.shape[0] == 0:
        raise LoDError(f"{op}: {name} is empty; a LoD level is offsets starting at 0, "
                       f"e.g. [0, {rows}] for one sequence of all {rows} rows")
    if level[0] != 0:
        hint = ""
        if level.min() >= 0:
            suggested = np.concatenate([[0], np.cumsum(level)])
            hint = (f"; if these are sequence lengths, pass the offsets they make: "
                    f"{_show(suggested)}")
        raise LoDError(f"{op}: {name} must be offsets starting at 0 (not lengths), got "
                       f"{_show(level)} starting at {int(level[0])}{hint}")
    problem = lod_problem([level], rows, name)
    if problem is not None:
        problem = problem.replace(f"{name}[0] (the last level)", name)
        problem = problem.replace(f"{name}[0]", name).replace("the data has", "x has")
        raise LoDError(f"{op}: {problem}")
