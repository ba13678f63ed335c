"""What the training layer reads: a LoDTensor, an Arrow column, a table, a Hugging Face
``datasets.Dataset`` or a Parquet file / dataset, cut into *parts* (row groups).

See docs/training.md#what-is-read for what each source costs.

The loader's sources, one class a kind (:class:`~lodarrow._training._table_source.TableSource`,
:class:`~lodarrow._training._parquet_source.ParquetSource`,
:class:`~lodarrow._training._ray.RaySource`; a mixture is one of the first two over its sources
side by side), each made when the loader is made and offering the same interface:

- ``kind``: how its sequences are read: ``"whole"`` (in memory: ``seqs`` and ``extras``),
  ``"blocks"`` (any rows, any order: ``read(rows, stop)``) or ``"stream"`` (blocks in one
  order: ``decoded_blocks(wanted, separator)``);
- what the plan and the checks before the first batch need, from the lengths pass:
  ``column``, ``label``, ``lengths``, ``row_nulls``, ``value_nulls``, ``extra_specs``,
  ``empty`` (its sequences' dtype and feature shape), ``nbytes``, ``part_starts`` (the first
  sequence of each row group, or None);
- where a row lives, as messages name it: ``where(row)``, ``name_sequence(k)``;
- ``file_list()`` (what a saved state's fingerprint names), ``cell_rows(select)`` (the rows
  of a planning cell) and ``add_separator(separator)`` (mode "blocks").
"""

import os

import numpy as np
import pyarrow as pa

from lodarrow._tensor import LoDTensor
from lodarrow._training._buffers import list_offsets
from lodarrow._training._readahead import DEFERRED

#: The Parquet source grammar is map_parquet's (a file, a directory, a glob, a list of files).
_PATH_TYPES = (str, os.PathLike, list, tuple)


def hf_table(obj):
    """The Arrow table behind a Hugging Face ``datasets.Dataset`` (no copy), or None."""
    if isinstance(obj, (pa.Array, pa.ChunkedArray, pa.Table, pa.RecordBatch, LoDTensor)):
        return None  # (ChunkedArray.data is a deprecated alias: a FutureWarning)
    data = getattr(obj, "data", None)
    table = getattr(data, "table", None)
    if not isinstance(table, pa.Table) or not hasattr(obj, "_indices"):
        return None
    indices = obj._indices  # a select / shuffle: an index mapping over the table
    if indices is not None:
        table = table.take(indices.column(0))
    return table


def is_parquet_source(source):
    return isinstance(source, _PATH_TYPES) and not isinstance(source, bytes)


def column_of(source, column, fn):
    """The column ``column`` of a table-like ``source`` as a ``pa.ChunkedArray`` or ``pa.Array``;
    a LoDTensor, an Arrow array or chunked array is returned as it is."""
    if isinstance(source, (LoDTensor, pa.Array, pa.ChunkedArray)):
        if column is not None:
            raise ValueError(f"{fn}: column must be None when source is a single column "
                             f"({type(source).__name__}); got {column!r}")
        return source
    table = hf_table(source)
    if table is None and isinstance(source, (pa.Table, pa.RecordBatch)):
        table = source
    if table is None:
        raise TypeError(f"{fn}: source must be a LoDTensor, a pyarrow Array, ChunkedArray, "
                        f"Table or RecordBatch, a datasets.Dataset or a Parquet path, got "
                        f"{type(source).__name__}")
    return table.column(pick_column(table.schema, column, fn))


def pick_column(schema, column, fn):
    """The name of the column to read: ``column``, or the one column of ``schema``."""
    if column is None:
        if len(schema.names) != 1:
            raise ValueError(f"{fn}: the source has {len(schema.names)} columns "
                             f"({', '.join(schema.names)}); name one with column=")
        return schema.names[0]
    if not isinstance(column, str):
        raise TypeError(f"{fn}: column must be a column name (str), got {type(column).__name__}")
    if column not in schema.names:
        raise ValueError(f"{fn}: column {column!r} is not in the source (columns: "
                         f"{', '.join(schema.names)})")
    return column


def check_sequence_type(t, name, fn):
    """The sequence column must be a list column of values a LoDTensor holds (the message
    says what it is instead), checked before anything is read."""
    from lodarrow._interop._arrow_layout import plan

    if list_depth(t) == 0:
        raise TypeError(f"{fn}: column {name!r} is {t}, not a list column of sequences; "
                        f"name the list column with column=")
    try:
        plan(t)
    except TypeError as exc:  # e.g. strings: say which argument, not from_arrow's words
        raise TypeError(f"{fn}: column {name!r}: {str(exc).removeprefix('from_arrow: ')}"
                        ) from None


def list_depth(t):
    """How many variable-size list levels ``t`` has (the LoD levels)."""
    depth = 0
    while pa.types.is_list(t) or pa.types.is_large_list(t):
        depth += 1
        t = t.value_type
    return depth


def check_level(level, depth, fn):
    from lodarrow._validation import as_int

    if isinstance(level, (bool, np.bool_)):
        raise TypeError(f"{fn}: level must be an integer, got bool")
    level = as_int(level, f"{fn}: level")
    if not 0 <= level < max(depth, 1) or depth == 0:
        raise ValueError(f"{fn}: level must be in [0, {depth}) for a column of {depth} LoD "
                         f"level(s); got {level}")
    return level


def compose(chain, level):
    """Value offsets of the level-``level`` sequences, from the offset chain of one list array
    (``chain[0]`` over its rows, ``chain[k]`` the full offsets of the k-th child)."""
    lo, hi = chain[0][0], chain[0][-1]
    if level == 0:
        bounds = chain[0]
    else:
        for off in chain[1:level]:
            lo, hi = off[lo], off[hi]
        bounds = chain[level][lo:hi + 1]
    for off in chain[level + 1:]:
        bounds = off[bounds]
    return np.asarray(bounds, dtype=np.int64)


def arrow_chain(arr):
    """The offsets chain of a list array (see :func:`compose`) and its innermost values."""
    chain = []
    while pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type):
        chain.append(list_offsets(arr))
        arr = arr.values
    return chain, arr


def leaf_to_read(pf, column):
    """The one Parquet leaf column of ``column`` cheapest to read (by compressed size): all
    leaves of a list column carry the same repetition levels.  ``pf``: a ``ParquetFile`` or
    its ``FileMetaData``."""
    metadata = pf if hasattr(pf, "row_group") else pf.metadata  # FileMetaData: itself
    schema = metadata.schema
    leaves = [i for i in range(len(schema)) if schema.column(i).path == column
              or schema.column(i).path.startswith(column + ".")]
    if len(leaves) <= 1 or metadata.num_row_groups == 0:
        return column
    meta = metadata.row_group(0)
    best = min(leaves, key=lambda i: meta.column(i).total_compressed_size)
    return schema.column(best).path


class ParquetParts:
    """The row groups of a Parquet source: ``(path, row group, rows)`` in reading order.

    Every file's footer is read here, once: the row counts, the byte sizes, and the schema of
    each file.  :meth:`unify` checks the columns the loader reads across files.  ``cache``
    (a ``lodarrow._tables._data_cache.DataCache``, or None): where the row groups of a remote
    source are read through (docs/training.md#a-local-cache-for-remote-corpora); a local
    source is read in place.  ``decoded`` (a
    ``lodarrow._tables._decoded_cache.DecodedCache``, or None): where row groups are kept
    decoded once read (docs/training.md#a-decoded-cache), local or remote.
    """

    def __init__(self, source, fn, arg="source", filesystem=None, cache=None, decoded=None):
        from lodarrow._tables._lengths_store import fingerprint
        from lodarrow._tables._sources import resolve_source

        src = resolve_source(source, fn, arg, filesystem)
        self.fn = fn
        self.filesystem = src.filesystem  # None: local paths
        self.files = [p for p, _ in src.files]
        self.parts = []
        self.nbytes = []
        self.schemas = []
        self.metas = []
        # each file's identity for the lengths cache, from one listing and one read of its
        # tail, which gives the footer too (lodarrow._tables._lengths_store)
        self.fingerprints = []
        self._idents = {}  # a local file's (size, mtime, ctime, inode, device) as last checked
        for path in self.files:
            fp, meta = fingerprint(path, self.filesystem, fn)  # errors name the file
            if self.filesystem is None:  # the file the footer was read from, to check reads
                st = os.stat(path)
                if (st.st_size, st.st_mtime_ns) == (fp.size, fp.mtime_ns):
                    self._idents[path] = _ident(st)
            self.fingerprints.append(fp)
            self.metas.append(meta)
            self.schemas.append(meta.schema.to_arrow_schema())
            for g in range(meta.num_row_groups):
                rg = meta.row_group(g)
                self.parts.append((path, g, rg.num_rows))
                self.nbytes.append(rg.total_byte_size)
        self.schema = self.schemas[0] if self.schemas else None
        self.rows = np.array([p[2] for p in self.parts], dtype=np.int64)
        self.types = {}
        self._meta_of = dict(zip(self.files, self.metas))  # footers are not read again
        self._fingerprint_of = dict(zip(self.files, self.fingerprints))
        self.sizes = [fp.size for fp in self.fingerprints]
        self.cache = cache if self.filesystem is not None else None
        self.decoded = decoded
        self.exchange = None  # a DataLoader worker's (_exchange.Exchange): set there

    def unify(self, columns):
        """The type each of ``columns`` is read as: the same in every file, or a safe widening
        of every file's type (int32 -> int64, float32 -> float64, list -> large_list ...);
        else a ``TypeError`` naming two files and both types.  Known before any row is read.
        """
        for name in columns:
            first = None
            for path, schema in zip(self.files, self.schemas):
                if name not in schema.names:
                    raise ValueError(f"{self.fn}: column {name!r} is in {self.files[0]!r} but "
                                     f"not in {path!r}")
                t = schema.field(name).type
                if first is None:
                    first, target = (path, t), t
                    continue
                if t.equals(target):
                    continue
                wider = widen(target, t)
                if wider is None:
                    raise TypeError(f"{self.fn}: column {name!r} is {first[1]} in "
                                    f"{first[0]!r} but {t} in {path!r}, and neither converts "
                                    f"to the other without loss")
                target = wider
            self.types[name] = target
        return dict(self.types)

    def null_count(self, name):
        """Nulls of top-level column ``name`` in the whole source, from the footers' column
        statistics (None when a row group has none)."""
        total = 0
        for meta, schema in zip(self.metas, self.schemas):
            idx = [i for i in range(meta.num_columns)
                   if meta.schema.column(i).path.split(".")[0] == name]
            for g in range(meta.num_row_groups):
                for i in idx[:1]:
                    stats = meta.row_group(g).column(i).statistics
                    if stats is None or not stats.has_null_count:
                        return None
                    total += stats.null_count
        return total

    def name(self, path):
        """``path`` as messages show it (the URI of a remote file)."""
        from lodarrow._tables._filesystems import display_path

        return display_path(path, self.filesystem)

    def read_group(self, k, columns, keep=True):
        """Columns ``columns`` of row group ``k`` as stored; an error names the file and the
        row group.  A remote file is read by ranged requests for those column chunks only,
        through the data cache when there is one (then what it holds is not fetched again).
        With a decoded cache, what it holds is mapped instead of read (a local file checked
        unchanged first), and what it does not is put there once decoded; not with
        ``keep=False`` (the lengths pass: a column the batches never read alone)."""
        if self.decoded is None or not keep:
            if self.exchange is None or not keep:
                return self._decode_group(k, columns)
            path, g, rows = self.parts[k]  # decoded once for the workers (_exchange)
            return self.exchange.read(self._fingerprint_of[path], g, columns, rows,
                                      lambda: self._decode_group(k, columns))
        path, g, rows = self.parts[k]
        fp = self._fingerprint_of[path]
        if self.filesystem is None:
            try:
                self._check_unchanged(path, os.stat(path))
            except OSError as exc:
                raise self._read_error(path, g, exc) from None
        table = self.decoded.get(fp, g, columns, rows)
        if table is None:
            table = self._decode_group(k, columns)
            self.decoded.put(fp, g, columns, table)
        return table

    def _decode_group(self, k, columns):
        """:meth:`read_group` from the data file (or the data cache)."""
        import pyarrow.parquet as pq

        from lodarrow._tables._filesystems import open_input, open_parquet

        path, g, _ = self.parts[k]
        try:
            if self.cache is not None:  # checks the object's size where it fetches
                return self.cache.read_row_group(self._fingerprint_of[path],
                                                 self._meta_of[path], g, columns, self.fn)
            if self.filesystem is None:
                # before the read and after it: a file replaced between the check and the
                # open is caught by the second
                self._check_unchanged(path, os.stat(path))
                with open_parquet(path, None, self.fn, metadata=self._meta_of[path],
                                  pre_buffer=False) as pf:
                    table = pf.read_row_group(g, columns=columns, use_threads=False)
                self._check_unchanged(path, os.stat(path))
                return table
            # remote: opening asks for the size anyway (a HEAD); the time would cost another
            with open_input(path, self.filesystem, self.fn) as f:
                self._check_unchanged(path, f.size())
                pf = pq.ParquetFile(f, metadata=self._meta_of[path], pre_buffer=False)
                return pf.read_row_group(g, columns=columns, use_threads=False)
        except (OSError, pa.ArrowException) as exc:
            raise self._read_error(path, g, exc) from None

    def _read_error(self, path, g, exc):
        """The ``ValueError`` for row group ``g`` of ``path`` whose read raised ``exc``.

        A local file replaced during the read may fail inside Arrow (its pages are no longer
        where the footer says) before the check after the read runs: the file is checked
        again here, so the error names the change, not its symptom, whichever thread saw it.
        """
        if (self.filesystem is None and self.cache is None
                and not isinstance(exc, FileNotFoundError)):
            try:
                self._check_unchanged(path, os.stat(path))
            except (OSError, pa.ArrowException) as now:  # changed, or gone since
                exc = now
        why = str(exc).removeprefix(f"{self.fn}: ")  # said once, at the front
        if isinstance(exc, FileNotFoundError):
            why = "the file is gone (deleted or moved since the loader was made)"
        return ValueError(f"{self.fn}: cannot read row group {g} of "
                          f"{self.name(path)!r}: {why}")

    def _check_unchanged(self, path, now):
        """Raise ``OSError`` if ``path`` is no longer the file whose footer was read; ``now``:
        its ``os.stat`` result (a local file) or its size (a remote one).

        A local file is known by its size, modification and change times and inode: where
        any of these moved but not the size, the footer is read again, and a file with the
        same footer (touched, or copied over with the same bytes) reads on; so does a file
        of other values with a byte-identical footer (the same size, page sizes and
        statistics: uncompressed fixed-width rows, say), which cannot be told apart without
        reading its pages.  A remote object is known by its size.  A rewritten file's row
        groups are no longer where the footer says: they would be read as another version's
        rows, or fail as a corrupt file.
        """
        fp = self._fingerprint_of[path]
        if isinstance(now, int):
            size, ident = now, None
        else:
            size, ident = now.st_size, _ident(now)
        seen = self._idents.get(path)
        if size == fp.size and (ident is None or ident == seen):
            return
        from lodarrow._tables._filesystems import changed_since_footer, read_footer

        if size != fp.size:
            raise changed_since_footer(f"{fp.size} bytes then, {size} now")
        if read_footer(path, self.filesystem, self.fn)[1] != fp.footer:
            raise changed_since_footer("its footer differs")
        self._idents[path] = ident  # touched or copied over, not rewritten

    def read(self, k, columns, lo=0, hi=None):
        """Rows ``[lo, hi)`` of row group ``k`` (its own row numbers), ``columns`` cast to the
        unified types; errors name the file and the row group."""
        table = self.read_group(k, columns)
        if table is DEFERRED:  # another worker decodes it (_exchange.reading)
            return table
        if lo or (hi is not None and hi < table.num_rows):
            table = table.slice(lo, (table.num_rows if hi is None else hi) - lo)
        want = [self.types.get(c) for c in columns]
        if any(t is not None and not table.schema.field(c).type.equals(t)
               for c, t in zip(columns, want)):
            table = table.cast(pa.schema([pa.field(c, t or table.schema.field(c).type)
                                          for c, t in zip(columns, want)]))
        return table


def _ident(st):
    """What tells one local file from another under the same path (an ``os.stat`` result)."""
    return st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev


def widen(a, b):
    """The type both ``a`` and ``b`` convert to without loss, or None."""
    if a.equals(b):
        return a
    if _is_list(a) and _is_list(b):
        inner = widen(a.value_type, b.value_type)
        if inner is None:
            return None
        large = pa.types.is_large_list(a) or pa.types.is_large_list(b)
        return pa.large_list(inner) if large else pa.list_(inner)
    if pa.types.is_fixed_size_list(a) and pa.types.is_fixed_size_list(b):
        if a.list_size != b.list_size:
            return None
        inner = widen(a.value_type, b.value_type)
        return None if inner is None else pa.list_(inner, a.list_size)
    for kind in (pa.types.is_signed_integer, pa.types.is_unsigned_integer,
                 pa.types.is_floating):
        if kind(a) and kind(b):
            return a if a.bit_width >= b.bit_width else b
    if pa.types.is_unsigned_integer(a) and pa.types.is_signed_integer(b):
        a, b = b, a
    if pa.types.is_signed_integer(a) and pa.types.is_unsigned_integer(b):
        return a if a.bit_width > b.bit_width else (
            pa.int64() if b.bit_width < 64 else None)
    strings = {pa.string(): 0, pa.large_string(): 1, pa.binary(): 2, pa.large_binary(): 3}
    if a in strings and b in strings and (strings[a] < 2) == (strings[b] < 2):
        return a if strings[a] >= strings[b] else b
    return None


def _is_list(t):
    return pa.types.is_list(t) or pa.types.is_large_list(t)
