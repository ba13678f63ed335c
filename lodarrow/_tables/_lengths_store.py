"""Sequence lengths kept once decoded: a lengths cache and the sidecars lodarrow's writers leave.

Parquet keeps a list column's lengths in its data pages (repetition levels), so the lengths of
a corpus cost decoding one leaf column.  This module keeps them (docs/training.md#lengths-cache):

- **The cache**: one small file per (data file, list column, LoD level) under
  ``<cache dir>/lengths-v1/``, named by the SHA-256 of the file's :class:`Fingerprint` (its
  path or URI, size, modification time and the SHA-256 of its Parquet footer), the column
  and the level.  A file that changes gets another fingerprint, so a stale entry is never
  read (it is only left behind, until :func:`clear_lengths_cache`).  Entries are written to
  a temporary name and moved into place with ``os.replace``: ranks that write the same entry
  at once each leave a whole file, never a torn one.
- **Sidecars**: ``write_parquet`` and ``map_parquet`` write ``.<file name>.lodarrow-lengths``
  beside each Parquet file they write: a small Parquet file of two flat columns (the lengths,
  int64, and a null flag per row) holding every list column's lengths per LoD level and row
  group one after the other, indexed in its key-value metadata and bound to the data file by
  its size and footer digest.  It travels with the data (a copy to S3 keeps it valid: its
  modification time is not part of the binding), its leading dot hides it from lodarrow's,
  pyarrow.dataset's, Spark's and Hadoop's directory listings, and the data file itself is
  left exactly as the writer made it.

:meth:`LengthsStore.get` looks in the cache, then in the sidecar; :meth:`LengthsStore.put`
fills the cache.  The cache directory: the ``cache_dir`` argument, else ``$LODARROW_CACHE_DIR``,
else ``$XDG_CACHE_HOME/lodarrow``, else ``~/.cache/lodarrow``.
"""

import dataclasses
import hashlib
import io
import json
import os
import shutil
import threading
import uuid
import warnings

import numpy as np
import pyarrow as pa

from lodarrow._tables._filesystems import display_path, join, read_footer, reraise

__all__ = ["Fingerprint", "fingerprint", "LengthsStore", "LengthsRecorder", "cache_root",
           "clear_lengths_cache", "sidecar_path", "column_counts", "token_lengths"]

#: The layout version of cache entries and sidecars (a change makes new names).
VERSION = 1
_SUBDIR = f"lengths-v{VERSION}"
_SIDECAR_SUFFIX = ".lodarrow-lengths"
_SIDECAR_KEY = b"lodarrow.lengths"


# ---------------------------------------------------------------------------- fingerprints
@dataclasses.dataclass(frozen=True)
class Fingerprint:
    """What identifies one Parquet file's contents, read from its listing and its footer.

    Attributes
    ----------
    name : str
        The path, or the URI of a remote file (as messages show it).
    size : int
        Bytes.
    mtime_ns : int or None
        Modification time (an object store's ``Last-Modified``); None where the filesystem
        gives none.
    footer : str
        SHA-256 (hex) of the Parquet footer: every row group's offsets, sizes, row counts and
        statistics, and the writer.
    num_row_groups : int
        Row groups in the file.
    path, filesystem
        Where to open it (not part of the identity).
    """

    name: str
    size: int
    mtime_ns: object
    footer: str
    num_row_groups: int
    path: str = dataclasses.field(compare=False, repr=False, default=None)
    filesystem: object = dataclasses.field(compare=False, repr=False, default=None)

    def key(self):
        """A hex digest of the identity (cache entries are named by it)."""
        text = json.dumps([self.name, self.size, self.mtime_ns, self.footer,
                           self.num_row_groups])
        return hashlib.sha256(text.encode()).hexdigest()

    def as_json(self):
        return {"name": self.name, "size": self.size, "mtime_ns": self.mtime_ns,
                "footer": self.footer, "num_row_groups": self.num_row_groups}


def fingerprint(path, filesystem=None, fn="sequence_lengths"):
    """``(Fingerprint, pyarrow.parquet.FileMetaData)`` of one Parquet file.

    Costs one listing (``stat`` / ``HEAD``) and one read of the file's tail (the footer),
    which also gives the metadata, so a caller opening the file passes it on
    (``open_parquet(..., metadata=meta)``) instead of reading the footer again.
    """
    name = display_path(path, filesystem)
    if filesystem is None:
        try:
            st = os.stat(path)
        except OSError as exc:
            reraise(exc, f"{fn}: cannot open {name!r}")
        mtime = st.st_mtime_ns
    else:
        try:
            info = filesystem.get_file_info(path)
        except (pa.ArrowException, OSError) as exc:
            reraise(exc, f"{fn}: cannot open {name!r}")
        mtime = info.mtime_ns
    meta, digest, size = read_footer(path, filesystem, fn)
    fp = Fingerprint(name, int(size), None if mtime is None else int(mtime), digest,
                     meta.num_row_groups, path, filesystem)
    return fp, meta


# ---------------------------------------------------------------------------- lengths
def column_counts(arr):
    """``(counts, nulls)`` of a list array: ``counts[k]`` the entries of each level-``k``
    list (int64; a null list has none), ``nulls`` the null rows' mask (None: none).

    What a Parquet reader gives back: the children of a null list are not stored, so they
    are not counted (``ListArray.flatten`` skips them).
    """
    if isinstance(arr, pa.ChunkedArray):
        parts = [column_counts(c) for c in arr.chunks]
        depth = _depth(arr.type)
        counts = [np.concatenate([p[0][k] for p in parts]) if parts
                  else np.zeros(0, np.int64) for k in range(depth)]
        if any(p[1] is not None for p in parts):
            nulls = np.concatenate([p[1] if p[1] is not None else np.zeros(len(c), bool)
                                    for p, c in zip(parts, arr.chunks)])
        else:
            nulls = None
        return counts, nulls
    import pyarrow.compute as pc

    nulls = None
    if arr.null_count:
        nulls = np.asarray(arr.is_null())
    counts = []
    level = arr
    while pa.types.is_list(level.type) or pa.types.is_large_list(level.type):
        n = pc.list_value_length(level)
        if n.null_count:
            n = n.fill_null(0)
        counts.append(np.asarray(n).astype(np.int64, copy=False))
        inner = level.type.value_type
        if not (pa.types.is_list(inner) or pa.types.is_large_list(inner)):
            break
        level = level.flatten()
    return counts, nulls


def _depth(t):
    depth = 0
    while pa.types.is_list(t) or pa.types.is_large_list(t):
        depth += 1
        t = t.value_type
    return depth


def token_lengths(counts, level):
    """Values (tokens) in each level-``level`` sequence, from per-level entry counts of one
    contiguous block of rows (:func:`column_counts`)."""
    bounds = _offsets(counts[level])
    for c in counts[level + 1:]:
        bounds = _offsets(c)[bounds]
    return np.diff(bounds)


def _offsets(c):
    out = np.empty(len(c) + 1, np.int64)
    out[0] = 0
    np.cumsum(c, out=out[1:])
    return out


def _split_rows(counts, rows):
    """``counts`` (per level, file-wide) cut into blocks of ``rows`` rows (row groups)."""
    bounds = [np.concatenate([[0], np.cumsum(rows)]).astype(np.int64)]
    for c in counts[:-1]:
        bounds.append(_offsets(c)[bounds[-1]])
    blocks = []
    for g in range(len(rows)):
        blocks.append([c[b[g]:b[g + 1]] for c, b in zip(counts, bounds)])
    return blocks


# ---------------------------------------------------------------------------- directories
def cache_root(cache_dir=None):
    """The lengths cache's directory: ``cache_dir``, else ``$LODARROW_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/lodarrow``, else ``~/.cache/lodarrow``."""
    if cache_dir is None:
        cache_dir = os.environ.get("LODARROW_CACHE_DIR") or None
    if cache_dir is None:
        xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"),
                                                                ".cache")
        cache_dir = os.path.join(xdg, "lodarrow")
    return os.path.abspath(os.fspath(cache_dir))


def check_cache_dir(cache_dir, fn):
    """``cache_dir`` checked: None (the default directory), False (no cache), or a path."""
    if cache_dir is None or cache_dir is False:
        return cache_dir
    if isinstance(cache_dir, (str, os.PathLike)) and not isinstance(os.fspath(cache_dir),
                                                                     bytes):
        return os.fspath(cache_dir)
    raise TypeError(f"{fn}: cache_dir must be a path, None (the default directory) or False "
                    f"(no cache), got {type(cache_dir).__name__}")


def clear_lengths_cache(cache_dir=None):
    """Delete every entry of the lengths cache.

    Parameters
    ----------
    cache_dir : str or path-like, optional
        The cache directory; by default ``$LODARROW_CACHE_DIR``, else
        ``$XDG_CACHE_HOME/lodarrow``, else ``~/.cache/lodarrow``.

    Returns
    -------
    int
        How many entries were removed.

    Notes
    -----
    Only the cache's own subdirectory (``lengths-v1``) is removed; the sidecars beside the
    Parquet files are part of the data and stay.  Deleting the directory by hand is as safe:
    entries are only ever read whole, and a missing one is decoded again.

    Examples
    --------
    >>> import tempfile, lodarrow as la
    >>> la.clear_lengths_cache(tempfile.mkdtemp())
    0
    """
    root = os.path.join(cache_root(check_cache_dir(cache_dir, "clear_lengths_cache")),
                        _SUBDIR)
    n = 0
    for _, _, names in os.walk(root):
        n += sum(1 for name in names if name.endswith(_ENTRY_SUFFIX))
    shutil.rmtree(root, ignore_errors=True)
    return n


def sidecar_path(path, filesystem=None):
    """Where the sidecar of the Parquet file ``path`` lives: ``.<name>.lodarrow-lengths``
    in the same directory."""
    if filesystem is None:
        folder, name = os.path.split(path)
        return os.path.join(folder, f".{name}{_SIDECAR_SUFFIX}")
    folder, _, name = path.rstrip("/").rpartition("/")
    return join(folder, f".{name}{_SIDECAR_SUFFIX}") if folder else f".{name}{_SIDECAR_SUFFIX}"


# ---------------------------------------------------------------------------- the store
class LengthsStore:
    """Cached lengths of Parquet row groups: the cache directory, then the sidecars.

    Parameters
    ----------
    cache_dir : str, path-like, None or False
        The cache directory (None: the default, see :func:`cache_root`); False: no cache
        (sidecars are still read).

    Notes
    -----
    Thread-safe.  :meth:`put` keeps a file's row groups in memory until it has them all, then
    writes the file's entry at once (one small file per data file, column and level).
    """

    def __init__(self, cache_dir=None):
        self.directory = None if cache_dir is False else os.path.join(cache_root(cache_dir),
                                                                      _SUBDIR)
        self._lock = threading.Lock()
        self._entries = {}    # (fp key, column, level) -> list per row group, or None
        self._sidecars = {}   # fp key -> {(column, level): list per row group} or None
        self._pending = {}    # (fp key, column, level) -> {row group: (lengths, mask)}
        self.hits = self.sidecar_hits = self.misses = 0

    # --- reading
    def get(self, fp, row_group, column, level):
        """``(lengths, null_mask)`` of one row group, or None when neither the cache nor a
        valid sidecar has it.

        Parameters
        ----------
        fp : Fingerprint
            The data file's (:func:`fingerprint`).
        row_group : int
        column : str
            The list column (top-level name).
        level : int
            The LoD level of the sequences.

        Returns
        -------
        tuple or None
            ``lengths`` int64, one per level-``level`` sequence of the row group (tokens);
            ``null_mask`` bool per row of the row group (True: a null row, counted as an
            empty sequence in ``lengths``), or None when no row is null.
        """
        groups = self.file(fp, column, level)
        return None if groups is None else groups[row_group]

    def file(self, fp, column, level):
        """Every row group's ``(lengths, null_mask)`` of one file, or None (see :meth:`get`)."""
        key = (fp.key(), column, level)
        with self._lock:
            if key in self._entries:
                return self._entries[key]
        groups = self._read_entry(fp, column, level)
        if groups is not None:
            self.hits += 1
        else:
            groups = self._from_sidecar(fp, column, level)
            if groups is not None:
                self.sidecar_hits += 1
            else:
                self.misses += 1
        with self._lock:
            self._entries[key] = groups
        return groups

    def _entry_path(self, fp, column, level):
        digest = hashlib.sha256(json.dumps([fp.key(), column, level]).encode()).hexdigest()
        return os.path.join(self.directory, digest[:2], digest + _ENTRY_SUFFIX)

    def _read_entry(self, fp, column, level):
        if self.directory is None:
            return None
        path = self._entry_path(fp, column, level)
        try:
            with open(path, "rb") as f:
                data = f.read()
            header, lengths, null_rows = _parse_entry(data)
        except (OSError, ValueError, KeyError, TypeError):  # absent or unreadable: decode
            return None
        if header["key"] != fp.key() or len(header["counts"]) != fp.num_row_groups:
            return None  # another file's entry (never served)
        out = []
        a = b = 0
        for count, nulls, rows in zip(header["counts"], header["null_counts"],
                                      header["rows"]):
            mask = None
            if nulls:
                mask = np.zeros(rows, bool)
                mask[null_rows[b:b + nulls]] = True
            out.append((lengths[a:a + count], mask))
            a += count
            b += nulls
        return out

    def _from_sidecar(self, fp, column, level):
        if fp.path is None:
            return None
        key = fp.key()
        with self._lock:
            known = key in self._sidecars
            table = self._sidecars.get(key)
        if not known:
            table = read_sidecar(fp)
            with self._lock:
                self._sidecars[key] = table
        if table is None:
            return None
        return table.get((column, level))

    # --- writing
    def put(self, fp, row_group, column, level, lengths, null_mask=None):
        """Keep one row group's lengths (see :meth:`get`); the file's cache entry is written
        once every row group of it is in."""
        if self.directory is None:
            return
        key = (fp.key(), column, level)
        with self._lock:
            pending = self._pending.setdefault(key, {})
            pending[row_group] = (np.asarray(lengths, np.int64),
                                  None if null_mask is None else np.asarray(null_mask, bool))
            if len(pending) < fp.num_row_groups:
                return
            del self._pending[key]
        self.put_file(fp, column, level, [pending[g] for g in range(fp.num_row_groups)])

    def put_file(self, fp, column, level, groups):
        """Write one file's entry: ``groups`` is ``(lengths, null_mask)`` per row group."""
        if self.directory is None:
            return
        rows = np.array([len(m) if m is not None else -1 for _, m in groups], np.int64)
        null_rows = [np.flatnonzero(m) if m is not None else np.zeros(0, np.int64)
                     for _, m in groups]
        path = self._entry_path(fp, column, level)
        folder = os.path.dirname(path)
        tmp = os.path.join(folder, f".{os.path.basename(path)}.{os.getpid()}."
                                   f"{uuid.uuid4().hex[:8]}.tmp")
        header = {"key": fp.key(), "file": fp.as_json(), "column": column, "level": level,
                  "counts": [len(seq) for seq, _ in groups],
                  "null_counts": [len(r) for r in null_rows],
                  "rows": [int(r) for r in rows]}
        try:
            os.makedirs(folder, exist_ok=True)
            with open(tmp, "wb") as f:
                f.write(_entry_bytes(header, _concat([seq for seq, _ in groups]),
                                     _concat(null_rows)))
            os.replace(tmp, path)  # atomic: a reader sees no entry or a whole one
        except OSError as exc:  # a read-only or full disk: the lengths are right, say so once
            _remove(tmp, None)
            warnings.warn(f"lodarrow: cannot write the lengths cache in "
                          f"{os.path.dirname(self.directory)!r} ({exc}); lengths will be "
                          f"decoded at every start: set LODARROW_CACHE_DIR or cache_dir= to a "
                          f"writable directory, or cache_dir=False", RuntimeWarning,
                          stacklevel=4)
            self.directory = None
            return
        except BaseException:
            _remove(tmp, None)
            raise
        with self._lock:
            self._entries[(fp.key(), column, level)] = [
                (np.asarray(s, np.int64), m) for s, m in groups]


#: A cache entry: this magic, the header's length (8 bytes, little-endian), the header (JSON:
#: the file's fingerprint, the column, the level, per row group the sequence count, the null
#: row count and the row count), then the lengths and the null rows as raw little-endian
#: int64.  Read whole in one ``read``, and viewed, not parsed (``numpy.frombuffer``).
_ENTRY_MAGIC = b"LODARROW-LENGTHS-1\n"
_ENTRY_SUFFIX = ".lengths"


def _entry_bytes(header, lengths, null_rows):
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)  # the arrays start 8-byte aligned
    return b"".join([_ENTRY_MAGIC, len(text).to_bytes(8, "little"), text,
                     lengths.astype("<i8", copy=False).tobytes(),
                     null_rows.astype("<i8", copy=False).tobytes()])


def _parse_entry(data):
    m = len(_ENTRY_MAGIC)
    if data[:m] != _ENTRY_MAGIC:
        raise ValueError("not a lengths entry")
    n = int.from_bytes(data[m:m + 8], "little")
    header = json.loads(data[m + 8:m + 8 + n])
    start = m + 8 + n
    total, nulls = sum(header["counts"]), sum(header["null_counts"])
    if len(data) != start + 8 * (total + nulls):
        raise ValueError("a truncated lengths entry")
    arrays = np.frombuffer(data, dtype="<i8", offset=start)
    return header, arrays[:total], arrays[total:]


def _concat(arrays):
    return np.concatenate(arrays).astype(np.int64, copy=False) if arrays \
        else np.zeros(0, np.int64)


# ---------------------------------------------------------------------------- sidecars
def read_sidecar(fp):
    """``{(column, level): [(lengths, null_mask) per row group]}`` from the sidecar of the
    file ``fp`` names, or None when there is none or it describes another version of the
    file (another size or footer)."""
    import pyarrow.parquet as pq

    path = sidecar_path(fp.path, fp.filesystem)
    try:
        if fp.filesystem is None:
            with open(path, "rb") as f:
                data = f.read()
        else:
            with fp.filesystem.open_input_file(path) as f:
                data = f.readall()
        table = pq.ParquetFile(pa.BufferReader(data)).read(use_threads=False)
        binding = json.loads((table.schema.metadata or {})[_SIDECAR_KEY])
    except (OSError, pa.ArrowException, KeyError, ValueError, TypeError):
        return None  # absent or unreadable: the lengths are decoded instead
    if binding.get("version") != VERSION or binding.get("size") != fp.size \
            or binding.get("footer") != fp.footer:
        return None  # stale: the data file changed since the sidecar was written
    try:
        lengths = np.asarray(table.column("lengths").combine_chunks(), dtype=np.int64)
        null = np.asarray(table.column("null").combine_chunks())
        entries = {(c, lv, g): (start, count, rows)
                   for c, lv, g, start, count, rows in binding["entries"]}
    except (KeyError, ValueError, TypeError):
        return None
    result = {}
    for (c, lv, g), (start, count, rows) in entries.items():
        if not 0 <= start <= start + count <= len(lengths):
            return None
        top = entries.get((c, 0, g))
        if top is None:
            return None
        rows_null = null[top[0]:top[0] + top[1]]
        mask = rows_null.copy() if rows_null.any() else None
        result.setdefault((c, lv), {})[g] = (lengths[start:start + count], mask)
    out = {}
    for k, per in result.items():
        if sorted(per) != list(range(fp.num_row_groups)):
            return None
        out[k] = [per[g] for g in range(fp.num_row_groups)]
    return out


class LengthsRecorder:
    """Records the lengths of every list column of a file being written, batch by batch,
    and writes its sidecar once the file is complete (:meth:`write`)."""

    def __init__(self, schema):
        self.columns = [f.name for f in schema if _depth(f.type) > 0]
        self._counts = {name: [] for name in self.columns}
        self._nulls = {name: [] for name in self.columns}
        self._rows = 0

    def __bool__(self):
        return bool(self.columns)

    def add(self, table):
        """Record a batch or table about to be written (its rows follow the earlier ones)."""
        for name in self.columns:
            counts, nulls = column_counts(table.column(name))
            self._counts[name].append(counts)
            self._nulls[name].append(
                np.flatnonzero(nulls) + self._rows if nulls is not None else None)
        self._rows += table.num_rows

    def write(self, path, filesystem=None, sidecar=None, fn="write_parquet"):
        """Write the sidecar of the complete file ``path`` (to ``sidecar``, by default
        :func:`sidecar_path`); nothing when the file has no list column."""
        import pyarrow.parquet as pq

        sidecar = sidecar or sidecar_path(path, filesystem)
        if not self.columns:
            _remove(sidecar, filesystem)  # an older file's sidecar would only be stale
            return
        meta, digest, size = read_footer(path, filesystem, fn)
        rows = [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]
        starts = np.concatenate([[0], np.cumsum(rows)]).astype(np.int64)
        entries, lengths, nulls_out, at = [], [], [], 0
        for name in self.columns:
            parts = self._counts[name]
            depth = len(parts[0]) if parts else 0
            counts = [_concat([p[k] for p in parts]) for k in range(depth)]
            nulls = [n for n in self._nulls[name] if n is not None]
            nulls = _concat(nulls) if nulls else None
            blocks = _split_rows(counts, rows) if depth else []
            for g, block in enumerate(blocks):
                for level in range(depth):
                    seq = token_lengths(block, level)
                    flag = np.zeros(len(seq), bool)
                    if level == 0 and nulls is not None:  # the null rows, on level 0's rows
                        lo, hi = np.searchsorted(nulls, [starts[g], starts[g + 1]])
                        flag[nulls[lo:hi] - starts[g]] = True
                    entries.append([name, level, g, at, len(seq), rows[g]])
                    lengths.append(seq)
                    nulls_out.append(flag)
                    at += len(seq)
        binding = {"version": VERSION, "size": size, "footer": digest, "entries": entries}
        table = pa.table({"lengths": pa.array(_concat(lengths)),
                          "null": pa.array(np.concatenate(nulls_out) if nulls_out
                                           else np.zeros(0, bool))})
        table = table.replace_schema_metadata({_SIDECAR_KEY: json.dumps(binding).encode()})
        buf = io.BytesIO()
        pq.write_table(table, buf, compression="zstd")
        _write_bytes(sidecar, buf.getvalue(), filesystem)


def _write_bytes(path, data, filesystem):
    """Write a small file whole: a temporary name then a rename, locally; one PUT remotely."""
    if filesystem is None:
        tmp = f"{path}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        return
    with filesystem.open_output_stream(path) as f:
        f.write(data)


def _remove(path, filesystem):
    try:
        if filesystem is None:
            os.remove(path)
        else:
            filesystem.delete_file(path)
    except (OSError, pa.ArrowException):
        pass
