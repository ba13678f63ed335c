"""``sequence_softmax`` on the GPU: the launcher of ``seq_softmax.cu`` (the twin of
``_ext/seq_softmax.pyx``).  float16 is computed in float32, integers in float64."""

import numpy as np

from lodarrow._cuda import ctype_of, cupy, module

__all__ = ["ENTRIES", "KERNELS", "cupy", "softmax"]

_GROUP = "seq_softmax"
_WARP_BLOCK = 256          # threads per block (8 warps, one per sequence)
_INPUTS = ("int8", "uint8", "int16", "uint16", "int32", "int64", "float32", "float64")


def _args(dtype):
    """Template arguments ``In, Comp``: float32 computes in float, the rest in double."""
    return f"{ctype_of(dtype)}, {'float' if dtype == 'float32' else 'double'}"


#: Every kernel instantiation this module launches (all compiled together, once).
KERNELS = tuple(f"lodarrow_seq_softmax<{_args(dt)}>" for dt in _INPUTS)


def softmax(out, data, offsets):
    """``sequence_softmax`` on the device (one warp per sequence)."""
    cp = cupy()
    n = data.shape[0]
    n_seq = offsets.shape[0] - 1
    if n == 0:
        return
    x = cp.ascontiguousarray(data).reshape(n)
    half = x.dtype == np.float16
    if half:
        x = x.astype(cp.float32)
    target = out.reshape(n) if not half else cp.empty(n, dtype=cp.float32)
    kernel = module(_GROUP, KERNELS).get_function(f"lodarrow_seq_softmax<{_args(x.dtype.name)}>")
    if n_seq > 0:
        grid = (int(n_seq) * 32 + _WARP_BLOCK - 1) // _WARP_BLOCK
        kernel((grid,), (_WARP_BLOCK,), (target, x, offsets, np.int64(n_seq)))
    if half:
        out.reshape(n)[...] = target.astype(cp.float16)


# --------------------------------------------------------------------------- entries
#: Kernel name -> entry point, the arguments of the CPU twin's (``lodarrow/_cpu/seq_softmax.py``).
ENTRIES = {"softmax": softmax}
