"""The Arrow layout of a LoDTensor, from types alone (no data): both directions.

- :func:`arrow_type` -- the Arrow type :func:`lodarrow.to_arrow` gives a tensor of a dtype,
  feature shape and LoD depth: the values, one ``FixedSizeList`` per feature dimension
  (outermost outermost), one ``LargeList`` (or ``List``) per LoD level.
- :func:`describe_type` -- what an Arrow type holds as a LoDTensor: its LoD depth, feature
  shape, dtype and the list kind of every level, or the ``TypeError`` / ``ValueError`` that
  :func:`lodarrow.from_arrow` raises for it.  This is what output schemas are computed from.
- :func:`plan` -- the same analysis as a decoding plan (buffer positions included), cached,
  shared by the pyarrow decoder and the C Device data interface.

By default every variable-size list (``List``, ``LargeList``, ``ListView``,
``LargeListView``) is a LoD level, a ``FixedSizeList`` above the last of them is a level of
uniform lengths and one below it a feature dimension.  With ``lod_level=k`` the outer ``k``
list levels (of any kind) are the LoD and every deeper list level is a feature dimension: a
``FixedSizeList`` gives its width, a variable-size list must be regular and its width comes
from ``feature_shape`` or from the data (see :func:`lodarrow.from_arrow`).
"""

import functools

import numpy as np
import pyarrow as pa

from lodarrow._errors import LoDError
from lodarrow._validation import SUPPORTED_DTYPES

__all__ = ["LIST", "LARGE_LIST", "LIST_VIEW", "LARGE_LIST_VIEW", "FIXED", "VARIABLE",
           "NUM_BUFFERS", "OFFSET_DTYPE", "TypeLayout", "arrow_type", "describe_type",
           "numpy_dtype", "plan", "split_levels", "trusted_arrow_type", "type_chain"]

# numpy dtype <-> Arrow type, one to one (float16 <-> halffloat; bool is bit-packed in Arrow).
_TO_ARROW = {np.dtype(d): pa.from_numpy_dtype(np.dtype(d)) for d in SUPPORTED_DTYPES}
_FROM_ARROW = {v: k for k, v in _TO_ARROW.items()}

#: The kinds of nested levels: variable-size lists, and fixed-size lists.
LIST, LARGE_LIST, LIST_VIEW, LARGE_LIST_VIEW, FIXED = (
    "list", "large_list", "list_view", "large_list_view", "fixed_size_list")
VARIABLE = (LIST, LARGE_LIST, LIST_VIEW, LARGE_LIST_VIEW)
#: The offsets (and sizes) dtype of each variable-size kind.
OFFSET_DTYPE = {LIST: np.dtype(np.int32), LARGE_LIST: np.dtype(np.int64),
                LIST_VIEW: np.dtype(np.int32), LARGE_LIST_VIEW: np.dtype(np.int64)}
#: Buffers each node contributes to ``Array.buffers()`` (validity first).
NUM_BUFFERS = {LIST: 2, LARGE_LIST: 2, LIST_VIEW: 3, LARGE_LIST_VIEW: 3, FIXED: 1}

_SUPPORTED = ("bool, int8, uint8, int16, uint16, int32, int64, float16 (halffloat), float32 "
              "or float64")


# ---------------------------------------------------------------------------- tensor -> type
@functools.lru_cache(maxsize=512)
def trusted_arrow_type(dtype, feature_shape, lod_level, large_offsets):
    """:func:`arrow_type` of arguments known to be valid (a numpy dtype a LoDTensor holds, a
    tuple of ints, an int, a bool), cached: ``to_arrow``'s per-call type."""
    t = _TO_ARROW[dtype]
    for size in reversed(feature_shape):
        t = pa.list_(t, size)
    for _ in range(lod_level):
        t = pa.large_list(t) if large_offsets else pa.list_(t)
    return t


def arrow_type(dtype, feature_shape=(), lod_level=0, large_offsets=True):
    """The Arrow type :func:`lodarrow.to_arrow` gives a LoDTensor with these properties.

    Parameters
    ----------
    dtype : numpy dtype or str
        One of the ten LoDTensor dtypes.
    feature_shape : tuple of int, default ()
        The shape of one data row: one ``FixedSizeList`` per dimension, outermost outermost.
    lod_level : int, default 0
        The number of LoD levels: one ``LargeList`` (``List`` with ``large_offsets=False``)
        each.
    large_offsets : bool, default True
        ``LargeList`` (int64 offsets) or ``List`` (int32 offsets) levels.

    Returns
    -------
    pyarrow.DataType

    Raises
    ------
    TypeError
        If ``dtype`` is not one a LoDTensor holds.

    Examples
    --------
    >>> from lodarrow._interop._arrow_layout import arrow_type
    >>> arrow_type("float32", (8,), 1)
    LargeListType(large_list<item: fixed_size_list<item: float>[8]>)
    """
    dt = np.dtype(dtype)
    if dt not in _TO_ARROW:
        raise TypeError(f"arrow_type: dtype {dt} is not supported; a LoDTensor holds "
                        f"{_SUPPORTED}")
    return trusted_arrow_type(dt, tuple(int(s) for s in feature_shape), int(lod_level),
                       bool(large_offsets))


# ---------------------------------------------------------------------------- type -> layout
def type_chain(arrow_type):
    """Split a nested type into its list kinds, outermost first, and the leaf type.

    Returns ``(kinds, leaf)``: ``kinds`` is a tuple of ``(kind, list_size)`` pairs
    (``list_size`` is 0 for variable-size lists).  Extension types are read as their storage.
    This is the one walker of list types: the table layer and Spark's casts read it too.
    """
    kinds = []
    t = arrow_type
    while True:
        if isinstance(t, pa.BaseExtensionType):
            t = t.storage_type
            continue
        if pa.types.is_large_list(t):
            kinds.append((LARGE_LIST, 0))
        elif pa.types.is_list(t):
            kinds.append((LIST, 0))
        elif pa.types.is_large_list_view(t):
            kinds.append((LARGE_LIST_VIEW, 0))
        elif pa.types.is_list_view(t):
            kinds.append((LIST_VIEW, 0))
        elif pa.types.is_fixed_size_list(t):
            kinds.append((FIXED, t.list_size))
        else:
            return tuple(kinds), t
        t = t.value_type


def split_levels(kinds):
    """``(levels, features)``: the default split of a kind chain into LoD levels and features.

    A ``FixedSizeList`` above the last variable-size list is a level of uniform lengths; below
    it (or with no variable-size list at all) it is a feature dimension.
    """
    last = max((i for i, (kind, _) in enumerate(kinds) if kind in VARIABLE), default=-1)
    return kinds[:last + 1], tuple(size for _, size in kinds[last + 1:])


def numpy_dtype(leaf):
    """The numpy dtype of an Arrow value type (dictionary: its values), or None."""
    if pa.types.is_dictionary(leaf):
        leaf = leaf.value_type
    return _FROM_ARROW.get(leaf)


class Plan:
    """How to take apart arrays of one Arrow type (see :func:`plan`)."""

    __slots__ = ("levels", "features", "widths", "dtype", "leaf", "null_leaf", "index_dtype",
                 "buffer_pos", "folded", "narrow")

    def __init__(self, levels, features, widths, dtype, leaf, index_dtype):
        self.levels = levels          # ((kind, size), ...) of the LoD levels
        self.features = features      # ((kind, size), ...) of the feature levels
        self.widths = widths          # the feature shape; None where the data must tell
        self.dtype = dtype            # numpy dtype of the values
        self.leaf = leaf              # the leaf Arrow type (a dictionary's value type)
        self.null_leaf = pa.types.is_null(leaf)  # list<null>: only empty lists are readable
        self.index_dtype = index_dtype  # not None: dictionary-encoded values, of these indices
        self.folded = any(kind != FIXED for kind, _ in features)  # variable lists as features
        # the LoD came from 32-bit lists (List / ListView, no large level): what the tensor
        # gives back by default (see LoDTensor.to_arrow)
        kinds = {kind for kind, _ in levels}
        self.narrow = bool(kinds & {LIST, LIST_VIEW}) and not kinds & {LARGE_LIST,
                                                                        LARGE_LIST_VIEW}
        pos, at = [], 0
        for kind, _ in levels + features:
            pos.append(at)
            at += NUM_BUFFERS[kind]
        pos.append(at)                # the leaf: validity, values (or indices)
        self.buffer_pos = tuple(pos)


# Recently seen (type, plan) pairs, newest first: comparing a type with ``==`` is far cheaper
# than hashing it (what an lru_cache would do), and from_arrow on a small array is mostly such
# fixed per-call work.
# Never reordered in place, so concurrent callers can at worst add a duplicate.
_RECENT = []


def plan(arrow_type, lod_level=None, feature_shape=None):
    """The cached decoding :class:`Plan` of ``arrow_type`` (see :func:`describe_type`).

    Unlike :func:`describe_type`, a width that only the data can give is left ``None`` in
    ``plan.widths``.
    """
    if lod_level is None and feature_shape is None:
        for known, p in _RECENT:
            if known == arrow_type:
                return p
        p = _make_plan(arrow_type, None, None)
        _RECENT.insert(0, (arrow_type, p))
        del _RECENT[8:]
        return p
    return _make_plan(arrow_type, _check_lod_level(lod_level),
                      _check_feature_shape(feature_shape))


def _check_lod_level(lod_level):
    if lod_level is None:
        return None
    if isinstance(lod_level, (bool, np.bool_)) or not isinstance(lod_level, (int, np.integer)):
        raise TypeError(f"from_arrow: lod_level must be an integer or None, got "
                        f"{type(lod_level).__name__}")
    if lod_level < 0:
        raise ValueError(f"from_arrow: lod_level must be >= 0, got {lod_level}")
    return int(lod_level)


def _check_feature_shape(feature_shape):
    if feature_shape is None:
        return None
    if isinstance(feature_shape, (int, np.integer)) and not isinstance(feature_shape, bool):
        feature_shape = (feature_shape,)
    try:
        dims = tuple(feature_shape)
    except TypeError:
        raise TypeError(f"from_arrow: feature_shape must be a tuple of integers, got "
                        f"{type(feature_shape).__name__}") from None
    for j, d in enumerate(dims):
        if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)):
            raise TypeError(f"from_arrow: feature_shape[{j}] must be an integer, got "
                            f"{type(d).__name__}")
        if d < 0:
            raise ValueError(f"from_arrow: feature_shape[{j}] must be >= 0, got {d}")
    return tuple(int(d) for d in dims)


@functools.lru_cache(maxsize=512)
def _make_plan(arrow_type, lod_level, feature_shape):
    kinds, leaf = type_chain(arrow_type)
    if lod_level is None and feature_shape is None:
        levels, _ = split_levels(kinds)
        n_levels = len(levels)
    elif lod_level is None:  # the inner len(feature_shape) list levels are the features
        n_levels = len(kinds) - len(feature_shape)
        if n_levels < 0:
            raise ValueError(f"from_arrow: feature_shape {feature_shape} has "
                             f"{len(feature_shape)} dimensions but {arrow_type} has only "
                             f"{len(kinds)} list levels")
    else:
        n_levels = lod_level
        if n_levels > len(kinds):
            raise ValueError(f"from_arrow: lod_level={lod_level} but {arrow_type} has only "
                             f"{len(kinds)} list levels")
        if feature_shape is not None and len(feature_shape) != len(kinds) - n_levels:
            raise ValueError(f"from_arrow: feature_shape {feature_shape} has "
                             f"{len(feature_shape)} dimensions but lod_level={lod_level} "
                             f"leaves {len(kinds) - n_levels} list levels of {arrow_type} "
                             f"as feature dimensions")
    levels, features = kinds[:n_levels], kinds[n_levels:]
    widths = []
    for j, (kind, size) in enumerate(features):
        stated = None if feature_shape is None else feature_shape[j]
        if kind == FIXED:
            if stated is not None and stated != size:
                raise LoDError(f"from_arrow: feature_shape[{j}] is {stated} but level "
                               f"{n_levels + j} of {arrow_type} is a fixed-size list of "
                               f"{size}")
            widths.append(size)
        else:
            widths.append(stated)
    index_dtype = None
    if pa.types.is_dictionary(leaf):
        index_dtype = np.dtype(leaf.index_type.to_pandas_dtype())
        leaf = leaf.value_type
    if pa.types.is_null(leaf):
        dtype = np.dtype(np.float64)  # list<null>: only empty lists can be represented
    else:
        dtype = _FROM_ARROW.get(leaf)
        if dtype is None:
            raise TypeError(f"from_arrow: values of Arrow type {leaf} (in {arrow_type}) are not "
                            f"supported; a LoDTensor holds {_SUPPORTED}")
    return Plan(levels, features, tuple(widths), dtype, leaf, index_dtype)


class TypeLayout:
    """What an Arrow type holds as a LoDTensor (see :func:`describe_type`).

    Attributes
    ----------
    lod_level : int
        The number of LoD levels.
    feature_shape : tuple of int
        The shape of one data row.
    dtype : numpy.dtype
        The dtype of the data (``float64`` for ``list<null>``).
    level_kinds : tuple of str
        The list kind of each LoD level, outermost first: ``"list"``, ``"large_list"``,
        ``"list_view"``, ``"large_list_view"`` or ``"fixed_size_list"``.
    feature_kinds : tuple of str
        The list kind of each feature level (``"fixed_size_list"``, or a variable-size kind
        whose lists must all have the width given in ``feature_shape``).
    dictionary : bool
        True when the values are dictionary-encoded (decoded by a copy).
    """

    __slots__ = ("lod_level", "feature_shape", "dtype", "level_kinds", "feature_kinds",
                 "dictionary")

    def __init__(self, p):
        self.lod_level = len(p.levels)
        self.feature_shape = p.widths
        self.dtype = p.dtype
        self.level_kinds = tuple(kind for kind, _ in p.levels)
        self.feature_kinds = tuple(kind for kind, _ in p.features)
        self.dictionary = p.index_dtype is not None

    def __repr__(self):
        return (f"TypeLayout(lod_level={self.lod_level}, feature_shape={self.feature_shape}, "
                f"dtype={self.dtype}, level_kinds={self.level_kinds}, "
                f"feature_kinds={self.feature_kinds}, dictionary={self.dictionary})")

    def __eq__(self, other):
        return isinstance(other, TypeLayout) and all(
            getattr(self, name) == getattr(other, name) for name in self.__slots__)

    __hash__ = None


def describe_type(arrow_type, lod_level=None, feature_shape=None):
    """What :func:`lodarrow.from_arrow` makes of arrays of ``arrow_type``, without data.

    Parameters
    ----------
    arrow_type : pyarrow.DataType
        A (nested) list type; an extension type is read as its storage type.
    lod_level : int, optional
        As in :func:`lodarrow.from_arrow`: the outer ``lod_level`` list levels are the LoD,
        deeper ones feature dimensions.  Default: every variable-size level is a LoD level.
    feature_shape : tuple of int, optional
        The widths of the feature levels.  Needed for every variable-size list level that
        ``lod_level`` makes a feature dimension (the type does not carry its width); checked
        against the widths of ``FixedSizeList`` levels.  Given alone, its length says how
        many inner list levels are feature dimensions.

    Returns
    -------
    TypeLayout
        ``lod_level``, ``feature_shape``, ``dtype``, ``level_kinds``, ``feature_kinds``,
        ``dictionary``.

    Raises
    ------
    TypeError
        If the values cannot be LoDTensor data (the message of :func:`lodarrow.from_arrow`),
        or an argument has the wrong type.
    ValueError
        If ``lod_level`` exceeds the list levels of the type, ``feature_shape`` has the wrong
        number of dimensions, or a feature level's width is known neither from the type nor
        from ``feature_shape`` (the message asks for ``feature_shape``).
    LoDError
        If ``feature_shape`` contradicts a ``FixedSizeList`` width.

    Examples
    --------
    >>> import pyarrow as pa
    >>> from lodarrow._interop._arrow_layout import describe_type
    >>> d = describe_type(pa.list_(pa.list_(pa.float32())), lod_level=1, feature_shape=(8,))
    >>> d.lod_level, d.feature_shape, d.dtype, d.level_kinds, d.feature_kinds
    (1, (8,), dtype('float32'), ('list',), ('list',))
    """
    p = plan(arrow_type, lod_level, feature_shape)
    if None in p.widths:
        raise ValueError(missing_width_message(arrow_type, p, p.widths.index(None)))
    return TypeLayout(p)


def missing_width_message(arrow_type, p, j):
    """The message asking for ``feature_shape`` when feature dimension ``j`` has no width."""
    return (f"from_arrow: feature dimension {j} is level {len(p.levels) + j} of {arrow_type}, "
            f"a {p.features[j][0]} whose width the type does not carry, and there is no data "
            f"to read it from; pass feature_shape=(...) with the widths of the "
            f"{len(p.features)} feature dimension(s)")
