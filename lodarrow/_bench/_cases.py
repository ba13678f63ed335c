"""The benchmark cases: each lodarrow call, its workload, its peers and the bytes it must move.

"GB/s" (benchmarks/README.md) counts the bytes an operator must read plus the bytes it writes,
computed from the workload alone so every implementation of a case is measured against the same
figure: e.g. ``sequence_pool`` reads the rows and the offsets and writes one row per sequence;
``sequence_pad`` writes the whole padded block.  Zero-copy conversions and the 10-row call have
no byte count; they are compared by time.
"""

import dataclasses

import numpy as np

from lodarrow._bench import _peers

__all__ = ["Case", "all_cases", "lodarrow_call"]

_I64 = 8


@dataclasses.dataclass(frozen=True)
class Case:
    """One row group of the report: lodarrow and every applicable peer on one workload."""

    op: str  # operator or conversion; the ``--ops`` filter and the peer registry key
    variant: str | None  # pool type, or None
    workload: str  # workload name (see ``_workloads``)
    rows: int  # full-size rows (scaled by --quick / --scale unless ``fixed_rows``)
    fixed_rows: bool = False
    peer_op: str | None = None  # registry key when it differs from ``op``
    rtol: float = 1e-4
    atol: float = 1e-4
    note: str | None = None  # shown in lodarrow's row (what bounds it, where it must lose)

    @property
    def title(self):
        return self.op + (f" {self.variant}" if self.variant else "")

    @property
    def peers_key(self):
        return self.peer_op or self.op

    @property
    def uses_path(self):
        return self.op in ("write_parquet", "read_parquet")

    def nbytes(self, w):
        """Bytes the operation must read plus write (None: compare by time only)."""
        return _BYTES.get(self.op, lambda w, v: None)(w, self.variant)


def _pool_bytes(w, variant):
    return w.data_bytes + w.offsets_bytes + w.n_seq * w.row_bytes


def _pad_width(w):
    return w.n_seq * w.max_length * w.row_bytes


_BYTES = {
    "sequence_pool": _pool_bytes,
    "sequence_softmax": lambda w, v: 2 * w.data_bytes + w.offsets_bytes,
    "sequence_first_step": lambda w, v: 2 * w.n_seq * w.row_bytes + w.offsets_bytes,
    "sequence_last_step": lambda w, v: 2 * w.n_seq * w.row_bytes + w.offsets_bytes,
    "sequence_expand": lambda w, v: w.n_seq * w.row_bytes + w.offsets_bytes + w.data_bytes,
    "sequence_pad": lambda w, v: w.data_bytes + w.offsets_bytes + _pad_width(w)
    + w.n_seq * _I64,
    "sequence_unpad": lambda w, v: 2 * w.data_bytes + w.n_seq * _I64 + w.offsets_bytes,
    "sequence_conv": lambda w, v: w.data_bytes + w.offsets_bytes
    + _peers.conv_filter(w.d).nbytes + w.rows * _peers.CONV_FILTERS * 4,
    "sequence_topk_avg_pooling": lambda w, v: w.data.nbytes + 3 * (w.n_seq + 1) * _I64
    + int(w.row_len.sum()) * w.channels * len(w.topks) * 4,
    "sequence_expand_as": lambda w, v: w.n_seq * w.row_bytes + w.offsets_bytes + w.data_bytes,
    "sequence_reverse": lambda w, v: 2 * w.data_bytes + w.offsets_bytes,
    "sequence_concat": lambda w, v: 4 * w.data_bytes + 3 * w.offsets_bytes,
    "sequence_slice": lambda w, v: 2 * int(w.slice_args[1].sum()) * w.row_bytes
    + 2 * w.offsets_bytes + 2 * w.n_seq * _I64,
    "sequence_erase": lambda w, v: w.int_ids.nbytes + 2 * w.offsets_bytes
    + int((~np.isin(w.int_ids, _peers.ERASE_TOKENS)).sum()) * _I64,
    "sequence_enumerate": lambda w, v: (1 + _peers.ENUMERATE_WIN) * w.int_ids.nbytes
    + w.offsets_bytes,
    "sequence_mask": lambda w, v: w.n_seq * _I64 + w.n_seq * w.max_length,
    "sequence_scatter": lambda w, v: w.rows * (_I64 + 4) + w.offsets_bytes
    + 2 * w.n_seq * _peers.SCATTER_WIDTH * 4,
    "write_parquet": lambda w, v: w.data_bytes + w.offsets_bytes,
    "read_parquet": lambda w, v: w.data_bytes + w.offsets_bytes,
    "from_offsets": lambda w, v: w.offsets_bytes,  # the check reads the offsets, not the data
}


_WRITE_NOTE = ("polars' writer where polars is installed, with the table's own Arrow schema "
               "stored (docs/performance.md#parquet-writes)")


def wanted(name, filters):
    """``--ops``/``--peers`` matching: a filter selects ``name`` if ``name`` (or ``name``
    without ``sequence_``) starts with it, or it equals one of the ``_``-separated words
    ("pool" selects sequence_pool, "parquet" both Parquet cases, "pad" not "unpad")."""
    if not filters:
        return True
    short = name.removeprefix("sequence_")
    return any(name.startswith(f) or short.startswith(f) or f in name.split("_")
               for f in filters)


def all_cases():
    """Every case, grouped by workload (so each workload is built once and freed after)."""
    cases = []
    add = cases.append
    # D=1, 1e7 rows
    add(Case("to_arrow", None, "D=1", 1_000, fixed_rows=True))
    add(Case("from_arrow", None, "D=1", 1_000, fixed_rows=True))
    add(Case("call_overhead", "sum", "tiny", 10, fixed_rows=True, peer_op="sequence_pool"))
    # the same call through la.apply on a one-column pyarrow Table (docs/tables.md): its time
    # minus call_overhead's is what the table layer costs per column
    add(Case("apply_overhead", "sum", "tiny", 10, fixed_rows=True))
    for name, rows in (("D=1", 10_000_000), ("D=16", 1_000_000), ("2-level", 10_000_000)):
        add(Case("to_arrow", None, name, rows))
        add(Case("from_arrow", None, name, rows))
        if name != "2-level":
            add(Case("write_parquet", None, name, rows, note=_WRITE_NOTE))
            add(Case("read_parquet", None, name, rows))
        if name == "D=1":
            add(Case("from_offsets", None, name, rows,
                     note="construction + the first read's order scan (deferred)"))
        for pool in ("sum", "average", "max"):
            add(Case("sequence_pool", pool, name, rows))
        if name == "2-level":
            continue
        if name == "D=1":
            add(Case("sequence_softmax", None, name, rows, rtol=1e-4, atol=1e-6))
        add(Case("sequence_first_step", None, name, rows))
        add(Case("sequence_last_step", None, name, rows))
        add(Case("sequence_expand", None, name, rows))
        if name == "D=1":
            add(Case("sequence_expand_as", None, name, rows, peer_op="sequence_expand"))
            for op in ("sequence_reverse", "sequence_concat", "sequence_slice",
                       "sequence_erase", "sequence_enumerate", "sequence_mask",
                       "sequence_scatter"):
                add(Case(op, None, name, rows))
        add(Case("sequence_pad", None, name, rows))
        add(Case("sequence_unpad", None, name, rows))
        if name == "D=16":
            add(Case("sequence_conv", None, name, rows, rtol=1e-3, atol=1e-3))
    add(Case("sequence_topk_avg_pooling", None, "topk", 10_000_000, rtol=1e-4, atol=1e-5))
    return cases


# ====================================================================== lodarrow's side
def _tensor_norm(out):
    return _peers.numpy_view(out)


def _outer_offsets_values(t):
    """``(outermost offsets, flat values)``: what the Arrow-side peers' norms give."""
    return np.asarray(t.offsets[0]), t.numpy().reshape(-1)


def lodarrow_call(case, w, path=None):
    """``(run, norm)`` for lodarrow's implementation of ``case`` on workload ``w``."""
    import lodarrow

    op, variant = case.op, case.variant
    if op in ("sequence_pool", "call_overhead"):
        t = w.tensor
        return (lambda: lodarrow.sequence_pool(t, variant)), _tensor_norm
    if op == "apply_overhead":
        import pyarrow as pa

        table = pa.table({"x": w.arrow})
        source = lodarrow.col("x")

        def norm(out):
            return _peers.numpy_view(lodarrow.from_arrow(out.column("s")))
        return (lambda: lodarrow.apply(table, lodarrow.sequence_pool, input=source,
                                       pool_type=variant, out="s")), norm
    if op == "sequence_softmax":
        t = w.tensor
        return (lambda: lodarrow.sequence_softmax(t)), _tensor_norm
    if op in ("sequence_first_step", "sequence_last_step"):
        t, fn = w.tensor, getattr(lodarrow, op)
        return (lambda: fn(t)), _tensor_norm
    if op == "sequence_expand":
        t, x = w.tensor, w.per_sequence
        return (lambda: lodarrow.sequence_expand(x, t)), _tensor_norm
    if op == "sequence_expand_as":
        t, x = w.tensor, w.per_sequence
        return (lambda: lodarrow.sequence_expand_as(x, t)), _tensor_norm
    if op in ("sequence_reverse", "sequence_concat", "sequence_slice", "sequence_erase"):
        if op == "sequence_reverse":
            t = w.tensor
            run = lambda: lodarrow.sequence_reverse(t)  # noqa: E731
        elif op == "sequence_concat":
            t = w.tensor
            run = lambda: lodarrow.sequence_concat([t, t])  # noqa: E731
        elif op == "sequence_slice":
            t, (offset, length) = w.tensor, w.slice_args
            run = lambda: lodarrow.sequence_slice(t, offset, length)  # noqa: E731
        else:
            t, tokens = w.ids_tensor, list(_peers.ERASE_TOKENS)
            run = lambda: lodarrow.sequence_erase(t, tokens)  # noqa: E731
        return run, lambda out: (out.numpy(), np.asarray(out.offsets[-1]))
    if op == "sequence_enumerate":
        t = w.ids_tensor
        return (lambda: lodarrow.sequence_enumerate(t, _peers.ENUMERATE_WIN)), _tensor_norm
    if op == "sequence_mask":
        lengths = w.lengths
        return (lambda: lodarrow.sequence_mask(lengths, dtype="bool")), _tensor_norm
    if op == "sequence_scatter":
        index = lodarrow.LoDTensor((w.int_ids % _peers.SCATTER_WIDTH).reshape(-1, 1), w.offsets)
        updates = lodarrow.LoDTensor(w.data.reshape(-1, 1), w.offsets)
        base = np.zeros((w.n_seq, _peers.SCATTER_WIDTH), dtype=np.float32)
        return (lambda: lodarrow.sequence_scatter(base, index, updates)), _tensor_norm
    if op == "sequence_pad":
        t = w.tensor
        return (lambda: lodarrow.sequence_pad(t, 0.0)), _peers._pad_norm
    if op == "sequence_unpad":
        xpad, _ = w.padded
        lengths = w.lengths

        def norm(out):
            return out.numpy(), np.asarray(out.offsets[-1])
        return (lambda: lodarrow.sequence_unpad(xpad, lengths)), norm
    if op == "sequence_conv":
        t = w.tensor
        filt = _peers.conv_filter(w.d)
        start, length = _peers.CONV_CONTEXT
        return (lambda: lodarrow.sequence_conv(t, filt, context_start=start,
                                               context_length=length)), _tensor_norm
    if op == "sequence_topk_avg_pooling":
        x, row, col = w.tensors
        topks = list(w.topks)
        return (lambda: lodarrow.sequence_topk_avg_pooling(x, row, col, topks,
                                                           w.channels)), _tensor_norm
    if op == "to_arrow":
        t = w.tensor
        return (lambda: t.to_arrow()), _peers._arrow_parts
    if op == "from_arrow":
        arr = w.arrow
        return (lambda: lodarrow.from_arrow(arr)), _outer_offsets_values
    if op == "from_offsets":
        x, offsets = w.data, w.offsets

        def build():
            # LoDTensor checks int64 offsets' bounds at construction and defers the O(n)
            # order scan to the first read; the peers check inside their call, so the first
            # read (the scan) is timed here too
            t = lodarrow.LoDTensor(x, offsets)
            t.offsets  # noqa: B018 -- the deferred scan
            return t
        return build, _outer_offsets_values
    if op == "write_parquet":
        import pyarrow.parquet as pq

        t = w.tensor

        def run():
            lodarrow.write_parquet(t, path)
            return path
        return run, lambda p: _peers._arrow_parts(pq.read_table(p).column(0))
    if op == "read_parquet":
        return (lambda: lodarrow.read_parquet(path)), _outer_offsets_values
    raise ValueError(f"unknown benchmark op {op!r}")
