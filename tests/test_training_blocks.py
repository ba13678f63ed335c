"""Concatenated token blocks (docs/training.md#token-blocks):
``mode="blocks"`` joins the sequences of the shuffled stream end to end (a separator after
each, optionally) and cuts the stream into blocks of ``row_length``: every token once per
epoch, one shape for the run, positions restarting at each document and block."""

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lodarrow as la

STRIDE = 1000


def _table(lengths):
    """Sequence ``i`` holds ``i * STRIDE, i * STRIDE + 1, ...``: a token names its sequence."""
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    values = (np.repeat(np.arange(len(lengths)) * STRIDE - offsets[:-1], lengths)
              + np.arange(offsets[-1])).astype(np.int32)
    return pa.table({"ids": pa.ListArray.from_arrays(pa.array(offsets), pa.array(values))})


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    rng = np.random.default_rng(3)
    lengths = rng.integers(0, 300, 600)
    table = _table(lengths)
    folder = tmp_path_factory.mktemp("blocks")
    pq.write_table(table.slice(0, 400), folder / "a.parquet", row_group_size=100)
    pq.write_table(table.slice(400), folder / "b.parquet")
    return str(folder), table, lengths


def test_collate_joins_and_cuts_as_documented():
    col = pa.array([[1, 2, 3], [4], [5, 6], [7, 8, 9, 10]])
    b = la.collate(col, mode="blocks", row_length=4, separator=0)
    assert b["values"].tolist() == [[1, 2, 3, 0], [4, 0, 5, 6], [0, 7, 8, 9], [10, 0, 0, 0]]
    assert b["position_ids"].tolist() == [[0, 1, 2, 3], [0, 1, 0, 1], [0, 0, 1, 2],
                                          [0, 1, 0, 0]]
    assert b["seq_idx"].tolist() == [[0, 0, 0, 0], [1, 1, 2, 2], [2, 3, 3, 3], [3, 3, -1, -1]]
    assert b["cu_seqlens"].tolist() == [[0, 4, 4], [0, 2, 4], [0, 1, 4], [0, 2, 2]]
    dropped = la.collate(col, mode="blocks", row_length=4, remainder="drop")
    assert dropped["values"].tolist() == [[1, 2, 3, 4], [5, 6, 7, 8]]
    with pytest.raises(ValueError, match="separator applies to mode='blocks' only"):
        la.collate(col, mode="packed", separator=0)
    with pytest.raises(TypeError, match="separator must be a number"):
        la.collate(col, mode="blocks", row_length=4, separator="eos")
    with pytest.raises(ValueError, match="remainder applies to mode='blocks' only"):
        la.collate(col, mode="packed_rows", row_length=4, remainder="drop")


@pytest.mark.parametrize("world", [1, 3])
@pytest.mark.parametrize("separator", [None, -1])
def test_every_token_once_in_fixed_blocks(corpus, world, separator):
    path, _, lengths = corpus
    loaders = [la.batch_loader(path, "ids", mode="blocks", row_length=128, max_tokens=512,
                               separator=separator, num_replicas=world, rank=r, seed=5,
                               progress=False, cache_dir=False) for r in range(world)]
    assert len({len(lo) for lo in loaders}) == 1
    tokens, slots = [], 0
    for lo in loaders:
        for b in lo:
            values, mask = np.asarray(b["values"]), np.asarray(b["attention_mask"])
            assert values.shape == (4, 128), "one shape for the run"
            slots += values.size
            pos, idx = np.asarray(b["position_ids"]), np.asarray(b["seq_idx"])
            rows = np.asarray(b["rows"])
            for r in range(values.shape[0]):  # positions count from 0 in each document piece
                for k in np.unique(idx[r][mask[r]]):
                    piece = mask[r] & (idx[r] == k)
                    assert np.array_equal(pos[r][piece], np.arange(piece.sum()))
                    got = values[r][piece]
                    got = got[got != separator] if separator is not None else got
                    assert np.all(got // STRIDE == rows[k])
            tokens.append(values[mask])
    tokens = np.concatenate(tokens)
    if separator is not None:
        assert (tokens == separator).sum() == len(lengths)  # one after each sequence
        tokens = tokens[tokens != separator]
    expected = np.concatenate([i * STRIDE + np.arange(k) for i, k in enumerate(lengths)])
    assert np.array_equal(np.sort(tokens), np.sort(expected)), "every token exactly once"
    stats = loaders[0].statistics()
    assert sum(stats["padded_tokens"]) == slots
    assert sum(stats["tokens"]) == len(expected) + (len(lengths) if separator else 0)


def test_the_remainder_dropped_is_counted(corpus):
    _, table, lengths = corpus
    loader = la.batch_loader(table, "ids", mode="blocks", row_length=128, num_rows=2,
                             remainder="drop", window=100, seed=1, progress=False)
    delivered = sum(int(np.asarray(b["attention_mask"]).sum()) for b in loader)
    stats = loader.statistics()
    assert delivered == sum(stats["tokens"])
    # a cell's last batch may hold fewer full blocks than num_rows: empty rows, counted
    assert stats["padded_tokens"][0] % (2 * 128) == 0
    assert delivered + stats["packing"]["remainder_tokens"] == int(lengths.sum())


def test_blocks_resume_exactly(corpus):
    path, _, _ = corpus
    kw = dict(mode="blocks", row_length=64, max_tokens=256, seed=2, progress=False,
              cache_dir=False)
    whole = [np.asarray(b["values"]) for b in la.batch_loader(path, "ids", **kw)]
    first = la.batch_loader(path, "ids", **kw)
    head = [np.asarray(b["values"]) for _, b in zip(range(5), first)]
    state = json.loads(json.dumps(first.state_dict()))
    again = la.batch_loader(path, "ids", **kw)
    again.load_state_dict(state)
    rest = [np.asarray(b["values"]) for b in again]
    assert len(head) + len(rest) == len(whole)
    assert all(np.array_equal(a, b) for a, b in zip(head + rest, whole))


def test_what_blocks_refuse(corpus):
    _, table, _ = corpus
    with pytest.raises(ValueError, match="mode='blocks' needs max_tokens or num_rows"):
        la.batch_loader(table, "ids", mode="blocks", row_length=64, batch_size=8)
    with pytest.raises(ValueError, match="oversize does not apply to mode='blocks'"):
        la.batch_loader(table, "ids", mode="blocks", row_length=64, max_tokens=256,
                        oversize="drop")
    with pytest.raises(ValueError, match="row_length is needed"):
        la.batch_loader(table, "ids", mode="blocks", max_tokens=256)
    with pytest.raises(ValueError, match="separator applies to mode='blocks' only"):
        la.batch_loader(table, "ids", max_tokens=256, separator=0)
    with pytest.raises(TypeError, match="separator"):  # does not fit the values' int32
        la.batch_loader(table, "ids", mode="blocks", row_length=64, max_tokens=256,
                        separator=2**40)


def _tokens_of(batches):
    """Every token the batches deliver (the real ones, padding left out)."""
    return np.concatenate([np.asarray(b["values"])[np.asarray(b["attention_mask"], bool)]
                           for b in batches])


def _take(loaders, steps=None):
    out = []
    for lo in loaders:
        for k, b in enumerate(lo):
            out.append(b)
            if steps is not None and k + 1 == steps:
                break
    return out


@pytest.mark.parametrize("source", ["table", "parquet"])
def test_a_chain_of_world_changes_delivers_every_token_once(corpus, source):
    """3 ranks, then 2, then 5: a document partly delivered when the world changes (its
    first blocks received, the rest not) goes on from its first token not delivered, so
    every token of the epoch is delivered once; nothing is delivered again to count."""
    path, table, lengths = corpus
    src = table if source == "table" else path

    def make(world, rank):
        return la.batch_loader(src, "ids", mode="blocks", row_length=64, max_tokens=256,
                               separator=-1, seed=3, num_replicas=world, rank=rank,
                               progress=False, cache_dir=False)

    got = _take([make(3, r) for r in range(3)], 4)
    state = json.loads(json.dumps(make(3, 0).state_dict(steps=4)))
    second = [make(2, r) for r in range(2)]
    for lo in second:
        lo.load_state_dict(state)
    got += _take(second, 3)
    state = json.loads(json.dumps(second[0].state_dict()))
    assert state["segments"] == [[3, 0], [2, 4]]
    third = [make(5, r) for r in range(5)]
    for lo in third:
        lo.load_state_dict(state)
    assert "redelivered_tokens" not in third[0].statistics()
    got += _take(third)
    tokens = _tokens_of(got)
    real = np.sort(tokens[tokens != -1])
    expected = np.concatenate([np.arange(n) + i * STRIDE for i, n in enumerate(lengths)])
    assert np.array_equal(real, np.sort(expected)), "a token lost or delivered twice"
    assert (tokens == -1).sum() == len(lengths)  # each separator once too


def test_a_state_that_planned_what_was_left_whole_resumes_so_and_counts_it(corpus):
    """A state saved after a world change by a lodarrow that planned the sequences left
    whole (no "pieces" in it) resumes as it was saved: the partly delivered documents whole
    again, their tokens delivered before counted in ``statistics()["redelivered_tokens"]``."""
    _, table, lengths = corpus

    def make(world, rank):
        return la.batch_loader(table, "ids", mode="blocks", row_length=64, max_tokens=256,
                               seed=3, num_replicas=world, rank=rank, progress=False)

    got = _take([make(3, r) for r in range(3)], 4)
    state = make(3, 0).state_dict(steps=4)
    state["segments"] = [[3, 0], [2, 4]]  # as saved after 3 steps on 2 ranks, whole plans
    old_second = [make(2, r) for r in range(2)]
    for lo in old_second:
        lo.load_state_dict(state)
    assert "pieces" not in old_second[0].state_dict()
    got += _take(old_second)
    third = [make(2, r) for r in range(2)]
    for lo in third:
        lo.load_state_dict(state)
    again = third[0].statistics()["redelivered_tokens"]
    tokens = _tokens_of(got)
    assert again > 0 and len(tokens) - len(np.unique(tokens)) == again
    assert len(np.unique(tokens)) == lengths.sum()


@pytest.mark.parametrize("mode", ["blocks", "packed_rows"])
@pytest.mark.parametrize("source", ["table", "parquet"])
def test_the_one_call_batch_equals_the_general_path(corpus, tmp_path, monkeypatch, mode,
                                                    source):
    """The loader's rows and blocks, made in one kernel call (``rows_batch``), are the
    arrays the general path (a placement, then ``collate_rows``) makes: keys, order, dtypes
    and values; on several ranks, with an extra column, and for "blocks" a separator."""
    from lodarrow._training._produce import Producer

    _, table, _ = corpus
    kw = {"mode": mode, "row_length": 128, "max_tokens": 512, "seed": 2, "num_replicas": 2,
          "progress": False, "cache_dir": False, "extra_columns": ["ids_len"]}
    if mode == "blocks":
        kw["separator"] = -1
    else:
        kw["oversize"] = "split"
    src = table.append_column("ids_len", pa.compute.list_value_length(table.column("ids")))
    if source == "parquet":
        pq.write_table(src, tmp_path / "extra.parquet", row_group_size=150)
        src = str(tmp_path / "extra.parquet")

    def batches():
        out = []
        for rank in range(2):
            lo = la.batch_loader(src, "ids", rank=rank, **kw)
            for epoch in range(2):
                lo.set_epoch(epoch)
                out += list(lo)
        return out

    fast = batches()
    monkeypatch.setattr(Producer, "_rows_batch", lambda *args: None)
    general = batches()
    assert len(fast) == len(general) > 0
    for a, b in zip(fast, general):
        assert list(a) == list(b)
        for key in a:
            x, y = np.asarray(a[key]), np.asarray(b[key])
            assert x.dtype == y.dtype and np.array_equal(x, y), key


def test_a_batch_of_rows_sent_without_per_token_arrays_is_made_whole_again():
    """What a ``DataLoader`` worker sends of a batch of rows (values, cu_seqlens and each
    piece's sequence) gives back the per-token arrays, including empty pieces and rows."""
    from lodarrow._training import _collate as c

    lengths = np.array([5, 0, 7, 3, 0, 9, 1])
    seqs = c.as_sequences(_table(lengths), "ids", 0)
    p = c.block_placement(lengths, 6)
    seq = np.arange(len(lengths))[p.seq]
    args = (seqs, seq, seq, p.start, p.length, p.row, p.offset, p.n_rows + 2, 6,
            np.zeros((), np.int32))
    whole, rows, _ = c.rows_batch(*args)
    sent, _, _ = c.rows_batch(*args, per_token=False)
    assert {"position_ids", "attention_mask", "seq_idx"}.isdisjoint(sent)
    made = c.rows_tokens(sent)
    assert c.PIECE_IDS not in made and list(made) == list(whole)
    for key in whole:
        assert np.array_equal(np.asarray(made[key]), np.asarray(whole[key])), key
    assert rows.tolist() == list(range(len(lengths)))
    assert whole["values"].shape == (p.n_rows + 2, 6)
    assert not whole["attention_mask"][-2:].any() and (whole["seq_idx"][-2:] == -1).all()


def test_a_packed_batch_sent_without_per_token_arrays_is_made_whole_again():
    """A "packed" batch as a ``DataLoader`` worker sends it (values, cu_seqlens, lengths: no
    ``position_ids`` or ``seq_idx``) gives back the batch made whole in one process, empty
    sequences and a batch of none included; positions and indices checked against NumPy."""
    from lodarrow._training import _collate as c

    lengths = np.array([5, 0, 7, 3, 0, 9, 1])
    seqs = c.as_sequences(_table(lengths), "ids", 0)
    pad = np.zeros((), np.int64)
    for rows in ([6, 0, 1, 3, 2, 5, 4], [1, 4], []):
        rows = np.array(rows, np.int64)
        whole = c.collate_rows(seqs, rows, "packed", pad)
        sent = c.collate_rows(seqs, rows, "packed", pad, per_token=False)
        assert {"position_ids", "seq_idx"}.isdisjoint(sent) and sent[c.PACKED_TOKENS] is True
        made = c.rows_tokens(sent)
        assert c.PACKED_TOKENS not in made and set(made) == set(whole)
        for key in whole:
            assert np.array_equal(np.asarray(made[key]), np.asarray(whole[key])), key
        n = lengths[rows]
        assert np.array_equal(made["position_ids"],
                              np.concatenate([np.arange(k) for k in n] + [np.zeros(0, int)]))
        assert np.array_equal(made["seq_idx"], np.repeat(np.arange(len(rows)), n))
        assert made["position_ids"].dtype == np.int64 and made["seq_idx"].dtype == np.int32


def test_a_padded_batch_sent_without_its_mask_is_made_whole_again():
    """A "padded" batch as a ``DataLoader`` worker sends it (values and lengths, no
    ``attention_mask``) gives back the batch made whole in one process: empty sequences, rows
    of ``num_rows`` past the batch's and a width rounded up included."""
    from lodarrow._training import _collate as c

    lengths = np.array([5, 0, 7, 3, 0, 9, 1])
    seqs = c.as_sequences(_table(lengths), "ids", 0)
    pad = np.full((), -1, np.int32)
    shapes = [c.check_shape("padded"), c.check_shape("padded", num_rows=9, pad_to_multiple_of=8)]
    for shape in shapes:
        for rows in ([6, 0, 1, 3, 2, 5, 4], [1, 4], []):
            rows = np.array(rows, np.int64)
            whole = c.collate_rows(seqs, rows, "padded", pad, shape=shape)
            sent = c.collate_rows(seqs, rows, "padded", pad, shape=shape, per_token=False)
            assert "attention_mask" not in sent and sent[c.PADDED_MASK] is True
            made = c.rows_tokens(sent)
            assert c.PADDED_MASK not in made and set(made) == set(whole)
            for key in whole:
                assert np.array_equal(np.asarray(made[key]), np.asarray(whole[key])), key
            mask = made["attention_mask"]
            assert mask.dtype == bool and mask.shape == made["values"].shape
            assert (mask.sum(1) == made["lengths"]).all()



def test_a_segments_batch_sent_without_its_ids_and_positions_is_made_whole_again():
    """A "segments" batch as a ``DataLoader`` worker sends it (values and lengths, no
    ``segment_ids`` or ``position_ids``) gives back the batch made whole in one process:
    empty sequences, segments of ``num_segments`` past the batch's and a flat length rounded
    up included, in the keys' order."""
    from lodarrow._training import _collate as c

    lengths = np.array([5, 0, 7, 3, 0, 9, 1])
    seqs = c.as_sequences(_table(lengths), "ids", 0)
    pad = np.full((), -1, np.int32)
    shapes = [c.check_shape("segments"),
              c.check_shape("segments", num_segments=9, pad_to_multiple_of=16)]
    for shape in shapes:
        for rows in ([6, 0, 1, 3, 2, 5, 4], [1, 4], [2], []):
            rows = np.array(rows, np.int64)
            whole = c.collate_rows(seqs, rows, "segments", pad, shape=shape)
            sent = c.collate_rows(seqs, rows, "segments", pad, shape=shape, per_token=False)
            assert {"segment_ids", "position_ids"}.isdisjoint(sent)
            assert sent[c.SEGMENT_TOKENS] is True
            made = c.rows_tokens(sent)
            assert list(made) == list(whole)
            for key in whole:
                assert np.array_equal(np.asarray(made[key]), np.asarray(whole[key])), key
                assert np.asarray(made[key]).dtype == np.asarray(whole[key]).dtype, key
            # NumPy's own reading of the layout: each token's segment and place in it
            n, m = len(rows), made["num_segments"]
            total = int(lengths[rows].sum())
            ids = np.repeat(np.arange(n), lengths[rows])
            assert (made["segment_ids"][:total] == ids).all()
            assert (made["segment_ids"][total:] == m).all()
            starts = np.repeat(np.cumsum(lengths[rows]) - lengths[rows], lengths[rows])
            assert (made["position_ids"][:total] == np.arange(total) - starts).all()
            assert (made["position_ids"][total:] == 0).all()

TOKEN_MODES = [
    {"mode": "packed", "max_tokens": 64},
    {"mode": "packed_rows", "row_length": 320, "max_tokens": 1280},     # rows the plan places
    {"mode": "packed_rows", "row_length": 32, "batch_size": 6,           # rows packed at collation
     "oversize": "split"},
    {"mode": "blocks", "row_length": 32, "max_tokens": 128, "separator": 0}]


@pytest.mark.parametrize("kw", TOKEN_MODES, ids=lambda kw: f"{kw['mode']}-{len(kw)}")
@pytest.mark.parametrize("where", ["numpy", "torch", "workers"])
def test_token_arrays_false_leaves_out_only_the_per_token_arrays(corpus, kw, where):
    """``token_arrays=False``: the same batches without ``position_ids``, ``attention_mask``
    and ``seq_idx`` (which ``cu_seqlens`` determines), in process, as torch tensors and from
    DataLoader workers (whose batches cross without them, and are not rebuilt)."""
    from lodarrow._training._collate import TOKEN_ARRAYS

    to = "numpy" if where == "numpy" else "torch"
    if to == "torch":
        torch = pytest.importorskip("torch")

    def batches(token_arrays):
        loader = la.batch_loader(corpus[0], "ids", seed=2, to=to, progress=False,
                                 token_arrays=token_arrays, **kw)
        if where != "workers":
            return list(loader)
        data = torch.utils.data.DataLoader(loader.torch(), batch_size=None, num_workers=2)
        return list(data)

    full, lean = batches(True), batches(False)
    assert len(full) == len(lean) > 1
    for a, b in zip(full, lean):
        assert set(a) - set(b) == set(TOKEN_ARRAYS) & set(a) != set()
        assert not set(b) - set(a)
        for key in b:
            assert np.array_equal(np.asarray(a[key]), np.asarray(b[key])), key


def test_token_arrays_false_is_refused_where_there_is_no_cu_seqlens(corpus):
    for mode in ("padded", "segments"):
        with pytest.raises(ValueError, match=r"token_arrays=False .* mode='"):
            la.batch_loader(corpus[1], "ids", max_tokens=64, mode=mode, token_arrays=False)
    with pytest.raises(TypeError, match="token_arrays"):
        la.batch_loader(corpus[1], "ids", max_tokens=64, mode="packed", token_arrays="no")
