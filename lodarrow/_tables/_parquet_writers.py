"""Which Parquet writer encodes a table: polars' Rust writer where it gives pyarrow's file.

pyarrow's writer builds a nested column's repetition and definition levels one value at a
time on one thread; polars' writer (the ``polars`` package, when installed) encodes the same
columns about 3x faster (docs/performance.md#parquet-writes).  It stores its own Arrow schema,
with ``large_list`` and ``large_string`` where the table had ``list`` and ``string``, so
lodarrow replaces that stored schema (the ``ARROW:schema`` key-value entry, which is how
pyarrow records a table's exact types) with the table's own: pyarrow, and lodarrow through it,
read back the very table pyarrow's writer would give, with its offset widths, fixed-size lists
and schema metadata; DuckDB, Spark and polars read the Parquet columns, which are the same
physical LIST columns either writer writes.

polars is used only where that holds: every column of a type whose Parquet form both writers
write alike (:func:`polars_writes_type`) and only options both understand
(:data:`POLARS_OPTIONS`); anything else goes to pyarrow, so the choice never changes a file.
"""

import base64
import os

import pyarrow as pa

__all__ = ["ENGINES", "choose_engine", "remove_partial", "sink_polars", "write_polars"]

#: The values of ``write_parquet(..., engine=)``.
ENGINES = ("auto", "pyarrow", "polars")

#: ``pyarrow.parquet.write_table`` options polars' writer takes (under the same meaning).
POLARS_OPTIONS = frozenset({"compression", "compression_level", "row_group_size"})

def polars_writes_type(typ):
    """True if polars writes a column of Arrow type ``typ`` as pyarrow would.

    Numbers, booleans, strings, binary, dates, timestamps (ms, us, ns), decimals and nulls,
    and lists, large lists, fixed-size lists and structs of them.  Not here (pyarrow writes
    them): fixed-size binary, ``time32``, ``date64`` and durations, which polars converts to
    another type or unit, dictionaries, maps and views.
    """
    t = pa.types
    if (t.is_integer(typ) or t.is_floating(typ) or t.is_boolean(typ) or t.is_string(typ)
            or t.is_large_string(typ) or t.is_binary(typ) or t.is_large_binary(typ)
            or t.is_date32(typ) or t.is_decimal128(typ) or t.is_null(typ)):
        return True
    if t.is_timestamp(typ):
        return typ.unit != "s"
    if t.is_list(typ) or t.is_large_list(typ) or t.is_fixed_size_list(typ):
        return polars_writes_type(typ.value_type)
    if t.is_struct(typ):
        return typ.num_fields > 0 and all(polars_writes_type(f.type) for f in typ)
    return False


def check_engine(engine, fn):
    """Check ``engine`` (one of :data:`ENGINES`) before any work; ``fn`` names the caller."""
    if not isinstance(engine, str):
        raise TypeError(f"{fn}: engine must be one of "
                        f"{', '.join(map(repr, ENGINES))}, got {type(engine).__name__}")
    if engine not in ENGINES:
        raise ValueError(f"{fn}: engine must be one of {', '.join(map(repr, ENGINES))}, "
                         f"got {engine!r}")


def choose_engine(engine, schema, kwargs, metadata, fn="write_parquet"):
    """``"polars"`` or ``"pyarrow"``: the writer ``fn(..., engine=engine)`` uses for ``schema``.

    ``"auto"`` takes polars where it is installed and writes the same file; ``"polars"``
    raises, naming the reason, where it would not.
    """
    check_engine(engine, fn)
    if engine == "pyarrow":
        return "pyarrow"
    reason = _polars_refusal(schema, kwargs, metadata)
    if reason is None:
        try:
            import polars  # noqa: F401
        except ImportError:
            reason = "polars is not installed (pip install polars)"
    if reason is None:
        return "polars"
    if engine == "polars":
        raise ValueError(f"{fn}: engine='polars' cannot write this table: {reason}; "
                         f"engine='auto' or 'pyarrow' writes it with pyarrow")
    return "pyarrow"


def _polars_refusal(schema, kwargs, metadata):
    """Why polars would not write pyarrow's file of a table of ``schema`` (None: it would)."""
    extra = sorted(set(kwargs) - POLARS_OPTIONS)
    if extra:
        return f"pyarrow's option {extra[0]}= has no polars equivalent"
    if not isinstance(kwargs.get("compression", "snappy"), (str, type(None))):
        return "a compression per column is pyarrow's option"
    if len(schema) == 0:
        return "the table has no columns"
    for field in schema:
        if not polars_writes_type(field.type):
            return f"column {field.name!r} is of type {field.type}, which polars converts"
    for key, value in (metadata or {}).items():
        try:
            key.decode("utf-8"), value.decode("utf-8")
        except UnicodeDecodeError:
            return "the schema metadata is not text"
    return None


def write_polars(table, path, kwargs, metadata, statistics):
    """Write ``table`` with polars' writer, storing ``table``'s own Arrow schema.

    ``metadata`` (bytes -> bytes) becomes the schema's metadata and the file's key-value
    metadata, as pyarrow's writer stores it.  Row groups are polars' size unless
    ``row_group_size`` is among ``kwargs``.  ``statistics``: whether polars writes column
    statistics (one setting for every column).  A file left half-written by an error is
    removed.
    """
    import polars as pl

    options = _polars_options(table.schema, kwargs, metadata, statistics)
    try:
        pl.from_arrow(table, rechunk=False).write_parquet(path, **options)
    except Exception:
        remove_partial(path)
        raise


def sink_polars(batches, schema, path, kwargs):
    """Stream record batches of ``schema`` into one Parquet file with polars' writer.

    polars pulls the batches (``polars.io.plugins.register_io_source``) and encodes each row
    group in its own threads, without the GIL, while the next batch is produced: what
    ``map_parquet`` needs to overlap reading, the udf and encoding.  The file is pyarrow's,
    as with :func:`write_polars` (``schema`` and its metadata stored).  Row groups hold
    ``kwargs["row_group_size"]`` rows (the caller's batch size), which also bounds what
    polars buffers.  An exception raised by ``batches`` propagates unchanged; the caller
    removes the partial file.

    Parameters
    ----------
    batches : iterator of pyarrow.RecordBatch or pyarrow.Table
        Every one of ``schema`` exactly (the caller checks it).
    schema : pyarrow.Schema
        The file's schema; its metadata becomes the file's key-value metadata.
    path : str
        Where to write.
    kwargs : dict
        Options among :data:`POLARS_OPTIONS`.
    """
    import polars as pl
    from polars.io.plugins import register_io_source

    metadata = schema.metadata
    frame_schema = pl.from_arrow(schema.empty_table()).schema

    def source(with_columns, predicate, n_rows, batch_size):
        # polars asks for every column, with no filter or limit: the frame is only written
        for batch in batches:
            yield pl.from_arrow(batch, rechunk=False)

    frame = register_io_source(source, schema=frame_schema)
    frame.sink_parquet(path, **_polars_options(schema, kwargs, metadata, statistics=True))


def _polars_options(schema, kwargs, metadata, statistics):
    """polars' ``write_parquet`` / ``sink_parquet`` options for pyarrow's file of ``schema``."""
    schema = schema.with_metadata(metadata or None)
    stored = {key.decode(): value.decode() for key, value in (metadata or {}).items()}
    stored["ARROW:schema"] = base64.b64encode(schema.serialize().to_pybytes()).decode()
    compression = kwargs.get("compression", "snappy")
    options = {"compression": "uncompressed" if compression in (None, "none", "NONE")
               else compression.lower(),
               "statistics": statistics, "metadata": stored}
    if kwargs.get("row_group_size") is not None:
        # else polars' own size (smaller than pyarrow's 2**20 rows): its row groups are
        # encoded in parallel, and a row group of 2**20 rows left one core idle
        options["row_group_size"] = kwargs["row_group_size"]
    if kwargs.get("compression_level") is not None:
        options["compression_level"] = kwargs["compression_level"]
    return options


def remove_partial(path):
    """Remove the file a failed write left at ``path`` (nothing for a file-like object)."""
    if isinstance(path, (str, os.PathLike)):
        try:
            os.remove(path)
        except OSError:
            pass
