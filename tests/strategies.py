"""Hypothesis strategies for LoDTensors: nested LoDs with empty sequences, zero sequences,
every dtype and feature shape."""

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import lodarrow

ALL_DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "int64",
              "float16", "float32", "float64"]
FEATURE_SHAPES = [(), (1,), (3,), (2, 3)]


@st.composite
def lod_lengths(draw, n_levels, max_seqs=6, max_len=5, min_top=0):
    """Recursive sequence lengths of ``n_levels`` levels (empties and zero sequences allowed)."""
    count = draw(st.integers(min_top, max_seqs))
    levels = []
    for _ in range(n_levels):
        lens = draw(st.lists(st.integers(0, max_len), min_size=count, max_size=count))
        levels.append(lens)
        count = sum(lens)
    return levels, count


def values(dtype, shape, allow_nan=False, elements=None):
    """Array values of ``dtype``; floats finite unless ``allow_nan``, small so sums stay exact."""
    dtype = np.dtype(dtype)
    if elements is None:
        if dtype.kind == "f":
            elements = st.floats(-100, 100, width=min(dtype.itemsize * 8, 64),
                                 allow_nan=allow_nan, allow_infinity=False)
        elif dtype.kind in "iu":
            info = np.iinfo(dtype)
            elements = st.integers(max(info.min, -100), min(info.max, 100))
    return hnp.arrays(dtype, shape, elements=elements)


@st.composite
def lod_tensors(draw, dtypes=ALL_DTYPES, feature_shapes=FEATURE_SHAPES, min_levels=0,
                max_levels=3, max_seqs=6, max_len=5, min_top=0, elements=None, allow_nan=False):
    """A valid LoDTensor; ``min_levels``..``max_levels`` LoD levels."""
    dtype = np.dtype(draw(st.sampled_from(list(dtypes))))
    fshape = tuple(draw(st.sampled_from(list(feature_shapes))))
    n_levels = draw(st.integers(min_levels, max_levels))
    if n_levels:
        lengths, n_rows = draw(lod_lengths(n_levels, max_seqs, max_len, min_top))
    else:
        lengths, n_rows = [], draw(st.integers(0, max_seqs * max_len))
    data = draw(values(dtype, (n_rows, *fshape), allow_nan=allow_nan, elements=elements))
    return lodarrow.LoDTensor(data, lengths=lengths)
