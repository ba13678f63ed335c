"""Backends: where an op runs ("cpu" or "cuda") is decided by where its data lives.

CuPy is imported lazily, only when data is on the GPU or a CUDA place is requested.
"""

import functools
import sys

from lodarrow._errors import BackendError

__all__ = ["get_cupy", "require_gpu", "is_cupy_array", "backend_of", "array_namespace"]

_GPU_HINT = "install the GPU extra: pip install 'lodarrow[gpu]' (or any cupy-cudaXXx wheel)"


@functools.cache
def _import_cupy():
    try:
        import cupy
    except ImportError as exc:  # includes a CuPy that fails to load its CUDA libraries
        return None, exc
    return cupy, None


def get_cupy(what="this operation"):
    """Return the ``cupy`` module, or raise ``BackendError`` saying that CuPy is missing."""
    cupy, exc = _import_cupy()
    if cupy is None:
        raise BackendError(f"{what} needs CuPy, which is not installed or failed to import "
                           f"({exc}); {_GPU_HINT}")
    return cupy


def require_gpu(device_id, what):
    """Raise ``BackendError`` naming what is missing (CuPy, a GPU, that device) for ``what``."""
    cupy = get_cupy(what)
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CUDARuntimeError when there is no driver or no device
        raise BackendError(f"{what} needs a CUDA GPU, but CuPy finds none ({exc})") from None
    if count == 0:
        raise BackendError(f"{what} needs a CUDA GPU, but CuPy finds none")
    if device_id >= count:
        raise BackendError(f"{what}: there is no CUDA device {device_id} "
                           f"(this machine has {count})")
    return cupy


def is_cupy_array(obj):
    """True for a ``cupy.ndarray``, without importing CuPy."""
    cls = type(obj)
    return cls.__name__ == "ndarray" and cls.__module__.startswith("cupy") and "cupy" in sys.modules


def array_namespace(backend):
    """``numpy`` for "cpu", ``cupy`` for "cuda"."""
    if backend == "cuda":
        return get_cupy()
    import numpy

    return numpy


def backend_of(op, **arrays):
    """Return "cpu" or "cuda" for the named inputs of ``op``; raise ``ValueError`` on a mix.

    Values may be LoDTensors, arrays, or None (ignored).
    """
    found = {}
    for name, obj in arrays.items():
        if obj is None:
            continue
        data = getattr(obj, "_data", obj)
        found[name] = "cuda" if is_cupy_array(data) else "cpu"
    kinds = set(found.values())
    if len(kinds) > 1:
        on_gpu = sorted(k for k, v in found.items() if v == "cuda")
        on_cpu = sorted(k for k, v in found.items() if v == "cpu")
        raise ValueError(
            f"{op}: inputs live on different devices ({', '.join(on_gpu)} on the GPU, "
            f"{', '.join(on_cpu)} on the CPU); move them to one place first, "
            f"e.g. t.cuda() / t.cpu() or cupy.asarray(a)"
        )
    return kinds.pop() if kinds else "cpu"
