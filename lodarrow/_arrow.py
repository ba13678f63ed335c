"""Arrow interop: a LoDTensor <-> nested Arrow lists, zero-copy where Arrow's layout allows.

The mapping (SPEC section 3.1): the rows are a primitive array (one ``FixedSizeList`` per
feature dimension, outermost outermost), and each LoD level, from the last to the first, wraps
them in a ``LargeList`` whose offsets buffer *is* that level's int64 offsets.

Both directions cost O(levels), not O(N): arrays are assembled with ``pa.Array.from_buffers``
over ``pa.py_buffer`` views of the NumPy arrays, and taken apart with ``arr.buffers()`` and
``np.frombuffer``.  Copies happen only where Arrow's layout forces them:

========================================  ===============================================
case                                      what is copied
========================================  ===============================================
bool values (bit-packed in Arrow)         the values, each way
``List`` / ``to_arrow(large_offsets=      the offsets (widened to int64 / narrowed to
False)`` (int32 offsets)                  int32); the values stay zero-copy
a slice whose offsets do not start at 0   the offsets of that level (rebased to 0)
``ListView`` / ``LargeListView``          the offsets (built from offsets + sizes); the
                                          values too when the views are not contiguous
                                          and in order (a gather)
``FixedSizeList`` used as a LoD level     the offsets (``arange`` of the uniform length)
``nulls="empty"`` with a null list        the offsets; the values too when a null slot
backed by a non-empty range               hides values (they are dropped)
dictionary-encoded values                 the values (decoded)
``ChunkedArray`` of several chunks        everything (the chunks are joined)
strided / GPU data in ``to_arrow``        the data (made contiguous / copied to the host)
========================================  ===============================================

Like pyarrow itself, ``from_arrow`` trusts the structural invariants of the Arrow arrays it is
given (offsets non-decreasing); it checks in O(1) that every level stays inside its child, so
a malformed array cannot make it read out of bounds.  ``arr.validate(full=True)`` checks the
rest.
"""

import functools

import numpy as np
import pyarrow as pa

from lodarrow._backend import is_cupy_array
from lodarrow._place import CPUPlace
from lodarrow._tensor import LoDTensor, _freeze
from lodarrow._validation import SUPPORTED_DTYPES

__all__ = ["from_arrow", "to_arrow", "export_c_array"]

_INT32_MAX = np.iinfo(np.int32).max
_CPU = CPUPlace()
_NULLS = ("error", "empty")

# numpy dtype <-> Arrow type, one to one (float16 <-> halffloat; bool is bit-packed in Arrow).
_TO_ARROW = {np.dtype(d): pa.from_numpy_dtype(np.dtype(d)) for d in SUPPORTED_DTYPES}
_FROM_ARROW = {v: k for k, v in _TO_ARROW.items()}

# Nested-type kinds: variable-size levels, and fixed-size lists.
_LIST, _LARGE_LIST, _LIST_VIEW, _LARGE_LIST_VIEW, _FIXED = (
    "list", "large_list", "list_view", "large_list_view", "fixed_size_list")
_VARIABLE = (_LIST, _LARGE_LIST, _LIST_VIEW, _LARGE_LIST_VIEW)
# Buffers each node contributes to ``Array.buffers()`` (validity first).
_NUM_BUFFERS = {_LIST: 2, _LARGE_LIST: 2, _LIST_VIEW: 3, _LARGE_LIST_VIEW: 3, _FIXED: 1}
_OFFSET_DTYPE = {_LIST: np.dtype(np.int32), _LARGE_LIST: np.dtype(np.int64),
                 _LIST_VIEW: np.dtype(np.int32), _LARGE_LIST_VIEW: np.dtype(np.int64)}

_is_list_view = getattr(pa.types, "is_list_view", lambda t: False)
_is_large_list_view = getattr(pa.types, "is_large_list_view", lambda t: False)


# ---------------------------------------------------------------------------- type analysis
def _type_chain(arrow_type):
    """Split a nested type into its list kinds, outermost first, and the leaf type.

    Returns ``(kinds, leaf)``: ``kinds`` is a tuple of ``(kind, list_size)`` pairs
    (``list_size`` is 0 for variable-size lists).
    """
    kinds = []
    t = arrow_type
    while True:
        if pa.types.is_large_list(t):
            kinds.append((_LARGE_LIST, 0))
        elif pa.types.is_list(t):
            kinds.append((_LIST, 0))
        elif _is_large_list_view(t):
            kinds.append((_LARGE_LIST_VIEW, 0))
        elif _is_list_view(t):
            kinds.append((_LIST_VIEW, 0))
        elif pa.types.is_fixed_size_list(t):
            kinds.append((_FIXED, t.list_size))
        else:
            return tuple(kinds), t
        t = t.value_type


def _split_levels(kinds):
    """``(levels, features)``: the LoD levels and the feature dimensions of a kind chain.

    A ``FixedSizeList`` above the last variable-size list is a level of uniform lengths; below
    it (or with no variable-size list at all) it is a feature dimension.
    """
    last = max((i for i, (kind, _) in enumerate(kinds) if kind in _VARIABLE), default=-1)
    return kinds[:last + 1], tuple(size for _, size in kinds[last + 1:])


class _Plan:
    """How to take apart arrays of one Arrow type (cached per type)."""

    __slots__ = ("levels", "features", "dtype", "leaf", "null_leaf", "decoded_type",
                 "buffer_pos")

    def __init__(self, levels, features, dtype, leaf, decoded_type):
        self.levels = levels
        self.features = features
        self.dtype = dtype            # numpy dtype of the values
        self.leaf = leaf              # the leaf Arrow type
        self.null_leaf = pa.types.is_null(leaf)  # list<null>: only empty lists are readable
        self.decoded_type = decoded_type  # not None: cast to this first (dictionary values)
        pos, at = [], 0
        for kind, _ in levels + tuple((_FIXED, s) for s in features):
            pos.append(at)
            at += _NUM_BUFFERS[kind]
        pos.append(at)                # the leaf: validity, values
        self.buffer_pos = tuple(pos)


def _rebuild(kinds, leaf):
    """The nested type with ``kinds`` around ``leaf``."""
    t = leaf
    for kind, size in reversed(kinds):
        if kind == _FIXED:
            t = pa.list_(t, size)
        else:
            t = {_LIST: pa.list_, _LARGE_LIST: pa.large_list,
                 _LIST_VIEW: getattr(pa, "list_view", None),
                 _LARGE_LIST_VIEW: getattr(pa, "large_list_view", None)}[kind](t)
    return t


# Recently seen (type, plan) pairs, newest first: comparing types with ``==`` costs ~0.1 us,
# hashing one (what an lru_cache does) ~1.4 us -- a tenth of the whole from_arrow budget.
# Never reordered in place, so concurrent callers can at worst add a duplicate.
_RECENT = []


def _plan(arrow_type):
    """The cached :class:`_Plan` of ``arrow_type`` (raises ``TypeError`` for unsupported values)."""
    for known, plan in _RECENT:
        if known == arrow_type:
            return plan
    plan = _make_plan(arrow_type)
    _RECENT.insert(0, (arrow_type, plan))
    del _RECENT[8:]
    return plan


@functools.lru_cache(maxsize=512)
def _make_plan(arrow_type):
    kinds, leaf = _type_chain(arrow_type)
    decoded = None
    if pa.types.is_dictionary(leaf):
        leaf = leaf.value_type
        decoded = _rebuild(kinds, leaf)
    levels, features = _split_levels(kinds)
    if pa.types.is_null(leaf):
        dtype = np.dtype(np.float64)  # list<null>: only empty lists can be represented
    else:
        dtype = _FROM_ARROW.get(leaf)
        if dtype is None:
            raise TypeError(f"from_arrow: values of Arrow type {leaf} (in {arrow_type}) are not "
                            f"supported; a LoDTensor holds bool, int8, uint8, int16, uint16, "
                            f"int32, int64, float16 (halffloat), float32 or float64")
    return _Plan(levels, features, dtype, leaf, decoded)


@functools.lru_cache(maxsize=512)
def _canonical_type(dtype, feature_shape, lod_level, large_offsets):
    """The Arrow type of a LoDTensor (SPEC section 3.1)."""
    t = _TO_ARROW[np.dtype(dtype)]
    for size in reversed(feature_shape):
        t = pa.list_(t, size)
    for _ in range(lod_level):
        t = pa.large_list(t) if large_offsets else pa.list_(t)
    return t


@functools.lru_cache(maxsize=512)
def _layer_types(dtype, feature_shape, lod_level, large_offsets):
    """The Arrow types of every layer of a LoDTensor's array, innermost first."""
    out = [_TO_ARROW[dtype]]
    for j in range(len(feature_shape) - 1, -1, -1):
        out.append(_canonical_type(dtype, feature_shape[j:], 0, True))
    for k in range(1, lod_level + 1):
        out.append(_canonical_type(dtype, feature_shape, k, large_offsets))
    return tuple(out)


def _product(shape):
    out = 1
    for s in shape:
        out *= s
    return out


def canonical_type(t, large_offsets=True):
    """The Arrow type :func:`to_arrow` gives ``t``."""
    return _canonical_type(t.dtype, t.feature_shape, t.lod_level, bool(large_offsets))


# ---------------------------------------------------------------------------- to_arrow
def to_arrow(t, large_offsets=True):
    """Convert a LoDTensor to a ``pyarrow.Array`` of nested lists, without copying the data.

    Parameters
    ----------
    t : LoDTensor
        The tensor.  GPU data is copied to the host first; strided data is made contiguous.
    large_offsets : bool, default True
        True: every LoD level is a ``LargeList`` whose offsets buffer is the level's own int64
        offsets (zero-copy).  False: ``List`` with int32 offsets (a copy of the offsets).

    Returns
    -------
    pyarrow.Array
        ``len(t)`` top-level sequences; for ``t.lod_level == 0`` the values array itself (one
        element per data row).  Feature dimensions are nested ``FixedSizeList`` s, outermost
        outermost: data of shape ``(N, 2, 3)`` float32 gives
        ``fixed_size_list<fixed_size_list<float, 3>, 2>`` values.  The array shares the
        tensor's memory (the NumPy arrays are the buffers' bases), except that bool is
        bit-packed by Arrow, int32 offsets (``large_offsets=False``) are a narrowed copy, and
        strided or GPU data is first made contiguous on the host.

    Raises
    ------
    TypeError
        If ``t`` is not a LoDTensor.
    ValueError
        If ``t`` has no data, or ``large_offsets=False`` and an offset exceeds ``2**31 - 1``.

    Examples
    --------
    >>> import numpy as np, lodarrow as la
    >>> t = la.LoDTensor(np.arange(7.0), lengths=[[2, 1], [2, 2, 3]])
    >>> t.to_arrow().to_pylist()
    [[[0.0, 1.0], [2.0, 3.0]], [[4.0, 5.0, 6.0]]]
    >>> t.to_arrow().type
    LargeListType(large_list<item: large_list<item: double>>)
    """
    if not isinstance(t, LoDTensor):
        raise TypeError(f"to_arrow: t must be a LoDTensor, got {type(t).__name__}")
    t._check_valid("t")
    data = t._data
    if is_cupy_array(data):
        data = data.get()  # Arrow arrays live in host memory
    data = np.ascontiguousarray(data)
    large = bool(large_offsets)
    n = data.shape[0]
    features = data.shape[1:]

    types = _layer_types(data.dtype, features, len(t._offsets), large)
    if data.dtype == np.bool_:
        values = pa.py_buffer(np.packbits(data.reshape(-1), bitorder="little"))
    else:
        values = pa.py_buffer(data)  # keeps ``data`` alive as the buffer's base
    arr = pa.Array.from_buffers(types[0], data.size, [None, values], null_count=0)
    for j in range(len(features) - 1, -1, -1):  # FixedSizeList j has N * prod(shape[:j]) rows
        arr = pa.Array.from_buffers(types[len(features) - j], n * _product(features[:j]), [None],
                                    null_count=0, children=[arr])
    offsets = t._offsets
    for k in range(len(offsets) - 1, -1, -1):
        off = offsets[k]
        if large:
            buf = pa.py_buffer(off if off.flags.c_contiguous else np.ascontiguousarray(off))
        else:
            if int(off[-1]) > _INT32_MAX:
                raise ValueError(f"to_arrow: level {k} has offset {int(off[-1])} at position "
                                 f"{off.shape[0] - 1}, which does not fit the int32 offsets of "
                                 f"an Arrow List; use large_offsets=True")
            buf = pa.py_buffer(off.astype(np.int32))
        arr = pa.Array.from_buffers(types[len(features) + len(offsets) - k], off.shape[0] - 1,
                                    [None, buf], null_count=0, children=[arr])
    return arr


def export_c_array(t, requested_schema=None):
    """``LoDTensor.__arrow_c_array__``: export ``t`` through the Arrow PyCapsule interface.

    ``requested_schema`` (an ``ArrowSchema`` capsule) is honoured by casting; a type the array
    cannot be cast to raises ``ValueError``.  ``pyarrow.array(t)`` and polars use this.
    """
    arr = to_arrow(t)
    if requested_schema is not None:
        target = pa.DataType._import_from_c_capsule(requested_schema)
        if target != arr.type:
            if target == canonical_type(t, large_offsets=False):
                arr = to_arrow(t, large_offsets=False)  # raises ValueError on overflow
            else:
                try:
                    arr = arr.cast(target, safe=True)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
                    raise ValueError(f"__arrow_c_array__: cannot cast {arr.type} to the "
                                     f"requested type {target} ({exc})") from None
    return arr.__arrow_c_array__()


# ---------------------------------------------------------------------------- from_arrow
def from_arrow(obj, nulls="error"):
    """Convert an Arrow array of nested lists to a LoDTensor, zero-copy where possible.

    Parameters
    ----------
    obj : pyarrow.Array, pyarrow.ChunkedArray or Arrow PyCapsule producer
        Anything with ``__arrow_c_array__`` or ``__arrow_c_stream__`` (a polars Series, a
        nanoarrow array, a DuckDB result ...) is accepted too.  A one-column table (a
        ``pa.Table`` or ``RecordBatch``, or a producer that exports a struct of one field, as
        DuckDB results do) is read as that column.  The chunks of a chunked array are joined
        (a copy); a single chunk is used as is.
    nulls : {"error", "empty"}, default "error"
        What a null list becomes: "error" raises ``ValueError``; "empty" reads it as an empty
        sequence.  A null value, or a null fixed-size row (feature dimension), always raises.

    Returns
    -------
    LoDTensor
        On the CPU; or, for a producer whose ``__arrow_c_device_array__`` reports CUDA memory
        (a GPU LoDTensor, cuDF ...), on that GPU as views of the device buffers.  Every variable-size list (``List``, ``LargeList``, ``ListView``,
        ``LargeListView``) is a LoD level; a ``FixedSizeList`` above the last of them is a level
        of uniform lengths and one below it a feature dimension.  Without any variable-size
        list the result has no LoD (``lod_level == 0``, one data row per element).
        The data is a read-only view of the Arrow memory where no copy is needed.

    Raises
    ------
    TypeError
        If ``obj`` is not Arrow data, or its values are not one of the ten dtypes (strings,
        structs, timestamps ... are rejected; the message names the type).
    ValueError
        On a null (the message names the level, the position, the top-level sequence it falls
        in and, for chunked input, the chunk), or if ``nulls`` is not "error" or "empty".

    Notes
    -----
    ``LargeList`` offsets that start at 0 become the LoD levels as they are, and the values
    of every dtype but bool are viewed in place.  What is copied, and why:

    - bool values: Arrow bit-packs them (unpacked into one byte per value);
    - ``List`` offsets: widened from int32 to int64 (the values stay in place);
    - a level whose offsets do not start at 0 (a slice): rebased to 0;
    - ``ListView`` / ``LargeListView``: new offsets from offsets + sizes; the values too
      (gathered) unless the views are contiguous and in order;
    - a ``FixedSizeList`` level: its offsets (``arange`` of the uniform length);
    - ``nulls="empty"``: the offsets of a level with nulls, and the values hidden behind a
      non-empty null slot are dropped (a gather);
    - dictionary-encoded values: decoded; several chunks: joined.

    Every level is checked in O(1) to stay inside the array below it, so a malformed array
    cannot make this read out of bounds.  The O(n) scan that offsets never decrease is
    deferred: it runs once, when the tensor first enters an operator (or ``take``), so the
    conversion itself stays O(levels).

    Examples
    --------
    >>> import pyarrow as pa, lodarrow as la
    >>> t = la.from_arrow(pa.array([[[1, 2], [3]], [], [[4]]]))
    >>> t.lod(), t.data.tolist()
    ([[0, 2, 2, 3], [0, 2, 3, 4]], [1, 2, 3, 4])
    >>> la.from_arrow(pa.array([[1], None]), nulls="empty").lod()
    [[0, 1, 1]]
    """
    if nulls not in _NULLS:
        raise ValueError(f"from_arrow: nulls must be 'error' or 'empty', got {nulls!r}")
    if hasattr(obj, "__arrow_c_device_array__") and not isinstance(obj, _PYARROW_CONTAINERS):
        # GPU producers (a GPU LoDTensor, cuDF ...): views on the device, no copy.
        from lodarrow._cdevice import ARROW_DEVICE_CPU, device_type_of, import_device_array

        if device_type_of(obj) not in (None, ARROW_DEVICE_CPU):
            return import_device_array(obj, nulls)
    chunks, plan = _as_chunks(obj)
    if isinstance(chunks, pa.Array):
        data, levels = _decode(chunks, plan, nulls, None, 0)
        return LoDTensor._from_trusted(data, _freeze(levels), _CPU, unchecked=True)
    if chunks.num_chunks == 1:
        data, levels = _decode(chunks.chunk(0), plan, nulls, None, 0)
        return LoDTensor._from_trusted(data, _freeze(levels), _CPU, unchecked=True)
    if chunks.num_chunks == 0:
        data = np.empty((0,) + plan.features, dtype=plan.dtype)
        levels = [np.zeros(1, dtype=np.int64) for _ in plan.levels]
        return LoDTensor._from_trusted(data, _freeze(levels), _CPU, unchecked=True)
    parts, start = [], 0
    for c in range(chunks.num_chunks):
        chunk = chunks.chunk(c)
        parts.append(_decode(chunk, plan, nulls, c, start))
        start += len(chunk)
    data, levels = _join(parts, plan)
    return LoDTensor._from_trusted(data, _freeze(levels), _CPU, unchecked=True)


_PYARROW_CONTAINERS = (pa.Array, pa.ChunkedArray, pa.Table, pa.RecordBatch)


def _as_chunks(obj):
    """``(arr, plan)``: ``obj`` as a ``pa.Array`` or ``pa.ChunkedArray`` and its plan."""
    if isinstance(obj, (pa.Array, pa.ChunkedArray)):
        arr = obj
    elif isinstance(obj, (pa.Table, pa.RecordBatch)):
        if obj.num_columns != 1:
            raise TypeError(f"from_arrow: a table must have exactly one column, got "
                            f"{obj.num_columns} ({obj.schema.names}); use lodarrow.from_table")
        arr = obj.column(0)
    elif hasattr(obj, "__arrow_c_array__"):
        arr = pa.Array._import_from_c_capsule(*obj.__arrow_c_array__())
    elif hasattr(obj, "__arrow_c_stream__"):
        arr = pa.chunked_array(obj)
    else:
        raise TypeError(f"from_arrow: obj must be a pyarrow Array or ChunkedArray, or export "
                        f"the Arrow PyCapsule interface (__arrow_c_array__ / "
                        f"__arrow_c_stream__), got {type(obj).__name__}")
    if isinstance(arr.type, pa.BaseExtensionType):
        arr = arr.storage if isinstance(arr, pa.Array) else pa.chunked_array(
            [c.storage for c in arr.chunks], type=arr.type.storage_type)
    if pa.types.is_struct(arr.type):
        if arr.type.num_fields != 1:
            raise TypeError(f"from_arrow: a struct (table) must have exactly one field, got "
                            f"{arr.type}; use lodarrow.from_table")
        if arr.null_count:
            raise ValueError("from_arrow: the one-column struct has null rows")
        arr = (arr.field(0) if isinstance(arr, pa.Array) else
               pa.chunked_array([c.field(0) for c in arr.chunks], type=arr.type.field(0).type))
    plan = _plan(arr.type)
    if plan.decoded_type is not None:  # dictionary-encoded values: decode (a copy)
        try:
            arr = arr.cast(plan.decoded_type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise TypeError(f"from_arrow: cannot decode the dictionary values of {arr.type} "
                            f"({exc})") from None
        plan = _plan(arr.type)
    return arr, plan


def _count(sel):
    return sel[1] - sel[0] if isinstance(sel, tuple) else sel.shape[0]


def _indices(sel):
    return np.arange(sel[0], sel[1], dtype=np.int64) if isinstance(sel, tuple) else sel


def _view(buf, dtype, stop, what):
    """The first ``stop`` elements of ``buf`` as a read-only NumPy view (no copy)."""
    if stop <= 0:
        return np.frombuffer(buf, dtype=dtype, count=0) if buf is not None \
            else np.empty(0, dtype=dtype)
    if buf is None or buf.size < stop * dtype.itemsize:
        have = 0 if buf is None else buf.size
        raise ValueError(f"from_arrow: invalid Arrow array: the {what} buffer holds {have} "
                         f"bytes, {stop * dtype.itemsize} are needed")
    return np.frombuffer(buf, dtype=dtype, count=stop)


def _bits(buf, start, stop, what):
    """Bits ``[start, stop)`` of an LSB-first bitmap as a bool array (a copy)."""
    if stop <= start:
        return np.zeros(0, dtype=np.bool_)
    first, last = start // 8, (stop + 7) // 8
    raw = _view(buf, np.dtype(np.uint8), last, what)[first:]
    bits = np.unpackbits(raw, bitorder="little")[start - 8 * first: stop - 8 * first]
    return bits.view(np.bool_)


def _null_mask(node, bitmap, sel):
    """None when no selected entry of ``node`` is null, else a bool mask (True = null)."""
    if not node.null_count:
        return None
    o = node.offset
    if bitmap is None:  # the null type: everything is null
        return np.ones(_count(sel), dtype=np.bool_) if _count(sel) else None
    if isinstance(sel, tuple):
        valid = _bits(bitmap, o + sel[0], o + sel[1], "validity")
    else:
        valid = _bits(bitmap, o, o + int(sel.max()) + 1, "validity")[sel] if sel.size \
            else np.zeros(0, dtype=np.bool_)
    if valid.all():
        return None
    return ~valid


def _gather_lists(starts, lengths):
    """New offsets for sequences ``[starts, starts + lengths)`` and the child selection.

    The selection is a range when the sequences are contiguous and in order (no copy of the
    values), else an index array (a gather).
    """
    new = np.zeros(lengths.shape[0] + 1, dtype=np.int64)
    np.cumsum(lengths, out=new[1:])
    total = int(new[-1])
    if total == 0:
        return new, (0, 0)
    nonempty = lengths > 0
    base = int(starts[np.argmax(nonempty)])
    if np.array_equal(starts[nonempty], base + new[:-1][nonempty]):
        return new, (base, base + total)
    index = np.repeat(starts - new[:-1], lengths) + np.arange(total, dtype=np.int64)
    return new, index


def _top_sequence(levels, depth, pos):
    """The top-level sequence holding entry ``pos`` of level ``depth`` (rows: depth = L)."""
    for k in range(depth - 1, -1, -1):
        pos = int(np.searchsorted(levels[k], pos, side="right")) - 1
    return pos


def _where(levels, depth, pos, chunk, chunk_start):
    """`` in chunk c (top-level sequence s)`` for null messages."""
    top = _top_sequence(levels, depth, pos) + chunk_start
    in_chunk = "" if chunk is None else f" in chunk {chunk}"
    return f"{in_chunk} (top-level sequence {top})"


def _check_range(stop, length, depth, what):
    """Raise unless ``stop <= length``: nothing may point past the end of a child array."""
    if stop > length:
        at = "the values" if depth is None else f"level {depth}"
        raise ValueError(f"from_arrow: invalid Arrow array: {what} of {at} reaches {stop} but "
                         f"the array below has only {length} entries")


def _decode(arr, plan, nulls, chunk, chunk_start):
    """Take one ``pa.Array`` apart into ``(data, levels)``: O(levels) unless it must copy."""
    bufs = arr.buffers()
    pos = plan.buffer_pos
    node = arr
    sel = (0, len(arr))  # a range or an index array, in the node's logical coordinates
    levels = []
    for depth, (kind, size) in enumerate(plan.levels):
        nullmask = _null_mask(node, bufs[pos[depth]], sel)
        if nullmask is not None and nulls == "error":
            p = int(np.argmax(nullmask))
            raise ValueError(f"from_arrow: null list at level {depth}, position {p}"
                             f"{_where(levels, depth, p, chunk, chunk_start)}; pass "
                             f"nulls='empty' to read null lists as empty sequences")
        o = node.offset
        child = node.values
        n_child = len(child)
        if kind == _FIXED:
            if nullmask is None and isinstance(sel, tuple):
                new = np.arange(_count(sel) + 1, dtype=np.int64) * size
                child_sel = ((o + sel[0]) * size, (o + sel[1]) * size)
                _check_range(child_sel[1], n_child, depth, "a fixed-size list")
            else:
                idx = _indices(sel)
                starts = (o + idx) * size
                lengths = np.full(idx.shape[0], size, dtype=np.int64)
                if idx.size:
                    _check_range(int(starts.max()) + size, n_child, depth, "a fixed-size list")
                if nullmask is not None:
                    lengths[nullmask] = 0
                new, child_sel = _gather_lists(starts, lengths)
        elif kind in (_LIST, _LARGE_LIST):
            odt = _OFFSET_DTYPE[kind]
            if nullmask is None and isinstance(sel, tuple):
                a, b = sel
                off = _view(bufs[pos[depth] + 1], odt, o + b + 1, "offsets")[o + a:]
                lo, hi = int(off[0]), int(off[-1])
                if lo < 0 or hi < lo:
                    raise ValueError(f"from_arrow: invalid Arrow array: offsets at level "
                                     f"{depth} run from {lo} to {hi}")
                _check_range(hi, n_child, depth, "an offset")
                if kind == _LARGE_LIST and lo == 0:
                    new = off  # zero-copy: the LoD level is the Arrow offsets buffer
                else:
                    new = off.astype(np.int64)
                    if lo:
                        new -= lo
                child_sel = (lo, hi)
            else:
                idx = _indices(sel)
                full = _view(bufs[pos[depth] + 1], odt,
                             o + int(idx.max()) + 2 if idx.size else 0, "offsets")
                starts = full[o + idx].astype(np.int64)
                lengths = full[o + idx + 1] - starts
                if nullmask is not None:
                    lengths[nullmask] = 0
                _check_lists(starts, lengths, n_child, depth)
                new, child_sel = _gather_lists(starts, lengths)
        else:  # ListView / LargeListView: offsets + sizes, views may overlap or be unordered
            odt = _OFFSET_DTYPE[kind]
            idx = _indices(sel)
            stop = o + int(idx.max()) + 1 if idx.size else 0
            starts = _view(bufs[pos[depth] + 1], odt, stop, "offsets")[o + idx].astype(np.int64)
            lengths = _view(bufs[pos[depth] + 2], odt, stop, "sizes")[o + idx].astype(np.int64)
            if nullmask is not None:
                lengths[nullmask] = 0
            _check_lists(starts, lengths, n_child, depth)
            new, child_sel = _gather_lists(starts, lengths)
        levels.append(new)
        node, sel = child, child_sel

    n_levels = len(plan.levels)
    rows = _count(sel)
    per_row = 1
    for j, size in enumerate(plan.features):
        nullmask = _null_mask(node, bufs[pos[n_levels + j]], sel)
        if nullmask is not None:
            p = int(np.argmax(nullmask)) // per_row
            raise ValueError(f"from_arrow: null fixed-size row at row {p}"
                             f"{_where(levels, n_levels, p, chunk, chunk_start)}; a LoDTensor "
                             f"cannot hold null rows (nulls='empty' applies to null lists only)")
        o = node.offset
        child = node.values
        if isinstance(sel, tuple):
            sel = ((o + sel[0]) * size, (o + sel[1]) * size)
            _check_range(sel[1], len(child), n_levels + j, "a fixed-size row")
        else:
            sel = ((o + sel)[:, None] * size + np.arange(size, dtype=np.int64)).reshape(-1)
            if sel.size:
                _check_range(int(sel.max()) + 1, len(child), n_levels + j, "a fixed-size row")
        per_row *= size
        node = child

    data = _leaf_values(node, bufs, pos[-1], sel, plan, levels, chunk, chunk_start, per_row)
    return data.reshape((rows,) + plan.features), levels


def _check_lists(starts, lengths, n_child, depth):
    """O(n) bounds check of explicit sequence ranges (the paths that are O(n) anyway)."""
    if lengths.size and (lengths.min() < 0 or starts.min() < 0):
        p = int(np.argmax((lengths < 0) | (starts < 0)))
        raise ValueError(f"from_arrow: invalid Arrow array: sequence {p} at level {depth} has "
                         f"start {int(starts[p])} and length {int(lengths[p])}")
    if lengths.size:
        _check_range(int((starts + lengths).max()), n_child, depth, "a sequence")


def _leaf_values(node, bufs, at, sel, plan, levels, chunk, chunk_start, per_row):
    """The selected values of the leaf array as a flat NumPy array."""
    nullmask = _null_mask(node, bufs[at], sel)
    if nullmask is not None:
        e = int(np.argmax(nullmask))
        n_levels = len(plan.levels)
        where = (_where(levels, n_levels, e // per_row, chunk, chunk_start) if n_levels else
                 ("" if chunk is None else f" in chunk {chunk}"))
        raise ValueError(f"from_arrow: null value at row {e // per_row} (element {e})"
                         f"{where}; a LoDTensor cannot hold null values")
    if plan.null_leaf:  # list<null> with no values at all
        return np.empty(0, dtype=plan.dtype)
    o = node.offset
    vbuf = bufs[at + 1]
    if isinstance(sel, tuple):
        a, b = sel
        _check_range(b, len(node), None, "a row")
        if plan.dtype == np.bool_:
            return _bits(vbuf, o + a, o + b, "values")
        view = _view(vbuf, plan.dtype, o + b, "values")[o + a:]
        view.flags.writeable = False  # Arrow memory is immutable (as pyarrow's to_numpy)
        return view
    if sel.size == 0:
        return np.empty(0, dtype=plan.dtype)
    stop = int(sel.max()) + 1
    _check_range(stop, len(node), None, "a row")
    if plan.dtype == np.bool_:
        return _bits(vbuf, o, o + stop, "values")[sel]
    return _view(vbuf, plan.dtype, o + stop, "values")[o + sel]


def _join(parts, plan):
    """Concatenate decoded chunks (a copy of the data and the offsets)."""
    data = np.concatenate([d for d, _ in parts])
    levels = []
    for k in range(len(plan.levels)):
        sizes = [lv[k].shape[0] - 1 for _, lv in parts]
        out = np.empty(sum(sizes) + 1, dtype=np.int64)
        out[0] = 0
        at, shift = 0, 0
        for (_, lv), size in zip(parts, sizes):
            np.add(lv[k][1:], shift, out=out[at + 1: at + 1 + size])
            at += size
            shift += int(lv[k][-1])
        levels.append(out)
    return data, levels

