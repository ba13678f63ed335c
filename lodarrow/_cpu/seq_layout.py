"""Layout operators on the CPU: launchers of ``_ext/seq_layout.pyx`` (the twin of
``lodarrow/_cuda/seq_layout.py``): pad, unpad, reverse, enumerate, erase, mask.

Values that are only moved go through the kernels as bytes or same-width integer words, so
one specialisation serves every dtype and the results are bit-identical to the GPU's.
"""

import numpy as np

from lodarrow._cpu import flat_bytes
from lodarrow._ext import seq_layout
from lodarrow._threads import plan_threads, threads_for

__all__ = ["ENTRIES", "pad", "unpad", "reverse", "enumerate_windows", "erase", "mask"]


def pad(out, data, pad_row, offsets, padded_length):
    """Sequence ``s`` of ``data`` -> ``out[s, :len]``, the rest rows of ``pad_row``."""
    if out.size == 0:
        return
    # Every sequence writes padded_length rows: balance the chunks by sequence count.
    n_threads, bounds = plan_threads(offsets, out.size, by_rows=False)
    seq_layout.pad(flat_bytes(out), flat_bytes(data), flat_bytes(pad_row), offsets, bounds,
                   padded_length, pad_row.nbytes, n_threads)


def unpad(out, data, offsets):
    """The first ``len[s]`` rows of ``data[s]`` -> rows ``[offsets[s], offsets[s + 1])``."""
    if out.size == 0:
        return
    n_threads, bounds = plan_threads(offsets, out.size)
    width = data.itemsize
    for s in data.shape[2:]:
        width *= s
    seq_layout.unpad(flat_bytes(out), flat_bytes(data), offsets, bounds, data.shape[1],
                     width, n_threads)


def reverse(out, data, offsets):
    """``out`` = ``data`` with every sequence's rows reversed."""
    if out.size == 0:
        return
    n_threads, bounds = plan_threads(offsets, out.size)
    width = out.nbytes // out.shape[0]
    seq_layout.reverse(flat_bytes(out), flat_bytes(data), offsets, bounds, width, n_threads)


# Same-size integer containers: the kernel moves values bit for bit, so these four
# specialisations serve every dtype (bool, float16 and floats included).
_CONTAINERS = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.int32),
               8: np.dtype(np.int64)}


def enumerate_windows(out, data, pad_value, offsets):
    """Row ``t`` of ``out`` = ``data[t:t + win]`` cut at its sequence's end, then padding."""
    if out.size == 0:
        return
    box = _CONTAINERS[data.itemsize]
    n_threads, bounds = plan_threads(offsets, out.size)
    seq_layout.enumerate_windows(out.reshape(-1).view(box),
                                 np.ascontiguousarray(data).reshape(-1).view(box),
                                 pad_value.reshape(1).view(box), offsets, bounds, out.shape[1],
                                 n_threads)


#: Integer tokens spanning at most this many values are looked up in a byte table.
_TABLE_SPAN = 1 << 16
_NO_TABLE = np.zeros(0, dtype=np.uint8)


def _token_table(toks):
    """``(table, low)``: ``table[v - low] == 1`` for the integer tokens, or an empty table.

    The table ends with a zero sentinel, where the kernel sends every out-of-range value.
    """
    if toks.dtype.kind not in "iu":
        return _NO_TABLE, 0
    low, high = int(toks[0]), int(toks[-1])
    if high - low >= _TABLE_SPAN:
        return _NO_TABLE, 0
    table = np.zeros(high - low + 2, dtype=np.uint8)
    table[toks.astype(np.int64) - low] = 1
    return table, low


def erase(values, cmp, toks, offsets):
    """``(kept values, new host offsets)``: ``values`` without the rows whose ``cmp`` value
    is one of the sorted ``toks`` (``cmp`` is ``values`` in a comparable dtype)."""
    table, low = _token_table(toks)
    n_seq = offsets.shape[0] - 1
    n_threads, bounds = plan_threads(offsets, cmp.shape[0])
    counts = np.empty(n_seq, dtype=np.int64)
    seq_layout.erase_count(counts, cmp, toks, table, low, offsets, bounds, n_threads)
    new_offsets = np.empty(n_seq + 1, dtype=np.int64)
    new_offsets[0] = 0
    np.cumsum(counts, out=new_offsets[1:])
    kept = np.empty(int(new_offsets[-1]), dtype=cmp.dtype)
    if kept.size:
        seq_layout.erase_copy(kept, cmp, toks, table, low, offsets, new_offsets, bounds,
                              n_threads)
    if kept.dtype != values.dtype:
        kept = kept.astype(values.dtype)
    return kept, new_offsets


_ONE_BITS = {}  # dtype -> the bit pattern of 1 in it, as an unsigned int


def _one_bits(dtype):
    bits = _ONE_BITS.get(dtype)
    if bits is None:
        bits = int(np.ones(1, dtype=dtype).view(f"u{dtype.itemsize}")[0])
        _ONE_BITS[dtype] = bits
    return bits


def mask(out, lengths, maxlen):
    """``out[i, j] = j < lengths[i]`` in ``out``'s dtype (``lengths`` flat, not float16)."""
    if out.size == 0:
        return
    seq_layout.mask(out.reshape(-1).view(np.uint8), lengths, maxlen, out.itemsize,
                    _one_bits(out.dtype), threads_for(out.size))


#: Kernel name -> entry point (``_backends/cpu.py`` builds its table from these).
ENTRIES = {
    "pad": pad,
    "unpad": unpad,
    "reverse": reverse,
    "enumerate_windows": enumerate_windows,
    "erase": erase,
    "mask": mask,
}
