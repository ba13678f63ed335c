"""Boundary checks shared by the tensor and every operator.

Kernels trust their inputs; everything they rely on is checked here first, and each failure
names the argument, the level and the first offending position.
"""

import operator
import os

import numpy as np

from lodarrow._threads import threads_for
from lodarrow._errors import LoDError, _NegativeLoDError
from lodarrow._ext import lod_utils

__all__ = [
    "SUPPORTED_DTYPES",
    "check_dtype",
    "as_index_array",
    "as_offsets",
    "as_lod",
    "first_bad_offset",
    "lengths_to_offsets",
    "offsets_to_lengths",
    "check_lod",
    "lod_problem",
    "coerce_pad_value",
    "as_int",
    "as_flag",
    "check_choice",
    "check_path",
]

#: The dtypes a LoDTensor may hold (docs/data-model.md#dtypes).
SUPPORTED_DTYPES = tuple(
    np.dtype(t)
    for t in ("bool", "int8", "uint8", "int16", "uint16", "int32", "int64",
              "float16", "float32", "float64")
)
_INT64_MAX = np.iinfo(np.int64).max


def check_dtype(dtype, name="data"):
    """Return ``dtype`` as a ``np.dtype`` if lodarrow supports it, else raise ``TypeError``."""
    dtype = np.dtype(dtype)
    if dtype not in SUPPORTED_DTYPES:
        supported = ", ".join(str(d) for d in SUPPORTED_DTYPES)
        raise TypeError(f"{name}: dtype {dtype} is not supported (expected one of {supported})")
    return dtype


def as_int(value, name):
    """``operator.index(value)`` with a ``TypeError`` that names the argument."""
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}") from None


def as_positive_int(value, name):
    """``value`` as an integer >= 1: a bool is a ``TypeError``, a smaller integer a
    ``ValueError``; both name the argument."""
    return _at_least(value, name, 1)


def as_nonnegative_int(value, name):
    """``value`` as an integer >= 0, checked as :func:`as_positive_int` checks."""
    return _at_least(value, name, 0)


def _at_least(value, name, least):
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be an integer, got bool")
    value = as_int(value, name)
    if value < least:
        raise ValueError(f"{name} must be >= {least}, got {value}")
    return value


def as_flag(value, name):
    """``value`` as a bool: True, False (or NumPy's bools); anything else is a ``TypeError``."""
    if value is False or value is True:  # the common case, two pointer compares
        return value
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TypeError(f"{name} must be True or False, got {type(value).__name__}")


def check_choice(value, name, choices):
    """Return ``value`` if it is one of the strings ``choices``.

    A non-string is a ``TypeError``, an unknown string a ``ValueError``; both list the choices.
    """
    if value.__class__ is str and value in choices:  # the common case: no message to build
        return value
    shown = " or ".join(repr(c) for c in choices)
    if not isinstance(value, str):
        raise TypeError(f"{name} must be {shown}, got {type(value).__name__}")
    if value not in choices:
        raise ValueError(f"{name} must be {shown}, got {value!r}")
    return value


def check_path(path, name):
    """Raise ``TypeError`` unless ``path`` is a str, a path-like or a file-like object."""
    if isinstance(path, (str, os.PathLike)) or hasattr(path, "read") or hasattr(path, "write"):
        return path
    raise TypeError(f"{name} must be a file path (str or os.PathLike) or a file-like object, "
                    f"got {type(path).__name__}")


def _int64_array(obj, name, *, column_ok, keep_shape=False, xp=np, overflow_error=ValueError):
    """``obj`` as a C-contiguous int64 array: the one place integer arguments are checked.

    Any integer input dtype (unsigned too); floats and bools are a ``TypeError`` even when
    integral, ragged or non-numeric sequences a ``TypeError``, values beyond int64
    ``overflow_error``.  Unless ``keep_shape``, the result is 1-D (``column_ok`` also accepts
    ``(n, 1)`` columns, Paddle's ``[n, 1]`` index tensors, and flattens them).
    """
    is_array = hasattr(obj, "dtype") and hasattr(obj, "shape")
    if is_array:
        arr = obj
    else:
        try:
            arr = np.asarray(obj)
        except (ValueError, TypeError):  # ragged or non-numeric
            raise TypeError(f"{name} must be a flat sequence of integers") from None
        if arr.dtype == object:
            _raise_if_too_large(arr, name, overflow_error)
            raise TypeError(f"{name} must be a flat sequence of integers")
    if arr.dtype.kind not in "iu":
        if arr.size == 0 and not is_array:
            arr = arr.astype(np.int64)  # [] from a Python list
        else:
            raise TypeError(f"{name} must hold integers, got dtype {arr.dtype}")
    if not keep_shape:
        if column_ok and arr.ndim == 2 and arr.shape[1] == 1:
            arr = arr.reshape(-1)
        elif arr.ndim != 1:
            also = " (or of shape (n, 1))" if column_ok else ""
            raise ValueError(f"{name} must be 1-D{also}, got shape {tuple(arr.shape)}")
    if arr.dtype == np.uint64 and arr.size and int(arr.max()) > _INT64_MAX:
        pos = int(xp.argmax(arr > _INT64_MAX))
        raise overflow_error(f"{name}: value {int(arr[pos])} at position {pos} does not fit "
                             f"int64")
    return xp.ascontiguousarray(arr, dtype=np.int64)


def _raise_if_too_large(arr, name, overflow_error):
    """Name the first Python int beyond int64 in a 1-D object array (NumPy's reason for it)."""
    if arr.ndim != 1:
        return
    for pos, value in enumerate(arr.tolist()):
        if isinstance(value, int) and not isinstance(value, bool) and not (
                -_INT64_MAX - 1 <= value <= _INT64_MAX):
            raise overflow_error(f"{name}: value {value} at position {pos} is too large for "
                                 f"int64 (offsets and lengths are int64)")


def as_index_array(obj, name, *, ndim=1, xp=np):
    """Return ``obj`` as a C-contiguous int64 array of any integer input dtype (unsigned too).

    Floats and bools are a ``TypeError`` even when integral; values beyond int64 a ``ValueError``.
    ``ndim=1`` also accepts ``(n, 1)`` column vectors (Paddle's ``[n, 1]`` index tensors) and
    flattens them; ``ndim=None`` keeps the shape.
    """
    return _int64_array(obj, name, column_ok=True, keep_shape=ndim != 1, xp=xp)


def as_offsets(obj, name="lod", level=0):
    """Return one LoD level as a host int64 array (1-D); type, sign and range checked."""
    arr = _int_level(_on_host(obj), name, level)
    _check_negative(arr, name, level)
    return arr


def as_lod(lod, n_rows, name="lod"):
    """Every level of ``lod`` as host int64 offsets, checked as a LoD for ``n_rows`` rows.

    The same checks, in the same order, as :func:`as_offsets` on each level and then
    :func:`check_lod`, with one scan per level: a level that starts at 0 and never decreases
    holds no negative value, so the sign is only looked at (for its own message) when the
    scan finds a problem.
    """
    levels, bad = [], []
    for k, level in enumerate(_levels(lod, name)):
        arr = _int_level(_on_host(level), name, k)
        first = first_bad_offset(arr)
        if first >= 0:
            _check_negative(arr, name, k)
        levels.append(arr)
        bad.append(first)
    check_lod(levels, n_rows, name, bad)
    return levels


def _on_host(obj):
    if hasattr(obj, "__cuda_array_interface__") and not isinstance(obj, np.ndarray):
        return obj.get()  # offsets live on the host
    return obj


def _check_negative(arr, name, level):
    if arr.size and arr.min() < 0:
        pos = int(np.argmax(arr < 0))
        raise _NegativeLoDError(
            f"invalid LoD: {name}[{level}] has a negative value {int(arr[pos])} at position {pos}"
        )


def first_bad_offset(off):
    """The first position of int64 ``off`` that breaks "starts at 0, non-decreasing", or -1.

    Position 0 also stands for an empty array.  One vectorised scan, on both cores when the
    array is large (``PARALLEL_MIN_WORK``).
    """
    return lod_utils.first_bad_offset(off, threads_for(off.shape[0]))


def _levels(lod, name):
    if isinstance(lod, np.ndarray) and lod.ndim == 2:
        return list(lod)
    if isinstance(lod, (str, bytes)) or not hasattr(lod, "__len__"):
        raise TypeError(f"{name} must be a list of levels (lists of integers), "
                        f"got {type(lod).__name__}")
    levels = list(lod)
    if levels and all(isinstance(v, (int, np.integer)) or getattr(v, "ndim", None) == 0
                      for v in levels):
        flat = [getattr(v, "item", lambda v=v: v)() for v in levels[:8]]
        shown = ", ".join(map(str, flat)) + (", ..." if len(levels) > 8 else "")
        raise ValueError(f"{name} must be a list of levels, got one flat list [{shown}]; for a "
                         f"single level pass {name}=[[{shown}]]")
    return levels


def lengths_to_offsets(lengths, name="recursive_seq_lens"):
    """Convert lengths (a list of levels) to a list of int64 offset arrays.

    Raises ``LoDError`` (also a ``TypeError``) for a negative length, naming level and position.
    The offsets start at 0 and never decrease (the running sums of non-negative lengths that
    fit int64), so :func:`check_lod` need not scan them again.
    """
    out = []
    for k, level in enumerate(_levels(lengths, name)):
        arr = _int_level(level, name, k)
        offsets = np.empty(arr.shape[0] + 1, dtype=np.int64)
        bad, overflow = lod_utils.lengths_to_offsets(arr, offsets)
        if bad >= 0:
            raise _NegativeLoDError(
                f"invalid LoD: {name}[{k}] has a negative length {int(arr[bad])} at position {bad}"
            )
        if overflow >= 0:
            raise LoDError(f"invalid LoD: {name}[{k}] sums past int64 (overflow): the lengths "
                           f"up to position {overflow} add up to more than {_INT64_MAX}")
        out.append(offsets)
    return out


def _int_level(level, name, k):
    """One level (offsets or lengths) as 1-D int64; negatives are left to the caller."""
    return _int64_array(level, f"{name}[{k}]", column_ok=False, overflow_error=LoDError)


def offsets_to_lengths(offsets):
    """``np.diff`` of one level, through the kernel (int64 in, int64 out)."""
    out = np.empty(max(offsets.shape[0] - 1, 0), dtype=np.int64)
    if out.shape[0]:
        lod_utils.offsets_to_lengths(offsets, out)
    return out


#: Values quoted in an error message before it abbreviates.
SHOWN = 8


def show_values(values):
    """``[0, 2, 5]``: the first :data:`SHOWN` values of a 1-D array, for messages."""
    items = [str(v) for v in values[:SHOWN].tolist()]
    if values.shape[0] > SHOWN:
        items.append("...")
    return "[" + ", ".join(items) + "]"


def lengths_hint(level):
    """The hint for a LoD level that does not start at 0, which usually means lengths were
    passed where offsets go (Paddle's docstrings show lengths): ``"; if these are sequence
    lengths, pass the offsets they make: [0, 2, 5]"``, or "" when the values cannot be
    lengths (a negative one)."""
    if level.shape[0] == 0 or level.min() < 0:
        return ""
    return (f"; if these are sequence lengths, pass the offsets they make: "
            f"{show_values(np.concatenate([[0], np.cumsum(level)]))}")


def lod_problem(levels, n_rows, name="lod", first_bad=None):
    """Return a message describing the first violation of the LoD rules, or None.

    ``levels`` are int64 arrays (see ``as_offsets``); ``n_rows`` is ``data.shape[0]`` or None
    when the data is not known yet (the last-level check is then skipped).  ``first_bad``,
    when given, holds :func:`first_bad_offset` of every level, already computed.
    """
    for k, off in enumerate(levels):
        if off.shape[0] == 0:
            return f"invalid LoD: {name}[{k}] is empty; a level holds at least the offset 0"
        bad = first_bad_offset(off) if first_bad is None else first_bad[k]
        if bad == 0:
            return (f"invalid LoD: {name}[{k}] must start at 0, found {int(off[0])} at position "
                    f"0{lengths_hint(off)}")
        if bad > 0 and off.min() < 0:
            pos = int(np.argmax(off < 0))
            return (f"invalid LoD: {name}[{k}] has a negative value {int(off[pos])} at "
                    f"position {pos}")
        if bad > 0:
            return (f"invalid LoD: {name}[{k}] must be non-decreasing; first violation at "
                    f"position {bad} ({int(off[bad - 1])} > {int(off[bad])})")
    for k in range(len(levels) - 1):
        last, expected = int(levels[k][-1]), levels[k + 1].shape[0] - 1
        if last != expected:
            return (f"invalid LoD: {name}[{k}] ends at {last} but level {k + 1} has {expected} "
                    f"sequences; the last offset of a level must equal the next level's "
                    f"sequence count")
    if levels and n_rows is not None and int(levels[-1][-1]) != n_rows:
        k = len(levels) - 1
        return (f"invalid LoD: {name}[{k}] (the last level) ends at {int(levels[-1][-1])} but "
                f"the data has {n_rows} rows")
    return None


def check_lod(levels, n_rows, name="lod", first_bad=None):
    """Raise ``LoDError`` if ``levels`` is not a valid LoD for ``n_rows`` rows."""
    msg = lod_problem(levels, n_rows, name, first_bad)
    if msg is not None:
        raise LoDError(msg)


def coerce_pad_value(value, dtype, feature_shape, name="pad_value", xp=np):
    """Convert a pad value once, directly, to ``dtype`` (docs/operators.md#exact-pad-values).

    Returns an array of shape ``feature_shape`` (broadcast from ``()`` or ``(1,)``).

    A Python scalar converts by value: a non-integral or out-of-range value for an integer or
    bool dtype is a ``TypeError``.  An array or NumPy scalar must cast safely to ``dtype``.
    """
    dtype = np.dtype(dtype)
    feature_shape = tuple(feature_shape)
    if isinstance(value, (bool, int, float)) and not isinstance(value, np.generic):
        if dtype.kind in "iub":
            if isinstance(value, float) and not float(value).is_integer():
                raise TypeError(f"{name} = {value!r} is not integral; the output dtype is {dtype}")
            ivalue = int(value)
            if dtype.kind == "b":
                if ivalue not in (0, 1):
                    raise TypeError(f"{name} = {value!r} does not fit the output dtype bool")
            else:
                info = np.iinfo(dtype)
                if not info.min <= ivalue <= info.max:
                    raise TypeError(f"{name} = {value!r} is out of range for the output dtype "
                                    f"{dtype} [{info.min}, {info.max}]")
            arr = np.array(ivalue, dtype=dtype)
        else:
            arr = np.array(value, dtype=dtype)
    else:
        src = value.get() if hasattr(value, "__cuda_array_interface__") else value
        src = getattr(src, "_data", src)  # a LoDTensor
        src = np.asarray(src)
        if src.dtype.kind not in "biuf":
            raise TypeError(f"{name} must be numeric, got dtype {src.dtype}")
        if not np.can_cast(src.dtype, dtype, "safe"):
            raise TypeError(f"{name} of dtype {src.dtype} cannot be cast safely to the output "
                            f"dtype {dtype}")
        arr = src.astype(dtype)
    if arr.shape in ((), (1,)):
        arr = np.broadcast_to(arr.reshape(()), feature_shape)
    elif arr.shape != feature_shape:
        raise ValueError(f"{name} must have shape (), (1,) or the feature shape "
                         f"{feature_shape}, got {arr.shape}")
    arr = np.array(arr, order="C")  # materialise the broadcast; keeps 0-d arrays 0-d
    return arr if xp is np else xp.asarray(arr)
