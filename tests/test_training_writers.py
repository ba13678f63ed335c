"""The loader on the layouts real writers make (docs/training.md#any-layout-any-world, issue 31's
trial): Hugging Face ``datasets``, pandas, DuckDB and polars files, one row group on many ranks,
two files on 16 ranks, row groups of very different sizes. On every layout: every sequence exactly
once per epoch across the ranks, as many steps on every rank, every batch's values its rows';
``balance="tokens"`` within 5% per step (median) and 2% per epoch on a skewed DuckDB layout;
``drop_last=True`` never empties an epoch that can fill a step; batches mix the sources of a corpus
sorted by source. Each writer's test is skipped where the writer is not installed."""

import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lodarrow as la


def _table(lengths, **extra):
    """Sequence ``i`` holds ``i, i + 1, ...``; ``label`` is ``i``."""
    n = len(lengths)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    values = np.repeat(np.arange(n) - offsets[:-1], lengths) + np.arange(offsets[-1])
    ids = pa.ListArray.from_arrays(pa.array(offsets), pa.array(values.astype(np.int32)))
    return pa.table({"ids": ids, "label": np.arange(n, dtype=np.int64), **extra})


def _lognormal(n, seed, mean=3.5, sigma=0.9, cap=1000):
    rng = np.random.default_rng(seed)
    return np.clip(rng.lognormal(mean, sigma, n), 1, cap).astype(np.int64)


def _row_groups(path):
    files = sorted(Path(path).glob("*.parquet")) if Path(path).is_dir() else [Path(path)]
    return [pq.ParquetFile(f).metadata.row_group(g).num_rows
            for f in files for g in range(pq.ParquetFile(f).metadata.num_row_groups)]


def _epoch(source, n, num_replicas, check_values=True, **kw):
    """Iterate every rank's epoch; assert exactly once, equal steps, budgets kept, values are
    rows.  Returns the steps per rank."""
    kw = {"max_tokens": 1024, "seed": 1, "extra_columns": ["label"], "prefetch": 0, **kw}
    bs, mt = kw.get("batch_size"), kw["max_tokens"]
    received, steps = [], []
    for rank in range(num_replicas):
        loader = la.batch_loader(source, "ids", num_replicas=num_replicas, rank=rank, **kw)
        count = 0
        for b in loader:
            rows = np.asarray(b["rows"])
            assert len(rows) >= 1, f"rank {rank}: an empty batch"
            received.append(rows)
            count += 1
            lengths = np.asarray(b["lengths"])
            assert bs is None or len(rows) <= bs
            assert mt is None or len(rows) == 1 or len(rows) * lengths.max() <= mt
            if check_values:
                assert np.array_equal(np.asarray(b["label"]), rows)
                values = np.asarray(b["values"])
                for k, row in enumerate(rows):
                    assert np.array_equal(values[k, :lengths[k]],
                                          np.arange(row, row + lengths[k]))
        assert count == len(loader)
        steps.append(count)
    assert len(set(steps)) == 1 and steps[0] >= 1, f"steps per rank: {steps}"
    rows = np.concatenate(received)
    counts = np.bincount(rows, minlength=n)
    assert len(counts) == n and counts.max() == 1 and counts.min() == 1, (
        f"twice: {np.flatnonzero(counts > 1)[:10]}, never: {np.flatnonzero(counts == 0)[:10]}")
    return steps[0]


# --- the writers --------------------------------------------------------------------------

def test_hugging_face_to_parquet_with_its_metadata_files(tmp_path):
    datasets = pytest.importorskip("datasets")
    n = 3000
    ds = datasets.Dataset(_table(_lognormal(n, 1)))
    ds.to_parquet(str(tmp_path / "train-00000-of-00001.parquet"), batch_size=500)
    # what the Hub keeps beside the data: never read as Parquet
    (tmp_path / "README.md").write_text("---\nlicense: mit\n---\n# corpus\n")
    (tmp_path / "dataset_info.json").write_text('{"features": {}}')
    assert len(_row_groups(tmp_path)) == 6
    for ranks in (4, 8):  # 8 ranks: fewer row groups than ranks
        _epoch(str(tmp_path), n, ranks)


def test_pandas_to_parquet_one_row_group_on_4_ranks(tmp_path):
    pytest.importorskip("pandas")
    n = 2000
    path = tmp_path / "corpus.parquet"
    _table(_lognormal(n, 2)).to_pandas().to_parquet(path)
    assert _row_groups(path) == [n]
    _epoch(str(path), n, 4)
    _epoch(str(path), n, 4, balance="tokens", batch_size=32)


def test_polars_write_parquet(tmp_path):
    pl = pytest.importorskip("polars")
    n = 2500
    pl.from_arrow(_table(_lognormal(n, 3))).write_parquet(tmp_path / "a.parquet")
    pl.from_arrow(_table(_lognormal(n, 3))).write_parquet(tmp_path / "b.parquet",
                                                          row_group_size=700)
    _epoch(str(tmp_path / "a.parquet"), n, 3)  # large_list<int32>, one row group
    _epoch(str(tmp_path / "b.parquet"), n, 8, batch_size=16)


def _duckdb_corpus(folder, spread):
    """20 sources of 1,000 lognormal lengths each (the sources' log-means spread over
    ``3.5 +- spread``), sorted by source, written by DuckDB with a byte budget per row group
    (a source of long sequences gets row groups of few rows)."""
    duckdb = pytest.importorskip("duckdb")
    rng = np.random.default_rng(4)
    means = rng.uniform(3.5 - spread, 3.5 + spread, 20)
    lengths = np.concatenate([np.clip(rng.lognormal(m, 0.8, 1000), 1, 4000)
                              for m in means]).astype(np.int64)
    source = np.repeat(np.arange(20), 1000)
    path = folder / "corpus.parquet"
    con = duckdb.connect()
    con.register("corpus", _table(lengths, source=source))
    con.execute(f"COPY (SELECT * FROM corpus ORDER BY source, label) TO '{path}' "
                f"(FORMAT PARQUET, ROW_GROUP_SIZE 100000, ROW_GROUP_SIZE_BYTES '256KB')")
    con.close()
    return str(path), lengths, source


@pytest.fixture(scope="module", params=["same-lengths", "skewed"])
def duckdb_corpus(request, tmp_path_factory):
    """The sources alike in lengths, or not (row groups of very different row counts)."""
    skewed = request.param == "skewed"
    path, lengths, source = _duckdb_corpus(tmp_path_factory.mktemp("duckdb"),
                                           2.0 if skewed else 0.0)
    groups = _row_groups(path)
    assert len(groups) >= 16, groups
    if skewed:
        assert max(groups) >= 8 * min(groups), groups  # very different sizes
    return path, lengths, source


def _plans(path, num_replicas, **kw):
    """Every rank's plan: a list per rank of each step's rows (read from no file)."""
    out = []
    for rank in range(num_replicas):
        plan = la.batch_loader(path, "ids", num_replicas=num_replicas, rank=rank, **kw).plan()
        out.append([np.asarray(plan[s]) for s in range(len(plan))])
    return out


@pytest.mark.parametrize("num_replicas", [4, 8])
def test_duckdb_row_groups_balanced_by_tokens(duckdb_corpus, num_replicas):
    path, lengths, _ = duckdb_corpus
    # the lengths as any reader sees them, not as the loader reports them
    lengths_read = pc.list_value_length(pq.read_table(path, columns=["ids"])["ids"])
    lengths_read = lengths_read.to_numpy().astype(np.int64)
    labels = pq.read_table(path, columns=["label"])["label"].to_numpy()
    assert np.array_equal(lengths[labels], lengths_read)
    max_tokens = 16384
    plans = _plans(path, num_replicas, max_tokens=max_tokens, balance="tokens", seed=2)
    steps = {len(p) for p in plans}
    assert len(steps) == 1, steps
    rows = np.concatenate([b for p in plans for b in p])
    assert np.array_equal(np.sort(rows), np.arange(len(lengths)))
    tokens = np.array([[lengths_read[b].sum() for b in p] for p in plans], np.float64)
    for p in plans:
        for b in p:
            assert len(b) == 1 or len(b) * lengths_read[b].max() <= max_tokens
    mean = tokens.mean(axis=0)
    spread = np.abs(tokens - mean).max(axis=0) / mean
    assert np.median(spread) <= 0.05, f"per-step spread median {np.median(spread):.3f}"
    totals = tokens.sum(axis=1)
    assert np.abs(totals - totals.mean()).max() / totals.mean() <= 0.02, totals
    stats = la.batch_loader(path, "ids", num_replicas=num_replicas, max_tokens=max_tokens,
                            balance="tokens", seed=2).statistics()
    assert stats["tokens"] == totals.astype(np.int64).tolist()
    # and the data a rank reads is what its plan says
    loader = la.batch_loader(path, "ids", num_replicas=num_replicas, rank=num_replicas - 1,
                             max_tokens=max_tokens, balance="tokens", seed=2, prefetch=0,
                             extra_columns=["label"])
    for k, b in enumerate(loader):
        assert np.array_equal(np.asarray(b["label"]), plans[-1][k])
        if k == 3:
            break


@pytest.fixture(scope="module")
def sorted_corpus(tmp_path_factory):
    """20 sources of 1,000 sequences (lengths alike), sorted by source; row groups of 250 rows,
    each of one source (read a row group at a time, every batch would hold one source)."""
    rng = np.random.default_rng(9)
    lengths = np.clip(rng.lognormal(3.5, 0.8, 20000), 1, 4000).astype(np.int64)
    source = np.repeat(np.arange(20), 1000)
    path = tmp_path_factory.mktemp("sorted") / "corpus.parquet"
    pq.write_table(_table(lengths, source=source), path, row_group_size=250)
    return str(path), lengths, source


@pytest.mark.parametrize("balance", ["batches", "tokens"])
def test_batches_mix_the_sources_of_a_sorted_corpus(sorted_corpus, balance):
    """At the defaults (row_groups=4, bucket=True) at most 5% of batches hold one source
    (the sources alike in lengths: bucketing by length does not sort them apart)."""
    path, _, source = sorted_corpus
    labels = pq.read_table(path, columns=["label"])["label"].to_numpy()
    source_of_row = source[labels]  # row i of the file is sequence labels[i]
    kw = {"batch_size": 32} if balance == "batches" else {"max_tokens": 8192,
                                                          "balance": "tokens"}
    for num_replicas in (1, 4):
        batches = [b for p in _plans(path, num_replicas, seed=5, **kw) for b in p]
        single = np.mean([len(np.unique(source_of_row[b])) == 1 for b in batches])
        assert single <= 0.05, f"{single:.1%} of batches hold one source ({num_replicas} ranks)"


# --- layouts ------------------------------------------------------------------------------

def test_one_file_of_one_row_group_on_8_ranks(tmp_path):
    n = 1500
    path = tmp_path / "one.parquet"
    pq.write_table(_table(_lognormal(n, 5)), path)
    assert _row_groups(path) == [n]
    _epoch(str(path), n, 8)
    _epoch(str(path), n, 8, batch_size=8, max_tokens=None)
    _epoch(str(path), n, 8, balance="tokens")


def test_two_files_on_16_ranks(tmp_path):
    n = 1200
    table = _table(_lognormal(n, 6))
    pq.write_table(table.slice(0, 500), tmp_path / "a.parquet")
    pq.write_table(table.slice(500), tmp_path / "b.parquet")
    _epoch(str(tmp_path), n, 16)
    _epoch(str(tmp_path), n, 16, balance="tokens", max_tokens=2048)


def test_validation_file_of_5000_rows_in_one_row_group_on_2_ranks(tmp_path):
    n = 5000
    path = tmp_path / "validation.parquet"
    pq.write_table(_table(_lognormal(n, 7, mean=2.5)), path)
    assert _row_groups(path) == [n]
    _epoch(str(path), n, 2, batch_size=64, max_tokens=None, shuffle=False)
    _epoch(str(path), n, 2, check_values=False)


@pytest.mark.parametrize("num_replicas, groups", [(8, [1000]), (16, [300, 300]), (4, [50] * 3)])
@pytest.mark.parametrize("budget", [{"batch_size": 16}, {"max_tokens": 512},
                                    {"max_tokens": 512, "batch_size": 8}])
def test_drop_last_never_empties_an_epoch_that_can_fill_a_step(tmp_path, num_replicas,
                                                               groups, budget):
    """drop_last=True drops only what cannot fill a step: with enough sequences for one step
    every rank gets batches, and what was dropped is counted."""
    n = sum(groups)
    table = _table(_lognormal(n, 8, mean=2.5, cap=200))
    at = 0
    for k, size in enumerate(groups):
        pq.write_table(table.slice(at, size), tmp_path / f"part-{k}.parquet")
        at += size
    received, steps = [], set()
    for rank in range(num_replicas):
        loader = la.batch_loader(str(tmp_path), "ids", num_replicas=num_replicas, rank=rank,
                                 drop_last=True, seed=3, prefetch=0, **budget)
        got = [np.asarray(b["rows"]) for b in loader]
        steps.add(len(got))
        received.extend(got)
        stats = loader.statistics()
    assert len(steps) == 1 and steps.pop() >= 1
    rows = np.concatenate(received)
    assert len(np.unique(rows)) == len(rows)
    dropped = stats["dropped"]["drop_last"]
    assert len(rows) + dropped == n, (len(rows), dropped)
    if list(budget) == ["batch_size"]:
        assert dropped < num_replicas * budget["batch_size"]
        assert all(len(r) == budget["batch_size"] for r in received)  # every batch full


@pytest.mark.parametrize("groups, num_replicas, balance", [
    ([1500], 8, "batches"), ([500, 700], 16, "batches"), ([300] * 20, 3, "batches"),
    ([300] * 20, 8, "tokens"), ([50, 2000, 100, 900, 30, 1000], 4, "tokens")])
def test_decodes_reported_are_the_decodes_done(tmp_path, monkeypatch, groups, num_replicas,
                                               balance):
    """statistics()["decodes"] counts what the ranks read, row group by row group: the same
    as counting the reads of one epoch on every rank (in-process, no prefetch)."""
    from lodarrow._training._source import ParquetParts

    n = sum(groups)
    table = _table(_lognormal(n, 11))
    with pq.ParquetWriter(tmp_path / "a.parquet", table.schema) as w:
        at = 0
        for size in groups:
            w.write_table(table.slice(at, size))
            at += size
    reads = np.zeros(len(groups), np.int64)
    original = ParquetParts.read

    def counting(self, k, columns, lo=0, hi=None):
        reads[k] += 1
        return original(self, k, columns, lo, hi)

    monkeypatch.setattr(ParquetParts, "read", counting)
    _epoch(str(tmp_path), n, num_replicas, check_values=False, balance=balance)
    stats = la.batch_loader(str(tmp_path), "ids", max_tokens=1024, seed=1, balance=balance,
                            num_replicas=num_replicas).statistics()["decodes"]
    assert stats["per_row_group"] == reads.tolist()
    assert stats["max"] == reads.max() and stats["row_groups"] == len(groups)
    if len(groups) >= 4 * num_replicas and balance == "batches":
        assert reads.max() == 1  # many row groups per rank: none read twice


# --- any layout ---------------------------------------------------------------------------

@st.composite
def layouts(draw):
    files = draw(st.lists(st.lists(st.integers(1, 120), min_size=1, max_size=4),
                          min_size=1, max_size=3))  # per file, its row groups' sizes
    n = sum(map(sum, files))
    ranks = draw(st.integers(1, min(16, n)))
    budget = draw(st.sampled_from(["batch_size", "max_tokens", "both"]))
    kw = {"seed": draw(st.integers(0, 99)), "row_groups": draw(st.integers(1, 4)),
          "balance": draw(st.sampled_from(["batches", "tokens"]))}
    if budget != "max_tokens":
        kw["batch_size"] = draw(st.integers(2, 32))
    if budget != "batch_size":
        kw["max_tokens"] = draw(st.integers(64, 1024))  # >= 2 * the longest: pairs fit
    return files, ranks, kw


@settings(max_examples=25, deadline=None)
@given(layouts())
def test_any_layout_every_sequence_once_equal_steps(case):
    files, ranks, kw = case
    n = sum(map(sum, files))
    table = _table(_lognormal(n, n, mean=2.0, cap=32))
    with tempfile.TemporaryDirectory() as tmp:
        at = 0
        for k, groups in enumerate(files):
            with pq.ParquetWriter(Path(tmp) / f"part-{k}.parquet", table.schema) as w:
                for size in groups:
                    w.write_table(table.slice(at, size))
                    at += size
        assert _row_groups(tmp) == [g for f in files for g in f]
        _epoch(tmp, n, ranks, **{"max_tokens": None, **kw})
