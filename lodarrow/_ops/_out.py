"""The ``out=`` argument of the data-producing operators: NumPy's convention
(docs/operators.md#out-writing-into-a-preallocated-array).

An operator keeps its ``be.empty(shape, dtype)`` for ``out=None`` (one ``is None`` test, no
call) and otherwise writes into :func:`into`'s array, then hands :func:`landed` the result::

    o = be.empty(shape, dtype) if out is None else into(out, op, shape, dtype, be, data, reads)
    kernel(o, ...)
    if out is not None:
        o = landed(o, out)

``into`` validates ``out`` (type, device, exact dtype, exact shape, C-contiguous, writable,
aligned) before any kernel runs, and returns a temporary instead of ``out`` when ``out`` may
share memory with an array the kernel reads, as NumPy buffers overlapping operands;
``landed`` then copies the temporary into ``out``.
"""


import numpy as np

from lodarrow._cupy import array_module, device_of, is_cupy_array

__all__ = ["into", "landed", "check", "check_shape", "overlaps", "same_buffer", "split"]


def _where(arr):
    device = device_of(arr)
    return "on the CPU" if device is None else f"on the GPU (cuda:{device})"


def check(out, op, shape, dtype, data, name="out"):
    """Raise unless ``out`` can hold a result of ``shape`` and ``dtype`` next to ``data``.

    ``TypeError`` for a wrong type or dtype (no casting), ``ValueError`` for a wrong device,
    shape or layout.  ``shape=None`` skips the shape (checked later by :func:`check_shape`
    where only the kernel knows it).
    """
    gpu = is_cupy_array(out)
    if not gpu and not isinstance(out, np.ndarray):
        hint = ""
        if type(out) is tuple:
            hint = " (a tuple only where the operator has several outputs)"
        elif hasattr(out, "data") and hasattr(out, "lod"):
            hint = " (for a LoDTensor pass its .data)"
        raise TypeError(f"{op}: {name} must be a numpy.ndarray (a cupy.ndarray for GPU data)"
                        f"{hint}, got {type(out).__name__}")
    if device_of(out) != device_of(data):
        raise ValueError(f"{op}: {name} is {_where(out)} but the data is {_where(data)}; "
                         f"pass an array on the data's device")
    if out.dtype != dtype:
        raise TypeError(f"{op}: {name} has dtype {out.dtype} but the result is {dtype}; out= "
                        f"never casts: pass an array of dtype {dtype}")
    if shape is not None:
        check_shape(out, op, shape, name)
    flags = out.flags
    if not flags.c_contiguous:
        raise ValueError(f"{op}: {name} is not C-contiguous (strides {out.strides}); pass a "
                         f"C-contiguous array, e.g. numpy.empty(shape, dtype)")
    if not gpu and not (flags.writeable and flags.aligned):
        what = "read-only" if not flags.writeable else "not aligned for its dtype"
        raise ValueError(f"{op}: {name} is {what}; pass a writable, aligned array, e.g. "
                         f"numpy.empty(shape, dtype)")


def check_shape(out, op, shape, name="out"):
    """Raise ``ValueError`` unless ``out.shape == shape``."""
    if out.shape != tuple(shape):
        raise ValueError(f"{op}: {name} has shape {tuple(out.shape)} but the result has shape "
                         f"{tuple(int(s) for s in shape)}; pass an array of exactly that shape")


def overlaps(out, reads):
    """True if ``out`` may share memory with one of the arrays ``reads`` (None skipped).

    Bounds only (``may_share_memory``): cheap, and a false alarm costs one copy, not a wrong
    result.  Arrays on another device than ``out`` cannot overlap it.
    """
    gpu = is_cupy_array(out)
    may_share = array_module(out).may_share_memory
    return any(a is not None and is_cupy_array(a) == gpu and may_share(out, a) for a in reads)


def into(out, op, shape, dtype, be, data, reads=(), name="out"):
    """The array the kernel writes: a new one if ``out`` is None, else ``out`` checked
    (:func:`check`), or a temporary when ``out`` overlaps one of ``reads`` (see
    :func:`landed`).  Call inside ``be.device(data)``."""
    if out is None:
        return be.empty(shape, dtype)
    check(out, op, shape, dtype, data, name)
    if reads and overlaps(out, reads):
        return be.empty(shape, dtype)
    return out


def landed(result, out):
    """``out`` holding ``result`` (copied unless it is ``out``); ``result`` if ``out`` is None."""
    if out is None or result is out:
        return result
    out[...] = result
    return out


def same_buffer(a, b):
    """True if ``a`` and C-contiguous ``b`` are the same bytes (start, shape, dtype)."""
    if a.shape != b.shape or a.dtype != b.dtype or not b.flags.c_contiguous:
        return False
    if is_cupy_array(a):
        return is_cupy_array(b) and a.data.ptr == b.data.ptr
    return (isinstance(b, np.ndarray)
            and a.__array_interface__["data"][0] == b.__array_interface__["data"][0])


def split(out, n, op, why=""):
    """``out`` for an operator call with ``n`` outputs: a tuple of ``n`` entries, each an
    array or None (NumPy's convention for several outputs)."""
    if type(out) is not tuple:
        raise TypeError(f"{op}: out must be a tuple of {n} entries (an array or None each, "
                        f"one per output{why}), got {type(out).__name__}")
    if len(out) != n:
        raise ValueError(f"{op}: out has {len(out)} entries but the call has {n} outputs"
                         f"{why}; give one entry (an array or None) per output")
    return out
