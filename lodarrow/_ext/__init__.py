"""Compiled kernels (built from ``_ext/*.pyx``); private, called only by lodarrow's Python layer."""
