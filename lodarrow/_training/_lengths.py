"""Sequence lengths from offsets, without reading values (docs/training.md#lengths)."""

import numpy as np
import pyarrow as pa

from lodarrow._tensor import LoDTensor
from lodarrow._training._source import (ParquetParts, arrow_chain, check_level, column_of,
                                        compose, is_parquet_source, leaf_to_read, list_depth,
                                        pick_column)

__all__ = ["sequence_lengths"]

_FN = "sequence_lengths"


def sequence_lengths(source, column=None, *, level=0):
    """Return the length of every sequence of a list column, reading no values where it can.

    A *sequence* is an element of LoD level ``level`` (0: a row of the column); its length
    counts the innermost values (tokens) it holds, across every deeper level.  In-memory
    sources give their lengths from the offsets alone.  A Parquet source is read one row group
    at a time, and only one leaf column of ``column`` (the cheapest by compressed size); only
    the offsets of what was read are kept.  See docs/training.md#what-is-read.

    Parameters
    ----------
    source : LoDTensor, pyarrow array or table, datasets.Dataset, str or list
        The column (a LoDTensor or an Arrow list array), a table holding it (a
        ``pyarrow.Table`` or ``RecordBatch``, a Hugging Face ``datasets.Dataset``), or a
        Parquet file, directory, glob or list of files (read as :func:`lodarrow.map_parquet`
        reads them, in the same order).
    column : str, optional
        The list column of a table or Parquet source; optional when it has one column.
    level : int, default 0
        Which LoD level is the sequence.

    Returns
    -------
    numpy.ndarray of int64, shape (n_sequences,)
        The lengths in values; a null list counts as an empty sequence.

    Raises
    ------
    TypeError
        If ``source`` is of no type above, ``column`` not a string, or ``level`` not an
        integer.
    ValueError
        If ``column`` is not in the source (or missing for a source of several columns), or
        ``level`` is not one of the column's levels.

    Examples
    --------
    >>> import pyarrow as pa, lodarrow as la
    >>> la.sequence_lengths(pa.array([[1, 2, 3], [], [4]]))
    array([3, 0, 1])
    >>> docs = pa.array([[[1, 2], [3]], [[4, 5, 6]]])
    >>> la.sequence_lengths(docs), la.sequence_lengths(docs, level=1)
    (array([3, 3]), array([2, 1, 3]))
    """
    if is_parquet_source(source):
        return _concat(_parquet_lengths(source, column, level))
    col = column_of(source, column, _FN)
    return _in_memory_lengths(col, level)


def _concat(arrays):
    return np.concatenate(arrays) if arrays else np.zeros(0, np.int64)


def _in_memory_lengths(col, level):
    if isinstance(col, LoDTensor):
        chain = [_host(o) for o in col.offsets]
        level = check_level(level, len(chain), _FN)
        return np.diff(compose(chain, level))
    depth = list_depth(col.type)
    level = check_level(level, depth, _FN)
    chunks = col.chunks if isinstance(col, pa.ChunkedArray) else [col]
    parts = [np.diff(compose(arrow_chain(c)[0], level)) for c in chunks if len(c)]
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def _host(offsets):
    return offsets.get() if hasattr(offsets, "get") else np.asarray(offsets)


def _parquet_lengths(source, column, level):
    parts = ParquetParts(source, _FN)
    name = pick_column(parts.schema, column, _FN)
    level = check_level(level, list_depth(parts.schema.field(name).type), _FN)
    return parquet_part_lengths(parts, name, level)


def parquet_part_lengths(parts, name, level, with_nulls=False):
    """The lengths of every row group of ``parts`` (a list of arrays), read on a few threads:
    at most that many row groups of one leaf column in memory at once.  With ``with_nulls``
    also each row group's null rows (their row numbers in the row group): the lengths pass
    sees them for free, so a loader knows them before its first batch."""
    import pyarrow.parquet as pq

    from lodarrow._threads import num_threads
    from lodarrow._training._columns import null_rows

    if not parts.parts:
        return ([], []) if with_nulls else []
    with pq.ParquetFile(parts.parts[0][0]) as pf:
        leaf = leaf_to_read(pf, name)

    def one(part):
        path, g, _ = part
        try:
            with pq.ParquetFile(path, pre_buffer=False) as pf:
                col = pf.read_row_group(g, columns=[leaf], use_threads=False).column(name)
        except (OSError, pa.ArrowException) as exc:
            raise ValueError(f"{_FN}: cannot read row group {g} of {path!r}: {exc}") from None
        lengths = _in_memory_lengths(col, level)
        return (lengths, null_rows(col)) if with_nulls else lengths

    threads = min(num_threads(), len(parts.parts))
    if threads <= 1:
        out = [one(p) for p in parts.parts]
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(threads) as pool:
            out = list(pool.map(one, parts.parts))
    if with_nulls:
        return [o[0] for o in out], [o[1] for o in out]
    return out
