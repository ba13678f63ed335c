"""Arrow arrays to NumPy, and NumPy positions to Arrow, through their buffers.

pyarrow imports pandas, where it is installed, the first time it converts an array to NumPy
(``to_numpy``, ``numpy.asarray``) or Python or NumPy values to Arrow (``pa.array``,
``pa.scalar``): a few tenths of a second of a loader's start from Parquet, for a library the
loader never uses.  These read and make the buffers instead: read-only views, no copy, but
for bools (bits, unpacked).
"""

import numpy as np
import pyarrow as pa

from lodarrow._interop._arrow_decode import HOST

__all__ = ["as_numpy", "list_offsets", "positions", "zero"]


def _is_number(arrow_type):
    return (pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type)
            or pa.types.is_boolean(arrow_type))


def _view(buf, dtype, stop, what):
    """The first ``stop`` items of ``buf``, through a read-only memoryview: NumPy then refuses
    to make the view writable again (a plain ``frombuffer`` of a mutable Arrow buffer would
    let a caller write into the Arrow array)."""
    if stop <= 0:
        return np.zeros(0, dtype)
    if buf is None or buf.size < stop * dtype.itemsize:
        have = 0 if buf is None else buf.size
        raise ValueError(f"invalid Arrow array: the {what} buffer holds {have} bytes, "
                         f"{stop * dtype.itemsize} are needed")
    return np.frombuffer(memoryview(buf).toreadonly(), dtype, stop)


def list_offsets(arr):
    """The ``len(arr) + 1`` offsets of a list array's own rows as int64 (``arr.offsets``)."""
    dtype = np.dtype(np.int64 if pa.types.is_large_list(arr.type) else np.int32)
    buf = arr.buffers()[1]
    if len(arr) == 0 and not buf:    # an empty array may come without offsets
        return np.zeros(1, np.int64)
    view = _view(buf, dtype, arr.offset + len(arr) + 1, "offsets")[arr.offset:]
    return view.astype(np.int64, copy=False)


def as_numpy(arr):
    """A number or bool array without nulls (an ``is_null()`` mask, say) as a read-only
    NumPy array: a view of its values, a copy for bools; a ``ChunkedArray``'s chunks joined.

    Raises
    ------
    TypeError
        For any other type (dates, strings, lists: their buffers are not their values).
    ValueError
        For an array holding nulls (its buffer holds anything there).
    """
    if not _is_number(arr.type):
        raise TypeError(f"as_numpy: {arr.type} is not a number or bool type")
    if arr.null_count:
        raise ValueError(f"as_numpy: the array holds {arr.null_count} null(s); fill them first")
    if isinstance(arr, pa.ChunkedArray):
        parts = [as_numpy(c) for c in arr.chunks]
        if len(parts) == 1:
            return parts[0]
        out = (np.concatenate(parts) if parts
               else np.zeros(0, np.dtype(arr.type.to_pandas_dtype())))
    elif pa.types.is_boolean(arr.type):
        out = HOST.bits(arr.buffers()[1], arr.offset, arr.offset + len(arr), "values")
    else:
        dtype = np.dtype(arr.type.to_pandas_dtype())
        out = _view(arr.buffers()[1], dtype, arr.offset + len(arr), "values")[arr.offset:]
    out.flags.writeable = False
    return out


def positions(index, arrow_type=pa.int64()):
    """1-D NumPy integers as an Arrow integer array of ``arrow_type`` (a view where the dtype
    is already that type's), for ``take`` and list offsets.

    Raises
    ------
    TypeError
        When ``index`` is not a 1-D integer array.
    OverflowError
        When a value does not fit ``arrow_type``.
    """
    index = np.asarray(index)
    if index.ndim != 1 or (index.dtype.kind not in "iu" and index.size):
        raise TypeError(f"positions: a 1-D integer array is needed, not {index.ndim}-D "
                        f"{index.dtype}")
    dtype = np.dtype(arrow_type.to_pandas_dtype())
    if index.size and index.dtype != dtype:
        info = np.iinfo(dtype)
        if index.min() < info.min or index.max() > info.max:
            raise OverflowError(f"positions: values from {index.min()} to {index.max()} do "
                                f"not fit {arrow_type}")
    index = np.ascontiguousarray(index, dtype=dtype)
    return pa.Array.from_buffers(arrow_type, len(index), [None, pa.py_buffer(index)])


def zero(arrow_type):
    """The zero (``False``) of a number or bool type as an Arrow scalar, for ``fill_null``."""
    if not _is_number(arrow_type):
        raise TypeError(f"zero: {arrow_type} is not a number or bool type")
    raw = pa.py_buffer(np.zeros(max(1, arrow_type.bit_width // 8), np.uint8))
    return pa.Array.from_buffers(arrow_type, 1, [None, raw])[0]
