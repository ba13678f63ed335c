"""Collation: a batch of rows to model-ready arrays (docs/training.md#collation).

Packed rows are planned by a :class:`Placement` (best-fit decreasing, :func:`pack_placement`)
that a batch plan can compute once and :func:`collate_rows` consumes; without one,
:func:`collate_rows` packs the batch itself.
"""

from typing import NamedTuple

import numpy as np
import pyarrow as pa

from lodarrow._cupy import is_cupy_array
from lodarrow._threads import num_threads
from lodarrow._cpu import _batch_plan as _k
from lodarrow._hub._dense import LIBRARIES, dense_to, jax_x64
from lodarrow._tensor import LoDTensor
from lodarrow._training._source import check_level, column_of, compose
from lodarrow._validation import (as_index_array, as_positive_int, check_choice,
                                  coerce_pad_value)

__all__ = ["collate"]

_FN = "collate"
MODES = ("padded", "packed", "packed_rows", "segments", "blocks")
#: The modes that lay sequences out in rows of ``row_length`` (items of a Placement).
ROW_MODES = ("packed_rows", "blocks")
OVERSIZE = ("split", "drop", "error")
#: The arrays collation makes whose values are indices, positions or lengths: for JAX without
#: ``jax_enable_x64`` they become int32 when their values fit (an error otherwise), where any
#: other 64-bit array is an error (JAX would narrow it silently).  "rows" is the loader's.
INDEX_KEYS = frozenset({"cu_seqlens", "position_ids", "lengths", "seq_idx", "segment_ids",
                        "seq_row", "rows"})
#: Copy a batch on several threads from this many output bytes on (OpenMP start-up costs ~ms).
_PARALLEL_BYTES = 8 << 20
#: Pack windows on several threads from this many items on.
_PARALLEL_ITEMS = 1 << 16
_INT32_MAX = int(np.iinfo(np.int32).max)
_INT32_MIN = int(np.iinfo(np.int32).min)


class Sequences:
    """The sequences of one column at one level: values (rows ``(n_values, *feature)``) and
    each sequence's first value row and length.  Built once, collated many times."""

    def __init__(self, t, level, fn=_FN):
        chain = [o.get() if hasattr(o, "get") else np.asarray(o) for o in t.offsets]
        self.level = check_level(level, len(chain), fn)
        bounds = compose(chain, self.level)
        self.starts = np.ascontiguousarray(bounds[:-1])
        self.lengths = np.diff(bounds)
        self.values = t.data
        self.on_gpu = is_cupy_array(self.values)
        self._src = self._pad = None

    def source_bytes(self):
        """The values as one flat uint8 array, and the bytes of one value row (cached)."""
        if self._src is None:
            feature = self.values.shape[1:]
            self.row_bytes = self.values.dtype.itemsize * int(np.prod(feature, dtype=np.int64))
            self._src = np.ascontiguousarray(self.values).reshape(-1).view(np.uint8)
        return self._src, self.row_bytes

    def pad_bytes(self, pad):
        """``pad`` (an array of the feature shape) as the bytes of one row (cached)."""
        if self._pad is None or self._pad[0] is not pad:
            row = np.ascontiguousarray(pad, dtype=self.values.dtype).reshape(-1).view(np.uint8)
            self._pad = (pad, row)
        return self._pad[1]

    def __len__(self):
        return len(self.starts)


def as_sequences(source, column, level, fn=_FN, *, nulls="empty"):
    """``source``'s column ``column`` as :class:`Sequences` at ``level``.  ``nulls``: how a null
    row reads (``from_arrow``'s ``"empty"`` or ``"error"``), which the caller decides (the
    loader: :attr:`lodarrow._training._select.Selection.read_nulls`; :func:`collate`:
    ``"empty"``)."""
    if isinstance(source, Sequences):
        return source
    col = column_of(source, column, fn)
    if not isinstance(col, LoDTensor):
        # the table layer's from_arrow: the same function wherever the interop module lives
        from lodarrow._tables._table import from_arrow

        if isinstance(col, pa.ChunkedArray) and col.num_chunks == 0:
            col = pa.nulls(0, type=col.type)   # not pa.array([]): that imports pandas
        col = from_arrow(col, nulls=nulls)
    return Sequences(col, level, fn)


class Shape(NamedTuple):
    """The shape options of a batch, checked once by :func:`check_shape` (None: not set)."""

    oversize: str = "error"
    num_rows: object = None
    pad_to_multiple_of: object = None
    pad_widths: object = None
    num_segments: object = None
    remainder: str = "pad"


#: Which modes each shape option applies to.
_APPLIES = {"oversize": ("packed_rows",), "num_rows": ("padded", "packed_rows", "blocks"),
            "pad_to_multiple_of": ("padded", "segments"), "pad_widths": ("padded", "segments"),
            "num_segments": ("segments",), "remainder": ("blocks",)}


def check_shape(mode, fn=_FN, *, oversize=None, num_rows=None, pad_to_multiple_of=None,
                pad_widths=None, num_segments=None, remainder=None):
    """The shape options of ``mode`` checked once, as a :class:`Shape`.

    An option given for a mode it does not apply to is a ``ValueError`` (it would be ignored
    silently otherwise), as are ``pad_to_multiple_of`` and ``pad_widths`` together.
    """
    if oversize is not None:
        oversize = check_choice(oversize, f"{fn}: oversize", OVERSIZE)
    if num_rows is not None:
        num_rows = as_positive_int(num_rows, f"{fn}: num_rows")
    if pad_to_multiple_of is not None:
        pad_to_multiple_of = as_positive_int(pad_to_multiple_of, f"{fn}: pad_to_multiple_of")
    if num_segments is not None:
        num_segments = as_positive_int(num_segments, f"{fn}: num_segments")
    if pad_widths is not None:
        if isinstance(pad_widths, (str, bytes)) or not hasattr(pad_widths, "__iter__"):
            raise TypeError(f"{fn}: pad_widths must be a sequence of positive integers, got "
                            f"{type(pad_widths).__name__}")
        widths = [as_positive_int(w, f"{fn}: pad_widths[{i}]") for i, w in
                  enumerate(pad_widths)]
        if not widths:
            raise ValueError(f"{fn}: pad_widths is empty; give at least one width")
        pad_widths = tuple(sorted(set(widths)))
    if remainder is not None:
        remainder = check_choice(remainder, f"{fn}: remainder", ("pad", "drop"))
    given = {"oversize": oversize, "num_rows": num_rows,
             "pad_to_multiple_of": pad_to_multiple_of, "pad_widths": pad_widths,
             "num_segments": num_segments, "remainder": remainder}
    for name, value in given.items():
        if value is not None and mode not in _APPLIES[name]:
            modes = " or ".join(repr(m) for m in _APPLIES[name])
            raise ValueError(f"{fn}: {name} applies to mode={modes} only (mode={mode!r})")
    if pad_to_multiple_of is not None and pad_widths is not None:
        raise ValueError(f"{fn}: give pad_to_multiple_of or pad_widths, not both")
    return Shape(oversize or "error", num_rows, pad_to_multiple_of, pad_widths, num_segments,
                 remainder or "pad")


_NO_SHAPE = Shape()


class Placement(NamedTuple):
    """Where each item of a packed batch goes: one entry per *item* (a sequence, or a
    ``row_length`` chunk of one under ``oversize="split"``), sorted by (row, offset), that is
    in the order the tokens appear in the flattened rows.  Made by :func:`pack_placement`.

    Attributes
    ----------
    seq : numpy.ndarray of int64
        The item's sequence: its position in the lengths packed (for :func:`collate_rows`,
        in the batch's ``rows``).
    start : numpy.ndarray of int64
        The item's first token inside its sequence (0 unless split).
    length : numpy.ndarray of int64
        The item's tokens (at most ``row_length``).
    row : numpy.ndarray of int64
        The item's row (non-decreasing).
    offset : numpy.ndarray of int64
        The item's first slot in its row (items of a row are back to back from slot 0).
    n_rows : int
        The number of rows.
    row_length : int
        The slots of a row.
    dropped : numpy.ndarray of int64
        The sequences left out by ``oversize="drop"`` (positions in the lengths packed).
    """

    seq: np.ndarray
    start: np.ndarray
    length: np.ndarray
    row: np.ndarray
    offset: np.ndarray
    n_rows: int
    row_length: int
    dropped: np.ndarray

    @property
    def tokens(self):
        """The tokens placed (an int)."""
        return int(self.length.sum())


_EMPTY = np.zeros(0, np.int64)
_EMPTY.flags.writeable = False


def _windows(n, window):
    """Bounds of the windows of ``window`` consecutive positions (None: one window)."""
    if window is None or n == 0:
        return np.array([0, n], dtype=np.int64)
    return np.append(np.arange(0, n, window, dtype=np.int64), n)


def _best_fit_decreasing(lengths, windows, row_length):
    """Best-fit decreasing of ``lengths`` (each <= ``row_length``) within ``windows``.

    Returns the positions in packing order (by window, longest first, stable), their rows
    (a window's after the previous window's) and offsets in that order, and the number of
    rows.
    """
    n = len(lengths)
    threads = num_threads() if n >= _PARALLEL_ITEMS else 1
    order = np.empty(n, dtype=np.int64)
    sizes = np.empty(n, dtype=np.int64)
    if _k.sort_windows(np.arange(n, dtype=np.int64), lengths, windows, order, sizes, True,
                       threads) != 0:
        raise MemoryError("packing: out of memory sorting a window")
    bin_of = np.empty(n, dtype=np.int64)
    offset = np.empty(n, dtype=np.int64)
    n_bins = np.empty(len(windows) - 1, dtype=np.int64)
    if _k.best_fit_windows(sizes, windows, row_length, bin_of, offset, n_bins, threads) != 0:
        raise MemoryError("packing: out of memory packing a window")
    first = np.cumsum(n_bins) - n_bins
    bin_of += np.repeat(first, np.diff(windows))
    return order, bin_of, offset, int(n_bins.sum())


def pack_placement(lengths, row_length, *, window=None, oversize="error", ids=None, fn=_FN):
    """Pack sequences of ``lengths`` into rows of ``row_length`` as a :class:`Placement`:
    best-fit decreasing within windows of ``window`` consecutive sequences (None: all of
    them): in each window the longest first, each into the fullest row it fits (a new row
    when none does), a window's rows after the previous window's.

    ``oversize`` says what happens to a sequence longer than ``row_length``: ``"split"`` cuts
    it into ``row_length`` chunks (the last one shorter), each an item packed like any other
    (a full chunk fills a row of its own); ``"drop"`` leaves it out (``Placement.dropped``);
    ``"error"`` raises a ``ValueError`` naming it (``ids[k]`` when ``ids`` is given, else its
    position ``k``).
    """
    lengths = np.ascontiguousarray(lengths, dtype=np.int64)
    row_length = as_positive_int(row_length, f"{fn}: row_length")
    if window is not None:
        window = as_positive_int(window, f"{fn}: window")
    oversize = check_choice(oversize, f"{fn}: oversize", OVERSIZE)
    n = len(lengths)
    over = lengths > row_length
    dropped = _EMPTY
    chunks = np.ones(n, dtype=np.int64)
    if over.any():
        if oversize == "error":
            k = int(np.argmax(over))
            name = int(ids[k]) if ids is not None else k
            raise ValueError(f"{fn}: sequence {name} has {int(lengths[k])} tokens, more than "
                             f"row_length={row_length} (oversize='error'; 'split' cuts it "
                             f"into chunks of row_length, 'drop' leaves it out)")
        if oversize == "drop":
            dropped = np.flatnonzero(over)
            chunks[over] = 0
        else:
            chunks[over] = -(-lengths[over] // row_length)
    item_bounds = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(chunks, out=item_bounds[1:])
    seq = np.repeat(np.arange(n, dtype=np.int64), chunks)
    start = (np.arange(len(seq), dtype=np.int64) - item_bounds[seq]) * row_length
    length = np.minimum(lengths[seq] - start, row_length)
    windows = item_bounds[_windows(n, window)]
    order, rows, offsets, n_rows = _best_fit_decreasing(length, windows, row_length)
    by_row = np.argsort(rows, kind="stable")  # within a row, packing order = offset order
    items = order[by_row]
    return Placement(seq[items], start[items], length[items], rows[by_row], offsets[by_row],
                     n_rows, row_length, dropped)


def block_placement(lengths, row_length, *, remainder="pad"):
    """Concatenate sequences of ``lengths`` in their order and cut the stream into blocks
    (rows) of ``row_length`` slots, as a :class:`Placement`: a sequence crossing a block
    boundary is cut there (an item a block; positions restart at each item).  The last block
    is kept part full (``remainder="pad"``) or left out (``"drop"``: its items' sequences that
    lose every token are ``Placement.dropped``).  An empty sequence is an item of no tokens
    where the stream is."""
    lengths = np.ascontiguousarray(lengths, dtype=np.int64)
    L = int(row_length)
    n = len(lengths)
    ends = np.cumsum(lengths)
    firsts = ends - lengths
    total = int(ends[-1]) if n else 0
    # the blocks each sequence touches: from its first token's to its last token's
    first_row = firsts // L
    last_row = np.where(lengths > 0, (ends - 1) // L, first_row)
    pieces = last_row - first_row + 1
    seq = np.repeat(np.arange(n, dtype=np.int64), pieces)
    k = np.arange(len(seq), dtype=np.int64) - np.repeat(np.cumsum(pieces) - pieces, pieces)
    row = first_row[seq] + k
    lo = np.maximum(firsts[seq], row * L)
    hi = np.minimum(ends[seq], (row + 1) * L)
    start = lo - firsts[seq]
    length = hi - lo
    offset = lo - row * L
    n_rows = -(-total // L)
    if n and total == 0:
        n_rows = 1  # only empty sequences: one (empty) block holds them
    past = row > max(n_rows - 1, 0)  # an empty sequence at the very end: the last block's
    row = np.where(past, max(n_rows - 1, 0), row)  # end (after its full row)
    offset = np.where(past, L, offset)
    dropped = _EMPTY
    if remainder == "drop" and total % L:
        last = total // L  # the part-full block
        keep = row < last
        gone = np.setdiff1d(seq[~keep], seq[keep])
        seq, start, length, row, offset = (x[keep] for x in (seq, start, length, row, offset))
        dropped = gone
        n_rows = last
    return Placement(seq, start, length, row, offset, int(n_rows), L, dropped)


def with_separator(seqs, separator):
    """``seqs`` (a :class:`Sequences`) with ``separator`` appended to every sequence: a copy of
    the values (one more row a sequence) that "blocks" concatenates."""
    values = seqs.values
    n = len(seqs)
    lengths = seqs.lengths + 1
    new_starts = np.zeros(n, np.int64)
    np.cumsum(lengths[:-1], out=new_starts[1:])
    out = np.empty((int(lengths.sum()),) + values.shape[1:], dtype=values.dtype)
    out[_spread(new_starts, seqs.lengths)] = values[_spread(seqs.starts, seqs.lengths)]
    out[new_starts + seqs.lengths] = separator
    copy = Sequences.__new__(Sequences)
    copy.level, copy.values, copy.on_gpu = seqs.level, out, False
    copy.starts, copy.lengths = new_starts, lengths
    copy._src = copy._pad = None
    return copy


def _spread(starts, lengths):
    """Each value row of the sequences: ``starts[i] .. starts[i] + lengths[i] - 1``, in turn."""
    ends = np.cumsum(lengths)
    return np.repeat(starts - ends + lengths, lengths) + np.arange(
        int(ends[-1]) if len(ends) else 0, dtype=np.int64)


def _check_placement(p, lengths, row_length, fn):
    """A placement made elsewhere must fit this batch: every item within its sequence and its
    row, rows in order, a row's items back to back (the kernels trust all of it)."""
    m = len(p.seq)
    if p.row_length != row_length:
        raise ValueError(f"{fn}: the placement has row_length={p.row_length}, not "
                         f"{row_length}")
    if not m:
        return
    if p.seq.min() < 0 or p.seq.max() >= len(lengths):
        raise ValueError(f"{fn}: the placement refers to sequence {int(p.seq.max())}; the "
                         f"batch has {len(lengths)}")
    end = p.start + p.length
    new_row = np.empty(m, dtype=bool)
    new_row[0] = True
    np.not_equal(p.row[1:], p.row[:-1], out=new_row[1:])
    follows = np.empty(m, dtype=np.int64)
    follows[0] = 0
    follows[1:] = (p.offset + p.length)[:-1]
    bad = ((p.start < 0) | (p.length < 0) | (end > lengths[p.seq])
           | (p.offset + p.length > row_length) | (p.row < 0) | (p.row >= p.n_rows)
           | (p.offset != np.where(new_row, 0, follows)))
    bad[1:] |= p.row[1:] < p.row[:-1]
    if bad.any():
        k = int(np.argmax(bad))
        raise ValueError(f"{fn}: the placement does not fit this batch at item {k} (sequence "
                         f"{int(p.seq[k])} of {int(lengths[p.seq[k]])} tokens, chunk "
                         f"{int(p.start[k])}+{int(p.length[k])}, row {int(p.row[k])} offset "
                         f"{int(p.offset[k])}): was it made from other lengths?")


def collate(source, rows=None, *, column=None, level=0, mode="padded", pad_value=0,
            row_length=None, to="numpy", oversize=None, num_rows=None,
            pad_to_multiple_of=None, pad_widths=None, num_segments=None, separator=None,
            remainder=None):
    """Turn a batch of sequences into model-ready arrays, in one call.

    Parameters
    ----------
    source : LoDTensor, pyarrow.Array, pyarrow.ChunkedArray, pyarrow.Table or datasets.Dataset
        The column (or a table holding it, see ``column``).  A LoDTensor on a GPU gives CuPy
        arrays (or the library's GPU tensors).
    rows : array-like of int, optional
        The sequences of the batch (a batch of a :class:`BatchPlan`); default: all of them.
    column : str, optional
        The list column of a table; optional when it has one column.
    level : int, default 0
        Which LoD level is the sequence: its values, across every deeper level, are one
        sequence (the boundaries of the deeper levels are not kept).
    mode : {"padded", "packed", "packed_rows", "segments", "blocks"}, default "padded"
        "padded": ``values`` of shape ``(batch, width, *feature)``, ``lengths``,
        ``attention_mask`` (bool, True on tokens).  "packed": the varlen form of
        FlashAttention and Hugging Face's flattening: ``values`` ``(total, *feature)``,
        ``cu_seqlens`` (int32, ``batch+1``), ``max_seqlen``, ``position_ids`` (the position
        of each token in its sequence), ``seq_idx`` (int32, the sequence of each token:
        its position in the batch), ``lengths``.  "packed_rows": the sequences packed
        best-fit decreasing into rows of ``row_length`` tokens: ``values``
        ``(n_rows, row_length, *feature)``; ``position_ids``, ``attention_mask`` and
        ``seq_idx`` (-1 on padding) ``(n_rows, row_length)``; ``cu_seqlens`` (int32,
        ``(n_rows, most_per_row + 1)``, each row's padded by repeating its last entry);
        ``seq_row`` (the row of each sequence, its first chunk's when split, -1 when
        dropped); ``max_seqlen``; ``lengths``.  "segments": JAX's layout: ``values``
        ``(width, *feature)``, ``segment_ids`` (int32, the sequence of each token,
        ``num_segments`` on padding), ``num_segments`` (an int), ``position_ids``,
        ``lengths`` (``(num_segments,)``).  See docs/training.md#collation.  "blocks": the sequences joined end to end (``separator`` after each) and cut
        into rows of ``row_length``, a sequence cut wherever a row ends: the arrays of
        "packed_rows", positions restarting at each piece (docs/training.md#token-blocks).
    pad_value : scalar, default 0
        The value of padding positions.
    row_length : int, optional
        The length of a packed row or block (modes "packed_rows" and "blocks" only).
    to : {"numpy", "torch", "jax", "tf"}, default "numpy"
        The arrays' library: NumPy (CuPy for GPU data) or a zero-copy DLPack view.  JAX
        without ``jax_enable_x64`` gets the index arrays (``cu_seqlens``, ``position_ids``,
        ``lengths``, ``seq_idx``, ``segment_ids``, ``seq_row``) as int32.
    oversize : {"error", "split", "drop"}, optional
        "packed_rows": a sequence longer than ``row_length`` is an error (the default), cut
        into ``row_length`` chunks, each its own sequence in ``cu_seqlens`` whose positions
        restart at 0 ("split"), or left out ("drop").
    num_rows : int, optional
        "padded" and "packed_rows": pad the batch with empty rows (no tokens, mask False) to
        exactly this many rows, for one shape per run.
    pad_to_multiple_of : int, optional
        "padded": round the width up to a multiple of this; "segments": the flat length.
    pad_widths : sequence of int, optional
        "padded": the width is the smallest of these that holds the longest sequence;
        "segments": the flat length the smallest that holds the tokens.
    num_segments : int, optional
        "segments": the (static) number of segments; default the batch's sequences.
    separator : scalar, optional
        "blocks": a value (a token id, of the values' dtype) appended to every sequence
        before they are joined.
    remainder : {"pad", "drop"}, optional
        "blocks": keep the last block part full, padded (the default), or leave it out.

    Returns
    -------
    dict
        The arrays named above (``max_seqlen`` and ``num_segments`` are ints).

    Raises
    ------
    TypeError
        If an argument has the wrong type (the message names it).
    ValueError
        If a row is out of range, a choice is unknown, ``row_length`` is missing for
        "packed_rows" (or given for another mode), a shape option is given for a mode it
        does not apply to, a sequence is longer than ``row_length`` with
        ``oversize="error"``, the batch needs more than ``num_rows`` rows, more segments
        than ``num_segments`` or a width beyond the largest of ``pad_widths``, or ``to="jax"``
        meets 64-bit values without ``jax_enable_x64``.

    See Also
    --------
    batch_plan : Which rows go in which batch.
    batch_loader : Plan, read and collate as one stream, epoch after epoch.

    Examples
    --------
    >>> import pyarrow as pa, lodarrow as la
    >>> col = pa.array([[1, 2, 3], [4], [5, 6]])
    >>> b = la.collate(col, [0, 1])
    >>> b["values"], b["attention_mask"].astype(int)
    (array([[1, 2, 3],
           [4, 0, 0]]), array([[1, 1, 1],
           [1, 0, 0]]))
    >>> p = la.collate(col, mode="packed")
    >>> p["values"], p["cu_seqlens"], p["max_seqlen"], p["position_ids"]
    (array([1, 2, 3, 4, 5, 6]), array([0, 3, 4, 6], dtype=int32), 3, array([0, 1, 2, 0, 0, 1]))
    """
    mode = check_choice(mode, f"{_FN}: mode", MODES)
    to = check_choice(to, f"{_FN}: to", LIBRARIES)
    if row_length is not None:
        row_length = as_positive_int(row_length, f"{_FN}: row_length")
    if (mode in ROW_MODES) != (row_length is not None):
        raise ValueError(f"{_FN}: row_length is needed with mode='packed_rows' or 'blocks' and "
                         f"only then (mode={mode!r}, row_length={row_length!r})")
    check_separator(separator, mode, _FN)
    shape = check_shape(mode, _FN, oversize=oversize, num_rows=num_rows,
                        pad_to_multiple_of=pad_to_multiple_of, pad_widths=pad_widths,
                        num_segments=num_segments, remainder=remainder)
    seqs = as_sequences(source, column, level, nulls="empty")  # collate: a null row is empty
    if rows is None:
        rows = np.arange(len(seqs), dtype=np.int64)
    else:
        rows = as_index_array(rows, f"{_FN}: rows")
        if len(rows) and (rows.min() < 0 or rows.max() >= len(seqs)):
            bad = int(rows[np.argmax((rows < 0) | (rows >= len(seqs)))])
            raise ValueError(f"{_FN}: rows holds {bad}, out of range for {len(seqs)} sequences")
    pad = coerce_pad_value(pad_value, seqs.values.dtype, seqs.values.shape[1:],
                           name=f"{_FN}: pad_value")
    if separator is not None:
        sep = coerce_pad_value(separator, seqs.values.dtype, seqs.values.shape[1:],
                               name=f"{_FN}: separator")
        seqs = with_separator(_on_host(seqs, _FN), sep)
    out = collate_rows(seqs, rows, mode, pad, row_length, shape=shape)
    return convert(out, seqs.on_gpu, to)


def check_separator(separator, mode, fn):
    """``separator``: None, or a number (a token id) for mode "blocks"."""
    if separator is None:
        return
    if isinstance(separator, (bool, np.bool_, str, bytes)) or not isinstance(
            separator, (int, float, np.generic)):
        raise TypeError(f"{fn}: separator must be a number (a token id), got "
                        f"{type(separator).__name__}")
    if mode != "blocks":
        raise ValueError(f"{fn}: separator applies to mode='blocks' only (mode={mode!r})")


def _on_host(seqs, fn):
    if seqs.on_gpu:
        raise ValueError(f"{fn}: separator= needs the values on the host (a GPU LoDTensor: "
                         f"append the separator before, or collate without one)")
    return seqs


def convert(out, on_gpu, to, fn=_FN):
    """The arrays of ``out`` on the data's device (CuPy for GPU data), then as ``to``'s.

    For JAX without ``jax_enable_x64``, 64-bit arrays named in :data:`INDEX_KEYS` become
    int32 (a ``ValueError`` if a value does not fit); any other 64-bit array is a
    ``ValueError`` naming its key (JAX would narrow it silently).
    """
    if to == "torch" and not on_gpu:  # the per-batch path: torch shares NumPy's memory
        return _to_torch(out, fn)
    narrow = to == "jax" and not jax_x64()
    result = {}
    for key, value in out.items():
        if isinstance(value, int):
            result[key] = value
            continue
        if narrow and key in INDEX_KEYS and value.dtype.itemsize == 8:
            value = _narrow(value, key, fn)
        if on_gpu and isinstance(value, np.ndarray):
            value = _to_device(value)
        result[key] = dense_to(value, to, name=f"{fn}: {key!r}")
    return result


def _to_torch(out, fn):
    """:func:`convert` to torch of host arrays: ``torch.from_numpy`` (collation's arrays are
    fresh and writable), else :func:`dense_to`'s checks."""
    from_numpy = _torch_from_numpy()
    result = {}
    for key, value in out.items():
        if type(value) is np.ndarray and value.flags.writeable:
            result[key] = from_numpy(value)
        elif isinstance(value, int):
            result[key] = value
        else:
            result[key] = dense_to(value, "torch", name=f"{fn}: {key!r}")
    return result


def _torch_from_numpy():
    global _FROM_NUMPY
    if _FROM_NUMPY is None:   # imported once: this is on every batch's path
        from lodarrow._interop._optional import import_optional

        _FROM_NUMPY = import_optional("torch", "conversion to torch").from_numpy
    return _FROM_NUMPY


_FROM_NUMPY = None


def _narrow(a, key, fn):
    if a.size and (int(a.max()) > _INT32_MAX or int(a.min()) < _INT32_MIN):
        raise ValueError(f"{fn}: {key!r} holds values beyond int32, which JAX keeps only with "
                         f"64-bit types enabled: jax.config.update('jax_enable_x64', True)")
    return a.astype(np.int32)


def collate_rows(seqs, rows, mode, pad, row_length=None, *, placement=None, shape=_NO_SHAPE,
                 fn=_FN, trusted=False, per_token=True):
    """:func:`collate` on trusted arguments (``pad`` an array of the feature shape, ``shape``
    from :func:`check_shape`).

    Without ``per_token`` a "packed" batch of host data leaves out ``position_ids`` and
    ``seq_idx``, a "padded" one ``attention_mask``, a "segments" one ``segment_ids`` and
    ``position_ids``, and says so (``PACKED_TOKENS``, ``PADDED_MASK``, ``SEGMENT_TOKENS``):
    :func:`rows_tokens` makes them from ``cu_seqlens`` or ``lengths`` (a ``DataLoader``
    worker sends the rest, the main process makes these).

    With ``placement`` (mode "packed_rows": a :class:`Placement` whose ``seq`` indexes
    ``rows``) the batch is laid out as it says instead of packed again; it is checked to fit
    the batch's lengths, unless ``trusted`` (a loader's own plan, made from these lengths).
    """
    if placement is not None and mode not in ROW_MODES:
        raise ValueError(f"{fn}: a placement is for mode='packed_rows' or 'blocks' "
                         f"(mode={mode!r})")
    rows = np.asarray(rows, dtype=np.int64)
    if mode == "packed" and not seqs.on_gpu:
        out = _packed_host(seqs, rows, per_token)
        if out is not None:
            return out
    lengths = seqs.lengths[rows]
    if mode == "padded":
        return _padded(seqs, rows, lengths, pad, shape, fn, per_token)
    if mode == "packed":
        return _packed(seqs, rows, lengths, pad)
    if mode == "segments":
        return _segments(seqs, rows, lengths, pad, shape, fn, per_token)
    if placement is None and mode == "blocks":
        placement = block_placement(lengths, row_length, remainder=shape.remainder)
    elif placement is None:
        placement = pack_placement(lengths, row_length, oversize=shape.oversize, ids=rows,
                                   fn=fn)
    elif not trusted:
        _check_placement(placement, lengths, row_length, fn)
    return _packed_rows(seqs, rows, lengths, pad, placement, shape, fn)


def _width(need, shape, what, fn):
    """The padded width (or flat length) for ``need`` under the shape's bucketing."""
    if shape.pad_widths is not None:
        k = int(np.searchsorted(shape.pad_widths, need))
        if k == len(shape.pad_widths):
            raise ValueError(f"{fn}: the batch's {what} is {need}, more than the largest of "
                             f"pad_widths={shape.pad_widths}")
        return shape.pad_widths[k]
    if shape.pad_to_multiple_of is not None:
        return -(-need // shape.pad_to_multiple_of) * shape.pad_to_multiple_of
    return need


def _padded(seqs, rows, lengths, pad, shape, fn, per_token=True):
    n = len(rows)
    width = _width(int(lengths.max()) if n else 0, shape, "longest sequence", fn)
    n_out = n
    if shape.num_rows is not None:
        if n > shape.num_rows:
            raise ValueError(f"{fn}: the batch has {n} sequences, more than num_rows="
                             f"{shape.num_rows}")
        n_out = shape.num_rows
    feature = seqs.values.shape[1:]
    if seqs.on_gpu:
        values, _, mask, _ = _gather(seqs, seqs.starts[rows], lengths,
                                     np.arange(n, dtype=np.int64) * width, n_out * width, pad,
                                     covered=0, mask=True)
        values = values.reshape((n_out, width) + feature)
        mask = mask.reshape(n_out, width)
    else:
        src, row_bytes = seqs.source_bytes()
        values = np.empty((n_out, width) + feature, dtype=seqs.values.dtype)
        mask = np.empty((n_out, width) if per_token else 0, dtype=np.uint8)
        _k.gather_padded(src, row_bytes, seqs.starts, rows, lengths, width, seqs.pad_bytes(pad),
                         values.reshape(-1).view(np.uint8), mask.reshape(-1),
                         num_threads() if values.nbytes >= _PARALLEL_BYTES else 1)
        values[n:] = pad
        mask[n:] = 0
        mask = mask.view(bool)
    if n_out > n:
        lengths = np.concatenate([lengths, np.zeros(n_out - n, dtype=np.int64)])
    if not per_token and not seqs.on_gpu:
        return {"values": values, "lengths": lengths, PADDED_MASK: True}
    return {"values": values, "lengths": lengths, "attention_mask": mask}


def _cu_seqlens(lengths):
    cu = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=cu[1:])
    return cu


def _packed(seqs, rows, lengths, pad):
    n = len(rows)
    cu = _cu_seqlens(lengths)
    values, positions, _, seq_idx = _gather(seqs, seqs.starts[rows], lengths, cu[:-1],
                                            int(cu[-1]), pad, positions=True,
                                            ids=np.arange(n, dtype=np.int32))
    return {"values": values, "cu_seqlens": _int32(cu, "cu_seqlens"),
            "max_seqlen": int(lengths.max()) if n else 0, "position_ids": positions,
            "seq_idx": seq_idx, "lengths": lengths}


def _packed_host(seqs, rows, per_token=True):
    """:func:`_packed` of host data in one kernel call (None: past int32, see _packed);
    without ``per_token``, ``PACKED_TOKENS`` in place of the per-token arrays."""
    src, row_bytes = seqs.source_bytes()
    made = _k.packed_batch(src, row_bytes, seqs.starts, seqs.lengths,
                           np.ascontiguousarray(rows), num_threads, _PARALLEL_BYTES, per_token)
    if made is None:
        return None
    values, positions, seq_idx, cu, lengths, longest = made
    shape = (int(cu[-1]),) + seqs.values.shape[1:]
    out = {"values": values.view(seqs.values.dtype).reshape(shape), "cu_seqlens": cu,
           "max_seqlen": longest}
    if per_token:
        out.update(position_ids=positions, seq_idx=seq_idx)
    else:
        out[PACKED_TOKENS] = True
    out["lengths"] = lengths
    return out


def _segments(seqs, rows, lengths, pad, shape, fn, per_token=True):
    n = len(rows)
    num_segments = shape.num_segments if shape.num_segments is not None else n
    if n > num_segments:
        raise ValueError(f"{fn}: the batch has {n} sequences, more than num_segments="
                         f"{num_segments}")
    cu = _cu_seqlens(lengths)
    total = int(cu[-1])
    width = _width(total, shape, "token count", fn)
    slim = not per_token and not seqs.on_gpu
    values, positions, _, segment_ids = _gather(seqs, seqs.starts[rows], lengths, cu[:-1],
                                                width, pad, covered=total,
                                                positions=not slim,
                                                ids=None if slim else np.arange(n, dtype=np.int32),
                                                fill_id=num_segments)
    if num_segments > n:
        lengths = np.concatenate([lengths, np.zeros(num_segments - n, dtype=np.int64)])
    if slim:
        return {"values": values, "num_segments": num_segments, "lengths": lengths,
                SEGMENT_TOKENS: True}
    return {"values": values, "segment_ids": segment_ids, "num_segments": num_segments,
            "position_ids": positions, "lengths": lengths}


def _packed_rows(seqs, rows, lengths, pad, p, shape, fn):
    R = p.row_length
    n_out = p.n_rows
    if shape.num_rows is not None:
        if p.n_rows > shape.num_rows:
            raise ValueError(f"{fn}: the batch needs {p.n_rows} rows of {R}, more than "
                             f"num_rows={shape.num_rows}")
        n_out = shape.num_rows
    m = len(p.seq)
    last = np.ones(m, dtype=bool)  # the last item of its row: the row's tail is its fill
    np.not_equal(p.row[1:], p.row[:-1], out=last[:-1])
    slot = p.length.copy()
    slot[last] = R - p.offset[last]
    values, positions, mask, seq_idx = _gather(
        seqs, seqs.starts[rows[p.seq]] + p.start, p.length, p.row * R + p.offset, n_out * R,
        pad, slot=slot, covered=p.n_rows * R, positions=True, mask=True,
        ids=p.seq.astype(np.int32), fill_id=-1)
    counts = np.bincount(p.row, minlength=n_out)
    first = np.zeros(n_out + 1, dtype=np.int64)
    np.cumsum(counts, out=first[1:])
    cu = np.zeros((n_out, int(counts.max()) + 1 if n_out else 1), dtype=np.int64)
    cu[p.row, np.arange(m, dtype=np.int64) - first[p.row] + 1] = p.offset + p.length
    cu = np.maximum.accumulate(cu, axis=1)  # each row padded by repeating its last entry
    seq_row = np.full(len(rows), -1, dtype=np.int64)
    if m == len(rows) and not p.start.any():  # each sequence one item
        seq_row[p.seq] = p.row
    else:
        placed, first_item = np.unique(p.seq, return_index=True)
        seq_row[placed] = p.row[first_item]
    feature = seqs.values.shape[1:]
    shape2 = (n_out, R)
    return {"values": values.reshape(shape2 + feature), "position_ids": positions.reshape(shape2),
            "attention_mask": mask.reshape(shape2), "cu_seqlens": _int32(cu, "cu_seqlens"),
            "seq_idx": seq_idx.reshape(shape2), "seq_row": seq_row,
            "max_seqlen": int(p.length.max()) if m else 0, "lengths": lengths}


def _int32(a, name):
    """``a`` as int32 (offsets: their last entry is their largest)."""
    if a.size and int(a[-1] if name == "cu_seqlens" and a.ndim == 1 else a.max()) > _INT32_MAX:
        raise ValueError(f"{_FN}: {name} past 2**31 - 1 does not fit int32 (a batch of "
                         f"{int(a.max())} tokens)")
    return a.astype(np.int32)


def _to_device(a):
    from lodarrow._cupy import get_cupy

    return get_cupy("collation on the GPU").asarray(a)


def _gather(seqs, starts, lengths, dest, total, pad, *, slot=None, covered=None,
            positions=False, mask=False, ids=None, fill_id=0):
    """Copy item ``k`` (``lengths[k]`` value rows from ``starts[k]``) to rows ``dest[k]...``
    of a new ``(total, *feature)`` array.

    The kernel writes rows ``[0, covered)`` (default ``total``) completely: the items, and with
    ``slot`` the fill after each; rows from ``covered`` on are padding.  Besides the values:
    ``positions`` (int64, the position in the item, 0 on padding), ``mask`` (bool, True on
    tokens) and, for ``ids`` (int32, one per item), each token's item id (``fill_id`` on
    padding); each None when not asked for.
    """
    covered = total if covered is None else covered
    if seqs.on_gpu:
        return _gather_gpu(seqs.values, starts, lengths, dest, total, pad, positions, mask,
                           ids, fill_id)
    values = seqs.values
    out = np.empty((total,) + values.shape[1:], dtype=values.dtype)
    pos = np.empty(total if positions else 0, dtype=np.int64)
    msk = np.empty(total if mask else 0, dtype=np.uint8)
    tid = np.empty(total if ids is not None else 0, dtype=np.int32)
    src, row_bytes = seqs.source_bytes()
    _k.gather_rows(src, row_bytes, starts, lengths, dest, _NO_SLOT if slot is None else slot,
                   seqs.pad_bytes(pad), out.reshape(-1).view(np.uint8), pos, msk,
                   _NO_IDS if ids is None else ids, tid, fill_id,
                   num_threads() if total * row_bytes >= _PARALLEL_BYTES else 1)
    if covered < total:
        out[covered:] = pad
        pos[covered:] = 0
        msk[covered:] = 0
        tid[covered:] = fill_id
    return (out, pos if positions else None, msk.view(bool) if mask else None,
            tid if ids is not None else None)


_NO_SLOT = np.zeros(0, np.int64)
_NO_IDS = np.zeros(0, np.int32)


def _gather_gpu(values, starts, lengths, dest, total, pad, positions, mask, ids, fill_id):
    """The GPU path: index arrays built on the host, one gather on the device."""
    import lodarrow._backends as _b

    cp = _b.get_cupy("collation on the GPU")
    n_tok = int(lengths.sum())
    item = np.repeat(np.arange(len(lengths)), lengths)
    within = np.arange(n_tok, dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    src_rows = cp.asarray(starts[item] + within)
    dst_rows = cp.asarray(dest[item] + within)
    out = cp.empty((total,) + values.shape[1:], dtype=values.dtype)
    out[...] = cp.asarray(pad)
    out[dst_rows] = values[src_rows]
    pos = msk = tid = None
    if positions:
        pos = cp.zeros(total, dtype=cp.int64)
        pos[dst_rows] = cp.asarray(within)
    if mask:
        msk = cp.zeros(total, dtype=bool)
        msk[dst_rows] = True
    if ids is not None:
        tid = cp.full(total, fill_id, dtype=cp.int32)
        tid[dst_rows] = cp.asarray(ids[item])
    return out, pos, msk, tid


#: The key under which a batch of rows crosses from a ``DataLoader`` worker without its
#: per-token arrays (:func:`rows_batch`); the main process replaces it (:func:`rows_tokens`).
PIECE_IDS = "_lodarrow_piece_ids"
#: The key under which a "packed" batch crosses from a ``DataLoader`` worker without its
#: per-token arrays (:func:`collate_rows` without ``per_token``; its value is True, not an
#: array); the main process makes them from ``cu_seqlens`` (:func:`rows_tokens`).
PACKED_TOKENS = "_lodarrow_packed_tokens"
#: The same for a "padded" batch sent without ``attention_mask``, made from ``lengths``.
PADDED_MASK = "_lodarrow_padded_mask"
#: The same for a "segments" batch sent without ``segment_ids`` and ``position_ids``, made
#: from ``lengths`` and ``num_segments``.
SEGMENT_TOKENS = "_lodarrow_segment_tokens"
#: The per-token arrays of a flat or rows batch that ``cu_seqlens`` determines (left out by
#: ``batch_loader(token_arrays=False)``).
TOKEN_ARRAYS = ("position_ids", "attention_mask", "seq_idx")


def rows_batch(seqs, seq, local, start, length, row, offset, num_rows, row_length, pad,
               per_token=True, fn=_FN):
    """A batch of a plan's items laid out in rows (mode "blocks", or "packed_rows" from a
    plan) in one kernel call, host data only: the arrays of :func:`_packed_rows` for the
    items ``(seq, start, length, row, offset)`` (sorted by row and offset, a row's back to
    back from slot 0, as the plan makes them; ``seq`` the items' sequences, ``local`` their
    positions in ``seqs``), ``num_rows`` rows (None: the items' rows).

    Returns ``(out, rows, first_item)``: the batch (without ``per_token``, ``piece_ids``
    instead of ``position_ids``, ``attention_mask`` and ``seq_idx``, which
    :func:`rows_tokens` makes from it and ``cu_seqlens``: a ``DataLoader`` worker sends the
    rest, the main process makes these), the batch's sequences (``seq``'s, sorted) and each
    one's first item; None where the general path is needed (no items, no host data).
    """
    if seqs.on_gpu or not len(seq):
        return None
    n_rows = int(row[-1] - row[0]) + 1
    n_out = n_rows
    if num_rows is not None:
        if n_rows > num_rows:
            raise ValueError(f"{fn}: the batch needs {n_rows} rows of {row_length}, more than "
                             f"num_rows={num_rows}")
        n_out = num_rows
    src, row_bytes = seqs.source_bytes()
    made = _k.rows_batch(src, row_bytes, seqs.starts, seqs.lengths, seq, local, start, length,
                         row, offset, n_out, row_length, seqs.pad_bytes(pad), per_token)
    if made is None:
        return None
    values, positions, mask, seq_idx, cu, ids, rows, first_item, lengths, seq_row, longest = made
    shape2 = (n_out, row_length)
    values = values.view(seqs.values.dtype).reshape(shape2 + seqs.values.shape[1:])
    if per_token:
        out = {"values": values, "position_ids": positions, "attention_mask": mask,
               "cu_seqlens": cu, "seq_idx": seq_idx}
    else:
        out = {"values": values, "cu_seqlens": cu, PIECE_IDS: ids}
    out.update(seq_row=seq_row, max_seqlen=longest, lengths=lengths)
    return out, rows, first_item


def _made(arrays, marker, **first):
    """``first``, then the rest of ``arrays`` in its order, ``marker`` left out."""
    first.update((k, v) for k, v in arrays.items() if k not in first and k != marker)
    return first


def rows_tokens(arrays):
    """A batch sent without its per-token arrays with them again, made by the collation
    kernel: a batch of rows (:func:`rows_batch` without ``per_token``: ``piece_ids`` in their
    place) from ``cu_seqlens`` and ``piece_ids``, a "packed" one (``PACKED_TOKENS`` in
    place) from ``cu_seqlens``, a "padded" one's ``attention_mask`` (``PADDED_MASK``) from
    ``lengths``, a "segments" one's ``segment_ids`` and ``position_ids``
    (``SEGMENT_TOKENS``) from ``lengths`` and ``num_segments``; in the order the batch has
    them.  ``arrays``: the whole batch (its other entries, e.g. ``max_seqlen``, are kept)."""
    if arrays.get(SEGMENT_TOKENS):
        values, lengths = arrays["values"], arrays["lengths"]
        cu = np.zeros(len(lengths) + 1, np.int32)
        np.cumsum(lengths, out=cu[1:])
        total, width = int(cu[-1]), values.shape[0]
        positions = np.zeros(width, np.int64)   # 0 on padding
        segment_ids = np.full(width, arrays["num_segments"], np.int32)  # num_segments there
        positions[:total], segment_ids[:total] = _k.packed_tokens(cu)
        return _made(arrays, SEGMENT_TOKENS, values=values, segment_ids=segment_ids,
                     num_segments=arrays["num_segments"], position_ids=positions,
                     lengths=lengths)
    if arrays.get(PADDED_MASK):
        values, lengths = arrays["values"], arrays["lengths"]
        mask = np.arange(values.shape[1]) < lengths[:, None]
        return _made(arrays, PADDED_MASK, values=values, lengths=lengths, attention_mask=mask)
    if arrays.get(PACKED_TOKENS):
        positions, seq_idx = _k.packed_tokens(arrays["cu_seqlens"])
        # in the order of a batch made in one process (_packed_host)
        return _made(arrays, PACKED_TOKENS, values=arrays["values"],
                     cu_seqlens=arrays["cu_seqlens"], max_seqlen=arrays["max_seqlen"],
                     position_ids=positions, seq_idx=seq_idx)
    ids = arrays.get(PIECE_IDS)
    if ids is None:
        return arrays
    values = arrays["values"]
    positions, mask, seq_idx = _k.rows_tokens(arrays["cu_seqlens"], ids, values.shape[1])
    return _made(arrays, PIECE_IDS, values=values, position_ids=positions, attention_mask=mask,
                 cu_seqlens=arrays["cu_seqlens"], seq_idx=seq_idx)
