"""The conversion hub's benchmark rows (lodarrow/_bench/_hub.py, docs/interop.md#benchmarks):
``bench --ops hub`` runs them, each peer checked against lodarrow's result, with ratios."""

import pytest

from lodarrow._bench import _hub, _runner


def _options(ops):
    return _runner.BenchOptions(quick=True, scale=0.01, ops=ops, probe_mib=1, budget=0.01,
                                repeat=1, progress=False)


def test_a_plain_bench_run_has_no_hub_case():
    assert _hub.select(()) == []
    assert not any(isinstance(c, _hub.HubCase) for c in _runner.select_cases(_options(())))
    assert {c.op for c in _hub.select(("hub",))} >= {"hub_torch_varlen", "hub_tf_ragged",
                                                       "hub_awkward", "hub_jax_segments"}


@pytest.mark.parametrize("op, peer", [("hub_awkward", "awkward"),
                                      ("hub_torch_jagged", "torch")])
def test_rows_are_checked_and_compared(op, peer):
    pytest.importorskip(peer)
    report = _runner.run_bench(_options((op,)))
    rows = [r for r in report["rows"] if r["op"] == op]
    assert [r["library"] for r in rows] == ["lodarrow", peer]
    assert all(r["status"] == "ok" for r in rows), rows
    assert rows[1]["ratio_to_best_peer"] == 1.0
    assert rows[0]["ratio_to_best_peer"] > 0


def test_the_jax_rows_run_under_the_memory_probe():
    """Regression: DLPack-imported temporaries crashed JAX under tracemalloc (the bench's
    peak-memory probe); run in a process of its own so a crash fails only this test."""
    import subprocess
    import sys

    pytest.importorskip("jax")
    run = subprocess.run([sys.executable, "-m", "lodarrow", "bench", "--ops", "hub_jax",
                          "--quick", "--scale", "0.1", "--probe-mib", "1", "--repeat", "1",
                          "--no-progress"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "hub_jax_segments" in run.stdout
