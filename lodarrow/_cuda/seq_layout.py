"""Layout operators on the GPU: launchers of ``seq_layout.cu`` (the twin of
``_ext/seq_layout.pyx``): reverse, pad, unpad, mask, enumerate, erase.

Values that are only moved go through the kernels as unsigned words of their width (float16 as
16-bit words, bool as bytes), so the results are bit-identical to the CPU kernels.  The callers
pass offsets already on the device (``LoDTensor._device_offsets_for``).
"""

import math

import numpy as np

from lodarrow._cupy import get_cupy
from lodarrow._cuda import WORDS, ctype_of, launch_1d, module

__all__ = ["ENTRIES", "KERNELS", "reverse", "pad", "unpad", "mask", "enumerate_windows", "erase"]

_GROUP = "seq_layout"
_MOVES = ("lodarrow_seq_reverse", "lodarrow_seq_pad", "lodarrow_seq_unpad",
          "lodarrow_seq_enumerate")
# sequence_mask's kernel lengths (``_kernel_lengths`` widens float16 and uint32 / uint64).
_LENGTHS = ("int8", "uint8", "int16", "uint16", "int32", "int64", "float32", "float64")
_COMPARABLE = ("bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
               "float32", "float64")

#: Every kernel instantiation this module launches (all compiled together, once).
KERNELS = (
    *(f"{name}<{word}>" for name in _MOVES for word in WORDS.values()),
    *(f"lodarrow_seq_mask<{ctype_of(dt)}, {word}>" for dt in _LENGTHS for word in WORDS.values()),
    *(f"lodarrow_seq_erase_keep<{ctype_of(dt)}>" for dt in _COMPARABLE),
)


def _kernel(name):
    return module(_GROUP, KERNELS).get_function(name)


def _words(a):
    """``a`` as a flat C-contiguous array of unsigned words of its itemsize."""
    cp = get_cupy()
    return cp.ascontiguousarray(a).reshape(-1).view(np.dtype(f"uint{8 * a.itemsize}"))


def _width(shape):
    """Elements per row of an array of ``shape`` (rows first)."""
    return math.prod(shape[1:])


def _i64(value):
    return np.int64(value)


def reverse(out, data, offsets):
    """``out`` = ``data`` with every sequence's rows reversed (``out.size > 0``)."""
    kernel = _kernel(f"lodarrow_seq_reverse<{WORDS[out.itemsize]}>")
    launch_1d(kernel, out.size, (_words(out), _words(data), offsets,
                                 _i64(offsets.shape[0] - 1), _i64(_width(data.shape)),
                                 _i64(out.size)))


def pad(out, data, pad_row, offsets, padded_length):
    """Sequence ``s`` of ``data`` -> ``out[s, :len]``, the rest rows of ``pad_row``."""
    kernel = _kernel(f"lodarrow_seq_pad<{WORDS[out.itemsize]}>")
    launch_1d(kernel, out.size, (_words(out), _words(data), offsets, _words(pad_row),
                                 _i64(padded_length), _i64(_width(out.shape[1:])),
                                 _i64(out.size)))


def unpad(out, data, offsets):
    """The first ``len[s]`` rows of ``data[s]`` -> rows ``[offsets[s], offsets[s + 1])``."""
    kernel = _kernel(f"lodarrow_seq_unpad<{WORDS[out.itemsize]}>")
    launch_1d(kernel, out.size, (_words(out), _words(data), offsets,
                                 _i64(offsets.shape[0] - 1), _i64(data.shape[1]),
                                 _i64(_width(out.shape)), _i64(out.size)))


def mask(out, lengths, maxlen):
    """``out[i, j] = j < lengths[i]`` in ``out``'s dtype (``lengths`` flat, not float16)."""
    word = WORDS[out.itemsize]
    one = np.ones(1, dtype=out.dtype).view(f"uint{8 * out.itemsize}")[0]   # the bits of 1
    kernel = _kernel(f"lodarrow_seq_mask<{ctype_of(lengths.dtype)}, {word}>")
    launch_1d(kernel, out.size, (_words(out), get_cupy().ascontiguousarray(lengths),
                                 _i64(maxlen), one, _i64(out.size)))


def enumerate_windows(out, data, pad_value, offsets):
    """Row ``t`` of ``out`` = ``data[t:t + win]`` cut at its sequence's end, then ``pad``."""
    kernel = _kernel(f"lodarrow_seq_enumerate<{WORDS[out.itemsize]}>")
    launch_1d(kernel, out.size, (_words(out), _words(data), offsets, _words(pad_value),
                                 _i64(offsets.shape[0] - 1), _i64(out.shape[1]),
                                 _i64(out.size)))


def erase(values, tokens, offsets):
    """Keep mask and new last-level offsets (host int64) for erasing ``tokens`` (sorted).

    ``values`` is the flat data in a comparable dtype (float16 widened to float32), ``tokens``
    in the same dtype.  Returns ``(keep, new_offsets)``; ``keep`` is a bool device array.
    """
    cupy = get_cupy()
    n = values.shape[0]
    keep = cupy.empty(n, dtype=cupy.bool_)
    if n:
        kernel = _kernel(f"lodarrow_seq_erase_keep<{ctype_of(values.dtype)}>")
        launch_1d(kernel, n, (keep, cupy.ascontiguousarray(values),
                              cupy.ascontiguousarray(tokens), _i64(tokens.shape[0]), _i64(n)))
    # Running count of kept rows, read at every offset: the new offsets (integer scan,
    # deterministic).
    running = cupy.zeros(n + 1, dtype=cupy.int64)
    if n:
        cupy.cumsum(keep, dtype=cupy.int64, out=running[1:])
    return keep, running[offsets].get()


# --------------------------------------------------------------------------- entries
def _pad(out, data, pad_row, offsets, padded_length):
    if out.size == 0:
        return
    pad(out, get_cupy().ascontiguousarray(data), pad_row.reshape(-1), offsets, padded_length)


def _unpad(out, data, offsets):
    if out.size == 0:
        return
    unpad(out, get_cupy().ascontiguousarray(data), offsets)


def _reverse(out, data, offsets):
    if out.size == 0:
        return
    reverse(out, get_cupy().ascontiguousarray(data), offsets)


def _enumerate_windows(out, data, pad_value, offsets):
    if out.size == 0:
        return
    enumerate_windows(out, get_cupy().ascontiguousarray(data).reshape(-1),
                      pad_value.reshape(1), offsets)


def _erase(values, cmp, toks, offsets):
    keep, new_offsets = erase(cmp, get_cupy().asarray(toks), offsets)
    return values[keep], new_offsets


def _mask(out, lengths, maxlen):
    if out.size == 0:
        return
    mask(out.reshape(-1), lengths, maxlen)


#: Kernel name -> entry point, the arguments of the CPU twin's (``lodarrow/_cpu/seq_layout.py``).
ENTRIES = {
    "pad": _pad,
    "unpad": _unpad,
    "reverse": _reverse,
    "enumerate_windows": _enumerate_windows,
    "erase": _erase,
    "mask": _mask,
}
