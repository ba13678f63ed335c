"""The Arrow C data interface import of ``_ext/arrow_bridge.pyx``: a LoDTensor's nested array in
one call (``lodarrow/_interop/_arrow.py``'s ``to_arrow``).  Private (a leading underscore) as it
is no operator launcher: no ``ENTRIES``, no CUDA twin; its arguments are trusted."""

from lodarrow._ext.arrow_bridge import import_nested

__all__ = ["import_nested"]
