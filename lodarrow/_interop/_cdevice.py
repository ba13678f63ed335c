"""The Arrow C Device data interface for LoDTensor: ``__arrow_c_device_array__`` both ways.

Export (:func:`export_device_array`) builds the ``ArrowArray`` tree with ``ctypes`` over the
tensor's own buffers (data and offsets, zero-copy but for bool), on the CPU or the GPU, and
wraps it with an ``ArrowSchema`` in the two capsules of the Arrow PyCapsule interface.
Import (:func:`import_device_array`) moves an ``ArrowDeviceArray`` out of its capsule and
builds a LoDTensor over its buffers: NumPy views for host memory, CuPy views for CUDA memory
(offsets are copied to the host, where a LoDTensor keeps them).

Ownership
---------
A capsule's destructor and an array's release callback run whenever the last reference
dies -- also while an exception is propagating.  A ``ctypes`` callback run then loses that
exception (CPython replaces it by ``SystemError``), so no callback here is Python code:
the structs are those pyarrow exports for an empty "keeper" array of the same type (into
capsules it allocates, with its C destructors), with Arrow's C++ release callbacks; only
their layout fields (length, buffers) are then pointed at the tensor's buffers.  The
keeper's innermost values hold, as a ``pyarrow.foreign_buffer`` base, a list that owns
those buffers and the pointer arrays; Arrow's release callback releases a node's children
(read from the struct, as the C data interface requires), so the list dies with the last
node released.
"""

import ctypes
import functools

import numpy as np

from lodarrow._interop._arrow_decode import decode, missing_width
from lodarrow._interop._arrow_layout import NUM_BUFFERS, arrow_type, plan
from lodarrow._cupy import get_cupy, is_cupy_array
from lodarrow._tensor import LoDTensor, _freeze

__all__ = [
    "ARROW_DEVICE_CPU",
    "ARROW_DEVICE_CUDA",
    "ARROW_DEVICE_CUDA_HOST",
    "ARROW_DEVICE_CUDA_MANAGED",
    "device_capsules",
    "export_device_array",
    "import_device_array",
    "device_type_of",
]

#: ``ArrowDeviceType`` values of the C Device data interface.
ARROW_DEVICE_CPU = 1
ARROW_DEVICE_CUDA = 2
ARROW_DEVICE_CUDA_HOST = 3
ARROW_DEVICE_CUDA_MANAGED = 13

_DEVICE_NAMES = {1: "CPU", 2: "CUDA", 3: "CUDA_HOST", 4: "OPENCL", 7: "VULKAN", 8: "METAL",
                 9: "VPI", 10: "ROCM", 11: "ROCM_HOST", 12: "EXT_DEV", 13: "CUDA_MANAGED",
                 14: "ONEAPI", 15: "WEBGPU", 16: "HEXAGON"}
_HOST_DEVICES = (ARROW_DEVICE_CPU, ARROW_DEVICE_CUDA_HOST)
_CUDA_DEVICES = (ARROW_DEVICE_CUDA, ARROW_DEVICE_CUDA_MANAGED)


# ---------------------------------------------------------------------------- C structs
class ArrowSchema(ctypes.Structure):
    """``struct ArrowSchema`` of the Arrow C data interface."""


class ArrowArray(ctypes.Structure):
    """``struct ArrowArray`` of the Arrow C data interface."""


_SCHEMA_RELEASE = ctypes.CFUNCTYPE(None, ctypes.POINTER(ArrowSchema))
_ARRAY_RELEASE = ctypes.CFUNCTYPE(None, ctypes.POINTER(ArrowArray))

ArrowSchema._fields_ = [
    ("format", ctypes.c_char_p),
    ("name", ctypes.c_char_p),
    ("metadata", ctypes.c_void_p),
    ("flags", ctypes.c_int64),
    ("n_children", ctypes.c_int64),
    ("children", ctypes.POINTER(ctypes.POINTER(ArrowSchema))),
    ("dictionary", ctypes.POINTER(ArrowSchema)),
    ("release", _SCHEMA_RELEASE),
    ("private_data", ctypes.c_void_p),
]
ArrowArray._fields_ = [
    ("length", ctypes.c_int64),
    ("null_count", ctypes.c_int64),
    ("offset", ctypes.c_int64),
    ("n_buffers", ctypes.c_int64),
    ("n_children", ctypes.c_int64),
    ("buffers", ctypes.POINTER(ctypes.c_void_p)),
    ("children", ctypes.POINTER(ctypes.POINTER(ArrowArray))),
    ("dictionary", ctypes.POINTER(ArrowArray)),
    ("release", _ARRAY_RELEASE),
    ("private_data", ctypes.c_void_p),
]


class ArrowDeviceArray(ctypes.Structure):
    """``struct ArrowDeviceArray`` of the Arrow C Device data interface."""

    _fields_ = [
        ("array", ArrowArray),
        ("device_id", ctypes.c_int64),
        ("device_type", ctypes.c_int32),
        ("sync_event", ctypes.c_void_p),
        ("reserved", ctypes.c_int64 * 3),
    ]


_capi = ctypes.pythonapi
_capi.PyCapsule_IsValid.restype = ctypes.c_int
_capi.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capi.PyCapsule_GetPointer.restype = ctypes.c_void_p
_capi.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]

_SCHEMA_CAPSULE = b"arrow_schema"
_DEVICE_ARRAY_CAPSULE = b"arrow_device_array"


def _capsule_pointer(capsule, name, what):
    """The pointer in a capsule named ``name``; ``TypeError`` naming ``what`` otherwise."""
    if not _capi.PyCapsule_IsValid(capsule, name):
        raise TypeError(f"{what} must be a PyCapsule named {name.decode()!r}, "
                        f"got {type(capsule).__name__}")
    return _capi.PyCapsule_GetPointer(capsule, name)


# ---------------------------------------------------------------------------- pyarrow
def _pyarrow():
    import pyarrow as pa

    if not hasattr(pa.Array, "__arrow_c_device_array__"):
        raise ImportError(f"the Arrow C Device data interface needs pyarrow >= 16, "
                          f"found {pa.__version__}")
    return pa


def _same_layout(pa, ours, requested):
    """True if ``requested`` describes exactly the buffers of ``ours`` (names may differ)."""
    if isinstance(requested, pa.ExtensionType):
        requested = requested.storage_type
    if pa.types.is_large_list(ours):
        return (pa.types.is_large_list(requested)
                and _same_layout(pa, ours.value_type, requested.value_type))
    if pa.types.is_fixed_size_list(ours):
        return (pa.types.is_fixed_size_list(requested) and ours.list_size == requested.list_size
                and _same_layout(pa, ours.value_type, requested.value_type))
    return ours == requested


# ---------------------------------------------------------------------------- export
@functools.lru_cache(maxsize=1)
def _zero_offsets(pa):
    """The offsets buffer of an empty large list (immutable, shared)."""
    return pa.py_buffer(np.zeros(1, dtype=np.int64))


def _keeper(pa, typ, keep):
    """An empty array of ``typ`` whose innermost values own ``keep`` (as their data buffer).

    Exporting it gives a tree of structs of the right shape whose release callbacks are
    Arrow's; their layout fields are then pointed at our buffers.  ``keep`` holds every
    node's buffers and dies with the innermost node, which every subtree contains: a child
    that a consumer moves out keeps all it can reach alive.
    """
    if typ.num_fields == 0:
        return pa.Array.from_buffers(typ, 0, [None, pa.foreign_buffer(0, 0, base=keep)])
    child = _keeper(pa, typ.value_type, keep)
    if pa.types.is_fixed_size_list(typ):
        return pa.Array.from_buffers(typ, 0, [None], children=[child])
    return pa.Array.from_buffers(typ, 0, [None, _zero_offsets(pa)], children=[child])


def _point(node, length, buffers):
    """Point ``node``'s layout at ``buffers``; returns the pointer array that must outlive it."""
    ptrs = (ctypes.c_void_p * len(buffers))(*buffers)
    node.length = length
    node.null_count = 0
    node.offset = 0
    node.n_buffers = len(buffers)
    node.buffers = ctypes.cast(ptrs, ctypes.POINTER(ctypes.c_void_p))
    return ptrs


def _pack_bits(flat, xp):
    """Arrow's bit-packed booleans (LSB first) of a flat bool array, on its device."""
    if flat.shape[0] == 0:  # cupy.packbits returns its (bool) input when it is empty
        return xp.empty(0, dtype=np.uint8)
    return xp.packbits(flat, bitorder="little")


def _address(arr, on_gpu):
    return arr.data.ptr if on_gpu else arr.ctypes.data


def export_device_array(t, requested_schema=None, **kwargs):
    """Export a LoDTensor through the Arrow C Device data interface.

    This is ``LoDTensor.__arrow_c_device_array__``.  The type is the one ``to_arrow`` gives
    (docs/data-model.md#arrow-mapping; host data read from 32-bit lists is exported as
    ``to_arrow()`` gives it, ``list`` levels, and GPU data always as below): each LoD level a
    ``large_list`` whose offsets are the
    level's int64 offsets, each feature dimension a ``fixed_size_list``, then the values.  Data and
    offsets are exported without a copy (but for bool, which Arrow bit-packs), on the device
    where they live: ``ARROW_DEVICE_CPU`` (``device_id`` -1) for host data,
    ``ARROW_DEVICE_CUDA`` with the data's device for GPU data, whose offsets are the cached
    device copies.  ``sync_event`` is NULL: the current CuPy stream is synchronised before
    the capsules are returned.  No value is null (``null_count`` 0, no validity buffers).

    Parameters
    ----------
    t : LoDTensor
        The tensor to export; its buffers stay alive until the consumer releases them.
    requested_schema : PyCapsule, optional
        An ``arrow_schema`` capsule with the type the consumer asks for.  A type with the
        same layout (field names, nullability or an extension type over it may differ) is
        honoured without a copy.  Another type is cast on the host by pyarrow for CPU
        data; GPU data is never cast.  Like pyarrow's producers, this imports (consumes)
        the requested schema.
    **kwargs
        Reserved by the PyCapsule interface for future keywords; only ``None`` values are
        accepted.

    Returns
    -------
    tuple of (PyCapsule, PyCapsule)
        An ``"arrow_schema"`` and an ``"arrow_device_array"`` capsule.  The consumer moves
        the structs out; capsules dropped unconsumed release their data.

    Raises
    ------
    NotImplementedError
        If a keyword argument other than ``requested_schema`` is not None (as the PyCapsule
        interface asks of producers).
    TypeError
        If ``t`` is not a LoDTensor or ``requested_schema`` is not an ``arrow_schema``
        capsule.
    ValueError
        If ``t`` is empty (no data set); if the requested type cannot be reached by a cast
        (CPU) or differs from the tensor's type (GPU).
    LoDError
        If the LoD no longer matches the data (``set()`` changed the row count).

    Examples
    --------
    >>> import numpy as np, pyarrow as pa, lodarrow as la
    >>> t = la.LoDTensor(np.arange(7.0), lengths=[[2, 1], [2, 2, 3]])
    >>> arr = pa.Array._import_from_c_device_capsule(*t.__arrow_c_device_array__())
    >>> arr.type
    LargeListType(large_list<item: large_list<item: double>>)
    >>> arr.to_pylist()
    [[[0.0, 1.0], [2.0, 3.0]], [[4.0, 5.0, 6.0]]]
    """
    unknown = sorted(k for k, v in kwargs.items() if v is not None)
    if unknown:
        raise NotImplementedError(f"__arrow_c_device_array__: unsupported keyword argument(s) "
                                  f"{unknown}; only None is accepted for future keywords")
    if not isinstance(t, LoDTensor):
        raise TypeError(f"export_device_array: t must be a LoDTensor, got {type(t).__name__}")
    if t._data is None:
        raise ValueError("__arrow_c_device_array__: the LoDTensor is empty (no data has been "
                         "set)")
    t._check_valid("the LoDTensor")
    pa = _pyarrow()
    on_gpu = is_cupy_array(t._data)
    natural = arrow_type(t.dtype, t.feature_shape, len(t._offsets))
    schema_type = natural
    cast_to = None
    if requested_schema is not None:
        _capsule_pointer(requested_schema, _SCHEMA_CAPSULE, "requested_schema")
        requested = pa.DataType._import_from_c_capsule(requested_schema)
        if _same_layout(pa, natural, requested):
            schema_type = requested
        elif on_gpu:
            raise ValueError(f"__arrow_c_device_array__: a GPU LoDTensor is exported only as "
                             f"{natural}, not the requested {requested} (GPU data is never "
                             f"cast; cast after import, or export t.cpu())")
        else:
            cast_to = requested
    if t._narrow and not on_gpu and schema_type is natural:  # read from 32-bit lists
        arr = t.to_arrow()  # the method, so this module never imports lodarrow._interop._arrow
        if cast_to is None or arr.type == cast_to:
            return arr.__arrow_c_device_array__()
    if on_gpu:
        cupy = get_cupy()
        with cupy.cuda.Device(t._data.device.id):
            capsules = _export(pa, t, natural, schema_type, True)
            cupy.cuda.get_current_stream().synchronize()  # sync_event is NULL: data is ready
        return capsules
    capsules = _export(pa, t, natural, schema_type, False)
    if cast_to is None:
        return capsules
    arr = pa.Array._import_from_c_device_capsule(*capsules)
    try:
        cast = arr.cast(cast_to, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise ValueError(f"__arrow_c_device_array__: cannot cast {natural} to the requested "
                         f"{cast_to}: {exc}") from None
    return cast.__arrow_c_device_array__()


def _export(pa, t, natural, schema_type, on_gpu):
    """The two capsules of ``t`` (no cast); see :func:`export_device_array`."""
    xp = get_cupy() if on_gpu else np
    data = xp.ascontiguousarray(t._data)
    n_rows = data.shape[0]
    flat = data.reshape(-1)
    values = _pack_bits(flat, xp) if data.dtype.kind == "b" else flat
    # (length, buffers, owned) of every node, outermost (the first LoD level) first.
    specs = []
    for k in range(len(t._offsets)):
        off = t._device_offsets_for(k) if on_gpu else np.ascontiguousarray(t._offsets[k])
        specs.append((off.shape[0] - 1, [None, _address(off, on_gpu)], off))
    shape = t.feature_shape
    for i in range(len(shape)):  # the node over dims [i:] holds N * prod(dims[:i])
        specs.append((n_rows * int(np.prod(shape[:i], dtype=np.int64)), [None], None))
    specs.append((flat.shape[0], [None, _address(values, on_gpu)], (values, data)))
    # A keeper array of the same type: pyarrow exports it into a capsule it allocates (with
    # its C destructor), each node with Arrow's release callback, which releases the node's
    # children; the innermost node's release drops ``keep``.
    keep = []
    schema, capsule = _keeper(pa, natural, keep).__arrow_c_device_array__()
    device = ArrowDeviceArray.from_address(
        _capsule_pointer(capsule, _DEVICE_ARRAY_CAPSULE, "the device array"))
    node = device.array
    for depth, (length, buffers, owned) in enumerate(specs):
        if depth:
            node = node.children[0].contents
        keep.append((owned, _point(node, length, buffers)))
    if on_gpu:
        device.device_type = ARROW_DEVICE_CUDA
        device.device_id = t._data.device.id
    else:
        device.device_type = ARROW_DEVICE_CPU
        device.device_id = -1
    device.sync_event = None
    if schema_type is not natural:
        schema = schema_type.__arrow_c_schema__()
    return schema, capsule


# ---------------------------------------------------------------------------- import
# The import side only turns C structs into what lodarrow._interop._arrow_decode reads
# (nodes, a flat list of buffer addresses, a memory) and runs the one decoder over them: the
# type analysis is pyarrow's import of the ArrowSchema plus lodarrow._interop._arrow_layout.plan.


class _Imported:
    """Owns an ``ArrowDeviceArray`` moved out of its capsule; releases it when collected.

    Every zero-copy view of its buffers references this object, so the producer's release
    callback runs once the last view dies.
    """

    __slots__ = ("struct", "__weakref__")

    def __init__(self, address):
        self.struct = None  # set first: __del__ runs even when __init__ raises
        src = ArrowDeviceArray.from_address(address)
        if not src.array.release:
            raise ValueError("from_arrow: the ArrowDeviceArray was already released "
                             "(a capsule can be consumed once)")
        struct = ArrowDeviceArray()
        ctypes.memmove(ctypes.addressof(struct), address, ctypes.sizeof(ArrowDeviceArray))
        src.array.release = _ARRAY_RELEASE()  # moved: the capsule's destructor now frees only
        self.struct = struct

    def __del__(self, _byref=ctypes.byref):  # bound early: __del__ may run at shutdown
        struct = self.struct
        if struct is not None and struct.array.release:
            struct.array.release(_byref(struct.array))


class _HostView:
    """``__array_interface__`` of a read-only host buffer; the NumPy view keeps it (and the
    owner) alive."""

    __slots__ = ("__array_interface__", "owner")

    def __init__(self, address, count, dtype, owner):
        self.__array_interface__ = {"data": (address, True), "shape": (count,),
                                    "typestr": dtype.str, "version": 3}
        self.owner = owner


class _Memory:
    """The memory of one device array, for the decoder: NumPy views of host memory, CuPy
    views of CUDA memory; every view keeps ``owner`` alive."""

    def __init__(self, device_type, device_id, owner):
        self.owner = owner
        self.cuda = device_type in _CUDA_DEVICES
        self.id = int(device_id)
        self.xp = get_cupy("importing an Arrow array from a CUDA device") if self.cuda else np

    def view(self, address, dtype, stop, what):
        """Items ``[0, stop)`` of the buffer at ``address`` (no copy)."""
        if stop <= 0:
            return self.xp.empty(0, dtype=dtype)
        if address is None:
            raise ValueError(f"from_arrow: invalid Arrow array: the {what} buffer is NULL but "
                             f"must hold {stop} items")
        if not self.cuda:
            return np.asarray(_HostView(address, stop, dtype, self.owner))
        cupy = self.xp
        mem = cupy.cuda.UnownedMemory(address, stop * dtype.itemsize, self.owner, self.id)
        return cupy.ndarray((stop,), dtype=dtype, memptr=cupy.cuda.MemoryPointer(mem, 0))

    def bits(self, address, start, stop, what):
        """Bits ``[start, stop)`` of an LSB-first bitmap as a bool array on the device."""
        if stop <= start:
            return self.xp.zeros(0, dtype=np.bool_)
        first = start // 8
        raw = self.view(address, np.dtype(np.uint8), (stop + 7) // 8, what)[first:]
        bits = self.xp.unpackbits(raw, bitorder="little")
        return bits[start - 8 * first: stop - 8 * first].view(np.bool_)

    def host(self, arr):
        return arr.get() if self.cuda else arr

    def device(self, arr):
        return self.xp.asarray(arr) if self.cuda else arr


class _Node:
    """One ``ArrowArray`` node as the decoder reads it (``offset``, ``null_count``, ``len()``,
    ``values``, ``dictionary``, ``buffers()``), its fields read once."""

    __slots__ = ("struct", "depth", "offset", "null_count", "length", "_child")

    def __init__(self, struct, depth):
        if depth > 64:
            raise ValueError("from_arrow: the Arrow array is nested too deeply")
        self.struct = struct
        self.depth = depth
        self.length = int(struct.length)
        self.offset = int(struct.offset)
        self.null_count = int(struct.null_count)
        if self.length < 0 or self.offset < 0:
            raise ValueError(f"from_arrow: invalid Arrow array: the node at level {depth} has "
                             f"length {self.length} and offset {self.offset}")
        self._child = None

    def __len__(self):
        return self.length

    @property
    def values(self):
        """The child node of a list node."""
        if self._child is None:
            if self.struct.n_children != 1:
                raise ValueError(f"from_arrow: invalid Arrow array: the list node at level "
                                 f"{self.depth} has {self.struct.n_children} children, "
                                 f"expected 1")
            self._child = _Node(self.struct.children[0].contents, self.depth + 1)
        return self._child

    @property
    def dictionary(self):
        d = self.struct.dictionary
        return _Node(d.contents, self.depth + 1) if d else None

    def buffers(self, count=2):
        """The first ``count`` buffer addresses (None for NULL)."""
        if self.struct.n_buffers < count:
            raise ValueError(f"from_arrow: invalid Arrow array: the node at level {self.depth} "
                             f"has {self.struct.n_buffers} buffers, expected {count}")
        bufs = self.struct.buffers
        return [bufs[i] or None for i in range(count)]


def _flat_buffers(root, p):
    """Every node's buffers in the order of ``pyarrow.Array.buffers()``."""
    out = []
    node = root
    for kind, _ in p.levels + p.features:
        out.extend(node.buffers(NUM_BUFFERS[kind]))
        node = node.values
    out.extend(node.buffers(1 if p.null_leaf else 2))
    return out


def _device_struct(capsule):
    return ArrowDeviceArray.from_address(
        _capsule_pointer(capsule, _DEVICE_ARRAY_CAPSULE, "the device array capsule"))


def device_capsules(obj):
    """``((schema, array), device_type)``: ``obj``'s device capsules (exported once), or the
    pair of capsules ``obj`` is, and the ``ArrowDeviceType`` they report."""
    if isinstance(obj, tuple) and len(obj) == 2:
        capsules = obj
    else:
        method = getattr(obj, "__arrow_c_device_array__", None)
        if method is None:
            raise TypeError(f"import_device_array: expected an object with "
                            f"__arrow_c_device_array__ (or a pair of capsules), got "
                            f"{type(obj).__name__}")
        capsules = method()
        if not (isinstance(capsules, tuple) and len(capsules) == 2):
            raise TypeError(f"import_device_array: __arrow_c_device_array__ of "
                            f"{type(obj).__name__} returned {type(capsules).__name__}, expected "
                            f"a pair of capsules")
    return capsules, int(_device_struct(capsules[1]).device_type)


def _import_type(schema_capsule):
    """The ``pyarrow.DataType`` of an ``arrow_schema`` capsule (moved out of it)."""
    address = _capsule_pointer(schema_capsule, _SCHEMA_CAPSULE, "the schema capsule")
    if not ArrowSchema.from_address(address).release:
        raise ValueError("from_arrow: the ArrowSchema was already released (a capsule can be "
                         "consumed once)")
    pa = _pyarrow()
    try:
        return pa.DataType._import_from_c_capsule(schema_capsule)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise ValueError(f"from_arrow: invalid Arrow schema ({exc})") from None


def import_device_array(obj, nulls="error", *, lod_level=None, feature_shape=None):
    """Build a LoDTensor from an object exporting the Arrow C Device data interface.

    This is :func:`lodarrow.from_arrow` for device arrays: the same type analysis, the same
    decoder, the same errors, run over the C structs' buffers.  Data stays where it is and
    is not copied: host memory (``ARROW_DEVICE_CPU``, ``ARROW_DEVICE_CUDA_HOST``) becomes a
    read-only NumPy view, CUDA memory (``ARROW_DEVICE_CUDA``, ``ARROW_DEVICE_CUDA_MANAGED``)
    a CuPy view on the array's device; the views keep the producer's array alive, and its
    release callback runs when the last view dies.  The copies are those listed in
    :func:`lodarrow.from_arrow` (bool values, dictionary values, gathers); offsets are copied
    to the host (host offsets that are int64 and start at 0 are viewed).  A ``sync_event`` is
    waited on by the current CuPy stream.

    Parameters
    ----------
    obj : object
        An object with ``__arrow_c_device_array__`` (a pyarrow array, a GPU dataframe column,
        a LoDTensor), or the pair of capsules such a method returns.
    nulls : {"error", "empty"}, default "error"
        As in :func:`lodarrow.from_arrow`.
    lod_level, feature_shape : optional
        As in :func:`lodarrow.from_arrow`.

    Returns
    -------
    LoDTensor
        On the CPU for host devices, on ``CUDAPlace(device_id)`` for CUDA devices.

    Raises
    ------
    TypeError
        If ``obj`` exports no device array, or a type cannot be LoDTensor data (strings,
        structs, uint32 ...); the message names the type.
    ValueError
        As :func:`lodarrow.from_arrow`; also if the device type is not supported or the
        structs are malformed (missing children or buffers, released capsules).
    LoDError
        As :func:`lodarrow.from_arrow`.
    BackendError
        If the data is on a CUDA device and CuPy is not available.

    Examples
    --------
    >>> import pyarrow as pa
    >>> from lodarrow._interop._cdevice import import_device_array
    >>> arr = pa.array([[[1.0, 2.0], [3.0]], [[4.0]]], pa.large_list(pa.large_list(pa.float64())))
    >>> t = import_device_array(arr)
    >>> t.lod(), t.data.tolist()
    ([[0, 2, 3], [0, 2, 3, 4]], [1.0, 2.0, 3.0, 4.0])
    """
    if nulls not in ("error", "empty"):
        raise ValueError(f"import_device_array: nulls must be 'error' or 'empty', got {nulls!r}")
    (schema_capsule, array_capsule), device_type = device_capsules(obj)
    owner = _Imported(_capsule_pointer(array_capsule, _DEVICE_ARRAY_CAPSULE,
                                       "the device array capsule"))
    typ = _import_type(schema_capsule)
    struct = owner.struct
    if device_type not in _HOST_DEVICES + _CUDA_DEVICES:
        name = _DEVICE_NAMES.get(device_type, "unknown")
        raise ValueError(f"from_arrow: device type {device_type} ({name}) is not supported; "
                         f"lodarrow reads CPU, CUDA, CUDA_HOST and CUDA_MANAGED memory")
    p = plan(typ, lod_level, feature_shape)
    device_id = int(struct.device_id)
    if device_type in _CUDA_DEVICES and device_id < 0:  # no device named: the current one
        device_id = get_cupy().cuda.runtime.getDevice()
    mem = _Memory(device_type, device_id, owner)
    root = _Node(struct.array, 0)
    widths = list(p.widths)
    if not mem.cuda:
        data, levels = decode(mem, root, _flat_buffers(root, p), p, nulls, widths)
    else:
        cupy = mem.xp
        with cupy.cuda.Device(mem.id):
            if struct.sync_event:  # a cudaEvent_t*: order our reads after the producer's work
                event = ctypes.c_void_p.from_address(struct.sync_event).value or 0
                cupy.cuda.runtime.streamWaitEvent(cupy.cuda.get_current_stream().ptr, event)
            data, levels = decode(mem, root, _flat_buffers(root, p), p, nulls, widths)
    if None in widths:
        raise missing_width(typ, p, widths)
    return LoDTensor._from_trusted(data, _freeze(levels), unchecked=True, narrow=p.narrow)


def device_type_of(obj):
    """The ``ArrowDeviceType`` where ``obj``'s Arrow data lives.

    Parameters
    ----------
    obj : object
        A LoDTensor, or any object of the Arrow PyCapsule interface.

    Returns
    -------
    int or None
        :data:`ARROW_DEVICE_CPU` (1), :data:`ARROW_DEVICE_CUDA` (2), ... ; ``ARROW_DEVICE_CPU``
        for objects exporting only ``__arrow_c_array__`` / ``__arrow_c_stream__`` (host data
        by definition); None for objects of no Arrow interface.  Objects other than
        LoDTensors and pyarrow arrays are asked for their capsules (which are released
        unused): :func:`lodarrow.from_arrow` does not call this, it reads the device of the
        capsules it imports.

    Examples
    --------
    >>> import numpy as np, lodarrow as la
    >>> from lodarrow._interop._cdevice import device_type_of
    >>> device_type_of(la.LoDTensor(np.zeros(3)))
    1
    """
    if isinstance(obj, LoDTensor):
        return ARROW_DEVICE_CUDA if is_cupy_array(obj._data) else ARROW_DEVICE_CPU
    is_cpu = getattr(obj, "is_cpu", None)  # pyarrow >= 17 arrays know without exporting
    if isinstance(is_cpu, bool) and is_cpu:
        return ARROW_DEVICE_CPU
    if hasattr(obj, "__arrow_c_device_array__"):
        return device_capsules(obj)[1]
    if hasattr(obj, "__arrow_c_array__") or hasattr(obj, "__arrow_c_stream__"):
        return ARROW_DEVICE_CPU
    return None
