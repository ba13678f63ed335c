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
"""

import numpy as np

from lodarrow._training._collate import MODES, ROW_MODES, check_separator, check_shape
from lodarrow._validation import as_positive_int, check_choice

__all__ = ["BatchShape", "COSTS"]

COSTS = ("padded", "packed")
#: measure codes of ``cut_batches`` (``_ext/batch_plan.pyx``)
_PADDED, _FLAT, _FLAT_COUNTED_PADDED = 0, 1, 2


class BatchShape:
    """The shape options of a loader's batches, checked once.

    Parameters
    ----------
    mode : {"padded", "packed", "packed_rows", "segments"}
        As for :func:`lodarrow.collate`.
    cost : {"padded", "packed"} or None
        How a flat batch ("packed", "segments") counts against ``max_tokens``: its own slots
        (``"packed"``, the default for those modes) or also ``count * longest`` (``"padded"``,
        batches that would fit padded too).  A padded batch holds ``rows x width`` slots, and
        ``max_tokens`` bounds those whatever ``cost`` says.
    row_length : int or None
        The slots of a packed row (``mode="packed_rows"`` only).
    split : bool
        ``oversize="split"``: packed rows cut an over-long sequence into chunks.
    num_rows, pad_to_multiple_of, pad_widths, num_segments : optional
        As for :func:`lodarrow.collate`.
    pad_value : scalar, default 0
        The value of padding positions (checked against the values' dtype later).
    fn : str
        The function named in error messages.
    """

    def __init__(self, mode, cost=None, row_length=None, *, split=False, num_rows=None,
                 pad_to_multiple_of=None, pad_widths=None, num_segments=None, pad_value=0,
                 remainder=None, separator=None, fn="batch_loader"):
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

    # --- what the shape promises the plan ----------------------------------------------------
    @property
    def max_count(self):
        """The most sequences a batch can hold (None: no limit of the shape's own)."""
        if self.mode == "padded":
            return self.collate.num_rows
        if self.mode == "segments":
            return self.collate.num_segments
        return None

    @property
    def width_cap(self):
        """The widest batch (``pad_widths``' last), for the flat length of "segments" and the
        longest sequence of "padded"; None: any width."""
        widths = self.collate.pad_widths
        return None if widths is None else int(widths[-1])

    def bind(self, max_tokens):
        """Settle what depends on the budget: packed rows planned (``num_rows``, or as many
        rows of ``row_length`` as ``max_tokens`` holds), checked to fit it."""
        if self.mode not in ROW_MODES:
            return self
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
        holds one.  Packed rows planned hold ``rows_per_batch * row_length``; packed rows
        packed at collation are counted by :meth:`packed_rows_slots`."""
        count = np.asarray(count, dtype=np.int64)
        longest = np.asarray(longest, dtype=np.int64)
        tokens = np.asarray(tokens, dtype=np.int64)
        if self.mode == "padded":
            width = self.width(longest)
            rows = count if self.collate.num_rows is None else np.full_like(
                count, self.collate.num_rows)
            return np.where(width < 0, -1, rows * width)
        if self.mode in ROW_MODES:
            if self.rows_per_batch is None:
                raise ValueError("rows laid out at collation: use packed_rows_slots")
            return np.full_like(count, self.rows_per_batch * self.row_length)
        return self.width(tokens)  # "packed" has no width option: the tokens themselves

    def measure(self, count, longest, tokens):
        """What ``max_tokens`` bounds: the slots, and for a flat batch under
        ``cost="padded"`` also ``count * longest`` (the larger)."""
        slots = self.slots(count, longest, tokens)
        if self.cost == "padded" and self.mode in ("packed", "segments"):
            count = np.asarray(count, dtype=np.int64)
            padded = count * np.asarray(longest, dtype=np.int64)
            slots = np.where(slots < 0, -1, np.maximum(slots, padded))
        return slots

    def alone(self, lengths):
        """What ``max_tokens`` bounds of each sequence of ``lengths`` in a batch of its own
        (:meth:`measure`; -1: no width holds it)."""
        lengths = np.asarray(lengths, dtype=np.int64)
        if self.mode in ROW_MODES:  # a row holds it, or its chunks (split, blocks)
            slots = (self.rows_per_batch or 1) * self.row_length
            fits = (lengths <= self.row_length) | self.split
            return np.where(fits, slots, -1).astype(np.int64)
        return self.measure(np.ones_like(lengths), lengths, lengths)

    def kernel_args(self):
        """``(measure, fixed_rows, multiple, widths)`` for ``cut_batches``."""
        c = self.collate
        widths = np.asarray(c.pad_widths if c.pad_widths is not None else (), dtype=np.int64)
        multiple = c.pad_to_multiple_of or 1
        if self.mode == "padded":
            return _PADDED, c.num_rows or 0, multiple, widths
        if self.mode == "packed" or self.mode == "segments":
            return (_FLAT_COUNTED_PADDED if self.cost == "padded" else _FLAT), 0, multiple, widths
        return _FLAT, 0, 1, widths  # rows cut by batch_size only (or planned)

    def packed_rows_slots(self, lengths, bounds):
        """Packed rows packed at collation: the slots of each batch ``lengths[bounds[b]:
        bounds[b+1]]`` (its rows, packed best-fit decreasing as :func:`lodarrow.collate`
        packs them, times ``row_length``; at least ``num_rows`` rows)."""
        from lodarrow._training._collate import _best_fit_decreasing

        lengths = np.ascontiguousarray(lengths, dtype=np.int64)
        bounds = np.ascontiguousarray(bounds, dtype=np.int64)
        L = self.row_length
        if self.mode == "blocks":  # the batch's tokens cut into blocks
            csum = np.concatenate([[0], np.cumsum(lengths)])
            tokens = csum[bounds[1:]] - csum[bounds[:-1]]
            rows = tokens // L if self.collate.remainder == "drop" else -(-tokens // L)
            rows = np.where((np.diff(bounds) > 0) & (tokens == 0), 1, rows)
            if self.collate.num_rows is not None:
                rows = np.maximum(rows, self.collate.num_rows)
            return rows * L
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
        if self.collate.num_rows is not None:
            rows = np.maximum(rows, self.collate.num_rows)
        return rows * L

    def fingerprint(self):
        """The shape options a saved state names."""
        c = self.collate
        out = [c.num_rows, c.pad_to_multiple_of, c.pad_widths and list(c.pad_widths),
               c.num_segments]
        if self.mode == "blocks":
            sep = self.separator
            out += [c.remainder, None if sep is None else np.asarray(sep).tolist()]
        return out

    def describe(self):
        """The options given, for messages (``name=value``)."""
        c = self.collate
        given = {"num_rows": c.num_rows, "pad_to_multiple_of": c.pad_to_multiple_of,
                 "pad_widths": c.pad_widths, "num_segments": c.num_segments}
        return ", ".join(f"{k}={v!r}" for k, v in given.items() if v is not None)
