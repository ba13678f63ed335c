"""``LoDTensor.merge_levels``: levels outer..inner composed into one, the data shared."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import lodarrow as la
from conftest import on_backend, to_host


def _reference_merge(lengths, outer, inner):
    """NumPy reference from lengths: a merged sequence's length is the sum of its leaves."""
    out = [list(level) for level in lengths[:outer]]
    merged = list(lengths[outer])
    for k in range(outer + 1, inner + 1):
        level, pos, new = lengths[k], 0, []
        for n in merged:
            new.append(int(np.sum(level[pos:pos + n], dtype=np.int64)))
            pos += n
        merged = new
    return out + [merged] + [list(level) for level in lengths[inner + 1:]]


@st.composite
def nested_lengths(draw):
    depth = draw(st.integers(1, 4))
    lengths, count = [], draw(st.integers(0, 5))
    for _ in range(depth):
        level = draw(st.lists(st.integers(0, 4), min_size=count, max_size=count))
        lengths.append(level)
        count = sum(level)
    return lengths, count


@given(nested_lengths(), st.data())
def test_merge_levels_matches_reference(spec, data):
    lengths, rows = spec
    t = la.LoDTensor(np.arange(rows * 2, dtype=np.float32).reshape(rows, 2), lengths=lengths)
    n = len(lengths)
    outer = data.draw(st.integers(0, n - 1))
    inner = data.draw(st.integers(outer, n - 1))
    m = t.merge_levels(outer, inner)
    assert m.recursive_sequence_lengths() == _reference_merge(lengths, outer, inner)
    assert m.lod_level == n - (inner - outer)
    assert m.data is t.data  # zero-copy: the very same array
    assert m.has_valid_recursive_sequence_lengths()
    # negative levels count from the last
    assert m.equals(t.merge_levels(outer - n, inner - n))


def test_token_mean_per_document_vs_mean_of_means(backend):
    # 2 documents: [[1, 2, 3], [10]] and [[4], [], [5, 6]]
    x = np.array([1., 2., 3., 10., 4., 5., 6.])
    t = on_backend(la.LoDTensor(x, lengths=[[2, 3], [3, 1, 1, 0, 2]]), backend)
    tokens = to_host(la.sequence_pool(t.merge_levels(0, 1), "average"), backend).data
    np.testing.assert_allclose(tokens, [np.mean([1, 2, 3, 10]), np.mean([4, 5, 6])])
    means = to_host(la.sequence_pool(la.sequence_pool(t, "average"), "average"), backend).data
    np.testing.assert_allclose(means, [(2 + 10) / 2, (4 + 0 + 5.5) / 3])  # not the token mean


def test_merge_levels_same_level_is_the_same_lod():
    t = la.LoDTensor(np.arange(7), lengths=[[2, 1], [2, 2, 3]])
    assert t.merge_levels(1, 1).lod() == t.lod()
    assert t.merge_levels(0, 1).lod() == [[0, 4, 7]]


@pytest.mark.parametrize("outer, inner, exc, match", [
    (None, 1, TypeError, "outer must be an integer"),
    (0, "1", TypeError, "inner must be an integer"),
    (0.0, 1, TypeError, "outer must be an integer"),
    (0, 2, IndexError, r"inner=2 is out of range for a LoDTensor of 2 LoD level"),
    (-3, 1, IndexError, "outer=-3 is out of range"),
    (1, 0, ValueError, "outer=1 must not come after inner=0"),
])
def test_merge_levels_checks_its_arguments(outer, inner, exc, match):
    t = la.LoDTensor(np.arange(7), lengths=[[2, 1], [2, 2, 3]])
    with pytest.raises(exc, match=match):
        t.merge_levels(outer, inner)


def test_merge_levels_on_a_plain_or_empty_tensor():
    with pytest.raises(IndexError, match="0 LoD level"):
        la.LoDTensor(np.arange(3)).merge_levels(0, 0)
    with pytest.raises(ValueError, match="empty"):
        la.LoDTensor().merge_levels(0, 0)
