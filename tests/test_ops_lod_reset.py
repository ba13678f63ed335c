"""lod_reset and lod_append (docs/operators.md#lod_reset, #lod_append,
#offsets-for-lod_reset-and-lod_append; Paddle's documented examples first)."""

import numpy as np
import pytest
from conftest import assert_on, cuda_only, on_backend, to_host
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference_gather import assert_result
from strategies import lod_tensors

import lodarrow as la
from lodarrow import LoDError

HSET = settings(suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow, HealthCheck.data_too_large])
INT_DTYPES = ["int8", "uint8", "int16", "uint16", "int32", "int64", "uint32", "uint64"]


def seed_x(backend):
    x = la.create_lod_tensor(np.array([[1.0], [2.0], [3.0], [4.0], [5.0], [6.0]], np.float32),
                             [[2, 3, 1]], la.CPUPlace())
    return on_backend(x, backend)


# ---------------------------------------------------------------- Paddle's documented examples
def test_seed_example_1_target_lod(backend):
    x = seed_x(backend)
    out = la.lod_reset(x, target_lod=[0, 4, 6])
    assert out.recursive_sequence_lengths() == [[4, 2]]
    assert_result(out, to_host(x, backend).numpy(), [[0, 4, 6]], backend)


def test_seed_example_2_plain_y(backend):
    x = seed_x(backend)
    y = on_backend(np.array([[0, 2, 6]], dtype=np.int32), backend)  # y.dims = [1, 3]
    out = la.lod_reset(x, y=y)
    assert out.recursive_sequence_lengths() == [[2, 4]]
    assert_result(out, to_host(x, backend).numpy(), [[0, 2, 6]], backend)


def test_seed_example_3_y_with_lod(backend):
    x = seed_x(backend)
    y = la.create_lod_tensor(np.array([[1.1], [2.1], [3.1], [4.1], [5.1], [6.1]]),
                             [[2, 2], [2, 2, 1, 1]], la.CPUPlace())
    out = la.lod_reset(x, y=on_backend(y, backend))
    assert out.recursive_sequence_lengths() == [[2, 2], [2, 2, 1, 1]]
    assert_result(out, to_host(x, backend).numpy(), [[0, 2, 4], [0, 2, 4, 5, 6]], backend)


def test_seed_code_sample():
    x = la.LoDTensor()
    x.set(np.ones([6]).astype(np.float32), la.CPUPlace())
    y = la.create_lod_tensor(np.ones([6]).astype(np.float32), [[2, 2], [2, 2, 1, 1]],
                             la.CPUPlace())
    res = la.lod_reset(x=x, y=y)
    assert res.lod() == [[0, 2, 4], [0, 2, 4, 5, 6]]
    assert res.shape() == [6]
    assert res.dtype == np.float32
    np.testing.assert_array_equal(res.numpy(), np.ones(6, np.float32))


# ---------------------------------------------------------------- lod_reset behaviour
def test_shares_x_data_and_leaves_inputs_alone(backend):
    data = np.arange(12.0).reshape(6, 2)
    x = on_backend(la.LoDTensor(data, lod=[[0, 2, 2, 3, 4, 5, 6]]), backend)
    before = x.lod()
    target = np.array([0, 3, 6], dtype=np.int64)
    out = la.lod_reset(x, target_lod=target)
    assert out.data is x.data
    assert x.lod() == before
    target[1] = 5  # the caller's array is not the output's LoD
    assert out.lod() == [[0, 3, 6]]
    assert out.place == x.place


def test_replaces_every_level(backend):
    x = on_backend(la.LoDTensor(np.arange(5), lengths=[[1, 2], [2, 0, 3]]), backend)
    out = la.lod_reset(x, target_lod=(0, 5))
    assert_result(out, np.arange(5), [[0, 5]], backend)


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_any_integer_dtype(backend, dtype):
    x = seed_x(backend)
    out = la.lod_reset(x, target_lod=np.array([0, 1, 6], dtype=dtype))
    assert out.lod() == [[0, 1, 6]] and out.data is x.data
    y = on_backend(np.array([0, 5, 6], dtype=dtype), backend)
    out = la.lod_reset(x, y=y)
    assert out.lod() == [[0, 5, 6]] and out.data is x.data


@pytest.mark.parametrize("shape", [(3,), (3, 1), (1, 3)])
def test_plain_y_read_flat(backend, shape):
    y = on_backend(np.array([0, 2, 6], dtype=np.int64).reshape(shape), backend)
    for ref in (y, la.LoDTensor(y)):
        out = la.lod_reset(seed_x(backend), y=ref)
        assert out.lod() == [[0, 2, 6]]
        assert_on(out, backend)


def test_y_takes_priority_over_target_lod(backend):
    y = on_backend(np.array([0, 6], dtype=np.int32), backend)
    out = la.lod_reset(seed_x(backend), y=y, target_lod=[0, 3, 6])
    assert out.lod() == [[0, 6]]
    assert_on(out, backend)


def test_y_with_lod_any_dtype(backend):
    y = on_backend(la.LoDTensor(np.zeros(6, dtype=bool), lengths=[[3, 3]]), backend)
    out = la.lod_reset(seed_x(backend), y=y)
    assert out.lod() == [[0, 3, 6]]
    assert_on(out, backend)


def test_zero_rows_and_name_argument(backend):
    x = on_backend(la.LoDTensor(np.zeros((0, 3), np.float32)), backend)
    out = la.lod_reset(x, target_lod=[0], name="ignored")
    assert_result(out, np.zeros((0, 3), np.float32), [[0]], backend)
    out = la.lod_reset(x, target_lod=[0, 0, 0])
    assert out.lod() == [[0, 0, 0]]


def test_plain_array_and_list_inputs():
    out = la.lod_reset(np.arange(4.0), y=[0, 1, 4])
    assert out.lod() == [[0, 1, 4]]
    out = la.lod_reset([[1, 2], [3, 4]], target_lod=[0, 2])
    assert out.lod() == [[0, 2]] and out.shape() == [2, 2]


def test_read_only_inputs():
    data = np.arange(6.0)
    data.flags.writeable = False
    target = np.array([0, 2, 6])
    target.flags.writeable = False
    out = la.lod_reset(la.LoDTensor(data), target_lod=target)
    assert out.lod() == [[0, 2, 6]] and out.data is data


@HSET
@given(t=lod_tensors(max_levels=3), data=st.data())
def test_random_target_lod(backend, t, data):
    rows = t.data.shape[0]
    cuts = sorted(data.draw(st.lists(st.integers(0, rows), max_size=6)))
    target = [0] + cuts + [rows]
    out = la.lod_reset(on_backend(t, backend), target_lod=target)
    assert_result(out, t.data, [target], backend)


# ---------------------------------------------------------------- lod_reset errors
def test_both_none_is_type_error():
    x = seed_x("cpu")
    with pytest.raises(TypeError, match="y and target_lod should not be both none"):
        la.lod_reset(x)
    with pytest.raises(ValueError, match="both none"):  # Paddle's Python layer
        la.lod_reset(x, None, None)


@pytest.mark.parametrize("kw", ["target_lod", "y"])
def test_lengths_instead_of_offsets_suggests_offsets(kw):
    value = [4, 2] if kw == "target_lod" else np.array([4, 2], dtype=np.int32)
    with pytest.raises(LoDError, match=r"offsets starting at 0.*\[4, 2\].*\[0, 4, 6\]"):
        la.lod_reset(seed_x("cpu"), **{kw: value})


def test_suggestion_is_abbreviated_and_skipped_for_negative_values():
    x = la.LoDTensor(np.zeros(20))
    with pytest.raises(LoDError, match=r"\[0, 1, 2, 3, 4, 5, 6, 7, \.\.\.\]"):
        la.lod_reset(x, target_lod=[1] * 20)
    with pytest.raises(LoDError, match=r"starting at -1$"):
        la.lod_reset(x, target_lod=[-1, 20])


@pytest.mark.parametrize("target, match", [
    ([0, 4, 3, 6], r"non-decreasing; first violation at position 2 \(4 > 3\)"),
    ([0, 4, 5], "ends at 5 but x has 6 rows"),
    ([0, 4, 7], "ends at 7 but x has 6 rows"),
    ([], "target_lod is empty"),
    ([0], "ends at 0 but x has 6 rows"),
])
def test_invalid_target_lod(target, match):
    with pytest.raises(LoDError, match=match):
        la.lod_reset(seed_x("cpu"), target_lod=target)


def test_invalid_plain_y_names_y():
    with pytest.raises(LoDError, match=r"lod_reset: .*y must be non-decreasing"):
        la.lod_reset(seed_x("cpu"), y=np.array([0, 5, 4, 6]))


@pytest.mark.parametrize("bad", [[0.0, 6.0], np.array([0, 6], dtype=np.float32),
                                 np.array([0, 6], dtype=bool)])
def test_float_offsets_are_type_errors(bad):
    with pytest.raises(TypeError, match="target_lod must be a flat sequence of integer"):
        la.lod_reset(seed_x("cpu"), target_lod=bad)
    with pytest.raises(TypeError, match="y must be an integer tensor of offsets"):
        la.lod_reset(seed_x("cpu"), y=np.asarray(bad))


def test_target_lod_must_be_flat():
    with pytest.raises(ValueError, match=r"target_lod must be flat \(1-D offsets\)"):
        la.lod_reset(seed_x("cpu"), target_lod=[[0, 6]])
    with pytest.raises(ValueError, match="flat sequence"):
        la.lod_reset(seed_x("cpu"), target_lod=[[0, 6], [0]])


def test_uint64_offset_too_large():
    with pytest.raises(ValueError, match="does not fit int64"):
        la.lod_reset(seed_x("cpu"), target_lod=np.array([0, 2**63 + 1], dtype=np.uint64))


def test_y_lod_must_end_at_x_rows():
    y = la.LoDTensor(np.zeros(5), lengths=[[2, 3]])
    with pytest.raises(LoDError, match=r"lod_reset: y's LoD \(last level\) ends at 5 but x has "
                                       r"6 rows"):
        la.lod_reset(seed_x("cpu"), y=y)


def test_bad_x():
    with pytest.raises(TypeError, match="x must be a LoDTensor"):
        la.lod_reset(object(), target_lod=[0])
    with pytest.raises(ValueError, match="x is an empty LoDTensor"):
        la.lod_reset(la.LoDTensor(), target_lod=[0])


@cuda_only
def test_mixed_devices(backend):
    with pytest.raises(ValueError, match="different devices"):
        la.lod_reset(seed_x("cpu"), y=on_backend(np.array([0, 6]), "cuda"))
    with pytest.raises(ValueError, match="different devices"):
        la.lod_append(seed_x("cuda"), np.array([0, 6]))


# ---------------------------------------------------------------- lod_append
def test_append_to_plain_tensor(backend):
    x = on_backend(la.LoDTensor(np.arange(6.0)), backend)
    out = la.lod_append(x, [0, 1, 3, 6])
    assert_result(out, np.arange(6.0), [[0, 1, 3, 6]], backend)
    assert out.data is x.data


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_append_under_existing_levels(backend, dtype):
    x = on_backend(la.LoDTensor(np.arange(6.0), lod=[[0, 2, 6]]), backend)
    level = on_backend(np.array([0, 0, 2, 3, 4, 5, 6], dtype=dtype), backend)
    out = la.lod_append(x, level)
    assert_result(out, np.arange(6.0), [[0, 2, 6], [0, 0, 2, 3, 4, 5, 6]], backend)
    out2 = la.lod_append(la.lod_append(la.LoDTensor(np.arange(3)), [0, 3]), [0, 1, 1, 3])
    assert out2.lod() == [[0, 3], [0, 1, 1, 3]]
    assert x.lod() == [[0, 2, 6]]


def test_append_plain_tensor_level_is_read_flat(backend):
    x = on_backend(la.LoDTensor(np.arange(6.0)), backend)
    level = on_backend(np.array([[0, 2, 6]], dtype=np.int32), backend)
    assert la.lod_append(x, level).lod() == [[0, 2, 6]]
    level_t = on_backend(la.LoDTensor(np.array([[0], [6]])), backend)
    assert la.lod_append(x, level_t).lod() == [[0, 6]]


def test_append_lodtensor_level_with_lod_replaces(backend):
    x = on_backend(la.LoDTensor(np.arange(6.0), lod=[[0, 2, 6]]), backend)
    y = on_backend(la.LoDTensor(np.zeros(6), lengths=[[1, 1], [3, 3]]), backend)
    assert la.lod_append(x, y).lod() == [[0, 1, 2], [0, 3, 6]]


def test_append_private_copy_of_level():
    level = np.array([0, 2, 6])
    out = la.lod_append(la.LoDTensor(np.arange(6)), level)
    level[1] = 4
    assert out.lod() == [[0, 2, 6]]


@pytest.mark.parametrize("level", [None, 3, 2.0, np.int64(3)])
def test_append_level_missing_or_scalar(level):
    with pytest.raises(TypeError, match="lod_append: level must be offsets"):
        la.lod_append(la.LoDTensor(np.arange(3)), level)
    with pytest.raises(ValueError, match="level must be offsets"):  # as Paddle's
        la.lod_append(la.LoDTensor(np.arange(3)), level)


@pytest.mark.parametrize("level, exc, match", [
    ([1, 1, 1, 1, 1, 1], LoDError, r"offsets starting at 0.*\[0, 1, 2, 3, 4, 5, 6\]"),
    ([0, 3, 2, 6], LoDError, "level must be non-decreasing; first violation at position 2"),
    ([0, 2, 5], LoDError, "level ends at 5 but x has 6 rows"),
    ([], LoDError, "level is empty"),
    ([[0, 6]], ValueError, r"level must be flat \(1-D offsets\)"),
    ([0.0, 6.0], TypeError, "level must be a flat sequence of integer offsets"),
    (np.array([0.0, 6.0]), TypeError, "level must be an integer tensor of offsets"),
])
def test_append_invalid_level(level, exc, match):
    with pytest.raises(exc, match=match):
        la.lod_append(la.LoDTensor(np.arange(6.0)), level)


def test_append_level_must_chain_with_x_levels():
    x = la.LoDTensor(np.arange(6.0), lengths=[[1, 1], [2, 4]])
    with pytest.raises(LoDError, match=r"x's last LoD level \(level 1\) ends at 6, so the "
                                       r"appended level must have 6 sequences \(7 offsets\), "
                                       r"got 3 sequences"):
        la.lod_append(x, [0, 1, 3, 6])


def test_append_lodtensor_level_must_end_at_rows():
    with pytest.raises(LoDError, match="lod_append: level's LoD .* ends at 4 but x has 6 rows"):
        la.lod_append(la.LoDTensor(np.arange(6.0)), la.LoDTensor(np.zeros(4), lod=[[0, 4]]))


@HSET
@given(t=lod_tensors(max_levels=2), data=st.data())
def test_append_random(backend, t, data):
    rows = t.data.shape[0]
    if t.lod_level:
        n_seq = rows  # x's last level ends at rows: the new level needs one sequence per row
    else:
        n_seq = data.draw(st.integers(1 if rows else 0, 5))
    if n_seq == 0:
        level = [0]
    else:
        cuts = data.draw(st.lists(st.integers(0, rows), min_size=n_seq - 1, max_size=n_seq - 1))
        level = [0] + sorted(cuts) + [rows]
    out = la.lod_append(on_backend(t, backend), level)
    assert_result(out, t.data, t.lod() + [level], backend)


def test_arrow_inputs():
    from reference_gather import arrow_lists

    x = arrow_lists(np.arange(6.0), [0, 2, 6])
    out = la.lod_reset(x, target_lod=[0, 1, 6])
    assert out.lod() == [[0, 1, 6]] and out.numpy().tolist() == list(range(6))
    y = arrow_lists(np.zeros(6), [0, 1, 2], [0, 3, 6])
    assert la.lod_reset(x, y=y).lod() == [[0, 1, 2], [0, 3, 6]]
    assert la.lod_append(x, [0, 1, 2, 3, 4, 5, 6]).lod() == [[0, 2, 6], [0, 1, 2, 3, 4, 5, 6]]
