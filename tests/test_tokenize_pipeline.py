"""``la.tokenize``'s pipeline: ids streamed from the ``Encoding`` objects, batches read ahead
of the tokenizer, the next file's reading started by the file before it.

Every row is checked against the tokenizer's ``encode``, in order; the batches in flight
are checked to stay within the bound (five) and to be let go whatever fails where; no
thread of a run outlives it.
"""

import threading
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lodarrow as la
from lodarrow._tables import _tokenize

tokenizers = pytest.importorskip("tokenizers")

WORDS = ["the", "of", "and", "lodarrow", "token", "naïve", "café", "日本語", "😀", "x" * 30]


def make_texts(n, seed=0):
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, int(k))) for k in rng.integers(0, 40, n)]


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    t = Tokenizer(models.BPE())
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    t.decoder = decoders.ByteLevel()
    t.train_from_iterator(make_texts(300), trainers.BpeTrainer(
        vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False))
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    t.save(str(path))
    t.path = str(path)
    return t


def threads_settle(before):
    """The run's threads (reading, encoding, writing) end with it."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        names = sorted(t.name for t in threading.enumerate() if t.name.startswith("lodarrow"))
        if not names and threading.active_count() <= before:
            return
        time.sleep(0.02)
    raise AssertionError(f"threads left running: {[t.name for t in threading.enumerate()]}")


def test_encoding_ids_stream_into_one_array(tok):
    """The ids of ``Encoding`` objects, read one document at a time into one array, equal
    each one's ``ids``; an id too large for the dtype is read again as int64 and named by
    its row, as is one outside the vocabulary."""
    texts = make_texts(200, seed=1) + ["", "日本語 😀"]
    raw = tok.encode_batch_fast(texts)
    assert _tokenize._all_encodings(raw) and not _tokenize._all_encodings([[1, 2]])
    enc = _tokenize._Encoder(tok, "text", "tokens", None, None, None, None, None, "split",
                             False, "error", None, None, True, "tokenize")
    offsets, values = enc._arrays(raw, len(texts))
    assert values.dtype == np.uint16
    want = [e.ids for e in raw]
    assert np.diff(offsets).tolist() == list(map(len, want))
    assert values.tolist() == [i for ids in want for i in ids]
    with pytest.raises(ValueError, match="returned 202 lists of ids for 5 texts"):
        enc._arrays(raw, 5)

    first = next(r for r, ids in enumerate(want) if max(ids, default=0) >= 256)
    enc.dtype, enc.limit = np.dtype(np.uint8), 256  # ids past 255 overflow uint8
    with pytest.raises(ValueError, match=rf"row {first}: the tokenizer returned id "
                                         rf"{next(i for i in want[first] if i >= 256)}, "
                                         rf"outside the vocabulary \(ids 0-255\)") as info:
        enc._arrays(raw, len(texts))
    assert info.value.row == first


def test_files_of_every_size_in_turn(tok, tmp_path):
    """Files of many batches, of one, and of none, one after the other: every row is its
    file's and equals ``encode``; at most five batches are in flight, none after."""
    src = tmp_path / "src"
    src.mkdir()
    sizes = [130, 0, 7, 1, 95, 0, 0, 60]
    texts = {k: make_texts(n, seed=20 + k)[:n] for k, n in enumerate(sizes)}
    for k, t in texts.items():
        pq.write_table(pa.table({"id": pa.array(np.arange(len(t)), pa.int64()),
                                 "text": pa.array(t, pa.string())}), src / f"p{k}.parquet")
    before = threading.active_count()
    for batch_rows in (10, 1000):
        _tokenize.IN_FLIGHT.update(now=0, max=0)
        s = la.tokenize(src, tmp_path / f"o{batch_rows}", tok, batch_rows=batch_rows,
                        progress=False)
        assert s.files == len(sizes) and s.documents == sum(sizes)
        assert _tokenize.IN_FLIGHT["now"] == 0
        assert _tokenize.IN_FLIGHT["max"] <= 5, _tokenize.IN_FLIGHT
        for k, t in texts.items():
            got = pq.read_table(tmp_path / f"o{batch_rows}" / f"p{k}.parquet")
            assert got.column("id").to_pylist() == list(range(len(t)))
            assert got.column("tokens").to_pylist() == [e.ids for e in tok.encode_batch(t)]
    threads_settle(before)


def test_a_damaged_next_file_read_ahead_names_it(tok, tmp_path):
    """The next file is opened while the one before it is encoded: a damaged one fails the
    run naming it, once its turn comes, and lets every batch go."""
    src = tmp_path / "src"
    src.mkdir()
    pq.write_table(pa.table({"text": make_texts(200, seed=3)}), src / "a.parquet")
    (src / "b.parquet").write_bytes(b"PAR1" + b"\0" * 64)  # passes the sniff, not a file
    before = threading.active_count()
    _tokenize.IN_FLIGHT.update(now=0, max=0)
    with pytest.raises(ValueError, match=r"'.*b\.parquet': cannot read"):
        la.tokenize(src, tmp_path / "o", tok, batch_rows=20, progress=False)
    assert _tokenize.IN_FLIGHT["now"] == 0
    assert not (tmp_path / "o").exists()
    threads_settle(before)


@pytest.mark.parametrize("bad_call", [5, 6, 7])
def test_a_failure_at_a_file_boundary_lets_the_next_file_go(tmp_path, bad_call):
    """A batch that fails as the next file's reading (read ahead, then encoding) is
    underway: the error names its file and row, nothing stays in flight, no thread runs
    on, no dest."""
    src = tmp_path / "src"
    src.mkdir()
    for k in range(3):  # five batches a file: calls 1-5 are a's, 6-10 b's
        pq.write_table(pa.table({"text": [f"{k} {i}" for i in range(50)]}),
                       src / f"{'abc'[k]}.parquet")
    calls = []

    def tokenizer(texts):
        calls.append(len(texts))
        return [[99 if len(calls) == bad_call and i == 3 else 1] for i in range(len(texts))]

    before = threading.active_count()
    _tokenize.IN_FLIGHT.update(now=0, max=0)
    name = "a" if bad_call <= 5 else "b"
    row = (bad_call - 1) % 5 * 10 + 3
    with pytest.raises(ValueError, match=rf"'.*{name}\.parquet', row {row}: the tokenizer "
                                         rf"returned id 99"):
        la.tokenize(src, tmp_path / "o", tokenizer, vocab_size=50, batch_rows=10,
                    progress=False, resume=False)
    assert _tokenize.IN_FLIGHT["now"] == 0
    assert _tokenize.IN_FLIGHT["max"] <= 5, _tokenize.IN_FLIGHT
    assert not (tmp_path / "o").exists()
    threads_settle(before)


def test_each_batch_is_encoded_then_converted_the_next_file_read_meanwhile(tok, tmp_path):
    """The calling thread encodes a batch, then converts it, batch after batch: no conversion
    (and no other encoding: a callable need not be thread-safe) runs beside the tokenizer's
    threads.  Reading runs ahead, across files: the next file's first batch is read before
    this file's last is converted."""
    src = tmp_path / "src"
    src.mkdir()
    for k in range(3):
        pq.write_table(pa.table({"text": make_texts(40, seed=40 + k)}), src / f"p{k}.parquet")
    events = []
    real_texts, real_raw, real_finish = (_tokenize._Encoder.texts, _tokenize._Encoder._raw,
                                         _tokenize._Encoder.finish)

    def texts(self, table, start=0):
        events.append(("read", threading.current_thread()))
        return real_texts(self, table, start)

    def raw(self, texts):
        events.append(("encode", threading.current_thread()))
        return real_raw(self, texts)

    def finish(self, prepared):
        time.sleep(0.05)  # a slow conversion: reading goes on meanwhile
        events.append(("convert", threading.current_thread()))
        return real_finish(self, prepared)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_tokenize._Encoder, "texts", texts)
        mp.setattr(_tokenize._Encoder, "_raw", raw)
        mp.setattr(_tokenize._Encoder, "finish", finish)
        la.tokenize(src, tmp_path / "o", tok, batch_rows=20, progress=False)
    work = [(k, t) for k, t in events if k != "read"]
    assert [k for k, _ in work] == ["encode", "convert"] * 6
    assert {t for _, t in work} == {threading.main_thread()}
    assert threading.main_thread() not in {t for k, t in events if k == "read"}
    kinds = [k for k, _ in events]
    reads = [i for i, k in enumerate(kinds) if k == "read"]
    converts = [i for i, k in enumerate(kinds) if k == "convert"]
    # file k + 1's first batch (the 3rd, the 5th read) before file k's last is converted
    assert reads[2] < converts[1] and reads[4] < converts[3], kinds


def test_numpy_ids_of_an_empty_document_are_any_dtype(tok, tmp_path):
    """A callable returning NumPy arrays: an empty document's ``np.array([])`` (float64)
    holds no id and is accepted; a non-empty float array is a ``TypeError`` naming the file
    and the row."""
    src = tmp_path / "src"
    src.mkdir()
    texts = ["a b", "", "lodarrow token", ""]
    pq.write_table(pa.table({"text": texts}), src / "a.parquet")

    def as_arrays(batch):
        return [np.array(tok.encode(t).ids) for t in batch]

    la.tokenize(src, tmp_path / "o", as_arrays, vocab_size=tok.get_vocab_size(),
                progress=False)
    got = pq.read_table(tmp_path / "o" / "a.parquet").column("tokens").to_pylist()
    assert got == [tok.encode(t).ids for t in texts]

    def floats(batch):
        return [np.array(tok.encode(t).ids, np.float64) for t in batch]

    with pytest.raises(TypeError, match=r"'.*a\.parquet', row 0: the tokenizer returned ids "
                                        r"of dtype float64, not integers"):
        la.tokenize(src, tmp_path / "o2", floats, vocab_size=tok.get_vocab_size(),
                    progress=False)
    assert not (tmp_path / "o2").exists()


def test_a_callable_tokenizers_own_error_keeps_its_type_and_says_where(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    pq.write_table(pa.table({"text": ["a", "b", "c"]}), src / "a.parquet")

    def broken(batch):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom") as info:
        la.tokenize(src, tmp_path / "o", broken, vocab_size=10, progress=False)
    assert any("a.parquet" in n and "rows 0-2" in n for n in info.value.__notes__)
    assert not (tmp_path / "o").exists()
