"""Row gathers on the CPU: the launchers of ``_ext/seq_gather.pyx`` (the twin of
``lodarrow/_cuda/seq_gather.py``).

Rows move as bytes (``row_bytes`` views), so one kernel serves every dtype; threaded calls
take chunks balanced by output rows.
"""

from lodarrow._ext import seq_gather
from lodarrow._threads import row_bounds, threads_for

__all__ = ["ENTRIES", "expand_rows", "expand_blocks", "gather_blocks", "concat"]


def expand_rows(out, src, rep_off):
    """Row ``i`` of ``src`` into output rows ``[rep_off[i], rep_off[i + 1])`` (uint8 rows)."""
    if out.size == 0:
        return
    threads = threads_for(out.size)
    seq_gather.expand_rows(out, src, rep_off, row_bounds(rep_off, threads), threads)


def expand_blocks(out, src, src_off, rep_off, out_lod):
    """Block ``i`` of ``src`` repeated ``rep_off[i + 1] - rep_off[i]`` times (uint8 rows)."""
    if out.size == 0:
        return
    threads = threads_for(out.size)
    # Balance chunks by output rows: block i writes out_lod[rep_off[i]] .. out_lod[rep_off[i+1]]
    # (that gather is made only when the call is threaded).
    bounds = row_bounds(out_lod[rep_off], threads) if threads > 1 else None
    seq_gather.expand_blocks(out, src, src_off, rep_off, out_lod, bounds, threads)


def gather_blocks(out, src, src_start, out_off):
    """Output rows ``[out_off[i], out_off[i + 1])`` from ``src`` rows at ``src_start[i]``."""
    if out.size == 0:
        return
    threads = threads_for(out.size)
    seq_gather.gather_blocks(out, src, src_start, out_off, row_bounds(out_off, threads),
                             threads)


def concat(out, srcs, src_offsets, out_off):
    """Output sequence ``i`` = sequence ``i`` of every ``srcs[k]``, in order (uint8 rows)."""
    if out.size == 0:
        return
    threads = threads_for(out.size)
    seq_gather.concat_blocks(out, srcs, src_offsets, out_off, row_bounds(out_off, threads),
                             threads)


#: Kernel name -> entry point (``_backends/cpu.py`` builds its table from these).
ENTRIES = {
    "expand_rows": expand_rows,
    "expand_blocks": expand_blocks,
    "gather_blocks": gather_blocks,
    "concat": concat,
}
