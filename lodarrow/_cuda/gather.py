"""CuPy twins of ``_ext/seq_gather.pyx`` and ``_ext/seq_scatter.pyx``.

The gather kernels move whole rows as machine words: one thread per output word finds its
sequence by a binary search in the (device, cached) offsets, so the work is balanced however
the lengths are spread, and every write happens exactly once (deterministic, no atomics).
The word is the widest of 16/8/4/2/1 bytes that divides the row width and both base
addresses, so D=1 float32 moves 4-byte words and D=16 float32 16-byte ones.

The scatter kernel runs one thread per index sequence: sequence ``i`` only writes row ``i``,
and adds its updates in order, so duplicates accumulate exactly as on the CPU.

Only imported when data is on the GPU (it imports CuPy through ``lodarrow._cuda``).
"""

import numpy as np

from lodarrow._cuda import ctype_of, launch_1d, raw_kernel

__all__ = ["expand_rows", "expand_blocks", "gather_blocks", "place_blocks", "scatter"]

_WORDS = ((16, "uint4"), (8, "unsigned long long"), (4, "unsigned int"),
          (2, "unsigned short"), (1, "unsigned char"))

_PRELUDE = r"""
typedef {word} word_t;

// The sequence i of `off` (n sequences) that holds position r: the largest i with
// off[i] <= r.  Callers guarantee off[0] <= r < off[n]; empty sequences are skipped.
__device__ __forceinline__ long long lodarrow_seq_of(const long long* off, long long n,
                                                     long long r) {{
    long long lo = 0, hi = n - 1;
    while (lo < hi) {{
        long long mid = (lo + hi + 1) >> 1;
        if (off[mid] <= r) lo = mid; else hi = mid - 1;
    }}
    return lo;
}}
"""

_LOOP = ("for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total; "
         "e += (long long)blockDim.x * gridDim.x)")

_EXPAND_ROWS = _PRELUDE + r"""
extern "C" __global__ void lodarrow_expand_rows(word_t* out, const word_t* src,
        const long long* rep_off, long long n, long long total, long long wpr) {{
    {loop} {{
        long long r = e / wpr, c = e - r * wpr;
        long long i = lodarrow_seq_of(rep_off, n, r);
        out[e] = src[i * wpr + c];
    }}
}}
"""

_EXPAND_BLOCKS = _PRELUDE + r"""
extern "C" __global__ void lodarrow_expand_blocks(word_t* out, const word_t* src,
        const long long* src_off, const long long* rep_off, const long long* out_lod,
        long long n, long long n_out_seq, long long total, long long wpr) {{
    {loop} {{
        long long r = e / wpr, c = e - r * wpr;
        long long j = lodarrow_seq_of(out_lod, n_out_seq, r);   // output sequence
        long long i = lodarrow_seq_of(rep_off, n, j);           // the block it copies
        out[e] = src[(src_off[i] + (r - out_lod[j])) * wpr + c];
    }}
}}
"""

_GATHER_BLOCKS = _PRELUDE + r"""
extern "C" __global__ void lodarrow_gather_blocks(word_t* out, const word_t* src,
        const long long* src_start, const long long* out_off, long long n, long long total,
        long long wpr) {{
    {loop} {{
        long long r = e / wpr, c = e - r * wpr;
        long long i = lodarrow_seq_of(out_off, n, r);
        out[e] = src[(src_start[i] + (r - out_off[i])) * wpr + c];
    }}
}}
"""

_PLACE_BLOCKS = _PRELUDE + r"""
extern "C" __global__ void lodarrow_place_blocks(word_t* out, const word_t* src,
        const long long* src_off, const long long* cursor, long long n, long long total,
        long long wpr) {{
    {loop} {{
        long long r = e / wpr, c = e - r * wpr;
        long long i = lodarrow_seq_of(src_off, n, r);
        out[(cursor[i] + (r - src_off[i])) * wpr + c] = src[e];
    }}
}}
"""

_SCATTER = r"""
typedef {ctype} value_t;

extern "C" __global__ void lodarrow_seq_scatter(value_t* out, const long long* ids,
        const value_t* updates, const long long* offsets, long long n, long long width) {{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    value_t* row = out + i * width;
    for (long long p = offsets[i]; p < offsets[i + 1]; ++p) {{
        row[ids[p]] += updates[p];
    }}
}}
"""


def _word(width, *arrays):
    """(bytes, C type) of the widest word dividing ``width`` and every base address."""
    for size, ctype in _WORDS:
        if width % size == 0 and all(a.data.ptr % size == 0 for a in arrays):
            return size, ctype
    return _WORDS[-1]


def _kernel(template, name, word):
    return raw_kernel(template.format(word=word, loop=_LOOP), name)


def _i64(value):
    return np.int64(value)


def expand_rows(out, src, rep_off):
    """Row ``i`` of ``src`` into output rows ``[rep_off[i], rep_off[i + 1])`` (uint8 views)."""
    width = out.shape[1]
    if out.shape[0] == 0 or width == 0:
        return
    size, word = _word(width, out, src)
    wpr = width // size
    total = out.shape[0] * wpr
    kernel = _kernel(_EXPAND_ROWS, "lodarrow_expand_rows", word)
    launch_1d(kernel, total, (out, src, rep_off, _i64(rep_off.shape[0] - 1), _i64(total),
                              _i64(wpr)))


def expand_blocks(out, src, src_off, rep_off, out_lod):
    """Block ``i`` of ``src`` repeated ``rep_off[i + 1] - rep_off[i]`` times (uint8 views)."""
    width = out.shape[1]
    if out.shape[0] == 0 or width == 0:
        return
    size, word = _word(width, out, src)
    wpr = width // size
    total = out.shape[0] * wpr
    kernel = _kernel(_EXPAND_BLOCKS, "lodarrow_expand_blocks", word)
    launch_1d(kernel, total, (out, src, src_off, rep_off, out_lod,
                              _i64(rep_off.shape[0] - 1), _i64(out_lod.shape[0] - 1),
                              _i64(total), _i64(wpr)))


def gather_blocks(out, src, src_start, out_off):
    """Output rows ``[out_off[i], out_off[i + 1])`` from ``src`` rows at ``src_start[i]``."""
    width = out.shape[1]
    if out.shape[0] == 0 or width == 0:
        return
    size, word = _word(width, out, src)
    wpr = width // size
    total = out.shape[0] * wpr
    kernel = _kernel(_GATHER_BLOCKS, "lodarrow_gather_blocks", word)
    launch_1d(kernel, total, (out, src, src_start, out_off, _i64(out_off.shape[0] - 1),
                              _i64(total), _i64(wpr)))


def place_blocks(out, src, src_off, cursor):
    """``src`` block ``i`` to output row ``cursor[i]``; then ``cursor`` moves past the blocks."""
    width = out.shape[1]
    if src.shape[0] and width:
        size, word = _word(width, out, src)
        wpr = width // size
        total = src.shape[0] * wpr
        kernel = _kernel(_PLACE_BLOCKS, "lodarrow_place_blocks", word)
        launch_1d(kernel, total, (out, src, src_off, cursor, _i64(src_off.shape[0] - 1),
                                  _i64(total), _i64(wpr)))
    cursor += src_off[1:] - src_off[:-1]


def scatter(out, ids, updates, offsets):
    """``out[i, ids[p]] += updates[p]`` for the positions ``p`` of index sequence ``i``."""
    n = offsets.shape[0] - 1
    if n <= 0 or ids.shape[0] == 0:
        return
    code = _SCATTER.format(ctype=ctype_of(out.dtype))
    kernel = raw_kernel(code, "lodarrow_seq_scatter")
    launch_1d(kernel, n, (out, ids, updates, offsets, _i64(n), _i64(out.shape[1])))
