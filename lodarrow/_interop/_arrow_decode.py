"""The one Arrow decoder: an Arrow array (tree of nodes) -> LoDTensor data and LoD levels.

It runs a :class:`~lodarrow._interop._arrow_layout.Plan` over any tree of nodes that has ``offset``,
``null_count``, ``values`` (the child), ``dictionary`` and ``len()`` -- a ``pyarrow.Array``,
or :mod:`lodarrow._interop._cdevice`'s view of C Device structs -- with the buffers of every node in
one flat list (the order of ``pyarrow.Array.buffers()``), read through a *memory*:

- :data:`HOST` reads ``pyarrow.Buffer`` s as NumPy views;
- ``lodarrow._interop._cdevice``'s memories read raw addresses as NumPy views (host memory) or CuPy
  views (CUDA memory).

Offsets end up on the host (a LoDTensor keeps them there); values stay where they are.  The
cost is O(levels) on the zero-copy paths; the copies are listed in :func:`lodarrow.from_arrow`.
"""

import numpy as np

from lodarrow._backends.cpu import CPU
from lodarrow._interop._arrow_layout import (FIXED, LARGE_LIST, LIST, OFFSET_DTYPE,
                                            missing_width_message)
from lodarrow._errors import LoDError

__all__ = ["HOST", "decode", "join"]


class _HostMemory:
    """Reads ``pyarrow.Buffer`` s (host memory) as read-only NumPy views."""

    xp = np

    @staticmethod
    def view(buf, dtype, stop, what):
        """The first ``stop`` items of ``buf`` as a NumPy view (no copy)."""
        if stop <= 0:
            return np.frombuffer(buf, dtype=dtype, count=0) if buf is not None \
                else np.empty(0, dtype=dtype)
        if buf is None or buf.size < stop * dtype.itemsize:
            have = 0 if buf is None else buf.size
            raise ValueError(f"from_arrow: invalid Arrow array: the {what} buffer holds {have} "
                             f"bytes, {stop * dtype.itemsize} are needed")
        return np.frombuffer(buf, dtype, stop)  # positional: keywords cost more to parse

    @staticmethod
    def bits(buf, start, stop, what):
        """Bits ``[start, stop)`` of an LSB-first bitmap as a bool array (a copy)."""
        if stop <= start:
            return np.zeros(0, dtype=np.bool_)
        first, last = start // 8, (stop + 7) // 8
        raw = _HostMemory.view(buf, np.dtype(np.uint8), last, what)[first:]
        return np.unpackbits(raw, bitorder="little")[start - 8 * first: stop - 8 * first] \
            .view(np.bool_)

    @staticmethod
    def host(arr):
        return arr

    @staticmethod
    def device(arr):
        return arr


#: The memory of pyarrow arrays.
HOST = _HostMemory()


def _count(sel):
    return sel[1] - sel[0] if isinstance(sel, tuple) else sel.shape[0]


def _indices(sel):
    return np.arange(sel[0], sel[1], dtype=np.int64) if isinstance(sel, tuple) else sel


def _null_mask(mem, node, bitmap, sel, all_null=False):
    """None when no selected entry of ``node`` is null, else a bool mask on the node's device
    (True = null)."""
    if not node.null_count:  # 0, or -1 (unknown) is truthy and reads the bitmap
        return None
    o = node.offset
    if bitmap is None:
        if all_null:  # the null type: everything is null
            return np.ones(_count(sel), dtype=np.bool_) if _count(sel) else None
        if node.null_count > 0:
            raise ValueError(f"from_arrow: invalid Arrow array: a node reports "
                             f"{node.null_count} nulls but has no validity buffer")
        return None
    if isinstance(sel, tuple):
        valid = mem.bits(bitmap, o + sel[0], o + sel[1], "validity")
    elif sel.size:
        valid = mem.bits(bitmap, o, o + int(sel.max()) + 1, "validity")[mem.device(sel)]
    else:
        return None
    if bool(valid.all()):
        return None
    return ~valid


def _first(mask):
    """The index of the first True of a bool array (host or device)."""
    return int(mask.view(np.uint8).argmax())


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
    """`` in chunk c (top-level sequence s)`` for messages."""
    top = _top_sequence(levels, depth, pos) + chunk_start
    in_chunk = "" if chunk is None else f" in chunk {chunk}"
    return f"{in_chunk} (top-level sequence {top})"


def _check_range(stop, length, depth, what):
    """Raise unless ``stop <= length``: nothing may point past the end of a child array."""
    if stop > length:
        at = "the values" if depth is None else f"level {depth}"
        raise ValueError(f"from_arrow: invalid Arrow array: {what} of {at} reaches {stop} but "
                         f"the array below has only {length} entries")


def _check_lists(starts, lengths, n_child, depth):
    """O(n) bounds check of explicit sequence ranges (the paths that are O(n) anyway)."""
    if lengths.size and (lengths.min() < 0 or starts.min() < 0):
        p = int(np.argmax((lengths < 0) | (starts < 0)))
        raise ValueError(f"from_arrow: invalid Arrow array: sequence {p} at level {depth} has "
                         f"start {int(starts[p])} and length {int(lengths[p])}")
    if lengths.size:
        _check_range(int((starts + lengths).max()), n_child, depth, "a sequence")


def _list_level(mem, node, bufs, at, kind, size, sel, nullmask, depth):
    """``(offsets, child selection)`` of the selected lists of one level (offsets on the host,
    from 0; zero-copy for a ``LargeList`` range whose offsets start at 0)."""
    o = node.offset
    child = node.values
    n_child = len(child)
    if kind == FIXED:
        if nullmask is None and isinstance(sel, tuple):
            new = np.arange(_count(sel) + 1, dtype=np.int64) * size
            child_sel = ((o + sel[0]) * size, (o + sel[1]) * size)
            _check_range(child_sel[1], n_child, depth, "a fixed-size list")
            return new, child_sel, child
        idx = _indices(sel)
        starts = (o + idx) * size
        lengths = np.full(idx.shape[0], size, dtype=np.int64)
        if idx.size:
            _check_range(int(starts.max()) + size, n_child, depth, "a fixed-size list")
    elif kind in (LIST, LARGE_LIST):
        odt = OFFSET_DTYPE[kind]
        if nullmask is None and isinstance(sel, tuple):
            a, b = sel
            off = mem.host(mem.view(bufs[at + 1], odt, o + b + 1, "offsets")[o + a:])
            lo, hi = int(off[0]), int(off[-1])
            if lo < 0 or hi < lo:
                raise ValueError(f"from_arrow: invalid Arrow array: offsets at level "
                                 f"{depth} run from {lo} to {hi}")
            _check_range(hi, n_child, depth, "an offset")
            if kind == LARGE_LIST and lo == 0:
                new = off  # zero-copy: the LoD level is the Arrow offsets buffer
            else:
                new = off.astype(np.int64)
                if lo:
                    new -= lo
            return new, (lo, hi), child
        idx = _indices(sel)
        full = mem.host(mem.view(bufs[at + 1], odt, o + int(idx.max()) + 2 if idx.size else 0,
                                 "offsets"))
        starts = full[o + idx].astype(np.int64)
        lengths = full[o + idx + 1] - starts
    else:  # ListView / LargeListView: offsets + sizes, views may overlap or be unordered
        odt = OFFSET_DTYPE[kind]
        idx = _indices(sel)
        stop = o + int(idx.max()) + 1 if idx.size else 0
        starts = mem.host(mem.view(bufs[at + 1], odt, stop, "offsets"))[o + idx].astype(np.int64)
        lengths = mem.host(mem.view(bufs[at + 2], odt, stop, "sizes"))[o + idx].astype(np.int64)
    if nullmask is not None:
        lengths[nullmask] = 0
    _check_lists(starts, lengths, n_child, depth)
    new, child_sel = _gather_lists(starts, lengths)
    return new, child_sel, child


def decode(mem, arr, bufs, plan, nulls, widths, chunk=None, chunk_start=0):
    """Take one array apart into ``(data, levels)``: O(levels) unless it must copy.

    ``widths`` is the feature shape known so far (a list; ``None`` where only the data can
    tell); the widths read from this array are written into it, and the data keeps its
    values flat (``(rows * prod(widths),)``) when a width is still unknown.
    """
    pos = plan.buffer_pos
    lod = plan.levels
    if mem is HOST and len(lod) == 1 and not plan.features and plan.index_dtype is None \
            and not plan.null_leaf and not arr.null_count:
        lean = _lean_list(arr, bufs, pos, lod[0][0], plan.dtype)
        if lean is not None:
            return lean
    node = arr
    sel = (0, len(arr))  # a range or an index array, in the node's logical coordinates
    levels = []
    view, host = mem.view, mem.host
    for depth, (kind, size) in enumerate(plan.levels):
        nullmask = _null_mask(mem, node, bufs[pos[depth]], sel) if node.null_count else None
        if nullmask is not None:
            nullmask = host(nullmask)
            if nulls == "error":
                p = int(np.argmax(nullmask))
                raise ValueError(f"from_arrow: null list at level {depth}, position {p}"
                                 f"{_where(levels, depth, p, chunk, chunk_start)}; pass "
                                 f"nulls='empty' to read null lists as empty sequences")
        elif isinstance(sel, tuple) and (kind is LARGE_LIST or kind is LIST):
            # The common case, inlined (see _list_level): one slice of the offsets.
            o = node.offset
            a, b = sel
            off = host(view(bufs[pos[depth] + 1], OFFSET_DTYPE[kind], o + b + 1, "offsets"))
            if o + a:
                off = off[o + a:]
            lo, hi = int(off[0]), int(off[-1])
            if lo < 0 or hi < lo:
                raise ValueError(f"from_arrow: invalid Arrow array: offsets at level "
                                 f"{depth} run from {lo} to {hi}")
            node = node.values
            _check_range(hi, len(node), depth, "an offset")
            if kind is LARGE_LIST and lo == 0:
                levels.append(off)  # zero-copy: the LoD level is the Arrow offsets buffer
            else:
                off = off.astype(np.int64)
                if lo:
                    off -= lo
                levels.append(off)
            sel = (lo, hi)
            continue
        new, sel, node = _list_level(mem, node, bufs, pos[depth], kind, size, sel, nullmask,
                                     depth)
        levels.append(new)

    n_levels = len(plan.levels)
    rows = _count(sel)
    per_row = 1  # entries of the current feature level per data row
    for j, (kind, size) in enumerate(plan.features):
        depth = n_levels + j
        nullmask = _null_mask(mem, node, bufs[pos[depth]], sel)
        if nullmask is not None:
            e = _first(nullmask)
            what = ("fixed-size row" if kind == FIXED else
                    f"list (feature dimension {j}, level {depth})")
            raise ValueError(f"from_arrow: null {what} at row {e // per_row}"
                             f"{_where(levels, n_levels, e // per_row, chunk, chunk_start)}; a "
                             f"LoDTensor cannot hold null rows (nulls='empty' applies to null "
                             f"lists of LoD levels only)")
        if kind == FIXED:
            o = node.offset
            child = node.values
            if isinstance(sel, tuple):
                sel = ((o + sel[0]) * size, (o + sel[1]) * size)
                _check_range(sel[1], len(child), depth, "a fixed-size row")
            else:
                sel = ((o + sel)[:, None] * size + np.arange(size, dtype=np.int64)).reshape(-1)
                if sel.size:
                    _check_range(int(sel.max()) + 1, len(child), depth, "a fixed-size row")
            node = child
        else:  # a variable-size level folded into a feature dimension: it must be regular
            new, sel, node = _list_level(mem, node, bufs, pos[depth], kind, 0, sel, None, depth)
            size = _regular_width(new, widths, plan.widths[j], j, depth, per_row, levels,
                                  n_levels, chunk, chunk_start)
        if widths[j] is None and size is not None:
            widths[j] = size
        per_row *= size if size is not None else 0

    data = _leaf_values(mem, node, bufs, pos[-1], sel, plan, levels, chunk, chunk_start,
                        per_row)
    if type(widths) is not tuple:  # an unknown width (no lists to read it from) leaves no
        widths = tuple(w or 0 for w in widths)  # values: 0 is its placeholder
    return data.reshape((rows,) + widths), levels


def _lean_list(arr, bufs, pos, kind, dtype):
    """:func:`decode`'s branch for the commonest column, one ``List`` / ``LargeList`` level of
    numeric values with no nulls: the same result as the general path, in fewer steps.

    None (the general path then runs, and raises its own errors) for anything else: a null
    count that is not 0 (unknown counts too), bool values, a buffer too short, offsets
    outside the child, no values to view.
    """
    if (kind is not LARGE_LIST and kind is not LIST) or dtype.kind == "b":
        return None
    odt = OFFSET_DTYPE[kind]
    o = arr.offset
    stop = o + len(arr) + 1
    obuf = bufs[pos[0] + 1]
    if obuf is None or obuf.size < stop * odt.itemsize:
        return None
    off = np.frombuffer(obuf, odt, stop)  # positional: keywords cost more to parse
    if o:
        off = off[o:]
    lo, hi = int(off[0]), int(off[-1])
    child = arr.values
    if lo < 0 or hi < lo or hi > len(child) or child.null_count:
        return None
    o = child.offset
    vbuf = bufs[pos[1] + 1]
    stop = o + hi
    if stop <= 0 or vbuf is None or vbuf.size < stop * dtype.itemsize:
        return None
    data = np.frombuffer(vbuf, dtype, stop)
    if o + lo:
        data = data[o + lo:]
    data.setflags(False)  # write=False: Arrow memory is immutable (as pyarrow's to_numpy)
    if kind is not LARGE_LIST or lo:
        off = off.astype(np.int64)
        if lo:
            off -= lo
    return data, [off]


def _regular_width(offsets, widths, stated, j, depth, per_row, levels, n_levels, chunk,
                   chunk_start):
    """The common length of the lists of a folded level (the known width when it has no
    lists); ``LoDError`` naming the first list of another length."""
    n = offsets.shape[0] - 1
    if n == 0:
        return widths[j]
    lengths = np.diff(offsets)
    expected = int(lengths[0]) if widths[j] is None else widths[j]
    bad = lengths != expected
    if not bad.any():
        return expected
    p = int(np.argmax(bad))
    if stated is not None:
        said = f"feature_shape[{j}] is {stated}"
    elif widths[j] is not None:
        said = f"the lists of earlier chunks have length {expected}"
    else:
        said = f"the first list of the level has length {expected}"
    row = p // per_row if per_row else 0
    top = _top_sequence(levels, n_levels, row) + chunk_start
    in_chunk = "" if chunk is None else f" in chunk {chunk}"
    raise LoDError(f"from_arrow: level {depth} must be regular to be feature dimension {j}: "
                   f"its list at position {p}{in_chunk} (row {row}, top-level sequence {top}) "
                   f"has length {int(lengths[p])}, but {said}")


def _leaf_values(mem, node, bufs, at, sel, plan, levels, chunk, chunk_start, per_row):
    """The selected values of the leaf array as a flat array (on the node's device)."""
    nullmask = _null_mask(mem, node, bufs[at], sel, all_null=plan.null_leaf) \
        if node.null_count else None
    if nullmask is not None:
        _null_value(_first(nullmask), plan, levels, chunk, chunk_start, per_row)
    if plan.null_leaf:  # list<null> with no values at all
        return mem.xp.empty(0, dtype=plan.dtype)
    if plan.index_dtype is not None:
        return _dictionary_values(mem, node, bufs, at, sel, plan, levels, chunk, chunk_start,
                                  per_row)
    if mem is HOST and isinstance(sel, tuple) and plan.dtype != np.bool_:  # inlined _select
        a, b = sel
        o = node.offset
        _check_range(b, len(node), None, "a row")
        view = HOST.view(bufs[at + 1], plan.dtype, o + b, "values")
        if o + a:
            view = view[o + a:]
        view.setflags(False)  # write=False: Arrow memory is immutable (as pyarrow's to_numpy)
        return view
    return _select(mem, node, bufs[at + 1], plan.dtype, sel)


def _select(mem, node, vbuf, dtype, sel):
    """Entries ``sel`` of a primitive node's values: a read-only view for a range (a copy for
    bool, which Arrow bit-packs, and for an index array)."""
    o = node.offset
    if isinstance(sel, tuple):
        a, b = sel
        _check_range(b, len(node), None, "a row")
        if dtype == np.bool_:
            return mem.bits(vbuf, o + a, o + b, "values")
        view = mem.view(vbuf, dtype, o + b, "values")[o + a:]
        if mem.xp is np:
            view.setflags(False)  # write=False: Arrow memory is immutable (as pyarrow's to_numpy)
        return view
    if sel.size == 0:
        return mem.xp.empty(0, dtype=dtype)
    stop = int(sel.max()) + 1
    _check_range(stop, len(node), None, "a row")
    if dtype == np.bool_:
        return mem.bits(vbuf, o, o + stop, "values")[mem.device(sel)]
    return mem.view(vbuf, dtype, o + stop, "values")[mem.device(o + sel)]


def _null_value(e, plan, levels, chunk, chunk_start, per_row):
    n_levels = len(plan.levels)
    row = e // per_row if per_row else 0
    where = (_where(levels, n_levels, row, chunk, chunk_start) if n_levels else
             ("" if chunk is None else f" in chunk {chunk}"))
    raise ValueError(f"from_arrow: null value at row {row} (element {e}){where}; a LoDTensor "
                     f"cannot hold null values")


def _dictionary_values(mem, node, bufs, at, sel, plan, levels, chunk, chunk_start, per_row):
    """Dictionary-encoded values of ``sel``, decoded (a copy): ``dictionary[indices]``."""
    indices = _select(mem, node, bufs[at + 1], plan.index_dtype, sel)
    words = node.dictionary
    if words is None:
        raise ValueError("from_arrow: invalid Arrow array: a dictionary-encoded array has no "
                         "dictionary")
    size = len(words)
    if indices.shape[0]:
        bad = (indices < 0) | (indices >= size)
        if bool(bad.any()):
            e = _first(bad)
            n_levels = len(plan.levels)
            row = e // per_row if per_row else 0
            where = (_where(levels, n_levels, row, chunk, chunk_start) if n_levels else "")
            raise ValueError(f"from_arrow: invalid Arrow array: dictionary index "
                             f"{int(indices[e])} at row {row} (element {e}){where} is out of "
                             f"range for a dictionary of {size} values")
    indices = indices.astype(np.int64)
    wbufs = words.buffers()
    whole = (0, size)
    word_nulls = _null_mask(mem, words, wbufs[0], whole)
    if word_nulls is not None and indices.shape[0]:
        hit = word_nulls[indices]
        if bool(hit.any()):
            _null_value(_first(hit), plan, levels, chunk, chunk_start, per_row)
    return _select(mem, words, wbufs[1], plan.dtype, whole)[indices]


def join(parts, n_levels):
    """Concatenate decoded chunks (a copy of the data and the offsets).

    The data goes into a buffer of Arrow's memory pool (``CPU.empty``): a joined block of a
    Parquet corpus is tens of MiB, and a fresh ``numpy.empty`` of that size is new pages
    from the kernel every time, whose faults cost as much as the copy itself.
    """
    first = parts[0][0]
    data = CPU.empty((sum(d.shape[0] for d, _ in parts),) + first.shape[1:], first.dtype)
    np.concatenate([d for d, _ in parts], out=data)
    levels = []
    for k in range(n_levels):
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


def missing_width(arrow_type, plan, widths):
    """The ``ValueError`` for a width neither the type, ``feature_shape`` nor the data gave."""
    return ValueError(missing_width_message(arrow_type, plan, widths.index(None)))
