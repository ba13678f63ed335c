"""CuPy kernels: the CUDA sources are ``lodarrow/_cuda/<group>.cu``, named after the CPU kernels'
``_ext/<group>.pyx``, with their launchers in ``lodarrow/_cuda/<group>.py``.

Each ``.cu`` file is compiled once into a ``cupy.RawModule`` holding every template
instantiation its launcher lists (cached here per file; CuPy caches per device and on disk).
Imported only when data is on the GPU.  Kernel names are prefixed ``lodarrow_``.
"""

import functools
from pathlib import Path

import numpy as np

from lodarrow._cupy import get_cupy

__all__ = ["cupy", "source", "module", "ctype_of", "WORDS",
           "launch_1d"]

_HERE = Path(__file__).parent
_COMMON = "lodarrow_common.cuh"
_OPTIONS = ("--std=c++17",)

_CTYPES = {
    "bool": "bool", "int8": "signed char", "uint8": "unsigned char", "int16": "short",
    "uint16": "unsigned short", "int32": "int", "uint32": "unsigned int", "int64": "long long",
    "uint64": "unsigned long long", "float32": "float", "float64": "double",
}

#: The unsigned C type moving a value of each byte width (values that are only copied).
WORDS = {1: "unsigned char", 2: "unsigned short", 4: "unsigned int", 8: "unsigned long long"}


def cupy():
    """The ``cupy`` module (imported lazily)."""
    return get_cupy()


def ctype_of(dtype):
    """The CUDA C type name of a NumPy dtype (float16 has none: callers widen it)."""
    return _CTYPES[np.dtype(dtype).name]


def source(group):
    """The CUDA C++ source of ``<group>.cu`` with ``lodarrow_common.cuh`` pasted in place of
    its ``#include`` (so the text CuPy compiles and keys its cache on is the whole source)."""
    text = (_HERE / f"{group}.cu").read_text()
    return text.replace(f'#include "{_COMMON}"', (_HERE / _COMMON).read_text())


@functools.lru_cache(maxsize=None)
def module(group, name_expressions):
    """The ``cupy.RawModule`` of ``<group>.cu`` with these template instantiations (a tuple
    of strings such as ``"lodarrow_seq_topk_avg<float>"``); compiled once, then cached."""
    return get_cupy().RawModule(code=source(group), options=_OPTIONS,
                                name_expressions=name_expressions)


def launch_1d(kernel, n, args, block=256):
    """Launch ``kernel`` with one thread per item of ``n`` (nothing to do when ``n == 0``)."""
    if n <= 0:
        return
    grid = (int(n) + block - 1) // block
    kernel((grid,), (block,), args)
