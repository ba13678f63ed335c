"""Smoke test of benchmarks/grad.py (forward + backward against PyTorch and FBGEMM): every
case at a tiny size, in this process, without FBGEMM.

The speed is not checked (the benchmark's runs compare it); what is checked is the JSON's
shape and that every row was checked against the float64 PyTorch reference before it was
timed: lodarrow's rows (``lodarrow.torch`` and ``la.vjp``) pass that check on every case, a
row that is timed passed it, FBGEMM's rows say why they did not run, and the generated
section of a Markdown file is replaced, not appended, on a second run.
"""

import importlib.util
import json
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "grad.py"
pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _threads_as_found(monkeypatch):
    """The benchmark sets LODARROW_NUM_THREADS and torch's threads for its run: give both
    back, or every later test of the session would run on one thread."""
    import torch

    monkeypatch.setenv("LODARROW_NUM_THREADS", "1")  # undone, whatever main() writes
    monkeypatch.setenv("THP_MEM_ALLOC_ENABLE", "1")
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def _load_script():
    spec = importlib.util.spec_from_file_location("bench_grad", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not SCRIPT.exists(), reason="needs the checkout's benchmarks/")
def test_the_grad_benchmark_checks_every_row_against_torch(tmp_path):
    bench = _load_script()
    out, doc = tmp_path / "grad.json", tmp_path / "doc.md"
    doc.write_text("# Gradients\n\nText.\n\nSmall calls took "
                   f"{bench.SMALL_BEGIN}X{bench.SMALL_END}.\n")
    argv = ["--rows-d1", "2000", "--rows-d16", "400", "--repeat", "1", "--small-calls", "2",
            "--threads", "1", "--skip", "nested", "--json", str(out), "--docs", str(doc)]
    bench.main(argv)
    report = json.loads(out.read_text())
    for key in ("command", "machine", "lodarrow", "versions", "threads", "settings",
                "workloads", "fbgemm", "started", "finished", "load_at_end", "small_calls"):
        assert key in report, key
    assert report["threads"]["LODARROW_NUM_THREADS"] == "1"
    assert report["fbgemm"]["error"]                      # no --fbgemm-python: said why
    sc = report["small_calls"]
    assert sc["checked"] is True and report["complete"] is True
    assert sc["pairs"] >= 30 and sc["order"].startswith("alternating")
    for clock in ("cpu", "wall"):                        # paired ratios, both clocks
        c = sc[clock]
        assert len(c["ratios"]) == sc["pairs"] == len(c["samples_s"]["segment_reduce"])
        q1, q3 = c["ratio_iqr"]
        assert q1 <= c["ratio_median"] <= q3 and c["median_s"]["lodarrow.torch"] > 0
    rows = report["results"]
    cases = {(op, w) for op, ws in bench.OPS for w in ws}
    assert {(r["op"], r["workload"]) for r in rows} == cases
    # lodarrow's own kernels' bandwidth: every case, checked against the reference first
    assert [(b["op"], b["workload"]) for b in report["bandwidth"] if b["ok"]] == [
        (r["op"], r["workload"]) for r in rows if r["name"] == "la.vjp"]
    for r in rows:
        assert isinstance(r["ok"], bool) and (r["ok"] or r["error"]), r
        if r.get("median_s") is not None:                 # timed => checked equal to torch's
            assert r["ok"] and r["max_rel_err"] < 1e-3, r
            assert len(r["samples_s"]) == 1
    for op, w in cases:
        mine = {r["name"]: r for r in rows if (r["op"], r["workload"]) == (op, w)
                and r["lib"] == "lodarrow"}
        assert set(mine) == {"lodarrow.torch", "la.vjp"}, (op, w)
        for r in mine.values():
            assert r["ok"] and r["median_s"] > 0, r
        fb = [r for r in rows if (r["op"], r["workload"]) == (op, w) and r["lib"] == "fbgemm"]
        assert len(fb) == 1 and fb[0]["error"].startswith("not run: ")
        assert any(r["lib"] == "torch" for r in rows if (r["op"], r["workload"]) == (op, w))
    text = doc.read_text()
    assert text.startswith("# Gradients\n\nText.\n") and text.count("## Speed") == 1
    assert (f"took {bench.SMALL_BEGIN}{bench.small_calls_prose(report)}{bench.SMALL_END}."
            in text)
    assert bench.small_calls_sentence(sc) in text
    assert text.count(bench.END) == 1 and "| sequence_pool sum | D1 |" in text
    bench.main(["--from-json", str(out), "--docs", str(doc)])   # regenerated in place
    assert doc.read_text() == text


@pytest.mark.skipif(not (ROOT / "benchmarks" / "results" / "grad.json").exists(),
                    reason="needs the checkout's benchmark results")
def test_the_docs_quote_the_committed_run():
    """Every figure docs/gradients.md gives for the benchmark is the JSON's: the generated
    Speed section and the small-call figure quoted in the prose, regenerated from
    benchmarks/results/grad.json, equal what the document says."""
    bench = _load_script()
    report = json.loads((ROOT / "benchmarks" / "results" / "grad.json").read_text())
    text = (ROOT / "docs" / "gradients.md").read_text()
    a = text.index(bench.BEGIN) + len(bench.BEGIN)
    assert text[a:text.index(bench.END)] == "\n\n" + bench.markdown(report) + "\n"
    a = text.index(bench.SMALL_BEGIN) + len(bench.SMALL_BEGIN)
    assert text[a:text.index(bench.SMALL_END)] == bench.small_calls_prose(report)


@pytest.mark.skipif(not SCRIPT.exists(), reason="needs the checkout's benchmarks/")
def test_the_bandwidth_table_renders_from_the_json_and_old_runs_without_it(tmp_path):
    """lodarrow's own kernels against a plain copy: measured on a tiny case (checked against
    the float64 reference first, every figure positive, the shares the GB/s over the copy's),
    rendered as a second table whose statement is computed from the rows; a JSON from before
    the measurement (no "bandwidth" key) renders as before, without it."""
    bench = _load_script()
    out = tmp_path / "grad.json"
    argv = ["--rows-d1", "2000", "--rows-d16", "400", "--repeat", "1", "--small-calls", "2",
            "--small-pairs", "2", "--threads", "1", "--ops", "pool_sum,pad,conv",
            "--skip", "nested,pad_sequence", "--json", str(out)]
    bench.main(argv)
    report = json.loads(out.read_text())
    rows = report["bandwidth"]
    assert {(r["op"], r["workload"]) for r in rows} == {
        ("pool_sum", "D1"), ("pool_sum", "D16"), ("pad", "D1"), ("pad", "D16"), ("conv", "D16")}
    for r in rows:
        assert r["ok"], r
        for k in ("forward_s", "backward_s", "copy_gbs", "forward_gbs", "backward_gbs"):
            assert r[k] > 0, (k, r)
        assert r["forward_share"] == pytest.approx(r["forward_gbs"] / r["copy_gbs"])
        assert r["backward_share"] == pytest.approx(r["backward_gbs"] / r["copy_gbs"])
        assert r["share_ratio"] == pytest.approx(r["backward_share"] / r["forward_share"])
        assert r["forward_bytes"] == bench.model_bytes(r["bytes_model"]["forward"],
                                                       r["bytes_model"]["sizes"])
        assert len(r["samples_s"]["copy"]) == 1
        # the write floor: the gradients' shapes allocated and written, in the same rounds
        assert r["write_floor_s"] > 0 and len(r["samples_s"]["write_floor"]) == 1
        assert r["backward_over_floor"] == pytest.approx(r["backward_s"] / r["write_floor_s"])
    pool = next(r for r in rows if (r["op"], r["workload"]) == ("pool_sum", "D1"))
    conv = next(r for r in rows if r["op"] == "conv")
    # the write floor is quoted where the backward mostly writes: pooling's, not conv's
    assert bench.write_heavy(pool) and not bench.write_heavy(conv)
    assert pool["gradients_bytes"] == 4 * report["workloads"]["D1"]["rows"]
    wl = report["workloads"]["D1"]
    assert pool["forward_bytes"] == 4 * (wl["rows"] + wl["sequences"]) + 8 * (wl["sequences"] + 1)
    text = bench.markdown(report)
    assert "**Memory bandwidth of lodarrow's kernels.**" in text
    assert bench.bandwidth_statement(rows) in text and "| sequence_pad | D16 |" in text
    # the statement follows the figures: a row made slow is named, with its ratio
    slow = json.loads(json.dumps(report))
    r = slow["bandwidth"][0]
    r["backward_share"] = r["share_ratio"] * 0 + 0.5 * r["forward_share"]
    r["share_ratio"] = 0.5
    said = bench.bandwidth_statement(slow["bandwidth"])
    assert (f"{bench.OP_TITLES[r['op']]} {r['workload']} (0.50x; "
            f"{r['backward_over_floor']:.2f}x the time of writing its gradients)") in said
    # a run from before the write floor: its column and words left out, no KeyError
    for b in slow["bandwidth"]:
        del b["write_floor_s"], b["backward_over_floor"]
    said = bench.bandwidth_statement(slow["bandwidth"])
    assert f"{bench.OP_TITLES[r['op']]} {r['workload']} (0.50x)" in said
    assert "| 0.50x | — |" in "\n".join(bench.bandwidth_markdown(slow))
    assert f"of {len(rows)} rows" in said
    # a JSON from before the bandwidth rows: the same tables, without the second one
    old = {k: v for k, v in report.items() if k != "bandwidth"}
    old_text = bench.markdown(old)
    assert "Memory bandwidth" not in old_text
    assert old_text.split("\n\n<details>")[0] in text
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old))
    doc = tmp_path / "doc.md"
    bench.main(["--from-json", str(path), "--docs", str(doc)])
    assert "Memory bandwidth" not in doc.read_text() and bench.END in doc.read_text()
