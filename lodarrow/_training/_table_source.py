"""An in-memory source of the loader (docs/training.md#loader): a LoDTensor, an Arrow column,
a table or record batch, a Hugging Face ``datasets.Dataset`` (its Arrow table, no copy), or the
tables of a mixture side by side.

One of the loader's sources (:mod:`lodarrow._training._source` lists what each offers): its
sequences are read once, when the loader is made, and every batch is gathered from them
(``kind = "whole"``).
"""

import numpy as np
import pyarrow as pa

from lodarrow._training._collate import as_sequences, with_separator
from lodarrow._training._columns import (ExtraColumn, fill_value_nulls, null_rows,
                                         value_null_rows)
from lodarrow._training._source import (check_level, check_sequence_type, column_of, hf_table,
                                        list_depth, pick_column)

__all__ = ["TableSource"]


class TableSource:
    """The sequences of an in-memory ``source`` (see the module's docstring).

    Parameters
    ----------
    source : LoDTensor, pyarrow Array, ChunkedArray, Table or RecordBatch, or datasets.Dataset
    column : str or None
        The sequence column of a table (None: its only column); None for a single column.
    select : Selection
        The loader's selection (level, extra columns, how null rows read).
    fn : str
        The name errors start with.
    mixture : tuple, optional
        ``(names, row_starts, seq_starts)`` when ``source`` is a mixture's tables side by side:
        messages then name each source's own rows.

    Attributes
    ----------
    seqs : Sequences
        Every sequence (with the separator once :meth:`add_separator` appended it).
    extras : dict
        The extra columns' prepared values (:meth:`ExtraColumn.prepare`).
    """

    kind = "whole"
    part_starts = None

    def __init__(self, source, column, select, fn, *, mixture=None):
        self.fn, self.level, self._mixture = fn, select.level, mixture
        table = hf_table(source)
        self.label = ("the datasets.Dataset" if table is not None
                      else f"the {type(source).__name__}")
        if table is None and isinstance(source, pa.RecordBatch):
            table = pa.Table.from_batches([source])
        if table is None and isinstance(source, pa.Table):
            table = source
        if table is not None:
            column = pick_column(table.schema, column, fn)
            for name in select.extra_columns:
                pick_column(table.schema, name, fn)
            check_sequence_type(table.schema.field(column).type, column, fn)
            check_level(select.level, list_depth(table.schema.field(column).type), fn)
            col = table.column(column)
            self.row_nulls = null_rows(col)
            self.value_nulls = value_null_rows(col, select.level)
            self.extra_specs = [ExtraColumn(n, table.schema.field(n).type,
                                            table.column(n).null_count)
                                for n in select.extra_columns]
            self.extras = {e.name: e.prepare(table.column(e.name)) for e in self.extra_specs}
        else:
            source = column_of(source, column, fn)  # a column, or a TypeError
            column = None
            if select.extra_columns:
                raise ValueError(f"{fn}: extra_columns need a table source, got "
                                 f"{type(source).__name__}")
            if not hasattr(source, "offsets"):
                check_sequence_type(source.type, "the source", fn)
            arrow = isinstance(source, (pa.Array, pa.ChunkedArray))
            if arrow:  # (a LoDTensor's levels are checked with its sequences below)
                check_level(select.level, list_depth(source.type), fn)
            # a LoDTensor has no null rows, nor null values
            self.row_nulls = null_rows(source) if arrow else np.zeros(0, np.int64)
            self.value_nulls = (value_null_rows(source, select.level) if arrow
                                else (np.zeros(0, np.int64),) * 2)
            self.extra_specs, self.extras = [], {}
            col = source
        self.column = column
        if len(self.value_nulls[0]):  # refused or dropped by the plan, never read
            col = fill_value_nulls(col)
            table = None if table is None else table.set_column(
                table.schema.get_field_index(column), column, col)
        self.seqs = as_sequences(table if table is not None else col, column, select.level,
                                 fn, nulls=select.read_nulls)
        self.empty = self.seqs
        self.lengths = self.seqs.lengths
        self.nbytes = int(self.seqs.values.nbytes)

    def add_separator(self, separator):
        """Append ``separator`` (one value row) to every sequence (mode "blocks")."""
        self.seqs = with_separator(self.seqs, separator)
        self.nbytes = int(self.seqs.values.nbytes)

    def where(self, row):
        """Row ``row`` as messages name it."""
        if self._mixture is not None:
            names, row_starts, _ = self._mixture
            s = int(np.searchsorted(row_starts, row, side="right")) - 1
            return f"row {row - int(row_starts[s])} of source {names[s]!r}"
        return f"row {row}"

    def name_sequence(self, k):
        """Sequence ``k`` (a position in :attr:`lengths`) as messages name it."""
        if self._mixture is not None:
            names, _, seq_starts = self._mixture
            s = int(np.searchsorted(seq_starts, k, side="right")) - 1
            what = "row" if self.level == 0 else "sequence"
            return f"{what} {k - int(seq_starts[s])} of source {names[s]!r}"
        return f"sequence {k} ({f'row {k}' if self.level == 0 else f'level {self.level}'})"

    def file_list(self):
        """The files read (None: not files)."""
        return None

    def cell_rows(self, select):
        """The rows of a planning cell: ``window``."""
        return select.window
