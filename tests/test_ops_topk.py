"""sequence_topk_avg_pooling (docs/operators.md#sequence_topk_avg_pooling,
#implemented-top-k-pooling)."""

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lodarrow as la
from conftest import (NUMERIC_DTYPES, SEQUENCE_LAYOUTS, on_backend, parallel_min_work, threaded,
                      to_host)
from reference_numeric import ref_topk_avg_pool

fixture_ok = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
OP = la.sequence_topk_avg_pooling


def make_case(rng, rows, cols, channels, dtype=np.float32, nan_at=None):
    rows, cols = np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)
    sizes = channels * rows * cols
    n = int(sizes.sum())
    if np.dtype(dtype).kind == "f":
        data = rng.random(n).astype(dtype)
    else:
        data = rng.integers(0, 100, n).astype(dtype)
    if nan_at is not None:
        data[nan_at] = np.nan
    x = la.LoDTensor(data.reshape(n, 1), lengths=[sizes])
    row = la.LoDTensor(np.zeros((int(rows.sum()), 10), np.float32), lengths=[rows])
    col = la.LoDTensor(np.zeros((int(cols.sum()), 10), np.float32), lengths=[cols])
    return x, row, col


def check(x, row, col, topks, channels, backend):
    out = to_host(OP(on_backend(x, backend), on_backend(row, backend), on_backend(col, backend),
                     topks=topks, channel_num=channels), backend)
    want = ref_topk_avg_pool(x.numpy(), x.offsets[0], row.offsets[0], col.offsets[0], topks,
                             channels)
    dtype = x.dtype if x.dtype.kind == "f" else np.dtype(np.float64)
    assert out.dtype == dtype
    assert out.shape() == [int(row.offsets[0][-1]), channels * len(topks)]
    assert out.lod() == row.lod()
    tol = {2: dict(rtol=2e-3, atol=1e-3), 4: dict(rtol=1e-6, atol=1e-6),
           8: dict(rtol=1e-13, atol=1e-13)}[dtype.itemsize]
    np.testing.assert_allclose(out.numpy().astype(np.float64), want, **tol)
    return out


def test_paddle_unit_test_shape(backend):
    """Paddle's test: topks [1, 3, 5], 3 channels, some cols shorter than 5."""
    rng = np.random.default_rng(0)
    x, row, col = make_case(rng, rows=[2, 4, 6, 1], cols=[3, 6, 2, 7], channels=3)
    out = check(x, row, col, [1, 3, 5], 3, backend)
    assert out.shape() == [13, 9]


def test_col_shorter_than_k_counts_missing_as_zero(backend):
    x = la.LoDTensor(np.array([4., 1., 2.], np.float64), lod=[[0, 3]])
    row = la.LoDTensor(np.zeros(1), lod=[[0, 1]])
    col = la.LoDTensor(np.zeros(3), lod=[[0, 3]])
    out = to_host(OP(on_backend(x, backend), on_backend(row, backend), on_backend(col, backend),
                     topks=[5, 1, 3, 2], channel_num=1), backend).numpy()
    np.testing.assert_allclose(out, [[7 / 5, 4.0, 7 / 3, 6 / 2]])


@st.composite
def topk_cases(draw):
    n_seq = draw(st.integers(0, 4))
    rows = draw(st.lists(st.integers(0, 3), min_size=n_seq, max_size=n_seq))
    cols = draw(st.lists(st.integers(0, 6), min_size=n_seq, max_size=n_seq))
    channels = draw(st.integers(1, 3))
    topks = draw(st.lists(st.integers(1, 8), min_size=1, max_size=4))
    dtype = draw(st.sampled_from(NUMERIC_DTYPES))
    seed = draw(st.integers(0, 2**16))
    return rows, cols, channels, topks, dtype, seed


@fixture_ok
@given(case=topk_cases())
def test_matches_reference(backend, case):
    rows, cols, channels, topks, dtype, seed = case
    rng = np.random.default_rng(seed)
    x, row, col = make_case(rng, rows, cols, channels, dtype)
    check(x, row, col, topks, channels, backend)


def test_ties_negative_values_and_inf(backend):
    data = np.array([-1., -1., -5., 3., 3., 3., -np.inf, 2., np.inf, 0.], np.float32)
    x = la.LoDTensor(data, lod=[[0, 6, 10]])
    row = la.LoDTensor(np.zeros(3), lod=[[0, 2, 3]])
    col = la.LoDTensor(np.zeros(7), lod=[[0, 3, 7]])
    check(x, row, col, [1, 2, 3, 4], 1, backend)


def test_nan_row_gives_nan(backend):
    rng = np.random.default_rng(1)
    x, row, col = make_case(rng, rows=[2], cols=[4], channels=2, nan_at=5)
    out = check(x, row, col, [1, 3], 2, backend).numpy()
    assert np.isnan(out[1, :2]).all() and not np.isnan(out[0]).any()
    assert not np.isnan(out[1, 2:]).any()


@threaded
@pytest.mark.parametrize("layout", SEQUENCE_LAYOUTS)
def test_threaded_chunks(backend, threads, layout):
    rng = np.random.default_rng(2)
    if layout == "many":
        rows, cols = rng.integers(0, 6, 3000), rng.integers(0, 12, 3000)
        rows[:3] = 0
        cols[rng.random(3000) < 0.05] = 0
    else:  # 11 large blocks, two of them empty
        rows, cols = rng.integers(20, 40, 11), rng.integers(100, 200, 11)
        rows[0] = cols[4] = 0
    x, row, col = make_case(rng, rows, cols, 2, np.float64)
    assert x.numpy().size > parallel_min_work()
    check(x, row, col, [1, 2, 4, 9], 2, backend)


def test_topk_limit(backend):
    rng = np.random.default_rng(3)
    x, row, col = make_case(rng, rows=[1, 2], cols=[2, 3], channels=1)
    check(x, row, col, [1024, 1], 1, backend)          # moderate k beyond the data: allowed
    with pytest.raises(ValueError, match=r"topks\[1\] = 1025 is larger than any row can use "
                                         r"\(longest col 3; k up to max\(longest col, 1024\) "
                                         r"is allowed\)"):
        OP(x, row, col, topks=[1, 1025], channel_num=1)
    with pytest.raises(ValueError, match=r"topks\[0\] = 4611686018427387904 is larger"):
        OP(x, row, col, topks=[10**30], channel_num=1)


def test_errors():
    rng = np.random.default_rng(4)
    x, row, col = make_case(rng, rows=[1, 2], cols=[2, 3], channels=2)
    with pytest.raises(la.LoDError, match="sequence_topk_avg_pooling: input must have exactly 1 "
                                          "LoD level"):
        OP(x.numpy(), row, col, topks=[1], channel_num=2)
    deep = la.LoDTensor(row.numpy(), lengths=[[1, 1], [1, 2]])
    with pytest.raises(la.LoDError, match="row must have exactly 1 LoD level"):
        OP(x, deep, col, topks=[1], channel_num=2)
    with pytest.raises(ValueError, match="sequence 0 of input holds 4 values, but channel_num "
                                         r"\* rows \* cols = 1 \* 1 \* 2 = 2"):
        OP(x, row, col, topks=[1], channel_num=1)
    three = la.LoDTensor(np.zeros(3), lod=[[0, 1, 2, 3]])
    with pytest.raises(ValueError, match="col has 3 sequences but input has 2; they must match"):
        OP(x, row, three, topks=[1], channel_num=2)
    wide = la.LoDTensor(np.zeros((16, 2)), lod=[[0, 4, 16]])
    with pytest.raises(ValueError, match=r"input must have shape \[N\] or \[N, 1\], got "
                                         r"\[16, 2\]"):
        OP(wide, row, col, topks=[1], channel_num=2)
    flags = la.LoDTensor(np.zeros(16, bool), lod=[[0, 4, 16]])
    with pytest.raises(TypeError, match="input of dtype bool cannot be averaged"):
        OP(flags, row, col, topks=[1], channel_num=2)
    with pytest.raises(ValueError, match="channel_num must be >= 1, got 0"):
        OP(x, row, col, topks=[1], channel_num=0)
    with pytest.raises(TypeError, match="channel_num must be an integer, got float"):
        OP(x, row, col, topks=[1], channel_num=2.0)
    with pytest.raises(ValueError, match="topks must hold at least one k"):
        OP(x, row, col, topks=[], channel_num=2)
    with pytest.raises(ValueError, match=r"topks\[1\] must be >= 1, got 0"):
        OP(x, row, col, topks=[3, 0], channel_num=2)
    with pytest.raises(TypeError, match=r"topks\[0\] must be an integer, got float"):
        OP(x, row, col, topks=[1.0], channel_num=2)
    with pytest.raises(TypeError, match=r"topks\[0\] must be an integer, got bool"):
        OP(x, row, col, topks=[True], channel_num=2)
    with pytest.raises(TypeError, match="topks must be a sequence of integers, got int"):
        OP(x, row, col, topks=3, channel_num=2)
    with pytest.raises(TypeError, match="topks must be a 1-D sequence of integers"):
        OP(x, row, col, topks=np.array([1.0]), channel_num=2)


def test_array_topks_arrow_inputs_and_layouts():
    rng = np.random.default_rng(5)
    x, row, col = make_case(rng, rows=[2, 1], cols=[3, 2], channels=1, dtype=np.float64)
    want = ref_topk_avg_pool(x.numpy(), x.offsets[0], row.offsets[0], col.offsets[0], [2, 1], 1)

    def assert_matches(got):
        assert got.dtype == np.float64 and got.lod() == row.lod()
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-13, atol=1e-13)

    assert_matches(OP(x.to_arrow(), row.to_arrow(), col.to_arrow(),
                      topks=np.array([2, 1], np.uint8), channel_num=np.int64(1), name="t"))
    strided = np.repeat(x.numpy(), 2, axis=1)[:, :1]
    strided.flags.writeable = False
    assert_matches(OP(la.LoDTensor(strided, lod=x.lod()), row, col, topks=(2, 1),
                      channel_num=1))
    arr = pa.array([[1.0, 2.0]], type=pa.list_(pa.float64()))
    out = OP(arr, la.LoDTensor(np.zeros(1), lod=[[0, 1]]),
             la.LoDTensor(np.zeros(2), lod=[[0, 2]]), topks=[1, 2], channel_num=1)
    np.testing.assert_array_equal(out.numpy(), [[2.0, 1.5]])
