"""Slow, obviously correct references for the structural operators (docs/operators.md,
sequence_expand to sequence_slice), written from the semantics with plain Python loops over
rows, independently of the kernels.  Inputs are plain NumPy data and LoDs as lists of offset
lists; outputs are ``(data, lod)`` with the same conventions.
"""

import numpy as np


def _rows_to_array(rows, like):
    """Stack ``rows`` (rows of ``like``) into an array of ``like``'s dtype and feature shape."""
    out = np.empty((len(rows),) + like.shape[1:], dtype=like.dtype)
    for r, row in enumerate(rows):
        out[r] = row
    return out


def _offsets(lengths):
    out = [0]
    for n in lengths:
        out.append(out[-1] + n)
    return out


def expand(data, x_lod, y_lod, ref_level):
    """``sequence_expand``: repeat rows (x without LoD) or whole sequences (x 1 level)."""
    ref = y_lod[ref_level]
    rows = []
    if not x_lod:
        for i in range(len(ref) - 1):
            for _ in range(ref[i + 1] - ref[i]):
                rows.append(data[i])
        return _rows_to_array(rows, data), []
    x_off = x_lod[0]
    lengths = []
    for i in range(len(ref) - 1):
        for _ in range(ref[i + 1] - ref[i]):
            lengths.append(x_off[i + 1] - x_off[i])
            for r in range(x_off[i], x_off[i + 1]):
                rows.append(data[r])
    return _rows_to_array(rows, data), [_offsets(lengths)]


def expand_as(data, y_lod):
    """``sequence_expand_as``: row i repeated ``len(y seq i)`` times; y's LoD."""
    ref = y_lod[0]
    rows = []
    for i in range(len(ref) - 1):
        for _ in range(ref[i + 1] - ref[i]):
            rows.append(data[i])
    return _rows_to_array(rows, data), [list(ref)]


def scatter(data, ids, updates, index_lod):
    """``sequence_scatter``: ``out[i, ids[p]] += updates[p]`` in order; float16 summed in float32.

    One-element array additions keep the dtype's wrap-around without scalar overflow warnings.
    """
    n = data.shape[0]
    work = np.float32 if data.dtype == np.float16 else data.dtype
    width = 1
    for d in data.shape[1:]:
        width *= d
    out = data.astype(work).reshape(n, width)
    ids = np.asarray(ids).reshape(-1)
    upd = np.asarray(updates).reshape(-1).astype(work)
    off = index_lod[0]
    for i in range(len(off) - 1):
        for p in range(off[i], off[i + 1]):
            j = int(ids[p])
            out[i, j:j + 1] += upd[p:p + 1]
    return out.astype(data.dtype).reshape(data.shape), []


def concat(datas, lods):
    """``sequence_concat``: sequence i of the output is every input's sequence i, in order."""
    n = len(lods[0][-1]) - 1
    rows, lengths = [], []
    for i in range(n):
        total = 0
        for data, lod in zip(datas, lods):
            last = lod[-1]
            for r in range(last[i], last[i + 1]):
                rows.append(data[r])
            total += last[i + 1] - last[i]
        lengths.append(total)
    return _rows_to_array(rows, datas[0]), [list(level) for level in lods[0][:-1]] + \
        [_offsets(lengths)]


def slice_(data, lod, offset, length):
    """``sequence_slice``: rows ``[start + offset[i], start + offset[i] + length[i])``."""
    last = lod[-1]
    offset = np.asarray(offset).reshape(-1)
    length = np.asarray(length).reshape(-1)
    rows = []
    for i in range(len(last) - 1):
        start = last[i] + int(offset[i])
        for r in range(start, start + int(length[i])):
            rows.append(data[r])
    return _rows_to_array(rows, data), [list(level) for level in lod[:-1]] + \
        [_offsets([int(v) for v in length])]


def assert_result(out, data, lod, backend):
    """``out`` is a LoDTensor on ``backend`` holding exactly ``data`` (dtype, shape) and ``lod``."""
    import lodarrow

    assert isinstance(out, lodarrow.LoDTensor)
    on_gpu = hasattr(out.data, "__cuda_array_interface__") and not isinstance(out.data,
                                                                               np.ndarray)
    assert on_gpu == (backend == "cuda")
    host = out.numpy()
    assert host.dtype == data.dtype
    assert host.shape == data.shape
    np.testing.assert_array_equal(host, data)
    assert out.lod() == [list(level) for level in lod]
    for level in out.offsets:
        assert level.dtype == np.int64 and not level.flags.writeable


def arrow_lists(values, *offsets):
    """A pyarrow nested ``LargeList`` array over ``values`` (outermost offsets first)."""
    import pyarrow as pa

    arr = pa.array(values)
    for off in reversed(offsets):
        arr = pa.LargeListArray.from_arrays(pa.array(off, pa.int64()), arr)
    return arr

