"""CuPy kernels: compiled once per (source, name) and cached; CuPy caches per device.

Imported only when data is on the GPU.  Kernel names are prefixed ``lodarrow_``.
"""

import functools

from lodarrow._backend import get_cupy

__all__ = ["raw_kernel", "elementwise_kernel", "ctype_of", "launch_1d"]

_CTYPES = {
    "bool": "bool", "int8": "signed char", "uint8": "unsigned char", "int16": "short",
    "uint16": "unsigned short", "int32": "int", "int64": "long long", "float16": "__half",
    "float32": "float", "float64": "double",
}


def ctype_of(dtype):
    """The CUDA C type name of a NumPy dtype."""
    import numpy as np

    return _CTYPES[np.dtype(dtype).name]


@functools.lru_cache(maxsize=None)
def raw_kernel(code, name, options=()):
    """A cached ``cupy.RawKernel`` (``code`` is complete CUDA C, ``name`` an extern "C" symbol)."""
    cupy = get_cupy()
    return cupy.RawKernel(code, name, options=tuple(options) or ("--std=c++14",))


@functools.lru_cache(maxsize=None)
def elementwise_kernel(in_params, out_params, operation, name, preamble=""):
    """A cached ``cupy.ElementwiseKernel``."""
    cupy = get_cupy()
    return cupy.ElementwiseKernel(in_params, out_params, operation, name, preamble=preamble)


def launch_1d(kernel, n, args, block=256):
    """Launch ``kernel`` with one thread per item of ``n`` (nothing to do when ``n == 0``)."""
    if n <= 0:
        return
    grid = (int(n) + block - 1) // block
    kernel((grid,), (block,), args)
