"""CuPy kernels of the numeric sequence operators: pool, softmax, conv, top-k average.

Deterministic: every output element is computed by one thread (or one warp, combined by a
fixed shuffle tree), so there are no atomics and results do not depend on scheduling.
Offsets come from ``LoDTensor._device_offsets_for`` (mirrored once, cached).  float16 is
computed in float32 (converted with ``astype`` on the device), integers as the CPU kernels
do (64-bit wrapping sums, float64 averages).  Sources are specialised per dtype by text
substitution and compiled once through ``lodarrow._cuda.raw_kernel``'s cache.
"""

import numpy as np

from lodarrow._backend import get_cupy
from lodarrow._cuda import ctype_of, launch_1d, raw_kernel

__all__ = ["cupy", "pool", "softmax", "conv", "topk_avg_pool", "kernel_sources"]

_WARP_BLOCK = 256          # threads per block for one-warp-per-sequence kernels (8 warps)
_SUM_MODES = {"sum": 0, "average": 1, "sqrt": 2}

_PRELUDE = r"""
typedef long long i64;
typedef unsigned long long u64;
__device__ __forceinline__ float la_nan(float) { return __int_as_float(0x7fc00000); }
__device__ __forceinline__ double la_nan(double) { return __longlong_as_double(0x7ff8000000000000LL); }
__device__ __forceinline__ float la_exp(float v) { return expf(v); }
__device__ __forceinline__ double la_exp(double v) { return exp(v); }
/* the sequence holding row t: the last s in [0, n_seq) with off[s] <= t */
__device__ __forceinline__ i64 la_seq_of(const i64* off, i64 n_seq, i64 t) {
    i64 lo = 0, hi = n_seq - 1;
    while (lo < hi) {
        i64 mid = (lo + hi + 1) >> 1;
        if (off[mid] <= t) lo = mid; else hi = mid - 1;
    }
    return lo;
}
"""

# Sum family, one thread per (sequence, feature).  ACC: double for floats, a wrapping u64 for
# integers; FINISH turns the accumulator into the output value.
_POOL_SUM = _PRELUDE + r"""
extern "C" __global__ void lodarrow_seq_pool_sum(OUT_T* out, const IN_T* x, const i64* off,
                                                 const OUT_T* pad, i64 n_seq, i64 d,
                                                 int mode) {
    i64 tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= n_seq * d) return;
    i64 s = tid / d, j = tid - s * d;
    i64 a = off[s], b = off[s + 1];
    if (a == b) { out[tid] = pad[j]; return; }
    ACC_T acc = 0;
    for (i64 i = a; i < b; ++i) acc += LOAD(x[i * d + j]);
    out[tid] = FINISH(acc, b - a, mode);
}

/* D == 1: one warp per sequence, lanes striding over its rows, a fixed shuffle tree. */
extern "C" __global__ void lodarrow_seq_pool_sum_warp(OUT_T* out, const IN_T* x,
                                                      const i64* off, const OUT_T* pad,
                                                      i64 n_seq, int mode) {
    i64 warp = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (warp >= n_seq) return;              /* uniform across the warp */
    i64 a = off[warp], b = off[warp + 1];
    ACC_T acc = 0;
    for (i64 i = a + lane; i < b; i += 32) acc += LOAD(x[i]);
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
    if (lane == 0) out[warp] = (a == b) ? pad[0] : FINISH(acc, b - a, mode);
}
"""

_FLOAT_SUM = {"ACC_T": "double", "LOAD(v)": "((double)(v))",
              "FINISH(acc, n, mode)": "((OUT_T)((mode) == 1 ? (acc) / (double)(n) : "
                                      "(mode) == 2 ? (acc) / sqrt((double)(n)) : (acc)))"}
_INT_SUM = {"ACC_T": "u64", "LOAD(v)": "((u64)(i64)(v))",
            "FINISH(acc, n, mode)": "((mode) == 0 ? (OUT_T)(i64)(acc) : "
                                    "(OUT_T)((mode) == 1 ? (double)(i64)(acc) / (double)(n) : "
                                    "(double)(i64)(acc) / sqrt((double)(n))))"}

# Max / min with the optional arg index; NaN sticks (the first NaN wins), ties keep the first.
_POOL_EXTREME = _PRELUDE + r"""
extern "C" __global__ void lodarrow_seq_pool_extreme(T* out, i64* index, const T* x,
                                                     const i64* off, const T* pad, i64 n_seq,
                                                     i64 d, int is_min, int with_index) {
    i64 tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= n_seq * d) return;
    i64 s = tid / d, j = tid - s * d;
    i64 a = off[s], b = off[s + 1];
    if (a == b) {
        out[tid] = pad[j];
        if (with_index) index[tid] = -1;
        return;
    }
    T m = x[a * d + j];
    i64 best = a;
    for (i64 i = a + 1; i < b; ++i) {
        T v = x[i * d + j];
        bool take = (is_min ? (v < m) : (v > m)) || (v != v && m == m);
        if (take) { m = v; best = i; }
    }
    out[tid] = m;
    if (with_index) index[tid] = best;
}
"""

# First / last row, byte by byte (every dtype).
_POOL_PICK = _PRELUDE + r"""
extern "C" __global__ void lodarrow_seq_pool_pick(unsigned char* out, const unsigned char* x,
                                                  const i64* off, const unsigned char* pad,
                                                  i64 n_seq, i64 width, int last) {
    i64 tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= n_seq * width) return;
    i64 s = tid / width, j = tid - s * width;
    i64 a = off[s], b = off[s + 1];
    out[tid] = (a == b) ? pad[j] : x[(last ? b - 1 : a) * width + j];
}
"""

# Softmax: one warp per sequence.  The maximum and the sum are combined by a fixed shuffle
# tree into lane 0 and broadcast, so every lane divides by the same value.
_SOFTMAX = _PRELUDE + r"""
extern "C" __global__ void lodarrow_seq_softmax(OUT_T* out, const IN_T* x, const i64* off,
                                                i64 n_seq) {
    i64 warp = ((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (warp >= n_seq) return;
    i64 a = off[warp], b = off[warp + 1];
    if (a == b) return;
    COMP_T m = (COMP_T)x[a];
    int nan = 0;
    for (i64 i = a + lane; i < b; i += 32) {
        COMP_T v = (COMP_T)x[i];
        nan |= v != v;
        m = v > m ? v : m;
    }
    for (int o = 16; o > 0; o >>= 1) {
        COMP_T other = __shfl_down_sync(0xffffffffu, m, o);
        m = other > m ? other : m;
    }
    m = __shfl_sync(0xffffffffu, m, 0);
    if (__any_sync(0xffffffffu, nan)) m = la_nan(m);
    COMP_T total = 0;
    for (i64 i = a + lane; i < b; i += 32) total += la_exp((COMP_T)x[i] - m);
    for (int o = 16; o > 0; o >>= 1) total += __shfl_down_sync(0xffffffffu, total, o);
    total = __shfl_sync(0xffffffffu, total, 0);
    for (i64 i = a + lane; i < b; i += 32) out[i] = (OUT_T)(la_exp((COMP_T)x[i] - m) / total);
}
"""

# Conv context gather: one thread per element of the [rows, context_length * D] block.
_CONV_GATHER = _PRELUDE + r"""
extern "C" __global__ void lodarrow_seq_conv_gather(T* ctx, const T* src, i64 base,
                                                    const i64* off, i64 n_seq, i64 r0,
                                                    i64 rows, i64 cs, i64 cl, i64 d,
                                                    const T* pad, i64 up, int use_pad) {
    i64 tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    i64 width = cl * d;
    if (tid >= rows * width) return;
    i64 r = tid / width, c = tid - r * width;
    i64 k = c / d, j = c - k * d;
    i64 t = r0 + r;
    i64 s = la_seq_of(off, n_seq, t);
    i64 a = off[s], b = off[s + 1];
    i64 p = t + cs + k;
    T v;
    if (p >= a && p < b) v = src[(p - base) * d + j];
    else if (!use_pad) v = (T)0;
    else if (p < a) v = pad[(up + p - a) * d + j];
    else v = pad[(up + p - b) * d + j];
    ctx[tid] = v;
}
"""

# Top-k average: one thread per (output row, channel).  The j-th pick is the largest value
# after the previous pick in (value descending, index ascending) order, so no scratch memory.
_TOPK = _PRELUDE + r"""
extern "C" __global__ void lodarrow_seq_topk_avg(T* out, const T* x, const i64* in_off,
                                                 const i64* row_off, const i64* col_off,
                                                 const i64* ks, i64 n_k, i64 max_k,
                                                 i64 n_seq, i64 total_rows, i64 channels) {
    i64 tid = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= total_rows * channels) return;
    i64 R = tid / channels, ch = tid - R * channels;
    i64 s = la_seq_of(row_off, n_seq, R);
    i64 n_rows = row_off[s + 1] - row_off[s], n_cols = col_off[s + 1] - col_off[s];
    const T* v = x + in_off[s] + (ch * n_rows + (R - row_off[s])) * n_cols;
    T* o = out + (R * channels + ch) * n_k;
    for (i64 i = 0; i < n_cols; ++i) {
        if (v[i] != v[i]) {
            for (i64 q = 0; q < n_k; ++q) o[q] = la_nan(v[i]);
            return;
        }
    }
    i64 m = max_k < n_cols ? max_k : n_cols;
    double prefix = 0.0;
    T prev_v = 0;
    i64 prev_i = -1;
    for (i64 j = 0; j < m; ++j) {
        i64 bi = -1;
        T bv = 0;
        for (i64 i = 0; i < n_cols; ++i) {
            T c = v[i];
            bool after = j == 0 || c < prev_v || (c == prev_v && i > prev_i);
            if (after && (bi < 0 || c > bv)) { bi = i; bv = c; }
        }
        prefix += (double)bv;
        prev_v = bv;
        prev_i = bi;
        for (i64 q = 0; q < n_k; ++q)
            if (ks[q] == j + 1) o[q] = (T)(prefix / (double)ks[q]);
    }
    for (i64 q = 0; q < n_k; ++q)
        if (ks[q] > m) o[q] = (T)(prefix / (double)ks[q]);   /* missing values count as 0 */
}
"""


def cupy():
    """The ``cupy`` module (imported lazily)."""
    return get_cupy()


def _specialise(source, subs):
    """``source`` with each macro of ``subs`` defined at its top (``#define key value``)."""
    defines = "".join(f"#define {key} {value}\n" for key, value in subs.items())
    return defines + source


def kernel_sources():
    """Every kernel source this module compiles, as ``(name, source)`` pairs (for checks)."""
    out = []
    ints = ["int8", "uint8", "int16", "uint16", "int32", "int64"]
    for dt in ["float32", "float64"]:
        subs = {"IN_T": ctype_of(dt), "OUT_T": ctype_of(dt), **_FLOAT_SUM}
        out.append((f"pool_sum_{dt}", _specialise(_POOL_SUM, subs)))
    for dt in ints:
        for out_dt in (dt, "float64"):
            subs = {"IN_T": ctype_of(dt), "OUT_T": ctype_of(out_dt), **_INT_SUM}
            out.append((f"pool_sum_{dt}_to_{out_dt}", _specialise(_POOL_SUM, subs)))
    for dt in ints + ["float32", "float64"]:
        out.append((f"pool_extreme_{dt}", _specialise(_POOL_EXTREME, {"T": ctype_of(dt)})))
        comp = "float" if dt == "float32" else "double"
        out.append((f"softmax_{dt}", _specialise(_SOFTMAX, {"IN_T": ctype_of(dt),
                                                             "OUT_T": comp, "COMP_T": comp})))
    out.append(("pool_pick", _POOL_PICK))
    for dt in ["float32", "float64"]:
        out.append((f"conv_{dt}", _specialise(_CONV_GATHER, {"T": ctype_of(dt)})))
        out.append((f"topk_{dt}", _specialise(_TOPK, {"T": ctype_of(dt)})))
    return out


def _kernel(source, subs, name):
    return raw_kernel(_specialise(source, subs), name)


def _warp_launch(kernel, n_warps, args):
    if n_warps <= 0:
        return
    grid = (int(n_warps) * 32 + _WARP_BLOCK - 1) // _WARP_BLOCK
    kernel((grid,), (_WARP_BLOCK,), args)


def pool(out, index, data, offsets, pad, pool_type):
    """``sequence_pool`` on the device: ``out`` (and ``index``) from ``data`` over ``offsets``."""
    cp = get_cupy()
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
        kernel = raw_kernel(_POOL_PICK, "lodarrow_seq_pool_pick")
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
        subs = {"IN_T": ctype_of(x.dtype), "OUT_T": ctype_of(target.dtype),
                **(_FLOAT_SUM if x.dtype.kind == "f" else _INT_SUM)}
        if d == 1:
            kernel = _kernel(_POOL_SUM, subs, "lodarrow_seq_pool_sum_warp")
            _warp_launch(kernel, n_seq, (target, x, offsets, tpad, i64(n_seq), mode))
        else:
            kernel = _kernel(_POOL_SUM, subs, "lodarrow_seq_pool_sum")
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
    kernel = _kernel(_POOL_EXTREME, {"T": ctype_of(x.dtype)}, "lodarrow_seq_pool_extreme")
    launch_1d(kernel, n_seq * d, (target, idx, x, offsets, tpad, i64(n_seq), i64(d),
                                  np.int32(pool_type == "min"), np.int32(index is not None)))
    if half:
        o[...] = target.astype(cp.float16)


def softmax(out, data, offsets):
    """``sequence_softmax`` on the device (one warp per sequence)."""
    cp = get_cupy()
    n = data.shape[0]
    n_seq = offsets.shape[0] - 1
    if n == 0:
        return
    x = cp.ascontiguousarray(data).reshape(n)
    half = x.dtype == np.float16
    if half:
        x = x.astype(cp.float32)
    comp = "float" if x.dtype == np.float32 else "double"
    target = out.reshape(n) if not half else cp.empty(n, dtype=cp.float32)
    kernel = _kernel(_SOFTMAX, {"IN_T": ctype_of(x.dtype), "OUT_T": comp, "COMP_T": comp},
                     "lodarrow_seq_softmax")
    _warp_launch(kernel, n_seq, (target, x, offsets, np.int64(n_seq)))
    if half:
        out.reshape(n)[...] = target.astype(cp.float16)


def conv(out, data, offsets, w, pad, b, cs, cl, up, chunk_elements):
    """``sequence_conv`` on the device: gather context blocks, one cuBLAS product each."""
    cp = get_cupy()
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
    use_pad = pad is not None
    padding = pad if use_pad else cp.empty((1, d), dtype=compute)
    data = cp.ascontiguousarray(data)
    kernel = _kernel(_CONV_GATHER, {"T": ctype_of(compute)}, "lodarrow_seq_conv_gather")
    i64 = np.int64
    for r0 in range(0, n, step):
        r1 = min(n, r0 + step)
        ctx = ctx_buf[:r1 - r0]
        if data.dtype == compute:
            src, base = data, 0
        else:
            base = min(max(0, r0 + cs), n)
            src = data[base:max(base, min(n, r1 + cs + cl - 1))].astype(compute)
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


def topk_avg_pool(out, data, in_off, row_off, col_off, ks, channels):
    """``sequence_topk_avg_pooling`` on the device (one thread per output row and channel)."""
    cp = get_cupy()
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
    kernel = _kernel(_TOPK, {"T": ctype_of(x.dtype)}, "lodarrow_seq_topk_avg")
    i64 = np.int64
    launch_1d(kernel, total_rows * channels,
              (target, x, in_off, row_off, col_off, cp.asarray(ks), i64(ks.shape[0]),
               i64(int(ks.max())), i64(n_seq), i64(total_rows), i64(channels)))
    if target is not out:
        out[...] = target.astype(out.dtype)
