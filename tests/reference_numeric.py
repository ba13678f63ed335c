"""Slow, obviously correct NumPy references for the numeric sequence operators.

Written from docs/operators.md (and, for ``sequence_conv``'s padding and
``sequence_topk_avg_pooling``, from the structure of Paddle's own CPU loops), independently
of lodarrow's kernels: plain Python loops over sequences, rows and positions (``ref_pool``
takes each sequence's columns at once with NumPy reductions), float64 arithmetic where it
matters.
"""

import math

import numpy as np

__all__ = ["pool_out_dtype", "ref_pool", "ref_softmax", "ref_conv", "ref_topk_avg_pool"]


def pool_out_dtype(dtype, pool):
    dtype = np.dtype(dtype)
    if pool in ("average", "sqrt") and dtype.kind in "iu":
        return np.dtype(np.float64)
    return dtype


def _exact_pad(pad_value, dtype, feature_shape):
    """The pad row: a Python float converted by value (integral for integer outputs)."""
    if isinstance(pad_value, float) and dtype.kind in "iub":
        pad_value = int(pad_value)
    pad = np.asarray(pad_value).astype(dtype)
    if pad.shape in ((), (1,)):
        pad = pad.reshape(())
    return np.broadcast_to(pad, feature_shape)


def ref_pool(data, offsets, pool, pad_value=0.0):
    """``(out, index)`` of ``sequence_pool`` over the row offsets ``offsets`` (a 1-D list)."""
    with np.errstate(invalid="ignore", over="ignore"):
        return _ref_pool(data, offsets, pool, pad_value)


def _ref_pool(data, offsets, pool, pad_value):
    data = np.asarray(data)
    dtype = data.dtype
    out_dtype = pool_out_dtype(dtype, pool)
    fshape = data.shape[1:]
    n_seq = len(offsets) - 1
    flat_w = int(np.prod(fshape, dtype=np.int64))
    out = np.empty((n_seq, flat_w), dtype=out_dtype)
    index = np.full((n_seq, flat_w), -1, dtype=np.int64)
    pad = _exact_pad(pad_value, out_dtype, fshape).reshape(flat_w)
    rows = data.reshape(data.shape[0], flat_w)
    columns = np.arange(flat_w)
    for s in range(n_seq):
        a, b = int(offsets[s]), int(offsets[s + 1])
        if a == b:
            out[s] = pad
            continue
        seg = rows[a:b]  # one column per feature, pooled down its b - a rows
        if pool in ("sum", "average", "sqrt"):
            if dtype.kind in "iu":
                total = seg.astype(np.int64).sum(axis=0)  # an int64 accumulator wraps
                if pool == "sum":
                    out[s] = total.astype(dtype)
                    continue
            else:
                total = seg.astype(np.float64).sum(axis=0)
            total = total.astype(np.float64)
            if pool == "average":
                total = total / (b - a)
            elif pool == "sqrt":
                total = total / math.sqrt(b - a)
            out[s] = total.astype(out_dtype)
        elif pool in ("max", "min"):
            # The first extreme value of each column; in float columns the first NaN wins.
            if dtype.kind == "f":
                nan = np.isnan(seg)
                fill = -np.inf if pool == "max" else np.inf
                values = np.where(nan, fill, seg)
            else:
                values = seg
            pos = np.argmax(values, axis=0) if pool == "max" else np.argmin(values, axis=0)
            if dtype.kind == "f":
                pos = np.where(nan.any(axis=0), np.argmax(nan, axis=0), pos)
            out[s] = seg[pos, columns]
            index[s] = a + pos
        elif pool == "first":
            out[s] = seg[0]
        else:
            out[s] = seg[-1]
    return out.reshape((n_seq,) + fshape), index.reshape((n_seq,) + fshape)


def ref_softmax(data, offsets):
    """Max-shifted softmax of each sequence in Python floats, cast to the output dtype."""
    data = np.asarray(data)
    out_dtype = np.float64 if data.dtype.kind in "iu" else data.dtype
    flat = data.reshape(-1).astype(np.float64).tolist()
    out = [0.0] * len(flat)
    for s in range(len(offsets) - 1):
        a, b = int(offsets[s]), int(offsets[s + 1])
        if a == b:
            continue
        seg = flat[a:b]
        m = seg[0]
        for v in seg:
            if math.isnan(v):
                m = math.nan
                break
            m = max(m, v)
        shifted = [v - m if not (math.isinf(v) and v == m) else math.nan for v in seg]
        if any(math.isnan(d) for d in shifted):
            out[a:b] = [math.nan] * (b - a)
            continue
        e = [math.exp(d) for d in shifted]
        total = math.fsum(e)
        out[a:b] = [v / total for v in e]
    return np.array(out, dtype=np.float64).astype(out_dtype).reshape(data.shape)


def ref_conv(data, offsets, filt, context_start, context_length, padding=None, bias=None):
    """``sequence_conv`` in float64 from Paddle's context projection loops (context_project.h):
    zero padding, or with ``padding`` the up-pad and down-pad row copies as Paddle writes them.
    """
    x = np.asarray(data, dtype=np.float64)
    x = x.reshape(x.shape[0], 1 if x.ndim == 1 else x.shape[1])
    n, d = x.shape
    cl, cs = context_length, context_start
    up = max(0, -cs)
    down = max(0, cs + cl - 1)
    col = np.zeros((n, cl * d))
    for s in range(len(offsets) - 1):
        a, b = int(offsets[s]), int(offsets[s + 1])
        for t in range(a, b):
            for k in range(cl):
                p = t + cs + k
                if a <= p < b:
                    col[t, k * d:(k + 1) * d] = x[p]
        if padding is None or a == b:
            continue
        w = np.asarray(padding, dtype=np.float64).reshape(-1, d)
        height = b - a
        seq = col[a:b].reshape(height * cl, d)      # one row per (time step, context slot)
        if up > 0:
            for k in range(min(up, height)):
                size = cl if k + cl < up else up - k
                seq[k * cl:k * cl + size] = w[k:k + size]
        if down > 0:
            begin_row = max(0, height - cs - cl + 1) + 1
            pad_begin = max(0, cs - height)
            size = 1 if height - cs >= cl else cl - (height - cs)
            if cs >= height:
                size = cl
            idx = pad_begin
            t = 0
            while t + begin_row <= height:
                if cs >= height:
                    size = cl
                if size > cl:
                    size = cl
                    idx += 1
                if pad_begin > 0 or height == cs:
                    idx = pad_begin + t
                end = (begin_row + t) * cl
                seq[end - size:end] = w[up + idx:up + idx + size]
                t += 1
                size += 1
        col[a:b] = seq.reshape(height, cl * d)
    out = col @ np.asarray(filt, dtype=np.float64)
    if bias is not None:
        out = out + np.asarray(bias, dtype=np.float64).reshape(1, -1)
    return out


def ref_topk_avg_pool(data, in_off, row_off, col_off, topks, channel_num):
    """Paddle's loops: per sequence, channel and row, the positions of the ``max(topks)``
    largest values (missing ones count 0), prefix sums, divided by k.  NaN in a row: NaN."""
    x = np.asarray(data).reshape(-1).astype(np.float64)
    max_k = max(topks)
    n_k = len(topks)
    out = np.zeros((int(row_off[-1]), channel_num * n_k))
    for i in range(len(in_off) - 1):
        rows = int(row_off[i + 1] - row_off[i])
        cols = int(col_off[i + 1] - col_off[i])
        assert int(in_off[i + 1] - in_off[i]) == channel_num * rows * cols
        for ch in range(channel_num):
            for r in range(rows):
                start = int(in_off[i]) + ch * rows * cols + r * cols
                vals = x[start:start + cols]
                target = int(row_off[i]) + r
                if np.isnan(vals).any():
                    out[target, ch * n_k:(ch + 1) * n_k] = np.nan
                    continue
                top = sorted(vals.tolist(), reverse=True)[:max_k]
                sums = []
                acc = 0.0
                for k in range(max_k):
                    acc += top[k] if k < len(top) else 0.0
                    sums.append(acc)
                for q, k in enumerate(topks):
                    out[target, ch * n_k + q] = sums[k - 1] / k
    return out
