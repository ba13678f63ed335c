"""Row groups kept decoded on the local disk, read memory-mapped: the loader's
``decoded_cache`` (docs/training.md#a-decoded-cache).

Parquet stores a list column compressed and encoded (dictionary indices, repetition and
definition levels), so every epoch that reads a row group decodes it again: on one core about
250 M int32 token ids a second, slower than a loader that only slices what is already decoded
(an in-memory table, or the raw token files litdata's ``optimize`` and Megatron's
preprocessing write).  With ``decoded_cache=True`` the first read of a row group's columns
writes them as an uncompressed Arrow IPC file; every later read of them (the next epoch, the
``DataLoader`` workers, the other ranks of the machine, a later run) maps that file into
memory: zero-copy, nothing decoded, the operating system's page cache shared by every
process.  This is what Hugging Face ``datasets`` does with a Parquet corpus (its Arrow cache
files), here filled as the loader reads.

Layout, under ``<cache dir>/decoded-v1/`` (the lengths cache's directory,
:func:`lodarrow._tables._lengths_store.cache_root`): a folder per data file (the SHA-256 of
its path or URI), holding a folder per version of it, named by the SHA-256 of its
:class:`~lodarrow._tables._lengths_store.Fingerprint` (path or URI, size, modification time
and footer digest: a changed file gets another folder and is not served from the old one),
holding ``<row group>-<columns digest>.arrow`` per row group and set of columns read (in any
order).  The first entry a process writes for a version removes the file's other versions'
folders: a corpus rewritten in place does not leave a stale copy of itself behind.
An entry is written under a temporary name and moved into place (``os.replace``), after its
CRC-32 (``<entry>.crc32``): a reader never sees a torn file.  Each process checks an entry
against its checksum the first time it maps it (about 6 GB/s; once, not at every epoch), so
bytes damaged on the disk (which in an uncompressed column would read as other token ids,
silently) are never served: such an entry is removed and the row group decoded from its file
again.  Entries are replaced, never rewritten in place, so a file still mapped by a reader
stays valid.

The cache takes the disk of the decoded columns (a ``list<int32>`` column: 4 bytes a token
plus 4 a sequence) and is not bounded: :func:`clear_decoded_cache` empties it.  The first
entry that cannot be written (the disk full, a read-only directory) is a ``RuntimeWarning``,
and from then on that loader writes none (its reads decode what the cache lacks).
"""

import hashlib
import json
import mmap
import os
import shutil
import threading
import uuid
import warnings
import zlib

import pyarrow as pa

from lodarrow._tables._lengths_store import cache_root, check_cache_dir

__all__ = ["DecodedCache", "decoded_cache", "clear_decoded_cache"]

#: The layout version of the entries (a change makes a new directory).
VERSION = 1
_SUBDIR = f"decoded-v{VERSION}"
_SUFFIX = ".arrow"
_CRC = ".crc32"


def decoded_cache(flag, cache_dir, fn):
    """The :class:`DecodedCache` that ``decoded_cache=flag`` and ``cache_dir`` (already
    checked by ``check_cache_dir``) ask for, or None."""
    from lodarrow._validation import as_flag

    if not as_flag(flag, f"{fn}: decoded_cache"):
        return None
    if cache_dir is False:
        raise ValueError(f"{fn}: decoded_cache=True keeps decoded row groups in the cache "
                         f"directory, but cache_dir=False turns the cache directory off; give "
                         f"cache_dir a path (or None: the default directory)")
    return DecodedCache(cache_dir)


class DecodedCache:
    """Decoded row groups as Arrow IPC files (see the module's docstring).

    Parameters
    ----------
    cache_dir : str or None
        The cache directory (None: the default one).
    """

    def __init__(self, cache_dir=None):
        self.cache_dir = cache_dir
        self.root = os.path.join(cache_root(cache_dir), _SUBDIR)
        self._lock = threading.Lock()
        self._failed = False
        self._checked = set()  # (path, inode, size, mtime) of entries whose checksum held
        self._pruned = set()   # files whose other versions' folders this process removed

    def __getstate__(self):  # sent to DataLoader workers: no lock, a fresh warning state
        return {"cache_dir": self.cache_dir}

    def __setstate__(self, state):
        self.__init__(state["cache_dir"])

    def _file_dir(self, fp):
        """The folder of every version of the file ``fp`` names (its path or URI)."""
        return os.path.join(self.root, hashlib.sha256(fp.name.encode()).hexdigest()[:32])

    def entry(self, fp, g, columns):
        """The path of row group ``g``'s ``columns`` (in any order) of the file ``fp`` (a
        Fingerprint): ``<file>/<version>/<row group>-<columns>.arrow``."""
        names = hashlib.sha256(json.dumps(sorted(columns)).encode()).hexdigest()[:16]
        return os.path.join(self._file_dir(fp), fp.key(), f"{g}-{names}{_SUFFIX}")

    def get(self, fp, g, columns, num_rows):
        """The table kept for row group ``g``'s ``columns`` (``num_rows`` rows, as the footer
        says), memory-mapped; None when there is none, or when it does not match its
        checksum or its row group (then it is removed, to be written again)."""
        path = self.entry(fp, g, columns)
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:  # none yet (or unreadable: decoded from the data file)
            return None
        try:
            st = os.fstat(fd)
            mapped = mmap.mmap(fd, 0, access=mmap.ACCESS_READ) if st.st_size else None
        except (OSError, ValueError):
            mapped = None
        finally:
            os.close(fd)
        if mapped is None:
            _remove(path)
            return None
        # the table's buffers point into the mapping and keep it alive, after the entry is
        # replaced or removed too (a file is never rewritten in place)
        buf = pa.py_buffer(mapped)
        seen = (path, st.st_ino, st.st_size, st.st_mtime_ns)
        if seen not in self._checked:  # once a process: a damaged entry is never served
            if _read_crc(path) != zlib.crc32(buf):
                _remove(path)
                return None
            self._checked.add(seen)
        try:
            table = pa.ipc.open_file(buf).read_all()
        except (OSError, pa.ArrowException):
            _remove(path)
            return None
        # another row group's entry copied over this one, a digest collision: not served
        if table.num_rows != num_rows or set(table.column_names) != set(columns):
            _remove(path)
            return None
        return table.select(list(columns))

    def put(self, fp, g, columns, table):
        """Keep ``table`` (row group ``g``'s ``columns``, as decoded) for later reads: the
        Arrow IPC file, and beside it its CRC-32 (written first: an entry in place always
        has its checksum)."""
        if self._failed:
            return
        path = self.entry(fp, g, columns)
        tmp = f"{path}.{uuid.uuid4().hex}.tmp"
        try:
            if fp.name not in self._pruned:
                self._prune(fp)
            sink = pa.BufferOutputStream()
            with pa.ipc.new_file(sink, table.schema) as writer:
                writer.write_table(table)
            data = sink.getvalue()
            os.makedirs(os.path.dirname(path), exist_ok=True)
            # two processes writing one entry at once may leave one's checksum beside the
            # other's bytes (bits past a bitmap's end need not agree): then the entry is
            # refused at its next read and written again, never served
            with open(tmp, "w") as f:
                f.write(f"{zlib.crc32(data):08x}")
            os.replace(tmp, path + _CRC)
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except (OSError, pa.ArrowException) as exc:
            _remove(tmp)
            with self._lock:
                if self._failed:
                    return
                self._failed = True
            warnings.warn(f"batch_loader: the decoded cache cannot keep row groups in "
                          f"{self.root!r} ({exc}); they are decoded from their files again "
                          f"at every read", RuntimeWarning, stacklevel=2)

    def _prune(self, fp):
        """Remove the folders of the file's other versions (changed, touched, rewritten):
        never read again, each the size of the file's decoded columns.  A process still
        mapping one of their entries keeps its mapping."""
        self._pruned.add(fp.name)
        here = self._file_dir(fp)
        try:
            names = os.listdir(here)
        except OSError:
            return
        for name in names:
            if name != fp.key():
                shutil.rmtree(os.path.join(here, name), ignore_errors=True)


def _read_crc(path):
    """The CRC-32 kept beside entry ``path``, or None."""
    try:
        with open(path + _CRC) as f:
            return int(f.read(16), 16)
    except (OSError, ValueError):
        return None


def _remove(path):
    for name in (path, path + _CRC) if path.endswith(_SUFFIX) else (path,):
        try:
            os.remove(name)
        except OSError:
            pass


def clear_decoded_cache(cache_dir=None):
    """Delete the decoded cache's entries: the row groups ``batch_loader`` kept decoded.

    Parameters
    ----------
    cache_dir : str or path-like, optional
        The cache directory; by default ``$LODARROW_CACHE_DIR``, else
        ``$XDG_CACHE_HOME/lodarrow``, else ``~/.cache/lodarrow``.

    Returns
    -------
    int
        How many entries (row groups' columns) were removed.

    See Also
    --------
    batch_loader : What fills the cache (``decoded_cache``).
    clear_lengths_cache, clear_data_cache : The cache directory's other contents.

    Notes
    -----
    Only the cache's own subdirectory (``decoded-v1``) is removed, with what a killed writer
    left there (``*.tmp``, not counted).  A loader reading at that moment keeps the entries
    it has mapped (removing a file leaves its mapping valid) and decodes the others from
    their files again.

    Examples
    --------
    >>> import tempfile, lodarrow as la
    >>> la.clear_decoded_cache(tempfile.mkdtemp())
    0
    """
    cache_dir = check_cache_dir(cache_dir, "clear_decoded_cache")
    if cache_dir is False:
        return 0
    root = os.path.join(cache_root(cache_dir), _SUBDIR)
    if os.path.isfile(root) or os.path.islink(root):  # not a folder: nothing kept, removed
        _remove(root)
        return 0
    n = 0
    for _, _, names in os.walk(root):
        n += sum(1 for name in names if name.endswith(_SUFFIX))
    shutil.rmtree(root, ignore_errors=True)
    return n
