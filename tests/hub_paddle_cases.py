"""LoDTensor <-> PaddlePaddle's LoDTensor (docs/interop.md#paddlepaddle), against the real Paddle.

Run by tests/test_hub_paddle.py in a process of its own: Paddle 2.6 and TensorFlow cannot share
one (importing Paddle after TensorFlow crashes, and the reverse breaks TensorFlow's import), and
the main test process imports TensorFlow for tests/test_hub_tf.py.
"""

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings

import lodarrow as la
from hub_cases import (ALL_DTYPES, FEATURE_SHAPES, address, all_cases, assert_same, make,
                       table_with_tokens)
from strategies import lod_tensors

paddle = pytest.importorskip("paddle")
core = paddle.base.core

PADDLE_DTYPES = [d for d in ALL_DTYPES if d != "uint16"]  # Paddle's uint16 is bfloat16
HOLDABLE = [c for c in all_cases(PADDLE_DTYPES, FEATURE_SHAPES) if c.id.split("-")[0] != "zero"]


def _paddle_tensor(data, lod):
    """A Paddle LoDTensor built as Paddle's documentation builds one."""
    pt = core.LoDTensor()
    pt.set(np.asarray(data), paddle.CPUPlace())
    if lod:
        pt.set_lod(lod)
    return pt


@pytest.mark.parametrize("t", HOLDABLE)
def test_round_trip(t):
    pt = t.to_paddle()
    assert isinstance(pt, core.LoDTensor)
    assert pt.lod() == t.lod()
    assert pt.shape() == list(t.shape())
    np.testing.assert_array_equal(np.array(pt), np.asarray(t.data))
    assert pt.has_valid_recursive_sequence_lengths()
    assert_same(la.from_paddle(pt), t)


def test_matches_what_paddle_builds_itself():
    """The seed's own construction: create_lod_tensor / set + set_recursive_sequence_lengths."""
    pt = core.LoDTensor()
    pt.set(np.arange(12, dtype=np.float32).reshape(6, 2), paddle.CPUPlace())
    pt.set_recursive_sequence_lengths([[2, 1], [2, 0, 4]])
    t = la.from_paddle(pt)
    assert t.recursive_sequence_lengths() == pt.recursive_sequence_lengths()
    ours = la.create_lod_tensor(np.arange(12, dtype=np.float32).reshape(6, 2),
                                [[2, 1], [2, 0, 4]], la.CPUPlace())
    assert_same(t, ours)
    assert ours.to_paddle().lod() == pt.lod()


def test_from_paddle_shares_the_data():
    pt = _paddle_tensor(np.arange(6.0).reshape(3, 2), [[0, 1, 3]])
    t = la.from_paddle(pt)
    assert address(t.data) == pt._ptr()
    assert not t.data.flags.writeable


def test_to_paddle_copies_into_paddles_memory():
    t = make([[2, 3]], "float32")
    pt = t.to_paddle()
    assert pt._ptr() != address(t.data)  # Paddle's set() copies (docs/interop.md#copies)


def test_eager_tensor_and_sliced_tensor():
    assert_same(la.from_paddle(paddle.to_tensor(np.arange(4, dtype=np.int32))),
                la.LoDTensor(np.arange(4, dtype=np.int32)))
    s = make([[2, 3, 1, 4]], "int64")[1:3]
    assert_same(la.from_paddle(s.to_paddle()), s)


def test_what_paddle_cannot_hold_is_refused():
    with pytest.raises(TypeError, match="bfloat16"):
        make([[2, 1]], "uint16").to_paddle()
    with pytest.raises(ValueError, match="zero sequences"):
        make([[]]).to_paddle()
    with pytest.raises(TypeError, match="tensor must be a Paddle"):
        la.from_paddle(np.arange(3))
    with pytest.raises(ValueError, match="holds no data"):
        la.from_paddle(core.LoDTensor())


def test_table_column_to_paddle():
    pt = la.to_paddle(table_with_tokens(), column="tokens")
    assert pt.lod() == [[0, 2, 2, 5]]
    assert np.array(pt).tolist() == [1, 2, 3, 4, 5]


def test_arrow_read_tensor():
    arr = pa.array([[1.0, 2.0], [3.0], [], [4.0]], type=pa.list_(pa.float64()))
    t = la.from_arrow(arr.slice(1))
    assert_same(la.from_paddle(t.to_paddle()), t)


@pytest.mark.parametrize("func, kwargs, arg", [
    ("to_paddle", {"obj": None}, "obj"),
    ("to_paddle", {"obj": make([[1]]), "column": 3}, "column"),
    ("to_paddle", {"obj": make([[1]]), "nulls": None}, "nulls"),
    ("from_paddle", {"tensor": None}, "tensor"),
])
def test_bad_arguments_are_named(func, kwargs, arg):
    with pytest.raises(TypeError, match=arg):
        getattr(la, func)(**kwargs)


@settings(max_examples=30)
@given(lod_tensors(dtypes=PADDLE_DTYPES, min_top=1))
def test_hypothesis_round_trip(t):
    if any(o.shape[0] == 1 for o in t.offsets):
        return  # zero sequences at an inner level: Paddle cannot hold them (tested above)
    assert_same(la.from_paddle(t.to_paddle()), t)
