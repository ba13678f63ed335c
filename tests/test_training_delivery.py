"""The delivery stage alone (lodarrow._training._produce): a Producer made from a source, a
plan and a shape, with no BatchLoader, makes the batches ``batch_loader`` delivers."""

import inspect

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lodarrow as la
from lodarrow._training._collate import rows_tokens
from lodarrow._training._epoch import plan_epoch
from lodarrow._training._parquet_source import ParquetSource
from lodarrow._training._produce import Producer
from lodarrow._training._resume import rng_of
from lodarrow._training._select import Selection
from lodarrow._training._shape import BatchShape
from lodarrow._training._table_source import TableSource
from lodarrow._validation import coerce_pad_value

FN = "batch_loader"
N = 300
DEFAULTS = {name: p.default for name, p in inspect.signature(la.batch_loader).parameters.items()
            if p.default is not inspect.Parameter.empty}
SELECT = [name for name in inspect.signature(Selection).parameters if name != "fn"]
MODES = {
    "padded": dict(batch_size=16, extra_columns=["label"]),
    "packed": dict(max_tokens=256, mode="packed", extra_columns=["label"]),
    "packed_rows": dict(max_tokens=256, mode="packed_rows", row_length=64),
    "blocks": dict(max_tokens=256, mode="blocks", row_length=64, extra_columns=["label"]),
    "segments": dict(max_tokens=256, mode="segments", extra_columns=["label"]),
}


@pytest.fixture(scope="module")
def table():
    rng = np.random.default_rng(5)
    ids = [rng.integers(1, 1000, rng.integers(1, 60)).tolist() for _ in range(N)]
    return pa.table({"ids": ids, "label": np.arange(N)})


@pytest.fixture(scope="module")
def path(table, tmp_path_factory):
    out = tmp_path_factory.mktemp("delivery") / "part.parquet"
    pq.write_table(table, out, row_group_size=40)
    return str(out)


def _producer(source, epoch=0, **kw):
    """A producer and its plan made from the stages before delivery, as the loader makes
    them, but without one."""
    opts = {**DEFAULTS, "shuffle": True, "seed": 3, "row_groups": 2, "window": 64, **kw}
    select = Selection(**{name: opts[name] for name in SELECT}, fn=FN)
    shape = BatchShape(opts["mode"], opts["cost"], opts["row_length"], split=False,
                       num_rows=opts["num_rows"], pad_to_multiple_of=None, pad_widths=None,
                       num_segments=None, pad_value=opts["pad_value"], separator=None,
                       remainder=None, token_arrays=opts["token_arrays"], fn=FN)
    select.bind(shape)
    if isinstance(source, str):
        src = ParquetSource(source, "ids", select, FN, cache_dir=False)
    else:
        src = TableSource(source, "ids", select, FN)
    values = src.empty.values
    pad = coerce_pad_value(opts["pad_value"], values.dtype, values.shape[1:], name=FN)
    producer = Producer(src, shape, select.rank, pad, extra_specs=src.extra_specs,
                        lengths=src.lengths, prefetch=opts["prefetch"])

    def plan_of(e):
        return plan_epoch(src.lengths, select.plan_args(src.cell_rows(select)),
                          select.num_replicas, rng_of(select.seed, e, 0),
                          part_starts=src.part_starts)

    return producer, plan_of(epoch), plan_of


def _loader_batches(source, epoch=0, **kw):
    loader = la.batch_loader(source, "ids", **{"seed": 3, "row_groups": 2, "window": 64,
                                               "progress": False, **kw})
    loader.set_epoch(epoch)
    return list(loader)


def _equal(got, want):
    assert len(got) == len(want) > 0
    for g, w in zip(got, want):
        assert sorted(g) == sorted(w)
        for key in w:
            assert np.array_equal(np.asarray(g[key]), np.asarray(w[key])), key


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("where", ["table", "parquet", "parquet ahead"])
def test_a_producer_alone_makes_the_loaders_batches(table, path, mode, where):
    kw = dict(MODES[mode], prefetch=2 if where == "parquet ahead" else 0)
    source = table if where == "table" else path
    producer, plan, _ = _producer(source, **kw)
    made = list(producer.produce(plan, range(plan.steps)))
    assert [s for s, _, _ in made] == list(range(plan.steps))
    assert [t for _, _, t in made] == [int(plan.tokens[0, s]) for s in range(plan.steps)]
    _equal([b for _, b, _ in made], _loader_batches(source, **kw))


@pytest.mark.parametrize("mode", ["padded", "packed_rows"])
def test_a_ranks_producer_makes_its_share(path, mode):
    kw = dict(MODES[mode], num_replicas=2, rank=1)
    producer, plan, _ = _producer(path, **kw)
    got = [b for _, b, _ in producer.produce(plan, range(plan.steps))]
    _equal(got, _loader_batches(path, **kw))


@pytest.mark.parametrize("mode", sorted(MODES))
def test_a_workers_producer_hands_each_host_batch_over(path, mode):
    """A ``DataLoader`` worker's producer gives its ring each batch as NumPy arrays, without
    its per-token arrays (``attention_mask``, ``position_ids``, ``seq_idx``, ``segment_ids``:
    the main process makes them) and delivers what the ring returns; the producer it was
    made from is unchanged."""
    producer, plan, _ = _producer(path, **MODES[mode])
    handed = []

    def ring(batch):
        handed.append(batch)
        return len(handed)

    worker = producer.handing_over(ring)
    steps = range(1, plan.steps, 3)  # worker 1 of 3
    assert [b for _, b, _ in worker.produce(plan, steps)] == list(range(1, len(steps) + 1))
    assert all(isinstance(b["values"], np.ndarray) for b in handed)
    assert not any({"position_ids", "seq_idx", "attention_mask", "segment_ids"} & set(b)
                   for b in handed)
    want = [b for s, b, _ in producer.produce(plan, range(plan.steps)) if s in steps]
    _equal([rows_tokens(b) for b in handed], want)
    _equal(want, _loader_batches(path, **MODES[mode])[1::3])


def test_the_next_epochs_first_block_is_read_ahead_for_the_next_pass(path):
    """Given ``next_plan``, a pass reads the next epoch's first block at its last block;
    the next pass takes it, and its batches are the loader's."""
    kw = dict(MODES["packed"], prefetch=2)
    producer, plan, plan_of = _producer(path, **kw)
    following = plan_of(1)
    list(producer.produce(plan, range(plan.steps), next_plan=lambda: (following, None)))
    kept = producer._ahead._kept
    assert kept is not None and kept[1].result() is not None
    got = [b for _, b, _ in producer.produce(following, range(following.steps))]
    assert producer._ahead._kept is None  # taken by the pass it was read for
    _equal(got, _loader_batches(path, epoch=1, **kw))
