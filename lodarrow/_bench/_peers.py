"""The peers: what a user would reach for instead of lodarrow, one small function per peer per op.

Each peer is a *factory* ``f(w, variant) -> (run, norm)`` registered with :func:`peer`:
``f`` does the untimed preparation (building the library's own input form, which a user of
that library would already hold), ``run()`` is the timed call, and ``norm(result)`` turns the
result into NumPy arrays comparable with lodarrow's (untimed).  Everything needed for the
*right* answer is inside ``run``: dropping empty sequences before ``reduceat``, filling the
nulls polars and Awkward give empty sequences, computing parent indices before a gather.
A factory raises :class:`NotApplicable` where its library has no sensible way to do the job.

The numba kernels are what a numba user would write: ``prange`` over sequences (so they use
every core, like lodarrow) with the obvious inner loops.
"""

import functools

import numpy as np

__all__ = ["PEER_LIBRARIES", "NotApplicable", "peer", "peers_for", "available", "numpy_view"]

#: Peer libraries in display order, with the module to import.
PEER_LIBRARIES = {"numpy": "numpy", "polars": "polars", "awkward": "awkward",
                  "pyarrow": "pyarrow.compute", "numba": "numba"}

_REGISTRY = {}


class NotApplicable(Exception):
    """This peer has no sensible implementation for this op/workload."""


def peer(op, library, label):
    """Register the decorated factory as ``library``'s way of doing ``op``."""
    def register(factory):
        _REGISTRY.setdefault(op, []).append((library, label, factory))
        return factory
    return register


def peers_for(op):
    """``[(library, label, factory), ...]`` registered for ``op``, in library order."""
    order = list(PEER_LIBRARIES)
    return sorted(_REGISTRY.get(op, []), key=lambda p: order.index(p[0]))


@functools.cache
def available(library):
    """``None`` if ``library`` imports, else a one-line reason."""
    import importlib

    try:
        importlib.import_module(PEER_LIBRARIES[library])
    except Exception as exc:  # ImportError, or a broken install
        return f"{library} is not installed ({exc.__class__.__name__})"
    return None


def numpy_view(obj):
    """NumPy data of a LoDTensor / array / Arrow array / polars / Awkward result."""
    if hasattr(obj, "_offsets") and hasattr(obj, "numpy"):  # LoDTensor
        return obj.numpy()
    if type(obj).__module__.startswith("polars"):
        return obj.to_numpy()
    if type(obj).__module__.startswith("awkward"):
        import awkward as ak

        return ak.to_numpy(obj)
    return np.asarray(obj)


def _feature(w):
    return (w.d,) if w.d > 1 else ()


def _flat_values(arr):
    """Flattened float values of a (nested) pyarrow list array, as NumPy."""
    import pyarrow as pa

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    while pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type) or \
            pa.types.is_fixed_size_list(arr.type):
        arr = arr.flatten()
    return arr.to_numpy(zero_copy_only=False)


def _arrow_parts(arr):
    """``(offsets of the outermost level, flat values)`` of a pyarrow list array."""
    import pyarrow as pa

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if isinstance(arr, pa.ExtensionArray):
        arr = arr.storage
    offsets = np.asarray(arr.offsets.to_numpy(), dtype=np.int64)
    return offsets - offsets[0], _flat_values(arr)


def _awkward_flat(a):
    import awkward as ak

    return ak.to_numpy(ak.fill_none(ak.flatten(a, axis=None), np.nan)).reshape(-1)


def _awkward_offsets(a):
    import awkward as ak

    counts = ak.to_numpy(ak.num(a, axis=1)).astype(np.int64)
    return np.concatenate(([0], np.cumsum(counts)))


def _in_rows(w, flat_norm):
    """A norm giving ``flat_norm``'s values as rows of ``w``'s feature shape (``(n,)`` for
    D=1, ``(n, d)`` else): the shape lodarrow returns, which the comparison checks."""
    shape = (-1,) + _feature(w)
    return lambda result: flat_norm(result).reshape(shape)


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


_POOL_KIND = {"sum": 0, "average": 1, "max": 2}


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


@peer("sequence_pool", "polars", "list.sum/mean/max")
def polars_pool(w, variant):
    import polars as pl

    if w.d > 1:  # list.sum does not reduce array[f32, d]: one list column per feature
        frame = w.polars_columns
        expr = {"sum": pl.all().list.sum(), "average": pl.all().list.mean().fill_null(0),
                "max": pl.all().list.max().fill_null(0)}[variant]
        return (lambda: frame.select(expr)), lambda r: r.to_numpy()
    s = w.polars
    if len(w.offsets) == 2:
        inner = {"sum": pl.element().list.sum(),
                 "average": pl.element().list.mean().fill_null(0),
                 "max": pl.element().list.max().fill_null(0)}[variant]
        return (lambda: s.list.eval(inner)), lambda r: _flat_values(r.to_arrow())
    if variant == "sum":
        return (lambda: s.list.sum()), numpy_view
    if variant == "average":
        return (lambda: s.list.mean().fill_null(0)), numpy_view
    return (lambda: s.list.max().fill_null(0)), numpy_view


@peer("sequence_pool", "awkward", "ak.sum/mean/max")
def awkward_pool(w, variant):
    import awkward as ak

    a = w.awkward
    axis = 1 if w.d > 1 else -1  # var axis; for var * 16 * float32 that is axis 1
    if variant == "sum":
        return (lambda: ak.sum(a, axis=axis)), _in_rows(w, _awkward_flat)
    fn = ak.mean if variant == "average" else ak.max  # empty -> None, filled with 0
    return (lambda: ak.fill_none(fn(a, axis=axis, mask_identity=True), 0)), \
        _in_rows(w, _awkward_flat)


@peer("sequence_pool", "pyarrow", "Table.group_by")
def pyarrow_pool(w, variant):
    import pyarrow as pa
    import pyarrow.compute as pc

    if w.d > 1 or len(w.offsets) > 1:
        raise NotApplicable("group_by needs one flat value column")
    arr = w.arrow
    how = {"sum": "sum", "average": "mean", "max": "max"}[variant]

    def run():
        table = pa.table({"seq": pc.list_parent_indices(arr), "x": pc.list_flatten(arr)})
        grouped = table.group_by("seq").aggregate([("x", how)])
        out = np.zeros(len(arr), dtype=np.float64)  # empty sequences have no group
        out[grouped["seq"].to_numpy()] = grouped[f"x_{how}"].to_numpy()
        return out
    return run, numpy_view


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


@peer("sequence_softmax", "polars", "list.eval(exp / sum)")
def polars_softmax(w, variant):
    import polars as pl

    if w.d > 1 or len(w.offsets) > 1:
        raise NotApplicable("D=1, one level only")
    s = w.polars
    e = (pl.element() - pl.element().max()).exp()
    return (lambda: s.list.eval(e / e.sum())), lambda r: r.explode().drop_nulls().to_numpy()


@peer("sequence_softmax", "awkward", "np.exp(a - ak.max) / ak.sum")
def awkward_softmax(w, variant):
    import awkward as ak

    a = w.awkward

    def run():
        e = np.exp(a - ak.max(a, axis=-1, keepdims=True))
        return e / ak.sum(e, axis=-1, keepdims=True)
    return run, _awkward_flat


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


def _polars_step(w, last):
    import polars as pl

    if w.d > 1:
        frame = w.polars_columns
        expr = (pl.all().list.last() if last else pl.all().list.first()).fill_null(0)
        return (lambda: frame.select(expr)), lambda r: r.to_numpy()
    s = w.polars
    return (lambda: (s.list.last() if last else s.list.first()).fill_null(0)), numpy_view


def _awkward_step(w, last):
    import awkward as ak

    a = w.awkward
    fill = np.zeros(w.d, np.float32) if w.d > 1 else 0  # a whole zero row for D > 1
    if last:
        return (lambda: ak.fill_none(ak.firsts(a[:, -1:], axis=1), fill, axis=0)), \
            _in_rows(w, _awkward_flat)
    return (lambda: ak.fill_none(ak.firsts(a, axis=1), fill, axis=0)), \
        _in_rows(w, _awkward_flat)


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
    peer(_op, "numpy", "fancy indexing")(functools.partial(
        lambda w, variant, last: _numpy_step(w, last), last=_last))
    peer(_op, "polars", "list.last" if _last else "list.first")(functools.partial(
        lambda w, variant, last: _polars_step(w, last), last=_last))
    peer(_op, "awkward", "ak.firsts")(functools.partial(
        lambda w, variant, last: _awkward_step(w, last), last=_last))
    peer(_op, "numba", "prange loop")(functools.partial(
        lambda w, variant, last: _numba_step(w, last), last=_last))


# ====================================================================== sequence_expand
@peer("sequence_expand", "numpy", "np.repeat")
def numpy_expand(w, variant):
    x, off = w.per_sequence, w.offsets[-1]
    return (lambda: np.repeat(x, np.diff(off), axis=0)), numpy_view


@peer("sequence_expand", "polars", "gather(list_parent_indices)")
def polars_expand(w, variant):
    import polars as pl
    import pyarrow.compute as pc

    s, arr = pl.Series(w.per_sequence), w.arrow
    return (lambda: s.gather(pc.list_parent_indices(arr).to_numpy())), numpy_view


@peer("sequence_expand", "pyarrow", "take(list_parent_indices)")
def pyarrow_expand(w, variant):
    import pyarrow as pa
    import pyarrow.compute as pc

    x = w.per_sequence
    xa = pa.array(x) if x.ndim == 1 else pa.FixedSizeListArray.from_arrays(
        pa.array(x.reshape(-1)), x.shape[1])
    arr = w.arrow
    return (lambda: pc.take(xa, pc.list_parent_indices(arr))), _in_rows(w, _flat_values)


@peer("sequence_expand", "awkward", "ak.broadcast_arrays")
def awkward_expand(w, variant):
    import awkward as ak

    a = w.awkward
    x = w.per_sequence
    x = x[:, np.newaxis, :] if x.ndim == 2 else x

    def run():
        return ak.flatten(ak.broadcast_arrays(x, a)[0], axis=1)
    return run, _in_rows(w, _awkward_flat)


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
def _pad_norm(result):
    out, lengths = result
    return numpy_view(out), np.asarray(lengths)


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


@peer("sequence_pad", "polars", "list.gather(range, null_on_oob)")
def polars_pad(w, variant):
    if w.d > 1:
        raise NotApplicable("fill_null of array rows")
    s = w.polars

    def run():
        lengths = s.list.len()
        p = int(lengths.max() or 0)
        flat = s.list.gather(list(range(p)), null_on_oob=True).explode().fill_null(0)
        return flat.to_numpy().reshape(len(s), p), lengths
    return run, _pad_norm


@peer("sequence_pad", "awkward", "ak.pad_none + fill_none")
def awkward_pad(w, variant):
    import awkward as ak

    a = w.awkward
    fill = np.zeros(w.d, np.float32) if w.d > 1 else 0  # a whole zero row for D > 1

    def run():
        lengths = ak.num(a, axis=1)
        p = int(ak.max(lengths) or 0)
        padded = ak.fill_none(ak.pad_none(a, p, axis=1, clip=True), fill, axis=1)
        return ak.to_numpy(padded), lengths
    return run, _pad_norm


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
def _unpad_norm(result):
    """``(values, offsets)`` with values as ``(rows, d)``: Paddle's unpad gives D=1 rows as
    ``[rows, 1]`` (lodarrow does too)."""
    values, offsets = result
    values = numpy_view(values)
    return values.reshape(values.shape[0], -1), np.asarray(offsets)


@peer("sequence_unpad", "numpy", "boolean mask")
def numpy_unpad(w, variant):
    xpad, _ = w.padded
    lengths = w.lengths

    def run():
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return xpad[np.arange(xpad.shape[1]) < lengths[:, None]], offsets
    return run, _unpad_norm


@peer("sequence_unpad", "polars", "arr.to_list().list.head(n)")
def polars_unpad(w, variant):
    import polars as pl

    if w.d > 1:
        raise NotApplicable("2-D rows")
    xpad, _ = w.padded
    frame = pl.DataFrame({"x": xpad, "n": w.lengths})

    def run():
        return frame.select(pl.col("x").arr.to_list().list.head(pl.col("n")))["x"]

    def norm(s):
        offsets, values = _arrow_parts(s.to_arrow())
        return values.reshape(-1, 1), offsets
    return run, norm


@peer("sequence_unpad", "awkward", "local_index < lengths")
def awkward_unpad(w, variant):
    import awkward as ak

    xpad, _ = w.padded
    a = ak.from_regular(ak.from_numpy(xpad), axis=1)
    lengths = w.lengths[:, np.newaxis]

    def run():
        return a[ak.local_index(a, axis=1) < lengths]

    return run, lambda r: (_awkward_flat(r).reshape(-1, w.d), _awkward_offsets(r))


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
CONV_CONTEXT = (-1, 3)  # context_start, context_length
CONV_FILTERS = 16


@functools.cache
def conv_filter(d):
    """The ``(context_length * d, CONV_FILTERS)`` float32 filter (fixed seed)."""
    rng = np.random.default_rng([12345, d])
    return rng.standard_normal((CONV_CONTEXT[1] * d, CONV_FILTERS), dtype=np.float32)


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
ERASE_TOKENS = (1, 2, 3)
ENUMERATE_WIN = 3
SCATTER_WIDTH = 64


def _values_offsets(values, offsets):
    return numpy_view(values), np.asarray(offsets, dtype=np.int64)


def _polars_values_offsets(s):
    offsets, values = _arrow_parts(s.to_arrow())
    return values, offsets


def _awkward_values_offsets(a):
    return _awkward_flat(a), _awkward_offsets(a)


def _only_d1(w):
    if w.d > 1 or len(w.offsets) > 1:
        raise NotApplicable("D=1, one level")


@peer("sequence_reverse", "numpy", "index arithmetic + take")
def numpy_reverse(w, variant):
    _only_d1(w)
    x, off = w.data, w.offsets[-1]

    def run():
        seq = np.repeat(np.arange(len(off) - 1), np.diff(off))
        src = (off[:-1] + off[1:] - 1)[seq] - np.arange(len(x))
        return x[src], off
    return run, lambda r: _values_offsets(*r)


@peer("sequence_reverse", "polars", "list.reverse")
def polars_reverse(w, variant):
    _only_d1(w)
    s = w.polars
    return (lambda: s.list.reverse()), _polars_values_offsets


@peer("sequence_reverse", "awkward", "a[:, ::-1]")
def awkward_reverse(w, variant):
    _only_d1(w)
    a = w.awkward
    return (lambda: a[:, ::-1]), _awkward_values_offsets


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


@peer("sequence_concat", "polars", "list.concat")
def polars_concat(w, variant):
    _only_d1(w)
    s = w.polars
    return (lambda: s.list.concat(s)), _polars_values_offsets


@peer("sequence_concat", "awkward", "ak.concatenate(axis=1)")
def awkward_concat(w, variant):
    import awkward as ak

    _only_d1(w)
    a = w.awkward
    return (lambda: ak.concatenate([a, a], axis=1)), _awkward_values_offsets


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


@peer("sequence_slice", "polars", "list.slice(expr, expr)")
def polars_slice(w, variant):
    import polars as pl

    _only_d1(w)
    offset, length = w.slice_args
    frame = pl.DataFrame({"x": w.polars, "o": offset[:, 0], "n": length[:, 0]})
    return (lambda: frame.select(pl.col("x").list.slice(pl.col("o"), pl.col("n")))["x"]), \
        _polars_values_offsets


@peer("sequence_slice", "awkward", "local_index mask")
def awkward_slice(w, variant):
    import awkward as ak

    _only_d1(w)
    a = w.awkward
    offset, length = w.slice_args

    def run():
        li = ak.local_index(a, axis=1)
        return a[(li >= offset) & (li < offset + length)]
    return run, _awkward_values_offsets


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


@peer("sequence_erase", "polars", "list.eval(filter(~is_in))")
def polars_erase(w, variant):
    import polars as pl

    _only_d1(w)
    s = pl.from_arrow(w.ids_arrow)
    expr = pl.element().filter(~pl.element().is_in(list(ERASE_TOKENS)))
    return (lambda: s.list.eval(expr)), _polars_values_offsets


@peer("sequence_erase", "awkward", "a[(a != t1) & ...]")
def awkward_erase(w, variant):
    import awkward as ak

    _only_d1(w)
    a = ak.Array(ak.contents.ListOffsetArray(ak.index.Index64(w.offsets[-1]),
                                             ak.contents.NumpyArray(w.int_ids)))

    def run():
        keep = a != ERASE_TOKENS[0]
        for tok in ERASE_TOKENS[1:]:
            keep = keep & (a != tok)
        return a[keep]
    return run, _awkward_values_offsets


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


# ====================================================================== Arrow conversions
@peer("to_arrow", "pyarrow", "LargeListArray.from_arrays")
def pyarrow_to_arrow(w, variant):
    import pyarrow as pa

    x, off = w.data, w.offsets[-1]
    if x.ndim > 1 or len(w.offsets) > 1:
        raise NotApplicable("D=1, one level")
    return (lambda: pa.LargeListArray.from_arrays(pa.array(off), pa.array(x))), _arrow_parts


@peer("to_arrow", "awkward", "ak.to_arrow")
def awkward_to_arrow(w, variant):
    import awkward as ak

    a = w.awkward
    return (lambda: ak.to_arrow(a, extensionarray=False)), _arrow_parts


@peer("to_arrow", "polars", "Series.to_arrow")
def polars_to_arrow(w, variant):
    s = w.polars
    return (lambda: s.to_arrow()), _arrow_parts


@peer("from_arrow", "pyarrow", "offsets/values .to_numpy()")
def pyarrow_from_arrow(w, variant):
    arr = w.arrow
    if len(w.offsets) > 1 or w.d > 1:
        raise NotApplicable("D=1, one level")
    return (lambda: (arr.offsets.to_numpy(), arr.values.to_numpy())), \
        lambda r: (np.asarray(r[0], dtype=np.int64), r[1])


@peer("from_arrow", "awkward", "ak.from_arrow")
def awkward_from_arrow(w, variant):
    import awkward as ak

    arr = w.arrow

    return (lambda: ak.from_arrow(arr)), lambda r: (_awkward_offsets(r), _awkward_flat(r))


@peer("from_arrow", "polars", "pl.from_arrow")
def polars_from_arrow(w, variant):
    import polars as pl

    arr = w.arrow
    return (lambda: pl.from_arrow(arr)), lambda s: _arrow_parts(s.to_arrow())


# ====================================================================== Parquet
@peer("write_parquet", "pyarrow", "pq.write_table")
def pyarrow_write_parquet(w, variant):
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"data": w.arrow})
    path = variant  # the runner passes the file path as the variant

    def run():
        pq.write_table(table, path)
        return path
    return run, lambda p: _arrow_parts(pq.read_table(p).column(0))


@peer("read_parquet", "pyarrow", "pq.read_table")
def pyarrow_read_parquet(w, variant):
    import pyarrow.parquet as pq

    path = variant
    return (lambda: pq.read_table(path)), lambda t: _arrow_parts(t.column(0))


@peer("write_parquet", "polars", "write_parquet(compression='snappy', statistics=False)")
def polars_write_parquet(w, variant):
    """lodarrow's settings (snappy, no statistics; polars never dictionary-encodes floats);
    polars' own default is zstd, which costs more than it saves on random float32 values."""
    import polars as pl
    import pyarrow.parquet as pq

    frame = pl.DataFrame({"data": w.polars})
    path = variant

    def run():
        frame.write_parquet(path, compression="snappy", statistics=False)
        return path
    return run, lambda p: _arrow_parts(pq.read_table(p).column(0))


@peer("read_parquet", "polars", "pl.read_parquet")
def polars_read_parquet(w, variant):
    import polars as pl

    path = variant
    return (lambda: pl.read_parquet(path)), lambda df: _arrow_parts(df["data"].to_arrow())


# ====================================================================== LoDTensor from offsets
# lodarrow checks the offsets (start 0, non-decreasing, last = number of rows) when it builds
# a tensor from offsets and values; each peer builds its own form from the same two arrays
# and, where the library can, checks them the same way inside the timed call.
def _offsets_values(r):
    off, x = r
    return np.asarray(off, dtype=np.int64), numpy_view(x).reshape(-1)


@peer("from_offsets", "numpy", "checks only: off[0] == 0, diff >= 0, off[-1] == len")
def numpy_from_offsets(w, variant):
    _only_d1(w)
    x, off = w.data, w.offsets[-1]

    def run():
        if off[0] != 0 or off[-1] != len(x) or not (np.diff(off) >= 0).all():
            raise ValueError("bad offsets")
        return off, x
    return run, _offsets_values


@peer("from_offsets", "polars", "pl.from_arrow(LargeListArray.from_arrays)")
def polars_from_offsets(w, variant):
    import polars as pl
    import pyarrow as pa

    _only_d1(w)
    x, off = w.data, w.offsets[-1]
    return (lambda: pl.from_arrow(pa.LargeListArray.from_arrays(pa.array(off), pa.array(x)))), \
        lambda s: _arrow_parts(s.to_arrow())


@peer("from_offsets", "awkward", "ListOffsetArray + ak.validity_error")
def awkward_from_offsets(w, variant):
    import awkward as ak

    _only_d1(w)
    x, off = w.data, w.offsets[-1]

    def run():
        a = ak.Array(ak.contents.ListOffsetArray(ak.index.Index64(off),
                                                 ak.contents.NumpyArray(x)))
        problem = ak.validity_error(a)  # ak.Array itself checks nothing
        if problem:
            raise ValueError(problem)
        return a
    return run, lambda a: (_awkward_offsets(a), _awkward_flat(a))


@peer("from_offsets", "pyarrow", "LargeListArray.from_arrays + validate(full=True)")
def pyarrow_from_offsets(w, variant):
    import pyarrow as pa

    _only_d1(w)
    x, off = w.data, w.offsets[-1]

    def run():
        arr = pa.LargeListArray.from_arrays(pa.array(off), pa.array(x))
        arr.validate(full=True)  # from_arrays alone does not check the offsets' order
        return arr
    return run, _arrow_parts
