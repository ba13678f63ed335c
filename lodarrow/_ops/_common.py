"""Helpers every operator shares: input coercion, LoD-level checks, threading, byte views."""

import math
import os
import sys

import numpy as np

from lodarrow._backend import is_cupy_array
from lodarrow._errors import LoDError
from lodarrow._tensor import LoDTensor
from lodarrow._validation import coerce_pad_value

__all__ = [
    "as_lod_tensor",
    "require_lod_levels",
    "row_bytes",
    "num_threads",
    "threads_for",
    "chunk_bounds",
    "PARALLEL_MIN_WORK",
    "ANY_LEVELS",
    "check_growth",
    "plan_threads",
    "flat_bytes",
    "backend_of_data",
    "pad_array",
]

#: Below this many elements of work a kernel runs on one thread: OpenMP's start-up would
#: cost more than it saves and the call-overhead target (SPEC section 6) is a few microseconds.
PARALLEL_MIN_WORK = 1 << 16


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
        from lodarrow._arrow import from_arrow

        t = from_arrow(obj)
        t._check_valid(name)  # the deferred O(n) offsets scan
        return t
    if isinstance(obj, (list, tuple)):
        return LoDTensor(np.asarray(obj))
    raise TypeError(f"{name} must be a LoDTensor, an Arrow array of lists or an array, "
                    f"got {type(obj).__name__}")


def require_lod_levels(t, name, op, allowed):
    """Raise ``LoDError`` unless ``t.lod_level`` is in ``allowed`` (an int, range or tuple)."""
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


def row_bytes(data):
    """A C-contiguous ``(N, bytes_per_row)`` uint8 view of ``data`` (copy only if strided).

    Data-moving kernels copy whole rows with ``memcpy`` through this view, so one kernel
    serves every dtype, bool and float16 included.
    """
    if not data.flags.c_contiguous:
        data = data.copy(order="C")
    n = data.shape[0]
    width = data.dtype.itemsize * math.prod(data.shape[1:])
    if n and width:
        return data.view(np.uint8).reshape(n, width)
    xp = sys.modules["cupy"] if is_cupy_array(data) else np
    return xp.empty((n, width), dtype=np.uint8)  # nothing to view: no rows or no bytes per row


def backend_of_data(data):
    """"cpu" or "cuda" for a single array (there is nothing to mix up)."""
    return "cuda" if is_cupy_array(data) else "cpu"


def num_threads():
    """Threads a kernel may use: ``LODARROW_NUM_THREADS`` or the CPUs this process may run on."""
    env = os.environ.get("LODARROW_NUM_THREADS")
    if env:
        return max(1, int(env))
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def threads_for(work):
    """1 for small work (see ``PARALLEL_MIN_WORK``), else :func:`num_threads`."""
    return 1 if work < PARALLEL_MIN_WORK else num_threads()


def chunk_bounds(offsets, n_chunks):
    """Split the sequences of ``offsets`` into ``n_chunks`` runs of about equal row count.

    Returns int64 sequence indices ``b`` with ``b[0] == 0`` and ``b[-1] == n_sequences``;
    chunk ``c`` is sequences ``[b[c], b[c + 1])``.  Balancing by rows, not by sequence count,
    keeps one thread from getting all the long sequences.
    """
    n_seq = offsets.shape[0] - 1
    n_chunks = max(1, min(int(n_chunks), n_seq))
    # int64 targets: float ones would make searchsorted cast all of ``offsets`` to float64.
    targets = np.linspace(0, int(offsets[-1]), n_chunks + 1).astype(np.int64)
    bounds = np.searchsorted(offsets, targets, side="left").astype(np.int64)
    bounds[0], bounds[-1] = 0, n_seq
    np.clip(bounds, 0, n_seq, out=bounds)
    return np.maximum.accumulate(bounds)


#: LoD level counts accepted by the operators that act on the last level (OPS.md departure 6).
ANY_LEVELS = range(1, 1024)

#: An argument that widens an output beyond what the data needs (``maxlen`` or ``win_size``
#: longer than the longest sequence, ``maxlen`` above ``max(x)``) may grow it up to this many
#: bytes, or ``GROWTH_FACTOR`` times the output the data needs if that is larger.  Beyond that
#: it is a ``ValueError``, never a ``MemoryError`` (SPEC section 3.1.1).
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


def plan_threads(offsets, work, by_rows=True):
    """``(n_threads, bounds)``: threads for ``work`` elements and the sequence chunks.

    One chunk of all sequences when single-threaded; else ``4 * n_threads`` chunks balanced
    by rows (``by_rows``), or by sequence count where every sequence costs the same.
    """
    n_threads = threads_for(work)
    n_seq = offsets.shape[0] - 1
    if n_threads == 1 or n_seq < 2:
        return 1, np.array([0, n_seq], dtype=np.int64)
    if not by_rows:
        n_chunks = min(n_threads * 4, n_seq)
        return n_threads, np.arange(n_chunks + 1, dtype=np.int64) * n_seq // n_chunks
    return n_threads, chunk_bounds(offsets, n_threads * 4)


def flat_bytes(a):
    """``a`` as a flat uint8 view (a C-contiguous copy first if it is strided)."""
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8)


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


# ---------------------------------------------------------------------------------------------
