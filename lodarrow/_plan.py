"""Host planning on the LoD: what an operator works out from the offsets before a kernel runs.

Offsets live on the host on either backend (``LoDTensor.offsets``), so this planning is the
same for a CPU and a GPU tensor; operators call it directly, and the backends' kernel tables
hold only kernels.  The two plans that walk every sequence run in Cython
(``lodarrow._ext.seq_gather``), the rest in NumPy.
"""

from lodarrow._ext import seq_gather

__all__ = ["expand_lod", "slice_plan", "conv_source_rows"]


def expand_lod(x_off, rep_off, out_lod):
    """The offsets of ``expand_blocks``' output, into ``out_lod`` (host int64 arrays)."""
    seq_gather.expand_lod(x_off, rep_off, out_lod)


def slice_plan(seq_off, offset, length, src_start, out_off):
    """Source starts and output offsets of a slice, into ``src_start`` and ``out_off``.

    Returns the position of the first sequence whose slice falls outside it, or -1 (the
    plan is unfinished then); the operator turns that position into its error.
    """
    return seq_gather.slice_plan(seq_off, offset, length, src_start, out_off)


def conv_source_rows(r0, r1, n, cs, cl):
    """``(base, stop)``: the rows of an ``n``-row input that the contexts of output rows
    ``[r0, r1)`` can reach (context start ``cs``, length ``cl``), clipped to the input.

    ``sequence_conv`` converts only these rows to the compute dtype, block by block, on either
    backend.
    """
    base = min(max(0, r0 + cs), n)
    return base, max(base, min(n, r1 + cs + cl - 1))
