"""Row gathers on the GPU: launchers of ``seq_gather.cu`` (the twin of ``_ext/seq_gather.pyx``).

Rows move as machine words: the widest of 16/8/4/2/1 bytes that divides the row width and both
base addresses, so D=1 float32 moves 4-byte words and D=16 float32 16-byte ones.  Arrays are
C-contiguous ``uint8`` row views; offsets are on the device.
"""

import numpy as np

from lodarrow._cuda import launch_1d, module
from lodarrow._cupy import get_cupy

__all__ = ["ENTRIES", "KERNELS", "expand_rows", "expand_blocks", "gather_blocks", "place_blocks"]

_GROUP = "seq_gather"
_WORDS = ((16, "uint4"), (8, "unsigned long long"), (4, "unsigned int"),
          (2, "unsigned short"), (1, "unsigned char"))
_NAMES = ("lodarrow_expand_rows", "lodarrow_expand_blocks", "lodarrow_gather_blocks",
          "lodarrow_place_blocks")

#: Every kernel instantiation this module launches (all compiled together, once).
KERNELS = tuple(f"{name}<{word}>" for name in _NAMES for _, word in _WORDS)


def _word(width, *arrays):
    """(bytes, C type) of the widest word dividing ``width`` and every base address."""
    for size, ctype in _WORDS:
        if width % size == 0 and all(a.data.ptr % size == 0 for a in arrays):
            return size, ctype
    return _WORDS[-1]


def _kernel(name, word):
    return module(_GROUP, KERNELS).get_function(f"{name}<{word}>")


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
    launch_1d(_kernel("lodarrow_expand_rows", word), total,
              (out, src, rep_off, _i64(rep_off.shape[0] - 1), _i64(total), _i64(wpr)))


def expand_blocks(out, src, src_off, rep_off, out_lod):
    """Block ``i`` of ``src`` repeated ``rep_off[i + 1] - rep_off[i]`` times (uint8 views)."""
    width = out.shape[1]
    if out.shape[0] == 0 or width == 0:
        return
    size, word = _word(width, out, src)
    wpr = width // size
    total = out.shape[0] * wpr
    launch_1d(_kernel("lodarrow_expand_blocks", word), total,
              (out, src, src_off, rep_off, out_lod, _i64(rep_off.shape[0] - 1),
               _i64(out_lod.shape[0] - 1), _i64(total), _i64(wpr)))


def gather_blocks(out, src, src_start, out_off):
    """Output rows ``[out_off[i], out_off[i + 1])`` from ``src`` rows at ``src_start[i]``."""
    width = out.shape[1]
    if out.shape[0] == 0 or width == 0:
        return
    size, word = _word(width, out, src)
    wpr = width // size
    total = out.shape[0] * wpr
    launch_1d(_kernel("lodarrow_gather_blocks", word), total,
              (out, src, src_start, out_off, _i64(out_off.shape[0] - 1), _i64(total),
               _i64(wpr)))


def place_blocks(out, src, src_off, cursor):
    """``src`` block ``i`` to output row ``cursor[i]``; then ``cursor`` moves past the blocks."""
    width = out.shape[1]
    if src.shape[0] and width:
        size, word = _word(width, out, src)
        wpr = width // size
        total = src.shape[0] * wpr
        launch_1d(_kernel("lodarrow_place_blocks", word), total,
                  (out, src, src_off, cursor, _i64(src_off.shape[0] - 1), _i64(total),
                   _i64(wpr)))
    cursor += src_off[1:] - src_off[:-1]


# --------------------------------------------------------------------------- entries
def _gather_blocks(out, src, src_start, out_off):
    if out.size == 0:
        return
    gather_blocks(out, src, get_cupy().asarray(src_start), out_off)


def _concat(out, srcs, src_offsets, out_off):
    if out.size == 0:
        return
    cursor = out_off[:-1].copy()
    for src, off in zip(srcs, src_offsets):
        place_blocks(out, src, off, cursor)


def _expand_rows(out, src, rep_off):
    if out.size == 0:
        return
    expand_rows(out, src, rep_off)


def _expand_blocks(out, src, src_off, rep_off, out_lod):
    if out.size == 0:
        return
    expand_blocks(out, src, src_off, rep_off, out_lod)


#: Kernel name -> entry point, the arguments of the CPU twin's (``lodarrow/_cpu/seq_gather.py``).
ENTRIES = {
    "expand_rows": _expand_rows,
    "expand_blocks": _expand_blocks,
    "gather_blocks": _gather_blocks,
    "concat": _concat,
}
