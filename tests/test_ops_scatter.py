"""sequence_scatter (docs/operators.md#sequence_scatter, #nothing-undefined, #integer-index-inputs;
Paddle's documented example first)."""

import numpy as np
import pytest
from conftest import (NUMERIC_DTYPES, SEQUENCE_LAYOUTS, cuda_only, on_backend, parallel_min_work,
                      threaded, threaded_lengths, to_host)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference_gather import assert_result, scatter
from strategies import lod_lengths, values

import lodarrow as la
from lodarrow import LoDError

HSET = settings(suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow, HealthCheck.data_too_large])

SEED_INDEX = [[0], [1], [2], [5], [4], [3], [2], [1], [3], [2], [5], [4]]
SEED_UPDATES = [[0.3], [0.3], [0.4], [0.1], [0.2], [0.3], [0.4], [0.0], [0.2], [0.3], [0.1],
                [0.4]]
SEED_OUT = [[1.3, 1.3, 1.4, 1.0, 1.0, 1.0],
            [1.0, 1.0, 1.4, 1.3, 1.2, 1.1],
            [1.0, 1.0, 1.3, 1.2, 1.4, 1.1]]


def seed_inputs(dtype=np.float32):
    x = np.ones((3, 6), dtype)
    index = la.LoDTensor(np.array(SEED_INDEX, np.int64), lod=[[0, 3, 8, 12]])
    updates = la.LoDTensor(np.array(SEED_UPDATES, dtype), lod=[[0, 3, 8, 12]])
    return x, index, updates


# ---------------------------------------------------------------- Paddle's documented example
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_seed_example(backend, dtype):
    x, index, updates = seed_inputs(dtype)
    out = la.sequence_scatter(on_backend(x, backend), on_backend(index, backend),
                              on_backend(updates, backend))
    host = to_host(out, backend)
    assert host.dtype == dtype and host.shape() == [3, 6] and host.lod() == []
    np.testing.assert_allclose(host.numpy(), np.array(SEED_OUT, dtype), rtol=1e-6)
    np.testing.assert_array_equal(x, np.ones((3, 6)))  # input untouched


def test_seed_example_exact_against_reference(backend):
    x, index, updates = seed_inputs()
    data, lod = scatter(x, index.numpy(), updates.numpy(), index.lod())
    out = la.sequence_scatter(on_backend(x, backend), on_backend(index, backend),
                              on_backend(updates, backend))
    assert_result(out, data, lod, backend)


# ---------------------------------------------------------------- against the reference
@st.composite
def scatter_cases(draw):
    dtype = draw(st.sampled_from(NUMERIC_DTYPES))
    fshape = draw(st.sampled_from([(), (1,), (3,), (2, 3)]))
    width = int(np.prod(fshape, dtype=np.int64))
    lengths, m = draw(lod_lengths(1, max_seqs=5, max_len=6))
    n_rows = len(lengths[0]) + draw(st.integers(0, 2))
    x = draw(values(dtype, (n_rows, *fshape)))
    id_dtype = draw(st.sampled_from(["int8", "uint8", "int16", "uint16", "int32", "int64"]))
    ids = np.array(draw(st.lists(st.integers(0, width - 1), min_size=m, max_size=m)),
                   dtype=id_dtype)
    if draw(st.booleans()):
        ids = ids.reshape(m, 1)
    index = la.LoDTensor(ids, lengths=lengths)
    upd = draw(values(dtype, (m,)))
    if draw(st.booleans()):
        upd = upd.reshape(m, 1)
    updates = la.LoDTensor(upd, lengths=lengths) if draw(st.booleans()) else upd
    return x, index, updates


@HSET
@given(case=scatter_cases())
def test_matches_reference(backend, case):
    x, index, updates = case
    upd = updates.numpy() if isinstance(updates, la.LoDTensor) else updates
    data, lod = scatter(x, index.numpy(), upd, index.lod())
    before = x.copy()
    out = la.sequence_scatter(on_backend(x, backend), on_backend(index, backend),
                              on_backend(updates, backend))
    assert_result(out, data, lod, backend)
    np.testing.assert_array_equal(x, before)


def test_duplicates_accumulate_in_order(backend):
    x = np.zeros((2, 3), np.float32)
    index = la.LoDTensor(np.array([1, 1, 1, 0, 2, 2]), lengths=[[3, 3]])
    updates = np.array([1e8, 1.0, -1e8, 5.0, 1.0, 2.0], np.float32)
    out = la.sequence_scatter(on_backend(x, backend), on_backend(index, backend),
                              on_backend(updates, backend))
    # In order: (0 + 1e8 + 1) - 1e8 = 0 in float32 (1e8 + 1 rounds to 1e8).
    assert_result(out, np.array([[0, 0, 0], [5, 0, 3]], np.float32), [], backend)


def test_float16_accumulates_in_float32(backend):
    x = np.zeros((1, 1), np.float16)
    index = la.LoDTensor(np.zeros(3, np.int64), lengths=[[3]])
    updates = np.array([2048, 1, 1], np.float16)  # 2048 + 1 is 2048 in float16 steps
    out = la.sequence_scatter(on_backend(x, backend), on_backend(index, backend),
                              on_backend(updates, backend))
    assert_result(out, np.array([[2050]], np.float16), [], backend)


def test_integer_wraparound(backend):
    x = np.array([[120]], np.int8)
    index = la.LoDTensor(np.zeros(2, np.int32), lengths=[[2]])
    updates = np.array([5, 10], np.int8)
    out = la.sequence_scatter(on_backend(x, backend), on_backend(index, backend),
                              on_backend(updates, backend))
    assert_result(out, np.array([[-121]], np.int8), [], backend)


def test_safe_cast_of_updates(backend):
    x = np.zeros((1, 2), np.float64)
    index = la.LoDTensor(np.array([1, 0]), lengths=[[2]])
    for upd in (np.array([0.5, 0.25], np.float32), np.array([3, 4], np.int16),
                np.array([True, False])):
        out = la.sequence_scatter(on_backend(x, backend), on_backend(index, backend),
                                  on_backend(upd, backend))
        assert_result(out, np.array([[upd[1], upd[0]]], np.float64), [], backend)


def test_rows_without_sequences_unchanged_and_rank_1(backend):
    x = np.arange(4, dtype=np.int64)  # rank 1: W = 1
    index = la.LoDTensor(np.array([0, 0, 0]), lengths=[[2, 0, 1]])
    out = la.sequence_scatter(on_backend(x, backend), on_backend(index, backend),
                              on_backend(np.array([5, 6, 7]), backend))
    assert_result(out, np.array([11, 1, 9, 3]), [], backend)


def test_rank_3_input(backend):
    x = np.zeros((2, 2, 2), np.int32)
    index = la.LoDTensor(np.array([[3], [0]]), lengths=[[1, 1]])
    out = la.sequence_scatter(on_backend(x, backend), on_backend(index, backend),
                              on_backend(np.array([[1], [2]], np.int32), backend))
    expected = np.zeros((2, 2, 2), np.int32)
    expected[0, 1, 1] = 1
    expected[1, 0, 0] = 2
    assert_result(out, expected, [], backend)


def test_zero_sequences_and_input_lod_ignored(backend):
    x = la.LoDTensor(np.ones((2, 3)), lengths=[[2]])
    index = la.LoDTensor(np.zeros((0, 1), np.int64), lod=[[0]])
    out = la.sequence_scatter(on_backend(x, backend), on_backend(index, backend),
                              on_backend(np.zeros((0, 1)), backend))
    assert_result(out, np.ones((2, 3)), [], backend)
    empty = la.LoDTensor(np.zeros((0, 3)))
    out = la.sequence_scatter(on_backend(empty, backend), on_backend(index, backend),
                              on_backend(np.zeros(0), backend))
    assert_result(out, np.zeros((0, 3)), [], backend)


@pytest.mark.parametrize("layout", ["readonly", "strided", "fortran"])
def test_unusual_layouts(backend, layout):
    base = np.arange(12, dtype=np.float64).reshape(3, 4)
    ids = np.array([[3], [0], [1]])
    upd = np.array([[1.0], [2.0], [4.0]])
    if layout == "readonly":
        x = base.copy()
        for a in (x, ids, upd):
            a.flags.writeable = False
    elif layout == "strided":
        x = np.arange(24, dtype=np.float64).reshape(3, 8)[:, ::2]
        upd = np.array([[1.0, 0], [2.0, 0], [4.0, 0]])[:, :1]
    else:
        x = np.asfortranarray(base)
    index = la.LoDTensor(ids, lengths=[[2, 0, 1]])
    data, _ = scatter(np.ascontiguousarray(x), ids, upd, index.lod())
    out = la.sequence_scatter(on_backend(x, backend), on_backend(index, backend),
                              on_backend(upd, backend))
    assert_result(out, data, [], backend)


@threaded
@pytest.mark.parametrize("layout", SEQUENCE_LAYOUTS)
def test_threaded_chunks(backend, threads, layout):
    rng = np.random.default_rng(3)
    lengths = threaded_lengths(rng, parallel_min_work() * 5 // 4, layout)
    n, width, m = lengths.size, 40, int(lengths.sum())
    x = rng.standard_normal((n, width))
    index = la.LoDTensor(rng.integers(0, width, size=m), lengths=[lengths])
    upd = rng.standard_normal(m)
    # lodarrow first: a row the kernel skipped must not find the reference's freed buffer
    # (holding the right answer) in the memory NumPy hands it
    out = la.sequence_scatter(on_backend(x, backend), on_backend(index, backend),
                              on_backend(upd, backend))
    data, _ = scatter(x, index.numpy(), upd, index.lod())
    assert_result(out, data, [], backend)  # exact: same additions in the same order


@threaded
@pytest.mark.parametrize("extra_rows", [1, 5000])
def test_threaded_duplicates_and_rows_without_sequences(backend, threads, extra_rows):
    # Width 3: almost every id repeats within its row, and values of mixed magnitude make
    # the float32 sums depend on the order of the additions (the reference's is in order).
    # The rows past the last sequence are copied (in shares across threads when many).
    rng = np.random.default_rng(5)
    lengths = threaded_lengths(rng, parallel_min_work() * 5 // 4, "many")
    n, m = lengths.size, int(lengths.sum())
    x = rng.standard_normal((n + extra_rows, 3)).astype(np.float32)
    index = la.LoDTensor(rng.integers(0, 3, size=m), lengths=[lengths])
    upd = (rng.standard_normal(m) * 10.0 ** rng.integers(-4, 5, size=m)).astype(np.float32)
    out = la.sequence_scatter(on_backend(x, backend), on_backend(index, backend),
                              on_backend(upd, backend))
    data, _ = scatter(x, index.numpy(), upd, index.lod())
    assert_result(out, data, [], backend)  # exact: same additions in the same order


# ---------------------------------------------------------------- errors
@pytest.mark.parametrize("bad, pos, seq", [(-1, 4, 1), (6, 4, 1), (100, 11, 2)])
def test_id_out_of_range(bad, pos, seq):
    x, index, updates = seed_inputs()
    ids = index.numpy().copy()
    ids[pos] = bad
    index = la.LoDTensor(ids, lod=index.lod())
    with pytest.raises(IndexError, match=rf"index\[{pos}\] = {bad} \(in sequence {seq}\) is out "
                                         rf"of range for input rows of width 6"):
        la.sequence_scatter(x, index, updates)


def _bad_id_message(pos, value, seq, width):
    return (rf"^sequence_scatter: index\[{pos}\] = {value} \(in sequence {seq}\) is out of "
            rf"range for input rows of width {width}; ids must be in \[0, {width}\)$")


@pytest.mark.parametrize("bad", [-1, -(2 ** 63), 6, 2 ** 63 - 1])
@pytest.mark.parametrize("pos, seq", [(0, 0), (6, 1), (11, 2)])
def test_id_out_of_range_first_middle_last(backend, bad, pos, seq):
    # The kernel checks the ids as it goes: the error names the position whatever it is,
    # nothing is returned and the inputs are untouched.
    x, index, updates = seed_inputs()
    ids = index.numpy().copy()
    ids[pos] = bad
    index = la.LoDTensor(ids, lod=index.lod())
    with pytest.raises(IndexError, match=_bad_id_message(pos, bad, seq, 6)):
        la.sequence_scatter(on_backend(x, backend), on_backend(index, backend),
                            on_backend(updates, backend))
    np.testing.assert_array_equal(x, np.ones((3, 6)))


@pytest.mark.parametrize("dtype, id_dtype", [("float16", "int64"), ("int8", "uint8"),
                                             ("float64", "int32")])
def test_id_out_of_range_any_dtype(backend, dtype, id_dtype):
    # float16 works in a float32 copy and small id dtypes are widened first: same error.
    x = np.zeros((2, 4), dtype)
    index = la.LoDTensor(np.array([3, 0, 200 if id_dtype == "uint8" else -5], id_dtype),
                         lengths=[[0, 3]])
    value = 200 if id_dtype == "uint8" else -5
    with pytest.raises(IndexError, match=_bad_id_message(2, value, 1, 4)):
        la.sequence_scatter(on_backend(x, backend), on_backend(index, backend),
                            on_backend(np.ones(3, dtype), backend))


def test_id_out_of_range_after_empty_sequences_and_width_0(backend):
    x = np.zeros((4, 2), np.float32)
    index = la.LoDTensor(np.array([1, 2]), lengths=[[0, 0, 1, 1]])
    with pytest.raises(IndexError, match=_bad_id_message(1, 2, 3, 2)):
        la.sequence_scatter(on_backend(x, backend), on_backend(index, backend),
                            on_backend(np.ones(2, np.float32), backend))
    # Rows of width 0 hold no id at all: the first one is out of range.
    x = np.zeros((2, 0), np.float32)
    index = la.LoDTensor(np.array([0, 0]), lengths=[[0, 2]])
    with pytest.raises(IndexError, match=_bad_id_message(0, 0, 1, 0)):
        la.sequence_scatter(on_backend(x, backend), on_backend(index, backend),
                            on_backend(np.ones(2, np.float32), backend))


@threaded
@pytest.mark.parametrize("where", ["first", "middle", "last", "two"])
def test_threaded_id_out_of_range(backend, threads, where):
    # Chunks run in any order and each stops at its own first bad id: the error must name the
    # first one in position order, also when a later chunk holds another (``"two"``).
    rng = np.random.default_rng(9)
    lengths = threaded_lengths(rng, parallel_min_work() * 5 // 4, "many")
    n, width, m = lengths.size, 8, int(lengths.sum())
    ids = rng.integers(0, width, size=m)
    pos = {"first": 0, "middle": m // 2 + 7, "last": m - 1, "two": m * 3 // 5}[where]
    ids[pos] = width if where != "middle" else -3
    if where == "two":
        ids[m - 2] = -1
    seq = int(np.searchsorted(np.cumsum(lengths), pos, side="right"))
    x = rng.standard_normal((n, width))
    before = x.copy()
    index = la.LoDTensor(ids, lengths=[lengths])
    with pytest.raises(IndexError, match=_bad_id_message(pos, ids[pos], seq, width)):
        la.sequence_scatter(on_backend(x, backend), on_backend(index, backend),
                            on_backend(rng.standard_normal(m), backend))
    np.testing.assert_array_equal(x, before)


def test_more_sequences_than_rows():
    x, index, updates = seed_inputs()
    with pytest.raises(IndexError, match="index has 3 sequences but input has only 2 rows"):
        la.sequence_scatter(x[:2], index, updates)
    with pytest.raises(ValueError, match="index has 3 sequences"):
        la.sequence_scatter(x[:2], index, updates)


def test_updates_rows_must_match():
    x, index, updates = seed_inputs()
    with pytest.raises(ValueError, match="updates has 11 rows but index has 12"):
        la.sequence_scatter(x, index, updates.numpy()[:11])


def test_updates_lod_must_match():
    x, index, updates = seed_inputs()
    other = la.LoDTensor(updates.numpy(), lod=[[0, 4, 8, 12]])
    with pytest.raises(ValueError, match="updates has a LoD .* different from index's"):
        la.sequence_scatter(x, index, other)
    two = la.LoDTensor(updates.numpy(), lod=[[0, 3], [0, 3, 8, 12]])
    with pytest.raises(ValueError, match="updates has a LoD"):
        la.sequence_scatter(x, index, two)


@pytest.mark.parametrize("lod", [None, [[0, 3], [0, 3, 8, 12]]])
def test_index_needs_exactly_one_level(lod):
    x, index, updates = seed_inputs()
    with pytest.raises(LoDError, match=r"sequence_scatter: index must have exactly 1 LoD "
                                       r"level\(s\)"):
        la.sequence_scatter(x, la.LoDTensor(index.numpy(), lod=lod), updates.numpy())


@pytest.mark.parametrize("dtype", ["float32", "bool"])
def test_index_must_be_integer(dtype):
    x, index, updates = seed_inputs()
    bad = la.LoDTensor(index.numpy().astype(dtype), lod=index.lod())
    with pytest.raises(TypeError, match="index must hold integers"):
        la.sequence_scatter(x, bad, updates)


def test_shapes():
    x, index, updates = seed_inputs()
    wide = la.LoDTensor(np.zeros((12, 2), np.int64), lod=index.lod())
    with pytest.raises(ValueError, match=r"index must be 1-D \(or of shape \(n, 1\)\)"):
        la.sequence_scatter(x, wide, updates)
    with pytest.raises(ValueError, match=r"updates must have shape \[M, 1\] or \[M\], got "
                                         r"\(12, 2\)"):
        la.sequence_scatter(x, index, np.zeros((12, 2), np.float32))


def test_dtypes():
    x, index, updates = seed_inputs()
    with pytest.raises(TypeError, match="updates of dtype float64 cannot be cast safely to "
                                        "input's dtype float32"):
        la.sequence_scatter(x, index, updates.numpy().astype(np.float64))
    with pytest.raises(TypeError, match="input must be numeric"):
        la.sequence_scatter(np.ones((3, 6), bool), index, np.ones(12, bool))


@cuda_only
def test_mixed_devices(backend):
    x, index, updates = seed_inputs()
    with pytest.raises(ValueError, match="different devices"):
        la.sequence_scatter(on_backend(x, "cuda"), index, updates)


def test_arrow_index():
    from reference_gather import arrow_lists

    x, index, updates = seed_inputs()
    arrow_index = arrow_lists(np.array(SEED_INDEX, np.int64).ravel(), [0, 3, 8, 12])
    out = la.sequence_scatter(x, arrow_index, updates)
    np.testing.assert_allclose(out.numpy(), np.array(SEED_OUT, np.float32), rtol=1e-6)
