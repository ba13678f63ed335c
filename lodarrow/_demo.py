"""``python -m lodarrow demo``: an end-to-end pipeline on a built-in synthetic corpus.

Documents -> sentences -> tokens (token ids and small embeddings, a few hundred thousand
tokens, fixed seed).  The demo builds the LoDTensors, round-trips them through Arrow and
Parquet, runs the operators (expand a per-document feature to tokens, pool tokens to sentences
and sentences to documents, pad to dense and back, scatter per-sentence updates, softmax),
checks every result against plain NumPy, prints the examples of the Paddle documentation with
lodarrow's results, and ends with a timing table.

Uses ``rich`` for colour, tables and progress bars when it is installed, plain text otherwise.
Returns False (exit status 1) if any check fails; a step whose operator this build lacks is
reported as skipped.
"""

import os
import tempfile
import time

import numpy as np

from lodarrow._progress import task_progress

__all__ = ["run_demo", "make_corpus", "DEFAULT_DOCS", "DEFAULT_SEED"]

DEFAULT_SEED = 2024
DEFAULT_DOCS = 3000  # about 290k tokens
VOCAB = 8000
EMBED_DIM = 16
HASH_BUCKETS = 64


class CheckFailed(AssertionError):
    """A demo check did not hold."""


class _Skip(Exception):
    """A step cannot run (an earlier step it needs did not produce its input)."""


def _lengths(rng, n, mean, p_empty):
    lengths = rng.geometric(1.0 / (mean / (1.0 - p_empty)), size=n).astype(np.int64)
    lengths[rng.random(n) < p_empty] = 0
    return lengths


def _offsets(lengths):
    off = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=off[1:])
    return off


def make_corpus(n_docs=DEFAULT_DOCS, seed=DEFAULT_SEED, chunk_done=None):
    """The synthetic corpus as plain NumPy: a dict of ids, embeddings and offsets.

    Documents have geometric numbers of sentences (mean 8, 2% empty documents), sentences
    geometric numbers of tokens (mean 12, 5% empty); token ids are Zipf-distributed over a
    vocabulary of 8000 and each token carries the 16-float embedding of its id.
    """
    rng = np.random.default_rng(seed)
    sent_per_doc = _lengths(rng, n_docs, 8.0, 0.02)
    n_sent = int(sent_per_doc.sum())
    tok_per_sent = _lengths(rng, n_sent, 12.0, 0.05)
    n_tok = int(tok_per_sent.sum())
    table = (0.1 * rng.standard_normal((VOCAB, EMBED_DIM))).astype(np.float32)
    ids = np.empty(n_tok, dtype=np.int64)
    emb = np.empty((n_tok, EMBED_DIM), dtype=np.float32)
    chunks = 20
    bounds = np.linspace(0, n_tok, chunks + 1).astype(np.int64)
    for k in range(chunks):  # in chunks, so a progress bar can follow
        a, b = bounds[k], bounds[k + 1]
        ids[a:b] = np.minimum(rng.zipf(1.3, size=b - a), VOCAB) - 1
        emb[a:b] = table[ids[a:b]]
        if chunk_done:
            chunk_done(1 / chunks)
    doc_off = _offsets(sent_per_doc)
    sent_off = _offsets(tok_per_sent)
    return {
        "ids": ids, "emb": emb, "doc_offsets": doc_off, "sent_offsets": sent_off,
        "doc_token_offsets": sent_off[doc_off],  # composed: tokens per document
        "doc_feature": rng.uniform(1990, 2024, size=n_docs).astype(np.float32),
        "query": rng.standard_normal(EMBED_DIM).astype(np.float32),
    }


# ====================================================================== output
class _Out:
    """Rich output when available, plain print otherwise."""

    def __init__(self, progress=True):
        try:
            from rich.console import Console
        except ImportError:
            self.console = None
        else:
            self.console = Console(highlight=False)
        self.progress_enabled = progress

    def rule(self, title):
        if self.console:
            self.console.rule(f"[bold]{title}")
        else:
            print(f"\n== {title} ==")

    def text(self, text, style=None):
        if self.console:
            self.console.print(text, style=style, markup=False)
        else:
            print(text)

    def status(self, ok, name, detail, seconds):
        mark = {"ok": "PASS", "fail": "FAIL", "skip": "SKIP"}[ok]
        t = f" ({seconds * 1e3:.1f} ms)" if seconds else ""
        line = f"{mark}  {name}{t}: {detail}"
        style = {"ok": "green", "fail": "bold red", "skip": "yellow"}[ok]
        self.text(line, style=style)

    def table(self, title, headers, rows):
        if self.console:
            from rich.table import Table

            table = Table(title=title, title_justify="left")
            for k, h in enumerate(headers):
                table.add_column(h, justify="left" if k == 0 else "right")
            for row in rows:
                table.add_row(*row)
            self.console.print(table)
        else:
            print(f"\n{title}")
            widths = [max(len(h), *(len(r[k]) for r in rows)) if rows else len(h)
                      for k, h in enumerate(headers)]
            print("  ".join(h.ljust(w) for h, w in zip(headers, widths)))
            for row in rows:
                print("  ".join(c.ljust(w) for c, w in zip(row, widths)))

    def progress(self):
        return task_progress(self.console, self.console is not None and self.progress_enabled)


# ====================================================================== checks
def _check(cond, message):
    if not cond:
        raise CheckFailed(message)


def _check_equal(got, expected, what):
    got, expected = np.asarray(got), np.asarray(expected)
    _check(got.shape == expected.shape, f"{what}: shape {got.shape}, expected {expected.shape}")
    bad = np.flatnonzero(got.reshape(-1) != expected.reshape(-1))
    _check(bad.size == 0, f"{what}: {bad.size} values differ (first at flat index "
           f"{bad[0] if bad.size else -1})")


def _check_close(got, expected, what, rtol=1e-5, atol=1e-6):
    got, expected = np.asarray(got, dtype=np.float64), np.asarray(expected, dtype=np.float64)
    _check(got.shape == expected.shape, f"{what}: shape {got.shape}, expected {expected.shape}")
    ok = np.isclose(got, expected, rtol=rtol, atol=atol)
    _check(ok.all(), f"{what}: {int((~ok).sum())} values differ (first at flat index "
           f"{int(np.flatnonzero(~ok.reshape(-1))[0]) if (~ok).any() else -1})")


def _check_lod(t, expected, what):
    got = t.lod()
    want = [list(map(int, level)) for level in expected]
    _check(got == want, f"{what}: LoD {str(got)[:80]} differs from {str(want)[:80]}")


def _segment_reduce(values, offsets, kind):
    """NumPy reference: per-sequence sum/average/max over rows, 0 for empty sequences."""
    lengths = np.diff(offsets)
    nonempty = lengths > 0
    out = np.zeros((len(lengths),) + values.shape[1:], dtype=np.float64)
    if nonempty.any():
        ufunc = np.maximum if kind == "max" else np.add
        red = ufunc.reduceat(values.astype(np.float64), offsets[:-1][nonempty], axis=0)
        if kind == "average":
            red = red / lengths[nonempty].reshape((-1,) + (1,) * (values.ndim - 1))
        out[nonempty] = red
    return out


# ====================================================================== the pipeline
class _Pipeline:
    def __init__(self, out, n_docs, seed):
        self.out = out
        self.n_docs = n_docs
        self.seed = seed
        self.state = {}
        self.timings = []  # (step, seconds, size, status)
        self.failed = 0
        self.skipped = 0

    def clock(self, fn):
        """Call ``fn()`` and add its time to the current step's."""
        t0 = time.perf_counter()
        result = fn()
        self._op_time += time.perf_counter() - t0
        return result

    def step(self, name, fn, size=""):
        self._op_time = 0.0
        try:
            detail = fn()
            status = "ok"
        except CheckFailed as exc:
            status, detail = "fail", str(exc)
        except NotImplementedError:
            status, detail = "skip", "not implemented in this build"
        except _Skip as exc:
            status, detail = "skip", str(exc)
        except Exception as exc:  # an operator crashing is a failed check, not a demo crash
            status, detail = "fail", f"{exc.__class__.__name__}: {exc}"
        self.failed += status == "fail"
        self.skipped += status == "skip"
        self.out.status(status, name, detail, self._op_time if status == "ok" else None)
        self.timings.append((name, self._op_time if status == "ok" else None, size, status))
        return status == "ok"

    def need(self, *keys):
        missing = [k for k in keys if k not in self.state]
        if missing:
            raise _Skip(f"needs {', '.join(missing)} from an earlier step")
        return [self.state[k] for k in keys]


def run_demo(n_docs=DEFAULT_DOCS, seed=DEFAULT_SEED, progress=True):
    """Run the demo, printing as it goes; return True if every check passed."""
    import lodarrow

    out = _Out(progress)
    p = _Pipeline(out, n_docs, seed)
    t_start = time.perf_counter()
    out.rule("lodarrow demo: documents -> sentences -> tokens")

    with out.progress() as bar:
        task = bar.add_task("generating the corpus", total=1.0)
        t0 = time.perf_counter()
        c = make_corpus(n_docs, seed, chunk_done=lambda f: bar.advance(task, f))
        p.timings.append(("generate the corpus", time.perf_counter() - t0, "", "ok"))
    n_tok, n_sent = len(c["ids"]), len(c["sent_offsets"]) - 1
    out.text(f"corpus (seed {seed}): {n_docs} documents, {n_sent} sentences, {n_tok} tokens, "
             f"vocabulary {VOCAB}, embeddings {EMBED_DIM} x float32")
    lod2 = [c["doc_offsets"], c["sent_offsets"]]

    def build():
        tokens = p.clock(lambda: lodarrow.LoDTensor(c["ids"], lod2))
        emb = p.clock(lambda: lodarrow.LoDTensor(c["emb"], lod2))
        _check(tokens.lod_level == 2 and len(tokens) == n_docs, "token tensor shape")
        _check(emb.num_sequences(1) == n_sent, "sentence count")
        _check_lod(emb, lod2, "embeddings")
        p.state.update(tokens=tokens, emb=emb)
        return (f"tokens {tokens.shape()} int64 and embeddings {emb.shape()} float32, "
                f"2 LoD levels, lengths[0][:5] = {emb.recursive_sequence_lengths()[0][:5]}")

    def arrow_round_trip():
        tokens, emb = p.need("tokens", "emb")
        arr = p.clock(lambda: emb.to_arrow())
        back = p.clock(lambda: lodarrow.from_arrow(arr))
        _check(back.equals(emb), "from_arrow(to_arrow(emb)) differs from emb")
        return f"{arr.type} ({len(arr)} documents), round trip exact"

    def parquet_round_trip():
        tokens, emb = p.need("tokens", "emb")
        with tempfile.TemporaryDirectory(prefix="lodarrow-demo-") as tmp:
            path = os.path.join(tmp, "corpus.parquet")
            with out.progress() as bar2:
                t2 = bar2.add_task("writing and reading Parquet", total=2)
                p.clock(lambda: lodarrow.write_parquet(
                    {"token_ids": tokens, "embeddings": emb}, path))
                bar2.advance(t2)
                size = os.path.getsize(path)
                back = p.clock(lambda: lodarrow.read_parquet(path))
                bar2.advance(t2)
        _check(isinstance(back, dict) and set(back) == {"token_ids", "embeddings"},
               f"read_parquet returned {type(back).__name__}")
        _check(back["token_ids"].equals(tokens), "token_ids changed in the Parquet round trip")
        _check(back["embeddings"].equals(emb), "embeddings changed in the Parquet round trip")
        return f"2 columns, {size / 2**20:.1f} MiB on disk, round trip exact"

    def expand():
        tokens, = p.need("tokens")
        per_doc = lodarrow.LoDTensor(c["ids"], [c["doc_token_offsets"]])  # tokens per document
        got = p.clock(lambda: lodarrow.sequence_expand(c["doc_feature"], per_doc))
        expected = np.repeat(c["doc_feature"], np.diff(c["doc_token_offsets"]))
        _check_equal(np.asarray(got).reshape(-1), expected, "expanded document feature")
        return f"document year -> {len(expected)} tokens (ref_level -1 over composed offsets)"

    def pool_sentences():
        emb, = p.need("emb")
        got = p.clock(lambda: lodarrow.sequence_pool(emb, "average"))
        _check_close(got.numpy(), _segment_reduce(c["emb"], c["sent_offsets"], "average"),
                     "sentence means", rtol=1e-4, atol=1e-6)
        _check_lod(got, [c["doc_offsets"]], "pooled sentences")
        p.state["sent_emb"] = got
        return f"average over tokens -> {got.shape()}, keeps the document level"

    def pool_documents():
        sent_emb, = p.need("sent_emb")
        got = p.clock(lambda: lodarrow.sequence_pool(sent_emb, "max"))
        expected = _segment_reduce(sent_emb.numpy(), c["doc_offsets"], "max")
        _check_close(got.numpy(), expected, "document max", rtol=0, atol=0)
        p.state["doc_emb"] = got
        return f"max over sentences -> {got.shape()}"

    def pad_unpad():
        x = lodarrow.LoDTensor(c["emb"], [c["sent_offsets"]])
        padded, length = p.clock(lambda: lodarrow.sequence_pad(x, 0.0))
        dense = np.asarray(padded)
        lengths = np.asarray(length).reshape(-1)
        width = int(np.diff(c["sent_offsets"]).max())
        _check(dense.shape == (n_sent, width, EMBED_DIM), f"padded shape {dense.shape}")
        _check_equal(lengths, np.diff(c["sent_offsets"]), "pad lengths")
        mask = np.arange(width) < lengths[:, None]
        _check(not dense[~mask].any(), "padding is not all pad_value")
        back = p.clock(lambda: lodarrow.sequence_unpad(dense, lengths))
        _check_equal(back.numpy(), c["emb"], "unpadded data")
        _check_lod(back, [c["sent_offsets"]], "unpadded")
        return f"{n_sent} sentences -> dense {dense.shape} -> back, exact"

    def scatter():
        ids_lod = [c["sent_offsets"]]
        index = lodarrow.LoDTensor((c["ids"] % HASH_BUCKETS).reshape(-1, 1), ids_lod)
        updates = lodarrow.LoDTensor(np.ones((n_tok, 1), dtype=np.float32), ids_lod)
        base = np.zeros((n_sent, HASH_BUCKETS), dtype=np.float32)
        got = p.clock(lambda: lodarrow.sequence_scatter(base, index, updates))
        expected = np.zeros_like(base)
        np.add.at(expected, (np.repeat(np.arange(n_sent), np.diff(c["sent_offsets"])),
                             c["ids"] % HASH_BUCKETS), 1.0)
        _check_equal(np.asarray(got), expected, "hashed bag of words")
        _check(not base.any(), "sequence_scatter modified its input")
        return f"hashed bag of words per sentence -> {expected.shape}, {int(expected.sum())} counts"

    def softmax():
        scores = c["emb"] @ c["query"]
        x = lodarrow.LoDTensor(scores, lod2)
        got = p.clock(lambda: lodarrow.sequence_softmax(x))
        _check_lod(got, lod2, "softmax output")
        w = got.numpy().reshape(-1).astype(np.float64)
        off = c["sent_offsets"]
        lengths = np.diff(off)
        m = _segment_reduce(scores, off, "max")
        e = np.exp(scores - np.repeat(m, lengths))
        s = _segment_reduce(e, off, "sum")
        _check_close(w, e / np.repeat(s, lengths), "attention weights", rtol=1e-4, atol=1e-7)
        sums = _segment_reduce(w, off, "sum")[lengths > 0]
        _check_close(sums, np.ones_like(sums), "weights per sentence sum to 1", rtol=1e-5)
        return f"attention over each sentence's tokens, {int((lengths > 0).sum())} sentences"

    steps = [
        ("build LoDTensors", build, f"{n_tok} rows"),
        ("Arrow round trip", arrow_round_trip, f"{n_tok} rows"),
        ("Parquet write + read", parquet_round_trip, f"{n_tok} rows x 2"),
        ("sequence_expand doc -> tokens", expand, f"{n_tok} rows"),
        ("sequence_pool tokens -> sentences", pool_sentences, f"{n_tok} rows"),
        ("sequence_pool sentences -> docs", pool_documents, f"{n_sent} rows"),
        ("sequence_pad + sequence_unpad", pad_unpad, f"{n_tok} rows"),
        ("sequence_scatter", scatter, f"{n_tok} updates"),
        ("sequence_softmax", softmax, f"{n_tok} rows"),
    ]
    out.rule("pipeline")
    with out.progress() as bar:
        task = bar.add_task("pipeline", total=len(steps))
        for name, fn, size in steps:
            bar.update(task, description=name)
            p.step(name, fn, size)
            bar.advance(task)

    out.rule("examples of the PaddlePaddle documentation")
    for name, fn in _seed_examples(lodarrow):
        p.step(name, lambda fn=fn: _show(out, fn()))

    out.rule("timing")
    rows = []
    for name, seconds, size, status in p.timings:
        if name.startswith("seed"):
            continue
        check = {"ok": "pass", "fail": "FAIL", "skip": "skipped"}[status]
        rows.append((name, size, f"{seconds * 1e3:.2f}" if seconds is not None else "-",
                     "-" if name == "generate the corpus" else check))
    out.table("timing (operator calls only; checks excluded)",
              ("step", "size", "ms", "check"), rows)
    total = time.perf_counter() - t_start
    passed = sum(1 for t in p.timings[1:] if t[3] == "ok")
    summary = (f"{passed} checks passed, {p.failed} failed, {p.skipped} skipped "
               f"in {total:.1f} s")
    out.text(summary, style="bold red" if p.failed else "bold green")
    return p.failed == 0


def _show(out, shown):
    """Print (title, text) pairs and return the one-line verdict."""
    lines, verdict = shown
    for title, text in lines:
        out.text(f"  {title}:")
        for line in str(text).splitlines():
            out.text(f"    {line}")
    return verdict


def _seed_examples(lodarrow):
    """The seed documents' examples: each a function returning ([(title, text)], verdict)."""

    def seed001():
        y = lodarrow.create_lod_tensor(np.arange(1, 15, dtype=np.int64).reshape(7, 2),
                                       [[2, 1], [2, 2, 3]], lodarrow.CPUPlace())
        _check(y.lod() == [[0, 2, 3], [0, 2, 4, 7]], f"y.lod() = {y.lod()}")
        b = lodarrow.create_lod_tensor(
            np.array([[1.], [3.], [2.], [4.], [6.], [5.], [1.]]), [[2, 0, 3], [1, 2, 1, 0, 3]],
            lodarrow.CPUPlace())
        _check(b.lod() == [[0, 2, 2, 5], [0, 1, 3, 4, 4, 7]], f"b.lod() = {b.lod()}")
        return ([("y = create_lod_tensor(7x2, [[2, 1], [2, 2, 3]])", y),
                 ("b.lod() for lengths [[2, 0, 3], [1, 2, 1, 0, 3]]", b.lod())],
                "lod() == [[0, 2, 3], [0, 2, 4, 7]] and [[0, 2, 2, 5], [0, 1, 3, 4, 4, 7]]")

    def seed000():
        x = lodarrow.create_lod_tensor(np.arange(1, 7, dtype=np.float32).reshape(6, 1),
                                       [[2, 3, 1]], lodarrow.CPUPlace())
        out1 = lodarrow.lod_reset(x, target_lod=[0, 4, 6])
        out2 = lodarrow.lod_reset(x, y=np.array([0, 2, 6], dtype=np.int32))
        y3 = lodarrow.create_lod_tensor(np.arange(6, dtype=np.float32).reshape(6, 1) + 1.1,
                                        [[2, 2], [2, 2, 1, 1]], lodarrow.CPUPlace())
        out3 = lodarrow.lod_reset(x, y=y3)
        _check(out1.recursive_sequence_lengths() == [[4, 2]], f"example 1: {out1.lod()}")
        _check(out2.recursive_sequence_lengths() == [[2, 4]], f"example 2: {out2.lod()}")
        _check(out3.lod() == [[0, 2, 4], [0, 2, 4, 5, 6]], f"example 3: {out3.lod()}")
        _check_equal(out3.numpy(), x.numpy(), "lod_reset data")
        return ([("lod_reset(x, target_lod=[0, 4, 6])", out1),
                 ("lod_reset(x, y=[0, 2, 6])  (plain int32 y: offsets)", out2.lod()),
                 ("lod_reset(x, y with lod [[2, 2], [2, 2, 1, 1]])", out3.lod())],
                "lengths [[4, 2]], [[2, 4]] and lod [[0, 2, 4], [0, 2, 4, 5, 6]] as documented")

    def seed003():
        x = np.ones((3, 6), dtype=np.float32)
        index = lodarrow.create_lod_tensor(
            np.array([[0], [1], [2], [5], [4], [3], [2], [1], [3], [2], [5], [4]], np.int64),
            [[3, 5, 4]], lodarrow.CPUPlace())
        updates = lodarrow.create_lod_tensor(
            np.array([[.3], [.3], [.4], [.1], [.2], [.3], [.4], [0.], [.2], [.3], [.1], [.4]],
                     np.float32), [[3, 5, 4]], lodarrow.CPUPlace())
        out = lodarrow.sequence_scatter(x, index, updates)
        expected = np.array([[1.3, 1.3, 1.4, 1.0, 1.0, 1.0],
                             [1.0, 1.0, 1.4, 1.3, 1.2, 1.1],
                             [1.0, 1.0, 1.3, 1.2, 1.4, 1.1]])
        _check_close(np.asarray(out), expected, "sequence_scatter seed example")
        return ([("sequence_scatter(ones(3, 6), index, updates)", np.asarray(out))],
                "matches the documented 3 x 6 output")

    def seed004():
        x = lodarrow.create_lod_tensor(np.array([[1], [2], [3], [4]], np.float32), [[2, 2]],
                                       lodarrow.CPUPlace())
        y = lodarrow.create_lod_tensor(np.arange(1, 9, dtype=np.float32).reshape(8, 1),
                                       [[2, 2], [3, 3, 1, 1]], lodarrow.CPUPlace())
        out1 = lodarrow.sequence_expand(x, y, ref_level=0)
        _check(out1.lod() == [[0, 2, 4, 6, 8]], f"case 1 lod {out1.lod()}")
        _check_equal(out1.numpy().reshape(-1), [1, 2, 1, 2, 3, 4, 3, 4], "case 1 data")
        x2 = np.array([[1], [2], [3]], np.float32)
        y2 = lodarrow.create_lod_tensor(np.zeros((5, 1), np.float32), [[2, 0, 3]],
                                        lodarrow.CPUPlace())
        out2 = lodarrow.sequence_expand(x2, y2)
        _check_equal(np.asarray(out2).reshape(-1), [1, 1, 3, 3, 3], "case 2 data")
        return ([("case 1: sequence_expand(x, y, ref_level=0)", out1),
                 ("case 2: sequence_expand([[a], [b], [c]], y lod [[2, 0, 3]])",
                  np.asarray(out2).reshape(-1))],
                "case 1 a b a b c d c d with lod {0, 2, 4, 6, 8}; case 2 a a c c c")

    return [("seed 001: LoDTensor levels", seed001), ("seed 000: lod_reset", seed000),
            ("seed 003: sequence_scatter", seed003), ("seed 004: sequence_expand", seed004)]
