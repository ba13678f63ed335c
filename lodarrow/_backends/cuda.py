"""The CUDA backend: CuPy arrays and a kernel table.

``KERNELS`` maps each kernel name to its GPU entry point, collected from the ``ENTRIES`` of
the launchers ``lodarrow/_cuda/<group>.py``, taking the same arguments as the CPU one of the
same name (:mod:`lodarrow._backends.cpu`).  Entries are called inside ``device(data)``, so what
they allocate and launch lands on the data's device.  Imported only when data is on the GPU.
"""

from lodarrow._backends import cpu
from lodarrow import _cuda
from lodarrow._backends._table import check_twins, kernel_table, launchers
from lodarrow._cupy import get_cupy

__all__ = ["CUDABackend", "KERNELS"]


class CUDABackend:
    """CUDA device memory: ``cupy`` arrays and the CuPy kernels.

    ``empty(shape, dtype)`` is ``cupy.empty`` (on the current device); ``kernel(name)``
    looks ``name`` up in ``KERNELS``.
    """

    name = "cuda"

    def __init__(self, kernels):
        self.xp = get_cupy()
        self.empty = self.xp.empty
        self.kernel = kernels.__getitem__

    def device(self, data):
        """``data.device``: makes the data's GPU current for allocations and launches."""
        return data.device

    def asarray(self, a):
        """``a`` on the current device (no copy if it is there already)."""
        return self.xp.asarray(a)

    def offsets(self, t, level):
        """Level ``level`` of LoDTensor ``t`` on its device: copied once, cached in ``t``."""
        if level < 0:
            level += t.lod_level  # one cache entry per level
        return t._device_offsets_for(level)

    def __repr__(self):
        return "<lodarrow backend cuda>"


#: Kernel name -> CUDA entry point: the ``ENTRIES`` of every launcher
#: ``lodarrow/_cuda/<group>.py`` (``cpu.KERNELS`` has the same names, checked here).
KERNELS = kernel_table(*launchers(_cuda))
check_twins(cpu.KERNELS, KERNELS)
