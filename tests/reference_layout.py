"""Slow, obviously correct oracles for the layout operators, written from docs/operators.md alone.

Plain Python loops over rows and LoD offsets (lists of ints); nothing here shares code with
the kernels.  Each returns NumPy arrays and LoDs as lists of lists of int.
"""

import numpy as np


def _last(lod):
    return [int(v) for v in lod[-1]]


def ref_reverse(data, lod):
    """Rows of each last-level sequence in reverse order; same LoD."""
    last = _last(lod)
    out = np.empty_like(data)
    for s in range(len(last) - 1):
        a, b = last[s], last[s + 1]
        for j in range(a, b):
            out[j] = data[a + b - 1 - j]
    return out, [list(map(int, lv)) for lv in lod]


def ref_pad(data, lod, pad_row, maxlen=None):
    """``(out, lengths, outer_lod)``: every last-level sequence padded to ``maxlen`` rows."""
    last = _last(lod)
    n = len(last) - 1
    lengths = [last[i + 1] - last[i] for i in range(n)]
    padded = max(lengths, default=0) if maxlen is None else maxlen
    out = np.empty((n, padded) + data.shape[1:], dtype=data.dtype)
    for i in range(n):
        for p in range(padded):
            out[i, p] = data[last[i] + p] if p < lengths[i] else pad_row
    return out, np.array(lengths, dtype=np.int64), [list(map(int, lv)) for lv in lod[:-1]]


def ref_unpad(x, lengths):
    """``(out, last_level_offsets)``: rows ``x[i, :lengths[i]]`` concatenated."""
    rows = []
    offsets = [0]
    for i, n in enumerate(lengths):
        for p in range(int(n)):
            rows.append(x[i, p])
        offsets.append(offsets[-1] + int(n))
    feature = x.shape[2:] if x.ndim > 2 else (1,)
    out = np.empty((len(rows),) + feature, dtype=x.dtype)
    for r, row in enumerate(rows):
        out[r] = np.reshape(row, feature)
    return out, offsets


def ref_reshape(data, lod, new_dim):
    """``(out, lod)`` with every sequence's values re-cut into rows of ``new_dim``."""
    last = _last(lod)
    width = data.shape[1] if data.ndim == 2 else 1
    flat_rows = data.reshape(data.shape[0], width)
    values, offsets = [], [0]
    for s in range(len(last) - 1):
        seq = []
        for r in range(last[s], last[s + 1]):
            seq.extend(flat_rows[r].tolist())
        assert len(seq) % new_dim == 0
        values.extend(seq)
        offsets.append(offsets[-1] + len(seq) // new_dim)
    out = np.array(values, dtype=data.dtype).reshape(len(values) // new_dim, new_dim)
    return out, [list(map(int, lv)) for lv in lod[:-1]] + [offsets]


def ref_mask(x, maxlen, dtype):
    """``out[..., j] = j < x[...]``; ``maxlen`` None means ``int(max(x))`` floored at 0."""
    x = np.asarray(x)
    flat = x.reshape(-1).tolist()
    if maxlen is None:
        maxlen = max(int(max(flat)), 0) if flat else 0
    out = np.zeros((len(flat), maxlen), dtype=dtype)
    for i, v in enumerate(flat):
        for j in range(maxlen):
            if j < v:
                out[i, j] = 1
    return out.reshape(x.shape + (maxlen,))


def ref_enumerate(data, lod, win_size, pad):
    """``out[t, k] = data[t + k]`` inside the row's last-level sequence, else ``pad``."""
    last = _last(lod)
    flat = data.reshape(-1)
    out = np.empty((flat.shape[0], win_size), dtype=data.dtype)
    for s in range(len(last) - 1):
        for t in range(last[s], last[s + 1]):
            for k in range(win_size):
                out[t, k] = flat[t + k] if t + k < last[s + 1] else pad
    return out, [list(map(int, lv)) for lv in lod]


def ref_erase(data, lod, tokens):
    """``(out, lod)`` without the rows equal by value to a token (Python number compare)."""
    last = _last(lod)
    kept, offsets = [], [0]
    for s in range(len(last) - 1):
        count = 0
        for r in range(last[s], last[s + 1]):
            value = data[r].reshape(-1)[0].item()
            if not any(value == t for t in tokens):
                kept.append(data[r])
                count += 1
        offsets.append(offsets[-1] + count)
    out = np.empty((len(kept),) + data.shape[1:], dtype=data.dtype)
    for r, row in enumerate(kept):
        out[r] = row
    return out, [list(map(int, lv)) for lv in lod[:-1]] + [offsets]
