"""LoDTensor <-> Awkward Array: ``ListOffsetArray`` levels over a ``NumpyArray`` (feature
dimensions as ``RegularArray``), offsets and values shared both ways
(docs/interop.md#awkward-array).
"""

import numpy as np

from lodarrow._cupy import get_cupy, is_cupy_array
from lodarrow._hub import _common
from lodarrow._interop._optional import import_optional
from lodarrow._validation import check_dtype

__all__ = ["from_awkward", "to_awkward"]


def _ak(fn):
    return import_optional("awkward", fn)


def to_awkward(obj, column=None, *, nulls="error"):
    """A LoDTensor (or a table column) as an ``awkward.Array``, zero-copy.

    Every LoD level becomes a ``ListOffsetArray`` whose ``Index64`` is the level's offsets
    (shared); the data becomes a ``NumpyArray`` (shared), each feature dimension a
    ``RegularArray`` over it.  CuPy data gives an Awkward array on the ``"cuda"`` backend.

    Parameters
    ----------
    obj : LoDTensor or table
        A LoDTensor, or a table with ``column`` (see :func:`lodarrow.to_torch`).
    column : str, optional
        The column to convert when ``obj`` is a table.
    nulls : {"error", "empty"}, default "error"
        For a table column: what a null list becomes.

    Returns
    -------
    awkward.Array
        Type ``N * var * ... * var * [d1 * [d2 * ...]] dtype``, sharing the tensor's buffers
        (docs/interop.md#copies).

    Raises
    ------
    ImportError
        If Awkward Array is not installed (the ``awkward`` extra: ``pip install -e '.[awkward]'``
        in the checkout).

    See Also
    --------
    from_awkward : The inverse.

    Examples
    --------
    >>> import numpy as np, lodarrow as la
    >>> la.LoDTensor(np.arange(3), lengths=[[2, 1]]).to_awkward().tolist()  # doctest: +SKIP
    [[0, 1], [2]]
    """
    fn = "to_awkward"
    t = _common.as_tensor(obj, column, fn, nulls)
    data, offsets = _common.parts(t, fn)
    ak = _ak(fn)
    contents = ak.contents
    n, feature = data.shape[0], data.shape[1:]
    if not data.flags.c_contiguous:  # RegularArray needs the rows packed: a copy
        data = data.copy()
    node = contents.NumpyArray(data.reshape(-1) if feature else data)
    # feature dimensions, innermost first: RegularArray(size=d) over the flat values
    for k in range(len(feature) - 1, -1, -1):
        outer = n * int(np.prod(feature[:k], dtype=np.int64))
        node = contents.RegularArray(node, int(feature[k]), zeros_length=outer)
    for k in range(len(offsets) - 1, -1, -1):
        off = _common.host_offsets(t, k)
        node = contents.ListOffsetArray(ak.index.Index64(off), node)
    return ak.Array(node)


def from_awkward(array, *, dtype=None):
    """A LoDTensor from an Awkward Array of (nested) lists of numbers, zero-copy where it can.

    Parameters
    ----------
    array : awkward.Array or awkward.contents.Content
        Lists (``ListOffsetArray``, ``ListArray``, ``RegularArray``) of any depth over numbers
        of one of lodarrow's dtypes; ``RegularArray`` levels below the last variable-length
        level (and a ``NumpyArray``'s inner dimensions) become the feature shape.  Lists
        whose sequences are all empty (``var * unknown``: an ``EmptyArray`` under them) are
        read as sequences of no values.
    dtype : numpy dtype, optional
        The values' dtype.  None keeps the array's own, and reads an ``EmptyArray``'s
        (unknown type) as float64, as ``ak.to_numpy`` does; another dtype casts the values
        (a copy where it differs).

    Returns
    -------
    LoDTensor
        One LoD level per list level above the feature dimensions.  The values are shared;
        int64 offsets that start at 0 are shared, others are copied (docs/interop.md#copies).

    Raises
    ------
    TypeError
        If the array holds records, strings, unions or another dtype, or ``dtype`` is not
        one of lodarrow's.
    ValueError
        If it holds missing values (option types): fill them first (``ak.fill_none``) or
        drop them (``ak.drop_none``); or if it is an ``EmptyArray`` with no list level above
        it (``ak.Array([])``: no sequence and no type to read).
    ImportError
        If Awkward Array is not installed.

    See Also
    --------
    to_awkward : The inverse.

    Examples
    --------
    >>> import lodarrow as la
    >>> import awkward as ak  # doctest: +SKIP
    >>> la.from_awkward(ak.Array([[1.0, 2.0], [], [3.0]])).lod()  # doctest: +SKIP
    [[0, 2, 2, 3]]
    """
    fn = "from_awkward"
    ak = _ak(fn)
    if not isinstance(array, (ak.Array, ak.contents.Content)):
        raise TypeError(f"{fn}: array must be an awkward.Array (ak.from_arrow, ak.Array(...)), "
                        f"got {type(array).__name__}")
    if dtype is not None:
        try:
            dtype = check_dtype(dtype, fn)
        except TypeError as exc:
            raise TypeError(f"{fn}: dtype={dtype!r} is not a dtype lodarrow holds "
                            f"({exc})") from None
    layout = ak.to_layout(array, allow_record=False)
    levels = []  # raw offsets, outermost first (not yet cut to the range above them)
    node = layout
    while True:
        name = type(node).__name__
        if node.parameter("__array__") in ("string", "bytestring", "char", "byte"):
            raise TypeError(f"{fn}: strings are not numbers (a LoDTensor holds numbers)")
        if name in ("ListOffsetArray",):
            levels.append(np.asarray(node.offsets.data) if not _on_gpu(node)
                          else node.offsets.data)
            node = node.content
        elif name == "ListArray":
            node = node.to_ListOffsetArray64(True)  # starts/stops: packed, a copy
        elif name == "RegularArray" and _has_list_below(node):
            node = node.to_ListOffsetArray64(False)  # a uniform level above a ragged one
        elif name in ("RegularArray", "NumpyArray", "EmptyArray"):
            break
        elif name == "UnmaskedArray":
            node = node.content  # an option type without a missing value (ak.from_arrow)
        elif name in ("IndexedOptionArray", "ByteMaskedArray", "BitMaskedArray"):
            node = _no_missing(node, len(levels), fn)
        elif name == "IndexedArray":
            node = node.project()  # an index over the content: gathered, a copy
        else:
            raise TypeError(f"{fn}: cannot read {name} (type {node.form.type}): a LoDTensor "
                            f"holds lists of numbers")
    if type(node).__name__ == "EmptyArray" and not levels:
        raise ValueError(f"{fn}: the array is empty with no list level (type "
                         f"{layout.length} * {layout.form.type}): it has no sequence and no "
                         f"dtype to read; a batch of empty sequences is a list of empty lists "
                         f"(ak.Array([[], []])), an empty batch of values ak.Array(np.empty(0))")
    levels = [_common.check_offsets(_common.host_array(o, fn), fn, f"level {k} offsets")
              for k, o in enumerate(levels)]
    n_rows = node.length
    levels, lo, hi = _common.rebase_levels(levels, n_rows, fn)
    data = _leaf(node, lo, hi, fn)
    if dtype is not None and data.dtype != dtype:
        data = data.astype(dtype)  # the dtype asked for: a copy
    return _common.build(data, levels, fn)


def _no_missing(node, depth, fn):
    """The content of an option node that has no missing value (``ValueError`` otherwise)."""
    if type(node).__name__ == "IndexedOptionArray":
        valid = _common.host_array(node.index.data, fn) >= 0
    else:
        valid = _common.host_array(node.mask_as_bool(valid_when=True), fn)
    if not valid.all():
        i = int(np.argmin(valid))
        raise ValueError(f"{fn}: the array holds missing values (type {node.form.type}), the "
                         f"first at position {i} of list depth {depth}; a LoDTensor has none: "
                         f"ak.fill_none or ak.drop_none them first")
    if type(node).__name__ == "IndexedOptionArray":
        return node.project()  # an index over the content: gathered, a copy
    return node.content[:node.length]


def _on_gpu(node):
    return node.backend.name == "cuda"


def _has_list_below(node):
    while True:
        name = type(node).__name__
        if name == "NumpyArray":
            return False
        if name in ("ListOffsetArray", "ListArray"):
            return True
        if not hasattr(node, "content"):
            return False
        node = node.content


def _leaf(node, lo, hi, fn):
    """Rows ``[lo, hi)`` of a NumpyArray / RegularArray nest as one array (a view)."""
    sizes = []
    while type(node).__name__ == "RegularArray":
        sizes.append(node.size)
        node = node.content
    if type(node).__name__ == "EmptyArray":
        # ``unknown`` under lists that are all empty: no values, read as float64 like
        # ak.to_numpy; its length is 0, so every level above ends at 0.
        xp = get_cupy("from_awkward on the cuda backend") if _on_gpu(node) else np
        node = None
        raw = xp.empty(0, dtype=np.float64)
    elif type(node).__name__ != "NumpyArray":
        raise TypeError(f"{fn}: cannot read {type(node).__name__} under a RegularArray: a "
                        f"LoDTensor holds lists of numbers")
    if node is not None:
        if node.parameter("__array__") in ("char", "byte"):
            raise TypeError(f"{fn}: strings are not numbers (a LoDTensor holds numbers)")
        raw = node.data
        if not is_cupy_array(raw):
            raw = np.asarray(raw)
    step = int(np.prod(sizes, dtype=np.int64)) if sizes else 1
    inner = raw.shape[1:]
    data = raw[lo * step:hi * step]
    if sizes:
        data = data.reshape((hi - lo, *sizes, *inner))
    if data.dtype.kind in "mMUSOcV":
        raise TypeError(f"{fn}: values of dtype {data.dtype} are not numbers lodarrow holds")
    return data
