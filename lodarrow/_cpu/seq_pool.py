"""``sequence_pool`` on the CPU: the launcher of ``_ext/seq_pool.pyx`` (the twin of
``lodarrow/_cuda/seq_pool.py``)."""

import numpy as np

from lodarrow._cpu import by_dtype
from lodarrow._ext import seq_pool
from lodarrow._threads import row_bounds, threads_for

__all__ = ["ENTRIES", "pool"]


_SUM_MODES = {"sum": 0, "average": 1, "sqrt": 2}
_SERIAL_OPS = {**_SUM_MODES, "max": 3, "min": 4}  # pool_float_serial's op codes
_SERIAL_DTYPES = frozenset(map(np.dtype, (np.float32, np.float64)))


_POOL_SUM_FLOAT = by_dtype(seq_pool.pool_sum_float)
_POOL_SUM_INT = by_dtype(seq_pool.pool_sum_int)
_POOL_MEAN_INT = by_dtype(seq_pool.pool_mean_int)
_POOL_EXTREME = by_dtype(seq_pool.pool_extreme)
_POOL_ARG_EXTREME = by_dtype(seq_pool.pool_arg_extreme)


def pool(out, index, data, offsets, pad_row, pool_type):
    """``out`` (and ``index``, the rows of max / min) from ``data`` pooled over ``offsets``."""
    n_seq = offsets.shape[0] - 1
    size = out.size
    if size == 0:
        return
    d = size // n_seq
    n = data.shape[0]
    work = n * d + n_seq
    nt = threads_for(work)
    # One thread, float32 / float64 sum family or max / min: the same kernels without typed
    # memoryviews (each acquired per argument, per call) nor reshapes, which outweigh the
    # work on small inputs; False for anything it cannot take.
    if (nt == 1 and index is None and data.dtype in _SERIAL_DTYPES
            and seq_pool.pool_float_serial(out, data, offsets, pad_row, d,
                                           _SERIAL_OPS.get(pool_type, -1))):
        return
    # ``(n, d)``, ``(n_seq, d)`` and ``(d,)`` views; a reshape is skipped where the array has
    # that shape already (2-D data: its feature dimension is ``d``): a reshape is a Python
    # call on every operator call.
    x = np.ascontiguousarray(data)
    if x.ndim != 2:
        x = x.reshape(n, d)
    o = out if out.ndim == 2 else out.reshape(n_seq, d)
    p = pad_row if pad_row.ndim == 1 else pad_row.reshape(d)
    offsets = np.ascontiguousarray(offsets)
    bounds = row_bounds(offsets, nt)
    dtype = x.dtype
    kind = dtype.kind
    # float16 runs on its bits (uint16) in the _half kernels, bool on uint8.
    half = kind == "f" and dtype.itemsize == 2
    if pool_type in ("first", "last"):
        # Rows as bytes: one copy kernel for every dtype.
        seq_pool.pool_pick(o.view(np.uint8), x.view(np.uint8), offsets, p.view(np.uint8),
                           pool_type == "last", bounds, nt)
    elif pool_type in _SUM_MODES:
        mode = _SUM_MODES[pool_type]
        if half:
            seq_pool.pool_sum_half(o.view(np.uint16), x.view(np.uint16), offsets,
                                   p.view(np.uint16), mode, bounds, nt)
        elif kind == "f":
            _POOL_SUM_FLOAT.get(dtype, seq_pool.pool_sum_float)(o, x, offsets, p, mode, bounds,
                                                                 nt)
        elif mode == 0:
            _POOL_SUM_INT.get(dtype, seq_pool.pool_sum_int)(o, x, offsets, p, bounds, nt)
        else:
            _POOL_MEAN_INT.get(dtype, seq_pool.pool_mean_int)(o, x, offsets, p, mode, bounds,
                                                               nt)
    else:
        is_min = pool_type == "min"
        i2 = None if index is None else index.reshape(n_seq, d)
        if half:
            seq_pool.pool_extreme_half(o.view(np.uint16), i2, x.view(np.uint16), offsets,
                                       p.view(np.uint16), is_min, bounds, nt)
            return
        if kind == "b":
            o, x, p = o.view(np.uint8), x.view(np.uint8), p.view(np.uint8)
            dtype = x.dtype
        if i2 is None:
            _POOL_EXTREME.get(dtype, seq_pool.pool_extreme)(o, x, offsets, p, is_min, bounds,
                                                             nt)
        else:
            _POOL_ARG_EXTREME.get(dtype, seq_pool.pool_arg_extreme)(o, i2, x, offsets, p,
                                                                     is_min, bounds, nt)


#: Kernel name -> entry point (``_backends/cpu.py`` builds its table from these).
ENTRIES = {
    "pool": pool,
}
