"""Backends: an operator runs where its data lives, on the CPU or on a CUDA device.

A backend object (:data:`CPU`, or the CUDA backend, created on first use) gives an operator
everything that differs between the two:

``xp``
    The array module, ``numpy`` or ``cupy``.
``device(data)``
    The context under which ``data``'s device is current (a no-op on the CPU).  Allocations
    and kernel launches run inside it, so outputs land on the data's GPU, not the current one.
``empty(shape, dtype)`` / ``asarray(a)``
    Allocation / transfer on the current device (call inside ``device(data)``).
``offsets(t, level)``
    Level ``level`` of LoDTensor ``t`` as the kernels of this backend take it: the host
    array on the CPU, the device copy cached in ``t`` on the GPU.
``kernel(name)``
    The kernel ``name`` (see ``KERNELS`` in :mod:`lodarrow._backends.cpu` and
    :mod:`lodarrow._backends.cuda`: the only places that name ``lodarrow._ext`` and
    ``lodarrow._cuda`` functions).  Both backends' kernels of one name take the same
    arguments.

:func:`backend_of` picks the backend of an operator's inputs (refusing a mix of devices);
:func:`backend_of_array` that of one array.  CuPy is imported only when data is on the GPU or
a CUDA place is requested.
"""

import functools
import sys

import numpy as np

from lodarrow._backends.cpu import CPU
from lodarrow._errors import BackendError

__all__ = ["get_cupy", "require_gpu", "is_cupy_array", "backend_of", "backend_of_array",
           "cuda_backend", "CPU", "row_bytes"]

_GPU_HINT = ("install the GPU extra: pip install 'lodarrow[gpu]' (from a checkout: pip install "
             "-e '.[gpu]'), or any cupy-cudaXXx wheel")


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
    if cls is np.ndarray:  # the usual answer, without the slow look at ``__module__``
        return False
    return cls.__name__ == "ndarray" and cls.__module__.startswith("cupy") and "cupy" in sys.modules


@functools.cache
def cuda_backend():
    """The CUDA backend (imports CuPy and ``lodarrow._cuda`` on first use)."""
    from lodarrow._backends.cuda import KERNELS, CUDABackend

    return CUDABackend(KERNELS)


def backend_of_array(data):
    """The backend of one array (there is nothing to mix up)."""
    if type(data) is np.ndarray:  # the usual answer, without a call to is_cupy_array
        return CPU
    return cuda_backend() if is_cupy_array(data) else CPU


def backend_of(op, **inputs):
    """The backend of the named arrays of ``op``; ``ValueError`` if they are on both devices.

    Values are the inputs' arrays (a LoDTensor's ``data``); anything else (Python lists,
    scalars) counts as host data; None is ignored.
    """
    on_gpu = [name for name, obj in inputs.items() if is_cupy_array(obj)]
    if not on_gpu:
        return CPU
    on_cpu = [name for name, obj in inputs.items() if obj is not None and name not in on_gpu]
    if on_cpu:
        raise ValueError(
            f"{op}: inputs live on different devices ({', '.join(sorted(on_gpu))} on the GPU, "
            f"{', '.join(sorted(on_cpu))} on the CPU); move them to one place first, "
            f"e.g. t.cuda() / t.cpu() or cupy.asarray(a)"
        )
    return cuda_backend()


def row_bytes(data):
    """A C-contiguous ``(N, bytes_per_row)`` uint8 view of ``data`` (copy only if strided).

    Data-moving kernels copy whole rows through this view, so one kernel serves every dtype,
    bool and float16 included.  NumPy or CuPy alike.
    """
    if not data.flags.c_contiguous:
        data = data.copy(order="C")
    shape = data.shape
    n = shape[0]
    width = data.dtype.itemsize
    for s in shape[1:]:
        width *= s
    if n and width:
        rows = data.view(np.uint8)  # 2-D data: already (n, width), no reshape needed
        return rows if len(shape) == 2 else rows.reshape(n, width)
    xp = sys.modules["cupy"] if is_cupy_array(data) else np
    return xp.empty((n, width), dtype=np.uint8)  # nothing to view: no rows or no bytes per row
