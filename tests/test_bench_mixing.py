"""Smoke test of benchmarks/mixing.py (la.mix against the loaders that mix): tiny corpora,
lodarrow's row and each peer whose libraries import here, each in its own process.

The speed is not checked (it is compared in the benchmark's runs); what is checked is the
benchmark's accounting of the batches delivered: lodarrow's mixture exact every epoch (its
gap to the weights under one sequence, no down-sampled sequence twice in an epoch, the
upsampled source's sequences delivered their copies' times), covering the down-sampled
source across the epochs, and a resume in a new process delivering the rest of the epoch
exactly.  Then the JSON (commit, machine, settings) and the documents' blocks, which
``--from-json`` must write again byte for byte.
"""

import importlib.util
import json
import pathlib

import pytest

from lodarrow._bench import _docs

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "mixing.py"
pytest.importorskip("torch")


def _load_script():
    spec = importlib.util.spec_from_file_location("bench_mixing", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not SCRIPT.exists(), reason="needs the checkout's benchmarks/")
def test_the_mixing_benchmark_accounts_for_what_was_delivered(tmp_path):
    bench = _load_script()
    peers = ["lodarrow", "lodarrow-1thread"] + [p for p, mod in (("hf", "datasets"), ("streaming", "streaming"))
                            if importlib.util.find_spec(mod) is not None]
    out, doc, readme = tmp_path / "mix.json", tmp_path / "training.md", tmp_path / "README.md"
    doc.write_text("# Training\n\nProse kept.\n")
    bench.main(["--workdir", str(tmp_path / "work"), "--sizes", "600,200,40",
                "--epoch-size", "400", "--epochs", "3", "--batch-size", "8", "--repeat", "2",
                "--peers", ",".join(peers), "--json", str(out),
                "--markdown", str(tmp_path / "mix.md"), "--docs", str(doc),
                "--readme", str(readme)])
    report = json.loads(out.read_text())
    for key in ("command", "revision", "machine", "settings", "started", "finished",
                "load_at_end", "results"):
        assert key in report, key
    assert report["machine"]["cpu"] and report["settings"]["epoch_size"] == 400
    assert "LODARROW_NUM_THREADS" in report["settings"]
    text, readme_text = doc.read_text(), readme.read_text()
    assert text.startswith("# Training\n\nProse kept.\n")
    assert _docs.body_of(text, "mixing") == bench.docs_markdown(report)
    assert _docs.body_of(readme_text, "mixing-run") == bench.markdown(report)
    bench.main(["--from-json", str(out), "--docs", str(doc), "--readme", str(readme)])
    assert doc.read_text() == text and readme.read_text() == readme_text
    rows = {r["peer"]: r for r in report["results"]}
    la = rows["lodarrow"]
    assert la["epoch_sequences"] == [400, 400, 400]
    assert la["max_gap"] < 1 and la["repeats"] == 0 and la["beyond_copies"] == 0
    assert la["coverage"] == 1.0 and la["coverage_epochs"] == 3  # 200 of 600 an epoch
    assert la["tokens_per_s"] > 0
    assert la["resume_exact"] is True and la["resume_s"] > 0  # killed at half, resumed
    assert "| lodarrow |" in (tmp_path / "mix.md").read_text()
    for peer in peers[1:]:
        assert "error" not in rows[peer], rows[peer].get("error")
    # two rounds, the order rotated; every round delivered the first round's batches
    assert len(report["orders"]) == 2 and report["orders"][1] == peers[1:] + peers[:1]
    for r in rows.values():
        assert len(r["rounds"]) == 2 and r["rounds_agree"] is True
    # lodarrow's one-thread row: its own environment, the same batches as the defaults'
    one = rows["lodarrow-1thread"]
    assert one["env"]["LODARROW_NUM_THREADS"] == "1" and "prefetch=0" in one["how"]
    assert one["epoch_sequences"] == la["epoch_sequences"] and one["max_gap"] < 1
