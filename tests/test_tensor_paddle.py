"""The Paddle surface of LoDTensor: seeds 001 and 002 verbatim, and Paddle's validity rules."""

import numpy as np
import pytest

import lodarrow as la
from lodarrow import LoDError


# ---------------------------------------------------------------- create_lod_tensor example
def test_seed001_example1_lengths_and_offsets():
    x = la.LoDTensor()
    x.set(np.array([[1, 2], [3, 4], [5, 6], [7, 8], [9, 10]]), la.CPUPlace())
    x.set_recursive_sequence_lengths([[2, 3]])
    assert x.shape() == [5, 2]
    assert x.recursive_sequence_lengths() == [[2, 3]]
    assert x.lod() == [[0, 2, 5]]


def test_seed001_example2_two_levels():
    y = la.LoDTensor()
    y.set(np.array([[1, 2], [3, 4], [5, 6], [7, 8], [9, 10], [11, 12], [13, 14]]), la.CPUPlace())
    y.set_lod([[0, 2, 3], [0, 2, 4, 7]])
    assert y.shape() == [2 + 2 + 3, 2]
    assert y.recursive_sequence_lengths() == [[2, 1], [2, 2, 3]]
    assert y.lod() == [[0, 2, 3], [0, 2, 4, 7]]


def test_seed001_code_sample():
    a = la.create_lod_tensor(np.array([[1], [1], [1],
                                       [1], [1],
                                       [1], [1], [1], [1],
                                       [1],
                                       [1], [1],
                                       [1], [1], [1]]).astype('int64'),
                             [[3, 2, 4, 1, 2, 3]],
                             la.CPUPlace())
    b = la.create_lod_tensor(np.array([[1.], [3.], [2.], [4.], [6.], [5.], [1.]]).astype('float64'),
                             [[2, 0, 3], [1, 2, 1, 0, 3]],
                             la.CPUPlace())
    c = la.create_lod_tensor(np.array([[1.], [3.], [2.], [4.], [6.], [5.], [1.]]).astype('float32'),
                             [[2, 3, 2]],
                             la.CPUPlace())
    assert a.lod() == [[0, 3, 5, 9, 10, 12, 15]]
    assert a.dtype == np.int64 and a.shape() == [15, 1]
    assert len(b.recursive_sequence_lengths()) == 2
    assert b.lod() == [[0, 2, 2, 5], [0, 1, 3, 4, 4, 7]]
    assert len(c.recursive_sequence_lengths()) == 1
    assert c.lod() == [[0, 2, 5, 7]]
    np.testing.assert_array_equal(np.array(c), np.array([[1.], [3.], [2.], [4.], [6.], [5.], [1.]],
                                                        dtype=np.float32))


# ---------------------------------------------------------------- Paddle's LoDTensor examples
def test_seed002_has_valid_recursive_sequence_lengths():
    t = la.LoDTensor()
    t.set(np.ndarray([5, 30]), la.CPUPlace())
    t.set_recursive_sequence_lengths([[2, 3]])
    assert t.has_valid_recursive_sequence_lengths() is True


def test_seed002_lod():
    t = la.LoDTensor()
    t.set(np.ndarray([5, 30]), la.CPUPlace())
    t.set_lod([[0, 2, 5]])
    assert t.lod() == [[0, 2, 5]]


def test_seed002_recursive_sequence_lengths():
    t = la.LoDTensor()
    t.set(np.ndarray([5, 30]), la.CPUPlace())
    t.set_recursive_sequence_lengths([[2, 3]])
    assert t.recursive_sequence_lengths() == [[2, 3]]


def test_seed002_set_and_shape():
    t = la.LoDTensor()
    t.set(np.ndarray([5, 30]), la.CPUPlace())
    assert t.shape() == [5, 30]
    assert t.dtype == np.float64


@pytest.mark.parametrize("dtype", ["bool", "float32", "int32", "float64", "int64", "uint16",
                                   "uint8", "int8", "int16", "float16"])
def test_seed002_set_every_dtype(dtype):
    t = la.LoDTensor()
    arr = np.arange(10).reshape(5, 2).astype(dtype)
    t.set(arr, la.CPUPlace())
    out = np.array(t)
    assert out.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(out, arr)


def test_set_copies_the_array():
    arr = np.zeros((3, 2), dtype=np.float32)
    t = la.LoDTensor()
    t.set(arr, la.CPUPlace())
    arr[0, 0] = 7
    assert np.array(t)[0, 0] == 0


def test_set_keeps_the_lod_and_validity_follows_the_data():
    t = la.LoDTensor()
    t.set(np.zeros((5, 1)), la.CPUPlace())
    t.set_lod([[0, 2, 5]])
    t.set(np.zeros((4, 1)), la.CPUPlace())
    assert t.lod() == [[0, 2, 5]]
    assert t.has_valid_recursive_sequence_lengths() is False
    with pytest.raises(LoDError, match="ends at 5 but its data has 4 rows"):
        la.sequence_reverse(t)


def test_empty_tensor():
    t = la.LoDTensor()
    assert t.lod() == [] and t.recursive_sequence_lengths() == []
    assert t.shape() == []
    assert t.has_valid_recursive_sequence_lengths() is True
    assert np.array(t).shape == (0,)
    assert len(t) == 0


# ---------------------------------------------------------------- validity rules
def _tensor(rows):
    t = la.LoDTensor()
    t.set(np.zeros((rows, 1), dtype=np.float32), la.CPUPlace())
    return t


@pytest.mark.parametrize(
    "lod, rows, match",
    [
        ([[]], 0, r"lod\[0\] is empty"),
        ([[1, 2, 5]], 5, r"lod\[0\] must start at 0, found 1"),
        ([[0, 3, 2, 5]], 5,
         r"lod\[0\] must be non-decreasing; first violation at position 2 \(3 > 2\)"),
        ([[0]], 5, r"ends at 0 but the data has 5 rows"),
        ([[0, 2, 4]], 5, r"ends at 4 but the data has 5 rows"),
        ([[0, 1, 3], [0, 2, 5]], 5, r"lod\[0\] ends at 3 but level 1 has 2 sequences"),
        ([[0, 2], [0, 1, 3], [0, 1, 2, 4]], 5, r"lod\[2\] \(the last level\) ends at 4"),
    ],
)
def test_set_lod_rejects_invalid(lod, rows, match):
    t = _tensor(rows)
    with pytest.raises(LoDError, match=match):
        t.set_lod(lod)
    assert t.lod() == []  # unchanged


@pytest.mark.parametrize(
    "lengths, rows, match",
    [
        ([[2, 2]], 5, r"ends at 4 but the data has 5 rows"),
        ([[1, 1], [2, 2, 1]], 5, r"ends at 2 but level 1 has 3 sequences"),
    ],
)
def test_set_recursive_sequence_lengths_rejects_invalid(lengths, rows, match):
    with pytest.raises(LoDError, match=match):
        _tensor(rows).set_recursive_sequence_lengths(lengths)


def test_negative_lengths_are_type_errors_and_lod_errors():
    t = _tensor(3)
    with pytest.raises(TypeError, match=r"negative length -1 at position 1"):
        t.set_recursive_sequence_lengths([[4, -1]])
    with pytest.raises(LoDError, match="negative"):
        t.set_recursive_sequence_lengths([[4, -1]])
    with pytest.raises(TypeError, match="negative value -2"):
        t.set_lod([[0, -2, 3]])


def test_non_integer_levels_are_type_errors():
    t = _tensor(3)
    with pytest.raises(TypeError, match=r"lod\[0\] must hold integers, got dtype float64"):
        t.set_lod([[0.0, 3.0]])
    with pytest.raises(TypeError, match="flat sequence of integers"):
        t.set_lod([[0, [1, 2]]])
    with pytest.raises(TypeError, match="list of levels"):
        t.set_lod(5)


def test_zero_sequences_and_all_empty_are_valid():
    t = _tensor(0)
    t.set_lod([[0]])
    assert t.has_valid_recursive_sequence_lengths()
    t.set_recursive_sequence_lengths([[0]])
    assert t.lod() == [[0, 0]]
    t.set_recursive_sequence_lengths([[0, 0, 0]])
    assert t.lod() == [[0, 0, 0, 0]]
    t.set_recursive_sequence_lengths([[2, 0], [0, 0]])
    assert t.lod() == [[0, 2, 2], [0, 0, 0]]
    t.set_recursive_sequence_lengths([[1], [0], []])
    assert t.lod() == [[0, 1], [0, 0], [0]]


def test_empty_lod_means_plain_tensor():
    t = _tensor(3)
    t.set_lod([[0, 3]])
    t.set_lod([])
    assert t.lod() == [] and t.lod_level == 0


def test_has_valid_never_raises():
    t = _tensor(5)
    t.set_lod([[0, 2, 5]])
    t._offsets = ("garbage",)  # even a corrupted tensor answers
    assert t.has_valid_recursive_sequence_lengths() is False


def test_unsigned_and_numpy_levels_accepted():
    t = _tensor(5)
    t.set_lod([np.array([0, 2, 5], dtype=np.uint8)])
    assert t.lod() == [[0, 2, 5]]
    t.set_recursive_sequence_lengths(np.array([[2, 3]], dtype=np.int32))
    assert t.lod() == [[0, 2, 5]]


# ---------------------------------------------------------------- create_lod_tensor
def test_create_lod_tensor_from_list():
    t = la.create_lod_tensor([[1, 2], [3, 4, 5]], [[2, 3]], la.CPUPlace())
    assert t.shape() == [5, 1] and t.dtype == np.int64
    assert t.lod() == [[0, 2, 5]]
    np.testing.assert_array_equal(np.array(t).ravel(), [1, 2, 3, 4, 5])
    f = la.create_lod_tensor([[1.5], [2.0, 3.0]], [[1, 2]], la.CPUPlace())
    assert f.dtype == np.float64 and f.shape() == [3, 1]


def test_create_lod_tensor_list_mismatch_is_assertion_error():
    with pytest.raises(AssertionError, match="data and recursive_seq_lens do not match"):
        la.create_lod_tensor([[1, 2], [3]], [[2, 2]], la.CPUPlace())
    with pytest.raises(LoDError, match="do not match"):
        la.create_lod_tensor([[1, 2], [3]], [[1, 1], [1, 2]], la.CPUPlace())


def test_create_lod_tensor_from_lodtensor_copies_and_relabels():
    src = la.create_lod_tensor(np.arange(6.0).reshape(6, 1), [[2, 4]], la.CPUPlace())
    out = la.create_lod_tensor(src, [[1, 2, 3]], la.CPUPlace())
    assert out.lod() == [[0, 1, 3, 6]] and src.lod() == [[0, 2, 6]]
    assert not np.shares_memory(out.data, src.data)
    np.testing.assert_array_equal(out.data, src.data)


def test_create_lod_tensor_invalid():
    with pytest.raises(LoDError, match="ends at 4 but the data has 5 rows"):
        la.create_lod_tensor(np.zeros((5, 1)), [[2, 2]], la.CPUPlace())
    with pytest.raises(TypeError, match="should be a LoDTensor, a NumPy array or a list"):
        la.create_lod_tensor((1, 2), [[2]], la.CPUPlace())


# ---------------------------------------------------------------- printout (Paddle's repr)
def test_str_matches_paddle_printout():
    x = la.create_lod_tensor(np.array([[1], [2], [3], [4]]).astype('float32'), [[2, 2]],
                             la.CPUPlace())
    assert str(x) == ("- lod: {{0, 2, 4}}\n- place: Place(cpu)\n- shape: [4, 1]\n"
                      "- layout: NCHW\n- dtype: float32\n- data: [1 2 3 4]")
    y = la.create_lod_tensor(np.arange(1, 9).reshape(8, 1).astype('float32'),
                             [[2, 2], [3, 3, 1, 1]], la.CPUPlace())
    assert str(y).splitlines()[0] == "- lod: {{0, 2, 4}{0, 3, 6, 7, 8}}"
    assert str(y).splitlines()[-1] == "- data: [1 2 3 4 5 6 7 8]"


def test_str_abbreviates_long_data_and_formats_floats():
    t = la.LoDTensor(np.array([0.1, 1.5, 2.0]), [[0, 3]])
    assert str(t).splitlines()[-1] == "- data: [0.1 1.5 2]"
    long = la.LoDTensor(np.arange(100), [[0, 100]])
    assert "..." in str(long).splitlines()[-1]
    assert "- lod:" not in str(la.LoDTensor(np.arange(3)))
