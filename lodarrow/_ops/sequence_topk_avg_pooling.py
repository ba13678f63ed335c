"""``sequence_topk_avg_pooling``: the average of the top-k values of every row of a block.

Semantics, edge cases, errors and departures from Paddle:
docs/operators.md#sequence_topk_avg_pooling.
"""


import numpy as np

from lodarrow._backends import backend_of
from lodarrow._ops._common import as_lod_tensor, require_lod_levels
from lodarrow._ops._contract import TableContract
from lodarrow._ops._out import into, landed
from lodarrow._validation import as_int, as_positive_int

__all__ = ["TOPK_FREE_LIMIT", "sequence_topk_avg_pooling", "topk_avg_pool", "topks_array"]

_OP = "sequence_topk_avg_pooling"

#: A k may exceed every row's column count (the missing values count as 0,
#: docs/operators.md#sequence_topk_avg_pooling), but only up to ``max(longest col,
#: TOPK_FREE_LIMIT)``: larger values are refused as absurd
#: (docs/data-model.md#decisions-at-the-edges) rather than silently dividing by them.
TOPK_FREE_LIMIT = 1024

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)


def sequence_topk_avg_pooling(input, row, col, topks, channel_num, name=None, *, out=None):
    """Average of the top-k values of every row of every channel of each sequence.

    Sequence ``i`` of ``input`` holds ``channel_num * R_i * C_i`` values, a
    ``[channel_num, R_i, C_i]`` block, where ``R_i`` and ``C_i`` are the lengths of sequence
    ``i`` of ``row`` and ``col``.  For every channel ``c`` and row ``r`` of that block and every
    ``k`` in ``topks``, the output is the sum of the ``k`` largest of the ``C_i`` values divided
    by ``k``; when ``C_i < k`` the missing values count as 0 (still divided by ``k``).  A row
    holding NaN gives NaN for every ``k``.

    Parameters
    ----------
    input : LoDTensor or Arrow array of lists
        Shape ``(N,)`` or ``(N, 1)`` with exactly one LoD level.  Any numeric dtype (not bool).
    row, col : LoDTensor or Arrow array of lists
        One LoD level each, with as many sequences as ``input``; only their LoD is used.
    topks : sequence of int
        The ``k`` values, each ``>= 1`` and at most ``max(longest col, 1024)`` (see
        ``TOPK_FREE_LIMIT``); any order.
    channel_num : int
        Channels per sequence, ``>= 1``.
    name : str, optional
        Ignored (Paddle compatibility).
    out : numpy.ndarray or cupy.ndarray, optional
        Keyword-only: a preallocated array that receives the result's data (exactly its shape
        and dtype, on the input's device, C-contiguous, writable)
        (docs/operators.md#out-writing-into-a-preallocated-array).

    Returns
    -------
    LoDTensor
        Shape ``(sum(R_i), channel_num * len(topks))``, row ``row_off[i] + r`` holding
        ``[c0: k1, k2, ..., c1: k1, k2, ...]``, with ``row``'s LoD, on the input's place.
        dtype: the input's for floats (float16 computed in float32), float64 for integers.
        Paddle's second output (the top-k positions) is internal and not returned.

    Raises
    ------
    LoDError
        If ``input``, ``row`` or ``col`` does not have exactly one LoD level.
    TypeError
        If ``topks`` or ``channel_num`` is not made of integers, or ``input`` is bool.
    ValueError
        If a sequence does not hold ``channel_num * R_i * C_i`` values, the sequence counts
        differ, ``input`` is wider than one value per row, ``topks`` is empty or holds a
        ``k < 1`` or an absurdly large ``k``, or ``channel_num < 1``.

    See Also
    --------
    lodarrow.torch.sequence_topk_avg_pooling : The same operator on torch tensors,
        differentiable.

    Examples
    --------
    One sequence, one channel, a 2 x 3 block:

    >>> import numpy as np, lodarrow as la
    >>> x = la.LoDTensor(np.array([1., 5., 3., 4., 2., 6.], dtype="float32"), lod=[[0, 6]])
    >>> rows = la.LoDTensor(np.zeros(2), lod=[[0, 2]])
    >>> cols = la.LoDTensor(np.zeros(3), lod=[[0, 3]])
    >>> out = la.sequence_topk_avg_pooling(x, rows, cols, topks=[1, 2, 5], channel_num=1)
    >>> out.numpy().tolist(), out.lod()
    ([[5.0, 4.0, 1.7999999523162842], [6.0, 5.0, 2.4000000953674316]], [[0, 2]])
    """
    return topk_avg_pool(input, row, col, topks, channel_num, out=out)[0]


def topk_avg_pool(input, row, col, topks, channel_num, *, out=None, positions=False):
    """``sequence_topk_avg_pooling`` (every check included), with its selection if asked.

    Returns ``(result, pos)``: the operator's result, and ``pos`` None or, for
    ``positions=True``, the int64 array of shape ``(sum(R_i) * channel_num, m)`` (``m =
    min(max(topks), longest col)``, at least 1) whose row ``(row_off[i] + r) * channel_num +
    c`` holds the columns of the ``m`` largest values of that block row in rank order (ties:
    the lower column first), -1 past the row's end and for a row holding NaN.  The result is
    then computed from exactly those values (the gradient's residual: the positions averaged
    are the positions differentiated); without ``positions`` the values are selected alone,
    which is faster.
    """
    x = as_lod_tensor(input, "input")
    r = as_lod_tensor(row, "row")
    c = as_lod_tensor(col, "col")
    for t, arg in ((x, "input"), (r, "row"), (c, "col")):
        require_lod_levels(t, arg, _OP, 1)
    data = x.data
    shape = data.shape
    if not (len(shape) == 1 or (len(shape) == 2 and shape[1] == 1)):
        raise ValueError(f"{_OP}: input must have shape [N] or [N, 1], got {list(shape)}")
    kind = data.dtype.kind
    if kind == "b":
        raise TypeError(f"{_OP}: input of dtype bool cannot be averaged; cast it to a numeric "
                        f"dtype first")
    be = backend_of(_OP, input=x.data, row=r.data, col=c.data)
    in_off, row_off, col_off = x.offsets[0], r.offsets[0], c.offsets[0]
    n_seq = in_off.shape[0] - 1
    for t_off, arg in ((row_off, "row"), (col_off, "col")):
        if t_off.shape[0] - 1 != n_seq:
            raise ValueError(f"{_OP}: {arg} has {t_off.shape[0] - 1} sequences but input has "
                             f"{n_seq}; they must match")
    channels = as_int(channel_num, f"{_OP}: channel_num")
    if channels < 1:
        raise ValueError(f"{_OP}: channel_num must be >= 1, got {channels}")
    rows = np.diff(row_off)
    cols = np.diff(col_off)
    sizes = np.diff(in_off)
    # float64 first: a product beyond int64 must not wrap into an accidental match.
    want = rows.astype(np.float64) * cols * channels
    bad = np.flatnonzero((want != sizes) | (want > 2.0**62))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"{_OP}: sequence {i} of input holds {int(sizes[i])} values, but "
                         f"channel_num * rows * cols = {channels} * {int(rows[i])} * "
                         f"{int(cols[i])} = {int(want[i])}")
    ks = topks_array(topks)
    longest = int(cols.max()) if n_seq else 0
    limit = max(longest, TOPK_FREE_LIMIT)
    if ks.max() > limit:
        at = int(np.argmax(ks > limit))
        raise ValueError(f"{_OP}: topks[{at}] = {int(ks[at])} is larger than any row can "
                         f"use (longest col {longest}; k up to max(longest col, "
                         f"{TOPK_FREE_LIMIT}) is allowed)")
    out_dtype = data.dtype if kind == "f" else _F64
    # Computed in float64 for integers, float32 for float16, else in the input's dtype.
    compute = _F64 if kind != "f" else _F32 if data.dtype.itemsize == 2 else data.dtype
    with be.device(data):
        flat = be.xp.ascontiguousarray(data.reshape(-1), dtype=compute)
        shape = (int(row_off[-1]), channels * ks.shape[0])
        res = (be.empty(shape, out_dtype) if out is None
               else into(out, _OP, shape, out_dtype, be, data, (data, flat)))
        if positions:
            m = max(1, min(int(ks.max()), longest))
            pos = be.empty((shape[0] * channels, m), np.int64)
            be.kernel("topk_positions")(pos, flat, be.offsets(x, 0), be.offsets(r, 0),
                                        be.offsets(c, 0), channels)
            res[...] = _averages(pos, flat, in_off, row_off, rows, cols, ks, channels,
                                 be.xp).astype(compute, copy=False)
        else:
            pos = None
            be.kernel("topk_avg_pool")(res, flat, be.offsets(x, 0), be.offsets(r, 0),
                                       be.offsets(c, 0), ks, channels, longest)
    if out is not None:
        res = landed(res, out)
    return x._derive(res, r.offsets), pos


def _averages(pos, flat, in_off, row_off, rows, cols, ks, channels, xp):
    """The output values, in float64, from the values ``flat`` holds at the selected
    positions ``pos``: the kernel's sums (in float64, largest value first) and division.
    ``rows`` and ``cols`` are the lengths of ``row``'s and ``col``'s sequences."""
    seq = np.repeat(np.arange(rows.shape[0]), rows)       # each output row's sequence
    n_cols = cols[seq]
    r = np.arange(seq.shape[0]) - row_off[seq]            # its row within the block
    # Where each block row starts in ``flat``, in ``pos``'s order (output row, channel).
    start = (in_off[seq, None] + (np.arange(channels) * rows[seq, None] + r[:, None])
             * n_cols[:, None]).reshape(-1)
    ranked = xp.ascontiguousarray(pos.T)                  # (m, block rows): by rank
    if flat.shape[0]:
        vals = flat.take(ranked + xp.asarray(start), mode="clip")
        # -0.0 for the ranks past a row's end: it adds nothing (not even to -0.0).
        vals = xp.where(ranked >= 0, vals, np.float64(-0.0))
    else:
        vals = xp.full(ranked.shape, -0.0)
    # Prefix sums in rank order; the k-th average reads the min(k, m)-th.
    last = [min(k, ranked.shape[0]) - 1 for k in ks.tolist()]
    sums = xp.empty((len(last), ranked.shape[1]), np.float64)
    acc = vals[0].copy()
    with np.errstate(invalid="ignore", over="ignore"):    # inf - inf is NaN, as in C
        for q in range(max(last) + 1):
            if q:
                acc += vals[q]
            for j, lq in enumerate(last):
                if lq == q:
                    sums[j] = acc
    avg = sums.T / xp.asarray(ks)
    none = ranked[0] < 0      # nothing selected: an empty row (0) or one with NaN (NaN)
    if none.any():
        fill = xp.asarray(np.where(np.repeat(n_cols, channels) > 0, np.nan, 0.0))
        avg[none] = fill[none][:, None]
    return avg.reshape(seq.shape[0], channels * len(last))


def topks_array(topks):
    """``topks`` as a non-empty int64 array of values >= 1 (``TypeError`` / ``ValueError``
    naming ``topks`` otherwise)."""
    if isinstance(topks, np.ndarray):
        if topks.ndim != 1 or topks.dtype.kind not in "iu":
            raise TypeError(f"{_OP}: topks must be a 1-D sequence of integers, got an array of "
                            f"dtype {topks.dtype} and shape {topks.shape}")
        values = topks.tolist()
    else:
        try:
            values = list(topks)
        except TypeError:
            raise TypeError(f"{_OP}: topks must be a sequence of integers, got "
                            f"{type(topks).__name__}") from None
    if not values:
        raise ValueError(f"{_OP}: topks must hold at least one k")
    ks = []
    for pos, k in enumerate(values):
        k = as_positive_int(k, f"{_OP}: topks[{pos}]")
        ks.append(min(k, 2**62))    # beyond the limit either way; keeps int64 happy
    return np.array(ks, dtype=np.int64)

#: The table form (docs/tables.md).
TABLE = {"sequence_topk_avg_pooling": TableContract(("input", "row", "col"))}
