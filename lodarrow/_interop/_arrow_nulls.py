"""Null rows of Arrow columns (docs/tables.md#nulls): which rows are null, the nulls inside
rows that have no meaning, and results spread back over the null rows.

A table row that is null in any column a call reads is a null row of every result.  The table
engine runs the operator on the other rows only (:func:`drop_rows`), so no operator ever sees
a placeholder, and puts the null rows back into each result (:func:`spread_rows`).  A null
*inside* a row (a null value, a null inner list, a null fixed-size row below a list level)
raises ``ValueError`` naming the column, the row and the level (:func:`check_inner_nulls`).
"""

import numpy as np
import pyarrow as pa

__all__ = ["validity", "first_null", "check_inner_nulls", "drop_rows", "spread_rows"]


def validity(data):
    """A bool NumPy array, True where the row of ``data`` (Array or ChunkedArray) is not
    null."""
    if isinstance(data, pa.ChunkedArray):
        data = data.chunk(0) if data.num_chunks == 1 else data.is_valid().combine_chunks()
        if isinstance(data, pa.BooleanArray):
            return np.asarray(data, dtype=np.bool_)
    return np.asarray(data.is_valid(), dtype=np.bool_)


def first_null(data):
    """The first null row of ``data``."""
    return int(np.argmin(validity(data)))


def drop_rows(data, keep):
    """``data`` (Array or ChunkedArray) without the rows where ``keep`` is False.

    A ``List`` / ``LargeList`` column whose dropped rows between kept ones hold no values
    (null rows usually do not), and whose kept rows are not null (the table engine keeps
    only such rows), keeps its values: new top-level offsets over the same child, no copy
    of the values (a filter would copy them all: the largest cost of a udf on a column with
    null rows).  Anything else is filtered (the kept values are copied).
    """
    if isinstance(data, pa.ChunkedArray):
        chunks, start = [], 0
        for chunk in data.chunks:
            chunks.append(_drop_rows(chunk, keep[start:start + len(chunk)]))
            start += len(chunk)
        return pa.chunked_array(chunks, type=data.type)
    return _drop_rows(data, keep)


def _drop_rows(arr, keep):
    t = arr.type
    kept = np.flatnonzero(keep)
    if kept.size and (pa.types.is_list(t) or pa.types.is_large_list(t)):
        off = np.asarray(arr.offsets)  # the slice's own len + 1 offsets, into arr.values
        # the kept rows' values must lie end to end: every dropped row between two kept ones
        # is empty (rows before the first and after the last kept one may hold anything)
        if np.array_equal(off[kept[1:]], off[kept[:-1] + 1]) and (
                not arr.null_count or np.asarray(arr.is_valid())[kept].all()):
            new = np.empty(kept.size + 1, dtype=off.dtype)
            new[0] = off[kept[0]]
            np.take(off, kept + 1, out=new[1:])
            return pa.Array.from_buffers(t, kept.size, [None, pa.py_buffer(new)],
                                         null_count=0, children=[arr.values])
    return arr.filter(pa.array(keep, type=pa.bool_()))


def spread_rows(arr, keep):
    """``arr`` (one row per True of ``keep``) spread over ``len(keep)`` rows, the others null.

    A ``List`` / ``LargeList`` result keeps its values (new offsets, zero-length null rows);
    any other result is gathered (its null rows hold zeros).
    """
    n = keep.shape[0]
    n_null = int(n - np.count_nonzero(keep))
    bitmap = pa.py_buffer(np.packbits(keep, bitorder="little"))
    t = arr.type
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        off = np.asarray(arr.offsets)
        lengths = np.zeros(n, dtype=off.dtype)
        lengths[keep] = np.diff(off)
        full = np.empty(n + 1, dtype=off.dtype)
        full[0] = off[0] if off.size else 0
        np.cumsum(lengths, out=full[1:])
        full[1:] += full[0]
        return pa.Array.from_buffers(t, n, [bitmap, pa.py_buffer(full)], null_count=n_null,
                                     children=[arr.values])
    index = np.cumsum(keep, dtype=np.int64) - 1
    index[~keep] = 0
    return arr.take(pa.array(index, mask=~keep))


# ---------------------------------------------------------------------------- inner nulls
def check_inner_nulls(data, name, fn):
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
            or pa.types.is_list_view(t) or pa.types.is_large_list_view(t))


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
    keep = validity(node) if node.null_count else np.ones(len(node), dtype=np.bool_)
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
            i = first_null(node)
            what = "a null fixed-size row" if pa.types.is_fixed_size_list(t) else "a null list"
            _null_error(name, int(parents[i]), depth, what, fn)
        parent = np.asarray(pc.list_parent_indices(node), dtype=np.int64)
        parents = parents[parent] if parent.size else parent
        node = node.flatten()
        depth += 1
        if pa.types.is_dictionary(node.type):
            return
        if node.null_count and not _is_list_type(node.type):
            _null_error(name, int(parents[first_null(node)]), depth, "a null value", fn)


def _null_error(name, row, depth, what, fn):
    raise ValueError(f"{fn}: column {name!r} has {what} inside row {row} at level {depth} "
                     f"(level 0 is the row itself); only whole rows may be null (fill or drop "
                     f"the inner nulls first)")
