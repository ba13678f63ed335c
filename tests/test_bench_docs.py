"""docs/performance.md holds no figure typed by hand where a program wrote it.

Each benchmark owns a block of the document between ``<!-- generated: KEY, by COMMAND; do not
edit -->`` and ``<!-- end generated: KEY -->`` (lodarrow/_bench/_docs.py).  Every block's run
has its JSON committed under benchmarks/results/, and the block must equal that JSON rendered
again (figures no kept JSON backs sit between ``<!-- pasted: ... -->`` markers instead, which
say where they came from).  Figures of the prose outside the blocks are checked here against
the JSON they lean on.  The writers themselves are checked on small files: a block is replaced
in place, the rest of the file kept.  docs/training.md's "Measured" block (written by
``python -m lodarrow._bench._training``) is checked here too, with the prose around it.
"""

import importlib.util
import json
import pathlib
import re

import numpy as np
import pytest

from conftest import run_python
from lodarrow._bench import _datasets, _docs, _report

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "performance.md"
README = ROOT / "benchmarks" / "README.md"
RESULTS = ROOT / "benchmarks" / "results"

pytestmark = pytest.mark.skipif(not (ROOT / "benchmarks").exists() or not DOC.exists(),
                                reason="needs the checkout's benchmarks/ and docs/")


def _script(name):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "benchmarks" /
                                                  f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _doc():
    return DOC.read_text()


def _json(name):
    path = RESULTS / name
    return json.loads(path.read_text()) if path.exists() else None


#: Every block of docs/performance.md: key -> the JSON it is rendered from.
BLOCKS = {"bench": "bench.json", "bench-apply": "bench.json",
          "parquet-writers": "parquet_writers.json", "datasets": "datasets.json",
          "threads-under-load": "threads_under_load.json",
          "apply-overhead": "apply_overhead.json"}


def test_every_block_of_the_document_is_known_and_closed():
    text = _doc()
    keys = re.findall(r"<!-- generated: ([\w-]+), by ", text)
    assert sorted(keys) == sorted(BLOCKS)
    for key in keys:
        assert text.count(_docs.end_marker(key)) == 1, key
    pasted = re.findall(r"<!-- pasted: ([\w-]+);", text)
    assert sorted(pasted) == ["gpu"]
    for key in pasted:
        assert text.count(f"<!-- end pasted: {key} -->") == 1, key


@pytest.mark.parametrize("key", sorted(BLOCKS))
def test_a_block_is_its_json_rendered(key):
    body = _docs.body_of(_doc(), key)
    report = _json(BLOCKS[key])
    assert report is not None, f"{key}: no benchmarks/results/{BLOCKS[key]} to render it from"
    assert "Pasted from" not in body, key  # a generated block holds no pasted figures
    if key == "bench":
        want = _docs.body_of(_report.to_markdown(report, "bench.png"), "bench")
    elif key == "bench-apply":
        want = _report.apply_markdown(report)
    elif key == "parquet-writers":
        want = _script("parquet_writers").markdown(report)
    elif key == "apply-overhead":
        want = _script("apply_overhead").markdown(report)
    elif key == "datasets":
        want = _datasets.to_markdown(report, report["command"])
    else:
        want = _script("threads_under_load").markdown(report)
    assert body == want.rstrip("\n") + "\n", key


@pytest.mark.skipif(_json("bench.json") is None, reason="no committed operator run")
def test_the_operator_run_records_where_it_ran():
    report = _json("bench.json")
    assert report["revision"]["commit"] and report["command"].startswith("python -m lodarrow")
    m = report["machine"]
    assert m["cpu"] and m["cores"] >= 1 and m["versions"]["lodarrow"]
    assert m["load_average"] and m["load_average_end"]
    assert "--plot docs/bench.png" in report["command"]
    assert (ROOT / "docs" / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.skipif(_json("parquet_writers.json") is None, reason="no committed writers run")
def test_the_parquet_prose_agrees_with_the_writers_json():
    """What the prose of "Parquet writes" says without a figure holds in the committed run:
    polars' writer is faster than pyarrow's, DuckDB's ``COPY`` loses the fixed size, and
    the bullets quote both of polars' row-group sizes."""
    report = _json("parquet_writers.json")
    for t in report["tables"]:
        best = {r["writer"]: r["best_s"] for r in t["rows"]}
        assert best["pyarrow"] > best["polars"] and best["la-pyarrow"] > best["la-auto"], t["d"]
        back = {r["writer"]: r["reads_back"] for r in t["rows"]}
        assert back["la-auto"] == back["la-pyarrow"] == "same type and values"
        if t["d"] == 16:
            assert back["duckdb"].startswith("values equal as `list<")
    assert report["revision"]["commit"] and report["machine"]["load_average"]
    assert "row groups of 2**20 rows" in _script("parquet_writers").markdown(report)


@pytest.mark.skipif(_json("datasets.json") is None, reason="no committed datasets run")
def test_the_datasets_block_shows_only_each_runs_own_peak_rss():
    """A peak RSS is shown only where the run recorded its own (``VmHWM``): ``ru_maxrss``,
    which a child starts from its parent's peak, is never published as a run's figure."""
    from lodarrow._bench import _datasets

    report = _json("datasets.json")
    column = _datasets.TABLE_COLUMNS.index("peak RSS MiB")
    for row, cells in zip(report["rows"], _datasets.table_rows(report)):
        if row.get("peak_rss_kind") != "VmHWM":
            assert cells[column] == "-", row["name"]
    own = any(r.get("peak_rss_kind") == "VmHWM" for r in report["rows"])
    assert ("Peak RSS (flat" in _datasets.to_markdown(report, "cmd")) <= own
    assert _datasets._peak_rss().get("peak_rss_kind") in (None, "VmHWM")


#: Blocks of benchmarks/README.md that other benchmarks write (their own tests check them):
#: the loaders' (tests/test_bench_loader_figures.py) and resume.py's (test_bench_resume.py).
LOADER_README_BLOCKS = {"loaders-run", "mixing-run", "resume"}
#: ... and cache_peers.py's (checked below).
CACHE_PEERS_BLOCK = "cache-peers"


def test_the_readme_blocks_are_the_operator_json_rendered():
    """benchmarks/README.md's generated blocks ("Where lodarrow is not ahead") are the ones
    the bench writes there, each equal to bench.json rendered again; nothing pasted.  (The
    loader benchmarks' blocks, also there, are checked by tests/test_bench_loader_figures.py.)"""
    text = README.read_text()
    keys = re.findall(r"^<!-- generated: ([\w-]+), by ", text, re.MULTILINE)
    assert (sorted(set(keys) - LOADER_README_BLOCKS - {CACHE_PEERS_BLOCK})
            == sorted(_report.README_BLOCKS))
    assert _report.readme_beside(DOC) == str(README)
    report = _json("bench.json")
    for key, render in _report.README_BLOCKS.items():
        assert text.count(_docs.end_marker(key)) == 1, key
        if report is None:
            continue
        assert _docs.body_of(text, key) == render(report).rstrip("\n") + "\n", key
    assert re.findall(r"^<!-- pasted: ([\w-]+);", text, re.MULTILINE) == []


def _behind_notes():
    """The operators that the notes under the README's ``bench-behind`` block explain."""
    text = README.read_text()
    notes = text[text.index(_docs.end_marker(_report.BEHIND_BLOCK)):]
    notes = notes[:notes.index("\n\n", notes.index("\n- "))]
    return {op for line in notes.splitlines() if line.startswith("- ")
            for op in re.findall(r"`(\w+)`", line.split(":")[0])}


@pytest.mark.skipif(_json("bench.json") is None, reason="no committed operator run")
def test_the_readme_notes_explain_only_rows_that_are_behind():
    """Each operator the notes explain is behind in the committed run (a note on a row that
    is ahead again would explain nothing), and what the ``from_offsets`` note says without a
    figure holds there: polars is the fastest peer and every peer that checks the order is
    slower than lodarrow."""
    report = _json("bench.json")
    behind = {mine["op"] for mine, _ in _report.behind_rows(report)}
    noted = _behind_notes()
    assert noted >= {"from_offsets", "from_arrow", "write_parquet"}
    assert noted <= behind, noted - behind
    assert behind <= noted, f"rows behind with no note (or 'not known'): {behind - noted}"
    rows = {r["library"]: r for r in report["rows"] if r["op"] == "from_offsets"}
    assert rows["polars"]["best_peer"]
    for lib in ("pyarrow", "numpy", "awkward"):
        assert rows[lib]["best_s"] > rows["lodarrow"]["best_s"], lib


def _case(title, lodarrow_s, peers, status="ok"):
    """The rows of one case as the runner writes them (ratios from best times)."""
    best = min(peers.values(), default=None)
    rows = [{"op": title.split()[0], "title": title, "workload": "D=1, 1e3 rows",
             "library": "lodarrow", "impl": "lodarrow", "status": status, "best_s": lodarrow_s,
             "median_s": lodarrow_s, "peak_bytes": 0,
             "ratio_to_best_peer": lodarrow_s / best if best and status == "ok" else None,
             "best_peer": False}]
    for lib, s in peers.items():
        rows.append({"op": title.split()[0], "title": title, "workload": "D=1, 1e3 rows",
                     "library": lib, "impl": f"{lib} (its call)", "status": "ok", "best_s": s,
                     "median_s": s, "peak_bytes": 0,
                     "ratio_to_best_peer": s / best, "best_peer": s == best})
    return rows


def _small_report():
    rows = (_case("behind_op", 1.3e-3, {"numpy": 2e-3, "numba": 1e-3})
            + _case("ahead_op", 0.7e-3, {"numpy": 1e-3})
            + _case("level_op", 1e-3, {"polars": 1e-3})
            + _case("alone_op", 1e-3, {})
            + _case("broken_op", 1e-3, {"numpy": 1e-3}, status="error"))
    return {"rows": rows, "command": "python -m lodarrow bench --ops x",
            "revision": {"commit": "abc1234", "changes": False},
            "machine": {"cpu": "Some CPU", "cores": 2, "platform": "Linux",
                        "versions": dict.fromkeys(("python", "numpy", "pyarrow", "polars",
                                                   "awkward", "numba", "lodarrow"), "1.0"),
                        "load_average": [0.5, 0, 0], "load_average_end": [1.5, 0, 0]}}


def test_a_row_behind_is_listed_and_one_ahead_is_not(tmp_path):
    report = _small_report()
    listed = [mine["title"] for mine, _ in _report.behind_rows(report)]
    assert listed == ["behind_op", "level_op", "broken_op"]
    text = _report.behind_markdown(report)
    assert ("| `behind_op` | D=1, 1e3 rows | 1.3 ms | numba (its call) | 1 ms | 1.30 |"
            in text)
    assert "| `level_op` | D=1, 1e3 rows | 1 ms | polars (its call) | 1 ms | 1.00 |" in text
    assert "| `broken_op` | D=1, 1e3 rows | error | numpy (its call) | 1 ms | - |" in text
    assert "ahead_op" not in text and "alone_op" not in text
    assert "`python -m lodarrow bench --ops x`" in text and "Commit: abc1234" in text
    assert "Some CPU, 2 usable cores" in text and "0.5 at the start, 1.5 at the end" in text
    ahead = dict(report, rows=_case("ahead_op", 0.7e-3, {"numpy": 1e-3}))
    assert "ahead of every peer in every case" in _report.behind_markdown(ahead)
    # a run that records the threads lodarrow's kernels could use shows them per row
    threaded = _case("behind_op", 1.3e-3, {"numba": 1e-3})
    threaded[0]["lodarrow_threads"] = [1, 2]
    with_threads = _report.behind_markdown(dict(report, rows=threaded))
    assert "| 1.30 | 1-2 |" in with_threads and "lodarrow's threads" in with_threads
    assert "lodarrow's threads" not in _report.behind_markdown(report)  # runs without them
    # write_markdown rewrites the README beside the document (docs/../benchmarks/README.md),
    # its block only; a README without the block is left alone.
    (tmp_path / "docs").mkdir()
    (tmp_path / "benchmarks").mkdir()
    doc, readme = tmp_path / "docs" / "performance.md", tmp_path / "benchmarks" / "README.md"
    doc.write_text("# P\n\n" + _docs.block("bench", _report.REGENERATE, "old") + "\nkept\n")
    readme.write_text("# B\n\n" + _docs.block(_report.BEHIND_BLOCK, _report.REGENERATE, "old")
                      + "\n- `behind_op`: why\n")
    report["bandwidth"] = {"read_1t": 1.0, "read_2t": 2.0, "copy_1t": 1.0, "copy_2t": 2.0,
                           "reference": 2.0, "bytes": 2**20}
    _report.write_markdown(report, doc)
    assert readme.read_text() == ("# B\n\n" + _docs.block(_report.BEHIND_BLOCK,
                                                           _report.REGENERATE, text)
                                  + "\n- `behind_op`: why\n")
    assert doc.read_text().endswith("\nkept\n")
    readme.write_text("# B\n")
    _report.write_markdown(report, doc)
    assert readme.read_text() == "# B\n"


# --- README.md's "Performance": the bench-summary block ------------------------------------

PROJECT_README = ROOT / "README.md"


def test_the_project_readme_summary_is_the_operator_json_rendered():
    """README.md's summary is bench.json rendered again by the bench (a hand edit fails),
    linking docs/performance.md; its only generated block."""
    text = PROJECT_README.read_text()
    assert re.findall(r"<!-- generated: ([\w-]+), by ", text) == [_report.SUMMARY_BLOCK]
    assert text.count(_docs.end_marker(_report.SUMMARY_BLOCK)) == 1
    report = _json("bench.json")
    assert report is not None, "no benchmarks/results/bench.json to render README.md's summary"
    want = _report.summary_markdown(report, "docs/performance.md")
    assert _docs.body_of(text, _report.SUMMARY_BLOCK) == want
    assert "[docs/performance.md](docs/performance.md)" in want
    assert (ROOT / "docs" / "performance.md").exists()


@pytest.mark.skipif(_json("bench.json") is None, reason="no committed operator run")
def test_the_summary_says_what_the_operator_json_says():
    """Each family's line, counted here from bench.json's rows again: the cases with a peer,
    those lodarrow is ahead in, the median and range of the fastest peer's best time over
    lodarrow's; the totals, the commit and the machine of the run."""
    import statistics

    report = _json("bench.json")
    body = _report.summary_markdown(report)
    family = {op: name for name, ops in _report.FAMILIES for op in ops}
    want, every = {}, 0
    for row in report["rows"]:
        if row["library"] == "lodarrow" and row.get("ratio_to_best_peer") is not None:
            assert row["status"] == "ok"
            want.setdefault(family.get(row["op"], "other cases"), []).append(
                row["best_s"] / min(r["best_s"] for r in report["rows"]
                                    if r["title"] == row["title"]
                                    and r["workload"] == row["workload"]
                                    and r["library"] != "lodarrow" and r["status"] == "ok"))
            every += 1
    lines = {m[1]: m for m in re.finditer(r"^\| ([^|]+?) \| (\d+) of (\d+) \| ([^|]+) \|$",
                                          body, re.MULTILINE)}
    assert set(lines) == set(want)
    for name, ratios in want.items():
        m = lines[name]
        assert int(m[3]) == len(ratios) and int(m[2]) == sum(r < 1 for r in ratios), name
        ups = sorted(1 / r for r in ratios)
        figures = [float(x) for x in re.findall(r"([\d.]+)x", m[4])]
        assert figures[0] == pytest.approx(statistics.median(ups), abs=0.006), name
        if len(ups) > 1:
            assert figures[1:] == pytest.approx([ups[0], ups[-1]], abs=0.006), name
    ahead = sum(r < 1 for ratios in want.values() for r in ratios)
    assert f"ahead of the fastest peer in {ahead} of {every} cases" in body
    assert f"Commit: {report['revision']['commit']}" in body
    assert f"{report['machine']['cpu']}, {report['machine']['cores']} usable cores" in body


def test_bench_writes_the_summary_into_a_readme_and_keeps_the_rest(tmp_path):
    """``bench --from-json JSON --readme FILE`` writes the block only (the rest of the file
    kept), links --markdown's file relative to FILE; a failed call counts as a case not
    ahead, a case without a peer is left out."""
    report = _small_report()
    report["bandwidth"] = {"read_1t": 1.0, "read_2t": 2.0, "copy_1t": 1.0, "copy_2t": 2.0,
                           "reference": 2.0, "bytes": 2**20}
    body = _report.summary_markdown(report)
    assert "| other cases | 1 of 4 | 1.00x (0.77x-1.43x) |" in body  # broken_op: 4th, no time
    assert "alone_op" not in body and "in 1 of 4 cases" in body
    assert "Commit: abc1234; Some CPU, 2 usable cores" in body
    src = tmp_path / "bench.json"
    src.write_text(json.dumps(report))
    readme = tmp_path / "README.md"
    readme.write_text("# P\n\n" + _docs.block(_report.SUMMARY_BLOCK, "old", "old") + "\ntail\n")
    proc = run_python(["-m", "lodarrow", "bench", "--from-json", str(src), "--readme",
                       str(readme)], timeout=600)
    assert proc.returncode == 0, proc.stderr
    text = readme.read_text()
    assert text.startswith("# P\n\n<!-- generated: bench-summary, by ")
    assert text.endswith("\ntail\n")
    assert _docs.body_of(text, _report.SUMMARY_BLOCK) == body
    sub = tmp_path / "sub"
    sub.mkdir()
    proc = run_python(["-m", "lodarrow", "bench", "--from-json", str(src), "--readme",
                       str(sub / "README.md"), "--markdown", str(tmp_path / "perf.md")],
                      timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "[../perf.md](../perf.md)" in (sub / "README.md").read_text()
    proc = run_python(["-m", "lodarrow", "bench", "--datasets", "--from-json", str(src),
                       "--readme", str(readme)], timeout=600)
    assert proc.returncode == 2 and "--readme" in proc.stderr


def test_a_block_is_replaced_in_place_and_the_rest_kept(tmp_path):
    path = tmp_path / "doc.md"
    _docs.write_block(path, "x", "make x", "first\n")
    assert path.read_text() == _docs.block("x", "make x", "first")
    path.write_text("# T\n\nprose\n\n" + path.read_text() + "\nafter\n")
    _docs.write_block(path, "y", "make y", "why\n")
    _docs.write_block(path, "x", "make x", "second\n")
    text = path.read_text()
    assert text == ("# T\n\nprose\n\n" + _docs.block("x", "make x", "second") + "\nafter\n\n"
                    + _docs.block("y", "make y", "why"))
    assert _docs.body_of(text, "x") == "second\n" and _docs.body_of(text, "z") is None
    path.write_text("<!-- generated: x, by `a` -->\nno end\n")
    with pytest.raises(ValueError, match="no end marker"):
        _docs.write_block(path, "x", "a", "b")


def _report_of(tmp_path):
    """A small operator report, from a real run of one case (no peers)."""
    out = tmp_path / "b.json"
    proc = run_python(
        ["-m", "lodarrow", "bench", "--quick", "--scale", "0.001",
         "--probe-mib", "4", "--repeat", "1", "--ops", "apply_overhead", "--peers", "numpy",
         "--no-progress", "--json", str(out)], timeout=600)
    assert proc.returncode == 0, proc.stderr
    return out


def test_bench_writes_only_its_blocks_and_from_json_writes_them_again(tmp_path):
    pytest.importorskip("rich")
    out = _report_of(tmp_path)
    report = json.loads(out.read_text())
    assert set(report["revision"]) == {"commit", "changes", "changed", "documents"}
    assert report["command"]
    assert report["revision"]["changes"] == bool(report["revision"]["changed"])
    for row in report["rows"]:  # the threads lodarrow's kernels could use beside each row
        if row["status"] == "ok":
            assert len(row["lodarrow_threads"]) == 2 and min(row["lodarrow_threads"]) >= 1
    doc = tmp_path / "perf.md"
    doc.write_text("# Performance\n\n" + _docs.block("bench", _report.REGENERATE, "old") +
                   "\n## Mine\n\nkept 1.0 us\n\n" +
                   _docs.block(_report.APPLY_BLOCK, _report.REGENERATE, "old row") + "\ntail\n")
    proc = run_python(["-m", "lodarrow", "bench", "--from-json", str(out), "--markdown", str(doc)],
                      timeout=600)
    assert proc.returncode == 0, proc.stderr
    text = doc.read_text()
    assert _docs.body_of(text, "bench") == _docs.body_of(_report.to_markdown(report), "bench")
    assert _docs.body_of(text, _report.APPLY_BLOCK) == _report.apply_markdown(report)
    assert "took " in _report.apply_markdown(report)
    assert "\n## Mine\n\nkept 1.0 us\n\n" in text and text.endswith("\ntail\n")
    assert text.startswith("# Performance\n\n<!-- generated: bench, by ")
    proc = run_python(["-m", "lodarrow", "bench", "--from-json", str(tmp_path / "absent.json"),
                       "--markdown", str(doc)], timeout=600)
    assert proc.returncode == 2 and "cannot read" in proc.stderr


def test_datasets_section_goes_into_its_block(tmp_path):
    doc = tmp_path / "perf.md"
    doc.write_text("# P\n\n" + _docs.block(_datasets.BLOCK, _datasets.REGENERATE,
                                           "## Datasets: old\n\nold\n") + "\n## Next\n\nx\n")
    _datasets.write_section(doc, "## Datasets: new\n\nnew\n")
    text = doc.read_text()
    assert _docs.body_of(text, _datasets.BLOCK) == "## Datasets: new\n\nnew\n"
    assert text.startswith("# P\n\n<!-- generated: datasets, ") and text.endswith(
        "\n## Next\n\nx\n")


def _threads_report():
    cells = [{"variant": v, "busy": b, "threads": 1 if v != "default" or b else 2,
              "calls": 100, "calls_s": c, "p50": 0.5, "p99": p99, "max": 3.0}
             for b, rows in ((0, (("before: default", 1900, 0.8), ("before: 1 thread", 1100, 1.0),
                                  ("default", 1850, 1.0), ("1 thread", 1120, 1.2),
                                  ("numpy reduceat", 440, 4.0))),
                             (1, (("before: default", 700, 16.0), ("before: 1 thread", 1150, 1.1),
                                  ("default", 1160, 1.1), ("1 thread", 1140, 1.1),
                                  ("numpy reduceat", 460, 3.0))))
             for v, c, p99 in rows]
    return {"command": "python benchmarks/threads_under_load.py --busy 0,1", "cells": cells,
            "revision": {"commit": "abc1234", "changes": False},
            "before_revision": {"commit": "4d4c993", "changes": False},
            "machine": {"cpu": "CPU", "cores": 2, "platform": "Linux",
                        "versions": {"python": "3.11", "lodarrow": "0.1"},
                        "load_average": [0.5, 0, 0]}, "load_average_end": [1.5, 0, 0],
            "args": {"seconds": 4.0, "busy": "0,1", "rows": 10**6, "sequences": 10**5,
                     "repeat": 3, "before": "/wt"}, "variants": []}


def test_threads_block_from_json(tmp_path):
    bench = _script("threads_under_load")
    report = _threads_report()
    text = bench.markdown(report)
    assert "| **default** | 1 | 1 | 1160 | 0.500 | 1.100 | 3.00 | 2.2 |" in text
    assert "| before: `LODARROW_NUM_THREADS=1` | 0 | 1 | 1100 |" in text
    assert "1.65 with 0 busy, 1.02 with 1 busy" in text
    # the sentences below the table: every figure from the cells
    assert ("p99 of before's default, then of the default: 0.80 then 1.00 ms with 0 busy, "
            "16.00 then 1.10 ms with 1 busy." in text)
    assert "p99 / p50: the default 2.0 with 0 busy, 2.2 with 1 busy; one thread 2.4" in text
    assert ("p99 - p50, the milliseconds the slowest 1% of calls add: the default 0.50 with 0 "
            "busy, 0.60 with 1 busy;" in text)
    assert "`numpy reduceat` 8.0 with 0 busy, 6.0 with 1 busy." in text
    # the target the prose names, per busy count: numpy's 8.0 and 6.0 miss it
    assert ("issue 35's target, p99 within 3x of p50, met with 0 busy: the default, one "
            "thread; with 1 busy: the default, one thread." in text)
    assert "Pasted" not in text and "at the end of each run of the cell" in text
    assert "at 4d4c993" in text and "Commit: abc1234." in text
    src, doc = tmp_path / "t.json", tmp_path / "doc.md"
    src.write_text(json.dumps(report))
    doc.write_text("# T\n\nprose\n")
    bench.main(["--from-json", str(src), "--docs", str(doc)])
    assert doc.read_text() == "# T\n\nprose\n\n" + _docs.block(bench.KEY, bench.REGENERATE,
                                                                 text)


def test_parquet_writers_runs_small_and_regenerates_its_block(tmp_path, monkeypatch):
    pytest.importorskip("duckdb")
    pytest.importorskip("polars")
    bench = _script("parquet_writers")
    monkeypatch.setattr(bench, "TABLES", ((1, 800), (16, 160)))
    out, doc = tmp_path / "p.json", tmp_path / "doc.md"
    doc.write_text("# T\n")
    bench.main(["--repeat", "1", "--json", str(out), "--docs", str(doc)])
    report = json.loads(out.read_text())
    assert [len(t["rows"]) for t in report["tables"]] == [len(bench.WRITERS)] * 2
    assert all(r["reads_back"] != "DIFFERENT" for t in report["tables"] for r in t["rows"])
    text = doc.read_text()
    assert _docs.body_of(text, bench.KEY) == bench.markdown(report)
    bench.main(["--from-json", str(out), "--docs", str(doc)])
    assert doc.read_text() == text


def test_revision_names_the_changed_files(tmp_path):
    """A benchmark's JSON records which tracked files differed from the commit measured, and
    the docs' line names them (a run on an uncommitted change says what it measured)."""
    import shutil
    import subprocess

    from lodarrow._bench import _docs

    if shutil.which("git") is None:
        pytest.skip("no git")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(tmp_path)]
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "benchmarks" / "results").mkdir(parents=True)
    for name in ("a.py", "b.py", "guide.md", "benchmarks/results/run.json"):
        (tmp_path / name).write_text("x = 1\n")
    subprocess.run(git + ["add", "."], check=True)
    subprocess.run(git + ["commit", "-qm", "c"], check=True)
    clean = _docs.revision(str(tmp_path))
    assert clean["changes"] is False and clean["changed"] == []
    assert _docs.revision_line(clean) == f"Commit: {clean['commit']}"
    (tmp_path / "b.py").write_text("x = 2\n")
    (tmp_path / "new.py").write_text("untracked\n")
    dirty = _docs.revision(str(tmp_path))
    assert dirty["changes"] is True and dirty["changed"] == ["b.py"]
    assert _docs.revision_line(dirty).endswith("with uncommitted changes to b.py")
    assert _docs.changes_words({"changes": True}) == " with uncommitted changes"  # older JSON
    # what benchmarks write (Markdown, their JSON) changes no measurement: a run of several
    # benchmarks, each writing its blocks, measures a clean commit throughout
    (tmp_path / "b.py").write_text("x = 1\n")
    (tmp_path / "guide.md").write_text("figures\n")
    (tmp_path / "benchmarks" / "results" / "run.json").write_text("{}\n")
    docs_only = _docs.revision(str(tmp_path))
    assert docs_only["changes"] is False and docs_only["changed"] == []
    assert docs_only["documents"] == ["benchmarks/results/run.json", "guide.md"]
    assert _docs.revision_line(docs_only) == f"Commit: {clean['commit']}"


# --- docs/training.md#measured: lodarrow/_bench/_training.py's block -----------------------

TRAINING = ROOT / "docs" / "training.md"


def _training_section():
    text = TRAINING.read_text()
    start = text.index("\n## Measured\n")
    return text[start:text.index("\n## ", start + 1)]


@pytest.mark.skipif(_json("training.json") is None, reason="no committed training run")
def test_the_training_block_is_its_json_rendered():
    """docs/training.md's "Measured" table, its padding waste and the reasons below the goal
    are the committed run's JSON rendered again; the run says where and on what it ran."""
    from lodarrow._bench import _training

    text = TRAINING.read_text()
    assert text.count(_docs.end_marker(_training.KEY)) == 1
    assert _docs.begin_marker(_training.KEY, _training.REGENERATE) in text
    report = _json("training.json")
    assert _docs.body_of(text, _training.KEY) == _training.markdown(report)
    assert report["command"].startswith("python -m lodarrow._bench._training ")
    assert report["revision"]["commit"] and report["machine"]["load_average"]
    assert report["machine"]["versions"]["lodarrow"]
    assert {r["key"] for r in report["rows"]} >= {"lengths-parquet", "plan-bucketing",
                                                  "plan-random", "pad-tensors"}


def test_the_training_prose_types_no_figure():
    """Outside its block and its code, the "Measured" section of docs/training.md carries no
    figure but the goal, which is the script's constant."""
    from lodarrow._bench import _training

    section = _training_section()
    assert _docs.find_block(section, _training.KEY) is not None
    start, end = _docs.find_block(section, _training.KEY)
    prose = re.sub(r"(?s)```.*?```", "", section[:start] + section[end:])
    prose = re.sub(r"`[^`\n]*`", "", prose)
    figures = re.findall(r"(?<![\w-])\d[\d,.]*x?", prose)
    assert figures == [f"{_training.GOAL}x"], figures
    for typed in ("693x", "2,216x", "11x in another run", "7,306 batches/s"):
        assert typed not in TRAINING.read_text()


def _training_report(**speedups):
    """A small training report whose rows have the given speed-ups (key -> ratio)."""
    rows = [{"key": key, "step": key, "baseline": "peer", "baseline_s": ratio * 0.01,
             "lodarrow_s": 0.01, "note": ""} for key, ratio in speedups.items()]
    return {"command": "python -m lodarrow._bench._training --n 10", "started": "now",
            "revision": {"commit": "abc1234", "changes": False},
            "machine": {"cpu": "CPU", "cores": 2, "platform": "Linux",
                        "versions": {"python": "3.11"}, "load_average": [0.5, 0, 0]},
            "load_average_end": [1.0, 0, 0],
            "args": {"n": 10, "baseline_n": 10, "steps": 2, "plan_n": 100,
                     "plan_baseline_n": 100, "repeat": 3, "batch": 32, "max_tokens": 8192,
                     "window": 3200},
            "data": {"tokens": 960, "min_length": 1, "max_length": 512, "mean_length": 96.0,
                     "collated_batches": 2},
            "rows": rows, "wastes": [{"plan": "random batches", "padding_waste": 0.745,
                                      "batches": 4}],
            "loader": {"batches_per_s": 7000.0, "steps_per_s": 100.0, "steps": 2,
                       "batches": 12}}


def test_the_training_reasons_follow_the_rows_below_the_goal():
    """Only the rows below the goal get a reason, each with its figures from the JSON."""
    from lodarrow._bench import _training

    text = _training.markdown(_training_report(**{
        "lengths-parquet": 6.2, "lengths-memory": 693.0, "lengths-hf": 2216.0,
        "plan-bucketing": 12.0, "plan-random": 8.0, "pad-tensors": 9.0, "pad-rows": 51.0}))
    assert "| lengths-memory | peer | 6.930 | 0.0100 | 693x |  |" in text
    assert "- **Lengths from Parquet (6x)**:" in text and "693-2,216x faster" in text
    assert "random batches 8x against `BatchSampler(RandomSampler)`" in text
    assert "bucketing 12x" not in text and "sorted" not in text
    assert "took 0.010 s of the bucketing plan's 0.010 s" in text
    assert "5,000 us a batch of 32 rows" in text and "collation is 51x faster" in text
    assert "| random batches | 74.5% | 4 |" in text
    assert "the loader is 70x the model's pace, so it is not the bottleneck" in text
    assert "Commit: abc1234." in text
    ahead = _training.markdown(_training_report(**{"plan-bucketing": 12.0}))
    assert "Every row with a Python peer reaches the goal of 10x in this run." in ahead
    odd = _training.markdown(_training_report(**{"pack-hf": 3.0}))
    assert "- **pack-hf (3x)**: not explained yet." in odd


def test_the_training_benchmark_runs_small_and_regenerates_its_block(tmp_path):
    """A tiny run writes its JSON and its block; --from-json writes the block again, byte
    for byte, and leaves the rest of the document."""
    from lodarrow._bench import _training

    js, doc = tmp_path / "t.json", tmp_path / "doc.md"
    doc.write_text("# T\n\nprose\n")
    proc = run_python(["-m", "lodarrow._bench._training", "--n", "3000", "--baseline-n",
                       "1000", "--plan-n", "20000", "--steps", "10", "--json", js,
                       "--docs", doc], timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(js.read_text())
    assert report["args"]["n"] == 3000 and report["data"]["tokens"] > 3000
    assert all(r["lodarrow_s"] > 0 for r in report["rows"])
    assert report["wastes"] and report["data"]["collated_batches"] == 10
    text = doc.read_text()
    assert text.startswith("# T\n\nprose\n\n") and text.endswith(
        _docs.block(_training.KEY, _training.REGENERATE, _training.markdown(report)))
    proc = run_python(["-m", "lodarrow._bench._training", "--from-json", js, "--docs", doc],
                      timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert doc.read_text() == text


# --- benchmarks/cache_peers.py: lodarrow's cache against MosaicML's (not published) --------

def _cache_peers_report():
    """A report as cache_peers.py's --json keeps it (two loaders, 3 epochs)."""
    def epochs(bytes_each, last_error=None):
        out = [{"seconds": 1.0, "bytes": b, "sequences": 100} for b in bytes_each]
        if last_error:
            out[-1] = {"seconds": 0.5, "bytes": 0, "sequences": 0, "error": last_error}
        return out
    results = [{"peer": "lodarrow-nocache", "how": "la.batch_loader(...)", "start_s": 1.2,
                "start_bytes": 62e6, "epochs": epochs([62e6, 62e6, 0], "cannot connect"),
                "cache_disk": 8e5, "cache_size": 8e5, "load": [0.5, 0.4]},
               {"peer": "lodarrow", "how": "la.batch_loader(..., cache_bytes=N)", "start_s": 1.2,
                "start_bytes": 62e6, "epochs": epochs([0, 0, 0]), "cache_disk": 62.7e6,
                "cache_size": 62.7e6, "load": [0.4, 0.5]}]
    return {"command": "LODARROW_NUM_THREADS=1 python benchmarks/cache_peers.py --peers x",
            "started": "2026-11-28 01:55 UTC", "finished": "2026-11-28 01:56 UTC",
            "load": [0.45, 1.09], "machine": "Linux", "cpus": 2,
            "revision": {"commit": "abc1234", "changes": False},
            "args": {"batch_size": 32, "epochs": 3, "cache_bytes": 2**30},
            "corpus": {"sequences": 100, "row_groups": 10, "parquet_bytes": 61.9e6,
                       "tokens": 30000, "mds_bytes": {"raw": 120.1e6}},
            "results": results}


def test_cache_peers_writes_its_block_from_json(tmp_path):
    """--from-json writes the block from the JSON alone (the run needs MosaicML's own
    environment), the rest of the file kept; benchmarks/README.md, which publishes no run,
    says in the block which command measures it, and the prose of docs/training.md and of
    the README's section types no figure of that comparison."""
    bench = _script("cache_peers")
    report = _cache_peers_report()
    text = bench.markdown(report)
    assert "Commit: abc1234." in text
    assert "| lodarrow | la.batch_loader(..., cache_bytes=N) | 1.20 / 62.00 |" in text
    assert "fails after 0.5 s: cannot connect | 186.0 |" in text
    src, doc = tmp_path / "c.json", tmp_path / "doc.md"
    src.write_text(json.dumps(report))
    doc.write_text("# T\n\nprose\n")
    bench.main(["--from-json", str(src), "--docs", str(doc)])
    assert doc.read_text() == "# T\n\nprose\n\n" + _docs.block(bench.KEY, bench.REGENERATE,
                                                                 text)
    readme = README.read_text()
    if (RESULTS / "cache_peers.json").exists():
        want = bench.markdown(_json("cache_peers.json"))
    else:
        want = _docs.pending(bench.MEASURE) + "\n"
    assert _docs.body_of(readme, bench.KEY) == want
    section = readme[readme.index("## A local cache against MosaicML's"):]
    section = section[:section.index("\n## ", 5)]
    start, end = _docs.find_block(section, bench.KEY)
    prose = re.sub(r"(?s)```.*?```", "", section[:start] + section[end:])
    assert not re.findall(r"\d+(?:\.\d+)? (?:MB|s)\b", prose)
    training = (ROOT / "docs" / "training.md").read_text()
    assert "| MosaicML, raw MDS" not in training and "12.57 / 120.1" not in training


# --- the smaller benchmarks' blocks: docs/tables.md and docs/training.md --------------------

TABLES = ROOT / "docs" / "tables.md"

#: block -> (document, script, its JSON)
SMALL_BLOCKS = {"udf-chunked-tables": (TABLES, "udf_chunked_tables", "udf_chunked_tables.json"),
                "pandas-read": (TABLES, "pandas_read", "pandas_read.json"),
                "packing-fill": (TRAINING, "packing_fill", "packing_fill.json")}


@pytest.mark.parametrize("key", sorted(SMALL_BLOCKS))
def test_a_small_benchmarks_block_is_its_json_rendered(key):
    doc, script, js = SMALL_BLOCKS[key]
    bench = _script(script)
    text = doc.read_text()
    assert bench.KEY == key and text.count(_docs.end_marker(key)) == 1
    assert _docs.begin_marker(key, bench.REGENERATE) in text
    report = _json(js)
    assert report is not None, f"no benchmarks/results/{js} to render {key} from"
    assert _docs.body_of(text, key) == bench.markdown(report)
    assert report["revision"]["commit"] and report["machine"]["load_average"]
    if key == "udf-chunked-tables":  # the prose: below the threshold the join is cheaper
        below = [r for r in report["rows"] if r["batch_bytes"] < report["threshold_bytes"]]
        assert below and all(r["by_batch_ms"] > r["joined_ms"] for r in below)
    elif key == "pandas-read":  # the prose: object columns of NumPy arrays
        assert report["object_item"] == "ndarray"


@pytest.mark.parametrize("key", sorted(SMALL_BLOCKS))
def test_the_paragraph_before_a_small_block_types_no_figure(key):
    """The paragraph introducing each block says what is measured, with no measured figure:
    only the design's constants (the udf's 1 MiB threshold, the packing's sizes)."""
    doc, _, _ = SMALL_BLOCKS[key]
    text = doc.read_text()
    start, _ = _docs.find_block(text, key)
    intro = text[text.rindex("\n\n", 0, start - 2) + 2:start]
    intro = re.sub(r"`[^`\n]*`", "", intro)
    figures = re.findall(r"(?<![\w^.-])\d[\d,.]*(?:x|%| ?ms| ?s\b| ?MB)", intro)
    assert not figures, (key, figures)
    for typed in ("1.4x as fast at 2 MiB", "16.5-17.8 ms", "| slots holding tokens, sigma 0.5 |",
                  "0.2-0.6 s", "about 0.7 us a KiB"):
        assert typed not in text


@pytest.mark.parametrize("script,argv", [
    ("udf_chunked_tables", ["--chunks", "2", "--repeat", "1"]),
    ("pandas_read", ["--rows", "500", "--repeat", "1"]),
    ("packing_fill", ["--sequences", "3000", "--repeat", "1"])])
def test_a_small_benchmark_runs_and_regenerates_its_block(script, argv, tmp_path,
                                                          monkeypatch):
    """A tiny run writes its JSON and its block; --from-json writes the block again, byte for
    byte, and keeps the rest of the document."""
    bench = _script(script)
    if script == "udf_chunked_tables":
        monkeypatch.setattr(bench, "SHAPES", ((64, 4), (16384, 16)))
    js, doc = tmp_path / "r.json", tmp_path / "doc.md"
    doc.write_text("# T\n\nprose\n")
    bench.main([*argv, "--json", str(js), "--docs", str(doc)])
    report = json.loads(js.read_text())
    text = doc.read_text()
    assert text == "# T\n\nprose\n\n" + _docs.block(bench.KEY, bench.REGENERATE,
                                                     bench.markdown(report))
    bench.main(["--from-json", str(js), "--docs", str(doc)])
    assert doc.read_text() == text
    if script == "udf_chunked_tables":
        assert [r["rows"] for r in report["rows"]] == [64, 16384]
        assert "batch by batch faster in" in text and "below it" in text
    elif script == "packing_fill":
        assert len(report["cells"]) == len(bench.SIGMAS) * len(bench.WINDOWS)
        for cell in report["cells"]:
            assert 0.5 < cell["filled"] <= 1 and cell["tokens"] > 0
            assert 0 <= cell["emptiest_share"] <= 1
    else:
        assert min(report["seconds"]["objects"]) > 0 and report["vectors"] > 0


def test_the_packing_fill_is_what_packed_rows_packs():
    """packing_fill.py's shares come from the rows collation makes: the rows of one window
    of a tiny batch, counted by hand."""
    bench = _script("packing_fill")
    from lodarrow._training._collate import pack_placement

    lengths = np.array([5, 1, 4, 2, 3, 6], dtype=np.int64)
    placement = pack_placement(lengths, 8, window=None)
    rows, filled, share = bench.fill(lengths, placement, None)
    assert rows == placement.n_rows and filled == lengths.sum() / (rows * 8)
    per_row = np.bincount(placement.row, weights=placement.length, minlength=rows)
    assert share == (8 - per_row).max() / (8 - per_row).sum()
    rows2, _, share2 = bench.fill(lengths, pack_placement(lengths, 8, window=3), 3)
    assert rows2 >= rows and 0 < share2 <= 1
