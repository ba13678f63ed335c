"""Elementwise math on LoDTensors: NumPy ufuncs (CuPy's on the GPU) that keep the LoD.

A ufunc applied with ``method="__call__"`` works row by row and element by element, so its
result has the same rows, cut by the same LoD.  Operands are LoDTensors with equal LoDs,
scalars, or arrays that broadcast against one row (the feature shape), never along the rows.
Everything that combines rows (``reduce``, ``accumulate``, ``np.sum``, ``np.mean`` ...) would
mix sequences, and raises ``TypeError`` pointing to ``sequence_pool``.
"""

import numpy as np

from lodarrow._cupy import get_cupy, is_cupy_array
from lodarrow._errors import LoDError
from lodarrow._validation import check_dtype

__all__ = ["ElementwiseMixin", "apply_ufunc", "apply_function", "check_same_lod"]

#: NumPy functions that reduce or accumulate along the rows, and the pool type that does the
#: same per sequence (None where sequence_pool has no equivalent).
_ROW_REDUCTIONS = {
    "sum": "sum", "nansum": "sum", "mean": "average", "nanmean": "average",
    "average": "average", "max": "max", "amax": "max", "nanmax": "max", "min": "min",
    "amin": "min", "nanmin": "min", "prod": None, "nanprod": None, "std": None,
    "nanstd": None, "var": None, "nanvar": None, "median": None, "nanmedian": None,
    "ptp": None, "argmax": None, "argmin": None, "nanargmax": None, "nanargmin": None,
    "cumsum": None, "cumprod": None, "nancumsum": None, "nancumprod": None, "all": None,
    "any": None, "count_nonzero": None, "percentile": None, "quantile": None,
    "nanpercentile": None, "nanquantile": None, "sort": None, "argsort": None,
    "cumulative_sum": None, "cumulative_prod": None,
}


def _not_elementwise(what, pool_type=None):
    pool = (f"lodarrow.sequence_pool(t, {pool_type!r})" if pool_type
            else "lodarrow.sequence_pool(t, pool_type)")
    return TypeError(f"{what} is not elementwise: on a LoDTensor it would mix the sequences. "
                     f"Reduce each sequence with {pool} (sum, average, sqrt, max, min, first, "
                     f"last), or apply it to the plain rows, t.data, to ignore the LoD")


def apply_function(func, args, kwargs):
    """``__array_function__``: reductions refuse; any other NumPy function sees the rows."""
    name = func.__name__
    if name in _ROW_REDUCTIONS:
        raise _not_elementwise(f"np.{name}", _ROW_REDUCTIONS[name])

    def plain(obj):
        if isinstance(obj, ElementwiseMixin):
            return np.asarray(obj)  # what NumPy did before this protocol: the rows (__array__)
        if isinstance(obj, (list, tuple)):
            return type(obj)(plain(o) for o in obj)
        return obj

    return func(*plain(args), **{k: plain(v) for k, v in kwargs.items()})


def check_same_lod(a, b, what, a_name, b_name):
    """Raise ``LoDError`` naming the first difference unless LoDTensors ``a``, ``b`` match."""
    la, lb = a.offsets, b.offsets
    if len(la) != len(lb):
        raise LoDError(f"{what}: the LoDTensors must have equal LoDs, but {a_name} has "
                       f"{len(la)} LoD level(s) and {b_name} has {len(lb)}; align them first "
                       f"(e.g. lod_reset) or operate on .data")
    for k, (x, y) in enumerate(zip(la, lb)):
        if x.shape == y.shape and np.array_equal(x, y):
            continue
        n = min(x.shape[0], y.shape[0])
        diff = np.flatnonzero(x[:n] != y[:n])
        if diff.size:
            p = int(diff[0])
            found = f"first differ at position {p} ({int(x[p])} vs {int(y[p])})"
        else:
            found = f"differ in length ({x.shape[0]} vs {y.shape[0]} offsets)"
        raise LoDError(f"{what}: the LoDTensors must have equal LoDs, but {a_name}.lod[{k}] and "
                       f"{b_name}.lod[{k}] {found}; align them first (e.g. lod_reset) or "
                       f"operate on .data")
    ra, rb = a._data.shape[0], b._data.shape[0]
    if ra != rb:
        raise ValueError(f"{what}: {a_name} has {ra} rows and {b_name} has {rb}; elementwise "
                         f"math needs the same rows")


def _operand_name(i, n):
    if n == 2:
        return ("left", "right")[i]
    return "x" if n == 1 else f"input{i}"


def apply_ufunc(ufunc, method, inputs, kwargs):
    """``LoDTensor.__array_ufunc__``: see the module docstring."""
    what = f"np.{ufunc.__name__}"
    if method != "__call__":
        raise _not_elementwise(f"{what}.{method}",
                               {"add": "sum", "maximum": "max", "minimum": "min",
                                "fmax": "max", "fmin": "min"}.get(ufunc.__name__))
    if ufunc.signature is not None:  # a generalized ufunc (matmul ...) works on whole axes
        raise TypeError(f"{what} works on whole axes ({ufunc.signature}), not elementwise, so "
                        f"it cannot keep a LoD; apply it to the plain rows, t.data")
    out = kwargs.pop("out", None)
    outs = () if out is None else (out if isinstance(out, tuple) else (out,))
    n_in = len(inputs)
    names = [_operand_name(i, n_in) for i in range(n_in)]
    tensors = [(names[i], x) for i, x in enumerate(inputs) if isinstance(x, ElementwiseMixin)]
    for j, o in enumerate(outs):
        if o is not None and not isinstance(o, ElementwiseMixin):
            raise TypeError(f"{what}: out[{j}] must be a LoDTensor (with the inputs' LoD), "
                            f"got {type(o).__name__}")
        if o is not None:
            tensors.append((f"out[{j}]", o))
    ref_name, ref = tensors[0]
    for name, t in tensors:
        if t._data is None:
            raise ValueError(f"{what}: {name} is an empty LoDTensor (no data has been set)")
        t._readable(what)
    for name, t in tensors[1:]:
        check_same_lod(ref, t, what, ref_name, name)
        if is_cupy_array(t._data) != is_cupy_array(ref._data):
            raise ValueError(f"{what}: {ref_name} is on {ref.place!r} and {name} on "
                             f"{t.place!r}; move one (.cpu() / .cuda())")
    on_gpu = is_cupy_array(ref._data)
    rows = ref._data.shape[0]
    in_tensors = [(n, x) for n, x in zip(names, inputs) if isinstance(x, ElementwiseMixin)]
    try:
        features = np.broadcast_shapes(*(x._data.shape[1:] for _, x in in_tensors))
    except ValueError:
        shapes = ", ".join(f"{n} {x.feature_shape}" for n, x in in_tensors)
        raise ValueError(f"{what}: the LoDTensors' feature shapes do not broadcast ({shapes})"
                         ) from None
    rank = 1 + len(features)
    args = []
    for name, x in zip(names, inputs):
        if isinstance(x, ElementwiseMixin):
            data = x._data
            if data.ndim < rank:  # align feature axes after the rows, not with them
                data = data.reshape(data.shape[:1] + (1,) * (rank - data.ndim) + data.shape[1:])
            args.append(data)
        else:
            args.append(_operand(x, name, what, features, on_gpu))
    if "where" in kwargs and isinstance(kwargs["where"], ElementwiseMixin):
        check_same_lod(ref, kwargs["where"], what, ref_name, "where")
        kwargs["where"] = kwargs["where"]._data
    func = ufunc
    if on_gpu:
        func = getattr(get_cupy(), ufunc.__name__, None)
        if func is None:
            raise TypeError(f"{what} has no CuPy counterpart; move the tensor to the CPU "
                            f"(.cpu()) first")
    if outs:
        datas = tuple(None if o is None else o._data for o in outs)
        kwargs["out"] = datas[0] if len(datas) == 1 else datas
    result = func(*args, **kwargs)
    results = result if isinstance(result, tuple) else (result,)
    wrapped = []
    for j, res in enumerate(results):
        if outs and j < len(outs) and outs[j] is not None:
            wrapped.append(outs[j])
            continue
        try:
            check_dtype(res.dtype, f"{what}'s result")
        except TypeError as exc:
            raise TypeError(f"{exc}; cast the inputs or use .data") from None
        if res.ndim == 0 or res.shape[0] != rows:
            raise ValueError(f"{what}: the result has shape {tuple(res.shape)}, not {rows} rows")
        wrapped.append(type(ref)._from_trusted(res, ref._offsets, ref.place))
    return tuple(wrapped) if isinstance(result, tuple) else wrapped[0]


def _operand(x, name, what, features, on_gpu):
    """A scalar, or an array that broadcasts to ``features`` (one row), for the backend."""
    if isinstance(x, (bool, int, float, complex, np.generic)):
        return x
    if is_cupy_array(x):
        if not on_gpu:
            raise ValueError(f"{what}: {name} is a CuPy array but the LoDTensor is in host "
                             f"memory; use a NumPy array or move the tensor (.cuda())")
        arr = x
    else:
        try:
            arr = np.asarray(x)
        except (ValueError, TypeError) as exc:
            raise TypeError(f"{what}: {name} must be a scalar, an array or a LoDTensor, got "
                            f"{type(x).__name__} ({exc})") from None
        if arr.dtype.kind not in "biufc":
            raise TypeError(f"{what}: {name} must be numeric, got dtype {arr.dtype} "
                            f"({type(x).__name__})")
    shape = tuple(arr.shape)
    try:
        fits = len(shape) <= len(features) and np.broadcast_shapes(shape, features) == features
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"{what}: {name} of shape {shape} does not broadcast to the feature "
                         f"shape {features} of one row; arrays broadcast against every row, "
                         f"never along the rows (for one value per row, make it a LoDTensor "
                         f"with the same LoD)")
    if on_gpu and not is_cupy_array(arr):
        arr = get_cupy().asarray(arr)
    return arr


def _defers(other):
    """True for types that opted out of NumPy's ufuncs (``__array_ufunc__ = None``)."""
    return getattr(type(other), "__array_ufunc__", False) is None


def _operator(ufunc):
    """The forward and reflected operator methods computing ``ufunc`` elementwise."""

    def forward(self, other):
        if _defers(other):
            return NotImplemented
        return apply_ufunc(ufunc, "__call__", (self, other), {})

    def reflected(self, other):
        if _defers(other):
            return NotImplemented
        return apply_ufunc(ufunc, "__call__", (other, self), {})

    return forward, reflected


def _unary(ufunc):
    def method(self):
        return apply_ufunc(ufunc, "__call__", (self,), {})

    return method


class ElementwiseMixin:
    """Elementwise math for :class:`~lodarrow.LoDTensor`: the NumPy protocols and the
    operators (``+``, ``<``, ``-t`` ...), each a ufunc that keeps the LoD.

    Kept apart from ``lodarrow._tensor`` so that neither module imports the other: what this
    module needs of a tensor (``_data``, ``_offsets``, ``place``, ``_from_trusted``) it reads
    from the instance and its type.
    """

    __slots__ = ()

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """Elementwise NumPy ufuncs keep the LoD (CuPy's on the GPU); see ``_elementwise``."""
        return apply_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        """NumPy functions see the rows, but reductions over them raise ``TypeError``."""
        return apply_function(func, args, kwargs)

    __add__, __radd__ = _operator(np.add)
    __sub__, __rsub__ = _operator(np.subtract)
    __mul__, __rmul__ = _operator(np.multiply)
    __truediv__, __rtruediv__ = _operator(np.true_divide)
    __floordiv__, __rfloordiv__ = _operator(np.floor_divide)
    __mod__, __rmod__ = _operator(np.remainder)
    __divmod__, __rdivmod__ = _operator(np.divmod)
    __pow__, __rpow__ = _operator(np.power)
    __and__, __rand__ = _operator(np.bitwise_and)
    __or__, __ror__ = _operator(np.bitwise_or)
    __xor__, __rxor__ = _operator(np.bitwise_xor)
    __lshift__, __rlshift__ = _operator(np.left_shift)
    __rshift__, __rrshift__ = _operator(np.right_shift)
    __lt__, _ = _operator(np.less)
    __le__, _ = _operator(np.less_equal)
    __gt__, _ = _operator(np.greater)
    __ge__, _ = _operator(np.greater_equal)
    __neg__ = _unary(np.negative)
    __pos__ = _unary(np.positive)
    __abs__ = _unary(np.absolute)
    __invert__ = _unary(np.invert)
    del _
