"""The peak memory of ``la.tokenize`` in docs/tokenize.md is written by
``benchmarks/tokenization.py --memory`` from its JSON (issue 59), never typed: the
``tokenize-memory`` block equals benchmarks/results/tokenize_memory.json rendered again, or,
where that JSON is not committed yet, says which command measures it.  A tiny run here: the
shape of the JSON, and ``--from-json`` writing the block again byte for byte, beside the
``tokenize-bench`` section, which it leaves as it is."""

import importlib.util
import json
import pathlib
import re

import pytest

from conftest import run_python
from lodarrow._bench import _docs

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "tokenization.py"
RESULTS = ROOT / "benchmarks" / "results" / "tokenize_memory.json"
DOCS = ROOT / "docs" / "tokenize.md"
pytestmark = pytest.mark.skipif(not SCRIPT.exists(), reason="needs the checkout's benchmarks/")


def _script():
    spec = importlib.util.spec_from_file_location("bench_tokenization_memory", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_block_is_its_json_rendered_or_says_what_measures_it():
    bench = _script()
    text = DOCS.read_text()
    assert text.count(_docs.end_marker(bench.MEMORY_BLOCK)) == 1
    body = _docs.body_of(text, bench.MEMORY_BLOCK)
    if not RESULTS.exists():
        assert body == _docs.pending(bench.MEMORY_MEASURE) + "\n"
        return
    assert body == bench.memory_markdown(json.loads(RESULTS.read_text()))


def test_the_memory_paragraph_types_no_figure():
    """The peak RSS once typed from ``/usr/bin/time -v`` is gone; the paragraph introducing
    the block carries no figure."""
    text = DOCS.read_text()
    assert "/usr/bin/time -v" not in text and "peak RSS 454 MB" not in text
    start, _ = _docs.find_block(text, _script().MEMORY_BLOCK)
    intro = text[text.rindex("\n\n", 0, start - 2) + 2:start]
    assert intro.strip() and not re.search(r"(?<!\w)\d", re.sub(r"`[^`\n]*`", "", intro))


def test_a_tiny_memory_run(tmp_path):
    pytest.importorskip("tokenizers")
    bench = _script()
    js, doc = tmp_path / "mem.json", tmp_path / "tokenize.md"
    kept = f"# Tokenize\n\n{bench.BEGIN}\n\nthe other table\n{bench.END}\n"
    doc.write_text(kept)
    proc = run_python([SCRIPT, "--memory", "0.1,0.2", "--vocab", "400", "--work-dir",
                       tmp_path, "--json", js, "--docs", doc])
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(js.read_text())
    assert report["kind"] == "tokenize-memory"
    for key in ("command", "revision", "machine", "settings", "started", "finished",
                "load_at_end"):
        assert key in report, key
    rows = report["rows"]
    assert [r["bytes"] >= s for r, s in zip(rows, (100_000, 200_000))] == [True, True]
    assert rows[0]["documents"] < rows[1]["documents"]
    for r in rows:
        assert r["peak"] >= r["baseline"] > 0 and r["tokens"] > 0 and r["seconds"] > 0
    text = doc.read_text()
    assert text.startswith(kept)  # the tokenize-bench section left as it was
    assert _docs.body_of(text, bench.MEMORY_BLOCK) == bench.memory_markdown(report)
    bench.main(["--from-json", str(js), "--docs", str(doc)])
    assert doc.read_text() == text
