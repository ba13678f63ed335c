"""sequence_expand and sequence_expand_as (docs/operators.md#sequence_expand,
#sequence_expand_as; Paddle's documented examples first)."""

import numpy as np
import pytest
from conftest import (ALL_DTYPES, cuda_only, on_backend, parallel_min_work, threaded,
                      threaded_lengths, to_host)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference_gather import assert_result, expand, expand_as
from strategies import FEATURE_SHAPES, lod_lengths, values

import lodarrow as la
from lodarrow import LoDError

HSET = settings(suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow, HealthCheck.data_too_large])


# ---------------------------------------------------------------- Paddle's documented examples
def test_seed_case_1(backend):
    a, b, c, d = 1.0, 2.0, 3.0, 4.0
    x = la.create_lod_tensor(np.array([[a], [b], [c], [d]], np.float32), [[2, 2]],
                             la.CPUPlace())
    y = la.LoDTensor(np.zeros((8, 1), np.float32), lengths=[[2, 2], [3, 3, 1, 1]])
    out = la.sequence_expand(on_backend(x, backend), on_backend(y, backend), ref_level=0)
    assert_result(out, np.array([[a], [b], [a], [b], [c], [d], [c], [d]], np.float32),
                  [[0, 2, 4, 6, 8]], backend)
    assert out.recursive_sequence_lengths() == [[2, 2, 2, 2]]


def test_seed_case_2(backend):
    a, b, c = 1.0, 2.0, 3.0
    x = la.LoDTensor(np.array([[a], [b], [c]], np.float32))
    y = la.LoDTensor(np.zeros((5, 1), np.float32), lengths=[[2, 0, 3]])
    out = la.sequence_expand(on_backend(x, backend), on_backend(y, backend), ref_level=-1)
    assert_result(out, np.array([[a], [a], [c], [c], [c]], np.float32), [], backend)
    assert out.shape() == [5, 1]


def test_seed_printed_example(backend):
    place = la.CPUPlace()
    np_data = np.array([[1], [2], [3], [4]]).astype("float32")
    x_lod_tensor = la.create_lod_tensor(np_data, [[2, 2]], place)
    assert str(x_lod_tensor).splitlines()[0] == "- lod: {{0, 2, 4}}"
    np_data = np.array([[1], [2], [3], [4], [5], [6], [7], [8]]).astype("float32")
    y_lod_tensor = la.create_lod_tensor(np_data, [[2, 2], [3, 3, 1, 1]], place)
    out = la.sequence_expand(x=on_backend(x_lod_tensor, backend),
                             y=on_backend(y_lod_tensor, backend), ref_level=0)
    lines = str(to_host(out, backend)).splitlines()
    assert lines[0] == "- lod: {{0, 2, 4, 6, 8}}"
    assert lines[2:] == ["- shape: [8, 1]", "- layout: NCHW", "- dtype: float32",
                         "- data: [1 2 1 2 3 4 3 4]"]


# ---------------------------------------------------------------- against the reference
@st.composite
def expand_cases(draw):
    """(x, y, ref_level): y with 1-3 levels; x plain (one row per sequence) or 1 level."""
    dtype = draw(st.sampled_from(ALL_DTYPES))
    fshape = draw(st.sampled_from(FEATURE_SHAPES))
    y_levels = draw(st.integers(1, 3))
    lengths, y_rows = draw(lod_lengths(y_levels, max_seqs=5, max_len=4))
    y = la.LoDTensor(np.zeros(y_rows, np.int8), lengths=lengths)
    ref_level = draw(st.sampled_from([-1] + list(range(y_levels))))
    n = y.num_sequences(ref_level)
    if draw(st.booleans()):
        x = la.LoDTensor(draw(values(dtype, (n, *fshape))))
    else:
        x_len = draw(st.lists(st.integers(0, 4), min_size=n, max_size=n))
        x = la.LoDTensor(draw(values(dtype, (sum(x_len), *fshape))), lengths=[x_len])
    return x, y, ref_level


@HSET
@given(case=expand_cases())
def test_expand_matches_reference(backend, case):
    x, y, ref_level = case
    data, lod = expand(x.numpy(), x.lod(), y.lod(), ref_level)
    before = x.numpy().copy()
    out = la.sequence_expand(on_backend(x, backend), on_backend(y, backend), ref_level)
    assert_result(out, data, lod, backend)
    np.testing.assert_array_equal(x.numpy(), before)


def test_plain_x_with_multi_level_y_has_no_lod(backend):
    x = on_backend(la.LoDTensor(np.array([10, 20])), backend)
    y = on_backend(la.LoDTensor(np.zeros(4), lengths=[[1, 1], [3, 1]]), backend)
    out = la.sequence_expand(x, y)
    assert_result(out, np.array([10, 10, 10, 20]), [], backend)
    out = la.sequence_expand(x, y, ref_level=0)
    assert_result(out, np.array([10, 20]), [], backend)


def test_empty_sequences_and_zero_repeats(backend):
    x = on_backend(la.LoDTensor(np.array([1, 2, 3]), lengths=[[2, 0, 1]]), backend)
    y = on_backend(la.LoDTensor(np.zeros(5), lengths=[[0, 3, 2]]), backend)
    out = la.sequence_expand(x, y)
    assert_result(out, np.array([3, 3]), [[0, 0, 0, 0, 1, 2]], backend)


def test_zero_sequences(backend):
    x = on_backend(la.LoDTensor(np.zeros((0, 2), np.float32), lod=[[0]]), backend)
    y = on_backend(la.LoDTensor(np.zeros(0), lod=[[0]]), backend)
    assert_result(la.sequence_expand(x, y), np.zeros((0, 2), np.float32), [[0]], backend)
    x = on_backend(la.LoDTensor(np.zeros((0, 2), np.float32)), backend)
    assert_result(la.sequence_expand(x, y), np.zeros((0, 2), np.float32), [], backend)


@pytest.mark.parametrize("layout", ["readonly", "strided", "fortran"])
def test_unusual_layouts(backend, layout):
    base = np.arange(24, dtype=np.float64).reshape(4, 6)
    if layout == "readonly":
        data = base.copy()
        data.flags.writeable = False
    elif layout == "strided":
        data = base[:, ::2]
    else:
        data = np.asfortranarray(base)
    y = la.LoDTensor(np.zeros(5), lengths=[[2, 0, 1, 2]])
    out = la.sequence_expand(on_backend(la.LoDTensor(data), backend), on_backend(y, backend))
    assert_result(out, np.asarray(data)[[0, 0, 2, 3, 3]], [], backend)
    x1 = la.LoDTensor(data, lengths=[[1, 3]])
    y1 = la.LoDTensor(np.zeros(3), lengths=[[2, 1]])
    out = la.sequence_expand(on_backend(x1, backend), on_backend(y1, backend))
    assert_result(out, np.asarray(data)[[0, 0, 1, 2, 3]], [[0, 1, 2, 5]], backend)
    out = la.sequence_expand_as(on_backend(la.LoDTensor(data), backend),
                                on_backend(la.LoDTensor(np.zeros(3), lengths=[[0, 1, 0, 2]]),
                                           backend))
    assert_result(out, np.asarray(data)[[1, 3, 3]], [[0, 0, 1, 1, 3]], backend)


@threaded
@pytest.mark.parametrize("d", [1, 16])
def test_large_input_uses_threads(backend, threads, d):
    rng = np.random.default_rng(d)
    reps = rng.geometric(0.25, size=30000) - 1
    y = la.LoDTensor(np.zeros(int(reps.sum()), np.int8), lengths=[reps])
    x = la.LoDTensor(rng.standard_normal((30000, d)).astype(np.float32))
    out = la.sequence_expand(on_backend(x, backend), on_backend(y, backend))
    np.testing.assert_array_equal(to_host(out, backend).numpy(), np.repeat(x.numpy(), reps, axis=0))
    x_len = rng.integers(0, 4, size=30000)
    xs = la.LoDTensor(rng.standard_normal((int(x_len.sum()), d)).astype(np.float32),
                      lengths=[x_len])
    data, lod = expand(xs.numpy(), xs.lod(), y.lod(), 0)
    assert_result(la.sequence_expand(on_backend(xs, backend), on_backend(y, backend)),
                  data, lod, backend)


def test_name_and_arrow_like_input():
    x = la.LoDTensor(np.array([1.0, 2.0]))
    y = la.LoDTensor(np.zeros(3), lengths=[[1, 2]])
    assert la.sequence_expand(x, y, -1, name="n").numpy().tolist() == [1.0, 2.0, 2.0]
    assert la.sequence_expand_as(x, y, name="n").numpy().tolist() == [1.0, 2.0, 2.0]


# ---------------------------------------------------------------- sequence_expand errors
def test_x_with_two_levels():
    x = la.LoDTensor(np.arange(3), lengths=[[1], [3]])
    y = la.LoDTensor(np.zeros(3), lengths=[[3]])
    with pytest.raises(LoDError, match=r"sequence_expand: x must have 0 or 1 LoD level\(s\), "
                                       r"got 2"):
        la.sequence_expand(x, y)


def test_y_without_lod():
    with pytest.raises(LoDError, match="y must have at least 1 LoD level, got 0"):
        la.sequence_expand(np.arange(3), np.arange(3))


@pytest.mark.parametrize("ref_level", [2, -2, 5])
def test_ref_level_out_of_range(ref_level):
    y = la.LoDTensor(np.zeros(3), lengths=[[1, 1], [1, 2]])
    with pytest.raises(ValueError, match=rf"ref_level must be -1 or in \[0, 2\) .* got "
                                         rf"{ref_level}"):
        la.sequence_expand(np.arange(2), y, ref_level=ref_level)


def test_ref_level_type():
    y = la.LoDTensor(np.zeros(3), lengths=[[3]])
    with pytest.raises(TypeError, match="ref_level must be an integer"):
        la.sequence_expand(np.arange(1), y, ref_level=0.0)


def test_row_and_sequence_count_mismatch():
    y = la.LoDTensor(np.zeros(3), lengths=[[1, 2]])
    with pytest.raises(LoDError, match=r"x has no LoD, so it needs one row per sequence of y's "
                                       r"level 0 \(2\), got 3 rows"):
        la.sequence_expand(np.arange(3), y)
    x = la.LoDTensor(np.arange(3), lengths=[[1, 1, 1]])
    with pytest.raises(LoDError, match="x has 3 sequences but y's level 0 has 2"):
        la.sequence_expand(x, y)


def test_bad_inputs():
    with pytest.raises(TypeError, match="x must be a LoDTensor"):
        la.sequence_expand(3, la.LoDTensor(np.zeros(1), lengths=[[1]]))
    with pytest.raises(TypeError, match="y must be a LoDTensor"):
        la.sequence_expand(np.arange(1), None)


# ---------------------------------------------------------------- sequence_expand_as
def test_expand_as_example(backend):
    x = on_backend(la.LoDTensor(np.array([[1, 2], [3, 4], [5, 6]], np.int32),
                                lengths=[[2, 1]]), backend)  # x's LoD is ignored
    y = on_backend(la.LoDTensor(np.zeros(4), lengths=[[1, 0, 3]]), backend)
    out = la.sequence_expand_as(x, y)
    assert_result(out, np.array([[1, 2], [5, 6], [5, 6], [5, 6]], np.int32), [[0, 1, 1, 4]],
                  backend)


@st.composite
def expand_as_cases(draw):
    dtype = draw(st.sampled_from(ALL_DTYPES))
    fshape = draw(st.sampled_from(FEATURE_SHAPES))
    lengths, y_rows = draw(lod_lengths(1, max_seqs=6, max_len=5))
    n = len(lengths[0])
    x = la.LoDTensor(draw(values(dtype, (n, *fshape))))
    return x, la.LoDTensor(np.zeros((y_rows, 2), np.float16), lengths=lengths)


@HSET
@given(case=expand_as_cases())
def test_expand_as_matches_reference(backend, case):
    x, y = case
    data, lod = expand_as(x.numpy(), y.lod())
    out = la.sequence_expand_as(on_backend(x, backend), on_backend(y, backend))
    assert_result(out, data, lod, backend)


@threaded
def test_expand_as_large(backend, threads):
    rng = np.random.default_rng(7)
    reps = rng.geometric(0.05, size=5001) - 1
    assert 2 * reps.sum() > parallel_min_work()
    x = la.LoDTensor(rng.integers(0, 100, size=(5001, 2)).astype(np.int16))
    y = la.LoDTensor(np.zeros(int(reps.sum()), bool), lengths=[reps])
    out = la.sequence_expand_as(on_backend(x, backend), on_backend(y, backend))
    assert_result(out, np.repeat(x.numpy(), reps, axis=0), y.lod(), backend)


@pytest.mark.parametrize("lengths", [None, [[1], [2]]])
def test_expand_as_y_needs_one_level(lengths):
    y = la.LoDTensor(np.zeros(2), lengths=lengths)
    with pytest.raises(LoDError, match=r"sequence_expand_as: y must have exactly 1 LoD "
                                       r"level\(s\), got"):
        la.sequence_expand_as(np.arange(1), y)


def test_expand_as_row_mismatch():
    y = la.LoDTensor(np.zeros(2), lengths=[[1, 1]])
    with pytest.raises(LoDError, match=r"x needs one row per sequence of y \(2\), got 3 rows"):
        la.sequence_expand_as(np.arange(3), y)


@cuda_only
def test_mixed_devices(backend):
    y = la.LoDTensor(np.zeros(2), lengths=[[1, 1]])
    with pytest.raises(ValueError, match="different devices"):
        la.sequence_expand(on_backend(np.arange(2), "cuda"), y)
    with pytest.raises(ValueError, match="different devices"):
        la.sequence_expand_as(np.arange(2), y.cuda())


def test_arrow_inputs():
    from reference_gather import arrow_lists

    x = arrow_lists(np.array([1, 2, 3], np.int32), [0, 2, 3])
    y = arrow_lists(np.zeros(3), [0, 1, 3])
    out = la.sequence_expand(x, y)
    assert out.numpy().tolist() == [1, 2, 3, 3] and out.lod() == [[0, 2, 3, 4]]
    out = la.sequence_expand_as(np.array([7, 8]), y)
    assert out.numpy().tolist() == [7, 8, 8] and out.lod() == [[0, 1, 3]]


@threaded
@pytest.mark.parametrize("dtype, fshape", [("bool", ()), ("int8", ()), ("int16", ()),
                                           ("float32", ()), ("float64", ()), ("int8", (3,)),
                                           ("float16", (5,)), ("float32", (16,))])
def test_large_all_row_widths(backend, threads, dtype, fshape):
    # Narrow rows take the kernels' word and 32-byte-piece paths; several threads and
    # chunks check that no copy spills into another chunk's rows.
    rng = np.random.default_rng(len(fshape) * 10 + (threads or 0))
    n = 40000
    reps = rng.geometric(1 / 4, size=n) - 1
    data = (rng.standard_normal((n, *fshape)) * 50).astype(dtype)
    y = on_backend(la.LoDTensor(np.zeros(int(reps.sum()), np.int8), lengths=[reps]), backend)
    out = la.sequence_expand(on_backend(la.LoDTensor(data), backend), y)
    assert_result(out, np.repeat(data, reps, axis=0), [], backend)
    x_len = rng.geometric(1 / 3, size=n) - 1
    xs = la.LoDTensor((rng.standard_normal((int(x_len.sum()), *fshape)) * 50).astype(dtype),
                      lengths=[x_len])
    blocks = np.split(xs.numpy(), np.cumsum(x_len)[:-1])
    expected = np.concatenate([np.zeros((0, *fshape), dtype)]
                              + [b for b, r in zip(blocks, reps) for _ in range(r)])
    lod = np.concatenate([[0], np.cumsum(np.repeat(x_len, reps))])
    out = la.sequence_expand(on_backend(xs, backend), y)
    assert_result(out, expected, [lod.tolist()], backend)


@threaded
@pytest.mark.parametrize("dtype, fshape", [("int8", ()), ("float32", (16,))])
def test_few_long_sequences_odd_chunks(backend, threads, dtype, fshape):
    # 11 sequences of y: 3 and 7 threads both cut them into 11 chunks
    rng = np.random.default_rng(11)
    reps = threaded_lengths(rng, parallel_min_work() * 5 // 4, "few")
    y = on_backend(la.LoDTensor(np.zeros(int(reps.sum()), np.int8), lengths=[reps]), backend)
    data = (rng.standard_normal((reps.size, *fshape)) * 50).astype(dtype)
    out = la.sequence_expand(on_backend(la.LoDTensor(data), backend), y)
    assert_result(out, np.repeat(data, reps, axis=0), [], backend)
    out = la.sequence_expand_as(on_backend(la.LoDTensor(data), backend), y)
    assert_result(out, np.repeat(data, reps, axis=0), [list(np.cumsum([0, *reps]))], backend)
    x_len = np.array([3, 0, 1, 2, 5, 1, 0, 4, 2, 1, 2])
    xs = (rng.standard_normal((int(x_len.sum()), *fshape)) * 50).astype(dtype)
    blocks = np.split(xs, np.cumsum(x_len)[:-1])
    expected = np.concatenate([b for b, r in zip(blocks, reps) for _ in range(r)])
    lod = np.concatenate([[0], np.cumsum(np.repeat(x_len, reps))])
    out = la.sequence_expand(on_backend(la.LoDTensor(xs, lengths=[x_len]), backend), y)
    assert expected.size > parallel_min_work()
    assert_result(out, expected, [lod.tolist()], backend)
