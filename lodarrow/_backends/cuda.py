"""The CUDA backend: CuPy arrays and the kernels of ``lodarrow._cuda``.

``KERNELS`` maps each kernel name to its GPU entry point, taking the same arguments as the
CPU one of the same name (:mod:`lodarrow._backends.cpu`).  Entries are called inside
``CUDA.device(data)``, so what they allocate and launch lands on the data's device.  This
module and ``cpu.py`` are the only ones that name ``lodarrow._cuda`` functions.
"""

from lodarrow._backends import cpu
from lodarrow._cupy import get_cupy
from lodarrow._cuda import (seq_conv, seq_gather, seq_layout, seq_pool, seq_scatter,
                            seq_softmax, seq_topk)

__all__ = ["CUDABackend", "KERNELS"]


class CUDABackend:
    """CUDA device memory: ``cupy`` arrays and the CuPy kernels.

    ``empty(shape, dtype)`` is ``cupy.empty`` (on the current device); ``kernel(name)``
    looks ``name`` up in ``KERNELS``.
    """

    name = "cuda"

    def __init__(self, kernels):
        self.xp = get_cupy()
        self.empty = self.xp.empty
        self.kernel = kernels.__getitem__

    def device(self, data):
        """``data.device``: makes the data's GPU current for allocations and launches."""
        return data.device

    def asarray(self, a):
        """``a`` on the current device (no copy if it is there already)."""
        return self.xp.asarray(a)

    def offsets(self, t, level):
        """Level ``level`` of LoDTensor ``t`` on its device: copied once, cached in ``t``."""
        if level < 0:
            level += t.lod_level  # one cache entry per level
        return t._device_offsets_for(level)

    def __repr__(self):
        return "<lodarrow backend cuda>"


def _cupy():
    return get_cupy()


# --------------------------------------------------------------------------- gather
def gather_blocks(out, src, src_start, out_off):
    if out.size == 0:
        return
    seq_gather.gather_blocks(out, src, _cupy().asarray(src_start), out_off)


def concat(out, srcs, src_offsets, out_off):
    if out.size == 0:
        return
    cursor = out_off[:-1].copy()
    for src, off in zip(srcs, src_offsets):
        seq_gather.place_blocks(out, src, off, cursor)


def expand_rows(out, src, rep_off):
    if out.size == 0:
        return
    seq_gather.expand_rows(out, src, rep_off)


def expand_blocks(out, src, src_off, rep_off, out_lod):
    if out.size == 0:
        return
    seq_gather.expand_blocks(out, src, src_off, rep_off, out_lod)


def scatter(out, src, ids, updates, offsets):
    """One GPU thread per index sequence; returns the first bad id's position, or -1."""
    if src is not out:
        out[...] = src
    return seq_scatter.scatter(out, ids, updates, offsets)


# --------------------------------------------------------------------------- layout
def pad(out, data, pad_row, offsets, padded_length):
    if out.size == 0:
        return
    seq_layout.pad(out, _cupy().ascontiguousarray(data), pad_row.reshape(-1), offsets,
                padded_length)


def unpad(out, data, offsets):
    if out.size == 0:
        return
    seq_layout.unpad(out, _cupy().ascontiguousarray(data), offsets)


def reverse(out, data, offsets):
    if out.size == 0:
        return
    seq_layout.reverse(out, _cupy().ascontiguousarray(data), offsets)


def enumerate_windows(out, data, pad_value, offsets):
    if out.size == 0:
        return
    seq_layout.enumerate_windows(out, _cupy().ascontiguousarray(data).reshape(-1),
                              pad_value.reshape(1), offsets)


def erase(values, cmp, toks, offsets):
    keep, new_offsets = seq_layout.erase(cmp, _cupy().asarray(toks), offsets)
    return values[keep], new_offsets


def mask(out, lengths, maxlen):
    if out.size == 0:
        return
    seq_layout.mask(out.reshape(-1), lengths, maxlen)


# --------------------------------------------------------------------------- numeric
def pool(out, index, data, offsets, pad_row, pool_type):
    seq_pool.pool(out, index, data, offsets, _cupy().asarray(pad_row), pool_type)


def topk_avg_pool(out, data, in_off, row_off, col_off, ks, channels, longest):
    seq_topk.topk_avg_pool(out, data, in_off, row_off, col_off, ks, channels)


def softmax(out, data, offsets):
    seq_softmax.softmax(out, data, offsets)


def conv(out, data, offsets, w, pad_rows, b, cs, cl, up, chunk_elements):
    seq_conv.conv(out, data, offsets, w, pad_rows, b, cs, cl, up, chunk_elements)


#: Kernel name -> CUDA entry point (the registry; ``cpu.KERNELS`` has the same names).
KERNELS = {
    "expand_rows": expand_rows,
    "expand_blocks": expand_blocks,
    "gather_blocks": gather_blocks,
    "concat": concat,
    "scatter": scatter,
    "pad": pad,
    "unpad": unpad,
    "reverse": reverse,
    "enumerate_windows": enumerate_windows,
    "erase": erase,
    "mask": mask,
    "pool": pool,
    "topk_avg_pool": topk_avg_pool,
    "softmax": softmax,
    "conv": conv,
    # Planning on the LoD, which lives on the host on either backend.
    "expand_lod": cpu.expand_lod,
    "slice_plan": cpu.slice_plan,
}

if KERNELS.keys() != cpu.KERNELS.keys():  # a kernel added to one backend only
    raise ImportError(f"lodarrow._backends: cpu and cuda kernels differ: "
                      f"{sorted(KERNELS.keys() ^ cpu.KERNELS.keys())}")
