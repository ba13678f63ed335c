"""The backward of every differentiable operator, on plain arrays (docs/gradients.md).

Each function takes the upstream gradient ``dout`` (the operator's output data) and the
residuals the forward kept, and returns the gradient arrays.  They run where ``dout`` lives:
NumPy arrays on the CPU kernels, CuPy arrays on the GPU ones.  Offsets (int64) may be host
arrays even for CuPy ``dout`` (the LoD lives on the host; they are copied where a GPU kernel
reads them); a backward with no GPU kernel yet raises ``NotImplementedError`` naming its
operator.  ``lodarrow.vjp`` and ``lodarrow.torch`` are both built on these.

The functions trust their arguments (``vjp`` and the torch layer check ``dout`` first);
gradients of outputs that only move values (reshape, lod_reset) may share memory with
``dout``.
"""

import math

import numpy as np

from lodarrow._backends import CPU, backend_of_array, is_cupy_array, row_bytes
from lodarrow._ops.sequence_conv import CHUNK_ELEMENTS

__all__ = [
    "concat_backward",
    "conv_backward",
    "expand_as_backward",
    "expand_backward",
    "identity_backward",
    "pad_backward",
    "pool_backward",
    "pool_backward_host",
    "reshape_backward",
    "reverse_backward",
    "scatter_backward",
    "slice_backward",
    "softmax_backward",
    "topk_avg_pool_backward",
    "unpad_backward",
]

_I64 = np.dtype(np.int64)


def _host(a):
    """``a`` as a C-contiguous host int64 array (a CuPy array is copied back once)."""
    if is_cupy_array(a):
        a = a.get()
    return np.ascontiguousarray(a, dtype=_I64)


def _on(be, a, dtype=_I64):
    """Index array ``a`` on ``be``'s current device, C-contiguous, as ``dtype``."""
    if be.xp is np:
        return np.ascontiguousarray(_host(a) if is_cupy_array(a) else a, dtype=dtype)
    return be.xp.ascontiguousarray(be.asarray(a), dtype=dtype)


def _flat2(a, rows):
    """``a`` as a C-contiguous ``(rows, width)`` array."""
    a = a if a.flags.c_contiguous else a.copy(order="C")
    return a.reshape(rows, a.size // rows if rows else int(math.prod(a.shape[1:])))


def pool_backward(dout, offsets, pool_type, n_rows, index=None):
    """Gradient of ``sequence_pool`` (and ``sequence_first_step`` / ``last_step``).

    Parameters
    ----------
    dout : ndarray of shape (n_sequences, *feature_shape)
        Upstream gradient of the pooled output (float16, float32 or float64).
    offsets : ndarray of int64, shape (n_sequences + 1,)
        The pooled (last) LoD level of the input.
    pool_type : str
        The forward's pool type, lower case: ``"sum"``, ``"average"``, ``"sqrt"``, ``"max"``,
        ``"min"``, ``"first"`` or ``"last"``.
    n_rows : int
        Rows of the input (``offsets[-1]``).
    index : ndarray of int64, shape (n_sequences, *feature_shape), optional
        For ``"max"`` / ``"min"``: the forward's winning rows (``return_index=True``; -1 for
        an empty sequence).  Required for those pool types, ignored otherwise.

    Returns
    -------
    ndarray of shape (n_rows, *feature_shape)
        ``dout`` broadcast over each sequence (divided by ``L`` / ``sqrt(L)`` for average /
        sqrt), or put on the winning (first, last) row with zeros elsewhere; rows of empty
        sequences do not exist, so they get nothing.  ``dout``'s dtype and device.

    Raises
    ------
    NotImplementedError
        For CuPy arrays (no GPU kernel yet).
    """
    be = backend_of_array(dout)
    if be is CPU:
        return pool_backward_host(dout, _host(offsets), pool_type, n_rows, index)
    feat = dout.shape[1:]
    n_seq = dout.shape[0]
    with be.device(dout):
        dx = be.empty((n_rows,) + feat, dout.dtype)
        off = _on(be, offsets)
        if pool_type in ("first", "last"):
            be.kernel("pool_pick_backward")(dx, dout, off, pool_type == "last")
        elif pool_type in ("max", "min"):
            be.kernel("pool_index_backward")(_flat2(dx, n_rows), _flat2(dout, n_seq),
                                             _flat2(_on(be, index), n_seq), off)
        else:
            be.kernel("pool_sum_backward")(_flat2(dx, n_rows), _flat2(dout, n_seq), off,
                                           pool_type)
    return dx


def pool_backward_host(dout, offsets, pool_type, n_rows, index=None):
    """:func:`pool_backward` of NumPy arrays, ``offsets`` already C-contiguous int64 (a small
    call's path: no backend lookup, no device context).  ``dout`` may be any NumPy array of
    the output's shape (copied once when not C-contiguous)."""
    if not dout.flags.c_contiguous:
        dout = np.ascontiguousarray(dout)
    dx = CPU.empty((n_rows, *dout.shape[1:]), dout.dtype)
    if pool_type in ("first", "last"):
        # the pool's memory (a large gradient freed by the previous step is reused, not
        # mapped and page-faulted afresh, as numpy.zeros' would be), written in one pass:
        # the kernel zeroes a block and writes its picked rows while it is in cache
        _kernel("pool_pick_backward")(dx, dout, offsets, pool_type == "last")
        return dx
    if pool_type in ("max", "min"):
        n_seq = dout.shape[0]
        _kernel("pool_index_backward")(_flat2(dx, n_rows), _flat2(dout, n_seq),
                                       _flat2(np.ascontiguousarray(index, dtype=_I64), n_seq),
                                       offsets)
    else:
        _kernel("pool_sum_backward")(_flat2(dx, n_rows), _flat2(dout, dout.shape[0]), offsets,
                                     pool_type)
    return dx


_kernel = CPU.kernel


def softmax_backward(dout, y, offsets):
    """Gradient of ``sequence_softmax``: ``y * (dout - sum_seq(y * dout))``.

    Parameters
    ----------
    dout : ndarray of shape (N,) or (N, 1)
        Upstream gradient.
    y : ndarray of the same shape and dtype
        The forward's output (the softmax itself).
    offsets : ndarray of int64, shape (n_sequences + 1,)
        The last LoD level.

    Returns
    -------
    ndarray
        The input's gradient, ``dout``'s shape and dtype, computed in float64.

    Raises
    ------
    NotImplementedError
        For CuPy arrays (no GPU kernel yet).
    """
    be = backend_of_array(dout)
    with be.device(dout):
        dx = be.empty(dout.shape, dout.dtype)
        be.kernel("softmax_backward")(dx, y, dout, _on(be, offsets))
    return dx


def _segment_sum(be, dout, offsets):
    """Rows of ``dout`` summed over each segment of ``offsets`` (the pool kernel's sum:
    float32 accumulated in float64; an empty segment gives 0)."""
    n = offsets.shape[0] - 1
    feat = dout.shape[1:]
    dx = be.empty((n,) + feat, dout.dtype)
    zero = be.xp.zeros(feat, dtype=dout.dtype)
    be.kernel("pool")(dx, None, be.xp.ascontiguousarray(dout), _on(be, offsets), zero, "sum")
    return dx


def expand_backward(dout, ref_offsets, x_offsets=None, out_offsets=None):
    """Gradient of ``sequence_expand``: the sum of ``dout`` over the copies of each row.

    Parameters
    ----------
    dout : ndarray of shape (M, *feature_shape)
        Upstream gradient.
    ref_offsets : ndarray of int64
        ``y``'s LoD level ``ref_level``: copy counts ``r[i] = ref_offsets[i + 1] -
        ref_offsets[i]``.
    x_offsets : ndarray of int64, optional
        ``x``'s LoD level when ``x`` has one (whole blocks were copied); None when ``x`` has
        no LoD (rows were copied; ``dout``'s rows ``[ref_offsets[i], ref_offsets[i + 1])``
        are the copies of row ``i``).
    out_offsets : ndarray of int64, optional
        The forward output's LoD level (required with ``x_offsets``): copy ``c`` of the
        blocks starts at ``dout`` row ``out_offsets[c]``.

    Returns
    -------
    ndarray of shape (x rows, *feature_shape)
        A segmented sum in copy order (no atomics; the same bits for any thread count).

    Raises
    ------
    NotImplementedError
        For CuPy arrays with ``x_offsets`` (no GPU kernel yet); rows alone run on the GPU.
    """
    be = backend_of_array(dout)
    with be.device(dout):
        if x_offsets is None:
            return _segment_sum(be, dout, ref_offsets)
        n = int(_host(x_offsets)[-1])
        dx = be.empty((n,) + dout.shape[1:], dout.dtype)
        be.kernel("expand_blocks_backward")(_flat2(dx, n), _flat2(dout, dout.shape[0]),
                                            _on(be, x_offsets), _on(be, ref_offsets),
                                            _on(be, out_offsets))
    return dx


def expand_as_backward(dout, y_offsets):
    """Gradient of ``sequence_expand_as``: ``dout`` summed over each sequence of ``y``.

    Parameters
    ----------
    dout : ndarray of shape (M, *feature_shape)
        Upstream gradient.
    y_offsets : ndarray of int64, shape (n + 1,)
        ``y``'s (only) LoD level; row ``i`` of ``x`` was copied ``len(y seq i)`` times.

    Returns
    -------
    ndarray of shape (n, *feature_shape)
        ``dout``'s dtype and device (the pool kernel's sum: runs on the GPU too).
    """
    be = backend_of_array(dout)
    with be.device(dout):
        return _segment_sum(be, dout, y_offsets)


def pad_backward(dout, offsets, n_rows):
    """Gradient of ``sequence_pad``: the valid slots of ``dout`` (``sequence_unpad``'s kernel).

    Parameters
    ----------
    dout : ndarray of shape (n_sequences, padded_length, *feature_shape)
        Upstream gradient of the padded output (``(n, P)`` for rank-1 ``x``).
    offsets : ndarray of int64, shape (n_sequences + 1,)
        The last LoD level of ``x``.
    n_rows : int
        Rows of ``x``.

    Returns
    -------
    ndarray of shape (n_rows, *feature_shape)
        Padding slots dropped.  Runs on the GPU too.
    """
    be = backend_of_array(dout)
    with be.device(dout):
        dx = be.empty((n_rows,) + dout.shape[2:], dout.dtype)
        be.kernel("unpad")(dx, be.xp.ascontiguousarray(dout), _on(be, offsets))
    return dx


def unpad_backward(dout, offsets, x_shape):
    """Gradient of ``sequence_unpad``: ``dout`` scattered into zeros of the padded shape
    (``sequence_pad``'s kernel with a zero pad row).

    Parameters
    ----------
    dout : ndarray of shape (sum(length), *feature_shape)
        Upstream gradient (``(sum, 1)`` for a 2-D ``x``).
    offsets : ndarray of int64, shape (B + 1,)
        The output's last LoD level (``length`` as offsets).
    x_shape : tuple of int
        ``x``'s shape ``(B, L, *feature_shape)``.

    Returns
    -------
    ndarray of shape x_shape
        Runs on the GPU too.
    """
    be = backend_of_array(dout)
    x_shape = tuple(x_shape)
    feat = x_shape[2:]
    with be.device(dout):
        dx = be.empty(x_shape, dout.dtype)
        src = be.xp.ascontiguousarray(dout).reshape((dout.shape[0],) + feat)
        be.kernel("pad")(dx, src, be.xp.zeros(feat, dtype=dout.dtype), _on(be, offsets),
                         x_shape[1])
    return dx


def concat_backward(dout, input_offsets):
    """Gradient of ``sequence_concat``: ``dout`` split back by the inputs' last LoD levels.

    Parameters
    ----------
    dout : ndarray of shape (sum of the inputs' rows, *feature_shape)
        Upstream gradient.
    input_offsets : sequence of ndarray of int64
        Each input's last LoD level, in input order (all with ``n`` sequences).

    Returns
    -------
    tuple of ndarray
        One gradient per input, of shape ``(its rows, *feature_shape)``.  On the CPU one
        pass over ``dout`` (``split_blocks``: each gradient written once, front to back); on
        the GPU the row-gather kernel of ``sequence_slice``.
    """
    be = backend_of_array(dout)
    offs = [_host(o) for o in input_offsets]
    start = sum(o[:-1] for o in offs)  # output sequence i starts at the sum of the starts
    if be.name == "cpu":  # one pass over dout, each gradient written once, front to back
        grads = tuple(be.empty((int(o[-1]),) + dout.shape[1:], dout.dtype) for o in offs)
        src_off = np.append(start, sum(int(o[-1]) for o in offs))
        be.kernel("split_blocks")(grads, dout, offs, src_off)
        return grads
    lens = [np.diff(o) for o in offs]
    grads = []
    src = row_bytes(dout)
    with be.device(dout):
        for k, off in enumerate(offs):
            n = int(off[-1])
            dx = be.empty((n,) + dout.shape[1:], dout.dtype)
            be.kernel("gather_blocks")(row_bytes(dx), src, _on(be, start),
                                       _on(be, off))
            grads.append(dx)
            start = start + lens[k]
    return tuple(grads)


def slice_backward(dout, src_start, out_offsets, n_rows):
    """Gradient of ``sequence_slice``: ``dout`` at the sliced rows, zeros elsewhere.

    Parameters
    ----------
    dout : ndarray of shape (sum(length), *feature_shape)
        Upstream gradient.
    src_start : ndarray of int64, shape (n,)
        The input row where sequence ``i``'s slice starts; the slices lie in sequence order
        without overlap (as ``sequence_slice``'s do, each inside its own sequence).
    out_offsets : ndarray of int64, shape (n + 1,)
        The output's last LoD level.
    n_rows : int
        Rows of the input.

    Returns
    -------
    ndarray of shape (n_rows, *feature_shape)
        On the CPU one pass of the ``slice_backward`` kernel (each range of zeros and each
        slice written once; slices out of order raise ``ValueError`` there, never write out
        of bounds).  Runs on the GPU too (a scatter by CuPy indexing).
    """
    be = backend_of_array(dout)
    start, out_off = _host(src_start), _host(out_offsets)
    if be.name == "cpu":  # zeros and one copy per slice, in one pass (the slices lie in order)
        dx = be.empty((n_rows,) + dout.shape[1:], dout.dtype)
        be.kernel("slice_backward")(dx, dout, start, out_off)
        return dx
    rows = np.repeat(start - out_off[:-1], np.diff(out_off)) + np.arange(int(out_off[-1]),
                                                                        dtype=_I64)
    with be.device(dout):
        dx = be.xp.zeros((n_rows,) + dout.shape[1:], dout.dtype)
        dx[_on(be, rows)] = dout
    return dx


def reverse_backward(dout, offsets):
    """Gradient of ``sequence_reverse``: ``dout`` reversed within each sequence.

    Parameters
    ----------
    dout : ndarray of shape (N, *feature_shape)
        Upstream gradient.
    offsets : ndarray of int64
        The last LoD level.

    Returns
    -------
    ndarray of shape (N, *feature_shape)
        Runs on the GPU too.
    """
    be = backend_of_array(dout)
    with be.device(dout):
        dx = be.empty(dout.shape, dout.dtype)
        be.kernel("reverse")(dx, be.xp.ascontiguousarray(dout), _on(be, offsets))
    return dx


def reshape_backward(dout, x_shape):
    """Gradient of ``sequence_reshape``: ``dout`` reshaped back to ``x_shape``.

    Parameters
    ----------
    dout : ndarray
        Upstream gradient.
    x_shape : tuple of int
        The input's shape.

    Returns
    -------
    ndarray of shape x_shape
        A view of ``dout`` where it is C-contiguous.
    """
    xp = backend_of_array(dout).xp
    return xp.ascontiguousarray(dout).reshape(tuple(x_shape))


def identity_backward(dout):
    """Gradient of ``lod_reset`` / ``lod_append`` (the data is unchanged): ``dout`` itself.

    Parameters
    ----------
    dout : ndarray
        Upstream gradient.

    Returns
    -------
    ndarray
        ``dout`` (no copy).
    """
    return dout


def scatter_backward(dout, ids, index_offsets, updates_shape, updates_dtype):
    """Gradients of ``sequence_scatter``: ``dout`` for the input, ``dout`` gathered at the
    scattered positions for the updates.

    Parameters
    ----------
    dout : ndarray of shape (N, *feature_shape)
        Upstream gradient (the input's shape).
    ids : ndarray of int64, shape (M,)
        The flat column ids of ``index`` (on ``dout``'s device).
    index_offsets : ndarray of int64, shape (n + 1,)
        ``index``'s LoD level: ids of sequence ``i`` updated row ``i``.
    updates_shape : tuple of int
        The shape of ``updates`` (``M`` values).
    updates_dtype : numpy.dtype
        The dtype of ``updates``.

    Returns
    -------
    dinput : ndarray
        ``dout`` itself.
    dupdates : ndarray of shape updates_shape
        ``dout[i, ids[p]]`` for every position ``p`` of sequence ``i``, as ``updates_dtype``.
        Runs on the GPU too.
    """
    be = backend_of_array(dout)
    off = _host(index_offsets)
    n = dout.shape[0]
    if be.name == "cpu":  # one gather in position order, no per-position sequence array
        dupd = be.empty((int(ids.shape[0]),), dout.dtype)
        be.kernel("scatter_backward")(dupd, dout, ids, off)
        return dout, dupd.astype(updates_dtype, copy=False).reshape(tuple(updates_shape))
    seq = np.repeat(np.arange(off.shape[0] - 1, dtype=_I64), np.diff(off))
    with be.device(dout):
        flat = _flat2(dout, n)
        dupd = flat[_on(be, seq), _on(be, ids).reshape(-1)]
        dupd = dupd.astype(updates_dtype, copy=False).reshape(tuple(updates_shape))
    return dout, dupd


def conv_backward(dout, x, offsets, filter, padding, context_start, context_length,
                  bias=False, chunk_elements=CHUNK_ELEMENTS):
    """Gradients of ``sequence_conv``.

    Parameters
    ----------
    dout : ndarray of shape (N, F)
        Upstream gradient.
    x : ndarray of shape (N, D)
        The forward's input data (its dtype).
    offsets : ndarray of int64, shape (n + 1,)
        The last LoD level.
    filter : ndarray of shape (context_length * D, F)
        The filter in the computation dtype (float32 for float16/float32 input, else
        float64).
    padding : ndarray of shape (up + down, D) or None
        The trainable padding rows in the computation dtype, or None (zeros padded).
    context_start, context_length : int
        The forward's (resolved) context.
    bias : bool, default False
        Whether the forward added a bias (its gradient is then returned).
    chunk_elements : int, default ``lodarrow._ops.sequence_conv.CHUNK_ELEMENTS``
        Context elements gathered (for the filter gradient) or made (the context gradient
        ``dout @ filter.T``, for the input and padding gradients) at once, whole sequences
        for the latter: the forward's blocks, which stay in cache between the step that
        writes them and the one that reads them, instead of a round trip through memory.

    Returns
    -------
    dx : ndarray of shape (N, D)
        The transposed context convolution within each sequence, in ``x``'s dtype.
    dfilter : ndarray of shape (context_length * D, F)
        ``im2col(x)^T @ dout`` in the computation dtype.
    dpadding : ndarray of shape (up + down, D) or None
        The gradient of the padding rows (None without padding).
    dbias : ndarray of shape (F,) or None
        ``dout`` summed over the rows (None without a bias).

    Raises
    ------
    NotImplementedError
        For CuPy arrays (no GPU kernel yet).
    """
    be = backend_of_array(dout)
    n, d = x.shape
    cs, cl = int(context_start), int(context_length)
    up = max(0, -cs)
    compute = filter.dtype
    with be.device(dout):
        off = _on(be, offsets)
        g = be.xp.ascontiguousarray(dout, dtype=compute)
        if padding is None:
            cs = min(max(cs, -(n + cl)), n + 1)  # as the forward clamps it
        # the context gradient g @ filter.T, (N, cl * D), scattered back onto the rows and
        # the padding it was gathered from, a block of sequences at a time
        dxc = be.empty((n, d), compute)
        dpad = be.empty(padding.shape, compute) if padding is not None else None
        be.kernel("conv_input_backward")(dxc, dpad, g, filter, off, cs, cl, up, chunk_elements)
        dx = dxc if x.dtype == compute else dxc.astype(x.dtype)
        dw = be.empty(filter.shape, compute)
        be.kernel("conv_filter_backward")(dw, x, off, g, padding, cs, cl, up, chunk_elements)
        dbias = g.sum(axis=0) if bias else None
    return dx, dw, dpad, dbias


def topk_avg_pool_backward(dout, pos, in_offsets, row_offsets, col_offsets, topks, channels,
                           n_values):
    """Gradient of ``sequence_topk_avg_pooling``: ``dout / k`` to each selected position.

    Parameters
    ----------
    dout : ndarray of shape (sum(rows), channels * len(topks))
        Upstream gradient.
    pos : ndarray of int64, shape (sum(rows) * channels, m)
        The forward's selected columns in rank order (-1 past a row's end or for a row
        holding NaN), as the rule's forward computes them.
    in_offsets, row_offsets, col_offsets : ndarray of int64
        The LoD levels of ``input``, ``row`` and ``col``.
    topks : ndarray of int64
        The ``k`` values.
    channels : int
        ``channel_num``.
    n_values : int
        Values of the input (``in_offsets[-1]``).

    Returns
    -------
    ndarray of shape (n_values,)
        The value of rank ``q`` in its row gets ``sum(dout_k / k for k in topks if k > q)``;
        the others (and every value of a row holding NaN, whose output is NaN whatever the
        values) 0.  ``dout``'s dtype.

    Raises
    ------
    NotImplementedError
        For CuPy arrays (no GPU kernel yet).
    """
    be = backend_of_array(dout)
    with be.device(dout):
        dx = be.empty((int(n_values),), dout.dtype)
        be.kernel("topk_avg_pool_backward")(dx, be.xp.ascontiguousarray(dout), _on(be, pos),
                                            _on(be, in_offsets), _on(be, row_offsets),
                                            _on(be, col_offsets), _on(be, topks),
                                            int(channels))
    return dx
