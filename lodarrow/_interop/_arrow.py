"""Arrow interop: a LoDTensor <-> nested Arrow lists, zero-copy where Arrow's layout allows.

The mapping (docs/data-model.md#arrow-mapping): the rows are a primitive array (one
``FixedSizeList`` per feature dimension, outermost outermost), and each LoD level, from the last to
the first, wraps them in a ``LargeList`` whose offsets buffer *is* that level's int64 offsets.

Both directions cost O(levels), not O(N): an array is assembled in one import through the
Arrow C data interface over the NumPy arrays' memory (``_ext/arrow_bridge.pyx``: one call,
where ``pa.Array.from_buffers`` took one a layer), and taken apart with ``arr.buffers()`` and
``np.frombuffer``.  Copies happen only where Arrow's layout forces them:

========================================  ===============================================
case                                      what is copied
========================================  ===============================================
bool values (bit-packed in Arrow)         the values, each way
``List`` / ``to_arrow`` giving ``List``  the offsets (widened to int64 / narrowed to
(int32 offsets)                           int32); the values stay zero-copy
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

import numpy as np
import pyarrow as pa

from lodarrow._interop import _arrow_decode as _dec
from lodarrow._interop._arrow_layout import arrow_type, plan, trusted_arrow_type
from lodarrow._cpu._arrow_bridge import import_nested
from lodarrow._cupy import is_cupy_array
from lodarrow._place import CPUPlace
from lodarrow._tensor import LoDTensor
from lodarrow._validation import check_choice, first_bad_offset

__all__ = ["from_arrow", "to_arrow", "export_c_array"]

_INT32_MAX = np.iinfo(np.int32).max
_CPU = CPUPlace()
_NULLS = ("error", "empty")


def canonical_type(t, large_offsets=True):
    """The Arrow type :func:`to_arrow` gives ``t`` (``large_offsets`` as there)."""
    return arrow_type(t.dtype, t.feature_shape, t.lod_level, _large(t, large_offsets))


def _large(t, large_offsets):
    """Whether :func:`to_arrow` gives ``t`` ``LargeList`` levels (see its ``large_offsets``;
    :func:`to_arrow` inlines this)."""
    if large_offsets is None:
        return not t._narrow or _past_int32(t._offsets)
    return large_offsets if large_offsets is True or large_offsets is False \
        else _as_large(large_offsets)


def _past_int32(offsets):
    """Whether an offset of some level exceeds int32 (the last of each level is its largest)."""
    return any(int(off[-1]) > _INT32_MAX for off in offsets)


def _as_large(large_offsets):
    """``large_offsets`` other than None, True and False: NumPy's bools, else a TypeError."""
    if isinstance(large_offsets, np.bool_):
        return bool(large_offsets)
    raise TypeError(f"to_arrow: large_offsets must be True, False or None, "
                    f"got {type(large_offsets).__name__}")


# ---------------------------------------------------------------------------- to_arrow
def to_arrow(t, large_offsets=None):
    """Convert a LoDTensor to a ``pyarrow.Array`` of nested lists, without copying the data.

    Parameters
    ----------
    t : LoDTensor
        The tensor.  GPU data is copied to the host first; strided data is made contiguous.
    large_offsets : bool, optional
        True: every LoD level is a ``LargeList`` whose offsets buffer is the level's own int64
        offsets (zero-copy).  False: ``List`` with int32 offsets (a copy of the offsets).
        None (the default): the width ``t`` was read with -- ``List`` for a tensor that
        :func:`lodarrow.from_arrow` read from ``List`` / ``ListView`` levels (so
        ``read_parquet`` -> ``write_parquet`` keeps a file's types), or a view, slice or
        ``take`` of one, where every offset fits int32; else ``LargeList``.  Tensors built
        in Python and operator results are ``LargeList``.

    Returns
    -------
    pyarrow.Array
        ``len(t)`` top-level sequences; for ``t.lod_level == 0`` the values array itself (one
        element per data row).  Feature dimensions are nested ``FixedSizeList`` s, outermost
        outermost: data of shape ``(N, 2, 3)`` float32 gives
        ``fixed_size_list<fixed_size_list<float, 3>, 2>`` values.  The array shares the
        tensor's memory (it holds the NumPy arrays until it and every buffer taken from it
        are gone), except that bool is bit-packed by Arrow, int32 offsets
        (``large_offsets=False``) are a narrowed copy, and strided or GPU data is first made
        contiguous on the host.

    Raises
    ------
    TypeError
        If ``t`` is not a LoDTensor, or ``large_offsets`` not True, False or None.
    ValueError
        If ``t`` has no data, or ``large_offsets=False`` and an offset exceeds ``2**31 - 1``.

    Examples
    --------
    >>> import numpy as np, pyarrow as pa, lodarrow as la
    >>> t = la.LoDTensor(np.arange(7.0), lengths=[[2, 1], [2, 2, 3]])
    >>> t.to_arrow().to_pylist()
    [[[0.0, 1.0], [2.0, 3.0]], [[4.0, 5.0, 6.0]]]
    >>> t.to_arrow().type
    LargeListType(large_list<item: large_list<item: double>>)
    >>> u = la.from_arrow(pa.array([[1, 2], [3]]))
    >>> u.to_arrow().type, u.to_arrow(large_offsets=True).type
    (ListType(list<item: int64>), LargeListType(large_list<item: int64>))
    """
    if not isinstance(t, LoDTensor):
        raise TypeError(f"to_arrow: t must be a LoDTensor, got {type(t).__name__}")
    t._check_valid("t")
    large = large_offsets  # _large(t, large_offsets), inlined: this is a hot path
    if large is None:
        large = not t._narrow or _past_int32(t._offsets)
    elif large is not True and large is not False:
        large = _as_large(large)
    return trusted_to_arrow(t, large)


def trusted_to_arrow(t, large):
    """:func:`to_arrow` of a tensor known to be valid (an operator's result, built by
    lodarrow): the checks that cannot fail are skipped.  ``large`` is a bool."""
    data = t._data
    if type(data) is not np.ndarray and is_cupy_array(data):
        data = data.get()  # Arrow arrays live in host memory
    offsets = t._offsets
    if not large:
        for k in range(len(offsets) - 1, -1, -1):  # the innermost, largest offsets first
            off = offsets[k]
            if int(off[-1]) > _INT32_MAX:
                raise ValueError(f"to_arrow: level {k} has offset {int(off[-1])} at position "
                                 f"{off.shape[0] - 1}, which does not fit the int32 offsets of "
                                 f"an Arrow List; use large_offsets=True")
        offsets = tuple(off.astype(np.int32) for off in offsets)
    dtype, shape = data.dtype, data.shape
    features = shape[1:]
    values = data  # strided values and offsets are made contiguous by import_nested
    if dtype.kind == "b":
        values = np.packbits(data.reshape(-1), bitorder="little")
    return import_nested(trusted_arrow_type(dtype, features, len(offsets), large), values,
                         data.size, shape[0], features, offsets)


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
            elif target == canonical_type(t, large_offsets=True):
                arr = to_arrow(t, large_offsets=True)
            else:
                try:
                    arr = arr.cast(target, safe=True)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
                    raise ValueError(f"__arrow_c_array__: cannot cast {arr.type} to the "
                                     f"requested type {target} ({exc})") from None
    return arr.__arrow_c_array__()


# ---------------------------------------------------------------------------- from_arrow
def from_arrow(obj, nulls="error", *, lod_level=None, feature_shape=None):
    """Convert an Arrow array of nested lists to a LoDTensor, zero-copy where possible.

    Parameters
    ----------
    obj : pyarrow.Array, pyarrow.ChunkedArray or Arrow PyCapsule producer
        Anything with ``__arrow_c_device_array__``, ``__arrow_c_array__`` or
        ``__arrow_c_stream__`` (a polars Series, a nanoarrow array, a DuckDB result, a GPU
        LoDTensor, cuDF ...) is accepted too; a producer is asked for its data once.  A
        one-column table (a ``pa.Table`` or ``RecordBatch``, or a producer that exports a
        struct of one field, as DuckDB results do) is read as that column.  The chunks of a
        chunked array are joined (a copy); a single chunk is used as is.
    nulls : {"error", "empty"}, default "error"
        What a null list of a LoD level becomes: "error" raises ``ValueError``; "empty" reads
        it as an empty sequence.  A null value, or a null row of a feature dimension, always
        raises.
    lod_level : int, optional
        How many outer list levels are the LoD.  Default: every variable-size list
        (``List``, ``LargeList``, ``ListView``, ``LargeListView``) is a LoD level, a
        ``FixedSizeList`` above the last of them a level of uniform lengths and one below it
        a feature dimension.  With ``lod_level=k`` the outer ``k`` list levels (of any kind)
        are the LoD and every deeper list level is a feature dimension; a variable-size one
        must be *regular* (all its lists of one length, the width).  This reads back what
        DuckDB, polars or Spark wrote from a lodarrow column: they turn ``FixedSizeList`` s
        into lists.
    feature_shape : tuple of int, optional
        The widths of the feature dimensions, checked against the data and the type; with no
        lists to read a width from (no rows), these are the widths.  Given without
        ``lod_level``, its length says how many inner list levels are feature dimensions.

    Returns
    -------
    LoDTensor
        On the CPU; or, for a producer whose ``__arrow_c_device_array__`` reports CUDA memory
        (a GPU LoDTensor, cuDF ...), on that GPU as views of the device buffers.  Without any
        LoD level the result has no LoD (``lod_level == 0``, one data row per element).  The
        data is a read-only view of the Arrow memory where no copy is needed.

    Raises
    ------
    TypeError
        If ``obj`` is not Arrow data, or its values are not one of the ten dtypes (strings,
        structs, timestamps ... are rejected; the message names the type).
    ValueError
        On a null (the message names the level, the position, the top-level sequence it falls
        in and, for chunked input, the chunk), if ``nulls`` is not "error" or "empty", if
        ``lod_level`` exceeds the list levels of the type or ``feature_shape`` has the wrong
        number of dimensions, or if a feature dimension's width is given neither by the type,
        ``feature_shape`` nor the data (the message asks for ``feature_shape``).
    LoDError
        If a list level folded into a feature dimension is not regular, or its width differs
        from ``feature_shape`` (the message names the level and the first list of another
        length).

    See Also
    --------
    LoDTensor.to_arrow : The inverse.
    from_table : Several columns of a table at once.
    from_pandas : From a pandas Series.

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

    A regular list level folded into a feature dimension (``lod_level``) costs an O(n) check
    of its offsets and nothing else when its lists are contiguous and in order (offsets
    ``lo + i * d``: the values stay a view); list views that are not are gathered (a copy).

    Every level is checked in O(1) to stay inside the array below it, so a malformed array
    cannot make this read out of bounds.  The O(n) scan that offsets never decrease is
    deferred: it runs once, when the tensor first enters an operator (or ``take``), so the
    conversion itself stays O(levels).  An array of at most ``EAGER_SCAN_MAX`` (4096) offsets
    in all is scanned here instead, which costs less than deferring; one out of order is
    still refused at its first read, with the same message.

    Examples
    --------
    >>> import pyarrow as pa, lodarrow as la
    >>> t = la.from_arrow(pa.array([[[1, 2], [3]], [], [[4]]]))
    >>> t.lod(), t.data.tolist()
    ([[0, 2, 2, 3], [0, 2, 3, 4]], [1, 2, 3, 4])
    >>> la.from_arrow(pa.array([[1], None]), nulls="empty").lod()
    [[0, 1, 1]]
    >>> t = la.from_arrow(pa.array([[[1, 2], [3, 4]], [[5, 6]]]), lod_level=1)
    >>> t.lod(), t.data.shape
    ([[0, 2, 3]], (3, 2))
    """
    check_choice(nulls, "from_arrow: nulls", _NULLS)
    if not isinstance(obj, _PYARROW_CONTAINERS) and hasattr(obj, "__arrow_c_device_array__"):
        if isinstance(obj, LoDTensor) and not is_cupy_array(obj._data):
            obj = to_arrow(obj)
        else:
            from lodarrow._interop._cdevice import (ARROW_DEVICE_CPU, device_capsules,
                                                   import_device_array)

            capsules, device_type = device_capsules(obj)  # exported once
            if device_type != ARROW_DEVICE_CPU:  # GPU producers: views on the device, no copy
                return import_device_array(capsules, nulls, lod_level=lod_level,
                                           feature_shape=feature_shape)
            obj = pa.Array._import_from_c_device_capsule(*capsules)
    chunks, p = _as_chunks(obj, lod_level, feature_shape)
    if isinstance(chunks, pa.ChunkedArray):
        if chunks.num_chunks != 1:
            return _from_chunks(chunks, p, nulls)
        chunks = chunks.chunk(0)
    if not p.folded:  # every width is in the type
        data, levels = _dec.decode(_dec.HOST, chunks, chunks.buffers(), p, nulls, p.widths)
    else:
        widths = list(p.widths)
        data, levels = _dec.decode(_dec.HOST, chunks, chunks.buffers(), p, nulls, widths)
        if None in widths:
            raise _dec.missing_width(chunks.type, p, widths)
    levels = _frozen(levels)
    return LoDTensor._from_trusted(data, levels, _CPU, not _small_and_in_order(levels),
                                   p.narrow)


#: Decoded offsets up to this many (all levels together) are scanned during the conversion:
#: for a small batch, a scan costs less than the bookkeeping of deferring it.
EAGER_SCAN_MAX = 4096


def _small_and_in_order(levels):
    """True if the decoded ``levels`` are few enough to scan now and every one starts at 0 and
    never decreases (the tensor is then valid: :func:`_dec.decode` makes each level end where
    the next begins, and the last at the data's rows).  False leaves the scan, and the
    error message if one is due, to the first read."""
    total = 0
    for off in levels:
        total += off.shape[0]
    if total > EAGER_SCAN_MAX:
        return False
    for off in levels:
        if first_bad_offset(off) >= 0:
            return False
    return True


def _from_chunks(chunks, p, nulls):
    """The LoDTensor of a chunked array of zero or several chunks (joined: a copy)."""
    widths = list(p.widths)
    parts, start = [], 0
    for c in range(chunks.num_chunks):
        chunk = chunks.chunk(c)
        parts.append(_dec.decode(_dec.HOST, chunk, chunk.buffers(), p, nulls, widths, c, start))
        start += len(chunk)
    if None in widths:
        raise _dec.missing_width(chunks.type, p, widths)
    widths = tuple(widths)
    if not parts:
        data = np.empty((0,) + widths, dtype=p.dtype)
        return LoDTensor._from_trusted(data, _frozen([np.zeros(1, dtype=np.int64)
                                                      for _ in p.levels]), _CPU, True, p.narrow)
    # A chunk that could not tell a width has no values: give it the widths of the others.
    parts = [(d.reshape((d.shape[0],) + widths), lv) for d, lv in parts]
    data, levels = _dec.join(parts, len(p.levels))
    return LoDTensor._from_trusted(data, _frozen(levels), _CPU, True, p.narrow)


_PYARROW_CONTAINERS = (pa.Array, pa.ChunkedArray, pa.Table, pa.RecordBatch)


def _frozen(levels):
    """The decoded levels, made read-only in place: the decoder made every one of them (a new
    view of an Arrow buffer, or a copy), so unlike ``_tensor._freeze`` no view is needed."""
    for level in levels:
        level.setflags(False)  # write=False
    return tuple(levels)


def _as_chunks(obj, lod_level, feature_shape):
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
    return arr, plan(arr.type, lod_level, feature_shape)
