"""CuPy twins of ``_ext/seq_layout.pyx``: reverse, pad, unpad, mask, enumerate, erase.

One thread per output element, each computing where its value comes from; no atomics, so
every result is deterministic and bit-identical to the CPU kernels.  Kernels are compiled once
per dtype (``lodarrow._cuda.elementwise_kernel`` caches them, CuPy caches per device).  The
callers pass offsets already on the device (``LoDTensor._device_offsets_for``).
"""

import math

from lodarrow._backend import get_cupy
from lodarrow._cuda import elementwise_kernel

__all__ = ["reverse", "pad", "unpad", "mask", "enumerate_windows", "erase"]

# The sequence holding ``row``: the last s in [0, n_seq) with off[s] <= row.  Only called for
# rows that exist, so n_seq >= 1 and off[n_seq] > row.
_SEQ_OF = r"""
template <typename A>
__device__ long long lodarrow_seq_of(const A& off, long long n_seq, long long row) {
    long long lo = 0, hi = n_seq - 1;
    while (lo < hi) {
        long long mid = lo + (hi - lo + 1) / 2;
        if (off[mid] <= row) lo = mid; else hi = mid - 1;
    }
    return lo;
}
"""


def _width(shape):
    """Elements per row of an array of ``shape`` (rows first)."""
    return math.prod(shape[1:])


def reverse(out, data, offsets):
    """``out`` = ``data`` with every sequence's rows reversed (``out.size > 0``)."""
    kernel = elementwise_kernel(
        "raw T x, raw int64 off, int64 n_seq, int64 width",
        "T out",
        """
        long long r = i / width, c = i % width;
        long long s = lodarrow_seq_of(off, n_seq, r);
        out = x[(off[s] + off[s + 1] - 1 - r) * width + c];
        """,
        "lodarrow_seq_reverse",
        preamble=_SEQ_OF,
    )
    kernel(data, offsets, offsets.shape[0] - 1, _width(data.shape), out)


def pad(out, data, pad_row, offsets, padded_length):
    """Sequence ``s`` of ``data`` -> ``out[s, :len]``, the rest rows of ``pad_row``."""
    kernel = elementwise_kernel(
        "raw T x, raw int64 off, raw T pad, int64 padded, int64 width",
        "T out",
        """
        long long c = i % width, rest = i / width;
        long long p = rest % padded, s = rest / padded;
        long long a = off[s];
        out = p < off[s + 1] - a ? x[(a + p) * width + c] : pad[c];
        """,
        "lodarrow_seq_pad",
    )
    kernel(data, offsets, pad_row, padded_length, _width(out.shape[1:]), out)


def unpad(out, data, offsets):
    """The first ``len[s]`` rows of ``data[s]`` -> rows ``[offsets[s], offsets[s + 1])``."""
    kernel = elementwise_kernel(
        "raw T x, raw int64 off, int64 n_seq, int64 padded, int64 width",
        "T out",
        """
        long long r = i / width, c = i % width;
        long long s = lodarrow_seq_of(off, n_seq, r);
        out = x[(s * padded + (r - off[s])) * width + c];
        """,
        "lodarrow_seq_unpad",
        preamble=_SEQ_OF,
    )
    kernel(data, offsets, offsets.shape[0] - 1, data.shape[1], _width(out.shape), out)


def mask(out, lengths, maxlen):
    """``out[i, j] = j < lengths[i]`` in ``out``'s dtype (``lengths`` flat, not float16)."""
    if lengths.dtype.kind == "f":
        test = "(double)j < (double)x[i / m]"  # exact for every j an output can have
    else:
        test = "j < (long long)x[i / m]"
    kernel = elementwise_kernel(
        "raw X x, int64 m",
        "Y out",
        f"long long j = i % m; out = ({test}) ? (Y)1 : (Y)0;",
        "lodarrow_seq_mask",
    )
    kernel(lengths, maxlen, out)


def enumerate_windows(out, data, pad_value, offsets):
    """Row ``t`` of ``out`` = ``data[t:t + win]`` cut at its sequence's end, then ``pad``."""
    kernel = elementwise_kernel(
        "raw T x, raw int64 off, raw T pad, int64 n_seq, int64 win",
        "T out",
        """
        long long t = i / win, k = i % win;
        long long s = lodarrow_seq_of(off, n_seq, t);
        out = t + k < off[s + 1] ? x[t + k] : pad[0];
        """,
        "lodarrow_seq_enumerate",
        preamble=_SEQ_OF,
    )
    kernel(data, offsets, pad_value, offsets.shape[0] - 1, out.shape[1], out)


def erase(values, tokens, offsets):
    """Keep mask and new last-level offsets (host int64) for erasing ``tokens`` (sorted).

    ``values`` is the flat data in a comparable dtype (float16 widened to float32).
    Returns ``(keep, new_offsets)``; ``keep`` is a bool device array.
    """
    cupy = get_cupy()
    kernel = elementwise_kernel(
        "T x, raw T tok, int64 n_tok",
        "bool keep",
        """
        long long lo = 0, hi = n_tok;
        while (lo < hi) {
            long long mid = lo + (hi - lo) / 2;
            if (tok[mid] < x) lo = mid + 1; else hi = mid;
        }
        keep = !(lo < n_tok && tok[lo] == x);
        """,
        "lodarrow_seq_erase_keep",
    )
    keep = cupy.empty(values.shape[0], dtype=cupy.bool_)
    if values.shape[0]:
        kernel(values, tokens, tokens.shape[0], keep)
    # Running count of kept rows, read at every offset: the new offsets (integer scan,
    # deterministic).
    running = cupy.zeros(values.shape[0] + 1, dtype=cupy.int64)
    if values.shape[0]:
        cupy.cumsum(keep, dtype=cupy.int64, out=running[1:])
    return keep, running[offsets].get()
