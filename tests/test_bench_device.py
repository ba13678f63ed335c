"""``lodarrow bench --device cuda``: the GPU bench's rows (lodarrow/_bench/_device.py).

On a GPU the command runs every operator at a tiny scale, and each row must be a checked,
timed result.  Without one, the command fails with a message naming what is missing, and the
runner's plumbing (selecting the cases, checking against the CPU result, the figures and the
report) runs with the host standing in for the device: the inputs stay where they are and
the synchronisations do nothing, so what is checked is the bookkeeping, not a GPU.
"""

import json

import numpy as np
import pytest

from lodarrow._bench import _cases, _device, _runner

from conftest import CUDA, cuda_unavailable_reason, run_python


def _cli(*args):
    return run_python(["-m", "lodarrow", "bench", "--device", "cuda", *args],
                      env={"COLUMNS": "200"}, timeout=600)


def test_every_operator_has_a_device_row():
    ops = {c.op for c in _device.select_device_cases(_runner.BenchOptions())}
    host_ops = {c.op for c in _cases.all_cases()}
    assert ops == {op for op in host_ops if op.startswith("sequence_")} | {"call_overhead"}
    only = _device.select_device_cases(_runner.BenchOptions(ops=("pool",)))
    assert only and {c.op for c in only} == {"sequence_pool"}


@pytest.mark.skipif(cuda_unavailable_reason() is None, reason="a GPU is here")
def test_without_a_gpu_the_command_says_what_is_missing():
    proc = _cli("--scale", "0.001")
    assert proc.returncode != 0
    assert "bench --device cuda needs" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_bad_options_are_refused_before_the_device_is_asked():
    for args, message in ((("--scale", "0"), "--scale must be > 0"),
                          (("--repeat", "0"), "--repeat must be >= 1"),
                          (("--probe-mib", "0"), "--probe-mib must be >= 1"),
                          (("--peers", "numpy"), "--peers apply to the host bench only"),
                          (("--datasets", "--plot", "x.png"),
                           "--datasets, --plot apply to the host bench only")):
        proc = _cli(*args)
        assert proc.returncode != 0 and message in proc.stderr, proc.stderr


@pytest.fixture
def host_as_device(monkeypatch):
    """The device runner with the host standing in for the GPU (see the module docstring)."""
    monkeypatch.setattr(_device, "_to_device", lambda value: value)
    monkeypatch.setattr(_device, "_to_host", lambda value: value)
    monkeypatch.setattr(_device, "_on_gpu", lambda result: True)
    monkeypatch.setattr(_device, "_synchronize", lambda: None)
    monkeypatch.setattr(_device, "probe_device_bandwidth", lambda nbytes: {
        "copy": 100.0, "reference": 100.0, "bytes": nbytes, "device": "host stand-in"})

    class _Pool:
        def free_all_blocks(self):
            pass

    class _Cupy:
        float32 = np.float32

        @staticmethod
        def asarray(a):
            return np.asarray(a)

        @staticmethod
        def zeros(*args, **kwargs):
            return np.zeros(*args, **kwargs)

        @staticmethod
        def get_default_memory_pool():
            return _Pool()

    monkeypatch.setattr("lodarrow._cupy.get_cupy", lambda *a: _Cupy())


def test_runner_checks_times_and_reports_every_case(host_as_device):
    options = _runner.BenchOptions(scale=0.0005, repeat=3, budget=0.01)
    report = _device.run_device_bench(options, progress=lambda msg: None)
    rows = report["rows"]
    assert len(rows) == len(_device.select_device_cases(options))
    for row in rows:
        assert row["status"] == "ok", row
        assert row["best_s"] <= row["median_s"] and row["repeats"] == 3
        assert row["speedup"] == pytest.approx(row["cpu_best_s"] / row["best_s"])
        if row["bytes"]:
            assert row["gbps"] == pytest.approx(row["bytes"] / row["best_s"] / 1e9)
            assert row["fraction_of_bandwidth"] == pytest.approx(row["gbps"] / 100.0)
    table = _device.format_table(report)
    assert len(table.splitlines()) == len(rows) + 1
    md = _device.to_markdown(report)
    assert md.count("\n| ") == len(rows) + 2 and "host stand-in" in md
    json.dumps(report, default=str)


def test_a_wrong_device_answer_is_reported_not_timed(host_as_device, monkeypatch):
    real = _device.device_call

    def off_by_one(case, dw):
        run, norm = real(case, dw)
        return run, lambda result: _shift(norm(result))

    monkeypatch.setattr(_device, "device_call", off_by_one)
    options = _runner.BenchOptions(scale=0.0005, repeat=3, budget=0.01, ops=("softmax",))
    (row,) = _device.run_device_bench(options, progress=lambda msg: None)["rows"]
    assert row["status"] == "wrong" and "values differ" in row["note"]
    assert "best_s" not in row and "gbps" not in row


def _shift(value):
    if isinstance(value, tuple):
        return tuple(_shift(v) for v in value)
    return np.asarray(value) + 1


@pytest.mark.parametrize("backend", [CUDA])
def test_device_bench_runs_every_operator_on_the_gpu(backend, tmp_path):
    out = tmp_path / "bench.json"
    md = tmp_path / "bench.md"
    proc = _cli("--scale", "0.002", "--budget", "0.01", "--no-progress", "--json", str(out),
                "--markdown", str(md))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(out.read_text())
    assert report["bandwidth"]["copy"] > 0
    bad = [r for r in report["rows"] if r["status"] != "ok"]
    assert not bad, bad
    assert "% copy BW" in md.read_text()
