"""The conversion hub's table of docs/interop.md ("Benchmarks") is written by
``python -m lodarrow bench --ops hub ... --markdown docs/interop.md`` from its JSON (issue 59),
never typed: the ``bench-hub`` block equals benchmarks/results/hub.json rendered again, or,
where that JSON is not committed yet, says which command measures it.  A tiny run here (one
Awkward case): the block holds the run's rows, ``--markdown`` of a file with the block writes
only that block, and ``--from-json`` writes it again byte for byte."""

import json
import pathlib
import re

import pytest

from conftest import run_python
from lodarrow._bench import _docs, _report

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "interop.md"
RESULTS = ROOT / "benchmarks" / "results" / "hub.json"
MEASURE = ("python -m lodarrow bench --ops hub --probe-mib 256 --no-progress "
           "--json benchmarks/results/hub.json --markdown docs/interop.md")

pytestmark = pytest.mark.skipif(not DOC.exists(), reason="needs the checkout's docs/")


def test_the_block_is_its_json_rendered_or_says_what_measures_it():
    text = DOC.read_text()
    assert text.count(_docs.end_marker(_report.HUB_BLOCK)) == 1
    body = _docs.body_of(text, _report.HUB_BLOCK)
    if not RESULTS.exists():
        assert body == _docs.pending(MEASURE) + "\n"
        return
    assert body == _report.hub_markdown(json.loads(RESULTS.read_text()))


def test_the_benchmarks_section_types_no_figure():
    """The typed table and machine line are gone; the paragraph before the block has no
    figure outside its code."""
    text = DOC.read_text()
    assert "Measured on the 2-core development machine" not in text
    assert "| varlen (values + int32 `cu_seqlens`) | emb | 24" not in text
    start, _ = _docs.find_block(text, _report.HUB_BLOCK)
    intro = text[text.rindex("\n\n", 0, start - 2) + 2:start]
    assert intro.strip() and not re.search(r"(?<!\w)\d", re.sub(r"`[^`\n]*`", "", intro))


def test_a_tiny_hub_run_writes_only_its_block(tmp_path):
    pytest.importorskip("rich")
    pytest.importorskip("awkward")
    js, doc = tmp_path / "hub.json", tmp_path / "interop.md"
    empty = _docs.block(_report.HUB_BLOCK, _report.REGENERATE, "old")
    doc.write_text("# Interop\n\nProse kept.\n\n" + empty + "\nAfter.\n")
    proc = run_python(["-m", "lodarrow", "bench", "--ops", "hub_awkward", "--scale", "0.01",
                       "--repeat", "2", "--probe-mib", "8", "--no-progress", "--json", js,
                       "--markdown", doc])
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(js.read_text())
    rows = [r for r in report["rows"] if r["op"] == "hub_awkward"]
    assert [r["library"] for r in rows] == ["lodarrow", "awkward"]
    assert all(r["status"] == "ok" and r["versions"]["awkward"] for r in rows)
    text = doc.read_text()
    assert text.startswith("# Interop\n\nProse kept.\n\n") and text.endswith("\nAfter.\n")
    body = _docs.body_of(text, _report.HUB_BLOCK)
    assert body == _report.hub_markdown(report)
    assert "| Awkward Array | tokens |" in body and report["command"] in body
    proc = run_python(["-m", "lodarrow", "bench", "--from-json", js, "--markdown", doc])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert doc.read_text() == text
