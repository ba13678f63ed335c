"""``la.tokenize`` against the tokenizer's own batch encode and ``datasets.map`` + ``to_parquet``.

One run, one generated corpus, one tokenizer trained here with ``tokenizers`` on that corpus
(no download), the same cores for every row:

- **tokenizer alone**: ``Tokenizer.encode_batch_fast`` over the corpus's texts, already in
  memory, in batches of the size ``la.tokenize`` uses, the ids read into Python lists
  (``[e.ids for e in ...]``): the limit the issue names, nothing read or written;
- **lodarrow**: ``la.tokenize(corpus/, out/, tokenizer.json)`` end to end (read Parquet,
  tokenize, ids to Arrow, write Parquet with the lengths in the footers), its default
  (one process, the tokenizer's threads) and ``processes=N``;
- **datasets**: ``Dataset.from_parquet(files).map(encode, batched=True, num_proc=N)`` then
  ``to_parquet``, the Hugging Face recipe (its cache in a temporary directory);
- datatrove's ``DocumentTokenizer`` and dolma's ``tokens`` where they are installed (said
  when they are not).

Usage::

    python benchmarks/tokenization.py --docs 200000 --json tokenize.json --markdown tokenize.md

Each row is the best of ``--repeat`` runs (default 3) after one warm-up, the rows run in
turn (round robin) so that a change in the machine's load falls on every row alike; tokens/s
counts the ids written (the tokenizer's ids; ``la.tokenize``'s count is checked against
them).  Beside the wall time, the CPU seconds of that run (this process and its reaped
worker processes) and the load average: on a shared machine the CPU time is the steadier
measure of the work each row does.
"""

import os
import sys

# run as a script, this file's directory comes first on sys.path, where its name would hide
# the standard library's tokenize module (which pandas and linecache import)
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402


def make_corpus(root, docs, files, seed=0):
    """``files`` Parquet files of ``docs`` documents in all: lognormal lengths (mean about
    250 words) of Zipf-distributed words of a synthetic language, a few non-ASCII."""
    rng = np.random.default_rng(seed)
    letters = list("abcdefghijklmnopqrstuvwxyz") + ["é", "ü", "ß", "日", "本"]
    weights = np.r_[np.full(26, 1.0), np.full(5, 0.05)]
    weights /= weights.sum()
    lexicon = ["".join(rng.choice(letters, int(k), p=weights))
               for k in rng.integers(1, 11, 30000)]
    zipf = 1.0 / np.arange(1, len(lexicon) + 1) ** 1.1
    zipf /= zipf.sum()
    lengths = np.minimum(rng.lognormal(5.2, 0.8, docs).astype(int) + 1, 20000)
    words = rng.choice(len(lexicon), int(lengths.sum()), p=zipf)
    lexicon = np.array(lexicon, dtype=object)
    ends = np.cumsum(lengths)
    texts = [" ".join(lexicon[words[a:b]]) for a, b in zip(ends - lengths, ends)]
    os.makedirs(root, exist_ok=True)
    per = -(-docs // files)
    for k in range(files):
        part = texts[k * per:(k + 1) * per]
        pq.write_table(pa.table({"id": np.arange(k * per, k * per + len(part)), "text": part}),
                       os.path.join(root, f"part-{k}.parquet"), row_group_size=8192)
    return texts


def train_tokenizer(texts, vocab, path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts[:20000], trainers.BpeTrainer(
        vocab_size=vocab, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False))
    tok.save(path)
    return tok


def _cpu():
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)  # reaped worker processes
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--docs", type=int, default=100_000)
    p.add_argument("--files", type=int, default=4)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--processes", type=int, default=os.cpu_count())
    p.add_argument("--only", default="", help="comma-separated rows to run")
    p.add_argument("--work-dir", default=None)
    p.add_argument("--json", default=None)
    p.add_argument("--markdown", default=None)
    args = p.parse_args(argv)

    import lodarrow as la
    from lodarrow._tables import _tokenize

    work = args.work_dir or tempfile.mkdtemp(prefix="lodarrow-tokenize-bench-")
    corpus = os.path.join(work, "corpus")
    shutil.rmtree(corpus, ignore_errors=True)
    t0 = time.perf_counter()
    texts = make_corpus(corpus, args.docs, args.files)
    tok_path = os.path.join(work, "tokenizer.json")
    tok = train_tokenizer(texts, args.vocab, tok_path)
    print(f"corpus: {args.docs:,} documents, {sum(map(len, texts)) / 1e6:.1f} MB of text, "
          f"{args.files} files; tokenizer: BPE, {tok.get_vocab_size()} ids "
          f"({time.perf_counter() - t0:.1f} s to make)", flush=True)
    batch = _tokenize._rows_for(len(texts), sum(len(t.encode()) for t in texts))
    total = sum(len(e.ids) for e in tok.encode_batch_fast(texts))
    only = set(filter(None, args.only.split(",")))
    rows = []

    jobs = []

    def run(name, fn, note="", cpu=True):
        if not only or name in only:
            jobs.append((name, fn, note, cpu))

    def alone():
        for s in range(0, len(texts), batch):
            [e.ids for e in tok.encode_batch_fast(texts[s:s + batch])]

    def encode_only():
        for s in range(0, len(texts), batch):
            tok.encode_batch_fast(texts[s:s + batch])

    def lodarrow(processes=None):
        def go():
            out = os.path.join(work, "out-lodarrow")
            shutil.rmtree(out, ignore_errors=True)
            s = la.tokenize(corpus, out, tok_path, progress=False, processes=processes,
                            resume=False)
            assert s.tokens == total, (s.tokens, total)
        return go

    def hf(num_proc):
        def go():
            import datasets

            datasets.disable_progress_bars()
            cache = tempfile.mkdtemp(dir=work)
            files = sorted(os.path.join(corpus, f) for f in os.listdir(corpus))
            ds = datasets.Dataset.from_parquet(files, cache_dir=cache)
            from tokenizers import Tokenizer

            t = Tokenizer.from_file(tok_path)

            def encode(b):
                return {"tokens": [e.ids for e in t.encode_batch_fast(b["text"])]}

            ds = ds.map(encode, batched=True, batch_size=1000, num_proc=num_proc,
                        remove_columns=["text"], cache_file_name=os.path.join(cache, "m.arrow"))
            ds.to_parquet(os.path.join(cache, "out.parquet"))
            shutil.rmtree(cache, ignore_errors=True)
        return go

    run("tokenizer alone (encode_batch_fast + ids)", alone, "texts in memory, no I/O")
    run("tokenizer alone (encode_batch_fast)", encode_only, "no ids read")
    run("lodarrow tokenize (threads)", lodarrow(None), "default")
    run(f"lodarrow tokenize (processes={args.processes})", lodarrow(args.processes))
    run(f"datasets map(num_proc={args.processes}) + to_parquet", hf(args.processes))
    run("datasets map(num_proc=None) + to_parquet", hf(None))
    def datatrove_job(n):
        def go():
            from datatrove.executor import LocalPipelineExecutor
            from datatrove.pipeline.readers import ParquetReader
            from datatrove.pipeline.tokens import DocumentTokenizer

            out = tempfile.mkdtemp(dir=work)
            LocalPipelineExecutor(
                [ParquetReader(corpus, text_key="text", id_key="id"),
                 DocumentTokenizer(os.path.join(out, "tokens"), tok_path,
                                   shuffle_documents=False)],
                tasks=n, workers=n, logging_dir=os.path.join(out, "logs"),
                skip_completed=False).run()
            written = sum(os.path.getsize(os.path.join(root, f))
                          for root, _, files in os.walk(os.path.join(out, "tokens"))
                          for f in files if f.endswith(".ds"))
            assert written == 2 * total, (written, total)  # uint16 ids
            shutil.rmtree(out, ignore_errors=True)
        return go

    try:
        import datatrove  # noqa: F401

        run(f"datatrove DocumentTokenizer (tasks={args.processes})",
            datatrove_job(args.processes), "its .ds token files; CPU: its workers are its "
            "forkserver's children, not counted", cpu=False)
    except ImportError:
        print("datatrove not installed: not run")
        rows.append({"name": "datatrove", "seconds": None,
                     "note": "not installed: not run"})
    # dolma's pip install pins numpy 1.26 and tokenizers 0.19 (it would downgrade lodarrow's
    # environment): it needs a venv of its own, which this script does not make
    rows.append({"name": "dolma tokens", "seconds": None,
                 "note": "not run: its install downgrades numpy and tokenizers"})
    # round robin: every row once (warm-up), then `repeat` rounds of every row in turn, so
    # a change in the machine's load falls on every row alike
    for name, fn, _, _ in jobs:
        fn()
    timed = {name: [] for name, *_ in jobs}
    for _ in range(args.repeat):
        for name, fn, _, _ in jobs:
            c0, t0 = _cpu(), time.perf_counter()
            fn()
            timed[name].append((time.perf_counter() - t0, _cpu() - c0, os.getloadavg()[0]))
    for name, fn, note, cpu in jobs:
        seconds, cpu_s, load = min(timed[name])
        rows.insert(len([r for r in rows if r.get("seconds")]), {
            "name": name, "seconds": seconds, "times": [t[0] for t in timed[name]],
            "cpu_seconds": cpu_s if cpu else None, "tokens_per_s": total / seconds,
            "note": note, "load": load})
        shown = f"{cpu_s:7.2f} cpu-s" if cpu else "    n/a cpu-s"
        print(f"{name:<46} {seconds:7.2f} s  {total / seconds / 1e6:6.2f} M tokens/s  "
              f"{shown}  load {load:.1f}  {note}", flush=True)
    ref = next((r for r in rows if r["name"].startswith("tokenizer alone (encode_batch_fast +")),
               None)
    for r in rows:
        if ref and r.get("seconds"):
            r["vs_tokenizer"] = ref["seconds"] / r["seconds"]
            if r["cpu_seconds"]:
                r["cpu_vs_tokenizer"] = ref["cpu_seconds"] / r["cpu_seconds"]
    meta = {"docs": args.docs, "files": args.files, "tokens": total,
            "vocab": tok.get_vocab_size(), "batch_rows": batch, "cpus": os.cpu_count(),
            "python": sys.version.split()[0], "platform": platform.platform(),
            "tokenizers": __import__("tokenizers").__version__, "pyarrow": pa.__version__}
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=1)
    if args.markdown:
        lines = ["| run | wall s | M tokens/s | speed vs the tokenizer alone | CPU s | "
                 "CPU efficiency vs the tokenizer alone | note |",
                 "| --- | ---: | ---: | ---: | ---: | ---: | --- |"]
        for r in rows:
            if r.get("seconds"):
                lines.append(f"| {r['name']} | {r['seconds']:.2f} | "
                             f"{r['tokens_per_s'] / 1e6:.2f} | {r.get('vs_tokenizer', 1):.2f} | "
                             + (f"{r['cpu_seconds']:.2f} | {r['cpu_vs_tokenizer']:.2f} | "
                                if r.get("cpu_seconds") else "n/a | n/a | ")
                             + f"{r['note']} |")
            else:
                lines.append(f"| {r['name']} | | | | | | {r['note']} |")
        with open(args.markdown, "w") as f:
            f.write("\n".join(lines) + "\n")
    if not args.work_dir:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
