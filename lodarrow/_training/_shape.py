"""The loader's second stage, *what shape*: a batch's layout and the slots it takes
(docs/training.md#where-options-meet).

A batch's **slots** are the positions of its values array, tokens and padding alike: what it
takes in memory on the device.  :class:`BatchShape` owns the options that decide them (mode,
cost, padding, widths, rows, segments) and states, for the stage that plans the batches:

- :meth:`BatchShape.slots`: the slots of a batch of ``count`` sequences, the longest of
  ``longest`` tokens, ``tokens`` in all, exactly as collation will lay it out;
- :attr:`BatchShape.max_count`: the most sequences a batch can hold (``num_rows`` padded
  rows, ``num_segments`` segments);
- :meth:`BatchShape.alone`: the slots of each sequence in a batch of its own (-1 where no
  width holds it), which say what is over-long before any batch is made;
- :meth:`BatchShape.kernel_args`: the same measure for the compiled batch cutter.

``max_tokens`` bounds the slots, so a batch cut within it is delivered within it: the width a
batch will have is budgeted, not its unrounded length.

One class a mode, each answering for its own layout: :class:`PaddedShape` (``"padded"``),
:class:`FlatShape` (``"packed"``, ``"segments"``), :class:`PackedRowsShape`
(``"packed_rows"``) and :class:`BlocksShape` (``"blocks"``); ``BatchShape(mode, ...)`` makes
the one of ``mode``.
"""

import numpy as np

from lodarrow._training._collate import MODES, ROW_MODES, check_separator, check_shape
from lodarrow._validation import as_flag, as_positive_int, check_choice

__all__ = ["BatchShape", "BlocksShape", "COSTS", "FlatShape", "PackedRowsShape", "PaddedShape"]

COSTS = ("padded", "packed")
#: measure codes of ``cut_batches`` (``_ext/batch_plan.pyx``)
_PADDED, _FLAT, _FLAT_COUNTED_PADDED = 0, 1, 2
#: The modes whose batches carry ``cu_seqlens`` (``token_arrays=False`` applies to them).
_CU_SEQLENS_MODES = ("packed", "packed_rows", "blocks")


class BatchShape:
    """The shape options of a loader's batches, checked once; ``BatchShape(mode, ...)`` is
    the class of ``mode`` (see the module's docstring).

    Parameters
    ----------
    mode : {"padded", "packed", "packed_rows", "segments", "blocks"}
        As for :func:`lodarrow.collate`.
    cost : {"padded", "packed"} or None
        How a flat batch ("packed", "segments") counts against ``max_tokens``: its own slots
        (``"packed"``, the default for those modes) or also ``count * longest`` (``"padded"``,
        batches that would fit padded too).  A padded batch holds ``rows x width`` slots, and
        ``max_tokens`` bounds those whatever ``cost`` says.
    row_length : int or None
        The slots of a packed row (``mode="packed_rows"`` and ``"blocks"`` only).
    split : bool
        ``oversize="split"``: packed rows cut an over-long sequence into chunks.
    num_rows, pad_to_multiple_of, pad_widths, num_segments, remainder : optional
        As for :func:`lodarrow.collate`.
    pad_value : scalar, default 0
        The value of padding positions (checked against the values' dtype later).
    separator : scalar or None
        ``"blocks"``: a value row appended to every sequence.
    token_arrays : bool
        False: batches without the per-token arrays ``cu_seqlens`` determines (the modes
        that have it).
    fn : str
        The function named in error messages.
    """

    def __new__(cls, mode=None, *args, fn="batch_loader", **kwargs):
        if cls is BatchShape:  # the class of the mode (unpickling names the class itself)
            cls = _SHAPES[check_choice(mode, f"{fn}: mode", MODES)]
        return super().__new__(cls)

    def __init__(self, mode, cost=None, row_length=None, *, split=False, num_rows=None,
                 pad_to_multiple_of=None, pad_widths=None, num_segments=None, pad_value=0,
                 remainder=None, separator=None, token_arrays=True, fn="batch_loader"):
        self.fn = fn
        if pad_value is None or isinstance(pad_value, (str, bytes)) or not (
                isinstance(pad_value, (int, float, np.generic)) or hasattr(pad_value,
                                                                         "__array__")):
            raise TypeError(f"{fn}: pad_value must be a number, got "
                            f"{type(pad_value).__name__}")
        #: checked against the values' dtype once the source is known
        self.pad_value = pad_value
        self.mode = check_choice(mode, f"{fn}: mode", MODES)
        if cost is None:
            cost = "padded" if self.mode == "padded" else "packed"
        self.cost = check_choice(cost, f"{fn}: cost", COSTS)
        self.row_length = None if row_length is None else as_positive_int(
            row_length, f"{fn}: row_length")
        if (self.mode in ROW_MODES) != (self.row_length is not None):
            raise ValueError(f"{fn}: row_length is needed with mode='packed_rows' or 'blocks' "
                             f"and only then (mode={mode!r}, row_length={row_length!r})")
        packing = self.mode == "packed_rows"
        self.collate = check_shape(
            self.mode, fn, oversize=("split" if split else "error") if packing else None,
            num_rows=num_rows, pad_to_multiple_of=pad_to_multiple_of, pad_widths=pad_widths,
            num_segments=num_segments, remainder=remainder)
        # blocks cut every sequence at the block boundaries it crosses
        self.split = bool(split) or self.mode == "blocks"
        check_separator(separator, self.mode, fn)
        #: blocks: a value row appended to every sequence (checked against the dtype later)
        self.separator = separator
        #: packed rows planned by the plan itself: batches of this many rows (set by bind)
        self.rows_per_batch = None
        #: whether a batch holds the per-token arrays ``cu_seqlens`` determines
        self.token_arrays = as_flag(token_arrays, f"{fn}: token_arrays")
        if not self.token_arrays and self.mode not in _CU_SEQLENS_MODES:
            raise ValueError(f"{fn}: token_arrays=False is for the modes whose batches have "
                             f"cu_seqlens ({', '.join(map(repr, _CU_SEQLENS_MODES))}); "
                             f"mode={self.mode!r}")

    # --- what the shape promises the plan ----------------------------------------------------
    #: The most sequences a batch can hold (None: no limit of the shape's own).
    max_count = None

    @property
    def rows_at_collation(self):
        """Whether collation lays out a batch's rows (packed rows the plan did not place):
        its slots are then :meth:`PackedRowsShape.packed_rows_slots`, not :meth:`slots`."""
        return False

    @property
    def width_cap(self):
        """The widest batch (``pad_widths``' last), for the flat length of "segments" and the
        longest sequence of "padded"; None: any width."""
        widths = self.collate.pad_widths
        return None if widths is None else int(widths[-1])

    def bind(self, max_tokens):
        """Settle what depends on the budget (packed rows: how many a batch); ``self``."""
        return self

    def width(self, need):
        """The width (or flat length) of a batch needing ``need`` (array-like): -1 where no
        width of ``pad_widths`` holds it."""
        need = np.asarray(need, dtype=np.int64)
        c = self.collate
        if c.pad_widths is not None:
            widths = np.asarray(c.pad_widths, dtype=np.int64)
            k = np.searchsorted(widths, need)
            return np.where(k < len(widths), widths[np.minimum(k, len(widths) - 1)], -1)
        if c.pad_to_multiple_of is not None:
            m = c.pad_to_multiple_of
            return -(-need // m) * m
        return need

    def slots(self, count, longest, tokens):
        """The slots of batches of ``count`` sequences, the longest of ``longest`` tokens,
        ``tokens`` in all (arrays alike): what collation will lay out.  -1 where no width
        holds one."""
        raise NotImplementedError

    def measure(self, count, longest, tokens):
        """What ``max_tokens`` bounds: the slots (a flat batch under ``cost="padded"`` also
        ``count * longest``)."""
        return self.slots(count, longest, tokens)

    def alone(self, lengths):
        """What ``max_tokens`` bounds of each sequence of ``lengths`` in a batch of its own
        (:meth:`measure`; -1: no width holds it)."""
        lengths = np.asarray(lengths, dtype=np.int64)
        return self.measure(np.ones_like(lengths), lengths, lengths)

    def kernel_args(self):
        """``(measure, fixed_rows, multiple, widths)`` for ``cut_batches``."""
        raise NotImplementedError

    def _widths(self):
        c = self.collate
        return np.asarray(c.pad_widths if c.pad_widths is not None else (), dtype=np.int64)

    def fingerprint(self):
        """The shape options a saved state names."""
        c = self.collate
        return [c.num_rows, c.pad_to_multiple_of, c.pad_widths and list(c.pad_widths),
                c.num_segments]

    def describe(self):
        """The options given, for messages (``name=value``)."""
        c = self.collate
        given = {"num_rows": c.num_rows, "pad_to_multiple_of": c.pad_to_multiple_of,
                 "pad_widths": c.pad_widths, "num_segments": c.num_segments}
        return ", ".join(f"{k}={v!r}" for k, v in given.items() if v is not None)


class PaddedShape(BatchShape):
    """``mode="padded"``: ``rows x width`` slots, ``rows`` the count (or ``num_rows``), the
    width the longest sequence's (rounded up to ``pad_to_multiple_of``, or the narrowest of
    ``pad_widths`` that holds it)."""

    @property
    def max_count(self):
        return self.collate.num_rows

    def slots(self, count, longest, tokens):
        count = np.asarray(count, dtype=np.int64)
        width = self.width(longest)
        rows = count if self.collate.num_rows is None else np.full_like(
            count, self.collate.num_rows)
        return np.where(width < 0, -1, rows * width)

    def kernel_args(self):
        c = self.collate
        return _PADDED, c.num_rows or 0, c.pad_to_multiple_of or 1, self._widths()


class FlatShape(BatchShape):
    """``mode="packed"`` and ``"segments"``: one flat row of the batch's tokens (its length
    rounded as a padded width is); ``"segments"`` holds at most ``num_segments``."""

    @property
    def max_count(self):
        return self.collate.num_segments if self.mode == "segments" else None

    def slots(self, count, longest, tokens):
        return self.width(tokens)  # "packed" has no width option: the tokens themselves

    def measure(self, count, longest, tokens):
        slots = self.slots(count, longest, tokens)
        if self.cost == "padded":  # batches that would fit padded too
            padded = np.asarray(count, dtype=np.int64) * np.asarray(longest, dtype=np.int64)
            slots = np.where(slots < 0, -1, np.maximum(slots, padded))
        return slots

    def kernel_args(self):
        measure = _FLAT_COUNTED_PADDED if self.cost == "padded" else _FLAT
        return measure, 0, self.collate.pad_to_multiple_of or 1, self._widths()


class PackedRowsShape(BatchShape):
    """``mode="packed_rows"``: rows of ``row_length`` slots, the sequences packed into them
    (best fit decreasing; with ``oversize="split"`` an over-long one cut into chunks), a batch
    ``num_rows`` rows (or as many as ``max_tokens`` holds) when the plan places them."""

    @property
    def rows_at_collation(self):
        return self.rows_per_batch is None

    def bind(self, max_tokens):
        """Settle what depends on the budget: packed rows planned (``num_rows``, or as many
        rows of ``row_length`` as ``max_tokens`` holds), checked to fit it."""
        rows = self.collate.num_rows
        if max_tokens is not None and max_tokens < self.row_length:
            raise ValueError(f"{self.fn}: max_tokens={max_tokens} is less than one row of "
                             f"row_length={self.row_length}")
        if rows is None and max_tokens is not None:
            rows = max_tokens // self.row_length
        elif rows is not None and max_tokens is not None and rows * self.row_length > max_tokens:
            raise ValueError(f"{self.fn}: num_rows={rows} rows of row_length={self.row_length} "
                             f"are {rows * self.row_length} slots, more than max_tokens="
                             f"{max_tokens}; give num_rows <= {max_tokens // self.row_length} "
                             f"or leave it out (max_tokens // row_length rows)")
        if rows is not None:
            self.rows_per_batch = int(rows)
            self.collate = self.collate._replace(num_rows=self.rows_per_batch)
        return self

    def slots(self, count, longest, tokens):
        """Packed rows planned hold ``rows_per_batch * row_length``; packed rows packed at
        collation are counted by :meth:`packed_rows_slots`."""
        if self.rows_per_batch is None:
            raise ValueError("rows laid out at collation: use packed_rows_slots")
        return np.full_like(np.asarray(count, dtype=np.int64),
                            self.rows_per_batch * self.row_length)

    def alone(self, lengths):
        lengths = np.asarray(lengths, dtype=np.int64)  # a row holds it, or its chunks
        slots = (self.rows_per_batch or 1) * self.row_length
        fits = (lengths <= self.row_length) | self.split
        return np.where(fits, slots, -1).astype(np.int64)

    def kernel_args(self):
        return _FLAT, 0, 1, self._widths()  # rows cut by batch_size only (or planned)

    def packed_rows_slots(self, lengths, bounds):
        """Packed rows packed at collation: the slots of each batch ``lengths[bounds[b]:
        bounds[b+1]]`` (its rows, packed best-fit decreasing as :func:`lodarrow.collate`
        packs them, times ``row_length``; at least ``num_rows`` rows)."""
        from lodarrow._training._collate import _best_fit_decreasing

        lengths = np.ascontiguousarray(lengths, dtype=np.int64)
        bounds = np.ascontiguousarray(bounds, dtype=np.int64)
        L = self.row_length
        chunks = np.maximum(-(-lengths // L), 1) if self.split else np.ones_like(lengths)
        items = np.repeat(lengths, chunks)
        first = np.repeat(np.cumsum(chunks) - chunks, chunks)
        start = (np.arange(len(items), dtype=np.int64) - first) * L
        items = np.minimum(items - start, L)
        item_bounds = np.concatenate([[0], np.cumsum(chunks)])[bounds]
        _, row, _, _ = _best_fit_decreasing(items, item_bounds, L)
        rows = np.zeros(len(bounds) - 1, np.int64)
        nonempty = np.diff(item_bounds) > 0
        if nonempty.any():  # a window's bins are numbered after the previous window's
            firsts = item_bounds[:-1][nonempty]
            rows[nonempty] = (np.maximum.reduceat(row, firsts)
                              - np.minimum.reduceat(row, firsts) + 1)
        return self._at_least_num_rows(rows) * L

    def _at_least_num_rows(self, rows):
        if self.collate.num_rows is not None:
            rows = np.maximum(rows, self.collate.num_rows)
        return rows


class BlocksShape(PackedRowsShape):
    """``mode="blocks"``: the batch's sequences (each ending with ``separator``, where given)
    concatenated and cut into rows of ``row_length`` tokens; every sequence is cut at the
    row boundaries it crosses."""

    def packed_rows_slots(self, lengths, bounds):
        """The slots of each batch ``lengths[bounds[b]:bounds[b+1]]``: its tokens cut into
        rows (the last one dropped or padded, per ``remainder``; at least ``num_rows``)."""
        lengths = np.ascontiguousarray(lengths, dtype=np.int64)
        bounds = np.ascontiguousarray(bounds, dtype=np.int64)
        L = self.row_length
        csum = np.concatenate([[0], np.cumsum(lengths)])
        tokens = csum[bounds[1:]] - csum[bounds[:-1]]
        rows = tokens // L if self.collate.remainder == "drop" else -(-tokens // L)
        rows = np.where((np.diff(bounds) > 0) & (tokens == 0), 1, rows)
        return self._at_least_num_rows(rows) * L

    def fingerprint(self):
        sep = self.separator
        return super().fingerprint() + [self.collate.remainder,
                                        None if sep is None else np.asarray(sep).tolist()]


_SHAPES = {"padded": PaddedShape, "packed": FlatShape, "segments": FlatShape,
           "packed_rows": PackedRowsShape, "blocks": BlocksShape}
