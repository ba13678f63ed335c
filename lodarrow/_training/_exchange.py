"""Row groups decoded once for all of a loader's ``DataLoader`` workers
(docs/training.md#how-it-works-workers-and-shared-memory).

Worker ``i`` of ``k`` makes steps ``i, i + k, ...`` (so that batches arrive in plan order
whatever ``k``), so every worker reads nearly every block; from Parquet each worker would
decode each row group of it, ``k`` decodes a row group.  Instead the workers of one dataset
hand decoded row groups to each other through files in a folder of their own, on the
memory file system (``/dev/shm``) where there is one:

- A worker that needs a row group nobody has claimed claims it (``<entry>.claim``, made
  with ``O_EXCL``, holding its pid), decodes it, and hands it to every other worker: one
  Arrow IPC file, linked once per worker (``<entry>.for-<worker>``), which that worker maps
  (zero-copy) and unlinks when it reads the row group.  The file's memory goes with the
  last link and mapping; a worker drops the links it has not taken since its previous
  block began (row groups its steps did not need).
- A worker that finds a row group claimed decodes or takes the block's other row groups
  first, then waits for the claimed ones: the workers of a block decode its row groups
  side by side, each row group once.
- Whatever goes wrong costs a decode, never a batch or a hang: a claim released with no file
  (its owner could not write one) is claimed again by the waiting worker; a claim whose
  process died is taken over; a wait is bounded; a file that does not hold the row group's
  rows is not used; a folder that cannot take a file turns sharing off for that worker (it
  decodes what it reads, as without sharing).

The folder is named by the training process and removed when its dataset is collected or
the process exits; folders left by killed processes are removed by the next dataset made.
"""

import hashlib
import json
import mmap
import os
import shutil
import tempfile
import time
import uuid

import pyarrow as pa

from lodarrow._training._readahead import DEFERRED, Stopped, reading
from lodarrow._training._ring import alive

__all__ = ["Exchange", "exchange_root", "remove_root"]

_PREFIX = "lodarrow-workers-"
#: The longest a worker waits for a row group another live worker claimed, then decodes it
WAIT_S = 120.0


def exchange_root():
    """A folder name (not made yet) for one dataset's workers; folders of dead training
    processes are removed first."""
    base = _base_dir()
    _prune(base)
    return os.path.join(base, f"{_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:12]}")


def remove_root(root, owner):
    """Remove ``root``, in the process ``owner`` that named it only (not in a forked
    worker that inherited the finalizer)."""
    if os.getpid() == owner:
        shutil.rmtree(root, ignore_errors=True)


def _base_dir():
    shm = "/dev/shm"
    if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK):
        return shm
    return tempfile.gettempdir()


def _prune(base):
    try:
        names = os.listdir(base)
    except OSError:
        return
    for name in names:
        if not name.startswith(_PREFIX):
            continue
        try:
            pid = int(name[len(_PREFIX):].split("-")[0])
        except ValueError:
            continue
        if pid != os.getpid() and not alive(pid):
            shutil.rmtree(os.path.join(base, name), ignore_errors=True)


def _unlink(path):
    try:
        os.unlink(path)
    except OSError:
        pass


class Exchange:
    """One worker's end of the workers' row group exchange (see the module's docstring).

    Parameters
    ----------
    root : str
        The dataset's folder (made here if missing).
    worker, num_workers : int
        This worker's id, and how many there are.
    """

    def __init__(self, root, worker, num_workers):
        self.root, self.worker, self.num_workers = root, int(worker), int(num_workers)
        self.off = False
        self._begun = None  # when this worker's previous block read began
        try:
            os.makedirs(root, exist_ok=True)
        except OSError:
            self.off = True

    def read(self, fp, g, columns, num_rows, decode):
        """Row group ``g`` of the file ``fp`` (a Fingerprint), its ``columns`` (``num_rows``
        rows): taken from another worker, or decoded here (``decode()``) and handed to those
        that asked; :data:`DEFERRED` inside ``reading(first=True)`` when another worker is
        decoding it."""
        if self.off:
            return decode()
        phase = reading.now()
        base = self._base(fp, g, columns)
        if phase is None or phase.first:
            table = self._take(base, columns, num_rows)
            if table is not None:
                return table
            claimed = self._claim(base)
            if claimed is None:
                return decode()
            if claimed:
                return self._decode_and_hand(base, decode)
            if phase is not None:
                return DEFERRED
        return self._wait(base, columns, num_rows, decode,
                          None if phase is None else phase.stop)

    # --- the files ------------------------------------------------------------------------
    def _base(self, fp, g, columns):
        digest = hashlib.sha256(json.dumps([fp.name, fp.key(), sorted(columns)]).encode())
        return os.path.join(self.root, f"{g}-{digest.hexdigest()[:24]}")

    def _claim(self, base):
        """True: claimed here; False: claimed by another; None: sharing is off (no file)."""
        try:
            fd = os.open(base + ".claim", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except FileExistsError:
            return False
        except OSError:
            self.off = True
            return None
        try:
            os.write(fd, str(os.getpid()).encode())
        finally:
            os.close(fd)
        return True

    def _owner(self, base):
        """The claiming process's pid; 0 while it is being written; None: no claim."""
        try:
            with open(base + ".claim", "rb") as f:
                text = f.read(32)
        except FileNotFoundError:
            return None
        except OSError:
            return 0
        try:
            return int(text)
        except ValueError:
            return 0

    def _decode_and_hand(self, base, decode):
        try:
            table = decode()
        except BaseException:
            _unlink(base + ".claim")
            raise
        try:
            self._hand(base, table)
        except (OSError, pa.ArrowException):
            self.off = True  # e.g. /dev/shm full: the askers decode it themselves
        finally:
            _unlink(base + ".claim")  # after the files: an asker then finds its own
        return table

    def begin(self):
        """A block read begins: drop the files handed to this worker that it has not taken
        since its previous block read began (row groups its steps did not need)."""
        now, before = time.time(), self._begun
        self._begun = now
        if self.off or before is None:
            return
        tail = f".for-{self.worker}"
        try:
            names = os.listdir(self.root)
        except OSError:
            return
        for name in names:
            if name.endswith(tail):
                path = os.path.join(self.root, name)
                try:
                    if os.stat(path).st_mtime < before:
                        os.unlink(path)
                except OSError:
                    pass

    def _hand(self, base, table):
        """One IPC file of ``table``, linked for every other worker."""
        askers = [w for w in range(self.num_workers) if w != self.worker]
        if not askers:
            return
        tmp = f"{base}.{uuid.uuid4().hex}.tmp"
        try:
            with pa.OSFile(tmp, "wb") as sink:
                with pa.ipc.new_file(sink, table.schema) as writer:
                    writer.write_table(table)
            for worker in askers:
                link = f"{base}.for-{worker}"
                step = f"{link}.{uuid.uuid4().hex}.tmp"
                os.link(tmp, step)
                os.replace(step, link)  # over an older one never taken
        finally:
            _unlink(tmp)

    def _take(self, base, columns, num_rows):
        """The row group handed to this worker, mapped (its file unlinked), or None."""
        path = f"{base}.for-{self.worker}"
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return None
        try:
            size = os.fstat(fd).st_size
            mapped = mmap.mmap(fd, 0, access=mmap.ACCESS_READ) if size else None
        except (OSError, ValueError):
            mapped = None
        finally:
            os.close(fd)
            _unlink(path)
        if mapped is None:
            return None
        try:
            table = pa.ipc.open_file(pa.py_buffer(mapped)).read_all()
        except (OSError, pa.ArrowException):
            return None
        if table.num_rows != num_rows or set(table.column_names) != set(columns):
            return None
        return table.select(list(columns))

    def _wait(self, base, columns, num_rows, decode, stop):
        """The row group ``base`` another worker claimed: its file, or decoded here when the
        claim goes without one, its process dies or :data:`WAIT_S` passes."""
        delay, deadline = 1e-4, time.monotonic() + WAIT_S
        took = False
        try:
            while True:
                table = self._take(base, columns, num_rows)
                if table is not None:
                    took = True
                    return table
                owner = self._owner(base)
                if owner is not None and owner and not alive(owner):
                    _unlink(base + ".claim")  # its process died: taken over
                    owner = None
                if owner is None:  # released: handed before (taken above) or not at all
                    claimed = self._claim(base)
                    if claimed is None:
                        return decode()
                    if claimed:
                        table = self._take(base, columns, num_rows)
                        if table is not None:  # handed between the two looks
                            took = True
                            _unlink(base + ".claim")
                            return table
                        return self._decode_and_hand(base, decode)
                    continue  # another asker claimed it first
                if stop is not None and stop.is_set():
                    raise Stopped("a read made ahead, stopped: its pass ended")
                if time.monotonic() > deadline:
                    return decode()
                time.sleep(delay)
                delay = min(delay * 2, 5e-3)
        finally:
            if not took:  # a file handed after all is not left behind
                _unlink(f"{base}.for-{self.worker}")
