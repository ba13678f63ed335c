"""LoDTensor <-> TensorFlow (docs/interop.md#tensorflow): RaggedTensor with every level, both
ways, against the real TensorFlow; zero-copy asserted by address for aligned buffers."""

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings

import lodarrow as la
from conftest import CUDA
from hub_cases import (ALL_DTYPES, FEATURE_SHAPES, address, all_cases, assert_same, make,
                       ref_padded, reference_list, table_with_tokens)
from strategies import lod_tensors

tf = pytest.importorskip("tensorflow")


@pytest.mark.parametrize("t", all_cases(ALL_DTYPES, FEATURE_SHAPES))
def test_round_trip(t):
    r = t.to_tf()
    assert isinstance(r, tf.RaggedTensor)
    assert r.ragged_rank == t.lod_level
    assert all(s.dtype == tf.int64 for s in r.nested_row_splits)
    assert tuple(r.flat_values.shape) == tuple(t.data.shape)  # feature dims stay uniform
    for k, s in enumerate(r.nested_row_splits):
        np.testing.assert_array_equal(s.numpy(), t.offsets[k])
    if t.dtype != np.float16:  # to_list goes through Python floats
        assert r.to_list() == reference_list(t)
    assert_same(la.from_tf(r), t)


def _aligned_tensor():
    arr = pa.array([[1.0, 2.0], [3.0], [], [4.0]] * 50, type=pa.large_list(pa.float64()))
    return la.from_arrow(arr)


def test_zero_copy_both_ways_for_aligned_buffers():
    t = _aligned_tensor()
    assert address(t.data) % 64 == 0
    back = la.from_tf(t.to_tf())
    assert address(back.data) == address(t.data)
    assert address(back.offsets[0]) == address(t.offsets[0])


def test_values_are_shared_not_copied():
    raw = np.zeros(64 + 8 * 16, dtype=np.uint8)
    start = (-address(raw)) % 64
    data = raw[start:start + 8 * 16].view(np.float64)
    t = la.LoDTensor(data, lengths=[[10, 6]])
    r = t.to_tf()
    data[0] = 42.0  # visible through TensorFlow's tensor: the same memory
    assert float(r.flat_values[0]) == 42.0


def test_unaligned_buffers_are_copied_not_crashed():
    """TensorFlow aborts on unaligned DLPack buffers: those are copied (docs/interop.md)."""
    t = make([[2, 3, 1, 4]], "float64")[1:3]  # a view 16 bytes past an allocation
    r = t.to_tf()
    assert r[0].numpy().tolist() == [2.0, 3.0, 4.0]  # a strided slice reads it
    assert_same(la.from_tf(r), t)


def test_ragged_tensors_built_by_tensorflow():
    r = tf.ragged.constant([[1, 2], [], [3]])
    assert la.from_tf(r).lod() == [[0, 2, 2, 3]]
    r32 = tf.ragged.constant([[1, 2], [], [3]], row_splits_dtype=tf.int32)
    assert la.from_tf(r32).lod() == [[0, 2, 2, 3]]
    uniform = tf.RaggedTensor.from_uniform_row_length(tf.ragged.constant([[1], [2, 3], [4], []]),
                                                      2)
    assert la.from_tf(uniform).lod() == [[0, 2, 4], [0, 1, 3, 4, 4]]
    sliced = tf.ragged.constant([[1, 2], [], [3]])[1:]
    got = la.from_tf(sliced)
    assert got.lod() == [[0, 0, 1]] and got.data.tolist() == [3]
    inner = tf.ragged.constant([[[1, 2]], [[3, 4], [5, 6]]], ragged_rank=1)
    got = la.from_tf(inner)
    assert got.lod() == [[0, 1, 3]] and got.feature_shape == (2,)


def test_dense_and_padded():
    got = la.from_tf(tf.constant([[1, 2, 0], [3, 0, 0]]), lengths=tf.constant([2, 1]))
    assert got.lod() == [[0, 2, 3]] and got.data.tolist() == [1, 2, 3]
    t = make([[2, 0, 3]], "float32", (2,))
    padded, lens, _ = ref_padded(t)
    assert_same(la.from_tf(tf.constant(padded), lengths=lens), t)
    plain = la.LoDTensor(np.arange(6).reshape(3, 2))
    dense = plain.to_tf()
    assert isinstance(dense, tf.Tensor) and not isinstance(dense, tf.RaggedTensor)
    assert_same(la.from_tf(dense), plain)


def test_what_a_lodtensor_cannot_hold_is_refused():
    with pytest.raises(TypeError, match="float32"):
        la.from_tf(tf.ragged.constant([[1.0]], dtype=tf.bfloat16))
    with pytest.raises(TypeError, match="not numbers"):
        la.from_tf(tf.ragged.constant([["a"]]))
    with pytest.raises(TypeError, match="from_sparse"):
        la.from_tf(tf.sparse.from_dense(tf.constant([[1, 0]])))
    with pytest.raises(TypeError, match="obj must be a tf.Tensor"):
        la.from_tf([[1, 2]])


def test_table_column_to_tf():
    r = la.to_tf(table_with_tokens(), column="tokens")
    assert r.to_list() == [[1, 2], [], [3, 4, 5]]
    assert r.dtype == tf.int32


@settings(max_examples=30)
@given(lod_tensors())
def test_hypothesis_round_trip(t):
    assert_same(la.from_tf(t.to_tf()), t)


def test_dense_to_tf_copies_unaligned_arrays_instead_of_crashing():
    from lodarrow._hub._dense import dense_to

    x = dense_to(np.arange(10.0)[1:], "tf")  # 8 bytes past an allocation
    assert x[1:3].numpy().tolist() == [2.0, 3.0]


@pytest.mark.parametrize("backend", [CUDA])
def test_cuda_round_trip_stays_on_the_device(backend):
    if not tf.config.list_physical_devices("GPU"):
        pytest.skip("this TensorFlow build sees no GPU (tensorflow-cpu)")
    t = make([[2, 0, 3]], "float32", (3,)).cuda()
    r = t.to_tf()
    assert "GPU" in r.flat_values.device.upper()
    back = la.from_tf(r)
    assert back.place.is_cuda
    assert_same(back.cpu(), t.cpu())
