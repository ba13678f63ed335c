"""Where the loader's options meet (docs/training.md#where-options-meet): hypothesis draws from the
product of the options -- mode x budget kind x padding option x balance x drop_last x
oversize x nulls x ranks x world change x resume path x prefetch x source -- and asserts the
guarantees on the batches actually delivered, not on the plan:

- every sequence of the epoch exactly once across the ranks (and across a resume on another
  world), each with its own tokens, all of them (packed rows' chunks included); what is left
  out is what the statistics say was dropped;
- every batch within ``max_tokens`` counted in *slots*, padding included (a batch of one
  over-long sequence only under ``oversize="alone"``), and within its shape options;
- equal steps on every rank;
- ``statistics()`` equal to what was delivered: tokens, slots, padding, dropped;
- a combination that cannot be honoured is refused when the loader is made, never later.

The source is the corpus in memory, in Parquet files, a Ray Data source (an object with
``iter_batches``, as Ray's ``Dataset``: one rank, Ray shards it), or a mixture (``la.mix``)
of its two parts, each taken once an epoch.  DataLoader workers (processes) are slower to
start: their combinations are in tests/test_training_stateful.py and
tests/test_training_distributed.py.
"""

import json
import tempfile
from itertools import islice
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

import lodarrow as la
from test_training_sources import FakeRay

N = 240
#: sequence ``i`` holds ``i * STRIDE, i * STRIDE + 1, ...``: a token names its sequence
STRIDE = 1000


def _lengths(seed):
    rng = np.random.default_rng(seed)
    lengths = np.clip(rng.lognormal(2.6, 0.9, N), 1, 150).astype(np.int64)
    lengths[rng.choice(N, 8, replace=False)] = 0
    return lengths


def _table(lengths, null_rows=(), null_values=()):
    """The corpus: sequence ``i`` of ``lengths[i]`` tokens, a label column ``i``; the rows
    ``null_rows`` null, the first token of the rows ``null_values`` a null value."""
    n = len(lengths)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    values = (np.repeat(np.arange(n) * STRIDE - offsets[:-1], lengths)
              + np.arange(offsets[-1])).astype(np.int32)
    valid = np.ones(len(values), bool)
    for r in null_values:
        valid[offsets[r]] = False
    rows_valid = np.ones(n, bool)
    rows_valid[list(null_rows)] = False
    col = pa.ListArray.from_arrays(pa.array(offsets), pa.array(values, mask=~valid),
                                   mask=pa.array(~rows_valid))
    return pa.table({"tokens": col, "label": np.arange(n, dtype=np.int64)})


@st.composite
def cases(draw):
    mode = draw(st.sampled_from(["padded", "packed", "packed_rows", "segments", "blocks"]))
    kw = {"mode": mode, "seed": draw(st.integers(0, 2**16)),
          "shuffle": draw(st.booleans()), "drop_last": draw(st.booleans()),
          "prefetch": draw(st.sampled_from([0, 2])), "extra_columns": ["label"]}
    # rows the plan lays out take max_tokens or num_rows (batch_size alone: packed at collation)
    budget = draw(st.sampled_from(
        ["max_tokens", "num_rows"] if mode == "blocks" else
        ["batch_size", "max_tokens", "num_rows"] if mode == "packed_rows" else
        ["batch_size", "max_tokens", "both"]))
    if budget in ("batch_size", "both"):
        kw["batch_size"] = draw(st.integers(2, 24))
    if budget in ("max_tokens", "both"):
        kw["max_tokens"] = draw(st.sampled_from([160, 256, 512, 1024]))
        kw["balance"] = draw(st.sampled_from(["batches", "tokens", "compute"]))
        if kw["balance"] == "compute":
            kw["alpha"] = 0.01
    if mode == "blocks":  # documents joined and cut into blocks of row_length
        kw["row_length"] = draw(st.sampled_from([32, 64, 160]))
        if budget == "num_rows":
            kw["num_rows"] = draw(st.integers(1, 8))
        if draw(st.booleans()):
            kw["separator"] = -1
    elif mode == "packed_rows":
        kw["row_length"] = draw(st.sampled_from([32, 64, 160]))
        kw["oversize"] = draw(st.sampled_from(["split", "drop", "error"]))
        if budget == "num_rows":
            kw["num_rows"] = draw(st.integers(1, 8))
    else:
        kw["oversize"] = draw(st.sampled_from(["alone", "alone", "drop", "drop", "error"]))
        if mode in ("packed", "segments"):
            kw["cost"] = draw(st.sampled_from([None, "padded", "packed"]))
        option = draw(st.sampled_from(
            ["none", "pad_to_multiple_of", "pad_widths"]
            + (["num_rows"] if mode == "padded" else [])
            + (["num_segments"] if mode == "segments" else [])))
        if mode == "packed":
            option = "none"
        if option == "pad_to_multiple_of":
            kw["pad_to_multiple_of"] = draw(st.sampled_from([8, 16, 64]))
        elif option == "pad_widths":
            kw["pad_widths"] = draw(st.sampled_from([(64, 128, 256), (32, 96, 160, 512),
                                                     (1024,)]))
        elif option == "num_rows":
            kw["num_rows"] = draw(st.integers(2, 24))
        elif option == "num_segments":
            kw["num_segments"] = draw(st.integers(2, 24))
    # mostly what runs; the refusals (a null under "error", a null value under "empty") too
    nulls, policy = draw(st.sampled_from(
        [("none", "error")] * 4 + [("rows", "empty"), ("rows", "drop"), ("values", "drop")] * 2
        + [("rows", "error"), ("values", "error"), ("values", "empty")]))
    if nulls != "none":
        kw["nulls"] = policy
    # a mixture of two parts of the corpus, each taken once an epoch (la.mix's virtual source
    # under every option; tests/test_training_mix.py draws the weights and counts)
    source = draw(st.sampled_from(["memory", "parquet", "mixture-memory", "mixture-parquet",
                                   "ray"]))
    if source.endswith("memory") or source == "ray":
        kw["window"] = draw(st.integers(8, 128))
    else:
        kw["row_groups"] = draw(st.integers(1, 3))
    ranks = 1 if source == "ray" else 4  # Ray shards a dataset itself: one rank
    world = draw(st.integers(1, ranks))
    resume = draw(st.sampled_from([None, "state_dict", "start_step"]))
    after = world
    if resume == "state_dict":
        after = draw(st.integers(1, ranks))
    stop = draw(st.floats(0, 1))
    return dict(kw=kw, nulls=nulls, source=source, world=world, resume=resume, after=after,
                stop=stop, seed=draw(st.integers(0, 3)))


def _write(table, folder):
    """Three files, row groups of different sizes; the last one a single row group."""
    pq.write_table(table.slice(0, 90), folder / "a.parquet", row_group_size=37)
    pq.write_table(table.slice(90, 100), folder / "b.parquet", row_group_size=50)
    pq.write_table(table.slice(190), folder / "c.parquet")
    return str(folder)


def _ids(batch):
    """The batch's sequences, as positions in the corpus (a mixture's: from the label)."""
    return np.asarray(batch["label"] if "source" in batch else batch["rows"])


def _source(table, tmp, kind):
    """The corpus as the case's source: the table, its Parquet files, a Ray source of it, or
    a mixture of its two parts (rows [0, 190) and [190, 240), files a, b and c), each taken once."""
    if kind == "memory":
        return table
    if kind == "ray":
        return FakeRay(table)
    if kind == "mixture-memory":
        return la.mix([table.slice(0, 190), table.slice(190)], counts=[190, 50])
    folder = _write(table, tmp)
    if kind == "parquet":
        return folder
    return la.mix([[f"{folder}/a.parquet", f"{folder}/b.parquet"], f"{folder}/c.parquet"],
                  counts=[190, 50])


def _tokens(batch, mode):
    """``{row: token values}`` of a delivered batch, read from its arrays the way a model
    reads them, and the batch's slots (the values array's positions)."""
    rows = _ids(batch)
    values = np.asarray(batch["values"])
    out = {}
    if mode == "padded":
        mask, lengths = np.asarray(batch["attention_mask"]), np.asarray(batch["lengths"])
        assert not mask[len(rows):].any()
        for k, row in enumerate(rows):
            assert mask[k].sum() == lengths[k] and mask[k, :lengths[k]].all()
            out[int(row)] = values[k, :lengths[k]]
    elif mode == "packed":
        cu = np.asarray(batch["cu_seqlens"])
        for k, row in enumerate(rows):
            out[int(row)] = values[cu[k]:cu[k + 1]]
    elif mode == "segments":
        ids = np.asarray(batch["segment_ids"])
        assert (ids[ids >= len(rows)] == batch["num_segments"]).all()
        for k, row in enumerate(rows):
            out[int(row)] = values[ids == k]
    else:  # packed rows and blocks
        mask, idx = np.asarray(batch["attention_mask"]), np.asarray(batch["seq_idx"])
        assert (idx[~mask] == -1).all()
        for k, row in enumerate(rows):
            out[int(row)] = values[mask & (idx == k)]
    return out, values.size


def _shape_kept(batch, kw):
    values = np.asarray(batch["values"])
    n = len(batch["rows"])
    mode = kw["mode"]
    if "batch_size" in kw and mode != "packed_rows":
        assert n <= kw["batch_size"]
    if mode == "padded":
        width = values.shape[1]
        if kw.get("num_rows"):
            assert values.shape[0] == kw["num_rows"]
    elif mode == "segments":
        width = values.shape[0]
        if kw.get("num_segments"):
            assert batch["num_segments"] == kw["num_segments"]
        assert n <= batch["num_segments"]
    elif mode in ("packed_rows", "blocks"):
        assert values.shape[1] == kw["row_length"]
        if kw.get("num_rows") or kw.get("max_tokens"):
            rows = kw.get("num_rows") or kw["max_tokens"] // kw["row_length"]
            assert values.shape[0] == rows, "one shape for the run"
        return
    else:
        return
    if kw.get("pad_to_multiple_of"):
        assert width % kw["pad_to_multiple_of"] == 0
    if kw.get("pad_widths"):
        assert width in kw["pad_widths"]


def _budget_kept(batch, slots, kw):
    if "max_tokens" not in kw or slots <= kw["max_tokens"]:
        return
    # over the budget: only a sequence alone in its batch, too long for any batch
    rows = np.asarray(batch["rows"])
    assert kw.get("oversize") == "alone" and len(rows) == 1, (slots, kw)


def _deliver(loaders, stop=None):
    """Each rank's batches (up to ``stop`` steps), equal in number."""
    got = [list(islice(lo, stop)) for lo in loaders]
    assert len({len(b) for b in got}) == 1, "unequal steps per rank"
    return got


@settings(max_examples=300)
@given(cases())
def test_guarantees_hold_on_the_delivered_batches(case):
    kw, world = case["kw"], case["world"]
    lengths = _lengths(case["seed"])
    rng = np.random.default_rng(case["seed"])
    null_rows = null_values = ()
    if case["nulls"] == "rows":
        null_rows = rng.choice(np.flatnonzero(lengths > 0), 5, replace=False)
    elif case["nulls"] == "values":
        null_values = rng.choice(np.flatnonzero(lengths > 0), 5, replace=False)
    table = _table(lengths, null_rows, null_values)
    with tempfile.TemporaryDirectory() as tmp:
        source = _source(table, Path(tmp), case["source"])

        def make(R, r):
            return la.batch_loader(source, "tokens", num_replicas=R, rank=r, progress=False,
                                   cache_dir=False, **kw)

        try:
            loaders = [make(world, r) for r in range(world)]
        except ValueError as exc:  # refused when made: that is a guarantee too
            _refusal_is_explained(str(exc), kw, case)
            event("refused when made: " + ("null" if "null" in str(exc) else
                                           "oversize" if "oversize" in str(exc) else "limits"))
            return
        event(f"delivered, resume={case['resume']}")
        event(f"delivered from {case['source']}")
        stats = loaders[0].statistics()
        steps = len(loaders[0])
        assert all(len(lo) == steps for lo in loaders)
        assert all(lo.statistics() == stats for lo in loaders)
        received = {}
        slots_by_rank, tokens_by_rank = [0] * world, [0] * world
        dropped_before = 0
        if case["resume"] is None:
            batches = _deliver(loaders)
        else:
            stop = int(case["stop"] * steps)
            batches = _deliver(loaders, stop)
            state = json.loads(json.dumps(loaders[0].state_dict()))
            assert all(lo.state_dict() == state for lo in loaders)
            assert state["cursor"] == stop
            dropped_before = stats["dropped"]["drop_last"]
        for r, mine in enumerate(batches):
            for b in mine:
                got, slots = _tokens(b, kw["mode"])
                _shape_kept(b, kw)
                _budget_kept(b, slots, kw)
                if "source" in b:  # a mixture: its rows are positions in their source
                    assert np.array_equal(np.asarray(b["label"]),
                                          np.asarray(b["rows"]) + 190 * np.asarray(b["source"]))
                else:
                    assert np.array_equal(np.asarray(b["label"]), np.asarray(b["rows"]))
                slots_by_rank[r] += slots
                for row, toks in got.items():
                    tokens_by_rank[r] += len(toks)
                    received.setdefault(row, []).append(toks)
        if case["resume"] is None:
            # the statistics are what was delivered
            assert stats["tokens"] == tokens_by_rank
            assert stats["padded_tokens"] == slots_by_rank
            total = sum(slots_by_rank)
            assert stats["padding"] == pytest.approx(
                0.0 if total == 0 else 1 - sum(tokens_by_rank) / total)
            final = stats
        else:
            R = case["after"]
            try:
                later = [make(R, r) for r in range(R)]
                for lo in later:
                    if case["resume"] == "state_dict":
                        lo.load_state_dict(state)
                    else:
                        lo.set_epoch(0, start_step=state["cursor"])
            except ValueError as exc:  # fewer sequences left than ranks: said at once
                assert "num_replicas" in str(exc)
                return
            final = later[0].statistics()
            if R == world:
                dropped_before = 0  # the same plan: its drops are the final statistics'
            for mine in _deliver(later):
                for b in mine:
                    got, slots = _tokens(b, kw["mode"])
                    _shape_kept(b, kw)
                    _budget_kept(b, slots, kw)
                    for row, toks in got.items():
                        received.setdefault(row, []).append(toks)
    # documented: a sequence split into chunks across two batches, the first received
    # before a world change, is delivered again whole after it (docs/training.md#resuming)
    again = kw.get("oversize") == "split" or kw["mode"] == "blocks"
    again = again and case["resume"] == "state_dict" and case["after"] != world
    _exactly_once(received, lengths, kw, final, dropped_before, null_rows, again)


def _exactly_once(received, lengths, kw, stats, dropped_before, null_rows, again=False):
    nulls = set(np.asarray(null_rows).tolist())
    for row, pieces in received.items():
        toks = np.sort(np.concatenate(pieces))
        if kw.get("separator") is not None:  # blocks: one separator after each sequence
            assert again or (toks == kw["separator"]).sum() == 1, f"sequence {row}: separators"
            toks = toks[toks != kw["separator"]]
        if again and (kw["mode"] == "blocks" or lengths[row] > kw["row_length"]):
            toks = np.unique(toks)
        length = 0 if row in nulls else lengths[row]
        assert np.array_equal(toks, row * STRIDE + np.arange(length)), \
            f"sequence {row}: its tokens are not delivered exactly once"
    missing = len(lengths) - len(received)
    dropped = stats["dropped"]
    assert missing == sum(dropped.values()) \
        + dropped_before, (missing, dropped, dropped_before)
    if not kw.get("drop_last"):
        assert dropped["drop_last"] == 0 or dropped_before == 0


def _refusal_is_explained(message, kw, case):
    """A refusal names what cannot be honoured (an option, a limit, a null)."""
    names = ("num_rows", "num_segments", "max_tokens", "row_length", "pad_widths", "null",
             "num_replicas", "batch_size", "oversize", "equal steps")
    assert any(name in message for name in names), message


# --- the cases the issue reported, as regression tests ----------------------------------------

@pytest.fixture(scope="module")
def corpus20k():
    rng = np.random.default_rng(1)
    lengths = np.clip(rng.lognormal(4.5, 1.0, 4000), 1, 4000).astype(np.int64)
    return _table(lengths), lengths


@pytest.mark.parametrize("shape", [{"pad_to_multiple_of": 64},
                                   {"pad_widths": (64, 128, 1024), "oversize": "drop"},
                                   {"num_rows": 4}])
def test_padding_options_keep_max_tokens(corpus20k, shape):
    table, lengths = corpus20k
    loader = la.batch_loader(table, "tokens", max_tokens=1024, progress=False, **shape)
    stats = loader.statistics()
    slots = tokens = 0
    for b in loader:
        n = b["values"].size
        assert n <= 1024 or len(b["rows"]) == 1
        slots += n
        tokens += int(b["lengths"].sum())
    assert stats["padded_tokens"] == [slots] and stats["tokens"] == [tokens]
    assert stats["padding"] == pytest.approx(1 - tokens / slots)


def test_num_segments_and_num_rows_are_honoured_by_the_plan(corpus20k):
    table, _ = corpus20k
    seg = la.batch_loader(table, "tokens", max_tokens=65536, mode="segments",
                          num_segments=256, progress=False)
    assert all(len(b["rows"]) <= 256 and b["num_segments"] == 256 for b in seg)
    rows = la.batch_loader(table, "tokens", max_tokens=1 << 20, num_rows=128, progress=False)
    assert all(b["values"].shape[0] == 128 for b in rows)


def test_limits_that_cannot_be_honoured_are_refused_when_made(corpus20k):
    table, _ = corpus20k
    with pytest.raises(ValueError, match="batch_size=64 is more than num_rows=32"):
        la.batch_loader(table, "tokens", batch_size=64, num_rows=32)
    with pytest.raises(ValueError, match="batch_size=64 is more than num_segments=16"):
        la.batch_loader(table, "tokens", batch_size=64, mode="segments", num_segments=16)
    with pytest.raises(ValueError, match="more than max_tokens=4096"):
        la.batch_loader(table, "tokens", max_tokens=4096, mode="packed_rows",
                        row_length=1024, num_rows=8, oversize="split")
    with pytest.raises(ValueError, match="widest of pad_widths"):
        la.batch_loader(table, "tokens", batch_size=8, pad_widths=(64, 128))
    with pytest.raises(ValueError, match="after padding"):
        la.batch_loader(table, "tokens", max_tokens=1000, pad_to_multiple_of=64,
                        oversize="error")


def test_a_null_value_inside_a_list_is_known_before_the_first_batch(tmp_path):
    lengths = np.full(60, 3)
    table = _table(lengths, null_values=[45])
    pq.write_table(table.slice(0, 30), tmp_path / "part-1.parquet", row_group_size=10)
    pq.write_table(table.slice(30), tmp_path / "part-2.parquet", row_group_size=10)
    for nulls in ("error", "empty"):
        with pytest.raises(ValueError, match=r"row 5 of row group 1 of '.*part-2.parquet' "
                                             r"of column 'tokens' holds a null value"):
            la.batch_loader(str(tmp_path), "tokens", batch_size=4, nulls=nulls,
                            cache_dir=False)
    loader = la.batch_loader(str(tmp_path), "tokens", batch_size=4, nulls="drop",
                             cache_dir=False, progress=False)
    rows = np.concatenate([b["rows"] for b in loader])
    assert sorted(rows) == [r for r in range(60) if r != 45]
    assert loader.statistics()["dropped"]["nulls"] == 1
    # in memory alike
    with pytest.raises(ValueError, match="row 45 of column 'tokens' holds a null value"):
        la.batch_loader(table, "tokens", batch_size=4)


def test_null_values_are_found_from_a_warm_lengths_cache(tmp_path):
    """The second start reads the lengths from the cache: the footer's null counts (which
    count empty lists too) tell the row groups that may hold a null value, and only those
    are read to find it."""
    lengths = np.array([3, 0, 2, 0, 4] * 10)
    table = _table(lengths, null_values=[12])
    pq.write_table(table, tmp_path / "c.parquet", row_group_size=10)
    cache = tmp_path / "cache"
    for _ in range(2):  # cold, then warm
        with pytest.raises(ValueError, match="row 2 of row group 1 .* holds a null value"):
            la.batch_loader(str(tmp_path / "c.parquet"), "tokens", batch_size=4,
                            cache_dir=str(cache))
    clean = _table(lengths)
    pq.write_table(clean, tmp_path / "d.parquet", row_group_size=10)
    for _ in range(2):
        la.batch_loader(str(tmp_path / "d.parquet"), "tokens", batch_size=4,
                        cache_dir=str(cache))


def test_equal_steps_when_batches_of_one_sequence_do_not_divide_the_ranks():
    """Cells of one-sequence batches whose count is no multiple of the ranks: neighbouring
    batches that fit together are merged (found by the resume property test)."""
    lengths = np.array([0, 0, 0, 0, 0, 14, 0, 0, 0, 0, 0])
    table = _table(lengths)
    loaders = [la.batch_loader(table, "tokens", max_tokens=80, balance="tokens", window=1,
                               shuffle=False, bucket=False, num_replicas=6, rank=r,
                               progress=False) for r in range(6)]
    got = [[b for b in lo] for lo in loaders]
    assert len({len(b) for b in got}) == 1
    rows = np.concatenate([b["rows"] for mine in got for b in mine])
    assert sorted(rows) == list(range(11))
    assert all(b["values"].size <= 80 for mine in got for b in mine)


# --- found by a review as a new user, kept as regression tests --------------------------------

@pytest.fixture(scope="module")
def files(tmp_path_factory):
    rng = np.random.default_rng(7)
    lengths = np.clip(rng.lognormal(4.6, 0.7, 2000), 1, 700).astype(np.int64)
    folder = tmp_path_factory.mktemp("review")
    table = _table(lengths)
    pq.write_table(table.slice(0, 1200), folder / "a.parquet", row_group_size=300)
    pq.write_table(table.slice(1200), folder / "b.parquet")
    return str(folder), lengths


@pytest.mark.parametrize("world", [2, 4, 8])
@pytest.mark.parametrize("drop_last", [False, True])
def test_one_packed_row_a_batch_on_several_ranks(files, world, drop_last):
    """The pretraining shape (one row of ``row_length`` a batch, ``oversize="split"``) on
    several ranks: a row of several sequences is cut in two where the batches would not
    divide the ranks; never a part of a split sequence dropped."""
    path, lengths = files
    loaders = [la.batch_loader(path, "tokens", mode="packed_rows", row_length=200,
                               max_tokens=256, oversize="split", drop_last=drop_last,
                               num_replicas=world, rank=r, seed=1, progress=False,
                               cache_dir=False) for r in range(world)]
    received = {}
    for mine in _deliver(loaders):
        for b in mine:
            assert b["values"].shape == (1, 200)
            for row, toks in _tokens(b, "packed_rows")[0].items():
                received.setdefault(row, []).append(toks)
    _exactly_once(received, lengths, {"row_length": 200}, loaders[0].statistics(), 0, ())


def test_a_review_of_the_options_meeting():
    table = _table(_lengths(0))
    with pytest.raises(ValueError, match="batch_size=16 does not apply to rows the plan lays out"):
        la.batch_loader(table, "tokens", batch_size=16, max_tokens=2048, mode="packed_rows",
                        row_length=256, oversize="split")
    with pytest.raises(ValueError, match="narrowest width .* no batch fits"):
        la.batch_loader(table, "tokens", max_tokens=1024, num_rows=16, pad_widths=(128, 320))
    with pytest.raises(ValueError, match="less than one row of row_length=512"):
        la.batch_loader(table, "tokens", max_tokens=256, mode="packed_rows", row_length=512,
                        num_rows=4)
    with pytest.raises(ValueError, match="alpha applies to balance='compute' only"):
        la.batch_loader(table, "tokens", batch_size=4, alpha=0.5)
    loader = la.batch_loader(table, "tokens", batch_size=16, progress=False)
    with pytest.raises(ValueError, match="steps=99 is past the epoch's 15 steps"):
        loader.state_dict(steps=99)


def test_a_bool_extra_column_with_nulls():
    table = pa.table({"tokens": [[1], [2, 3], [4], [5]],
                      "flag": pa.array([True, None, False, True])})
    batch = next(iter(la.batch_loader(table, "tokens", batch_size=4, shuffle=False,
                                      extra_columns=["flag"], progress=False)))
    rows = np.asarray(batch["rows"])
    assert batch["flag"].tolist() == [[True, False, False, True][r] for r in rows]
    assert batch["flag_mask"].tolist() == [r != 1 for r in rows]


def test_a_second_whole_pass_is_the_same_batches_a_broken_off_one_goes_on():
    table = _table(_lengths(1))
    loader = la.batch_loader(table, "tokens", batch_size=16, progress=False)
    first = [b["rows"] for b in loader]
    with pytest.warns(UserWarning, match="iterated again from step 0: the same batches"):
        again = [b["rows"] for b in loader]
    assert len(again) == len(first) and all(np.array_equal(a, b) for a, b in zip(first, again))
    loader.set_epoch(1)
    it = iter(loader)
    head = [next(it)["rows"] for _ in range(3)]
    del it
    rest = [b["rows"] for b in loader]  # goes on from the cursor, no warning
    assert len(head) + len(rest) == len(loader)


def test_statistics_count_a_split_sequence_once_a_batch(files):
    path, _ = files
    loader = la.batch_loader(path, "tokens", mode="packed_rows", row_length=64,
                             max_tokens=512, oversize="split", seed=2, progress=False,
                             cache_dir=False)
    delivered = sum(len(b["rows"]) for b in loader)
    assert sum(loader.statistics()["sequences"]) == delivered


def test_the_stage_table_names_every_parameter_once():
    """docs/training.md's stage table gives every parameter of ``batch_loader`` one owner
    (the source, the plan, the shape, the delivery), and its count is the signature's."""
    import inspect
    import re

    text = (Path(__file__).resolve().parent.parent / "docs" / "training.md").read_text()
    stages = [line for line in text.splitlines() if line.startswith("| **")]
    named = [name for line in stages for name in re.findall(r"`(\w+)`", line.split("|")[2])]
    params = [p for p in inspect.signature(la.batch_loader).parameters if p != "source"]
    assert sorted(set(named) & set(params)) == sorted(params)
    assert all(named.count(p) == 1 for p in params)
    count = re.search(r"`batch_loader`'s (\d+) parameters has one owner", text)
    assert count and int(count.group(1)) == len(params) + 1  # the source is one too
