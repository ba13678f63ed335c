"""NumPy's peers: what a NumPy user writes (``ufunc.reduceat``, ``np.repeat``, fancy indexing).

Importing this module registers them with :mod:`lodarrow._bench._peers`, whose docstring
says what a peer is.
"""

import functools

import numpy as np

from lodarrow._bench._peers import (CONV_CONTEXT, conv_filter, ENUMERATE_WIN, ERASE_TOKENS,
                                    _feature, numpy_view, _offsets_values, _only_d1, _pad_norm,
                                    peer, SCATTER_WIDTH, _unpad_norm, _values_offsets)

__all__ = []  # the peers are reached through the registry


# ====================================================================== sequence_pool
@peer("sequence_pool", "numpy", "ufunc.reduceat")
def numpy_pool(w, variant):
    data, off = w.data, w.offsets[-1]
    ufunc = np.maximum if variant == "max" else np.add

    def run():
        lengths = np.diff(off)
        nonempty = lengths > 0
        out = np.zeros((len(lengths),) + _feature(w), dtype=data.dtype)
        if data.shape[0]:
            out[nonempty] = ufunc.reduceat(data, off[:-1][nonempty], axis=0)
        if variant == "average":
            counts = lengths[nonempty].astype(data.dtype)
            out[nonempty] /= counts.reshape((-1,) + (1,) * (data.ndim - 1))
        return out
    return run, numpy_view


# ====================================================================== sequence_softmax
@peer("sequence_softmax", "numpy", "reduceat + repeat + exp")
def numpy_softmax(w, variant):
    x, off = w.data, w.offsets[-1]

    def run():
        lengths = np.diff(off)
        nonempty = lengths > 0
        starts = off[:-1][nonempty]
        m = np.zeros(len(lengths), dtype=x.dtype)
        if len(x):
            m[nonempty] = np.maximum.reduceat(x, starts)
        e = np.exp(x - np.repeat(m, lengths))
        s = np.ones(len(lengths), dtype=x.dtype)
        if len(x):
            s[nonempty] = np.add.reduceat(e, starts)
        e /= np.repeat(s, lengths)
        return e
    return run, numpy_view


# ====================================================================== first / last step
def _numpy_step(w, last):
    x, off = w.data, w.offsets[-1]

    def run():
        lengths = np.diff(off)
        nonempty = lengths > 0
        out = np.zeros((len(lengths),) + _feature(w), dtype=x.dtype)
        rows = off[1:][nonempty] - 1 if last else off[:-1][nonempty]
        out[nonempty] = x[rows]
        return out
    return run, numpy_view


for _op, _last in (("sequence_first_step", False), ("sequence_last_step", True)):
    peer(_op, "numpy", "fancy indexing")(functools.partial(
        lambda w, variant, last: _numpy_step(w, last), last=_last))


# ====================================================================== sequence_expand
@peer("sequence_expand", "numpy", "np.repeat")
def numpy_expand(w, variant):
    x, off = w.per_sequence, w.offsets[-1]
    return (lambda: np.repeat(x, np.diff(off), axis=0)), numpy_view


# ====================================================================== sequence_pad
@peer("sequence_pad", "numpy", "boolean mask")
def numpy_pad(w, variant):
    x, off = w.data, w.offsets[-1]

    def run():
        lengths = np.diff(off)
        p = int(lengths.max()) if len(lengths) else 0
        out = np.zeros((len(lengths), p) + x.shape[1:], dtype=x.dtype)
        out[np.arange(p) < lengths[:, None]] = x
        return out, lengths
    return run, _pad_norm


# ====================================================================== sequence_unpad
@peer("sequence_unpad", "numpy", "boolean mask")
def numpy_unpad(w, variant):
    xpad, _ = w.padded
    lengths = w.lengths

    def run():
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return xpad[np.arange(xpad.shape[1]) < lengths[:, None]], offsets
    return run, _unpad_norm


# ====================================================================== sequence_conv
@peer("sequence_conv", "numpy", "shifted copies + matmul")
def numpy_conv(w, variant):
    x, off = w.data, w.offsets[-1]
    x2 = x.reshape(x.shape[0], -1)
    filt = conv_filter(x2.shape[1])
    start, length = CONV_CONTEXT

    def run():
        n, d = x2.shape
        seq = np.repeat(np.arange(len(off) - 1), np.diff(off))
        col = np.zeros((n, length * d), dtype=x2.dtype)
        rows = np.arange(n)
        for k in range(length):
            src = rows + start + k
            ok = (src >= 0) & (src < n)
            ok[ok] = seq[src[ok]] == seq[ok]
            col[ok, k * d:(k + 1) * d] = x2[src[ok]]
        return col @ filt
    return run, numpy_view


# ====================================================================== topk_avg_pooling
@peer("sequence_topk_avg_pooling", "numpy", "per-sequence np.sort")
def numpy_topk(w, variant):
    x, off = w.data, w.offsets[0]
    row_len, col_len, ch = w.row_len, w.col_len, w.channels
    topks = np.asarray(w.topks)
    kmax = int(topks.max())

    def run():
        row_off = np.concatenate(([0], np.cumsum(row_len)))
        out = np.zeros((int(row_off[-1]), ch * len(topks)), dtype=x.dtype)
        for i in range(len(row_len)):
            r, c = int(row_len[i]), int(col_len[i])
            if r == 0 or c == 0:
                continue
            block = x[off[i]:off[i + 1]].reshape(ch, r, c)
            top = -np.sort(-block, axis=2)[:, :, :kmax]
            sums = np.cumsum(top, axis=2)
            avg = sums[:, :, np.minimum(topks, top.shape[2]) - 1] / topks.astype(x.dtype)
            out[row_off[i]:row_off[i + 1]] = avg.transpose(1, 0, 2).reshape(r, -1)
        return out
    return run, numpy_view


# ====================================================================== data movers (D=1)
@peer("sequence_reverse", "numpy", "index arithmetic + take")
def numpy_reverse(w, variant):
    _only_d1(w)
    x, off = w.data, w.offsets[-1]

    def run():
        seq = np.repeat(np.arange(len(off) - 1), np.diff(off))
        src = (off[:-1] + off[1:] - 1)[seq] - np.arange(len(x))
        return x[src], off
    return run, lambda r: _values_offsets(*r)


@peer("sequence_concat", "numpy", "index arithmetic + take")
def numpy_concat(w, variant):
    _only_d1(w)
    x, off = w.data, w.offsets[-1]

    def run():  # [t, t]: sequence i of the output is sequence i of x twice
        lengths = np.diff(off)
        out_off = np.zeros_like(off)
        np.cumsum(2 * lengths, out=out_off[1:])
        seq = np.repeat(np.arange(len(lengths)), 2 * lengths)
        pos = np.arange(2 * len(x)) - out_off[:-1][seq]
        src = off[:-1][seq] + np.where(pos < lengths[seq], pos, pos - lengths[seq])
        return x[src], out_off
    return run, lambda r: _values_offsets(*r)


@peer("sequence_slice", "numpy", "boolean mask")
def numpy_slice(w, variant):
    _only_d1(w)
    x, off = w.data, w.offsets[-1]
    offset, length = w.slice_args

    def run():
        lengths = np.diff(off)
        seq = np.repeat(np.arange(len(lengths)), lengths)
        pos = np.arange(len(x)) - off[:-1][seq]
        start = offset[:, 0][seq]
        keep = (pos >= start) & (pos < start + length[:, 0][seq])
        out_off = np.zeros_like(off)
        np.cumsum(length[:, 0], out=out_off[1:])
        return x[keep], out_off
    return run, lambda r: _values_offsets(*r)


@peer("sequence_erase", "numpy", "np.isin mask + reduceat")
def numpy_erase(w, variant):
    _only_d1(w)
    ids, off = w.int_ids, w.offsets[-1]
    tokens = np.asarray(ERASE_TOKENS)

    def run():
        keep = ~np.isin(ids, tokens)
        kept = np.concatenate(([0], np.cumsum(keep)))[off]  # kept rows before each offset
        return ids[keep], kept
    return run, lambda r: _values_offsets(*r)


@peer("sequence_enumerate", "numpy", "shifted copies + masks")
def numpy_enumerate(w, variant):
    _only_d1(w)
    ids, off = w.int_ids, w.offsets[-1]

    def run():
        n = len(ids)
        ends = np.repeat(off[1:], np.diff(off))
        rows = np.arange(n)
        out = np.zeros((n, ENUMERATE_WIN), dtype=ids.dtype)
        for k in range(ENUMERATE_WIN):
            ok = rows + k < ends
            out[ok, k] = ids[rows[ok] + k]
        return out
    return run, numpy_view


@peer("sequence_mask", "numpy", "arange < lengths")
def numpy_mask(w, variant):
    _only_d1(w)
    lengths = w.lengths

    def run():
        return np.arange(int(lengths.max())) < lengths[:, None]
    return run, numpy_view


@peer("sequence_scatter", "numpy", "np.bincount(weights)")
def numpy_scatter(w, variant):
    _only_d1(w)
    off, n = w.offsets[-1], w.n_seq
    cols = w.int_ids % SCATTER_WIDTH
    upd = w.data
    base = np.zeros((n, SCATTER_WIDTH), dtype=np.float32)

    def run():
        seq = np.repeat(np.arange(n), np.diff(off))
        sums = np.bincount(seq * SCATTER_WIDTH + cols, weights=upd, minlength=base.size)
        return base + sums.reshape(base.shape).astype(np.float32)
    return run, numpy_view


# ====================================================================== LoDTensor from offsets
@peer("from_offsets", "numpy", "checks only: off[0] == 0, diff >= 0, off[-1] == len")
def numpy_from_offsets(w, variant):
    _only_d1(w)
    x, off = w.data, w.offsets[-1]

    def run():
        if off[0] != 0 or off[-1] != len(x) or not (np.diff(off) >= 0).all():
            raise ValueError("bad offsets")
        return off, x
    return run, _offsets_values
