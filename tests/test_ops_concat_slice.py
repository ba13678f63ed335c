"""sequence_concat and sequence_slice (docs/operators.md#sequence_concat,
#sequence_slice, #fewer-restrictions)."""

import numpy as np
import pytest
from conftest import (ALL_DTYPES, cuda_only, on_backend, parallel_min_work, threaded,
                      threaded_lengths, to_host)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference_gather import assert_result, concat, slice_
from strategies import FEATURE_SHAPES, lod_lengths, lod_tensors, values

import lodarrow as la
from lodarrow import LoDError

HSET = settings(suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow, HealthCheck.data_too_large])


# ---------------------------------------------------------------- sequence_concat
def test_concat_example(backend):
    a = la.LoDTensor(np.array([[1], [2], [3]], np.float32), lengths=[[2, 0, 1]])
    b = la.LoDTensor(np.array([[10], [20], [30]], np.float32), lengths=[[1, 2, 0]])
    out = la.sequence_concat([on_backend(a, backend), on_backend(b, backend)])
    assert_result(out, np.array([[1], [2], [10], [20], [30], [3]], np.float32),
                  [[0, 3, 5, 6]], backend)
    assert out.recursive_sequence_lengths() == [[3, 2, 1]]


def test_concat_single_input_is_a_copy(backend):
    a = on_backend(la.LoDTensor(np.arange(4.0), lengths=[[1, 3]]), backend)
    out = la.sequence_concat((a,), name="ignored")
    assert_result(out, np.arange(4.0), [[0, 1, 4]], backend)
    assert out.data is not a.data
    out.data[0] = 99.0
    assert float(to_host(a, backend).numpy()[0]) == 0.0


@st.composite
def concat_cases(draw):
    """2-4 inputs sharing dtype, feature shape and outer levels; own last levels."""
    dtype = draw(st.sampled_from(ALL_DTYPES))
    fshape = draw(st.sampled_from(FEATURE_SHAPES))
    n_levels = draw(st.integers(1, 3))
    outer, n_seq = draw(lod_lengths(n_levels - 1, max_seqs=4, max_len=3)) if n_levels > 1 \
        else ([], draw(st.integers(0, 5)))
    tensors = []
    for _ in range(draw(st.integers(1, 4))):
        last = draw(st.lists(st.integers(0, 4), min_size=n_seq, max_size=n_seq))
        data = draw(values(dtype, (sum(last), *fshape)))
        tensors.append(la.LoDTensor(data, lengths=outer + [last]))
    return tensors


@HSET
@given(ts=concat_cases())
def test_concat_matches_reference(backend, ts):
    data, lod = concat([t.numpy() for t in ts], [t.lod() for t in ts])
    out = la.sequence_concat([on_backend(t, backend) for t in ts])
    assert_result(out, data, lod, backend)


@pytest.mark.parametrize("layout", ["readonly", "strided", "fortran"])
def test_concat_unusual_layouts(backend, layout):
    base = np.arange(12, dtype=np.int16).reshape(4, 3)
    if layout == "readonly":
        data = base.copy()
        data.flags.writeable = False
    elif layout == "strided":
        data = np.arange(24, dtype=np.int16).reshape(4, 6)[:, ::2]
    else:
        data = np.asfortranarray(base)
    a = la.LoDTensor(data, lengths=[[3, 1]])
    b = la.LoDTensor(np.ascontiguousarray(data[::-1]), lengths=[[0, 4]])
    out = la.sequence_concat([on_backend(a, backend), on_backend(b, backend)])
    expected, lod = concat([np.asarray(data), np.asarray(data[::-1])], [a.lod(), b.lod()])
    assert_result(out, expected, lod, backend)


def test_concat_large(backend):
    rng = np.random.default_rng(5)
    outer = [rng.integers(0, 5, size=2000)]
    n = int(outer[0].sum())
    ts = []
    for k in range(3):
        last = rng.geometric(0.1, size=n) - 1
        ts.append(la.LoDTensor(rng.standard_normal((int(last.sum()), 2)), lengths=outer + [last]))
    data, lod = concat([t.numpy() for t in ts], [t.lod() for t in ts])
    assert_result(la.sequence_concat([on_backend(t, backend) for t in ts]), data, lod, backend)


def test_concat_input_must_be_a_list():
    a = la.LoDTensor(np.arange(2), lengths=[[2]])
    with pytest.raises(TypeError, match="input must be a list or tuple of LoDTensors, got "
                                        "LoDTensor"):
        la.sequence_concat(a)
    with pytest.raises(ValueError, match="input is empty"):
        la.sequence_concat([])


def test_concat_errors_name_the_input():
    a = la.LoDTensor(np.arange(3, dtype=np.int64), lengths=[[2, 1]])
    with pytest.raises(LoDError, match=r"input\[1\] has no LoD"):
        la.sequence_concat([a, np.arange(3)])
    with pytest.raises(LoDError, match=r"input\[1\] has 2 LoD levels but input\[0\] has 1"):
        la.sequence_concat([a, la.LoDTensor(np.arange(3), lengths=[[2], [2, 1]])])
    with pytest.raises(TypeError, match=r"input\[2\] has dtype int32 but input\[0\] has int64"):
        la.sequence_concat([a, a, la.LoDTensor(np.arange(3, dtype=np.int32),
                                                lengths=[[2, 1]])])
    with pytest.raises(ValueError, match=r"input\[1\] has feature shape \(1,\) but input\[0\] "
                                         r"has \(\)"):
        la.sequence_concat([a, la.LoDTensor(np.arange(3).reshape(3, 1), lengths=[[2, 1]])])
    with pytest.raises(ValueError, match=r"input\[1\] has 3 sequences but input\[0\] has 2"):
        la.sequence_concat([a, la.LoDTensor(np.arange(3), lengths=[[1, 1, 1]])])


def test_concat_multi_level_inputs_must_share_outer_levels():
    a = la.LoDTensor(np.arange(4), lengths=[[1, 2], [1, 1, 2]])
    b = la.LoDTensor(np.arange(4), lengths=[[2, 1], [1, 1, 2]])
    with pytest.raises(LoDError, match=r"inputs with 2 LoD levels must share their outer "
                                       r"levels; input\[1\]'s level 0 differs from "
                                       r"input\[0\]'s: first difference at position 1"):
        la.sequence_concat([a, b])
    c = la.LoDTensor(np.arange(4), lengths=[[1, 1, 1], [1, 1, 2]])
    with pytest.raises(LoDError, match="it has 3 sequences, input"):
        la.sequence_concat([a, c])


# ---------------------------------------------------------------- sequence_slice
def test_slice_example(backend):
    x = on_backend(la.LoDTensor(np.arange(10).reshape(10, 1), lengths=[[3, 2, 4, 1]]), backend)
    out = la.sequence_slice(x, offset=on_backend(np.array([[0], [1], [1], [1]]), backend),
                            length=on_backend(np.array([[2], [1], [3], [0]]), backend))
    assert_result(out, np.array([[0], [1], [4], [6], [7], [8]]), [[0, 2, 3, 6, 6]], backend)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "uint16", "int32", "int64",
                                   "uint32", "uint64"])
def test_slice_index_dtypes_and_shapes(backend, dtype):
    x = on_backend(la.LoDTensor(np.arange(5.0), lengths=[[2, 3]]), backend)
    for shape in [(2,), (2, 1)]:
        off = on_backend(np.array([1, 0], dtype=dtype).reshape(shape), backend)
        length = on_backend(np.array([1, 3], dtype=dtype).reshape(shape), backend)
        out = la.sequence_slice(x, off, length)
        assert_result(out, np.array([1.0, 2.0, 3.0, 4.0]), [[0, 1, 4]], backend)


def test_slice_lodtensor_and_list_arguments(backend):
    x = on_backend(la.LoDTensor(np.arange(5.0), lengths=[[2, 3]]), backend)
    off = on_backend(la.LoDTensor(np.array([[2], [3]])), backend)
    out = la.sequence_slice(x, off, [0, 0], name="ignored")
    assert_result(out, np.zeros(0), [[0, 0, 0]], backend)


def test_slice_keeps_outer_levels(backend):
    x = on_backend(la.LoDTensor(np.arange(6), lengths=[[2, 0, 1], [2, 1, 3]]), backend)
    out = la.sequence_slice(x, [1, 0, 1], [1, 1, 2])
    assert_result(out, np.array([1, 2, 4, 5]), [[0, 2, 2, 3], [0, 1, 2, 4]], backend)


def test_slice_zero_sequences(backend):
    x = on_backend(la.LoDTensor(np.zeros((0, 2)), lod=[[0]]), backend)
    out = la.sequence_slice(x, on_backend(np.zeros(0, np.int64), backend),
                            on_backend(np.zeros((0, 1), np.int64), backend))
    assert_result(out, np.zeros((0, 2)), [[0]], backend)


@st.composite
def slice_cases(draw):
    t = draw(lod_tensors(min_levels=1, max_levels=3))
    seq_len = np.diff(t.offsets[-1])
    offsets, lengths = [], []
    for n in seq_len.tolist():
        o = draw(st.integers(0, n))
        offsets.append(o)
        lengths.append(draw(st.integers(0, n - o)))
    dtype = draw(st.sampled_from(["int32", "int64", "uint8"]))
    shape = draw(st.sampled_from([(-1,), (-1, 1)]))
    return (t, np.array(offsets, dtype=dtype).reshape(shape),
            np.array(lengths, dtype=dtype).reshape(shape))


@HSET
@given(case=slice_cases())
def test_slice_matches_reference(backend, case):
    t, off, length = case
    data, lod = slice_(t.numpy(), t.lod(), off, length)
    out = la.sequence_slice(on_backend(t, backend), on_backend(off, backend),
                            on_backend(length, backend))
    assert_result(out, data, lod, backend)


@pytest.mark.parametrize("layout", ["readonly", "strided", "fortran"])
def test_slice_unusual_layouts(backend, layout):
    base = np.arange(20, dtype=np.float32).reshape(5, 4)
    off, length = np.array([1, 0]), np.array([1, 2])
    if layout == "readonly":
        data = base.copy()
        for a in (data, off, length):
            a.flags.writeable = False
    elif layout == "strided":
        data = base[:, ::2]
    else:
        data = np.asfortranarray(base)
    x = la.LoDTensor(data, lengths=[[2, 3]])
    out = la.sequence_slice(on_backend(x, backend), on_backend(off, backend),
                            on_backend(length, backend))
    assert_result(out, np.asarray(data)[[1, 2, 3]], [[0, 1, 3]], backend)


def test_slice_large(backend):
    rng = np.random.default_rng(11)
    seq_len = rng.geometric(0.05, size=5000) - 1
    x = la.LoDTensor(rng.standard_normal((int(seq_len.sum()), 3)).astype(np.float32),
                     lengths=[seq_len])
    off = (rng.random(5000) * (seq_len + 1)).astype(np.int64)
    length = (rng.random(5000) * (seq_len - off + 1)).astype(np.int64)
    data, lod = slice_(x.numpy(), x.lod(), off, length)
    assert_result(la.sequence_slice(on_backend(x, backend), on_backend(off, backend),
                                    on_backend(length, backend)), data, lod, backend)


def test_slice_errors():
    x = la.LoDTensor(np.arange(5.0), lengths=[[2, 3]])
    with pytest.raises(LoDError, match=r"sequence_slice: input must have at least 1 LoD "
                                       r"level\(s\), got 0"):
        la.sequence_slice(np.arange(5.0), [0], [1])
    for exc in (ValueError, IndexError):
        with pytest.raises(exc, match=r"offset\[1\] = -1 is negative"):
            la.sequence_slice(x, [0, -1], [1, 1])
        with pytest.raises(exc, match=r"length\[0\] = -2 is negative"):
            la.sequence_slice(x, [0, 0], [-2, 1])
    with pytest.raises(IndexError, match=r"sequence 1 has 3 rows, but offset\[1\] \+ "
                                         r"length\[1\] = 2 \+ 2 runs past its end"):
        la.sequence_slice(x, [0, 2], [2, 2])
    with pytest.raises(IndexError, match=r"sequence 0 has 2 rows, but offset\[0\] \+ "
                                         r"length\[0\] = 3 \+ 0"):
        la.sequence_slice(x, [3, 0], [0, 0])
    with pytest.raises(IndexError, match="runs past its end"):
        big = np.iinfo(np.int64).max
        la.sequence_slice(x, [1, 0], [big, 0])
    with pytest.raises(ValueError, match="offset has 3 entries but input has 2 sequences"):
        la.sequence_slice(x, [0, 0, 0], [0, 0])
    with pytest.raises(ValueError, match="length has 1 entries but input has 2 sequences"):
        la.sequence_slice(x, [0, 0], [0])
    with pytest.raises(TypeError, match="offset must hold integers"):
        la.sequence_slice(x, [0.0, 1.0], [0, 0])
    with pytest.raises(ValueError, match=r"length must be 1-D \(or of shape \(n, 1\)\)"):
        la.sequence_slice(x, [0, 0], [[0, 0]])


@cuda_only
def test_mixed_devices(backend):
    x = la.LoDTensor(np.arange(5.0), lengths=[[2, 3]])
    with pytest.raises(ValueError, match="different devices"):
        la.sequence_slice(x, on_backend(np.array([0, 0]), "cuda"), [1, 1])
    with pytest.raises(ValueError, match="different devices"):
        la.sequence_concat([x, x.cuda()])


def test_arrow_inputs():
    from reference_gather import arrow_lists

    a = arrow_lists(np.array([1.0, 2.0, 3.0]), [0, 2, 3])
    b = la.LoDTensor(np.array([4.0]), lengths=[[0, 1]])
    out = la.sequence_concat([a, b])
    assert out.numpy().tolist() == [1.0, 2.0, 3.0, 4.0] and out.lod() == [[0, 2, 4]]
    out = la.sequence_slice(a, [1, 0], [1, 1])
    assert out.numpy().tolist() == [2.0, 3.0] and out.lod() == [[0, 1, 2]]


@threaded
@pytest.mark.parametrize("layout", ["many", pytest.param("few", id="few-odd-chunks")])
@pytest.mark.parametrize("dtype, fshape", [("bool", ()), ("int8", ()), ("int16", ()),
                                           ("float32", ()), ("float64", ()), ("int8", (3,)),
                                           ("float16", (5,)), ("float32", (16,))])
def test_large_all_row_widths(backend, threads, layout, dtype, fshape):
    # Narrow rows take the kernels' word and 32-byte-piece paths; several threads and
    # chunks check that no copy spills into another chunk's (or input's) rows.
    rng = np.random.default_rng(len(fshape) * 10 + (threads or 0))
    if layout == "many":
        n = 20000
        lens = [rng.geometric(1 / 8, size=n) - 1 for _ in range(3)]
    else:  # 11 long sequences: 3 and 7 threads both cut them into 11 chunks
        n = 11
        lens = [threaded_lengths(rng, parallel_min_work() * 5 // 4, "few") for _ in range(3)]
    ts = [la.LoDTensor((rng.standard_normal((int(ln.sum()), *fshape)) * 50).astype(dtype),
                       lengths=[ln]) for ln in lens]
    parts = [np.split(t.numpy(), np.cumsum(ln)[:-1]) for t, ln in zip(ts, lens)]
    expected = np.concatenate([np.zeros((0, *fshape), dtype)]
                              + [p[i] for i in range(n) for p in parts])
    out = la.sequence_concat([on_backend(t, backend) for t in ts])
    assert_result(out, expected, [np.concatenate([[0], np.cumsum(sum(lens))]).tolist()],
                  backend)
    # Slices keep most of each sequence, so that the output is above the threading threshold.
    x, seq_len = ts[0], lens[0]
    off = np.minimum(rng.integers(0, 3, n), seq_len)
    length = np.maximum(seq_len - off - rng.integers(0, 3, n), 0)
    off[-1], length[-1] = 0, seq_len[-1]  # the last slice reaches the end of the buffer
    assert length.sum() > parallel_min_work()
    expected = np.concatenate([np.zeros((0, *fshape), dtype)]
                              + [p[o:o + k] for p, o, k in zip(parts[0], off, length)])
    out = la.sequence_slice(on_backend(x, backend), on_backend(off, backend),
                            on_backend(length, backend))
    assert_result(out, expected, [np.concatenate([[0], np.cumsum(length)]).tolist()], backend)
