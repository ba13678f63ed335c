"""A bounded local cache of remote Parquet files, shared by the processes of one machine.

A loader given ``cache_bytes`` reads the row groups of a remote corpus (``s3://``, ``gs://``,
any filesystem that is not local) through this cache
(docs/training.md#a-local-cache-for-remote-corpora): the first read of a row group's column
chunks fetches them from the object store (ranged requests, as without a cache) and keeps them
on the local disk; every later read of them, by this process or by any other on the machine
(ranks, ``DataLoader`` workers, the next run), reads them from there and fetches nothing.

Layout, under ``<cache dir>/data-v1/`` (the lengths cache's directory,
:func:`lodarrow._tables._lengths_store.cache_root`), per remote file, named by the SHA-256 of
its :class:`~lodarrow._tables._lengths_store.Fingerprint` (path or URI, size, modification
time and footer digest: a changed object gets another entry, and is never served stale):

- ``<key>.data``: a *sparse local copy* of the object: a file of its size in which only the
  byte ranges fetched so far are written (the holes take no disk space).  pyarrow reads it as
  the Parquet file it copies, with the footer already in memory.
- ``<key>.json``: the entry's index: the byte ranges present, the bytes that writers in flight
  reserved, and the copy's inode (a copy deleted and made again starts empty).  Replaced whole
  (``os.replace``): a reader never sees a torn one.
- ``<key>.pin``: a lock file.  A process reading the entry holds a shared ``flock`` on it (a
  *pin*) from before it reads the index until the row group is decoded; eviction takes it
  exclusively without waiting, so an entry in use is never evicted.  Its modification time is
  the entry's last use (least recently used entries go first).
- ``usage.json``: the bytes present and reserved across the entries, counted again from the
  indexes where it may be wrong: after a reboot, and once a process the first time it is
  short of room (a reservation of a writer that was killed is dropped where no process holds
  the entry); ``.lock``: an exclusive ``flock`` held to change the usage or an index, or to
  evict.  It is never held while fetching or writing data.

A read (:meth:`DataCache.read_row_group`) pins the entry, subtracts the ranges present from the
byte ranges pyarrow reads for the row group's columns (each column chunk, computed as Arrow
computes it), and fetches what is missing in a few requests (ranges less than 64 KiB apart
fetched as one).  Under the lock it reserves room, evicting unpinned entries (least recently
used first) until the bytes present and reserved fit ``max_bytes``; then, without the lock, it
writes the bytes at their offsets and syncs them (``fdatasync``: an index never claims bytes a
crash lost); then, under the lock, it adds the ranges to the index.  pyarrow decodes the row
group from a file object that serves each read from the local copy, or from memory, and
fetches what no index holds (a read the ranges above did not foresee), so a hole is never read
as zeros.  Bytes that cannot be kept (more than ``max_bytes``, every other entry pinned, a full
disk: a ``RuntimeWarning`` once) are decoded from memory: the read succeeds, uncached.

``fcntl`` is imported inside the functions (it is POSIX only).
"""

import bisect
import contextlib
import json
import os
import re
import threading
import uuid
import warnings
import zlib

import pyarrow as pa

from lodarrow._tables._filesystems import changed_since_footer, open_input
from lodarrow._tables._lengths_store import cache_root, check_cache_dir

__all__ = ["DataCache", "clear_data_cache", "column_chunk_ranges", "data_cache"]

#: The layout version of the entries (a change makes a new directory).
VERSION = 1
_SUBDIR = f"data-v{VERSION}"
#: Missing ranges less than this apart are fetched in one request (a request costs more than
#: the bytes between; pyarrow's own coalescing uses 8 KiB on object stores' latency).
HOLE = 64 << 10
_KEY = re.compile(r"^([0-9a-f]{64})\.(json|data|pin)$")


def _boot_id():
    """This boot of the machine (Linux), or None."""
    global _BOOT
    if _BOOT is False:
        try:
            with open("/proc/sys/kernel/random/boot_id") as f:
                _BOOT = f.read().strip()
        except OSError:
            _BOOT = None
    return _BOOT


_BOOT = False


def _fcntl(fn):
    try:
        import fcntl
    except ImportError:  # not POSIX: no flock
        raise NotImplementedError(f"{fn}: cache_bytes needs POSIX file locks (fcntl.flock), "
                                  f"which this platform lacks") from None
    return fcntl


def data_cache(cache_bytes, cache_dir, fn):
    """The :class:`DataCache` that ``cache_bytes`` and ``cache_dir`` (already checked by
    ``check_cache_dir``) ask for, or None (``cache_bytes=None``: no data cache)."""
    from lodarrow._validation import as_positive_int

    if cache_bytes is None:
        return None
    max_bytes = as_positive_int(cache_bytes, f"{fn}: cache_bytes")
    if cache_dir is False:
        raise ValueError(f"{fn}: cache_bytes={max_bytes} keeps remote row groups in the cache "
                         f"directory, but cache_dir=False turns the cache directory off; give "
                         f"cache_dir a path (or None: the default directory)")
    _fcntl(fn)
    return DataCache(max_bytes, cache_dir)


# ---------------------------------------------------------------------------- byte ranges
def _merge(ranges, hole=0):
    """Sorted ``[start, end)`` ranges with those overlapping (or less than ``hole`` apart)
    joined."""
    out = []
    for a, b in sorted(ranges):
        if b <= a:
            continue
        if out and a <= out[-1][1] + hole:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def _subtract(ranges, present):
    """The parts of ``ranges`` not in ``present`` (both merged)."""
    out = []
    for a, b in ranges:
        k = bisect.bisect_right(present, (a, float("inf"))) - 1
        k = max(k, 0)
        while a < b and k < len(present):
            pa_, pb = present[k]
            if pb <= a:
                k += 1
                continue
            if pa_ >= b:
                break
            if pa_ > a:
                out.append((a, pa_))
            a = max(a, pb)
            k += 1
        if a < b:
            out.append((a, b))
    return out


def _total(ranges):
    return sum(b - a for a, b in ranges)


def _covering(present, at):
    """The range of ``present`` (merged) holding byte ``at``, or None."""
    k = bisect.bisect_right(present, (at, float("inf"))) - 1
    if k >= 0 and present[k][0] <= at < present[k][1]:
        return present[k]
    return None


def column_chunk_ranges(meta, g, columns=None):
    """The byte ranges of row group ``g``'s column chunks of ``columns`` (top-level names or
    dotted paths; None: every column), merged: what pyarrow reads to decode them.

    A column chunk starts at its dictionary page, if any, else at its first data page, and
    spans its compressed size (Arrow's ``ComputeColumnChunkRange``).
    """
    rg = meta.row_group(g)
    schema = meta.schema
    out = []
    for i in range(rg.num_columns):
        path = schema.column(i).path
        if columns is not None and not any(path == c or path.startswith(c + ".")
                                           for c in columns):
            continue
        cc = rg.column(i)
        start = cc.data_page_offset
        dictionary = cc.dictionary_page_offset if cc.has_dictionary_page else None
        if dictionary is not None and 0 < dictionary < start:
            start = dictionary
        out.append((int(start), int(start + cc.total_compressed_size)))
    return _merge(out)


# ---------------------------------------------------------------------------- the cache
class DataCache:
    """Remote Parquet files' bytes kept on the local disk, at most ``max_bytes`` of them.

    Parameters
    ----------
    max_bytes : int
        The most bytes kept across every entry of the directory (the bytes fetched, not the
        disk blocks: a sparse file rounds each range to the filesystem's block).  Each process
        holds the directory to the limit it was given.
    cache_dir : str, path-like or None
        The cache directory (None: the default, see ``cache_root``); entries go under
        ``data-v1/``.

    Notes
    -----
    Thread-safe, and safe across processes (file locks).  The counters (:meth:`counters`)
    are this process's.  Pickled (to a ``DataLoader`` worker), it keeps its directory and
    limit and starts its counters at zero.
    """

    def __init__(self, max_bytes, cache_dir=None):
        self.max_bytes = int(max_bytes)
        self.directory = os.path.join(cache_root(cache_dir), _SUBDIR)
        self._init_process()

    def _init_process(self):
        self._lock = threading.Lock()
        self._warned = self._recounted = False
        self._counts = dict.fromkeys(("fetched_bytes", "fetch_requests", "cached_bytes",
                                      "stored_bytes", "uncached_bytes", "unplanned_bytes",
                                      "evicted_entries", "damaged_bytes"), 0)

    def __getstate__(self):
        return {"max_bytes": self.max_bytes, "directory": self.directory}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._init_process()

    def counters(self):
        """This process's counts, as a dict.

        Returns
        -------
        dict
            ``fetched_bytes`` and ``fetch_requests`` (from the object store),
            ``cached_bytes`` (read from local copies), ``stored_bytes`` (kept),
            ``uncached_bytes`` (fetched but not kept: no room), ``unplanned_bytes`` (fetched
            for a read the column chunk ranges did not foresee), ``evicted_entries`` and
            ``damaged_bytes`` (local bytes whose checksum failed: dropped, fetched again).
        """
        with self._lock:
            return dict(self._counts)

    def _count(self, **counts):
        with self._lock:
            for name, n in counts.items():
                self._counts[name] += n

    # --- reading ------------------------------------------------------------------------------
    def read_row_group(self, fp, meta, g, columns, fn):
        """Columns ``columns`` of row group ``g`` of the remote file ``fp``, read through the
        cache (``meta``: its footer, as read with the fingerprint)."""
        import pyarrow.parquet as pq

        need = column_chunk_ranges(meta, g, columns)
        with self._pinned(fp.key(), fn):
            copy = _LocalCopy(self, fp, fn)
            f = pa.PythonFile(copy, mode="r")
            try:
                copy.ensure(need)
                pf = pq.ParquetFile(f, metadata=meta, pre_buffer=False)
                return pf.read_row_group(g, columns=columns, use_threads=False)
            finally:
                f.close()

    # --- paths and locks ----------------------------------------------------------------------
    def _path(self, key, suffix):
        return os.path.join(self.directory, f"{key}.{suffix}")

    @contextlib.contextmanager
    def _pinned(self, key, fn):
        """Hold a shared lock on the entry's pin file (it is not evicted meanwhile), and mark
        the entry used now."""
        fcntl = _fcntl(fn)
        os.makedirs(self.directory, exist_ok=True)
        path = self._path(key, "pin")
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_SH)
                same = os.fstat(fd).st_ino == os.stat(path).st_ino
            except FileNotFoundError:  # evicted while this waited: pin the new one
                same = False
            except BaseException:
                os.close(fd)
                raise
            if same:
                break
            os.close(fd)
        try:
            os.utime(fd)  # the entry's last use
            yield
        finally:
            os.close(fd)  # releases the lock

    @contextlib.contextmanager
    def _locked(self):
        """The directory's exclusive lock (usage, indexes, eviction)."""
        fcntl = _fcntl("the data cache")
        os.makedirs(self.directory, exist_ok=True)
        fd = os.open(os.path.join(self.directory, ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _write_json(self, path, obj):
        tmp = f"{path}.{uuid.uuid4().hex}.tmp"
        try:
            with open(tmp, "w") as f:
                json.dump(obj, f, separators=(",", ":"))
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.remove(tmp)
            raise

    def _index(self, key):
        """The entry's index: ``{"ranges": [(a, b)], "sums": [(a, b, crc)], "pending":
        {token: bytes}, "inode": n}`` (empty when there is none, or it cannot be read).

        ``sums`` are the pieces written, each with the CRC-32 of its bytes; ``ranges`` (their
        union) are what the index vouches for.  An index without sums (an older lodarrow's)
        vouches for nothing: its bytes are fetched again."""
        try:
            with open(self._path(key, "json")) as f:
                idx = json.load(f)
            sums = sorted({(int(a), int(b), int(c)) for a, b, c in idx.get("sums", ())})
            pending = {str(t): int(n) for t, n in idx.get("pending", {}).items()}
            return {"ranges": _merge((a, b) for a, b, _ in sums), "sums": sums,
                    "pending": pending, "inode": idx.get("inode"),
                    "name": idx.get("name"), "size": idx.get("size")}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return {"ranges": [], "sums": [], "pending": {}, "inode": None, "name": None,
                    "size": None}

    def _present(self, key, size):
        """``(sums, fd)``: the pieces of the local copy the index vouches for (``(start, end,
        crc)``), and the copy opened for reading (None when it has none).  Called pinned."""
        idx = self._index(key)
        if not idx["sums"] or idx["size"] != size:
            return [], None
        try:
            fd = os.open(self._path(key, "data"), os.O_RDONLY)
        except FileNotFoundError:
            return [], None
        if os.fstat(fd).st_ino != idx["inode"]:  # not the copy the index describes
            os.close(fd)
            return [], None
        return idx["sums"], fd

    def forget(self, fp, piece):
        """Drop ``piece`` (``(start, end, crc)``) from the entry's index: its bytes on the
        disk are not the ones fetched (a damaged disk, a stray write).  They are fetched
        again, never served."""
        key = fp.key()
        with self._locked():
            idx = self._index(key)
            if tuple(piece) not in idx["sums"]:
                return
            before = _total(idx["ranges"])
            idx["sums"].remove(tuple(piece))
            idx["ranges"] = _merge((a, b) for a, b, _ in idx["sums"])
            self._write_index(key, fp, idx, idx["inode"])
            self._set_usage(max(self._usage() - (before - _total(idx["ranges"])), 0))
        self._count(damaged_bytes=piece[1] - piece[0])

    @contextlib.contextmanager
    def fetching(self, key, ranges, fn):
        """Hold an exclusive lock on the fetch of ``ranges`` of the entry ``key`` (a lock file
        per range set, ``<key>.<digest>.fetch``): the processes (and threads) that need the
        same row group's column chunks at once fetch them once, the others wait and then
        read what the first one kept (MosaicML's local leader, per range).  Called pinned:
        eviction, which removes the lock files, waits for no one and takes no pinned entry."""
        import hashlib

        fcntl = _fcntl(fn)
        digest = hashlib.blake2b(json.dumps(ranges).encode(), digest_size=8).hexdigest()
        fd = os.open(self._path(key, f"{digest}.fetch"), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock

    # --- keeping bytes ------------------------------------------------------------------------
    def keep(self, fp, blobs):
        """Write ``blobs`` (``[(offset, bytes)]`` of the file ``fp``, whose entry the caller
        pinned) into its local copy, each with its CRC-32: the pieces the index then vouches
        for (``(start, end, crc)``), or None when they could not be kept (no room, or a local
        error: a ``RuntimeWarning`` once)."""
        key = fp.key()
        ranges = _merge((a, a + len(b)) for a, b in blobs)
        sums = [(a, a + len(b), zlib.crc32(b)) for a, b in blobs]
        token = uuid.uuid4().hex
        data = self._path(key, "data")
        try:
            with self._locked():
                idx = self._index(key)
                try:
                    inode = os.stat(data).st_ino
                except FileNotFoundError:
                    inode = None
                fresh = inode is None or idx["inode"] != inode or idx["size"] != fp.size
                if fresh:  # no copy, or one its index does not describe: a new, empty one
                    idx = {"ranges": [], "sums": [], "pending": {}}
                new = _total(_subtract(ranges, idx["ranges"]))
                if new == 0:
                    return idx["sums"]
                if new > self.max_bytes or not self._make_room(new, key):
                    return None
                if fresh:
                    fd = os.open(data, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                    try:
                        os.ftruncate(fd, fp.size)
                        inode = os.fstat(fd).st_ino
                    finally:
                        os.close(fd)
                idx["pending"][token] = new
                self._write_index(key, fp, idx, inode)
                self._set_usage(self._usage() + new)
            # the bytes, outside the lock: the pin keeps the entry, the reservation its room
            error = None
            try:
                fd = os.open(data, os.O_WRONLY)
                try:
                    for at, blob in blobs:
                        view = memoryview(blob)
                        while len(view):
                            done = os.pwrite(fd, view, at)
                            view, at = view[done:], at + done
                    os.fdatasync(fd)  # on disk before an index vouches for them
                finally:
                    os.close(fd)
            except OSError as exc:
                error = exc
            with self._locked():
                idx = self._index(key)
                reserved = idx["pending"].pop(token, new)
                before = _total(idx["ranges"])
                if error is None:
                    idx["sums"] = sorted(set(idx["sums"]) | set(sums))
                    idx["ranges"] = _merge((a, b) for a, b, _ in idx["sums"])
                added = _total(idx["ranges"]) - before
                self._write_index(key, fp, idx, inode)
                self._set_usage(max(self._usage() + added - reserved, 0))
            if error is not None:
                raise error
        except OSError as exc:
            self._warn(exc)
            return None
        self._count(stored_bytes=added)
        return idx["sums"]

    def _write_index(self, key, fp, idx, inode):
        self._write_json(self._path(key, "json"),
                         {"version": VERSION, "name": fp.name, "size": fp.size, "inode": inode,
                          "ranges": [list(r) for r in idx["ranges"]],
                          "sums": [list(r) for r in idx["sums"]],
                          "pending": idx["pending"]})

    def _warn(self, exc):
        with self._lock:
            if self._warned:
                return
            self._warned = True
        warnings.warn(f"the data cache in {self.directory!r} cannot keep what it fetches "
                      f"({exc}); those row groups are read from the object store instead",
                      RuntimeWarning, stacklevel=4)

    # --- usage and eviction (under the lock) --------------------------------------------------
    def _usage(self):
        """The bytes present and reserved (``usage.json``); counted again from the indexes
        when it is missing, or was written before the machine last started (a crash may
        have lost what followed)."""
        try:
            with open(os.path.join(self.directory, "usage.json")) as f:
                usage = json.load(f)
            if usage.get("boot") == _boot_id():
                return int(usage["bytes"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            pass
        return self._recount()

    def _set_usage(self, n):
        self._write_json(os.path.join(self.directory, "usage.json"),
                         {"bytes": int(n), "boot": _boot_id()})

    def _keys(self):
        keys = set()
        with contextlib.suppress(FileNotFoundError):
            for name in os.listdir(self.directory):
                m = _KEY.match(name)
                if m:
                    keys.add(m.group(1))
        return keys

    def _recount(self):
        """The usage from the indexes (a crashed writer's reservation dropped where no one
        holds the entry); written to ``usage.json``."""
        total = 0
        for key in self._keys():
            idx = self._index(key)
            if idx["pending"]:
                with self._exclusive(key) as free:
                    if free:  # no writer holds it: its reservations are stale
                        idx["pending"] = {}
                        if idx["size"] is not None:
                            self._write_json(self._path(key, "json"), {
                                "version": VERSION, "name": idx["name"], "size": idx["size"],
                                "inode": idx["inode"],
                                "ranges": [list(r) for r in idx["ranges"]],
                                "sums": [list(r) for r in idx["sums"]], "pending": {}})
            total += _total(idx["ranges"]) + sum(idx["pending"].values())
        self._set_usage(total)
        return total

    @contextlib.contextmanager
    def _exclusive(self, key):
        """Whether the entry's pin could be taken exclusively at once (no one reads it)."""
        fcntl = _fcntl("the data cache")
        try:
            fd = os.open(self._path(key, "pin"), os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            yield False
            return
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:  # BlockingIOError: pinned
                yield False
                return
            yield True
        finally:
            os.close(fd)

    def _remove(self, key):
        """Remove an entry no one holds: its bytes, or None when it is pinned."""
        with self._exclusive(key) as free:
            if not free:
                return None
            idx = self._index(key)
            with contextlib.suppress(FileNotFoundError):
                for name in os.listdir(self.directory):  # its fetch locks: none is held
                    if name.startswith(f"{key}.") and name.endswith(".fetch"):
                        with contextlib.suppress(FileNotFoundError):
                            os.remove(os.path.join(self.directory, name))
            for suffix in ("json", "data", "pin"):  # the pin last, still locked
                with contextlib.suppress(FileNotFoundError):
                    os.remove(self._path(key, suffix))
            return _total(idx["ranges"]) + sum(idx["pending"].values())

    def _make_room(self, new, keep):
        """Evict entries, least recently used first, until ``new`` more bytes fit; False when
        they cannot (the others are pinned)."""
        usage = self._usage()
        if usage + new <= self.max_bytes:
            return True
        if not self._recounted:  # once a process: a killed writer's reservation is dropped
            self._recounted = True
            usage = self._recount()
            if usage + new <= self.max_bytes:
                return True
        for attempt in range(2):
            order = []
            for key in self._keys() - {keep}:
                try:
                    used = os.stat(self._path(key, "pin")).st_mtime_ns
                except FileNotFoundError:
                    used = 0
                order.append((used, key))
            for _, key in sorted(order):
                freed = self._remove(key)
                if freed is None:
                    continue
                self._count(evicted_entries=1)
                usage = max(usage - freed, 0)
                if usage + new <= self.max_bytes:
                    break
            self._set_usage(usage)
            if usage + new <= self.max_bytes:
                return True
            if attempt == 0:
                usage = self._recount()  # a writer killed since: its reservation dropped
                if usage + new <= self.max_bytes:
                    return True
        return False

    def clear(self):
        """Remove every entry no process holds; how many were removed."""
        if not os.path.isdir(self.directory):
            return 0
        n = 0
        with self._locked():
            for key in self._keys():
                if self._remove(key) is not None:
                    n += 1
            self._recount()
        return n


class _LocalCopy:
    """The file object pyarrow reads a remote file through (``pyarrow.PythonFile``): each read
    is served from memory, where the pieces of the local copy it needs are loaded once their
    checksum is checked (a piece whose bytes fail it is dropped from the index and fetched
    again), beside the bytes fetched; what neither holds is fetched first.  Made while the
    entry is pinned."""

    def __init__(self, cache, fp, fn):
        self.cache, self.fp, self.fn = cache, fp, fn
        self._size = fp.size
        self.sums, self._fd = cache._present(fp.key(), fp.size)
        self.pieces = []    # [(offset, bytes)] in memory: checked local pieces, fetched bytes
        self._loaded = set()  # the local pieces loaded (or found damaged)
        self._remote = None
        self.pos = 0
        self.closed = False

    def _have(self):
        return _merge([(a, a + len(b)) for a, b in self.pieces])

    def _load(self, ranges):
        """Load the local pieces overlapping ``ranges`` into memory, each checked against
        its checksum; a damaged one is dropped from the index (and fetched again)."""
        wanted = [p for p in self.sums if p not in self._loaded
                  and any(p[0] < b and a < p[1] for a, b in ranges)]
        local = 0
        for piece in wanted:
            self._loaded.add(piece)
            a, b, crc = piece
            data = self._pread(a, b)
            if zlib.crc32(data) != crc:
                self.cache.forget(self.fp, piece)
                continue
            self.pieces.append((a, data))
            local += b - a
        if local:
            self.cache._count(cached_bytes=local)

    def _refresh(self):
        """Read the index again (another process may have kept bytes since)."""
        sums, fd = self.cache._present(self.fp.key(), self._size)
        if fd is not None:
            if self._fd is not None:
                os.close(self._fd)
            self.sums, self._fd = sums, fd

    def ensure(self, ranges, unplanned=False):
        """Make ``ranges`` readable from memory: from the local copy where it holds them,
        else fetched (a few requests; one process fetches a range set at a time, the others
        wait for it) and kept."""
        self._load(ranges)
        if not _subtract(ranges, self._have()):
            return
        with self.cache.fetching(self.fp.key(), [list(r) for r in ranges], self.fn):
            self._refresh()
            self._load(ranges)
            missing = _merge(_subtract(ranges, self._have()), HOLE)
            if missing:
                self._fetch(missing, unplanned)

    def _fetch(self, missing, unplanned):
        if self._remote is None:
            self._remote = open_input(self.fp.path, self.fp.filesystem, self.fn)
            if self._remote.size() != self._size:  # the rest of the copy is another version's
                raise changed_since_footer(f"{self._size} bytes then, "
                                           f"{self._remote.size()} now")
        blobs = []
        for a, b in missing:
            data = self._remote.read_at(b - a, a)
            if len(data) != b - a:
                raise OSError(f"{self.fn}: {self.fp.name!r} gave {len(data)} bytes at offset "
                              f"{a}, {b - a} expected (the object changed since its footer "
                              f"was read)")
            blobs.append((a, data))
        n = _total(missing)
        self.cache._count(fetched_bytes=n, fetch_requests=len(missing))
        if unplanned:
            self.cache._count(unplanned_bytes=n)
        if self.cache.keep(self.fp, blobs) is None:
            self.cache._count(uncached_bytes=n)
        self.pieces.extend(blobs)

    # --- the file protocol pyarrow.PythonFile uses --------------------------------------------
    def read(self, n=-1):
        lo = self.pos
        hi = self._size if n is None or n < 0 else min(self._size, lo + n)
        if hi <= lo:
            return b""
        out = self._bytes(lo, hi)
        self.pos = hi
        return out

    def _bytes(self, lo, hi):
        if _subtract([(lo, hi)], self._have()):
            self.ensure([(lo, hi)], unplanned=True)
        parts, at = [], lo
        while at < hi:
            a, b = next((a, b) for a, b in self.pieces if a <= at < a + len(b))
            end = min(hi, a + len(b))
            parts.append(bytes(memoryview(b)[at - a:end - a]))
            at = end
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def _pread(self, lo, hi):
        out = os.pread(self._fd, hi - lo, lo)
        while len(out) < hi - lo:  # a short read (not at the end: the copy has the full size)
            more = os.pread(self._fd, hi - lo - len(out), lo + len(out))
            if not more:
                raise OSError(f"{self.fn}: the local copy of {self.fp.name!r} ends early")
            out += more
        return out

    def seek(self, pos, whence=0):
        self.pos = pos if whence == 0 else self.pos + pos if whence == 1 else self._size + pos
        return self.pos

    def tell(self):
        return self.pos

    def close(self):
        if self.closed:
            return
        self.closed = True
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._remote is not None:
            self._remote.close()
            self._remote = None

    def readable(self):
        return True

    def seekable(self):
        return True

    def writable(self):
        return False


def clear_data_cache(cache_dir=None):
    """Delete the data cache's entries: the local copies of remote row groups.

    Parameters
    ----------
    cache_dir : str or path-like, optional
        The cache directory; by default ``$LODARROW_CACHE_DIR``, else
        ``$XDG_CACHE_HOME/lodarrow``, else ``~/.cache/lodarrow``.

    Returns
    -------
    int
        How many entries (remote files) were removed.

    See Also
    --------
    batch_loader : What fills the cache (``cache_bytes``).

    Notes
    -----
    Only the cache's own subdirectory (``data-v1``) is touched.  An entry a process is
    reading at that moment (another rank, a ``DataLoader`` worker) is left in place; it is
    evicted later like any other.  The lengths cache is cleared by
    :func:`lodarrow.clear_lengths_cache`.

    Examples
    --------
    >>> import tempfile, lodarrow as la
    >>> la.clear_data_cache(tempfile.mkdtemp())
    0
    """
    cache_dir = check_cache_dir(cache_dir, "clear_data_cache")
    if cache_dir is False:
        return 0
    return DataCache(1, cache_dir).clear()
