"""Collation (docs/training.md#collation): padded, packed varlen and packed rows equal a slow
reference built from Python lists, for every dtype, feature shape and LoD level."""

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

import lodarrow as la
from reference_packing import best_fit_decreasing


def _seqs(tensor, level):
    """The level-``level`` sequences of ``tensor`` as lists of value rows (the reference)."""
    data = tensor.numpy()
    offsets = [o.tolist() for o in tensor.offsets]
    bounds = offsets[level]
    for off in offsets[level + 1:]:
        bounds = [off[b] for b in bounds]
    return [data[bounds[i]:bounds[i + 1]] for i in range(len(bounds) - 1)]


def _reference(seqs, rows, mode, pad, row_length=None):
    picked = [seqs[r] for r in rows]
    lengths = [len(s) for s in picked]
    longest = max(lengths, default=0)
    if mode == "padded":
        out = []
        for s in picked:
            tail = [np.full(s.shape[1:], pad, s.dtype)] * (longest - len(s))
            out.append(list(s) + tail)
        return {"values": out, "lengths": lengths,
                "attention_mask": [[i < n for i in range(longest)] for n in lengths]}
    if mode == "packed":
        cu = [0]
        for n in lengths:
            cu.append(cu[-1] + n)
        return {"values": [v for s in picked for v in s], "cu_seqlens": cu,
                "max_seqlen": longest, "position_ids": [i for n in lengths for i in range(n)],
                "seq_idx": [k for k, n in enumerate(lengths) for _ in range(n)],
                "lengths": lengths}
    if mode == "segments":
        return {"values": [v for s in picked for v in s], "num_segments": len(picked),
                "segment_ids": [k for k, n in enumerate(lengths) for _ in range(n)],
                "position_ids": [i for n in lengths for i in range(n)], "lengths": lengths}
    # packed rows: best fit, longest first (ties in the batch's order)
    rows_ = best_fit_decreasing(lengths, row_length)
    values, pos, cus, seq_idx = [], [], [], []
    for row in rows_:
        vals = [v for k in row for v in picked[k]]
        fill = row_length - len(vals)
        values.append(vals + [np.full(picked[0].shape[1:], pad, picked[0].dtype)] * fill)
        pos.append([i for k in row for i in range(lengths[k])] + [0] * fill)
        seq_idx.append([k for k in row for _ in range(lengths[k])] + [-1] * fill)
        cu = [0]
        for k in row:
            cu.append(cu[-1] + lengths[k])
        cus.append(cu)
    most = max((len(c) for c in cus), default=1)
    cus = [c + [c[-1]] * (most - len(c)) for c in cus]
    return {"values": values, "position_ids": pos, "cu_seqlens": cus, "seq_idx": seq_idx}


def _check(got, want, dtype, feature):
    for key, value in want.items():
        if key == "values":
            expect = np.array(value, dtype=dtype).reshape(got[key].shape)
            assert got[key].dtype == dtype
            np.testing.assert_array_equal(got[key], expect)
        elif key in ("max_seqlen", "num_segments"):
            assert got[key] == value
        else:
            np.testing.assert_array_equal(got[key], np.array(value).reshape(got[key].shape))


@given(data=st.data(), level_count=st.integers(1, 3),
       dtype=st.sampled_from(["float32", "int64", "float16", "bool", "uint8"]),
       feature=st.sampled_from([(), (3,), (2, 2)]),
       mode=st.sampled_from(["padded", "packed", "packed_rows", "segments"]))
def test_collate_equals_the_reference(data, level_count, dtype, feature, mode):
    from strategies import lod_lengths

    levels, n_rows = data.draw(lod_lengths(level_count, max_seqs=6, max_len=4))
    values = (np.arange(n_rows * int(np.prod(feature))) % 7).astype(dtype)
    t = la.create_lod_tensor(values.reshape((n_rows,) + feature), levels, la.CPUPlace())
    level = data.draw(st.integers(0, level_count - 1))
    seqs = _seqs(t, level)
    rows = data.draw(st.lists(st.integers(0, max(len(seqs) - 1, 0)), max_size=8)
                     if seqs else st.just([]))
    pad = 1 if dtype == "bool" else 5
    row_length = max([len(seqs[r]) for r in rows] + [1]) + data.draw(st.integers(0, 4))
    kw = {"row_length": row_length} if mode == "packed_rows" else {}
    got = la.collate(t, rows, level=level, mode=mode, pad_value=pad, **kw)
    _check(got, _reference(seqs, rows, mode, pad, row_length), np.dtype(dtype), feature)
    if mode == "packed":
        assert {k: got[k].dtype for k in ("cu_seqlens", "position_ids", "seq_idx", "lengths")} \
            == {"cu_seqlens": np.int32, "position_ids": np.int64, "seq_idx": np.int32,
                "lengths": np.int64}
        assert got["values"].shape == (sum(len(seqs[r]) for r in rows),) + feature
    # and from Arrow, the same
    if dtype != "float16":
        got2 = la.collate(t.to_arrow(), rows, level=level, mode=mode, pad_value=pad, **kw)
        for key in got:
            np.testing.assert_array_equal(np.asarray(got[key]), np.asarray(got2[key]))


def test_packed_batches_copied_on_several_threads_equal_the_reference(monkeypatch):
    # past 8 MiB of values a packed batch is copied on the kernels' threads
    rng = np.random.default_rng(3)
    lengths = rng.integers(0, 40_000, 200)
    values = rng.integers(-9, 9, (int(lengths.sum()), 3)).astype(np.float32)
    t = la.create_lod_tensor(values, [lengths.tolist()], la.CPUPlace())
    rows = rng.permutation(200)[:150].tolist() + [7, 7]
    monkeypatch.setenv("LODARROW_NUM_THREADS", "2")
    got = la.collate(t, rows, mode="packed")
    starts = np.concatenate([[0], np.cumsum(lengths)])
    np.testing.assert_array_equal(got["values"], np.concatenate(
        [values[starts[r]:starts[r + 1]] for r in rows]))
    np.testing.assert_array_equal(got["position_ids"], np.concatenate(
        [np.arange(lengths[r]) for r in rows]))
    np.testing.assert_array_equal(got["seq_idx"], np.repeat(np.arange(len(rows)),
                                                            lengths[rows]))
    np.testing.assert_array_equal(got["cu_seqlens"], np.concatenate(
        [[0], np.cumsum(lengths[rows])]))
    assert got["values"].nbytes > 8 << 20 and got["max_seqlen"] == lengths[rows].max()


@pytest.mark.parametrize("mode", ["padded", "packed"])
def test_value_rows_of_no_width_collate(mode):
    col = pa.array([[[], []], [[]]], type=pa.list_(pa.list_(pa.int32(), 0)))
    got = la.collate(col, mode=mode)
    assert got["values"].shape == ((3, 0) if mode == "packed" else (2, 2, 0))
    assert got["lengths"].tolist() == [2, 1]


def test_the_packed_kernel_leaves_batches_past_int32_to_the_general_path():
    from lodarrow._cpu import _batch_plan as k

    none = np.zeros(0, np.uint8)
    lengths = np.array([2**31 - 1, 1, 5], np.int64)
    assert k.packed_batch(none, 4, np.zeros(3, np.int64), lengths, np.array([0, 1]),
                          lambda: 1, 1) is None  # nothing allocated or copied
    made = k.packed_batch(none, 4, np.zeros(3, np.int64), np.array([0, 0, 0]),
                          np.array([2, 0]), lambda: 1, 1)
    assert [a.tolist() for a in made[:5]] + [made[5]] == [[], [], [], [0, 0, 0], [0, 0], 0]


def test_collate_a_table_column_and_a_plan_batch():
    table = pa.table({"ids": pa.array([[1, 2, 3], [4], [5, 6]]), "y": [0, 1, 2]})
    plan = la.batch_plan(la.sequence_lengths(table, "ids"), batch_size=2, shuffle=False)
    b = la.collate(table, plan[0], column="ids")
    assert b["values"].tolist() == [[1, 2, 3], [4, 0, 0]]
    assert b["lengths"].tolist() == [3, 1]


def test_collate_to_torch_is_zero_copy_dlpack():
    torch = pytest.importorskip("torch")
    col = pa.array([[1.0, 2.0], [3.0]])
    b = la.collate(col, mode="packed", to="torch")
    assert isinstance(b["values"], torch.Tensor) and b["cu_seqlens"].dtype == torch.int32
    assert b["cu_seqlens"].tolist() == [0, 2, 3] and b["max_seqlen"] == 2


def test_collate_errors():
    col = pa.array([[1, 2, 3], [4]])
    with pytest.raises(ValueError, match="rows holds 2"):
        la.collate(col, [2])
    with pytest.raises(ValueError, match="row_length is needed"):
        la.collate(col, mode="packed_rows")
    with pytest.raises(ValueError, match="row_length is needed"):
        la.collate(col, row_length=3)
    with pytest.raises(ValueError, match="sequence 0 has 3 tokens, more than row_length=2"):
        la.collate(col, mode="packed_rows", row_length=2)
    with pytest.raises(ValueError, match="sequence 0 has 3 tokens"):
        la.collate(col, [1, 0], mode="packed_rows", row_length=2, oversize="error")  # its row
    with pytest.raises(ValueError, match="mode must be"):
        la.collate(col, mode="flat")
    with pytest.raises(TypeError, match="pad_value"):
        la.collate(col, pad_value=1.5)


@pytest.mark.cuda
def test_collate_on_the_gpu():
    cp = pytest.importorskip("cupy")
    try:
        cp.cuda.runtime.getDeviceCount()
    except Exception:  # noqa: BLE001  (no driver / no device)
        pytest.skip("no CUDA device")
    t = la.LoDTensor(np.arange(6.0).reshape(6, 1), [[0, 3, 4, 6]])
    g = t.cuda()
    for mode, kw in [("padded", {}), ("packed", {}), ("packed_rows", {"row_length": 4}),
                     ("packed_rows", {"row_length": 2, "oversize": "split", "num_rows": 5}),
                     ("padded", {"pad_widths": (2, 8), "num_rows": 3}),
                     ("segments", {"pad_to_multiple_of": 4, "num_segments": 3})]:
        want = la.collate(t, [2, 0], mode=mode, **kw)
        got = la.collate(g, [2, 0], mode=mode, **kw)
        for key in want:
            value = got[key]
            assert isinstance(value, int) or isinstance(value, cp.ndarray)
            np.testing.assert_array_equal(cp.asnumpy(value) if not isinstance(value, int)
                                          else value, want[key])
