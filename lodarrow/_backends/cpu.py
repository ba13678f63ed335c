"""The CPU backend: host memory (NumPy, large outputs from Arrow's pool) and a kernel table.

``KERNELS`` maps each kernel name to its CPU entry point, collected from the ``ENTRIES`` of
the launchers ``lodarrow/_cpu/<group>.py``.  Every entry takes the same arguments as the CUDA
one of the same name (:mod:`lodarrow._backends.cuda`).
"""

import functools
import itertools
import os
from math import prod

import numpy as np

from lodarrow import _cpu
from lodarrow._backends._table import kernel_table, launchers
from lodarrow._cpu import flat_bytes
# The thread policy's names, where code written before lodarrow._threads looks for them.
from lodarrow._threads import (PARALLEL_MIN_WORK, chunk_bounds, num_threads, plan_threads,
                               threads_for)

__all__ = ["CPU", "CPUBackend", "KERNELS", "num_threads", "threads_for", "chunk_bounds",
           "plan_threads", "flat_bytes", "PARALLEL_MIN_WORK", "empty", "POOL_MIN_BYTES"]

# --------------------------------------------------------------------------- allocation
#: Outputs of at least this many bytes (and ``POOL_MIN_BYTES // 8`` elements, a check
#: cheaper than the dtype's size) come from Arrow's memory pool.  The pool keeps freed
#: pages mapped, so a large output does not fault in (and the kernel zero) every page again,
#: as a fresh ``numpy.empty`` (an ``mmap`` above glibc's threshold) does, and those page
#: faults would dominate a memory-bound kernel.  Below it ``numpy.empty`` is cheaper (a pool
#: call has a fixed cost a small output does not repay) and glibc reuses freed memory anyway.
POOL_MIN_BYTES = 1 << 20

#: ``LODARROW_ARROW_POOL=0`` (read at import): every output from ``numpy.empty``.
USE_ARROW_POOL = os.environ.get("LODARROW_ARROW_POOL", "1").strip().lower() not in (
    "0", "false", "no", "off")

_np_empty = np.empty
_allocate_buffer = None  # pyarrow.allocate_buffer, imported on the first large output
_MAX_POOL_BYTES = 1 << 62  # beyond: numpy.empty, which raises its own error


_POOL_MIN_ITEMS = POOL_MIN_BYTES >> 3  # fewer: under 1 MiB in any dtype of <= 8 bytes


def empty(shape, dtype):
    """An uninitialised C-contiguous host array, from Arrow's pool at ``POOL_MIN_BYTES``.

    ``shape`` is a tuple of ints (an int shape is never pooled), ``dtype`` a ``numpy.dtype``
    (or anything ``numpy.dtype`` takes).  A pool array is writable, 64-byte aligned, and
    keeps its ``pyarrow.Buffer`` alive through ``.base``; it is an ordinary ndarray otherwise
    (``to_arrow`` wraps it zero-copy, pickling copies it).  Errors (negative or absurd sizes,
    out of memory) are ``numpy.empty``'s.  See docs/ARCHITECTURE.md#rules.
    """
    try:
        small = prod(shape) < _POOL_MIN_ITEMS  # on every operator call: kept to one C call
    except TypeError:  # an int shape, which numpy.empty takes too
        small = True
    if small:
        return _np_empty(shape, dtype)
    return _pool_empty(shape, dtype)


def _pool_empty(shape, dtype):
    global _allocate_buffer
    dtype = np.dtype(dtype)
    nbytes = prod(shape) * dtype.itemsize
    if nbytes < POOL_MIN_BYTES or dtype.hasobject or nbytes > _MAX_POOL_BYTES:
        return _np_empty(shape, dtype)
    if _allocate_buffer is None:
        from pyarrow import allocate_buffer as _allocate_buffer
    try:
        buf = _allocate_buffer(nbytes)
    except MemoryError:  # pyarrow.ArrowMemoryError: let numpy say it, as without the pool
        return _np_empty(shape, dtype)
    return np.frombuffer(buf, dtype).reshape(shape)


class _NoDevice:
    """The CPU's device context: does nothing, at the cost of two C calls.

    ``with`` calls ``__enter__()`` and ``__exit__(type, value, tb)`` unbound (a builtin is no
    descriptor); ``"".format`` takes any arguments and returns ``""``, which is falsy, so
    exceptions propagate.  ``contextlib.nullcontext`` costs two Python frames per operator
    call.
    """

    __slots__ = ()
    __enter__ = "".format
    __exit__ = "".format


class CPUBackend:
    """Host memory: ``numpy`` arrays and the Cython kernels.

    ``empty(shape, dtype)`` is :func:`empty` (``numpy.empty`` with ``LODARROW_ARROW_POOL=0``);
    ``kernel(name)`` looks ``name`` up in ``KERNELS`` (a ``KeyError`` names a kernel that
    does not exist), the bare C function: these run on every operator call.
    """

    name = "cpu"
    xp = np
    empty = staticmethod(empty if USE_ARROW_POOL else np.empty)
    _HOST = _NoDevice()
    #: ``device(data)``: a no-op context, host memory needs no current device.  It is
    #: ``next(repeat(_HOST), data)``, which returns ``_HOST`` in C: no Python frame and no
    #: bound method per operator call.
    device = staticmethod(functools.partial(next, itertools.repeat(_HOST)))

    def __init__(self, kernels):
        self.kernel = kernels.__getitem__

    #: ``asarray(a)``: ``a`` as a host array (no copy if it is one), ``numpy.asarray`` itself.
    asarray = staticmethod(np.asarray)

    def offsets(self, t, level):
        """Level ``level`` of LoDTensor ``t``: the host offsets themselves."""
        return t.offsets[level]

    def __repr__(self):
        return "<lodarrow backend cpu>"


#: Kernel name -> CPU entry point: the ``ENTRIES`` of every launcher ``lodarrow/_cpu/<group>.py``
#: (``cuda.KERNELS`` has the same names).
KERNELS = kernel_table(*launchers(_cpu))

CPU = CPUBackend(KERNELS)
