"""Smoke test of benchmarks/loaders.py (the batch loader against the loaders users pick): a
tiny corpus, each peer whose libraries import here, run in this process; the table has its row.

The figures are not checked (speed is compared in the benchmark's own runs, not asserted);
what is checked is that every peer delivers batches, that the accounting is sane (padding in
[0, 100), no padding for flattened batches, packing = 100 - padding for row packers) and that
a resume point is reached where the peer has a resume mechanism.  Then the JSON (commit,
machine, settings, every run of every cell, run round robin) and the documents' blocks, which
``--from-json`` must write again byte for byte.
"""

import importlib.util
import json
import pathlib
import statistics
import warnings

import pyarrow as pa
import pyarrow.parquet as pq
import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "loaders.py"
# every row delivers torch tensors, and the hand-written baseline (loop_baseline.py) is torch's
pytest.importorskip("torch")


def _load_script():
    spec = importlib.util.spec_from_file_location("bench_loaders", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench = _load_script()

TINY = ["--sequences", "1000", "--mean-length", "30", "--max-length", "128",
        "--row-group-size", "250", "--batch-size", "8", "--row-length", "128",
        "--rows-per-batch", "2", "--seconds", "0.1", "--warmup", "1", "--modes", "0",
        "--repeat", "1", "--in-process"]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    path = tmp_path_factory.mktemp("loaders")
    bench.ensure_corpus(bench.parse(TINY + ["--workdir", str(path)]))
    return path


def test_corpus_is_written_once(workdir):
    corpus = workdir / "corpus.parquet"
    table = pq.read_table(corpus)
    assert table.num_rows == 1000
    assert table.schema.field(bench.COLUMN).type == pa.list_(pa.int32())
    lengths = pa.compute.list_value_length(table.column(0)).to_numpy()
    assert lengths.min() >= 1 and lengths.max() <= 128
    meta = json.loads((workdir / "corpus.json").read_text())
    assert meta["tokens"] == int(lengths.sum())
    before = corpus.stat().st_mtime_ns
    bench.ensure_corpus(bench.parse(TINY + ["--workdir", str(workdir)]))
    assert corpus.stat().st_mtime_ns == before


#: lodarrow's rows whose batches cross pickled run with workers only: two of them here (a
#: table and a Parquet source; the others differ from them by the mode alone)
PICKLED = ("lodarrow-packed-table-pickled", "lodarrow-padded-parquet-pickled")


@pytest.mark.parametrize("name", [n for n in bench.PEERS
                                  if not n.endswith("-pickled") or n in PICKLED])
def test_peer_row(name, workdir, tmp_path):
    peer = bench.PEERS[name]
    for module in peer.requires:
        pytest.importorskip(module)
    md, js = tmp_path / "t.md", tmp_path / "t.json"
    argv = TINY + ["--workdir", str(workdir), "--peers", name, "--markdown", str(md),
                   "--json", str(js)]
    if name in PICKLED:   # in one process nothing crosses: with 2 DataLoader workers
        argv[argv.index("--modes") + 1] = "2"
        argv.remove("--in-process")
    with warnings.catch_warnings():     # the peers' own warnings are not under test here
        warnings.simplefilter("ignore")
        bench.main(argv)
    report = json.loads(js.read_text())
    [result] = report["results"]
    assert "error" not in result, result["error"]
    assert not list(workdir.glob("*-scratch-*"))  # each measurement's folder removed
    if peer.scratch:  # from the Parquet file, nothing made before, to epoch 0's end
        [scratch] = report["scratch"]
        assert "error" not in scratch, scratch["error"]
        assert scratch["peer"] == name and scratch["round"] == 0 and scratch["seconds"] > 0
        assert scratch["tokens"] == result["tokens_per_epoch"]
    else:
        assert "scratch" not in report
    assert result["tokens_per_s"] > 0 and result["timed_batches"] >= 1
    assert 0 <= result["padding_pct"] < 100
    if peer.kind == "packed":
        assert result["padding_pct"] == 0
    if peer.kind == "rows":
        assert result["packing_pct"] == pytest.approx(100 - result["padding_pct"])
    if result["resume"] is not None:
        assert result["resume_s"] > 0 and 0 < result["resume_step"] <= result["steps_per_epoch"]
    if peer.kind in ("padded", "packed"):   # every sequence once an epoch, none twice
        meta = json.loads((workdir / "corpus.json").read_text())
        assert result["tokens_per_epoch"] == meta["tokens"]
    assert result["rss_main_mib"] > 0
    rows = [line for line in md.read_text().splitlines() if line.startswith(f"| {peer.label} |")]
    assert len(rows) == 1 and "failed" not in rows[0]
    assert result.get("notes", "") == peer.describe_notes(None)
    if result.get("notes"):
        assert f"- {peer.label}: " in md.read_text() and result["notes"] in md.read_text()


def test_every_peer_cites_what_it_follows():
    """The peers' rows say which documentation their path follows."""
    ctx = bench.Context(bench.parse(TINY), {"sequences": 1000, "tokens": 30000,
                                            "row_groups": 4})
    for name in ("hf-iterable-packed", "torchdata-stateful-padded", "torchdata-nodes-padded",
                 "litdata-sequences", "litdata-sequences-decode0", "grain-packing-t0"):
        text = bench.PEERS[name].describe_fast_path(ctx)
        assert "docs" in text or "docstring" in text or "README" in text, name
    assert "not global" in bench.PEERS["hf-iterable-packed"].describe_shuffle(ctx)
    assert [bench.PEERS[f"grain-packing-t{t}"].variant for t in (0, 1, 16)] == [
        "num_threads=0", "num_threads=1", "num_threads=16"]


def _row(peer, workers, rate, group=None, variant=None, notes=None):
    r = {"peer": peer, "label": f"label of {peer}", "kind": "rows", "source": "table",
         "workers": workers, "tokens_per_s": rate, "padding_pct": 1.0}
    if group:
        r.update(group=group, group_label=f"{group}, the fastest", variant=variant)
    if notes:
        r["notes"] = notes
    return r


def test_a_group_of_variants_is_one_summary_line():
    """Variants of one loader (Grain's read threads): the summary gives each worker count's
    fastest, under the group's label, its setting named; the other rows as they are."""
    rows = [_row("g-t0", 0, 3e6, "g", "t=0"), _row("g-t16", 0, 2e6, "g", "t=16"),
            _row("g-t0", 2, 4e6, "g", "t=0"), _row("g-t16", 2, 5e6, "g", "t=16"),
            _row("other", 0, 1e6, notes="why it is slow"), _row("lone-t1", 0, 7e6, "lone", "t=1")]
    top = bench.headline(rows)
    assert [(r["peer"], r["workers"]) for r in top] == [("g-t0", 0), ("g-t16", 2), ("other", 0),
                                                        ("lone-t1", 0)]
    assert top[0]["label"] == top[1]["label"] == "g, the fastest"
    assert top[3]["label"] == "label of lone-t1" and "headline_variant" not in top[3]
    assert rows[0]["label"] == "label of g-t0"        # the runs themselves unchanged
    lines = bench.peers_table({"results": rows})
    [g] = [line for line in lines if line.startswith("| g, the fastest |")]
    assert "3.0 M (t=0) | 5.0 M (t=16)" in g
    assert not any(line.startswith("| label of g-t") for line in lines)
    assert bench.notes_of(rows) == [("label of other", "why it is slow")]
    # a run without groups (every published JSON before them) is its own headline
    plain = [_row("a", 0, 1e6), _row("b", 2, 2e6)]
    assert bench.headline(plain) == plain


def test_absent_peer_is_named(workdir, tmp_path, monkeypatch):
    class Absent(bench.Peer):
        name, label, requires = "absent", "a loader not installed", ("no_such_module_here",)

    monkeypatch.setitem(bench.PEERS, "absent", Absent())
    md = tmp_path / "t.md"
    bench.main(TINY + ["--workdir", str(workdir), "--peers", "absent", "--markdown", str(md)])
    text = md.read_text()
    assert "- a loader not installed: no_such_module_here: ModuleNotFoundError" in text
    assert "| a loader not installed |" not in text


def test_a_timed_out_scratch_folder_is_removed_at_the_next_run(workdir, tmp_path):
    """A from-scratch measurement killed at its timeout leaves its folder (scratch_dir): the
    next run removes it before measuring."""
    left = bench.scratch_dir(bench.Context(bench.parse(TINY + ["--workdir", str(workdir)]),
                                           json.loads((workdir / "corpus.json").read_text())),
                             "litdata-scratch-")
    (left / "chunk-0.bin").write_bytes(b"x")
    bench.main(TINY + ["--workdir", str(workdir), "--peers", "decode-parquet", "--json",
                       str(tmp_path / "t.json")])
    assert not left.exists() and (workdir / "corpus.parquet").exists()


def test_unknown_peer_is_refused(workdir):
    with pytest.raises(SystemExit, match="unknown peer 'nope'"):
        bench.main(TINY + ["--workdir", str(workdir), "--peers", "nope"])


def test_decode_floor_beside_parquet_rows(workdir, tmp_path):
    md, js = tmp_path / "t.md", tmp_path / "t.json"
    bench.main(TINY + ["--workdir", str(workdir), "--peers",
                       "decode-parquet,lodarrow-padded-parquet,lodarrow-padded-table",
                       "--markdown", str(md), "--json", str(js)])
    results = {r["peer"]: r for r in json.loads(js.read_text())["results"]}
    decode, own = results["decode-parquet"], results["lodarrow-padded-parquet"]
    # every row group decoded once an epoch, nothing padded: the corpus' tokens an epoch
    meta = json.loads((workdir / "corpus.json").read_text())
    assert decode["tokens_per_epoch"] == meta["tokens"] and decode["padding_pct"] == 0
    cells = {line.split(" | ")[1]: line.split(" | ") for line in md.read_text().splitlines()
             if line.startswith("| padded | ")}
    ratio = own["tokens_per_s"] / decode["tokens_per_s"]
    assert cells["Parquet"][-1].rstrip(" |") == f"{ratio:.2f}"
    assert cells["in-memory table"][-2:] == ["—", "— |"]   # no floor under a table


def test_pickled_workers_cross_as_the_loop_does(monkeypatch):
    """The equal-transport rows: once patched, a worker's batch leaves as lodarrow's pickled
    fallback (``_WireBatch``), not through the ring, and arrives as the same tensors."""
    import pickle

    from lodarrow._training import _torch

    monkeypatch.setattr(_torch, "_for_the_wire", _torch._for_the_wire)  # undone after
    bench._pickle_worker_batches()
    out = {"values": np.arange(6, dtype=np.int32), "cu_seqlens": np.array([0, 2, 6]),
           "epoch": 3}
    wire = _torch._for_the_wire(None, out)     # no ring touched
    assert isinstance(wire, _torch._WireBatch)
    back = pickle.loads(pickle.dumps(wire))
    assert back["values"].tolist() == list(range(6)) and back["epoch"] == 3


def test_pickled_column_and_sentence(workdir, tmp_path):
    """With the pickled rows in a run, the summary table gains their column (÷ the loop with
    the same workers) and the summary a sentence counting them; without, it is as before."""
    md, js = tmp_path / "t.md", tmp_path / "t.json"
    argv = TINY + ["--workdir", str(workdir), "--peers",
                   "loop-packed-table,lodarrow-packed-table,lodarrow-packed-table-pickled",
                   "--markdown", str(md), "--json", str(js)]
    argv[argv.index("--modes") + 1] = "0,2"
    argv.remove("--in-process")
    bench.main(argv)
    report = json.loads(js.read_text())
    by = {(r["peer"], r["workers"]): r for r in report["results"]}
    assert ("lodarrow-packed-table-pickled", 0) not in by      # workers only
    mine, loop = by[("lodarrow-packed-table-pickled", 2)], by[("loop-packed-table", 2)]
    assert "error" not in mine and mine["tokens_per_epoch"] == loop["tokens_per_epoch"]
    table = "\n".join(bench.summary_table(report))
    # lodarrow's batches crossed without their per-token arrays: the header and the
    # sentence say so (read from the run's hand-over descriptions), an older run's do not
    assert bench.slim_wire(report)
    assert ("| lodarrow, 2 workers, pickled as the loop's (its slimmer batches: per-token "
            "arrays made in the main process; the loop's carry them) |") in table
    assert any(bench.slim_wire_text(report) in line for line in bench.summary_lines(report))
    # the run's segments rows (none here) decide what the sentence says of them
    assert bench.slim_wire_text(report).endswith("(segments whole)")
    seg = json.loads(json.dumps(report))
    seg["results"].append({"peer": "lodarrow-segments-table-pickled", "workers": 2,
                           "threads": "... (the values and lengths; segment_ids and "
                                      "position_ids made there by the collation kernel)"})
    assert bench.slim_wire_text(seg).endswith("segments ones without segment_ids and "
                                              "position_ids")
    older = json.loads(json.dumps(report))
    for r in older["results"]:
        r["threads"] = r["threads"].split(" (")[0]
    assert not bench.slim_wire(older)
    assert "| lodarrow, 2 workers, pickled as the loop's |" in "\n".join(
        bench.summary_table(older))
    assert not any("lodarrow's batches cross without" in line
                   for line in bench.summary_lines(older))
    row = next(line for line in table.splitlines() if line.startswith("| packed (cu_seqlens) |"))
    assert f"| {mine['tokens_per_s'] / loop['tokens_per_s']:.2f} |" in row
    c = bench.claims(report)["pickled"]
    assert c["cells"] == 1 and c["ahead"] == int(mine["tokens_per_s"] > loop["tokens_per_s"])
    assert any("the loop's transport" in line for line in bench.summary_lines(report))
    old = dict(report, results=[r for r in report["results"]
                                if not r["peer"].endswith("-pickled")])
    assert "pickled" not in "\n".join(bench.summary_table(old))


def test_defaults_measured_and_one_thread_column(workdir, tmp_path, monkeypatch):
    """Run with ``LODARROW_NUM_THREADS`` unset, lodarrow's cells run on its defaults (load-aware
    threads) but the ``prefetch=0`` column on one thread, the loop's, and the tables say so;
    a value set for the whole run holds every cell, the ``prefetch=0`` one included."""
    peers = "loop-padded-table,lodarrow-padded-table,lodarrow-padded-table-prefetch0"

    def run(name):
        js = tmp_path / f"{name}.json"
        argv = TINY + ["--workdir", str(workdir), "--peers", peers, "--json", str(js)]
        argv.remove("--in-process")  # the cells in processes of their own, as published
        bench.main(argv)
        report = json.loads(js.read_text())
        return report, {r["peer"]: r for r in report["results"]}

    monkeypatch.delenv("LODARROW_NUM_THREADS", raising=False)
    report, by = run("defaults")
    assert "load-aware" in by["lodarrow-padded-table"]["threads"]
    assert ("kernels up to 1 thread(s) (LODARROW_NUM_THREADS)"
            in by["lodarrow-padded-table-prefetch0"]["threads"])
    assert report["settings"]["prefetch0_threads"] == 1
    table = "\n".join(bench.summary_table(report))
    assert "| lodarrow defaults (prefetch=2, load-aware threads) | ÷ loop | prefetch=0, 1 thread |" in table
    header = "\n".join(bench.header_lines(report))
    assert "not set (load-aware) (lodarrow's defaults), 1 in the `prefetch=0` column" in header
    assert any("`LODARROW_NUM_THREADS=1` (one thread, as the loop)" in line
               for line in bench.summary_lines(report))

    monkeypatch.setenv("LODARROW_NUM_THREADS", "2")
    report, by = run("set")
    assert ("kernels up to 2 thread(s) (LODARROW_NUM_THREADS)"
            in by["lodarrow-padded-table-prefetch0"]["threads"])
    assert "prefetch0_threads" not in report["settings"]
    assert "| lodarrow prefetch=2 | ÷ loop | prefetch=0 |" in "\n".join(bench.summary_table(report))


def test_cold_and_warm_starts(workdir, tmp_path):
    """From Parquet, lodarrow's cell times a start with its lengths cache empty (a fresh
    ``cache_dir``, which the timed start then reads); the in-memory table has no cache.  The
    run table gains the column and the summary the sentence."""

    js = tmp_path / "t.json"
    argv = TINY + ["--workdir", str(workdir), "--peers",
                   "loop-padded-parquet,lodarrow-padded-parquet,lodarrow-padded-table",
                   "--json", str(js)]
    bench.main(argv)
    report = json.loads(js.read_text())
    by = {r["peer"]: r for r in report["results"]}
    cold = by["lodarrow-padded-parquet"]
    assert cold["cold_start_s"] > 0 and cold["samples"][0]["cold_start_s"] > 0
    assert "cold_start_s" not in by["lodarrow-padded-table"]
    assert "cold_start_s" not in by["loop-padded-parquet"]
    text = bench.markdown(report)
    assert "| start s (warm) | cold start s |" in text
    line = next(x for x in bench.summary_lines(report)
                if x.startswith("- Cold and warm starts from Parquet ("))
    assert "lodarrow in one process " in line and " cold, " in line and "with 2" not in line
    # the warm start found the lengths the cold one stored: that loader read none
    ctx = bench.Context(bench.parse(TINY + ["--workdir", str(workdir)]),
                        json.loads((workdir / "corpus.json").read_text()))
    peer = bench.PEERS["lodarrow-padded-parquet"]
    peer.cold_start(ctx, 0)
    assert any(pathlib.Path(ctx.cache_dir).rglob("*")), "the cold start filled no cache"


def test_a_cell_against_the_loop_round_by_round():
    """Ahead (or behind) only when every round says so; rounds that disagree are noise."""
    def cell(*rates):
        return {"samples": [{"round": k, "tokens_per_s": v} for k, v in enumerate(rates)]}

    assert bench._by_round(cell(3, 4, 5), cell(2, 3, 4)) == "ahead"
    assert bench._by_round(cell(1, 2, 3), cell(2, 3, 4)) == "behind"
    assert bench._by_round(cell(3, 2, 5), cell(2, 3, 4)) == "noise"
    assert bench._by_round(cell(3), {"samples": []}) is None


def test_the_blocks_sentence_against_litdata():
    """The blocks claims from a report: each source's count against litdata's TokensLoader,
    the rows on litdata's terms (one thread; pickled from workers) and the decoded cache's
    cold start, all from the JSON; a cell's published epochs are its median run's."""
    def row(peer, workers, rate, **more):
        return {"peer": peer, "workers": workers, "tokens_per_s": rate, "kind": "blocks",
                "source": "own", "label": peer, **more}

    results = [row("litdata-tokens", 0, 100.0), row("litdata-tokens", 2, 50.0),
               row("lodarrow-blocks-table", 0, 150.0), row("lodarrow-blocks-table", 2, 60.0),
               row("lodarrow-blocks-parquet", 0, 70.0),
               row("lodarrow-blocks-parquet-decoded", 0, 140.0, cold_start_s=0.25),
               row("lodarrow-blocks-table-prefetch0", 0, 120.0),
               row("lodarrow-blocks-parquet-decoded-pickled", 2, 40.0),
               row("lodarrow-blocks-table-ids-pickled", 2, 55.0)]
    by = {(r["peer"], r["workers"]): r for r in results}
    got = {(x["source"], x["workers"]): round(x["over_litdata"], 2)
           for x in bench.claims_blocks(by, results)["blocks"]}
    assert got == {("table", 0): 1.5, ("table", 2): 1.2, ("parquet", 0): 0.7,
                   ("parquet-decoded", 0): 1.4}
    equal = {(x["source"], x["workers"], x["how"]): round(x["over_litdata"], 2)
             for x in bench.claims_blocks(by, results)["blocks_equal"]}
    assert equal == {("table", 0, "one thread"): 1.2,
                     ("parquet-decoded", 2, "pickled"): 0.8,
                     ("table", 2, bench.IDS_PICKLED): 1.1}
    assert bench.claims_blocks(by, results)["decoded_fill"] == [0.25]
    # from scratch: litdata's seconds over each lodarrow row's, paired by round
    scratch = [{"peer": "litdata-tokens", "round": k, "seconds": sec, "prepare_s": sec - 1,
                "tokens": 90} for k, sec in enumerate((8.0, 6.0, 7.0))]
    scratch += [{"peer": "lodarrow-blocks-parquet-decoded", "round": k, "seconds": sec,
                 "tokens": 100} for k, sec in enumerate((2.0, 3.0, 8.0))]
    scratch += [{"peer": "lodarrow-blocks-parquet", "round": 0, "error": "boom"}]
    sc = bench.claims_scratch(scratch)
    assert sc["litdata"] == {"seconds": 7.0, "prepare_s": 6.0, "tokens": 90, "rounds": 3}
    [row] = sc["rows"]
    assert row["peer"] == "lodarrow-blocks-parquet-decoded" and row["seconds"] == 3.0
    assert [round(x, 3) for x in row["over"]] == [4.0, 2.0, 0.875]
    text = bench.scratch_sentence(sc)
    assert "litdata 7.00 s (its `optimize`, 2 processes, 6.00 s" in text
    assert "(which that epoch fills) 3.00 s (0.0 M tokens), either way round by round " \
           "(4.00x, 2.00x, 0.88x)" in text
    scratch[5]["seconds"] = 3.5
    assert "ahead in every round" in bench.scratch_sentence(bench.claims_scratch(scratch))
    assert bench.claims_scratch(scratch[3:]) is None and bench.scratch_sentence(None) == ""
    # a cell's epochs: its median run's
    runs = [{"tokens_per_s": 3.0, "timed_epochs": 9}, {"tokens_per_s": 1.0, "timed_epochs": 2},
            {"tokens_per_s": 2.0, "timed_epochs": 5}]
    assert bench.median_run(runs)["timed_epochs"] == 5
    assert bench.aggregate([dict(r, round=k) for k, r in enumerate(runs)])["timed_epochs"] == 5


def test_the_json_and_the_blocks(workdir, tmp_path, monkeypatch):
    """Cells run round robin, every run in the JSON with its load; the blocks of the
    documents generated from the JSON, and written again from it byte for byte."""
    from lodarrow._bench import _docs

    monkeypatch.setenv("LODARROW_NUM_THREADS", "1")
    doc, readme, js = tmp_path / "training.md", tmp_path / "README.md", tmp_path / "t.json"
    doc.write_text("# Training\n\nProse kept.\n")
    readme.write_text("# Benchmarks\n")
    peers = "lodarrow-padded-table,loop-padded-table,decode-parquet"
    argv = TINY[:TINY.index("--repeat")] + ["--repeat", "2", "--in-process", "--workdir",
                                            str(workdir), "--peers", peers, "--json", str(js),
                                            "--docs", str(doc), "--readme", str(readme)]
    bench.main(argv)
    report = json.loads(js.read_text())
    for key in ("command", "revision", "machine", "settings", "corpus", "results", "started",
                "finished", "load_at_end", "wall_s"):
        assert key in report, key
    assert report["revision"]["commit"] is None or "changes" in report["revision"]
    m = report["machine"]
    assert m["cpu"] and m["cores"] >= 1 and m["versions"]["pyarrow"] and m["load_average"]
    s = report["settings"]
    assert s["LODARROW_NUM_THREADS"] == "1" and s["repeat"] == 2
    assert s["window"] == 50 * s["batch_size"] and s["max_tokens"] == 256
    assert report["command"].startswith("LODARROW_NUM_THREADS=1 python benchmarks/loaders.py")
    positions = []
    for r in report["results"]:
        assert r["runs"] == r["runs_ok"] == 2 and len(r["samples"]) == 2
        for smp in r["samples"]:
            assert smp["tokens_per_s"] > 0 and smp["load_before"] >= 0 <= smp["load_after"]
        assert r["tokens_per_s"] == statistics.median(x["tokens_per_s"] for x in r["samples"])
        positions.append([(x["round"], x["position"]) for x in r["samples"]])
    cells = len(report["results"])
    # round robin: run k of every cell before run k + 1 of any
    assert sorted(p for ps in positions for p in ps) == [
        (k // cells, k) for k in range(2 * cells)]
    text, readme_text = doc.read_text(), readme.read_text()
    assert text.startswith("# Training\n\nProse kept.\n")
    assert _docs.body_of(text, "loaders") == bench.docs_markdown(report)
    assert _docs.body_of(readme_text, "loaders-run") == bench.markdown(report)
    claims = bench.claims(report)
    assert claims["default"]["cells"] == 1
    assert (f"ahead of the NumPy/Arrow loop in {claims['default']['ahead']} of 1 cells"
            in text)
    bench.main(["--from-json", str(js), "--docs", str(doc), "--readme", str(readme)])
    assert doc.read_text() == text and readme.read_text() == readme_text


def test_the_sentences_with_litdata_failed():
    """The published JSON written again with litdata's one-process row failed: the blocks
    sentence leaves out what needs it (the decode floor beside litdata's rate), nothing
    raises."""
    report = json.loads((ROOT / "benchmarks" / "results" / "loaders.json").read_text())
    for r in report["results"]:
        if r["peer"] == "litdata-tokens" and r["workers"] == 0:
            for key in ("tokens_per_s", "samples"):
                r.pop(key, None)
            r["error"] = "RuntimeError: boom"
    text = "\n".join(bench.summary_lines(report))
    assert "Parquet's decode of the column alone" not in text
    assert "From the corpus's Parquet file with nothing made before" in text
