"""The CPU kernels' thread policy, in one place (a leaf module).

A kernel runs on ``threads_for(work)`` OpenMP threads: one below ``PARALLEL_MIN_WORK``
elements of work, else :func:`num_threads`.  That is ``LODARROW_NUM_THREADS`` when set (taken
as it is: tests and benchmarks ask for exact counts); otherwise the CPUs this process may use
(its affinity mask, its cgroup's CPU quota, ``OMP_NUM_THREADS`` where set, as Ray and Dask set
it in their workers), less the CPUs other runnable threads occupy right now.  The environment
is read on every call, the machine's load at most every ``LOAD_SAMPLE_S`` seconds.

Why the load counts: an OpenMP region ends at a barrier, so a kernel on two threads waits for
the slower; on a machine whose cores are busy, one of its threads is descheduled for a time
slice (milliseconds) while the other waits.  Issue 35 measured the default two threads at a
third of one thread's calls/s beside two busy processes.  With a short OpenMP spin
(:func:`openmp_environment`: a finished thread polls ``SPIN_COUNT`` times, then sleeps,
instead of GNU OpenMP's 300,000) a kernel on a busy machine runs on one thread, an idle
machine keeps every core, and back-to-back calls find their workers awake.  The caller's own
workers, still spinning after its last call, are not counted as busy
(:func:`watch_teams_with` gives the policy their thread ids).  Threaded kernels take chunks
of sequences balanced by rows (:func:`chunk_bounds`, :func:`plan_threads`).  Whether the build has OpenMP at all is
``lodarrow.openmp_enabled()``; without it every count is honoured serially.
"""

import contextlib
import math
import os
import threading
import time

import numpy as np

__all__ = ["LOAD_SAMPLE_S", "PARALLEL_MIN_WORK", "SPIN_COUNT", "busy_cpus", "chunk_bounds",
           "num_threads", "openmp_environment", "plan_threads", "row_bounds", "threads_for",
           "usable_cpus", "watch_teams_with"]

#: Below this many elements of work a kernel runs on one thread: OpenMP's start-up would
#: cost more than it saves on calls that take a few microseconds.
PARALLEL_MIN_WORK = 1 << 16

#: The machine's load is sampled at most this often (a read of ``/proc/loadavg``, ~3 us).
LOAD_SAMPLE_S = 0.005

#: ``GOMP_SPINCOUNT`` while the OpenMP runtime loads (:func:`openmp_environment`): how many
#: times a thread that has finished its share polls before it sleeps (0.26 ms on the
#: development machine; GNU OpenMP's default, 300,000, 7 ms).  Long enough to span the
#: Python between two kernels of a loop or a udf (waking a sleeping thread costs ~0.1 ms on
#: a virtual machine); short enough not to take a busy machine's cores.
SPIN_COUNT = 10_000


def num_threads():
    """Threads a kernel may use now.

    ``LODARROW_NUM_THREADS`` if set, exactly; else :func:`usable_cpus` less
    :func:`busy_cpus` (at least 1).
    """
    env = os.environ.get("LODARROW_NUM_THREADS")
    if env:
        return max(1, int(env))
    usable = usable_cpus()
    n = max(1, min(usable, _cpu_count() - busy_cpus()))
    if n > 1 and _WATCH.team is None and _TEAM_IDS:
        _WATCH.team = _Team(_TEAM_IDS[0](usable))
    return n


def threads_for(work):
    """1 for small work (see ``PARALLEL_MIN_WORK``), else :func:`num_threads`."""
    return 1 if work < PARALLEL_MIN_WORK else num_threads()


def usable_cpus():
    """The CPUs this process may use: its affinity mask, capped by its cgroup's CPU quota
    (rounded up) and by ``OMP_NUM_THREADS`` where that is set (its first entry)."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        n = os.cpu_count() or 1
    quota = _cgroup_quota()
    if quota is not None:
        n = min(n, quota)
    omp = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    if omp.isdigit() and int(omp) > 0:
        n = min(n, int(omp))
    return max(1, n)


_LOADAVG = []  # the open /proc/loadavg (pread from 0 regenerates it), or None where absent
_TEAM_IDS = []  # the extension's openmp_team_ids, once lodarrow has loaded it


class _Watch(threading.local):
    """Per calling thread: its last load sample and its OpenMP workers (GNU OpenMP keeps a
    pool of workers for each thread that opens parallel regions)."""

    at = -1.0
    busy = 0
    team = None


_WATCH = _Watch()


class _Team:
    """The OpenMP workers of one calling thread, watched through their
    ``/proc/self/task/<tid>/stat`` files (kept open: a ``pread`` is ~2 us)."""

    def __init__(self, ids):
        self.pid = os.getpid()
        me = threading.get_native_id()
        self.fds = []
        for tid in ids[1:]:
            if tid and tid != me:
                try:
                    self.fds.append(os.open(f"/proc/self/task/{tid}/stat",
                                            os.O_RDONLY | os.O_CLOEXEC))
                except OSError:  # no /proc (not Linux) or the thread already gone
                    pass

    def running(self):
        """How many of the workers are running now (spinning after the last region), or
        None when one is gone (the runtime made a new pool: watch it again)."""
        n = 0
        for fd in self.fds:
            try:
                stat = os.pread(fd, 128, 0)
            except OSError:
                return None
            if not stat:  # the thread has exited
                return None
            state = stat.rindex(b")") + 2  # after "pid (name) "; a name may hold ")"
            n += stat[state:state + 1] == b"R"
        return n

    def close(self):
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds = []

    __del__ = close


def watch_teams_with(team_ids):
    """Give the policy ``team_ids(n)``: the OS thread ids of the calling thread's OpenMP team
    of ``n`` threads (``lodarrow._ext.lod_utils.openmp_team_ids``; ``import lodarrow`` calls
    this).  The first time a thread is given more than one thread, its team is looked up
    once; from then on its workers that are running when the load is sampled (spinning for
    ``SPIN_COUNT`` polls after the last call) are its own, not another process's."""
    _TEAM_IDS[:] = [team_ids]


def busy_cpus():
    """CPUs that other runnable threads occupy now: the machine's running threads (the
    fourth field of ``/proc/loadavg``) but the one asking and its own OpenMP workers; 0 where
    the kernel does not say.

    Sampled at most every ``LOAD_SAMPLE_S`` seconds per calling thread.  What is left is
    other work: other processes, or this process's other threads (Ray's or Dask's tasks,
    map_parquet's reader and writer).
    """
    watch = _WATCH
    now = time.monotonic()
    if now - watch.at < LOAD_SAMPLE_S:
        return watch.busy
    if not _LOADAVG:
        try:
            _LOADAVG.append(os.open("/proc/loadavg", os.O_RDONLY | os.O_CLOEXEC))
        except (OSError, AttributeError):
            _LOADAVG.append(None)
    busy = 0
    if _LOADAVG[0] is not None:
        try:
            running = int(os.pread(_LOADAVG[0], 128, 0).split()[3].split(b"/")[0])
            busy = max(0, running - 1)
        except (OSError, ValueError, IndexError):
            busy = 0
    team = watch.team
    if busy and team is not None:
        own = team.running() if team.pid == os.getpid() else None
        if own is None:  # a forked child, or a new pool: looked up again when next needed
            team.close()
            watch.team = None
        else:
            busy = max(0, busy - own)
    watch.at, watch.busy = now, busy
    return busy


_CPUS = []


def _cpu_count():
    """The machine's CPUs, read once (``os.cpu_count`` parses a sysfs file: ~6 us a call)."""
    if not _CPUS:
        _CPUS.append(os.cpu_count() or 1)
    return _CPUS[0]


_QUOTA = []


def _cgroup_quota():
    """The cgroup's CPU quota in CPUs (rounded up), None when unlimited; read once."""
    if not _QUOTA:
        _QUOTA.append(_read_cgroup_quota())
    return _QUOTA[0]


def _read_cgroup_quota(proc="/proc/self/cgroup", root="/sys/fs/cgroup"):
    """The CPU quota of this process's cgroup (``proc``: its ``/proc/<pid>/cgroup``) under
    the cgroup mount ``root``: v2's ``cpu.max``, or v1's ``cpu.cfs_quota_us`` over
    ``cpu.cfs_period_us``; the cgroup's own files first, then the mount's top."""
    candidates = []
    try:
        with open(proc) as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        path = path.rstrip("/")
        if controllers == "":
            candidates += [("v2", f"{root}{path}/cpu.max"), ("v2", f"{root}/cpu.max")]
        elif "cpu" in controllers.split(","):
            for mount in (f"{root}/cpu", f"{root}/cpu,cpuacct"):
                candidates += [("v1", f"{mount}{path}"), ("v1", mount)]
    for kind, where in candidates:
        try:
            if kind == "v2":
                with open(where) as f:
                    quota, period = f.read().split()[:2]
                if quota == "max":
                    return None
            else:
                with open(f"{where}/cpu.cfs_quota_us") as f:
                    quota = f.read().strip()
                with open(f"{where}/cpu.cfs_period_us") as f:
                    period = f.read().strip()
                if int(quota) <= 0:
                    return None
            return max(1, math.ceil(int(quota) / int(period)))
        except (OSError, ValueError):
            continue
    return None


@contextlib.contextmanager
def openmp_environment():
    """Around the first load of the OpenMP runtime (``import lodarrow``): a short spin,
    ``GOMP_SPINCOUNT=SPIN_COUNT``, unless the user chose a wait policy (``OMP_WAIT_POLICY``
    or ``GOMP_SPINCOUNT`` set).

    GNU OpenMP's default lets a thread that has finished its share spin 300,000 times (7 ms
    on the development machine), after a region and at its closing barrier; on a busy machine those spins take the
    cores that the other processes, and the kernel's own descheduled thread, need.  Sleeping
    at once (``OMP_WAIT_POLICY=passive``) frees them, but then every threaded call pays a
    wake-up (~0.1 ms on a virtual machine: 1.2x the time of a 0.45 ms call).  A short spin
    (0.26 ms there) keeps the workers of back-to-back calls awake and lets them sleep soon
    otherwise.  The runtime reads the variable when it loads, so it is set for
    the import and removed after: processes started later, and other OpenMP runtimes loaded
    later, see the environment as the user left it.  A runtime that is already loaded (the
    same ``libgomp`` loaded by another library first) keeps its own setting.
    """
    chosen = any(k in os.environ for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT"))
    if not chosen:
        os.environ["GOMP_SPINCOUNT"] = str(SPIN_COUNT)
    try:
        yield
    finally:
        if not chosen:
            os.environ.pop("GOMP_SPINCOUNT", None)


def chunk_bounds(offsets, n_chunks):
    """Split the sequences of ``offsets`` into ``n_chunks`` runs of about equal row count.

    Returns int64 sequence indices ``b`` with ``b[0] == 0`` and ``b[-1] == n_sequences``;
    chunk ``c`` is sequences ``[b[c], b[c + 1])``.  Balancing by rows, not by sequence count,
    keeps one thread from getting all the long sequences.
    """
    n_seq = offsets.shape[0] - 1
    n_chunks = max(1, min(int(n_chunks), n_seq))
    # int64 targets: float ones would make searchsorted cast all of ``offsets`` to float64.
    targets = np.linspace(0, int(offsets[-1]), n_chunks + 1).astype(np.int64)
    bounds = np.searchsorted(offsets, targets, side="left").astype(np.int64)
    bounds[0], bounds[-1] = 0, n_seq
    np.clip(bounds, 0, n_seq, out=bounds)
    return np.maximum.accumulate(bounds)


def row_bounds(offsets, threads):
    """Row-balanced chunks for ``threads`` > 1, None (one chunk) for a single thread."""
    return chunk_bounds(offsets, threads * 4) if threads > 1 else None


def plan_threads(offsets, work, by_rows=True):
    """``(n_threads, bounds)``: threads for ``work`` elements and the sequence chunks.

    One chunk of all sequences when single-threaded; else ``4 * n_threads`` chunks balanced
    by rows (``by_rows``), or by sequence count where every sequence costs the same.
    """
    n_threads = threads_for(work)
    n_seq = offsets.shape[0] - 1
    if n_threads == 1 or n_seq < 2:
        return 1, _one_chunk(n_seq)
    if not by_rows:
        n_chunks = min(n_threads * 4, n_seq)
        return n_threads, np.arange(n_chunks + 1, dtype=np.int64) * n_seq // n_chunks
    return n_threads, chunk_bounds(offsets, n_threads * 4)


# n_seq -> read-only [0, n_seq]: single-threaded calls are the small, frequent ones, where a
# fresh array per call would be a noticeable share of the call.
_ONE_CHUNK = {}
_ONE_CHUNK_SIZE = 256


def _one_chunk(n_seq):
    """The bounds ``[0, n_seq]`` of a single chunk (read-only; the kernels only read it)."""
    bounds = _ONE_CHUNK.get(n_seq)
    if bounds is None:
        bounds = np.array([0, n_seq], dtype=np.int64)
        bounds.flags.writeable = False
        if len(_ONE_CHUNK) >= _ONE_CHUNK_SIZE:
            _ONE_CHUNK.clear()
        _ONE_CHUNK[n_seq] = bounds
    return bounds
