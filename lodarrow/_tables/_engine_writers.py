"""Ray Data's and Dask's Parquet output through lodarrow's writer and dataset layout.

``ray.data.Dataset.write_parquet`` and ``dask.dataframe.to_parquet`` encode with pyarrow's
writer, one thread per task; ``map_parquet`` encodes with polars' where it writes the same
file (:mod:`lodarrow._tables._parquet_writers`), in its own threads while the next batch is
produced.  :func:`ray_parquet_sink` (a ``ray.data.Datasink``) and :func:`dask_write_parquet`
give each engine's write tasks that writer and ``map_parquet``'s all-or-nothing layout: every
task streams its batches into files of a hidden staging directory beside ``dest`` (each under
a temporary name renamed when complete), and the driver renames the directory to ``dest``
only when every task has finished; a failed job removes it.  Hive partition directories
(``lang=en/``) come from ``partition_cols``, as the engines' own writers make them.
"""

import dataclasses
import itertools
import os
import shutil
import urllib.parse
import uuid

import pyarrow as pa

from lodarrow._tables._dataset import _publish, free_dest
from lodarrow._tables._parquet_writers import (
    check_engine,
    choose_engine,
    remove_partial,
    sink_polars,
)

__all__ = ["WriteSummary", "dask_write_parquet", "ray_parquet_sink"]

#: Hive's (and pyarrow's) directory name for a null partition key.
NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"


@dataclasses.dataclass(frozen=True)
class WriteSummary:
    """What an engine's write produced: ``dest``, ``files`` (paths relative to it, sorted),
    ``rows`` and ``bytes`` (on disk)."""

    dest: str
    files: tuple
    rows: int
    bytes: int

    def __str__(self):
        n = len(self.files)
        return (f"{n} file{'s' * (n != 1)}, {self.rows:,} rows, {self.bytes / 1e9:.2f} GB "
                f"-> {self.dest}")


class _Target:
    """``dest``, its staging directory and the write options, checked on the driver; pickled
    to the write tasks, which only write inside the staging directory."""

    def __init__(self, dest, partition_cols, overwrite, engine, write_options, fn):
        if not isinstance(dest, (str, os.PathLike)):
            raise TypeError(f"{fn}: dest must be a local path (str or path-like), "
                            f"got {type(dest).__name__}")
        if isinstance(partition_cols, str):
            partition_cols = [partition_cols]
        if partition_cols is None:
            partition_cols = []
        if (not isinstance(partition_cols, (list, tuple))
                or not all(isinstance(c, str) for c in partition_cols)):
            raise TypeError(f"{fn}: partition_cols must be a list of column names or None, "
                            f"got {partition_cols!r}")
        if len(set(partition_cols)) != len(partition_cols):
            raise ValueError(f"{fn}: partition_cols names a column twice: {partition_cols}")
        if not isinstance(overwrite, bool):
            raise TypeError(f"{fn}: overwrite must be a bool, got {type(overwrite).__name__}")
        check_engine(engine, fn)
        for bad in ("row_group_size", "partition_cols"):
            if bad in write_options:
                raise TypeError(f"{fn}: {bad} is not a write option here: each batch the "
                                f"engine hands over is one row group")
        dest = free_dest(dest, overwrite, fn)
        parent, name = os.path.split(dest)
        self.fn = fn
        self.dest = dest
        self.staging = os.path.join(parent, f".{name}.lodarrow-tmp-{uuid.uuid4().hex[:12]}")
        self.partition_cols = list(partition_cols)
        self.overwrite = overwrite
        self.engine = engine
        self.write_options = dict(write_options)

    def start(self):
        os.makedirs(os.path.dirname(self.dest), exist_ok=True)
        os.mkdir(self.staging)

    def publish(self, returns):
        """Rename the complete staging directory to ``dest``; the summary of ``returns``."""
        _publish(self.staging, self.dest, self.overwrite)
        files = sorted(f for r in returns for f, _, _ in r)
        return WriteSummary(self.dest, tuple(files), sum(n for r in returns for _, n, _ in r),
                            sum(b for r in returns for _, _, b in r))

    def abort(self):
        shutil.rmtree(self.staging, ignore_errors=True)

    def write(self, tables, prefix):
        """Stream ``tables`` (Arrow tables or batches, in order) into files named ``prefix``
        under the staging directory, one file per run of rows with the same partition keys;
        returns ``[(path relative to dest, rows, bytes), ...]``."""
        written = []
        runs = itertools.groupby(self._pieces(tables), key=lambda piece: piece[0])
        for n, (folder, pieces) in enumerate(runs):
            rel = os.path.join(folder, f"{prefix}-{n}.parquet") if folder else \
                f"{prefix}-{n}.parquet"
            path = os.path.join(self.staging, rel)
            rows, size = self._write_file((t for _, t in pieces), path, rel)
            written.append((rel, rows, size))
        return written

    def _pieces(self, tables):
        """``(partition directory, table without the key columns)`` of every table's rows,
        split by their keys; tables without rows are skipped."""
        cols = self.partition_cols
        for table in tables:
            if isinstance(table, pa.RecordBatch):
                table = pa.Table.from_batches([table])
            if table.num_rows == 0:
                continue
            if not cols:
                yield "", table
                continue
            missing = [c for c in cols if c not in table.schema.names]
            if missing:
                raise KeyError(f"{self.fn}: partition column {missing[0]!r} is not among the "
                               f"columns {table.schema.names}")
            keys = pa.table([_plain(table.column(c)) for c in cols], names=cols)
            data = table.drop_columns(cols)
            if all(len(keys.column(c).unique()) == 1 for c in cols):
                yield _folder(keys.slice(0, 1).to_pylist()[0], cols), data
                continue
            # rows of several partitions: each partition's rows, in the order they first come
            index = pa.array(range(table.num_rows), pa.int64())
            grouped = keys.append_column("__row", index).group_by(cols, use_threads=False) \
                .aggregate([("__row", "list")])
            firsts = sorted(range(grouped.num_rows),
                            key=lambda g: grouped.column("__row_list")[g].values[0].as_py())
            for g in firsts:
                rows = grouped.column("__row_list")[g].values
                key = {c: grouped.column(c)[g].as_py() for c in cols}
                yield _folder(key, cols), data.take(rows)

    def _write_file(self, tables, path, rel):
        """One run of tables of one schema into ``path`` (temporary name, then renamed)."""
        import pyarrow.parquet as pq

        first = next(tables)
        schema = first.schema
        os.makedirs(os.path.dirname(path), exist_ok=True)
        folder, leaf = os.path.split(path)
        tmp = os.path.join(folder, f".{leaf}.tmp")
        rows = [0]

        def checked():
            for t in itertools.chain([first], tables):
                if not t.schema.equals(schema, check_metadata=False):
                    raise ValueError(f"{self.fn}: a batch for {rel!r} has the schema\n"
                                     f"{t.schema}\nbut the file's first batch had\n{schema}\n"
                                     f"every batch of a dataset must have the same schema")
                rows[0] += t.num_rows
                for batch in t.to_batches():  # columns chunked alike: slices of them
                    if batch.num_rows:
                        yield _unsliced_fixed_lists(batch)

        try:
            options = self.write_options
            if choose_engine(self.engine, schema, options, schema.metadata,
                             self.fn) == "polars":
                sink_polars(checked(), schema, tmp, options)
            else:
                with pq.ParquetWriter(tmp, schema, **options) as writer:
                    for batch in checked():
                        writer.write_batch(batch)
            os.replace(tmp, path)
        except BaseException:
            remove_partial(tmp)
            raise
        return rows[0], os.path.getsize(path)


def _unsliced_fixed_lists(batch):
    """``batch`` with every fixed-size-list column over exactly its own values.

    The engines hand over slices of larger tables (Ray's blocks, Dask's partitions, and the
    record batches of a table whose columns are chunked differently), and polars' Arrow
    import refuses a sliced ``FixedSizeList`` with a validity bitmap ("validity mask length
    must be equal to the number of values divided by size"); the same values cut to the
    slice, a view, and its validity rebuilt (one bit per row) are what it takes.
    """
    columns, changed = [], False
    for column in batch.columns:
        if pa.types.is_fixed_size_list(column.type) and (
                column.offset or len(column.values) != len(column) * column.type.list_size):
            size = column.type.list_size
            values = column.values.slice(column.offset * size, len(column) * size)
            mask = column.is_null() if column.null_count else None
            column = pa.FixedSizeListArray.from_arrays(values, type=column.type, mask=mask)
            changed = True
        columns.append(column)
    return pa.RecordBatch.from_arrays(columns, schema=batch.schema) if changed else batch


def _plain(column):
    """A partition key column with its dictionary (Dask's categoricals, Ray's keys) decoded."""
    if pa.types.is_dictionary(column.type):
        return column.cast(column.type.value_type)
    return column


def _folder(key, cols):
    """``k1=v1/k2=v2``: Hive's directories, values URL-quoted as pyarrow writes them."""
    parts = []
    for c in cols:
        v = key[c]
        v = NULL_PARTITION if v is None else urllib.parse.quote(str(v), safe="")
        parts.append(f"{c}={v}")
    return os.path.join(*parts)


_SINK_CLASS = None


def _sink_class():
    """``ray.data.Datasink`` subclass, defined on first use (``import lodarrow`` imports no
    Ray)."""
    global _SINK_CLASS
    if _SINK_CLASS is None:
        from ray.data import Datasink
        from ray.data.block import BlockAccessor

        class ParquetDatasink(Datasink):
            """lodarrow's Parquet writer and dataset layout for ``Dataset.write_datasink``."""

            def __init__(self, target):
                self._target = target
                self.summary = None

            def get_name(self):
                return "LodarrowParquet"

            def on_write_start(self, schema=None):
                self._target.start()

            def write(self, blocks, ctx):
                tables = (BlockAccessor.for_block(b).to_arrow() for b in blocks)
                prefix = f"part-{ctx.task_idx:05d}-{uuid.uuid4().hex[:8]}"
                return self._target.write(tables, prefix)

            def on_write_complete(self, write_result):
                returns = getattr(write_result, "write_returns", write_result)
                self.summary = self._target.publish(returns)

            def on_write_failed(self, error):
                self._target.abort()

            @property
            def dest(self):
                return self._target.dest

        _SINK_CLASS = ParquetDatasink
    return _SINK_CLASS


def ray_parquet_sink(dest, *, partition_cols=None, overwrite=False, engine="auto",
                     **write_options):
    """A Ray Data ``Datasink`` writing a Parquet dataset with lodarrow's writer and layout.

    Give it to ``Dataset.write_datasink``.  Each write task streams its blocks into one file
    (one per run of rows with the same ``partition_cols`` values), encoded with polars'
    writer where it writes pyarrow's file (``engine``, as in :func:`lodarrow.map_parquet`):
    encoding runs in polars' threads while the next block is produced, in row groups of
    polars' size (pyarrow's writer: a row group per block).  The files are written into a
    hidden staging directory beside ``dest``, renamed to ``dest`` only when every task has
    finished (docs/scale-out.md#ray-data).

    Parameters
    ----------
    dest : str or path-like
        The output dataset directory, on a file system every Ray worker sees (one machine,
        or a shared mount).  It must not exist, or be an empty directory, unless
        ``overwrite`` is true.
    partition_cols : list of str, optional
        Columns to partition by: their values become Hive directories (``lang=en/``, values
        URL-quoted, a null ``__HIVE_DEFAULT_PARTITION__``) and leave the files, as Ray's
        ``write_parquet(partition_cols=...)`` writes them; ``ray.data.read_parquet`` of a
        Hive dataset gives those columns back.
    overwrite : bool, default False
        Replace an existing ``dest`` (only once the new dataset is complete).
    engine : {"auto", "pyarrow", "polars"}, default "auto"
        The Parquet writer (see :func:`lodarrow.write_parquet`).
    **write_options
        ``pyarrow.parquet.ParquetWriter`` options (``compression``, ...).

    Returns
    -------
    ray.data.Datasink
        After the write, its ``summary`` is a ``WriteSummary`` (``dest``, ``files``,
        ``rows``, ``bytes``).

    Raises
    ------
    FileExistsError
        If ``dest`` exists, is not an empty directory, and ``overwrite`` is false.
    TypeError, ValueError
        For a bad argument, before any task starts.
    ImportError
        If Ray is not installed.

    See Also
    --------
    map_parquet : The same dataset layout on one machine.
    dask_write_parquet : The same for a Dask DataFrame.

    Examples
    --------
    >>> import lodarrow as la
    >>> f = la.udf(la.sequence_pool, input=la.col("emb"), pool_type="average", out="vec")
    >>> sink = la.ray_parquet_sink("corpus-mapped/")  # doctest: +SKIP
    >>> (ray.data.read_parquet("corpus/")  # doctest: +SKIP
    ...  .map_batches(f, batch_format="pyarrow").write_datasink(sink))
    """
    from lodarrow._interop._optional import import_optional

    import_optional("ray", "ray_parquet_sink")
    target = _Target(dest, partition_cols, overwrite, engine, write_options, "ray_parquet_sink")
    return _sink_class()(target)


def _write_partition(frame, target, prefix):
    """One Dask partition (a pandas DataFrame) into the staging directory."""
    table = _readable_pandas_metadata(pa.Table.from_pandas(frame, preserve_index=False))
    return target.write(iter([table]), prefix)


def _readable_pandas_metadata(table):
    """``table`` with the dtypes of its pandas metadata that pandas cannot parse back left
    to pyarrow's default conversion.

    ``from_pandas`` records a ``pd.ArrowDtype`` column's dtype by name, and pandas parses no
    nested one (``"list<item: int32>[pyarrow]"``): ``pandas.read_parquet`` and Dask would
    refuse the file ("data type ... not understood"), as they refuse ``ddf.to_parquet``'s.
    Such a column reads back as pyarrow converts a list column without metadata.
    """
    import json

    import pandas as pd

    meta = table.schema.metadata or {}
    try:
        spec = json.loads(meta[b"pandas"])
        columns = spec["columns"]
    except (KeyError, ValueError, TypeError):
        return table
    changed = False
    for column in columns:
        name = column.get("numpy_type") if isinstance(column, dict) else None
        if isinstance(name, str) and name.endswith("[pyarrow]"):
            try:
                pd.api.types.pandas_dtype(name)
            except (TypeError, ValueError, NotImplementedError):  # what pandas raises
                column["numpy_type"] = "object"
                changed = True
    if not changed:
        return table
    return table.replace_schema_metadata({**meta, b"pandas": json.dumps(spec).encode()})


def dask_write_parquet(ddf, dest, *, partition_cols=None, overwrite=False, engine="auto",
                       **write_options):
    """Write a Dask DataFrame as a Parquet dataset with lodarrow's writer and layout.

    What ``ddf.to_parquet(dest, write_index=False)`` writes, encoded with polars' writer
    where it writes pyarrow's file (``engine``, as in :func:`lodarrow.map_parquet`), and all
    or nothing: each partition is written by its own task into a hidden staging directory
    beside ``dest`` (one file per partition and ``partition_cols`` value, under a temporary
    name renamed when complete), which becomes ``dest`` only when every task has finished
    (docs/scale-out.md#dask).  The index is not written (``write_index=False``).

    Parameters
    ----------
    ddf : dask.dataframe.DataFrame
        Typically ``ddf.map_partitions(udf, meta=udf.dask_meta(ddf))`` over a
        ``dtype_backend="pyarrow"`` read.
    dest : str or path-like
        The output dataset directory, on a file system every worker sees.  It must not
        exist, or be an empty directory, unless ``overwrite`` is true.
    partition_cols : list of str, optional
        Columns to partition by (Hive directories, as in :func:`ray_parquet_sink`).
    overwrite : bool, default False
        Replace an existing ``dest`` (only once the new dataset is complete).
    engine : {"auto", "pyarrow", "polars"}, default "auto"
        The Parquet writer (see :func:`lodarrow.write_parquet`).
    **write_options
        ``pyarrow.parquet.ParquetWriter`` options (``compression``, ...).

    Returns
    -------
    WriteSummary
        ``dest``, ``files`` (relative paths), ``rows``, ``bytes``.

    Raises
    ------
    FileExistsError
        If ``dest`` exists, is not an empty directory, and ``overwrite`` is false.
    TypeError, ValueError
        For a bad argument, before any task starts.
    ImportError
        If Dask is not installed.

    See Also
    --------
    map_parquet : The same dataset layout on one machine.
    ray_parquet_sink : The same for a Ray Dataset.

    Examples
    --------
    >>> import lodarrow as la
    >>> import dask.dataframe as dd  # doctest: +SKIP
    >>> f = la.udf(la.sequence_pool, input=la.col("emb"), pool_type="average", out="vec")
    >>> ddf = dd.read_parquet("corpus/", dtype_backend="pyarrow")  # doctest: +SKIP
    >>> la.dask_write_parquet(ddf.map_partitions(f, meta=f.dask_meta(ddf)),  # doctest: +SKIP
    ...                       "corpus-mapped/")
    """
    from lodarrow._interop._optional import import_optional

    dask = import_optional("dask", "dask_write_parquet")
    import_optional("dask.dataframe", "dask_write_parquet")
    if not (hasattr(ddf, "to_delayed") and hasattr(ddf, "npartitions")):
        raise TypeError(f"dask_write_parquet: ddf must be a dask.dataframe.DataFrame, got "
                        f"{type(ddf).__name__}")
    target = _Target(dest, partition_cols, overwrite, engine, write_options,
                     "dask_write_parquet")
    tasks = [dask.delayed(_write_partition)(part, target, f"part-{i:05d}")
             for i, part in enumerate(ddf.to_delayed())]
    target.start()
    try:
        returns = dask.compute(*tasks)
        return target.publish(returns)
    except BaseException:
        target.abort()
        raise
