"""``sequence_conv`` on the CPU: the launcher of ``_ext/seq_conv.pyx`` (the twin of
``lodarrow/_cuda/seq_conv.py``): gather each block of context rows, then one BLAS product."""

import numpy as np

from lodarrow._ext import seq_conv
from lodarrow._plan import conv_source_rows

__all__ = ["ENTRIES", "conv"]


def conv(out, data, offsets, w, pad_rows, b, cs, cl, up, chunk_elements):
    """Gather the contexts block by block and multiply each block by the filter.

    ``data`` is ``(n, d)``; ``w``, ``pad_rows`` and ``b`` are already in the computation
    dtype.
    """
    n, d = data.shape
    if n == 0:
        return
    data = np.ascontiguousarray(data)
    compute = w.dtype
    width = cl * d
    if width == 0:
        out[...] = 0 if b is None else b
        return
    offsets = np.ascontiguousarray(offsets)
    step = max(1, chunk_elements // width)
    ctx_buf = np.empty((min(step, n), width), dtype=compute)
    use_pad = pad_rows is not None
    padding = pad_rows if use_pad else np.empty((0, d), dtype=compute)
    direct = out.dtype == compute
    for r0 in range(0, n, step):
        r1 = min(n, r0 + step)
        ctx = ctx_buf[:r1 - r0]
        if data.dtype == compute:
            src, base = data, 0
        else:
            # Convert only the rows this block's contexts can reach.
            base, stop = conv_source_rows(r0, r1, n, cs, cl)
            src = data[base:stop].astype(compute)
        # One thread: the product right after runs on BLAS's own threads, and OpenMP
        # workers still spinning from a parallel gather would fight them for the cores.
        seq_conv.conv_gather(ctx, src, base, offsets, r0, cs, cl, padding, up, use_pad, 1)
        if direct:
            np.matmul(ctx, w, out=out[r0:r1])
            if b is not None:
                out[r0:r1] += b
        else:
            block = ctx @ w
            if b is not None:
                block += b
            out[r0:r1] = block


#: Kernel name -> entry point (``_backends/cpu.py`` builds its table from these).
ENTRIES = {
    "conv": conv,
}
