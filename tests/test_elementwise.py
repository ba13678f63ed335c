"""Elementwise math on LoDTensors: ufuncs and operators keep the LoD; reductions refuse."""

import operator

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import lodarrow as la
from lodarrow import LoDError
from conftest import on_backend, to_host


def _t(backend="cpu", dtype=np.float64, features=(2,)):
    rows = 5
    data = (np.arange(rows * int(np.prod(features)), dtype=np.float64) - 3).astype(dtype)
    return on_backend(la.LoDTensor(data.reshape((rows,) + features),
                                   lengths=[[2, 1], [2, 0, 3]]), backend)


def _same_structure(out, t, backend="cpu"):
    out = to_host(out, backend)
    assert isinstance(out, la.LoDTensor)
    assert out.lod() == t.lod()
    return out.data


def _assert_matches(got, want, backend):
    """``got`` equals NumPy's ``want``: exactly on the CPU; on a GPU, floats within 4 units
    in the last place, as CUDA's math library (exp, pow, sin, log1p ...) may round other
    than the host's by 1-2 ulp (CUDA C++ Programming Guide, mathematical functions); integers,
    bools, NaN and infinities exactly."""
    if backend == "cpu" or np.asarray(want).dtype.kind != "f":
        np.testing.assert_array_equal(got, want)
        return
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    np.testing.assert_array_equal(got[np.isinf(got)], want[np.isinf(want)])
    finite = np.isfinite(want)
    np.testing.assert_array_max_ulp(got[finite], want[finite], maxulp=4)


UNARY = [np.exp, np.negative, np.absolute, np.sqrt, np.sin, np.isnan, np.floor, np.square,
         np.sign, np.log1p]


@pytest.mark.parametrize("ufunc", UNARY, ids=lambda u: u.__name__)
@pytest.mark.parametrize("features", [(), (2,), (2, 3)])
def test_unary_ufuncs_keep_the_lod(backend, ufunc, features):
    t = _t(backend, features=features)
    with np.errstate(invalid="ignore", divide="ignore"):
        got = _same_structure(ufunc(t), t, backend)
        want = ufunc(to_host(t, backend).data)
    _assert_matches(got, want, backend)
    assert got.dtype == want.dtype


OPS = [operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv,
       operator.mod, operator.pow, operator.lt, operator.le, operator.gt, operator.ge]


@pytest.mark.parametrize("op", OPS, ids=lambda o: o.__name__)
@pytest.mark.parametrize("other", [2, 2.5, np.float32(3), np.array([1.0, 2.0]),
                                   np.array(4.0)], ids=["int", "float", "np32", "row", "0d"])
def test_operators_with_scalars_and_rows(backend, op, other):
    t = _t(backend)
    host = to_host(t, backend).data
    with np.errstate(all="ignore"):
        _assert_matches(_same_structure(op(t, other), t, backend), op(host, other), backend)
        _assert_matches(_same_structure(op(other, t), t, backend), op(other, host), backend)


@pytest.mark.parametrize("op", OPS + [operator.and_, operator.or_, operator.xor,
                                      operator.lshift, operator.rshift],
                         ids=lambda o: o.__name__)
def test_operators_between_tensors_with_equal_lods(backend, op):
    t = _t(backend, dtype=np.int64)
    u = on_backend(la.LoDTensor(np.full((5, 2), 3, dtype=np.int64), t.lod()), backend)
    host_t, host_u = to_host(t, backend).data, to_host(u, backend).data
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(_same_structure(op(t, u), t, backend), op(host_t, host_u))


def test_unary_operators(backend):
    t = _t(backend, dtype=np.int32)
    host = to_host(t, backend).data
    np.testing.assert_array_equal(_same_structure(-t, t, backend), -host)
    np.testing.assert_array_equal(_same_structure(+t, t, backend), +host)
    np.testing.assert_array_equal(_same_structure(abs(t), t, backend), abs(host))
    np.testing.assert_array_equal(_same_structure(~t, t, backend), ~host)
    q, r = divmod(t, 2)
    np.testing.assert_array_equal(_same_structure(q, t, backend), host // 2)
    np.testing.assert_array_equal(_same_structure(r, t, backend), host % 2)


def test_comparisons_give_bool_tensors():
    t = _t()
    assert (t > 0).dtype == np.bool_ and (t > 0).lod() == t.lod()
    assert np.equal(t, -3.0).data[0].tolist() == [True, False]


def test_feature_broadcast_between_tensors():
    t = _t(features=(2,))
    col = la.LoDTensor(np.arange(5.0), t.lod())  # one value per row broadcasts over features
    got = _same_structure(t * col, t)
    np.testing.assert_array_equal(got, t.data * np.arange(5.0)[:, None])


@given(st.lists(st.integers(0, 4), min_size=0, max_size=6),
       st.sampled_from([np.add, np.multiply, np.maximum, np.hypot, np.arctan2]),
       st.floats(-5, 5))
def test_hypothesis_binary_matches_numpy(lengths, ufunc, scalar):
    rows = sum(lengths)
    x = np.linspace(-2, 2, rows * 3).reshape(rows, 3)
    t = la.LoDTensor(x, lengths=[lengths])
    np.testing.assert_array_equal(_same_structure(ufunc(t, scalar), t), ufunc(x, scalar))
    np.testing.assert_array_equal(_same_structure(ufunc(t, t), t), ufunc(x, x))


def test_out_argument():
    t = _t()
    out = la.LoDTensor(np.empty((5, 2)), t.lod())
    assert np.add(t, 1, out=out) is out
    np.testing.assert_array_equal(out.data, t.data + 1)
    with pytest.raises(TypeError, match=r"out\[0\] must be a LoDTensor"):
        np.add(t, 1, out=np.empty((5, 2)))


def test_different_lods_name_the_first_difference():
    t = _t()
    u = la.LoDTensor(t.data.copy(), lengths=[[2, 1], [2, 1, 2]])
    with pytest.raises(LoDError, match=r"np\.add: the LoDTensors must have equal LoDs, but "
                                       r"left\.lod\[1\] and right\.lod\[1\] first differ at "
                                       r"position 2 \(2 vs 3\)"):
        t + u
    v = la.LoDTensor(t.data.copy(), lengths=[[5]])
    with pytest.raises(LoDError, match="left has 2 LoD level.* right has 1"):
        np.multiply(t, v)
    w = la.LoDTensor(t.data.copy(), lengths=[[2, 1, 0], [2, 0, 3]])
    with pytest.raises(LoDError, match=r"lod\[0\] .* differ in length \(3 vs 4 offsets\)"):
        t - w


def test_arrays_must_not_broadcast_along_rows():
    t = _t()
    with pytest.raises(ValueError, match=r"right of shape \(5, 2\) does not broadcast to the "
                                         r"feature shape \(2,\)"):
        t + np.ones((5, 2))
    with pytest.raises(ValueError, match=r"left of shape \(5,\) does not broadcast"):
        np.arange(5.0) * la.LoDTensor(np.arange(5.0), [[0, 5]])
    with pytest.raises(TypeError, match="right must be numeric"):
        t + "a"


@pytest.mark.parametrize("call, hint", [
    (np.sum, "sequence_pool\\(t, 'sum'\\)"),
    (np.mean, "sequence_pool\\(t, 'average'\\)"),
    (np.max, "sequence_pool\\(t, 'max'\\)"),
    (np.min, "sequence_pool\\(t, 'min'\\)"),
    (np.std, "sequence_pool"),
    (np.cumsum, "sequence_pool"),
    (np.median, "sequence_pool"),
    (np.add.reduce, "sequence_pool\\(t, 'sum'\\)"),
    (np.add.accumulate, "sequence_pool"),
    (lambda t: np.add.reduceat(t, [0, 2]), "sequence_pool"),
    (lambda t: np.multiply.outer(t, t), "sequence_pool"),
    (lambda t: np.add.at(t, [0], 1), "sequence_pool"),
    (np.maximum.reduce, "sequence_pool\\(t, 'max'\\)"),
])
def test_reductions_point_to_sequence_pool(call, hint):
    with pytest.raises(TypeError, match=f"not elementwise.*{hint}"):
        call(_t())


def test_whole_axis_ufuncs_refuse():
    with pytest.raises(TypeError, match="np.matmul works on whole axes"):
        np.matmul(_t(), np.ones((2, 2)))


def test_results_of_unsupported_dtypes_refuse():
    with pytest.raises(TypeError, match="dtype complex128 is not supported"):
        _t() * 1j


def test_equality_stays_whole_tensor():
    t = _t()
    assert (t == t.take(np.arange(len(t)))) is True and (t != t) is False
    assert (t == np.float64(-3.0)) is False  # not NumPy's elementwise equal
    assert np.equal(t, -3.0).lod() == t.lod()  # that one is asked for by name


def test_other_numpy_functions_still_see_the_rows():
    t = _t()
    assert np.concatenate([t, t]).shape == (10, 2)
    assert np.array_equal(t, t.data) and np.array(t).sum() == t.data.sum()


def test_invalid_structure_is_not_computed_on():
    t = la.LoDTensor()
    t.set(np.zeros((5, 1)), la.CPUPlace())
    t.set_lod([[0, 2, 5]])
    t.set(np.zeros((4, 1)), la.CPUPlace())
    with pytest.raises(LoDError, match="ends at 5 but the data has 4 rows"):
        t + 1
