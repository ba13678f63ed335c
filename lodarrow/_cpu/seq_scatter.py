"""``sequence_scatter`` on the CPU: the launcher of ``_ext/seq_scatter.pyx`` (the twin of
``lodarrow/_cuda/seq_scatter.py``)."""

from lodarrow._ext import seq_scatter
from lodarrow._threads import threads_for

__all__ = ["ENTRIES", "scatter"]


def scatter(out, src, ids, updates, offsets):
    """``out`` = ``src`` with ``out[i, ids[p]] += updates[p]`` for index sequence ``i``.

    Returns the first position of an id outside ``[0, width)`` (checked in the kernel's
    pass; ``out`` is then unfinished), or -1.
    """
    return seq_scatter.sequence_scatter(out, src, ids, updates, offsets,
                                        threads_for(ids.shape[0] + out.size))


#: Kernel name -> entry point (``_backends/cpu.py`` builds its table from these).
ENTRIES = {
    "scatter": scatter,
}
