"""Sequence lengths from offsets, without reading values (docs/training.md#lengths)."""

import numpy as np
import pyarrow as pa

from lodarrow._tensor import LoDTensor
from lodarrow._training._source import (ParquetParts, arrow_chain, check_level, column_of,
                                        compose, is_parquet_source, leaf_to_read, list_depth,
                                        pick_column)

__all__ = ["sequence_lengths"]

_FN = "sequence_lengths"


def sequence_lengths(source, column=None, *, level=0, filesystem=None, cache_dir=None):
    """Return the length of every sequence of a list column, reading no values where it can.

    A *sequence* is an element of LoD level ``level`` (0: a row of the column); its length
    counts the innermost values (tokens) it holds, across every deeper level.  In-memory
    sources give their lengths from the offsets alone.  A Parquet source is read one row group
    at a time, and only one leaf column of ``column`` (the cheapest by compressed size); only
    the offsets of what was read are kept, and the result is kept in the lengths cache (or
    read from the footer lodarrow's writers record them in), so later calls read no column
    at all.
    See docs/training.md#what-is-read and docs/training.md#lengths-cache.

    Parameters
    ----------
    source : LoDTensor, pyarrow array or table, datasets.Dataset, str or list
        The column (a LoDTensor or an Arrow list array), a table holding it (a
        ``pyarrow.Table`` or ``RecordBatch``, a Hugging Face ``datasets.Dataset``), or a
        Parquet file, directory, glob or list of files (read as :func:`lodarrow.map_parquet`
        reads them, in the same order), local, URIs (``s3://``, ``gs://``) or paths in
        ``filesystem``.
    column : str, optional
        The list column of a table or Parquet source; optional when it has one column.
    level : int, default 0
        Which LoD level is the sequence.
    filesystem : pyarrow.fs.FileSystem or fsspec filesystem, optional
        Where a Parquet source's paths live (docs/scale-out.md#remote-corpora).
    cache_dir : str, path-like or False, optional
        The lengths cache's directory; by default ``$LODARROW_CACHE_DIR``, else
        ``$XDG_CACHE_HOME/lodarrow``, else ``~/.cache/lodarrow``; False: no cache.  A file
        whose size, modification time or footer changed is decoded again, never served
        stale lengths.

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

    See Also
    --------
    batch_plan : Plan an epoch's batches from the lengths.
    batch_loader : Stream the batches of such a plan.
    clear_lengths_cache : Delete the lengths cache.

    Examples
    --------
    >>> import pyarrow as pa, lodarrow as la
    >>> la.sequence_lengths(pa.array([[1, 2, 3], [], [4]]))
    array([3, 0, 1])
    >>> docs = pa.array([[[1, 2], [3]], [[4, 5, 6]]])
    >>> la.sequence_lengths(docs), la.sequence_lengths(docs, level=1)
    (array([3, 3]), array([2, 1, 3]))
    """
    from lodarrow._tables._filesystems import as_filesystem
    from lodarrow._tables._lengths_store import check_cache_dir

    filesystem = as_filesystem(filesystem, _FN)
    cache_dir = check_cache_dir(cache_dir, _FN)
    if is_parquet_source(source):
        return _concat(_parquet_lengths(source, column, level, filesystem, cache_dir))
    if filesystem is not None:
        raise ValueError(f"{_FN}: filesystem is for a Parquet source (a path, URI or list of "
                         f"them), got {type(source).__name__}")
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


def _parquet_lengths(source, column, level, filesystem=None, cache_dir=None):
    parts = ParquetParts(source, _FN, filesystem=filesystem)
    name = pick_column(parts.schema, column, _FN)
    level = check_level(level, list_depth(parts.schema.field(name).type), _FN)
    return parquet_part_lengths(parts, name, level, cache_dir=cache_dir)


def parquet_part_lengths(parts, name, level, with_nulls=False, cache_dir=None):
    """The lengths of every row group of ``parts`` (a list of arrays), read on a few threads:
    at most that many row groups of one leaf column in memory at once.  With ``with_nulls``
    also each row group's null rows and its rows holding a null value inside their lists
    (row numbers in the row group, two lists): the lengths pass sees them for free, so a
    loader knows them before its first batch (where the lengths come from the cache, the
    footer's null counts say whether a row group can hold such a value at all, and only a
    row group that can is read for them: :func:`_value_nulls_known`).

    A row group whose lengths the cache (``cache_dir``: None the default directory, False
    none) or the file's footer (or an earlier release's sidecar) holds is not read; one that is decoded is put in the cache
    (lodarrow._tables._lengths_store)."""
    from lodarrow._tables._lengths_store import LengthsStore
    from lodarrow._threads import num_threads
    from lodarrow._training._columns import null_rows, value_null_rows

    if not parts.parts:
        return ([], [], []) if with_nulls else []
    store = LengthsStore(cache_dir)
    # what the footers, the cache or old sidecars hold, a whole file at a time
    kept = [store.file(fp, name, level) for fp in parts.fingerprints]
    index = {path: k for k, path in enumerate(parts.files)}
    leaves = {}

    def decode(k):
        path, g, rows = parts.parts[k]
        f = index[path]
        leaf = leaves.get(path)
        if leaf is None:
            leaf = leaves[path] = leaf_to_read(parts.metas[f], name)
        col = parts.read_group(k, [leaf], keep=False).column(name)
        lengths, nulls = _in_memory_lengths(col, level), null_rows(col)
        mask = None
        if len(nulls):
            mask = np.zeros(rows, bool)
            mask[nulls] = True
        store.put(parts.fingerprints[f], g, name, level, lengths, mask)
        values = None
        if with_nulls and leaf == name:  # the one leaf: its nulls are all there are
            values = value_null_rows(col)[0]
        return lengths, nulls, values

    todo = [k for k, (path, _, _) in enumerate(parts.parts) if kept[index[path]] is None]
    threads = min(num_threads(), len(todo))
    if threads <= 1:
        decoded = [decode(k) for k in todo]
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(threads) as pool:
            decoded = list(pool.map(decode, todo))
    decoded = dict(zip(todo, decoded))
    out = []
    for k, (path, g, _) in enumerate(parts.parts):
        if k in decoded:
            out.append(decoded[k])
            continue
        lengths, mask = kept[index[path]][g]
        out.append((lengths, np.flatnonzero(mask) if mask is not None
                    else np.zeros(0, np.int64), None))
    if not with_nulls:
        return [o[0] for o in out]
    values = []
    for k, (lengths, nulls, found) in enumerate(out):
        if found is None:
            found = _value_nulls_known(parts, k, name, level, lengths, nulls)
        if found is None:  # the footer cannot rule them out: read the column to know
            found = value_null_rows(parts.read_group(k, [name], keep=False).column(name))[0]
        values.append(found)
    return [o[0] for o in out], [o[1] for o in out], values


def _value_nulls_known(parts, k, name, level, lengths, nulls):
    """No null value inside the lists of row group ``k``, when its footer says so: an empty
    array; None when it cannot tell.

    Parquet counts as a leaf's nulls every slot below its full definition level: a null
    value, but also an empty or null list.  For a column of one list level read at level 0,
    the empty and null rows are the zero lengths, so a null count equal to them rules null
    values out; otherwise only a null count of 0 does."""
    from lodarrow._training._source import list_depth

    path, g, _ = parts.parts[k]
    meta = parts._meta_of[path]
    schema = meta.schema
    leaves = [i for i in range(meta.num_columns) if schema.column(i).path == name
              or schema.column(i).path.startswith(name + ".")]
    flat = level == 0 and list_depth(parts.schema.field(name).type) == 1
    empty = int(np.count_nonzero(lengths == 0)) if flat else 0
    rg = meta.row_group(g)
    for i in leaves:
        stats = rg.column(i).statistics
        if stats is None or not stats.has_null_count:
            return None
        if stats.null_count != empty and stats.null_count != 0:
            return None
    return np.zeros(0, np.int64)
