"""Every source the loader takes gives the same guarantees (docs/training.md#loader): a Ray
Data source (an object with ``iter_batches``, as Ray's ``Dataset`` and ``DataIterator``) is
checked before the first batch like a table or Parquet files, its statistics are what it
delivers; a source with no sequence to deliver is refused when the loader is made."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lodarrow as la


class FakeRay:
    """What the loader uses of a Ray ``Dataset``: ``iter_batches(batch_size=,
    batch_format="pyarrow")``, the table cut into batches of ``batch_size`` rows;
    ``order`` (a list) gives the row order of each pass in turn."""

    def __init__(self, table, orders=None):
        self.table, self.orders, self.passes = table, list(orders or []), 0

    def iter_batches(self, batch_size, batch_format):
        assert batch_format == "pyarrow"
        table = self.table
        if self.orders:
            table = table.take(self.orders[min(self.passes, len(self.orders) - 1)])
        self.passes += 1
        for at in range(0, len(table), batch_size):
            yield table.slice(at, batch_size)


def _corpus(lengths, null_row=None, null_value=None):
    """Row ``i``: tokens ``i * 1000, i * 1000 + 1, ...``, label ``i``."""
    rows = [list(range(i * 1000, i * 1000 + n)) for i, n in enumerate(lengths)]
    if null_value is not None:
        rows[null_value][0] = None
    if null_row is not None:
        rows[null_row] = None
    return pa.table({"ids": pa.array(rows, pa.list_(pa.int64())),
                     "label": np.arange(len(lengths))})


def test_a_ray_source_s_over_long_row_is_refused_before_the_first_batch():
    table = _corpus([2, 3, 1, 2, 3, 10, 1, 2])
    ray = FakeRay(table)
    with pytest.raises(ValueError, match=r"row 5 of the Ray source \(row 1 of its block 1 "
                                         r"of window=4 rows\) has 10 tokens, more than "
                                         r"max_tokens=4"):
        la.batch_loader(ray, "ids", max_tokens=4, oversize="error", window=4)
    assert ray.passes == 1  # the lengths pass only: no batch was made


def test_a_ray_source_s_null_value_inside_a_list_is_the_loader_s_error():
    table = _corpus([2, 3, 1, 2], null_value=2)
    with pytest.raises(ValueError, match=r"row 2 of the Ray source .* of column 'ids' holds "
                                         r"a null value inside its list"):
        la.batch_loader(FakeRay(table), "ids", max_tokens=8, window=3)
    with pytest.raises(ValueError, match=r"row 1 of the Ray source .* is null"):
        la.batch_loader(FakeRay(_corpus([2, 3, 1], null_row=1)), "ids", max_tokens=8)
    loader = la.batch_loader(FakeRay(table), "ids", max_tokens=8, window=3, nulls="drop",
                             extra_columns=["label"], progress=False)
    rows = np.concatenate([b["rows"] for b in loader])
    assert sorted(rows.tolist()) == [0, 1, 3]
    assert loader.statistics()["dropped"]["nulls"] == 1


@pytest.mark.parametrize("mode", ["padded", "packed", "packed_rows", "blocks"])
def test_a_ray_source_s_statistics_are_what_it_delivers(mode):
    rng = np.random.default_rng(2)
    lengths = rng.integers(1, 40, 90)
    table = _corpus(lengths)
    kw = dict(mode=mode, max_tokens=128, window=25, extra_columns=["label"], seed=4,
              progress=False)
    if mode in ("packed_rows", "blocks"):
        kw["row_length"] = 64
    loader = la.batch_loader(FakeRay(table), "ids", **kw)
    stats = loader.statistics()
    batches = list(loader)
    assert len(batches) == len(loader) == stats["steps"]
    slots = sum(np.asarray(b["values"]).size for b in batches)
    assert stats["padded_tokens"] == [slots]
    assert stats["tokens"] == [int(lengths.sum())]
    assert all(np.asarray(b["values"]).size <= 128 for b in batches)
    if mode != "blocks":  # every row once, its label with it
        rows = np.concatenate([b["rows"] for b in batches])
        assert sorted(rows.tolist()) == list(range(90))
        assert all(np.array_equal(b["rows"], b["label"]) for b in batches)


def test_a_ray_source_resumes_from_its_state():
    table = _corpus(np.random.default_rng(3).integers(1, 30, 70))
    kw = dict(max_tokens=64, window=20, seed=1, progress=False)
    whole = [b["rows"] for b in la.batch_loader(FakeRay(table), "ids", **kw)]
    loader = la.batch_loader(FakeRay(table), "ids", **kw)
    it = iter(loader)
    head = [next(it)["rows"] for _ in range(5)]
    state = loader.state_dict()
    again = la.batch_loader(FakeRay(table), "ids", **kw)
    again.load_state_dict(state)
    rest = [b["rows"] for b in again]
    assert all(np.array_equal(a, b) for a, b in zip(head + rest, whole, strict=True))


def test_a_ray_source_through_dataloader_workers():
    """``loader.torch()`` with two ``DataLoader`` workers: each reads Ray's blocks in order
    and makes its steps; the loop receives the plan's batches in order, each row once."""
    torch = pytest.importorskip("torch")
    table = _corpus(np.random.default_rng(1).integers(1, 30, 100))
    kw = dict(max_tokens=64, window=16, seed=3, progress=False)
    loader = la.batch_loader(FakeRay(table), "ids", to="torch", **kw)
    got = [b["rows"].numpy() for b in torch.utils.data.DataLoader(
        loader.torch(), batch_size=None, num_workers=2)]
    want = [b["rows"] for b in la.batch_loader(FakeRay(table), "ids", **kw)]
    assert len(got) == len(loader) == len(want)
    assert all(np.array_equal(a, b) for a, b in zip(got, want))
    assert sorted(np.concatenate(got).tolist()) == list(range(100))


def test_a_ray_source_that_changes_its_order_is_refused_not_mixed():
    table = _corpus(np.arange(1, 21))
    ray = FakeRay(table, orders=[np.arange(20), np.arange(20)[::-1]])
    loader = la.batch_loader(ray, "ids", max_tokens=64, window=8, progress=False)
    with pytest.raises(ValueError, match="does not hold the rows it held when the loader "
                                         "was made.*preserve_order"):
        list(loader)


@pytest.mark.parametrize("world", [1, 2])
def test_an_empty_corpus_is_refused_when_the_loader_is_made(tmp_path, world):
    empty = pa.table({"ids": pa.array([], pa.list_(pa.int64()))})
    pq.write_table(empty, tmp_path / "empty.parquet")
    kw = dict(batch_size=4, num_replicas=world, cache_dir=False)
    with pytest.raises(ValueError, match=r"'.*empty.parquet' gives no sequence to deliver: "
                                         r"it holds 0 rows"):
        la.batch_loader(str(tmp_path / "empty.parquet"), "ids", **kw)
    with pytest.raises(ValueError, match="the Table gives no sequence to deliver: it holds "
                                         "0 rows"):
        la.batch_loader(empty, "ids", **kw)
    nulls = pa.table({"ids": pa.array([None, None, None], pa.list_(pa.int64()))})
    with pytest.raises(ValueError, match=r"the Table gives no sequence to deliver: every one "
                                         r"of its 3 sequence\(s\) is left out \(3 null "
                                         r"\(nulls='drop'\)\)"):
        la.batch_loader(nulls, "ids", nulls="drop", **kw)
    pq.write_table(nulls, tmp_path / "nulls.parquet")
    with pytest.raises(ValueError, match=r"nulls.parquet' gives no sequence to deliver"):
        la.batch_loader(str(tmp_path / "nulls.parquet"), "ids", nulls="drop", **kw)
    long = pa.table({"ids": [[1, 2, 3], [4, 5, 6, 7]]})
    with pytest.raises(ValueError, match=r"2 over-long \(oversize='drop'\)"):
        la.batch_loader(long, "ids", max_tokens=2, oversize="drop", num_replicas=world)
    with pytest.raises(ValueError, match="the Ray source holds no rows"):
        la.batch_loader(FakeRay(empty), "ids", max_tokens=8)


@pytest.mark.engines
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_a_real_ray_dataset_is_checked_before_the_first_batch():
    ray = pytest.importorskip("ray")
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 configure_logging=False)
    try:
        ray.data.DataContext.get_current().enable_progress_bars = False
        table = _corpus([2, 3, 1, 2, 3, 10, 1, 2])
        with pytest.raises(ValueError, match=r"row 5 of the Ray source .* has 10 tokens"):
            la.batch_loader(ray.data.from_arrow(table), "ids", max_tokens=4,
                            oversize="error", window=4)
        with pytest.raises(ValueError, match=r"row 2 of the Ray source .* holds a null value"):
            la.batch_loader(ray.data.from_arrow(_corpus([2, 3, 1, 2], null_value=2)), "ids",
                            max_tokens=8)
        loader = la.batch_loader(ray.data.from_arrow(table), "ids", max_tokens=10, window=4,
                                 extra_columns=["label"], progress=False)
        stats = loader.statistics()
        batches = list(loader)
        assert stats["steps"] == len(batches)
        assert stats["padded_tokens"] == [sum(b["values"].size for b in batches)]
        rows = np.concatenate([b["label"] for b in batches])
        assert sorted(rows.tolist()) == list(range(8))
    finally:
        if started:
            ray.shutdown()


@pytest.mark.parametrize("level", [1, -1, 2])
def test_a_level_the_column_does_not_have_is_named_for_every_in_memory_source(level):
    """A table, an Arrow column (as the Parquet source does): ``level`` named, not an
    IndexError from inside."""
    table = pa.table({"ids": [[1, 2], [3], [4, 5, 6]] * 10})
    for source, column in ((table, "ids"), (table.column("ids").combine_chunks(), None),
                           (table.column("ids"), None)):
        with pytest.raises(ValueError, match=r"level must be in \[0, 1\)"):
            la.batch_loader(source, column, max_tokens=100, level=level)
