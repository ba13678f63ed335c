"""Parquet: LoDTensors as ordinary nested-list columns, through ``pyarrow.parquet``.

Each LoD level is a Parquet LIST, each feature dimension a LIST too (Parquet has no
fixed-size list), float16 the FLOAT16 logical type.  pyarrow stores the exact Arrow schema in
the file (``ARROW:schema``), which restores ``LargeList`` / ``FixedSizeList`` on reading; lodarrow
also records each column's dtype, feature shape and LoD depth under the schema metadata key
``lodarrow``, so the round trip stays exact when the Arrow schema is not stored
(``store_schema=False``) or is lost by another tool.  pyarrow, polars and DuckDB read the files
without lodarrow.

``pyarrow.parquet`` is imported inside the functions: ``import lodarrow`` does not load it.
"""

import json
import operator
import os
from collections.abc import Mapping

import pyarrow as pa

from lodarrow._arrow_layout import arrow_type
from lodarrow._table import columns_to_tensors, select_columns, to_table
from lodarrow._tensor import LoDTensor

__all__ = ["write_parquet", "read_parquet", "iter_parquet"]

_META_KEY = b"lodarrow"


def write_parquet(t_or_dict, path, **kwargs):
    """Write a LoDTensor, or several as columns, to a Parquet file (zero-copy until encoding).

    Parameters
    ----------
    t_or_dict : LoDTensor or mapping of str to LoDTensor
        A single tensor is written as the column ``"data"``; a mapping gives one column per
        entry (equal top-level lengths, see :func:`lodarrow.to_table`).
    path : str, path-like or file-like
        Where to write.
    **kwargs
        Passed to ``pyarrow.parquet.write_table`` (``compression``, ``row_group_size``, ...).

    Raises
    ------
    TypeError
        If ``t_or_dict`` is neither a LoDTensor nor a mapping of them.
    ValueError
        If the tensors differ in top-level length.

    Examples
    --------
    >>> import numpy as np, lodarrow as la, tempfile, os
    >>> t = la.LoDTensor(np.arange(6, dtype=np.float32).reshape(3, 2), lengths=[[2, 0, 1]])
    >>> path = os.path.join(tempfile.mkdtemp(), "t.parquet")
    >>> la.write_parquet(t, path)
    >>> la.read_parquet(path).equals(t)
    True
    """
    import pyarrow.parquet as pq

    if isinstance(t_or_dict, LoDTensor):
        tensors = {"data": t_or_dict}
    elif isinstance(t_or_dict, Mapping):
        tensors = t_or_dict
    else:
        raise TypeError(f"write_parquet: t_or_dict must be a LoDTensor or a mapping of column "
                        f"name -> LoDTensor, got {type(t_or_dict).__name__}")
    table = to_table(tensors)
    layout = {name: {"dtype": str(t.dtype), "feature_shape": list(t.feature_shape),
                     "lod_level": t.lod_level} for name, t in tensors.items()}
    meta = json.dumps({"version": 1, "columns": layout}).encode()
    if kwargs.get("store_schema", True):
        pq.write_table(table.replace_schema_metadata({_META_KEY: meta}), path, **kwargs)
        return
    # Without the stored Arrow schema pyarrow drops the schema metadata too: add ours to the
    # file's key-value metadata directly, as pq.write_table would write the table.
    row_group_size = kwargs.pop("row_group_size", kwargs.pop("chunk_size", None))
    try:
        with pq.ParquetWriter(path, table.schema, **kwargs) as writer:
            writer.write_table(table, row_group_size=row_group_size)
            writer.add_key_value_metadata({_META_KEY: meta})
    except Exception:
        if isinstance(path, (str, os.PathLike)):
            try:
                os.remove(path)
            except OSError:
                pass
        raise


def read_parquet(path, columns=None, *, nulls="error"):
    """Read LoDTensors from a Parquet file.

    Parameters
    ----------
    path : str, path-like or file-like
        A Parquet file (written by lodarrow, pyarrow, polars, DuckDB ...).
    columns : str or list of str, optional
        The columns to read (all by default).
    nulls : {"error", "empty"}, default "error"
        What a null list becomes (see :func:`lodarrow.from_arrow`).

    Returns
    -------
    LoDTensor or dict of str to LoDTensor
        A LoDTensor when ``columns`` is a string, or when it is None and the file has exactly
        one column; otherwise a dict name -> LoDTensor (a list of names always gives a dict).

    Raises
    ------
    KeyError
        If a requested column is not in the file.
    TypeError
        If ``columns`` is not a string or list of strings, or a column cannot be a LoDTensor.
    ValueError
        If a column holds nulls (see ``nulls``).

    Examples
    --------
    >>> import numpy as np, lodarrow as la, tempfile, os
    >>> x = la.LoDTensor(np.arange(3), lengths=[[1, 2]])
    >>> path = os.path.join(tempfile.mkdtemp(), "xy.parquet")
    >>> la.write_parquet({"x": x, "y": x}, path)
    >>> la.read_parquet(path, "y").lod()
    [[0, 1, 3]]
    """
    import pyarrow.parquet as pq

    with pq.ParquetFile(path) as pf:
        schema = pf.schema_arrow
        names, single = select_columns(schema.names, columns, "read_parquet")
        # ParquetFile.read gives one chunk per column across row groups: decoded zero-copy.
        table = pf.read(columns=names)
    table = _restore_types(table, schema)
    return columns_to_tensors(table, names, single, nulls)


def iter_parquet(path, batch_size=65536, columns=None, *, nulls="error"):
    """Stream a Parquet file as LoDTensors, ``batch_size`` top-level sequences at a time.

    Only one batch is decoded at a time (``pyarrow.parquet.ParquetFile.iter_batches``, without
    pre-buffering), so memory is bounded by the batch plus the column chunk of the row group
    being read, whatever the file size.

    Parameters
    ----------
    path : str, path-like or file-like
        A Parquet file.
    batch_size : int, default 65536
        The most top-level sequences (rows) per batch (the last one is usually shorter).
    columns : str or list of str, optional
        As for :func:`read_parquet`.
    nulls : {"error", "empty"}, default "error"
        What a null list becomes (see :func:`lodarrow.from_arrow`).

    Returns
    -------
    iterator of LoDTensor or of dict of str to LoDTensor
        One item per batch, shaped as :func:`read_parquet`'s result.  The arguments are
        checked and the file opened when this function is called, not on the first ``next``.

    Raises
    ------
    TypeError
        If ``batch_size`` is not an integer, or ``columns`` is invalid.
    ValueError
        If ``batch_size`` < 1.
    KeyError
        If a requested column is not in the file.

    Examples
    --------
    >>> import numpy as np, lodarrow as la, tempfile, os
    >>> t = la.LoDTensor(np.arange(10), lengths=[[3, 0, 2, 5]])
    >>> path = os.path.join(tempfile.mkdtemp(), "t.parquet")
    >>> la.write_parquet(t, path)
    >>> [b.lod() for b in la.iter_parquet(path, batch_size=3)]
    [[[0, 3, 3, 5]], [[0, 5]]]
    """
    import pyarrow.parquet as pq

    try:
        batch_size = operator.index(batch_size)
    except TypeError:
        raise TypeError(f"iter_parquet: batch_size must be an integer, "
                        f"got {type(batch_size).__name__}") from None
    if batch_size < 1:
        raise ValueError(f"iter_parquet: batch_size must be >= 1, got {batch_size}")
    # pre_buffer=False: pyarrow's default pre-buffers every column chunk of the file at once
    pf = pq.ParquetFile(path, pre_buffer=False)
    try:
        schema = pf.schema_arrow
        names, single = select_columns(schema.names, columns, "iter_parquet")
    except BaseException:
        pf.close()
        raise
    return _batches(pf, schema, names, single, batch_size, nulls)


def _batches(pf, schema, names, single, batch_size, nulls):
    with pf:
        for batch in pf.iter_batches(batch_size=batch_size, columns=names):
            yield columns_to_tensors(_restore_types(batch, schema), names, single, nulls)


def _restore_types(table, schema):
    """Cast columns back to the exact types lodarrow wrote, where the file lost them."""
    meta = (schema.metadata or {}).get(_META_KEY)
    if meta is None:
        return table
    try:
        layout = json.loads(meta)["columns"]
    except (ValueError, KeyError, TypeError):
        return table  # not ours (or damaged): read the file as it is
    for i, name in enumerate(table.schema.names):
        spec = layout.get(name)
        if not isinstance(spec, dict):
            continue
        try:
            want = arrow_type(spec["dtype"], spec["feature_shape"], spec["lod_level"])
        except (KeyError, TypeError, ValueError):
            continue
        column = table.column(i)
        if column.type != want:
            try:
                column = column.cast(want)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                continue  # the column was rewritten by another tool: read it as it is
            table = table.set_column(i, name, column)
    return table
