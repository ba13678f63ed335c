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

from lodarrow._backend import get_cupy, is_cupy_array
from lodarrow._errors import LoDError
from lodarrow._tensor import LoDTensor, _freeze
from lodarrow._validation import check_lod

__all__ = [
    "ARROW_DEVICE_CPU",
    "ARROW_DEVICE_CUDA",
    "ARROW_DEVICE_CUDA_HOST",
    "ARROW_DEVICE_CUDA_MANAGED",
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


@functools.lru_cache(maxsize=256)
def _arrow_type(pa, dtype, feature_shape, n_levels):
    """The type ``to_arrow`` gives (SPEC 3.1): large lists over fixed-size lists over values."""
    name = "bool_" if dtype.kind == "b" else dtype.name
    typ = getattr(pa, name)()
    for size in reversed(feature_shape):
        typ = pa.list_(typ, int(size))
    for _ in range(n_levels):
        typ = pa.large_list(typ)
    return typ


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


_PACK_BITS = r"""
    const long long base = (long long)i * 8;
    unsigned char b = 0;
    for (int j = 0; j < 8; ++j) {
        const long long k = base + j;
        if (k < n && x[k]) b |= (unsigned char)(1u << j);
    }
    y = b;
"""


def _pack_bits(flat, on_gpu):
    """Arrow's bit-packed booleans (LSB first) of a flat bool array, on its device."""
    if not on_gpu:
        return np.packbits(flat, bitorder="little")
    from lodarrow._cuda import elementwise_kernel

    cupy = get_cupy()
    out = cupy.empty((flat.shape[0] + 7) // 8, dtype=np.uint8)
    if out.shape[0]:
        kernel = elementwise_kernel("raw bool x, int64 n", "uint8 y", _PACK_BITS,
                                    "lodarrow_cdevice_pack_bits")
        kernel(flat, np.int64(flat.shape[0]), out)
    return out


def _address(arr, on_gpu):
    return arr.data.ptr if on_gpu else arr.ctypes.data


def export_device_array(t, requested_schema=None, **kwargs):
    """Export a LoDTensor through the Arrow C Device data interface.

    This is ``LoDTensor.__arrow_c_device_array__``.  The type is the one ``to_arrow`` gives
    (SPEC section 3.1): each LoD level a ``large_list`` whose offsets are the level's int64
    offsets, each feature dimension a ``fixed_size_list``, then the values.  Data and
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
    natural = _arrow_type(pa, t.dtype, t.feature_shape, len(t._offsets))
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
    values = _pack_bits(flat, on_gpu) if data.dtype.kind == "b" else flat
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
_VALUE_DTYPES = {"b": "bool", "c": "int8", "C": "uint8", "s": "int16", "S": "uint16",
                 "i": "int32", "l": "int64", "e": "float16", "f": "float32", "g": "float64"}
_INDEX_DTYPES = {"c": "int8", "C": "uint8", "s": "int16", "S": "uint16", "i": "int32",
                 "I": "uint32", "l": "int64", "L": "uint64"}
_FORMAT_NAMES = {"n": "null", "I": "uint32", "L": "uint64", "u": "utf8", "U": "large_utf8",
                 "vu": "utf8_view", "z": "binary", "Z": "large_binary", "vz": "binary_view",
                 "+s": "struct", "+m": "map", "tdD": "date32", "tdm": "date64"}
_VAR_LISTS = {"+l": "int32", "+L": "int64", "+vl": "int32", "+vL": "int64"}


class _Schema:
    """A parsed, borrowed ``ArrowSchema`` node (the capsule keeps owning the struct)."""

    __slots__ = ("format", "children", "dictionary")

    def __init__(self, s, depth=0):
        if depth > 64:
            raise ValueError("import_device_array: the Arrow schema is nested too deeply")
        if not s.release:
            raise ValueError("import_device_array: the ArrowSchema was already released")
        self.format = (s.format or b"").decode("utf-8", "replace")
        self.children = [_Schema(s.children[i].contents, depth + 1) for i in range(s.n_children)]
        self.dictionary = _Schema(s.dictionary.contents, depth + 1) if s.dictionary else None

    def kind(self):
        """"list" for a variable-size list, "fixed" for a fixed-size list, else None."""
        if self.format in _VAR_LISTS:
            return "list"
        if self.format.startswith("+w:"):
            return "fixed"
        return None

    def list_size(self):
        try:
            size = int(self.format[3:])
        except ValueError:
            size = -1
        if size < 0:
            raise ValueError(f"import_device_array: malformed fixed-size list format "
                             f"{self.format!r}")
        return size


class _Array:
    """The fields of one ``ArrowArray`` node, read once."""

    __slots__ = ("length", "null_count", "offset", "buffers", "children", "dictionary")

    def __init__(self, a):
        self.length = int(a.length)
        self.null_count = int(a.null_count)
        self.offset = int(a.offset)
        if self.length < 0 or self.offset < 0:
            raise ValueError(f"import_device_array: malformed ArrowArray (length {self.length},"
                             f" offset {self.offset})")
        self.buffers = [a.buffers[i] for i in range(a.n_buffers)] if a.n_buffers else []
        self.children = [a.children[i].contents for i in range(a.n_children)]
        self.dictionary = a.dictionary.contents if a.dictionary else None

    def buffer(self, i, fmt):
        if len(self.buffers) <= i:
            raise ValueError(f"import_device_array: an array of format {fmt!r} has "
                             f"{len(self.buffers)} buffers, expected at least {i + 1}")
        return self.buffers[i] or 0


class _Imported:
    """Owns an ``ArrowDeviceArray`` moved out of its capsule; releases it when collected.

    Every zero-copy view of its buffers references this object, so the producer's release
    callback runs once the last view dies.
    """

    __slots__ = ("struct", "__weakref__")

    def __init__(self, address):
        src = ArrowDeviceArray.from_address(address)
        if not src.array.release:
            raise ValueError("import_device_array: the ArrowDeviceArray was already released "
                             "(a capsule can be consumed once)")
        self.struct = ArrowDeviceArray()
        ctypes.memmove(ctypes.addressof(self.struct), address, ctypes.sizeof(ArrowDeviceArray))
        src.array.release = _ARRAY_RELEASE()  # moved: the capsule's destructor now frees only

    def __del__(self, _byref=ctypes.byref):  # bound early: __del__ may run at shutdown
        array = self.struct.array
        if array.release:
            array.release(_byref(array))


class _HostView:
    """``__array_interface__`` of a read-only host buffer; the NumPy view keeps it (and the
    owner) alive."""

    __slots__ = ("__array_interface__", "owner")

    def __init__(self, address, count, dtype, owner):
        self.__array_interface__ = {"data": (address, True), "shape": (count,),
                                    "typestr": dtype.str, "version": 3}
        self.owner = owner


_UNPACK_BITS = "const long long k = s + i; y = (b[k >> 3] >> (k & 7)) & 1;"


class _Device:
    """Reads buffers of one device: NumPy views on the host, CuPy views on a GPU."""

    def __init__(self, device_type, device_id, owner):
        self.owner = owner
        self.cuda = device_type in _CUDA_DEVICES
        self.id = int(device_id)
        self.xp = get_cupy("importing an Arrow array from a CUDA device") if self.cuda else np

    def view(self, address, start, count, dtype):
        """Items ``[start, start + count)`` of the buffer at ``address`` (no copy)."""
        dtype = np.dtype(dtype)
        if count == 0:
            return self.xp.empty(0, dtype=dtype)
        if not address:
            raise ValueError("import_device_array: a buffer is NULL but must hold "
                             f"{count} items")
        address += start * dtype.itemsize
        if not self.cuda:
            return np.asarray(_HostView(address, count, dtype, self.owner))
        cupy = self.xp
        mem = cupy.cuda.UnownedMemory(address, count * dtype.itemsize, self.owner, self.id)
        return cupy.ndarray((count,), dtype=dtype, memptr=cupy.cuda.MemoryPointer(mem, 0))

    def host(self, address, start, count, dtype):
        """Like :meth:`view` but always a host array (a copy from a GPU)."""
        out = self.view(address, start, count, dtype)
        return out.get() if self.cuda else out

    def bits(self, address, start, count):
        """Bits ``[start, start + count)`` of a bitmap as a bool array on the device (a copy)."""
        nbytes = (start + count + 7) // 8
        if not self.cuda:
            lo = start // 8
            raw = self.view(address, lo, nbytes - lo, np.uint8)
            unpacked = np.unpackbits(raw, bitorder="little")
            return unpacked[start - 8 * lo:start - 8 * lo + count].view(bool)
        from lodarrow._cuda import elementwise_kernel

        out = self.xp.empty(count, dtype=bool)
        if count:
            raw = self.view(address, 0, nbytes, np.uint8)
            kernel = elementwise_kernel("raw uint8 b, int64 s", "bool y", _UNPACK_BITS,
                                        "lodarrow_cdevice_unpack_bits")
            kernel(raw, np.int64(start), out)
        return out

    def to_device(self, host):
        return self.xp.asarray(host) if self.cuda else host

    def to_host(self, arr):
        return arr.get() if self.cuda else arr


def _size(sel):
    return sel[1] - sel[0] if isinstance(sel, tuple) else sel.shape[0]


def _gather(dev, sel, scale, shift, read):
    """The flat entries of rows ``sel``, row ``r`` spanning entries ``[r * scale + shift,
    + scale)``; ``read(start, count)`` reads a contiguous span (a view where it can).

    A range of rows is one span; an index array gathers its rows from the span covering
    them (a copy).
    """
    if isinstance(sel, tuple):
        return read(sel[0] * scale + shift, (sel[1] - sel[0]) * scale)
    top = int(sel.max()) + 1 if sel.shape[0] else 0
    block = read(shift, top * scale).reshape(top, scale)
    return block[dev.to_device(sel)].reshape(-1)


def _validity(dev, array, fmt, sel, scale, shift):
    """The validity (bool, on the device) of the entries of rows ``sel`` (see _gather), or
    None when the array has no nulls."""
    if array.null_count == 0:
        return None
    address = array.buffer(0, fmt)
    if not address:
        if array.null_count > 0:
            raise ValueError(f"import_device_array: an array of format {fmt!r} reports "
                             f"{array.null_count} nulls but has no validity buffer")
        return None
    return _gather(dev, sel, scale, shift, lambda start, count: dev.bits(address, start, count))


def _first_false(mask):
    """Index of the first False of a bool array (host or device), or -1."""
    if mask is None or mask.shape[0] == 0 or bool(mask.all()):
        return -1
    return int(mask.view(np.uint8).argmin())


def _top_sequence(levels, k, pos):
    """The top-level sequence holding entry ``pos`` of level ``k`` (``k == L``: a row)."""
    for j in range(k - 1, -1, -1):
        pos = int(np.searchsorted(levels[j], pos, side="right")) - 1
    return pos


def _where(levels, k, pos, unit):
    """Where entry ``pos`` of level ``k`` is, for messages: it and its top-level sequence."""
    if k == 0:
        return f"row {pos}" if unit == "row" else f"top-level sequence {pos}"
    return f"{unit} {pos} (top-level sequence {_top_sequence(levels, k, pos)})"


def _decreasing(k, off):
    """The ``LoDError`` for offsets ``off`` of level ``k`` that decrease (as check_lod words it)."""
    pos = int(np.argmax(np.diff(off) < 0)) + 1
    return LoDError(f"invalid LoD: offsets[{k}] must be non-decreasing; first violation at "
                    f"position {pos} ({int(off[pos - 1])} > {int(off[pos])})")


def _lod_level(dev, k, schema, array, child_length, sel, nulls, levels):
    """Level ``k``'s offsets (host int64, from 0) and the selection of the child's entries.

    ``sel`` selects entries of ``array`` by logical index: a ``(start, stop)`` range or an
    int64 host array (after a gather).  The returned selection is the child's, in the same
    form: a range while the selected entries stay contiguous, else an index array.
    """
    fmt = schema.format
    n = _size(sel)
    valid = _validity(dev, array, fmt, sel, 1, array.offset)
    bad = _first_false(valid)
    if bad < 0:
        valid = None
    elif nulls == "error":
        raise ValueError(f"import_device_array: null list at LoD level {k}, "
                         f"{_where(levels, k, bad, 'position')}; a LoDTensor holds no nulls "
                         f"(nulls='empty' reads null lists as empty sequences)")
    else:
        valid = dev.to_host(valid)
    if n == 0:
        return np.zeros(1, dtype=np.int64), (0, 0)
    ranged = isinstance(sel, tuple) and valid is None
    view = fmt in ("+vl", "+vL")
    if schema.kind() == "fixed":
        size = schema.list_size()
        if ranged:  # uniform lengths over one span
            start = (sel[0] + array.offset) * size
            if start + n * size > child_length:
                raise ValueError(f"import_device_array: the fixed-size lists of LoD level {k} "
                                 f"need {start + n * size} child entries, the child has "
                                 f"{child_length}")
            return np.arange(n + 1, dtype=np.int64) * size, (start, start + n * size)
    elif ranged and not view:  # the common case: one slice of the offsets, no gather
        off = dev.host(array.buffer(1, fmt), sel[0] + array.offset, n + 1, _VAR_LISTS[fmt])
        off = off.astype(np.int64, copy=False)
        first, last = int(off[0]), int(off[-1])
        if last < first:
            raise _decreasing(k, off)
        if first < 0 or last > child_length:
            raise ValueError(f"import_device_array: the offsets of LoD level {k} span "
                             f"[{first}, {last}], beyond the {child_length} entries of the "
                             f"child array")
        return (off - first if first else off), (first, last)
    # General case: per-entry starts and lengths, then a gather where they are not one run.
    if isinstance(sel, tuple):
        rows = np.arange(sel[0], sel[1], dtype=np.int64) + array.offset
    else:
        rows = sel + array.offset
    if schema.kind() == "fixed":
        starts = rows * size
        lengths = np.full(n, size, dtype=np.int64)
    else:
        off_type = _VAR_LISTS[fmt]
        top = int(rows[-1] if isinstance(sel, tuple) else rows.max()) + 1
        if view:
            starts = dev.host(array.buffer(1, fmt), 0, top, off_type)[rows].astype(np.int64)
            lengths = dev.host(array.buffer(2, fmt), 0, top, off_type)[rows].astype(np.int64)
        else:
            off = dev.host(array.buffer(1, fmt), 0, top + 1, off_type)
            starts = off[rows].astype(np.int64)
            lengths = off[rows + 1].astype(np.int64) - starts
            if (lengths < 0).any():
                pos = int(np.argmax(lengths < 0))
                raise LoDError(f"invalid LoD: offsets[{k}] must be non-decreasing; first "
                               f"violation at position {pos + 1} ({int(starts[pos])} > "
                               f"{int(starts[pos] + lengths[pos])})")
    if valid is not None:
        lengths[~valid] = 0
    if (lengths < 0).any():
        pos = int(np.argmax(lengths < 0))
        raise ValueError(f"import_device_array: negative list-view size {int(lengths[pos])} "
                         f"at LoD level {k}, {_where(levels, k, pos, 'position')}")
    used = lengths > 0
    s, m = starts[used], lengths[used]
    outside = (s < 0) | (s + m > child_length)
    if outside.any():
        pos = int(np.flatnonzero(used)[np.argmax(outside)])
        raise ValueError(f"import_device_array: the list at LoD level {k}, "
                         f"{_where(levels, k, pos, 'position')} spans [{int(starts[pos])}, "
                         f"{int(starts[pos] + lengths[pos])}), beyond the {child_length} "
                         f"entries of the child array")
    level = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=level[1:])
    if s.shape[0] == 0:
        return level, (0, 0)
    if np.array_equal(s[1:], s[:-1] + m[:-1]):  # still one contiguous run: no gather
        return level, (int(s[0]), int(s[-1] + m[-1]))
    before = np.zeros(m.shape[0], dtype=np.int64)
    np.cumsum(m[:-1], out=before[1:])
    return level, np.repeat(s - before, m) + np.arange(int(level[-1]), dtype=np.int64)


def _leaf_values(dev, fmt, array, sel, scale, shift):
    """The values of rows ``sel`` (see _gather), flat: a view, but for bool (bit-packed)."""
    dtype = np.dtype(_VALUE_DTYPES[fmt])
    address = array.buffer(1, fmt)
    if dtype.kind == "b":
        return _gather(dev, sel, scale, shift, lambda start, n: dev.bits(address, start, n))
    return _gather(dev, sel, scale, shift, lambda start, n: dev.view(address, start, n, dtype))


def _check_leaf_type(schema):
    """Raise ``TypeError`` unless the innermost type can be LoDTensor data."""
    expected = ("(expected bool, int8, uint8, int16, uint16, int32, int64, float16, float32 "
                "or float64)")
    words = schema.dictionary
    if words is None and schema.format not in _VALUE_DTYPES:
        name = _FORMAT_NAMES.get(schema.format, schema.format)
        raise TypeError(f"import_device_array: values of Arrow type {name!r} cannot be "
                        f"LoDTensor data {expected}")
    if words is not None:
        if schema.format not in _INDEX_DTYPES:
            raise TypeError(f"import_device_array: dictionary indices of format "
                            f"{schema.format!r} are not integers")
        if words.format not in _VALUE_DTYPES or words.dictionary is not None:
            name = _FORMAT_NAMES.get(words.format, words.format)
            raise TypeError(f"import_device_array: dictionary values of Arrow type {name!r} "
                            f"cannot be LoDTensor data {expected}")


def _read(dev, schema, root, nulls):
    """``(levels, data)`` of the nested lists ``schema``/``root`` (see import_device_array)."""
    chain = [(schema, _Array(root))]
    while chain[-1][0].kind() is not None:
        s, a = chain[-1]
        if len(s.children) != 1 or len(a.children) != 1:
            raise ValueError(f"import_device_array: a list of format {s.format!r} must have one "
                             f"child, found {len(s.children)} in the schema and "
                             f"{len(a.children)} in the array")
        chain.append((s.children[0], _Array(a.children[0])))
    _check_leaf_type(chain[-1][0])
    n_levels = 1 + max((i for i, (s, _) in enumerate(chain) if s.kind() == "list"), default=-1)
    levels = []
    sel = (0, chain[0][1].length)
    for k in range(n_levels):
        (s, a), child = chain[k], chain[k + 1][1]
        level, sel = _lod_level(dev, k, s, a, child.length, sel, nulls, levels)
        levels.append(level)
    # Below the last variable-size list: fixed-size lists are feature dimensions.  Row r
    # of the first such node spans entries [r * scale + shift, +scale) of node d.
    rows = _size(sel)
    top_row = sel[1] if isinstance(sel, tuple) else (int(sel.max()) + 1 if rows else 0)
    dims = []
    scale, shift = 1, chain[n_levels][1].offset
    for d in range(n_levels, len(chain)):
        s, a = chain[d]
        if d > n_levels:
            shift = shift * dims[-1] + a.offset
            scale *= dims[-1]
        if rows and scale and top_row * scale + shift - a.offset > a.length:
            what = "values" if d == len(chain) - 1 else "fixed-size lists"
            raise ValueError(f"import_device_array: the {what} hold {a.length} entries, fewer "
                             f"than the {top_row * scale + shift - a.offset} the lists above "
                             f"need")
        if s.kind() == "fixed":
            dims.append(s.list_size())
            what = f"null fixed-size list (feature dimension {len(dims) - 1})"
        else:
            what = "null value"
        if s.dictionary is None:
            bad = _first_false(_validity(dev, a, s.format, sel, scale, shift))
            if bad >= 0:
                raise ValueError(f"import_device_array: {what} in "
                                 f"{_where(levels, n_levels, bad // scale, 'row')}; a LoDTensor "
                                 f"holds no nulls")
    leaf_schema, leaf = chain[-1]
    if leaf_schema.dictionary is None:
        values = _leaf_values(dev, leaf_schema.format, leaf, sel, scale, shift)
    else:
        values = _decode(dev, leaf_schema, leaf, sel, scale, shift, levels, n_levels)
    return levels, values.reshape((rows, *dims))


def _decode(dev, schema, array, sel, scale, shift, levels, n_levels):
    """Dictionary-encoded values of rows ``sel``, decoded (a copy): ``dictionary[indices]``."""
    fmt, words_fmt = schema.format, schema.dictionary.format
    bad = _first_false(_validity(dev, array, fmt, sel, scale, shift))
    if bad >= 0:
        raise ValueError(f"import_device_array: null value in "
                         f"{_where(levels, n_levels, bad // scale, 'row')}; a LoDTensor holds "
                         f"no nulls")
    dtype = np.dtype(_INDEX_DTYPES[fmt])
    address = array.buffer(1, fmt)
    indices = _gather(dev, sel, scale, shift, lambda start, n: dev.view(address, start, n, dtype))
    if array.dictionary is None:
        raise ValueError("import_device_array: a dictionary-encoded array has no dictionary")
    words = _Array(array.dictionary)
    size = words.length
    if indices.shape[0]:
        lo, hi = int(indices.min()), int(indices.max())
        if lo < 0 or hi >= size:
            pos = int(dev.to_host((indices < 0) | (indices >= size)).argmax())
            raise ValueError(f"import_device_array: dictionary index {int(indices[pos])} in "
                             f"{_where(levels, n_levels, pos // scale, 'row')} is out of range "
                             f"for a dictionary of {size} values")
    indices = indices.astype(np.int64)
    whole = (0, size)
    word_valid = _validity(dev, words, words_fmt, whole, 1, words.offset)
    if word_valid is not None:
        bad = _first_false(word_valid[indices])
        if bad >= 0:
            raise ValueError(f"import_device_array: null value in "
                             f"{_where(levels, n_levels, bad // scale, 'row')}; a LoDTensor "
                             f"holds no nulls")
    return _leaf_values(dev, words_fmt, words, whole, 1, words.offset)[indices]


def _device_capsules(obj):
    if isinstance(obj, tuple) and len(obj) == 2:
        return obj
    method = getattr(obj, "__arrow_c_device_array__", None)
    if method is None:
        raise TypeError(f"import_device_array: expected an object with "
                        f"__arrow_c_device_array__ (or a pair of capsules), got "
                        f"{type(obj).__name__}")
    capsules = method()
    if not (isinstance(capsules, tuple) and len(capsules) == 2):
        raise TypeError(f"import_device_array: __arrow_c_device_array__ of "
                        f"{type(obj).__name__} returned {type(capsules).__name__}, expected a "
                        f"pair of capsules")
    return capsules


def import_device_array(obj, nulls="error"):
    """Build a LoDTensor from an object exporting the Arrow C Device data interface.

    Each variable-size list level (``list``, ``large_list``, ``list_view``,
    ``large_list_view``) becomes a LoD level, as does a ``fixed_size_list`` above the last
    of them (uniform lengths); ``fixed_size_list`` below it are feature dimensions.  The
    values must be bool, int8, uint8, int16, uint16, int32, int64, float16, float32 or
    float64 (dictionary-encoded values are decoded, a copy).  Sliced arrays (non-zero
    ``offset``, offsets that do not start at 0) are rebased; int32 offsets are widened.

    Data stays where it is and is not copied: host memory (``ARROW_DEVICE_CPU``,
    ``ARROW_DEVICE_CUDA_HOST``) becomes a read-only NumPy view, CUDA memory
    (``ARROW_DEVICE_CUDA``, ``ARROW_DEVICE_CUDA_MANAGED``) a CuPy view on the array's device;
    the views keep the producer's array alive, and its release callback runs when the last
    view dies.  The exceptions are copies: bool values (Arrow bit-packs them), dictionary
    values, and gathers where list views or ``nulls="empty"`` make the selected entries
    non-contiguous.  Offsets are copied to the host (CPU offsets that are int64 and start at
    0 are viewed).  A ``sync_event`` is waited on by the current CuPy stream.

    Parameters
    ----------
    obj : object
        An object with ``__arrow_c_device_array__`` (a pyarrow array, a GPU dataframe column,
        a LoDTensor), or the pair of capsules such a method returns.
    nulls : {"error", "empty"}, default "error"
        ``"error"``: a null anywhere raises ``ValueError`` naming its level and position.
        ``"empty"``: null lists become empty sequences (null values still raise).

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
        If a null is found (see ``nulls``), the device type is not supported, or the array
        is malformed (offsets beyond the child array, missing buffers).
    LoDError
        If list offsets decrease.
    BackendError
        If the data is on a CUDA device and CuPy is not available.

    Examples
    --------
    >>> import pyarrow as pa
    >>> from lodarrow._cdevice import import_device_array
    >>> arr = pa.array([[[1.0, 2.0], [3.0]], [[4.0]]], pa.large_list(pa.large_list(pa.float64())))
    >>> t = import_device_array(arr)
    >>> t.lod(), t.data.tolist()
    ([[0, 2, 3], [0, 2, 3, 4]], [1.0, 2.0, 3.0, 4.0])
    """
    if nulls not in ("error", "empty"):
        raise ValueError(f"import_device_array: nulls must be 'error' or 'empty', got {nulls!r}")
    schema_capsule, array_capsule = _device_capsules(obj)
    schema_address = _capsule_pointer(schema_capsule, _SCHEMA_CAPSULE, "the schema capsule")
    array_address = _capsule_pointer(array_capsule, _DEVICE_ARRAY_CAPSULE,
                                     "the device array capsule")
    schema = _Schema(ArrowSchema.from_address(schema_address))
    owner = _Imported(array_address)
    struct = owner.struct
    device_type = int(struct.device_type)
    if device_type not in _HOST_DEVICES + _CUDA_DEVICES:
        name = _DEVICE_NAMES.get(device_type, "unknown")
        raise ValueError(f"import_device_array: device type {device_type} ({name}) is not "
                         f"supported; lodarrow reads CPU, CUDA, CUDA_HOST and CUDA_MANAGED "
                         f"memory")
    device_id = int(struct.device_id)
    if device_type in _CUDA_DEVICES and device_id < 0:  # no device named: the current one
        device_id = get_cupy().cuda.runtime.getDevice()
    dev = _Device(device_type, device_id, owner)
    if not dev.cuda:
        levels, data = _read(dev, schema, struct.array, nulls)
    else:
        cupy = dev.xp
        with cupy.cuda.Device(dev.id):
            if struct.sync_event:  # a cudaEvent_t*: order our reads after the producer's work
                event = ctypes.c_void_p.from_address(struct.sync_event).value or 0
                cupy.cuda.runtime.streamWaitEvent(cupy.cuda.get_current_stream().ptr, event)
            levels, data = _read(dev, schema, struct.array, nulls)
    check_lod(levels, data.shape[0], "offsets")
    return LoDTensor._from_trusted(data, _freeze(levels))


def device_type_of(obj):
    """The ``ArrowDeviceType`` where ``obj``'s Arrow data lives, without importing it.

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
        LoDTensors and pyarrow arrays are asked for their capsules once (which are released
        unused), so call this before, not instead of, :func:`import_device_array`.

    Examples
    --------
    >>> import numpy as np, lodarrow as la
    >>> from lodarrow._cdevice import device_type_of
    >>> device_type_of(la.LoDTensor(np.zeros(3)))
    1
    """
    if isinstance(obj, LoDTensor):
        return ARROW_DEVICE_CUDA if is_cupy_array(obj._data) else ARROW_DEVICE_CPU
    is_cpu = getattr(obj, "is_cpu", None)  # pyarrow >= 17 arrays know without exporting
    if isinstance(is_cpu, bool) and is_cpu:
        return ARROW_DEVICE_CPU
    method = getattr(obj, "__arrow_c_device_array__", None)
    if method is not None:
        _, capsule = method()
        address = _capsule_pointer(capsule, _DEVICE_ARRAY_CAPSULE, "the device array capsule")
        return int(ArrowDeviceArray.from_address(address).device_type)
    if hasattr(obj, "__arrow_c_array__") or hasattr(obj, "__arrow_c_stream__"):
        return ARROW_DEVICE_CPU
    return None
