"""``sequence_scatter`` on the GPU: the launcher of ``seq_scatter.cu`` (the twin of
``_ext/seq_scatter.pyx``).  float16 never reaches it (the operator accumulates in float32)."""

import numpy as np

from lodarrow._cuda import ctype_of, cupy, launch_1d, module

__all__ = ["ENTRIES", "KERNELS", "scatter"]

_GROUP = "seq_scatter"
_DTYPES = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
           "float32", "float64")

#: Every kernel instantiation this module launches (all compiled together, once).
KERNELS = tuple(f"lodarrow_seq_scatter<{ctype_of(dt)}>" for dt in _DTYPES)


def scatter(out, ids, updates, offsets):
    """``out[i, ids[p]] += updates[p]`` for the positions ``p`` of index sequence ``i``.

    Returns the first position whose id is outside ``[0, width)`` (found by the kernel as it
    goes; ``out`` is then unfinished), or -1.  Reading it back is the one sync.
    """
    n = offsets.shape[0] - 1
    m = ids.shape[0]
    if n <= 0 or m == 0:
        return -1
    kernel = module(_GROUP, KERNELS).get_function(
        f"lodarrow_seq_scatter<{ctype_of(out.dtype)}>")
    bad = cupy().zeros(1, dtype=np.uint64)
    launch_1d(kernel, n, (out, ids, updates, offsets, np.int64(n), np.int64(out.shape[1]),
                          np.int64(m), bad))
    found = int(bad.get()[0])
    return m - found if found else -1


# --------------------------------------------------------------------------- entries
def _scatter(out, src, ids, updates, offsets):
    """One GPU thread per index sequence; returns the first bad id's position, or -1."""
    if src is not out:
        out[...] = src
    return scatter(out, ids, updates, offsets)


#: Kernel name -> entry point, the arguments of the CPU twin's (``lodarrow/_cpu/seq_scatter.py``).
ENTRIES = {"scatter": _scatter}
