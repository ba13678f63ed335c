"""``sequence_pool`` on the GPU: launchers of ``seq_pool.cu`` (the twin of ``_ext/seq_pool.pyx``).

Offsets come from ``LoDTensor._device_offsets_for`` (mirrored once, cached).  float16 is
computed in float32 (converted with ``astype`` on the device), integers as the CPU kernels do
(64-bit wrapping sums, float64 averages).
"""

import numpy as np

from lodarrow._cuda import ctype_of, cupy, launch_1d, module

__all__ = ["ENTRIES", "KERNELS", "cupy", "pool"]

_GROUP = "seq_pool"
_WARP_BLOCK = 256          # threads per block for one-warp-per-sequence kernels (8 warps)
_SUM_MODES = {"sum": 0, "average": 1, "sqrt": 2}
_INTS = ("int8", "uint8", "int16", "uint16", "int32", "int64")
_FLOATS = ("float32", "float64")


def _sum_args(in_dtype, out_dtype):
    """Template arguments of the sum kernels: ``In, Out, Acc``."""
    acc = "double" if np.dtype(in_dtype).kind == "f" else "unsigned long long"
    return f"{ctype_of(in_dtype)}, {ctype_of(out_dtype)}, {acc}"


def _sum_variants():
    for dt in _FLOATS:
        yield dt, dt
    for dt in _INTS:
        yield dt, dt            # sum: wraps in the input dtype
        yield dt, "float64"     # average, sqrt


#: Every kernel instantiation this module launches (all compiled together, once).
KERNELS = (
    *(f"{k}<{_sum_args(i, o)}>" for i, o in _sum_variants()
      for k in ("lodarrow_seq_pool_sum", "lodarrow_seq_pool_sum_warp")),
    *(f"lodarrow_seq_pool_extreme<{ctype_of(dt)}>" for dt in _INTS + _FLOATS),
    "lodarrow_seq_pool_pick",
)


def _kernel(name):
    return module(_GROUP, KERNELS).get_function(name)


def _warp_launch(kernel, n_warps, args):
    if n_warps <= 0:
        return
    grid = (int(n_warps) * 32 + _WARP_BLOCK - 1) // _WARP_BLOCK
    kernel((grid,), (_WARP_BLOCK,), args)


def pool(out, index, data, offsets, pad, pool_type):
    """``sequence_pool`` on the device: ``out`` (and ``index``) from ``data`` over ``offsets``."""
    cp = cupy()
    n_seq = offsets.shape[0] - 1
    if out.size == 0:
        return
    d = out.size // n_seq
    n = data.shape[0]
    x = cp.ascontiguousarray(data).reshape(n, d)
    o = out.reshape(n_seq, d)
    p = cp.ascontiguousarray(pad).reshape(d)
    i64 = np.int64
    if pool_type in ("first", "last"):
        kernel = _kernel("lodarrow_seq_pool_pick")
        width = d * out.dtype.itemsize
        x8 = x.view(cp.uint8).reshape(n, width)
        launch_1d(kernel, n_seq * width, (o.view(cp.uint8), x8, offsets, p.view(cp.uint8),
                                          i64(n_seq), i64(width), np.int32(pool_type == "last")))
        return
    half = x.dtype == np.float16
    if half:
        x = x.astype(cp.float32)
    if pool_type in _SUM_MODES:
        mode = np.int32(_SUM_MODES[pool_type])
        target = o if not half else cp.empty((n_seq, d), dtype=cp.float32)
        tpad = p if not half else p.astype(cp.float32)
        args = _sum_args(x.dtype, target.dtype)
        if d == 1:
            kernel = _kernel(f"lodarrow_seq_pool_sum_warp<{args}>")
            _warp_launch(kernel, n_seq, (target, x, offsets, tpad, i64(n_seq), mode))
        else:
            kernel = _kernel(f"lodarrow_seq_pool_sum<{args}>")
            launch_1d(kernel, n_seq * d, (target, x, offsets, tpad, i64(n_seq), i64(d), mode))
        if half:
            o[...] = target.astype(cp.float16)
        return
    if x.dtype == np.bool_:
        x, o8, p8 = x.view(cp.uint8), o.view(cp.uint8), p.view(cp.uint8)
    else:
        o8, p8 = o, p
    target = o8 if not half else cp.empty((n_seq, d), dtype=cp.float32)
    tpad = p8 if not half else p8.astype(cp.float32)
    idx = index.reshape(n_seq, d) if index is not None else cp.empty((1, 1), dtype=cp.int64)
    kernel = _kernel(f"lodarrow_seq_pool_extreme<{ctype_of(x.dtype)}>")
    launch_1d(kernel, n_seq * d, (target, idx, x, offsets, tpad, i64(n_seq), i64(d),
                                  np.int32(pool_type == "min"), np.int32(index is not None)))
    if half:
        o[...] = target.astype(cp.float16)


# --------------------------------------------------------------------------- entries
def _pool(out, index, data, offsets, pad_row, pool_type):
    pool(out, index, data, offsets, cupy().asarray(pad_row), pool_type)


#: Kernel name -> entry point, the arguments of the CPU twin's (``lodarrow/_cpu/seq_pool.py``).
ENTRIES = {"pool": _pool}
