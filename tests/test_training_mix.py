"""Mixing corpora by weight (la.mix; docs/training.md#mixing-corpora), checked on the batches
delivered: hypothesis draws from weights / counts x sources x source kind x mode x ranks x
world change x resume path x epochs, and asserts each source's exact count per epoch (the
sequences of a down-sampled source at most once, an upsampled one's ``c // n`` or one more
times), every delivered sequence with its own tokens, statistics equal to what was delivered;
then the choices' properties (coverage across epochs, no sequence twice in an epoch, the
mixture at every scale) and the refusals.
"""

import collections
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
from lodarrow._training._mix import _choice

#: token ``j`` of row ``i`` of source ``s`` is ``s * SOURCE + i * STRIDE + j``
SOURCE, STRIDE = 100_000, 200


def _corpus(s, n, seed):
    rng = np.random.default_rng([seed, s])
    lengths = np.clip(rng.lognormal(2.3, 0.8, n), 0, 150).astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    values = (np.repeat(s * SOURCE + np.arange(n) * STRIDE - offsets[:-1], lengths)
              + np.arange(offsets[-1])).astype(np.int32)
    col = pa.ListArray.from_arrays(pa.array(offsets), pa.array(values))
    return pa.table({"tokens": col, "row": np.arange(n, dtype=np.int64)}), lengths


def _write(table, folder):
    folder.mkdir()
    half = len(table) // 2
    pq.write_table(table.slice(0, half), folder / "a.parquet", row_group_size=17)
    pq.write_table(table.slice(half), folder / "b.parquet", row_group_size=40)
    return str(folder)


def _received(batch, mode):
    """``[(source, row, tokens)]`` of a delivered batch, read from its arrays."""
    rows, sources = np.asarray(batch["rows"]), np.asarray(batch["source"])
    values = np.asarray(batch["values"])
    assert np.array_equal(np.asarray(batch["row"]), rows)
    out = []
    for k, (s, row) in enumerate(zip(sources.tolist(), rows.tolist())):
        if mode == "padded":
            toks = values[k, :np.asarray(batch["lengths"])[k]]
        elif mode == "packed":
            cu = np.asarray(batch["cu_seqlens"])
            toks = values[cu[k]:cu[k + 1]]
        else:  # packed rows
            mask, idx = np.asarray(batch["attention_mask"]), np.asarray(batch["seq_idx"])
            toks = values[mask & (idx == k)]
        out.append((s, row, toks))
    return out


@st.composite
def cases(draw):
    k = draw(st.integers(1, 3))
    sizes = [draw(st.integers(1, 90)) for _ in range(k)]
    how = draw(st.sampled_from(["weights", "counts", "tokens", "equal"]))
    mix = {}
    if how == "counts":
        mix["counts"] = [draw(st.integers(0, 200)) for _ in range(k)]
        if not sum(mix["counts"]):
            mix["counts"][0] = 1
    elif how in ("weights", "tokens"):
        mix["weights"] = [draw(st.sampled_from([0.0, 0.1, 0.25, 1.0, 3.0])) for _ in range(k)]
        if not sum(mix["weights"]):
            mix["weights"][0] = 1.0
        if draw(st.booleans()):
            mix["epoch_size"] = draw(st.integers(20, 300)) * (30 if how == "tokens" else 1)
        if how == "tokens":
            mix["by"] = "tokens"
    mode = draw(st.sampled_from(["padded", "packed", "packed_rows"]))
    kw = {"mode": mode, "seed": draw(st.integers(0, 2**16)), "shuffle": draw(st.booleans()),
          "prefetch": draw(st.sampled_from([0, 2])), "extra_columns": ["row"]}
    if mode == "packed_rows":  # rows hold the longest sequence: nothing is split
        kw.update(row_length=160, max_tokens=draw(st.sampled_from([320, 640])))
    elif draw(st.booleans()):
        kw["batch_size"] = draw(st.integers(2, 16))
    else:
        kw["max_tokens"] = draw(st.sampled_from([160, 400, 1000]))
        kw["balance"] = draw(st.sampled_from(["batches", "tokens"]))
    source = draw(st.sampled_from(["memory", "parquet"]))
    if source == "memory":
        kw["window"] = draw(st.integers(8, 64))
    world = draw(st.integers(1, 3))
    resume = draw(st.sampled_from([None, "state_dict", "start_step"]))
    after = draw(st.integers(1, 3)) if resume == "state_dict" else world
    return dict(sizes=sizes, mix=mix, kw=kw, source=source, world=world, resume=resume,
                after=after, stop=draw(st.floats(0, 1)), epoch=draw(st.integers(0, 3)),
                seed=draw(st.integers(0, 3)))


@settings(max_examples=300, deadline=None)
@given(cases())
def test_each_source_exact_per_epoch_on_the_delivered_batches(case):
    kw, world, epoch = case["kw"], case["world"], case["epoch"]
    tables = [_corpus(s, n, case["seed"]) for s, n in enumerate(case["sizes"])]
    with tempfile.TemporaryDirectory() as tmp:
        srcs = [t for t, _ in tables] if case["source"] == "memory" else [
            _write(t, Path(tmp) / f"s{s}") for s, (t, _) in enumerate(tables)]
        mixture = la.mix(srcs, **case["mix"])

        def make(R, r):
            lo = la.batch_loader(mixture, "tokens", num_replicas=R, rank=r, progress=False,
                                 cache_dir=False, **kw)
            lo.set_epoch(epoch)
            return lo

        try:
            loaders = [make(world, r) for r in range(world)]
        except ValueError as exc:  # too few sequences for the ranks: said when made
            assert "num_replicas" in str(exc), exc
            event("refused when made")
            return
        event(f"delivered: {case['source']}, resume={case['resume']}")
        stats = loaders[0].statistics()
        planned = {int(s): v["planned"] for s, v in enumerate(stats["sources"].values())}
        steps = len(loaders[0])
        stop = steps if case["resume"] is None else int(case["stop"] * steps)
        got = [list(islice(lo, stop)) for lo in loaders]
        assert len({len(g) for g in got}) == 1
        delivered = [x for g in got for b in g for x in _received(b, kw["mode"])]
        if case["resume"] is None:  # the statistics are what was delivered
            by_source = collections.Counter(s for s, _, _ in delivered)
            for s, name in enumerate(stats["sources"]):
                assert stats["sources"][name]["sequences"] == by_source[s]
                assert stats["sources"][name]["tokens"] == sum(
                    len(t) for x, _, t in delivered if x == s)
        else:
            state = json.loads(json.dumps(loaders[0].state_dict()))
            R = case["after"]
            try:
                later = [make(R, r) for r in range(R)]
                for lo in later:
                    if case["resume"] == "state_dict":
                        lo.load_state_dict(state)
                    else:
                        lo.set_epoch(epoch, start_step=stop)
            except ValueError as exc:
                assert "num_replicas" in str(exc), exc
                return
            rest = [list(lo) for lo in later]
            assert len({len(g) for g in rest}) == 1
            delivered += [x for g in rest for b in g for x in _received(b, kw["mode"])]
    counts = collections.Counter((s, row) for s, row, _ in delivered)
    for s, (_, lengths) in enumerate(tables):
        n, c = len(lengths), planned[s]
        mine = {row: k for (x, row), k in counts.items() if x == s}
        assert sum(mine.values()) == c, f"source {s}: {sum(mine.values())} delivered of {c}"
        full, r = divmod(c, n)
        assert all(k in (full, full + 1) for k in mine.values())
        assert sum(k - full for k in mine.values()) == r
        if full:
            assert len(mine) == n
    for s, row, toks in delivered:  # each with its own tokens, all of them
        n = tables[s][1][row]
        assert np.array_equal(np.sort(toks), s * SOURCE + row * STRIDE + np.arange(n))


def test_counts_from_weights():
    a, _ = _corpus(0, 1000, 0)
    b, _ = _corpus(1, 100, 0)
    c, _ = _corpus(2, 10, 0)
    m = la.mix({"web": a, "code": b, "books": c}, weights=[0.7, 0.2, 0.1], epoch_size=1001)
    stats = la.batch_loader(m, "tokens", batch_size=8, progress=False).statistics()["sources"]
    assert [v["planned"] for v in stats.values()] == [701, 200, 100]  # largest remainder
    # by default an epoch is as long as the sources together, shared out by weight
    m = la.mix([a, b, c], weights=[1, 1, 2])
    stats = la.batch_loader(m, "tokens", batch_size=8, progress=False).statistics()["sources"]
    assert [v["planned"] for v in stats.values()] == [278, 277, 555]  # 277.5 each: the tie to the first
    # equal weights when none are given
    stats = la.batch_loader(la.mix([a, b]), "tokens", batch_size=8,
                            progress=False).statistics()["sources"]
    assert [v["planned"] for v in stats.values()] == [550, 550]


def test_weights_by_tokens_hold_on_average():
    tables = [_corpus(s, n, 1) for s, n in enumerate([2000, 500])]
    # the second source's sequences made 4x longer: by sequences it would get 4x the tokens
    long = pa.table({"tokens": pa.array([list(range(4 * len(x))) for x in
                                         tables[1][0].column("tokens").to_pylist()]),
                     "row": tables[1][0].column("row")})
    m = la.mix([tables[0][0], long], weights=[0.5, 0.5], by="tokens", epoch_size=40_000)
    loader = la.batch_loader(m, "tokens", max_tokens=2048, progress=False)
    tokens = [v["tokens"] for v in loader.statistics()["sources"].values()]
    assert tokens[0] / sum(tokens) == pytest.approx(0.5, abs=0.05)
    assert sum(tokens) == pytest.approx(40_000, rel=0.05)


def test_a_down_sampled_source_is_covered_across_epochs_never_twice_in_one():
    rng = np.random.default_rng(0)
    for _ in range(300):
        n = int(rng.integers(2, 60))
        r = int(rng.integers(1, n))
        seed, source = int(rng.integers(0, 9)), int(rng.integers(0, 3))
        epochs = -(-n // r)
        seen = set()
        for e in range(epochs + 3):
            pick = _choice(n, r, e, seed, source)
            assert len(pick) == r and len(set(pick.tolist())) == r, (n, r, e)
            assert pick.min() >= 0 and pick.max() < n
            if e < epochs:
                seen.update(pick.tolist())
        assert seen == set(range(n)), "every sequence within n / r epochs"
    # another choice each epoch, the same for the same seed
    assert not np.array_equal(_choice(100, 10, 0, 0, 0), _choice(100, 10, 11, 0, 0))
    assert np.array_equal(_choice(100, 10, 3, 5, 1), _choice(100, 10, 3, 5, 1))


def _write_layout(table, folder, sizes):
    """``table`` in files of ``sizes[k]``-row row groups, one file per size, row groups of
    different sizes across files (as writers leave them)."""
    folder.mkdir()
    cuts = np.linspace(0, len(table), len(sizes) + 1).astype(int)
    for k, size in enumerate(sizes):
        pq.write_table(table.slice(cuts[k], cuts[k + 1] - cuts[k]), folder / f"p{k}.parquet",
                       row_group_size=size)
    return str(folder)


@pytest.mark.parametrize("source", ["memory", "parquet"])
def test_the_mixture_holds_at_every_scale(source, tmp_path):
    tables = [_corpus(s, n, 2)[0] for s, n in enumerate([3000, 600, 100])]
    if source == "parquet":  # row groups of 120-200, 50 and 20 rows
        tables = [_write_layout(t, tmp_path / f"s{k}", sizes) for k, (t, sizes) in
                  enumerate(zip(tables, [[200, 120], [50], [20]]))]
    weights = np.array([0.6, 0.3, 0.1])
    m = la.mix(tables, weights=weights.tolist(), epoch_size=6000)
    for shuffle in (True, False):
        loader = la.batch_loader(m, "tokens", batch_size=60, shuffle=shuffle, window=1000,
                                 progress=False, cache_dir=False)
        per_step = np.array([np.bincount(b["source"], minlength=3) for b in loader])
        assert per_step.sum(axis=0).tolist() == [3600, 1800, 600]  # the epoch: exact
        # every 10 steps (600 sequences) within a few points of the weights
        windows = per_step[:len(per_step) // 10 * 10].reshape(-1, 10, 3).sum(axis=1)
        share = windows / windows.sum(axis=1, keepdims=True)
        # (from Parquet a row group at a time: a little coarser; without shuffling a block's
        # batches follow in length order)
        limit = 0.06 if source == "memory" else 0.08 if shuffle else 0.12
        assert np.abs(share - weights).max() < limit, (shuffle, share)


def test_a_weight_of_0_leaves_a_source_out_of_the_epoch_size():
    a, _ = _corpus(0, 300, 10)
    b, _ = _corpus(1, 40, 10)
    stats = la.batch_loader(la.mix({"a": a, "b": b}, weights=[1, 0]), "tokens",
                            max_tokens=256, progress=False).statistics()["sources"]
    assert stats["a"]["planned"] == 300 and stats["b"]["planned"] == 0


def test_errors_name_the_source_and_its_row():
    a, _ = _corpus(0, 30, 11)
    b, _ = _corpus(1, 20, 11)
    col = b.column("tokens").to_pylist()
    col[3] = None
    nulls = b.set_column(0, "tokens", pa.array(col, pa.list_(pa.int32())))
    with pytest.raises(ValueError, match="row 3 of source 'code' of column 'tokens' is null"):
        la.batch_loader(la.mix({"web": a, "code": nulls}), "tokens", batch_size=4)
    col = b.column("tokens").to_pylist()
    col[5] = list(range(500))
    long = b.set_column(0, "tokens", pa.array(col, pa.list_(pa.int32())))
    with pytest.raises(ValueError, match="row 5 of source 'code' has 500 tokens"):
        la.batch_loader(la.mix({"web": a, "code": long}), "tokens", max_tokens=200,
                        oversize="error")


def test_in_memory_sources_widen_without_loss_or_are_refused():
    ints = pa.table({"ids": pa.array([[1, 2, 3]], pa.list_(pa.int32()))})
    longs = pa.table({"ids": pa.array([[4, 5]], pa.list_(pa.int64()))})
    floats = pa.table({"ids": pa.array([[1.5, 2.5]], pa.list_(pa.float32()))})
    batch = next(iter(la.batch_loader(la.mix([ints, longs]), "ids", batch_size=2,
                                      progress=False)))
    assert batch["values"].dtype == np.int64
    with pytest.raises(TypeError, match="source '0' but list<item: float> in source '1'"):
        la.batch_loader(la.mix([longs, floats]), "ids", batch_size=2)


def test_a_parquet_mixture_interleaves_row_groups_and_reads_each_copy(tmp_path):
    tables = [_corpus(s, n, 3)[0] for s, n in enumerate([400, 40])]
    srcs = [_write(t, tmp_path / f"s{s}") for s, t in enumerate(tables)]
    m = la.mix({"big": srcs[0], "small": srcs[1]}, counts=[400, 200])  # small: 5 copies
    loader = la.batch_loader(m, "tokens", max_tokens=1024, extra_columns=["row"],
                             progress=False, cache_dir=False)
    seen = collections.Counter()
    for b in loader:
        assert np.array_equal(b["row"], b["rows"])
        seen.update(zip(b["source"].tolist(), b["rows"].tolist()))
    assert all(seen[(1, r)] == 5 for r in range(40)) and len(seen) == 440
    stats = loader.statistics()
    assert stats["sources"]["small"] == {"planned": 200, "sequences": 200,
                                         "tokens": stats["sources"]["small"]["tokens"],
                                         "share": pytest.approx(1 / 3)}
    assert stats["decodes"]["max"] >= 1


def test_the_choice_changes_each_epoch_and_resumes_elastically(tmp_path):
    tables = [_corpus(s, n, 4)[0] for s, n in enumerate([300, 30])]
    m = la.mix(tables, counts=[100, 30])

    def rows(epoch, R=1, r=0):
        lo = la.batch_loader(m, "tokens", batch_size=4, num_replicas=R, rank=r,
                             progress=False)
        lo.set_epoch(epoch)
        return {(int(s), int(x)) for b in lo for s, x in zip(b["source"], b["rows"])}

    e0, e1 = rows(0), rows(1)
    assert len(e0) == len(e1) == 130 and e0 != e1
    assert {x for s, x in e0 | e1 | rows(2) if s == 0} == set(range(300))
    # the epoch's choice is the same on every rank
    assert rows(1, 2, 0) | rows(1, 2, 1) == e1


def test_nulls_and_oversize_dropped_are_counted_per_epoch():
    t, lengths = _corpus(0, 50, 5)
    col = t.column("tokens").to_pylist()
    col[3] = None
    t = t.set_column(0, "tokens", pa.array(col, pa.list_(pa.int32())))
    other, _ = _corpus(1, 10, 5)
    m = la.mix([t, other], counts=[100, 10])  # source 0 twice: its null row twice
    loader = la.batch_loader(m, "tokens", batch_size=4, nulls="drop", progress=False)
    stats = loader.statistics()
    assert stats["dropped"]["nulls"] == 2
    got = sum(len(b["rows"]) for b in loader)
    assert got == 108 == stats["sources"]["0"]["sequences"] + stats["sources"]["1"]["sequences"]


def test_blocks_of_a_mixture_hold_every_chosen_token_once():
    tables = [_corpus(s, n, 6)[0] for s, n in enumerate([60, 12])]
    m = la.mix(tables, counts=[30, 24])
    loader = la.batch_loader(m, "tokens", mode="blocks", row_length=64, max_tokens=256,
                             separator=-1, progress=False)
    toks = np.concatenate([b["values"][b["attention_mask"]] for b in loader])
    toks = toks[toks != -1]
    per_source = np.bincount(toks // SOURCE, minlength=2)
    stats = loader.statistics()["sources"]
    # the separators counted in the lengths: tokens = sequences' tokens + one each
    assert per_source[0] == stats["0"]["tokens"] - 30
    assert per_source[1] == stats["1"]["tokens"] - 24


def test_a_state_names_the_mixture():
    tables = [_corpus(s, n, 7)[0] for s, n in enumerate([50, 20])]
    a = la.batch_loader(la.mix(tables, counts=[50, 20]), "tokens", batch_size=4,
                        progress=False)
    b = la.batch_loader(la.mix(tables, counts=[50, 40]), "tokens", batch_size=4,
                        progress=False)
    with pytest.raises(ValueError, match="argument mix="):
        b.load_state_dict(a.state_dict())


def test_torch_workers_deliver_the_mixture():
    torch = pytest.importorskip("torch")
    tables = [_corpus(s, n, 8)[0] for s, n in enumerate([80, 20])]
    loader = la.batch_loader(la.mix(tables, counts=[80, 40]), "tokens", batch_size=8,
                             to="torch", progress=False)
    dl = torch.utils.data.DataLoader(loader.torch(), batch_size=None, num_workers=2)
    seen = collections.Counter()
    for b in dl:
        seen.update(zip(b["source"].tolist(), b["rows"].tolist()))
    assert sum(v for (s, _), v in seen.items() if s == 1) == 40
    assert all(seen[(1, r)] == 2 for r in range(20)) and len(seen) == 100


@pytest.mark.parametrize("args, error, match", [
    (dict(sources="x"), TypeError, "list or a dict"),
    (dict(sources=[]), ValueError, "empty"),
    (dict(sources={1: "a"}), TypeError, "names of sources"),
    (dict(sources=["a", "b"], weights=[1], counts=None), ValueError, "1 entries for 2"),
    (dict(sources=["a", "b"], weights=[1, -1]), ValueError, "weights\\[1\\] must"),
    (dict(sources={"a": "x", "b": "y"}, weights=[1, -1]), ValueError, "weights\\['b'\\] must"),
    (dict(sources=["a", "b"], weights=[1, float("nan")]), ValueError, "finite"),
    (dict(sources=["a", "b"], weights=[1, "x"]), TypeError, "number"),
    (dict(sources=["a", "b"], weights=[0, 0]), ValueError, "all 0"),
    (dict(sources=["a", "b"], weights=[1, 1], counts=[1, 1]), ValueError, "not both"),
    (dict(sources=["a", "b"], counts=[1, -1]), ValueError, "counts\\[1\\]"),
    (dict(sources=["a", "b"], counts=[0, 0]), ValueError, "all 0"),
    (dict(sources=["a", "b"], counts=[1, 1], epoch_size=4), ValueError, "epoch_size"),
    (dict(sources=["a"], by="bytes"), ValueError, "by"),
    (dict(sources={"a": "x", "b": "y"}, weights={"a": 1, "c": 2}), ValueError, "unknown"),
    (dict(sources=["a"], epoch_size=0), ValueError, "epoch_size"),
])
def test_mix_validates_its_arguments(args, error, match):
    with pytest.raises(error, match=match):
        la.mix(**args)


def test_the_loader_refuses_what_a_mixture_cannot_be(tmp_path):
    t, _ = _corpus(0, 20, 9)
    path = _write(t, tmp_path / "p")
    # a table and a Parquet source in one mixture are one mixture now
    # (test_parquet_and_in_memory_sources_in_one_mixture)
    assert len(la.batch_loader(la.mix([t, path]), "tokens", batch_size=4, cache_dir=False))
    with pytest.raises(ValueError, match="belongs to one source"):
        la.batch_loader(la.mix([path, path + "/a.parquet"]), "tokens", batch_size=4,
                        cache_dir=False)
    with pytest.raises(TypeError, match="source '1' of the mixture"):
        la.batch_loader(la.mix([t, np.arange(3)]), "tokens", batch_size=4)
    with pytest.raises(ValueError, match="source '1'.*column 'tokens' is not"):
        la.batch_loader(la.mix([t, pa.table({"x": [[1]]})]), "tokens", batch_size=4)
    empty = t.slice(0, 0)
    with pytest.raises(ValueError, match="source '1' holds no sequence"):
        la.batch_loader(la.mix([t, empty]), "tokens", batch_size=4)
    zero = pa.table({"tokens": pa.array([[]] * 5, pa.list_(pa.int32())),
                     "row": np.arange(5)})
    with pytest.raises(ValueError, match="holds no tokens"):
        la.batch_loader(la.mix([t, zero], by="tokens"), "tokens", batch_size=4)
    wide = pa.table({"tokens": pa.array([["a"]]), "row": [0]})
    with pytest.raises(TypeError, match="without loss"):
        la.batch_loader(la.mix([t, wide]), "tokens", batch_size=4)


@pytest.mark.parametrize("kind", ["memory", "parquet"])
def test_a_mixture_of_deeper_sequences(kind, tmp_path):
    """level=1: a row holds several sequences (a null row none); a source's sequences are
    counted at that level."""
    a = pa.table({"doc": [[[1, 2], [3]], [[4]], None, [[5, 6, 7], [8], [9]]]})
    b = pa.table({"doc": [[[10]], [[11, 12], [13]]]})
    if kind == "parquet":
        pq.write_table(a, tmp_path / "a.parquet")
        pq.write_table(b, tmp_path / "b.parquet")
        a, b = str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet")
    loader = la.batch_loader(la.mix({"a": a, "b": b}, counts=[6, 6]), "doc", level=1,
                             batch_size=2, nulls="empty", progress=False, cache_dir=False)
    seen = collections.Counter()
    for batch in loader:
        seen.update(zip(batch["source"].tolist(), batch["rows"].tolist()))
    assert seen == {**{(0, k): 1 for k in range(6)}, **{(1, k): 2 for k in range(3)}}


# --- sources of their own: columns, filesystems ------------------------------------------------

def _own_columns(kind, tmp_path):
    """A corpus whose sequences are ``input_ids`` (int32) mixed with one whose are ``tokens``
    (int64), each with a ``row`` column: tables, or Parquet files."""
    web, _ = _corpus(0, 60, 1)
    code, _ = _corpus(1, 25, 1)
    web = web.rename_columns(["input_ids", "row"])
    code = code.set_column(0, "tokens", code.column(0).cast(pa.list_(pa.int64())))
    if kind == "memory":
        return {"web": web, "code": code}, web, code
    return ({"web": _write(web, tmp_path / "web"), "code": _write(code, tmp_path / "code")},
            web, code)


@pytest.mark.parametrize("kind", ["memory", "parquet"])
def test_each_source_names_its_own_column(kind, tmp_path):
    sources, web, code = _own_columns(kind, tmp_path)
    columns = {"web": "input_ids", "code": "tokens"}

    def make(world, rank):
        return la.batch_loader(la.mix(sources, counts=[60, 50]), columns, max_tokens=256,
                               mode="packed", extra_columns=["row"], seed=2, cache_dir=False,
                               num_replicas=world, rank=rank, progress=False)

    got = collections.Counter()
    tables = [web.column("input_ids").to_pylist(), code.column("tokens").to_pylist()]
    loaders = [make(2, r) for r in range(2)]
    state = loaders[0].state_dict()
    assert state["args"]["column"] == columns  # a saved state names each source's column
    for lo in loaders:
        for b in lo:
            assert b["values"].dtype == np.int64  # int32 and int64 ids, read as int64
            for s, row, toks in _received(b, "packed"):
                assert toks.tolist() == tables[s][row]
                got[(s, row)] += 1
    assert sum(v for (s, _), v in got.items() if s == 0) == 60
    assert sum(v for (s, _), v in got.items() if s == 1) == 50  # 25 rows, each twice
    later = make(3, 0)
    later.load_state_dict(state)  # a resume on another world, the same columns
    with pytest.raises(ValueError, match=r"column, a dict, must name the column of each "
                                         r"source of the mixture \['web', 'code'\]; "
                                         r"missing \['code'\]"):
        la.batch_loader(la.mix(sources), {"web": "input_ids"}, batch_size=4, cache_dir=False)
    with pytest.raises(TypeError, match="column must be a column name"):
        la.batch_loader(web, {"web": "input_ids"}, batch_size=4)


def test_sources_on_different_filesystems(s3, tmp_path):
    """A local corpus mixed with one on an object store (``s3://``, read through the data
    cache): each source's files on its own filesystem, batches as if both were local."""
    from test_remote_sources import upload

    fs, bucket = s3
    web, _ = _corpus(0, 60, 3)
    code, _ = _corpus(1, 40, 3)
    local_web = _write(web, tmp_path / "web")
    local_code = _write(code, tmp_path / "code")
    upload(tmp_path / "code", fs, f"{bucket}/code")
    kw = dict(counts=[60, 80])
    args = dict(max_tokens=300, extra_columns=["row"], seed=5, progress=False)
    remote = la.batch_loader(la.mix({"web": local_web, "code": f"s3://{bucket}/code"}, **kw),
                             "tokens", cache_dir=tmp_path / "cache", cache_bytes=1 << 30,
                             **args)
    here = la.batch_loader(la.mix({"web": local_web, "code": local_code}, **kw), "tokens",
                           cache_dir=False, **args)
    assert remote.state_dict()["source"] == here.state_dict()["source"]
    n = 0
    for a, b in zip(remote, here, strict=True):
        for key in ("values", "rows", "source", "row"):
            np.testing.assert_array_equal(a[key], b[key])
        n += 1
    assert n > 0
    cache = remote._parts.children[1].cache
    assert cache is not None and cache.counters()["fetched_bytes"] > 0
    assert remote._parts.children[0].cache is None  # a local source is read in place


@pytest.mark.parametrize("world", [1, 3])
def test_parquet_and_in_memory_sources_in_one_mixture(tmp_path, world):
    """A Parquet corpus mixed with a table in memory (read in parts of its own, zero-copy):
    each source's exact count an epoch, every sequence with its own tokens, across ranks and
    a resume on another world."""
    web, _ = _corpus(0, 70, 4)
    code, _ = _corpus(1, 30, 4)
    web_dir = _write(web, tmp_path / "web")
    tables = [web.column("tokens").to_pylist(), code.column("tokens").to_pylist()]

    def make(R, r):
        return la.batch_loader(la.mix({"web": web_dir, "code": code}, counts=[70, 45]),
                               "tokens", max_tokens=200, extra_columns=["row"], seed=1,
                               cache_dir=False, num_replicas=R, rank=r, progress=False)

    got = collections.Counter()
    first = [make(world, r) for r in range(world)]
    assert first[0].statistics()["sources"]["code"]["planned"] == 45
    for lo in first:
        for b in islice(lo, 2):
            for s, row, toks in _received(b, "padded"):
                assert toks.tolist() == tables[s][row]
                got[s] += 1
    state = first[0].state_dict()
    later = [make(2, r) for r in range(2)]
    for lo in later:
        lo.load_state_dict(state)
        for b in lo:
            for s, row, toks in _received(b, "padded"):
                assert toks.tolist() == tables[s][row]
                got[s] += 1
    assert got == {0: 70, 1: 45}


@pytest.mark.parametrize("kind", ["memory", "parquet", "both"])
def test_each_source_s_extra_columns_where_they_exist(kind, tmp_path):
    """An extra column one source lacks is given where a source has it: a number with its
    ``<name>_mask`` (False for the rows of the source without it), a string as nulls there;
    a column no source has is refused when the loader is made."""
    web, _ = _corpus(0, 30, 6)
    code, _ = _corpus(1, 20, 6)
    web = web.append_column("lang", pa.array(["en"] * 30))
    web = web.append_column("score", pa.array(np.arange(30, dtype=np.float32)))
    sources = {"web": web, "code": code}
    if kind != "memory":
        sources["code"] = _write(code, tmp_path / "code")
    if kind == "parquet":
        sources["web"] = _write(web, tmp_path / "web")
    loader = la.batch_loader(la.mix(sources), "tokens", batch_size=8,
                             extra_columns=["row", "lang", "score"], cache_dir=False,
                             progress=False)
    seen = 0
    for b in loader:
        source, row = np.asarray(b["source"]), np.asarray(b["row"])
        assert b["lang"].to_pylist() == [("en" if s == 0 else None) for s in source]
        assert b["score_mask"].tolist() == (source == 0).tolist()
        np.testing.assert_array_equal(b["score"], np.where(source == 0, row, 0))
        seen += len(row)
    assert seen == 50
    with pytest.raises(ValueError, match="column 'nope' is in no source of the mixture"):
        la.batch_loader(la.mix(sources), "tokens", batch_size=8, extra_columns=["nope"],
                        cache_dir=False)
