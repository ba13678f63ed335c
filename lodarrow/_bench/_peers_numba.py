"""numba's peers: ``prange`` kernels over sequences, what a numba user would write
(compiled on first use, cached on disk).

Importing this module registers them with :mod:`lodarrow._bench._peers`, whose docstring
says what a peer is.
"""

import functools

import numpy as np

from lodarrow._bench._peers import (CONV_CONTEXT, conv_filter, ENUMERATE_WIN, ERASE_TOKENS,
                                    _feature, NotApplicable, numpy_view, _only_d1, _pad_norm, peer,
                                    _POOL_KIND, SCATTER_WIDTH, _unpad_norm, _values_offsets)

__all__ = []  # the peers are reached through the registry


# ====================================================================== numba kernels
@functools.cache
def _nb():
    """Compile-on-first-use numba kernels (a namespace of njit functions)."""
    import types

    import numba
    from numba import njit, prange

    ns = types.SimpleNamespace()

    @njit(parallel=True, cache=True)
    def pool_1d(x, off, out, kind):  # kind: 0 sum, 1 average, 2 max
        for i in prange(len(off) - 1):
            a, b = off[i], off[i + 1]
            if a == b:
                out[i] = 0.0
                continue
            if kind == 2:
                acc = x[a]
                for r in range(a + 1, b):
                    if x[r] > acc:
                        acc = x[r]
                out[i] = acc
            else:
                acc = np.float32(0.0)
                for r in range(a, b):
                    acc += x[r]
                out[i] = acc / (b - a) if kind == 1 else acc

    @njit(parallel=True, cache=True)
    def pool_2d(x, off, out, kind):
        d = x.shape[1]
        for i in prange(len(off) - 1):
            a, b = off[i], off[i + 1]
            for j in range(d):
                out[i, j] = x[a, j] if (kind == 2 and b > a) else 0.0
            for r in range(a + (1 if kind == 2 else 0), b):
                for j in range(d):
                    if kind == 2:
                        if x[r, j] > out[i, j]:
                            out[i, j] = x[r, j]
                    else:
                        out[i, j] += x[r, j]
            if kind == 1 and b > a:
                for j in range(d):
                    out[i, j] /= b - a

    @njit(parallel=True, cache=True)
    def softmax(x, off, out):
        for i in prange(len(off) - 1):
            a, b = off[i], off[i + 1]
            if a == b:
                continue
            m = x[a]
            for r in range(a + 1, b):
                if x[r] > m:
                    m = x[r]
            s = np.float32(0.0)
            for r in range(a, b):
                e = np.exp(x[r] - m)
                out[r] = e
                s += e
            for r in range(a, b):
                out[r] /= s

    @njit(parallel=True, cache=True)
    def step(x, off, out, last):
        for i in prange(len(off) - 1):
            a, b = off[i], off[i + 1]
            if a == b:
                out[i] = 0.0
            else:
                out[i] = x[b - 1] if last else x[a]

    @njit(parallel=True, cache=True)
    def expand(x, off, out):
        for i in prange(len(off) - 1):
            for r in range(off[i], off[i + 1]):
                out[r] = x[i]

    @njit(parallel=True, cache=True)
    def pad(x, off, out):
        for i in prange(len(off) - 1):
            a, b = off[i], off[i + 1]
            for j in range(b - a):
                out[i, j] = x[a + j]
            for j in range(b - a, out.shape[1]):
                out[i, j] = 0.0

    @njit(cache=True)
    def lengths_to_offsets(lengths):
        off = np.empty(len(lengths) + 1, np.int64)
        off[0] = 0
        for i in range(len(lengths)):
            off[i + 1] = off[i] + lengths[i]
        return off

    @njit(parallel=True, cache=True)
    def unpad_into(x, off, out):
        for i in prange(len(off) - 1):
            a = off[i]
            for j in range(off[i + 1] - a):
                out[a + j] = x[i, j]

    @njit(parallel=True, cache=True)
    def conv(x, off, filt, start, length, out):
        n, d = x.shape
        f = filt.shape[1]
        for i in prange(len(off) - 1):
            a, b = off[i], off[i + 1]
            for t in range(a, b):
                for c in range(f):
                    out[t, c] = 0.0
                for k in range(length):
                    src = t + start + k
                    if src < a or src >= b:
                        continue
                    for j in range(d):
                        v = x[src, j]
                        for c in range(f):
                            out[t, c] += v * filt[k * d + j, c]

    @njit(parallel=True, cache=True)
    def topk_avg(x, off, row_len, col_len, row_off, channels, topks, out):
        kmax = 0
        for k in topks:
            kmax = max(kmax, k)
        nt = len(topks)
        for i in prange(len(off) - 1):
            r_n, c_n = row_len[i], col_len[i]
            best = np.empty(kmax, np.float32)
            for ch in range(channels):
                for r in range(r_n):
                    base = off[i] + (ch * r_n + r) * c_n
                    m = 0  # values held in best[:m], descending
                    for c in range(c_n):
                        v = x[base + c]
                        if m < kmax:
                            m += 1
                        elif v <= best[m - 1]:
                            continue
                        p = m - 1
                        while p > 0 and best[p - 1] < v:
                            best[p] = best[p - 1]
                            p -= 1
                        best[p] = v
                    row = row_off[i] + r
                    for q in range(nt):
                        k = topks[q]
                        s = np.float32(0.0)
                        for p in range(min(k, m)):
                            s += best[p]
                        out[row, ch * nt + q] = s / k

    @njit(parallel=True, cache=True)
    def reverse(x, off, out):
        for i in prange(len(off) - 1):
            a, b = off[i], off[i + 1]
            for j in range(b - a):
                out[a + j] = x[b - 1 - j]

    @njit(parallel=True, cache=True)
    def concat2(x, xoff, y, yoff, out_off, out):
        for i in prange(len(out_off) - 1):
            p = out_off[i]
            for r in range(xoff[i], xoff[i + 1]):
                out[p] = x[r]
                p += 1
            for r in range(yoff[i], yoff[i + 1]):
                out[p] = y[r]
                p += 1

    @njit(parallel=True, cache=True)
    def slice_into(x, off, start, out_off, out):
        for i in prange(len(out_off) - 1):
            src = off[i] + start[i]
            for j in range(out_off[i + 1] - out_off[i]):
                out[out_off[i] + j] = x[src + j]

    @njit(parallel=True, cache=True)
    def erase_count(ids, off, tokens, counts):
        for i in prange(len(off) - 1):
            c = 0
            for r in range(off[i], off[i + 1]):
                hit = False
                for t in tokens:
                    if ids[r] == t:
                        hit = True
                if not hit:
                    c += 1
            counts[i] = c

    @njit(parallel=True, cache=True)
    def erase_into(ids, off, tokens, out_off, out):
        for i in prange(len(off) - 1):
            p = out_off[i]
            for r in range(off[i], off[i + 1]):
                hit = False
                for t in tokens:
                    if ids[r] == t:
                        hit = True
                if not hit:
                    out[p] = ids[r]
                    p += 1

    @njit(parallel=True, cache=True)
    def enumerate_(ids, off, out):
        win = out.shape[1]
        for i in prange(len(off) - 1):
            b = off[i + 1]
            for r in range(off[i], b):
                for k in range(win):
                    out[r, k] = ids[r + k] if r + k < b else 0

    @njit(parallel=True, cache=True)
    def scatter_add(cols, off, upd, out):
        for i in prange(len(off) - 1):
            for r in range(off[i], off[i + 1]):
                out[i, cols[r]] += upd[r]

    ns.reverse, ns.concat2, ns.slice_into = reverse, concat2, slice_into
    ns.erase_count, ns.erase_into, ns.enumerate_ = erase_count, erase_into, enumerate_
    ns.scatter_add = scatter_add
    ns.pool_1d, ns.pool_2d, ns.softmax, ns.step = pool_1d, pool_2d, softmax, step
    ns.expand, ns.pad, ns.unpad_into, ns.conv = expand, pad, unpad_into, conv
    ns.lengths_to_offsets, ns.topk_avg = lengths_to_offsets, topk_avg
    ns.threads = numba.get_num_threads()
    return ns


# ====================================================================== sequence_pool
@peer("sequence_pool", "numba", "prange loop")
def numba_pool(w, variant):
    nb = _nb()
    data, off = w.data, w.offsets[-1]
    kind = _POOL_KIND[variant]
    kernel = nb.pool_2d if data.ndim == 2 else nb.pool_1d

    def run():
        out = np.empty((len(off) - 1,) + _feature(w), dtype=data.dtype)
        kernel(data, off, out, kind)
        return out
    return run, numpy_view


# ====================================================================== sequence_softmax
@peer("sequence_softmax", "numba", "prange loop")
def numba_softmax(w, variant):
    nb = _nb()
    x, off = w.data, w.offsets[-1]

    def run():
        out = np.empty_like(x)
        nb.softmax(x, off, out)
        return out
    return run, numpy_view


# ====================================================================== first / last step
def _numba_step(w, last):
    nb = _nb()
    x, off = w.data, w.offsets[-1]
    if x.ndim > 1:
        raise NotApplicable("written for D=1")

    def run():
        out = np.empty(len(off) - 1, dtype=x.dtype)
        nb.step(x, off, out, last)
        return out
    return run, numpy_view


for _op, _last in (("sequence_first_step", False), ("sequence_last_step", True)):
    peer(_op, "numba", "prange loop")(functools.partial(
        lambda w, variant, last: _numba_step(w, last), last=_last))


# ====================================================================== sequence_expand
@peer("sequence_expand", "numba", "prange loop")
def numba_expand(w, variant):
    nb = _nb()
    x, off = w.per_sequence, w.offsets[-1]

    def run():
        out = np.empty((int(off[-1]),) + x.shape[1:], dtype=x.dtype)
        nb.expand(x, off, out)
        return out
    return run, numpy_view


# ====================================================================== sequence_pad
@peer("sequence_pad", "numba", "prange loop")
def numba_pad(w, variant):
    nb = _nb()
    x, off = w.data, w.offsets[-1]

    def run():
        lengths = np.diff(off)
        p = int(lengths.max()) if len(lengths) else 0
        out = np.empty((len(lengths), p) + x.shape[1:], dtype=x.dtype)
        if x.ndim == 1:
            nb.pad(x, off, out)
        else:  # rows of d floats: pad the (n, p*d) view with d-wide offsets
            d = x.shape[1]
            nb.pad(x.reshape(-1), off * d, out.reshape(len(lengths), p * d))
        return out, lengths
    return run, _pad_norm


# ====================================================================== sequence_unpad
@peer("sequence_unpad", "numba", "prange loop")
def numba_unpad(w, variant):
    nb = _nb()
    xpad, _ = w.padded
    lengths = w.lengths

    def run():
        off = nb.lengths_to_offsets(lengths)
        out = np.empty((int(off[-1]),) + xpad.shape[2:], dtype=xpad.dtype)
        nb.unpad_into(xpad, off, out)
        return out, off
    return run, _unpad_norm


# ====================================================================== sequence_conv
@peer("sequence_conv", "numba", "prange loop")
def numba_conv(w, variant):
    nb = _nb()
    x, off = w.data, w.offsets[-1]
    x2 = x.reshape(x.shape[0], -1)
    filt = conv_filter(x2.shape[1])

    def run():
        out = np.empty((x2.shape[0], filt.shape[1]), dtype=x2.dtype)
        nb.conv(x2, off, filt, CONV_CONTEXT[0], CONV_CONTEXT[1], out)
        return out
    return run, numpy_view


# ====================================================================== topk_avg_pooling
@peer("sequence_topk_avg_pooling", "numba", "prange loop, insertion top-k")
def numba_topk(w, variant):
    nb = _nb()
    x, off = w.data, w.offsets[0]
    topks = np.asarray(w.topks, dtype=np.int64)
    row_off = np.concatenate(([0], np.cumsum(w.row_len))).astype(np.int64)

    def run():
        out = np.empty((int(row_off[-1]), w.channels * len(topks)), dtype=x.dtype)
        nb.topk_avg(x, off, w.row_len, w.col_len, row_off, w.channels, topks, out)
        return out
    return run, numpy_view


# ====================================================================== data movers (D=1)
@peer("sequence_reverse", "numba", "prange loop")
def numba_reverse(w, variant):
    _only_d1(w)
    nb = _nb()
    x, off = w.data, w.offsets[-1]

    def run():
        out = np.empty_like(x)
        nb.reverse(x, off, out)
        return out, off
    return run, lambda r: _values_offsets(*r)


@peer("sequence_concat", "numba", "prange loop")
def numba_concat(w, variant):
    _only_d1(w)
    nb = _nb()
    x, off = w.data, w.offsets[-1]

    def run():
        out_off = nb.lengths_to_offsets(2 * np.diff(off))
        out = np.empty(2 * len(x), dtype=x.dtype)
        nb.concat2(x, off, x, off, out_off, out)
        return out, out_off
    return run, lambda r: _values_offsets(*r)


@peer("sequence_slice", "numba", "prange loop")
def numba_slice(w, variant):
    _only_d1(w)
    nb = _nb()
    x, off = w.data, w.offsets[-1]
    offset, length = w.slice_args

    def run():
        out_off = nb.lengths_to_offsets(length[:, 0])
        out = np.empty(int(out_off[-1]), dtype=x.dtype)
        nb.slice_into(x, off, offset[:, 0], out_off, out)
        return out, out_off
    return run, lambda r: _values_offsets(*r)


@peer("sequence_erase", "numba", "two passes, prange")
def numba_erase(w, variant):
    _only_d1(w)
    nb = _nb()
    ids, off = w.int_ids, w.offsets[-1]
    tokens = np.asarray(ERASE_TOKENS, dtype=np.int64)

    def run():
        counts = np.empty(len(off) - 1, dtype=np.int64)
        nb.erase_count(ids, off, tokens, counts)
        out_off = nb.lengths_to_offsets(counts)
        out = np.empty(int(out_off[-1]), dtype=ids.dtype)
        nb.erase_into(ids, off, tokens, out_off, out)
        return out, out_off
    return run, lambda r: _values_offsets(*r)


@peer("sequence_enumerate", "numba", "prange loop")
def numba_enumerate(w, variant):
    _only_d1(w)
    nb = _nb()
    ids, off = w.int_ids, w.offsets[-1]

    def run():
        out = np.empty((len(ids), ENUMERATE_WIN), dtype=ids.dtype)
        nb.enumerate_(ids, off, out)
        return out
    return run, numpy_view


@peer("sequence_scatter", "numba", "prange over sequences")
def numba_scatter(w, variant):
    _only_d1(w)
    nb = _nb()
    off, n = w.offsets[-1], w.n_seq
    cols = w.int_ids % SCATTER_WIDTH
    upd = w.data
    base = np.zeros((n, SCATTER_WIDTH), dtype=np.float32)

    def run():
        out = base.copy()
        nb.scatter_add(cols, off, upd, out)
        return out
    return run, numpy_view
