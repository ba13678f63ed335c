"""``sequence_softmax`` on the CPU: the launcher of ``_ext/seq_softmax.pyx`` (the twin of
``lodarrow/_cuda/seq_softmax.py``)."""

import numpy as np

from lodarrow._cpu import by_dtype
from lodarrow._ext import seq_softmax
from lodarrow._threads import row_bounds, threads_for

__all__ = ["ENTRIES", "softmax"]


_SOFTMAX_FLOAT = by_dtype(seq_softmax.softmax_float)
_SOFTMAX_INT = by_dtype(seq_softmax.softmax_int)


def softmax(out, data, offsets):
    """Softmax over the values of every sequence of ``offsets``."""
    n = data.shape[0]
    if n == 0:
        return
    flat = np.ascontiguousarray(data)
    if flat.ndim != 1:
        flat = flat.reshape(n)
    o = out if out.ndim == 1 else out.reshape(n)
    offsets = np.ascontiguousarray(offsets)
    # exp costs far more than a read: go parallel earlier than the memory-bound kernels
    # (the work counts each value 16 times).
    nt = threads_for(16 * n)
    bounds = row_bounds(offsets, nt)
    dtype = flat.dtype
    kind = dtype.kind
    if kind == "f" and dtype.itemsize == 2:
        seq_softmax.softmax_half(o.view(np.uint16), flat.view(np.uint16), offsets, bounds, nt)
    elif kind == "f":
        _SOFTMAX_FLOAT.get(dtype, seq_softmax.softmax_float)(o, flat, offsets, bounds, nt)
    else:
        _SOFTMAX_INT.get(dtype, seq_softmax.softmax_int)(o, flat, offsets, bounds, nt)


#: Kernel name -> entry point (``_backends/cpu.py`` builds its table from these).
ENTRIES = {
    "softmax": softmax,
}
