"""``LoDTensor``: a dense array whose rows are cut into nested sequences by offset levels."""

import functools
import operator

import numpy as np

from lodarrow._cupy import get_cupy, get_cupyx, is_cupy_array
from lodarrow._elementwise import ElementwiseMixin
from lodarrow._errors import LoDError
from lodarrow._place import (CPUPlace, CUDAPinnedPlace, CUDAPlace, _cuda_place_unchecked,
                             as_place)
from lodarrow._validation import (
    as_flag,
    as_int,
    as_lod,
    check_dtype,
    check_lod,
    lengths_to_offsets,
    lod_problem,
    offsets_to_lengths,
)

__all__ = ["LoDTensor"]

_PRINT_EDGE = 10  # elements shown at each end of a long printout


@functools.cache
def _arrow():
    """``lodarrow._interop._arrow``, which imports this module: imported on first use, then kept
    (an ``import`` statement in the method would run on every call of a cheap ``to_arrow``)."""
    from lodarrow._interop import _arrow

    return _arrow


def _host(data):
    """The data as a NumPy array (a device-to-host copy for CuPy data)."""
    return data.get() if is_cupy_array(data) else data


def _move(data, place):
    """Return ``data`` in the memory of ``place``, copying only if it is elsewhere."""
    if isinstance(place, CUDAPlace):
        cupy = get_cupy(repr(place))
        if is_cupy_array(data) and data.device.id == place.device_id:
            return data
        with cupy.cuda.Device(place.device_id):
            return cupy.asarray(data)
    host = _host(data)
    if isinstance(place, CUDAPinnedPlace):
        pinned = get_cupyx("CUDAPinnedPlace").empty_pinned(host.shape, dtype=host.dtype)
        pinned[...] = host
        return pinned
    return host


def _coerce_data(obj, place, copy, name="data"):
    """Return ``(data, place)``: a checked NumPy/CuPy array of rank >= 1 and its place."""
    place = as_place(place)
    if obj is None:
        raise TypeError(f"{name} is required (an array), got None")
    if is_cupy_array(obj):
        data = obj.copy() if copy else obj
        where = _cuda_place_unchecked(obj.device.id)
    else:
        if isinstance(obj, LoDTensor):
            obj = obj._data
        try:
            data = np.array(obj, copy=True) if copy else np.asarray(obj)
        except (ValueError, TypeError) as exc:
            hint = ("; for nested sequences of different lengths use lodarrow.from_list"
                    if "inhomogeneous" in str(exc) else "")
            raise TypeError(f"{name} must be array-like with a supported dtype "
                            f"({exc}){hint}") from None
        where = CPUPlace()
    check_dtype(data.dtype, name)
    if data.ndim == 0:
        raise ValueError(f"{name} must have rank >= 1 (rows first), got a 0-d array")
    if place is not None and place != where:
        data = _move(data, place)
        where = place
    return data, where


class LoDTensor(ElementwiseMixin):
    """A dense array ``data`` of shape ``(N, *feature_shape)`` plus a LoD of nested offsets.

    Level ``k`` of the LoD is an int64 offset array that cuts the entries of level ``k + 1``
    (the last level: the rows of ``data``) into sequences: sequence ``i`` spans
    ``[offsets[i], offsets[i + 1])``.  Each level maps onto one Arrow list-offsets buffer.

    Parameters
    ----------
    data : array_like, optional
        NumPy or CuPy array (or anything ``numpy.asarray`` takes) of rank >= 1 and one of the
        dtypes bool, int8, uint8, int16, uint16, int32, int64, float16, float32, float64.
        Omitted: an empty tensor to fill with :meth:`set` (Paddle's ``LoDTensor()``).
    lod : list of 1-D arrays of int, optional
        The offsets of each level, outermost first (``[[0, 2, 3], [0, 2, 4, 7]]``).  Levels
        given as 1-D int64 NumPy arrays are taken as Arrow's offsets are: the O(1) rules
        (first offset 0, each level ending where the next begins, the last at the row count)
        are checked now and the O(n) order scan once, at the first read, so construction
        costs microseconds at any size (docs/data-model.md#lod-rules).
    lengths : list of 1-D arrays of int, optional
        The same LoD as recursive sequence lengths (``[[2, 1], [2, 2, 3]]``).
    place : CPUPlace, CUDAPlace, CUDAPinnedPlace or str, optional
        Where the data should live; by default where it already is.
    copy : bool, default False
        Copy ``data`` even when it could be used as is.

    Raises
    ------
    LoDError
        If the LoD breaks a rule of docs/data-model.md#lod-rules (the message names level and
        position).
    TypeError
        If the dtype is not supported or an offset is not an integer.

    Notes
    -----
    Elementwise math keeps the LoD: NumPy ufuncs (CuPy's on the GPU) and the operators
    ``+ - * / // % ** & | ^ << >> < <= > >=``, unary ``- + abs ~`` return a LoDTensor with the
    same LoD.  Operands are LoDTensors with equal LoDs, scalars, or arrays that broadcast to
    the feature shape (never along the rows).  Reductions (``np.sum``, ``np.add.reduce`` ...)
    raise ``TypeError``: pool each sequence with :func:`lodarrow.sequence_pool`.
    ``t == u`` compares whole tensors (as :meth:`equals`); ``np.equal(t, u)`` is elementwise.

    Examples
    --------
    >>> import numpy as np, lodarrow as la
    >>> t = la.LoDTensor(np.arange(7.0), lengths=[[2, 1], [2, 2, 3]])
    >>> t.lod()
    [[0, 2, 3], [0, 2, 4, 7]]
    >>> len(t), t[1].lod()
    (2, [[0, 3]])
    """

    __slots__ = ("_data", "_offsets", "_place", "_device_offsets", "_unchecked", "_lod_problem",
                 "_narrow", "__weakref__")

    def __init__(self, data=None, lod=None, *, lengths=None, place=None, copy=False):
        self._narrow = False
        self._device_offsets = {}
        self._unchecked = False
        self._lod_problem = None
        if data is None:
            if lod is not None or lengths is not None:
                raise ValueError("LoDTensor: a lod or lengths needs data")
            self._data = None
            self._offsets = ()
            self._place = as_place(place) or CPUPlace()
            return
        self._data, self._place = _coerce_data(data, place, as_flag(copy, "LoDTensor: copy"))
        if lod is not None and lengths is not None:
            raise TypeError("LoDTensor: give lod or lengths, not both")
        if lengths is not None:
            levels = _checked_lengths(lengths, self._data.shape[0], "lengths")
        elif lod is None:
            levels = ()
        elif _offset_arrays(lod):
            # Offsets already held as int64 arrays are taken as Arrow's are: the O(1) bounds
            # now, the O(n) scan deferred to the first read (see _from_trusted), so building
            # a tensor costs the same at any size.
            check_lod(lod, self._data.shape[0], "lod", [0 if o[0] else -1 for o in lod])
            levels = lod
            self._unchecked = True
        else:
            levels = as_lod(lod, self._data.shape[0], "lod")
        self._offsets = _freeze(levels)

    @classmethod
    def from_lengths(cls, data, lengths, *, place=None, copy=False):
        """Build a LoDTensor from recursive sequence lengths (see the class docstring)."""
        return cls(data, lengths=lengths, place=place, copy=copy)

    @classmethod
    def _from_trusted(cls, data, offsets, place=None, unchecked=False, narrow=False):
        """Wrap parts without any check (operator outputs, views).

        ``unchecked=True`` marks offsets taken from outside (Arrow buffers) whose monotonicity
        has not been scanned yet: the O(n) scan then runs once, when anything first reads the
        structure (an operator, ``lod()``, ``lengths``, ``t[i]``, ``to_list()``, ``np.array``
        ... all go through :meth:`_scan`), and its result is cached, so conversions stay O(1).
        ``narrow=True``: the LoD came from 32-bit Arrow lists, which :meth:`to_arrow` gives
        back by default (views of the tensor pass it on; operator results do not).
        """
        self = object.__new__(cls)
        self._narrow = narrow
        self._unchecked = unchecked
        self._lod_problem = None
        self._data = data
        self._offsets = tuple(offsets)
        if place is None:
            place = _cuda_place_unchecked(data.device.id) if is_cupy_array(data) else CPUPlace()
        self._place = place
        self._device_offsets = {}
        return self

    # ------------------------------------------------------------------ Paddle surface
    def set(self, array, place=None):
        """Copy ``array`` into this tensor at ``place`` (Paddle's ``set``); the LoD is kept.

        As in Paddle, a LoD set earlier stays; if it no longer matches the new row count,
        :meth:`has_valid_recursive_sequence_lengths` returns False.
        """
        self._data, self._place = _coerce_data(array, place, copy=True, name="array")
        self._device_offsets = {}
        self._lod_problem = None  # a pending Arrow scan checks against the new rows

    def set_lod(self, lod):
        """Set the LoD from offsets, e.g. ``[[0, 2, 5]]``; raises ``LoDError`` if invalid."""
        self._offsets = _freeze(as_lod(lod, self._rows(), "lod"))
        self._device_offsets = {}
        self._unchecked = False

    def set_recursive_sequence_lengths(self, recursive_sequence_lengths):
        """Set the LoD from lengths, e.g. ``[[2, 3]]``; raises ``LoDError`` if invalid."""
        self._set_lengths(recursive_sequence_lengths, "recursive_sequence_lengths")

    def _set_lengths(self, lengths, name):
        self._offsets = _freeze(_checked_lengths(lengths, self._rows(), name))
        self._device_offsets = {}
        self._unchecked = False

    def lod(self):
        """The LoD as offsets: a list of lists of int."""
        return [level.tolist() for level in self._structure("lod()")]

    def recursive_sequence_lengths(self):
        """The LoD as lengths: a list of lists of int."""
        return [offsets_to_lengths(level).tolist()
                for level in self._structure("recursive_sequence_lengths()")]

    def has_valid_recursive_sequence_lengths(self):
        """True if the LoD is valid for the current data; never raises."""
        try:
            if self._unchecked and self._scanned_problem():
                return False
            return lod_problem(self._offsets, self._rows()) is None
        except Exception:
            return False

    def shape(self):
        """The data's shape as a list of int (Paddle's ``shape()``); ``[]`` when empty."""
        return [] if self._data is None else [int(s) for s in self._data.shape]

    # ------------------------------------------------------------------ properties
    @property
    def data(self):
        """The rows: a ``numpy.ndarray`` (CPU, pinned) or ``cupy.ndarray`` (GPU); no copy."""
        if self._unchecked:
            self._structure("data")  # Arrow offsets also decide which rows the data holds
        return self._data

    @property
    def dtype(self):
        """The data's ``numpy.dtype``."""
        return np.dtype(np.float32) if self._data is None else self._data.dtype

    @property
    def place(self):
        """Where the data lives."""
        return self._place

    @property
    def lod_level(self):
        """The number of LoD levels (0 for a plain tensor)."""
        return len(self._offsets)

    @property
    def offsets(self):
        """The LoD levels as a tuple of read-only int64 arrays (no copy)."""
        if self._unchecked:  # _structure's own test, inlined: this runs on every operator call
            return self._structure("offsets")
        return self._offsets

    @property
    def lengths(self):
        """The sequence lengths of every level, as a tuple of int64 arrays."""
        return tuple(offsets_to_lengths(level) for level in self._structure("lengths"))

    @property
    def feature_shape(self):
        """The shape of one row, ``data.shape[1:]``."""
        return () if self._data is None else tuple(self._data.shape[1:])

    @property
    def ndim(self):
        """The rank of the data."""
        return 0 if self._data is None else self._data.ndim

    @property
    def nbytes(self):
        """Bytes held by the data plus the offsets."""
        data = 0 if self._data is None else self._data.nbytes
        return data + sum(level.nbytes for level in self._offsets)

    def num_sequences(self, level=0):
        """The number of sequences of LoD level ``level`` (negative counts from the last)."""
        level = as_int(level, "num_sequences: level")
        if not self._offsets:
            raise ValueError("num_sequences: this LoDTensor has no LoD levels")
        try:
            return self._structure("num_sequences")[level].shape[0] - 1
        except IndexError:
            raise IndexError(f"num_sequences: level {level} is out of range for "
                             f"{len(self._offsets)} levels") from None

    # ------------------------------------------------------------------ sequence access
    def __len__(self):
        if self._data is None:
            return 0
        if not self._offsets:
            return self._data.shape[0]
        return self._structure("len()")[0].shape[0] - 1

    def __getitem__(self, key):
        if self._data is None:
            raise IndexError("index into an empty LoDTensor")
        self._readable("indexing")
        n = len(self)
        if isinstance(key, slice):
            start, stop, step = key.indices(n)
            if step == 1:
                return self._view(start, max(start, stop), keep_level=True)
            return self.take(np.arange(start, stop, step))
        if isinstance(key, (list, np.ndarray)) or is_cupy_array(key):
            return self.take(key)
        try:
            i = operator.index(key)
        except TypeError:
            raise TypeError(f"LoDTensor indices must be integers, slices or integer arrays, "
                            f"got {type(key).__name__}") from None
        if not -n <= i < n:
            raise IndexError(f"index {i} is out of range for a LoDTensor of {n} sequences")
        i += n if i < 0 else 0
        if not self._offsets:
            return self._data[i]
        return self._view(i, i + 1, keep_level=False)

    def _view(self, lo, hi, keep_level):
        """Sequences ``[lo, hi)`` of the top level as a view of the data (offsets rebased)."""
        levels = []
        for k, off in enumerate(self._offsets):
            a, b = int(off[lo]), int(off[hi])
            if keep_level or k > 0:
                levels.append(off[lo:hi + 1] - a if a else off[lo:hi + 1])
            lo, hi = a, b
        return LoDTensor._from_trusted(self._data[lo:hi], _freeze(levels), self._place,
                                       narrow=self._narrow)

    def take(self, indices):
        """Gather top-level sequences (rows for a plain tensor) into a new LoDTensor (a copy).

        ``indices`` is an integer array (negative values count from the end) or a boolean
        mask of length ``len(self)``.
        """
        if self._data is None:
            raise IndexError("take: this LoDTensor is empty (no data has been set)")
        self._readable("take")
        idx = _host(indices) if is_cupy_array(indices) else np.asarray(indices)
        n = len(self)
        if idx.dtype == bool:
            if idx.shape != (n,):
                raise IndexError(f"take: a boolean mask must have shape ({n},), got {idx.shape}")
            idx = np.flatnonzero(idx)
        elif idx.dtype.kind not in "iu" and idx.size:
            raise TypeError(f"take: indices must be integers, got dtype {idx.dtype}")
        idx = idx.astype(np.int64, copy=False).reshape(-1)
        if idx.size and (idx.min() < -n or idx.max() >= n):
            pos = int(np.argmax((idx < -n) | (idx >= n)))
            raise IndexError(f"take: index {int(idx[pos])} at position {pos} is out of range "
                             f"for {n} sequences")
        sel = np.where(idx < 0, idx + n, idx)
        levels = []
        for off in self._offsets:
            starts = off[sel]
            lens = off[sel + 1] - starts
            new = np.zeros(sel.shape[0] + 1, dtype=np.int64)
            np.cumsum(lens, out=new[1:])
            levels.append(new)
            sel = np.repeat(starts - new[:-1], lens) + np.arange(new[-1], dtype=np.int64)
        if is_cupy_array(self._data):
            sel = get_cupy().asarray(sel)
        data = self._data.take(sel, axis=0)
        return LoDTensor._from_trusted(data, _freeze(levels), self._place, narrow=self._narrow)

    def merge_levels(self, outer, inner):
        """Merge LoD levels ``outer`` to ``inner`` into one level (TF's ``merge_dims``).

        Levels ``outer..inner`` (inclusive; negative values count from the last level) are
        replaced by their composition: sequence ``i`` of the new level spans every row that
        sequence ``i`` of level ``outer`` spans through the merged levels.  The data is shared
        (no copy) and the other levels are kept.  ``outer == inner`` returns the same LoD.

        Parameters
        ----------
        outer, inner : int
            The first and last level to merge, ``outer <= inner``.

        Returns
        -------
        LoDTensor
            ``lod_level - (inner - outer)`` levels, the same rows.

        Raises
        ------
        TypeError
            If ``outer`` or ``inner`` is not an integer.
        IndexError
            If a level is out of range.
        ValueError
            If ``outer > inner``.

        Examples
        --------
        Pooling twice averages the sentence means of each document; merging the document and
        sentence levels first averages each document's tokens:

        >>> import numpy as np, lodarrow as la
        >>> t = la.LoDTensor(np.array([1., 2., 3., 10.]), lengths=[[2], [3, 1]])
        >>> t.merge_levels(0, 1).lod()
        [[0, 4]]
        >>> la.sequence_pool(t.merge_levels(0, 1), "average").data.tolist()
        [4.0]
        >>> la.sequence_pool(la.sequence_pool(t, "average"), "average").data.tolist()
        [6.0]
        """
        if self._data is None:
            raise ValueError("merge_levels: this LoDTensor is empty (no data has been set)")
        levels = self._structure("merge_levels")
        n = len(levels)
        bounds = []
        for arg, value in (("outer", outer), ("inner", inner)):
            k = as_int(value, f"merge_levels: {arg}")
            if not -n <= k < n:
                raise IndexError(f"merge_levels: {arg}={k} is out of range for a LoDTensor of "
                                 f"{n} LoD level(s) (levels 0..{n - 1}, or negative from the "
                                 f"last)")
            bounds.append(k + n if k < 0 else k)
        lo, hi = bounds
        if lo > hi:
            raise ValueError(f"merge_levels: outer={outer} must not come after inner={inner} "
                             f"(levels are numbered from the outermost, 0)")
        merged = levels[lo]
        for k in range(lo + 1, hi + 1):
            merged = levels[k][merged]  # offsets of level k at the bounds found so far
        new = (*levels[:lo], merged, *levels[hi + 1:]) if hi > lo else levels
        return LoDTensor._from_trusted(self._data, _freeze(new), self._place,
                                       narrow=self._narrow)

    def __iter__(self):
        if self._data is not None:
            self._readable("iteration")
        for i in range(len(self)):
            yield self[i]

    # ------------------------------------------------------------------ places
    def to(self, place):
        """This tensor at ``place`` (a Place or "cpu" / "cuda:0"); ``self`` if already there."""
        place = as_place(place)
        if place is None:
            raise TypeError("to: place is required")
        if self._data is None or place == self._place:
            return self
        return LoDTensor._from_trusted(_move(self._data, place), self._offsets, place,
                                       self._unchecked, self._narrow)

    def cpu(self):
        """This tensor in host memory (``self`` if it is there already)."""
        return self.to(CPUPlace())

    def cuda(self, device_id=0):
        """This tensor on CUDA device ``device_id`` (needs CuPy and a GPU)."""
        return self.to(CUDAPlace(device_id))

    # ------------------------------------------------------------------ operator interface
    # The operators read a tensor through ``data``, ``offsets``, ``place`` and ``lod_level``,
    # and use only these internals: ``_check_valid`` (an input's entry check),
    # ``_device_offsets_for`` (through ``lodarrow._backends``) and ``_derive`` (results).
    def _device_offsets_for(self, level):
        """Level ``level``'s offsets on the data's device, copied once and cached."""
        cached = self._device_offsets.get(level)
        if cached is None:
            cupy = get_cupy()
            with cupy.cuda.Device(self._data.device.id):
                cached = cupy.asarray(self._offsets[level])
            self._device_offsets[level] = cached
        return cached

    def _derive(self, data, offsets=None):
        """An operator's result on this tensor's place: ``data`` (trusted) under ``offsets``.

        Without ``offsets`` the result keeps this tensor's LoD and shares its device copies of
        the offsets, so they are not copied to the GPU again.  The slots are those
        :meth:`_from_trusted` sets, set here directly: this runs on every operator call.
        """
        out = object.__new__(LoDTensor)
        out._narrow = False  # the table layer chooses its results' offset width itself
        out._unchecked = False
        out._lod_problem = None
        out._data = data
        out._place = self._place
        if offsets is None:
            out._offsets = self._offsets
            out._device_offsets = self._device_offsets  # same levels: share the cache
        else:
            out._offsets = tuple(offsets)
            out._device_offsets = {}
        return out

    # ------------------------------------------------------------------ NumPy
    def numpy(self):
        """The data as a ``numpy.ndarray`` (no copy on the CPU; copied from the GPU)."""
        if self._data is None:
            return np.empty((0,), dtype=np.float64)
        self._structure("numpy()")  # Arrow offsets also decide which rows the data holds
        return _host(self._data)

    def __array__(self, dtype=None, copy=None):
        on_gpu = is_cupy_array(self._data)
        data = self.numpy()
        if copy is False:
            if on_gpu:
                raise ValueError("a GPU LoDTensor cannot be converted to NumPy without a copy")
            if dtype is not None and np.dtype(dtype) != data.dtype:
                raise ValueError(f"converting {data.dtype} to {np.dtype(dtype)} needs a copy")
        if dtype is not None and np.dtype(dtype) != data.dtype:
            return data.astype(dtype)
        if copy and not on_gpu:
            return data.copy()
        return data

    def to_list(self):
        """The tensor as nested Python lists: one list per LoD level, then the rows."""
        if self._data is None:
            return []
        self._readable("to_list")
        rows = self.numpy().tolist()
        for off in reversed(self._offsets):
            bounds = off.tolist()
            rows = [rows[bounds[j]:bounds[j + 1]] for j in range(len(bounds) - 1)]
        return rows

    # ------------------------------------------------------------------ interchange
    def to_arrow(self, large_offsets=None):
        """This tensor as a ``pyarrow.Array`` of nested lists (zero-copy but for bool).

        ``large_offsets``: None (the default) gives back the offset width the tensor was read
        with -- ``List`` levels for one that :func:`lodarrow.from_arrow` read from ``List`` /
        ``ListView`` levels (or a slice, ``take`` or view of one) where every offset fits
        int32, else ``LargeList``; True forces ``LargeList`` (the int64 offsets, zero-copy),
        False ``List`` (int32 offsets, a copy; ``ValueError`` if one does not fit).  See
        :func:`lodarrow.from_arrow` and docs/data-model.md#arrow-mapping for the mapping.
        """
        return _arrow().to_arrow(self, large_offsets)

    def __arrow_c_array__(self, requested_schema=None):
        return _arrow().export_c_array(self, requested_schema)

    def __arrow_c_device_array__(self, requested_schema=None, **kwargs):
        from lodarrow._interop._cdevice import export_device_array

        return export_device_array(self, requested_schema, **kwargs)

    def to_pandas(self):
        """This tensor as a ``pandas.Series`` with ``pd.ArrowDtype``, a row per sequence."""
        try:
            import pandas  # noqa: F401
        except ImportError as exc:
            raise ModuleNotFoundError(
                f"to_pandas needs pandas ({exc}); install the 'pandas' extra "
                f"(pip install -e '.[pandas]' in the checkout)", name="pandas") from None
        from lodarrow._interop._pandas import to_pandas

        return to_pandas(self)

    # conversion hub (docs/interop.md): each target library is imported on first use
    def to_torch(self, layout="varlen", **kwargs):
        """This tensor in PyTorch: ``layout`` "varlen", "jagged" or "padded" (see
        :func:`lodarrow.to_torch` and docs/interop.md#pytorch)."""
        from lodarrow._hub._torch import to_torch

        return to_torch(self, layout=layout, **kwargs)

    def to_jax(self, layout="segments", **kwargs):
        """This tensor in JAX: ``layout`` "segments" or "padded" (see :func:`lodarrow.to_jax`
        and docs/interop.md#jax)."""
        from lodarrow._hub._jax import to_jax

        return to_jax(self, layout=layout, **kwargs)

    def to_tf(self):
        """This tensor as a ``tf.RaggedTensor`` with every LoD level (see
        :func:`lodarrow.to_tf` and docs/interop.md#tensorflow)."""
        from lodarrow._hub._tf import to_tf

        return to_tf(self)

    def to_paddle(self):
        """This tensor as PaddlePaddle's own ``LoDTensor`` (see :func:`lodarrow.to_paddle`
        and docs/interop.md#paddlepaddle)."""
        from lodarrow._hub._paddle import to_paddle

        return to_paddle(self)

    def to_awkward(self):
        """This tensor as an ``awkward.Array``, zero-copy (see :func:`lodarrow.to_awkward`
        and docs/interop.md#awkward-array)."""
        from lodarrow._hub._awkward import to_awkward

        return to_awkward(self)

    @property
    def __cuda_array_interface__(self):
        if not is_cupy_array(self._data):
            raise AttributeError("__cuda_array_interface__: the data is not on a CUDA device")
        return self._data.__cuda_array_interface__

    def __dlpack__(self, *args, **kwargs):
        return self._data.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self._data.__dlpack_device__()

    # ------------------------------------------------------------------ comparison, display
    def equals(self, other):
        """True if ``other`` is a LoDTensor with the same dtype, shape, LoD and data.

        NaNs at the same positions compare equal; the place is not compared.
        """
        if not isinstance(other, LoDTensor):
            return False
        if (self._data is None) or (other._data is None):
            return self._data is None and other._data is None and self.lod() == other.lod()
        if self.dtype != other.dtype or self._data.shape != other._data.shape:
            return False
        if len(self._offsets) != len(other._offsets) or not all(
            np.array_equal(a, b) for a, b in zip(self._offsets, other._offsets)
        ):
            return False
        return bool(np.array_equal(self.numpy(), other.numpy(),
                                   equal_nan=self.dtype.kind == "f"))

    def __eq__(self, other):
        # Whole-tensor comparison, as ``equals`` (kept on purpose: a LoDTensor is a value, and
        # ``t == u`` answers one question).  Not NotImplemented for other types, so that
        # ``t == np.float64(3)`` is not turned into NumPy's elementwise ``np.equal``; that one
        # is asked for by name: ``np.equal(t, 3)``.
        return isinstance(other, LoDTensor) and self.equals(other)

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = None


    def _rows(self):
        return None if self._data is None else self._data.shape[0]

    def _check_valid(self, name):
        """Raise unless this tensor can enter an operator as argument ``name``."""
        data = self._data
        if data is None:
            raise ValueError(f"{name} is an empty LoDTensor (no data has been set)")
        if self._unchecked:  # _structure's own test, inlined: this runs on every operator call
            self._structure(None, f"{name}.lod")
        off = self._offsets
        if off and off[-1].item(-1) != data.shape[0]:
            raise LoDError(f"invalid LoD: {name}'s last level ends at {int(off[-1][-1])} but "
                           f"its data has {data.shape[0]} rows (set() changed the data?)")

    _NAME = "\0"  # stands for the argument's name in a cached message

    def _scanned_problem(self):
        """The deferred O(n) scan of offsets taken from Arrow: run once, its verdict cached."""
        if self._lod_problem is None:
            self._lod_problem = lod_problem(self._offsets, self._rows(), self._NAME) or ""
            if not self._lod_problem:
                self._unchecked = False
        return self._lod_problem

    def _structure(self, what, name="lod"):
        """The offsets, once they are known to be valid (else ``LoDError``).

        Every path that reads the structure goes through here, so offsets that came from
        Arrow and were never scanned are never read.  A LoD set through ``set_lod`` was
        checked when set; only the row count may have changed since (see :meth:`_readable`).
        """
        if self._unchecked:
            problem = self._scanned_problem()
            if problem:
                where = "" if what is None else f"{what}: "
                raise LoDError(f"{where}{problem.replace(self._NAME, name)} (offsets "
                               f"given as arrays or taken from Arrow are checked when "
                               f"first read)")
        return self._offsets

    def _readable(self, what):
        """Raise ``LoDError`` unless the LoD is valid and ends at the data's row count."""
        off = self._structure(what)
        if off and int(off[-1][-1]) != self._data.shape[0]:
            raise LoDError(f"{what}: the LoD's last level ends at {int(off[-1][-1])} but the "
                           f"data has {self._data.shape[0]} rows (set() changed the data?); "
                           f"set a matching LoD first (has_valid_recursive_sequence_lengths() "
                           f"is False)")

    def _shown_offsets(self):
        """The offsets for a printout, which must not raise: None if they are invalid."""
        return None if self._unchecked and self._scanned_problem() else self._offsets

    def __repr__(self):
        off = self._shown_offsets()
        lod = "<invalid>" if off is None else _abbreviate_lod([o.tolist() for o in off], 8)
        shape = tuple(self.shape())
        return f"LoDTensor(lod={lod}, shape={shape}, dtype={self.dtype}, place={self._place!r})"

    def __str__(self):
        lines = []
        off = self._shown_offsets()
        if off is None:
            lines.append("- lod: <invalid: " + self._lod_problem.replace(self._NAME, "lod") + ">")
        elif off:
            lod = "".join("{" + ", ".join(_abbreviate(level.tolist(), 50)) + "}"
                          for level in off)
            lines.append(f"- lod: {{{lod}}}")
        lines.append(f"- place: {self._place!r}")
        lines.append(f"- shape: {self.shape()}")
        lines.append("- layout: NCHW")
        if self._data is not None:
            lines.append(f"- dtype: {self.dtype}")
            flat = _host(self._data).reshape(-1)
            if flat.size > 2 * _PRINT_EDGE:
                flat = np.concatenate([flat[:_PRINT_EDGE], flat[-_PRINT_EDGE:]])
                items = [_fmt(v) for v in flat.tolist()]
                items = items[:_PRINT_EDGE] + ["..."] + items[_PRINT_EDGE:]
            else:
                items = [_fmt(v) for v in flat.tolist()]
            lines.append(f"- data: [{' '.join(items)}]")
        return "\n".join(lines)


def _fmt(value):
    """Format one element as C++'s ``ostream <<`` does (Paddle's printout)."""
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _abbreviate(items, limit):
    strs = [str(v) for v in items]
    if len(strs) > limit:
        strs = strs[: limit // 2] + ["..."] + strs[-limit // 2:]
    return strs


def _abbreviate_lod(lod, limit):
    return "[" + ", ".join("[" + ", ".join(_abbreviate(level, limit)) + "]" for level in lod) + "]"


def _checked_lengths(lengths, n_rows, name):
    """The offsets of recursive sequence ``lengths``, checked as a LoD for ``n_rows`` rows.

    Offsets summed from valid lengths start at 0 and never decrease: only how the levels fit
    each other and the rows is left to check.
    """
    levels = lengths_to_offsets(lengths, name)
    check_lod(levels, n_rows, name, [-1] * len(levels))
    return levels


def _offset_arrays(lod):
    """True when every level of ``lod`` is already a 1-D, contiguous, int64 NumPy array."""
    return (isinstance(lod, (list, tuple)) and len(lod) > 0
            and all(type(o) is np.ndarray and o.dtype == np.int64 and o.ndim == 1
                    and o.shape[0] > 0 and o.flags.c_contiguous for o in lod))


def _freeze(levels):
    """A tuple of read-only views, so no holder of the offsets can change another's LoD."""
    out = []
    for level in levels:
        view = level.view()
        view.setflags(False)  # write=False; cheaper than ``view.flags.writeable = False``
        out.append(view)
    return tuple(out)
