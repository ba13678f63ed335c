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
    assert f"not met on: {bench.OP_TITLES[r['op']]} {r['workload']} (0.50x)" in said
    # the write floor: measured through lodarrow's own allocator, and through np.empty
    for b in rows:
        assert b["write_floor_allocator"] == "lodarrow" and b["write_floor_numpy_s"] > 0
    assert bench.floor_statement(rows) in text and "from lodarrow's own allocator" in text
    # a backward under the floor is named, with its ratio; under an np.empty floor (old
    # runs) the statement says it is no floor for lodarrow's pooled outputs
    under = json.loads(json.dumps(slow["bandwidth"]))
    heavy = next(b for b in under if bench.write_heavy(b))
    heavy["backward_over_floor"] = 0.4
    said = bench.floor_statement(under)
    assert f"{bench.OP_TITLES[heavy['op']]} {heavy['workload']} (0.40x)" in said
    assert "no floor for them" not in said
    for b in under:
        del b["write_floor_allocator"]
    assert "no floor for them" in bench.floor_statement(under)
    # sequence_conv is bound by arithmetic: judged by its FLOP rate (its backward runs two
    # products of the forward's size), the memory share not used for it
    assert bench.flop_ratio(conv) == pytest.approx(2 * conv["forward_s"] / conv["backward_s"])
    assert bench.flop_ratio(pool) is None
    cv = json.loads(json.dumps(conv))
    cv.update(share_ratio=0.1, backward_s=2 * cv["forward_s"] / 0.95)   # 0.95x by FLOPs
    cv["samples_s"].update(forward=[1.0, 1.0], backward=[2 / 0.95, 2 / 0.5])
    pool = dict(pool, share_ratio=1.0)
    said = bench.bandwidth_statement([cv, pool])
    assert "on 1 of 1 rows bound by memory" in said and "not met on" not in said
    assert "by medians 0.95x the forward's, met; round by round" in said
    assert "0.50x-0.95x, at or above 0.9x in 1 of 2." in said
    cv["backward_s"] = 2 * cv["forward_s"] / 0.5
    said = bench.bandwidth_statement([cv, pool])
    assert "by medians 0.50x the forward's, not met;" in said and "not met on" not in said
    # first / last pooling pass trivially (their forward under-counted): said and counted
    fl = json.loads(json.dumps(slow["bandwidth"][:1]))
    fl[0].update(op="pool_last", share_ratio=5.0)
    said = bench.bandwidth_statement(fl)
    assert "on 1 of 1 rows (1 of them first / last pooling" in said and "0 of 0 without" in said
    # a run from before the write floor: its column and words left out, no KeyError
    for b in slow["bandwidth"]:
        del b["write_floor_s"], b["backward_over_floor"]
    said = bench.bandwidth_statement(slow["bandwidth"])
    assert f"{bench.OP_TITLES[r['op']]} {r['workload']} (0.50x)" in said
    assert bench.floor_statement(slow["bandwidth"]) == ""
    assert "| 0.50x | — |" in "\n".join(bench.bandwidth_markdown(slow))
    assert f"of {len(rows) - 1} rows bound by memory" in said  # all but conv
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


def _row(op, wl, name, lib, samples):
    import statistics

    return {"op": op, "workload": wl, "name": name, "lib": lib, "ok": True, "how": "",
            "max_rel_err": 0.0, "samples_s": samples, "median_s": statistics.median(samples),
            "min_s": min(samples), "load": [1.0, 1.0]}


@pytest.mark.skipif(not SCRIPT.exists(), reason="needs the checkout's benchmarks/")
def test_the_goal_load_coverage_and_allocator_statements_follow_the_json():
    """The computed lines of the block: the goal counted by medians and resolved by the
    samples, the peak load and the cases above threads + 1, the operators without rows, the
    allocators and FBGEMM's torch, each following the figures it is computed from."""
    bench = _load_script()
    results = [
        # ahead by medians and resolved: lodarrow's slowest beats every peer's fastest
        _row("pool_sum", "D1", "lodarrow.torch", "lodarrow", [1.0, 1.1, 1.2]),
        _row("pool_sum", "D1", "la.vjp", "lodarrow", [1.0, 1.0, 1.0]),
        _row("pool_sum", "D1", "segment_reduce", "torch", [2.0, 2.1, 2.2]),
        # behind by medians, the samples overlapping: not resolved
        _row("pool_last", "D1", "lodarrow.torch", "lodarrow", [1.0, 1.5, 1.6]),
        _row("pool_last", "D1", "la.vjp", "lodarrow", [3.0, 3.1, 3.2]),
        _row("pool_last", "D1", "index_select", "torch", [1.2, 1.3, 1.4]),
    ]
    results[3]["load"] = [2.5, 3.5]
    results[3]["load_rounds"] = [4.25, 3.0]
    report = {"results": results, "threads": {"torch.get_num_threads()": 1},
              "versions": {"torch": "2.13.0+cpu"},
              "fbgemm": {"error": None, "info": {"torch": "2.14.1+cu130",
                                                 "allocator": {"malloc": "jemalloc",
                                                               "LD_PRELOAD": "/x/libjemalloc.so.2"}}}}
    goal = bench.goal_statement(report)
    assert "lodarrow.torch ahead on 1 of 2 rows by medians (behind on sequence_pool last D1: " \
           "0.87x)" in goal
    assert "ahead on 1, not resolved (the samples overlap) on sequence_pool last D1" in goal
    assert "la.vjp ahead on 1 of 2 rows" in goal and goal.endswith("ahead on 1, behind on sequence_pool last D1.")
    load = bench.load_statement(report)
    assert "4.25 (at sequence_pool last D1)" in load
    assert "1 of 2 cases ran with it above threads + 1 (2): sequence_pool last D1" in load
    cov = bench.coverage_statement(report)
    assert "not measured in this run:" in cov and "sequence_scatter" in cov
    assert "sequence_reshape, lod_reset and lod_append have no timed row" in cov
    full = {"results": [dict(results[0], op=op) for op in {o for v in bench.DIFFERENTIABLE.values()
                                                          for o in v}]}
    n = sum(1 for v in bench.DIFFERENTIABLE.values() if v)
    assert f"{n} of the {n} " in bench.coverage_statement(full)
    assert "not measured" not in bench.coverage_statement(full)
    fb = bench.fbgemm_sentence(report)
    assert "PyPI's CUDA build" in fb and "torch rows on torch 2.13.0+cpu" in fb
    report["versions"]["torch"] = "2.14.1+cu130"
    assert "torch rows" not in bench.fbgemm_sentence(report)
    # allocators: unrecorded (old runs) said so; recorded, each side named
    assert bench.allocator_sentence(report).startswith("Allocators (not recorded")
    report["allocators"] = {"process": {"malloc": "glibc malloc", "LD_PRELOAD": None},
                            "lodarrow_pool": {"enabled": True, "min_bytes": 1 << 20,
                                              "backend": "mimalloc"}}
    al = bench.allocator_sentence(report)
    assert "Arrow's memory pool (mimalloc) for each output of 1 MiB or more" in al
    assert "in this process: glibc malloc (glibc's malloc gets fresh pages" in al
    assert "FBGEMM's worker: jemalloc (LD_PRELOAD=/x/libjemalloc.so.2)" in al
    report["allocators"]["process"] = {"malloc": "jemalloc", "LD_PRELOAD": "/x/j.so"}
    assert "fresh pages" not in bench.allocator_sentence(report)


@pytest.mark.skipif(not SCRIPT.exists(), reason="needs the checkout's benchmarks/")
def test_repeat_and_preload_are_validated(tmp_path, capsys):
    bench = _load_script()
    with pytest.raises(SystemExit):
        bench.parse(["--repeat", "0"])
    bench.parse(["--repeat", "2"])
    assert "warning: --repeat 2: fewer than 5" in capsys.readouterr().err
    bench.parse(["--repeat", "5"])
    assert "warning" not in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bench.parse(["--preload", str(tmp_path / "absent.so")])
    lib = tmp_path / "lib.so"
    lib.write_text("")
    args = bench.parse(["--preload", str(lib)])
    with pytest.raises(SystemExit, match="run benchmarks/grad.py as a program"):
        bench.preload_exec(args, as_program=False)
