"""The thread policy (lodarrow/_threads.py, docs/performance.md#threads-on-a-busy-machine):
which CPUs a kernel may use (affinity, cgroup quota, OMP_NUM_THREADS), the machine's load,
LODARROW_NUM_THREADS taken exactly, and the OpenMP wait policy set around the runtime's load."""

import os
import subprocess
import sys

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
        monkeypatch.setattr(_threads, "_LOAD", {"at": -1.0, "busy": 0})
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
    monkeypatch.setitem(_threads._LOAD, "at", -1.0)
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


def test_the_wait_policy_is_set_around_the_load_and_removed(monkeypatch):
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.delenv("GOMP_SPINCOUNT", raising=False)
    with _threads.openmp_environment():
        assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
    assert "OMP_WAIT_POLICY" not in os.environ
    monkeypatch.setenv("OMP_WAIT_POLICY", "active")  # the user's choice stays
    with _threads.openmp_environment():
        assert os.environ["OMP_WAIT_POLICY"] == "active"
    assert os.environ["OMP_WAIT_POLICY"] == "active"
    monkeypatch.delenv("OMP_WAIT_POLICY")
    monkeypatch.setenv("GOMP_SPINCOUNT", "1000")
    with _threads.openmp_environment():
        assert "OMP_WAIT_POLICY" not in os.environ


def _display_env(extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env.update(extra, OMP_DISPLAY_ENV="TRUE")
    code = "import os, lodarrow; print('left:', os.environ.get('OMP_WAIT_POLICY'))"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, check=True)


@pytest.mark.skipif(not la.openmp_enabled(), reason="a serial build has no OpenMP runtime")
def test_import_loads_openmp_passive_and_leaves_the_environment():
    done = _display_env({})
    if "OMP_WAIT_POLICY" not in done.stderr:
        pytest.skip("the OpenMP runtime does not display its environment (not GNU OpenMP)")
    assert "OMP_WAIT_POLICY = 'PASSIVE'" in done.stderr
    assert "left: None" in done.stdout
    done = _display_env({"OMP_WAIT_POLICY": "ACTIVE"})
    assert "OMP_WAIT_POLICY = 'ACTIVE'" in done.stderr and "left: ACTIVE" in done.stdout


def test_kernels_agree_whatever_the_policy_picks(machine):
    rng = np.random.default_rng(0)
    lengths = rng.integers(0, 40, 20_000)
    x = la.LoDTensor(rng.random(int(lengths.sum())), lengths=[lengths.tolist()])
    want = la.sequence_pool(x, "max")
    for running in (1, 3, 30):
        machine(cpus=4, affinity=4, running=running)
        assert np.array_equal(la.sequence_pool(x, "max").data, want.data)
