"""Backward kernels on the CPU: the launcher of ``_ext/seq_grad.pyx`` (the twin of
``lodarrow/_cuda/seq_grad.py``).

float16 runs through the float32 kernels (converted here, as the forward computes float16 in
float32); first / last pooling moves rows as bytes, so it serves every dtype.
"""

import numpy as np

from lodarrow._ext import seq_conv, seq_grad
from lodarrow._plan import conv_source_rows
from lodarrow._threads import row_bounds, threads_for

__all__ = [
    "ENTRIES",
    "conv_filter_backward",
    "conv_input_backward",
    "expand_blocks_backward",
    "pool_index_backward",
    "pool_pick_backward",
    "pool_sum_backward",
    "scatter_backward",
    "slice_backward",
    "softmax_backward",
    "split_blocks",
    "topk_avg_pool_backward",
    "topk_positions",
]

_F32 = np.dtype(np.float32)
_F16 = np.dtype(np.float16)
_MODES = {"sum": 0, "average": 1, "sqrt": 2}


def _work(a):
    """``a`` C-contiguous, float16 as float32 (the kernels' types)."""
    a = np.ascontiguousarray(a)
    return a.astype(_F32) if a.dtype == _F16 else a


def _target(dx):
    """The array a kernel writes for ``dx``: ``dx`` itself, or float32 scratch for float16."""
    return np.empty(dx.shape, _F32) if dx.dtype == _F16 else dx


def _land(target, dx):
    if target is not dx:
        dx[...] = target


def pool_sum_backward(dx, dout, offsets, pool_type):
    """``dx`` (``(N, D)``) from ``dout`` (``(n_seq, D)``): sum / average / sqrt pooling."""
    if dx.size == 0:
        return
    nt = threads_for(dx.size)
    # One thread, float32 / float64: the same kernel without typed memoryviews (each
    # acquired per argument, per call), which outweigh the work on small inputs; False for
    # anything it cannot take.
    if nt == 1 and seq_grad.pool_sum_backward_serial(dx, dout, offsets, _MODES[pool_type]):
        return
    offsets = np.ascontiguousarray(offsets)
    target = _target(dx)
    seq_grad.pool_sum_backward(target, _work(dout), offsets, _MODES[pool_type],
                               row_bounds(offsets, nt), nt)
    _land(target, dx)


def pool_index_backward(dx, dout, index, offsets):
    """``dx`` (``(N, D)``): ``dout[s, j]`` at row ``index[s, j]`` of column ``j``, else 0."""
    if dx.size == 0:
        return
    offsets = np.ascontiguousarray(offsets)
    nt = threads_for(dx.size)
    target = _target(dx)
    seq_grad.pool_index_backward(target, _work(dout), np.ascontiguousarray(index), offsets,
                                 row_bounds(offsets, nt), nt)
    _land(target, dx)


def pool_pick_backward(dx, dout, offsets, last, zeroed=False):
    """``dx`` (``(N, D)``): ``dout[s]`` at the first (``last``: last) row of sequence ``s``;
    ``zeroed``: ``dx`` is all zeros already, only those rows are written."""
    if dx.size == 0:
        return
    offsets = np.ascontiguousarray(offsets)
    nt = threads_for(dx.size)
    n = dx.shape[0]
    seq_grad.pool_pick_backward(dx.reshape(n, -1).view(np.uint8),
                                np.ascontiguousarray(dout).reshape(dout.shape[0], -1)
                                .view(np.uint8), offsets, last, row_bounds(offsets, nt), nt,
                                zeroed)


def scatter_backward(dupd, dout, ids, offsets):
    """``dupd`` (flat, one value per id): ``dout[s, ids[p]]`` for each position ``p`` of
    index sequence ``s`` (``offsets``), ``dout`` seen as ``(rows, -1)``."""
    if dupd.size == 0:
        return
    offsets = np.ascontiguousarray(offsets)
    nt = threads_for(dupd.size)
    target = _target(dupd)
    seq_grad.scatter_backward(target.reshape(-1), _work(dout).reshape(dout.shape[0], -1),
                              np.ascontiguousarray(ids, dtype=np.int64).reshape(-1), offsets,
                              row_bounds(offsets, nt), nt)
    _land(target, dupd)


def slice_backward(dx, dout, start, out_offsets):
    """``dx`` (``(N, ...)``): ``dout``'s rows ``[out_offsets[i], out_offsets[i + 1])`` at rows
    ``start[i]`` on, zeros elsewhere (the slices in order, without overlap)."""
    if dx.size == 0:
        return
    out_offsets = np.ascontiguousarray(out_offsets)
    nt = threads_for(dx.size)
    width = dx.size // dx.shape[0]
    seq_grad.slice_backward(dx.reshape(dx.shape[0], width).view(np.uint8),
                            np.ascontiguousarray(dout).reshape(dout.shape[0], width)
                            .view(np.uint8), np.ascontiguousarray(start), out_offsets,
                            row_bounds(out_offsets, nt), nt)


def split_blocks(outs, src, offsets, src_off):
    """``sequence_concat``'s backward: sequence ``i`` of ``src`` (rows from ``src_off[i]``)
    back into sequence ``i`` of each of ``outs`` in turn (their last levels ``offsets``); one
    pass over ``src``."""
    if src.size == 0:
        return
    src_off = np.ascontiguousarray(src_off)
    nt = threads_for(src.size)
    seq_grad.split_blocks([_rows(o) for o in outs], _rows(np.ascontiguousarray(src)),
                          [np.ascontiguousarray(o) for o in offsets], src_off,
                          row_bounds(src_off, nt), nt)


def _rows(a):
    """A C-contiguous array as ``(rows, bytes per row)`` uint8."""
    return a.reshape(a.shape[0], -1).view(np.uint8)


def softmax_backward(dx, y, dout, offsets):
    """``dx = y * (dout - sum_seq(y * dout))`` (flat arrays of ``N`` values)."""
    if dx.size == 0:
        return
    offsets = np.ascontiguousarray(offsets)
    nt = threads_for(dx.size * 2)
    target = _target(dx)
    seq_grad.softmax_backward(target.reshape(-1), _work(y).reshape(-1),
                              _work(dout).reshape(-1), offsets, row_bounds(offsets, nt), nt)
    _land(target, dx)


def expand_blocks_backward(dx, dout, x_off, rep_off, out_lod):
    """``dx`` (``(N, D)``): row ``k`` of block ``i`` summed over that block's copies."""
    if dx.size == 0:
        return
    x_off = np.ascontiguousarray(x_off)
    rep_off = np.ascontiguousarray(rep_off)
    out_lod = np.ascontiguousarray(out_lod)
    nt = threads_for(dout.size + dx.size)
    # Balance by the rows of dout each block reads.
    bounds = row_bounds(out_lod[rep_off], nt) if nt > 1 else None
    target = _target(dx)
    seq_grad.expand_blocks_backward(target, _work(dout), x_off, rep_off, out_lod, bounds, nt)
    _land(target, dx)


def conv_input_backward(dx, dpad, dout, filter, offsets, context_start, context_length, up,
                        chunk_elements):
    """``dx`` (``(N, D)``) and ``dpad`` (``(up + down, D)`` or None), in the computation dtype,
    from the context gradient ``dout @ filter.T`` (``(N, cl * D)``).

    That gradient is made a block of whole sequences at a time (about ``chunk_elements``
    values; a longer sequence is a block of its own) and scattered back at once: contexts
    never cross a sequence, so a block needs no rows of its neighbours, and its context
    gradient is read back from cache instead of being written to memory and read again.
    ``dpad`` adds the blocks' sums in order (deterministic for a given ``chunk_elements``).
    """
    n, d = dx.shape
    width = context_length * d
    if dpad is not None:
        dpad[...] = 0
    if n == 0 or width == 0:
        if dx.size:
            dx[...] = 0
        return
    offsets = np.ascontiguousarray(offsets)
    g = np.ascontiguousarray(dout)
    ft = np.ascontiguousarray(filter.T)
    n_seq = offsets.shape[0] - 1
    step = max(1, chunk_elements // width)
    # block ends: the first sequence end at or past every ``step`` rows, and the last one
    ends = np.searchsorted(offsets, np.arange(step, n + step, step), side="left")
    ends = np.unique(np.append(np.minimum(ends, n_seq), n_seq))
    starts = np.concatenate([[0], ends[:-1]])
    longest = int(np.max(offsets[ends] - offsets[starts]))
    buf = np.empty((min(n, max(step, longest)), width), dtype=dx.dtype)
    part = np.empty_like(dpad) if dpad is not None else None
    nt = threads_for(min(n, step) * width)
    for s0, s1 in zip(starts.tolist(), ends.tolist()):
        r0, r1 = int(offsets[s0]), int(offsets[s1])
        if r1 == r0:
            continue
        ctx = buf[:r1 - r0]
        np.matmul(g[r0:r1], ft, out=ctx)
        local = offsets[s0:s1 + 1] - r0
        seq_grad.conv_input_backward(dx[r0:r1], ctx, local, context_start, context_length,
                                     row_bounds(local, nt), nt)
        if dpad is not None:
            seq_grad.conv_padding_backward(part, ctx, local, context_start, context_length, up)
            dpad += part


def conv_filter_backward(dw, data, offsets, dout, pad_rows, cs, cl, up, chunk_elements):
    """``dw = im2col(data)^T @ dout``: the forward's contexts (padding rows included),
    gathered block by block as the forward does, each block's product added in order."""
    n, d = data.shape
    width = cl * d
    dw[...] = 0
    if n == 0 or width == 0 or dw.size == 0:
        return
    data = np.ascontiguousarray(data)
    compute = dw.dtype
    offsets = np.ascontiguousarray(offsets)
    step = max(1, chunk_elements // width)
    ctx_buf = np.empty((min(step, n), width), dtype=compute)
    use_pad = pad_rows is not None
    padding = np.ascontiguousarray(pad_rows) if use_pad else np.empty((0, d), dtype=compute)
    for r0 in range(0, n, step):
        r1 = min(n, r0 + step)
        ctx = ctx_buf[:r1 - r0]
        if data.dtype == compute:
            src, base = data, 0
        else:
            base, stop = conv_source_rows(r0, r1, n, cs, cl)
            src = data[base:stop].astype(compute)
        seq_conv.conv_gather(ctx, src, base, offsets, r0, cs, cl, padding, up, use_pad, 1)
        dw += ctx.T @ dout[r0:r1]


def topk_positions(pos, data, in_off, row_off, col_off, channels):
    """``pos`` (``(sum(rows) * channels, m)`` int64): the ranked top-``m`` columns."""
    if pos.size == 0:
        return
    in_off = np.ascontiguousarray(in_off)
    nt = threads_for(data.shape[0] * 4)
    bounds = row_bounds(in_off, nt)
    n_chunks = 1 if bounds is None else bounds.shape[0] - 1
    work = np.empty((n_chunks, pos.shape[1]), dtype=np.float64)
    seq_grad.topk_positions(pos, work, _work(data).reshape(-1), in_off,
                            np.ascontiguousarray(row_off), np.ascontiguousarray(col_off),
                            channels, bounds, nt)


def topk_avg_pool_backward(dx, dout, pos, in_off, row_off, col_off, ks, channels):
    """``dx`` (flat, ``N`` values) from ``dout`` (``(sum(rows), channels * len(ks))``)."""
    if dx.size == 0:
        return
    in_off = np.ascontiguousarray(in_off)
    nt = threads_for(dx.size * 2)
    target = _target(dx)
    seq_grad.topk_avg_pool_backward(target.reshape(-1), _work(dout), np.ascontiguousarray(pos),
                                    in_off, np.ascontiguousarray(row_off),
                                    np.ascontiguousarray(col_off), np.ascontiguousarray(ks),
                                    channels, row_bounds(in_off, nt), nt)
    _land(target, dx)


#: Kernel name -> entry point (``_backends/cpu.py`` builds its table from these).
ENTRIES = {
    "pool_sum_backward": pool_sum_backward,
    "pool_index_backward": pool_index_backward,
    "pool_pick_backward": pool_pick_backward,
    "scatter_backward": scatter_backward,
    "slice_backward": slice_backward,
    "softmax_backward": softmax_backward,
    "split_blocks": split_blocks,
    "expand_blocks_backward": expand_blocks_backward,
    "conv_input_backward": conv_input_backward,
    "conv_filter_backward": conv_filter_backward,
    "topk_positions": topk_positions,
    "topk_avg_pool_backward": topk_avg_pool_backward,
}
