"""Resume as properties (docs/training.md#plans and #resuming), hypothesis over random
lengths, budgets, sources (in memory or Parquet of random row groups), world-size chains (such
as 2 -> 8 -> 3) and resume points: each segment of the epoch runs on its own world from the
state the segment before saved (through JSON).  Across the segments every sequence is received
exactly once; in each segment every rank gets as many steps, none of them empty; no batch
exceeds its budget; every batch's values are its rows'; the ranks save the same state."""

import json
import tempfile
from itertools import islice
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lodarrow as la

MAX_LEN = 40


def _table(lengths):
    """Sequence ``i`` holds ``i, i + 1, ...`` (so a batch's values name its rows)."""
    n = len(lengths)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    values = np.repeat(np.arange(n) - offsets[:-1], lengths) + np.arange(offsets[-1])
    return pa.table({"ids": pa.ListArray.from_arrays(pa.array(offsets),
                                                     pa.array(values.astype(np.int32)))})


@st.composite
def runs(draw):
    chain = draw(st.lists(st.integers(1, 8), min_size=2, max_size=4))
    n = draw(st.integers(max(chain), 200))
    lengths = np.array(draw(st.lists(st.integers(0, MAX_LEN), min_size=n, max_size=n)),
                       np.int64)
    kind = draw(st.sampled_from(["batch_size", "max_tokens", "both"]))
    kw = {"seed": draw(st.integers(0, 2**16)), "shuffle": draw(st.booleans()),
          "bucket": draw(st.booleans()), "prefetch": draw(st.sampled_from([0, 2])),
          "cost": draw(st.sampled_from(["padded", "packed"]))}
    if kind != "max_tokens":
        kw["batch_size"] = draw(st.integers(2, 24))
    if kind != "batch_size":
        # any two sequences fit a batch: a plan on R ranks exists for any R sequences or more
        kw["max_tokens"] = draw(st.integers(2 * MAX_LEN, 12 * MAX_LEN))
        kw["balance"] = draw(st.sampled_from(["batches", "tokens", "compute"]))
        if kw["balance"] == "compute":
            kw["alpha"] = draw(st.sampled_from([0.0, 0.01, 0.5]))
    source = draw(st.sampled_from(["memory", "parquet"]))
    if source == "memory":
        kw["window"] = draw(st.integers(1, 64))
        layout = None
    else:
        kw["row_groups"] = draw(st.integers(1, 4))
        cuts = sorted(draw(st.lists(st.integers(1, n - 1), max_size=3, unique=True))) \
            if n > 1 else []
        layout = [(a, b, draw(st.integers(1, max(b - a, 1))))  # (first, stop, row group size)
                  for a, b in zip([0] + cuts, cuts + [n])]
    stops = draw(st.lists(st.floats(0, 1), min_size=len(chain) - 1, max_size=len(chain) - 1))
    return lengths, kw, layout, chain, stops


def _budget_kept(batch, kw):
    lengths = np.asarray(batch["lengths"])
    if "batch_size" in kw:
        assert len(lengths) <= kw["batch_size"]
    if "max_tokens" in kw and len(lengths) > 1:
        cost = lengths.sum() if kw["cost"] == "packed" else len(lengths) * lengths.max()
        assert cost <= kw["max_tokens"], (cost, kw)


def _values_are_rows(batch):
    values, lengths = np.asarray(batch["values"]), np.asarray(batch["lengths"])
    for k, row in enumerate(np.asarray(batch["rows"])):
        assert np.array_equal(values[k, :lengths[k]], np.arange(row, row + lengths[k]))


@settings(max_examples=30, deadline=None)
@given(runs())
def test_segments_on_changing_worlds_deliver_every_sequence_once(case):
    lengths, kw, layout, chain, stops = case
    n = len(lengths)
    table = _table(lengths)
    with tempfile.TemporaryDirectory() as tmp:
        source = table
        if layout is not None:
            for k, (a, b, group) in enumerate(layout):
                pq.write_table(table.slice(a, b - a), Path(tmp) / f"part-{k}.parquet",
                               row_group_size=group)
            source = tmp
        received, state = [], None
        for j, world in enumerate(chain):
            loaders = [la.batch_loader(source, "ids", num_replicas=world, rank=r, **kw)
                       for r in range(world)]
            left = n - len(received)
            if state is not None:
                if 0 < left < world:  # fewer sequences than ranks: no equal steps exist
                    with pytest.raises(ValueError, match="num_replicas"):
                        loaders[0].load_state_dict(state)
                    return
                for loader in loaders:
                    loader.load_state_dict(state)
            cursor = loaders[0].state_dict()["cursor"]
            steps_left = len(loaders[0]) - cursor
            assert all(len(lo) == len(loaders[0]) for lo in loaders)
            last = j == len(chain) - 1
            stop = steps_left if last else int(stops[j] * steps_left)
            got = []
            for loader in loaders:
                batches = list(islice(loader, stop))
                assert len(batches) == stop, "unequal steps per rank"
                for b in batches:
                    assert len(b["rows"]) >= 1, "an empty batch"
                    _budget_kept(b, kw)
                    _values_are_rows(b)
                    got.extend(np.asarray(b["rows"]).tolist())
            received.extend(got)
            states = [json.loads(json.dumps(lo.state_dict())) for lo in loaders]
            assert all(s == states[0] for s in states)
            assert states[0]["cursor"] == cursor + stop
            state = states[0]
        assert sorted(received) == list(range(n)), "every sequence exactly once"
        # a restart on the world it stopped on is the same plan: nothing left after the end
        again = la.batch_loader(source, "ids", num_replicas=chain[-1], **kw)
        again.load_state_dict(state)
        assert list(again) == []
