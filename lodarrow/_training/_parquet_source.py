"""A Parquet source of the loader (docs/training.md#loader): Parquet files, or a mixture's
files listed together (:class:`~lodarrow._training._mix.MixedParts`).

One of the loader's sources (:mod:`lodarrow._training._source` lists what each offers): the
footers and the lengths pass (:func:`~lodarrow._training._lengths.parquet_part_lengths`, the
lengths cache) give every sequence's length and where the nulls are, without reading the
values; a block of the plan reads only the row groups (and row ranges) its steps need
(``kind = "blocks"``).
"""

import os

import numpy as np
import pyarrow as pa

from lodarrow._training._collate import as_sequences, with_separator
from lodarrow._training._columns import ExtraColumn, fill_value_nulls
from lodarrow._training._lengths import parquet_part_lengths
from lodarrow._training._mix import MixedParts
from lodarrow._training._readahead import DEFERRED, Shared, Stopped, reading
from lodarrow._training._source import (ParquetParts, check_level, check_sequence_type,
                                        list_depth, pick_column)

__all__ = ["ParquetSource"]

#: Map a block's source positions to its read table's through a lookup table up to this many
#: rows (8 bytes each); a wider span searches the row groups instead.
_LOOKUP_ROWS = 1 << 22


class ParquetSource:
    """The sequences of Parquet files (see the module's docstring).

    Parameters
    ----------
    source : str, path or list, or None
        The files (map_parquet's grammar); None with ``parts``.
    column : str or None
        The sequence column (None: the files' only column).
    select : Selection
        The loader's selection (level, extra columns, ``row_groups``, how null rows read).
    fn : str
        The name errors start with.
    parts : MixedParts, optional
        A mixture's files listed together (each source's column picked there).
    filesystem, cache, cache_dir, decoded
        Where the files are (a ``pyarrow.fs.FileSystem``, or None: from the paths), the data
        cache of remote row groups, the lengths cache's directory, the decoded cache (None:
        none).

    Attributes
    ----------
    parts : ParquetParts or MixedParts
        The row groups, in reading order.
    part_starts : numpy.ndarray of int64
        The first sequence of each row group, and the total.
    """

    kind = "blocks"

    def __init__(self, source, column, select, fn, *, parts=None, filesystem=None, cache=None,
                 cache_dir=None, decoded=None):
        self.fn, self.level, self.read_nulls = fn, select.level, select.read_nulls
        self.extra_columns = list(select.extra_columns)
        self.separator = None
        if parts is None:
            parts = ParquetParts(source, fn, filesystem=filesystem, cache=cache,
                                 decoded=decoded)
            if parts.schema is None:
                raise ValueError(f"{fn}: the source holds no Parquet file")
            self.label = (repr(parts.name(parts.files[0])) if len(parts.files) == 1 else
                          f"the {len(parts.files)} Parquet files of {source!r}")
            self.column = pick_column(parts.schema, column, fn)
            for name in self.extra_columns:
                pick_column(parts.schema, name, fn)
        else:  # each source's columns picked by MixedParts
            self.label, self.column = None, parts.column
        self.mixed = isinstance(parts, MixedParts)
        types = parts.unify([self.column] + self.extra_columns)
        check_sequence_type(types[self.column], self.column, fn)
        check_level(select.level, list_depth(types[self.column]), fn)
        if self.mixed:
            lengths, nulls, values = parts.lengths(select.level, cache_dir)
        else:
            lengths, nulls, values = parquet_part_lengths(parts, self.column, select.level,
                                                          with_nulls=True, cache_dir=cache_dir)
        self.parts = parts
        part_seqs = np.array([len(x) for x in lengths], dtype=np.int64)
        self.part_starts = np.concatenate([[0], np.cumsum(part_seqs)]).astype(np.int64)
        self.lengths = (np.concatenate(lengths) if lengths else np.zeros(0, np.int64))
        self.nbytes = int(sum(parts.nbytes))
        self.extra_specs = [ExtraColumn(n, types[n], parts.null_count(n) != 0)
                            for n in self.extra_columns]
        # pa.nulls, not pa.array([]): pyarrow's array() imports pandas (tenths of a second)
        self.empty = as_sequences(pa.nulls(0, type=types[self.column]), None, select.level, fn,
                                  nulls=select.read_nulls)
        values_of = self.empty.values
        self.value_bytes = values_of.dtype.itemsize * int(np.prod(values_of.shape[1:]))
        rows = np.concatenate([[0], np.cumsum(parts.rows)])
        self.row_nulls = (np.concatenate([n + rows[k] for k, n in enumerate(nulls)])
                          if nulls else np.zeros(0, np.int64))
        value_rows = (np.concatenate([v + rows[k] for k, v in enumerate(values)])
                      if values else np.zeros(0, np.int64)).astype(np.int64)
        # at level 0 a row is a sequence; deeper, a row's sequences are not known here
        self.value_nulls = (value_rows, value_rows if select.level == 0 else
                            np.zeros(0, np.int64))

    def add_separator(self, separator):
        """Append ``separator`` (one value row) to every sequence read (mode "blocks")."""
        self.separator = separator

    # --- where a row lives ----------------------------------------------------------------
    def where(self, row):
        """Row ``row`` (of the files read in order) as messages name it."""
        k = int(np.searchsorted(np.cumsum(self.parts.rows), row, side="right"))
        path, g, _ = self.parts.parts[k]
        first = int(np.sum(self.parts.rows[:k]))
        return f"row {row - first} of row group {g} of {path!r}"

    def name_sequence(self, k):
        """Sequence ``k`` (a position in :attr:`lengths`) as messages name it: its row group
        (and row, at level 0); a mixture's positions are not the user's, so not given."""
        p = int(np.searchsorted(self.part_starts, k, side="right")) - 1
        path, g, _ = self.parts.parts[p]
        at = f"row {k - self.part_starts[p]} of " if self.level == 0 else ""
        where = f"{at}row group {g} of {path!r}"
        return where if self.mixed else f"sequence {k} ({where})"

    def file_list(self):
        """``[name, bytes, rows]`` of each file read, by name (a saved state's fingerprint)."""
        parts = self.parts
        size_of = dict(zip(parts.files, parts.sizes))  # from the footers' listing
        sizes = {}
        for path, _, rows in parts.parts:
            local = parts.local(path) if self.mixed else parts.filesystem is None
            name = os.path.basename(path) if local else path.rpartition("/")[2]
            sizes.setdefault(name, [int(size_of[path]), 0])
            sizes[name][1] += int(rows)
        return sorted([name, size, rows] for name, (size, rows) in sizes.items())

    def cell_rows(self, select):
        """The rows of a planning cell: about ``row_groups`` row groups' sequences."""
        starts = self.part_starts
        mean = float(np.mean(np.diff(starts))) if len(starts) > 1 else 1
        return max(1, int(round(select.row_groups * mean)))

    # --- reading ---------------------------------------------------------------------------
    def read(self, rows, stop=None, shared=None):
        """Read the sequences ``rows`` (positions in the source) from the row groups holding
        them: the Sequences, a map from positions to the read table's, the extra columns.
        ``stop`` (a ``threading.Event``), once set, ends the read before its next row group
        (:class:`~lodarrow._training._readahead.Stopped`); ``shared`` (a
        :class:`~lodarrow._training._readahead.Shared`): the row groups are decoded through
        it, so that a thread waiting for this read decodes some of them."""
        level0 = self.level == 0
        part_starts = self.part_starts
        p = np.searchsorted(part_starts, rows, side="right") - 1
        # each row group's first and last row wanted, in one pass over the rows (a block
        # can be the whole corpus: no sort, no pass per row group)
        low = np.full(len(part_starts) - 1, np.iinfo(np.int64).max, np.int64)
        high = np.full(len(low), -1, np.int64)
        np.minimum.at(low, p, rows)
        np.maximum.at(high, p, rows)
        needed = np.flatnonzero(high >= 0)
        starts = part_starts[needed]
        if level0:
            ranges = list(zip(needed.tolist(), (low[needed] - starts).tolist(),
                              (high[needed] - starts + 1).tolist()))
        else:
            ranges = [(k, 0, None) for k in needed.tolist()]
        columns = [self.column] + self.extra_columns
        tables = _read_all(self.parts, ranges, columns, stop, shared)
        firsts, offsets, done = [], [], 0
        for (k, lo, _), table in zip(ranges, tables):
            firsts.append(part_starts[k] + lo)
            offsets.append(done)
            done += len(table) if level0 else int(part_starts[k + 1] - part_starts[k])
        table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
        if len(self.value_nulls[0]):  # rows nulls="drop" leaves out, read beside others
            i = table.schema.get_field_index(self.column)
            table = table.set_column(i, self.column, fill_value_nulls(table.column(i)))
        seqs = as_sequences(table, self.column, self.level, self.fn, nulls=self.read_nulls)
        if self.separator is not None:
            seqs = with_separator(seqs, self.separator)
        firsts = np.asarray(firsts, np.int64)
        offsets = np.asarray(offsets, np.int64)

        lo = int(part_starts[needed[0]])
        hi = int(part_starts[needed[-1] + 1])
        if level0 and hi - lo <= _LOOKUP_ROWS:  # one table lookup a batch
            shift = np.zeros(hi - lo, np.int64)
            for k, first, at in zip(needed.tolist(), firsts.tolist(), offsets.tolist()):
                a, b = int(part_starts[k]) - lo, int(part_starts[k + 1]) - lo
                shift[a:b] = at - first

            def local_of(batch_rows):
                return batch_rows + shift[batch_rows - lo]
        else:
            def local_of(batch_rows):
                i = np.searchsorted(needed, np.searchsorted(part_starts, batch_rows,
                                                            side="right") - 1)
                return batch_rows - firsts[i] + offsets[i]

        extras = {e.name: e.prepare(table.column(e.name)) for e in self.extra_specs}
        return seqs, local_of, extras


def _read_all(parts, ranges, columns, stop=None, shared=None):
    """The row ranges ``(row group, lo, hi)`` of ``parts``, decoded on a few threads at once
    (Parquet decoding releases the GIL; ``DataLoader`` workers run with one thread each);
    none is begun once ``stop`` is set.

    ``shared`` (a ``Shared``) is given for a read made ahead: then one thread fewer decodes,
    the consumer's (it makes batches meanwhile, and decodes what is left through ``shared``
    once it waits for this read); on two cores more decoding threads only take turns with
    it.
    """
    from lodarrow._threads import num_threads

    def read(r):
        if stop is not None and stop.is_set():
            raise Stopped("a read made ahead, stopped: its pass ended")
        return parts.read(r[0], columns, r[1], r[2])

    threads = num_threads()
    if shared is None:
        shared = Shared()
    else:
        threads -= 1
    exchange = _exchange_of(parts)
    if exchange is None:
        return shared.run(read, ranges, min(threads, len(ranges)))

    # DataLoader workers sharing what they decode (_exchange): first every row group this
    # worker takes or decodes itself, then those another worker was decoding meanwhile
    def first(r):
        with reading(first=True):
            return read(r)

    exchange.begin()
    tables = shared.run(first, ranges, min(threads, len(ranges)))
    with reading(first=False, stop=stop):
        return [read(r) if t is DEFERRED else t for r, t in zip(ranges, tables)]


def _exchange_of(parts):
    """The :class:`~lodarrow._training._exchange.Exchange` through which ``parts`` (or a
    mixture's files: one a process, shared by them) hand decoded row groups between
    ``DataLoader`` workers; None where they do not."""
    return next((p.exchange for p in getattr(parts, "children", [parts])
                 if getattr(p, "exchange", None) is not None), None)
