"""Arrow arrays to NumPy, and NumPy positions to Arrow, through their buffers.

pyarrow imports pandas, where it is installed, the first time it converts an array to NumPy
(``to_numpy``, ``numpy.asarray``) or NumPy to an array (``pa.array``): a few tenths of a second
of a loader's start from Parquet, for a library the loader never uses.  These read and make the
buffers instead: views, no copy, but for bools (bits, unpacked).
"""

import numpy as np
import pyarrow as pa

from lodarrow._interop._arrow_decode import HOST

__all__ = ["as_numpy", "list_offsets", "positions"]


def list_offsets(arr):
    """The ``len(arr) + 1`` offsets of a list array's own rows as int64 (``arr.offsets``)."""
    dtype = np.dtype(np.int64 if pa.types.is_large_list(arr.type) else np.int32)
    buf = arr.buffers()[1]
    if len(arr) == 0 and not buf:    # an empty array may come without offsets
        return np.zeros(1, np.int64)
    view = HOST.view(buf, dtype, arr.offset + len(arr) + 1, "offsets")[arr.offset:]
    return view.astype(np.int64, copy=False)


def as_numpy(arr):
    """A fixed-width number or bool array without nulls (an ``is_null()`` mask, say) as
    NumPy: a view of its values, a copy for bools; a ``ChunkedArray``'s chunks joined."""
    if isinstance(arr, pa.ChunkedArray):
        parts = [as_numpy(c) for c in arr.chunks]
        if len(parts) == 1:
            return parts[0]
        return (np.concatenate(parts) if parts
                else np.zeros(0, np.dtype(arr.type.to_pandas_dtype())))
    start, stop = arr.offset, arr.offset + len(arr)
    if pa.types.is_boolean(arr.type):
        return HOST.bits(arr.buffers()[1], start, stop, "values")
    dtype = np.dtype(arr.type.to_pandas_dtype())
    return HOST.view(arr.buffers()[1], dtype, stop, "values")[start:]


def positions(index, arrow_type=pa.int64()):
    """NumPy integers as an Arrow array of ``arrow_type`` (a view of them where the dtype is
    already that type's), for ``take`` and list offsets."""
    index = np.ascontiguousarray(index, dtype=np.dtype(arrow_type.to_pandas_dtype()))
    return pa.Array.from_buffers(arrow_type, len(index), [None, pa.py_buffer(index)])
