"""A Ray Data source (docs/training.md#loader): a ``ray.data.Dataset``, or the ``DataIterator``
of ``ray.train.get_dataset_shard``, read through ``iter_batches``.

Ray streams its rows: there is no random access, so the loader's *blocks* are Ray's batches
of ``window`` rows in the order Ray gives them, read one after the other.  When the loader is
made, one pass over the source (the *lengths pass*) reads every block once and keeps only what
the plan needs: each sequence's length, where the null rows and the null values are, the
column's type and how many sequences each block holds.  So a Ray source is checked before the
first batch like any other (nulls, over-long sequences, an empty dataset), its epoch plan and
statistics are known, and its position can be saved.  Iterating reads the blocks again, in
order, and makes each block's batches; a block whose lengths are not those of the lengths pass
(Ray gave its rows in another order) is a ``ValueError``, never a batch of other rows.
"""

import numpy as np
import pyarrow as pa

from lodarrow._training._columns import ExtraColumn, fill_value_nulls, null_rows, value_null_rows
from lodarrow._training._source import check_level, list_depth, pick_column

__all__ = ["RaySource", "is_ray_source", "ray_epoch_plan"]


def is_ray_source(source):
    """Whether ``source`` is streamed through ``iter_batches`` (Ray Data): not an Arrow
    table or batch, which have a method of that name too."""
    return (hasattr(source, "iter_batches")
            and not isinstance(source, (pa.Table, pa.RecordBatch)))


class RaySource:
    """What the lengths pass over a Ray source found (see the module's docstring).

    Attributes
    ----------
    column : str
        The sequence column.
    lengths : numpy.ndarray of int64
        Every sequence's length, in Ray's order.
    row_nulls : numpy.ndarray of int64
        The null rows (positions over the whole source, in Ray's order).
    value_nulls : tuple of numpy.ndarray
        The rows, and the sequences, holding a null value inside their lists.
    block_starts : numpy.ndarray of int64
        The first sequence of each block, and the total.
    row_starts : numpy.ndarray of int64
        The first row of each block, and the total.
    type : pyarrow.DataType
        The sequence column's type (the first block's).
    extra_specs : list of ExtraColumn
    nbytes : int
        The bytes of the sequence column's values (for the progress bar).
    """

    kind = "stream"
    label = "the Ray source"
    part_starts = None

    def __init__(self, source, column, level, window, extra_columns, fn, *, nulls):
        self.source, self.window, self.level, self.fn = source, window, level, fn
        self.separator = None
        self.nulls = nulls  # how a null row reads (Selection.read_nulls)
        self.extra_columns = list(extra_columns)
        self.column = column
        lengths, row_nulls, value_rows, value_seqs = [], [], [], []
        block_starts, row_starts = [0], [0]
        self.type = None
        self.nbytes = 0
        nulls_in_extras = dict.fromkeys(self.extra_columns, 0)
        extra_types = {}
        for table in self._batches():
            if self.type is None:
                self._first_block(table, column)
            col = table.column(self.column)
            if not col.type.equals(self.type):
                raise TypeError(f"{fn}: column {self.column!r} is {self.type} in the first "
                                f"block of the Ray source but {col.type} in block "
                                f"{len(block_starts) - 1}")
            rows0, seqs0 = row_starts[-1], block_starts[-1]
            row_nulls.append(null_rows(col) + rows0)
            vr, vs = value_null_rows(col, level)
            value_rows.append(vr + rows0)
            value_seqs.append(vs + seqs0)
            if len(vr):
                col = fill_value_nulls(col)
            seq = self._lengths_of(col)
            lengths.append(seq)
            self.nbytes += int(seq.sum()) * self._value_bytes
            for name in self.extra_columns:
                extra = table.column(name)
                nulls_in_extras[name] += extra.null_count
                extra_types.setdefault(name, extra.type)
            block_starts.append(seqs0 + len(seq))
            row_starts.append(rows0 + len(col))
        if self.type is None:
            raise ValueError(f"{fn}: the Ray source holds no rows (its iter_batches gave "
                             f"no batch): there is no sequence to deliver")
        cat = (lambda xs: np.concatenate(xs).astype(np.int64) if xs else np.zeros(0, np.int64))
        self.lengths = cat(lengths)
        self.row_nulls = cat(row_nulls)
        self.value_nulls = (cat(value_rows), cat(value_seqs))
        self.block_starts = np.asarray(block_starts, np.int64)
        self.row_starts = np.asarray(row_starts, np.int64)
        self.extra_specs = [ExtraColumn(n, extra_types[n], nulls_in_extras[n])
                            for n in self.extra_columns]

    def _batches(self):
        return self.source.iter_batches(batch_size=self.window, batch_format="pyarrow")

    def _first_block(self, table, column):
        from lodarrow._training._collate import as_sequences

        self.column = pick_column(table.schema, column, self.fn)
        for name in self.extra_columns:
            pick_column(table.schema, name, self.fn)
        self.type = table.schema.field(self.column).type
        if list_depth(self.type) == 0:
            raise TypeError(f"{self.fn}: column {self.column!r} is {self.type}, not a list "
                            f"column of sequences; name the list column with column=")
        check_level(self.level, list_depth(self.type), self.fn)
        # pa.nulls: pyarrow's array() imports pandas
        self.empty = as_sequences(pa.nulls(0, type=self.type), None, self.level, self.fn,
                                  nulls=self.nulls)
        values = self.empty.values
        self._value_bytes = values.dtype.itemsize * int(np.prod(values.shape[1:]))

    def _lengths_of(self, col):
        from lodarrow._training._collate import as_sequences

        return np.asarray(as_sequences(col, None, self.level, self.fn, nulls=self.nulls).lengths,
                          np.int64)

    def where(self, row):
        """Row ``row`` as messages name it."""
        b = int(np.searchsorted(self.row_starts, row, side="right")) - 1
        return (f"row {row} of the Ray source (row {row - int(self.row_starts[b])} of its "
                f"block {b} of window={self.window} rows)")

    def name_sequence(self, k):
        """Sequence ``k`` as messages name it."""
        if self.level == 0:
            return self.where(k)
        b = int(np.searchsorted(self.block_starts, k, side="right")) - 1
        return f"sequence {k} of the Ray source (in its block {b})"

    def add_separator(self, separator):
        """Append ``separator`` (one value row) to every sequence read (mode "blocks")."""
        self.separator = separator

    def file_list(self):
        """The files read (None: not files)."""
        return None

    def cell_rows(self, select):
        """The rows of a planning cell: ``window`` (a block is Ray's batch of it)."""
        return select.window

    def decoded_blocks(self, wanted):
        """``(block, sequences, extra columns, first sequence)`` of each block whose number
        is in ``wanted``, in Ray's order (:meth:`blocks`)."""
        from lodarrow._training._collate import as_sequences, with_separator

        for b, table in self.blocks(wanted, len(self.value_nulls[0]) > 0):
            seqs = as_sequences(table, self.column, self.level, self.fn, nulls=self.nulls)
            if self.separator is not None:
                seqs = with_separator(seqs, self.separator)
            extras = {e.name: e.prepare(table.column(e.name)) for e in self.extra_specs}
            yield b, seqs, extras, int(self.block_starts[b])

    def blocks(self, wanted, value_nulls):
        """``(block, table)`` for each block whose number is in ``wanted`` (a set), in
        Ray's order; the blocks before the last wanted one are read (Ray cannot skip them),
        those after it not.  ``value_nulls``: whether some rows hold null values (read as 0:
        the rows ``nulls="drop"`` leaves out)."""
        if not wanted:
            return
        last, given = max(wanted), 0
        for b, table in enumerate(self._batches()):
            given = b + 1
            if b > last:
                break
            if b not in wanted:
                continue
            col = table.column(self.column)
            if value_nulls:
                col = fill_value_nulls(col)
                table = table.set_column(table.schema.get_field_index(self.column),
                                         self.column, col)
            self._check_block(b, col)
            yield b, table
        if given <= last:
            raise ValueError(f"{self.fn}: the Ray source gave {given} block(s) of "
                             f"window={self.window} rows, {len(self.block_starts) - 1} when "
                             f"the loader was made: it changed since (make a new loader)")

    def _check_block(self, b, col):
        """Block ``b`` holds the sequences of the lengths pass (Ray gave the same rows in
        the same order), else a ``ValueError``."""
        lo, hi = int(self.block_starts[b]), int(self.block_starts[b + 1])
        rows = int(self.row_starts[b + 1] - self.row_starts[b])
        if len(col) == rows and (hi - lo == 0 or np.array_equal(
                self._lengths_of(col), self.lengths[lo:hi])):
            return
        raise ValueError(f"{self.fn}: block {b} of the Ray source does not hold the rows it "
                         f"held when the loader was made (the plan is made from a first pass "
                         f"over it): Ray gave its rows in another order, or the data changed. "
                         f"Keep Ray's order (ray.data.DataContext.get_current()."
                         f"execution_options.preserve_order = True, no random_shuffle), or "
                         f"materialize the dataset first")


def ray_epoch_plan(lengths, block_starts, args, seed, epoch, keep=None):
    """The epoch's plan of a Ray source on one rank: each block of ``block_starts`` planned
    on its own (its rows shuffled, bucketed and cut into batches with the randomness of
    ``seed``, ``epoch`` and the block's number), the blocks' steps one after the other.
    ``keep``: the sequences the epoch plans (None: all)."""
    from lodarrow._training._epoch import EpochPlan, plan_epoch
    from lodarrow._training._resume import rng_of

    orders, seqs, los, his, blocks, items = [], [], [], [], [], []
    dropped, done, row_base = {}, 0, 0
    for b, (lo, hi) in enumerate(zip(block_starts[:-1].tolist(), block_starts[1:].tolist())):
        rows = None if keep is None else np.flatnonzero(keep[lo:hi])
        plan = plan_epoch(lengths[lo:hi], args, 1, rng_of(seed, epoch, b + 1), rows=rows)
        for name, n in plan.dropped.items():
            dropped[name] = dropped.get(name, 0) + int(n)
        if not plan.steps:
            continue
        orders.append(plan.order + lo)
        seqs.append(plan.seq)
        los.append(plan.lo + done)
        his.append(plan.hi + done)
        blocks.append(np.full(plan.lo.shape, b, np.int64))
        done += len(plan.order)
        if plan.items is not None:
            start, row, offset, length = plan.items
            items.append((start, row + row_base, offset, length))
            row_base += int(row.max()) + 1 if len(row) else 0
    cat = (lambda xs: np.concatenate(xs).astype(np.int64) if xs else np.zeros(0, np.int64))
    grid = (lambda xs: np.hstack(xs).astype(np.int64) if xs else np.zeros((1, 0), np.int64))
    packed = None
    if items:
        packed = tuple(cat([x[k] for x in items]) for k in range(3)) + (items[0][3],)
    dropped.setdefault("oversize", 0)
    dropped.setdefault("drop_last", 0)
    return EpochPlan(cat(orders), grid(los), grid(his), grid(blocks), cat(seqs), args.alpha,
                     dropped, packed)
