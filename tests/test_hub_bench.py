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
