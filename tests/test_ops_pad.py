"""sequence_pad and sequence_unpad against the oracles in reference_layout.py."""

import numpy as np
import pyarrow as pa
import pytest
from conftest import (ALL_DTYPES, SEQUENCE_LAYOUTS, cuda_only, on_backend, parallel_min_work,
                      threaded, threaded_lengths, to_host)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference_layout import ref_pad, ref_unpad
from strategies import lod_tensors, values

import lodarrow as la
from lodarrow import LoDError

# The backend fixture is a constant string, so sharing it across examples is safe.
backend_ok = settings(suppress_health_check=[*settings.default.suppress_health_check,
                                             HealthCheck.function_scoped_fixture])


def _same_lod_tensor(t, data, lod, backend):
    t = to_host(t, backend)
    assert t.dtype == data.dtype
    assert t.numpy().shape == data.shape
    np.testing.assert_array_equal(t.numpy(), data)
    assert t.lod() == lod


# ------------------------------------------------------------------ Paddle's doc examples

def test_pad_doc_case1(backend):
    # x.lod = [[0, 2, 5]], x.data = [[a],[b],[c],[d],[e]], pad_value = [0], maxlen = 4
    x = la.LoDTensor(np.array([[1.0], [2.0], [3.0], [4.0], [5.0]], dtype=np.float32),
                     lod=[[0, 2, 5]])
    out, length = la.sequence_pad(on_backend(x, backend),
                                  np.array([0.0], dtype=np.float32), maxlen=4)
    _same_lod_tensor(out, np.array([[[1], [2], [0], [0]], [[3], [4], [5], [0]]],
                                   dtype=np.float32), [], backend)
    _same_lod_tensor(length, np.array([2, 3], dtype=np.int64), [], backend)
    assert out.place == on_backend(x, backend).place


def test_pad_doc_case2_and_3(backend):
    # 2-wide rows, maxlen=-1 (longest); pad_value [0] broadcast, then [p1, p2] per feature
    data = np.array([[1, 2], [3, 4], [5, 6], [7, 8], [9, 10]], dtype=np.float64)
    x = on_backend(la.LoDTensor(data, lod=[[0, 2, 5]]), backend)
    out, length = la.sequence_pad(x, np.array([0.0]), maxlen=-1)
    _same_lod_tensor(out, np.array([[[1, 2], [3, 4], [0, 0]],
                                    [[5, 6], [7, 8], [9, 10]]], dtype=np.float64), [], backend)
    out, _ = la.sequence_pad(x, np.array([-1.0, -2.0]))
    _same_lod_tensor(out, np.array([[[1, 2], [3, 4], [-1, -2]],
                                    [[5, 6], [7, 8], [9, 10]]], dtype=np.float64), [], backend)
    _same_lod_tensor(length, np.array([2, 3]), [], backend)


def test_unpad_doc_example(backend):
    x = np.arange(1.0, 16.0, dtype=np.float32).reshape(3, 5)
    out = la.sequence_unpad(on_backend(x, backend), on_backend(np.array([2, 3, 4]), backend))
    # Paddle's docs show a flat list; its kernel gives [sum, 1] (docs/operators.md#sequence_pad).
    _same_lod_tensor(out, np.array([[1], [2], [6], [7], [8], [11], [12], [13], [14]],
                                   dtype=np.float32), [[0, 2, 5, 9]], backend)


# ------------------------------------------------------------------ against the oracle

@st.composite
def pad_cases(draw):
    t = draw(lod_tensors(min_levels=1, max_levels=3))
    lens = np.diff(t.offsets[-1])
    longest = int(lens.max()) if lens.size else 0
    maxlen = draw(st.one_of(st.none(), st.integers(longest, longest + 3)))
    pad = draw(values(t.dtype, ()))
    return t, maxlen, pad


@backend_ok
@given(pad_cases())
def test_pad_matches_reference(backend, case):
    t, maxlen, pad = case
    out, length = la.sequence_pad(on_backend(t, backend), pad, maxlen=maxlen)
    ref, ref_len, outer = ref_pad(t.numpy(), t.lod(), pad, maxlen)
    _same_lod_tensor(out, ref, outer, backend)
    _same_lod_tensor(length, ref_len, outer, backend)
    # unpad inverts pad, outer levels included
    back = la.sequence_unpad(out, length)
    expect = t.numpy().reshape(-1, 1) if t.numpy().ndim == 1 else t.numpy()
    _same_lod_tensor(back, expect, t.lod(), backend)


@backend_ok
@given(st.sampled_from(ALL_DTYPES), st.sampled_from([(), (2,), (2, 3)]),
       st.lists(st.integers(0, 4), max_size=6), st.integers(0, 2), st.data())
def test_unpad_matches_reference(backend, dtype, fshape, lens, extra, data):
    padded = (max(lens) if lens else 0) + extra
    x = data.draw(values(dtype, (len(lens), padded, *fshape)))
    dtype_len = data.draw(st.sampled_from(["int8", "uint8", "int32", "int64", "uint64"]))
    length = np.array(lens, dtype=dtype_len)
    if data.draw(st.booleans()):
        length = length.reshape(-1, 1)
    out = la.sequence_unpad(on_backend(x, backend), on_backend(length, backend))
    ref, offsets = ref_unpad(x, lens)
    _same_lod_tensor(out, ref, [offsets], backend)


# ------------------------------------------------------------------ pad: edges

def test_pad_every_dtype_and_rank1(backend, any_dtype):
    data = np.array([1, 0, 1], dtype=any_dtype)
    x = on_backend(la.LoDTensor(data, lod=[[0, 1, 1, 3]]), backend)
    out, length = la.sequence_pad(x, 0, maxlen=3)
    expect = np.array([[1, 0, 0], [0, 0, 0], [0, 1, 0]], dtype=any_dtype)
    _same_lod_tensor(out, expect, [], backend)
    _same_lod_tensor(length, np.array([1, 0, 2], dtype=np.int64), [], backend)


def test_pad_multi_level_keeps_outer_lod(backend):
    x = la.LoDTensor(np.arange(7, dtype=np.int32), lod=[[0, 2, 3], [0, 2, 2, 7]])
    out, length = la.sequence_pad(on_backend(x, backend), -1)
    _same_lod_tensor(out, np.array([[0, 1, -1, -1, -1], [-1] * 5, [2, 3, 4, 5, 6]],
                                   dtype=np.int32), [[0, 2, 3]], backend)
    _same_lod_tensor(length, np.array([2, 0, 5]), [[0, 2, 3]], backend)


def test_pad_zero_sequences_and_all_empty(backend):
    x = la.LoDTensor(np.zeros((0, 2), dtype=np.float32), lod=[[0]])
    out, length = la.sequence_pad(on_backend(x, backend), 0.0)
    assert to_host(out, backend).numpy().shape == (0, 0, 2)
    assert to_host(length, backend).numpy().shape == (0,)
    x = la.LoDTensor(np.zeros((0, 2), dtype=np.float32), lod=[[0, 0, 0]])
    out, length = la.sequence_pad(on_backend(x, backend), 7.0, maxlen=2)
    _same_lod_tensor(out, np.full((2, 2, 2), 7.0, dtype=np.float32), [], backend)
    out, _ = la.sequence_pad(on_backend(x, backend), 7.0)
    assert to_host(out, backend).numpy().shape == (2, 0, 2)


def test_pad_value_is_exact(backend):
    # Paddle rounds through float32 (0.10000000149); lodarrow converts directly.
    x = on_backend(la.LoDTensor(np.ones(1), lod=[[0, 1, 1]]), backend)
    out, _ = la.sequence_pad(x, 0.1)
    assert to_host(out, backend).numpy()[1, 0] == 0.1
    big = 2**62 + 1
    out, _ = la.sequence_pad(on_backend(la.LoDTensor(np.ones(1, np.int64), lod=[[0, 1, 1]]),
                                        backend), big)
    assert int(to_host(out, backend).numpy()[1, 0]) == big


def test_pad_wide_rows_and_strided_inputs(backend):
    base = np.arange(5 * 7 * 3, dtype=np.float64).reshape(5, 7, 3)
    strided = base[:, ::2, :]                      # non-contiguous
    fortran = np.asfortranarray(base[:, :4, :])    # Fortran-ordered
    readonly = base[:, :4, :].copy()
    readonly.flags.writeable = False
    pad = np.arange(12.0).reshape(4, 3)
    for data in (strided, fortran, readonly):
        x = on_backend(la.LoDTensor(data, lod=[[0, 3, 3, 5]]), backend)
        before = data.copy()
        out, _ = la.sequence_pad(x, pad, maxlen=4)
        ref, _, _ = ref_pad(data, [[0, 3, 3, 5]], pad, 4)
        _same_lod_tensor(out, ref, [], backend)
        np.testing.assert_array_equal(data, before)


def test_pad_value_forms(backend):
    x = on_backend(la.LoDTensor(np.ones((2, 2), np.float32), lod=[[0, 2, 2]]), backend)
    for pad in (3, 3.0, np.float32(3), np.array(3.0, np.float32), np.array([3], np.int16),
                np.array([3.0, 3.0], np.float32)):
        out, _ = la.sequence_pad(x, pad)
        np.testing.assert_array_equal(to_host(out, backend).numpy()[1], np.full((2, 2), 3.0))


def test_pad_large_maxlen_within_budget(backend):
    x = on_backend(la.LoDTensor(np.ones(3, np.int8), lod=[[0, 1, 3]]), backend)
    out, _ = la.sequence_pad(x, 0, maxlen=1000)
    assert to_host(out, backend).numpy().shape == (2, 1000)
    assert int(to_host(out, backend).numpy().sum()) == 3


def test_pad_accepts_name_and_does_not_modify_input(backend):
    data = np.arange(4.0)
    x = on_backend(la.LoDTensor(data, lod=[[0, 1, 4]]), backend)
    la.sequence_pad(x, 0.0, None, "pad")
    np.testing.assert_array_equal(to_host(x, backend).numpy(), np.arange(4.0))
    assert to_host(x, backend).lod() == [[0, 1, 4]]


# ------------------------------------------------------------------ pad: errors

def test_pad_errors(backend):
    x = on_backend(la.LoDTensor(np.ones((5, 1), np.float32), lod=[[0, 2, 5]]), backend)
    with pytest.raises(LoDError, match="sequence_pad: x must have at least 1 LoD level"):
        la.sequence_pad(on_backend(np.ones((5, 1), np.float32), backend), 0.0)
    with pytest.raises(ValueError, match=r"maxlen=2 is shorter than the longest sequence "
                                         r"of x \(sequence 1 has 3 rows\)"):
        la.sequence_pad(x, 0.0, maxlen=2)
    with pytest.raises(ValueError, match="maxlen must be None, -1 or >= 0, got -2"):
        la.sequence_pad(x, 0.0, maxlen=-2)
    with pytest.raises(ValueError, match=r"maxlen=1000000000000000 would make an output"):
        la.sequence_pad(x, 0.0, maxlen=10**15)
    with pytest.raises(TypeError, match="maxlen must be an integer"):
        la.sequence_pad(x, 0.0, maxlen=3.0)
    with pytest.raises(ValueError, match=r"pad_value must have shape \(\), \(1,\) or the "
                                         r"feature shape"):
        la.sequence_pad(x, np.zeros(3, np.float32))
    with pytest.raises(TypeError, match="cannot be cast safely"):
        la.sequence_pad(x, np.array([0.0]))  # float64 -> float32
    xi = on_backend(la.LoDTensor(np.ones(3, np.int32), lod=[[0, 3]]), backend)
    with pytest.raises(TypeError, match="is not integral"):
        la.sequence_pad(xi, 0.5)
    with pytest.raises(TypeError, match="out of range"):
        la.sequence_pad(xi, 2**40)


def test_pad_huge_maxlen_on_empty_input_is_value_error(backend):
    x = on_backend(la.LoDTensor(np.ones((0, 1), np.float32), lod=[[0]]), backend)
    with pytest.raises(ValueError, match="far beyond what the data needs"):
        la.sequence_pad(x, 0.0, maxlen=10**15)


# ------------------------------------------------------------------ unpad: edges

def test_unpad_all_zero_lengths_is_empty(backend):
    x = on_backend(np.ones((3, 4, 2), np.float32), backend)
    out = la.sequence_unpad(x, on_backend(np.zeros(3, np.int64), backend))
    _same_lod_tensor(out, np.zeros((0, 2), np.float32), [[0, 0, 0, 0]], backend)
    out = la.sequence_unpad(on_backend(np.ones((0, 4), np.int8), backend),
                            on_backend(np.zeros(0, np.int32), backend))
    _same_lod_tensor(out, np.zeros((0, 1), np.int8), [[0]], backend)


def test_unpad_lists_readonly_strided_fortran(backend):
    base = np.arange(4 * 6 * 2, dtype=np.int16).reshape(4, 6, 2)
    readonly = base.copy()
    readonly.flags.writeable = False
    for data in (base[:, ::2], np.asfortranarray(base), readonly):
        lens = [1, 0, 3, 2]
        out = la.sequence_unpad(on_backend(data, backend), lens)  # a list: either device
        ref, offsets = ref_unpad(data, lens)
        _same_lod_tensor(out, ref, [offsets], backend)


def test_unpad_lod_inputs_carry_outer_levels(backend):
    x = on_backend(la.LoDTensor(np.arange(6.0).reshape(3, 2), lod=[[0, 1, 3]]), backend)
    out = la.sequence_unpad(x, on_backend(np.array([2, 0, 1]), backend))
    _same_lod_tensor(out, np.array([[0.0], [1.0], [4.0]]), [[0, 1, 3], [0, 2, 2, 3]], backend)
    length = on_backend(la.LoDTensor(np.array([2, 0, 1]), lod=[[0, 2, 3]]), backend)
    out = la.sequence_unpad(on_backend(np.arange(6.0).reshape(3, 2), backend), length)
    assert to_host(out, backend).lod() == [[0, 2, 3], [0, 2, 2, 3]]
    with pytest.raises(ValueError, match="x and length carry different LoDs"):
        la.sequence_unpad(x, length)


def test_unpad_errors(backend):
    x = on_backend(np.ones((3, 4), np.float32), backend)

    def on_x(a):  # an array of lengths lives where x does (a list goes with either device)
        return on_backend(a, backend)

    with pytest.raises(ValueError, match=r"x must have rank >= 2 .* got shape \(3,\)"):
        la.sequence_unpad(on_backend(np.ones(3, np.float32), backend), [1, 1, 1])
    with pytest.raises(ValueError, match="length has 2 entries but x has 3 rows"):
        la.sequence_unpad(x, [1, 1])
    with pytest.raises(ValueError, match=r"length\[1\] = -1 is negative"):
        la.sequence_unpad(x, [1, -1, 5])
    with pytest.raises(ValueError, match=r"length\[2\] = 5 exceeds the padded length of x "
                                         r"\(4"):
        la.sequence_unpad(x, [1, 1, 5])
    with pytest.raises(TypeError, match="length must hold integers"):
        la.sequence_unpad(x, on_x(np.array([1.0, 1.0, 1.0])))
    with pytest.raises(ValueError, match="length must be 1-D"):
        la.sequence_unpad(x, on_x(np.ones((3, 2), np.int64)))


@cuda_only
def test_mixed_devices_raise(backend):
    with pytest.raises(ValueError, match="inputs live on different devices"):
        la.sequence_unpad(on_backend(np.ones((2, 2)), backend), np.array([1, 1]))


# ------------------------------------------------------------------ large: threaded chunks

@threaded
@pytest.mark.parametrize("layout", SEQUENCE_LAYOUTS)
@pytest.mark.parametrize("fshape", [(), (3,)])
def test_pad_unpad_threaded_chunks(backend, threads, layout, fshape):
    rng = np.random.default_rng(1)
    lens = threaded_lengths(rng, parallel_min_work() * 5 // 4, layout)
    offsets = np.concatenate([[0], np.cumsum(lens)])
    data = np.arange(offsets[-1] * int(np.prod(fshape)), dtype=np.float32)
    data = data.reshape((offsets[-1], *fshape))
    x = on_backend(la.LoDTensor(data, lod=[offsets]), backend)
    out, length = la.sequence_pad(x, -1.0)
    # ref_pad's loop is slow at this size: row p of sequence i is data or the pad value
    ref = np.full((lens.size, lens.max(), *fshape), -1.0, np.float32)
    ref[np.arange(lens.max()) < lens[:, None]] = data
    _same_lod_tensor(out, ref, [], backend)
    _same_lod_tensor(length, lens.astype(np.int64), [], backend)
    back = la.sequence_unpad(out, length)
    expect = data.reshape(-1, 1) if data.ndim == 1 else data
    _same_lod_tensor(back, expect, [offsets.tolist()], backend)


# ------------------------------------------------------------------ Arrow inputs

def test_pad_unpad_take_arrow_arrays():
    arr = pa.array([[[1, 2], [3]], [], [[4]]], type=pa.large_list(pa.list_(pa.int16())))
    out, length = la.sequence_pad(arr, 0)
    _same_lod_tensor(out, np.array([[1, 2], [3, 0], [4, 0]], np.int16), [[0, 2, 2, 3]], "cpu")
    _same_lod_tensor(length, np.array([2, 1, 1]), [[0, 2, 2, 3]], "cpu")
    back = la.sequence_unpad(out, pa.array([2, 1, 1], type=pa.int8()))
    _same_lod_tensor(back, np.array([[1], [2], [3], [4]], np.int16),
                     [[0, 2, 2, 3], [0, 2, 3, 4]], "cpu")
