"""Collation: a batch of rows to model-ready arrays (docs/training.md#collation)."""

import numpy as np
import pyarrow as pa

from lodarrow._cupy import is_cupy_array
from lodarrow._threads import num_threads
from lodarrow._cpu import _batch_plan as _k
from lodarrow._hub._dense import LIBRARIES, dense_to
from lodarrow._tensor import LoDTensor
from lodarrow._training._source import check_level, column_of, compose
from lodarrow._validation import as_index_array, as_positive_int, check_choice, coerce_pad_value

__all__ = ["collate"]

_FN = "collate"
MODES = ("padded", "packed", "packed_rows")
#: Copy a batch on several threads from this many output bytes on (OpenMP start-up costs ~ms).
_PARALLEL_BYTES = 8 << 20


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


def as_sequences(source, column, level, fn=_FN):
    if isinstance(source, Sequences):
        return source
    col = column_of(source, column, fn)
    if not isinstance(col, LoDTensor):
        # the table layer's from_arrow: the same function wherever the interop module lives
        from lodarrow._tables._table import from_arrow

        if isinstance(col, pa.ChunkedArray) and col.num_chunks == 0:
            col = pa.array([], type=col.type)
        col = from_arrow(col, nulls="empty")
    return Sequences(col, level, fn)


def collate(source, rows=None, *, column=None, level=0, mode="padded", pad_value=0,
            row_length=None, to="numpy"):
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
    mode : {"padded", "packed", "packed_rows"}, default "padded"
        "padded": ``values`` of shape ``(batch, longest, *feature)``, ``lengths``,
        ``attention_mask`` (bool, True on tokens).  "packed": the varlen form of
        FlashAttention: ``values`` ``(total, *feature)``, ``cu_seqlens`` (int32, ``batch+1``),
        ``max_seqlen``, ``position_ids`` (the position of each token in its sequence),
        ``lengths``.  "packed_rows": the sequences packed first-fit-decreasing into rows of
        ``row_length`` tokens: ``values`` ``(n_rows, row_length, *feature)``,
        ``position_ids`` and ``attention_mask`` ``(n_rows, row_length)``, ``cu_seqlens``
        (int32, ``(n_rows, most_per_row + 1)``, each row's padded by repeating its last
        entry), ``seq_row`` (the row of each sequence), ``max_seqlen``, ``lengths``.
    pad_value : scalar, default 0
        The value of padding positions.
    row_length : int, optional
        The length of a packed row (mode "packed_rows" only; no sequence may be longer).
    to : {"numpy", "torch", "jax", "tf"}, default "numpy"
        The arrays' library: NumPy (CuPy for GPU data) or a zero-copy DLPack view.

    Returns
    -------
    dict
        The arrays named above (``max_seqlen`` is an int).

    Raises
    ------
    TypeError
        If an argument has the wrong type (the message names it).
    ValueError
        If a row is out of range, a choice is unknown, ``row_length`` is missing for
        "packed_rows" (or given for another mode) or shorter than a sequence.

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
    if (mode == "packed_rows") != (row_length is not None):
        raise ValueError(f"{_FN}: row_length is needed with mode='packed_rows' and only then "
                         f"(mode={mode!r}, row_length={row_length!r})")
    seqs = as_sequences(source, column, level)
    if rows is None:
        rows = np.arange(len(seqs), dtype=np.int64)
    else:
        rows = as_index_array(rows, f"{_FN}: rows")
        if len(rows) and (rows.min() < 0 or rows.max() >= len(seqs)):
            bad = int(rows[np.argmax((rows < 0) | (rows >= len(seqs)))])
            raise ValueError(f"{_FN}: rows holds {bad}, out of range for {len(seqs)} sequences")
    pad = coerce_pad_value(pad_value, seqs.values.dtype, seqs.values.shape[1:],
                           name=f"{_FN}: pad_value")
    out = collate_rows(seqs, rows, mode, pad, row_length)
    return convert(out, seqs.on_gpu, to)


def convert(out, on_gpu, to):
    """The arrays of ``out`` on the data's device (CuPy for GPU data), then as ``to``'s."""
    if on_gpu:
        out = {k: _to_device(v) if isinstance(v, np.ndarray) else v for k, v in out.items()}
    return {k: v if isinstance(v, int) else dense_to(v, to) for k, v in out.items()}


def collate_rows(seqs, rows, mode, pad, row_length=None):
    """:func:`collate` on trusted arguments (``pad`` an array of the feature shape)."""
    lengths = seqs.lengths[rows]
    n = len(rows)
    longest = int(lengths.max()) if n else 0
    feature = seqs.values.shape[1:]
    if mode == "padded" and not seqs.on_gpu:
        src, row_bytes = seqs.source_bytes()
        values = np.empty((n, longest) + feature, dtype=seqs.values.dtype)
        mask = np.empty((n, longest), dtype=np.uint8)
        _k.gather_padded(src, row_bytes, seqs.starts, rows, lengths, longest, seqs.pad_bytes(pad),
                         values.reshape(-1).view(np.uint8), mask.reshape(-1),
                         num_threads() if values.nbytes >= _PARALLEL_BYTES else 1)
        return {"values": values, "lengths": lengths, "attention_mask": mask.view(bool)}
    starts = seqs.starts[rows]
    if mode == "padded":
        dest = np.arange(n, dtype=np.int64) * longest
        slot = np.full(n, longest, dtype=np.int64)
        total = n * longest
        values, positions, mask = _gather(seqs, starts, lengths, dest, slot, pad, total,
                                          positions=False, mask=True)
        return {"values": values.reshape((n, longest) + feature), "lengths": lengths,
                "attention_mask": mask.reshape(n, longest)}
    if mode == "packed":
        cu = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(lengths, out=cu[1:])
        values, positions, _ = _gather(seqs, starts, lengths, cu[:-1], None, pad, int(cu[-1]),
                                       positions=True, mask=False)
        return {"values": values, "cu_seqlens": _int32(cu, seqs), "max_seqlen": longest,
                "position_ids": positions, "lengths": lengths}
    if longest > row_length:
        k = int(np.argmax(lengths > row_length))
        raise ValueError(f"{_FN}: sequence {int(rows[k])} has {int(lengths[k])} tokens, more "
                         f"than row_length={row_length}")
    seq_row, dest, n_rows, cu = pack_rows(lengths, row_length)
    values, positions, mask = _gather(seqs, starts, lengths, dest, None, pad,
                                      n_rows * row_length, positions=True, mask=True,
                                      prefill=True)
    shape = (n_rows, row_length)
    return {"values": values.reshape(shape + feature), "position_ids": positions.reshape(shape),
            "attention_mask": mask.reshape(shape), "cu_seqlens": _int32(cu, seqs),
            "seq_row": seq_row, "max_seqlen": longest, "lengths": lengths}


def pack_rows(lengths, row_length):
    """First-fit-decreasing packing of ``lengths`` into rows of ``row_length``.

    Returns the row of each sequence, its first position in the flattened rows, the number of
    rows and the per-row ``cu_seqlens`` (int64, ``(n_rows, most_per_row + 1)``, padded by
    repeating each row's last entry).  In a row, sequences keep the first-fit order (longest
    first).
    """
    n = len(lengths)
    ffd = np.argsort(-lengths, kind="stable")
    bin_of = np.empty(n, dtype=np.int64)
    n_rows = _k.first_fit(np.ascontiguousarray(lengths[ffd]), row_length, bin_of)
    seq_row = np.empty(n, dtype=np.int64)
    seq_row[ffd] = bin_of
    by_row = ffd[np.argsort(bin_of, kind="stable")]  # sequences row by row, FFD order inside
    row_sorted = seq_row[by_row]
    counts = np.bincount(row_sorted, minlength=n_rows)
    first = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(counts, out=first[1:])
    rank_in_row = np.arange(n, dtype=np.int64) - first[row_sorted]
    csum = np.cumsum(lengths[by_row]) - lengths[by_row]
    within = csum - csum[first[row_sorted]] if n else csum
    dest = np.empty(n, dtype=np.int64)
    dest[by_row] = row_sorted * row_length + within
    most = int(counts.max()) if n_rows else 0
    cu = np.zeros((n_rows, most + 1), dtype=np.int64)
    cu[row_sorted, rank_in_row + 1] = within + lengths[by_row]
    # pad each row by repeating its last entry
    cu = np.maximum.accumulate(cu, axis=1)
    return seq_row, dest, n_rows, cu


def _int32(a, seqs):
    out = a.astype(np.int32)
    return _to_device(out) if seqs.on_gpu else out


def _to_device(a):
    from lodarrow._cupy import get_cupy

    return get_cupy("collation on the GPU").asarray(a)


def _gather(seqs, starts, lengths, dest, slot, pad, total, *, positions, mask, prefill=False):
    """Copy each sequence to rows ``dest[k]...`` of a new ``(total, *feature)`` array."""
    values = seqs.values
    feature = values.shape[1:]
    if seqs.on_gpu:
        return _gather_gpu(values, starts, lengths, dest, slot, pad, total, positions, mask,
                           prefill)
    out = (np.empty if not prefill else _full(pad))((total,) + feature, dtype=values.dtype)
    pos = np.empty(total if positions else 0, dtype=np.int64)
    if positions and prefill:
        pos[:] = 0
    msk = np.empty(total if mask else 0, dtype=np.uint8)
    if mask and prefill:
        msk[:] = 0
    src, row_bytes = seqs.source_bytes()
    _k.gather_rows(src, row_bytes, starts, lengths, dest,
                   _NO_SLOT if slot is None else slot, seqs.pad_bytes(pad),
                   out.reshape(-1).view(np.uint8), pos, msk,
                   num_threads() if total * row_bytes >= _PARALLEL_BYTES else 1)
    return out, pos, msk.view(bool)


_NO_SLOT = np.zeros(0, np.int64)


def _full(pad):
    def make(shape, dtype):
        out = np.empty(shape, dtype=dtype)
        out[...] = pad
        return out
    return make


def _gather_gpu(values, starts, lengths, dest, slot, pad, total, positions, mask, prefill):
    """The GPU path: index arrays built on the host, one gather on the device."""
    import lodarrow._backends as _b

    cp = _b.get_cupy("collation on the GPU")
    n_tok = int(lengths.sum())
    seq = np.repeat(np.arange(len(lengths)), lengths)
    within = np.arange(n_tok, dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    src_rows = cp.asarray(starts[seq] + within)
    dst_rows = cp.asarray(dest[seq] + within)
    out = cp.empty((total,) + values.shape[1:], dtype=values.dtype)
    out[...] = cp.asarray(pad)
    out[dst_rows] = values[src_rows]
    pos = cp.zeros(total if positions else 0, dtype=cp.int64)
    if positions:
        pos[dst_rows] = cp.asarray(within)
    msk = cp.zeros(total if mask else 0, dtype=bool)
    if mask:
        msk[dst_rows] = True
    return out, pos, msk
