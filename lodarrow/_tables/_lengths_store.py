"""Sequence lengths kept once decoded: each file's own footer, and a lengths cache.

Parquet keeps a list column's lengths in its data pages (repetition levels), so the lengths of
a corpus cost decoding one leaf column.  This module keeps them (docs/training.md#lengths-cache,
docs/tables.md#where-the-lengths-live):

- **In the file's footer**: ``write_parquet`` and ``map_parquet`` record, as they write, the
  lengths of every list column of each file in one key-value entry of that file's Parquet
  footer (``lodarrow.lengths``: a JSON header, then per column the entry counts of each list
  level and the null rows, packed, zstd-compressed and base64-encoded), added once the row
  groups are written (lodarrow._tables._footer).  It is checked at every read, and used only
  where every check holds (else the column is decoded):

  - the entry itself: the SHA-256 of the whole entry (header and payload; zstd frames carry
    no checksum), so a damaged character is caught;
  - the footer: where it starts and the SHA-256 of the rest of it (every row group's row
    count, byte sizes, column chunk offsets, sizes and statistics, and the writer), so a
    file rewritten by a tool that copies the footer's key-value metadata into a file of
    other row groups is decoded;
  - the data: per column, the SHA-256 of the header of the first data page of its first
    leaf in the first row group with rows and the :data:`DATA_BYTES` bytes after it (the
    start of its repetition levels), read when the column's lengths are first asked for
    (one ranged read of a few KiB; for a remote file the verdict is kept in the cache
    directory under the file's fingerprint, so the request is made once, not at every
    start), so a rewrite into a byte-identical footer (rows reordered: the same row counts,
    page sizes and statistics) is decoded too.  What it does not see: a rewrite whose footer
    is byte-identical and whose bytes are identical there too, that is one that keeps the
    first rows of the first row group as they were and reorders only later ones.

  It is not in the stored Arrow schema (``ARROW:schema``), so pyarrow, pandas and every tool
  that reads a table through them see the schema metadata the user wrote; every Parquet
  reader ignores a key it does not know, and the directory holds the data files only.
- **The cache**: one small file per (data file, list column, LoD level) under
  ``<cache dir>/lengths-v1/``, named by the SHA-256 of the file's :class:`Fingerprint` (its
  path or URI, size, modification time and the SHA-256 of its Parquet footer), the column
  and the level (and, for a remote file whose footer's lengths were found bound to its data,
  an empty ``.bound`` file named the same way).  A file that changes gets another
  fingerprint, so a stale entry is never read (it is only left behind, until
  :func:`clear_lengths_cache`).  Entries are written to a temporary name and moved into place
  with ``os.replace``: ranks that write the same entry at once each leave a whole file, never
  a torn one.
- **Sidecars of earlier releases** (``.<file name>.lodarrow-lengths`` beside each file, which
  lodarrow no longer writes): still read where valid (bound to the data file's size and
  footer digest), so a dataset written before keeps its fast start.

:meth:`LengthsStore.file` looks in the footer, then the cache, then a sidecar;
:meth:`LengthsStore.put` fills the cache.  The cache directory: the ``cache_dir`` argument,
else ``$LODARROW_CACHE_DIR``, else ``$XDG_CACHE_HOME/lodarrow``, else ``~/.cache/lodarrow``.
"""

import base64
import binascii
import dataclasses
import hashlib
import json
import os
import shutil
import threading
import uuid
import warnings

import numpy as np
import pyarrow as pa

from lodarrow._tables._filesystems import display_path, join, read_footer, reraise
from lodarrow._tables._footer import (DATA_PAGES, digest_without, page_header, parse_footer,
                                      read_tail, replace_footer, with_key_value)

__all__ = ["Fingerprint", "fingerprint", "LengthsStore", "LengthsRecorder", "cache_root",
           "clear_lengths_cache", "sidecar_path", "column_counts", "token_lengths",
           "recorded_lengths", "sign_record", "FOOTER_KEY"]

#: The layout version of cache entries and sidecars (a change makes new names).
VERSION = 1
_SUBDIR = f"lengths-v{VERSION}"
_SIDECAR_SUFFIX = ".lodarrow-lengths"
_SIDECAR_KEY = b"lodarrow.lengths"
#: The footer key-value entry holding a file's recorded lengths, and its layout version (2:
#: unreleased, without the checksum and the data binding; read as no entry, so decoded).
FOOTER_KEY = b"lodarrow.lengths"
FOOTER_VERSION = 3
#: Bytes of a column's first data page, after its page header, its recorded lengths are bound
#: to (with the header): the start of the page's repetition levels.
DATA_BYTES = 4096
#: The entry header's last field: its checksum (SHA-256, hex) of the entry without it.
_CHECK = b',"check":"'
_CHECK_LEN = len(_CHECK) + 64 + 2  # the field, the digest, '"}'


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
    recorded : dict or None
        The lengths lodarrow's writer recorded in the footer (:func:`recorded_lengths`),
        checked against this file's footer (their checksum, the footer's digest); None where
        there are none, they are damaged or they describe other row groups (not part of the
        identity).  Their binding to the data pages is checked when a column's lengths are
        first asked for (:meth:`LengthsStore.file`).
    """

    name: str
    size: int
    mtime_ns: object
    footer: str
    num_row_groups: int
    path: str = dataclasses.field(compare=False, repr=False, default=None)
    filesystem: object = dataclasses.field(compare=False, repr=False, default=None)
    recorded: object = dataclasses.field(compare=False, repr=False, default=None)

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
                     meta.num_row_groups, path, filesystem, recorded_lengths(meta, size))
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

    See Also
    --------
    sequence_lengths : What fills the cache.

    Notes
    -----
    Only the cache's own subdirectory (``lengths-v1``) is removed; the lengths recorded in the
    Parquet files' footers are part of the data and stay.  Deleting the directory by hand is
    as safe: entries are only ever read whole, and a missing one is decoded again.

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
    """Where an earlier release's sidecar of the Parquet file ``path`` lives:
    ``.<name>.lodarrow-lengths`` in the same directory."""
    if filesystem is None:
        folder, name = os.path.split(path)
        return os.path.join(folder, f".{name}{_SIDECAR_SUFFIX}")
    folder, _, name = path.rstrip("/").rpartition("/")
    return join(folder, f".{name}{_SIDECAR_SUFFIX}") if folder else f".{name}{_SIDECAR_SUFFIX}"


# ---------------------------------------------------------------------------- the store
class LengthsStore:
    """Lengths of Parquet row groups kept once: the file's footer, the cache directory, then
    the sidecars of earlier releases.

    Parameters
    ----------
    cache_dir : str, path-like, None or False
        The cache directory (None: the default, see :func:`cache_root`); False: no cache
        (the footers and sidecars are still read).

    Notes
    -----
    Thread-safe.  :meth:`put` keeps a file's row groups in memory until it has them all, then
    writes the file's entry at once (one small file per data file, column and level).
    ``recorded_hits``, ``hits``, ``sidecar_hits`` and ``misses`` count the files served from
    the footer, the cache and a sidecar, and those found nowhere.
    """

    def __init__(self, cache_dir=None):
        self.directory = None if cache_dir is False else os.path.join(cache_root(cache_dir),
                                                                      _SUBDIR)
        self._lock = threading.Lock()
        self._entries = {}    # (fp key, column, level) -> list per row group, or None
        self._recorded = {}   # (fp key, column) -> (levels, null rows) of its footer, or None
        self._sidecars = {}   # fp key -> {(column, level): list per row group} or None
        self._pending = {}    # (fp key, column, level) -> {row group: (lengths, mask)}
        self.recorded_hits = self.hits = self.sidecar_hits = self.misses = 0

    # --- reading
    def get(self, fp, row_group, column, level):
        """``(lengths, null_mask)`` of one row group, or None when neither the footer, the
        cache nor a valid sidecar has it.

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
        # the footer is in memory already: no read at all
        groups = self._from_footer(fp, column, level)
        if groups is not None:
            self.recorded_hits += 1
        else:
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

    def _from_footer(self, fp, column, level):
        if fp.recorded is None:
            return None
        key = (fp.key(), column)
        with self._lock:
            known = key in self._recorded
            found = self._recorded.get(key)
        if not known:  # only the column asked for is checked against the data, and decoded
            found = None
            if self._bound(fp, column):
                found = _decode_column(fp.recorded, column)
            with self._lock:
                self._recorded[key] = found
        if found is None:
            return None
        levels, null_rows = found
        if not 0 <= level < len(levels):
            return None
        return _row_group_lengths(levels, null_rows, level, fp.recorded["row_groups"])

    def _bound(self, fp, column):
        """Whether the lengths of ``column`` in the footer of ``fp`` are bound to its data
        pages (:func:`_bound_to_data`: one ranged read).  For a remote file the verdict is
        kept in the cache directory, named by the file's fingerprint as an entry is (the
        file unchanged since: its size, modification time and whole footer), so that the
        request is made at the first start, not at every start of every rank."""
        marker = None
        if fp.filesystem is not None and self.directory is not None:
            digest = hashlib.sha256(json.dumps([fp.key(), column, "bound"]).encode())
            digest = digest.hexdigest()
            marker = os.path.join(self.directory, digest[:2], digest + _BOUND_SUFFIX)
            if os.path.exists(marker):
                return True
        if not _bound_to_data(fp, fp.recorded, column):
            return False
        if marker is not None:
            try:  # an empty file: written whole or not at all
                os.makedirs(os.path.dirname(marker), exist_ok=True)
                open(marker, "ab").close()
            except OSError:
                pass  # an unwritable cache: the check is made again at the next start
        return True

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
#: An empty file: a remote file's recorded lengths of a column were found bound to its data.
_BOUND_SUFFIX = ".bound"


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


# ---------------------------------------------------------------------------- old sidecars
def read_sidecar(fp):
    """``{(column, level): [(lengths, null_mask) per row group]}`` from the sidecar an
    earlier release wrote beside the file ``fp`` names, or None when there is none or it
    describes another version of the file (another size or footer).

    A sidecar is a small Parquet file ``.<name>.lodarrow-lengths`` of two flat columns (the
    lengths, and a null flag per level-0 sequence) for every list column, level and row group
    one after the other, indexed in its schema metadata with the data file's size and footer
    digest.
    """
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


def remove_sidecar(path, filesystem=None):
    """Remove the sidecar an earlier release left beside ``path`` (a file being written
    again: the sidecar would only be stale, and a stray file to other readers)."""
    _remove(sidecar_path(path, filesystem), filesystem)


# ---------------------------------------------------------------------------- the footer
def recorded_lengths(meta, size):
    """The lengths record in a file's footer, checked against the file, or None.

    Parameters
    ----------
    meta : pyarrow.parquet.FileMetaData
        The file's footer, as read.
    size : int
        The file's size in bytes.

    Returns
    -------
    dict or None
        The record's header (:meth:`LengthsRecorder.stamp`), its packed arrays under
        ``"payload"`` (still base64), when it is whole (its checksum: the SHA-256 of the
        entry) and was written for this file's row groups: the footer starts where it did,
        and the footer without the record has the digest it had.  None when there is none,
        or it is damaged, of another version or of other row groups (a rewrite that copied
        the key-value metadata), or unreadable.  Its binding to the data pages is checked
        apart (:func:`_bound_to_data`), when a column's lengths are asked for.
    """
    kv = meta.metadata
    value = kv.get(FOOTER_KEY) if kv else None
    if value is None:
        return None
    try:
        cut = value.index(b"\n")
        line = value[:cut]
        if not (line[-_CHECK_LEN:-66] == _CHECK and line.endswith(b'"}')):
            return None  # no checksum: another version's entry
        check = hashlib.sha256(line[:-_CHECK_LEN])
        check.update(b"}\n")
        check.update(memoryview(value)[cut + 1:])
        if check.hexdigest().encode() != line[-66:-2]:
            return None  # damaged: the header or the payload changed since it was written
        record = json.loads(line)
        if (not isinstance(record, dict) or record.get("version") != FOOTER_VERSION
                or record["data_bytes"] != size - meta.serialized_size - 8
                or len(record["row_groups"]) != meta.num_row_groups
                or record["footer"] != digest_without(meta, FOOTER_KEY, value)):
            return None
    except (ValueError, KeyError, TypeError, pa.ArrowException):
        return None
    record["payload"] = memoryview(value)[cut + 1:]
    return record


def sign_record(header, payload):
    """The footer entry's value: ``header`` (a dict) as JSON with its checksum as the last
    field (``"check"``: the SHA-256 of the value written without that field), a newline,
    then ``payload`` (bytes)."""
    head = json.dumps(header, separators=(",", ":")).encode()
    if not head.endswith(b"}") or b"\n" in head:
        raise ValueError("a header that is not a JSON object on one line")
    check = hashlib.sha256(head + b"\n" + payload).hexdigest().encode()
    return head[:-1] + _CHECK + check + b'"}\n' + payload


def _first_leaf(meta, name):
    """The index of the first Parquet leaf column of top-level column ``name``."""
    schema = meta.schema
    for i in range(len(schema)):
        path = schema.column(i).path
        if path == name or path.startswith(name + "."):
            return i
    raise ValueError(f"no Parquet column of {name!r}")


def _data_span(f, meta, name):
    """``(offset, length)`` of the bytes of the open local file ``f`` that bind the lengths
    of column ``name`` to its data pages: the header of the first data page of its first leaf
    column in the first row group with rows, and up to :data:`DATA_BYTES` bytes after it
    (within the column chunk; the start of the page's repetition levels, which a reordering
    of the rows changes).  None where the file has no rows; ``ValueError`` where the column
    chunk holds no readable data page."""
    leaf = _first_leaf(meta, name)
    group = next((meta.row_group(g) for g in range(meta.num_row_groups)
                  if meta.row_group(g).num_rows), None)
    if group is None:
        return None
    chunk = group.column(leaf)
    at = chunk.data_page_offset
    if chunk.has_dictionary_page and chunk.dictionary_page_offset:  # 0: none, for some
        at = min(at, chunk.dictionary_page_offset)  # the chunk starts with its dictionary
    end = at + chunk.total_compressed_size
    for _ in range(16):  # a dictionary page, maybe an index page, then the first data page
        want = 256
        while True:  # the header: read more until it is whole
            f.seek(at)
            data = f.read(min(want, end - at))
            try:
                kind, head, size = page_header(data)
                break
            except IndexError:
                if want >= end - at:
                    raise ValueError(f"a truncated page header in column {name!r}") from None
                want *= 16
        if kind in DATA_PAGES:
            return at, min(at + head + DATA_BYTES, end) - at
        at += head + size
        if at >= end:
            break
    raise ValueError(f"no data page found in column {name!r}")


def _bound_to_data(fp, record, column):
    """Whether the bytes ``record`` binds ``column``'s lengths to (:func:`_data_span`) are
    in the file ``fp`` as they were written: one ranged read of a few KiB.  False where they
    differ (a rewrite into the same footer), or cannot be read."""
    try:
        span = record["data"][column]
        if span is None:  # no rows: nothing to be bound to
            return sum(record["row_groups"]) == 0
        at, n, digest = span
        if not (type(at) is int and type(n) is int and 0 <= at and 0 < n
                and at + n <= record["data_bytes"] and isinstance(digest, str)):
            return False
        if fp.path is None:
            return False
        if fp.filesystem is None:
            with open(fp.path, "rb") as f:
                f.seek(at)
                data = f.read(n)
        else:
            with fp.filesystem.open_input_file(fp.path) as f:
                data = f.read_at(n, at)
    except (OSError, pa.ArrowException, KeyError, ValueError, TypeError):
        return False
    return len(data) == n and hashlib.sha256(data).hexdigest() == digest


def _pack(arr, at):
    """``(description, bytes)`` of non-negative integers: a constant run as its value, else
    the narrowest unsigned width, its bytes split into planes (what compresses: the high
    bytes of lengths are mostly zero)."""
    arr = np.asarray(arr, np.int64)
    n = len(arr)
    if n and arr[0] == arr[-1] and (arr == arr[0]).all():
        return {"n": n, "const": int(arr[0])}, b""
    top = int(arr.max()) if n else 0
    width = 1 if top < 1 << 8 else 2 if top < 1 << 16 else 4 if top < 1 << 32 else 8
    planes = arr.astype(f"<u{width}").view(np.uint8).reshape(n, width).T
    return {"n": n, "at": at, "width": width}, planes.tobytes()


def _unpack(blob, d):
    n = d["n"]
    if "const" in d:
        return ("const", int(d["const"]), n)
    width, at = d["width"], d["at"]
    if width not in (1, 2, 4, 8) or at < 0 or at + n * width > blob.size:
        raise ValueError("an array out of the record's bytes")
    planes = np.frombuffer(blob, np.uint8, n * width, at).reshape(width, n)
    out = planes[-1].astype(np.int64)
    for k in range(width - 2, -1, -1):  # in place: 5x faster than a transposing copy
        out <<= 8
        out |= planes[k]
    return out


def _size(level):
    return level[2] if isinstance(level, tuple) else len(level)


def _total(level):
    return level[1] * level[2] if isinstance(level, tuple) else int(level.sum())


def _decode_column(record, name):
    """``(levels, null rows)`` of one column of a footer record, each level the entry counts
    of its lists (an array, or ``("const", value, n)``); None where the record has no such
    column or does not hold together."""
    try:
        col = record["columns"].get(name)
        if isinstance(col, dict) and "same_as" in col:  # another column's lengths
            col = record["columns"].get(col["same_as"])
            if not isinstance(col, dict) or "same_as" in col:
                return None
        if col is None:
            return None
        start, end = col["blob"]
        blob = pa.py_buffer(binascii.a2b_base64(record["payload"][start:end]))
        if record["codec"] == "zstd":  # damaged: fails to decompress; numpy views the buffer
            blob = pa.Codec("zstd").decompress(blob, col["size"])
        elif record["codec"] != "none" or blob.size != col["size"]:
            return None
        levels = [_unpack(blob, d) for d in col["levels"]]
        gaps = _unpack(blob, col["nulls"])
        gaps = np.full(gaps[2], gaps[1], np.int64) if isinstance(gaps, tuple) else gaps
        null_rows = np.cumsum(gaps)  # stored as the gaps between them
        rows = expect = sum(record["row_groups"])
        for lv in levels:  # each level holds one count per list of the level above
            if _size(lv) != expect:
                return None
            expect = _total(lv)
        if len(null_rows) and null_rows[-1] >= rows:
            return None
    except (ValueError, KeyError, TypeError, AttributeError, OSError, pa.ArrowException):
        return None
    return levels, null_rows


def _positions(level, index):
    """Where the lists of ``level`` start and end in the level below, at ``index`` (None:
    every boundary)."""
    if isinstance(level, tuple):  # a regular level: no array of n copies of the width
        step = level[1]
        return (np.arange(level[2] + 1, dtype=np.int64) if index is None else index) * step
    bounds = _offsets(level)
    return bounds if index is None else bounds[index]


def _row_group_lengths(levels, null_rows, level, rows):
    """``[(lengths, null_mask)]`` per row group of ``rows`` rows, from file-wide counts."""
    row_bounds = _offsets(np.asarray(rows, np.int64))
    seq_bounds = row_bounds
    for lv in levels[:level]:  # the level-`level` sequences of each row group
        seq_bounds = _positions(lv, seq_bounds)
    if level == len(levels) - 1:  # the innermost lists: their counts are the lengths
        last = levels[level]
        lengths = np.full(last[2], last[1], np.int64) if isinstance(last, tuple) else last
    else:
        tokens = _positions(levels[level], None)
        for lv in levels[level + 1:]:
            tokens = _positions(lv, tokens)
        lengths = np.diff(tokens)
    cuts = np.searchsorted(null_rows, row_bounds)
    out = []
    for g, n in enumerate(rows):
        mask = None
        if cuts[g + 1] > cuts[g]:
            mask = np.zeros(n, bool)
            mask[null_rows[cuts[g]:cuts[g + 1]] - row_bounds[g]] = True
        out.append((lengths[seq_bounds[g]:seq_bounds[g + 1]], mask))
    return out


class LengthsRecorder:
    """Records the lengths of every list column of a file being written, batch by batch,
    and stamps them into its footer once the file is complete (:meth:`stamp`)."""

    def __init__(self, schema):
        self.depths = {f.name: _depth(f.type) for f in schema if _depth(f.type) > 0}
        self.columns = list(self.depths)
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

    def stamp(self, path, fn="write_parquet"):
        """Record the lengths in the footer of the complete local Parquet file ``path``.

        The footer gains one key-value entry, :data:`FOOTER_KEY`; the data pages are not
        touched.  Nothing is recorded for a file without a list column, nor for one without
        a stored Arrow schema (``store_schema=False``: pyarrow would show the entry as the
        schema's metadata).  A footer that cannot take the entry (an encrypted file, a full
        disk) is left as it was, with a ``RuntimeWarning``: the lengths are then decoded at
        the first start.

        Returns
        -------
        bool
            Whether the lengths were recorded.
        """
        if not self.columns:
            return False
        try:
            with open(path, "r+b") as f:
                footer, start = read_tail(f)
                # the digest covers the footer without the entry, so it is taken on a
                # footer holding an empty one: the same bytes around it as the final one
                blank = parse_footer(with_key_value(footer, FOOTER_KEY, b""))
                if b"ARROW:schema" not in (blank.metadata or {}):
                    return False
                rows = [blank.row_group(g).num_rows for g in range(blank.num_row_groups)]
                if sum(rows) != self._rows:
                    raise ValueError(f"the file has {sum(rows)} rows, {self._rows} were "
                                     f"recorded")
                spans = {name: _data_span(f, blank, name) for name in self.columns}
                bound = {}
                for name, span in spans.items():
                    if span is not None:
                        f.seek(span[0])
                        span = [span[0], span[1], hashlib.sha256(f.read(span[1])).hexdigest()]
                    bound[name] = span
                value = self._record(start, digest_without(blank, FOOTER_KEY, b""), rows,
                                     bound)
                new = with_key_value(footer, FOOTER_KEY, value)
                parse_footer(new)  # pyarrow reads it, or the file keeps its footer
                try:
                    replace_footer(f, start, new)
                except BaseException:
                    replace_footer(f, start, footer)
                    raise
        except (OSError, ValueError, pa.ArrowException) as exc:
            warnings.warn(f"{fn}: the sequence lengths of {path!r} are not recorded in its "
                          f"footer ({exc}); they will be decoded at the first start instead",
                          RuntimeWarning, stacklevel=3)
            return False
        return True

    def _record(self, data_bytes, digest, rows, bound):
        """The footer entry's text: a JSON header (its checksum last: :func:`sign_record`),
        a newline, then each column's arrays packed (:func:`_pack`), compressed and
        base64-encoded, one block per column (a reader decodes the column it needs); a
        column of the same lengths as an earlier one (``input_ids``, ``attention_mask``,
        ``labels``) is recorded as that column's.  ``bound``: per column, the bytes its
        lengths are bound to (``[offset, length, SHA-256]``, or None: no rows)."""
        codec = "zstd" if pa.Codec.is_available("zstd") else "none"
        columns, blocks, seen, at = {}, [], [], 0
        for name in self.columns:
            batches = self._counts[name]
            counts = [_concat([b[k] for b in batches]) for k in range(self.depths[name])]
            nulls = [n for n in self._nulls[name] if n is not None]
            null_rows = _concat(nulls) if nulls else np.zeros(0, np.int64)
            same = next((other for other, c, n in seen if len(c) == len(counts)
                         and np.array_equal(n, null_rows)
                         and all(np.array_equal(x, y) for x, y in zip(c, counts))), None)
            if same is not None:
                columns[name] = {"same_as": same}
                continue
            seen.append((name, counts, null_rows))
            parts, offset, levels = [], 0, []
            for arr in counts + [np.diff(null_rows, prepend=0)]:  # null rows as small gaps
                d, raw = _pack(arr, offset)
                levels.append(d)
                parts.append(raw)
                offset += len(raw)
            raw = b"".join(parts)
            data = pa.Codec(codec).compress(raw, asbytes=True) if codec != "none" else raw
            text = base64.b64encode(data)
            blocks.append(text)
            columns[name] = {"levels": levels[:-1], "nulls": levels[-1], "size": len(raw),
                             "blob": [at, at + len(text)]}
            at += len(text)
        header = {"version": FOOTER_VERSION, "data_bytes": data_bytes, "footer": digest,
                  "data": bound, "row_groups": rows, "codec": codec, "columns": columns}
        # the header parses alone: the payload is not copied through a JSON string
        return sign_record(header, b"".join(blocks))


def _remove(path, filesystem):
    try:
        if filesystem is None:
            os.remove(path)
        else:
            filesystem.delete_file(path)
    except (OSError, pa.ArrowException):
        pass
