"""``sequence_pool``, ``sequence_first_step``, ``sequence_last_step``.

Semantics, edge cases, errors and departures from Paddle: docs/operators.md#sequence_pool.
"""


import numpy as np

from lodarrow._backends import backend_of_array
from lodarrow._errors import LoDError
from lodarrow._ops._common import as_lod_tensor, composed_offsets, pad_array
from lodarrow._ops._contract import TableContract
from lodarrow._ops._out import into, landed, split
from lodarrow._tensor import LoDTensor
from lodarrow._validation import as_flag

__all__ = ["sequence_pool", "sequence_first_step", "sequence_last_step"]

POOL_TYPES = ("sum", "average", "sqrt", "max", "min", "first", "last")
_SUM_TYPES = ("sum", "average", "sqrt")
#: The lower-case names, looked up before ``_pool_type`` (which lower-cases and checks).
_POOL_NAMES = {p: p for p in POOL_TYPES}
_F64 = np.dtype(np.float64)
_I64 = np.dtype(np.int64)


def sequence_pool(input, pool_type, is_test=False, pad_value=0.0, return_index=False,
                  name=None, *, out=None):
    """Pool every sequence of the last LoD level into one row.

    For a sequence of ``L`` rows: ``"sum"`` adds them, ``"average"`` divides the sum by
    ``L``, ``"sqrt"`` by ``sqrt(L)``, ``"max"`` / ``"min"`` take the element-wise extreme,
    ``"first"`` / ``"last"`` copy a row.  An empty sequence gives ``pad_value`` for every
    pool type.

    Pooling twice is a mean of means: on documents → sentences → tokens,
    ``sequence_pool(sequence_pool(t, "average"), "average")`` weighs every sentence alike,
    whatever its length.  The mean over all tokens of each document is
    ``sequence_pool(t.merge_levels(0, 1), "average")`` (see :meth:`LoDTensor.merge_levels`).

    Parameters
    ----------
    input : LoDTensor or Arrow array of lists
        Data of shape ``(N, *feature_shape)`` with at least one LoD level; the last level is
        pooled.  Any numeric dtype; bool only for ``"max"``, ``"min"``, ``"first"`` and
        ``"last"``.
    pool_type : str
        One of ``"sum"``, ``"average"``, ``"sqrt"``, ``"max"``, ``"min"``, ``"first"``,
        ``"last"`` (any case).
    is_test : bool, default False
        Accepted for Paddle compatibility and ignored (in Paddle it only controls whether the
        max index is kept for training).
    pad_value : scalar or array, default 0.0
        The row given to empty sequences, converted once, exactly, to the output dtype: a
        Python scalar by value (a non-integral or out-of-range value for an integer output is
        a ``TypeError``), an array or NumPy scalar only if it casts safely; of shape ``()``,
        ``(1,)`` or ``feature_shape``.
    return_index : bool, default False
        Also return, for ``"max"`` and ``"min"``, the absolute row number of each extreme
        (Paddle's ``MaxIndex``): the first row on ties, the first NaN's row when there is one,
        -1 for an empty sequence.
    name : str, optional
        Ignored (Paddle compatibility).
    out : numpy.ndarray, cupy.ndarray or tuple, optional
        Keyword-only: a preallocated array that receives the result's data (exactly its shape
        and dtype, on the input's device, C-contiguous, writable); with ``return_index=True``
        a tuple ``(out, index)`` of such arrays or None
        (docs/operators.md#out-writing-into-a-preallocated-array).

    Returns
    -------
    out : LoDTensor
        Shape ``(n_sequences, *feature_shape)`` with the LoD ``input.lod[:-1]`` (no LoD for a
        one-level input), on the input's place.  dtype: the input's for ``"sum"``, ``"max"``,
        ``"min"``, ``"first"``, ``"last"`` (integer sums accumulate in int64 and are cast back,
        wrapping on overflow as C does; float16 accumulates in float32, float32 in float64);
        for ``"average"`` and ``"sqrt"`` float64 for integer input, else the input's.
        ``max`` and ``min`` propagate NaN as ``np.max`` does.
    index : LoDTensor
        Only with ``return_index=True``: int64, the same shape and LoD as ``out``.

    Raises
    ------
    LoDError
        If ``input`` has no LoD.
    TypeError
        If ``pool_type`` is not a string, the dtype cannot be pooled that way (bool sums), or
        ``pad_value`` does not convert to the output dtype.
    ValueError
        If ``pool_type`` is unknown, ``return_index`` is asked for another pool type than
        ``"max"`` / ``"min"``, or ``pad_value`` has the wrong shape.

    See Also
    --------
    sequence_first_step, sequence_last_step : The first or last row of every sequence.
    lodarrow.torch.sequence_pool : The same operator on torch tensors, differentiable.

    Examples
    --------
    Paddle's example: a 1-level input with an empty last sequence.

    >>> import numpy as np, lodarrow as la
    >>> x = la.LoDTensor(np.array([[1.], [3.], [2.], [4.], [6.], [5.], [1.]], dtype="float32"),
    ...                  lod=[[0, 2, 5, 7, 7]])
    >>> la.sequence_pool(x, "average").numpy().ravel().tolist()
    [2.0, 4.0, 3.0, 0.0]
    >>> la.sequence_pool(x, "sum").numpy().ravel().tolist()
    [4.0, 12.0, 6.0, 0.0]
    >>> [round(v, 2) for v in la.sequence_pool(x, "sqrt").numpy().ravel().tolist()]
    [2.83, 6.93, 4.24, 0.0]
    >>> la.sequence_pool(x, "max").numpy().ravel().tolist()
    [3.0, 6.0, 5.0, 0.0]
    >>> la.sequence_pool(x, "last").numpy().ravel().tolist()
    [3.0, 6.0, 1.0, 0.0]
    >>> la.sequence_pool(x, "first").numpy().ravel().tolist()
    [1.0, 2.0, 5.0, 0.0]

    A 2-level input pools the last level and keeps the outer one:

    >>> y = la.LoDTensor(x.numpy(), lod=[[0, 2, 2, 5], [0, 1, 3, 4, 4, 7]])
    >>> out = la.sequence_pool(y, "sum")
    >>> out.numpy().ravel().tolist(), out.lod()
    ([1.0, 5.0, 4.0, 0.0, 12.0], [[0, 2, 2, 5]])
    """
    x = as_lod_tensor(input, "input")
    pool = _POOL_NAMES.get(pool_type) if type(pool_type) is str else None
    if pool is None:
        pool = _pool_type(pool_type)  # other case, or not a string: its errors
    if is_test is not True and is_test is not False:  # a bool needs no call
        as_flag(is_test, "sequence_pool: is_test")
    if return_index is not True and return_index is not False:
        as_flag(return_index, "sequence_pool: return_index")
    offsets = x.offsets
    if not offsets:
        raise LoDError("sequence_pool: input must have at least 1 LoD level, got 0 "
                       "(a plain tensor has no sequences to pool)")
    data = x.data
    dtype = data.dtype
    if dtype.kind == "b" and pool in _SUM_TYPES:
        raise TypeError(f"sequence_pool: pool_type {pool!r} is not defined for bool input "
                        f"(max, min, first and last are); cast to an integer dtype first")
    if return_index and pool not in ("max", "min"):
        raise ValueError(f"sequence_pool: return_index=True needs pool_type 'max' or 'min', "
                         f"got {pool!r}")
    out_dtype = _F64 if pool in ("average", "sqrt") and dtype.kind in "iu" else dtype
    # a pad value is a small parameter that may live on either device
    # (docs/operators.md#exact-pad-values): the data alone picks the backend
    be = backend_of_array(data)
    pad = pad_array(pad_value, out_dtype, data.shape[1:], np)
    lod = offsets[:-1]
    shape = (offsets[-1].shape[0] - 1,) + data.shape[1:]
    with be.device(data):
        if out is None:
            res = be.empty(shape, out_dtype)
            index = be.empty(shape, _I64) if return_index else None
        elif return_index:
            out = split(out, 2, "sequence_pool", " with return_index=True")
            res = into(out[0], "sequence_pool", shape, out_dtype, be, data, (data, pad),
                       "out[0]")
            index = into(out[1], "sequence_pool", shape, _I64, be, data, (data, pad, out[0]),
                         "out[1]")
        else:
            res = into(out, "sequence_pool", shape, out_dtype, be, data, (data, pad))
            index = None
        be.kernel("pool")(res, index, data, be.offsets(x, -1), pad, pool)
    if out is not None:
        if return_index:
            res, index = landed(res, out[0]), landed(index, out[1])
        else:
            res = landed(res, out)
    if return_index:
        return x._derive(res, lod), x._derive(index, lod)
    return x._derive(res, lod)


def sequence_first_step(input, name=None, *, out=None):
    """The first row of every sequence of the last LoD level (``pad`` 0 for an empty one).

    Exactly ``sequence_pool(input, "first")``: see :func:`sequence_pool` for dtypes, shapes
    and LoD.

    Parameters
    ----------
    input : LoDTensor or Arrow array of lists
        Data with at least one LoD level; any dtype.
    name : str, optional
        Ignored (Paddle compatibility).
    out : numpy.ndarray or cupy.ndarray, optional
        Keyword-only: a preallocated array that receives the result's data
        (docs/operators.md#out-writing-into-a-preallocated-array).

    Returns
    -------
    LoDTensor
        ``(n_sequences, *feature_shape)``, the input's dtype, LoD ``input.lod[:-1]``.

    Raises
    ------
    LoDError
        If ``input`` has no LoD.

    See Also
    --------
    sequence_last_step : The last row of every sequence.
    sequence_pool : The other pools (sum, average, max ...).
    lodarrow.torch.sequence_first_step : The same operator on torch tensors, differentiable.

    Examples
    --------
    >>> import numpy as np, lodarrow as la
    >>> x = la.LoDTensor(np.array([[1.], [3.], [2.], [4.], [6.], [5.], [1.]]),
    ...                  lod=[[0, 2, 5, 7]])
    >>> la.sequence_first_step(x).numpy().ravel().tolist()
    [1.0, 2.0, 5.0]
    """
    return sequence_pool(input, "first", out=out)


def sequence_last_step(input, name=None, *, out=None):
    """The last row of every sequence of the last LoD level (``pad`` 0 for an empty one).

    Exactly ``sequence_pool(input, "last")``: see :func:`sequence_pool`.

    Parameters
    ----------
    input : LoDTensor or Arrow array of lists
        Data with at least one LoD level; any dtype.
    name : str, optional
        Ignored (Paddle compatibility).
    out : numpy.ndarray or cupy.ndarray, optional
        Keyword-only: a preallocated array that receives the result's data
        (docs/operators.md#out-writing-into-a-preallocated-array).

    Returns
    -------
    LoDTensor
        ``(n_sequences, *feature_shape)``, the input's dtype, LoD ``input.lod[:-1]``.

    Raises
    ------
    LoDError
        If ``input`` has no LoD.

    See Also
    --------
    sequence_first_step : The first row of every sequence.
    sequence_pool : The other pools (sum, average, max ...).
    lodarrow.torch.sequence_last_step : The same operator on torch tensors, differentiable.

    Examples
    --------
    >>> import numpy as np, lodarrow as la
    >>> x = la.LoDTensor(np.array([[1.], [3.], [2.], [4.], [6.], [5.], [1.]]),
    ...                  lod=[[0, 2, 5, 7]])
    >>> la.sequence_last_step(x).numpy().ravel().tolist()
    [3.0, 6.0, 1.0]
    """
    return sequence_pool(input, "last", out=out)


def _pool_type(pool_type):
    if not isinstance(pool_type, str):
        raise TypeError(f"sequence_pool: pool_type must be a string, got "
                        f"{type(pool_type).__name__}")
    pool = pool_type.lower()
    if pool not in POOL_TYPES:
        raise ValueError(f"sequence_pool: unknown pool_type {pool_type!r}; expected one of "
                         f"{', '.join(t.upper() for t in POOL_TYPES)} (any case)")
    return pool


def _check_literals(args):
    if "pool_type" in args:
        _pool_type(args["pool_type"])
    for flag in ("is_test", "return_index"):
        if flag in args:
            as_flag(args[flag], f"sequence_pool: {flag}")


def _relative_index(i, index, call, columns, fn):
    """Result 1 (the max/min row numbers) relative to each table row's first value, so it
    does not depend on how a table is split (-1 stays -1)."""
    if i != 1:
        return index
    source = call["input"]
    starts = composed_offsets(source, source.lod_level)
    idx = np.asarray(index.data)
    if index.lod_level:
        first = np.repeat(starts[:-1], np.diff(np.asarray(index.offsets[0])))
    else:
        first = starts[:-1]
    first = first.reshape((-1,) + (1,) * (idx.ndim - 1))
    rel = np.where(idx >= 0, idx - first, idx)
    return LoDTensor._from_trusted(rel, index.offsets)


#: The table form (docs/tables.md).
TABLE = {
    "sequence_pool": TableContract(("input",), results=lambda a: 2 if a.get("return_index")
                                   else 1, check=_check_literals, fixup=_relative_index),
    "sequence_first_step": TableContract(("input",)),
    "sequence_last_step": TableContract(("input",)),
}
