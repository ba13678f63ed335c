"""``sequence_conv`` on the GPU: the launcher of ``seq_conv.cu`` (the twin of
``_ext/seq_conv.pyx``): gather each block of context rows, then one cuBLAS product."""

import numpy as np

from lodarrow._plan import conv_source_rows
from lodarrow._cuda import ctype_of, cupy, launch_1d, module

__all__ = ["ENTRIES", "KERNELS", "cupy", "conv"]

_GROUP = "seq_conv"

#: Every kernel instantiation this module launches (all compiled together, once).
KERNELS = tuple(f"lodarrow_seq_conv_gather<{ctype_of(dt)}>" for dt in ("float32", "float64"))


def conv(out, data, offsets, w, pad_rows, b, cs, cl, up, chunk_elements):
    """``sequence_conv`` on the device: gather context blocks, one cuBLAS product each."""
    cp = cupy()
    n, d = data.shape
    if n == 0:
        return
    compute = w.dtype
    width = cl * d
    if width == 0:
        out[...] = 0 if b is None else b
        return
    n_seq = offsets.shape[0] - 1
    step = max(1, chunk_elements // width)
    ctx_buf = cp.empty((min(step, n), width), dtype=compute)
    use_pad = pad_rows is not None
    padding = pad_rows if use_pad else cp.empty((1, d), dtype=compute)
    data = cp.ascontiguousarray(data)
    kernel = module(_GROUP, KERNELS).get_function(
        f"lodarrow_seq_conv_gather<{ctype_of(compute)}>")
    i64 = np.int64
    for r0 in range(0, n, step):
        r1 = min(n, r0 + step)
        ctx = ctx_buf[:r1 - r0]
        if data.dtype == compute:
            src, base = data, 0
        else:
            base, stop = conv_source_rows(r0, r1, n, cs, cl)
            src = data[base:stop].astype(compute)
            if src.shape[0] == 0:
                src = cp.empty((1, d), dtype=compute)
        launch_1d(kernel, ctx.size, (ctx, src, i64(base), offsets, i64(n_seq), i64(r0),
                                     i64(r1 - r0), i64(cs), i64(cl), i64(d), padding, i64(up),
                                     np.int32(use_pad)))
        if out.dtype == compute:
            cp.matmul(ctx, w, out=out[r0:r1])
            if b is not None:
                out[r0:r1] += b
        else:
            block = ctx @ w
            if b is not None:
                block += b
            out[r0:r1] = block.astype(out.dtype)


# --------------------------------------------------------------------------- entries
#: Kernel name -> entry point, the arguments of the CPU twin's (``lodarrow/_cpu/seq_conv.py``).
ENTRIES = {"conv": conv}
