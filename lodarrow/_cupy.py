"""The CuPy probes: the one place that imports ``cupy`` (a leaf: it imports no lodarrow module
but :mod:`lodarrow._errors`).

CuPy is optional.  Code that may meet GPU data asks :func:`is_cupy_array` (which never imports
CuPy: an array of CuPy's exists only once CuPy is imported), and code that needs CuPy asks
:func:`get_cupy` / :func:`require_gpu`, which raise ``BackendError`` saying what is missing
when the import fails, CuPy that cannot load its CUDA libraries included.
"""

import functools
import sys

import numpy as np

from lodarrow._errors import BackendError

__all__ = ["GPU_HINT", "get_cupy", "get_cupyx", "require_gpu", "is_cupy_array",
           "array_module", "device_of"]

GPU_HINT = ("install the 'gpu' extra (pip install -e '.[gpu]' in the checkout), or any "
            "cupy-cudaXXx wheel")


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
                           f"({exc}); {GPU_HINT}")
    return cupy


def get_cupyx(what="this operation"):
    """Return the ``cupyx`` module (CuPy's extras, pinned memory), as :func:`get_cupy`."""
    get_cupy(what)
    import cupyx

    return cupyx


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
    if cls is np.ndarray:  # the usual answer, without the slower look at ``__module__``
        return False
    return cls.__name__ == "ndarray" and cls.__module__.startswith("cupy") and "cupy" in sys.modules


def array_module(arr):
    """``cupy`` for a CuPy array (CuPy is imported then), else ``numpy``."""
    return sys.modules["cupy"] if is_cupy_array(arr) else np


def device_of(arr):
    """The CUDA device id of a CuPy array, None for host data."""
    return arr.device.id if is_cupy_array(arr) else None
