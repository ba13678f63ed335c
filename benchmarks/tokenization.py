"""``la.tokenize`` against the tokenizer's own batch encode and the peers, in one run
(issue 60; docs/tokenize.md#measured).

    flock /tmp/bench.lock python benchmarks/tokenization.py --documents 16000 --files 4 \\
        --json benchmarks/results/tokenization.json --docs docs/tokenize.md
    python benchmarks/tokenization.py --from-json benchmarks/results/tokenization.json \\
        --docs docs/tokenize.md

One run, one generated corpus, one tokenizer trained here with ``tokenizers`` on that corpus
(no download), the same cores for every row:

- **tokenizer alone** (``tokenizer``): ``Tokenizer.encode_batch_fast`` over the corpus's
  texts, already in memory, in batches of the size ``la.tokenize`` uses, the ids read into
  Python lists (``[e.ids for e in ...]``): the limit the issue names, nothing read or
  written; ``tokenizer_no_ids``: the same without reading the ids;
- **lodarrow** (``lodarrow``): ``la.tokenize(corpus/, out/, tokenizer.json)`` end to end
  (read Parquet, tokenize, ids to Arrow, write Parquet with the lengths in the footers), its
  default (one process, the tokenizer's threads);
  ``lodarrow_processes``: ``processes=N``;
- **datasets** (``datasets_num_proc``, ``datasets_num_proc_in_memory``, ``datasets``,
  ``datasets_in_memory``): ``Dataset.from_parquet(files).map(encode, batched=True,
  batch_size=B, num_proc=N|None, remove_columns=["text"], features=...)`` then
  ``to_parquet``, the fast path of Hugging Face's docs for a tokenization map: batched, the
  text column removed, ``features=`` giving the token column the type ``la.tokenize``
  writes (``Sequence(Value("uint16"))`` for a vocabulary of at most 65,536 ids, else
  ``int32``) so its Arrow writer does not infer int64 lists, ``batch_size`` (and
  ``writer_batch_size``) the rows a batch of the tokenizer alone and ``la.tokenize``; the
  map's result either written to its Arrow cache file (``cache_file_name`` in a temporary
  directory) or kept in memory (``keep_in_memory=True``, no cache file), both documented
  ways;
- **datatrove** (``datatrove``): its ``DocumentTokenizer`` behind a ``ParquetReader`` in a
  ``LocalPipelineExecutor`` of N tasks, writing its ``.ds`` token files;
- **dolma** (``dolma``): ``dolma tokens`` with ``--dolma``, the command of a venv of its own
  (dolma pins numpy<2 and tokenizers<=0.19.1), on the same texts written as gzipped JSON
  lines (its input format; untimed), ``--processes N``;
- Megatron-LM's ``tools/preprocess_data.py``: not run (its row says why,
  ``--megatron-note``); dolma's says why without ``--dolma`` (``--dolma-note``).

Interleaved: every row once (warm-up), then ``--repeat`` rounds of every row in turn, the
order reversed every other round (A B C, C B A, ...), so that a change in the machine's load
falls on every row alike; ``la.tokenize`` runs next to the tokenizer alone, each first in
half the rounds, so that their per-round ratio is of two runs side by side.  Every
in-process row encodes with a tokenizer loaded once from its JSON and warmed by its warm-up
run (the harness's for the tokenizer alone and ``datasets``, ``la.tokenize``'s own, loaded by
its first call and reused): ``tokenizers`` keeps memory of every tokenizer loaded, and a
process that loads one for every run encodes slower run after run.  A
row's figures: its fastest wall time (best), its median, the CPU seconds of the fastest run
(this process and its reaped worker processes) and the 1-minute load average after each
run; ratios to the tokenizer alone both best over best and as the median of the per-round
ratios (each round's two runs side by side).  tokens/s counts the ids written (the
tokenizer's ids; ``la.tokenize``'s count is checked against them).  Every row's output is
read back after the warm-up (untimed) and checked to hold, document by document, the ids of
``encode_batch_fast`` over the corpus (the same ids ``la.tokenize`` wrote, which is checked
the same way): the Parquet token lists of ``la.tokenize`` and ``datasets`` (and their type),
datatrove's ``.ds`` files with their ``.ds.index`` document ends, dolma's ``.npy`` files
with their ``.csv.gz`` offsets and ids (its eos id after each document); the row's
``verified`` field in the JSON says what was compared.  The previous run's output is
removed before each run, outside the timing.

``--memory 10,20`` measures only the peak memory of ``la.tokenize`` on JSON lines files of
about 10 and 20 MB of the same generated documents (each in a fresh process: the peak RSS,
``VmHWM``, before and after ``la.tokenize``), into a JSON of its own
(benchmarks/results/tokenize_memory.json) and, with ``--docs``, the ``tokenize-memory`` block
of docs/tokenize.md (lodarrow/_bench/_docs.py's markers); ``--from-json`` of that JSON writes
that block again.

    flock /tmp/bench.lock python benchmarks/tokenization.py --memory 10,20 \\
        --json benchmarks/results/tokenize_memory.json --docs docs/tokenize.md

Writes ``--json`` (the commit, versions, CPU, load, settings and every sample) and, with
``--docs``, the section between ``<!-- tokenize-bench:begin -->`` and
``<!-- tokenize-bench:end -->`` of that Markdown file, generated from the JSON
(tests/test_bench_tokenization.py checks the docs against the JSON).
"""

import os
import sys

# run as a script, this file's directory comes first on sys.path, where its name would hide
# the standard library's tokenize module (which pandas and linecache import)
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]

import argparse
import datetime
import json
import platform
import shlex
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq


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



ROOT = Path(__file__).resolve().parent.parent
BEGIN = ("<!-- tokenize-bench:begin: generated by benchmarks/tokenization.py from its JSON; "
         "do not edit -->")
END = "<!-- tokenize-bench:end -->"
#: the ratio to the tokenizer alone that ``la.tokenize`` end to end is to reach (issue 60)
GOAL = 0.9
#: rows in table order: key, title, kind (limit / lodarrow / peer)
TITLES = {
    "tokenizer": ("tokenizer alone (`encode_batch_fast` + ids)", "limit"),
    "tokenizer_no_ids": ("tokenizer alone (`encode_batch_fast`, no ids read)", "limit"),
    "lodarrow": ("**`la.tokenize`** (default: one process, the tokenizer's threads)",
                 "lodarrow"),
    "lodarrow_processes": ("`la.tokenize(processes={n})`", "lodarrow"),
    "datasets_num_proc": ("`datasets` `map(num_proc={n})` (cache file) + `to_parquet`",
                          "peer"),
    "datasets_num_proc_in_memory": (
        "`datasets` `map(num_proc={n}, keep_in_memory=True)` + `to_parquet`", "peer"),
    "datasets": ("`datasets` `map(num_proc=None)` (cache file) + `to_parquet`", "peer"),
    "datasets_in_memory": (
        "`datasets` `map(num_proc=None, keep_in_memory=True)` + `to_parquet`", "peer"),
    "datatrove": ("datatrove `DocumentTokenizer` ({n} tasks)", "peer"),
    "dolma": ("dolma `tokens`", "peer"),
    "megatron": ("Megatron-LM `tools/preprocess_data.py`", "peer"),
}
DOLMA_NOTE = ("not run: no --dolma given (dolma pins numpy<2 and tokenizers<=0.19.1: it "
              "needs a venv of its own)")
MEGATRON_NOTE = ("not run: `tools/preprocess_data.py` is a script of Megatron-LM's "
                 "repository, not in the `megatron-core` wheel pip installs (checked: 0.16.1 "
                 "holds `megatron/core` only), and it imports `megatron.training`; a PyPI-only "
                 "machine has no checkout of it")


def _cpu():
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)  # reaped worker processes
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def machine():
    from lodarrow._bench._docs import cpu_model

    model = cpu_model()
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"cpu_model": model, "cpus": usable, "cpus_online": os.cpu_count(),
            "platform": platform.platform(), "load_at_start": round(os.getloadavg()[0], 2)}


def lodarrow_revision(la):
    """The lodarrow measured: its version, the commit and the tracked files changed from it."""
    from lodarrow._bench._docs import revision

    return {"version": la.__version__, **revision(str(ROOT))}


def _version(name):
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _now():
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")


def source_hashes(module_path):
    """SHA-256 of the benchmark script and of the module it measures (which code ran)."""
    import hashlib

    files = {"benchmarks/tokenization.py": Path(__file__),
             "lodarrow/_tables/_tokenize.py": Path(module_path)}
    return {name: hashlib.sha256(path.read_bytes()).hexdigest() for name, path in files.items()}


class Reference:
    """The tokenizer's ids of every document of the corpus (``encode_batch_fast``), flat
    with offsets, which every row's output is compared with."""

    def __init__(self, tok, texts, batch):
        flat, lengths = [], []
        for s in range(0, len(texts), batch):
            for e in tok.encode_batch_fast(texts[s:s + batch]):
                flat.append(np.asarray(e.ids, dtype=np.uint32))
                lengths.append(len(e.ids))
        self.flat = np.concatenate(flat) if flat else np.zeros(0, np.uint32)
        self.lengths = np.asarray(lengths, dtype=np.int64)
        self.offsets = np.r_[0, np.cumsum(self.lengths)]
        self.total = int(self.offsets[-1])

    def check(self, what, flat, lengths, order):
        """``flat`` / ``lengths``: the ids a row wrote, documents in turn; ``order``: which
        document of the corpus each is.  Every document once, each with the same ids."""
        order = np.asarray(order, dtype=np.int64)
        assert len(order) == len(self.lengths) and \
            np.array_equal(np.sort(order), np.arange(len(self.lengths))), \
            f"{what}: {len(order)} documents written, not the corpus's {len(self.lengths)}"
        assert np.array_equal(np.asarray(lengths, dtype=np.int64), self.lengths[order]), \
            f"{what}: documents' lengths differ from the tokenizer's"
        want = np.concatenate([self.flat[self.offsets[i]:self.offsets[i + 1]] for i in order])
        assert np.array_equal(np.asarray(flat).astype(np.uint32), want), \
            f"{what}: ids differ from the tokenizer's"


def measure(args):
    """Everything measured, as the JSON report."""
    import lodarrow as la
    from lodarrow._tables import _tokenize

    t_start = time.perf_counter()
    report = {"command": "python benchmarks/tokenization.py " + shlex.join(args.argv),
              "note": args.note, "started": _now(), "machine": machine(),
              "lodarrow": lodarrow_revision(la),
              "versions": {"python": sys.version.split()[0], "tokenizers": _version("tokenizers"),
                           "pyarrow": pa.__version__, "numpy": np.__version__,
                           "datasets": _version("datasets"), "datatrove": _version("datatrove"),
                           "lodarrow": la.__version__},
              "settings": {"documents": args.documents, "files": args.files, "vocab": args.vocab,
                           "repeat": args.repeat, "order": "alternating",
                           "tokenizer_loads": "once a process",
                           "processes": args.processes,
                           "only": args.only, "goal": GOAL},
              "sources": source_hashes(Path(_tokenize.__file__))}
    work = args.work_dir or tempfile.mkdtemp(prefix="lodarrow-tokenize-bench-")
    corpus = os.path.join(work, "corpus")
    shutil.rmtree(corpus, ignore_errors=True)
    t0 = time.perf_counter()
    texts = make_corpus(corpus, args.documents, args.files)
    tok_path = os.path.join(work, "tokenizer.json")
    tok = train_tokenizer(texts, args.vocab, tok_path)
    from tokenizers import Tokenizer

    loads = []
    for _ in range(3):
        c0 = time.perf_counter()
        Tokenizer.from_file(tok_path)
        loads.append(time.perf_counter() - c0)
    batch = _tokenize._rows_for(len(texts), sum(len(t.encode()) for t in texts))
    ref = Reference(tok, texts, batch)
    total = ref.total
    # the corpus's files in order and their documents' ids (datatrove's tasks take files)
    corpus_files = sorted(os.listdir(corpus))
    file_docs = np.cumsum([0] + [pq.read_metadata(os.path.join(corpus, f)).num_rows
                                 for f in corpus_files])
    dtype = "uint16" if tok.get_vocab_size() <= 1 << 16 else "int32"  # as la.tokenize's
    report["corpus"] = {
        "documents": len(texts), "files": args.files, "text_mb": sum(map(len, texts)) / 1e6,
        "tokens": total, "vocab": tok.get_vocab_size(), "batch_rows": batch,
        "tokenizer": "byte-level BPE trained here on the corpus's first 20,000 documents",
        "tokenizer_load_s": min(loads),
        "made_s": time.perf_counter() - t0}
    print(f"corpus: {len(texts):,} documents, {report['corpus']['text_mb']:.1f} MB of text, "
          f"{args.files} files, {total:,} tokens; tokenizer: BPE, {tok.get_vocab_size()} ids "
          f"(loaded from its JSON in {min(loads):.3f} s)", flush=True)
    only = set(filter(None, args.only.split(",")))
    n = args.processes
    jobs, rows = [], []

    def add(key, job, note="", cpu=True):
        """``job``: (the timed run, its output to remove before each run, the untimed check
        of that output's ids, returning what it compared)."""
        title = TITLES[key][0].format(n=n)
        if not only or key in only:
            jobs.append((key, job))
            rows.append({"key": key, "name": title, "kind": TITLES[key][1], "note": note,
                         "cpu_counted": cpu, "samples": []})

    def not_run(key, why):
        if not only or key in only:
            rows.append({"key": key, "name": TITLES[key][0].format(n=n),
                         "kind": TITLES[key][1], "note": why, "samples": None})

    # every in-process row encodes with a tokenizer loaded once from its JSON, warmed by its
    # warm-up run: the tokenizer alone's and datasets' this harness's, la.tokenize's its own
    # (its first call loads it, later calls reuse it).  A tokenizer loaded for every run
    # would slow every later run of the process (tokenizers keeps memory of each one
    # loaded: 2.4 -> 2.9 s a run after ten loads here), the load's order deciding the rows.
    loaded = Tokenizer.from_file(tok_path)

    def alone():
        for s in range(0, len(texts), batch):
            [e.ids for e in loaded.encode_batch_fast(texts[s:s + batch])]

    def encode_only():
        for s in range(0, len(texts), batch):
            loaded.encode_batch_fast(texts[s:s + batch])

    def check_parquet(out, what):
        """The Parquet file ``out`` or those under it, in name order: their ``id`` column the corpus's
        order and their ``tokens`` ``list<dtype>`` lists the reference's."""
        files = [out] if os.path.isfile(out) else sorted(
            os.path.join(root, f) for root, _, names in os.walk(out)
            for f in names if f.endswith(".parquet"))
        assert files, f"{what}: no Parquet under {out}"
        table = pa.concat_tables([pq.read_table(f, columns=["id", "tokens"]) for f in files])
        kind = table.schema.field("tokens").type
        assert pa.types.is_list(kind) and kind.value_type == pa.type_for_alias(dtype), \
            (what, kind)
        tokens = table.column("tokens").combine_chunks()
        ref.check(what, tokens.values.to_numpy(), np.diff(tokens.offsets.to_numpy()),
                  table.column("id").to_numpy())
        return (f"{len(table):,} token lists ({tokens.type}) in {len(files)} Parquet "
                f"file{'s' if len(files) > 1 else ''}")

    def lodarrow(processes=None):
        out = os.path.join(work, "out-lodarrow")

        def go():
            s = la.tokenize(corpus, out, tok_path, progress=False, processes=processes,
                            resume=False)
            assert s.tokens == total, (s.tokens, total)
        return go, out, lambda: check_parquet(out, "la.tokenize")

    def hf(num_proc, in_memory):
        cache = os.path.join(work, f"out-datasets-{num_proc}-{in_memory}")

        def go():
            import datasets

            datasets.disable_progress_bars()
            os.makedirs(cache)
            files = [os.path.join(corpus, f) for f in corpus_files]
            ds = datasets.Dataset.from_parquet(files, cache_dir=cache)
            t = loaded

            def encode(b):
                return {"tokens": [e.ids for e in t.encode_batch_fast(b["text"])]}

            # HF's docs' tokenization map: batched, the text removed, the output's features
            # given (the token column uint16 as la.tokenize writes it, not inferred int64),
            # the result in the cache file or kept in memory
            features = datasets.Features({"id": ds.features["id"],
                                          "tokens": datasets.Sequence(datasets.Value(dtype))})
            where = ({"keep_in_memory": True} if in_memory else
                     {"cache_file_name": os.path.join(cache, "m.arrow"),
                      "load_from_cache_file": False})
            before = os.environ.get("TOKENIZERS_PARALLELISM")
            ds = ds.map(encode, batched=True, batch_size=batch, writer_batch_size=batch,
                        num_proc=num_proc, remove_columns=["text"], features=features,
                        **where)
            # map(num_proc=) sets TOKENIZERS_PARALLELISM=false in this process's environment
            # for its forked workers and rebinds os.environ to a copy taken before, which
            # leaves the variable set where the tokenizer reads it: every later row here
            # would encode on one thread
            if before is None:
                os.environ.pop("TOKENIZERS_PARALLELISM", None)
                os.unsetenv("TOKENIZERS_PARALLELISM")
            else:
                os.environ["TOKENIZERS_PARALLELISM"] = before
                os.putenv("TOKENIZERS_PARALLELISM", before)
            ds.to_parquet(os.path.join(cache, "out.parquet"))
        return go, cache, lambda: check_parquet(os.path.join(cache, "out.parquet"),
                                                f"datasets num_proc={num_proc}")

    def datatrove_job(tasks):
        out = os.path.join(work, "out-datatrove")

        def go():
            from datatrove.executor import LocalPipelineExecutor
            from datatrove.pipeline.readers import ParquetReader
            from datatrove.pipeline.tokens import DocumentTokenizer

            LocalPipelineExecutor(
                [ParquetReader(corpus, text_key="text", id_key="id"),
                 DocumentTokenizer(os.path.join(out, "tokens"), tok_path,
                                   shuffle_documents=False)],
                tasks=tasks, workers=tasks, logging_dir=os.path.join(out, "logs"),
                skip_completed=False).run()
            written = sum(os.path.getsize(os.path.join(root, f))
                          for root, _, files in os.walk(os.path.join(out, "tokens"))
                          for f in files if f.endswith(".ds"))
            assert written == 2 * total, (written, total)  # uint16 ids

        def check():
            # task r reads the files r, r + tasks, ... (datatrove's shard of a folder) and
            # writes {r:05d}_unshuffled.ds (uint16 ids) and .ds.index (uint64 doc ends)
            flat, lengths, order = [], [], []
            for r in range(tasks):
                base = os.path.join(out, "tokens", f"{r:05d}_unshuffled.ds")
                if not os.path.exists(base):
                    continue
                flat.append(np.fromfile(base, dtype=np.uint16))
                ends = np.fromfile(base + ".index", dtype=np.uint64).astype(np.int64)
                lengths.append(np.diff(ends, prepend=0))
                order += [np.arange(file_docs[k], file_docs[k + 1])
                          for k in range(r, len(corpus_files), tasks)]
            ref.check("datatrove", np.concatenate(flat), np.concatenate(lengths),
                      np.concatenate(order))
            return (f"{sum(map(len, lengths)):,} documents' uint16 ids in {len(flat)} .ds "
                    f"files (their .ds.index document ends)")
        return go, out, check

    def no_check(what):
        return lambda: f"not checked: {what}"

    # la.tokenize next to the tokenizer alone: each round's ratio of the two is of runs
    # side by side
    add("tokenizer", (alone, None, no_check("nothing written")), "texts in memory, no I/O")
    add("lodarrow", lodarrow(None), "its tokenizer loaded from its JSON by its first call "
        "(the warm-up), reused")
    add("tokenizer_no_ids", (encode_only, None, no_check("nothing written")), "no ids read")
    add("lodarrow_processes", lodarrow(n), "one tokenizer thread a process")
    if _version("datasets"):
        fast = (f"features= {dtype} tokens, batch_size={batch:,}, text removed; ")
        add("datasets_num_proc", hf(n, False), fast + "its Arrow cache file, then Parquet")
        add("datasets_num_proc_in_memory", hf(n, True),
            fast + "no cache file (shards' tables back by pickle), then Parquet")
        add("datasets", hf(None, False), fast + "its Arrow cache file, then Parquet")
        add("datasets_in_memory", hf(None, True), fast + "no cache file, then Parquet")
    else:
        not_run("datasets", "not run: datasets not installed")
    if _version("datatrove"):
        add("datatrove", datatrove_job(n), "its .ds token files; CPU: its workers are its "
            "forkserver's children, not counted", cpu=False)
    else:
        not_run("datatrove", "not run: datatrove not installed")
    if args.dolma and (not only or "dolma" in only):
        add("dolma", dolma_job(args.dolma, work, corpus, tok_path, n, ref, report),
            "its command (start included) on the corpus as gzipped JSON lines (its input "
            "format), one document at a time a process, an eos id appended a document (not "
            "counted); its own venv")
    else:
        not_run("dolma", args.dolma_note)
    not_run("megatron", args.megatron_note)

    by_key = {r["key"]: r for r in rows}

    def clear(out):
        if out:
            shutil.rmtree(out, ignore_errors=True)

    for key, (fn, out, check) in jobs:  # warm-up, then its output's ids checked (untimed)
        clear(out)
        fn()
        by_key[key]["verified"] = check()
        print(f"  {key:<20} {by_key[key]['verified']}", flush=True)
    for r in range(args.repeat):
        # the order reversed every other round (A B C, C B A, ...): of two rows side by
        # side, each runs first in half the rounds
        for key, (fn, out, check) in (jobs if r % 2 == 0 else jobs[::-1]):
            clear(out)
            c0, t0 = _cpu(), time.perf_counter()
            fn()
            wall, cpu = time.perf_counter() - t0, _cpu() - c0
            by_key[key]["samples"].append({"wall_s": round(wall, 4), "cpu_s": round(cpu, 3),
                                           "load": round(os.getloadavg()[0], 2)})
            print(f"  {key:<20} {wall:7.2f} s  {cpu:7.2f} cpu-s  load "
                  f"{os.getloadavg()[0]:.1f}", flush=True)
    report["rows"] = rows
    report["finished"] = _now()
    report["wall_s"] = round(time.perf_counter() - t_start, 1)
    report["load_at_end"] = round(os.getloadavg()[0], 2)
    if not args.work_dir:
        shutil.rmtree(work, ignore_errors=True)
    return report


def dolma_job(dolma, work, corpus, tok_path, processes, ref, report):
    """``dolma tokens`` (``dolma``: the command, in a venv of its own) over the corpus
    written as gzipped JSON lines, its input format; checks it wrote ``total`` ids plus an
    eos a document, and (untimed) that they are the reference's ids."""
    import csv
    import gzip

    total = ref.total

    python = os.path.join(os.path.dirname(dolma), "python")
    report["versions"]["dolma"] = dict(zip(("dolma", "tokenizers", "numpy"), subprocess.run(
        [python, "-c", ("from importlib.metadata import version as v; "
                        "print(v('dolma'), v('tokenizers'), v('numpy'))")],
        capture_output=True, text=True, check=True).stdout.split()))
    src = os.path.join(work, "corpus-jsonl")
    os.makedirs(src, exist_ok=True)
    documents = 0
    for name in sorted(os.listdir(corpus)):
        rows = pq.read_table(os.path.join(corpus, name)).to_pylist()
        documents += len(rows)
        with gzip.open(os.path.join(src, name.replace(".parquet", ".jsonl.gz")), "wt",
                       encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps({"id": str(r["id"]), "text": r["text"]}) + "\n")
    # its tokenizers (0.19) reads merges as "a b" strings, not the pairs 0.20+ writes: the
    # same merges (byte-level tokens hold no space), so the same ids
    with open(tok_path) as f:
        spec = json.load(f)
    spec["model"]["merges"] = [" ".join(m) if isinstance(m, list) else m
                               for m in spec["model"]["merges"]]
    legacy = os.path.join(work, "tokenizer-merges-as-strings.json")
    with open(legacy, "w") as f:
        json.dump(spec, f)

    out = os.path.join(work, "out-dolma")

    def go():
        run = subprocess.run(
            [dolma, "tokens", "--documents", os.path.join(src, "*.jsonl.gz"),
             "--destination", out, "--tokenizer.name_or_path", legacy,
             "--tokenizer.eos_token_id", "0", "--processes", str(processes),
             "--dtype", "uint16", "--seed", "0"], capture_output=True, text=True, check=False)
        if run.returncode:
            raise RuntimeError(f"dolma tokens failed: {run.stderr[-2000:]}")
        written = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out)
                      if f.endswith(".npy"))
        assert written == 2 * (total + documents), (written, total, documents)

    def check():
        # each part-*.npy (uint16 ids) has a .csv.gz of rows start, end, id, src, loc (its
        # documents in the order written, shuffled); each document's ids, then eos 0
        flat, lengths, order, parts = [], [], [], 0
        for name in sorted(os.listdir(out)):
            if not name.endswith(".npy"):
                continue
            ids = np.fromfile(os.path.join(out, name), dtype=np.uint16)
            meta = os.path.join(out, name[:-len(".npy")] + ".csv.gz")
            with gzip.open(meta, "rt", newline="") as f:
                for start, end, doc, _src, _loc in csv.reader(f):
                    start, end = int(start), int(end)
                    assert ids[end - 1] == 0, ("dolma: no eos", doc)
                    flat.append(ids[start:end - 1])
                    lengths.append(end - 1 - start)
                    order.append(int(doc))
            parts += 1
        ref.check("dolma", np.concatenate(flat), np.array(lengths), np.array(order))
        return (f"{len(order):,} documents' uint16 ids (each then eos 0) in {parts} .npy "
                f"files, by the ids and offsets of their .csv.gz")
    return go, out, check


# ============================================================================ reporting
def figures(report):
    """Per row that ran: best and median wall, CPU of the best run, tokens/s and the ratios
    to the tokenizer alone (above 1: faster than it).  Recomputed from the samples."""
    total = report["corpus"]["tokens"]
    rows = {r["key"]: r for r in report["rows"]}
    ref = rows.get("tokenizer")
    out = {}
    for key, r in rows.items():
        if not r["samples"]:
            continue
        walls = [s["wall_s"] for s in r["samples"]]
        best = min(range(len(walls)), key=walls.__getitem__)
        f = {"best_s": walls[best], "median_s": statistics.median(walls),
             "cpu_s": r["samples"][best]["cpu_s"] if r.get("cpu_counted") else None,
             "tokens_per_s": total / walls[best],
             "load": (min(s["load"] for s in r["samples"]),
                      max(s["load"] for s in r["samples"]))}
        if ref and ref["samples"]:
            rw = [s["wall_s"] for s in ref["samples"]]
            f["speed"] = min(rw) / walls[best]
            rounds = [a / b for a, b in zip(rw, walls)]
            f["speed_per_round"] = statistics.median(rounds)
            f["speed_rounds"] = (min(rounds), max(rounds))
            if f["cpu_s"]:
                f["cpu_work"] = ref["samples"][min(range(len(rw)), key=rw.__getitem__)][
                    "cpu_s"] / f["cpu_s"]
        out[key] = f
    return out


def paired(report, num, den):
    """Per round, row ``num``'s wall time over row ``den``'s in the same round (the two
    runs side by side), or None when either did not run."""
    rows = {r["key"]: r for r in report["rows"]}
    a, b = rows.get(num), rows.get(den)
    if not (a and b and a["samples"] and b["samples"]):
        return None
    return [x["wall_s"] / y["wall_s"] for x, y in zip(a["samples"], b["samples"])]


def verdict(ratios, level):
    """"above" when every paired ratio is above ``level``, "below" when every one is
    below, else "not resolved" (the rounds disagree)."""
    if all(r > level for r in ratios):
        return "above"
    if all(r < level for r in ratios):
        return "below"
    return "not resolved"


def claims(report):
    """The statements the docs make from this run, each computed from the JSON's samples:
    every comparison from the paired (same-round) ratios, said to hold only when every
    round agrees."""
    fig = figures(report)
    rows = report["rows"]
    lod = fig.get("lodarrow")
    goal = report["settings"]["goal"]
    peers = [r for r in rows if r["kind"] == "peer"]
    ran = [r for r in peers if r["samples"]]
    out = {"peers": len(peers), "peers_run": len(ran),
           "peers_not_run": [r["key"] for r in peers if not r["samples"]]}
    if lod:
        # the limit: the tokenizer's own batch encode (no ids read), and encode + ids;
        # speed = its wall over la.tokenize's, per round
        out["limits"] = {}
        for key in ("tokenizer_no_ids", "tokenizer"):
            ratios = paired(report, key, "lodarrow")
            if ratios:
                out["limits"][key] = {"ratios": ratios, "goal": verdict(ratios, goal),
                                      "cpu_work": fig[key].get("cpu_s") and lod.get("cpu_s")
                                      and fig[key]["cpu_s"] / lod["cpu_s"]}
        out["cpu_work"] = lod.get("cpu_work")
        out["leads"] = {r["key"]: paired(report, r["key"], "lodarrow") for r in ran}
        out["ahead_of"] = sum(verdict(v, 1) == "above" for v in out["leads"].values())
        out["behind"] = sum(verdict(v, 1) == "below" for v in out["leads"].values())
        if "lodarrow_processes" in fig:
            out["threads_over_processes"] = paired(report, "lodarrow_processes", "lodarrow")
    return out


def _range(ratios):
    return f"{min(ratios):.2f}x-{max(ratios):.2f}x"


def _x(v):
    return "—" if v is None else f"{v:.2f}"


def order_words(report):
    """How the JSON's rounds were ordered (runs from before the order alternated do not
    record it)."""
    if report["settings"].get("order") != "alternating":
        return ""
    return ", the order reversed every other round"


def load_words(report):
    """Where the tokenizer's load is, as the JSON's run loaded it."""
    c = report["corpus"]
    if report["settings"].get("tokenizer_loads") == "once a process":
        return (f"every in-process row encodes with a tokenizer loaded from its JSON once "
                f"({c['tokenizer_load_s']:.2f} s), warmed by its warm-up run: the tokenizer "
                f"alone's and `datasets`' by this harness, `la.tokenize`'s by its first call, "
                f"which later calls reuse")
    return (f"loading the tokenizer from its JSON (in `la.tokenize`'s rows, not in the "
            f"tokenizer alone's) took {c['tokenizer_load_s']:.2f} s")


def markdown(report):
    from lodarrow._bench._docs import changes_words

    m, c, v, rev = report["machine"], report["corpus"], report["versions"], report["lodarrow"]
    fig, cl = figures(report), claims(report)
    changes = changes_words(rev)  # the changed files, where the JSON records them
    loads = [s["load"] for r in report["rows"] if r["samples"] for s in r["samples"]]
    dolma = v.get("dolma")
    machine_line = (
        f"Commit {rev['commit'] or '?'}{changes} (lodarrow {rev['version']}); "
        f"{m['cpu_model']}, {m['cpus']} CPUs usable ({m['cpus_online']} online), "
        f"{m['platform']}; {report['started']} to {report['finished']} "
        f"({report['wall_s'] / 60:.1f} min); 1-minute load average {m['load_at_start']:.1f} at "
        f"the start, {min(loads, default=0):.1f}-{max(loads, default=0):.1f} after each run, "
        f"{report['load_at_end']:.1f} at the end (a shared machine: other jobs' load).  "
        f"Python {v['python']}, tokenizers {v['tokenizers']}, pyarrow {v['pyarrow']}, NumPy "
        f"{v['numpy']}, datasets {v['datasets'] or '—'}, datatrove {v['datatrove'] or '—'}"
        + (f"; dolma {dolma['dolma']} in a venv of its own (tokenizers {dolma['tokenizers']}, "
           f"NumPy {dolma['numpy']})" if dolma else "") + ".")
    corpus_line = (
        f"Corpus: {c['documents']:,} documents in {c['files']} Parquet files, "
        f"{c['text_mb']:.1f} MB of text, {c['tokens']:,} tokens; a {c['vocab']:,}-id "
        f"{c['tokenizer']}; batches of {c['batch_rows']:,} documents; {load_words(report)}.  "
        f"Each row: the fastest of the "
        f"{report['settings']['repeat']} runs after a warm-up, the rows in turn (round "
        f"robin{order_words(report)}); speed is the tokenizer alone's best over the row's "
        f"best, per round the median of each round's ratio; CPU work is the tokenizer alone's CPU seconds over the "
        f"row's (above 1: less work a token than the tokenizer alone).")
    header = ("| run | wall s (best) | median | M tokens/s | speed vs the tokenizer alone | "
              "per round | CPU s | CPU work vs the tokenizer alone | load | note |")
    note = f" ({report['note']})" if report["note"] else ""
    lines = [f"Command: `{report['command']}`{note}", "", machine_line, "", corpus_line, "",
             header, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |"]
    for r in report["rows"]:
        f = fig.get(r["key"])
        if f is None:
            lines.append(f"| {r['name']} | | | | | | | | | {r['note']} |")
            continue
        lines.append(
            f"| {r['name']} | {f['best_s']:.2f} | {f['median_s']:.2f} | "
            f"{f['tokens_per_s'] / 1e6:.2f} | {_x(f.get('speed'))} | "
            f"{_x(f.get('speed_per_round'))} | "
            + (f"{f['cpu_s']:.2f} | {_x(f.get('cpu_work'))} | " if f["cpu_s"] else "n/a | | ")
            + f"{f['load'][0]:.1f}-{f['load'][1]:.1f} | {r['note']} |")
    lines.append("")
    goal = report["settings"]["goal"]
    for key, lim in cl.get("limits", {}).items():
        said = {"above": f"at or above the {goal}x goal in every round",
                "below": f"below the {goal}x goal in every round",
                "not resolved": f"the {goal}x goal not resolved in this run"}[lim["goal"]]
        cpu = (f"; CPU work a token: the tokenizer's CPU seconds over `la.tokenize`'s "
               f"{lim['cpu_work']:.3f}x" if lim["cpu_work"] else "")
        lines.append(f"- `la.tokenize` end to end against the {TITLES[key][0]}: paired ratios "
                     f"(its wall time over `la.tokenize`'s, each round) "
                     f"{', '.join(f'{r:.2f}x' for r in lim['ratios'])}: {said}{cpu}.")
    if "threads_over_processes" in cl:
        ratios = cl["threads_over_processes"]
        lines.append(f"- Threads against processes: `processes={report['settings']['processes']}`"
                     f"'s wall time over the default's, each round, {_range(ratios)}"
                     + {"above": ": the default faster in every round.",
                        "below": ": `processes=` faster in every round.",
                        "not resolved": ": not resolved in this run."}[verdict(ratios, 1)])
    if cl.get("leads") is not None:
        parts = []
        names = {r["key"]: r["name"] for r in report["rows"]}  # as the JSON names them
        for k, v in cl["leads"].items():
            said = {"above": "ahead", "below": "behind",
                    "not resolved": "not resolved in this run"}[verdict(v, 1)]
            parts.append(f"{names[k]} {_range(v)} ({said})")
        lines.append(f"- Peers (each one's wall time over `la.tokenize`'s in the same round; "
                     f"ahead only when every round is above 1): `la.tokenize` ahead of "
                     f"{cl['ahead_of']} of the {cl['peers_run']} peer rows that ran, behind "
                     f"{cl['behind']}, the others not resolved ({'; '.join(parts)}); "
                     f"{len(cl['peers_not_run'])} of {cl['peers']} did not run (said in the "
                     f"table).")
    checked = [r for r in report["rows"] if r.get("verified") and r["samples"]
               and not r["verified"].startswith("not checked")]
    if checked:  # JSON from before the outputs were checked holds no "verified"
        lines.append("- Outputs checked after the warm-up (untimed) to hold, document by "
                     "document, the tokenizer's `encode_batch_fast` ids (`la.tokenize`'s "
                     f"too): {len(checked)} of the "
                     f"{sum(1 for r in report['rows'] if r['samples'])} rows that ran ("
                     + "; ".join(f"{r['name']}: {r['verified']}" for r in checked) + ").")
    sources = report.get("sources")
    lines.append("- Sources: " + ("; ".join(f"`{k}` SHA-256 {v[:12]}" for k, v in
                                            sources.items()) if sources else
                                 "SHA-256 of `benchmarks/tokenization.py` and "
                                 "`lodarrow/_tables/_tokenize.py` not recorded (run before "
                                 "the JSON held them)") + ".")
    return "\n".join(lines) + "\n"


def write_docs(path, table):
    """Replace the generated section of ``path`` (between the markers), or append it under
    ``## Measured``."""
    path = Path(path)
    text = path.read_text() if path.exists() else ""
    block = f"{BEGIN}\n\n{table}\n{END}"
    mark = BEGIN.split(":")[0]
    if mark in text and END in text:
        a, b = text.index(mark), text.index(END) + len(END)
        text = text[:a] + block + text[b:]
    else:
        text = text.rstrip("\n") + "\n\n## Measured\n\n" + block + "\n"
    path.write_text(text)


def generated(path):
    """The generated section of the Markdown file ``path`` (between the markers), or None."""
    text = Path(path).read_text()
    mark = BEGIN.split(":")[0]
    if mark not in text or END not in text:
        return None
    a = text.index("\n", text.index(mark)) + 1
    return text[a:text.index(END)].strip("\n") + "\n"



# -- peak memory (``--memory``) ------------------------------------------------------------

#: The key of the peak-memory block of docs/tokenize.md, and how it is written again.
MEMORY_BLOCK = "tokenize-memory"
MEMORY_FROM_JSON = ("python benchmarks/tokenization.py --from-json "
                    "benchmarks/results/tokenize_memory.json --docs docs/tokenize.md")
MEMORY_MEASURE = ("python benchmarks/tokenization.py --memory 10,20 --json "
                  "benchmarks/results/tokenize_memory.json --docs docs/tokenize.md")

#: Run in a fresh interpreter per file: load the tokenizer, note the peak RSS so far (Python,
#: pyarrow, lodarrow and the tokenizer loaded), ``la.tokenize`` the file, note the peak again.
_CHILD = """
import json, resource, sys, time

def hwm():
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

import pyarrow, tokenizers
import lodarrow as la
tok = tokenizers.Tokenizer.from_file(sys.argv[3])
base = hwm()
t0 = time.perf_counter()
la.tokenize(sys.argv[1], sys.argv[2], tok, progress=False)
seconds = time.perf_counter() - t0
print(json.dumps({"baseline": base, "peak": hwm(), "seconds": seconds}))
"""


def jsonl_files(root, sizes, seed=0):
    """JSON lines files of about ``sizes`` bytes each (``{"text": ...}`` a line), prefixes of
    one stream of make_corpus's documents: ``[(path, bytes, documents), ...]``."""
    texts, out = [], []
    while True:
        lines = [json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts]
        total = sum(len(x.encode()) for x in lines)
        if total >= max(sizes):
            break
        more = max(1000, int((max(sizes) - total) / (total / len(texts) if texts else 1500)) + 100)
        texts += make_corpus(os.path.join(root, f"gen-{len(texts)}"), more, 1,
                             seed=seed + len(texts))
    for size in sizes:
        path, n, done = os.path.join(root, f"corpus-{size}.jsonl"), 0, 0
        with open(path, "w", encoding="utf-8") as fh:
            for line in lines:
                if done >= size:
                    break
                fh.write(line)
                done += len(line.encode())
                n += 1
        out.append((path, os.path.getsize(path), n))
    return out, texts


def measure_memory(args):
    """``la.tokenize``'s peak RSS on JSON lines files of the ``--memory`` sizes (MB), each in
    a fresh process, with the peak before it ran (the interpreter with its imports)."""
    import lodarrow as la
    from lodarrow._bench._docs import command_line, run_record

    sizes = [int(float(x) * 1e6) for x in args.memory.split(",") if x.strip()]
    report = {"kind": "tokenize-memory",
              **run_record(command_line("benchmarks/tokenization.py", args.argv),
                           ("numpy", "pyarrow", "lodarrow", "tokenizers")),
              "settings": {"sizes": sizes, "vocab": args.vocab, "tokenizer": "byte-level BPE",
                           "LODARROW_NUM_THREADS": os.environ.get("LODARROW_NUM_THREADS")},
              "rows": []}
    work = tempfile.mkdtemp(prefix="lodarrow-tok-mem-", dir=args.work_dir)
    try:
        files, texts = jsonl_files(work, sizes)
        tok_path = os.path.join(work, "tokenizer.json")
        train_tokenizer(texts, args.vocab, tok_path)
        pypath = os.pathsep.join([str(ROOT)] + [p for p in os.environ.get(
            "PYTHONPATH", "").split(os.pathsep) if p])
        for path, nbytes, docs in files:
            out = os.path.join(work, "out-" + os.path.basename(path))
            load = os.getloadavg()[0]
            proc = subprocess.run([sys.executable, "-c", _CHILD, path, out, tok_path],
                                  capture_output=True, text=True, cwd=work,
                                  env=dict(os.environ, PYTHONPATH=pypath))
            if proc.returncode:
                raise RuntimeError(f"the memory run of {path} failed:\n{proc.stderr[-3000:]}")
            got = json.loads(proc.stdout.strip().splitlines()[-1])
            tokens = int(la.sequence_lengths(out, "tokens", cache_dir=False).sum())
            report["rows"].append(dict(got, bytes=nbytes, documents=docs, tokens=tokens,
                                       load=[load, os.getloadavg()[0]]))
            shutil.rmtree(out, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report["finished"] = _now()
    report["load_at_end"] = os.getloadavg()[0]
    return report


def memory_markdown(report):
    """The ``tokenize-memory`` block: the run, one row a file, the growth between them."""
    from lodarrow._bench._docs import run_header

    mb = lambda b: f"{b / 1e6:,.0f} MB" if b >= 1e8 else f"{b / 1e6:,.1f} MB"  # noqa: E731
    rows = report["rows"]
    lines = run_header(report) + [
             f"Each file tokenized by `la.tokenize` (its defaults) in a fresh process, with a "
             f"{report['settings']['tokenizer']} of {report['settings']['vocab']:,} ids trained "
             f"here; peak RSS from the process's `VmHWM`, before `la.tokenize` (Python with "
             f"pyarrow, lodarrow and the tokenizer loaded) and at its end:", "",
             "| JSON lines file | documents | tokens | tokens a byte | peak RSS before | "
             "peak RSS at the end | seconds |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(f"| {mb(r['bytes'])} | {r['documents']:,} | {r['tokens']:,} | "
                     f"{r['tokens'] / r['bytes']:.2f} | {mb(r['baseline'])} | {mb(r['peak'])} | "
                     f"{r['seconds']:.1f} |")
    if len(rows) >= 2:
        a, b = rows[0], rows[-1]
        lines += ["", f"From the {mb(a['bytes'])} file to the {mb(b['bytes'])} one "
                      f"({b['bytes'] / a['bytes']:.1f}x the bytes) the peak grew by "
                      f"{mb(b['peak'] - a['peak'])} ({(b['peak'] / a['peak'] - 1) * 100:.0f}%); "
                      f"`la.tokenize` added {mb(a['peak'] - a['baseline'])} and "
                      f"{mb(b['peak'] - b['baseline'])} to the peak of the process before it."]
    return "\n".join(lines) + "\n"


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--documents", type=int, default=100_000)
    p.add_argument("--files", type=int, default=4)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--processes", type=int, default=os.cpu_count())
    p.add_argument("--only", default="", help="comma-separated row keys to run: "
                   + ", ".join(TITLES))
    p.add_argument("--work-dir", default=None)
    p.add_argument("--note", default="", help="a sentence about this run, into the JSON")
    p.add_argument("--dolma", default=None,
                   help="the dolma command of a venv holding dolma (its pins: numpy<2, "
                        "tokenizers<=0.19.1): dolma's row")
    p.add_argument("--dolma-note", default=DOLMA_NOTE, help="why dolma's row did not run")
    p.add_argument("--megatron-note", default=MEGATRON_NOTE,
                   help="why Megatron's row did not run")
    p.add_argument("--json", help="write everything measured here")
    p.add_argument("--markdown", help="write the generated tables here")
    p.add_argument("--docs", help="replace the generated section of this Markdown file")
    p.add_argument("--from-json", help="measure nothing: the tables from this JSON")
    p.add_argument("--memory", default=None, metavar="MB,MB",
                   help="measure only la.tokenize's peak RSS, on JSON lines files of these "
                        "sizes (MB), each in a fresh process: its own JSON, and the "
                        "tokenize-memory block of --docs")
    args = p.parse_args(argv)
    args.argv = list(argv)
    if args.repeat < 1:
        p.error("--repeat must be >= 1")
    return args


def main(argv=None):
    args = parse(sys.argv[1:] if argv is None else argv)
    from lodarrow._bench._docs import publish, report_of

    report = report_of(args, lambda args: measure_memory(args) if args.memory else measure(args))
    if report.get("kind") == "tokenize-memory":  # --memory's JSON: its own block
        table = memory_markdown(report)
        publish(args, table, [("docs", MEMORY_BLOCK, MEMORY_FROM_JSON, table)])
        return report
    table = markdown(report)
    publish(args, table)
    if args.docs:
        write_docs(args.docs, table)
    return report


if __name__ == "__main__":
    main()
