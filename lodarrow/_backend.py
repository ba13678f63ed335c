"""Transitional alias of :mod:`lodarrow._backends` for modules not yet moved to it.

``lodarrow._cuda`` and the Arrow decoder still import ``get_cupy`` / ``is_cupy_array`` from
here; new code imports ``lodarrow._backends``.  Delete this file once nothing imports it.
"""

from lodarrow._backends import get_cupy, is_cupy_array

__all__ = ["get_cupy", "is_cupy_array"]
