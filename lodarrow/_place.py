"""Places: where a LoDTensor's data lives (Paddle's ``CPUPlace``, ``CUDAPlace``, ``CUDAPinnedPlace``)."""

import operator

from lodarrow._backends import require_gpu

__all__ = ["CPUPlace", "CUDAPlace", "CUDAPinnedPlace"]


class Place:
    """Base class of the places; compare and hash by value."""

    __slots__ = ()
    _key: tuple

    def __eq__(self, other):
        if not isinstance(other, Place):
            return NotImplemented
        return self._key == other._key

    def __hash__(self):
        return hash(self._key)

    @property
    def is_cuda(self) -> bool:
        """True when the data lives in GPU memory (``CUDAPlace``)."""
        return False


class CPUPlace(Place):
    """Host memory; data is a ``numpy.ndarray``."""

    __slots__ = ()
    _key = ("cpu",)

    def __repr__(self):
        return "Place(cpu)"


class CUDAPinnedPlace(Place):
    """Page-locked host memory (fast transfers to the GPU); data is a ``numpy.ndarray``.

    Raises
    ------
    BackendError
        If CuPy is not installed or no CUDA GPU is visible (pinned memory needs the driver).
    """

    __slots__ = ()
    _key = ("gpu_pinned",)

    def __init__(self):
        require_gpu(0, "CUDAPinnedPlace()")

    def __repr__(self):
        return "Place(gpu_pinned)"


class CUDAPlace(Place):
    """Memory of CUDA device ``device_id``; data is a ``cupy.ndarray``.

    Parameters
    ----------
    device_id : int, default 0
        The CUDA device ordinal.

    Raises
    ------
    BackendError
        If CuPy is not installed, no CUDA GPU is visible, or ``device_id`` is not a device.
    """

    __slots__ = ("device_id",)

    def __init__(self, device_id=0):
        try:
            device_id = operator.index(device_id)
        except TypeError:
            raise TypeError(
                f"CUDAPlace: device_id must be an integer, got {type(device_id).__name__}"
            ) from None
        if device_id < 0:
            raise ValueError(f"CUDAPlace: device_id must be >= 0, got {device_id}")
        require_gpu(device_id, f"CUDAPlace({device_id})")
        self.device_id = device_id

    @property
    def _key(self):
        return ("gpu", self.device_id)

    @property
    def is_cuda(self) -> bool:
        return True

    def get_device_id(self) -> int:
        """Return the device ordinal (Paddle's spelling)."""
        return self.device_id

    def __repr__(self):
        return f"Place(gpu:{self.device_id})"


def _cuda_place_unchecked(device_id):
    """A CUDAPlace for data that already lives on ``device_id`` (no availability probe)."""
    place = CUDAPlace.__new__(CUDAPlace)
    place.device_id = int(device_id)
    return place
