"""The command line (``python -m lodarrow demo|bench|info``) and the benchmark suite's peers.

The CLI runs in a subprocess on tiny sizes; only output structure and exit codes are checked,
never speed.  Each benchmark peer is checked against a slow, obviously-correct loop here, so a
peer that would be wrong is caught before it is ever compared with lodarrow.
"""

import json

import numpy as np
import pytest

import lodarrow
from lodarrow._bench import _cases, _peers, _report, _runner, _workloads

from conftest import run_python



def run_cli(*args, timeout=300):
    return run_python(["-m", "lodarrow", *args], env={"COLUMNS": "200"}, timeout=timeout)


def _implemented(fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except NotImplementedError:
        return False
    return True


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
    xpad, _ = w.padded
    values = [xpad[i, j] for i in range(w.n_seq) for j in range(int(w.lengths[i]))]
    return np.array(values).reshape(-1), np.concatenate(([0], np.cumsum(w.lengths)))


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


def _values_offsets(seqs):
    lengths = [len(s) for s in seqs]
    values = np.concatenate([np.asarray(s) for s in seqs]) if seqs else np.zeros(0)
    return values, np.concatenate(([0], np.cumsum(lengths)))


def _id_seqs(w):
    off = w.offsets[-1]
    return [w.int_ids[a:b].tolist() for a, b in zip(off[:-1], off[1:])]


def ref_reverse(w, variant):
    return _values_offsets([s[::-1] for s in _seqs(w)])


def ref_concat(w, variant):
    return _values_offsets([np.concatenate([s, s]) for s in _seqs(w)])


def ref_slice(w, variant):
    offset, length = w.slice_args
    return _values_offsets([s[o:o + n] for s, o, n in zip(_seqs(w), offset[:, 0], length[:, 0])])


def ref_erase(w, variant):
    return _values_offsets([[v for v in s if v not in _peers.ERASE_TOKENS] for s in _id_seqs(w)])


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
    return w.offsets[-1], w.data.reshape(-1)


REFERENCES = {
    "sequence_pool": ref_pool,
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


@pytest.mark.parametrize("case, library, factory", _peer_params())
def test_peer_matches_slow_reference(case, library, factory, tmp_path):
    w = _workloads.make_workload(case.workload, _small_rows(case))
    variant = case.variant
    if case.uses_path:
        variant = str(tmp_path / "peer.parquet")
        if case.op == "read_parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq

            pq.write_table(pa.table({"data": w.arrow}), variant)
    run, norm = factory(w, variant)
    expected = REFERENCES[case.peers_key](w, case.variant)
    problem = _runner._compare(expected, norm(run()), case)
    assert problem is None, problem


def test_compare_reports_first_difference():
    case = _cases.Case("sequence_pool", "sum", "D=1", 10)
    assert _runner._compare(np.ones(3), np.ones(3), case) is None
    assert "first at 1" in _runner._compare(np.ones(3), np.array([1.0, 2.0, 1.0]), case)
    assert "values, expected" in _runner._compare(np.ones(3), np.ones(4), case)
    assert "parts" in _runner._compare((np.ones(3), np.ones(1)), np.ones(3), case)
    assert _runner._compare(np.arange(3), np.array([0, 1, 3]), case) is not None


def test_every_case_has_a_lodarrow_call_and_byte_count():
    for case in _cases.all_cases():
        w = _workloads.make_workload(case.workload, _small_rows(case))
        run, norm = _cases.lodarrow_call(case, w, "unused.parquet")
        assert callable(run) and callable(norm)
        nbytes = case.nbytes(w)
        if case.op in ("to_arrow", "from_arrow", "call_overhead"):
            assert nbytes is None
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
    ops = {row["op"] for row in report["rows"]}
    assert ops <= {"sequence_pool", "to_arrow", "sequence_pad", "sequence_unpad"}
    assert "sequence_pool" in ops and "to_arrow" in ops
    for row in report["rows"]:
        assert row["status"] in ("ok", "not implemented", "wrong", "error")
        assert row["status"] != "wrong", row  # a peer that disagrees with lodarrow is a bug
        if row["status"] == "ok":
            assert row["best_s"] <= row["median_s"] and row["peak_bytes"] >= 0
            assert row["repeats"] == 1
    md = out_md.read_text()
    assert md.count("| sequence_pool") >= 1 and "| --- |" in md
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_peer_filter_and_skipped_line():
    proc = run_cli("bench", "--quick", "--scale", "0.001", "--probe-mib", "4", "--repeat", "1",
                   "--ops", "call_overhead", "--peers", "numpy", "--no-progress")
    assert proc.returncode == 0, proc.stderr
    assert "call_overhead" in proc.stdout
    assert "polars" not in proc.stdout.split("Memory bandwidth")[1].split("\n", 1)[1]


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
    assert "lodarrow[bench]" in proc.stderr and "rich" in proc.stderr


def test_bench_plot_without_matplotlib_says_which_extra(tmp_path):
    proc = _run_without("matplotlib", "bench", "--plot", tmp_path / "x.png")
    assert proc.returncode == 2 and "matplotlib" in proc.stderr


def test_demo_rejects_bad_docs():
    proc = run_cli("demo", "--docs", "0")
    assert proc.returncode == 2 and "--docs" in proc.stderr


def test_info_missing_file_exits_2(tmp_path):
    proc = run_cli("info", tmp_path / "absent.parquet")
    assert proc.returncode == 2 and "no such file" in proc.stderr
    proc = run_cli("info", tmp_path)
    assert proc.returncode == 2 and "not a file" in proc.stderr


def test_info_unreadable_file_exits_2(tmp_path):
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"this is not parquet")
    proc = run_cli("info", bad)
    if "No module named 'lodarrow._info'" in proc.stderr:
        pytest.skip("lodarrow._info is not in this build yet")
    assert proc.returncode == 2 and "cannot read" in proc.stderr


def test_info_prints_structure(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    w = _workloads.make_workload("2-level", 300)
    path = tmp_path / "x.parquet"
    pq.write_table(pa.table({"tokens": w.arrow}), path)
    proc = run_cli("info", path)
    if "No module named 'lodarrow._info'" in proc.stderr:
        pytest.skip("lodarrow._info is not in this build yet")
    assert proc.returncode == 0, proc.stderr
    assert "tokens" in proc.stdout
    proc = run_cli("info", path, "--json")
    assert proc.returncode == 0, proc.stderr
    assert "tokens" in json.dumps(json.loads(proc.stdout))
