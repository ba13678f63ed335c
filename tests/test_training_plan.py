"""Sequence lengths and batch plans (docs/training.md#plans): every sequence once per epoch
across the ranks, the same plan on every rank and run, budgets kept, ranks balanced; checked
against slow references built from Python lists, and by property tests over random lengths."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

import lodarrow as la


# --- lengths ------------------------------------------------------------------------------

def _nested(rng, n, depth):
    if depth == 0:
        return [int(v) for v in rng.integers(0, 9, n)]
    return [_nested(rng, int(rng.integers(0, 4)), depth - 1) if rng.random() > 0.1 else []
            for _ in range(n)]


def _count(x):
    return sum(_count(v) for v in x) if isinstance(x, list) else 1


def _reference_lengths(rows, level):
    seqs = rows
    for _ in range(level):
        seqs = [s for row in seqs for s in row]
    return [_count(s) for s in seqs]


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_lengths_every_level_every_source(tmp_path, depth):
    rng = np.random.default_rng(depth)
    rows = _nested(rng, 57, depth)
    arr = pa.array(rows)
    table = pa.table({"x": arr, "y": pa.array(range(len(rows)))})
    path = tmp_path / "x.parquet"
    pq.write_table(table, path, row_group_size=10)
    path2 = tmp_path / "y.parquet"
    pq.write_table(table, path2, row_group_size=25)
    for level in range(depth):
        want = _reference_lengths(rows, level)
        assert la.sequence_lengths(arr, level=level).tolist() == want
        assert la.sequence_lengths(table, "x", level=level).tolist() == want
        chunked = pa.chunked_array([arr.slice(0, 20), arr.slice(20, 0), arr.slice(20)])
        assert la.sequence_lengths(chunked, level=level).tolist() == want
        assert la.sequence_lengths(str(path), "x", level=level).tolist() == want
        assert la.sequence_lengths([str(path), str(path2)], "x",
                                   level=level).tolist() == want * 2
        t = la.from_arrow(arr, nulls="empty")
        assert la.sequence_lengths(t, level=level).tolist() == want


def test_lengths_sliced_and_nulls():
    arr = pa.array([[1, 2], None, [3], [4, 5, 6]])
    assert la.sequence_lengths(arr).tolist() == [2, 0, 1, 3]
    assert la.sequence_lengths(arr.slice(1, 2)).tolist() == [0, 1]
    docs = pa.array([[[1, 2], [3]], [[4, 5, 6]], [[7]]])
    assert la.sequence_lengths(docs.slice(1), level=1).tolist() == [3, 1]


def test_lengths_of_a_struct_list_reads_one_leaf(tmp_path):
    """A list of structs: one leaf (the smallest) is read; the lengths are the lists'."""
    col = pa.array([[{"a": 1, "s": "x" * 50}] * 3, [], [{"a": 2, "s": "y"}]])
    path = tmp_path / "s.parquet"
    pq.write_table(pa.table({"x": col}), path)
    from lodarrow._training._source import leaf_to_read

    with pq.ParquetFile(path) as pf:
        assert leaf_to_read(pf, "x") == "x.list.element.a"
    assert la.sequence_lengths(str(path)).tolist() == [3, 0, 1]


def test_lengths_errors(tmp_path):
    t = pa.table({"x": pa.array([[1]]), "y": pa.array([[2]])})
    with pytest.raises(ValueError, match="column="):
        la.sequence_lengths(t)
    with pytest.raises(ValueError, match="'z' is not in"):
        la.sequence_lengths(t, "z")
    with pytest.raises(ValueError, match="level must be in"):
        la.sequence_lengths(t, "x", level=1)
    with pytest.raises(ValueError, match="level must be in"):
        la.sequence_lengths(pa.array([1, 2]))
    with pytest.raises(ValueError, match="column must be None"):
        la.sequence_lengths(pa.array([[1]]), "x")
    with pytest.raises(TypeError, match="level"):
        la.sequence_lengths(pa.array([[1]]), level=True)


def test_lengths_of_a_hugging_face_dataset():
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_dict({"ids": [[1, 2, 3], [4], [], [5, 6]]})
    assert la.sequence_lengths(ds, "ids").tolist() == [3, 1, 0, 2]
    sel = ds.select([3, 0])
    assert la.sequence_lengths(sel, "ids").tolist() == [2, 3]


# --- plans --------------------------------------------------------------------------------

def _reference_cut(order, lengths, batch_size, max_tokens, packed, window):
    """The greedy cut, in Python lists."""
    batches = []
    for w in range(0, len(order), window or max(len(order), 1)):
        cur = []
        for row in order[w:w + (window or len(order))]:
            if cur:
                nxt = cur + [row]
                cost = (sum(lengths[r] for r in nxt) if packed
                        else len(nxt) * max(lengths[r] for r in nxt))
                if (batch_size and len(cur) >= batch_size) or (max_tokens and cost > max_tokens):
                    batches.append(cur)
                    cur = []
            cur.append(row)
        if cur:
            batches.append(cur)
    return batches


@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("window", [None, 7])
@pytest.mark.parametrize("batch_size, max_tokens", [(4, None), (None, 30), (5, 40)])
def test_plan_equals_the_python_reference(packed, window, batch_size, max_tokens):
    lengths = np.random.default_rng(0).integers(0, 20, 101)
    plan = la.batch_plan(lengths, batch_size=batch_size, max_tokens=max_tokens,
                         cost="packed" if packed else "padded", window=window, shuffle=False)
    order = list(range(len(lengths)))
    if window:
        order = [r for w in range(0, len(order), window)
                 for r in sorted(order[w:w + window], key=lambda r: lengths[r])]
    want = _reference_cut(order, lengths.tolist(), batch_size, max_tokens, packed, window)
    assert [b.tolist() for b in plan] == want
    assert plan.tokens.tolist() == [sum(lengths[b]) for b in want]
    assert plan.longest.tolist() == [max(lengths[b]) for b in want]


def _all_ranks(lengths, num_replicas, **kw):
    return [la.batch_plan(lengths, num_replicas=num_replicas, rank=r, **kw)
            for r in range(num_replicas)]


def _check_epoch(plans, n, kw):
    rows = np.concatenate([p.indices for p in plans])
    assert np.array_equal(np.sort(rows), np.arange(n)), "every sequence once per epoch"
    assert len({len(p) for p in plans}) == 1, "as many batches on every rank"
    max_tokens = kw.get("max_tokens")
    for p in plans:
        if kw.get("batch_size"):
            assert p.sizes.max(initial=0) <= kw["batch_size"]
        if max_tokens:
            cost = p.tokens if kw.get("cost") == "packed" else p.padded_tokens
            over = cost > max_tokens
            assert np.all(p.sizes[over] == 1), "only a sequence alone may pass the budget"


@given(lengths=st.lists(st.integers(0, 60), min_size=0, max_size=300),
       num_replicas=st.integers(1, 5), seed=st.integers(0, 2**32),
       batch_size=st.one_of(st.none(), st.integers(1, 9)),
       max_tokens=st.one_of(st.none(), st.integers(1, 200)),
       cost=st.sampled_from(["padded", "packed"]),
       window=st.one_of(st.none(), st.integers(1, 50)),
       balance=st.sampled_from(["batches", "tokens", "compute"]))
def test_plan_properties(lengths, num_replicas, seed, batch_size, max_tokens, cost, window,
                         balance):
    if batch_size is None and max_tokens is None:
        batch_size = 3
    kw = dict(batch_size=batch_size, max_tokens=max_tokens, cost=cost, window=window,
              seed=seed, balance=balance, alpha=0.01)
    if 0 < len(lengths) < num_replicas:  # not one sequence for every rank
        with pytest.raises(ValueError, match="cannot give each of num_replicas"):
            _all_ranks(lengths, num_replicas, **kw)
        return
    try:
        plans = _all_ranks(lengths, num_replicas, **kw)
    except ValueError as exc:  # only single-sequence batches, and no multiple of the ranks
        assert "every batch holds one sequence" in str(exc) or "batch_size=1" in str(exc)
        assert batch_size == 1 or max_tokens is not None
        plans = None
    if plans is not None:
        _check_epoch(plans, len(lengths), kw)
        again = _all_ranks(lengths, num_replicas, **kw)
        for a, b in zip(plans, again):
            assert np.array_equal(a.offsets, b.offsets) and np.array_equal(a.indices, b.indices)
    # drop_last: no duplicates, equal counts; a fixed-size plan keeps only full batches and
    # drops less than one step
    dropped = _all_ranks(lengths, num_replicas, drop_last=True, **kw)
    rows = np.concatenate([p.indices for p in dropped])
    assert len(rows) == len(np.unique(rows))
    assert len({len(p) for p in dropped}) == 1
    if max_tokens is None:
        assert all((p.sizes == batch_size).all() for p in dropped)
        assert len(lengths) - len(rows) < num_replicas * batch_size


def test_plans_differ_by_seed_and_epoch():
    lengths = np.arange(1000) % 37
    a = la.batch_plan(lengths, batch_size=8, seed=1)
    assert not np.array_equal(a.indices, la.batch_plan(lengths, batch_size=8, seed=2).indices)
    assert not np.array_equal(a.indices, la.batch_plan(lengths, batch_size=8, seed=1,
                                                       epoch=1).indices)
    assert np.array_equal(a.indices, la.batch_plan(lengths, batch_size=8, seed=1).indices)


def test_bucketing_reduces_padding_waste():
    lengths = np.random.default_rng(0).integers(1, 512, 20000)
    random = la.batch_plan(lengths, batch_size=32, seed=0)
    bucketed = la.batch_plan(lengths, batch_size=32, window=4096, seed=0)
    assert bucketed.padding_waste < 0.05 < 0.3 < random.padding_waste


def test_token_balance_evens_out_the_ranks():
    lengths = np.random.default_rng(1).integers(1, 300, 5000)
    kw = dict(max_tokens=2048, cost="packed", window=500, seed=3)
    plans = _all_ranks(lengths, 4, balance="tokens", **kw)
    per_step = np.stack([p.tokens for p in plans])
    spread = (per_step.max(0) - per_step.min(0)).mean()
    rr = np.stack([p.tokens for p in _all_ranks(lengths, 4, **kw)])
    assert spread < (rr.max(0) - rr.min(0)).mean()
    totals = per_step.sum(1)
    assert totals.max() / totals.min() < 1.05


def test_oversize_rules():
    lengths = [3, 50, 2, 4]
    alone = la.batch_plan(lengths, max_tokens=10, cost="packed", shuffle=False)
    assert [b.tolist() for b in alone] == [[0], [1], [2, 3]]
    with pytest.raises(ValueError, match="sequence 1 has 50 tokens"):
        la.batch_plan(lengths, max_tokens=10, oversize="error")
    dropped = la.batch_plan(lengths, max_tokens=10, cost="packed", shuffle=False,
                            oversize="drop")
    assert sorted(dropped.indices.tolist()) == [0, 2, 3]


def test_ranks_get_equal_shares_and_steps():
    plans = _all_ranks([5] * 10, 3, batch_size=4, shuffle=False)  # cells of 3, 3, 4 rows
    assert [len(p) for p in plans] == [1, 1, 1]
    plans = _all_ranks([5] * 10, 4, batch_size=4, shuffle=False)
    assert [len(p) for p in plans] == [1, 1, 1, 1]
    assert sorted(len(p.indices) for p in plans) == [2, 2, 3, 3]
    assert sorted(np.concatenate([p.indices for p in plans]).tolist()) == list(range(10))
    plans = _all_ranks([5] * 10, 4, batch_size=4, shuffle=False, drop_last=True)
    assert [len(p) for p in plans] == [0, 0, 0, 0]  # not one full step of 4 x 4
    plans = _all_ranks([5] * 40, 4, batch_size=4, shuffle=False, drop_last=True)
    assert [len(p) for p in plans] == [2, 2, 2, 2]  # 32 of 40: the 8 left fill no step
    # a block whose batch count is no multiple of the ranks splits its largest batch
    plans = _all_ranks([5] * 9, 2, max_tokens=20, cost="packed", shuffle=False)
    assert [len(p) for p in plans] == [2, 2]
    assert sorted(np.concatenate([p.indices for p in plans]).tolist()) == list(range(9))
    with pytest.raises(ValueError, match="cannot give each of num_replicas=4"):
        la.batch_plan([1, 2, 3], batch_size=1, num_replicas=4)
    with pytest.raises(ValueError, match="every batch holds one sequence"):
        la.batch_plan([1] * 5, batch_size=1, num_replicas=2)
    plans = _all_ranks([1] * 5, 2, batch_size=1, drop_last=True)
    assert [len(p) for p in plans] == [2, 2]


def test_compute_balance_evens_out_quadratic_cost():
    lengths = np.maximum(np.random.default_rng(2).lognormal(5, 1, 20000).astype(int), 1)
    alpha = 1 / 512
    kw = dict(max_tokens=16384, cost="packed", window=2048, seed=1)
    cost = lengths + alpha * lengths.astype(float) ** 2

    def step_ratio(plans):
        per = np.stack([[cost[b].sum() for b in p] for p in plans])
        return np.median(per.max(0) / per.mean(0)), per.sum(1)
    balanced, totals = step_ratio(_all_ranks(lengths, 4, balance="compute", alpha=alpha, **kw))
    plain, _ = step_ratio(_all_ranks(lengths, 4, **kw))
    assert balanced <= 1.05 < plain
    assert totals.max() / totals.mean() < 1.05


def test_plan_argument_errors():
    with pytest.raises(ValueError, match="batch_size, max_tokens or both"):
        la.batch_plan([1, 2])
    with pytest.raises(ValueError, match=r"lengths\[1\] is -2"):
        la.batch_plan([1, -2], batch_size=1)
    with pytest.raises(ValueError, match="rank must be in"):
        la.batch_plan([1, 2], batch_size=1, num_replicas=2, rank=2)
    with pytest.raises(ValueError, match="cost must be"):
        la.batch_plan([1, 2], batch_size=1, cost="sum")
    with pytest.raises(TypeError, match="lengths"):
        la.batch_plan([1.5, 2.0], batch_size=1)
    with pytest.raises(ValueError, match="seed must be >= 0"):
        la.batch_plan([1], batch_size=1, seed=-1)
    with pytest.raises(ValueError, match="alpha must be a finite number >= 0"):
        la.batch_plan([1], batch_size=1, balance="compute", alpha=-1.0)
    with pytest.raises(ValueError, match="balance must be"):
        la.batch_plan([1], batch_size=1, balance="cost")


def test_plan_is_data():
    plan = la.batch_plan(np.arange(100) % 13, batch_size=10, window=50, seed=4)
    assert plan.offsets.dtype == plan.indices.dtype == np.int64
    assert len(plan) == 10 and plan[-1].tolist() == plan.indices[plan.offsets[-2]:].tolist()
    assert "10 batches" in repr(plan)
    assert 0 <= plan.padding_waste < 1
    # a sequence of batches: slices as a list's, bad indices named
    assert [b.tolist() for b in plan[2:5]] == [plan[k].tolist() for k in (2, 3, 4)]
    assert plan[8:100][-1].tolist() == plan[-1].tolist() and plan[5:5] == []
    with pytest.raises(IndexError, match="BatchPlan index 10 is out of range .10 batches"):
        plan[10]
    with pytest.raises(TypeError, match="integers or slices, not str"):
        plan["0"]
    with pytest.raises(TypeError, match="not bool"):
        plan[True]


def test_ten_million_sequences_plan_quickly():
    import time

    lengths = np.random.default_rng(0).integers(1, 1024, 10**7)
    t0 = time.perf_counter()
    plan = la.batch_plan(lengths, max_tokens=16384, window=10**5, num_replicas=8, rank=0)
    assert time.perf_counter() - t0 < 30  # a few seconds on 2 busy cores
    assert plan.padding_waste < 0.02


@pytest.mark.parametrize("kw", [dict(batch_size=32), dict(max_tokens=16384),
                                dict(max_tokens=16384, cost="packed")])
def test_token_balance_within_five_percent_per_step_two_percent_per_epoch(kw):
    """docs/training.md#any-layout-any-world, on lognormal lengths, 16 ranks."""
    lengths = np.maximum(np.random.default_rng(8).lognormal(5, 1, 100_000).astype(int), 1)
    plans = _all_ranks(lengths, 16, balance="tokens", window=4096, seed=2, **kw)
    per_step = np.stack([p.tokens for p in plans])
    assert np.median(per_step.max(0) / per_step.mean(0)) <= 1.05
    totals = per_step.sum(1)
    assert totals.max() / totals.mean() <= 1.02
    assert np.array_equal(np.sort(np.concatenate([p.indices for p in plans])),
                          np.arange(len(lengths)))


@pytest.mark.parametrize("mode,cls,kw", [
    ("padded", "PaddedShape", {}), ("packed", "FlatShape", {}), ("segments", "FlatShape", {}),
    ("packed_rows", "PackedRowsShape", {"row_length": 8}),
    ("blocks", "BlocksShape", {"row_length": 8})])
def test_each_mode_is_a_shape_of_its_own_that_pickles(mode, cls, kw):
    """``BatchShape(mode)`` is the class of the mode (one place for each layout's slots), and
    crosses to DataLoader workers pickled as it is."""
    import pickle

    from lodarrow._training import _shape

    shape = _shape.BatchShape(mode, **kw)
    assert type(shape) is getattr(_shape, cls) and shape.mode == mode
    back = pickle.loads(pickle.dumps(shape))
    assert type(back) is type(shape) and back.__dict__.keys() == shape.__dict__.keys()
    assert back.fingerprint() == shape.fingerprint()
    with pytest.raises(ValueError, match="mode"):
        _shape.BatchShape("rows")
