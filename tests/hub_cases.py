"""Shared cases for the conversion hub tests (tests/test_hub_*.py, docs/interop.md).

Every case is a LoDTensor of a known shape of LoD: one to three levels, empty sequences, zero
sequences, feature shapes, slices (whose data is a view starting past the first row) and
tensors read from Arrow (read-only buffers).  The references are written here with Python
loops over the offsets, independently of lodarrow's operators.
"""

import numpy as np
import pyarrow as pa
import pytest

import lodarrow as la

ALL_DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "int64",
              "float16", "float32", "float64"]
FEATURE_SHAPES = [(), (3,), (2, 2)]


def _values(n, dtype, feature=()):
    raw = np.arange(n * int(np.prod(feature, dtype=np.int64)), dtype=np.int64)
    if np.dtype(dtype) == bool:
        out = raw % 3 == 1
    else:
        out = (raw % 100).astype(dtype)
    return out.reshape((n, *feature))


def make(lengths, dtype="float32", feature=()):
    """A LoDTensor of the given recursive lengths, values 0, 1, 2 ... (mod 100)."""
    n = sum(lengths[-1]) if lengths else 5
    return la.LoDTensor(_values(n, dtype, feature), lengths=lengths)


#: id -> recursive lengths (outermost first)
SHAPES = {
    "1-level": [[2, 3, 1]],
    "1-level-empties": [[0, 2, 0, 3, 0]],
    "1-level-one": [[4]],
    "zero-seqs": [[]],
    "all-empty": [[0, 0]],
    "2-level": [[2, 1], [2, 0, 3]],
    "2-level-empties": [[0, 2, 1, 0], [3, 0, 1]],
    "3-level": [[1, 2], [2, 1, 1], [1, 0, 2, 3]],
}
ONE_LEVEL = [k for k, v in SHAPES.items() if len(v) == 1]
MULTI_LEVEL = [k for k, v in SHAPES.items() if len(v) > 1]


def sliced(dtype="float32", feature=()):
    """``t[1:3]`` of a 1-level tensor: a view whose data starts at row 2, offsets rebased."""
    return make([[2, 3, 1, 4]], dtype, feature)[1:3]


def sliced_2level(dtype="float32", feature=()):
    return make([[1, 2, 1], [2, 1, 3, 2]], dtype, feature)[1:3]


def from_arrow_sliced():
    """A tensor read from a sliced Arrow array: read-only buffers, a view past row 0."""
    arr = pa.array([[1.0, 2.0], [3.0], [], [4.0, 5.0, 6.0]], type=pa.large_list(pa.float64()))
    return la.from_arrow(arr.slice(1, 3))


def all_cases(dtypes=("float32",), features=((),), shapes=None):
    """pytest params ``t`` of every shape x dtype x feature shape, plus the slices."""
    out = []
    for name in shapes or SHAPES:
        for dtype in dtypes:
            for feature in features:
                out.append(pytest.param(make(SHAPES[name], dtype, feature),
                                        id=f"{name}-{dtype}-{feature}"))
    if shapes is None or any(len(SHAPES[s]) == 1 for s in shapes):
        out.append(pytest.param(sliced(), id="sliced"))
        out.append(pytest.param(sliced("int64", (3,)), id="sliced-int64-(3,)"))
        out.append(pytest.param(from_arrow_sliced(), id="arrow-sliced"))
    if shapes is None or any(len(SHAPES[s]) > 1 for s in shapes):
        out.append(pytest.param(sliced_2level(), id="sliced-2level"))
    return out


# ----------------------------------------------------------------------- references
def offsets_of(lengths):
    out = [0]
    for n in lengths:
        out.append(out[-1] + n)
    return np.array(out, dtype=np.int64)


def lengths_of(t, level=-1):
    off = [int(x) for x in t.offsets[level]]
    return np.array([off[i + 1] - off[i] for i in range(len(off) - 1)], dtype=np.int64)


def ref_padded(t, pad=0):
    """``(padded, lengths, mask)`` of the last level, with Python loops."""
    data = np.asarray(t.data)
    lens = lengths_of(t)
    off = [int(x) for x in t.offsets[-1]]
    width = int(lens.max()) if lens.size else 0
    padded = np.full((len(lens), width, *data.shape[1:]), pad, dtype=data.dtype)
    mask = np.zeros((len(lens), width), dtype=bool)
    for i in range(len(lens)):
        for j in range(off[i], off[i + 1]):
            padded[i, j - off[i]] = data[j]
            mask[i, j - off[i]] = True
    return padded, lens, mask


def ref_segment_ids(t):
    off = [int(x) for x in t.offsets[-1]]
    ids = []
    for i in range(len(off) - 1):
        ids.extend([i] * (off[i + 1] - off[i]))
    return np.array(ids, dtype=np.int32)


def address(array):
    """The address of a NumPy array's first element."""
    return array.__array_interface__["data"][0]


def assert_same(got, want):
    """LoDTensor equality with a message that shows both."""
    assert isinstance(got, la.LoDTensor), type(got)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape() == want.shape(), (got.shape(), want.shape())
    assert got.lod() == want.lod(), (got.lod(), want.lod())
    np.testing.assert_array_equal(np.asarray(got.data), np.asarray(want.data))


def table_with_tokens():
    """A pyarrow Table of an id column and a list column ``tokens``."""
    return pa.table({"id": [1, 2, 3],
                     "tokens": pa.array([[1, 2], [], [3, 4, 5]], type=pa.list_(pa.int32()))})


def reference_list(t):
    """Nested lists from the offsets with Python loops (not lodarrow's to_list)."""
    rows = np.asarray(t.data).tolist()
    for off in reversed(t.offsets):
        o = [int(x) for x in off]
        rows = [rows[o[i]:o[i + 1]] for i in range(len(o) - 1)]
    return rows
