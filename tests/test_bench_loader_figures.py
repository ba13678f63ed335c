"""The loader figures of docs/training.md and benchmarks/README.md are written by the
benchmarks, never typed (benchmarks/loader_figures.sh measures them all again).

Each of benchmarks/loaders.py, mixing.py, data_cache.py and lengths_cache.py owns a block of
the documents between ``<!-- generated: KEY, by COMMAND; do not edit -->`` and ``<!-- end
generated: KEY -->`` (lodarrow/_bench/_docs.py).  Where its JSON is committed under
benchmarks/results/, the block must equal that JSON rendered again; where it is not yet, the
block must say which command measures it.  The prose around the blocks carries no figure.
data_cache.py and lengths_cache.py are run here at a tiny size, each in a process of its own
(loaders.py and mixing.py in their own tests): the shape of the JSON, and ``--from-json``
writing the block again byte for byte.
"""

import importlib.util
import json
import pathlib
import re

import pytest

from conftest import run_python
from lodarrow._bench import _docs

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "training.md"
README = ROOT / "benchmarks" / "README.md"
SCALE_OUT = ROOT / "docs" / "scale-out.md"
TABLES = ROOT / "docs" / "tables.md"
RESULTS = ROOT / "benchmarks" / "results"
RUN_ALL = "benchmarks/loader_figures.sh"

pytestmark = pytest.mark.skipif(not (ROOT / "benchmarks").exists() or not DOC.exists(),
                                reason="needs the checkout's benchmarks/ and docs/")

#: block -> (document, script, its JSON, the function rendering the block)
BLOCKS = {"loaders": (DOC, "loaders", "loaders.json", "docs_markdown"),
          "loaders-run": (README, "loaders", "loaders.json", "markdown"),
          "mixing": (DOC, "mixing", "mixing.json", "docs_markdown"),
          "mixing-run": (README, "mixing", "mixing.json", "markdown"),
          "data-cache": (DOC, "data_cache", "data_cache.json", "markdown"),
          "lengths-cache": (DOC, "lengths_cache", "lengths_cache.json", "markdown"),
          "lengths-s3": (SCALE_OUT, "lengths_cache", "lengths_cache.json", "s3_markdown"),
          "lengths-footer": (TABLES, "lengths_cache", "lengths_cache.json", "footer_markdown")}


def _script(name):
    spec = importlib.util.spec_from_file_location(f"bench_{name}",
                                                  ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _prose(text):
    """``text`` without its generated blocks, fenced code and inline code spans."""
    for key in re.findall(r"<!-- generated: ([\w-]+), by ", text):
        start, end = _docs.find_block(text, key)
        text = text[:start] + text[end:]
    text = re.sub(r"(?s)```.*?```", "", text)
    return re.sub(r"`[^`\n]*`", "", text)


#: A number standing alone (a figure), not a digit inside a name such as S3.
FIGURE = r"(?<!\w)\d"


def _section(text, start, stop="\n## "):
    a = text.index(start)
    b = text.find(stop, a + len(start))
    return text[a:] if b < 0 else text[a:b]


@pytest.mark.parametrize("key", sorted(BLOCKS))
def test_a_block_is_its_json_rendered_or_says_what_measures_it(key):
    doc, script, js, render = BLOCKS[key]
    text = doc.read_text()
    assert text.count(_docs.end_marker(key)) == 1, key
    body = _docs.body_of(text, key)
    path = RESULTS / js
    if not path.exists():
        assert body == _docs.pending(RUN_ALL) + "\n", key
        return
    if script == "loaders":
        pytest.importorskip("torch")  # loop_baseline, beside loaders.py, imports it
    want = getattr(_script(script), render)(json.loads(path.read_text()))
    assert body == want.rstrip("\n") + "\n", key


def test_the_loader_comparison_types_no_figure():
    """"Measured against other loaders" and the README's published run: no digit in the
    prose (outside the blocks and the code), so no figure there was typed by hand."""
    doc = _prose(_section(DOC.read_text(), "## Measured against other loaders"))
    assert not re.findall(r".{0,30}" + FIGURE + ".{0,30}", doc)
    readme = _prose(_section(README.read_text(), "### The published run"))
    assert not re.findall(r".{0,30}" + FIGURE + ".{0,30}", readme)


@pytest.mark.parametrize("key", ["lengths-cache", "data-cache", "mixing", "loaders"])
def test_each_measured_passage_introduces_its_block_without_figures(key):
    """The paragraph before each block says what is measured, with no figure of its own."""
    text = DOC.read_text()
    start, _ = _docs.find_block(text, key)
    intro = text[text.rindex("\n\n", 0, start - 2) + 2:start]
    assert intro.strip() and not re.search(FIGURE, _prose(intro)), intro
    for typed in ("Measured (`python benchmarks/lengths_cache.py",
                  "Measured (`python benchmarks/data_cache.py",
                  "Measured against the loaders that mix (`"):
        assert typed not in text  # the passages typed from a run, gone


def test_the_one_command_runs_every_loader_benchmark():
    """benchmarks/loader_figures.sh runs the four benchmarks into the blocks above."""
    sh = (ROOT / RUN_ALL).read_text()
    for script, js in {(s, j) for _, s, j, _ in BLOCKS.values()}:
        assert f"benchmarks/{script}.py" in sh and f"--json benchmarks/results/{js}" in sh
    assert sh.count("--docs docs/training.md") == 4
    assert sh.count("--readme benchmarks/README.md") == 2
    assert RUN_ALL in README.read_text()


def _tiny_doc(tmp_path):
    doc = tmp_path / "training.md"
    doc.write_text("# Training\n\nProse kept.\n")
    return doc


def _check_report(report):
    for key in ("command", "revision", "machine", "settings", "started", "finished",
                "load_at_end"):
        assert key in report, key
    assert report["machine"]["cpu"] and report["machine"]["cores"] >= 1
    assert "LODARROW_NUM_THREADS" in report["settings"]


def _run(script, argv):
    """The benchmark in a process of its own: moto's S3 server keeps its buckets in the
    process, so two benchmarks run in this one would see each other's files."""
    proc = run_python([ROOT / "benchmarks" / f"{script}.py", *argv])
    assert proc.returncode == 0, proc.stderr[-2000:]


def _regenerates(bench, js, doc, key):
    text = doc.read_text()
    assert text.startswith("# Training\n\nProse kept.\n")
    assert _docs.body_of(text, key) == bench.markdown(json.loads(js.read_text()))
    bench.main(["--from-json", str(js), "--docs", str(doc)])
    assert doc.read_text() == text


def test_the_data_cache_benchmark_at_a_tiny_size(tmp_path):
    pytest.importorskip("moto.server", reason="needs moto[server] (the test extra)")
    bench = _script("data_cache")
    js, doc = tmp_path / "dc.json", _tiny_doc(tmp_path)
    _run("data_cache", ["--sequences", "2000", "--files", "2", "--repeat", "2", "--json", js,
                        "--docs", doc])
    report = json.loads(js.read_text())
    _check_report(report)
    rows = {(r["loader"], r["epoch"]): r for r in report["rows"]}
    assert set(rows) == {(name, e) for name in bench.LOADERS for e in (0, 1)}
    for r in rows.values():
        assert len(r["samples"]) == 2 and all(len(s["load"]) == 2 for s in r["samples"])
    cached = rows[(bench.LOADERS[1], 1)]
    assert cached["bytes"] == 0 and cached["requests"] == 0  # the second epoch from the cache
    _regenerates(bench, js, doc, "data-cache")


def test_the_lengths_cache_benchmark_at_a_tiny_size(tmp_path):
    pytest.importorskip("moto.server", reason="needs moto[server] (the test extra)")
    pytest.importorskip("duckdb")
    pytest.importorskip("polars")
    bench = _script("lengths_cache")
    js, doc = tmp_path / "lc.json", _tiny_doc(tmp_path)
    _run("lengths_cache", ["--sequences", "4000", "--files", "2", "--repeat", "1",
                           "--footer-sequences", "2000", "--s3", "--s3-sequences", "2000",
                           "--json", js, "--docs", doc, "--s3-docs", tmp_path / "s3.md",
                           "--footer-docs", tmp_path / "tables.md"])
    report = json.loads(js.read_text())
    _check_report(report)
    assert len(report["local"]["rows"]) == 9 and report["local"]["sequences"] == 4000
    assert all(r["seconds"] > 0 for r in report["local"]["rows"])
    assert report["footer"]["entry_bytes"] > 0 and report["s3"]["rows"]
    assert all(len(report[part]["load"]) == 2 for part in ("local", "footer", "s3"))
    _regenerates(bench, js, doc, "lengths-cache")
    # the S3 table (docs/scale-out.md) and the footer's costs (docs/tables.md), same JSON
    for name, key, render, flag in (("s3.md", "lengths-s3", bench.s3_markdown, "--s3-docs"),
                                    ("tables.md", "lengths-footer", bench.footer_markdown,
                                     "--footer-docs")):
        path = tmp_path / name
        text = path.read_text()
        assert _docs.body_of(text, key) == render(report)
        assert "| `sequence_lengths`, cached |" in text or key != "lengths-s3"
        path.write_text("# Kept\n\n" + text)
        bench.main(["--from-json", str(js), flag, str(path)])
        assert path.read_text() == "# Kept\n\n" + text


def test_the_lengths_passages_elsewhere_type_no_figure():
    """docs/scale-out.md's S3 bytes and docs/tables.md's costs of the footer's entry are
    lengths_cache.py's blocks: the paragraph introducing each carries no figure, and the
    tables typed from a run are gone."""
    for doc, key, typed in ((SCALE_OUT, "lengths-s3", "| `sequence_lengths`, cold | 17,"),
                            (TABLES, "lengths-footer", "| footer | 869 bytes |")):
        text = doc.read_text()
        start, end = _docs.find_block(text, key)
        intro = text[text.rindex("\n\n", 0, start - 2) + 2:start]
        assert intro.strip() and not re.search(FIGURE, _prose(intro)), intro
        assert typed not in text[:start] + text[end:]  # only the block, generated, has one
