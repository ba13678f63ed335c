"""Operators on table columns: ``col`` references and ``apply`` (docs/tables.md).

A table row is one top-level sequence: a list column with ``k`` list levels is a LoDTensor of
``k`` levels whose ``lod[0]`` has one sequence per row, a plain column (numeric, bool or
FixedSizeList) a tensor with one data row per table row.  ``apply`` reads the columns an
operator's ``col(...)`` arguments name (zero-copy where ``from_arrow`` is), calls the operator,
and writes its row-aligned results back as columns of a table of the same kind; every other
column is the caller's own object.
"""

import operator as _operator
import re

import numpy as np
import pyarrow as pa

from lodarrow import _ops
from lodarrow._arrow import from_arrow, trusted_to_arrow
from lodarrow._place import Place
from lodarrow._tables import adapt, list_levels
from lodarrow._tensor import LoDTensor, _as_place

__all__ = ["col", "ColumnRef", "apply", "resolve_op", "n_results", "run"]

#: name -> operator function, for every public operator.
OPERATORS = {name: getattr(_ops, name) for name in _ops.__all__}
_BY_FUNCTION = {fn: name for name, fn in OPERATORS.items()}

#: Arguments that must be plain columns in table form: the operator reads their *rows*, which
#: are table rows only for a plain column (a list column's rows are its values).
_PLAIN_ONLY = {
    "sequence_expand_as": ("x",),
    "sequence_scatter": ("input",),
    "sequence_unpad": ("x", "length"),
    "sequence_slice": ("offset", "length"),
}


class ColumnRef:
    """A reference to a table column, made by :func:`col` (picklable, holds no data)."""

    __slots__ = ("name", "lod_level", "feature_shape")

    def __init__(self, name, lod_level=None, feature_shape=None):
        self.name = name
        self.lod_level = lod_level
        self.feature_shape = feature_shape

    def __repr__(self):
        extra = ""
        if self.lod_level is not None:
            extra += f", lod_level={self.lod_level}"
        if self.feature_shape is not None:
            extra += f", feature_shape={self.feature_shape}"
        return f"col({self.name!r}{extra})"

    def __eq__(self, other):
        return (isinstance(other, ColumnRef) and self.name == other.name
                and self.lod_level == other.lod_level
                and self.feature_shape == other.feature_shape)

    def __hash__(self):
        return hash((self.name, self.lod_level, self.feature_shape))

    def __getstate__(self):
        return (self.name, self.lod_level, self.feature_shape)

    def __setstate__(self, state):
        self.name, self.lod_level, self.feature_shape = state

    def arrow_kwargs(self):
        kw = {}
        if self.lod_level is not None:
            kw["lod_level"] = self.lod_level
        if self.feature_shape is not None:
            kw["feature_shape"] = self.feature_shape
        return kw


def col(name, lod_level=None, feature_shape=None):
    """A reference to the table column ``name``, usable as any tensor or array argument.

    Parameters
    ----------
    name : str
        The column.  A list column (List / LargeList / ListView levels over numeric values,
        with FixedSizeList feature dimensions) is a LoDTensor with one top-level sequence per
        table row; a plain column (numeric, bool, FixedSizeList) a tensor with one data row
        per table row.
    lod_level : int, optional
        Read only the outer ``lod_level`` list levels as the LoD; deeper list levels must be
        regular and become feature dimensions (as :func:`lodarrow.from_arrow` with
        ``lod_level``): what reads back a lodarrow column written by DuckDB, polars or Spark.
        ``lod_level=0`` reads a plain column: every list level is a feature dimension (what
        Spark makes of a ``FixedSizeList`` column).
    feature_shape : tuple of int, optional
        With ``lod_level``: the widths of those folded levels (checked against the data), so
        that :meth:`udf.output_schema` can be computed from a schema alone.

    Returns
    -------
    ColumnRef
        Small and picklable (a name and two options, never data).

    Raises
    ------
    TypeError
        If ``name`` is not a string, ``lod_level`` not an integer or ``feature_shape`` not a
        tuple of integers.
    ValueError
        If ``lod_level`` < 0 or a width < 0, or ``feature_shape`` is given without
        ``lod_level``.

    See Also
    --------
    apply, udf : Run an operator on the columns of a table (docs/tables.md).

    Examples
    --------
    >>> import lodarrow as la
    >>> la.col("tokens")
    col('tokens')
    """
    if not isinstance(name, str):
        raise TypeError(f"col: name must be a string, got {type(name).__name__}")
    if lod_level is not None:
        try:
            lod_level = _operator.index(lod_level)
        except TypeError:
            raise TypeError(f"col: lod_level must be an integer, got "
                            f"{type(lod_level).__name__}") from None
        if lod_level < 0:
            raise ValueError(f"col: lod_level must be >= 0 (0: a plain column whose list "
                             f"levels are all feature dimensions), got {lod_level}")
    if feature_shape is not None:
        if lod_level is None:
            raise ValueError("col: feature_shape states the widths of the levels lod_level "
                             "folds into feature dimensions; give lod_level too")
        if isinstance(feature_shape, (int, np.integer)):
            feature_shape = (feature_shape,)
        try:
            feature_shape = tuple(_operator.index(d) for d in feature_shape)
        except TypeError:
            raise TypeError(f"col: feature_shape must be a tuple of integers, got "
                            f"{feature_shape!r}") from None
        if any(d < 0 for d in feature_shape):
            raise ValueError(f"col: feature_shape must hold widths >= 0, got {feature_shape}")
    return ColumnRef(name, lod_level, feature_shape)


# ---------------------------------------------------------------------------- operators
def resolve_op(op, fn):
    """``(name, function)`` of a public operator given as the function or its name."""
    if isinstance(op, str):
        f = OPERATORS.get(op)
        if f is None:
            raise ValueError(f"{fn}: unknown operator {op!r}; the operators are "
                             f"{sorted(OPERATORS)}")
        return op, f
    name = _BY_FUNCTION.get(op) if callable(op) else None
    if name is None:
        raise TypeError(f"{fn}: op must be a lodarrow operator (the function, e.g. "
                        f"la.sequence_pool, or its name as a string), got {op!r}")
    return name, op


def n_results(name, args):
    """How many results the operator returns for these arguments."""
    if name == "sequence_pad":
        return 2
    if name == "sequence_pool" and args.get("return_index", False):
        return 2
    return 1


def check_out(out, count, name, fn):
    """``out`` as a tuple of ``count`` names (None drops a result)."""
    if isinstance(out, str):
        outs = (out,)
    elif isinstance(out, (tuple, list)):
        outs = tuple(out)
    else:
        raise TypeError(f"{fn}: out must be a column name or a tuple of names, got "
                        f"{type(out).__name__}")
    for o in outs:
        if o is not None and not isinstance(o, str):
            raise TypeError(f"{fn}: out must hold column names (strings, or None to drop a "
                            f"result), got {o!r}")
    if len(outs) != count:
        what = "results" if count > 1 else "result"
        raise ValueError(f"{fn}: {name} returns {count} {what} here, so out needs {count} "
                         f"name(s), got {outs!r}" +
                         (" (None drops a result)" if count > 1 else ""))
    named = [o for o in outs if o is not None]
    if len(set(named)) != len(named):
        raise ValueError(f"{fn}: out names a column twice: {outs!r}")
    if not named:
        raise ValueError(f"{fn}: out must name at least one column, got {outs!r}")
    return outs


def refs_in(args):
    """The column references among the argument values (also inside lists and tuples)."""
    found = []
    for v in args.values():
        if isinstance(v, ColumnRef):
            found.append(v)
        elif isinstance(v, (list, tuple)):
            found.extend(x for x in v if isinstance(x, ColumnRef))
    return found


# ---------------------------------------------------------------------------- columns
class _Column:
    """A column read as a tensor: the tensor, whether it is a list column, its validity
    (None: no null rows) and whether its offsets are 32-bit (List / ListView / objects)."""

    __slots__ = ("tensor", "is_list", "valid", "narrow")

    def __init__(self, tensor, is_list, valid, narrow):
        self.tensor = tensor
        self.is_list = is_list
        self.valid = valid
        self.narrow = narrow


# Recently seen (type, kinds) pairs: comparing types with ``==`` (~0.1 us) is cheaper than
# hashing one (~1.4 us), as in from_arrow's own plan cache.
_RECENT_KINDS = []


def _kinds(arrow_type):
    """``(is_list, narrow)`` of a column type: whether it has a variable-size list level,
    and whether all of those are 32-bit (``List`` / ``ListView``)."""
    for known, hit in _RECENT_KINDS:
        if known == arrow_type:
            return hit
    kinds, _ = list_levels(arrow_type)
    variable = [k for k in kinds if isinstance(k, str)]
    hit = (bool(variable), all(k in ("list", "list_view") for k in variable))
    _RECENT_KINDS.insert(0, (arrow_type, hit))
    del _RECENT_KINDS[8:]
    return hit


_NO_KW = {}


def read_column(data, ref, from_objects, fn, valid, kinds=None):
    """Convert one column's Arrow data to a :class:`_Column` (docs/tables.md, Nulls).

    ``valid`` (None: no null rows in any list column of the call) marks the rows every
    list column reads as empty and every plain column as zeros: a null row of one input is a
    null row of the whole call, so the other inputs' constraints (equal lengths, offsets
    inside the row ...) hold there too.
    """
    is_list, narrow = _kinds(data.type) if kinds is None else kinds
    is_list = is_list and ref.lod_level != 0  # lod_level=0: every list level a feature dim
    narrow = narrow or from_objects
    kw = ref.arrow_kwargs() if ref.lod_level is not None or ref.feature_shape is not None \
        else _NO_KW
    if not is_list:
        if data.null_count:
            i = _first_null(data)
            raise ValueError(f"{fn}: column {ref.name!r} has a null at row {i} (level 0, the "
                             f"row itself); a plain column used as an argument cannot hold "
                             f"nulls (fill or drop them first)")
        t = _from_arrow(data, ref, "error", kw, fn)
        if valid is not None:  # the row is null anyway: zeros fit every operator's checks
            zeroed = np.array(t._data)
            zeroed[~valid] = 0
            t = LoDTensor._from_trusted(zeroed, t._offsets)
        return _Column(t, t.lod_level > 0, None, narrow)
    if valid is None:
        t = _from_arrow(data, ref, "error", kw, fn)
    else:
        _check_inner_nulls(data, ref.name, fn)
        t = _from_arrow(_with_validity(data, valid), ref, "empty", kw, fn)
    return _Column(t, t.lod_level > 0, valid, narrow)


def _from_arrow(data, ref, nulls, kw, fn):
    try:
        return from_arrow(data, nulls=nulls, **kw)
    except ValueError as exc:  # LoDError too (an irregular level under lod_level=): kept
        if "null" in str(exc):
            _check_inner_nulls(data, ref.name, fn)
        raise _same_error(exc, f"{fn}: column {ref.name!r}: {exc}") from None
    except TypeError as exc:
        raise TypeError(f"{fn}: column {ref.name!r}: {exc}") from None


def _same_error(exc, message):
    """``exc``'s class with ``message`` (a ValueError where the class needs other args)."""
    try:
        return type(exc)(message)
    except TypeError:
        return ValueError(message)


_TOP_BUFFERS = {"list": 2, "large_list": 2, "list_view": 3, "large_list_view": 3,
                "fixed_size_list": 1}


def _with_validity(data, valid):
    """The list array ``data`` with ``valid`` as its top-level validity (a new bitmap), and
    without values behind its null lists (``List`` / ``LargeList``).

    Null lists backed by values would make ``from_arrow(nulls="empty")`` gather every value
    below through index arrays; Arrow's ``flatten`` copies the runs of non-null lists instead
    (the same values, an order of magnitude sooner), and the null lists become empty.
    """
    arr = data.combine_chunks() if isinstance(data, pa.ChunkedArray) else data
    if isinstance(arr.type, pa.BaseExtensionType):
        arr = arr.storage
    t = arr.type
    kind = ("large_list_view" if _is_large_view(t) else "list_view" if _is_view(t) else
            "large_list" if pa.types.is_large_list(t) else "list" if pa.types.is_list(t)
            else "fixed_size_list")
    n_null = int(valid.shape[0] - np.count_nonzero(valid))
    bufs = arr.buffers()[:_TOP_BUFFERS[kind]]
    bits = np.concatenate([np.ones(arr.offset, dtype=np.bool_), valid]) if arr.offset else valid
    bitmap = pa.py_buffer(np.packbits(bits, bitorder="little"))
    if kind in ("list", "large_list") and bufs[1] is not None:
        dtype = np.dtype(np.int32 if kind == "list" else np.int64)
        n, o = len(arr), arr.offset
        if bufs[1].size >= (o + n + 1) * dtype.itemsize:
            off = np.frombuffer(bufs[1], dtype=dtype, count=o + n + 1)[o:]
            lengths = np.diff(off)
            if n_null and lengths[~valid].any():  # values behind null lists: drop them
                masked = pa.Array.from_buffers(t, n, [bitmap, bufs[1]], null_count=n_null,
                                               offset=o, children=[arr.values])
                lengths[~valid] = 0
                new = np.zeros(n + 1, dtype=dtype)
                np.cumsum(lengths, out=new[1:])
                bitmap = pa.py_buffer(np.packbits(valid, bitorder="little")) if o else bitmap
                return pa.Array.from_buffers(t, n, [bitmap, pa.py_buffer(new)],
                                             null_count=n_null, children=[masked.flatten()])
    return pa.Array.from_buffers(t, len(arr), [bitmap] + bufs[1:], null_count=n_null,
                                 offset=arr.offset, children=[arr.values])


def _first_null(data):
    valid = _validity(data)
    return int(np.argmin(valid))


def _validity(data):
    """A bool NumPy array, True where the row is not null."""
    return np.asarray(data.is_valid(), dtype=np.bool_) if isinstance(data, pa.Array) else \
        np.asarray(data.is_valid().combine_chunks() if data.num_chunks != 1
                   else data.chunk(0).is_valid(), dtype=np.bool_)


def _check_inner_nulls(data, name, fn):
    """Raise ``ValueError`` naming the row and level of the first null below the top level.

    Arrow keeps every array's null count, so this is O(levels) unless a child array holds
    nulls; then only the entries under rows that are not null are looked at (vectorised).
    """
    chunks = data.chunks if isinstance(data, pa.ChunkedArray) else (data,)
    if all(_children_without_nulls(c) for c in chunks):
        return
    node = data.combine_chunks() if isinstance(data, pa.ChunkedArray) else data
    if isinstance(node.type, pa.BaseExtensionType):
        node = node.storage
    if pa.types.is_dictionary(node.type):
        return
    if not _scan_inner_nulls(node, name, fn):
        _scan_inner_nulls_flattened(node, name, fn)


def _is_list_type(t):
    return (pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)
            or _is_view(t))


def _children_without_nulls(arr):
    """Whether no array below the top level of ``arr`` holds a null (Arrow's null counts:
    O(levels)); a dictionary leaf counts as without nulls, as the scans below read it."""
    if isinstance(arr.type, pa.BaseExtensionType):
        arr = arr.storage
    while _is_list_type(arr.type):
        arr = arr.values
        if pa.types.is_dictionary(arr.type):
            return True
        if arr.null_count:
            return False
    return True


def _scan_inner_nulls(node, name, fn):
    """The exact check for ``List`` / ``LargeList`` / ``FixedSizeList`` levels, by masks of
    the entries under non-null rows (in entry order, which is row order here); False when a
    level is of another kind (a list view), for :func:`_scan_inner_nulls_flattened`."""
    levels = []  # per level passed: (list size, node offset) or (offsets, first entry)
    keep = _validity(node) if node.null_count else np.ones(len(node), dtype=np.bool_)
    lo = 0  # ``keep`` marks entries [lo, lo + len(keep)) of ``node`` (logical positions)
    depth = 0
    while True:
        t = node.type
        m = keep.shape[0]
        if pa.types.is_fixed_size_list(t):
            size = t.list_size
            levels.append((size, node.offset))
            keep = np.repeat(keep, size)
            lo = (node.offset + lo) * size
        elif pa.types.is_list(t) or pa.types.is_large_list(t):
            buf = node.buffers()[1]
            start = node.offset + lo
            dtype = np.dtype(np.int32 if pa.types.is_list(t) else np.int64)
            if buf is None or buf.size < (start + m + 1) * dtype.itemsize:
                return False  # malformed: left to the reading path's own checks
            off = np.frombuffer(buf, dtype=dtype, count=start + m + 1)[start:]
            lengths = np.diff(off)
            if (lengths < 0).any() or off[0] < 0 or off[-1] > len(node.values):
                return False
            levels.append((off, lo))
            keep = np.repeat(keep, lengths)
            lo = int(off[0])
        else:
            return False
        node = node.values
        depth += 1
        t = node.type
        if pa.types.is_dictionary(t):
            return True
        if node.null_count:
            bad = keep & ~_bits(node, lo, lo + keep.shape[0])
            if bad.any():
                row = _row_of(levels, lo + int(np.argmax(bad)))
                what = ("a null fixed-size row" if pa.types.is_fixed_size_list(t) else
                        "a null list" if _is_list_type(t) else "a null value")
                _null_error(name, row, depth, what, fn)
        if not _is_list_type(t):
            return True


def _bits(node, start, stop):
    """The validity of entries ``[start, stop)`` of ``node`` (True: not null)."""
    bitmap = node.buffers()[0]
    if bitmap is None:
        return np.ones(stop - start, dtype=np.bool_)
    o = node.offset
    first, last = (o + start) // 8, (o + stop + 7) // 8
    raw = np.frombuffer(bitmap, dtype=np.uint8, count=last)[first:]
    skip = o + start - 8 * first
    return np.unpackbits(raw, bitorder="little")[skip: skip + stop - start].view(np.bool_)


def _row_of(levels, pos):
    """The top-level row holding entry ``pos`` of the deepest level passed."""
    for off, lo in reversed(levels):
        if isinstance(off, int):  # a fixed-size list of ``off`` at node offset ``lo``
            pos = pos // off - lo
        else:
            pos = lo + int(np.searchsorted(off, pos, side="right")) - 1
    return pos


def _scan_inner_nulls_flattened(node, name, fn):
    """The exact check for any list kinds: each level flattened in turn (pyarrow)."""
    import pyarrow.compute as pc

    parents = np.arange(len(node), dtype=np.int64)
    depth = 0
    while True:
        t = node.type
        if not _is_list_type(t):
            return
        if depth > 0 and node.null_count:
            i = int(np.argmin(_validity(node)))
            what = "a null fixed-size row" if pa.types.is_fixed_size_list(t) else "a null list"
            _null_error(name, int(parents[i]), depth, what, fn)
        parent = np.asarray(pc.list_parent_indices(node), dtype=np.int64)
        parents = parents[parent] if parent.size else parent
        node = node.flatten()
        depth += 1
        if pa.types.is_dictionary(node.type):
            return
        if node.null_count and not _is_list_type(node.type):
            i = int(np.argmin(_validity(node)))
            _null_error(name, int(parents[i]), depth, "a null value", fn)


def _is_large_view(t):
    return getattr(pa.types, "is_large_list_view", lambda _: False)(t)


def _is_view(t):
    return (getattr(pa.types, "is_list_view", lambda _: False)(t)
            or getattr(pa.types, "is_large_list_view", lambda _: False)(t))


def _null_error(name, row, depth, what, fn):
    raise ValueError(f"{fn}: column {name!r} has {what} inside row {row} at level {depth} "
                     f"(level 0 is the row itself); only whole rows may be null (fill or drop "
                     f"the inner nulls first)")


# ---------------------------------------------------------------------------- results
def _mask(arr, valid, n_null):
    """``arr`` with the rows where ``valid`` is False set to null (no copy of the data)."""
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little"))
    t = arr.type
    bufs = arr.buffers()
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.Array.from_buffers(t, len(arr), [bitmap, bufs[1]], null_count=n_null,
                                     offset=arr.offset, children=[arr.values])
    if pa.types.is_fixed_size_list(t):
        return pa.Array.from_buffers(t, len(arr), [bitmap], null_count=n_null,
                                     offset=arr.offset, children=[arr.values])
    return pa.Array.from_buffers(t, len(arr), [bitmap, bufs[1]], null_count=n_null,
                                 offset=arr.offset)


def _composed_offsets(t, depth):
    """The offsets of level ``depth``'s entries per top-level sequence (``depth`` levels
    composed); ``depth == len(lod)`` gives data rows per top-level sequence."""
    off = np.asarray(t._offsets[0])
    for k in range(1, depth):
        off = np.asarray(t._offsets[k])[off]
    return off


def _relative_index(index, source):
    """``sequence_pool``'s absolute row numbers relative to each table row's first row."""
    starts = _composed_offsets(source, source.lod_level)
    idx = np.asarray(index._data)
    if index.lod_level:
        per_row = np.diff(np.asarray(index._offsets[0]))
        first = np.repeat(starts[:-1], per_row)
    else:
        first = starts[:-1]
    first = first.reshape((-1,) + (1,) * (idx.ndim - 1))
    rel = np.where(idx >= 0, idx - first, idx)
    return LoDTensor._from_trusted(rel, index._offsets)


def _expand_broadcast(name, result, x, y, ref_level, fn):
    """``sequence_expand`` in table form: row ``i`` of ``x`` repeated within row ``i`` of
    ``y`` (docs/tables.md); a result with several top-level sequences per row is an error."""
    ref = y.lod_level - 1 if ref_level == -1 else ref_level
    if ref > 0:
        per_row = np.diff(_composed_offsets(y, ref))
        if per_row.size and not np.all(per_row == 1):
            r = int(np.argmax(per_row != 1))
            raise ValueError(f"{fn}: {name} with ref_level={ref_level} repeats within "
                             f"{int(per_row[r])} sequences of level {ref} in table row {r}; "
                             f"in table form each row needs exactly one (use ref_level=0)")
    offsets = np.asarray(y._offsets[ref])
    if x.lod_level == 0:
        # Paddle's result has no LoD: row i's copies are the ref level's sequence i.
        return LoDTensor._from_trusted(result._data, (offsets,), result._place)
    lengths = np.diff(offsets)
    if lengths.size and not np.all(lengths == 1):
        r = int(np.argmax(lengths != 1))
        raise ValueError(f"{fn}: {name} repeats x's sequence {int(lengths[r])} times in table "
                         f"row {r}, giving {int(lengths[r])} top-level sequences for one row; "
                         f"in table form a result needs one sequence per table row")
    return result


def _aligned(t, n_rows, name, out, fn):
    """Raise unless ``t`` is row-aligned with a table of ``n_rows`` rows."""
    if t.lod_level:
        got = t._offsets[0].shape[0] - 1
        what = "top-level sequences"
    else:
        got = t._data.shape[0]
        what = "rows"
    if got != n_rows:
        raise ValueError(f"{fn}: {name} gives output {out!r} with {got} {what} for a table of "
                         f"{n_rows} rows; in table form a result needs one sequence (or row) "
                         f"per table row")


def _to_column(t, narrow, valid):
    # t is an operator's result (or built from one): valid, so to_arrow's checks are skipped
    if t._offsets and narrow:
        try:
            arr = trusted_to_arrow(t, False)
        except ValueError:  # offsets past int32: LargeList, as to_arrow's default
            arr = trusted_to_arrow(t, True)
    else:
        arr = trusted_to_arrow(t, True)
    if valid is not None:
        n_null = int(valid.shape[0] - np.count_nonzero(valid))
        if n_null:
            arr = _mask(arr, valid, n_null)
    return arr


# ---------------------------------------------------------------------------- apply
def _unique(refs):
    out = []
    for r in refs:
        if not any(r is o or r == o for o in out):
            out.append(r)
    return out


def device_place(device, fn):
    """``device`` as a Place (None stays None), or a TypeError naming ``device``."""
    if device is None:
        return None
    try:
        return _as_place(device)
    except TypeError:
        raise TypeError(f"{fn}: device must be 'cpu', 'cuda', 'cuda:N' or a Place, "
                        f"got {device!r}") from None


_DEVICE = re.compile(r"(cpu|(cuda|gpu)(:\d+)?|gpu_pinned|cuda_pinned|pinned)", re.IGNORECASE)


def check_device(device, fn):
    """A TypeError naming ``device`` unless it could name a place; nothing is allocated or
    imported, so a udf for GPU workers can be made where there is no GPU."""
    if device is None or isinstance(device, Place):
        return
    if not isinstance(device, str) or not _DEVICE.fullmatch(device):
        raise TypeError(f"{fn}: device must be 'cpu', 'cuda', 'cuda:N' or a Place, "
                        f"got {device!r}")


class Call:
    """An operator call on table columns with what its arguments alone decide worked out
    once (the columns read, where each goes), so that a :class:`~lodarrow.udf` applied to
    many batches pays for it once.  Holds no data."""

    __slots__ = ("name", "fn_op", "args", "outs", "device", "fn", "refs", "slots",
                 "plain_only", "items", "ref_states")

    def __init__(self, name, fn_op, args, outs, device, fn):
        self.name, self.fn_op, self.args, self.outs = name, fn_op, args, outs
        self.items = self.ref_states = None  # see remember()
        self.device, self.fn = device, fn
        self.refs = refs = _unique(refs_in(args))
        # (key, value, kind): 0 a literal, 1 a column (value: its index in refs), 2 a list
        # or tuple holding columns
        slots = []
        for key, v in args.items():
            if isinstance(v, ColumnRef):
                slots.append((key, _index(refs, v), 1))
            elif isinstance(v, (list, tuple)) and any(isinstance(x, ColumnRef) for x in v):
                slots.append((key, v, 2))
            else:
                slots.append((key, v, 0))
        self.slots = tuple(slots)
        self.plain_only = _PLAIN_ONLY.get(name, ())

    def __call__(self, table):
        return _run(self, table)

    def remember(self):
        """Note the arguments' state, for :meth:`fits` (a udf keeps its call)."""
        self.items = tuple(self.args.items())
        self.ref_states = _ref_states(self.args)
        return self

    def fits(self, name, args, outs, device):
        """Whether this call was made from these very arguments, unchanged since (the
        values by identity, the column references by their state)."""
        if name != self.name or outs != self.outs or device is not self.device \
                or self.items is None or len(args) != len(self.items):
            return False
        for (key, v), (key0, v0) in zip(args.items(), self.items):
            if v is not v0 or key != key0:
                return False
        return _ref_states(args) == self.ref_states


def _ref_states(args):
    """Every column reference among ``args`` with its name and options (a reference is
    mutable, and a list of them can change in place)."""
    return [(r, r.name, r.lod_level, r.feature_shape) for r in refs_in(args)]


def _index(refs, ref):
    for i, r in enumerate(refs):
        if r is ref:
            return i
    for i, r in enumerate(refs):
        if r == ref:
            return i
    raise KeyError(ref)  # pragma: no cover - refs holds every reference of the arguments


def run(table, name, fn_op, args, outs, device, fn):
    """The body of :func:`apply` (shared with :class:`udf`)."""
    return _run(Call(name, fn_op, args, outs, device, fn), table)


def _run(c, table):
    fn, name, args, refs = c.fn, c.name, c.args, c.refs
    adapter = adapt(table, fn)
    n_rows = adapter.n_rows
    raw = []
    valid = None
    for ref in refs:
        data, from_objects = adapter.column(ref.name, fn)
        if type(data) is pa.ChunkedArray and data.num_chunks == 1:
            data = data.chunk(0)  # from_arrow's quickest path
        kinds = _kinds(data.type)
        raw.append((data, from_objects, kinds))
        if data.null_count and kinds[0] and ref.lod_level != 0:
            v = _validity(data)
            valid = v if valid is None else (valid & v)
    columns = []
    narrow = True
    for ref, (data, from_objects, kinds) in zip(refs, raw):
        col_ = read_column(data, ref, from_objects, fn, valid, kinds)
        if col_.is_list:
            narrow = narrow and col_.narrow
        columns.append(col_)
    place = device_place(c.device, fn)
    call = {}
    for key, v, kind in c.slots:
        if kind == 1:
            col_ = columns[v]
            if col_.is_list and key in c.plain_only:
                raise ValueError(f"{fn}: in table form {name}'s {key} must be a plain column "
                                 f"(one value per row); column {refs[v].name!r} is a list "
                                 f"column")
            t = col_.tensor
            call[key] = t if place is None else t.to(place)
        elif kind == 2:
            items = [columns[_index(refs, x)].tensor if isinstance(x, ColumnRef) else x
                     for x in v]
            if place is not None:
                items = [x.to(place) if isinstance(x, LoDTensor) else x for x in items]
            call[key] = type(v)(items) if isinstance(v, tuple) else items
        else:
            call[key] = v
    result = c.fn_op(**call)
    results = result if isinstance(result, tuple) else (result,)
    outs = c.outs
    if len(results) != len(outs):  # pragma: no cover - n_results mirrors the operators
        raise ValueError(f"{fn}: {name} returned {len(results)} results, out names "
                         f"{len(outs)}")
    new = {}
    for i, (t, out) in enumerate(zip(results, outs)):
        if out is None:
            continue
        if t._place.is_cuda:
            t = t.cpu()
        if name == "sequence_expand" and isinstance(args.get("y"), ColumnRef) \
                and isinstance(call.get("x"), LoDTensor):
            t = _expand_broadcast(name, t, call["x"], call["y"], args.get("ref_level", -1), fn)
        elif name == "sequence_mask" and isinstance(args.get("x"), ColumnRef) \
                and columns[_index(refs, args["x"])].is_list:
            src = columns[_index(refs, args["x"])].tensor
            t = LoDTensor._from_trusted(t._data, src._offsets)
        elif name == "sequence_pool" and i == 1:
            t = _relative_index(t, columns[_index(refs, args["input"])].tensor
                                if isinstance(args.get("input"), ColumnRef) else call["input"])
        _aligned(t, n_rows, name, out, fn)
        new[out] = _to_column(t, narrow, valid)
    return adapter.finish(new)


def apply(table, op, *, out, device=None, **args):
    """Run an operator on the columns of a table; add its results as columns.

    Parameters
    ----------
    table : pyarrow.Table, pyarrow.RecordBatch, pandas.DataFrame, polars.DataFrame or stream
        Any object with ``__arrow_c_stream__`` is read as a ``pyarrow.Table``.  pandas columns
        may be ``pd.ArrowDtype`` (read zero-copy) or object columns of lists / NumPy arrays at
        any depth (what ``pd.read_parquet`` returns by default).
    op : callable or str
        A public lodarrow operator (``la.sequence_pool``) or its name (``"sequence_pool"``).
    out : str or tuple of str
        The result column(s): a tuple for an operator with several results
        (``sequence_pad`` -> (padded, length); ``sequence_pool(..., return_index=True)`` ->
        (out, index)); ``None`` in the tuple drops that result.  A name equal to an existing
        column replaces it in place; new names are appended in order.
    device : str or Place, optional
        ``"cuda"`` runs the operator on the GPU (inputs moved once, results brought back as
        host Arrow columns); needs CuPy and a GPU, else ``lodarrow.BackendError``.
    **args
        The operator's arguments; :func:`col` references are replaced by the columns'
        tensors, everything else is passed as it is.

    Returns
    -------
    table of the same kind
        The other columns are the caller's own (zero-copy, with the schema's metadata).  A list
        result is a list column whose levels are ``List`` (int32 offsets) when every list
        column the call reads is ``List`` / ``ListView`` (a pandas object column counts as
        ``List``) and the offsets fit, else ``LargeList``.  New pandas columns are
        ``pd.ArrowDtype``.

    Raises
    ------
    ValueError
        If a result is not row-aligned (the message names the operator, the output and the
        row counts); on a null inside a list or in a plain argument column (naming the column,
        the row and the level); on a list column where the operator reads a plain one's rows.
    KeyError
        If a referenced column does not exist.
    TypeError
        If ``table`` or ``op`` is of the wrong kind, or a column cannot be a LoDTensor.

    Notes
    -----
    A null row of an input list column is computed as an empty sequence and is a null row
    of every result.  ``sequence_pool(..., return_index=True)`` gives indices relative to the
    first value of the table row (-1 stays -1), so they do not depend on how a table is split.
    ``sequence_expand(x=col(plain), y=col(list))`` and ``sequence_expand_as`` repeat row ``i``
    of ``x`` within row ``i`` of ``y``; ``sequence_mask(x=col(list))`` keeps ``x``'s rows.
    See docs/tables.md.

    Examples
    --------
    >>> import pyarrow as pa, lodarrow as la
    >>> tab = pa.table({"id": [7, 8], "emb": [[1.0, 3.0], [5.0]]})
    >>> la.apply(tab, la.sequence_pool, input=la.col("emb"), pool_type="average",
    ...          out="avg").column("avg").to_pylist()
    [2.0, 5.0]
    """
    name, fn_op = resolve_op(op, "apply")
    outs = check_out(out, n_results(name, args), name, "apply")
    return run(table, name, fn_op, args, outs, device, "apply")
