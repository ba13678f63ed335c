"""benchmarks/tokenization.py: its JSON, and docs/tokenize.md's figures generated from it.

- docs/tokenize.md's generated section equals what the committed JSON
  (benchmarks/results/tokenization.json) renders, so the table cannot drift from the run;
- every figure the hand-written prose of its "Measured" section quotes (``0.93x``, ``N of
  M``) is one the generated section states, and the generated claims are recomputed here
  from the JSON's samples (not from the script's own summary);
- a tiny run writes a JSON of the documented shape, and ``--from-json`` regenerates the
  docs' section in place (replaced, not appended);
- a tiny run checks every row's output holds the tokenizer's ids document by document
  (``datasets``' fast path writing the ``uint16`` lists ``la.tokenize`` writes), and the check
  catches a changed id, a dropped document and a reordering.
"""

import hashlib
import importlib.util
import json
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "tokenization.py"
RESULTS = ROOT / "benchmarks" / "results" / "tokenization.json"
DOCS = ROOT / "docs" / "tokenize.md"
pytestmark = pytest.mark.skipif(not SCRIPT.exists(), reason="needs the checkout's benchmarks/")


def _load_script():
    spec = importlib.util.spec_from_file_location("bench_tokenization", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _measured_prose(text, bench):
    """The hand-written text of the "## Measured" section: outside the generated block."""
    section = text[text.index("## Measured"):]
    nxt = re.search(r"\n## ", section[3:])
    section = section[:nxt.start() + 3] if nxt else section
    a = section.index(bench.BEGIN.split(":")[0])
    b = section.index(bench.END) + len(bench.END)
    return section[:a] + section[b:]


def test_the_docs_table_is_the_json_rendered():
    bench = _load_script()
    report = json.loads(RESULTS.read_text())
    assert bench.generated(DOCS) == bench.markdown(report)


def test_the_commit_line_names_the_changed_files():
    """A run on a dirty tree records which tracked files differed (``revision()``'s
    ``changed``) and the block names them; a JSON that recorded only ``changes`` renders as
    before."""
    bench = _load_script()
    report = json.loads(RESULTS.read_text())
    rev = bench.lodarrow_revision(__import__("lodarrow"))
    assert {"version", "commit", "changes", "changed"} <= set(rev)
    dirty = dict(report, lodarrow=dict(report["lodarrow"], changes=True,
                                       changed=["lodarrow/_tables/_tokenize.py"]))
    assert " with uncommitted changes to lodarrow/_tables/_tokenize.py (lodarrow " in \
        bench.markdown(dirty)
    old = dict(report, lodarrow={k: v for k, v in report["lodarrow"].items() if k != "changed"})
    old["lodarrow"]["changes"] = True
    assert " with uncommitted changes (lodarrow " in bench.markdown(old)


def test_the_json_holds_the_run():
    report = json.loads(RESULTS.read_text())
    for key in ("command", "started", "finished", "machine", "lodarrow", "versions",
                "settings", "corpus", "rows", "load_at_end"):
        assert key in report, key
    assert report["lodarrow"]["commit"] and report["machine"]["cpus"] >= 1
    assert "load_at_start" in report["machine"]
    keys = {r["key"] for r in report["rows"]}
    assert {"tokenizer", "lodarrow", "datasets", "datatrove", "dolma", "megatron"} <= keys
    for r in report["rows"]:
        if r["samples"] is None:            # not run: says why
            assert r["note"], r
            continue
        assert len(r["samples"]) == report["settings"]["repeat"], r["key"]
        for s in r["samples"]:
            assert s["wall_s"] > 0 and "load" in s and "cpu_s" in s


def test_the_claims_are_the_json_s():
    """The generated claims recomputed from the samples (paired, same-round ratios; a
    comparison said to hold only when every round agrees), and the prose's figures among
    them."""
    bench = _load_script()
    report = json.loads(RESULTS.read_text())
    rows = {r["key"]: r for r in report["rows"]}

    def paired(num):
        return [a["wall_s"] / b["wall_s"]
                for a, b in zip(rows[num]["samples"], rows["lodarrow"]["samples"])]

    def verdict(ratios, level):
        return ("above" if min(ratios) > level else "below" if max(ratios) < level
                else "not resolved")

    section = bench.generated(DOCS)
    goal = report["settings"]["goal"]
    said = {"above": f"at or above the {goal}x goal in every round",
            "below": f"below the {goal}x goal in every round",
            "not resolved": f"the {goal}x goal not resolved in this run"}
    for key in ("tokenizer_no_ids", "tokenizer"):  # encode only, and encode + ids
        ratios = paired(key)
        line = next(x for x in section.splitlines()
                    if x.startswith(f"- `la.tokenize` end to end against the "
                                    f"{bench.TITLES[key][0]}:"))
        assert ", ".join(f"{r:.2f}x" for r in ratios) in line
        assert said[verdict(ratios, goal)] in line
        # the CPU ratio is printed to 3 places, never rounded up onto the goal
        cpu = min(rows[key]["samples"], key=lambda s: s["wall_s"])["cpu_s"] / \
            min(rows["lodarrow"]["samples"], key=lambda s: s["wall_s"])["cpu_s"]
        assert f"{cpu:.3f}x" in line and "met" not in line
    peers = [k for k, r in rows.items() if r["kind"] == "peer"]
    ran = [k for k in peers if rows[k]["samples"]]
    verdicts = {k: verdict(paired(k), 1) for k in ran}
    ahead = sum(v == "above" for v in verdicts.values())
    behind = sum(v == "below" for v in verdicts.values())
    assert f"ahead of {ahead} of the {len(ran)} peer rows that ran, behind {behind}" in section
    for k, v in verdicts.items():
        r = paired(k)
        word = {"above": "ahead", "below": "behind",
                "not resolved": "not resolved in this run"}[v]
        assert f"{min(r):.2f}x-{max(r):.2f}x ({word})" in section
    assert f"{len(peers) - len(ran)} of {len(peers)} did not run" in section
    sources = report.get("sources")
    if sources:
        for name, digest in sources.items():
            assert f"`{name}` SHA-256 {digest[:12]}" in section
    else:
        assert "not recorded" in section
    # the prose quotes only figures of the generated section
    prose = _measured_prose(DOCS.read_text(), bench)
    for figure in re.findall(r"\d+\.\d+x|\b\d+ of \d+\b", prose):
        assert figure in section, f"the prose's {figure!r} is not in the generated section"


def test_a_tiny_run_writes_its_json_and_regenerates_the_docs(tmp_path):
    pytest.importorskip("tokenizers")
    bench = _load_script()
    out, doc = tmp_path / "t.json", tmp_path / "doc.md"
    doc.write_text("# Tokenize\n\nText.\n")
    argv = ["--documents", "120", "--files", "2", "--vocab", "300", "--repeat", "2",
            "--only", "tokenizer,lodarrow,dolma", "--json", str(out), "--docs", str(doc)]
    bench.main(argv)
    report = json.loads(out.read_text())
    assert [r["key"] for r in report["rows"]] == ["tokenizer", "lodarrow", "dolma"]
    assert report["rows"][2]["samples"] is None and report["rows"][2]["note"]
    assert len(report["rows"][1]["samples"]) == 2
    assert set(report["sources"]) == {"benchmarks/tokenization.py",
                                      "lodarrow/_tables/_tokenize.py"}
    assert report["sources"]["benchmarks/tokenization.py"] == \
        hashlib.sha256(SCRIPT.read_bytes()).hexdigest()
    text = doc.read_text()
    assert text.startswith("# Tokenize\n\nText.\n") and text.count("## Measured") == 1
    assert text.count(bench.END) == 1 and bench.generated(doc) == bench.markdown(report)
    bench.main(["--from-json", str(out), "--docs", str(doc)])   # regenerated in place
    assert doc.read_text() == text


def test_the_reference_check_catches_a_wrong_output():
    tokenizers = pytest.importorskip("tokenizers")
    np = pytest.importorskip("numpy")
    bench = _load_script()
    texts = ["ab ba", "abc", "", "a b c a b c"]
    tok = tokenizers.Tokenizer(tokenizers.models.BPE())
    tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.train_from_iterator(texts, tokenizers.trainers.BpeTrainer(
        vocab_size=270, initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False))
    ref = bench.Reference(tok, texts, 2)
    ids = [tok.encode(t).ids for t in texts]
    flat, lengths = np.concatenate([np.array(i, np.uint32) for i in ids]), list(map(len, ids))
    ref.check("same", flat, lengths, range(4))
    order = [2, 0, 3, 1]                                     # another order, said so
    ref.check("reordered", np.concatenate([np.array(ids[i], np.uint32) for i in order]),
              [lengths[i] for i in order], order)
    with pytest.raises(AssertionError, match="ids differ"):
        bad = flat.copy()
        bad[-1] += 1
        ref.check("changed", bad, lengths, range(4))
    with pytest.raises(AssertionError, match="documents written"):
        ref.check("dropped", flat[:-len(ids[3])], lengths[:3], range(3))
    with pytest.raises(AssertionError):
        ref.check("unsaid order", np.concatenate([np.array(ids[i], np.uint32) for i in order]),
                  [lengths[i] for i in order], range(4))


def test_a_tiny_run_checks_every_output_s_ids(tmp_path):
    pytest.importorskip("tokenizers")
    pytest.importorskip("datasets")
    bench = _load_script()
    out = tmp_path / "t.json"
    bench.main(["--documents", "120", "--files", "2", "--vocab", "300", "--repeat", "1",
                "--processes", "2", "--only", "tokenizer,lodarrow,datasets,datasets_in_memory",
                "--json", str(out)])
    report = json.loads(out.read_text())
    rows = {r["key"]: r for r in report["rows"]}
    assert rows["tokenizer"]["verified"].startswith("not checked")
    for key in ("lodarrow", "datasets", "datasets_in_memory"):
        # the fast path's features=: uint16 lists as la.tokenize writes, not int64
        assert rows[key]["verified"].startswith("120 token lists (list<element: uint16>)"), \
            rows[key]
    for key in ("datasets", "datasets_in_memory"):
        assert "uint16" in rows[key]["note"] and "batch_size=" in rows[key]["note"]
    assert "cache file" in rows["datasets"]["name"]
    assert "keep_in_memory=True" in rows["datasets_in_memory"]["name"]
    assert "Outputs checked after the warm-up (untimed)" in bench.markdown(report)
    assert ": 3 of the 4 rows that ran (" in bench.markdown(report)
