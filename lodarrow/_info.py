"""``lodarrow info PATH``: the LoD structure of each list column of a file or dataset.

PATH is a Parquet or Arrow IPC file, or a Parquet dataset directory (every data file under it,
as :func:`lodarrow.map_parquet` reads it; statistics are totals over the files).  Files are
read batch by batch (Parquet: ``iter_batches``; Arrow IPC: memory-mapped record batches), so
memory stays bounded by one batch whatever the size.  Only the list offsets and validity
bitmaps are inspected; values are counted, not read.
"""

import json
import math
import os

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lodarrow._interop._arrow_layout import numpy_dtype, split_levels, type_chain

__all__ = ["info"]

_BATCH = 65536


def info(path, as_json=False):
    """Describe the LoD structure of every column of a Parquet or Arrow IPC file.

    Parameters
    ----------
    path : str or path-like
        A Parquet file, an Arrow IPC file (Feather v2), an Arrow IPC stream, or a directory
        of Parquet files (a dataset: hive partitions and nested directories included; names
        starting with ``.`` or ``_`` are skipped).
    as_json : bool, default False
        Return JSON (for a machine) instead of text (for a person).

    Returns
    -------
    str
        For each list column: its Arrow type, the number of LoD levels, and per level the
        number of sequences, their length min / mean / max, the number of empty sequences and
        of null lists; then the value dtype, the feature shape and the number of data rows.
        Other columns are listed as not list columns.  The JSON form has the keys ``path``,
        ``format``, ``num_rows``, ``num_batches`` (Parquet: ``num_row_groups``) and
        ``columns`` (a list of objects with ``name``, ``arrow_type``, ``list_column`` and, for
        list columns, ``lod_level``, ``levels``, ``dtype``, ``supported``,
        ``feature_shape``, ``rows``, ``null_values``).  For a directory ``format`` is
        ``"parquet-dataset"``, the statistics are totals over its files, and ``num_files``
        and ``files`` (``path`` relative to the directory, ``num_rows``,
        ``num_row_groups``, ``bytes``) are added.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        If the file is neither Parquet nor Arrow IPC; for a directory, if it holds no data
        file, a file is not Parquet, or a column's type differs between files (the message
        names the file).

    Examples
    --------
    >>> import numpy as np, lodarrow as la, tempfile, os, json
    >>> path = os.path.join(tempfile.mkdtemp(), "t.parquet")
    >>> la.write_parquet(la.LoDTensor(np.arange(4.0), lengths=[[3, 0, 1]]), path)
    >>> from lodarrow._info import info
    >>> json.loads(info(path, as_json=True))["columns"][0]["levels"][0]["sequences"]
    3
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        report = _dataset(path)
        return json.dumps(report, indent=2) if as_json else _text(report)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"info: no such file: {path!r}")
    fmt, schema, extra, read = _open(path)
    columns = [_Column(field) for field in schema]
    wanted = [i for i, col in enumerate(columns) if col.list_column]
    num_rows = 0
    batches = read(wanted)
    try:
        for rows, arrays in batches:
            num_rows += rows
            for i, arr in zip(wanted, arrays):
                columns[i].add(arr)
    finally:
        batches.close()
    if "num_rows" in extra:
        num_rows = extra.pop("num_rows")
    report = {"path": path, "format": fmt, "num_rows": num_rows, **extra,
              "columns": [col.report() for col in columns]}
    return json.dumps(report, indent=2) if as_json else _text(report)


def _dataset(root):
    """The report of a Parquet dataset directory: per-column totals over its files."""
    from lodarrow._tables._dataset import resolve_source

    _, _, files = resolve_source(root, "info")
    columns, num_rows, groups, listing = {}, 0, 0, []
    for path, rel in files:
        fmt, schema, extra, read = _open(path)
        if fmt != "parquet":
            raise ValueError(f"info: {path!r} in the dataset directory is not a Parquet file")
        wanted = []
        for i, field in enumerate(schema):
            col = columns.get(field.name)
            if col is None:
                col = columns[field.name] = _Column(field)
            elif type_chain(col.type)[0] != type_chain(field.type)[0]:
                raise ValueError(f"info: column {field.name!r} is {field.type} in {path!r} but "
                                 f"{col.type} in an earlier file; a dataset's files must agree")
            if col.list_column:
                wanted.append((i, col))
        batches = read([i for i, _ in wanted])
        try:
            for _, arrays in batches:
                for (_, col), arr in zip(wanted, arrays):
                    col.add(arr)
        finally:
            batches.close()
        num_rows += extra["num_rows"]
        groups += extra["num_row_groups"]
        listing.append({"path": rel, "num_rows": extra["num_rows"],
                        "num_row_groups": extra["num_row_groups"],
                        "bytes": os.path.getsize(path)})
    return {"path": root, "format": "parquet-dataset", "num_rows": num_rows,
            "num_row_groups": groups, "num_files": len(files), "files": listing,
            "columns": [col.report() for col in columns.values()]}


def _open(path):
    """``(format, schema, extra, read)``: ``read(indices)`` yields ``(rows, arrays)`` batches."""
    with open(path, "rb") as f:
        head = f.read(8)
    if head[:4] == b"PAR1":
        import pyarrow.parquet as pq

        try:
            pf = pq.ParquetFile(path, pre_buffer=False)  # memory: one batch at a time
        except (pa.ArrowInvalid, OSError) as exc:
            raise ValueError(f"info: {path!r} is not a valid Parquet file ({exc})") from None
        extra = {"num_rows": pf.metadata.num_rows,
                 "num_row_groups": pf.metadata.num_row_groups}

        def read(indices):
            with pf:
                if not indices:
                    return
                for batch in pf.iter_batches(batch_size=_BATCH, columns=[
                        pf.schema_arrow.names[i] for i in indices]):
                    yield batch.num_rows, batch.columns

        return "parquet", pf.schema_arrow, extra, read
    try:
        source = pa.memory_map(path)
        if head[:6] == b"ARROW1":
            reader = pa.ipc.open_file(source)
            batches = (reader.get_batch(i) for i in range(reader.num_record_batches))
            fmt, extra = "arrow-ipc-file", {"num_batches": reader.num_record_batches}
        else:
            reader = pa.ipc.open_stream(source)
            batches, fmt, extra = iter(reader), "arrow-ipc-stream", {}
    except (pa.ArrowInvalid, OSError):
        raise ValueError(f"info: {path!r} is neither a Parquet nor an Arrow IPC file") from None

    def read(indices):
        with source:
            for batch in batches:
                yield batch.num_rows, [batch.column(i) for i in indices]

    return fmt, reader.schema, extra, read


class _LevelStats:
    __slots__ = ("sequences", "nulls", "empty", "total", "min", "max")

    def __init__(self):
        self.sequences = self.nulls = self.empty = self.total = 0
        self.min = self.max = None

    def add(self, lengths, nulls):
        self.sequences += lengths.shape[0] + nulls
        self.nulls += nulls
        if lengths.shape[0]:
            self.empty += int(np.count_nonzero(lengths == 0))
            self.total += int(lengths.sum())
            lo, hi = int(lengths.min()), int(lengths.max())
            self.min = lo if self.min is None else min(self.min, lo)
            self.max = hi if self.max is None else max(self.max, hi)

    def report(self, level):
        valid = self.sequences - self.nulls
        return {"level": level, "sequences": self.sequences,
                "min": self.min, "mean": (self.total / valid) if valid else None,
                "max": self.max, "empty": self.empty, "nulls": self.nulls}


class _Column:
    """Statistics of one column, accumulated batch by batch."""

    def __init__(self, field):
        self.name = field.name
        self.type = field.type
        kinds, leaf = type_chain(field.type)
        self.list_column = bool(kinds)
        if not self.list_column:
            return
        levels, self.features = split_levels(kinds)
        self.kinds = kinds
        self.n_levels = len(levels)
        if pa.types.is_dictionary(leaf):
            leaf = leaf.value_type
        dtype = numpy_dtype(leaf)
        self.dtype = str(dtype) if dtype is not None else str(leaf)
        self.supported = dtype is not None
        self.stats = [_LevelStats() for _ in range(self.n_levels)]
        self.rows = 0
        self.null_values = 0
        self.null_rows = 0

    def add(self, arr):
        node = arr
        for k in range(self.n_levels):
            lengths = pc.list_value_length(node)
            nulls = lengths.null_count
            if nulls:
                lengths = lengths.drop_null()
            self.stats[k].add(lengths.to_numpy(zero_copy_only=False), nulls)
            node = node.flatten()  # skips the values behind null lists; handles slices
        self.rows += len(node)
        for _ in self.features:
            self.null_rows += node.null_count
            node = node.flatten()
        self.null_values += node.null_count

    def report(self):
        out = {"name": self.name, "arrow_type": str(self.type), "list_column": self.list_column}
        if self.list_column:
            out.update({
                "lod_level": self.n_levels,
                "levels": [s.report(k) for k, s in enumerate(self.stats)],
                "dtype": self.dtype,
                "supported": self.supported,
                "feature_shape": list(self.features),
                "rows": self.rows,
                "null_rows": self.null_rows,
                "null_values": self.null_values,
            })
        return out


def _fmt(value):
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.2f}" if math.isfinite(value) else str(value)
    return str(value)


def _text(report):
    head = f"{report['path']}: {report['format']}, {report['num_rows']} rows"
    if "num_files" in report:
        head += f", {report['num_files']} files"
    if "num_row_groups" in report:
        head += f", {report['num_row_groups']} row groups"
    if "num_batches" in report:
        head += f", {report['num_batches']} record batches"
    lines = [head]
    for col in report["columns"]:
        lines.append("")
        lines.append(f"column {col['name']!r}: {col['arrow_type']}")
        if not col["list_column"]:
            lines.append("  not a list column")
            continue
        dtype = col["dtype"] + ("" if col["supported"] else " (not a LoDTensor dtype)")
        lines.append(f"  LoD levels: {col['lod_level']}   dtype: {dtype}   feature shape: "
                     f"{tuple(col['feature_shape'])}   rows: {col['rows']}")
        if col["levels"]:
            table = [("level", "sequences", "min", "mean", "max", "empty", "nulls")]
            for lv in col["levels"]:
                table.append(tuple(_fmt(lv[k]) for k in
                                   ("level", "sequences", "min", "mean", "max", "empty",
                                    "nulls")))
            widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
            for row in table:
                lines.append("  " + "  ".join(cell.rjust(w) for cell, w in zip(row, widths)))
        nulls = []
        if col["null_rows"]:
            nulls.append(f"{col['null_rows']} null fixed-size rows")
        if col["null_values"]:
            nulls.append(f"{col['null_values']} null values")
        if nulls:
            lines.append("  " + ", ".join(nulls) + " (from_arrow raises on these)")
    return "\n".join(lines)
