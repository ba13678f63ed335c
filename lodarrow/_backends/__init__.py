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
    The kernel ``name``: an entry of the backend's ``KERNELS``, collected from the ``ENTRIES``
    of its launchers (``lodarrow/_cpu/<group>.py``, ``lodarrow/_cuda/<group>.py``).  Both
    backends' kernels of one name take the same arguments.

:func:`backend_of` picks the backend of an operator's inputs (refusing a mix of devices);
:func:`backend_of_array` that of one array.  CuPy is imported only when data is on the GPU or
a CUDA place is requested (the probes are :mod:`lodarrow._cupy`'s, re-exported here).
"""

import functools

import numpy as np

from lodarrow._backends.cpu import CPU
from lodarrow._cupy import array_module, get_cupy, is_cupy_array, require_gpu

__all__ = ["get_cupy", "require_gpu", "is_cupy_array", "backend_of", "backend_of_array",
           "cuda_backend", "CPU", "row_bytes"]


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
    # Nothing to view: no rows or no bytes per row.
    return array_module(data).empty((n, width), dtype=np.uint8)
