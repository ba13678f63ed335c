"""What the loader checks about its columns before the first batch, and how extra columns
travel with a batch (docs/training.md#nulls-and-extra-columns)."""

import numpy as np
import pyarrow as pa

from lodarrow._training._buffers import as_numpy, list_offsets, positions, zero

__all__ = ["ExtraColumn", "check_jax_x64", "fill_value_nulls", "null_rows", "value_null_rows"]

_WIDE = ("int64", "uint64", "float64")


class ExtraColumn:
    """How one extra column is given with each batch, decided from its Arrow type.

    Fixed-width numbers and bools become arrays of the batch's rows (in ``to``'s library);
    a column with nulls keeps its dtype, its nulls read as 0, with a bool ``<name>_mask``
    (True where valid) beside it -- never a float cast.  Any other type (strings, lists,
    structs, dictionaries) stays a ``pyarrow.Array`` of the batch's rows, whatever ``to`` is.
    """

    def __init__(self, name, arrow_type, has_nulls):
        self.name = name
        self.numeric = (pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type)
                        or pa.types.is_boolean(arrow_type))
        self.has_nulls = bool(has_nulls) and self.numeric
        self.dtype = np.dtype(arrow_type.to_pandas_dtype()) if self.numeric else None

    def prepare(self, column):
        """The column of a table (read block or whole source) in the form :meth:`take` uses."""
        if isinstance(column, pa.ChunkedArray):
            column = (column.combine_chunks() if column.num_chunks != 1 else column.chunk(0))
        if not self.numeric:
            return column
        valid = None
        if column.null_count:
            valid = as_numpy(column.is_valid())
            column = column.fill_null(zero(column.type))
        values = as_numpy(column)
        if values.dtype != self.dtype:
            values = values.astype(self.dtype)
        return values, valid

    def take(self, prepared, local, out):
        """Put the batch's rows of the column into ``out`` (a dict of the batch's arrays)."""
        if not self.numeric:
            out[self.name] = prepared.take(positions(local))
            return
        values, valid = prepared
        out[self.name] = values[local]
        if self.has_nulls:
            out[self.name + "_mask"] = (np.ones(len(local), bool) if valid is None
                                        else valid[local])


def check_jax_x64(columns, fn):
    """``to="jax"`` without ``jax_enable_x64`` would narrow 64-bit data silently: a
    ``ValueError`` naming the first such column (``columns``: name -> numpy dtype)."""
    from lodarrow._interop._optional import import_optional

    jax = import_optional("jax", f"{fn}(to='jax')")
    if bool(jax.config.jax_enable_x64):
        return
    for name, dtype in columns.items():
        if dtype is not None and np.dtype(dtype).name in _WIDE:
            raise ValueError(f"{fn}: column {name!r} holds {np.dtype(dtype)} data, which JAX "
                             f"narrows to 32 bits while jax_enable_x64 is off; enable it "
                             f"(jax.config.update('jax_enable_x64', True)) or cast the column "
                             f"to a 32-bit type")


def null_rows(column):
    """The positions of the null rows of a list column (an Array or ChunkedArray)."""
    if column.null_count == 0:
        return np.zeros(0, np.int64)
    return np.flatnonzero(as_numpy(column.is_null())).astype(np.int64)


def value_null_rows(column, level=0):
    """Where a list column holds a null *value* inside its lists (not a null row): the rows
    (level 0) and the level-``level`` sequences holding one, as int64 arrays.

    A collated batch has no number to put there, so the loader knows these before its first
    batch (docs/training.md#nulls-and-extra-columns).  A null row's own values are not
    looked at (it reads as empty or is dropped)."""
    from lodarrow._training._source import arrow_chain, compose

    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    rows, seqs = [], []
    row_base = seq_base = 0
    for chunk in chunks:
        chain, leaf = arrow_chain(chunk)
        n_rows = len(chunk)
        n_seqs = (len(compose(chain, level)) - 1) if chain and n_rows else 0
        bad = _null_values(leaf)
        if len(bad) and chain and n_rows:
            by_row = compose(chain, 0)
            bad = bad[(bad >= by_row[0]) & (bad < by_row[-1])]  # a slice's own values only
            row = np.searchsorted(by_row, bad, side="right") - 1
            keep = np.ones(len(row), bool)
            if chunk.null_count:
                keep = ~as_numpy(chunk.is_null())[row]
            bad, row = bad[keep], row[keep]
            if len(bad):
                rows.append(np.unique(row) + row_base)
                by_seq = compose(chain, level)
                seqs.append(np.unique(np.searchsorted(by_seq, bad, side="right") - 1)
                            + seq_base)
        row_base += n_rows
        seq_base += n_seqs
    cat = (lambda xs: np.concatenate(xs).astype(np.int64) if xs else np.zeros(0, np.int64))
    return cat(rows), cat(seqs)


def _null_values(leaf):
    """Positions (value rows) of ``leaf`` that are null or hold a null (a fixed-size list of
    features with a null element)."""
    bad = []
    if leaf.null_count:
        bad.append(np.flatnonzero(as_numpy(leaf.is_null())))
    if pa.types.is_fixed_size_list(leaf.type):
        inner = leaf.flatten()  # the elements of the valid slots, in order
        if inner.null_count:
            size = leaf.type.list_size
            slots = np.flatnonzero(as_numpy(leaf.is_valid()))
            bad.append(slots[np.flatnonzero(as_numpy(inner.is_null())) // size])
    if not bad:
        return np.zeros(0, np.int64)
    return np.unique(np.concatenate(bad)).astype(np.int64)


def fill_value_nulls(column):
    """``column`` (a list Array or ChunkedArray) with its null values read as 0: for the rows
    ``nulls="drop"`` leaves out, which are read with their neighbours but never delivered.
    A column with no null value is returned as is."""
    if isinstance(column, pa.ChunkedArray):
        if not any(len(_null_values(_leaf(c))) for c in column.chunks):
            return column
        return pa.chunked_array([fill_value_nulls(c) for c in column.chunks], column.type)
    if not (pa.types.is_list(column.type) or pa.types.is_large_list(column.type)):
        if pa.types.is_fixed_size_list(column.type):
            inner = fill_value_nulls(column.values)
            return pa.FixedSizeListArray.from_arrays(
                inner, column.type.list_size,
                mask=column.is_null() if column.null_count else None)
        if column.null_count:
            return column.fill_null(zero(column.type))
        return column
    offsets = list_offsets(column)
    first, last = int(offsets[0]), int(offsets[-1])
    child = column.values.slice(first, last - first)  # a slice's own values, from 0
    values = fill_value_nulls(child)
    if values is child:
        return column
    kind = pa.LargeListArray if pa.types.is_large_list(column.type) else pa.ListArray
    return kind.from_arrays(positions(offsets - first, column.offsets.type), values,
                            type=column.type,
                            mask=column.is_null() if column.null_count else None)


def _leaf(arr):
    while pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type):
        arr = arr.values
    return arr
