"""Mixing corpora by weight: lodarrow's ``la.mix`` against the peers that mix, in one
invocation (issue 45 item 4; docs/training.md#mixing-corpora).

Three corpora of lognormal lengths (``web``, ``code``, ``books``: 80,000, 20,000 and 4,000
sequences by default) mixed 50 / 30 / 20 by sequences into epochs of 60,000: ``web`` and
``code`` down-sampled, ``books`` upsampled three times.  Each loader makes packed batches of 32
sequences (torch tensors: the tokens flattened, ``cu_seqlens``) for ``--epochs`` epochs in one
process; every sequence carries its source and row, so the batches delivered say:

- **tokens/s** over the epochs after the first (the first is the warm-up);
- **exact**: the largest gap between a source's sequences in an epoch and its weight's share of
  the epoch (0: the mixture is exact every epoch);
- **repeats**: sequences of a down-sampled source delivered twice in one epoch (without
  replacement: 0), and the upsampled source's sequences beyond its copies;
- **coverage**: the share of ``web``'s sequences delivered in the fewest epochs that can
  deliver them all (80,000 at 30,000 an epoch: the first 3);
- **per step**: the largest gap between a source's share of 10 consecutive batches and its
  weight (how well the mixture holds at the step scale).

The loaders: lodarrow on its defaults (``lodarrow``: ``prefetch=2``, its kernels' threads by
the machine's load, ``LODARROW_NUM_THREADS`` as the run has it: unset by
benchmarks/loader_figures.sh), the same loader on one thread beside it (``lodarrow-1thread``:
``prefetch=0`` and ``LODARROW_NUM_THREADS=1`` in its process only), and the peers, each on its
documented way to mix: Hugging Face ``interleave_datasets`` (the sources shuffled with the
epoch's seed, ``probabilities``, ``stopping_strategy="all_exhausted"``, the first
``epoch_size`` samples an epoch, Arrow format, one ``ds[indices]`` a batch) and MosaicML
``StreamingDataset(streams=[Stream(local, proportion=w)], epoch_size=...)`` with
``StreamingDataLoader(num_workers=0)``.  Each runs in its own interpreter (``--peer-python
hf=... streaming=...``), every process with ``torch.set_num_threads(1)`` and no DataLoader
worker; what each process's threads did is measured, not assumed: its CPU time over the wall
time of the timed epochs (1.0: one thread busy), and its threads (the OS's and Python's) at the
middle batch of each epoch.

``--repeat R`` (default 3) runs R rounds: in each, every loader's process once (its epochs),
the loaders' order rotated from round to round (A B C, B C A, C A B).  Tokens/s is the median
of the rounds, each round's figure kept in the JSON (the slowest and fastest in the README's
table), and the sentences compare lodarrow's two rows with each peer by the medians and round
by round.  The measures of what was delivered (exact, repeats, coverage, per step) are the
first round's: they are a function of the seed, and each later round's are checked against
them (and a digest of each epoch's batches, their sources and rows in order; the JSON says
whether every round agreed).  The resume is measured once a loader, in the first round.

Usage::

    python benchmarks/mixing.py --workdir /tmp/bench-mix --repeat 3 \\
        --peers lodarrow,lodarrow-1thread,lodarrow-arrow,hf,streaming \\
        --json benchmarks/results/mixing.json \\
        --docs docs/training.md --readme benchmarks/README.md \\
        --peer-python hf=/path/venv/bin/python --peer-python streaming=/path/venv2/bin/python
    python benchmarks/mixing.py --from-json benchmarks/results/mixing.json \\
        --docs docs/training.md --readme benchmarks/README.md

A small check (writes nothing under benchmarks/ or docs/)::

    python benchmarks/mixing.py --workdir /tmp/bench-mix-small --sizes 8000,2000,400 \\
        --epoch-size 6000 --epochs 3 --repeat 2 --json /tmp/mix.json --markdown /tmp/mix.md

The JSON holds the commit measured, the machine (CPU model, cores, load), the versions, every
setting, the rounds' orders and each loader's first-round epochs and every round; ``--docs``
rewrites the ``mixing`` block of docs/training.md ("Mixing corpora": the table and the
sentences computed from the JSON) and ``--readme`` the ``mixing-run`` block of
benchmarks/README.md (the whole table), each between its markers (lodarrow/_bench/_docs.py);
``--from-json`` writes them again without measuring.  A JSON written before the rounds (one
run a loader, no ``rounds``) is rendered as it was then.
"""

import argparse
import hashlib
import json
import math
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

NAMES = ("web", "code", "books")
PEERS = ("lodarrow", "lodarrow-1thread", "lodarrow-arrow", "hf", "streaming")
#: A loader's row in the tables and sentences.
LABELS = {"lodarrow-1thread": "lodarrow, 1 thread",
          "lodarrow-arrow": "lodarrow, 1 thread, HF's Arrow files"}
#: Each loader's environment beside the run's (the 1-thread row's, for its process only).
ENV = {"lodarrow-1thread": {"LODARROW_NUM_THREADS": "1"},
       "lodarrow-arrow": {"LODARROW_NUM_THREADS": "1"}}
#: What the batches say, computed by :func:`measures`: the first round's, each later
#: round's checked against them.
MEASURES = ("max_gap", "epoch_sequences", "repeats", "beyond_copies", "coverage",
            "coverage_epochs", "window_gap")


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workdir", default="/tmp/bench-mix")
    p.add_argument("--sizes", default="80000,20000,4000", help="sequences of each corpus")
    p.add_argument("--weights", default="0.5,0.3,0.2")
    p.add_argument("--epoch-size", type=int, default=60000)
    p.add_argument("--epochs", type=int, default=4, help="the first is the warm-up")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--peers", default=",".join(PEERS),
                   help="the loaders, in the first round's order (of: %(default)s)")
    p.add_argument("--repeat", type=int, default=3,
                   help="rounds: every loader's process once a round, the order rotated "
                        "each round; tokens/s the median")
    p.add_argument("--peer-python", action="append", default=[], metavar="NAME=PYTHON")
    p.add_argument("--markdown", help="write the whole table here")
    p.add_argument("--json", help="write everything measured here")
    p.add_argument("--docs", help="rewrite the mixing block of this Markdown file "
                                  "(docs/training.md)")
    p.add_argument("--readme", help="rewrite the mixing-run block of this Markdown file "
                                    "(benchmarks/README.md)")
    p.add_argument("--from-json", help="measure nothing: the Markdown from this JSON")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--resume-save", help=argparse.SUPPRESS)
    p.add_argument("--resume-load", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    unknown = [x for x in args.peers.split(",") if x not in PEERS]
    if unknown:
        p.error(f"--peers: unknown {', '.join(unknown)} (of {', '.join(PEERS)})")
    if args.repeat < 1:
        p.error("--repeat: at least 1")
    if args.epochs < 2 and not args.from_json:
        p.error("--epochs: at least 2 (the first is the warm-up, untimed)")
    return args


# --- the corpora --------------------------------------------------------------------------

def corpora(args):
    """One Parquet file a corpus (columns input_ids, src, row), written once."""
    work = Path(args.workdir)
    sizes = [int(x) for x in args.sizes.split(",")]
    paths = []
    for s, (name, n) in enumerate(zip(NAMES, sizes)):
        folder = work / f"{name}-{n}"
        path = folder / "part-0.parquet"
        paths.append(str(folder))
        if path.exists():
            continue
        folder.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng([args.seed, s])
        lengths = np.clip(rng.lognormal(np.log(300), 1.0, n), 1, 4096).astype(np.int64)
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        values = rng.integers(0, 50257, int(offsets[-1]), dtype=np.int32)
        table = pa.table({"input_ids": pa.LargeListArray.from_arrays(offsets, values),
                          "src": np.full(n, s, np.int8), "row": np.arange(n, dtype=np.int64)})
        pq.write_table(table, path, row_group_size=10_000)
    return paths


def packed(seqs):
    """The batch flattened: values and cu_seqlens (what every row returns)."""
    import torch

    lengths = np.array([len(x) for x in seqs], np.int64)
    cu = np.zeros(len(seqs) + 1, np.int32)
    np.cumsum(lengths, out=cu[1:])
    values = np.concatenate(seqs) if seqs else np.zeros(0, np.int32)
    return {"values": torch.from_numpy(values), "cu_seqlens": torch.from_numpy(cu)}


# --- the loaders (each in a child process) ---------------------------------------------------

def hf_datasets(args, paths):
    """The corpora as Hugging Face datasets saved to disk (Arrow files, memory-mapped when
    loaded): made once from the Parquet files, read by the hf row and the lodarrow-arrow row."""
    import datasets

    out = []
    for path in paths:
        saved = Path(args.workdir) / "hf" / Path(path).name
        if not saved.exists():
            datasets.Dataset.from_parquet(str(Path(path) / "part-0.parquet")).save_to_disk(
                str(saved))
        out.append(datasets.load_from_disk(str(saved)))
    return out


def run_lodarrow(args, paths, weights, one_thread=False, arrow=False):
    import lodarrow as la

    # arrow: the same memory-mapped Arrow datasets as the hf row (no Parquet decoding)
    sources = hf_datasets(args, paths) if arrow else paths
    mixture = la.mix(dict(zip(NAMES, sources)), weights=weights, epoch_size=args.epoch_size)
    kwargs = {"prefetch": 0} if one_thread else {}  # else lodarrow's default (prefetch=2)
    loader = la.batch_loader(mixture, "input_ids", batch_size=args.batch_size, mode="packed",
                             to="torch", extra_columns=["src", "row"], seed=args.seed,
                             progress=False, **kwargs)

    def rest():
        for b in loader:
            yield b, b["src"].numpy(), b["row"].numpy(), int(b["cu_seqlens"][-1])

    def epoch(e):
        loader.set_epoch(e)
        return rest()

    def resume(state):
        loader.load_state_dict(state)
        return rest()
    return (epoch, lambda taken: loader.state_dict(), resume,
            ("the hf row's datasets (load_from_disk); " if arrow else "")
            + "la.batch_loader(la.mix({web, code, books}, weights, epoch_size), batch_size=32, "
            "mode='packed', to='torch', extra_columns=['src', 'row']"
            + (", prefetch=0); LODARROW_NUM_THREADS=1; " if one_thread else "); ")
            + "state_dict()")


def run_hf(args, paths, weights):
    import datasets
    import torch

    sources = hf_datasets(args, paths)
    bs = args.batch_size

    def epoch(e, first=0):
        mixed = datasets.interleave_datasets(
            [d.shuffle(seed=args.seed + e) for d in sources], probabilities=weights,
            seed=args.seed + e, stopping_strategy="all_exhausted").with_format("arrow")
        n = min(args.epoch_size, len(mixed))
        for k in range(first * bs, n, bs):
            t = mixed[k:min(k + bs, n)]
            # Arrow holds the batch packed already: its values and offsets (rebased), no
            # per-sequence arrays (the values copied once, as a writable torch tensor's)
            col = t.column("input_ids").combine_chunks()
            o = col.offsets.to_numpy()
            b = {"values": torch.from_numpy(np.array(col.flatten().to_numpy())),
                 "cu_seqlens": torch.from_numpy((o - o[0]).astype(np.int32))}
            yield (b, t.column("src").to_numpy(), t.column("row").to_numpy(),
                   int(b["cu_seqlens"][-1]))
    return (epoch, lambda taken: {"epoch": 0, "batches": taken},
            lambda state: epoch(state["epoch"], state["batches"]),
            "interleave_datasets([d.shuffle(seed) ...], probabilities, seed, "
            "stopping_strategy='all_exhausted').with_format('arrow'); the first epoch_size "
            "samples, ds[k:k+32] a batch, its Arrow values and offsets as the tensors; "
            "resumed by skipping the batches received")


def run_streaming(args, paths, weights):
    import types

    sys.modules.setdefault("streaming.vision", types.ModuleType("streaming.vision"))
    import streaming
    from streaming.base.util import clean_stale_shared_memory

    clean_stale_shared_memory()
    locals_ = []
    for name, path in zip(NAMES, paths):
        out = Path(args.workdir) / "mds" / Path(path).name
        locals_.append(str(out))
        if (out / "index.json").exists():
            continue
        table = pq.read_table(Path(path) / "part-0.parquet")
        col = table.column("input_ids").combine_chunks()
        off = col.offsets.to_numpy()
        flat = col.flatten().to_numpy()
        src, row = table.column("src").to_numpy(), table.column("row").to_numpy()
        with streaming.MDSWriter(out=str(out), columns={"tokens": "ndarray:int32",
                                                        "src": "int8", "row": "int64"},
                                 size_limit="64mb") as w:
            for j in range(len(row)):
                w.write({"tokens": flat[off[j]:off[j + 1]], "src": int(src[j]),
                         "row": int(row[j])})
    streams = [streaming.Stream(local=p, proportion=w) for p, w in zip(locals_, weights)]
    # predownload: the samples its threads prepare ahead; the default (8 batches) leaves
    # them waiting on one another in 7 ms sleeps: an epoch's worth is its fast path here
    # (local shards, one process)
    ds = streaming.StreamingDataset(streams=streams, epoch_size=args.epoch_size, shuffle=True,
                                    shuffle_seed=args.seed, batch_size=args.batch_size,
                                    predownload=args.epoch_size)

    def collate(samples):
        import torch

        # a per-sample array first: StreamingDataLoader counts a dict batch's samples (for
        # its state) by the length of the first value
        b = {"src": torch.tensor([s["src"] for s in samples]),
             "row": torch.tensor([s["row"] for s in samples])}
        b.update(packed([s["tokens"] for s in samples]))
        return b
    data = streaming.StreamingDataLoader(ds, batch_size=args.batch_size, num_workers=0,
                                         collate_fn=collate)

    def batches():
        for b in data:
            yield b, b["src"].numpy(), b["row"].numpy(), int(b["cu_seqlens"][-1])

    def epoch(e):  # each pass of the loader is the dataset's next epoch
        return batches()

    def resume(state):
        data.load_state_dict(state)
        return batches()
    return (epoch, lambda taken: data.state_dict(), resume,
            "StreamingDataset(streams=[Stream(local, proportion=w)], epoch_size, "
            "shuffle=True, batch_size=32, predownload=epoch_size) + StreamingDataLoader; "
            "flattened with NumPy; StreamingDataLoader.state_dict()")


def child(args):
    import torch

    torch.set_num_threads(1)
    paths = corpora(args)
    weights = [float(x) for x in args.weights.split(",")]
    t0 = time.perf_counter()
    run = {"lodarrow": run_lodarrow, "hf": run_hf, "streaming": run_streaming,
           "lodarrow-1thread": lambda *a: run_lodarrow(*a, one_thread=True),
           "lodarrow-arrow": lambda *a: run_lodarrow(*a, one_thread=True, arrow=True)
           }[args.child]
    epoch, save, resume, how = run(args, paths, weights)
    made = time.perf_counter() - t0
    if args.resume_save:  # half of epoch 0, its state saved; then the process ends
        half = args.epoch_size // args.batch_size // 2
        rows = []
        for k, (_, src, row, _) in enumerate(epoch(0)):
            rows.append(np.stack([np.asarray(src, np.int64), np.asarray(row, np.int64)]))
            if k + 1 == half:
                break
        state = save(half)
        Path(args.resume_save).write_text(json.dumps(
            {"state": state, "rows": np.concatenate(rows, axis=1).tolist()}))
        sys.stdout.flush()
        os._exit(0)  # as a killed job: no clean-up
    if args.resume_load:  # a new process: the state loaded, the rest of epoch 0
        saved = json.loads(Path(args.resume_load).read_text())
        rows, first = [], None
        for _, src, row, _ in resume(saved["state"]):
            if first is None:
                first = time.perf_counter() - t0
            rows.append(np.stack([np.asarray(src, np.int64), np.asarray(row, np.int64)]))
        print(json.dumps({"resume_s": first, "rows": np.concatenate(
            [np.array(saved["rows"], np.int64)] + rows, axis=1).tolist()}))
        return
    per_epoch, timed_tokens, timed_s, timed_cpu = [], 0, 0.0, 0.0
    middle = args.epoch_size // args.batch_size // 2
    for e in range(args.epochs):
        t, cpu = time.perf_counter(), cpu_seconds()
        counts = np.zeros(len(NAMES), np.int64)
        seen = [[] for _ in NAMES]
        steps = []
        tokens = 0
        digest = hashlib.blake2b(digest_size=16)  # the epoch's sources and rows, in order
        threads = names = None
        for k, (_, src, row, n_tokens) in enumerate(epoch(e)):
            src = np.asarray(src, np.int64)
            row = np.asarray(row, np.int64)
            counts += np.bincount(src, minlength=len(NAMES))
            steps.append(np.bincount(src, minlength=len(NAMES)))
            for s in range(len(NAMES)):
                seen[s].append(row[src == s])
            digest.update(src.tobytes())
            digest.update(row.tobytes())
            tokens += n_tokens
            if k == middle:  # the threads of the process, OS and Python, mid-epoch
                threads = [os_threads(), threading.active_count()]
                names = sorted(t.name for t in threading.enumerate())
        dt, dcpu = time.perf_counter() - t, cpu_seconds() - cpu
        if e:
            timed_tokens += tokens
            timed_s += dt
            timed_cpu += dcpu
        rows = [np.concatenate(x) if x else np.zeros(0, np.int64) for x in seen]
        per_epoch.append({"counts": counts.tolist(), "seconds": dt, "cpu_s": dcpu,
                          "tokens": tokens, "digest": digest.hexdigest(), "threads": threads,
                          "thread_names": names,
                          "steps": np.array(steps).tolist(),
                          "rows": [r.tolist() for r in rows]})
    print(json.dumps({"peer": args.child, "how": how, "start_s": made,
                      "tokens_per_s": timed_tokens / timed_s if timed_s else None,
                      "timed_s": timed_s, "timed_tokens": timed_tokens, "cpu_s": timed_cpu,
                      "env": {"LODARROW_NUM_THREADS": os.environ.get("LODARROW_NUM_THREADS")},
                      "versions": _versions(args.child), "epochs": per_epoch}))


def _versions(peer):
    """The versions the child's own interpreter runs (each peer has a venv of its own)."""
    from importlib.metadata import PackageNotFoundError, version

    dists = {"hf": ("datasets",), "streaming": ("mosaicml-streaming",)}.get(peer, ("lodarrow",))
    out = {"python": sys.version.split()[0]}
    for d in dists + ("numpy", "pyarrow", "torch"):
        try:
            out[d] = version(d)
        except PackageNotFoundError:
            pass
    return out


def cpu_seconds():
    """The process's CPU time, every thread's (user and system)."""
    t = os.times()
    return t.user + t.system


def os_threads():
    """The process's threads as the OS counts them (Linux), else None."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return None


# --- the driver ---------------------------------------------------------------------------

def measures(result, args):
    """What the batches say: exactness, repeats, coverage, the mixture per 10 steps."""
    sizes = [int(x) for x in args.sizes.split(",")]
    w = np.array([float(x) for x in args.weights.split(",")])
    w = w / w.sum()
    gaps, repeats, beyond, window_gap = [], 0, 0, 0.0
    covered = set()
    # the fewest epochs that can deliver every web sequence: its coverage is measured there
    web = result["epochs"][0]["counts"][0]
    needed = -(-sizes[0] // web) if web else len(result["epochs"])
    for e, ep in enumerate(result["epochs"]):
        total = sum(ep["counts"])
        gaps.append(max(abs(c - wi * total) for c, wi in zip(ep["counts"], w)))
        for s, rows in enumerate(ep["rows"]):
            rows = np.asarray(rows, np.int64)
            times = np.bincount(rows, minlength=sizes[s]) if len(rows) else np.zeros(1)
            expected = -(-ep["counts"][s] // sizes[s])  # whole copies, and one part copy
            over = np.maximum(times - max(expected, 1), 0)
            if ep["counts"][s] < sizes[s]:
                repeats += int(over.sum())
            else:
                beyond += int(over.sum())
        if e < needed:
            covered.update(np.asarray(ep["rows"][0]).tolist())
        steps = np.array(ep["steps"])
        if len(steps) >= 10:
            win = steps[:len(steps) // 10 * 10].reshape(-1, 10, len(w)).sum(axis=1)
            share = win / np.maximum(win.sum(axis=1, keepdims=True), 1)
            window_gap = max(window_gap, float(np.abs(share - w).max()))
    return {"max_gap": max(gaps), "epoch_sequences": [sum(e["counts"]) for e in
                                                     result["epochs"]],
            "repeats": repeats, "beyond_copies": beyond,
            "coverage": len(covered) / sizes[0], "coverage_epochs": needed,
            "window_gap": window_gap}


def resumed(cmd, result, args, env=None):
    """Kill at half of epoch 0 after saving the state, resume in a new process: the seconds
    from its start to the first batch, and whether the two halves are epoch 0 exactly."""
    state = Path(args.workdir) / f"resume-{cmd[3]}.json"
    state.unlink(missing_ok=True)
    saving = subprocess.run(cmd + ["--resume-save", str(state)], capture_output=True,
                            text=True, env=env)
    if saving.returncode or not state.exists():
        return {"resume_s": None, "resume_exact": f"no state: {saving.stderr[-300:]}"}
    loading = subprocess.run(cmd + ["--resume-load", str(state)], capture_output=True,
                             text=True, env=env)
    if loading.returncode:
        return {"resume_s": None, "resume_exact": f"failed: {loading.stderr[-300:]}"}
    out = json.loads(loading.stdout.strip().splitlines()[-1])
    got = np.array(out["rows"], np.int64)
    first = result["epochs"][0]["rows"]
    want = np.concatenate([np.stack([np.full(len(r), s), np.asarray(r, np.int64)])
                           for s, r in enumerate(first)], axis=1)
    got_keys, want_keys = (np.sort(a[0] * (1 << 40) + a[1]) for a in (got, want))
    exact = len(got_keys) == len(want_keys) and bool(np.array_equal(got_keys, want_keys))
    # how far from the uninterrupted epoch: sequences missing, and delivered more often
    keys, counts = np.unique(np.concatenate([got_keys, want_keys]), return_counts=True)
    g = np.searchsorted(keys, got_keys)
    w = np.searchsorted(keys, want_keys)
    have, need = np.bincount(g, minlength=len(keys)), np.bincount(w, minlength=len(keys))
    return {"resume_s": out["resume_s"], "resume_exact": exact,
            "resume_delivered": int(len(got_keys)),
            "resume_missing": int(np.maximum(need - have, 0).sum()),
            "resume_extra": int(np.maximum(have - need, 0).sum())}


#: Options that decide where the outputs go, not what is measured (not given to the children).
OUTPUTS = ("--json", "--markdown", "--docs", "--readme", "--from-json")


def measured_argv(argv):
    """``argv`` without the output options and their values."""
    out, skip = [], False
    for x in argv:
        if skip:
            skip = False
        elif x in OUTPUTS:
            skip = True
        elif not x.startswith(tuple(o + "=" for o in OUTPUTS)):
            out.append(x)
    return out


def rotations(peers, rounds):
    """Each round's order: the loaders rotated by one from round to round."""
    return [peers[i % len(peers):] + peers[:i % len(peers)] for i in range(rounds)]


def measure(args, argv):
    from lodarrow._bench._docs import command_line, machine, revision, utc_now

    corpora(args)
    pythons = dict(x.split("=", 1) for x in args.peer_python)
    report = {"revision": revision(),
              "machine": machine(("numpy", "pyarrow", "torch", "lodarrow")),
              "started": utc_now()}
    peers = args.peers.split(",")
    orders = rotations(peers, args.repeat)
    entries = {}  # peer -> its result: the first round's, every round's in "rounds"
    for i, order in enumerate(orders):
        for peer in order:
            first = entries.get(peer)
            if i and "error" in first:  # failed in the first round: not run again
                continue
            python = pythons.get(peer, sys.executable)
            cmd = [python, os.path.abspath(__file__), "--child", peer] + measured_argv(argv)
            env = {**os.environ, **ENV.get(peer, {})}
            before = os.getloadavg()[0]
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
            after = os.getloadavg()[0]
            if proc.returncode:
                print(f"round {i + 1}, {peer}: failed\n{proc.stderr[-3000:]}", file=sys.stderr)
                if not i:
                    entries[peer] = {"peer": peer, "error": proc.stderr[-1000:]}
                else:
                    first["rounds"].append({"round": i, "position": order.index(peer),
                                            "error": proc.stderr[-1000:]})
                continue
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            m = measures(r, args)
            rnd = {"round": i, "position": order.index(peer),
                   "tokens_per_s": r["tokens_per_s"], "timed_s": r["timed_s"],
                   "timed_tokens": r["timed_tokens"], "cpu_s": r["cpu_s"],
                   "threads": [ep["threads"] for ep in r["epochs"]],
                   "thread_names": sorted({n for ep in r["epochs"]
                                           for n in ep["thread_names"] or ()}),
                   "start_s": r["start_s"], "load": [before, after],
                   # as the child saw it: unset (lodarrow's default) but in the 1-thread row
                   "LODARROW_NUM_THREADS": r["env"]["LODARROW_NUM_THREADS"]}
            if not i:
                r["load"] = [before, after]
                r.update(m)
                r.update(resumed(cmd, r, args, env))
                for ep in r["epochs"]:  # keep the JSON small (the names: in the rounds)
                    del ep["rows"], ep["steps"], ep["thread_names"]
                rnd.update(same_batches=True, same_measures=True)
                r["rounds"] = [rnd]
                entries[peer] = r
            else:
                # the measures are a function of the seed: a later round must agree
                rnd["same_batches"] = ([ep["digest"] for ep in r["epochs"]]
                                       == [ep["digest"] for ep in first["epochs"]])
                rnd["same_measures"] = all(m[k] == first[k] for k in MEASURES)
                if not rnd["same_measures"]:
                    rnd["measures"] = m
                first["rounds"].append(rnd)
            print(f"round {i + 1}, {peer}: {r['tokens_per_s'] / 1e6:.1f} M tokens/s, "
                  f"CPU/wall {r['cpu_s'] / r['timed_s']:.2f}, max gap {m['max_gap']:.0f}, "
                  f"repeats {m['repeats']}, coverage {m['coverage']:.2f}"
                  + ("" if not i or (rnd["same_batches"] and rnd["same_measures"])
                     else ", NOT the first round's batches"), file=sys.stderr)
    results = []
    for peer in peers:
        r = entries[peer]
        if "error" not in r:
            done = ran(r).values()
            r["tokens_per_s"] = statistics.median(x["tokens_per_s"] for x in done)
            r["rounds_agree"] = all(x["same_batches"] and x["same_measures"] for x in done)
        results.append(r)
    settings = {k: v for k, v in vars(args).items() if k not in (
        "child", "resume_save", "resume_load", "json", "markdown", "docs", "readme",
        "from_json")}
    settings["LODARROW_NUM_THREADS"] = os.environ.get("LODARROW_NUM_THREADS")
    settings["env"] = {p: ENV[p] for p in peers if p in ENV}
    report.update(command=command_line("benchmarks/mixing.py", argv), finished=utc_now(),
                  load_at_end=os.getloadavg()[0], settings=settings, orders=orders,
                  results=results)
    return report


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    if args.child:
        return child(args)
    from lodarrow._bench._docs import publish, report_of

    report = check_rounds(report_of(args, lambda args: measure(args, argv)))
    text = markdown(report)
    publish(args, text, [("docs", "mixing", FROM_JSON + " --docs docs/training.md",
                          lambda: docs_markdown(report)),
                         ("readme", "mixing-run", FROM_JSON + " --readme benchmarks/README.md",
                          text)], echo=False)
    print(text)
    return report


FROM_JSON = "python benchmarks/mixing.py --from-json benchmarks/results/mixing.json"


def check_rounds(report):
    """The JSON of a run in rounds (``--repeat``); an older one (a round, before the rounds
    were kept) is refused by name: its tables are in git history, with the script of then."""
    if "orders" not in report:
        raise SystemExit("mixing.py: this JSON predates --repeat (no 'orders': one run a "
                         "loader); measure again, or render it with the mixing.py of its "
                         "commit (" + str(report.get("revision", {}).get("commit")) + ")")
    return report


def label(peer):
    """A loader's row: ``lodarrow-1thread`` is "lodarrow, 1 thread"."""
    return LABELS.get(peer, peer)


def names(peers):
    """Loaders' rows in a sentence: "; " between them where a row has a comma."""
    rows = [label(p) for p in peers]
    return ("; " if any("," in x for x in rows) else ", ").join(rows)


def rounds_words(n):
    """``n`` rounds in words: "1 round", "3 rounds"."""
    return f"{n} round{'' if n == 1 else 's'}"


def ran(r):
    """A loader's rounds that ran: round -> its record."""
    return {x["round"]: x for x in r.get("rounds", ()) if "error" not in x}


def cpu_per_wall(r):
    """The process's CPU time over the wall time of its timed epochs, the median round."""
    return statistics.median(x["cpu_s"] / x["timed_s"] for x in ran(r).values())


def side_threads(r):
    """The Python threads beside the main one at the middle batch of an epoch, any round."""
    return sorted({n for x in ran(r).values() for n in x.get("thread_names", ())
                   if n != "MainThread"})


def header(report):
    """Command, commit, machine, corpora, rounds and threads of the run."""
    from lodarrow._bench._docs import run_header

    s = report["settings"]
    sizes = s["sizes"].split(",")
    threads = s.get("LODARROW_NUM_THREADS")
    peers = s["peers"].split(",")
    how = []
    if "lodarrow" in peers:
        how.append("lodarrow on its defaults (`prefetch=2`, " + (
            f"`LODARROW_NUM_THREADS={threads}` set for the run)" if threads else
            "`LODARROW_NUM_THREADS` not set: its kernels' threads by the machine's load)"))
    if "lodarrow-1thread" in peers:
        how.append("lodarrow, 1 thread: `prefetch=0` and `LODARROW_NUM_THREADS=1` in its "
                   "process")
    if "lodarrow-arrow" in peers:
        how.append("lodarrow, 1 thread, HF's Arrow files: the same, reading the hf row's "
                   "memory-mapped `save_to_disk` datasets instead of the Parquet files")
    rounds = len(report["orders"])
    return run_header(report) + [
        f"Corpora: web, code, books of {', '.join(f'{int(x):,}' for x in sizes)} "
        f"sequences (lognormal lengths, mean ~490 tokens); weights {s['weights']} by "
        f"sequences, epochs of {s['epoch_size']:,}; packed batches of {s['batch_size']} "
        f"(torch); {s['epochs']} epochs a process, the first untimed.  {rounds_words(rounds)}: "
        f"every loader's process once a round, the order rotated from round to round (the "
        f"first: {names(report['orders'][0])}); tokens/s the median of the rounds, the "
        f"measures of what was delivered the first round's.  "
        + "; ".join(how) + ("; " if how else "")
        + "every process torch 1 thread, no DataLoader worker." + _versions_line(report), ""]


def _versions_line(report):
    """``"  Each loader's interpreter: ..."`` from the children's own versions (runs that
    recorded them)."""
    seen = [(r["peer"], r["versions"]) for r in report["results"] if r.get("versions")]
    if not seen:
        return ""
    return ("  Each loader's own interpreter: " + "; ".join(
        f"{LABELS.get(p, p)} " + ", ".join(f"{k} {v}" for k, v in vs.items())
        for p, vs in seen) + ".")


def markdown(report):
    """The whole table (benchmarks/README.md's ``mixing-run`` block) and the sentences."""
    rounds = len(report["orders"])
    lines = header(report) + [
        f"| loader | how it mixes | tokens/s, median of {rounds_words(rounds)} | slowest-fastest "
        "round | CPU s / wall s (median round) | threads mid-epoch: the OS's; Python's (beside "
        "the main one) | sequences "
        "an epoch | largest gap to the weights in an epoch (sequences) | down-sampled "
        "sequences twice in an epoch | upsampled beyond their copies | web covered in the "
        "fewest epochs that can | largest gap per 10 steps | resumed at half an epoch in a "
        "new process: s to the first batch, the epoch exact | load over the rounds |",
        "| --- | --- | ---: | --- | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | --- "
        "| --- |"]
    for r in report["results"]:
        if "error" in r:
            lines.append(f"| {label(r['peer'])} | failed: "
                         f"{r['error'].splitlines()[-1][:120] if r['error'] else ''} "
                         "| | | | | | | | | | | | |")
            continue
        done = ran(r)
        speeds = sorted(x["tokens_per_s"] for x in done.values())
        seqs = r["epoch_sequences"]
        seqs = (f"{seqs[0]:,} each" if len(set(seqs)) == 1
                else ", ".join(f"{x:,}" for x in seqs))
        threads = [t for x in done.values() for t in x["threads"] if t]
        threads = (f"{max(t[0] or 0 for t in threads)}; {max(t[1] for t in threads)} "
                   f"({', '.join(side_threads(r)) or 'none'})" if threads else "—")
        loads = [v for x in done.values() for v in x["load"]]
        missing = len(r["rounds"]) - len(done)
        lines.append(
            f"| {label(r['peer'])} | {r['how']} | {r['tokens_per_s']:,.0f}"
            f"{f' ({missing} failed)' if missing else ''} | "
            f"{speeds[0]:,.0f}-{speeds[-1]:,.0f} | {cpu_per_wall(r):.2f} | {threads} | "
            f"{seqs} | {r['max_gap']:.0f} | {r['repeats']} | {r['beyond_copies']} | "
            f"{r['coverage']:.1%} ({r['coverage_epochs']}) | "
            f"{r['window_gap']:.3f} | {_resume_text(r)} | "
            f"{min(loads):.1f}-{max(loads):.1f} |")
    return "\n".join(lines + [""] + summary_lines(report)) + "\n"


def docs_markdown(report):
    """The ``mixing`` block of docs/training.md: the run, a compact table, the sentences."""
    rounds = len(report["orders"])
    lines = header(report) + [
        f"| loader | tokens/s, median of {rounds_words(rounds)} | largest gap to the weights in "
        "an epoch | web (down-sampled) covered in the fewest epochs that can | largest gap "
        "per 10 steps | killed at half an epoch, resumed in a new process |",
        "| --- | ---: | ---: | ---: | ---: | --- |"]
    for r in report["results"]:
        if "error" in r:
            lines.append(f"| {label(r['peer'])} | failed | | | | |")
            continue
        lines.append(f"| {label(r['peer'])} | {r['tokens_per_s'] / 1e6:.1f} M | "
                     f"{r['max_gap']:.0f} sequences | {r['coverage']:.1%} "
                     f"({r['coverage_epochs']}) | {r['window_gap']:.2f} | {_resume_text(r)} |")
    return "\n".join(lines + [""] + summary_lines(report)) + "\n"


def against(a, b):
    """``a``'s tokens/s against ``b``'s: the ratio of the medians, and round by round (the
    rounds both ran)."""
    ra, rb = ran(a), ran(b)
    both = sorted(set(ra) & set(rb))
    ahead = sum(ra[i]["tokens_per_s"] > rb[i]["tokens_per_s"] for i in both)
    if not both:
        rounds = "no round run by both"
    elif ahead == len(both):
        rounds = f"ahead in every round ({ahead} of {len(both)})"
    elif ahead == 0:
        rounds = f"behind in every round ({len(both)} of {len(both)})"
    else:
        rounds = f"either way (ahead in {ahead} of {len(both)} rounds)"
    return f"{a['tokens_per_s'] / b['tokens_per_s']:.2f}x by the medians, {rounds}"


def summary_lines(report):
    """The sentences under the table, each computed from the JSON."""
    ok = [r for r in report["results"] if "error" not in r]
    if not ok:
        return []
    exact = [r["peer"] for r in ok if r["max_gap"] < 1]
    twice = [r["peer"] for r in ok if r["repeats"]]
    beyond = [r["peer"] for r in ok if r["beyond_copies"]]
    resumed_exact = [r["peer"] for r in ok if r.get("resume_exact") is True]
    nz = noise(report)
    rounds = len(report["orders"])
    lines = [
        f"- {len(exact)} of the {len(ok)} loaders deliver each source's planned count exactly "
        f"every epoch ({names(exact) or 'none'}); {len(twice)} delivered a down-sampled "
        f"sequence twice in one epoch, {len(beyond)} the upsampled source beyond its copies.",
        f"- Over 10 steps ({nz['sequences']:,} sequences) binomial noise alone is about "
        f"{nz['sd']:.3f} a window (one standard deviation), about {nz['worst']:.2f} at worst "
        f"over the run's {nz['windows']:,} windows; the largest gaps: "
        + "; ".join(f"{label(r['peer'])} {r['window_gap']:.3f}" for r in ok) + ".",
        f"- {len(resumed_exact)} of the {len(ok)} resume exactly in a new process from a state "
        f"saved at half an epoch."]
    same = [r["peer"] for r in ok if r["rounds_agree"]]
    rows = {r["peer"]: r for r in ok}
    twin = ""
    if "lodarrow" in rows and "lodarrow-1thread" in rows:
        equal = ([e["digest"] for e in rows["lodarrow"]["epochs"]]
                 == [e["digest"] for e in rows["lodarrow-1thread"]["epochs"]])
        twin = (f"; lodarrow on its defaults and on 1 thread deliver "
                f"{'the same' if equal else 'different'} batches")
    if rounds > 1:
        differ = [r["peer"] for r in ok if not r["rounds_agree"]]
        lines.append(
            f"- Every later round delivered the first round's batches (each epoch's sources "
            f"and rows, in order) for {len(same)} of the {len(ok)} loaders"
            + (f" (not: {names(differ)})" if differ else "") + twin + ".")
    elif twin:
        lines.append("- " + twin[2:] + ".")
    lines.append(
        f"- Tokens/s, the median of {rounds_words(rounds)}: "
        + "; ".join(f"{label(r['peer'])} {r['tokens_per_s'] / 1e6:.1f} M" for r in ok)
        + "; on a shared machine: compare the rows, not the absolute figures.")
    peers = [r for r in ok if not r["peer"].startswith("lodarrow")]
    for mine in ("lodarrow", "lodarrow-1thread", "lodarrow-arrow"):
        if mine not in rows:
            continue
        others = peers + ([rows["lodarrow-1thread"]] if mine == "lodarrow"
                          and "lodarrow-1thread" in rows else [])
        if others:
            lines.append(f"- {label(mine)} against "
                         + "; against ".join(f"{label(r['peer'])}: {against(rows[mine], r)}"
                                             for r in others) + ".")
    lines.append(
        "- CPU time over the wall time of the timed epochs (every thread of the process; "
        "1.00: one thread busy throughout), the median round, and the Python threads beside "
        "the main one mid-epoch: "
        + "; ".join(f"{label(r['peer'])} {cpu_per_wall(r):.2f} "
                    f"({', '.join(side_threads(r)) or 'none'})" for r in ok) + ".")
    return lines


def noise(report):
    """A source's share of 10 consecutive batches under binomial noise alone: one standard
    deviation (the widest weight's) and, over the run's windows, the largest expected
    (a normal approximation, ``sd * sqrt(2 ln windows)``)."""
    s = report["settings"]
    w = [float(x) for x in s["weights"].split(",")]
    w = [x / sum(w) for x in w]
    n = 10 * s["batch_size"]
    sd = max(math.sqrt(x * (1 - x) / n) for x in w)
    windows = s["epochs"] * (s["epoch_size"] // s["batch_size"] // 10)
    return {"sequences": n, "sd": sd, "windows": windows,
            "worst": sd * math.sqrt(2 * math.log(windows)) if windows > 1 else sd}


def _resume_text(r):
    if r.get("resume_s") is None:
        return str(r.get("resume_exact"))[:80]
    if r["resume_exact"] is True:
        return f"{r['resume_s']:.2f} s, exact"
    return (f"{r['resume_s']:.2f} s, not exact: {r['resume_delivered']:,} delivered, "
            f"{r['resume_missing']:,} missing, {r['resume_extra']:,} extra")


if __name__ == "__main__":
    main()
