"""Training-batch benchmarks (docs/training.md#measured): lodarrow against what users write
today, side by side in one run.

Run ``python -m lodarrow._bench._training [--n 1000000] [--baseline-n 200000]
[--plan-n 10000000]``: the data rows use ``n`` sequences, the plan rows ``plan-n`` lengths.  Every
Python baseline that is too slow to run on all ``n`` sequences is timed on ``baseline-n`` of
them and scaled linearly to ``n`` (the table says so); lodarrow always runs on all ``n``.
Optional peers (torch, Hugging Face ``datasets`` and ``transformers``) are skipped when not
installed.
"""

import argparse
import os
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import lodarrow as la

BATCH = 32
MAX_TOKENS = 8192
WINDOW = 100 * BATCH


def _time(fn, repeat=3):
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
    rows = []

    def add(what, peer, t_peer, t_la, note=""):
        rows.append((what, peer, t_peer, t_la, note))

    table, lengths = make_data(n)
    scale = n / baseline_n
    sub_table = table.slice(0, baseline_n)
    sub_lengths = lengths[:baseline_n]
    tmp = tempfile.mkdtemp()
    path = os.path.join(tmp, "train.parquet")
    pq.write_table(table, path, row_group_size=65536)
    scaled = f"timed on {baseline_n:,}, x{scale:g}" if scale != 1 else ""

    # lengths
    t_la = _time(lambda: la.sequence_lengths(path, "ids"))
    t_mem = _time(lambda: la.sequence_lengths(table, "ids"))
    sub_path = os.path.join(tmp, "sub.parquet")
    pq.write_table(sub_table, sub_path, row_group_size=65536)
    t_pq = _time(lambda: py_lengths(pq.read_table(sub_path, columns=["ids"]).column("ids")),
                 1) * scale
    t_py = _time(lambda: py_lengths(sub_table.column("ids")), 1) * scale
    add("lengths (Parquet file)", "read_table + [len(x) for x in col.to_pylist()]", t_pq, t_la,
        scaled)
    add("lengths (in-memory table)", "[len(x) for x in col.to_pylist()]", t_py, t_mem, scaled)
    try:
        import datasets

        ds = datasets.Dataset(pa.Table.from_batches(sub_table.to_batches()))
        t_hf = _time(lambda: hf_lengths(ds), 1) * scale
        add("lengths (HF dataset)", "group_by_length: len(row) over ds", t_hf, t_mem, scaled)
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
    add(f"bucketing plan (batch {BATCH}, window {WINDOW})", "Python bucketing sampler",
        t_py, t_la, pscaled)
    t_la = _time(lambda: la.batch_plan(plan_lengths, max_tokens=MAX_TOKENS, window=WINDOW,
                                       seed=0))
    t_py = _time(lambda: py_token_sampler(plan_base, MAX_TOKENS, WINDOW, 0), 1) * pscale
    add(f"token-budget plan ({MAX_TOKENS} padded)", "Python max-tokens sampler", t_py, t_la,
        pscaled)
    t_la = _time(lambda: la.batch_plan(plan_lengths, max_tokens=MAX_TOKENS, window=WINDOW,
                                       seed=0, num_replicas=8, rank=3, balance="tokens"))
    add("token-budget plan, 8 ranks, token balance", "(no Python peer)", float("nan"), t_la,
        f"{plan_n:,} seqs")
    try:
        import torch

        sampler = torch.utils.data.BatchSampler(
            torch.utils.data.RandomSampler(range(plan_n)), BATCH, False)
        t_py = _time(lambda: list(sampler), 1)
        t_la = _time(lambda: la.batch_plan(plan_lengths, batch_size=BATCH, seed=0))
        add(f"random plan (batch {BATCH})", "torch BatchSampler(RandomSampler)", t_py, t_la,
            f"{plan_n:,} seqs")
    except ImportError:
        torch = None

    # collation: the same batches, one call each
    plan = la.batch_plan(sub_lengths, batch_size=BATCH, window=WINDOW, seed=0)
    batches = [plan[b] for b in range(min(steps, len(plan)))]
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
        add(f"pad {len(batches)} batches of {BATCH}", "torch pad_sequence + mask (tensors made)",
            _time(pad_seq), t_la)
    lists = [[vals[offs[i]:offs[i + 1]].tolist() for i in b] for b in batches]
    if torch is not None:
        def row_tensors():  # a map-style Dataset's rows (lists) -> tensors -> pad_sequence
            for b in lists:
                ts = [torch.tensor(x) for x in b]
                torch.nn.utils.rnn.pad_sequence(ts, batch_first=True)
                (torch.arange(max(len(t) for t in ts))[None, :]
                 < torch.tensor([len(t) for t in ts])[:, None])
        add(f"pad {len(batches)} batches of {BATCH}", "torch.tensor(row) + pad_sequence + mask",
            _time(row_tensors), t_la)
    try:
        from transformers import DataCollatorWithFlattening, DataCollatorWithPadding

        flat = DataCollatorWithFlattening(return_tensors="np", return_flash_attn_kwargs=True)
        features = [[{"input_ids": x} for x in b] for b in lists]
        add(f"pack {len(batches)} batches (cu_seqlens)", "HF DataCollatorWithFlattening",
            _time(lambda: [flat(f) for f in features]), t_lap)
        tok = _tokenizer()
        if tok is not None:
            padc = DataCollatorWithPadding(tok, return_tensors="np")
            add(f"pad {len(batches)} batches of {BATCH}", "HF DataCollatorWithPadding",
                _time(lambda: [padc(f) for f in features]), t_la)
    except ImportError:
        pass

    # padding waste
    wastes = [("random batches", la.batch_plan(plan_lengths, batch_size=BATCH, seed=0)),
              (f"bucketed (window {WINDOW})", la.batch_plan(plan_lengths, batch_size=BATCH,
                                                              window=WINDOW, seed=0)),
              (f"token budget {MAX_TOKENS} + window", la.batch_plan(
                  plan_lengths, max_tokens=MAX_TOKENS, window=WINDOW, seed=0))]

    # the loader against a tiny model's step
    loader_stats = None
    if torch is not None:
        loader = la.batch_loader(path, "ids", max_tokens=MAX_TOKENS, extra_columns=["label"],
                                 window=WINDOW, to="torch", seed=0)
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
        loader_stats = (1 / t_load, 1 / t_step, len(got))
    return rows, wastes, loader_stats


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


def report(n, rows, wastes, loader_stats, plan_n):
    out = [f"Training batches, {n:,} sequences (lengths 1-512, mean ~96), best of 3",
           "", "| step | baseline | baseline s | lodarrow s | speed-up | note |",
           "| --- | --- | ---: | ---: | ---: | --- |"]
    for what, peer, t_peer, t_la, note in rows:
        if t_peer != t_peer:  # no peer
            out.append(f"| {what} | {peer} | | {t_la:.4f} | | {note} |")
            continue
        out.append(f"| {what} | {peer} | {t_peer:.3f} | {t_la:.4f} | "
                   f"{t_peer / t_la:,.0f}x | {note} |")
    out += ["", f"padding waste of each plan ({plan_n:,} sequences)", "",
            "| plan | padding waste | batches |", "| --- | ---: | ---: |"]
    for name, plan in wastes:
        out.append(f"| {name} | {plan.padding_waste:.1%} | {len(plan):,} |")
    if loader_stats:
        load, step, k = loader_stats
        out += ["", f"loader (Parquet, token budget {MAX_TOKENS}, padded, torch, one process, a "
                f"whole epoch): {load:,.0f} batches/s; a tiny model's step (embedding 64 + "
                f"linear, SGD; {k} of those batches): {step:,.0f} steps/s: the loader is "
                f"{load / step:.1f}x the model's pace"]
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--baseline-n", type=int, default=200_000)
    ap.add_argument("--plan-n", type=int, default=10_000_000,
                    help="sequences of the plan rows (lengths only)")
    ap.add_argument("--plan-baseline-n", type=int, default=None,
                    help="sequences the Python samplers run on (default: all of plan-n)")
    ap.add_argument("--steps", type=int, default=300, help="batches collated / loaded")
    args = ap.parse_args(argv)
    baseline_n = min(args.baseline_n, args.n)
    plan_baseline_n = min(args.plan_baseline_n or args.plan_n, args.plan_n)
    rows, wastes, loader_stats = run(args.n, baseline_n, args.steps, args.plan_n,
                                     plan_baseline_n)
    print(report(args.n, rows, wastes, loader_stats, args.plan_n))


if __name__ == "__main__":
    main()
