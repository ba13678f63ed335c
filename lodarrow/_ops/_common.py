"""Helpers every operator shares: input coercion, LoD-level checks, argument limits, and the
offsets arguments of ``lod_reset`` / ``lod_append``."""

import numpy as np

from lodarrow._backends import row_bytes
from lodarrow._cupy import is_cupy_array
from lodarrow._threads import chunk_bounds, threads_for
from lodarrow._errors import LoDError
from lodarrow._tensor import LoDTensor
from lodarrow._validation import (as_index_array, coerce_pad_value, lengths_hint, lod_problem,
                                  show_values)

__all__ = [
    "as_lod_tensor",
    "composed_offsets",
    "data_of",
    "require",
    "require_lod_levels",
    "row_bytes",
    "threads_for",
    "chunk_bounds",
    "ANY_LEVELS",
    "check_growth",
    "pad_array",
    "as_tensor_or_array",
    "check_ends_at_rows",
    "flat_offsets",
    "check_new_level",
    "host_indices",
]


def _is_arrow_like(obj):
    return hasattr(obj, "__arrow_c_array__") or hasattr(obj, "__arrow_c_stream__")


def as_lod_tensor(obj, name):
    """Return ``obj`` as a valid LoDTensor for argument ``name`` (never copies the data).

    Accepts a LoDTensor, anything :func:`lodarrow.from_arrow` accepts (converted zero-copy),
    and NumPy/CuPy arrays or nested sequences (a plain tensor, ``lod_level == 0``).
    """
    if isinstance(obj, LoDTensor):
        obj._check_valid(name)
        return obj
    if isinstance(obj, np.ndarray) or is_cupy_array(obj):
        return LoDTensor(obj)
    if _is_arrow_like(obj) or type(obj).__module__.startswith("pyarrow"):
        from lodarrow._interop._arrow import from_arrow

        t = from_arrow(obj)
        t._check_valid(name)  # the deferred O(n) offsets scan
        return t
    if isinstance(obj, (list, tuple)):
        try:
            data = np.asarray(obj)
        except ValueError:  # NumPy's "inhomogeneous shape": sequences of different lengths
            raise ValueError(f"{name} is a ragged list (its sequences differ in length), which "
                             f"no plain array can hold; build a LoDTensor from it first with "
                             f"lodarrow.from_list({name})") from None
        return LoDTensor(data)
    raise TypeError(f"{name} must be a LoDTensor, an Arrow array of lists or an array, "
                    f"got {type(obj).__name__}")


def require(obj, name, op):
    """Return ``obj``, or raise ``TypeError`` naming argument ``name`` of ``op`` if it is None."""
    if obj is None:
        raise TypeError(f"{op}: {name} is required, got None")
    return obj


def require_lod_levels(t, name, op, allowed):
    """Raise ``LoDError`` unless ``t.lod_level`` is in ``allowed`` (an int, range or tuple)."""
    if type(allowed) is range and t.lod_level in allowed:  # ANY_LEVELS: the usual call
        return
    if isinstance(allowed, int):
        allowed = (allowed,)
    if t.lod_level not in allowed:
        allowed = tuple(allowed)
        if len(allowed) == 1:
            want = f"exactly {allowed[0]}"
        elif allowed == tuple(range(allowed[0], allowed[-1] + 1)) and allowed[-1] > 3:
            want = f"at least {allowed[0]}"
        else:
            want = " or ".join(str(a) for a in allowed)
        raise LoDError(f"{op}: {name} must have {want} LoD level(s), got {t.lod_level}")


#: LoD level counts accepted by the operators that act on the last level
#: (docs/operators.md#multi-level-input).
ANY_LEVELS = range(1, 1024)

#: An argument that widens an output beyond what the data needs (``maxlen`` or ``win_size``
#: longer than the longest sequence, ``maxlen`` above ``max(x)``) may grow it up to this many
#: bytes, or ``GROWTH_FACTOR`` times the output the data needs if that is larger.  Beyond that
#: it is a ``ValueError``, never a ``MemoryError`` (docs/data-model.md#decisions-at-the-edges).
GROWTH_MIN_BYTES = 1 << 30
GROWTH_FACTOR = 16


def check_growth(op, arg, value, need, unit_bytes):
    """Raise ``ValueError`` if ``arg=value`` inflates the output far beyond ``arg=need``.

    ``unit_bytes`` is the output's size in bytes per unit of ``value`` (counted as at least 1,
    so an empty output still bounds the argument).  ``need`` may be a callable, evaluated only
    when the output would pass ``GROWTH_MIN_BYTES``.
    """
    unit = max(int(unit_bytes), 1)
    if value * unit <= GROWTH_MIN_BYTES:
        return
    if callable(need):
        need = need()
    if value <= need:
        return
    limit = max(GROWTH_MIN_BYTES, GROWTH_FACTOR * int(need) * unit)
    if value * unit > limit:
        raise ValueError(
            f"{op}: {arg}={value} would make an output of {value * unit} bytes, far beyond "
            f"what the data needs ({arg}={need}); at most {arg}={limit // unit} is allowed"
        )


_PAD_CACHE = {}
_PAD_CACHE_SIZE = 256


def pad_array(value, dtype, feature_shape, xp):
    """``coerce_pad_value``, memoised for Python scalars on the host (the usual call).

    The cached arrays are read-only; kernels only read them.
    """
    kind = type(value)
    if xp is not np or kind not in (int, float, bool):
        return coerce_pad_value(value, dtype, feature_shape, xp=xp)
    key = (kind, value.hex() if kind is float else value, dtype, feature_shape)  # -0.0 != 0.0
    arr = _PAD_CACHE.get(key)
    if arr is None:
        arr = coerce_pad_value(value, dtype, feature_shape)
        arr.flags.writeable = False
        if len(_PAD_CACHE) >= _PAD_CACHE_SIZE:
            _PAD_CACHE.clear()
        _PAD_CACHE[key] = arr
    return arr


# --------------------------------------------------------------------------- new LoD levels
# Shared by lod_reset and lod_append.
def as_tensor_or_array(obj, name):
    """A LoDTensor (possibly with a LoD) or a bare NumPy/CuPy array, as given."""
    if isinstance(obj, LoDTensor):
        obj._check_valid(name)
        return obj
    if isinstance(obj, np.ndarray) or is_cupy_array(obj):
        return obj
    if isinstance(obj, (list, tuple)):
        return np.asarray(obj)
    return as_lod_tensor(obj, name)


def check_ends_at_rows(t, rows, op, name):
    """Raise ``LoDError`` unless ``t``'s LoD (its last level) ends at ``rows``."""
    end = int(t.offsets[-1][-1])
    if end != rows:
        raise LoDError(f"{op}: {name}'s LoD (last level) ends at {end} but x has {rows} rows; "
                       f"the new LoD must cover x's rows exactly")


def flat_offsets(obj, name, op, flat_only=False):
    """One level of offsets from a list, array or LoDTensor data, as a private int64 array.

    ``flat_only``: a list or array argument must be 1-D (``target_lod``, ``level``); tensor
    data is read flat whatever its shape, as Paddle's operator reads ``Y``.
    """
    src = obj.data if isinstance(obj, LoDTensor) else obj
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


def check_new_level(level, rows, name, op):
    """Raise ``LoDError`` unless ``level`` is valid offsets ending at ``rows``.

    A level that does not start at 0 usually means lengths were passed (Paddle's own
    docstrings show lengths); the message then suggests the offsets they would make.
    """
    if level.shape[0] == 0:
        raise LoDError(f"{op}: {name} is empty; a LoD level is offsets starting at 0, "
                       f"e.g. [0, {rows}] for one sequence of all {rows} rows")
    if level[0] != 0:
        raise LoDError(f"{op}: {name} must be offsets starting at 0 (not lengths), got "
                       f"{show_values(level)} starting at {int(level[0])}"
                       f"{lengths_hint(level)}")
    problem = lod_problem([level], rows, name)
    if problem is not None:
        problem = problem.replace(f"{name}[0] (the last level)", name)
        problem = problem.replace(f"{name}[0]", name).replace("the data has", "x has")
        raise LoDError(f"{op}: {problem}")


def composed_offsets(t, depth):
    """The offsets of level ``depth``'s entries per top-level sequence of ``t`` (``depth``
    levels composed); ``depth == t.lod_level`` gives data rows per top-level sequence."""
    off = np.asarray(t.offsets[0])
    for k in range(1, depth):
        off = np.asarray(t.offsets[k])[off]
    return off


def data_of(obj):
    """The array of a LoDTensor argument, anything else as it is (for ``backend_of``)."""
    return obj.data if isinstance(obj, LoDTensor) else obj


def host_indices(obj, name, n, op):
    """One int64 index per sequence (a list, array or LoDTensor data, e.g. ``sequence_slice``'s
    ``offset``) as a host array; ``ValueError`` naming argument ``name`` of ``op`` unless it
    holds exactly ``n`` of them."""
    src = obj.data if isinstance(obj, LoDTensor) else obj
    if is_cupy_array(src):
        src = src.get()
    arr = as_index_array(src, f"{op}: {name}")
    if arr.shape[0] != n:
        raise ValueError(f"{op}: {name} has {arr.shape[0]} entries but input has {n} "
                         f"sequences; give one per sequence")
    return arr
