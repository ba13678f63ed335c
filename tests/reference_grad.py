"""Oracles for the gradients, written independently of the kernels: central finite
differences of any operator, and straightforward NumPy loops (explicit Jacobians) for the
operators whose derivative has kinks or ties (max / min, top-k) or a closed form worth
checking on its own (softmax, conv)."""

import numpy as np


def numeric_vjp(f, x, dout, eps=1e-6):
    """``J^T dout`` of ``f`` (float64 array -> float64 array) at ``x`` by central differences.

    ``f`` must be smooth near ``x`` (no ties of max, no top-k boundary in reach of ``eps``).
    """
    x = np.array(x, dtype=np.float64)
    dout = np.asarray(dout, dtype=np.float64)
    grad = np.zeros_like(x)
    flat = x.reshape(-1)
    g = grad.reshape(-1)
    for i in range(flat.size):
        keep = flat[i]
        flat[i] = keep + eps
        up = np.array(f(x), dtype=np.float64)  # a copy: f may return a view of x
        flat[i] = keep - eps
        down = np.array(f(x), dtype=np.float64)
        flat[i] = keep
        g[i] = np.sum((up - down) * dout) / (2 * eps)
    return grad


def pool_grad(x, offsets, pool, dout):
    """Loop reference of ``sequence_pool``'s input gradient (``x`` ``(N, *F)``)."""
    x = np.asarray(x, dtype=np.float64)
    dout = np.asarray(dout, dtype=np.float64)
    n = x.shape[0]
    width = int(np.prod(x.shape[1:]))
    flat = x.reshape(n, width)
    g = dout.reshape(len(offsets) - 1, width)
    dx = np.zeros_like(flat)
    for s in range(len(offsets) - 1):
        a, b = int(offsets[s]), int(offsets[s + 1])
        length = b - a
        if length == 0:
            continue
        for j in range(flat.shape[1]):
            if pool == "sum":
                for i in range(a, b):
                    dx[i, j] = g[s, j]
            elif pool == "average":
                for i in range(a, b):
                    dx[i, j] = g[s, j] / length
            elif pool == "sqrt":
                for i in range(a, b):
                    dx[i, j] = g[s, j] / np.sqrt(length)
            elif pool == "first":
                dx[a, j] = g[s, j]
            elif pool == "last":
                dx[b - 1, j] = g[s, j]
            else:  # max / min: the first NaN wins, else the first extreme
                win = None
                for i in range(a, b):
                    v = flat[i, j]
                    if np.isnan(v):
                        win = i
                        break
                    if win is None or (v > flat[win, j] if pool == "max" else v < flat[win, j]):
                        win = i
                dx[win, j] = g[s, j]
    return dx.reshape(x.shape)


def softmax_grad(x, offsets, dout):
    """``J^T dout`` of the per-sequence softmax, from its explicit Jacobian."""
    x = np.asarray(x, dtype=np.float64).reshape(-1)
    dout = np.asarray(dout, dtype=np.float64).reshape(-1)
    dx = np.zeros_like(x)
    for s in range(len(offsets) - 1):
        a, b = int(offsets[s]), int(offsets[s + 1])
        if a == b:
            continue
        e = np.exp(x[a:b] - x[a:b].max())
        y = e / e.sum()
        jac = np.diag(y) - np.outer(y, y)
        dx[a:b] = jac.T @ dout[a:b]
    return dx


def conv_grad(x, offsets, w, dout, cs, cl, padding=None):
    """Loop reference of ``sequence_conv``'s gradients: ``(dx, dw, dpadding, dbias)``."""
    x = np.asarray(x, dtype=np.float64)
    n = x.shape[0]
    x = x.reshape(n, int(np.prod(x.shape[1:])))
    d = x.shape[1]
    w = np.asarray(w, dtype=np.float64)
    dout = np.asarray(dout, dtype=np.float64)
    up = max(0, -cs)
    dx = np.zeros_like(x)
    dw = np.zeros_like(w)
    dpad = None if padding is None else np.zeros((np.asarray(padding).shape[0], d))
    pad = None if padding is None else np.asarray(padding, dtype=np.float64).reshape(-1, d)
    for s in range(len(offsets) - 1):
        a, b = int(offsets[s]), int(offsets[s + 1])
        for t in range(a, b):
            for k in range(cl):
                p = t + cs + k
                block = slice(k * d, (k + 1) * d)
                gk = w[block] @ dout[t]  # the gradient reaching block k of row t's context
                if a <= p < b:
                    dx[p] += gk
                    dw[block] += np.outer(x[p], dout[t])
                elif pad is not None:
                    r = up + p - a if p < a else up + p - b
                    dpad[r] += gk
                    dw[block] += np.outer(pad[r], dout[t])
    return dx, dw, dpad, dout.sum(axis=0)


def topk_grad(x, in_off, row_off, col_off, topks, channels, dout):
    """Loop reference of ``sequence_topk_avg_pooling``'s gradient: the ``k`` largest of each
    block row (ties: the lower column first) get ``dout_k / k``; a row with NaN nothing."""
    x = np.asarray(x, dtype=np.float64).reshape(-1)
    dout = np.asarray(dout, dtype=np.float64)
    dx = np.zeros_like(x)
    n_k = len(topks)
    for s in range(len(in_off) - 1):
        rows = int(row_off[s + 1] - row_off[s])
        cols = int(col_off[s + 1] - col_off[s])
        for ch in range(channels):
            for r in range(rows):
                start = int(in_off[s]) + (ch * rows + r) * cols
                vals = x[start:start + cols]
                if np.isnan(vals).any():
                    continue
                order = sorted(range(cols), key=lambda i: (-vals[i], i))
                for q, col in enumerate(order):
                    for kq, k in enumerate(topks):
                        if q < k:
                            dx[start + col] += (dout[int(row_off[s]) + r, ch * n_k + kq]
                                                / k)
    return dx
