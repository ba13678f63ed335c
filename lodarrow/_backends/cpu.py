"""The CPU backend: NumPy arrays, the Cython kernels of ``lodarrow._ext``, OpenMP threads.

``KERNELS`` maps each kernel name to its CPU entry point.  Every entry takes the same
arguments as the CUDA one of the same name (:mod:`lodarrow._backends.cuda`) and adds only the
host's plumbing: thread counts, chunk bounds balanced by rows, byte views of the rows.  This
module and ``cuda.py`` are the only ones that name ``lodarrow._ext`` functions.
"""

import functools
import itertools
import os
from math import prod

import numpy as np

from lodarrow._ext import (seq_conv, seq_gather, seq_layout, seq_pool, seq_scatter, seq_softmax,
                           seq_topk)
from lodarrow._plan import conv_source_rows, expand_lod, slice_plan
from lodarrow._threads import (PARALLEL_MIN_WORK, chunk_bounds, num_threads, plan_threads,
                               threads_for)
from lodarrow._threads import row_bounds as _bounds

__all__ = ["CPU", "CPUBackend", "KERNELS", "num_threads", "threads_for", "chunk_bounds",
           "plan_threads", "flat_bytes", "PARALLEL_MIN_WORK", "empty", "POOL_MIN_BYTES"]

# --------------------------------------------------------------------------- allocation
#: Outputs of at least this many bytes (and ``POOL_MIN_BYTES // 8`` elements, a check
#: cheaper than the dtype's size) come from Arrow's memory pool.  The pool keeps freed
#: pages mapped, so a large output does not fault in (and the kernel zero) every page again,
#: as a fresh ``numpy.empty`` (an ``mmap`` above glibc's threshold) does: filling a fresh
#: 61 MB array takes ~2.5x as long as filling a reused one.  Below it ``numpy.empty`` is
#: cheaper (a pool call costs ~1 us) and glibc reuses freed memory anyway.
POOL_MIN_BYTES = 1 << 20

#: ``LODARROW_ARROW_POOL=0`` (read at import): every output from ``numpy.empty``.
USE_ARROW_POOL = os.environ.get("LODARROW_ARROW_POOL", "1").strip().lower() not in (
    "0", "false", "no", "off")

_np_empty = np.empty
_allocate_buffer = None  # pyarrow.allocate_buffer, imported on the first large output
_MAX_POOL_BYTES = 1 << 62  # beyond: numpy.empty, which raises its own error


_POOL_MIN_ITEMS = POOL_MIN_BYTES >> 3  # fewer: under 1 MiB in any dtype of <= 8 bytes


def empty(shape, dtype):
    """An uninitialised C-contiguous host array, from Arrow's pool at ``POOL_MIN_BYTES``.

    ``shape`` is a tuple of ints (an int shape is never pooled), ``dtype`` a ``numpy.dtype``
    (or anything ``numpy.dtype`` takes).  A pool array is writable, 64-byte aligned, and
    keeps its ``pyarrow.Buffer`` alive through ``.base``; it is an ordinary ndarray otherwise
    (``to_arrow`` wraps it zero-copy, pickling copies it).  Errors (negative or absurd sizes,
    out of memory) are ``numpy.empty``'s.  See docs/ARCHITECTURE.md#rules.
    """
    try:
        small = prod(shape) < _POOL_MIN_ITEMS  # on every operator call: kept to one C call
    except TypeError:  # an int shape, which numpy.empty takes too
        small = True
    if small:
        return _np_empty(shape, dtype)
    return _pool_empty(shape, dtype)


def _pool_empty(shape, dtype):
    global _allocate_buffer
    dtype = np.dtype(dtype)
    nbytes = prod(shape) * dtype.itemsize
    if nbytes < POOL_MIN_BYTES or dtype.hasobject or nbytes > _MAX_POOL_BYTES:
        return _np_empty(shape, dtype)
    if _allocate_buffer is None:
        from pyarrow import allocate_buffer as _allocate_buffer
    try:
        buf = _allocate_buffer(nbytes)
    except MemoryError:  # pyarrow.ArrowMemoryError: let numpy say it, as without the pool
        return _np_empty(shape, dtype)
    return np.frombuffer(buf, dtype).reshape(shape)


class _NoDevice:
    """The CPU's device context: does nothing, at the cost of two C calls.

    ``with`` calls ``__enter__()`` and ``__exit__(type, value, tb)`` unbound (a builtin is no
    descriptor); ``"".format`` takes any arguments and returns ``""``, which is falsy, so
    exceptions propagate.  ``contextlib.nullcontext`` costs two Python frames per operator
    call.
    """

    __slots__ = ()
    __enter__ = "".format
    __exit__ = "".format


class CPUBackend:
    """Host memory: ``numpy`` arrays and the Cython kernels.

    ``empty(shape, dtype)`` is :func:`empty` (``numpy.empty`` with ``LODARROW_ARROW_POOL=0``);
    ``kernel(name)`` looks ``name`` up in ``KERNELS`` (a ``KeyError`` names a kernel that
    does not exist), the bare C function: these run on every operator call.
    """

    name = "cpu"
    xp = np
    empty = staticmethod(empty if USE_ARROW_POOL else np.empty)
    _HOST = _NoDevice()
    #: ``device(data)``: a no-op context, host memory needs no current device.  It is
    #: ``next(repeat(_HOST), data)``, which returns ``_HOST`` in C: no Python frame and no
    #: bound method per operator call.
    device = staticmethod(functools.partial(next, itertools.repeat(_HOST)))

    def __init__(self, kernels):
        self.kernel = kernels.__getitem__

    #: ``asarray(a)``: ``a`` as a host array (no copy if it is one), ``numpy.asarray`` itself.
    asarray = staticmethod(np.asarray)

    def offsets(self, t, level):
        """Level ``level`` of LoDTensor ``t``: the host offsets themselves."""
        return t.offsets[level]

    def __repr__(self):
        return "<lodarrow backend cpu>"


#: Cython type names of the fused specialisations, by NumPy dtype.
_C_TYPES = {np.dtype(np.int8): "int8_t", np.dtype(np.uint8): "uint8_t",
            np.dtype(np.int16): "int16_t", np.dtype(np.uint16): "uint16_t",
            np.dtype(np.int32): "int32_t", np.dtype(np.int64): "int64_t",
            np.dtype(np.float32): "float", np.dtype(np.float64): "double"}


def _by_dtype(fused):
    """dtype -> the specialisation of a Cython function fused on one element type.

    Calling the specialisation skips Cython's dispatcher, which inspects the buffers of
    every call (about 1 us, a fifth of a small operator call).  A dtype not listed goes to
    ``fused`` itself (``.get(dtype, fused)``), so behaviour and errors stay Cython's.
    """
    sigs = fused.__signatures__
    return {dt: sigs[name] for dt, name in _C_TYPES.items() if name in sigs}


def flat_bytes(a):
    """``a`` as a flat uint8 view (a C-contiguous copy first if it is strided)."""
    a = np.ascontiguousarray(a)  # at least 1-D
    return (a if a.ndim == 1 else a.reshape(-1)).view(np.uint8)


# --------------------------------------------------------------------------- seq_gather
def expand_rows(out, src, rep_off):
    """Row ``i`` of ``src`` into output rows ``[rep_off[i], rep_off[i + 1])`` (uint8 rows)."""
    if out.size == 0:
        return
    threads = threads_for(out.size)
    seq_gather.expand_rows(out, src, rep_off, _bounds(rep_off, threads), threads)


def expand_blocks(out, src, src_off, rep_off, out_lod):
    """Block ``i`` of ``src`` repeated ``rep_off[i + 1] - rep_off[i]`` times (uint8 rows)."""
    if out.size == 0:
        return
    threads = threads_for(out.size)
    # Balance chunks by output rows: block i writes out_lod[rep_off[i]] .. out_lod[rep_off[i+1]].
    bounds = _bounds(out_lod[rep_off], threads) if threads > 1 else None
    seq_gather.expand_blocks(out, src, src_off, rep_off, out_lod, bounds, threads)


def gather_blocks(out, src, src_start, out_off):
    """Output rows ``[out_off[i], out_off[i + 1])`` from ``src`` rows at ``src_start[i]``."""
    if out.size == 0:
        return
    threads = threads_for(out.size)
    seq_gather.gather_blocks(out, src, src_start, out_off, _bounds(out_off, threads), threads)


def concat(out, srcs, src_offsets, out_off):
    """Output sequence ``i`` = sequence ``i`` of every ``srcs[k]``, in order (uint8 rows)."""
    if out.size == 0:
        return
    threads = threads_for(out.size)
    seq_gather.concat_blocks(out, srcs, src_offsets, out_off, _bounds(out_off, threads),
                             threads)


# --------------------------------------------------------------------------- seq_scatter
def scatter(out, src, ids, updates, offsets):
    """``out`` = ``src`` with ``out[i, ids[p]] += updates[p]`` for index sequence ``i``.

    Returns the first position of an id outside ``[0, width)`` (checked in the kernel's
    pass; ``out`` is then unfinished), or -1.
    """
    return seq_scatter.sequence_scatter(out, src, ids, updates, offsets,
                                        threads_for(ids.shape[0] + out.size))


# --------------------------------------------------------------------------- seq_layout
def pad(out, data, pad_row, offsets, padded_length):
    """Sequence ``s`` of ``data`` -> ``out[s, :len]``, the rest rows of ``pad_row``."""
    if out.size == 0:
        return
    # Every sequence writes padded_length rows: balance the chunks by sequence count.
    n_threads, bounds = plan_threads(offsets, out.size, by_rows=False)
    seq_layout.pad(flat_bytes(out), flat_bytes(data), flat_bytes(pad_row), offsets, bounds,
                   padded_length, pad_row.nbytes, n_threads)


def unpad(out, data, offsets):
    """The first ``len[s]`` rows of ``data[s]`` -> rows ``[offsets[s], offsets[s + 1])``."""
    if out.size == 0:
        return
    n_threads, bounds = plan_threads(offsets, out.size)
    width = data.itemsize
    for s in data.shape[2:]:
        width *= s
    seq_layout.unpad(flat_bytes(out), flat_bytes(data), offsets, bounds, data.shape[1],
                     width, n_threads)


def reverse(out, data, offsets):
    """``out`` = ``data`` with every sequence's rows reversed."""
    if out.size == 0:
        return
    n_threads, bounds = plan_threads(offsets, out.size)
    width = out.nbytes // out.shape[0]
    seq_layout.reverse(flat_bytes(out), flat_bytes(data), offsets, bounds, width, n_threads)


# Same-size integer containers: the kernel moves values bit for bit, so these four
# specialisations serve every dtype (bool, float16 and floats included).
_CONTAINERS = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.int32),
               8: np.dtype(np.int64)}


def enumerate_windows(out, data, pad_value, offsets):
    """Row ``t`` of ``out`` = ``data[t:t + win]`` cut at its sequence's end, then padding."""
    if out.size == 0:
        return
    box = _CONTAINERS[data.itemsize]
    n_threads, bounds = plan_threads(offsets, out.size)
    seq_layout.enumerate_windows(out.reshape(-1).view(box),
                                 np.ascontiguousarray(data).reshape(-1).view(box),
                                 pad_value.reshape(1).view(box), offsets, bounds, out.shape[1],
                                 n_threads)


#: Integer tokens spanning at most this many values are looked up in a byte table.
_TABLE_SPAN = 1 << 16
_NO_TABLE = np.zeros(0, dtype=np.uint8)


def _token_table(toks):
    """``(table, low)``: ``table[v - low] == 1`` for the integer tokens, or an empty table.

    The table ends with a zero sentinel, where the kernel sends every out-of-range value.
    """
    if toks.dtype.kind not in "iu":
        return _NO_TABLE, 0
    low, high = int(toks[0]), int(toks[-1])
    if high - low >= _TABLE_SPAN:
        return _NO_TABLE, 0
    table = np.zeros(high - low + 2, dtype=np.uint8)
    table[toks.astype(np.int64) - low] = 1
    return table, low


def erase(values, cmp, toks, offsets):
    """``(kept values, new host offsets)``: ``values`` without the rows whose ``cmp`` value
    is one of the sorted ``toks`` (``cmp`` is ``values`` in a comparable dtype)."""
    table, low = _token_table(toks)
    n_seq = offsets.shape[0] - 1
    n_threads, bounds = plan_threads(offsets, cmp.shape[0])
    counts = np.empty(n_seq, dtype=np.int64)
    seq_layout.erase_count(counts, cmp, toks, table, low, offsets, bounds, n_threads)
    new_offsets = np.empty(n_seq + 1, dtype=np.int64)
    new_offsets[0] = 0
    np.cumsum(counts, out=new_offsets[1:])
    kept = np.empty(int(new_offsets[-1]), dtype=cmp.dtype)
    if kept.size:
        seq_layout.erase_copy(kept, cmp, toks, table, low, offsets, new_offsets, bounds,
                              n_threads)
    if kept.dtype != values.dtype:
        kept = kept.astype(values.dtype)
    return kept, new_offsets


_ONE_BITS = {}  # dtype -> the bit pattern of 1 in it, as an unsigned int


def _one_bits(dtype):
    bits = _ONE_BITS.get(dtype)
    if bits is None:
        bits = int(np.ones(1, dtype=dtype).view(f"u{dtype.itemsize}")[0])
        _ONE_BITS[dtype] = bits
    return bits


def mask(out, lengths, maxlen):
    """``out[i, j] = j < lengths[i]`` in ``out``'s dtype (``lengths`` flat, not float16)."""
    if out.size == 0:
        return
    seq_layout.mask(out.reshape(-1).view(np.uint8), lengths, maxlen, out.itemsize,
                    _one_bits(out.dtype), threads_for(out.size))


# --------------------------------------------------------------------------- seq_pool
_SUM_MODES = {"sum": 0, "average": 1, "sqrt": 2}
_SERIAL_OPS = {**_SUM_MODES, "max": 3, "min": 4}  # pool_float_serial's op codes
_SERIAL_DTYPES = frozenset(map(np.dtype, (np.float32, np.float64)))


_POOL_SUM_FLOAT = _by_dtype(seq_pool.pool_sum_float)
_POOL_SUM_INT = _by_dtype(seq_pool.pool_sum_int)
_POOL_MEAN_INT = _by_dtype(seq_pool.pool_mean_int)
_POOL_EXTREME = _by_dtype(seq_pool.pool_extreme)
_POOL_ARG_EXTREME = _by_dtype(seq_pool.pool_arg_extreme)


def pool(out, index, data, offsets, pad_row, pool_type):
    """``out`` (and ``index``, the rows of max / min) from ``data`` pooled over ``offsets``."""
    n_seq = offsets.shape[0] - 1
    size = out.size
    if size == 0:
        return
    d = size // n_seq
    n = data.shape[0]
    work = n * d + n_seq
    nt = 1 if work < PARALLEL_MIN_WORK else num_threads()
    # One thread, float32 / float64 sum family or max / min: the same kernels without typed
    # memoryviews (~1.5k instructions each) nor reshapes; False for anything it cannot take.
    if (nt == 1 and index is None and data.dtype in _SERIAL_DTYPES
            and seq_pool.pool_float_serial(out, data, offsets, pad_row, d,
                                           _SERIAL_OPS.get(pool_type, -1))):
        return
    # ``(n, d)``, ``(n_seq, d)`` and ``(d,)`` views; a reshape is skipped where the array has
    # that shape already (2-D data: its feature dimension is ``d``), as it costs ~0.3 us.
    x = np.ascontiguousarray(data)
    if x.ndim != 2:
        x = x.reshape(n, d)
    o = out if out.ndim == 2 else out.reshape(n_seq, d)
    p = pad_row if pad_row.ndim == 1 else pad_row.reshape(d)
    offsets = np.ascontiguousarray(offsets)
    bounds = chunk_bounds(offsets, nt * 4) if nt > 1 else None
    dtype = x.dtype
    kind = dtype.kind
    # float16 runs on its bits (uint16) in the _half kernels, bool on uint8.
    half = kind == "f" and dtype.itemsize == 2
    if pool_type in ("first", "last"):
        # Rows as bytes: one copy kernel for every dtype.
        seq_pool.pool_pick(o.view(np.uint8), x.view(np.uint8), offsets, p.view(np.uint8),
                           pool_type == "last", bounds, nt)
    elif pool_type in _SUM_MODES:
        mode = _SUM_MODES[pool_type]
        if half:
            seq_pool.pool_sum_half(o.view(np.uint16), x.view(np.uint16), offsets,
                                   p.view(np.uint16), mode, bounds, nt)
        elif kind == "f":
            _POOL_SUM_FLOAT.get(dtype, seq_pool.pool_sum_float)(o, x, offsets, p, mode, bounds,
                                                                 nt)
        elif mode == 0:
            _POOL_SUM_INT.get(dtype, seq_pool.pool_sum_int)(o, x, offsets, p, bounds, nt)
        else:
            _POOL_MEAN_INT.get(dtype, seq_pool.pool_mean_int)(o, x, offsets, p, mode, bounds,
                                                               nt)
    else:
        is_min = pool_type == "min"
        i2 = None if index is None else index.reshape(n_seq, d)
        if half:
            seq_pool.pool_extreme_half(o.view(np.uint16), i2, x.view(np.uint16), offsets,
                                       p.view(np.uint16), is_min, bounds, nt)
            return
        if kind == "b":
            o, x, p = o.view(np.uint8), x.view(np.uint8), p.view(np.uint8)
            dtype = x.dtype
        if i2 is None:
            _POOL_EXTREME.get(dtype, seq_pool.pool_extreme)(o, x, offsets, p, is_min, bounds,
                                                             nt)
        else:
            _POOL_ARG_EXTREME.get(dtype, seq_pool.pool_arg_extreme)(o, i2, x, offsets, p,
                                                                     is_min, bounds, nt)


def topk_avg_pool(out, data, in_off, row_off, col_off, ks, channels, longest):
    """Top-k averages of every row of every channel; ``data`` flat in float32 or float64."""
    if out.size == 0:
        return
    target = out if out.dtype == data.dtype else np.empty(out.shape, dtype=data.dtype)
    in_off = np.ascontiguousarray(in_off)
    nt = threads_for(data.shape[0] * 4)
    bounds = _bounds(in_off, nt)
    n_chunks = 1 if bounds is None else bounds.shape[0] - 1
    m = max(1, min(int(ks.max()), longest))
    work = np.empty((n_chunks, m), dtype=np.float64)
    seq_topk.topk_avg_pool(target, work, data, in_off, np.ascontiguousarray(row_off),
                           np.ascontiguousarray(col_off), ks, channels, bounds, nt)
    if target is not out:
        out[...] = target


# --------------------------------------------------------------------------- seq_softmax
_SOFTMAX_FLOAT = _by_dtype(seq_softmax.softmax_float)
_SOFTMAX_INT = _by_dtype(seq_softmax.softmax_int)


def softmax(out, data, offsets):
    """Softmax over the values of every sequence of ``offsets``."""
    n = data.shape[0]
    if n == 0:
        return
    flat = np.ascontiguousarray(data)
    if flat.ndim != 1:
        flat = flat.reshape(n)
    o = out if out.ndim == 1 else out.reshape(n)
    offsets = np.ascontiguousarray(offsets)
    # exp is ~10x the cost of a read: go parallel earlier than the memory-bound kernels.
    nt = 1 if 16 * n < PARALLEL_MIN_WORK else num_threads()
    bounds = chunk_bounds(offsets, nt * 4) if nt > 1 else None
    dtype = flat.dtype
    kind = dtype.kind
    if kind == "f" and dtype.itemsize == 2:
        seq_softmax.softmax_half(o.view(np.uint16), flat.view(np.uint16), offsets, bounds, nt)
    elif kind == "f":
        _SOFTMAX_FLOAT.get(dtype, seq_softmax.softmax_float)(o, flat, offsets, bounds, nt)
    else:
        _SOFTMAX_INT.get(dtype, seq_softmax.softmax_int)(o, flat, offsets, bounds, nt)


# --------------------------------------------------------------------------- seq_conv
def conv(out, data, offsets, w, pad_rows, b, cs, cl, up, chunk_elements):
    """Gather the contexts block by block and multiply each block by the filter.

    ``data`` is ``(n, d)``; ``w``, ``pad_rows`` and ``b`` are already in the computation
    dtype.
    """
    n, d = data.shape
    if n == 0:
        return
    data = np.ascontiguousarray(data)
    compute = w.dtype
    width = cl * d
    if width == 0:
        out[...] = 0 if b is None else b
        return
    offsets = np.ascontiguousarray(offsets)
    step = max(1, chunk_elements // width)
    ctx_buf = np.empty((min(step, n), width), dtype=compute)
    use_pad = pad_rows is not None
    padding = pad_rows if use_pad else np.empty((0, d), dtype=compute)
    direct = out.dtype == compute
    for r0 in range(0, n, step):
        r1 = min(n, r0 + step)
        ctx = ctx_buf[:r1 - r0]
        if data.dtype == compute:
            src, base = data, 0
        else:
            # Convert only the rows this block's contexts can reach.
            base, stop = conv_source_rows(r0, r1, n, cs, cl)
            src = data[base:stop].astype(compute)
        # One thread: the product right after runs on BLAS's own threads, and OpenMP
        # workers still spinning from a parallel gather would fight them (10x slower).
        seq_conv.conv_gather(ctx, src, base, offsets, r0, cs, cl, padding, up, use_pad, 1)
        if direct:
            np.matmul(ctx, w, out=out[r0:r1])
            if b is not None:
                out[r0:r1] += b
        else:
            block = ctx @ w
            if b is not None:
                block += b
            out[r0:r1] = block


#: Kernel name -> CPU entry point (the registry; ``cuda.KERNELS`` has the same names).
KERNELS = {
    "expand_rows": expand_rows,
    "expand_blocks": expand_blocks,
    "gather_blocks": gather_blocks,
    "concat": concat,
    "scatter": scatter,
    "pad": pad,
    "unpad": unpad,
    "reverse": reverse,
    "enumerate_windows": enumerate_windows,
    "erase": erase,
    "mask": mask,
    "pool": pool,
    "topk_avg_pool": topk_avg_pool,
    "softmax": softmax,
    "conv": conv,
}

# Planning on the LoD, which lives on the host on either backend.
KERNELS["expand_lod"] = expand_lod
KERNELS["slice_plan"] = slice_plan

CPU = CPUBackend(KERNELS)
