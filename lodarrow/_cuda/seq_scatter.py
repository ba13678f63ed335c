"""``sequence_scatter`` on the GPU: the launcher of ``seq_scatter.cu`` (the twin of
``_ext/seq_scatter.pyx``).  float16 never reaches it (the operator accumulates in float32)."""

import numpy as np

from lodarrow._cuda import ctype_of, launch_1d, module

__all__ = ["KERNELS", "scatter"]

_GROUP = "seq_scatter"
_DTYPES = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
           "float32", "float64")

#: Every kernel instantiation this module launches (all compiled together, once).
KERNELS = tuple(f"lodarrow_seq_scatter<{ctype_of(dt)}>" for dt in _DTYPES)


def scatter(out, ids, updates, offsets):
    """``out[i, ids[p]] += updates[p]`` for the positions ``p`` of index sequence ``i``."""
    n = offsets.shape[0] - 1
    if n <= 0 or ids.shape[0] == 0:
        return
    kernel = module(_GROUP, KERNELS).get_function(
        f"lodarrow_seq_scatter<{ctype_of(out.dtype)}>")
    launch_1d(kernel, n, (out, ids, updates, offsets, np.int64(n), np.int64(out.shape[1])))
