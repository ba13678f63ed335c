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
  rows is not used; a folder that cannot take a file (full) turns sharing off for that
  worker, which says so (``off-<worker>``) so that nothing more is handed to it, and
  decodes what it reads, as without sharing.

The training process makes the folder with its dataset and holds an ``flock`` on a file in
it; the folder is removed when the dataset is collected or the process exits, and a folder
whose lock is free (its process killed) by the next dataset made, in any pid namespace that
shares the file system.
"""

import fcntl
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

__all__ = ["Exchange", "ExchangeRoot"]

_PREFIX = "lodarrow-workers-"
#: The longest a worker waits for a row group another live worker claimed, then decodes it
WAIT_S = 120.0


class ExchangeRoot:
    """The folder of one dataset's workers, made by the training process, which holds an
    ``flock`` on its ``.owner`` file while the folder is in use (forked workers share the
    lock): a folder whose lock can be taken was left by a process that is gone, whatever
    the process ids say (another pid namespace sharing ``/dev/shm``, pid 1 in a
    container).  Folders of gone processes are removed first."""

    def __init__(self):
        base = _base_dir()
        _prune(base)
        self.path = os.path.join(base, f"{_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:12]}")
        self._owner = os.getpid()
        self._fd = None
        try:
            os.mkdir(self.path, 0o700)
            self._fd = os.open(os.path.join(self.path, ".owner"), os.O_CREAT | os.O_RDWR,
                               0o600)
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # no folder, or no lock: the workers decode what they read
            self.remove()
            self.path = None

    def remove(self):
        """Remove the folder (in the process that made it only: not in a forked worker)."""
        if os.getpid() != self._owner:
            return
        if self.path is not None:
            shutil.rmtree(self.path, ignore_errors=True)
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __getstate__(self):  # to workers started by spawn: the path (the lock stays here)
        return {"path": self.path, "_owner": self._owner, "_fd": None}


def _base_dir():
    shm = "/dev/shm"
    if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK):
        return shm
    return tempfile.gettempdir()


def _prune(base):
    """Remove the folders in ``base`` whose owner's lock is free (their process is gone)."""
    try:
        names = os.listdir(base)
    except OSError:
        return
    for name in names:
        if not name.startswith(_PREFIX):
            continue
        path = os.path.join(base, name)
        try:
            fd = os.open(os.path.join(path, ".owner"), os.O_RDWR)
        except FileNotFoundError:  # being made now, or half removed: left alone
            continue
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held: in use
            os.close(fd)
            continue
        shutil.rmtree(path, ignore_errors=True)
        os.close(fd)


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
        self._begun = None  # when this worker's previous block read began
        # the training process made the folder (ExchangeRoot); none: nothing shared
        self.off = root is None or not os.path.isdir(root)

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
        """True: claimed here; False: claimed by another; None: sharing is off.  The claim
        is a file holding this process's id, written whole, then linked into place (a link
        is made once or fails: exclusive, and never seen empty)."""
        tmp = f"{base}.{uuid.uuid4().hex}.tmp"
        try:
            with open(tmp, "w") as f:
                f.write(str(os.getpid()))
            os.link(tmp, base + ".claim")
        except FileExistsError:
            return False
        except OSError:  # e.g. the folder full
            self._turn_off()
            return None
        finally:
            _unlink(tmp)
        return True

    def _turn_off(self):
        """Decode from now on, and tell the other workers to hand nothing here."""
        self.off = True
        try:
            open(os.path.join(self.root, f"off-{self.worker}"), "w").close()
        except OSError:
            pass  # then begin() drops what is handed here, block by block

    def _owner(self, base):
        """The claiming process's pid; None: no claim; -1: a claim that names no process
        (not one this module made: removed as a dead one's)."""
        try:
            with open(base + ".claim", "rb") as f:
                text = f.read(32)
        except FileNotFoundError:
            return None
        except OSError:
            return -1
        try:
            return int(text)
        except ValueError:
            return -1

    def _decode_and_hand(self, base, decode):
        try:
            table = decode()
        except BaseException:
            _unlink(base + ".claim")
            raise
        try:
            self._hand(base, table)
        except (OSError, pa.ArrowException):
            self._turn_off()  # e.g. /dev/shm full: the others decode it themselves
        finally:
            _unlink(base + ".claim")  # after the files: an asker then finds its own
        return table

    def begin(self):
        """A block read begins: drop the files handed to this worker that it has not taken
        since its previous block read began (row groups its steps did not need)."""
        now, before = time.time(), self._begun
        self._begun = now
        if before is None:  # (also with sharing off: what others hand here must go)
            return
        tail = f".for-{self.worker}"
        try:
            names = os.listdir(self.root)
        except OSError:
            return
        for name in names:
            if name.endswith(tail):
                path = os.path.join(self.root, name)
                try:  # (a second's margin: a file system's clock is coarse)
                    if os.stat(path).st_mtime < before - 1.0:
                        os.unlink(path)
                except OSError:
                    pass

    def _hand(self, base, table):
        """One IPC file of ``table``, linked for every other worker."""
        askers = [w for w in range(self.num_workers) if w != self.worker
                  and not os.path.exists(os.path.join(self.root, f"off-{w}"))]
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
                if owner is not None and (owner <= 0 or not alive(owner)):
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
