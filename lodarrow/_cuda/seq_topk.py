"""``sequence_topk_avg_pooling`` on the GPU: the launcher of ``seq_topk.cu`` (the twin of
``_ext/seq_topk.pyx``).  Integers are computed in float64, float16 in float32."""

import numpy as np

from lodarrow._cuda import ctype_of, cupy, launch_1d, module

__all__ = ["ENTRIES", "KERNELS", "cupy", "topk_avg_pool"]

_GROUP = "seq_topk"

#: Every kernel instantiation this module launches (all compiled together, once).
KERNELS = tuple(f"lodarrow_seq_topk_avg<{ctype_of(dt)}>" for dt in ("float32", "float64"))


def topk_avg_pool(out, data, in_off, row_off, col_off, ks, channels):
    """``sequence_topk_avg_pooling`` on the device (one thread per output row and channel)."""
    cp = cupy()
    if out.size == 0:
        return
    x = cp.ascontiguousarray(data)
    if x.dtype.kind != "f":
        x = x.astype(cp.float64)
    elif x.dtype == np.float16:
        x = x.astype(cp.float32)
    target = out if out.dtype == x.dtype else cp.empty(out.shape, dtype=x.dtype)
    n_seq = row_off.shape[0] - 1
    total_rows = out.shape[0]
    kernel = module(_GROUP, KERNELS).get_function(f"lodarrow_seq_topk_avg<{ctype_of(x.dtype)}>")
    i64 = np.int64
    launch_1d(kernel, total_rows * channels,
              (target, x, in_off, row_off, col_off, cp.asarray(ks), i64(ks.shape[0]),
               i64(int(ks.max())), i64(n_seq), i64(total_rows), i64(channels)))
    if target is not out:
        out[...] = target.astype(out.dtype)


# --------------------------------------------------------------------------- entries
def _topk_avg_pool(out, data, in_off, row_off, col_off, ks, channels, longest):
    topk_avg_pool(out, data, in_off, row_off, col_off, ks, channels)


#: Kernel name -> entry point, the arguments of the CPU twin's (``lodarrow/_cpu/seq_topk.py``).
ENTRIES = {"topk_avg_pool": _topk_avg_pool}
