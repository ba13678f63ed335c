"""LoDTensor <-> JAX (docs/interop.md#jax): segments (segment ids, group sizes) and padded, both
ways, against the real jax; zero-copy asserted by address for aligned (Arrow) buffers."""

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings

import lodarrow as la
from conftest import CUDA
from hub_cases import (ALL_DTYPES, FEATURE_SHAPES, address, all_cases, assert_same, lengths_of,
                       make, ref_padded, ref_segment_ids, table_with_tokens)
from strategies import lod_tensors

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")


@pytest.fixture
def x64():
    """64-bit types on for one test (JAX's default is off), restored after."""
    before = bool(jax.config.jax_enable_x64)
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", before)


@pytest.mark.parametrize("t", all_cases(ALL_DTYPES, FEATURE_SHAPES))
def test_segments_round_trip(t, x64):
    s = t.to_jax()
    np.testing.assert_array_equal(np.asarray(s.segment_ids), ref_segment_ids(t))
    assert s.segment_ids.dtype == jnp.int32
    assert s.num_segments == len(lengths_of(t))
    np.testing.assert_array_equal(np.asarray(s.group_sizes), lengths_of(t))
    assert len(s.lod) == t.lod_level and all(o.dtype == jnp.int64 for o in s.lod)
    np.testing.assert_array_equal(np.asarray(s.values), np.asarray(t.data))
    assert_same(la.from_jax(s), t)


@pytest.mark.parametrize("t", all_cases(ALL_DTYPES, FEATURE_SHAPES))
def test_padded_round_trip(t, x64):
    p = t.to_jax("padded")
    padded, lens, mask = ref_padded(t)
    np.testing.assert_array_equal(np.asarray(p.values), padded)
    np.testing.assert_array_equal(np.asarray(p.lengths), lens)
    np.testing.assert_array_equal(np.asarray(p.mask), mask)
    assert_same(la.from_jax(p), t)


def test_segment_sum_matches_sequence_pool(x64):
    t = make([[2, 0, 3, 1]], "float32", (3,))
    s = t.to_jax()
    got = jax.ops.segment_sum(s.values, s.segment_ids, s.num_segments, indices_are_sorted=True)
    np.testing.assert_allclose(np.asarray(got), np.asarray(la.sequence_pool(t, "sum").data))


def test_ragged_dot_takes_group_sizes():
    t = make([[2, 3]], "float32", (4,))
    s = t.to_jax()
    rhs = jnp.ones((2, 4, 5), dtype=jnp.float32)
    out = jax.lax.ragged_dot(s.values, rhs, s.group_sizes)
    assert out.shape == (5, 5)


def test_zero_copy_for_arrow_buffers_both_ways(x64):
    arr = pa.array([[1.0, 2.0], [3.0], [], [4.0]] * 50, type=pa.large_list(pa.float64()))
    t = la.from_arrow(arr)
    assert not t.data.flags.writeable  # read-only Arrow memory
    s = t.to_jax()
    assert s.values.unsafe_buffer_pointer() == address(t.data)
    assert s.lod[0].unsafe_buffer_pointer() == address(t.offsets[0])
    back = la.from_jax(s)
    assert address(back.data) == address(t.data)


def test_64_bit_values_without_x64_are_an_error_naming_the_setting():
    if jax.config.jax_enable_x64:
        pytest.skip("64-bit types are on in this process")
    with pytest.raises(ValueError, match="jax_enable_x64"):
        make([[2, 1]], "float64").to_jax()
    s = make([[2, 1]], "float32").to_jax()  # 32-bit values: offsets as int32
    assert s.lod[0].dtype == jnp.int32
    assert_same(la.from_jax(s), make([[2, 1]], "float32"))


def test_from_segment_ids_and_group_sizes():
    x = jnp.arange(5.0)
    got = la.from_jax(x, segment_ids=jnp.array([0, 0, 2, 2, 2]), num_segments=4)
    assert got.lod() == [[0, 2, 2, 5, 5]]
    assert la.from_jax(x, segment_ids=np.array([0, 1, 1, 1, 1])).lod() == [[0, 1, 5]]
    assert la.from_jax(x, group_sizes=jnp.array([3, 0, 2])).lod() == [[0, 3, 3, 5]]
    assert la.from_jax(x, lod=[np.array([0, 1, 2]), np.array([0, 3, 5])]).lod() == \
        [[0, 1, 2], [0, 3, 5]]
    assert la.from_jax(x).lod() == []


def test_unsorted_or_out_of_range_segment_ids_are_errors():
    x = jnp.arange(3.0)
    with pytest.raises(ValueError, match="sorted.*position 2"):
        la.from_jax(x, segment_ids=jnp.array([0, 1, 0]))
    with pytest.raises(ValueError, match="out of range for num_segments=1"):
        la.from_jax(x, segment_ids=jnp.array([0, 0, 1]), num_segments=1)
    with pytest.raises(TypeError, match="one of"):
        la.from_jax(x, segment_ids=jnp.array([0, 0, 0]), group_sizes=jnp.array([3]))


def test_table_column_to_jax():
    s = la.to_jax(table_with_tokens(), column="tokens")
    assert s.segment_ids.tolist() == [0, 0, 2, 2, 2]
    assert s.num_segments == 3


@settings(max_examples=30)
@given(lod_tensors(min_levels=1, dtypes=["bool", "int8", "uint16", "int32", "float16",
                                         "float32"]))
def test_hypothesis_round_trips(t):
    assert_same(la.from_jax(t.to_jax()), t)
    assert_same(la.from_jax(t.to_jax("padded")), t)


@pytest.mark.parametrize("backend", [CUDA])
@pytest.mark.parametrize("layout", ["segments", "padded"])
def test_host_tensor_stays_on_the_host_beside_a_gpu(backend, layout):
    # JAX puts new arrays on its GPU by default: every array of a host tensor's conversion
    # must still be on the CPU (the values DLPack shares are), and come back to the host
    if not any(d.platform == "gpu" for d in jax.devices()):
        pytest.skip("JAX has no GPU here")
    t = make([[2, 0, 3]], "float32", (3,))
    out = t.to_jax(layout)
    arrays = [a for a in out._asdict().values() if isinstance(a, jax.Array)]
    arrays += [a for a in out.lod if isinstance(a, jax.Array)]
    assert arrays and {next(iter(a.devices())).platform for a in arrays} == {"cpu"}
    back = la.from_jax(out)
    assert not back.place.is_cuda
    assert_same(back, t)


@pytest.mark.parametrize("backend", [CUDA])
def test_cuda_round_trip_stays_on_the_device(backend):
    t = make([[2, 0, 3]], "float32", (3,)).cuda()
    s = t.to_jax()
    assert next(iter(s.values.devices())).platform == "gpu"
    back = la.from_jax(s)
    assert back.place.is_cuda
    assert_same(back.cpu(), t.cpu())
    # padded values come back through DLPack onto the GPU, their lengths beside them
    padded = la.from_jax(t.to_jax("padded"))
    assert padded.place.is_cuda
    assert_same(padded.cpu(), t.cpu())
