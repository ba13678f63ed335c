"""The command line (``python -m lodarrow demo|bench|info``) and the benchmark suite's peers.

The CLI runs in a subprocess on tiny sizes; only output structure and exit codes are checked,
never speed.  Each benchmark peer is checked against a slow, obviously-correct loop here, so a
peer that would be wrong is caught before it is ever compared with lodarrow.
"""

import importlib.util
import json

import numpy as np
import pytest

import lodarrow
from lodarrow._bench import _cases, _peers, _report, _runner, _workloads

from conftest import run_python

#: ``lodarrow bench`` runs every peer of the benchmark extra (``lodarrow[bench]``).
needs_bench_extra = pytest.mark.skipif(
    not all(importlib.util.find_spec(m) for m in
            ("pandas", "polars", "awkward", "numba", "rich", "matplotlib")),
    reason="the benchmark extra (lodarrow[bench]) is not installed")


def run_cli(*args, timeout=300):
    return run_python(["-m", "lodarrow", *args], env={"COLUMNS": "200"}, timeout=timeout)


# ====================================================================== workloads
def test_geometric_lengths_sum_mean_and_empties():
    rng = np.random.default_rng(0)
    lengths = _workloads.geometric_lengths(200_000, rng)
    assert lengths.sum() == 200_000 and lengths.dtype == np.int64
    assert 18 < lengths.mean() < 22
    assert 0.03 < (lengths == 0).mean() < 0.07
    assert _workloads.geometric_lengths(0, rng).size == 0


def test_workloads_are_deterministic_and_consistent():
    a = _workloads.make_workload("2-level", 3000)
    b = _workloads.make_workload("2-level", 3000)
    np.testing.assert_array_equal(a.data, b.data)
    assert len(a.offsets) == 2 and a.offsets[-1][-1] == 3000
    assert a.offsets[0][-1] == len(a.offsets[1]) - 1
    w16 = _workloads.make_workload("D=16", 500)
    assert w16.data.shape == (500, 16) and w16.data.dtype == np.float32
    assert w16.arrow.type.value_type.list_size == 16
    assert lodarrow.LoDTensor(w16.data, w16.offsets).lod_level == 1


# ====================================================================== peers vs loops
def _seqs(w):
    off = w.offsets[-1]
    return [w.data[a:b] for a, b in zip(off[:-1], off[1:])]


def ref_pool(w, variant):
    out = []
    for s in _seqs(w):
        if len(s) == 0:
            out.append(np.zeros(w.data.shape[1:]))
        elif variant == "sum":
            out.append(sum(s.astype(np.float64)))
        elif variant == "average":
            out.append(sum(s.astype(np.float64)) / len(s))
        else:
            out.append(np.max(s, axis=0))
    return np.array(out)


def ref_softmax(w, variant):
    out = []
    for s in _seqs(w):
        e = [np.exp(float(v) - max(s)) for v in s]
        out.extend(v / sum(e) for v in e)
    return np.array(out)


def ref_step(w, last):
    return np.array([(s[-1] if last else s[0]) if len(s) else np.zeros(w.data.shape[1:])
                     for s in _seqs(w)])


def ref_expand(w, variant):
    rows = []
    for i, length in enumerate(w.lengths):
        rows.extend([w.per_sequence[i]] * int(length))
    return np.array(rows)


def ref_pad(w, variant):
    p = int(max(w.lengths))
    out = np.zeros((w.n_seq, p) + w.data.shape[1:], np.float32)
    for i, s in enumerate(_seqs(w)):
        for j in range(len(s)):
            out[i, j] = s[j]
    return out, w.lengths


def ref_unpad(w, variant):
    # rows of d values, D=1 included: Paddle's unpad output is [rows, D]
    xpad, _ = w.padded
    values = [xpad[i, j] for i in range(w.n_seq) for j in range(int(w.lengths[i]))]
    return np.array(values).reshape(-1, w.d), np.concatenate(([0], np.cumsum(w.lengths)))


def ref_conv(w, variant):
    x = w.data.reshape(w.rows, -1)
    filt = _peers.conv_filter(x.shape[1])
    start, length = _peers.CONV_CONTEXT
    out = np.zeros((w.rows, filt.shape[1]))
    off = w.offsets[-1]
    for a, b in zip(off[:-1], off[1:]):
        for t in range(a, b):
            ctx = np.concatenate([x[t + start + k] if a <= t + start + k < b
                                  else np.zeros(x.shape[1]) for k in range(length)])
            out[t] = ctx @ filt
    return out


def ref_topk(w, variant):
    rows = []
    pos = 0
    for r, c in zip(w.row_len, w.col_len):
        block = w.data[pos:pos + w.channels * r * c].reshape(w.channels, r, c)
        pos += w.channels * r * c
        for i in range(r):
            row = []
            for ch in range(w.channels):
                vals = sorted(block[ch, i].tolist(), reverse=True)
                row.extend(sum(vals[:k]) / k for k in w.topks)
            rows.append(row)
    return np.array(rows)


def _values_offsets(seqs, dtype):
    lengths = [len(s) for s in seqs]
    values = np.concatenate([np.zeros(0, dtype)] + [np.asarray(s, dtype) for s in seqs])
    return values, np.concatenate(([0], np.cumsum(lengths)))


def _id_seqs(w):
    off = w.offsets[-1]
    return [w.int_ids[a:b].tolist() for a, b in zip(off[:-1], off[1:])]


def ref_reverse(w, variant):
    return _values_offsets([s[::-1] for s in _seqs(w)], w.data.dtype)


def ref_concat(w, variant):
    return _values_offsets([np.concatenate([s, s]) for s in _seqs(w)], w.data.dtype)


def ref_slice(w, variant):
    offset, length = w.slice_args
    return _values_offsets([s[o:o + n] for s, o, n in zip(_seqs(w), offset[:, 0], length[:, 0])],
                          w.data.dtype)


def ref_erase(w, variant):
    return _values_offsets([[v for v in s if v not in _peers.ERASE_TOKENS] for s in _id_seqs(w)],
                          np.int64)


def ref_enumerate(w, variant):
    rows = []
    for s in _id_seqs(w):
        for t in range(len(s)):
            rows.append([s[t + k] if t + k < len(s) else 0 for k in range(_peers.ENUMERATE_WIN)])
    return np.array(rows)


def ref_mask(w, variant):
    m = max(w.lengths)
    return np.array([[j < n for j in range(m)] for n in w.lengths])


def ref_scatter(w, variant):
    out = np.zeros((w.n_seq, _peers.SCATTER_WIDTH))
    off = w.offsets[-1]
    for i in range(w.n_seq):
        for r in range(off[i], off[i + 1]):
            out[i, w.int_ids[r] % _peers.SCATTER_WIDTH] += w.data[r]
    return out


def ref_arrow_parts(w, variant):
    """The workload's own outermost offsets (documents for 2-level) and flat values."""
    return w.offsets[0], w.data.reshape(-1)


REFERENCES = {
    "sequence_pool": ref_pool,
    "apply_overhead": ref_pool,  # la.apply of sequence_pool on a one-column table
    "sequence_softmax": ref_softmax,
    "sequence_first_step": lambda w, v: ref_step(w, False),
    "sequence_last_step": lambda w, v: ref_step(w, True),
    "sequence_expand": ref_expand,
    "sequence_pad": ref_pad,
    "sequence_unpad": ref_unpad,
    "sequence_conv": ref_conv,
    "sequence_topk_avg_pooling": ref_topk,
    "sequence_reverse": ref_reverse,
    "sequence_concat": ref_concat,
    "sequence_slice": ref_slice,
    "sequence_erase": ref_erase,
    "sequence_enumerate": ref_enumerate,
    "sequence_mask": ref_mask,
    "sequence_scatter": ref_scatter,
    "to_arrow": ref_arrow_parts,
    "from_arrow": ref_arrow_parts,
    "write_parquet": ref_arrow_parts,
    "read_parquet": ref_arrow_parts,
    "from_offsets": ref_arrow_parts,
}


def _small_rows(case):
    return {"tiny": 10, "topk": 40_000}.get(case.workload, 2400)


def _applicable(factory, case):
    w = _workloads.make_workload(case.workload, 200 if case.workload != "tiny" else 10)
    try:
        factory(w, "unused.parquet" if case.uses_path else case.variant)
    except _peers.NotApplicable:
        return False
    return True


def _peer_params():
    params = []
    seen = set()
    for case in _cases.all_cases():
        key = (case.peers_key, case.variant, case.workload)
        if key in seen:
            continue
        seen.add(key)
        for library, label, factory in _peers.peers_for(case.peers_key):
            reason = _peers.available(library)
            if not reason and not _applicable(factory, case):
                continue
            marks = [pytest.mark.skip(reason=reason)] if reason else []
            params.append(pytest.param(case, library, factory, marks=marks,
                                       id=f"{case.title}-{case.workload}-{library}"))
    return params


def _write_input(case, w, path):
    """The Parquet file ``read_parquet`` cases read (the runner writes it the same way)."""
    if case.op == "read_parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.table({"data": w.arrow}), path)


@pytest.mark.parametrize("case, library, factory", _peer_params())
def test_peer_matches_slow_reference(case, library, factory, tmp_path):
    w = _workloads.make_workload(case.workload, _small_rows(case))
    variant = case.variant
    if case.uses_path:
        variant = str(tmp_path / "peer.parquet")
        _write_input(case, w, variant)
    run, norm = factory(w, variant)
    expected = REFERENCES[case.peers_key](w, case.variant)
    problem = _runner._compare(expected, norm(run()), case)
    assert problem is None, problem


def _distinct_cases():
    seen, params = set(), []
    for case in _cases.all_cases():
        if (case.op, case.variant, case.workload) not in seen:
            seen.add((case.op, case.variant, case.workload))
            params.append(pytest.param(case, id=f"{case.title}-{case.workload}"))
    return params


@pytest.mark.parametrize("case", _distinct_cases())
def test_lodarrow_matches_slow_reference(case, tmp_path):
    """lodarrow's own bench call (what every peer is then compared with) against the loop,
    shape and kind of values included."""
    w = _workloads.make_workload(case.workload, _small_rows(case))
    path = str(tmp_path / "lodarrow.parquet")
    _write_input(case, w, path)
    run, norm = _cases.lodarrow_call(case, w, path)
    expected = REFERENCES[case.peers_key](w, case.variant)
    problem = _runner._compare(expected, norm(run()), case)
    assert problem is None, problem


def test_compare_reports_first_difference():
    case = _cases.Case("sequence_pool", "sum", "D=1", 10)
    assert _runner._compare(np.ones(3), np.ones(3), case) is None
    assert _runner._compare((np.ones(3), np.arange(2)), (np.ones(3), np.arange(2)), case) is None
    assert _runner._compare(np.ones(3), np.ones(3) + 5e-5, case) is None  # within rtol/atol
    assert "1 values differ, first at flat index 1 (" in \
        _runner._compare(np.ones(3), np.array([1.0, 2.0, 1.0]), case)
    assert _runner._compare(np.ones(3), np.ones(4), case) == \
        "part 0: shape (4,) (4 values), expected (3,) (3 values)"
    assert "parts" in _runner._compare((np.ones(3), np.ones(1)), np.ones(3), case)
    assert "1 values differ" in _runner._compare(np.arange(3), np.array([0, 1, 3]), case)
    assert "part 1" in _runner._compare((np.ones(2), np.arange(3)),
                                        (np.ones(2), np.array([0, 1, 3])), case)
    # a result of the right size but the wrong shape is wrong (no flattening)
    assert "shape (3, 2)" in _runner._compare(np.ones((2, 3)), np.ones((3, 2)), case)
    assert "shape (6, 1)" in _runner._compare(np.ones(6), np.ones((6, 1)), case)
    # the kind of values must agree: a mask of 0/1 integers is not a bool mask
    assert "integer values" in _runner._compare(np.ones(3, bool), np.ones(3, np.int8), case)
    assert "number values" in _runner._compare(np.arange(3), np.arange(3.0), case)
    assert _runner._compare(np.arange(3.0), np.arange(3, dtype=np.float32), case) is None
    assert _runner._compare(np.arange(3), np.arange(3, dtype=np.int32), case) is None
    # NaN matches NaN, not a number
    assert _runner._compare(np.array([np.nan]), np.array([np.nan]), case) is None
    assert _runner._compare(np.array([np.nan]), np.array([0.0]), case) is not None


def test_every_case_has_a_byte_count():
    for case in _cases.all_cases():
        w = _workloads.make_workload(case.workload, _small_rows(case))
        nbytes = case.nbytes(w)
        if case.op in ("to_arrow", "from_arrow", "call_overhead", "apply_overhead"):
            assert nbytes is None
        elif case.op == "from_offsets":  # the check reads the offsets only
            assert nbytes == w.offsets_bytes
        elif case.op == "sequence_mask":
            assert nbytes == w.n_seq * 8 + w.n_seq * w.max_length
        elif case.op in ("sequence_first_step", "sequence_last_step"):
            assert nbytes == 2 * w.n_seq * w.row_bytes + w.offsets_bytes
        else:
            assert nbytes > w.data.nbytes
    w = _workloads.make_workload("D=16", 1000)
    pool = _cases.Case("sequence_pool", "sum", "D=16", 1000)
    assert pool.nbytes(w) == 1000 * 64 + (w.n_seq + 1) * 8 + w.n_seq * 64


# ====================================================================== runner pieces
def test_time_call_counts_samples():
    calls = []
    samples = _runner.time_call(lambda: calls.append(1), repeat=4)
    assert len(samples) == 4 and all(s >= 0 for s in samples)
    assert len(calls) >= 5  # one calibration call plus the samples
    samples = _runner.time_call(lambda: None, budget=0.0, min_repeat=3)
    assert len(samples) == 3


def test_peak_memory_sees_numpy_allocations():
    peak = _runner.peak_memory(lambda: np.ones(4_000_000))
    assert peak >= 32_000_000


def test_probe_bandwidth_shape():
    bw = _runner.probe_bandwidth(8 << 20, repeat=1)
    assert set(bw) == {"read_1t", "read_2t", "copy_1t", "copy_2t", "reference", "bytes"}
    assert bw["reference"] == max(bw["read_1t"], bw["read_2t"], bw["copy_1t"], bw["copy_2t"])
    assert bw["reference"] > 0


def test_format_time_units():
    assert _report.format_time(2.5) == "2.5 s"
    assert _report.format_time(0.0123) == "12.3 ms"
    assert _report.format_time(4.2e-6) == "4.2 us"
    assert _report.format_time(3e-8) == "30 ns"
    assert _report.format_time(None) == "-"


# ====================================================================== the command line
def test_no_subcommand_prints_help_and_exits_2():
    proc = run_cli()
    assert proc.returncode == 2
    assert "demo" in proc.stdout and "bench" in proc.stdout and "info" in proc.stdout


def test_version():
    proc = run_cli("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"lodarrow {lodarrow.__version__}"


def test_main_entry_point_returns_status(capsys):
    from lodarrow.__main__ import main

    assert main(["--version"]) == 0
    assert lodarrow.__version__ in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        main(["no-such-command"])
    assert exc.value.code == 2


def _check_derived_figures(report):
    """GB/s, % of bandwidth and the ratio to the best peer of every ok row, recomputed from
    the row's own best time and byte count."""
    bw = report["bandwidth"]["reference"]
    groups = {}
    for row in report["rows"]:
        groups.setdefault((row["title"], row["workload"]), []).append(row)
    for rows in groups.values():
        assert rows[0]["library"] == "lodarrow"
        peers = [r for r in rows if r["library"] != "lodarrow"]
        best_peer = min(r["best_s"] for r in peers) if peers else None
        assert sum(r["best_peer"] for r in rows) == (1 if peers else 0)
        for r in rows:
            if r["bytes"] is None:
                assert "gbps" not in r and "fraction_of_bandwidth" not in r
            else:
                assert r["gbps"] == pytest.approx(r["bytes"] / r["best_s"] / 1e9, rel=1e-12)
                assert r["fraction_of_bandwidth"] == pytest.approx(r["gbps"] / bw, rel=1e-12)
            if best_peer is None:
                assert r["ratio_to_best_peer"] is None
            else:
                assert r["ratio_to_best_peer"] == pytest.approx(r["best_s"] / best_peer,
                                                                rel=1e-12)
            assert r["best_peer"] == (r["library"] != "lodarrow" and r["best_s"] == best_peer)


@needs_bench_extra
def test_bench_quick_tiny_outputs(tmp_path):
    out_json, out_md, out_png = tmp_path / "b.json", tmp_path / "b.md", tmp_path / "b.png"
    proc = run_cli("bench", "--quick", "--scale", "0.002", "--probe-mib", "8", "--repeat", "1",
                   "--ops", "pool,to_arrow,pad", "--json", out_json, "--markdown", out_md,
                   "--plot", out_png)
    assert proc.returncode == 0, proc.stderr
    assert "Memory bandwidth" in proc.stdout and "sequence_pool" in proc.stdout
    assert "GB/s" in proc.stdout and "x best peer" in proc.stdout
    report = json.loads(out_json.read_text())
    assert {"machine", "bandwidth", "rows", "options", "skipped_peers"} <= set(report)
    assert report["bandwidth"]["bytes"] == 8 << 20
    assert report["skipped_peers"] == {}  # the test extra installs every peer
    selected = [c for c in _cases.all_cases()
                if c.op in ("to_arrow", "sequence_pool", "sequence_pad")]
    assert {(row["op"], row["variant"], row["workload_name"]) for row in report["rows"]} == \
        {(c.op, c.variant, c.workload) for c in selected}
    for row in report["rows"]:
        # lodarrow's rows ran; every peer agreed with lodarrow (which test_lodarrow_matches_
        # slow_reference checks against the loops) and was timed
        assert row["status"] == "ok", row
        assert 0 < row["best_s"] <= row["median_s"] and row["peak_bytes"] >= 0
        assert row["repeats"] == 1
    lodarrow_rows = [r for r in report["rows"] if r["library"] == "lodarrow"]
    assert len(lodarrow_rows) == len(selected)
    _check_derived_figures(report)
    md = out_md.read_text()
    assert md.count("| sequence_pool") >= 1 and "| --- |" in md
    assert md.count("| **lodarrow** |") == len(selected)
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_add_ratios_tiny_case():
    """GB/s, % of bandwidth and "x best peer" by hand on made-up rows."""
    def row(library, best, status="ok", nbytes=4_000_000):
        return {"library": library, "status": status, "best_s": best, "median_s": best,
                "bytes": nbytes, "title": "sequence_pool sum", "workload": "D=1, 1e6 rows",
                "peak_bytes": 0}

    rows = [row("lodarrow", 2e-3), row("numpy", 1e-3), row("polars", 4e-3),
            row("awkward", None, status="wrong")]
    _runner._add_ratios(rows, bw=10.0)
    lodarrow_row, numpy_row, polars_row, wrong = rows
    assert lodarrow_row["gbps"] == pytest.approx(2.0)  # 4e6 bytes / 2e-3 s
    assert lodarrow_row["fraction_of_bandwidth"] == pytest.approx(0.2)
    assert lodarrow_row["ratio_to_best_peer"] == pytest.approx(2.0)
    assert numpy_row["gbps"] == pytest.approx(4.0) and numpy_row["ratio_to_best_peer"] == 1.0
    assert polars_row["ratio_to_best_peer"] == pytest.approx(4.0)
    assert [r.get("best_peer") for r in rows] == [False, True, False, None]
    assert "gbps" not in wrong and "ratio_to_best_peer" not in wrong
    assert _report._cells(lodarrow_row)[5:8] == ("2.00", "20%", "2.00")
    # no byte count: compared by time only; no peer that ran: no ratio
    rows = [row("lodarrow", 1e-3, nbytes=None), row("numpy", None, status="error")]
    _runner._add_ratios(rows, bw=10.0)
    assert "gbps" not in rows[0] and rows[0]["ratio_to_best_peer"] is None
    assert _report._cells(rows[0])[5:8] == ("-", "-", "-")


@needs_bench_extra
def test_bench_peer_filter_and_skipped_line(tmp_path):
    proc = run_cli("bench", "--quick", "--scale", "0.001", "--probe-mib", "4", "--repeat", "1",
                   "--ops", "call_overhead", "--peers", "numpy", "--no-progress")
    assert proc.returncode == 0, proc.stderr
    assert "call_overhead" in proc.stdout
    after = proc.stdout.split("Memory bandwidth")[1].split("\n", 1)[1]
    assert "polars" not in after and "skipped peer" not in after
    assert "numpy" in after
    # a peer that cannot be imported is named on its own line, and left out of the rows
    out_json = tmp_path / "b.json"
    proc = _run_without("polars", "bench", "--quick", "--scale", "0.001", "--probe-mib", "4",
                        "--repeat", "1", "--ops", "call_overhead", "--no-progress",
                        "--json", out_json)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out_json.read_text())
    reason = report["skipped_peers"]["polars"]
    assert set(report["skipped_peers"]) == {"polars"}
    assert reason.startswith("polars is not installed (") and "Error)" in reason
    assert f"skipped peer polars: {reason}" in proc.stdout.splitlines()
    libraries = [row["library"] for row in report["rows"]]
    assert "polars" not in libraries and libraries[0] == "lodarrow" and "numpy" in libraries
    assert all(row["status"] == "ok" for row in report["rows"])
    _check_derived_figures(report)


@needs_bench_extra
def test_bench_rejects_bad_options():
    proc = run_cli("bench", "--ops", "no_such_op", "--probe-mib", "4")
    assert proc.returncode == 2 and "matches no benchmark" in proc.stderr
    proc = run_cli("bench", "--peers", "torch", "--probe-mib", "4")
    assert proc.returncode == 2 and "unknown peer" in proc.stderr
    proc = run_cli("bench", "--scale", "0")
    assert proc.returncode == 2 and "--scale" in proc.stderr


def test_demo_runs_and_reports():
    proc = run_cli("demo", "--docs", "60", "--no-progress")
    out = proc.stdout
    assert "seed" in out.lower() and "timing" in out.lower()
    assert "FAIL" not in out, out
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "sequence_expand" in out and "lod_reset" in out


def _run_without(module, *args):
    """Run the CLI in a subprocess where ``import module`` fails."""
    code = (f"import sys; sys.modules[{module!r}] = None; "
            f"from lodarrow.__main__ import main; sys.exit(main({list(map(str, args))!r}))")
    return run_python(["-c", code], env={"COLUMNS": "200"}, timeout=300)


def test_demo_plain_output_without_rich():
    proc = _run_without("rich", "demo", "--docs", "40")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "== pipeline ==" in proc.stdout and "PASS  build LoDTensors" in proc.stdout
    assert "checks passed, 0 failed" in proc.stdout


def test_bench_without_rich_says_which_extra():
    proc = _run_without("rich", "bench", "--quick")
    assert proc.returncode == 2
    assert "'.[bench]'" in proc.stderr and "rich" in proc.stderr


def test_bench_plot_without_matplotlib_says_which_extra(tmp_path):
    proc = _run_without("matplotlib", "bench", "--plot", tmp_path / "x.png")
    assert proc.returncode == 2 and "matplotlib" in proc.stderr


def test_demo_rejects_bad_docs():
    proc = run_cli("demo", "--docs", "0")
    assert proc.returncode == 2 and "--docs" in proc.stderr


def test_info_missing_file_exits_2(tmp_path):
    proc = run_cli("info", tmp_path / "absent.parquet")
    assert proc.returncode == 2 and "no such file" in proc.stderr
    proc = run_cli("info", tmp_path)  # a directory without data files
    assert proc.returncode == 2 and "holds no data files" in proc.stderr


def test_info_unreadable_file_exits_2(tmp_path):
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"this is not parquet")
    proc = run_cli("info", bad)
    assert proc.returncode == 2 and "cannot read" in proc.stderr


def test_info_prints_structure(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    w = _workloads.make_workload("2-level", 300)
    path = tmp_path / "x.parquet"
    pq.write_table(pa.table({"tokens": w.arrow}), path)
    proc = run_cli("info", path)
    assert proc.returncode == 0, proc.stderr
    assert "tokens" in proc.stdout
    proc = run_cli("info", path, "--json")
    assert proc.returncode == 0, proc.stderr
    assert "tokens" in json.dumps(json.loads(proc.stdout))
