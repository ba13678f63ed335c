"""pandas: a LoDTensor as a ``pandas.Series`` with ``pd.ArrowDtype``, one row per sequence.

pandas is imported inside the functions: ``import lodarrow`` does not load it.
"""

import numpy as np
import pyarrow as pa

from lodarrow._interop._arrow import from_arrow, to_arrow
from lodarrow._interop._objects import objects_to_arrow
from lodarrow._tensor import LoDTensor

__all__ = ["to_pandas", "from_pandas"]


def to_pandas(t):
    """Convert a LoDTensor to a ``pandas.Series`` backed by its Arrow array (zero-copy).

    Parameters
    ----------
    t : LoDTensor
        The tensor (GPU data is copied to the host).

    Returns
    -------
    pandas.Series
        ``pd.ArrowDtype`` of :meth:`LoDTensor.to_arrow`'s type: one row per top-level sequence
        (nested lists), or for ``lod_level == 0`` one row per data row.  bool data is
        bit-packed by Arrow (a copy); other dtypes share the tensor's memory.

    Raises
    ------
    TypeError
        If ``t`` is not a LoDTensor.
    ValueError
        If ``t`` has no data.

    Examples
    --------
    >>> import numpy as np, lodarrow as la
    >>> s = la.LoDTensor(np.arange(5), lengths=[[2, 3]]).to_pandas()
    >>> s.tolist()
    [[0, 1], [2, 3, 4]]
    >>> str(s.dtype)
    'large_list<item: int64>[pyarrow]'
    """
    import pandas as pd

    return pd.Series(pd.arrays.ArrowExtensionArray(to_arrow(t)))


def from_pandas(series, *, nulls="error", lod_level=None, feature_shape=None):
    """Convert a ``pandas.Series`` to a LoDTensor.

    Parameters
    ----------
    series : pandas.Series
        One of:

        - a Series with ``pd.ArrowDtype`` (as :meth:`LoDTensor.to_pandas` gives): converted
          as :func:`lodarrow.from_arrow` converts its Arrow data (zero-copy);
        - an object Series whose items are sequences at any depth, as ``pd.read_parquet``
          returns list columns by default: Python lists / tuples and 1-D NumPy arrays (object
          arrays nest further) are list levels, and a numeric NumPy array of rank >= 2 is
          rows with its trailing axes as feature dimensions (an item of shape ``(50, 8)`` is
          a sequence of 50 rows of width 8); Python ints give int64, floats float64, arrays
          keep their dtype; ``None`` / NaN items are null rows (see ``nulls``); an empty
          object Series gives zero sequences of float64;
        - a numeric Series: one data row per item, no LoD.

        The index is ignored.
    nulls : {"error", "empty"}, default "error"
        What a missing item (``None``) or null list becomes (see :func:`lodarrow.from_arrow`).
        NaN inside the values stays NaN.
    lod_level, feature_shape : optional
        Passed to :func:`lodarrow.from_arrow`: the outer ``lod_level`` list levels are the LoD,
        deeper regular ones become feature dimensions (``pd.read_parquet`` of a
        ``list<fixed_size_list<float, 8>>`` column gives arrays of arrays: ``lod_level=1``
        reads it back with feature shape ``(8,)``).  See docs/tables.md.

    Returns
    -------
    LoDTensor
        On the CPU; one top-level sequence per item of ``series`` (one row for a numeric one).

    Raises
    ------
    TypeError
        If ``series`` is not a Series or its items are not numeric sequences.
    ValueError
        If the items hold nulls (see ``nulls``; a missing item below the top level is always
        an error naming the row and the level) or NumPy items differ in feature shape or dtype.

    See Also
    --------
    LoDTensor.to_pandas : The inverse.
    from_arrow : From an Arrow array.

    Examples
    --------
    >>> import numpy as np, pandas as pd, lodarrow as la
    >>> t = la.from_pandas(pd.Series([[1.0, 2.0], [], [3.0]]))
    >>> t.lod(), t.data.tolist()
    ([[0, 2, 2, 3]], [1.0, 2.0, 3.0])
    >>> la.from_pandas(pd.Series([np.zeros((2, 3)), np.ones((1, 3))])).feature_shape
    (3,)
    >>> nested = pd.Series([np.array([np.array([1, 2]), np.array([3])], dtype=object)])
    >>> la.from_pandas(nested).lod()
    [[0, 2], [0, 2, 3]]
    """
    import pandas as pd

    if not isinstance(series, pd.Series):
        raise TypeError(f"from_pandas: series must be a pandas.Series, got "
                        f"{type(series).__name__}")
    kw = {}
    if lod_level is not None:
        kw["lod_level"] = lod_level
    if feature_shape is not None:
        kw["feature_shape"] = feature_shape
    if isinstance(series.dtype, pd.ArrowDtype):
        return from_arrow(series.array.__arrow_array__(), nulls=nulls, **kw)
    if series.dtype == object:
        items = series.to_numpy(dtype=object)
        if items.shape[0] == 0 and not kw:
            return LoDTensor._from_trusted(np.empty(0, dtype=np.float64),
                                           (np.zeros(1, dtype=np.int64),))
        if not kw and items.shape[0] and all(
                isinstance(item, np.ndarray) and item.ndim >= 1 and item.dtype != object
                for item in items):
            return _from_ndarrays(items)
        name = "series" if series.name is None else str(series.name)
        arr = objects_to_arrow(items, name, "from_pandas")
        return from_arrow(arr, nulls=nulls, **kw)
    # numeric NumPy or pandas-masked data: one row per item; NaN stays NaN
    try:
        arr = pa.array(series, from_pandas=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
        raise TypeError(f"from_pandas: cannot convert a Series of dtype {series.dtype} "
                        f"({exc})") from None
    return from_arrow(arr, nulls=nulls, **kw)


def _from_ndarrays(items):
    """One LoD level from a sequence of NumPy arrays of shape ``(length, *feature_shape)``."""
    first = items[0]
    for i, item in enumerate(items):
        if item.shape[1:] != first.shape[1:]:
            raise ValueError(f"from_pandas: item {i} has rows of shape {item.shape[1:]}, item 0 "
                             f"of shape {first.shape[1:]}; every row needs the same shape")
        if item.dtype != first.dtype:
            raise ValueError(f"from_pandas: item {i} has dtype {item.dtype}, item 0 "
                             f"{first.dtype}; every item needs the same dtype")
    lengths = np.fromiter((item.shape[0] for item in items), dtype=np.int64, count=len(items))
    offsets = np.zeros(lengths.shape[0] + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return LoDTensor(np.concatenate(list(items)), lod=[offsets])
