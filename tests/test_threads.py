"""The thread policy (lodarrow/_threads.py, docs/performance.md#threads-on-a-busy-machine):
which CPUs a kernel may use (affinity, cgroup quota, OMP_NUM_THREADS), the machine's load,
LODARROW_NUM_THREADS taken exactly, the caller's own OpenMP workers told apart from other work,
and the OpenMP spin count set around the runtime's load."""

import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import lodarrow as la
from lodarrow import _threads
from lodarrow._threads import PARALLEL_MIN_WORK, num_threads, threads_for


@pytest.fixture
def machine(monkeypatch, tmp_path):
    """A fake machine: ``set(cpus=, affinity=, running=, quota=)`` (running: the fourth
    field of /proc/loadavg, the asking thread included)."""
    monkeypatch.delenv("LODARROW_NUM_THREADS", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    loadavg = tmp_path / "loadavg"

    def set_(cpus=8, affinity=8, running=1, quota=None):
        loadavg.write_text(f"0.50 0.40 0.30 {running}/321 4242\n")
        fd = os.open(loadavg, os.O_RDONLY)
        monkeypatch.setattr(_threads, "_LOADAVG", [fd])
        monkeypatch.setattr(_threads, "_WATCH", _threads._Watch())
        monkeypatch.setattr(_threads, "_TEAM_IDS", [])
        monkeypatch.setattr(_threads, "_cpu_count", lambda: cpus)
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(affinity)))
        monkeypatch.setattr(_threads, "_QUOTA", [quota])

    return set_


def test_an_idle_machine_gives_every_usable_cpu(machine):
    machine(cpus=8, affinity=8, running=1)
    assert num_threads() == 8 and threads_for(PARALLEL_MIN_WORK) == 8
    assert threads_for(PARALLEL_MIN_WORK - 1) == 1


@pytest.mark.parametrize("running, want", [(2, 7), (5, 4), (8, 1), (9, 1), (40, 1)])
def test_other_running_threads_take_their_cpus(machine, running, want):
    machine(cpus=8, affinity=8, running=running)
    assert _threads.busy_cpus() == running - 1
    assert num_threads() == want


def test_two_busy_processes_on_two_cores_leave_one_thread(machine):
    # issue 35's loop: the kernel's thread and two busy processes on a 2-core machine
    machine(cpus=2, affinity=2, running=3)
    assert num_threads() == 1
    machine(cpus=2, affinity=2, running=1)
    assert num_threads() == 2


def test_affinity_quota_and_omp_num_threads_cap(machine, monkeypatch):
    machine(cpus=64, affinity=4, running=1)
    assert num_threads() == 4  # taskset / cpuset
    machine(cpus=64, affinity=64, running=1, quota=3)
    assert num_threads() == 3  # a container's CPU quota
    machine(cpus=64, affinity=64, running=1)
    monkeypatch.setenv("OMP_NUM_THREADS", "2")  # Ray's and Dask's workers set it
    assert num_threads() == 2
    monkeypatch.setenv("OMP_NUM_THREADS", "3,2")  # nested levels: the outer one
    assert num_threads() == 3
    monkeypatch.setenv("OMP_NUM_THREADS", "junk")
    assert num_threads() == 64


def test_lodarrow_num_threads_is_taken_exactly(machine, monkeypatch):
    machine(cpus=2, affinity=2, running=9, quota=1)
    monkeypatch.setenv("LODARROW_NUM_THREADS", "7")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert num_threads() == 7 and threads_for(PARALLEL_MIN_WORK) == 7


def test_the_load_is_sampled_not_read_on_every_call(machine, monkeypatch, tmp_path):
    machine(cpus=4, affinity=4, running=1)
    assert num_threads() == 4
    (tmp_path / "loadavg").write_text("1 1 1 4/100 1\n")
    assert num_threads() == 4  # within LOAD_SAMPLE_S: the last sample
    _threads._WATCH.at = -1.0
    assert num_threads() == 1


def test_no_loadavg_means_no_load(machine, monkeypatch):
    machine(cpus=4, affinity=4)
    monkeypatch.setattr(_threads, "_LOADAVG", [None])
    assert _threads.busy_cpus() == 0 and num_threads() == 4


@pytest.mark.parametrize("layout, files, want", [
    ("0::/box\n", {"box/cpu.max": "150000 100000\n"}, 2),
    ("0::/box\n", {"box/cpu.max": "max 100000\n"}, None),
    ("0::/\n", {"cpu.max": "200000 100000\n"}, 2),
    ("0::/box\n", {}, None),
    ("4:cpu,cpuacct:/job\n", {"cpu,cpuacct/job/cpu.cfs_quota_us": "50000\n",
                              "cpu,cpuacct/job/cpu.cfs_period_us": "100000\n"}, 1),
    ("4:cpu,cpuacct:/job\n", {"cpu/job/cpu.cfs_quota_us": "-1\n",
                              "cpu/job/cpu.cfs_period_us": "100000\n"}, None),
    ("1:cpu:/\n", {"cpu/cpu.cfs_quota_us": "400000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 4),
])
def test_cgroup_quota_v1_and_v2(tmp_path, layout, files, want):
    proc = tmp_path / "cgroup"
    proc.write_text(layout)
    root = tmp_path / "fs"
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    assert _threads._read_cgroup_quota(str(proc), str(root)) == want


def test_this_machines_policy_is_in_range(monkeypatch):
    monkeypatch.delenv("LODARROW_NUM_THREADS", raising=False)
    assert 1 <= num_threads() <= _threads.usable_cpus() <= (os.cpu_count() or 1)


class _FakeTeam(_threads._Team):
    """A team whose workers' stat files are ours to write (state R: running, S: asleep)."""

    def __init__(self, tmp_path, states):
        self.pid = os.getpid()
        self.files = []
        self.fds = []
        for i, state in enumerate(states):
            f = tmp_path / f"stat-{i}"
            f.write_text(f"{4000 + i} (python (x)) {state} 1 2 3\n")  # ')' in a name too
            self.files.append(f)
            self.fds.append(os.open(f, os.O_RDONLY))


def test_the_callers_own_spinning_workers_are_not_busy(machine, tmp_path):
    # a 2-core machine whose second running thread is this caller's own worker, spinning for
    # SPIN_COUNT polls after the last call: still an idle machine
    machine(cpus=2, affinity=2, running=2)
    _threads._WATCH.team = _FakeTeam(tmp_path, "R")
    assert _threads.busy_cpus() == 0 and num_threads() == 2
    # the worker asleep: the second running thread is another process's
    machine(cpus=2, affinity=2, running=2)
    _threads._WATCH.team = _FakeTeam(tmp_path, "S")
    assert _threads.busy_cpus() == 1 and num_threads() == 1
    # seven workers, three spinning, on an 8-core machine with two other threads running
    machine(cpus=8, affinity=8, running=6)
    _threads._WATCH.team = _FakeTeam(tmp_path, "RRRSSSS")
    assert _threads.busy_cpus() == 2 and num_threads() == 6


def test_a_team_that_is_gone_or_inherited_is_looked_up_again(machine, tmp_path):
    machine(cpus=4, affinity=4, running=3)
    team = _threads._WATCH.team = _FakeTeam(tmp_path, "RR")
    team.files[1].write_text("")  # the thread has exited: its stat reads empty
    assert _threads.busy_cpus() == 2  # nothing subtracted
    assert _threads._WATCH.team is None and team.fds == []
    machine(cpus=4, affinity=4, running=3)
    team = _threads._WATCH.team = _FakeTeam(tmp_path, "RR")
    team.pid = -1  # made in the parent of a fork: its files are the parent's threads
    assert _threads.busy_cpus() == 2 and _threads._WATCH.team is None


def test_the_team_is_looked_up_once_when_threads_are_first_given(machine, monkeypatch,
                                                                 tmp_path):
    calls = []

    def team_ids(n):
        calls.append(n)
        return [threading.get_native_id()] + [0] * (n - 1)  # no worker ids on this platform

    machine(cpus=4, affinity=4, running=4)  # busy: one thread, no team needed
    monkeypatch.setattr(_threads, "_TEAM_IDS", [team_ids])
    assert num_threads() == 1 and calls == []
    (tmp_path / "loadavg").write_text("0.10 0.10 0.10 1/100 1\n")  # now idle
    _threads._WATCH.at = -1.0
    assert num_threads() == 4 and calls == [4]
    _threads._WATCH.at = -1.0
    assert num_threads() == 4 and calls == [4]  # once per calling thread
    seen = []
    worker = threading.Thread(target=lambda: seen.append(num_threads()))
    worker.start()
    worker.join()
    assert seen == [4] and calls == [4, 4]  # another thread: its own OpenMP pool


@pytest.mark.skipif(not la.openmp_enabled() or not os.path.isdir("/proc/self/task"),
                    reason="needs GNU OpenMP's thread pool and Linux's /proc")
def test_openmp_team_ids_are_this_threads_pool():
    from lodarrow._ext.lod_utils import openmp_team_ids

    ids = openmp_team_ids(3)
    assert ids[0] == threading.get_native_id()
    tasks = {int(t) for t in os.listdir("/proc/self/task")}
    assert set(ids) <= tasks and len(set(ids)) == 3
    assert openmp_team_ids(3) == ids  # the runtime keeps the pool: the same threads
    team = _threads._Team(ids)
    try:
        assert len(team.fds) == 2 and team.running() in (0, 1, 2)
    finally:
        team.close()


def test_the_spin_count_is_set_around_the_load_and_removed(monkeypatch):
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.delenv("GOMP_SPINCOUNT", raising=False)
    with _threads.openmp_environment():
        assert os.environ["GOMP_SPINCOUNT"] == str(_threads.SPIN_COUNT)
        assert "OMP_WAIT_POLICY" not in os.environ
    assert "GOMP_SPINCOUNT" not in os.environ
    monkeypatch.setenv("OMP_WAIT_POLICY", "passive")  # the user's choice stays
    with _threads.openmp_environment():
        assert os.environ["OMP_WAIT_POLICY"] == "passive" and "GOMP_SPINCOUNT" not in os.environ
    assert os.environ["OMP_WAIT_POLICY"] == "passive"
    monkeypatch.delenv("OMP_WAIT_POLICY")
    monkeypatch.setenv("GOMP_SPINCOUNT", "1000")
    with _threads.openmp_environment():
        assert os.environ["GOMP_SPINCOUNT"] == "1000"
    assert os.environ["GOMP_SPINCOUNT"] == "1000"


def _display_env(extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env.update(extra, OMP_DISPLAY_ENV="VERBOSE")
    code = "import os, lodarrow; print('left:', os.environ.get('GOMP_SPINCOUNT'))"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, check=True)


@pytest.mark.skipif(not la.openmp_enabled(), reason="a serial build has no OpenMP runtime")
def test_import_loads_openmp_with_the_short_spin_and_leaves_the_environment():
    done = _display_env({})
    if "GOMP_SPINCOUNT" not in done.stderr:
        pytest.skip("the OpenMP runtime does not display its environment (not GNU OpenMP)")
    assert f"GOMP_SPINCOUNT = '{_threads.SPIN_COUNT}'" in done.stderr
    assert "left: None" in done.stdout
    done = _display_env({"OMP_WAIT_POLICY": "PASSIVE"})
    assert "OMP_WAIT_POLICY = 'PASSIVE'" in done.stderr and "left: None" in done.stdout
    assert f"GOMP_SPINCOUNT = '{_threads.SPIN_COUNT}'" not in done.stderr


def test_kernels_agree_whatever_the_policy_picks(machine):
    rng = np.random.default_rng(0)
    lengths = rng.integers(0, 40, 20_000)
    x = la.LoDTensor(rng.random(int(lengths.sum())), lengths=[lengths.tolist()])
    want = la.sequence_pool(x, "max")
    for running in (1, 3, 30):
        machine(cpus=4, affinity=4, running=running)
        assert np.array_equal(la.sequence_pool(x, "max").data, want.data)
