"""sequence_pool, sequence_first_step, sequence_last_step (docs/operators.md#sequence_pool,
#sequence_first_step, #sequence_last_step)."""

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lodarrow as la
from conftest import (ALL_DTYPES, NUMERIC_DTYPES, SEQUENCE_LAYOUTS, cuda_only, on_backend,
                      parallel_min_work, threaded, threaded_lengths, to_host)
from reference_numeric import pool_out_dtype, ref_pool
from strategies import lod_tensors

POOLS = ["sum", "average", "sqrt", "max", "min", "first", "last"]
fixture_ok = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])

PADDLE_X = np.array([[1.], [3.], [2.], [4.], [6.], [5.], [1.]], dtype=np.float32)


def assert_pool_equal(got, want, pool):
    """Exact for integers and picks; float sums within the dtype's rounding."""
    got = np.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.dtype.kind != "f" or pool in ("max", "min", "first", "last"):
        np.testing.assert_array_equal(got, want)
        return
    rtol = {2: 2e-3, 4: 2e-6, 8: 1e-12}[want.dtype.itemsize]
    atol = {2: 1e-2, 4: 1e-4, 8: 1e-9}[want.dtype.itemsize]
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def check_against_reference(x, pool, backend, pad_value=0.0):
    out = la.sequence_pool(on_backend(x, backend), pool, pad_value=pad_value)
    out = to_host(out, backend)
    want, _ = ref_pool(x.numpy(), x.offsets[-1], pool, pad_value)
    assert out.lod() == x.lod()[:-1]
    assert_pool_equal(out.numpy(), want, pool)
    return out


# ----------------------------------------------------------------------------- Paddle's examples
@pytest.mark.parametrize("pool, expected", [
    ("average", [[2.], [4.], [3.], [0.0]]),
    ("sum", [[4.], [12.], [6.], [0.0]]),
    ("sqrt", [[2.8284271], [6.9282032], [4.2426407], [0.0]]),
    ("max", [[3.], [6.], [5.], [0.0]]),
    ("last", [[3.], [6.], [1.], [0.0]]),
    ("first", [[1.], [2.], [5.], [0.0]]),
])
def test_paddle_example_one_level(backend, pool, expected):
    x = on_backend(la.LoDTensor(PADDLE_X, lod=[[0, 2, 5, 7, 7]]), backend)
    out = to_host(la.sequence_pool(input=x, pool_type=pool), backend)
    assert out.shape() == [4, 1] and out.lod() == [] and out.dtype == np.float32
    np.testing.assert_allclose(out.numpy(), np.array(expected, dtype=np.float32), rtol=1e-6)


def test_paddle_example_two_levels(backend):
    x = on_backend(la.LoDTensor(PADDLE_X, lod=[[0, 2, 2, 5], [0, 1, 3, 4, 4, 7]]), backend)
    out = to_host(la.sequence_pool(input=x, pool_type="sum"), backend)
    assert out.shape() == [5, 1]
    assert out.lod() == [[0, 2, 2, 5]]
    np.testing.assert_array_equal(out.numpy(), [[1.], [5.], [4.], [0.0], [12.]])


def test_paddle_first_last_step_examples(backend):
    x = on_backend(la.LoDTensor(PADDLE_X, lod=[[0, 2, 5, 7]]), backend)
    first = to_host(la.sequence_first_step(input=x), backend)
    last = to_host(la.sequence_last_step(input=x), backend)
    assert first.shape() == [3, 1] and first.lod() == []
    np.testing.assert_array_equal(first.numpy(), [[1.], [2.], [5.]])
    np.testing.assert_array_equal(last.numpy(), [[3.], [6.], [1.]])
    y = on_backend(la.LoDTensor(PADDLE_X, lod=[[0, 2, 2, 5], [0, 1, 3, 4, 4, 7]]), backend)
    first = to_host(la.sequence_first_step(input=y), backend)
    last = to_host(la.sequence_last_step(input=y), backend)
    assert first.lod() == last.lod() == [[0, 2, 2, 5]]
    np.testing.assert_array_equal(first.numpy(), [[1.], [3.], [4.], [0.0], [6.]])
    np.testing.assert_array_equal(last.numpy(), [[1.], [2.], [4.], [0.0], [1.]])


# ----------------------------------------------------------------------------- against the oracle
@fixture_ok
@given(x=lod_tensors(dtypes=NUMERIC_DTYPES, min_levels=1, max_levels=3),
       pool=st.sampled_from(POOLS))
def test_matches_reference(backend, x, pool):
    check_against_reference(x, pool, backend)


@fixture_ok
@given(x=lod_tensors(dtypes=["bool"], min_levels=1, max_levels=2),
       pool=st.sampled_from(["max", "min", "first", "last"]))
def test_bool_data_moving_pools(backend, x, pool):
    out = check_against_reference(x, pool, backend, pad_value=True)
    assert out.dtype == np.bool_


_SPECIAL = st.sampled_from([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5, -2.0, 3.0])


@fixture_ok
@given(x=lod_tensors(dtypes=["float16", "float32", "float64"], min_levels=1, max_levels=2,
                     elements=_SPECIAL),
       pool=st.sampled_from(POOLS))
def test_nan_and_inf_propagate_like_numpy(backend, x, pool):
    out = la.sequence_pool(on_backend(x, backend), pool)
    want, _ = ref_pool(x.numpy(), x.offsets[-1], pool)
    got = to_host(out, backend).numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    np.testing.assert_array_equal(got[np.isinf(got)], want[np.isinf(want)])


def _long_lengths(rng, n):
    """Lengths around the kernels' block sizes (8, 32, 64, 256) and some long runs."""
    picks = [0, 1, 7, 8, 9, 31, 32, 33, 63, 64, 65, 255, 256, 257, 600, 2000]
    return rng.choice(picks, size=n)


@pytest.mark.parametrize("dtype", NUMERIC_DTYPES)
@pytest.mark.parametrize("fshape", [(), (1,), (5,), (2, 3), (300,)])
def test_long_and_boundary_sequences(backend, dtype, fshape):
    rng = np.random.default_rng(7)
    lengths = _long_lengths(rng, 6 if fshape == (300,) else 40)
    lengths[-1] = 3     # a short last sequence: its masked block would read past the data
    n = int(lengths.sum())
    if np.dtype(dtype).kind == "f":
        data = rng.standard_normal((n,) + fshape).astype(dtype)
    else:
        info = np.iinfo(dtype)
        data = rng.integers(info.min, info.max, size=(n,) + fshape, dtype=dtype,
                            endpoint=True)
    x = la.LoDTensor(data, lengths=[lengths])
    for pool in POOLS:
        check_against_reference(x, pool, backend)


@threaded
@pytest.mark.parametrize("layout", SEQUENCE_LAYOUTS)
@pytest.mark.parametrize("fshape", [(), (2,)])
def test_threaded_chunks(backend, threads, layout, fshape):
    """Every pool and return_index on inputs above the threading threshold, on 1, 3 and 7
    threads; empty sequences first, at chunk edges and in runs."""
    rng = np.random.default_rng(3)
    width = int(np.prod(fshape, dtype=np.int64))
    lengths = threaded_lengths(rng, parallel_min_work() * 5 // (4 * width), layout)
    data = rng.standard_normal((int(lengths.sum()), *fshape)).astype(np.float32)
    assert data.size > parallel_min_work()
    x = la.LoDTensor(data, lengths=[lengths])
    for pool in POOLS:
        check_against_reference(x, pool, backend)
    for pool in ("max", "min"):
        out, index = la.sequence_pool(on_backend(x, backend), pool, return_index=True)
        want, want_index = ref_pool(data, x.offsets[-1], pool)
        np.testing.assert_array_equal(to_host(out, backend).numpy(), want)
        np.testing.assert_array_equal(to_host(index, backend).numpy(), want_index)


def test_integer_sum_wraps_like_c(backend):
    data = np.array([100, 100, 100, -128, -1], dtype=np.int8)
    x = la.LoDTensor(data, lod=[[0, 3, 5]])
    out = to_host(la.sequence_pool(on_backend(x, backend), "sum"), backend).numpy()
    assert out.dtype == np.int8
    np.testing.assert_array_equal(out, np.array([300, -129], dtype=np.int64).astype(np.int8))
    mean = to_host(la.sequence_pool(on_backend(x, backend), "average"), backend).numpy()
    assert mean.dtype == np.float64
    np.testing.assert_array_equal(mean, [100.0, -64.5])


@pytest.mark.parametrize("dtype", NUMERIC_DTYPES)
@pytest.mark.parametrize("pool", POOLS)
def test_output_dtype(dtype, pool):
    x = la.LoDTensor(np.ones((3, 2), dtype=dtype), lod=[[0, 1, 3]])
    assert la.sequence_pool(x, pool).dtype == pool_out_dtype(dtype, pool)


def test_float32_sums_accumulate_beyond_float32(backend):
    # 2**24 + 1 is not a float32; sequential float32 adds of ones would stall at 2**24.
    n = 2**24 + 8
    x = la.LoDTensor(np.ones(n, dtype=np.float32), lod=[[0, n]])
    out = to_host(la.sequence_pool(on_backend(x, backend), "sum"), backend).numpy()
    assert out[0] == np.float32(n)


# ----------------------------------------------------------------------------- levels, shapes
def test_levels_and_shapes(backend):
    data = np.arange(24, dtype=np.float64).reshape(6, 2, 2)
    x = la.LoDTensor(data, lengths=[[2, 1], [1, 0, 2], [3, 0, 3]])
    out = to_host(la.sequence_pool(on_backend(x, backend), "sum"), backend)
    assert out.shape() == [3, 2, 2]
    assert out.lod() == [[0, 2, 3], [0, 1, 1, 3]]
    np.testing.assert_array_equal(out.numpy(), [data[:3].sum(0), np.zeros((2, 2)),
                                                data[3:].sum(0)])
    rank1 = la.LoDTensor(np.arange(5, dtype=np.int32), lod=[[0, 2, 5]])
    out = to_host(la.sequence_pool(on_backend(rank1, backend), "max"), backend)
    assert out.shape() == [2] and out.lod() == [] and out.lod_level == 0
    np.testing.assert_array_equal(out.numpy(), [1, 4])


def test_zero_sequences_and_zero_width(backend):
    x = la.LoDTensor(np.zeros((0, 3), dtype=np.float32), lod=[[0]])
    out = to_host(la.sequence_pool(on_backend(x, backend), "sum"), backend)
    assert out.shape() == [0, 3] and out.lod() == []
    # All sequences empty, no rows: Paddle's "rows >= sequences" rule is dropped.
    x = la.LoDTensor(np.zeros((0, 2), dtype=np.float32), lod=[[0, 0, 0]])
    out, index = la.sequence_pool(on_backend(x, backend), "max", pad_value=-1.5,
                                  return_index=True)
    np.testing.assert_array_equal(to_host(out, backend).numpy(), [[-1.5, -1.5], [-1.5, -1.5]])
    np.testing.assert_array_equal(to_host(index, backend).numpy(), [[-1, -1], [-1, -1]])
    x = la.LoDTensor(np.zeros((4, 0), dtype=np.int16), lod=[[0, 4, 4]])
    out = to_host(la.sequence_pool(on_backend(x, backend), "sum"), backend)
    assert out.shape() == [2, 0] and out.dtype == np.int16


# ----------------------------------------------------------------------------- return_index
def test_return_index_ties_empties_nan(backend):
    data = np.array([[1., 5.], [3., 5.], [3., 1.],      # seq 0: ties -> first row
                     [np.nan, 2.], [4., np.nan], [np.nan, 9.],    # seq 1: first NaN
                     [7., 7.]], dtype=np.float32)
    x = la.LoDTensor(data, lod=[[0, 3, 3, 6, 7]])
    out, index = la.sequence_pool(on_backend(x, backend), "max", return_index=True)
    out, index = to_host(out, backend), to_host(index, backend)
    assert index.dtype == np.int64 and index.lod() == out.lod() == []
    np.testing.assert_array_equal(index.numpy(), [[1, 0], [-1, -1], [3, 4], [6, 6]])
    np.testing.assert_array_equal(out.numpy(), [[3., 5.], [0., 0.], [np.nan, np.nan],
                                                [7., 7.]])
    out, index = la.sequence_pool(on_backend(x, backend), "MIN", return_index=True)
    np.testing.assert_array_equal(to_host(index, backend).numpy(),
                                  [[0, 2], [-1, -1], [3, 4], [6, 6]])
    np.testing.assert_array_equal(to_host(out, backend).numpy(), [[1., 1.], [0., 0.],
                                                         [np.nan, np.nan], [7., 7.]])


@fixture_ok
@given(x=lod_tensors(dtypes=NUMERIC_DTYPES + ["bool"], min_levels=1, max_levels=3,
                     elements=None),
       pool=st.sampled_from(["max", "min"]))
def test_return_index_matches_reference(backend, x, pool):
    out, index = la.sequence_pool(on_backend(x, backend), pool, return_index=True)
    want, want_index = ref_pool(x.numpy(), x.offsets[-1], pool)
    np.testing.assert_array_equal(to_host(out, backend).numpy(), want)
    np.testing.assert_array_equal(to_host(index, backend).numpy(), want_index)
    assert to_host(index, backend).lod() == x.lod()[:-1]


@fixture_ok
@given(x=lod_tensors(dtypes=["float16", "float32", "float64"], min_levels=1, max_levels=1,
                     elements=_SPECIAL),
       pool=st.sampled_from(["max", "min"]))
def test_return_index_nan_matches_reference(backend, x, pool):
    out, index = la.sequence_pool(on_backend(x, backend), pool, return_index=True)
    want, want_index = ref_pool(x.numpy(), x.offsets[-1], pool)
    np.testing.assert_array_equal(to_host(out, backend).numpy(), want)
    np.testing.assert_array_equal(to_host(index, backend).numpy(), want_index)


# ----------------------------------------------------------------------------- pad_value
def test_pad_value_is_exact_in_the_output_dtype(backend):
    x = on_backend(la.LoDTensor(np.ones((2, 1)), lod=[[0, 0, 2]]), backend)
    out = to_host(la.sequence_pool(x, "sum", pad_value=0.1), backend).numpy()
    assert out[0, 0] == 0.1                      # not 0.10000000149 (float32 rounded)
    ints = on_backend(la.LoDTensor(np.ones((2, 1), dtype=np.int32), lod=[[0, 0, 2]]), backend)
    mean = to_host(la.sequence_pool(ints, "average", pad_value=0.1), backend).numpy()
    assert mean.dtype == np.float64 and mean[0, 0] == 0.1   # converted to the OUTPUT dtype
    out = to_host(la.sequence_pool(ints, "sum", pad_value=2**31 - 1), backend).numpy()
    assert out[0, 0] == 2**31 - 1


def test_pad_value_arrays(backend):
    x = on_backend(la.LoDTensor(np.ones((2, 3), dtype=np.float32), lod=[[0, 2, 2]]), backend)
    out = to_host(la.sequence_pool(x, "max", pad_value=np.array([1, 2, 3], np.int16)),
                  backend).numpy()
    np.testing.assert_array_equal(out[1], [1, 2, 3])
    out = to_host(la.sequence_pool(x, "max", pad_value=np.array([7.0], np.float32)),
                  backend).numpy()
    np.testing.assert_array_equal(out[1], [7, 7, 7])
    out = to_host(la.sequence_pool(x, "first", pad_value=np.float32(-0.0)), backend).numpy()
    assert np.signbit(out[1]).all()


@cuda_only
def test_pad_value_may_live_on_the_other_device(backend):
    # docs/operators.md#exact-pad-values: a pad value is a small parameter, on either device
    import cupy

    host = la.LoDTensor(np.ones((2, 3), dtype=np.float32), lod=[[0, 2, 2]])
    for x, pad in ((host, cupy.asarray([1, 2, 3], np.int16)),
                   (host.cuda(), np.array([1, 2, 3], np.int16))):
        out = la.sequence_pool(x, "max", pad_value=pad)
        assert out.place == x.place
        np.testing.assert_array_equal(out.cpu().numpy()[1], [1, 2, 3])


def test_pad_value_errors():
    ints = la.LoDTensor(np.ones((2, 1), dtype=np.int8), lod=[[0, 0, 2]])
    with pytest.raises(TypeError, match="pad_value = 0.5 is not integral"):
        la.sequence_pool(ints, "sum", pad_value=0.5)
    with pytest.raises(TypeError, match="pad_value = 300 is out of range"):
        la.sequence_pool(ints, "max", pad_value=300)
    floats = la.LoDTensor(np.ones((2, 3), dtype=np.float32), lod=[[0, 0, 2]])
    with pytest.raises(TypeError, match="pad_value of dtype float64 cannot be cast safely"):
        la.sequence_pool(floats, "sum", pad_value=np.array([1.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match=r"pad_value must have shape \(\), \(1,\) or the "
                                         r"feature shape \(3,\), got \(2,\)"):
        la.sequence_pool(floats, "sum", pad_value=np.zeros(2, np.float32))


# ----------------------------------------------------------------------------- errors
def test_errors():
    x = la.LoDTensor(np.ones((3, 1), dtype=np.float32), lod=[[0, 3]])
    with pytest.raises(la.LoDError, match="sequence_pool: input must have at least 1 LoD "
                                          "level, got 0"):
        la.sequence_pool(np.ones((3, 1), np.float32), "sum")
    with pytest.raises(ValueError, match="unknown pool_type 'mean'; expected one of SUM, "
                                         "AVERAGE, SQRT, MAX, MIN, FIRST, LAST"):
        la.sequence_pool(x, "mean")
    with pytest.raises(TypeError, match="pool_type must be a string, got int"):
        la.sequence_pool(x, 3)
    with pytest.raises(ValueError, match="return_index=True needs pool_type 'max' or 'min', "
                                         "got 'sum'"):
        la.sequence_pool(x, "sum", return_index=True)
    flags = la.LoDTensor(np.ones((3, 1), dtype=bool), lod=[[0, 3]])
    with pytest.raises(TypeError, match="pool_type 'average' is not defined for bool input"):
        la.sequence_pool(flags, "average")
    with pytest.raises(TypeError, match="input must be a LoDTensor"):
        la.sequence_pool(object(), "sum")
    with pytest.raises(la.LoDError, match="sequence_pool: input must have at least 1"):
        la.sequence_first_step(np.ones(3))


# ----------------------------------------------------------------------------- input layouts
@pytest.mark.parametrize("pool", POOLS)
def test_readonly_strided_fortran_inputs_untouched(backend, pool):
    rng = np.random.default_rng(5)
    base = rng.standard_normal((9, 6)).astype(np.float32)
    lod = [[0, 4, 4, 9]]
    want, _ = ref_pool(base[:, ::2], lod[0], pool)
    readonly = base[:, ::2].copy()
    readonly.flags.writeable = False
    for data in (base[:, ::2], np.asfortranarray(base[:, ::2]), readonly):
        snapshot = data.copy()
        x = la.LoDTensor(data, lod=lod)
        out = to_host(la.sequence_pool(on_backend(x, backend), pool), backend).numpy()
        assert_pool_equal(out, want, pool)
        np.testing.assert_array_equal(data, snapshot)


def test_arrow_input():
    arr = pa.array([[1.0, 2.0], [], [5.0]], type=pa.large_list(pa.float64()))
    out = la.sequence_pool(arr, "sum", pad_value=-1.0)
    np.testing.assert_array_equal(out.numpy(), [3.0, -1.0, 5.0])
    nested = pa.array([[[1, 2], [3]], [[4, 5, 6]]], type=pa.list_(pa.list_(pa.int32())))
    out = la.sequence_pool(nested, "max")
    assert out.lod() == [[0, 2, 3]]
    np.testing.assert_array_equal(out.numpy(), [2, 3, 6])


def test_is_test_is_ignored():
    x = la.LoDTensor(PADDLE_X, lod=[[0, 2, 5, 7, 7]])
    want = np.array([[3.], [6.], [5.], [0.]], np.float32)
    for kwargs in ({"is_test": True}, {"is_test": False}, {"name": "p"}):
        out = la.sequence_pool(x, "max", **kwargs)
        assert out.dtype == np.float32 and out.lod() == []
        np.testing.assert_array_equal(out.numpy(), want)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_first_last_every_dtype(backend, dtype):
    data = (np.arange(12) % 2).astype(dtype).reshape(6, 2)
    x = la.LoDTensor(data, lod=[[0, 1, 1, 6]])
    first = to_host(la.sequence_first_step(on_backend(x, backend)), backend).numpy()
    last = to_host(la.sequence_last_step(on_backend(x, backend)), backend).numpy()
    assert first.dtype == last.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(first, np.stack([data[0], np.zeros(2, dtype), data[1]]))
    np.testing.assert_array_equal(last, np.stack([data[0], np.zeros(2, dtype), data[5]]))


def test_half_conversion_helpers_are_exact():
    from lodarrow._ext import seq_pool

    bits = np.arange(2**16, dtype=np.uint16)
    decoded = np.empty(bits.shape, np.float32)
    seq_pool.half_to_float(bits, decoded)
    want = bits.view(np.float16).astype(np.float32)
    np.testing.assert_array_equal(decoded.view(np.uint32)[~np.isnan(want)],
                                  want.view(np.uint32)[~np.isnan(want)])
    assert np.isnan(decoded[np.isnan(want)]).all()
    rng = np.random.default_rng(0)
    values = np.concatenate([
        rng.standard_normal(100_000).astype(np.float32) * 10.0 ** rng.integers(-9, 6, 100_000),
        want[~np.isnan(want)],
        np.array([65504, 65519.99, 65520, 1e9, 2.0**-25, 2.0**-25 * 1.0001, 2.0**-24 * 1.5,
                  np.inf, -np.inf], np.float32)]).astype(np.float32)
    encoded = np.empty(values.shape, np.uint16)
    seq_pool.float_to_half(values, encoded)
    with np.errstate(over="ignore"):
        want_bits = values.astype(np.float16).view(np.uint16)
    np.testing.assert_array_equal(encoded, want_bits)


# ----------------------------------------------------------------------------- one-thread path
SERIAL_OPS = {"sum": 0, "average": 1, "sqrt": 2, "max": 3, "min": 4}


def _serial_inputs(dtype, n_rows, d, rng):
    """About ``n_rows`` rows of ``d`` features with NaN and inf; empty sequences first, last
    and in a run; a pad row."""
    lengths = rng.integers(0, 12, size=max(n_rows // 5, 4))
    lengths[[0, -1, 1, 2]] = 0
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    data = rng.standard_normal((int(offsets[-1]), d)).astype(dtype)
    if data.size > 2:
        data.flat[1], data.flat[-2] = np.nan, np.inf
    pad = np.arange(1, d + 1, dtype=dtype) / 3
    return data, offsets, pad


def _memoryview_kernel(out, data, offsets, pad, op):
    from lodarrow._ext import seq_pool
    if op < 3:
        seq_pool.pool_sum_float(out, data, offsets, pad, op)
    else:
        seq_pool.pool_extreme(out, data, offsets, pad, op == 4)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("d", [1, 3, 16, 17])
@pytest.mark.parametrize("pool", list(SERIAL_OPS))
def test_serial_entry_is_bit_identical_to_the_memoryview_kernels(dtype, d, pool):
    """pool_float_serial runs the same inner routines as pool_sum_float / pool_extreme."""
    from lodarrow._ext import seq_pool
    rng = np.random.default_rng(d)
    for n_rows in (0, 1, 9, 200):
        data, offsets, pad = _serial_inputs(dtype, n_rows, d, rng)
        want = np.full((offsets.shape[0] - 1, d), -7, dtype=dtype)
        got = want.copy()
        _memoryview_kernel(want, data, offsets, pad, SERIAL_OPS[pool])
        assert seq_pool.pool_float_serial(got, data, offsets, pad, d, SERIAL_OPS[pool]) is True
        np.testing.assert_array_equal(got.view(f"u{got.itemsize}"),
                                      want.view(f"u{want.itemsize}"))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
@pytest.mark.parametrize("d", [2, 63, 64, 65, 130])
@pytest.mark.parametrize("pool", ["max", "min"])
def test_extremes_of_wide_rows_match_numpy(dtype, d, pool):
    """The running extremes live in a local array, 64 columns at a time (wider rows take
    several blocks): np.max / np.min of each sequence (NaN propagating), the pad value for an
    empty one."""
    from lodarrow._ext import seq_pool
    rng = np.random.default_rng(d)
    data, offsets, pad = _serial_inputs(np.float64, 400, d, rng)
    if dtype == np.int32:
        data = np.nan_to_num(data * 100, posinf=2**30)
    data = data.astype(dtype)
    pad = pad.astype(dtype)
    out = np.empty((offsets.shape[0] - 1, d), dtype=dtype)
    seq_pool.pool_extreme(out, data, offsets, pad, pool == "min")
    reduce = np.min if pool == "min" else np.max
    for s in range(offsets.shape[0] - 1):
        a, b = offsets[s], offsets[s + 1]
        want = reduce(data[a:b], axis=0) if b > a else pad
        np.testing.assert_array_equal(out[s], want, err_msg=f"sequence {s}")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("pool", list(SERIAL_OPS))
@pytest.mark.parametrize("side", [-1, 1])
def test_sequence_pool_at_the_threading_threshold(monkeypatch, dtype, pool, side):
    """Just below the threshold sequence_pool takes the one-thread entry, just above the
    threaded kernels; both give the memoryview kernel's bits."""
    from lodarrow._ext import seq_pool
    calls = []
    real = seq_pool.pool_float_serial

    def spy(*args):
        calls.append(args[-1])
        return real(*args)

    monkeypatch.setattr(seq_pool, "pool_float_serial", spy)
    rng = np.random.default_rng(5)
    # work = rows * D + sequences, which runs on one thread below the threshold
    n_seq = 1000
    n_rows = parallel_min_work() - n_seq - (1 if side < 0 else 0)
    lengths = rng.multinomial(n_rows, np.full(n_seq, 1 / n_seq))
    lengths[[0, 1, -1]] = 0
    lengths[2] += n_rows - lengths.sum()
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    data = rng.standard_normal((n_rows, 1)).astype(dtype)
    data[7, 0] = np.nan
    pad = np.array([0.25], dtype=dtype)
    assert (data.size + n_seq < parallel_min_work()) == (side < 0)
    x = la.LoDTensor(data, lod=[offsets.tolist()])
    got = la.sequence_pool(x, pool, pad_value=dtype(pad[0])).numpy()
    want = np.empty_like(got)
    _memoryview_kernel(want, data, offsets, pad, SERIAL_OPS[pool])
    np.testing.assert_array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}"))
    if side < 0:
        assert calls == [SERIAL_OPS[pool]]


def test_serial_entry_declines_what_the_memoryview_kernels_would_not_take():
    """Every argument the raw-pointer entry cannot trust gives False and leaves out as it
    was (the backend then calls the memoryview kernels, whose errors stay); any shape of the
    right size is taken."""
    from lodarrow._ext import seq_pool
    f4 = np.float32
    data = np.arange(12, dtype=f4).reshape(6, 2)
    offsets = np.array([0, 2, 6], dtype=np.int64)
    pad = np.zeros(2, f4)
    want = np.array([[2, 4], [28, 32]], f4)
    for o, x, p in [(np.full((2, 2), 5, f4), data, pad),
                    (np.full(4, 5, f4), data.ravel(), pad.reshape(1, 2)),
                    (np.full((2, 1, 2), 5, f4), data.reshape(6, 2, 1), pad.reshape(2, 1))]:
        assert seq_pool.pool_float_serial(o, x, offsets, p, 2, 0) is True
        np.testing.assert_array_equal(o.reshape(2, 2), want)
    readonly = np.full((2, 2), 5, f4)
    readonly.flags.writeable = False
    raw = np.zeros(2 * 2 * 4 + 1, np.uint8)
    misaligned = raw[1:].view(f4).reshape(2, 2)

    def full(shape=(2, 2), dtype=f4):
        return np.full(shape, 5, dtype)

    bad = [
        (full(dtype=np.float16), data.astype(np.float16), offsets, pad.astype(np.float16), 2, 0),
        (full(dtype=np.int32), data.astype(np.int32), offsets, pad.astype(np.int32), 2, 0),
        (full(), data.astype(np.float64), offsets, pad, 2, 0),
        (full(), data, offsets, pad.astype(np.float64), 2, 0),
        (full(), data, offsets.astype(np.int32), pad, 2, 0),
        (full(), data, offsets.astype(np.uint64), pad, 2, 0),
        (full(), np.asfortranarray(data), offsets, pad, 2, 0),
        (full((2, 4))[:, ::2], data, offsets, pad, 2, 0),
        (full(), data, offsets[::-1], pad, 2, 0),
        (full(), data, offsets.reshape(1, 3), pad, 2, 0),
        (full(), data, np.zeros(0, np.int64), pad, 2, 0),
        (full((3, 2)), data, offsets, pad, 2, 0),
        (full((2, 3)), data, offsets, np.zeros(3, f4), 2, 0),
        (full(), data, offsets, np.zeros(3, f4), 2, 0),
        (full(), data, offsets, pad, 3, 0),
        (full(), data, offsets, pad, 0, 0),
        (full(), data, offsets, pad, -2, 0),
        (readonly, data, offsets, pad, 2, 0),
        (misaligned, data, offsets, pad, 2, 0),
        (full(), data, offsets, pad, 2, -1),
        (full(), data, offsets, pad, 2, 5),
    ]
    for args in bad:
        before = args[0].copy()
        assert seq_pool.pool_float_serial(*args) is False
        np.testing.assert_array_equal(args[0], before)
    for i in range(4):
        args = [full(), data, offsets, pad]
        args[i] = None
        with pytest.raises(TypeError):
            seq_pool.pool_float_serial(*args, 2, 0)
    with pytest.raises(TypeError):
        seq_pool.pool_float_serial(full(), data.tolist(), offsets, pad, 2, 0)
