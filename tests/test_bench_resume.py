"""benchmarks/resume.py writes the "Resume" figures of benchmarks/README.md from its JSON
(issue 59): the ``resume`` block equals benchmarks/results/resume.json rendered again, or,
where that JSON is not committed yet, says which command measures it.  The benchmark runs here
at a tiny size: the shape of its JSON, and ``--from-json`` writing the block again byte for
byte."""

import importlib.util
import json
import pathlib
import re

import pytest

from conftest import run_python
from lodarrow._bench import _docs

ROOT = pathlib.Path(__file__).resolve().parent.parent
README = ROOT / "benchmarks" / "README.md"
RESULTS = ROOT / "benchmarks" / "results" / "resume.json"
MEASURE = ("python benchmarks/resume.py --sequences 10000000 --repeat 3 "
           "--json benchmarks/results/resume.json --docs benchmarks/README.md")

pytestmark = pytest.mark.skipif(not (ROOT / "benchmarks" / "resume.py").exists(),
                                reason="needs the checkout's benchmarks/")


def _script():
    spec = importlib.util.spec_from_file_location("bench_resume",
                                                  ROOT / "benchmarks" / "resume.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_block_is_its_json_rendered_or_says_what_measures_it():
    text = README.read_text()
    assert text.count(_docs.end_marker("resume")) == 1
    body = _docs.body_of(text, "resume")
    if not RESULTS.exists():
        assert body == _docs.pending(MEASURE) + "\n"
        return
    assert body == _script().markdown(json.loads(RESULTS.read_text()))


def test_the_resume_section_types_no_figure():
    """The paragraph before the block carries no figure; the table typed from a run is gone."""
    text = README.read_text()
    start, end = _docs.find_block(text, "resume")
    intro = text[text.rindex("\n\n", 0, start - 2) + 2:start]
    assert intro.strip() and not re.search(r"(?<!\w)\d", re.sub(r"`[^`\n]*`", "", intro))
    outside = text[:start] + text[end:]  # the generated block alone holds the table
    assert "| loader made (lengths + epoch 0's plan) |" not in outside


def test_the_benchmark_at_a_tiny_size(tmp_path):
    js, doc = tmp_path / "resume.json", tmp_path / "README.md"
    doc.write_text("# Benchmarks\n\nProse kept.\n")
    proc = run_python([ROOT / "benchmarks" / "resume.py", "--sequences", "3000", "--ranks", "4",
                       "--max-tokens", "256", "--repeat", "2", "--json", js, "--docs", doc])
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(js.read_text())
    for key in ("command", "revision", "machine", "settings", "started", "finished",
                "load_at_end", "steps", "resume_step", "elastic_ranks", "rows"):
        assert key in report, key
    assert [r["what"] for r in report["rows"]] == ["made", "fresh", "resumed", "elastic"]
    assert all(len(r["samples"]) == (1 if r["what"] == "made" else 2) for r in report["rows"])
    assert report["elastic_ranks"] == 2 and report["steps"] > report["resume_step"] > 0
    text = doc.read_text()
    assert text.startswith("# Benchmarks\n\nProse kept.\n")
    assert _docs.body_of(text, "resume") == _script().markdown(report)
    _script().main(["--from-json", str(js), "--docs", str(doc)])
    assert doc.read_text() == text
