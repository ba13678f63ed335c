"""Parquet datasets on one machine: :func:`map_parquet` streams files through a udf.

A table row is a whole top-level sequence, so every lodarrow udf is row-local: splitting a
dataset into files, row groups and record batches at row boundaries gives the same result as
the whole table (``docs/scale-out.md``).  ``map_parquet`` uses that to run a udf over a dataset
of any size with memory bounded by a few record batches, one input file to one output file.

Output safety: everything is written into a hidden staging directory beside ``dest``
(``.<dest>.lodarrow-tmp-<id>``), each file under a hidden temporary name renamed when it is
closed, and the staging directory is renamed to ``dest`` only when every file is complete.  A
run that fails or is interrupted removes its staging directory (one killed outright leaves
it, hidden, and no ``dest``), so ``dest`` exists only as a whole dataset.
"""

import bisect
import dataclasses
import itertools
import os
import shutil
import sys
import threading
import time
import uuid
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait

import pyarrow as pa

from lodarrow._progress import Progress
from lodarrow._progress import mb as _mb
from lodarrow._tables._filesystems import as_filesystem, display_path, join, open_parquet, \
    reraise as _reraise, split_source
from lodarrow._tables._lengths_store import FOOTER_KEY, LengthsRecorder
from lodarrow._tables._parquet_writers import check_engine, choose_engine, remove_partial, \
    sink_polars
from lodarrow._tables._sources import resolve_source

__all__ = ["map_parquet", "MapSummary", "resolve_source"]

#: Decoded bytes per record batch when ``batch_rows`` is not given.
DEFAULT_BATCH_BYTES = 32 << 20
#: Bytes per read of a column chunk (pyarrow's ``buffer_size``).
_READ_BUFFER = 1 << 20
#: Bounds on the rows of an automatic batch: Parquet and Arrow work per batch, so tiny
#: batches cost per-call overhead; one row is the least a batch can hold.
_MAX_AUTO_ROWS = 1 << 20
_MIN_AUTO_ROWS = 1024


@dataclasses.dataclass(frozen=True)
class MapSummary:
    """What :func:`map_parquet` did.

    Attributes
    ----------
    dest : str
        The output dataset directory.
    files : int
        Input files read (one output file each).
    rows : int
        Rows read.
    rows_out : int
        Rows written.
    bytes_in, bytes_out : int
        Bytes of the input and output files on disk.
    seconds : float
        Wall time of the whole run.
    """

    dest: str
    files: int
    rows: int
    rows_out: int
    bytes_in: int
    bytes_out: int
    seconds: float

    @property
    def rows_per_second(self):
        """Rows read per second of wall time."""
        return self.rows / self.seconds if self.seconds > 0 else float("inf")

    @property
    def bytes_per_second(self):
        """Input bytes (on disk) per second of wall time."""
        return self.bytes_in / self.seconds if self.seconds > 0 else float("inf")

    def __str__(self):
        return (f"{self.files} file{'s' * (self.files != 1)}, {self.rows:,} rows, "
                f"{_mb(self.bytes_in)} -> {_mb(self.bytes_out)} in {self.seconds:.2f} s "
                f"({_mb(self.bytes_per_second)}/s) -> {self.dest}")


def map_parquet(source, dest, udf, *, batch_rows=None, progress=None, overwrite=False,
                threads=1, engine="auto", filesystem=None, record_lengths=True,
                **write_options):
    """Stream a Parquet file or dataset through a udf into a new Parquet dataset directory.

    Each input file is read one record batch at a time (``ParquetFile.iter_batches``, without
    pre-buffering), each batch goes through ``udf``, and the results are written to one output
    file at the same relative path under ``dest`` (one row group per batch), so hive
    partition directories (``year=2024/part-0.parquet``) and file names are kept.  The udf
    sees the columns stored in each file (hive partition keys stay in the directory names).

    Reading, the udf and encoding overlap: with polars installed its Parquet writer encodes
    each row group in its own threads, without the GIL, while the next batch is read and
    mapped (``engine``), which makes a dataset job about twice as fast as pyarrow's own
    read-and-write loop on 2 cores (docs/performance.md, "Datasets").

    Memory: about ``threads`` x (pyarrow's reader buffers, about four times a batch, + the
    udf's output batch + that batch converted and encoded while it is written + 1 MiB per
    column being read), whatever the number and size of the files and of their row groups:
    with the default ``batch_rows`` a batch is about 32 MiB decoded, so several hundred MiB
    in all (measured: peak RSS flat as the input grows 4x, docs/performance.md, "Datasets").

    Parameters
    ----------
    source : str, path-like, or list of them
        A Parquet file; a directory (read recursively; names starting with ``.`` or ``_``,
        such as ``_SUCCESS``, are skipped, as pyarrow.dataset and Spark do, and so are files
        neither named ``*.parquet`` / ``*.parq`` / ``*.pq`` nor starting with Parquet's
        magic bytes, such as ``README.md``: docs/tables.md#dataset-directories); a glob
        pattern (``"data/*/part-*.parquet"``, ``**`` recursive); or a list of files.  Any
        of them may be URIs (``"s3://bucket/corpus/"``, ``"gs://..."``) or paths in
        ``filesystem``.  Output paths are relative to the directory, to the glob's leading
        directories, or to the files' common directory.
    dest : str or path-like
        The output dataset directory, local, a URI or a path in ``filesystem``.  It must
        not exist, or be an empty directory, unless ``overwrite`` is true.  It appears only
        when the whole dataset is written (see Notes).
    udf : callable
        ``udf(batch: pyarrow.RecordBatch) -> pyarrow.RecordBatch or pyarrow.Table``, called
        once per batch: a :func:`lodarrow.udf` or :func:`lodarrow.pipeline`, or any callable.
        If it has ``output_schema(schema)`` (lodarrow's udfs do), that gives each output
        file's schema before any data is read; otherwise the first output batch does (for a
        file without rows, the udf's output on an empty batch).
    batch_rows : int, optional
        Rows per record batch.  By default each file's batches hold about 32 MiB of decoded
        data, estimated from its row-group metadata (between 1024 and 2**20 rows).
    progress : bool, optional
        Show a progress bar on stderr (files, rows, bytes, rate, time left).  By default,
        only when stderr is a terminal.
    overwrite : bool, default False
        Replace an existing ``dest`` (only once the new dataset is complete).
    threads : int, default 1
        Files processed at once (the udf must be thread-safe; lodarrow's are).  Each file
        in flight adds its own batches to the memory bound; with pyarrow's writer, two at a
        time overlap one file's encoding with another's decoding (polars' writer overlaps
        them within a file already; docs/performance.md, "Datasets").
    engine : {"auto", "pyarrow", "polars"}, default "auto"
        Which writer encodes the output, as in :func:`lodarrow.write_parquet`: ``"auto"``
        takes polars' where polars is installed and writes the same file as pyarrow (every
        output column of a type it writes alike, ``write_options`` among ``compression``
        and ``compression_level``), pyarrow's otherwise; ``"polars"`` raises
        ``ValueError`` where it would not.  Either file reads back as the same table; polars
        chooses dictionary pages itself, so its files can differ in size (7% larger on the
        benchmark's token ids).
    filesystem : pyarrow.fs.FileSystem or fsspec filesystem, optional
        Where ``source`` and ``dest`` live when they are paths rather than URIs (an fsspec
        filesystem is wrapped in ``pyarrow.fs.PyFileSystem(FSSpecHandler(...))``).  Reads
        are ranged: only the column chunks of the batch being read are fetched.
    record_lengths : bool, default True
        Record the lengths of each output file's list columns in one key-value entry of that
        file's own Parquet footer (``lodarrow.lengths``, checked against the footer and the first
        data bytes it was written with;
        docs/tables.md#where-the-lengths-live), so that :func:`lodarrow.sequence_lengths`
        and :func:`lodarrow.batch_loader` start without decoding them.  ``dest`` holds the
        data files either way (and ``_SUCCESS`` on an object store), and every reader reads
        the same rows.
    **write_options
        Passed to ``pyarrow.parquet.ParquetWriter`` (``compression``,
        ``compression_level``, ``use_dictionary``, ...); ``compression`` and
        ``compression_level`` are polars' too.  Row groups are the batches
        (``batch_rows``).

    Returns
    -------
    MapSummary
        ``dest``, ``files``, ``rows``, ``rows_out``, ``bytes_in``, ``bytes_out``, ``seconds``.

    Raises
    ------
    TypeError
        If ``udf`` is not callable, returns something other than an Arrow batch or table,
        or an argument has the wrong type.
    ValueError
        If ``batch_rows`` or ``threads`` is < 1, ``source`` holds no data files, ``dest``
        overlaps ``source``, or ``engine`` is not a writer (or ``"polars"`` cannot write
        the output).
    FileNotFoundError
        If ``source`` (or a listed file) does not exist, or a glob matches nothing.
    FileExistsError
        If ``dest`` exists, is not an empty directory, and ``overwrite`` is false.
    Exception
        An error raised while reading, in the udf, or while writing is re-raised as the same
        type (other types keep their message and gain a note) with the input file, the row
        group and the row (counted from 0 within the file) prepended.  A udf error is
        narrowed to its first failing row by re-running the udf on shorter prefixes of the
        batch (rows are independent, so the shortest failing prefix ends at that row).

    See Also
    --------
    read_parquet, write_parquet : One file in memory.
    udf, pipeline : The callables to map.
    ray_parquet_sink, dask_write_parquet, spark_map : The same on Ray Data, Dask and Spark.

    Notes
    -----
    The output is written into a hidden staging directory beside ``dest``, every file under
    a hidden temporary name renamed when complete, and the directory renamed to ``dest``
    when every file is; on an error or ``KeyboardInterrupt`` the staging directory is
    removed.  A process killed outright leaves the hidden directory behind (readers skip it;
    delete it) and no ``dest``.

    A remote ``dest`` (an object store has no rename of a directory): each output file is
    written to a local temporary file, uploaded under the hidden prefix
    ``.<dest>.lodarrow-tmp-<id>/`` beside ``dest``, and, once every file is uploaded, each
    object is moved (server-side copy and delete) under ``dest``, then an empty
    ``dest/_SUCCESS`` is written and the prefix removed.  What a reader sees mid-run:
    nothing under ``dest`` (or the old dataset, with ``overwrite``, whose objects are
    deleted when the move starts) until every file is uploaded; then a growing set of whole
    files (an object is never visible half-written); ``_SUCCESS`` only when the dataset is
    complete -- wait for it, as for Spark's output.  A failed run removes the hidden prefix;
    one killed outright leaves it (readers skip it).

    Examples
    --------
    >>> import os, tempfile, pyarrow as pa, pyarrow.compute as pc, pyarrow.parquet as pq
    >>> import lodarrow as la
    >>> root = tempfile.mkdtemp()
    >>> pq.write_table(pa.table({"x": [[1, 2], [3]]}), os.path.join(root, "a.parquet"))
    >>> def lengths(batch):
    ...     return batch.append_column("n", pc.list_value_length(batch["x"]))
    >>> s = la.map_parquet(os.path.join(root, "a.parquet"), os.path.join(root, "out"), lengths)
    >>> s.files, s.rows
    (1, 2)
    >>> pq.read_table(os.path.join(root, "out", "a.parquet"))["n"].to_pylist()
    [2, 1]
    """
    import pyarrow.parquet as pq

    if not callable(udf):
        raise TypeError(f"map_parquet: udf must be callable (la.udf, la.pipeline or a function "
                        f"of a pyarrow.RecordBatch), got {type(udf).__name__}")
    batch_rows = _positive_int(batch_rows, "batch_rows", allow_none=True)
    threads = _positive_int(threads, "threads")
    if progress is not None and not isinstance(progress, bool):
        raise TypeError(f"map_parquet: progress must be True, False or None, "
                        f"got {type(progress).__name__}")
    if not isinstance(overwrite, bool):
        raise TypeError(f"map_parquet: overwrite must be a bool, got {type(overwrite).__name__}")
    check_engine(engine, "map_parquet")
    if "row_group_size" in write_options:
        raise TypeError("map_parquet: row_group_size is not a write option here: each batch "
                        "is one row group, so give batch_rows= instead")
    if not isinstance(record_lengths, bool):
        raise TypeError(f"map_parquet: record_lengths must be a bool, "
                        f"got {type(record_lengths).__name__}")
    src = resolve_source(source, "map_parquet", filesystem=filesystem)
    kind, base, files = src
    dfs, dest = _split_dest(dest, filesystem)
    if dfs is None:
        local = src.filesystem is None
        dest = _check_dest(dest, kind if local else None, base, files if local else [],
                           overwrite)
    else:
        dest = _check_remote_dest(dfs, dest, src, overwrite)
    if progress is None:
        progress = _isatty(sys.stderr)

    t0 = time.perf_counter()
    sizes = _sizes(src)
    if dfs is None:
        parent, name = os.path.split(dest)
        os.makedirs(parent, exist_ok=True)
        staging = os.path.join(parent, f".{name}.lodarrow-tmp-{uuid.uuid4().hex[:12]}")
        os.mkdir(staging)
        remote_staging = None
    else:
        # each file is written here, then uploaded under a hidden prefix beside dest
        import tempfile

        staging = tempfile.mkdtemp(prefix="lodarrow-map-")
        parent, _, name = dest.rpartition("/")
        remote_staging = join(parent, f".{name}.lodarrow-tmp-{uuid.uuid4().hex[:12]}")
    bar = Progress(len(files), sum(sizes), enabled=progress)
    stop = threading.Event()
    try:
        def one(k):
            path, rel = files[k]
            out_path = os.path.join(staging, *rel.split("/"))
            result = _map_file(pq, path, src.filesystem, out_path, udf, batch_rows, engine,
                               write_options, bar, sizes[k], stop, record_lengths)
            if remote_staging is not None:
                _upload(out_path, dfs, join(remote_staging, rel))
            return result

        if threads == 1 or len(files) == 1:
            results = [one(k) for k in range(len(files))]
        else:
            results = _in_threads(one, len(files), threads, stop)
        if remote_staging is None:
            _publish(staging, dest, overwrite)
        else:
            _publish_remote(dfs, remote_staging, dest, [rel for _, rel in files])
    except BaseException:
        stop.set()
        if remote_staging is not None:
            _remove_remote(dfs, remote_staging)
        shutil.rmtree(staging, ignore_errors=True)
        bar.close(ok=False)
        raise
    if remote_staging is not None:
        shutil.rmtree(staging, ignore_errors=True)
        dest = display_path(dest, dfs)
    rows = sum(r[0] for r in results)
    summary = MapSummary(dest=dest, files=len(files), rows=rows,
                         rows_out=sum(r[1] for r in results), bytes_in=sum(sizes),
                         bytes_out=sum(r[2] for r in results),
                         seconds=time.perf_counter() - t0)
    bar.close(ok=True)
    return summary


def _split_dest(dest, filesystem):
    if not isinstance(dest, (str, os.PathLike)) or isinstance(os.fspath(dest), bytes):
        raise TypeError(f"map_parquet: dest must be a path (str or path-like), "
                        f"got {type(dest).__name__}")
    return split_source(os.fspath(dest), as_filesystem(filesystem, "map_parquet"),
                        "map_parquet", "dest")


def _sizes(src):
    if src.filesystem is None:
        return [os.path.getsize(path) for path, _ in src.files]
    return [info.size for info in src.filesystem.get_file_info([p for p, _ in src.files])]


def _check_remote_dest(fs, dest, src, overwrite):
    """``dest`` on an object store or other filesystem, checked as :func:`_check_dest`."""
    import pyarrow.fs as pafs

    dest = dest.rstrip("/")
    shown = display_path(dest, fs)
    if not dest or "/" not in dest:
        raise ValueError(f"map_parquet: dest {shown!r} must be a directory below a bucket "
                         f"(bucket/prefix)")
    info = fs.get_file_info(dest)
    exists = info.type == pafs.FileType.File or (
        info.type == pafs.FileType.Directory
        and fs.get_file_info(pafs.FileSelector(dest, recursive=False)))
    if exists and not overwrite:
        raise FileExistsError(f"map_parquet: dest {shown!r} exists and is not an empty "
                              f"directory; pass overwrite=True to replace it, or choose "
                              f"another path")
    if src.filesystem is not None and src.filesystem.type_name == fs.type_name:
        for path, _ in src.files:
            if path == dest or path.startswith(dest + "/"):
                raise ValueError(f"map_parquet: the input file {src.name(path)!r} is inside "
                                 f"dest {shown!r}; write the output somewhere else")
        if src.kind == "directory" and (dest == src.base or dest.startswith(src.base + "/")):
            raise ValueError(f"map_parquet: dest {shown!r} is inside the source directory "
                             f"{src.name(src.base)!r}, so its files would become part of "
                             f"that dataset; write the output somewhere else")
    return dest


def _upload(local, fs, remote):
    """Copy a finished output file to the remote staging prefix, then remove the local copy
    (local disk holds about one file per thread)."""
    import pyarrow.fs as pafs

    pafs.copy_files(local, remote, source_filesystem=pafs.LocalFileSystem(),
                    destination_filesystem=fs)
    os.remove(local)


def _publish_remote(fs, staging, dest, rels):
    """Move every staged object under ``dest``, then write ``_SUCCESS``.

    Object stores have no directory rename: each object is copied server-side and deleted,
    so a reader sees, until the move starts, no ``dest`` (or the old one); during it, a
    growing set of whole files; ``_SUCCESS`` once every file is in place.
    """
    import pyarrow.fs as pafs

    info = fs.get_file_info(dest)
    if info.type == pafs.FileType.File:
        fs.delete_file(dest)
    elif info.type == pafs.FileType.Directory:
        fs.delete_dir_contents(dest)  # overwrite (checked before the run)
    moves = [(join(staging, rel), join(dest, rel)) for rel in rels]
    staged = {i.path for i in fs.get_file_info(pafs.FileSelector(staging, recursive=True))}
    for a, b in moves:
        if a in staged:
            fs.move(a, b)
    with fs.open_output_stream(join(dest, "_SUCCESS")):
        pass
    _remove_remote(fs, staging)


def _remove_remote(fs, path):
    try:
        fs.delete_dir(path)
    except (pa.ArrowException, OSError):
        pass


class _Stopped(Exception):
    """Another file failed: this one stops (never seen by the caller)."""


def _in_threads(one, n, threads, stop):
    """``[one(k) for k in range(n)]`` on ``threads`` threads; the first error stops the rest."""
    pool = ThreadPoolExecutor(max_workers=min(threads, n), thread_name_prefix="lodarrow-map")
    futures = [pool.submit(one, k) for k in range(n)]
    try:
        wait(futures, return_when=FIRST_EXCEPTION)
    except BaseException:  # KeyboardInterrupt: the files being written stop at their next batch
        stop.set()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    failed = [f for f in futures if f.done() and not f.cancelled() and f.exception() is not None]
    if failed:
        stop.set()
        pool.shutdown(wait=True, cancel_futures=True)
        errors = [f.exception() for f in futures
                  if f.done() and not f.cancelled() and f.exception() is not None
                  and not isinstance(f.exception(), _Stopped)]
        raise errors[0]
    pool.shutdown(wait=True)
    return [f.result() for f in futures]


def _map_file(pq, path, fs, out_path, udf, batch_rows, engine, write_options, bar, size,
              stop, record_lengths):
    """One input file to one output file; returns ``(rows_in, rows_out, bytes_out)``."""
    # memory: one batch at a time, and column chunks read 1 MiB at a time rather than
    # whole (a row group of another writer may be a gigabyte); remote: ranged reads
    pf = open_parquet(path, fs, "map_parquet", pre_buffer=False, buffer_size=_READ_BUFFER)
    path = display_path(path, fs)
    with pf:
        meta = pf.metadata
        schema_in = pf.schema_arrow
        # where each row group starts, to name the row group of a failing row
        starts = [0]
        for i in range(meta.num_row_groups):
            starts.append(starts[-1] + meta.row_group(i).num_rows)
        rows = batch_rows or _auto_batch_rows(meta)
        schema_out = None
        if hasattr(udf, "output_schema"):
            try:
                schema_out = udf.output_schema(schema_in)
            except Exception as exc:
                _reraise(exc, f"map_parquet: {path!r}: the udf's output_schema "
                                    f"refuses the file's schema")
        folder, leaf = os.path.split(out_path)
        os.makedirs(folder, exist_ok=True)
        tmp = os.path.join(folder, f".{leaf}.tmp")
        stream = _Outputs(pf, udf, rows, schema_out, path, starts, bar, size, stop,
                          record_lengths)
        try:
            first = next(stream, None)
            if stream.schema is None:  # a file without rows still gives a file, with the schema
                empty = pa.RecordBatch.from_pylist([], schema=schema_in)
                stream.schema = _call(udf, empty, path, starts, 0).schema
            _write_file(pq, stream, first, tmp, rows, engine, write_options)
            if record_lengths:  # in the footer, bound to the row groups just written
                recorder = stream.recorder or LengthsRecorder(stream.schema)
                recorder.stamp(tmp, fn="map_parquet")
            os.replace(tmp, out_path)
        except BaseException:
            remove_partial(tmp)
            raise
    bar.file_done()
    return stream.rows, stream.rows_out, os.path.getsize(out_path)


class _Outputs:
    """The udf's checked output batches of one file, read a batch at a time.

    Counts the rows read and written, advances the progress bar, names the file, the row
    group and the row in every error, and checks every output batch against ``schema`` (the
    udf's ``output_schema``, else the first output's), which is known from the first batch on.
    Either writer consumes it: pyarrow's in this thread, polars' from its own.
    """

    def __init__(self, pf, udf, rows, schema, path, starts, bar, size, stop, record=False):
        self._batches = pf.iter_batches(batch_size=rows, use_threads=True)
        self._record = record
        self.recorder = None  # the output's lengths, for its footer
        self._udf, self.path, self._starts = udf, path, starts
        self._bar, self._stop = bar, stop
        self._bytes_per_row = size / max(pf.metadata.num_rows, 1)
        self.schema = schema
        self.rows = self.rows_out = 0
        self.last_row = 0  # where the last batch given out starts
        self.error = None  # what reading or the udf raised, seen by polars' thread

    def __iter__(self):
        return self

    def __next__(self):
        try:
            return self._next()
        except StopIteration:
            raise
        except BaseException as exc:
            self.error = exc
            raise

    def where(self):
        """``row group g, row r`` of the last batch given out."""
        return _where(self._starts, self.last_row)

    def _next(self):
        path, starts, row = self.path, self._starts, self.rows
        try:
            batch = next(self._batches)
        except (pa.ArrowException, OSError) as exc:
            _reraise(exc, f"map_parquet: {path!r}, {_where(starts, row)}: cannot read")
        if self._stop.is_set():
            raise _Stopped()
        out = _call(self._udf, batch, path, starts, row)
        if self.schema is None:
            self.schema = out.schema
        elif not out.schema.equals(self.schema, check_metadata=False):
            raise ValueError(
                f"map_parquet: {path!r}, {_where(starts, row)}: the udf returned a batch "
                f"whose schema differs from the output file's:\n{out.schema}\nexpected:\n"
                f"{self.schema}\nevery batch of a file must give the same schema")
        if self._record:
            if self.recorder is None:
                self.recorder = LengthsRecorder(self.schema)
            self.recorder.add(out)
        self.last_row = row
        self.rows += batch.num_rows
        self.rows_out += out.num_rows
        self._bar.advance(batch.num_rows, self._bytes_per_row * batch.num_rows)
        return out


def _write_file(pq, stream, first, tmp, rows, engine, write_options):
    """Write ``first`` and the rest of ``stream`` to ``tmp``, a row group per batch of ``rows``."""
    schema, path = stream.schema, stream.path
    if FOOTER_KEY in (schema.metadata or {}):  # a record copied from another file
        schema = schema.with_metadata({k: v for k, v in schema.metadata.items()
                                       if k != FOOTER_KEY})
    batches = stream if first is None else itertools.chain([first], stream)
    if choose_engine(engine, schema, write_options, schema.metadata, "map_parquet") == "polars":
        # polars encodes a batch's row group in its own threads while this file's next
        # batch is read and mapped (docs/performance.md, "Datasets")
        try:
            sink_polars(batches, schema, tmp, {**write_options, "row_group_size": rows})
        except Exception as exc:
            if stream.error is not None:  # reading or the udf failed: raised as it was
                raise stream.error
            _reraise(exc, f"map_parquet: {path!r}: cannot write the output")
        return
    try:
        writer = pq.ParquetWriter(tmp, schema, **write_options)
    except TypeError as exc:
        raise TypeError(f"map_parquet: bad write option for pyarrow.parquet.ParquetWriter "
                        f"({exc})") from None
    except (pa.ArrowException, OSError) as exc:
        _reraise(exc, f"map_parquet: {path!r}: cannot open the output file")
    try:
        for out in batches:
            try:
                writer.write(out)
            except (pa.ArrowException, OSError) as exc:
                _reraise(exc, f"map_parquet: {path!r}, {stream.where()}: cannot write "
                              f"the output")
    except BaseException:
        try:
            writer.close()
        except Exception:  # the first error is the one to report
            pass
        raise
    writer.close()


def _call(udf, batch, path, starts, row):
    """``udf(batch)``, checked; an error names the file, the row group and the first bad row."""
    try:
        out = udf(batch)
    except Exception as exc:
        # lodarrow's table engine names the batch row and gives that row's own message
        bad = getattr(exc, "table_row", None)
        if bad is None:
            bad = _first_failing_row(udf, batch)
        else:
            exc.args = (exc.row_message,)
        if bad is None:
            where = _where(starts, row, row + batch.num_rows)
        else:
            where = _where(starts, row + bad)
        _reraise(exc, f"map_parquet: {path!r}, {where}: the udf failed")
    if not isinstance(out, (pa.RecordBatch, pa.Table)):
        raise TypeError(f"map_parquet: {path!r}, {_where(starts, row)}: the udf returned "
                        f"{type(out).__name__}; it must return a pyarrow.RecordBatch or Table")
    return out


def _first_failing_row(udf, batch):
    """The row whose inclusion makes ``udf`` fail on a prefix of ``batch``, or None.

    Rows are independent, so if the prefix of ``k`` rows fails, so does every longer one:
    a binary search over prefix lengths finds the shortest failing one in log2(n) calls.
    None when the empty batch fails too (the error is not about a row).
    """
    def fails(k):
        try:
            udf(batch.slice(0, k))
        except Exception:
            return True
        return False

    if fails(0):
        return None
    lo, hi = 0, batch.num_rows  # prefix lo succeeds, prefix hi fails
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fails(mid):
            hi = mid
        else:
            lo = mid
    return hi - 1


def _where(starts, row, stop=None):
    """``row group g, row r`` (or, for rows ``row`` to ``stop - 1``, their groups and rows)."""
    def group(r):
        return min(max(bisect.bisect_right(starts, r) - 1, 0), max(len(starts) - 2, 0))

    if stop is None or stop - row <= 1:
        return f"row group {group(row)}, row {row}"
    first, last = group(row), group(stop - 1)
    groups = f"row group {first}" if first == last else f"row groups {first}-{last}"
    return f"{groups}, rows {row}-{stop - 1}"


def _auto_batch_rows(meta):
    """Rows per batch for about ``DEFAULT_BATCH_BYTES`` decoded, from row-group metadata."""
    nbytes = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
    if meta.num_rows == 0 or nbytes == 0:
        return _MAX_AUTO_ROWS
    rows = int(DEFAULT_BATCH_BYTES * meta.num_rows // nbytes)
    return max(_MIN_AUTO_ROWS, min(_MAX_AUTO_ROWS, rows))


def _publish(staging, dest, overwrite):
    """Rename the complete staging directory to ``dest`` (replacing it if ``overwrite``)."""
    if not os.path.lexists(dest):
        os.rename(staging, dest)
        return
    if os.path.isdir(dest) and not os.path.islink(dest) and not os.listdir(dest):
        os.rmdir(dest)
        os.rename(staging, dest)
        return
    # overwrite (checked before the run): move the old dataset aside, then delete it
    old = f"{staging}-old"
    os.rename(dest, old)
    os.rename(staging, dest)
    if os.path.isdir(old) and not os.path.islink(old):
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.remove(old)


def free_dest(dest, overwrite, fn):
    """``dest`` as an absolute path, refused (``FileExistsError``) when it exists and is not
    an empty directory unless ``overwrite``: map_parquet's rule, and the engine writers'."""
    dest = os.path.abspath(os.fspath(dest))
    if os.path.lexists(dest):
        is_empty_dir = os.path.isdir(dest) and not os.path.islink(dest) and not os.listdir(dest)
        if not is_empty_dir and not overwrite:
            raise FileExistsError(f"{fn}: dest {dest!r} exists and is not an empty directory; "
                                  f"pass overwrite=True to replace it, or choose another path")
    return dest


def _check_dest(dest, kind, base, files, overwrite):
    if not isinstance(dest, (str, os.PathLike)):
        raise TypeError(f"map_parquet: dest must be a path (str or path-like), "
                        f"got {type(dest).__name__}")
    dest = free_dest(dest, overwrite, "map_parquet")
    real_dest = os.path.realpath(dest)
    for path, _ in files:
        if _inside(os.path.realpath(path), real_dest):
            raise ValueError(f"map_parquet: the input file {path!r} is inside dest {dest!r}; "
                             f"write the output somewhere else")
    if kind == "directory" and _inside(real_dest, os.path.realpath(base)):
        raise ValueError(f"map_parquet: dest {dest!r} is inside the source directory "
                         f"{base!r}, so its files would become part of that dataset; write "
                         f"the output somewhere else")
    return dest


def _inside(path, folder):
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _positive_int(value, name, allow_none=False):
    if value is None and allow_none:
        return None
    from lodarrow._validation import as_positive_int

    return as_positive_int(value, f"map_parquet: {name}")


def _isatty(stream):
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
