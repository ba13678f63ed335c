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

import numpy as np
import pyarrow as pa

from lodarrow._interop._arrow import to_arrow
from lodarrow._interop._arrow_layout import arrow_type
from lodarrow._tables._filesystems import as_filesystem, open_parquet, read_footer, \
    split_source
from lodarrow._tables._lengths_store import FOOTER_KEY, LengthsRecorder, remove_sidecar
from lodarrow._tables._parquet_writers import choose_engine, remove_partial, write_polars
from lodarrow._tables._table import columns_to_tensors, representable_columns, select_columns
from lodarrow._tables._adapters import adapt, is_pandas_frame, is_polars_frame, objects_to_arrow
from lodarrow._tensor import LoDTensor
from lodarrow._validation import check_path

__all__ = ["write_parquet", "read_parquet", "iter_parquet"]

_META_KEY = b"lodarrow"


def write_parquet(t_or_dict, path, *, engine="auto", record_lengths=True, **kwargs):
    """Write a LoDTensor, a mapping of columns or a table to a Parquet file.

    Parameters
    ----------
    t_or_dict : LoDTensor, mapping or table
        - a LoDTensor: written as the column ``"data"``;
        - a mapping name -> column, each a LoDTensor (zero-copy until encoding), a NumPy
          array (numeric: a tensor without LoD, one row per element of the first axis;
          anything else through ``pyarrow.array``), an Arrow array or chunked array, or
          anything ``pyarrow.array`` / :func:`lodarrow.from_arrow` accepts (a polars Series,
          an ``__arrow_c_array__`` producer, a list), so ids and strings are written beside
          the sequences;
        - a table: a ``pyarrow.Table`` / ``RecordBatch``, a pandas DataFrame (``pd.ArrowDtype``
          columns as they are, object columns of lists / NumPy arrays as list columns, others
          through ``pyarrow``), a polars DataFrame or an ``__arrow_c_stream__`` producer.

        Every column needs the same number of rows (top-level sequences for a LoDTensor).
    path : str, path-like or file-like
        Where to write.
    engine : {"auto", "pyarrow", "polars"}, default "auto"
        Which writer encodes the file.  ``"auto"``: polars' writer where polars is installed
        and writes the same file as pyarrow (every column of a type it writes alike, options
        among ``compression``, ``compression_level``, ``row_group_size``), pyarrow's
        otherwise; ``"polars"`` raises ``ValueError`` where it would not.  The file reads back
        the same either way (docs/performance.md#parquet-writes).  A remote ``path`` (a URI
        such as ``s3://bucket/key.parquet``, or ``filesystem=`` among ``kwargs``) is written
        by pyarrow.
    record_lengths : bool, default True
        Record the lengths of every list column, per LoD level, in one key-value entry of
        the file's own Parquet footer (``lodarrow.lengths``, checksummed, bound to the
        footer and to the start of the data pages as written, all checked at every read;
        docs/tables.md#where-the-lengths-live), so that
        :func:`lodarrow.sequence_lengths` and :func:`lodarrow.batch_loader` start without
        decoding them.  The data pages, the schema and its metadata are the same either way,
        and every reader reads the same rows; nothing is recorded for a file-like ``path``,
        nor with ``store_schema=False``.
    **kwargs
        Passed to ``pyarrow.parquet.write_table`` (``compression``, ``row_group_size``,
        ``use_dictionary``, ``write_statistics``, ...); each one given replaces lodarrow's
        default below.

    Raises
    ------
    TypeError
        If ``t_or_dict`` is none of these, a name is not a string, or a value cannot be an
        Arrow column.
    ValueError
        If the columns differ in length (the message names both columns).

    See Also
    --------
    read_parquet : Read the file back as LoDTensors.
    map_parquet : Transform a file or dataset into a new dataset.

    Notes
    -----
    LoDTensor columns record their dtype, feature shape, LoD depth and offset width in the
    schema metadata (key ``lodarrow``), so they read back exactly even where the file's Arrow
    schema is lost.  A LoDTensor is written as :meth:`LoDTensor.to_arrow` gives it: ``list``
    levels for one read from ``list`` columns (where its offsets fit int32), so
    ``read_parquet`` -> ``write_parquet`` keeps a file's types; ``large_list`` otherwise.

    Defaults (pyarrow's, except for the values of LoDTensor columns):

    - ``use_dictionary``: off for floating-point LoDTensor columns (their values rarely
      repeat: pyarrow would hash every value, write a 1 MiB dictionary page and then fall
      back to plain pages), on for every other column (integer token ids do repeat);
    - ``write_statistics``: off for LoDTensor columns (min/max over all the values of all
      the sequences prune nothing), on for every other column;
    - ``compression="snappy"``: as fast as no compression on incompressible floats, and
      read by every Parquet reader; ``compression="zstd"`` writes about 8% smaller files
      of random float32 values for about 1.5x the encoding work.

    Together these halve pyarrow's work on a float column (docs/performance.md).  polars'
    writer, about 3x faster again, takes one statistics setting for all columns: off when
    every column is a LoDTensor, on otherwise; it chooses dictionary pages itself, and its
    row groups are its own size unless ``row_group_size`` is given.

    Examples
    --------
    >>> import numpy as np, lodarrow as la, tempfile, os
    >>> t = la.LoDTensor(np.arange(6, dtype=np.float32).reshape(3, 2), lengths=[[2, 0, 1]])
    >>> path = os.path.join(tempfile.mkdtemp(), "t.parquet")
    >>> la.write_parquet(t, path)
    >>> la.read_parquet(path).equals(t)
    True
    >>> la.write_parquet({"id": np.array([7, 8, 9]), "title": ["a", "b", "c"], "seq": t}, path)
    >>> la.read_parquet(path, "seq").equals(t)
    True
    """

    if isinstance(t_or_dict, LoDTensor):
        table, tensors = _mapping_table({"data": t_or_dict})
    elif isinstance(t_or_dict, Mapping):
        table, tensors = _mapping_table(t_or_dict)
    elif isinstance(t_or_dict, (pa.Table, pa.RecordBatch)) or is_pandas_frame(t_or_dict) \
            or is_polars_frame(t_or_dict) or hasattr(t_or_dict, "__arrow_c_stream__"):
        table, tensors = _frame_table(t_or_dict), {}
    else:
        raise TypeError(f"write_parquet: t_or_dict must be a LoDTensor or a mapping of column "
                        f"name -> column, or a table, got {type(t_or_dict).__name__}")
    check_path(path, "write_parquet: path")
    if not isinstance(record_lengths, bool):
        raise TypeError(f"write_parquet: record_lengths must be a bool, "
                        f"got {type(record_lengths).__name__}")
    if FOOTER_KEY in (table.schema.metadata or {}):  # a record copied from another file
        table = table.replace_schema_metadata(
            {k: v for k, v in table.schema.metadata.items() if k != FOOTER_KEY} or None)
    if not isinstance(path, (str, os.PathLike)):
        _write_table(table, tensors, path, engine, kwargs)
        return
    fs, where = split_source(os.fspath(path),
                             as_filesystem(kwargs.pop("filesystem", None), "write_parquet"),
                             "write_parquet", "path")
    recorder = LengthsRecorder(table.schema) if record_lengths else None
    if recorder:
        recorder.add(table)
    if fs is None:
        _write_table(table, tensors, where, engine, kwargs)
        if recorder:
            recorder.stamp(where)
    else:
        if engine == "polars":
            raise ValueError("write_parquet: engine='polars' cannot write to a remote "
                             "path; engine='auto' or 'pyarrow' writes it with pyarrow")
        _write_remote(table, tensors, where, fs, kwargs, recorder)
    remove_sidecar(where, fs)  # an earlier release's, of the file this one replaces


def _write_remote(table, tensors, where, fs, kwargs, recorder):
    """Write with pyarrow's writer to ``where`` in ``fs``: straight there, or, to record the
    lengths in the footer once the row groups are written, to a local temporary file that
    is then uploaded (one object, complete when it appears)."""
    if not recorder:
        _write_table(table, tensors, where, "pyarrow", {**kwargs, "filesystem": fs})
        return
    import tempfile

    import pyarrow.fs as pafs

    handle, tmp = tempfile.mkstemp(prefix="lodarrow-write-", suffix=".parquet")
    os.close(handle)
    try:
        _write_table(table, tensors, tmp, "pyarrow", kwargs)
        recorder.stamp(tmp)
        pafs.copy_files(tmp, where, source_filesystem=pafs.LocalFileSystem(),
                        destination_filesystem=fs)
    finally:
        remove_partial(tmp)


def _write_table(table, tensors, path, engine, kwargs):
    """The body of :func:`write_parquet`: the Parquet file itself."""
    import pyarrow.parquet as pq

    metadata = dict(table.schema.metadata or {})
    if tensors:
        layout = {name: {"dtype": str(t.dtype), "feature_shape": list(t.feature_shape),
                         "lod_level": t.lod_level,
                         "large_offsets": not pa.types.is_list(table.schema.field(name).type)}
                  for name, t in tensors.items()}
        metadata[_META_KEY] = json.dumps({"version": 1, "columns": layout}).encode()
    if choose_engine(engine, table.schema, kwargs, metadata) == "polars":
        write_polars(table, path, kwargs, metadata,
                     statistics=len(tensors) < table.num_columns)
        return
    kwargs = _tensor_column_options(table, tensors, kwargs)
    if kwargs.get("store_schema", True):
        pq.write_table(table.replace_schema_metadata(metadata or None), path, **kwargs)
        return
    # Without the stored Arrow schema pyarrow drops the schema metadata too: add ours to the
    # file's key-value metadata directly, as pq.write_table would write the table.
    row_group_size = kwargs.pop("row_group_size", kwargs.pop("chunk_size", None))
    try:
        with pq.ParquetWriter(path, table.schema, **kwargs) as writer:
            writer.write_table(table, row_group_size=row_group_size)
            if _META_KEY in metadata:
                writer.add_key_value_metadata({_META_KEY: metadata[_META_KEY]})
    except Exception:
        remove_partial(path)
        raise


def _tensor_column_options(table, tensors, kwargs):
    """pyarrow's writer options with lodarrow's defaults for the LoDTensor columns filled in
    where the caller did not pass them: no dictionary for floating-point values, no
    statistics for any LoDTensor's values (see :func:`write_parquet`'s Notes)."""
    if not tensors or ("use_dictionary" in kwargs and "write_statistics" in kwargs):
        return kwargs
    compliant = kwargs.get("use_compliant_nested_type", True)
    step = ".list.element" if compliant else ".list.item"
    leaves = {name: name + step * (t.lod_level + len(t.feature_shape))
              for name, t in tensors.items()}
    paths = _leaf_paths(table, leaves, compliant)
    options = dict(kwargs)
    if "use_dictionary" not in options:
        floats = {leaves[name] for name, t in tensors.items() if t.dtype.kind == "f"}
        if floats:  # a list enables the dictionary for the columns named, and no other
            options["use_dictionary"] = [p for p in paths if p not in floats]
    if "write_statistics" not in options:
        values = set(leaves.values())
        options["write_statistics"] = [p for p in paths if p not in values]
    return options


def _leaf_paths(table, leaves, compliant):
    """The Parquet leaf column paths of ``table`` (what pyarrow's per-column options name)."""
    paths = []
    for field in table.schema:
        if field.name in leaves:
            paths.append(leaves[field.name])
        elif not pa.types.is_nested(field.type):
            paths.append(field.name)
        else:  # a struct, map or list column of another kind: its paths from pyarrow itself
            import pyarrow.parquet as pq

            sink = pa.BufferOutputStream()
            pq.write_table(pa.schema([field]).empty_table(), sink,
                           use_compliant_nested_type=compliant)
            schema = pq.ParquetFile(pa.BufferReader(sink.getvalue())).schema
            paths.extend(schema.column(i).path for i in range(len(schema)))
    return paths


def _mapping_table(mapping):
    """``(table, tensors)``: the columns of a mapping, and which of them were LoDTensors."""
    names, arrays, tensors = [], [], {}
    first = None
    for name, value in mapping.items():
        if not isinstance(name, str):
            raise TypeError(f"write_parquet: column names must be strings, got {name!r}")
        if isinstance(value, np.ndarray) and value.dtype.kind in "biuf" and value.ndim >= 1:
            try:
                value = LoDTensor(value)
            except TypeError:  # a dtype a LoDTensor does not hold (uint32 ...): as Arrow
                pass
        if isinstance(value, LoDTensor):
            tensors[name] = value
            arr = to_arrow(value)  # the offset width the tensor was read with, else large
        else:
            arr = _as_arrow_column(value, name)
        if first is None:
            first = (name, len(arr))
        elif len(arr) != first[1]:
            raise ValueError(f"write_parquet: column {name!r} has {len(arr)} rows (top-level "
                             f"sequences) but column {first[0]!r} has {first[1]}; all columns "
                             f"need the same number")
        names.append(name)
        arrays.append(arr)
    if not names:
        raise ValueError("write_parquet: the mapping holds no columns")
    return pa.Table.from_arrays(arrays, names=names), tensors


def _as_arrow_column(value, name):
    if isinstance(value, (pa.Array, pa.ChunkedArray)):
        return value
    if hasattr(value, "__arrow_c_array__") or hasattr(value, "__arrow_c_stream__"):
        try:
            return pa.chunked_array(value) if not hasattr(value, "__arrow_c_array__") \
                else pa.array(value)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as exc:
            raise TypeError(f"write_parquet: column {name!r} cannot be read as Arrow data "
                            f"({exc})") from None
    if hasattr(value, "to_arrow") and callable(value.to_arrow):  # a polars Series
        return value.to_arrow()
    try:
        return pa.array(value)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError) as exc:
        raise TypeError(f"write_parquet: column {name!r} of type {type(value).__name__} cannot "
                        f"be an Arrow column ({exc})") from None


def _frame_table(table):
    """A table of any kind as a ``pyarrow.Table`` (pandas object columns of sequences
    become list columns)."""
    if isinstance(table, (pa.Table, pa.RecordBatch)):
        return pa.Table.from_batches([table]) if isinstance(table, pa.RecordBatch) else table
    if is_polars_frame(table):
        return table.to_arrow()
    if not is_pandas_frame(table):
        return pa.table(table)
    names, arrays = [], []
    for name in table.columns:
        series = table[name]
        if series.dtype == object:
            try:
                arr = objects_to_arrow(series.to_numpy(dtype=object), name, "write_parquet")
            except (TypeError, ValueError):  # strings, dicts ...: pyarrow's own conversion
                arr = pa.array(series, from_pandas=True)
        else:
            arr, _ = adapt(table, "write_parquet").column(name, "write_parquet")
        names.append(str(name))
        arrays.append(arr)
    return pa.Table.from_arrays(arrays, names=names)


def read_parquet(path, columns=None, *, nulls="error", lod_level=None, feature_shape=None,
                 filesystem=None):
    """Read LoDTensors from a Parquet file.

    Parameters
    ----------
    path : str, path-like, list of them, or file-like
        What :func:`lodarrow.map_parquet` reads and writes (written by lodarrow, pyarrow,
        polars, DuckDB ...): a Parquet file (or a file-like object); a dataset directory
        (read recursively; names starting with ``.`` or ``_`` are skipped); a glob pattern
        (``"data/*/part-*.parquet"``, ``**`` recursive); or a list of files (in its order).
        Several files are read as one table, in that order (a directory's and a glob's
        sorted by path); they must share one schema.  Hive partition keys
        (``year=2024/...``) in the paths below the directory (a glob's leading directories,
        a list's common directory) are columns after the file's own, typed as
        ``pyarrow.parquet.read_table`` types them for a directory (dictionary-encoded: an
        integer key reads as an integer column, a string key is a column that cannot be a
        LoDTensor).  A single file gives its own columns only.  Paths may be URIs
        (``s3://bucket/corpus/``, ``gs://...``: any of the above, through pyarrow's
        filesystems) or paths in ``filesystem``.  Directories skip names starting with
        ``.`` or ``_`` and files that are not Parquet (docs/tables.md#dataset-directories).
    columns : str or list of str, optional
        The columns to read.  None: every column that can be a LoDTensor; the others
        (strings, structs ...) are skipped with one ``UserWarning`` naming them and their
        types.
    nulls : {"error", "empty"}, default "error"
        What a null list becomes (see :func:`lodarrow.from_arrow`).
    lod_level, feature_shape : optional
        Passed to :func:`lodarrow.from_arrow` for every column read: the outer ``lod_level``
        list levels are the LoD, deeper regular ones feature dimensions (what a file rewritten
        by DuckDB, polars or Spark needs, see docs/tables.md).
    filesystem : pyarrow.fs.FileSystem or fsspec filesystem, optional
        Where ``path`` lives (an fsspec filesystem is wrapped in
        ``pyarrow.fs.PyFileSystem(FSSpecHandler(...))``).  Remote reads are ranged: only
        the column chunks of the columns read are fetched.

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
        If ``path`` is not a path, a list of paths or a file-like object, ``columns`` is
        not a string or list of strings, or a column asked for by name cannot be a
        LoDTensor (the message names it and its type).
    ValueError
        If a column holds nulls (see ``nulls``), a directory holds no data files, a list is
        empty, or a file's schema differs from the first file's (the message names both
        files and the first differing column).
    FileNotFoundError
        If ``path`` (or a listed file) does not exist, or a glob matches nothing.

    See Also
    --------
    iter_parquet : The same file, a batch of sequences at a time.
    write_parquet : Write LoDTensors to a Parquet file.
    map_parquet : Stream a file or dataset through a udf into a new dataset.

    Examples
    --------
    >>> import numpy as np, lodarrow as la, tempfile, os
    >>> x = la.LoDTensor(np.arange(3), lengths=[[1, 2]])
    >>> path = os.path.join(tempfile.mkdtemp(), "xy.parquet")
    >>> la.write_parquet({"x": x, "y": x}, path)
    >>> la.read_parquet(path, "y").lod()
    [[0, 1, 3]]
    """

    source = _source(path, "read_parquet", filesystem)
    if not isinstance(source, _Files):
        with _open_one(source, "read_parquet", pre_buffer=True) as pf:
            schema = pf.schema_arrow
            names, single = select_columns(schema.names, columns, "read_parquet")
            names = representable_columns(schema, names, columns is None, "read_parquet")
            # ParquetFile.read gives one chunk per column across row groups: decoded
            # zero-copy.
            table = pf.read(columns=names)
    else:
        schema = source.schema
        names, single = select_columns(schema.names, columns, "read_parquet")
        names = representable_columns(schema, names, columns is None, "read_parquet")
        table = source.dataset.to_table(columns=names)
    table = _restore_types(table, schema)
    return columns_to_tensors(table, names, single, nulls, lod_level=lod_level,
                              feature_shape=feature_shape)


def iter_parquet(path, columns=None, *, batch_size=65536, nulls="error", lod_level=None,
                 feature_shape=None, filesystem=None):
    """Stream a Parquet file as LoDTensors, ``batch_size`` top-level sequences at a time.

    Only one batch is decoded at a time (``pyarrow.parquet.ParquetFile.iter_batches``, without
    pre-buffering), so memory is bounded by the batch plus the column chunk of the row group
    being read, whatever the file size.

    Parameters
    ----------
    path : str, path-like, list of them, or file-like
        As for :func:`read_parquet`: a file, a dataset directory (hive partition keys are
        columns), a glob pattern or a list of files.
    columns : str or list of str, optional
        As for :func:`read_parquet` (the same position: ``iter_parquet(path, "seq")``).
    batch_size : int, default 65536
        The most top-level sequences (rows) per batch (the last one is usually shorter).
        Over several files a batch never spans two files, and may end at a row group's
        end.
    nulls : {"error", "empty"}, default "error"
        What a null list becomes (see :func:`lodarrow.from_arrow`).
    lod_level, feature_shape : optional
        As for :func:`read_parquet`.
    filesystem : pyarrow.fs.FileSystem or fsspec filesystem, optional
        As for :func:`read_parquet`.

    Returns
    -------
    iterator of LoDTensor or of dict of str to LoDTensor
        One item per batch, shaped as :func:`read_parquet`'s result.  The arguments are
        checked and the file opened when this function is called, not on the first ``next``.

    Raises
    ------
    TypeError
        If ``batch_size`` is not an integer, or ``path`` or ``columns`` is invalid.
    ValueError
        If ``batch_size`` < 1, or the files of ``path`` differ in schema (as for
        :func:`read_parquet`).
    KeyError
        If a requested column is not in the file.
    FileNotFoundError
        If ``path`` (or a listed file) does not exist, or a glob matches nothing.

    See Also
    --------
    read_parquet : The whole file at once.

    Examples
    --------
    >>> import numpy as np, lodarrow as la, tempfile, os
    >>> t = la.LoDTensor(np.arange(10), lengths=[[3, 0, 2, 5]])
    >>> path = os.path.join(tempfile.mkdtemp(), "t.parquet")
    >>> la.write_parquet(t, path)
    >>> [b.lod() for b in la.iter_parquet(path, batch_size=3)]
    [[[0, 3, 3, 5]], [[0, 5]]]
    """

    try:
        batch_size = operator.index(batch_size)
    except TypeError:
        raise TypeError(f"iter_parquet: batch_size must be an integer, "
                        f"got {type(batch_size).__name__}") from None
    if batch_size < 1:
        raise ValueError(f"iter_parquet: batch_size must be >= 1, got {batch_size}")
    source = _source(path, "iter_parquet", filesystem)
    layout = {"lod_level": lod_level, "feature_shape": feature_shape}
    if isinstance(source, _Files):
        schema = source.schema
        names, single = select_columns(schema.names, columns, "iter_parquet")
        names = representable_columns(schema, names, columns is None, "iter_parquet")
        return _dataset_batches(source, names, single, batch_size, nulls, layout)
    # pre_buffer=False: pyarrow's default pre-buffers every column chunk of the file at once
    pf = _open_one(source, "iter_parquet", pre_buffer=False)
    try:
        schema = pf.schema_arrow
        names, single = select_columns(schema.names, columns, "iter_parquet")
        names = representable_columns(schema, names, columns is None, "iter_parquet")
    except BaseException:
        pf.close()
        raise
    return _batches(pf, schema, names, single, batch_size, nulls, layout)


def _batches(pf, schema, names, single, batch_size, nulls, layout):
    with pf:
        for batch in pf.iter_batches(batch_size=batch_size, columns=names):
            yield columns_to_tensors(_restore_types(batch, schema), names, single, nulls,
                                     **layout)


def _dataset_batches(source, names, single, batch_size, nulls, layout):
    import pyarrow.dataset as ds

    # one batch at a time, files in order, no pre-buffering (iter_parquet's memory bound)
    scanner = source.dataset.scanner(
        columns=names, batch_size=batch_size, batch_readahead=0, fragment_readahead=0,
        use_threads=False, fragment_scan_options=ds.ParquetFragmentScanOptions(
            pre_buffer=False))
    for batch in scanner.to_batches():
        yield columns_to_tensors(_restore_types(batch, source.schema), names, single, nulls,
                                 **layout)


class _Files:
    """Several Parquet files read as one dataset: the ``pyarrow.dataset`` over them (hive
    partition keys below ``base`` as columns) and its schema, with the first file's
    metadata (what :func:`_restore_types` reads)."""

    __slots__ = ("dataset", "schema")

    def __init__(self, dataset, schema):
        self.dataset = dataset
        self.schema = schema


def _open_one(source, fn, pre_buffer):
    """The ``ParquetFile`` of one file: a file-like object, or ``(path, filesystem)``."""
    import pyarrow.parquet as pq

    if not isinstance(source, tuple):
        return pq.ParquetFile(source, pre_buffer=pre_buffer)
    path, fs = source
    # remote: pre-buffering coalesces the column chunks read into few ranged requests
    return open_parquet(path, fs, fn, pre_buffer=pre_buffer and fs is not None)


def _source(path, fn, filesystem=None):
    """``path`` as a file-like object, ``(path, filesystem)`` of one Parquet file, or the
    :class:`_Files` of a directory, glob or list (:func:`lodarrow.map_parquet`'s grammar)."""
    if not isinstance(path, (str, os.PathLike, list, tuple)):
        return check_path(path, f"{fn}: path")  # a file-like object, or the TypeError
    from lodarrow._tables._sources import resolve_source

    src = resolve_source(path, fn, "path", filesystem)
    fs = src.filesystem
    if src.kind == "file":
        return (src.files[0][0], fs)
    import pyarrow.dataset as ds

    first = None
    for file, _ in src.files:
        meta, _, _ = read_footer(file, fs, fn)
        schema = meta.schema.to_arrow_schema()
        if first is None:
            first = (src.name(file), schema)
        elif not schema.equals(first[1], check_metadata=False):
            raise ValueError(f"{fn}: the schema of {src.name(file)!r} differs from that of "
                             f"the first file, {first[0]!r}: "
                             f"{_schema_difference(first[1], schema)}; the files read "
                             f"together must share one schema")
    # what pyarrow.parquet.read_table does for a directory: hive keys, dictionary-encoded
    partitioning = ds.HivePartitioning.discover(infer_dictionary=True)
    dataset = ds.dataset([file for file, _ in src.files], schema=None, format="parquet",
                         partitioning=partitioning, partition_base_dir=src.base,
                         filesystem=fs)
    schema = dataset.schema.with_metadata(first[1].metadata or {})
    return _Files(dataset, schema)


def _schema_difference(first, other):
    """The first column that differs between two schemas, in words."""
    for k in range(max(len(first), len(other))):
        a = first.field(k) if k < len(first) else None
        b = other.field(k) if k < len(other) else None
        if a is None:
            return f"it has an extra column {b.name!r} ({b.type})"
        if b is None:
            return f"it lacks column {a.name!r} ({a.type})"
        if a.name != b.name:
            return f"its column {k} is {b.name!r} where the first file has {a.name!r}"
        if not a.equals(b):
            return f"its column {a.name!r} is {b.type} where the first file has {a.type}"
    return "the columns' metadata differ"


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
        try:  # files written before "large_offsets" was recorded hold LargeList
            want = arrow_type(spec["dtype"], spec["feature_shape"], spec["lod_level"],
                              spec.get("large_offsets", True))
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
