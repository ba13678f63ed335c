"""Training-batch benchmarks (docs/training.md#measured): lodarrow against what users write
today, side by side in one run.

Run ``python -m lodarrow._bench._training [--n 1000000] [--baseline-n 200000]
[--plan-n 10000000]``: the data rows use ``n`` sequences, the plan rows ``plan-n`` lengths.  Every
Python baseline that is too slow to run on all ``n`` sequences is timed on ``baseline-n`` of
them and scaled linearly to ``n`` (the table says so); lodarrow always runs on all ``n``.
Optional peers (torch, Hugging Face ``datasets`` and ``transformers``) are skipped when not
installed.

``--json PATH`` keeps every row with the commit, versions, CPU, load and command
(benchmarks/results/training.json); ``--docs FILE.md`` writes the block between ``<!--
generated: training, ... -->`` and ``<!-- end generated: training -->`` of that file from the
JSON (the rest is kept); ``--from-json PATH`` writes that block from an earlier run's JSON
without running anything:

    python -m lodarrow._bench._training --n 1000000 --baseline-n 200000 --steps 300 \
        --plan-n 10000000 --json benchmarks/results/training.json --docs docs/training.md
    python -m lodarrow._bench._training --from-json benchmarks/results/training.json \
        --docs docs/training.md
"""

import argparse
import os
import shutil
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import lodarrow as la

BATCH = 32
MAX_TOKENS = 8192
WINDOW = 100 * BATCH
#: The speed-up each row aims at; the document explains the rows below it.
GOAL = 10
REPEAT = 3
KEY = "training"
REGENERATE = ("python -m lodarrow._bench._training --from-json benchmarks/results/training.json "
              "--docs docs/training.md")


def _time(fn, repeat=REPEAT):
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _lengths(n, seed=0):
    """Lengths 1..512 with a long tail (geometric, mean ~96), as real corpora."""
    rng = np.random.default_rng(seed)
    return np.minimum(rng.geometric(1 / 96, n), 512).astype(np.int64)


def make_data(n, seed=0):
    """``n`` token sequences (lengths from :func:`_lengths`), token ids < 256."""
    lengths = _lengths(n, seed)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    values = (np.arange(offsets[-1]) % 251).astype(np.int32)
    ids = pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(values))
    return pa.table({"ids": ids, "label": (np.arange(n) % 2).astype(np.int64)}), lengths


# --- Python baselines (what training code does today) -----------------------------------

def py_lengths(col):
    """group_by_length-style: iterate the rows, take len() of each."""
    return [len(x) for x in col.to_pylist()]


def hf_lengths(ds):
    """transformers' LengthGroupedSampler without precomputed lengths: one pass over the
    dataset's rows."""
    return [len(x) for x in ds["ids"]]


def py_bucket_sampler(lengths, batch, window, seed):
    """A bucketing sampler in Python: shuffle, sort each window by length, chunk, shuffle."""
    rng = np.random.default_rng(seed)
    idx = rng.permutation(len(lengths)).tolist()
    batches = []
    for w in range(0, len(idx), window):
        chunk = sorted(idx[w:w + window], key=lambda i: lengths[i])
        batches.extend(chunk[k:k + batch] for k in range(0, len(chunk), batch))
    order = rng.permutation(len(batches))
    return [batches[i] for i in order]


def py_token_sampler(lengths, max_tokens, window, seed):
    """fairseq-style max-tokens batching in Python: sort per window, cut at the budget."""
    rng = np.random.default_rng(seed)
    idx = rng.permutation(len(lengths)).tolist()
    batches = []
    for w in range(0, len(idx), window):
        cur, longest = [], 0
        for i in sorted(idx[w:w + window], key=lambda i: lengths[i]):
            m = max(longest, lengths[i])
            if cur and (len(cur) + 1) * m > max_tokens:
                batches.append(cur)
                cur, m = [], lengths[i]
            cur.append(i)
            longest = m
        if cur:
            batches.append(cur)
    return batches


# --- the run --------------------------------------------------------------------------------

def run(n, baseline_n, steps, plan_n, plan_baseline_n):
    """Every row: ``(rows, wastes, loader, data)``, what :func:`measure` keeps as JSON."""
    rows = []

    def add(key, what, peer, t_peer, t_la, note=""):
        rows.append({"key": key, "step": what, "baseline": peer,
                     "baseline_s": None if np.isnan(t_peer) else t_peer, "lodarrow_s": t_la,
                     "note": note})

    table, lengths = make_data(n)
    data = {"tokens": int(lengths.sum()), "min_length": int(lengths.min()),
            "max_length": int(lengths.max()), "mean_length": float(lengths.mean())}
    scale = n / baseline_n
    sub_table = table.slice(0, baseline_n)
    sub_lengths = lengths[:baseline_n]
    tmp = tempfile.mkdtemp()
    path = os.path.join(tmp, "train.parquet")
    pq.write_table(table, path, row_group_size=65536)
    scaled = f"timed on {baseline_n:,}, x{scale:g}" if scale != 1 else ""

    # lengths
    # the read itself: the lengths cache (docs/training.md#lengths-cache) would make every
    # call after the first a read of its entry, which lengths_cache.py times
    t_la = _time(lambda: la.sequence_lengths(path, "ids", cache_dir=False))
    t_mem = _time(lambda: la.sequence_lengths(table, "ids"))
    sub_path = os.path.join(tmp, "sub.parquet")
    pq.write_table(sub_table, sub_path, row_group_size=65536)
    t_pq = _time(lambda: py_lengths(pq.read_table(sub_path, columns=["ids"]).column("ids")),
                 1) * scale
    t_py = _time(lambda: py_lengths(sub_table.column("ids")), 1) * scale
    add("lengths-parquet",
        "lengths (Parquet file, no cache)", "read_table + [len(x) for x in col.to_pylist()]", t_pq, t_la,
        scaled)
    add("lengths-memory",
        "lengths (in-memory table)", "[len(x) for x in col.to_pylist()]", t_py, t_mem, scaled)
    try:
        import datasets

        ds = datasets.Dataset(pa.Table.from_batches(sub_table.to_batches()))
        t_hf = _time(lambda: hf_lengths(ds), 1) * scale
        add("lengths-hf",
            "lengths (HF dataset)", "group_by_length: len(row) over ds", t_hf, t_mem, scaled)
    except ImportError:
        pass

    # plans: on plan_n sequences (lengths only)
    plan_lengths = _lengths(plan_n)
    plan_base = plan_lengths[:plan_baseline_n].tolist()  # Python samplers hold a list
    pscale = plan_n / plan_baseline_n
    pscaled = (f"{plan_n:,} seqs; timed on {plan_baseline_n:,}, x{pscale:g}" if pscale != 1
               else f"{plan_n:,} seqs")
    t_la = _time(lambda: la.batch_plan(plan_lengths, batch_size=BATCH, window=WINDOW, seed=0))
    t_py = _time(lambda: py_bucket_sampler(plan_base, BATCH, WINDOW, 0), 1) * pscale
    add("plan-bucketing",
        f"bucketing plan (batch {BATCH}, window {WINDOW})", "Python bucketing sampler",
        t_py, t_la, pscaled)
    t_la = _time(lambda: la.batch_plan(plan_lengths, max_tokens=MAX_TOKENS, window=WINDOW,
                                       seed=0))
    t_py = _time(lambda: py_token_sampler(plan_base, MAX_TOKENS, WINDOW, 0), 1) * pscale
    add("plan-tokens",
        f"token-budget plan ({MAX_TOKENS} padded)", "Python max-tokens sampler", t_py, t_la,
        pscaled)
    t_la = _time(lambda: la.batch_plan(plan_lengths, max_tokens=MAX_TOKENS, window=WINDOW,
                                       seed=0, num_replicas=8, rank=3, balance="tokens"))
    add("plan-ranks",
        "token-budget plan, 8 ranks, token balance", "(no Python peer)", float("nan"), t_la,
        f"{plan_n:,} seqs")
    try:
        import torch

        sampler = torch.utils.data.BatchSampler(
            torch.utils.data.RandomSampler(range(plan_n)), BATCH, False)
        t_py = _time(lambda: list(sampler), 1)
        t_la = _time(lambda: la.batch_plan(plan_lengths, batch_size=BATCH, seed=0))
        add("plan-random",
            f"random plan (batch {BATCH})", "torch BatchSampler(RandomSampler)", t_py, t_la,
            f"{plan_n:,} seqs")
    except ImportError:
        torch = None

    # collation: the same batches, one call each
    plan = la.batch_plan(sub_lengths, batch_size=BATCH, window=WINDOW, seed=0)
    batches = [plan[b] for b in range(min(steps, len(plan)))]
    data["collated_batches"] = len(batches)
    seqs = la._training._collate.as_sequences(sub_table, "ids", 0)
    pad = np.zeros((), dtype=np.int32)
    from lodarrow._training._collate import collate_rows

    t_la = _time(lambda: [collate_rows(seqs, b, "padded", pad) for b in batches])
    t_lap = _time(lambda: [collate_rows(seqs, b, "packed", pad) for b in batches])
    col = sub_table.column("ids").combine_chunks()
    vals = col.values.to_numpy()
    offs = col.offsets.to_numpy()
    if torch is not None:
        tensors = [[torch.from_numpy(vals[offs[i]:offs[i + 1]].copy()) for i in b]
                   for b in batches]

        def pad_seq():
            for ts in tensors:
                torch.nn.utils.rnn.pad_sequence(ts, batch_first=True)
                (torch.arange(max(len(t) for t in ts))[None, :]
                 < torch.tensor([len(t) for t in ts])[:, None])
        add("pad-tensors",
            f"pad {len(batches)} batches of {BATCH}", "torch pad_sequence + mask (tensors made)",
            _time(pad_seq), t_la)
    lists = [[vals[offs[i]:offs[i + 1]].tolist() for i in b] for b in batches]
    if torch is not None:
        def row_tensors():  # a map-style Dataset's rows (lists) -> tensors -> pad_sequence
            for b in lists:
                ts = [torch.tensor(x) for x in b]
                torch.nn.utils.rnn.pad_sequence(ts, batch_first=True)
                (torch.arange(max(len(t) for t in ts))[None, :]
                 < torch.tensor([len(t) for t in ts])[:, None])
        add("pad-rows",
            f"pad {len(batches)} batches of {BATCH}", "torch.tensor(row) + pad_sequence + mask",
            _time(row_tensors), t_la)
    try:
        from transformers import DataCollatorWithFlattening, DataCollatorWithPadding

        flat = DataCollatorWithFlattening(return_tensors="np", return_flash_attn_kwargs=True)
        features = [[{"input_ids": x} for x in b] for b in lists]
        add("pack-hf", f"pack {len(batches)} batches (cu_seqlens)", "HF DataCollatorWithFlattening",
            _time(lambda: [flat(f) for f in features]), t_lap)
        tok = _tokenizer()
        if tok is not None:
            padc = DataCollatorWithPadding(tok, return_tensors="np")
            add("pad-hf", f"pad {len(batches)} batches of {BATCH}", "HF DataCollatorWithPadding",
                _time(lambda: [padc(f) for f in features]), t_la)
    except ImportError:
        pass

    # padding waste
    wastes = [{"plan": name, "padding_waste": float(plan.padding_waste), "batches": len(plan)}
              for name, plan in (
                  ("random batches", la.batch_plan(plan_lengths, batch_size=BATCH, seed=0)),
                  (f"bucketed (window {WINDOW})", la.batch_plan(
                      plan_lengths, batch_size=BATCH, window=WINDOW, seed=0)),
                  (f"token budget {MAX_TOKENS} + window", la.batch_plan(
                      plan_lengths, max_tokens=MAX_TOKENS, window=WINDOW, seed=0)))]

    # the loader against a tiny model's step
    loader_stats = None
    if torch is not None:
        loader = la.batch_loader(path, "ids", max_tokens=MAX_TOKENS, extra_columns=["label"],
                                 window=WINDOW, to="torch", seed=0, cache_dir=False)
        got = []
        t0 = time.perf_counter()
        for k, b in enumerate(loader):  # a whole epoch: block reads included
            if k < steps:
                got.append(b)
        t_load = (time.perf_counter() - t0) / len(loader)
        model = torch.nn.Sequential(torch.nn.Embedding(256, 64), torch.nn.Linear(64, 2))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)

        def step(b):
            logits = (model(b["values"].long()) * b["attention_mask"][..., None]).sum(1)
            loss = torch.nn.functional.cross_entropy(logits, b["label"])
            opt.zero_grad()
            loss.backward()
            opt.step()
        t0 = time.perf_counter()
        for b in got:
            step(b)
        t_step = (time.perf_counter() - t0) / len(got)
        loader_stats = {"batches_per_s": 1 / t_load, "steps_per_s": 1 / t_step,
                        "steps": len(got), "batches": len(loader)}
    shutil.rmtree(tmp, ignore_errors=True)
    return rows, wastes, loader_stats, data


def _tokenizer():
    try:
        from tokenizers import Tokenizer
        from tokenizers.models import WordLevel
        from transformers import PreTrainedTokenizerFast

        vocab = {str(i): i for i in range(256)}
        vocab["[PAD]"] = 256
        return PreTrainedTokenizerFast(tokenizer_object=Tokenizer(WordLevel(vocab, "[PAD]")),
                                       pad_token="[PAD]")
    except Exception:  # noqa: BLE001  (any tokenizers / transformers version trouble)
        return None


def measure(args):
    """Run every row; the report --json keeps (command, commit, machine, rows)."""
    from lodarrow._bench import _docs

    baseline_n = min(args.baseline_n, args.n)
    plan_baseline_n = min(args.plan_baseline_n or args.plan_n, args.plan_n)
    report = {"command": "python -m lodarrow._bench._training " + " ".join(args.argv),
              "revision": _docs.revision(),
              "machine": _docs.machine(("numpy", "pyarrow", "torch", "datasets",
                                        "transformers", "lodarrow")),
              "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
              "args": {"n": args.n, "baseline_n": baseline_n, "steps": args.steps,
                       "plan_n": args.plan_n, "plan_baseline_n": plan_baseline_n,
                       "repeat": REPEAT, "batch": BATCH, "max_tokens": MAX_TOKENS,
                       "window": WINDOW}}
    rows, wastes, loader_stats, data = run(args.n, baseline_n, args.steps, args.plan_n,
                                           plan_baseline_n)
    report.update(data=data, rows=rows, wastes=wastes, loader=loader_stats,
                  load_average_end=list(os.getloadavg()))
    return report


def speedup(row):
    """The row's speed-up (baseline over lodarrow), None where it has no peer."""
    if row["baseline_s"] is None:
        return None
    return row["baseline_s"] / row["lodarrow_s"]


def _x(ratio):
    return f"{ratio:,.0f}x" if ratio >= 1.5 else f"{ratio:.2f}x"


def _below_goal(report):
    """Bullets explaining each row below the goal, every figure from ``report``."""
    rows = {r["key"]: r for r in report["rows"]}
    below = {key for key, r in rows.items()  # as the table rounds them
             if speedup(r) is not None and round(speedup(r)) < GOAL}
    out = []
    if "lengths-parquet" in below:
        fast = [speedup(rows[k]) for k in ("lengths-memory", "lengths-hf") if k in rows]
        text = (f"- **Lengths from Parquet ({_x(speedup(rows['lengths-parquet']))})**: pyarrow "
                "decodes a page's values together with its repetition levels (see [What is "
                "read](#what-is-read)), so the floor is decoding one leaf column, and the "
                "baseline does the same read.")
        if fast:
            span = (_x(min(fast)) if len(fast) == 1
                    else f"{min(fast):,.0f}-{_x(max(fast))}")
            text += (f"  Once the table is in memory (or for a Hugging Face dataset, which is "
                     f"Arrow already) the lengths are {span} faster.")
        out.append(text)
    plans = [(k, name) for k, name in (("plan-bucketing", "bucketing {}"),
                                       ("plan-tokens", "token budget {}"),
                                       ("plan-random", ("random batches {} against "
                                                        "`BatchSampler(RandomSampler)`")))
             if k in below]
    if plans:
        words = "; ".join(name.format(_x(speedup(rows[k]))) for k, name in plans)
        text = (f"- **Plans of {report['args']['plan_n']:,} sequences ({words})**: a plan "
                "shuffles the rows (a compiled Fisher-Yates, random memory accesses), and a "
                "bucketing or token-budget plan then sorts each window by counting")
        if "plan-random" in rows and "plan-bucketing" in rows:
            text += (f"; the random plan (the shuffle and the cuts, no sort) took "
                     f"{rows['plan-random']['lodarrow_s']:.3f} s of the bucketing plan's "
                     f"{rows['plan-bucketing']['lodarrow_s']:.3f} s")
        text += "."
        if "plan-random" in below:
            text += "  `RandomSampler` is a compiled `torch.randperm` too."
        if below & {"plan-bucketing", "plan-tokens"}:
            text += "  Python's `sorted` on small windows is fast per element."
        out.append(text)
    if "pad-tensors" in below:
        r = rows["pad-tensors"]
        text = (f"- **Padding pre-made tensors with `pad_sequence` ({_x(speedup(r))})**: "
                f"`pad_sequence` is C++ too; lodarrow's time is "
                f"{r['lodarrow_s'] / report['data']['collated_batches'] * 1e6:,.0f} us a batch of "
                f"{report['args']['batch']} rows.")
        if "pad-rows" in rows:
            text += (f"  Against what a map-style dataset really does (a tensor per row, then "
                     f"`pad_sequence`), collation is {_x(speedup(rows['pad-rows']))} faster.")
        out.append(text)
    explained = {"lengths-parquet", "plan-bucketing", "plan-tokens", "plan-random",
                 "pad-tensors"}
    for key in sorted(below - explained):
        out.append(f"- **{rows[key]['step']} ({_x(speedup(rows[key]))})**: not explained yet.")
    if not out:
        return [f"Every row with a Python peer reaches the goal of {GOAL}x in this run."]
    return [f"Where the goal of {GOAL}x is not reached, and why:", ""] + out


def markdown(report):
    """The block of docs/training.md ("Measured"), from the JSON alone."""
    from lodarrow._bench import _docs

    a, d = report["args"], report["data"]
    if a["plan_baseline_n"] == a["plan_n"]:
        samplers = "every sampler (Python too) on all of them"
    else:
        samplers = (f"the Python samplers timed on {a['plan_baseline_n']:,} and scaled "
                    f"linearly")
    run_line = (f"Measured by `{report['command']}`, started {report['started']}.  "
                f"{_docs.revision_line(report['revision'])}.  Machine: "
                f"{_docs.machine_line(report['machine'], report.get('load_average_end'))}.")
    data_line = (f"Data rows: {a['n']:,} sequences (lengths {d['min_length']}-"
                 f"{d['max_length']}, geometric, mean {d['mean_length']:.1f}; {d['tokens']:,} "
                 f"int32 tokens); plan rows: {a['plan_n']:,} lengths, {samplers}.  Seconds, "
                 f"best of {a['repeat']} (Python baselines once):")
    out = [run_line, "", data_line, "",
           "| step | baseline | baseline s | lodarrow s | speed-up | note |",
           "| --- | --- | ---: | ---: | ---: | --- |"]
    for r in report["rows"]:
        if r["baseline_s"] is None:
            out.append(f"| {r['step']} | {r['baseline']} | | {r['lodarrow_s']:.4f} | | "
                       f"{r['note']} |")
            continue
        out.append(f"| {r['step']} | {r['baseline']} | {r['baseline_s']:.3f} | "
                   f"{r['lodarrow_s']:.4f} | {speedup(r):,.0f}x | {r['note']} |")
    out += ["", f"Padding waste of each plan ({a['plan_n']:,} sequences):", "",
            "| plan | padding waste | batches |", "| --- | ---: | ---: |"]
    for w in report["wastes"]:
        out.append(f"| {w['plan']} | {w['padding_waste']:.1%} | {w['batches']:,} |")
    loader = report.get("loader")
    if loader:
        pace = loader["batches_per_s"] / loader["steps_per_s"]
        verdict = (", so it is not the bottleneck (and `DataLoader` workers add to it)"
                   if pace > 1 else ": here the loader is the bottleneck")
        out += ["", (f"The loader (Parquet, token budget {a['max_tokens']}, padded, torch "
                     f"tensors, one process, a whole epoch of the {a['n']:,} sequences, block "
                     f"reads included) gave {loader['batches_per_s']:,.0f} batches/s; a tiny "
                     f"model's training step (embedding 64 + linear, SGD) on "
                     f"{loader['steps']} of the same batches ran at "
                     f"{loader['steps_per_s']:,.0f} steps/s: the loader is {_x(pace)} the "
                     f"model's pace{verdict}.")]
    out += [""] + _below_goal(report)
    return "\n".join(out) + "\n"


def main(argv=None):
    from lodarrow._bench import _docs

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--baseline-n", type=int, default=200_000)
    ap.add_argument("--plan-n", type=int, default=10_000_000,
                    help="sequences of the plan rows (lengths only)")
    ap.add_argument("--plan-baseline-n", type=int, default=None,
                    help="sequences the Python samplers run on (default: all of plan-n)")
    ap.add_argument("--steps", type=int, default=300, help="batches collated / loaded")
    ap.add_argument("--json", metavar="PATH", help="write every row as JSON")
    ap.add_argument("--docs", metavar="FILE.md",
                    help="write this benchmark's block of that Markdown file")
    ap.add_argument("--from-json", metavar="PATH",
                    help="run nothing: --docs (or the printed table) from an earlier JSON")
    args = ap.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    report = _docs.report_of(args, measure)
    text = markdown(report)
    if args.docs:
        _docs.write_block(args.docs, KEY, REGENERATE, text)
    else:
        print(text)


if __name__ == "__main__":
    main()
