"""``sequence_topk_avg_pooling`` on the CPU: the launcher of ``_ext/seq_topk.pyx`` (the twin
of ``lodarrow/_cuda/seq_topk.py``)."""

import numpy as np

from lodarrow._ext import seq_topk
from lodarrow._threads import row_bounds, threads_for

__all__ = ["ENTRIES", "topk_avg_pool"]


def topk_avg_pool(out, data, in_off, row_off, col_off, ks, channels, longest):
    """Top-k averages of every row of every channel; ``data`` flat in float32 or float64."""
    if out.size == 0:
        return
    target = out if out.dtype == data.dtype else np.empty(out.shape, dtype=data.dtype)
    in_off = np.ascontiguousarray(in_off)
    nt = threads_for(data.shape[0] * 4)
    bounds = row_bounds(in_off, nt)
    n_chunks = 1 if bounds is None else bounds.shape[0] - 1
    m = max(1, min(int(ks.max()), longest))
    work = np.empty((n_chunks, m), dtype=np.float64)
    seq_topk.topk_avg_pool(target, work, data, in_off, np.ascontiguousarray(row_off),
                           np.ascontiguousarray(col_off), ks, channels, bounds, nt)
    if target is not out:
        out[...] = target


#: Kernel name -> entry point (``_backends/cpu.py`` builds its table from these).
ENTRIES = {
    "topk_avg_pool": topk_avg_pool,
}
