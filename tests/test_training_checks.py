"""What the loader knows before its first batch (docs/training.md#checked-before-the-first-batch):
over-long sequences, column types across files, extra columns `to=` cannot hold, 64-bit data for
JAX, null rows, bad epochs; every error names the file, row group and row where one is at fault."""

import json
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lodarrow as la


def _write(path, lengths, value_type=pa.int32(), start=0, row_group_size=None, **extra):
    ids = pa.array([list(range(start + i, start + i + int(m))) for i, m in enumerate(lengths)],
                   type=pa.list_(value_type))
    table = pa.table({"ids": ids, "label": np.arange(start, start + len(lengths)), **extra})
    pq.write_table(table, path, row_group_size=row_group_size)
    return str(path)


def test_over_long_sequences_fail_when_the_loader_is_made(tmp_path):
    src = _write(tmp_path / "a.parquet", [3, 5, 90, 2] * 50, row_group_size=40)
    with pytest.raises(ValueError, match=r"sequence 2 \(row 2 of row group 0 of .*a\.parquet"
                                         r"'\) has 90 tokens, more than row_length=64"):
        la.batch_loader(src, "ids", max_tokens=256, mode="packed_rows", row_length=64)
    with pytest.raises(ValueError, match="more than max_tokens=64"):
        la.batch_loader(src, "ids", max_tokens=64, oversize="error")
    loader = la.batch_loader(src, "ids", max_tokens=256, mode="packed_rows", row_length=64,
                             oversize="drop", cost="packed")
    rows = np.concatenate([b["rows"] for b in loader])
    assert len(rows) == 150 and 2 not in rows
    assert loader.statistics()["dropped"]["oversize"] == 50


def test_column_types_unify_across_files_or_name_both(tmp_path):
    a = _write(tmp_path / "a.parquet", [2, 3, 1], pa.int32())
    b = _write(tmp_path / "b.parquet", [4, 1], pa.int64(), start=3)
    loader = la.batch_loader(str(tmp_path), "ids", batch_size=2, shuffle=False)
    batches = list(loader)
    assert all(b_["values"].dtype == np.int64 for b_ in batches)  # int32 widened to int64
    assert sorted(np.concatenate([b_["rows"] for b_ in batches]).tolist()) == [0, 1, 2, 3, 4]
    c = tmp_path / "c"
    c.mkdir()
    _write(c / "a.parquet", [2, 3], pa.int64())
    pq.write_table(pa.table({"ids": pa.array([["x"], ["y", "z"]]), "label": [0, 1]}),
                   c / "b.parquet")
    with pytest.raises(TypeError, match=r"column 'ids' is list<element: int64> in .*a\.parquet' "
                                        r"but list<element: string> in .*b\.parquet'"):
        la.batch_loader(str(c), "ids", batch_size=2)
    del a, b


def test_the_sequence_column_must_be_a_list(tmp_path):
    table = pa.table({"text": ["a", "bc"], "ids": [[1], [2, 3]]})
    with pytest.raises(TypeError, match="column 'text' is string, not a list column"):
        la.batch_loader(table, "text", batch_size=1)


def test_the_sequence_column_must_hold_numbers(tmp_path):
    """A list column of strings is refused where it enters, naming the loader and the column
    (in memory and in Parquet), before any batch."""
    table = pa.table({"s": [["a", "b"], ["c"]]})
    with pytest.raises(TypeError, match=r"^batch_loader: column 's': values of Arrow type "
                                        r"string .* not supported"):
        la.batch_loader(table, "s", max_tokens=4)
    pq.write_table(table, tmp_path / "s.parquet")
    with pytest.raises(TypeError, match=r"^batch_loader: column 's': values of Arrow type "):
        la.batch_loader(str(tmp_path / "s.parquet"), "s", max_tokens=4)
    table = pa.table({"v": pa.array([[[1.0] * 4], []], pa.list_(pa.list_(pa.float32(), 4)))})
    assert len(la.batch_loader(table, "v", max_tokens=4, mode="packed")) >= 1  # features: fine


def test_extra_columns_any_type_never_a_buffer_error(tmp_path):
    torch = pytest.importorskip("torch")
    table = pa.table({"ids": [[1, 2], [3], [4, 5, 6]], "text": ["a", None, "c"],
                      "tags": [[1], [], [2, 3]], "score": pa.array([1, None, 3], pa.int32()),
                      "w": pa.array([0.5, 1.5, 2.5], pa.float32())})
    loader = la.batch_loader(table, "ids", batch_size=3, shuffle=False, bucket=False,
                             to="torch", extra_columns=["text", "tags", "score", "w"])
    (batch,) = list(loader)
    assert isinstance(batch["text"], pa.Array) and batch["text"].to_pylist() == ["a", None, "c"]
    assert batch["tags"].to_pylist() == [[1], [], [2, 3]]
    assert batch["score"].dtype == torch.int32  # kept, not a float with NaN
    assert batch["score"].tolist() == [1, 0, 3]
    assert batch["score_mask"].tolist() == [True, False, True]
    assert batch["w"].dtype == torch.float32 and "w_mask" not in batch


def test_jax_without_x64_is_refused_not_narrowed():
    jax = pytest.importorskip("jax")
    if jax.config.jax_enable_x64:
        pytest.skip("this process runs JAX with x64 on")
    table = pa.table({"ids": pa.array([[1, 2], [3]], pa.list_(pa.int64())),
                      "big": pa.array([2**40 + 1, 1], pa.int64()),
                      "small": pa.array([[1], [2]], pa.list_(pa.int32()))})
    with pytest.raises(ValueError, match="column 'ids' holds int64 .* jax_enable_x64"):
        la.batch_loader(table, "ids", batch_size=2, to="jax")
    with pytest.raises(ValueError, match="column 'big' holds int64"):
        la.batch_loader(table, "small", batch_size=2, to="jax", extra_columns=["big"])
    jax.config.update("jax_enable_x64", True)
    try:
        (batch,) = list(la.batch_loader(table, "small", batch_size=2, to="jax", shuffle=False,
                                        bucket=False, extra_columns=["big"]))
        assert int(batch["big"][0]) == 2**40 + 1
    finally:
        jax.config.update("jax_enable_x64", False)


def test_nulls_error_empty_or_drop(tmp_path):
    ids = pa.array([[1, 2], None, [3], None, [4, 5]])
    pq.write_table(pa.table({"ids": ids}), tmp_path / "n.parquet", row_group_size=2)
    src = str(tmp_path / "n.parquet")
    with pytest.raises(ValueError, match=r"row 1 of row group 0 of .*n\.parquet' of column "
                                         r"'ids' is null \(2 null row\(s\)\)"):
        la.batch_loader(src, "ids", batch_size=2)
    empty = la.batch_loader(src, "ids", batch_size=5, nulls="empty", shuffle=False,
                            bucket=False)
    (batch,) = list(empty)
    assert batch["lengths"].tolist() == [2, 0, 1, 0, 2]
    dropped = la.batch_loader(src, "ids", batch_size=5, nulls="drop")
    rows = np.concatenate([b["rows"] for b in dropped])
    assert sorted(rows.tolist()) == [0, 2, 4]
    assert dropped.statistics()["dropped"]["nulls"] == 2
    with pytest.raises(ValueError, match="row 1 of column 'ids' is null"):
        la.batch_loader(pa.table({"ids": ids}).slice(2), "ids", batch_size=1)


def test_epochs_are_checked_and_a_repeat_warns():
    table = pa.table({"ids": [[1], [2, 3], [4]]})
    loader = la.batch_loader(table, "ids", batch_size=1)
    with pytest.raises(ValueError, match="epoch must be >= 0, got -1"):
        loader.set_epoch(-1)
    with pytest.raises(ValueError, match="start_step=9 is past the epoch's 3 steps"):
        loader.set_epoch(0, start_step=9)
    list(loader)
    with pytest.warns(UserWarning, match="epoch 0 is iterated again"):
        list(loader)
    loader.set_epoch(1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        list(loader)


def test_statistics_are_data(tmp_path):
    rng = np.random.default_rng(0)
    src = _write(tmp_path / "s.parquet", rng.integers(1, 60, 400), row_group_size=100)
    loader = la.batch_loader(src, "ids", max_tokens=256, num_replicas=2, rank=1,
                             balance="tokens")
    stats = loader.statistics()
    json.dumps(stats)
    assert stats["steps"] == len(loader) and len(stats["tokens"]) == 2
    assert sum(stats["sequences"]) == 400
    assert stats["dropped"] == {"nulls": 0, "oversize": 0, "drop_last": 0}
    assert 0 <= stats["padding"] < 1
    assert stats["step_balance"]["tokens"]["median"] <= 1.1
    assert stats["decodes"]["row_groups"] == 4 and stats["decodes"]["max"] <= 2
    # balance="batches" cuts at row-group edges: four row groups on two ranks, none read twice
    plain = la.batch_loader(src, "ids", max_tokens=256, num_replicas=2).statistics()
    assert plain["decodes"]["max"] == 1


def test_decoding_stays_bounded_when_ranks_outnumber_row_groups(tmp_path):
    rng = np.random.default_rng(1)
    src = _write(tmp_path / "one.parquet", rng.integers(1, 30, 800))  # one row group
    seen = []
    for rank in range(8):
        loader = la.batch_loader(src, "ids", max_tokens=128, num_replicas=8, rank=rank)
        seen.append(np.concatenate([b["rows"] for b in loader]))
        assert len(seen[-1])
    assert np.array_equal(np.sort(np.concatenate(seen)), np.arange(800))
    assert loader.statistics()["decodes"]["max"] <= 8  # ceil(8 ranks / 1 row group)


def test_prefetch_gives_the_same_batches_and_stops_cleanly():
    rng = np.random.default_rng(2)
    table = pa.table({"ids": pa.array([list(range(int(n))) for n in rng.integers(1, 50, 500)])})
    eager = [b["rows"] for b in la.batch_loader(table, "ids", batch_size=16, prefetch=0)]
    ahead = la.batch_loader(table, "ids", batch_size=16, prefetch=4)
    got = [b["rows"] for b in ahead]
    assert all(np.array_equal(a, b) for a, b in zip(eager, got)) and len(eager) == len(got)
    ahead.set_epoch(0)
    it = iter(ahead)
    next(it), next(it)
    it.close()  # the thread stops; the cursor counts what was handed out
    assert ahead.state_dict()["cursor"] == 2


def test_argument_errors():
    table = pa.table({"ids": [[1], [2]]})
    with pytest.raises(ValueError, match="nulls must be 'error' or 'empty' or 'drop'"):
        la.batch_loader(table, "ids", batch_size=1, nulls="skip")
    with pytest.raises(ValueError, match="balance must be"):
        la.batch_loader(table, "ids", batch_size=1, balance="cost")
    with pytest.raises(ValueError, match="alpha must be a finite number >= 0"):
        la.batch_loader(table, "ids", batch_size=1, balance="compute", alpha=float("nan"))
    with pytest.raises(ValueError, match="prefetch must be >= 0"):
        la.batch_loader(table, "ids", batch_size=1, prefetch=-1)
    with pytest.raises(ValueError, match="cannot give each of num_replicas=4 ranks a batch"):
        la.batch_loader(table, "ids", batch_size=1, num_replicas=4)


def test_planned_packed_rows_one_shape_efficient_every_token_once():
    rng = np.random.default_rng(5)
    lengths = np.maximum(rng.lognormal(5.2, 0.8, 12000).astype(np.int64), 1)
    lengths[::997] = 9000  # longer than a row: split into chunks
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    col = pa.LargeListArray.from_arrays(pa.array(offsets),
                                        pa.array(np.arange(offsets[-1], dtype=np.int32)))
    loader = la.batch_loader(pa.table({"ids": col}), "ids", max_tokens=8 * 4096,
                             mode="packed_rows", row_length=4096, oversize="split",
                             num_replicas=2, rank=0, window=4096)
    stats = loader.statistics()
    assert stats["packing"]["efficiency"] >= 0.99
    assert stats["packing"]["split"] == len(lengths[::997])
    assert stats["packing"]["rows_per_batch"] == 8
    tokens = []
    for rank in range(2):
        for b in la.batch_loader(pa.table({"ids": col}), "ids", max_tokens=8 * 4096,
                                 mode="packed_rows", row_length=4096, oversize="split",
                                 num_replicas=2, rank=rank, window=4096):
            assert b["values"].shape == (8, 4096)  # one shape for the run
            tokens.append(b["values"][b["attention_mask"]])
            pos = b["position_ids"][b["attention_mask"]]
            assert pos.max() < 4096  # positions restart in each chunk
    tokens = np.sort(np.concatenate(tokens))
    assert np.array_equal(tokens, np.arange(offsets[-1]))  # every token exactly once
