"""``la.tokenize`` / ``lodarrow tokenize``: text to token lists the loader reads directly.

The tokenizer is a real ``tokenizers`` BPE (byte level, so every unicode text encodes)
trained here on the test corpus; every row of every format is checked against its
``encode``, in order.  Errors are checked to name the file and the row and to leave no
``dest``; a run killed outright (SIGKILL, in a subprocess) is resumed to the dataset an
uninterrupted run gives.
"""

import errno
import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lodarrow as la
from lodarrow._cli import main as cli
from lodarrow._tables import _tokenize

tokenizers = pytest.importorskip("tokenizers")

WORDS = ["the", "of", "and", "lodarrow", "token", "naïve", "café", "日本語", "😀", "Ünïcödé",
         "x" * 30, "\t", "\n"]


def make_texts(n, seed=0):
    rng = np.random.default_rng(seed)
    texts = [" ".join(rng.choice(WORDS, int(k))) for k in rng.integers(0, 40, n)]
    texts += ["", "   ", " ".join(rng.choice(WORDS, 5000))]  # empty, blank, very long
    return texts


TEXTS = make_texts(300)


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    t = Tokenizer(models.BPE())
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    t.decoder = decoders.ByteLevel()
    t.train_from_iterator(TEXTS, trainers.BpeTrainer(
        vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False))
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    t.save(str(path))
    t.path = str(path)
    return t


def write_jsonl(path, rows, opener=open):
    with opener(path, "wt", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


def corpus_table(texts=TEXTS):
    return pa.table({"id": np.arange(len(texts)), "text": texts,
                     "lang": ["en" if i % 3 else "fr" for i in range(len(texts))]})


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """The same rows as Parquet, JSON lines (plain, gzip, zstd), Arrow file and stream."""
    root = tmp_path_factory.mktemp("corpus")
    table = corpus_table()
    pq.write_table(table, root / "a.parquet", row_group_size=70)
    rows = table.to_pylist()
    write_jsonl(root / "b.jsonl", rows)
    write_jsonl(root / "c.jsonl.gz", rows, gzip.open)
    with pa.output_stream(root / "d.jsonl.zst", compression="zstd") as f:
        f.write("".join(json.dumps(row) + "\n" for row in rows).encode())
    with pa.ipc.new_stream(root / "e.arrow", table.schema) as w:  # datasets' cache files
        w.write_table(table, max_chunksize=50)
    with pa.ipc.new_file(root / "f.feather", table.schema) as w:
        w.write_table(table, max_chunksize=50)
    (root / "README.md").write_text("not data")
    (root / "_SUCCESS").write_text("")
    return root


def encoded(tok, texts):
    return [tok.encode(t).ids for t in texts]


def no_lengths_pass(monkeypatch):
    from lodarrow._training import _source

    def refuse(self, k, columns, keep=True):
        raise AssertionError(f"row group {k} was decoded for its lengths: {columns}")

    monkeypatch.setattr(_source.ParquetParts, "read_group", refuse)


def test_every_format_every_row_equals_encode(tok, corpus, tmp_path, monkeypatch):
    out = tmp_path / "out"
    s = la.tokenize(corpus, out, tok.path, batch_rows=64, progress=False)
    want = encoded(tok, TEXTS)
    names = sorted(os.listdir(out))
    assert names == ["a.parquet", "b.parquet", "c.parquet", "d.parquet", "e.parquet",
                     "f.parquet"]
    for name in names:
        got = pq.read_table(out / name)
        assert got.schema.names == ["id", "lang", "tokens"], name
        assert got.schema.field("tokens").type == pa.list_(pa.uint16()), name
        assert got["tokens"].to_pylist() == want, name
        assert got["id"].to_pylist() == list(range(len(TEXTS))), name
        # one row group per batch of 64 documents
        assert pq.ParquetFile(out / name).metadata.num_row_groups == -(-len(TEXTS) // 64)
    n = len(TEXTS)
    assert (s.files, s.resumed, s.documents, s.rows) == (6, 0, 6 * n, 6 * n)
    assert s.tokens == 6 * sum(map(len, want)) and s.dtype == "uint16"
    assert s.vocab_size == tok.get_vocab_size(with_added_tokens=True)
    assert "tokens (list<uint16>)" in str(s)
    # the loader and sequence_lengths read the lengths from the footers: no lengths pass
    no_lengths_pass(monkeypatch)
    lengths = la.sequence_lengths(out, "tokens", cache_dir=False)
    np.testing.assert_array_equal(lengths, np.tile([len(w) for w in want], 6))
    loader = la.batch_loader(out, "tokens", max_tokens=4096, cost="padded", seed=0,
                             progress=False, cache_dir=False)
    assert len(loader.plan().indices) == 6 * n and len(loader) > 0
    monkeypatch.undo()
    batches = list(loader)
    rows = np.concatenate([b["rows"] for b in batches])
    assert np.array_equal(np.sort(rows), np.arange(6 * n))  # every sequence once
    assert batches[0]["values"].dtype == np.uint16


def test_in_memory_sources_and_transformers(tok, tmp_path):
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_dict({"text": TEXTS, "id": list(range(len(TEXTS)))})
    ds = ds.select(range(len(TEXTS) - 1, -1, -1))  # an indices mapping: its order counts
    s = la.tokenize(ds, tmp_path / "ds", tok, progress=False)
    got = pq.read_table(tmp_path / "ds")
    assert got["tokens"].to_pylist() == encoded(tok, TEXTS[::-1])
    assert got["id"].to_pylist() == list(range(len(TEXTS)))[::-1] and s.files == 1
    transformers = pytest.importorskip("transformers")
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok)
    table = corpus_table()
    la.tokenize(table, tmp_path / "tf", fast, columns=["id"], progress=False)
    got = pq.read_table(tmp_path / "tf")
    assert got.schema.names == ["id", "tokens"]
    assert got["tokens"].to_pylist() == [fast(t)["input_ids"] for t in TEXTS]


def test_callables_and_the_narrowest_dtype(tmp_path):
    table = pa.table({"text": ["a bb", "", "ccc dddd e"]})

    def lengths(texts):
        return [[len(w) * 20000 for w in t.split()] for t in texts]

    s = la.tokenize(table, tmp_path / "a", lengths, vocab_size=100_000, progress=False)
    got = pq.read_table(tmp_path / "a")
    assert got.schema.field("tokens").type == pa.list_(pa.int32()) and s.dtype == "int32"
    assert got["tokens"].to_pylist() == lengths(table["text"].to_pylist())
    # a callable may give NumPy arrays or an Arrow list array; 65,536 ids fit uint16
    for k, f in enumerate([lambda ts: [np.arange(len(t)) for t in ts],
                           lambda ts: pa.array([list(range(len(t))) for t in ["x", *ts]])[1:]]):
        s = la.tokenize(table, tmp_path / f"b{k}", f, vocab_size=1 << 16, progress=False)
        assert s.dtype == "uint16"
        assert pq.read_table(tmp_path / f"b{k}")["tokens"].to_pylist() == \
            [list(range(len(t))) for t in table["text"].to_pylist()]

    # NumPy ids outside a uint16 vocabulary (65,536 and -1) are errors naming the true id,
    # never wrapped around by the cast to the column's dtype
    for bad in (65_536, 70_000, -1):
        for k, f in enumerate([lambda ts, b=bad: [np.array([1, b], np.int64) for t in ts],
                               lambda ts, b=bad: [list(np.array([1, b], np.int64))
                                                  for t in ts]]):
            with pytest.raises(ValueError, match=rf"row 0: the tokenizer returned id {bad}, "
                                                 rf"outside the vocabulary \(ids 0-65535\)"):
                la.tokenize(table, tmp_path / f"c{k}", f, vocab_size=1 << 16,
                            progress=False, resume=False)


def reference(ids, bos, eos, m, overflow):
    """The rows one document's ids give (a slow, obvious loop)."""
    full = list(bos) + list(ids) + list(eos)
    if m is None or len(full) <= m:
        return [full]
    if overflow == "truncate":  # bos and eos kept, the text cut
        return [list(bos) + list(ids)[:m - len(bos) - len(eos)] + list(eos)]
    return [full[i:i + m] for i in range(0, len(full), m)]


@pytest.mark.parametrize("overflow", ["split", "truncate"])
def test_bos_eos_max_length(tok, tmp_path, overflow):
    table = corpus_table()
    m = 7
    s = la.tokenize(table, tmp_path / "o", tok, bos=[1, 2], eos=3, max_length=m,
                    overflow=overflow, batch_rows=50, progress=False)
    got = pq.read_table(tmp_path / "o")
    rows, ids_rows = [], []
    for i, ids in enumerate(encoded(tok, TEXTS)):
        for piece in reference(ids, [1, 2], [3], m, overflow):
            rows.append(piece)
            ids_rows.append(i)
    assert got["tokens"].to_pylist() == rows
    assert got["id"].to_pylist() == ids_rows  # the other columns repeated per piece
    assert s.rows == len(rows) and s.tokens == sum(map(len, rows))
    full = sum(len(ids) + 3 for ids in encoded(tok, TEXTS))
    assert s.truncated_tokens == (full - s.tokens if overflow == "truncate" else 0)
    assert max(map(len, rows)) == m


def test_truncate_keeps_bos_and_eos(tok, tmp_path):
    table = pa.table({"text": ["a long enough text", "x"]})
    ids = encoded(tok, ["a long enough text"])[0]
    s = la.tokenize(table, tmp_path / "t", tok, bos=1, eos=0, max_length=2,
                    overflow="truncate", progress=False)
    assert pq.read_table(tmp_path / "t")["tokens"].to_pylist() == [[1, 0], [1, 0]]
    assert s.truncated_tokens == len(ids) + len(encoded(tok, ["x"])[0])
    la.tokenize(table, tmp_path / "u", tok, eos=[0, 2], max_length=3, overflow="truncate",
                progress=False)
    assert pq.read_table(tmp_path / "u")["tokens"].to_pylist()[0] == [ids[0], 0, 2]
    with pytest.raises(ValueError, match=r"max_length=2 is shorter than bos and eos \(3"):
        la.tokenize(table, tmp_path / "v", tok, bos=1, eos=[0, 2], max_length=2,
                    overflow="truncate")


def test_several_text_columns_separator_nulls_and_empty(tok, tmp_path):
    title = ["A title", None, "", "café", "  "]
    body = ["body one", "two", "", "日本語 😀", "x"]
    table = pa.table({"title": title, "body": body, "k": [0, 1, 2, 3, 4]})
    with pytest.raises(ValueError, match=r"tokenize: the source, row 1: the text column "
                                         r"'title' is null \(nulls='drop'"):
        la.tokenize(table, tmp_path / "x", tok, text=["title", "body"], progress=False)
    assert not (tmp_path / "x").exists()
    s = la.tokenize(table, tmp_path / "y", tok, text=["title", "body"], separator=[9, 9],
                    nulls="drop", drop_empty=True, progress=False)
    got = pq.read_table(tmp_path / "y")
    keep = [0, 3, 4]  # row 1 null, row 2 empty in both; row 4 has a body
    assert got["k"].to_pylist() == keep
    assert got["tokens"].to_pylist() == [
        tok.encode(title[i]).ids + [9, 9] + tok.encode(body[i]).ids for i in keep]
    assert (s.documents, s.dropped_nulls, s.dropped_empty, s.rows) == (5, 1, 1, 3)


def test_bad_input_names_the_file_and_row_and_writes_nothing(tok, corpus, tmp_path):
    dest = tmp_path / "dest"
    with pytest.raises(KeyError, match=r"'.*a\.parquet': no text column 'body'"):
        la.tokenize(corpus / "a.parquet", dest, tok, text="body")
    with pytest.raises(TypeError, match=r"'.*a\.parquet': the text column 'id' is of type "
                                        r"int64, not strings"):
        la.tokenize(corpus / "a.parquet", dest, tok, text="id")
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(corpus / "a.parquet", src / "a.parquet")
    (src / "z.parquet").write_bytes(b"PAR1 this is not parquet PAR1")
    with pytest.raises(ValueError, match=r"'.*z\.parquet': cannot read"):
        la.tokenize(src, dest, tok)
    os.remove(src / "z.parquet")
    # a JSON line's later rows are parsed when their block is read: the run has begun,
    # dest does not exist (resume=False: nothing hidden left either)
    lines = [json.dumps({"text": "fine"})] * 5 + ['{"text": 12}']
    (src / "b.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"'.*b\.jsonl', line 6: cannot read"):
        la.tokenize(src, dest, tok, resume=False)
    (src / "b.jsonl").write_text(json.dumps({"text": "fine"}) + "\n{oops\n")
    with pytest.raises(ValueError, match=r"'.*b\.jsonl', line 2: cannot read"):
        la.tokenize(src, dest, tok, resume=False)
    os.remove(src / "b.jsonl")
    write_jsonl(src / "c.jsonl.gz", [{"text": "a"}] * 3 + [{"text": ["not", "text"]}],
                gzip.open)
    with pytest.raises(ValueError, match=r"'.*c\.jsonl\.gz', line 4: cannot read"):
        la.tokenize(src, dest, tok, resume=False)
    os.remove(src / "c.jsonl.gz")

    pq.write_table(pa.table({"text": [str(i) for i in range(300)]}), src / "a.parquet")

    def beyond(texts):
        return [[7] if t != "123" else [7, 50] for t in texts]

    with pytest.raises(ValueError, match=r"'.*a\.parquet', row 123: the tokenizer returned "
                                         r"id 50, outside the vocabulary \(ids 0-49\)"):
        la.tokenize(src, dest, beyond, vocab_size=50, batch_rows=40, resume=False)
    assert os.listdir(tmp_path) == ["src"]  # no dest, nothing hidden left (resume=False)
    with pytest.raises(ValueError, match="eos id 400 is outside the vocabulary"):
        la.tokenize(src, dest, tok, eos=400)
    with pytest.raises(ValueError, match="overflow must be 'split' or 'truncate'"):
        la.tokenize(src, dest, tok, max_length=3, overflow="wrap")
    with pytest.raises(TypeError, match="tokenizer must be a tokenizers.Tokenizer"):
        la.tokenize(src, dest, 42)
    with pytest.raises(FileExistsError, match="exists and is not an empty directory"):
        la.tokenize(src, src, tok)


KILLED_RUN = textwrap.dedent("""
    import os, signal, sys
    import lodarrow as la
    from lodarrow._tables import _tokenize

    src, dest, tokenizer = sys.argv[1:4]
    real = _tokenize._Encoder.finish
    done = []

    def finish(self, prepared):
        done.append(1)
        if len(done) == 8:  # the third file's second batch, mid-write: killed outright
            os.kill(os.getpid(), signal.SIGKILL)
        return real(self, prepared)

    _tokenize._Encoder.finish = finish
    la.tokenize(src, dest, tokenizer, batch_rows=100, progress=False)
""")


def test_a_killed_run_resumes_to_the_same_dataset(tok, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for k in range(5):
        texts = make_texts(250, seed=k)
        pq.write_table(corpus_table(texts), src / f"p{k}.parquet")
    script = tmp_path / "run.py"
    script.write_text(KILLED_RUN)
    dest = tmp_path / "dest"
    proc = subprocess.run([sys.executable, str(script), str(src), str(dest), tok.path],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert not dest.exists()
    staging = [p for p in os.listdir(tmp_path) if p.startswith(".dest.lodarrow-tokenize-")]
    assert len(staging) == 1
    left = sorted(os.listdir(tmp_path / staging[0]))
    assert len(left) == 3 and left[1:] == ["p0.parquet", "p1.parquet"]
    assert left[0].startswith(".p2.parquet.") and left[0].endswith(".lodarrow-tmp")
    s = la.tokenize(src, dest, tok.path, batch_rows=100, progress=False)
    assert s.resumed == 2 and s.files == 5
    whole = la.tokenize(src, tmp_path / "whole", tok.path, batch_rows=100, progress=False)
    # the resumed files' counts come from their footers
    assert (s.documents, s.rows, s.tokens) == (whole.documents, whole.rows, whole.tokens)
    assert sorted(os.listdir(dest)) == [f"p{k}.parquet" for k in range(5)]
    for k in range(5):
        a, b = pq.read_table(dest / f"p{k}.parquet"), pq.read_table(tmp_path / "whole" /
                                                                    f"p{k}.parquet")
        assert a.equals(b)
    assert not any(p.startswith(".dest.") for p in os.listdir(tmp_path))
    # another job (other options) does not take the finished files of this one
    s = la.tokenize(src, tmp_path / "other", tok.path, eos=0, progress=False)
    assert s.resumed == 0


def _failing_on(monkeypatch, name):
    """``finish`` raises for the file ``name`` (a run that stops, its staging kept)."""
    real = _tokenize._Encoder.finish

    def finish(self, prepared):
        if name in prepared[0].column("text").to_pylist()[0]:
            raise KeyboardInterrupt
        return real(self, prepared)

    monkeypatch.setattr(_tokenize._Encoder, "finish", finish)


def test_a_finished_file_without_its_lengths_is_written_again(tok, tmp_path, monkeypatch):
    src = tmp_path / "src"
    src.mkdir()
    for k in range(2):
        pq.write_table(pa.table({"text": [f"file{k} " + t for t in make_texts(30, seed=k)]}),
                       src / f"p{k}.parquet")
    _failing_on(monkeypatch, "file1")
    with pytest.raises(KeyboardInterrupt):
        la.tokenize(src, tmp_path / "dest", tok.path, progress=False)
    monkeypatch.undo()
    staging = tmp_path / next(p for p in os.listdir(tmp_path) if p.startswith(".dest."))
    done = staging / "p0.parquet"
    meta = pq.read_metadata(done).metadata
    assert _tokenize.FOOTER_KEY in meta and _tokenize._COUNTS_KEY.encode() in meta
    # the same file, its counts kept but not its lengths: not accepted by the resume
    table = pq.read_table(done)
    with pq.ParquetWriter(done, table.schema) as w:
        w.write_table(table)
        w.add_key_value_metadata({_tokenize._COUNTS_KEY: meta[_tokenize._COUNTS_KEY.encode()]})
    s = la.tokenize(src, tmp_path / "dest", tok.path, progress=False)
    assert (s.resumed, s.documents) == (0, 2 * len(make_texts(30)))
    assert _tokenize.FOOTER_KEY in pq.read_metadata(tmp_path / "dest" / "p0.parquet").metadata


def test_lengths_that_cannot_be_recorded_fail_the_file(tok, tmp_path, monkeypatch):
    import warnings

    def stamp(self, path, fn="x"):
        warnings.warn("disk full", RuntimeWarning)
        return False

    monkeypatch.setattr(_tokenize.LengthsRecorder, "stamp", stamp)
    pq.write_table(pa.table({"text": make_texts(20)}), tmp_path / "a.parquet")
    with pytest.raises(OSError, match="cannot record the sequence lengths.*disk full"):
        la.tokenize(tmp_path / "a.parquet", tmp_path / "dest", tok.path, resume=False)
    assert sorted(os.listdir(tmp_path)) == ["a.parquet"]


def test_two_runs_of_one_job_refuse_each_other(tok, tmp_path, monkeypatch):
    import threading

    pq.write_table(pa.table({"text": make_texts(20)}), tmp_path / "a.parquet")
    inside, leave = threading.Event(), threading.Event()
    real = _tokenize._Encoder.finish

    def finish(self, prepared):
        inside.set()
        leave.wait(30)
        return real(self, prepared)

    monkeypatch.setattr(_tokenize._Encoder, "finish", finish)
    first = threading.Thread(target=la.tokenize, args=(tmp_path / "a.parquet",
                                                       tmp_path / "dest", tok.path))
    first.start()
    try:
        assert inside.wait(30)
        with pytest.raises(RuntimeError, match="another run of this job is writing"):
            la.tokenize(tmp_path / "a.parquet", tmp_path / "dest", tok.path)
    finally:
        leave.set()
        first.join(30)
    assert pq.read_table(tmp_path / "dest" / "a.parquet").num_rows == len(make_texts(20))


ORPHAN = textwrap.dedent("""
    import multiprocessing, sys, time
    from lodarrow._tables import _tokenize

    def child():
        _tokenize._die_with_parent()
        time.sleep(60)

    if __name__ == "__main__":
        p = multiprocessing.get_context("spawn").Process(target=child)
        p.start()
        time.sleep(1.0)  # the child has called _die_with_parent
        print(p.pid, flush=True)
        time.sleep(60)
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="checks /proc")
def test_workers_end_with_their_parent(tmp_path):
    import time

    script = tmp_path / "orphan.py"
    script.write_text(ORPHAN)
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        child = int(parent.stdout.readline())
    finally:
        parent.kill()
        parent.wait()
        parent.stdout.close()
    for _ in range(50):
        try:
            with open(f"/proc/{child}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    break
        except FileNotFoundError:
            break
        time.sleep(0.1)
    else:
        os.kill(child, signal.SIGKILL)
        pytest.fail("the worker outlived its parent")


def test_processes_give_the_same_dataset(tok, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for k in range(3):
        write_jsonl(src / f"p{k}.jsonl", corpus_table(make_texts(100, seed=k)).to_pylist())
    la.tokenize(src, tmp_path / "a", tok.path, progress=False)
    s = la.tokenize(src, tmp_path / "b", tok, processes=2, progress=False)
    assert s.files == 3 and s.documents == 3 * 103
    for k in range(3):
        assert pq.read_table(tmp_path / "a" / f"p{k}.parquet").equals(
            pq.read_table(tmp_path / "b" / f"p{k}.parquet"))


def test_memory_is_a_few_batches(tok, tmp_path):
    """However many batches a file has, at most a few are in flight (read ahead, being
    encoded, being written): the bound the docstring states."""
    texts = make_texts(3000, seed=5)
    pq.write_table(pa.table({"text": texts}), tmp_path / "big.parquet")
    for batch_rows in (500, 30):  # 7 and 101 batches
        _tokenize.IN_FLIGHT.update(now=0, max=0)
        la.tokenize(tmp_path / "big.parquet", tmp_path / f"o{batch_rows}", tok,
                    batch_rows=batch_rows, progress=False)
        assert _tokenize.IN_FLIGHT["now"] == 0
        assert 2 <= _tokenize.IN_FLIGHT["max"] <= 5, _tokenize.IN_FLIGHT

    def fails_late(texts):  # an id outside the vocabulary in the 10th batch
        fails_late.calls += 1
        return [[1] if fails_late.calls < 10 else [99] for t in texts]

    fails_late.calls = 0
    with pytest.raises(ValueError, match="outside the vocabulary"):
        la.tokenize(tmp_path / "big.parquet", tmp_path / "bad", fails_late, vocab_size=50,
                    batch_rows=30, progress=False, resume=False)
    assert _tokenize.IN_FLIGHT["now"] == 0  # every batch read was let go


def test_files_in_turn_overlap_and_stay_within_the_bound(tok, tmp_path):
    """One process, many files: each file's reading starts while the previous file's last
    batches are written; the rows are each file's alone, at most five batches are in flight
    across files, and a failure in one file lets go of the next one's read-ahead."""
    src = tmp_path / "src"
    src.mkdir()
    texts = {k: make_texts(200, seed=10 + k) for k in range(4)}
    for k, t in texts.items():
        pq.write_table(pa.table({"id": np.arange(len(t)), "text": t}), src / f"p{k}.parquet")
    started = []
    real = _tokenize._start_reading

    def spy(inp, *args, **kwargs):
        # the files the staging directory holds complete when this one's reading starts
        staging = [p for p in tmp_path.iterdir() if p.name.startswith(".o.lodarrow-tokenize")]
        done = sorted(p.name for p in staging[0].iterdir()) if staging else []
        started.append((os.path.basename(inp.path), done))
        return real(inp, *args, **kwargs)

    _tokenize.IN_FLIGHT.update(now=0, max=0)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_tokenize, "_start_reading", spy)
        s = la.tokenize(src, tmp_path / "o", tok, batch_rows=20, progress=False)
    assert s.files == 4 and s.documents == sum(map(len, texts.values()))
    assert [name for name, _ in started] == [f"p{k}.parquet" for k in range(4)]
    # each next file started before the previous one was complete (its last batches being
    # written): the previous file is not yet among the complete ones
    for k in range(1, 4):
        assert f"p{k - 1}.parquet" not in started[k][1], started
    assert _tokenize.IN_FLIGHT["now"] == 0
    assert 2 <= _tokenize.IN_FLIGHT["max"] <= 5, _tokenize.IN_FLIGHT
    for k, t in texts.items():
        got = pq.read_table(tmp_path / "o" / f"p{k}.parquet")
        assert got.column("id").to_pylist() == list(range(len(t)))
        assert got.column("tokens").to_pylist() == [e.ids for e in tok.encode_batch(t)]

    calls = []

    def fails_in_the_third_file(batch):  # 11 batches a file: calls 23-33 are p2's
        calls.append(len(batch))
        return [[99 if len(calls) == 25 else 1] for _ in batch]

    with pytest.raises(ValueError, match=r"p2\.parquet.*outside the vocabulary"):
        la.tokenize(src, tmp_path / "bad", fails_in_the_third_file, vocab_size=50,
                    batch_rows=20, progress=False, resume=False)
    assert _tokenize.IN_FLIGHT["now"] == 0  # the next file's read-ahead was let go
    assert not (tmp_path / "bad").exists()


def test_the_command_line(tok, corpus, tmp_path, capsys):
    dest = tmp_path / "cli"
    rc = cli(["tokenize", str(corpus / "b.jsonl"), str(dest), "--tokenizer", tok.path,
              "--eos", "0", "--columns", "id", "--max-length", "16", "--overflow", "truncate",
              "--no-progress"])
    assert rc == 0, capsys.readouterr().err
    assert "tokens (list<uint16>)" in capsys.readouterr().out
    got = pq.read_table(dest / "b.parquet")
    assert got.schema.names == ["id", "tokens"]
    assert got["tokens"].to_pylist() == [ids[:15] + [0] for ids in encoded(tok, TEXTS)]
    rc = cli(["tokenize", str(corpus / "a.parquet"), str(tmp_path / "x"), "--tokenizer",
              tok.path, "--text", "body"])
    err = capsys.readouterr().err
    assert rc == 2 and "no text column 'body'" in err and "(give --text)" in err
    rc = cli(["tokenize", str(corpus / "a.parquet"), str(tmp_path / "x"), "--tokenizer",
              tok.path, "--eos", "500"])
    err = capsys.readouterr().err
    assert rc == 1 and "eos id 500 is outside the vocabulary" in err and \
        "give --vocab-size" in err
    assert not (tmp_path / "x").exists()
    # a bad --tokenizer is a usage error (2), in the command line's words: missing, a
    # directory, not a tokenizer.json
    (tmp_path / "bad.json").write_text("{not json")
    for arg, words in ((tmp_path / "none.json", "no such file or directory"),
                       (tmp_path, "is a directory"),
                       (tmp_path / "bad.json", "not a tokenizer.json (")):
        rc = cli(["tokenize", str(corpus / "a.parquet"), str(tmp_path / "x"), "--tokenizer",
                  str(arg)])
        err = capsys.readouterr().err
        assert rc == 2 and f"lodarrow: tokenize: --tokenizer {arg}: {words}" in err, err
        assert "tokenize: tokenize" not in err and "cannot read the tokenizer" not in err
    assert not (tmp_path / "x").exists()


def test_lines_longer_than_a_block_and_datasets_directories(tok, tmp_path, monkeypatch):
    """A JSON line longer than pyarrow's read block (4 MiB; 2 KiB here) is read with larger
    blocks; a ``save_to_disk`` directory is read through its Arrow files only."""
    monkeypatch.setattr(_tokenize, "DEFAULT_BATCH_BYTES", 2048)
    for texts in ([TEXTS[-1], "short", TEXTS[-1][:3000]],   # the first line is 36 KiB
                  ["short", TEXTS[-1], "short"]):               # a later one
        shutil.rmtree(tmp_path / "o", ignore_errors=True)
        write_jsonl(tmp_path / "long.jsonl", [{"text": t} for t in texts])
        la.tokenize(tmp_path / "long.jsonl", tmp_path / "o", tok, progress=False)
        assert pq.read_table(tmp_path / "o")["tokens"].to_pylist() == encoded(tok, texts)
    datasets = pytest.importorskip("datasets")
    datasets.Dataset.from_dict({"text": TEXTS}).save_to_disk(str(tmp_path / "saved"))
    s = la.tokenize(tmp_path / "saved", tmp_path / "s", tok, progress=False)
    assert sorted(os.listdir(tmp_path / "s")) == ["data-00000-of-00001.parquet"]
    assert pq.read_table(tmp_path / "s")["tokens"].to_pylist() == encoded(tok, TEXTS)
    assert s.documents == len(TEXTS)


def test_the_udf_takes_batches_frames_and_pickles(tok, tmp_path, capsys):
    import pickle

    f = la.tokenize_udf(tok.path, eos=1, columns=["id"])
    g = pickle.loads(pickle.dumps(f))  # the path is loaded again
    table = corpus_table()
    want = [ids + [1] for ids in encoded(tok, TEXTS)]
    batch = g(table.to_batches()[0])
    assert isinstance(batch, pa.RecordBatch) and batch["tokens"].to_pylist() == want
    frame = g(table.to_pandas())
    assert str(frame.dtypes["tokens"]) == "list<item: uint16>[pyarrow]"
    assert [list(x) for x in frame["tokens"]] == want
    assert g.output_schema(table.schema).names == ["id", "tokens"]
    with pytest.raises(KeyError, match="no text column 'text'"):
        g(pa.table({"body": ["x"]}))
    # the progress bar: documents, tokens and tokens/s
    la.tokenize(table, tmp_path / "p", tok, progress=True)
    err = capsys.readouterr().err
    assert "tokenize [####################] 1/1 files" in err and "tokens/s" in err


def test_a_worker_loads_the_jobs_tokenizer_file_or_refuses(tok, tmp_path):
    # a udf (or a processes= worker) loads the path again when first used: a file whose
    # bytes changed since the job loaded it is refused there, naming it (not while
    # unpickling, which would kill a process pool's worker), never mixed in
    import pickle

    path = tmp_path / "tok.json"
    shutil.copyfile(tok.path, path)
    f = pickle.dumps(la.tokenize_udf(str(path)))
    batch = pa.table({"text": TEXTS[:5]}).to_batches()[0]
    assert pickle.loads(f)(batch)["tokens"].to_pylist() == encoded(tok, TEXTS[:5])
    spec = json.loads(path.read_text())
    spec["added_tokens"].append({"id": tok.get_vocab_size(), "content": "<|new|>",
                                 "single_word": False, "lstrip": False, "rstrip": False,
                                 "normalized": False, "special": True})
    path.write_text(json.dumps(spec))
    g = pickle.loads(f)
    with pytest.raises(ValueError, match="tokenize_udf: the tokenizer .* changed since the "
                                         "job loaded it"):
        g(batch)
    # a processes= worker: the error comes back through its future
    src = tmp_path / "src"
    src.mkdir()
    for k in range(2):
        pq.write_table(pa.table({"text": TEXTS[:20]}), src / f"p{k}.parquet")
    shutil.copyfile(tok.path, path)
    enc = _tokenize._Encoder(str(path), "text", "tokens", None, None, None, None, None,
                             "split", False, "error", None, None, True, "tokenize")
    path.write_text(json.dumps(spec))
    inp = _tokenize._resolve(str(src / "p0.parquet"), "tokenize")[0][0]
    with pytest.raises(ValueError, match="changed since the job loaded it"):
        _tokenize._worker((inp, pickle.loads(pickle.dumps(enc)), str(tmp_path / "w.parquet"),
                           {}))


def test_a_tokenizer_file_is_loaded_once_a_process(tok, tmp_path):
    # tokenizers keeps memory of every Tokenizer loaded: the same bytes give the one loaded
    # before, wherever the file is; changed bytes give a new one (and its ids); a few kept
    copy = tmp_path / "copy.json"
    shutil.copyfile(tok.path, copy)
    first, vocab, key = _tokenize._load_tokenizer(tok.path, "tokenize")
    assert _tokenize._load_tokenizer(str(copy), "tokenize") == (first, vocab, key)
    spec = json.loads(copy.read_text())
    spec["added_tokens"].append({"id": vocab, "content": "<|zz|>", "single_word": False,
                                 "lstrip": False, "rstrip": False, "normalized": False,
                                 "special": True})
    copy.write_text(json.dumps(spec))
    changed, more, _ = _tokenize._load_tokenizer(str(copy), "tokenize")
    assert changed is not first and more == vocab + 1
    # a worker loading the job's file again refuses changed bytes (no mixed dataset)
    with pytest.raises(ValueError, match="changed since the job loaded it"):
        _tokenize._load_tokenizer(str(copy), "tokenize", want=key)
    assert changed.encode("<|zz|>").ids == [vocab]
    la.tokenize(pa.table({"text": ["a <|zz|> b"]}), tmp_path / "out", str(copy))
    assert vocab in pq.read_table(tmp_path / "out")["tokens"][0].as_py()
    others = []
    for k in range(_tokenize._LOADED_KEEP):
        spec["added_tokens"][-1]["content"] = f"<|z{k}|>"
        copy.write_text(json.dumps(spec))
        others.append(_tokenize._load_tokenizer(str(copy), "tokenize")[0])
    assert len(_tokenize._LOADED) == _tokenize._LOADED_KEEP and len(set(map(id, others))) == 4
    assert _tokenize._load_tokenizer(tok.path, "tokenize")[0] is not first  # let go
    # a missing file is a FileNotFoundError (as open() says), naming the argument and path;
    # a directory keeps its OSError type; a file that is not a tokenizer.json a ValueError
    missing = str(tmp_path / "missing.json")
    with pytest.raises(FileNotFoundError, match=r"tokenize: cannot read the tokenizer: No "
                                                r"such file.*missing\.json") as info:
        _tokenize._load_tokenizer(missing, "tokenize")
    assert info.value.errno == errno.ENOENT and info.value.filename == missing
    with pytest.raises(FileNotFoundError, match="missing.json"):
        la.tokenize(pa.table({"text": ["a"]}), tmp_path / "never", missing)
    assert not (tmp_path / "never").exists()
    with pytest.raises(IsADirectoryError, match="cannot read the tokenizer"):
        _tokenize._load_tokenizer(str(tmp_path), "tokenize")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"cannot read the tokenizer .*bad\.json"):
        _tokenize._load_tokenizer(str(tmp_path / "bad.json"), "tokenize")


def test_the_benchmark_runs(tmp_path):
    """benchmarks/tokenization.py at a tiny size: its rows run and its JSON and table are made
    (``la.tokenize``'s token count is checked against the tokenizer's inside)."""
    import importlib.util

    from conftest import checkout_root

    root = checkout_root()
    if root is None:
        pytest.skip("the benchmarks are in the source checkout only")
    spec = importlib.util.spec_from_file_location("bench_tokenize",
                                                  root / "benchmarks" / "tokenization.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    bench.main(["--documents", "120", "--files", "2", "--vocab", "400", "--repeat", "1",
                "--only", "tokenizer,lodarrow", "--work-dir", str(tmp_path / "w"),
                "--json", str(tmp_path / "b.json"), "--markdown", str(tmp_path / "b.md")])
    got = json.loads((tmp_path / "b.json").read_text())
    assert [r["key"] for r in got["rows"]] == ["tokenizer", "lodarrow"]
    assert all(s["wall_s"] > 0 and s["cpu_s"] > 0 for r in got["rows"] for s in r["samples"])
    assert got["corpus"]["tokens"] > 0 and "| **`la.tokenize`** (default" in \
        (tmp_path / "b.md").read_text()


def test_json_lines_are_checked_from_their_first_line(tok, tmp_path):
    dest = tmp_path / "dest"
    (tmp_path / "a.jsonl").write_text(json.dumps({"body": "x"}) + "\n")
    with pytest.raises(KeyError, match=r"'.*a\.jsonl': no text column 'text'; the columns are "
                                       r"\['body'\]"):
        la.tokenize(tmp_path / "a.jsonl", dest, tok)
    (tmp_path / "a.jsonl").write_text("\n" + json.dumps({"text": 3}) + "\n")
    with pytest.raises(TypeError, match=r"the text column 'text' is of type int, not strings"):
        la.tokenize(tmp_path / "a.jsonl", dest, tok)
    (tmp_path / "a.jsonl.gz").write_bytes(b"not gzip at all")
    with pytest.raises(ValueError, match=r"'.*a\.jsonl\.gz': cannot read"):
        la.tokenize(tmp_path / "a.jsonl.gz", dest, tok)
    with pytest.raises(ValueError, match="is a URI; tokenize reads local files"):
        la.tokenize("s3://bucket/corpus/", dest, tok)
    # a file with no rows (empty, blank lines, compressed or not), among good ones, is
    # refused before anything is written (pyarrow's reader cannot read it)
    (tmp_path / "good.jsonl").write_text(json.dumps({"text": "x y"}) + "\n")
    (tmp_path / "blank.jsonl").write_text("\n  \n")
    (tmp_path / "empty.jsonl.gz").write_bytes(gzip.compress(b""))
    for name in ("blank.jsonl", "empty.jsonl.gz"):
        with pytest.raises(ValueError, match=rf"'.*{name.replace('.', '[.]')}': no rows"):
            la.tokenize([tmp_path / "good.jsonl", tmp_path / name], dest, tok)
    assert sorted(os.listdir(tmp_path)) == ["a.jsonl", "a.jsonl.gz", "blank.jsonl",
                                            "empty.jsonl.gz", "good.jsonl"]


def test_a_missing_text_key_is_not_a_null(tok, tmp_path):
    lines = [{"text": "a"}, {"text": None}, {"text": "b"}, {"body": "no text"}, {"text": "c"}]
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    for nulls in ("error", "drop"):
        with pytest.raises(ValueError, match=r"'.*a\.jsonl', line 4: no text key 'text'"):
            la.tokenize(tmp_path / "a.jsonl", tmp_path / "d", tok, nulls=nulls,
                        resume=False)
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines[:3]))
    s = la.tokenize(tmp_path / "a.jsonl", tmp_path / "d", tok, nulls="drop", progress=False)
    assert (s.documents, s.dropped_nulls, s.rows) == (3, 1, 2)


@pytest.mark.parametrize("ext", ["gz", "bz2", "zst"])
def test_a_truncated_compressed_file_is_a_value_error_naming_it(tok, tmp_path, ext):
    import bz2

    data = "".join(json.dumps({"text": t}) + "\n" for t in make_texts(3000, seed=1)).encode()
    if ext == "zst":
        data = pa.compress(data, "zstd", asbytes=True)
    else:
        data = gzip.compress(data) if ext == "gz" else bz2.compress(data)
    (tmp_path / f"a.jsonl.{ext}").write_bytes(data[:len(data) // 2])
    with pytest.raises(ValueError, match=rf"'.*a\.jsonl\.{ext}'.*cannot read"):
        la.tokenize(tmp_path / f"a.jsonl.{ext}", tmp_path / "d", tok, progress=False,
                    resume=False)
    assert sorted(os.listdir(tmp_path)) == [f"a.jsonl.{ext}"]


def test_a_dictionary_encoded_text_column(tok, tmp_path):
    texts = ["a b", None, "a b", "café"]
    table = pa.table({"text": pa.array(texts).dictionary_encode(), "k": [0, 1, 2, 3]})
    s = la.tokenize(table, tmp_path / "d", tok, nulls="drop", columns=["k", "text"],
                    progress=False)
    got = pq.read_table(tmp_path / "d")
    assert s.dropped_nulls == 1 and got["k"].to_pylist() == [0, 2, 3]
    assert got["tokens"].to_pylist() == encoded(tok, ["a b", "a b", "café"])
    assert got["text"].to_pylist() == ["a b", "a b", "café"]
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"text": pd.Categorical(["x y", "x"])})
    udf = la.tokenize_udf(tok)
    assert [list(r) for r in udf(frame)["tokens"]] == encoded(tok, ["x y", "x"])


def test_a_padding_tokenizer_writes_each_documents_own_ids(tok, tmp_path):
    """A tokenizer.json saved with padding on (common on the Hub) pads a batch to its
    longest; the ids written are still each document's ``encode`` (padding off, the
    caller's tokenizer left as it was); a transformers tokenizer's backend likewise, its
    truncation too, as ``ft(text)`` does."""
    from tokenizers import Tokenizer

    padded = Tokenizer.from_str(tok.to_str())
    padded.enable_padding(pad_id=2, pad_token="<pad>")
    padded.save(str(tmp_path / "pad.json"))
    want = encoded(tok, TEXTS)
    for arg in (padded, str(tmp_path / "pad.json")):
        out = tmp_path / f"out{len(os.listdir(tmp_path))}"
        la.tokenize(corpus_table(), out, arg, progress=False)
        assert pq.read_table(out)["tokens"].to_pylist() == want
    assert padded.padding is not None  # the caller's, unchanged
    transformers = pytest.importorskip("transformers")
    fast = transformers.PreTrainedTokenizerFast(tokenizer_file=str(tmp_path / "pad.json"))
    fast.backend_tokenizer.enable_truncation(4)  # left by an earlier call's truncation=True
    got = la.tokenize_udf(fast)(corpus_table())
    assert got["tokens"].to_pylist() == [fast(t)["input_ids"] for t in TEXTS] == want
