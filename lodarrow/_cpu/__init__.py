"""CPU launchers: ``lodarrow/_cpu/<group>.py`` runs the Cython kernels of ``_ext/<group>.pyx``,
as ``lodarrow/_cuda/<group>.py`` runs the CUDA ones of ``lodarrow/_cuda/<group>.cu``.

Each launcher module has ``ENTRIES``: kernel name -> entry point, with the same names and
arguments as its CUDA twin's.  An entry adds only the host's plumbing to the kernel call:
thread counts and chunk bounds (:mod:`lodarrow._threads`), byte views of the rows, the fused
specialisation of a dtype.  :mod:`lodarrow._backends.cpu` builds its kernel table from them.
"""

import numpy as np

__all__ = ["by_dtype", "flat_bytes"]


#: Cython type names of the fused specialisations, by NumPy dtype.
_C_TYPES = {np.dtype(np.int8): "int8_t", np.dtype(np.uint8): "uint8_t",
            np.dtype(np.int16): "int16_t", np.dtype(np.uint16): "uint16_t",
            np.dtype(np.int32): "int32_t", np.dtype(np.int64): "int64_t",
            np.dtype(np.float32): "float", np.dtype(np.float64): "double"}


def by_dtype(fused):
    """dtype -> the specialisation of a Cython function fused on one element type.

    Calling the specialisation skips Cython's dispatcher, which inspects the buffers of
    every call, a sizeable share of a small operator call.  A dtype not listed goes to
    ``fused`` itself (``.get(dtype, fused)``), so behaviour and errors stay Cython's.
    """
    sigs = fused.__signatures__
    return {dt: sigs[name] for dt, name in _C_TYPES.items() if name in sigs}


def flat_bytes(a):
    """``a`` as a flat uint8 view (a C-contiguous copy first if it is strided)."""
    a = np.ascontiguousarray(a)  # at least 1-D
    return (a if a.ndim == 1 else a.reshape(-1)).view(np.uint8)
