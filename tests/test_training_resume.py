"""Resume (docs/training.md#resuming): the state is small data; the next batch after
load_state_dict is exactly the first not yet received; skipped batches are never read; another
world size re-plans what is left; a changed source or arguments are named."""

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lodarrow as la
from lodarrow._training._source import ParquetParts


def _column(lengths):
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return pa.LargeListArray.from_arrays(pa.array(offsets),
                                         pa.array(np.arange(offsets[-1], dtype=np.int32)))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    rng = np.random.default_rng(11)
    lengths = np.maximum(rng.lognormal(3, 1, 3000).astype(np.int64), 1)
    folder = tmp_path_factory.mktemp("resume")
    table = pa.table({"ids": _column(lengths), "label": np.arange(len(lengths))})
    pq.write_table(table.slice(0, 1800), folder / "a.parquet", row_group_size=300)
    pq.write_table(table.slice(1800), folder / "b.parquet", row_group_size=400)
    return str(folder), lengths


KW = dict(max_tokens=512, cost="packed", balance="tokens", seed=4)


def _rows(batches):
    return [np.asarray(b["rows"]) for b in batches]


def test_state_is_small_json_whatever_the_size():
    lengths = np.random.default_rng(0).integers(1, 64, 10**6)
    loader = la.batch_loader(pa.table({"ids": _column(lengths)}), "ids", batch_size=64)
    text = json.dumps(loader.state_dict())
    assert len(text) < 4096
    state = json.loads(text)
    assert state["plan_version"] >= 2 and state["cursor"] == 0 and state["epoch"] == 0
    assert state["source"]["sequences"] == 10**6 and state["num_replicas"] == 1


@pytest.mark.parametrize("source", ["parquet", "table"])
def test_the_next_batch_is_the_first_not_received(corpus, source):
    path, lengths = corpus
    src = path if source == "parquet" else pq.read_table(path)
    full = _rows(la.batch_loader(src, "ids", **KW))
    for k in (0, 1, 7, len(full) - 1, len(full)):
        loader = la.batch_loader(src, "ids", **KW)
        it = iter(loader)
        head = [np.asarray(next(it)["rows"]) for _ in range(k)]
        state = json.loads(json.dumps(loader.state_dict()))
        assert state["cursor"] == k
        again = la.batch_loader(src, "ids", **KW)
        again.load_state_dict(state)
        tail = _rows(again)
        assert len(head) + len(tail) == len(full)
        assert all(np.array_equal(a, b) for a, b in zip(head + tail, full))
        counter = la.batch_loader(src, "ids", **KW)
        counter.set_epoch(0, start_step=k)  # a counter the training loop keeps
        assert all(np.array_equal(a, b) for a, b in zip(_rows(counter), full[k:]))


def test_skipped_batches_are_not_read(corpus, monkeypatch):
    path, _ = corpus
    # blocks of ~1 row group; no reading ahead (which also reads the next epoch's first block)
    loader = la.batch_loader(path, "ids", row_groups=1, prefetch=0, **KW)
    steps = len(loader)
    reads = []
    original = ParquetParts.read

    def counting(self, k, columns, lo=0, hi=None):
        reads.append(k)
        return original(self, k, columns, lo, hi)

    monkeypatch.setattr(ParquetParts, "read", counting)
    list(loader)
    everything = len(reads)
    reads.clear()
    loader.set_epoch(0, start_step=steps - 1)
    assert len(list(loader)) == 1
    assert 0 < len(reads) <= 2 < everything  # the last block's row groups, not the epoch's


def test_elastic_resume_on_another_world(corpus):
    path, lengths = corpus
    received, state = [], None
    for replicas, stop in ((2, 5), (3, 4), (1, None)):
        counts = []
        for rank in range(replicas):
            loader = la.batch_loader(path, "ids", num_replicas=replicas, rank=rank, **KW)
            if state is not None:
                loader.load_state_dict(state)
            got = []
            for b in loader:
                got.append(np.asarray(b["rows"]))
                assert int(b["lengths"].sum()) <= 512 or len(b["rows"]) == 1
                if stop is not None and len(got) == stop:
                    break
            counts.append(len(got))
            received.extend(got)
            saved = loader.state_dict()
        assert len(set(counts)) == 1  # equal steps on every rank
        state = json.loads(json.dumps(saved))
    rows = np.concatenate(received)
    assert len(rows) == len(lengths) and len(np.unique(rows)) == len(lengths)
    assert [s[0] for s in state["segments"]] == [2, 3, 1]


def test_a_changed_source_or_arguments_is_named(corpus, tmp_path):
    path, lengths = corpus
    loader = la.batch_loader(path, "ids", **KW)
    state = loader.state_dict()
    other = la.batch_loader(path, "ids", **{**KW, "max_tokens": 256})
    with pytest.raises(ValueError, match=r"argument max_tokens=512 was saved, the loader has "
                                         r"256.*strict=False"):
        other.load_state_dict(state)
    with pytest.warns(UserWarning, match="max_tokens=512 was saved"):
        other.load_state_dict({**state, "cursor": 3}, strict=False)
    assert other.state_dict()["cursor"] == 3
    table = pq.read_table(path)
    changed = la.batch_loader(table.slice(1), "ids", **KW)
    with pytest.raises(ValueError, match="source sequences 3000 was saved"):
        changed.load_state_dict(state)
    with pytest.raises(ValueError, match="seed 4 was saved, the loader has 5"):
        la.batch_loader(path, "ids", **{**KW, "seed": 5}).load_state_dict(state)
    with pytest.raises(ValueError, match="not a batch_loader state"):
        loader.load_state_dict({"format": "x"})
    with pytest.raises(TypeError, match="state must be a dict"):
        loader.load_state_dict("cursor=3")
    with pytest.raises(ValueError, match="past the epoch"):
        loader.load_state_dict({**state, "cursor": 10**6})
    del lengths


def test_drop_last_across_a_world_change_drops_at_most_each_world_s_remainder():
    """``drop_last=True`` with a fixed batch size: each world the epoch runs on plans what is
    left and drops what cannot fill one of its steps, fewer than its ``num_replicas *
    batch_size`` sequences; across a resume on another world the epoch drops at most the sum
    of those (docs/training.md#resuming), each counted by the statistics of its segment.
    8 ranks, then 5, batches of 10: 79 + 40 = 119 sequences, more than 8 x 10."""
    n = 80 * 9 + 79
    table = pa.table({"ids": _column(np.full(n, 3)), "label": np.arange(n)})

    def make(world, rank):
        return la.batch_loader(table, "ids", batch_size=10, drop_last=True, seed=2,
                               num_replicas=world, rank=rank, progress=False)

    first = [make(8, r) for r in range(8)]
    assert first[0].statistics()["dropped"]["drop_last"] == 79
    got = [b["rows"] for lo in first for _, b in zip(range(1), lo)]  # one step each
    state = first[0].state_dict()
    later = [make(5, r) for r in range(5)]
    for lo in later:
        lo.load_state_dict(state)
    dropped_later = later[0].statistics()["dropped"]["drop_last"]
    assert dropped_later == 40
    got += [b["rows"] for lo in later for b in lo]
    rows = np.concatenate(got)
    assert len(rows) == len(np.unique(rows))
    assert n - len(rows) == 79 + dropped_later <= (8 * 10 - 1) + (5 * 10 - 1)
    assert all(len(r) == 10 for r in got)
