"""Places: where a LoDTensor's data lives (Paddle's ``CPUPlace``, ``CUDAPlace``,
``CUDAPinnedPlace``)."""

import operator

from lodarrow._cupy import require_gpu

__all__ = ["CPUPlace", "CUDAPlace", "CUDAPinnedPlace", "as_place", "parse_place"]


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


# ---------------------------------------------------------------------------- spellings
#: The one grammar of place strings (case-insensitive): "cpu", "cuda" / "gpu" with an
#: optional ":N", "gpu_pinned" / "cuda_pinned" / "pinned".
_KINDS = {"cpu": "cpu", "cuda": "cuda", "gpu": "cuda", "gpu_pinned": "pinned",
          "cuda_pinned": "pinned", "pinned": "pinned"}


def parse_place(spec):
    """``(kind, device_id)`` of a place string ("cpu", "cuda", "pinned"; the id for "cuda"
    only), or None when ``spec`` is no place string.  Touches no device and imports nothing,
    so a udf for GPU workers can be made where there is no GPU."""
    if not isinstance(spec, str):
        return None
    kind, sep, dev = spec.lower().partition(":")
    kind = _KINDS.get(kind)
    if kind == "cuda":
        if not sep:
            return kind, 0
        return (kind, int(dev)) if dev.isdigit() else None
    return (kind, None) if kind is not None and not sep else None


def as_place(place):
    """A Place from a Place, None (kept) or a place string (:func:`parse_place`).

    Raises
    ------
    TypeError
        If ``place`` is neither.
    BackendError
        For a CUDA place where CuPy or that GPU is missing.
    """
    if place is None or isinstance(place, Place):
        return place
    parsed = parse_place(place)
    if parsed is None:
        raise TypeError(f"place must be CPUPlace(), CUDAPlace(i), CUDAPinnedPlace() or a "
                        f"string such as 'cpu' or 'cuda:0', got {place!r}")
    kind, device_id = parsed
    if kind == "cpu":
        return CPUPlace()
    return CUDAPlace(device_id) if kind == "cuda" else CUDAPinnedPlace()
