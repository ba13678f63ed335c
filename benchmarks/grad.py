#!/usr/bin/env python
"""Forward + backward of lodarrow's differentiable sequence operators against PyTorch's own
ways and FBGEMM's jagged operators, side by side in one run (issue 56; docs/gradients.md#speed).

    LODARROW_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/grad.py --threads 1 \\
        --preload /usr/lib/x86_64-linux-gnu/libjemalloc.so.2 \\
        --fbgemm-python /work/venv-fbgemm19/bin/python \\
        --json benchmarks/results/grad.json --docs docs/gradients.md
    python benchmarks/grad.py --small                  # sizes / 100: a quick run
    python benchmarks/grad.py --from-json benchmarks/results/grad.json --docs docs/gradients.md

What one invocation does:

- **Workloads** (fixed seed): float32 rows cut into sequences of lognormal lengths (mean
  about ``--mean-length`` 60, sigma ``--sigma``, clipped to ``[1, --max-length]``: the width
  the padded peers pay for), ``--rows-d1`` rows at D=1 (default 1e7) and ``--rows-d16`` rows
  at D=16 (default 1e6); ``--small`` divides both by 100.
- **Timed**: one forward and its backward together (``out.backward(dout)`` with a fixed
  random upstream gradient, or ``pullback(dout)``), from inputs the caller holds in the
  contender's own layout (jagged values + offsets, a nested tensor's parts, a padded tensor
  with its mask: a padded model holds padded batches; for ``conv1d`` a contiguous
  ``(B, D, L)`` batch and an ``(F, D, 3)`` weight, its own layout).
- **One call is one batch**: every contender gets the whole workload as one batch of its
  sequences, so the padded peers pad to that batch's longest sequence (padding per batch;
  the workloads' table gives the real rows' share of the padded block, and of batches of
  256 sequences each padded to its own longest, for comparison).
- **Held, not timed**: what depends only on the batch's layout and would be made once by a
  user training repeatedly on the same layout: segment ids (``seg``: the sequence of every
  row, PyG's ``batch`` vector), gather indices (reverse, slice, concat's permutation, the
  im2col context rows), the mask, the lengths.  The nested tensor is made inside the call
  (a view over the values being differentiated).  ``lodarrow.torch``'s rows hold only the
  offsets tensor: they validate it and derive everything else inside every call, so they pay
  more than the peers here, not less; ``la.vjp``'s hold LoDTensors, whose LoD was validated
  once when they were made (as a NumPy user's batches are).
- **Equal threads**: ``torch.set_num_threads(T)`` and ``LODARROW_NUM_THREADS=T`` (``--threads``,
  default: the CPUs this process may use), in this process and in FBGEMM's; with
  ``--threads`` also NumPy's BLAS (``OPENBLAS_NUM_THREADS``, its own thread pool, which
  ``sequence_conv``'s matmuls use).
- **Checked first**: every contender's output and input gradients are compared with a
  float64 PyTorch reference of the operator (``Case.reference``) before it is timed:
  ``|got - ref| <= 1e-4 |ref| + 2e-5 max|ref|``.  A contender that raises or differs is
  reported with the reason and not timed.
- **Interleaved**: after one warm-up call each, the contenders of one case run in turn
  (A B C A B C ...) ``--repeat`` times (default 5); a figure is the median.
- **FBGEMM** (``fbgemm-gpu-cpu``) runs in its own interpreter (``--fbgemm-python``: a venv
  holding it and the torch it was built for), as a worker this process drives over a pipe, so
  its calls interleave with the others' too; the worker builds the same data from the same
  seed and checks its results against the same reference.  Without a working FBGEMM the
  table says why, row by row.
- **Memory bandwidth of lodarrow's own kernels** (NumPy, no torch; ``--skip bandwidth`` leaves
  it out): per case, after its contenders, the forward alone (``la.<op>(...)``) and the pullback
  alone (``pullback(dout)`` of one ``la.vjp``), both checked against the reference first, each
  the median of ``--repeat`` calls interleaved with a plain ``np.copyto`` of max(the forward's
  input bytes, half the bytes the forward moves) (the machine's copy bandwidth: bytes read +
  written), and with allocating the gradients' shapes from lodarrow's own allocator and
  writing them once (and the same through ``np.empty``).  GB/s:
  the least bytes each kernel must move (``BYTES_MODEL``) over its median; share: that over the
  copy's GB/s; the goal: each backward at the forward's share (``BW_GOAL`` of it or more).
- **Small calls**: a 1,000-row ``lt.sequence_pool`` (sum, D=16) forward + backward against a
  bare ``torch.segment_reduce`` forward + backward, ``--small-calls`` calls a sample.

The fast paths each torch row takes, from PyTorch's documentation:

- ``torch.segment_reduce(data, reduce, offsets=..., unsafe=True)``: the segmented reduction,
  with its backward, validation of the offsets skipped (``unsafe``, as the page offers;
  lodarrow's rows validate theirs)
  (https://docs.pytorch.org/docs/stable/generated/torch.segment_reduce.html);
- ``Tensor.index_add`` / ``Tensor.scatter_reduce(..., include_self=False)``
  (https://pytorch.org/docs/stable/generated/torch.Tensor.index_add_.html,
  https://pytorch.org/docs/stable/generated/torch.Tensor.scatter_reduce_.html) and
  ``index_select`` / ``repeat_interleave(..., output_size=)``
  (https://pytorch.org/docs/stable/generated/torch.repeat_interleave.html);
- jagged nested tensors, ``torch.nested.nested_tensor_from_jagged(values, offsets)``, with the
  operations the nested docs list for the jagged layout: reductions and ``softmax`` over the
  ragged dim, ``to_padded_tensor``, ``masked_select``
  (https://pytorch.org/docs/stable/nested.html); one that raises is reported as such;
- padded tensors with a mask (``masked_fill`` / multiply, ``pad_sequence``,
  https://pytorch.org/docs/stable/generated/torch.nn.utils.rnn.pad_sequence.html), and for
  ``sequence_conv`` ``torch.nn.functional.conv1d`` over the padded batch, output masked.
  ``pad_sequence`` runs up to ``PAD_SEQUENCE_MAX`` sequences only: its backward grows with
  the square of the sequence count (its row says so above that);
- the nested tensors are made with ``max_seqlen=L`` (the longest length, as a caller that
  knows it passes it): without it ``to_padded_tensor`` allocates sequences x rows elements.

FBGEMM's (https://pytorch.org/FBGEMM/fbgemm_gpu/cpp-api/jagged_tensor_ops.html):
``jagged_to_padded_dense``, ``dense_to_jagged``, ``segment_sum_csr``, ``jagged_softmax``,
``jagged_slice``, ``pack_segments``; an operator FBGEMM has no counterpart for is said so in
the table.

- **Allocators** (recorded in the JSON, stated in the block): lodarrow's kernels take outputs
  of 1 MiB or more from Arrow's memory pool (``LODARROW_ARROW_POOL=0``: NumPy's allocator);
  torch's tensors and NumPy's arrays come from the process's malloc, glibc's unless
  ``--preload PATH`` (jemalloc or tcmalloc, as PyTorch's CPU performance guide advises) puts
  another in this process and FBGEMM's worker through ``LD_PRELOAD``.

Writes ``--json`` (everything measured, with the commit, versions, CPU, load and settings)
and, with ``--docs``, the section between ``<!-- grad-bench:begin -->`` and
``<!-- grad-bench:end -->`` of that Markdown file (appended under ``## Speed`` when absent),
generated from the JSON.  See benchmarks/README.md ("Gradients").
"""

import os
import sys

def _threads_arg(argv):
    """``--threads`` from the command line, read before NumPy loads."""
    for i, a in enumerate(argv):
        if a == "--threads" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--threads="):
            return a.split("=", 1)[1]
    return None


# NumPy's BLAS (OpenBLAS: sequence_conv's matmuls) keeps a thread pool of its own, which
# LODARROW_NUM_THREADS does not govern; it reads its size when NumPy loads, so it is set here.
if __name__ == "__main__" and _threads_arg(sys.argv[1:]):
    for _name in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_name, _threads_arg(sys.argv[1:]))

import argparse
import datetime
import json
import math
import platform
import statistics
import subprocess
import time
import warnings
import zlib
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
BEGIN = "<!-- grad-bench:begin: generated by benchmarks/grad.py from its JSON; do not edit -->"
END = "<!-- grad-bench:end -->"
NEW_INTRO = ("Forward + backward of lodarrow's differentiable operators (the block says which "
             "have no row, and why)\nagainst PyTorch's own ways and"
             "\n"
             "FBGEMM's jagged operators, in one run with equal threads (`benchmarks/grad.py`; its\n"
             "docstring says what each row times and how it is checked).  Generated from the "
             "run's\nJSON (`benchmarks/results/grad.json`); do not edit by hand.")

POOLS = ("sum", "average", "sqrt", "max", "min", "first", "last")
#: (operator, workloads) in table order
OPS = ([(f"pool_{p}", ("D1", "D16")) for p in POOLS]
       + [("softmax", ("D1",)), ("expand", ("D1", "D16")), ("expand_as", ("D1", "D16")),
          ("pad", ("D1", "D16")), ("unpad", ("D1", "D16")), ("concat", ("D1", "D16")),
          ("reverse", ("D1", "D16")), ("slice", ("D1", "D16")), ("scatter", ("D1",)),
          ("topk", ("D1",)), ("conv", ("D16",))])
SLICE_MAX = 32          # sequence_slice keeps min(len - offset, 32) rows (FBGEMM's jagged_slice)
CONV_FILTERS = 16       # sequence_conv: context 3 (start -1), D=16 -> 16 filters
#: sequence_scatter: one update per row of the workload (its index sequences are the
#: workload's), into an input of one row per sequence, this many columns wide
SCATTER_WIDTH = 64
#: sequence_topk_avg_pooling: one channel, each sequence a 1 x len block (its values the
#: workload's rows), these k (a k beyond a sequence's length counts the missing as 0)
TOPKS = (1, 3, 5)
#: The differentiable operators of docs/gradients.md (GRAD.md section 1), by the ops of this
#: benchmark that time them; an operator without an op here has no timed row, for the reason
#: given (``UNTIMED``).
DIFFERENTIABLE = {
    "sequence_pool sum / average / sqrt": ("pool_sum", "pool_average", "pool_sqrt"),
    "sequence_pool max / min": ("pool_max", "pool_min"),
    "sequence_pool first / last": ("pool_first", "pool_last"),
    "sequence_softmax": ("softmax",), "sequence_expand": ("expand",),
    "sequence_expand_as": ("expand_as",), "sequence_pad": ("pad",),
    "sequence_unpad": ("unpad",), "sequence_concat": ("concat",),
    "sequence_slice": ("slice",), "sequence_reverse": ("reverse",),
    "sequence_scatter": ("scatter",), "sequence_conv": ("conv",),
    "sequence_topk_avg_pooling": ("topk",),
    "sequence_reshape": (), "lod_reset": (), "lod_append": ()}
UNTIMED = ("sequence_reshape, lod_reset and lod_append have no timed row: their gradient is "
           "`dout` itself (lod_reset, lod_append) or a reshape of it (sequence_reshape), a view "
           "with no kernel behind it, and lod_reset / lod_append pass the values through "
           "unchanged in the forward too (sequence_reshape's forward copies the values, where "
           "torch's reshape of a contiguous tensor is a view)")
#: pad_sequence runs up to this many sequences: its backward grows with B^2 (autograd records
#: its B copies into the padded output as in-place CopySlices nodes, each of which copies the
#: whole padded gradient): 2.4 s at 200 sequences of D=16 (12k rows), 2.7-12 s at 800, out of
#: 8 GB at 1,600 on the development machine (torch 2.13.0+cpu, one thread)
PAD_SEQUENCE_MAX = 500
PAD_SEQUENCE_WHY = ("its backward grows with the square of the sequences (measured: 2.4 s "
                    "at 200 sequences of D=16, out of 8 GB at 1,600)")


# ======================================================================== the workloads
def lengths_for(rows, mean, sigma, max_length, seed):
    """Lognormal lengths (mean ``mean`` before clipping to [1, max_length]) adding up to
    ``rows`` exactly (the last one cut)."""
    rng = np.random.default_rng(seed)
    mu = math.log(mean) - sigma * sigma / 2
    n = int(rows / mean * 1.3) + 16
    lens = np.clip(np.rint(rng.lognormal(mu, sigma, n)), 1, max_length).astype(np.int64)
    cum = np.cumsum(lens)
    k = int(np.searchsorted(cum, rows)) + 1
    lens = lens[:k].copy()
    lens[-1] -= int(cum[k - 1]) - rows
    if lens[-1] <= 0:
        lens = lens[:-1]
    assert lens.sum() == rows and lens.min() >= 1
    return lens


class Data:
    """One workload's arrays (NumPy; torch views made by ``t()``), built the same way in every
    process from the same seed."""

    def __init__(self, rows, d, mean, sigma, max_length, seed):
        self.rows, self.d, self.seed = rows, d, seed
        self.lens = lengths_for(rows, mean, sigma, max_length, seed)
        self.B = len(self.lens)
        self.off = np.concatenate([[0], np.cumsum(self.lens)]).astype(np.int64)
        self.L = int(self.lens.max())
        rng = np.random.default_rng(seed + 1)
        shape = (rows,) if d == 1 else (rows, d)
        self.x = rng.standard_normal(shape, dtype=np.float32)
        self.seg = np.repeat(np.arange(self.B, dtype=np.int64), self.lens)
        self.pos = np.arange(rows, dtype=np.int64) - self.off[:-1][self.seg]   # row in its seq
        self.fshape = () if d == 1 else (d,)

    def padded(self, flat):
        """``flat`` rows (N, *f) into zeros (B, L, *f)."""
        out = np.zeros((self.B, self.L) + flat.shape[1:], flat.dtype)
        out[self.seg, self.pos] = flat
        return out

    def mask(self):
        return np.arange(self.L)[None, :] < self.lens[:, None]


def padded_fraction(lens, batch):
    """Real rows over padded slots when every ``batch`` consecutive sequences are padded to
    their own longest."""
    lens = np.asarray(lens)
    slots = sum(len(c) * int(c.max()) for c in (lens[i:i + batch]
                                                  for i in range(0, len(lens), batch)))
    return float(lens.sum() / slots) if slots else 1.0


def workloads(args):
    div = 100 if args.small else 1
    return {"D1": {"rows": int(args.rows_d1 // div), "d": 1},
            "D16": {"rows": int(args.rows_d16 // div), "d": 16}}


# ========================================================================== the cases
class Case:
    """One operator on one workload: inputs, the canonical upstream gradient, the float64
    reference, and the arrays every contender needs.

    Canonical forms (what checks compare): outputs and gradients in lodarrow's layout
    (jagged rows, or the padded block of ``sequence_pad`` / the input of ``sequence_unpad``).
    """

    def __init__(self, op, data):
        import torch

        self.op, self.data, self.torch = op, data, torch
        dd = data
        # a generator of the case's own (the same arrays in every process, whatever ran before)
        rng = np.random.default_rng([data.seed, zlib.crc32(op.encode())])
        self.rand = lambda shape: rng.standard_normal(shape, dtype=np.float32)
        self.extra = {}
        if op.startswith("pool_") or op in ("softmax", "reverse", "pad", "topk"):
            self.inputs = {"x": dd.x}
        if op.startswith("pool_"):
            self.out_shape = (dd.B,) + dd.fshape
        elif op in ("softmax", "reverse"):
            self.out_shape = dd.x.shape
        elif op == "pad":
            self.out_shape = (dd.B, dd.L) + dd.fshape
        elif op in ("expand", "expand_as"):
            self.inputs = {"x": self.rand((dd.B,) + dd.fshape)}
            self.out_shape = dd.x.shape
        elif op == "topk":
            self.out_shape = (dd.B, len(TOPKS))
        elif op == "scatter":
            ids = np.random.default_rng([data.seed, 2]).integers(0, SCATTER_WIDTH, dd.rows)
            self.inputs = {"x": self.rand((dd.B, SCATTER_WIDTH)),
                           "upd": self.rand((dd.rows,))}
            self.extra = {"ids": ids.astype(np.int64)}
            self.out_shape = (dd.B, SCATTER_WIDTH)
        elif op == "unpad":
            self.inputs = {"x": dd.padded(dd.x)}
            self.out_shape = dd.x.shape
        elif op == "concat":
            la_ = dd.lens // 2
            lb = dd.lens - la_
            oa = np.concatenate([[0], np.cumsum(la_)])
            ob = np.concatenate([[0], np.cumsum(lb)])
            a_rows = _rows_of(dd.off[:-1], la_)
            b_rows = _rows_of(dd.off[:-1] + la_, lb)
            self.inputs = {"a": dd.x[a_rows], "b": dd.x[b_rows]}
            self.extra = {"oa": oa, "ob": ob, "seg_a": np.repeat(np.arange(dd.B), la_),
                          "seg_b": np.repeat(np.arange(dd.B), lb)}
            self.out_shape = dd.x.shape
        elif op == "slice":
            self.inputs = {"x": dd.x}
            start = np.floor(np.random.default_rng([data.seed, 1]).random(dd.B) * dd.lens).astype(np.int64)
            length = np.minimum(dd.lens - start, SLICE_MAX)
            self.extra = {"start": start, "length": length,
                          "out_off": np.concatenate([[0], np.cumsum(length)])}
            self.out_shape = (int(length.sum()),) + dd.fshape
        elif op == "conv":
            self.inputs = {"x": dd.x, "w": self.rand((3 * dd.d, CONV_FILTERS)) * 0.2}
            self.out_shape = (dd.rows, CONV_FILTERS)
        self.dout = self.rand(self.out_shape)

    # ---------------------------------------------------------------- the reference
    def reference(self):
        """(output, {input: gradient}) in float64, by plain PyTorch autograd."""
        torch = self.torch
        dd = self.data
        leaves = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True)
                  for k, v in self.inputs.items()}
        off = torch.from_numpy(dd.off)
        seg = torch.from_numpy(dd.seg)
        lens = torch.from_numpy(dd.lens)
        fs = (1,) * (dd.d > 1)
        op = self.op
        if op.startswith("pool_"):
            kind = op[5:]
            x = leaves["x"]
            if kind in ("sum", "average", "sqrt"):
                s = torch.zeros((dd.B,) + dd.fshape, dtype=torch.float64).index_add(0, seg, x)
                div = {"sum": torch.ones_like(lens), "average": lens,
                       "sqrt": lens}[kind].double()
                if kind == "sqrt":
                    div = div.sqrt()
                out = s / div.view(-1, *fs)
            elif kind in ("max", "min"):
                idx = seg.view(-1, *fs).expand(x.shape)
                out = torch.zeros((dd.B,) + dd.fshape, dtype=torch.float64).scatter_reduce(
                    0, idx, x, "a" + kind, include_self=False)
            else:
                out = x.index_select(0, off[:-1] if kind == "first" else off[1:] - 1)
        elif op == "softmax":
            x = leaves["x"]
            m = torch.zeros(dd.B, dtype=torch.float64).scatter_reduce(
                0, seg, x.detach(), "amax", include_self=False)
            e = (x - m[seg]).exp()
            out = e / torch.zeros(dd.B, dtype=torch.float64).index_add(0, seg, e)[seg]
        elif op in ("expand", "expand_as"):
            out = leaves["x"].index_select(0, seg)
        elif op == "topk":
            out = _topk_padded(torch, torch.from_numpy(dd.mask()), leaves["x"].new_zeros(
                (dd.B, dd.L)).index_put((torch.from_numpy(dd.mask()),), leaves["x"]))
        elif op == "scatter":
            out = leaves["x"].index_put((seg, torch.from_numpy(self.extra["ids"])),
                                        leaves["upd"], accumulate=True)
        elif op == "pad":
            mask = torch.from_numpy(dd.mask())
            out = torch.zeros((dd.B, dd.L) + dd.fshape, dtype=torch.float64).index_put(
                (mask,), leaves["x"])
        elif op == "unpad":
            out = leaves["x"][torch.from_numpy(dd.mask())]
        elif op == "concat":
            e = self.extra
            rows = torch.cat([torch.arange(len(e["seg_a"])) + torch.from_numpy(e["ob"])[
                torch.from_numpy(e["seg_a"])],
                torch.arange(len(e["seg_b"])) + torch.from_numpy(e["oa"])[
                torch.from_numpy(e["seg_b"]) + 1]])
            out = torch.zeros((dd.rows,) + dd.fshape, dtype=torch.float64).index_put(
                (rows,), torch.cat([leaves["a"], leaves["b"]]))
        elif op == "reverse":
            idx = off[:-1][seg] + off[1:][seg] - 1 - torch.arange(dd.rows)
            out = leaves["x"].index_select(0, idx)
        elif op == "slice":
            out = leaves["x"].index_select(0, torch.from_numpy(self.slice_rows()))
        elif op == "conv":
            x, w = leaves["x"], leaves["w"]
            pos = torch.from_numpy(dd.pos)
            cols = []
            for k in (-1, 0, 1):
                ok = ((pos + k >= 0) & (pos + k < lens[seg])).double().unsqueeze(1)
                src = (torch.arange(dd.rows) + k).clamp(0, dd.rows - 1)
                cols.append(x.index_select(0, src) * ok)
            out = torch.cat(cols, 1) @ w
        out.backward(torch.from_numpy(self.dout).double())
        return (out.detach().numpy(), {k: v.grad.numpy() for k, v in leaves.items()})

    def slice_rows(self):
        e, dd = self.extra, self.data
        return _rows_of(dd.off[:-1] + e["start"], e["length"])


def _topk_padded(torch, mask, x):
    """sequence_topk_avg_pooling of one channel, one row per sequence, over a padded
    ``(B, L)`` block: for each k of ``TOPKS`` the sum of the k largest real values over k
    (a missing value counts as 0)."""
    kmax = max(TOPKS)
    top = x.masked_fill(~mask, -math.inf).topk(kmax, dim=1).values
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    ks = torch.tensor(TOPKS)
    return top.cumsum(1)[:, ks - 1] / ks.to(x.dtype)


def _rows_of(starts, lengths):
    """Concatenated ``range(s, s + n)`` for every (s, n): row numbers, vectorised."""
    lengths = np.asarray(lengths, np.int64)
    total = int(lengths.sum())
    first = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    return (np.repeat(np.asarray(starts, np.int64) - first, lengths)
            + np.arange(total, dtype=np.int64))


# ====================================================================== the contenders
class Contender:
    """A way of computing one case: ``run()`` is the timed forward + backward; ``result(r)``
    turns what ``run`` returned into (output, {input: gradient}) in the canonical forms."""

    def __init__(self, name, lib, how, run, result):
        self.name, self.lib, self.how, self.run, self.result = name, lib, how, run, result


class Skipped:
    """A contender not run, with the reason (reported as its row)."""

    def __init__(self, name, lib, how, why):
        self.name, self.lib, self.how, self.why = name, lib, how, why


def _np(t):
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


def torch_contender(name, lib, how, case, leaves, forward, out_canon=None, grad_canon=None,
                    dout=None):
    """A contender run by torch autograd: ``forward()`` from the ``leaves`` (requires_grad
    tensors), its output's ``backward(dout)``; ``out_canon`` / ``grad_canon`` map its layout to
    the canonical one (e.g. padded -> jagged rows)."""
    g = case.torch.from_numpy(case.dout if dout is None else dout)

    def run():
        for t in leaves.values():
            t.grad = None
        out = forward()
        out.backward(g if g.shape == out.shape else g.view(out.shape))
        return out

    def result(out):
        o = _np(out)
        o = out_canon(o) if out_canon else o
        grads = {k: _np(t.grad) for k, t in leaves.items()}
        if grad_canon:
            grads = {k: grad_canon(k, v) for k, v in grads.items()}
        return o, grads

    return Contender(name, lib, how, run, result)


def leaves_of(case, names=None, padded=False, dim1=False):
    torch = case.torch
    out = {}
    for k, v in case.inputs.items():
        if names and k not in names:
            continue
        if padded and k == "x":
            v = case.data.padded(v)
        if dim1 and v.ndim == 1:
            v = v.reshape(-1, 1)
        out[k] = torch.from_numpy(np.ascontiguousarray(v)).requires_grad_()
    return out


def lodarrow_contenders(case):
    """lodarrow through ``lodarrow.torch`` (autograd) and through ``la.vjp`` on NumPy."""
    import lodarrow as la
    import lodarrow.torch as lt

    torch = case.torch
    dd, op = case.data, case.op
    off_t = torch.from_numpy(dd.off)
    lens_t = torch.from_numpy(dd.lens)
    cs = []
    lv = leaves_of(case)
    x = lv.get("x")

    la_fn, la_args, la_kwargs = la_call(case)

    def vjp(how, result):
        def run():
            out, pullback = la.vjp(la_fn, *la_args, **la_kwargs)
            first = out[0] if isinstance(out, tuple) else out
            shape = first.shape if isinstance(first, np.ndarray) else first.data.shape
            return out, pullback(case.dout.reshape(shape))
        cs.append(Contender("la.vjp", "lodarrow", how, run, result))

    def lt_add(how, forward, first=True):
        cs.append(torch_contender("lodarrow.torch", "lodarrow", how, case, lv,
                                  (lambda: forward()[0]) if first else forward))

    data = _values
    if op.startswith("pool_"):
        kind = op[5:]
        lt_add(f"lt.sequence_pool(x, offsets, {kind!r})",
               lambda: lt.sequence_pool(x, off_t, kind), first=False)
        vjp(f"la.vjp(la.sequence_pool, x, {kind!r}); pullback(dout)",
            lambda r: (data(r[0]), {"x": data(r[1][0])}))
    elif op == "softmax":
        lt_add("lt.sequence_softmax(x, offsets)", lambda: lt.sequence_softmax(x, off_t))
        vjp("la.vjp(la.sequence_softmax, x)",
            lambda r: (data(r[0]), {"x": data(r[1][0])}))
    elif op == "expand":
        lt_add("lt.sequence_expand(x, offsets)  (x: one row per sequence)",
               lambda: lt.sequence_expand(x, off_t))
        vjp("la.vjp(la.sequence_expand, x, y)",
            lambda r: (data(r[0]), {"x": r[1][0]}))
    elif op == "expand_as":
        lt_add("lt.sequence_expand_as(x, offsets)  (x: one row per sequence)",
               lambda: lt.sequence_expand_as(x, off_t))
        vjp("la.vjp(la.sequence_expand_as, x, y)",
            lambda r: (data(r[0]), {"x": r[1][0]}))
    elif op == "topk":
        rows_t = torch.arange(dd.B + 1)
        lt_add(f"lt.sequence_topk_avg_pooling(x, offsets, row=arange(B + 1), col=offsets, "
               f"topks={list(TOPKS)}, channel_num=1)",
               lambda: lt.sequence_topk_avg_pooling(x, off_t, row=rows_t, col=off_t,
                                                    topks=list(TOPKS), channel_num=1))
        vjp(f"la.vjp(la.sequence_topk_avg_pooling, x, row, col, {list(TOPKS)}, 1)",
            lambda r: (data(r[0]), {"x": data(r[1][0])}))
    elif op == "scatter":
        ids_t = torch.from_numpy(case.extra["ids"])
        lt_add("lt.sequence_scatter(x, ids, upd, index_offsets=offsets)  (x: (B, "
               f"{SCATTER_WIDTH}), one update per row of the workload)",
               lambda: lt.sequence_scatter(x, ids_t, lv["upd"], index_offsets=off_t),
               first=False)
        vjp("la.vjp(la.sequence_scatter, x, index, upd)",
            lambda r: (data(r[0]), dict(zip(("x", "upd"), _flat_grads(r[1])))))
    elif op == "pad":
        lt_add("lt.sequence_pad(x, offsets)  (width: the longest)",
               lambda: lt.sequence_pad(x, off_t))
        vjp("la.vjp(la.sequence_pad, x, 0.0)",
            lambda r: (data(r[0][0]), {"x": data(r[1][0])}))
    elif op == "unpad":
        lt_add("lt.sequence_unpad(x, lengths)", lambda: lt.sequence_unpad(x, lens_t))
        vjp("la.vjp(la.sequence_unpad, x, lengths)",
            lambda r: (data(r[0]), {"x": r[1][0]}))
    elif op == "concat":
        a, b = lv["a"], lv["b"]
        oa, ob = torch.from_numpy(case.extra["oa"]), torch.from_numpy(case.extra["ob"])
        lt_add("lt.sequence_concat([a, b], [offsets_a, offsets_b])",
               lambda: lt.sequence_concat([a, b], [oa, ob]))
        vjp("la.vjp(la.sequence_concat, [a, b])",
            lambda r: (data(r[0]), {"a": data(r[1][0][0]), "b": data(r[1][0][1])}))
    elif op == "reverse":
        lt_add("lt.sequence_reverse(x, offsets)", lambda: lt.sequence_reverse(x, off_t))
        vjp("la.vjp(la.sequence_reverse, x)",
            lambda r: (data(r[0]), {"x": data(r[1][0])}))
    elif op == "slice":
        st, ln = case.extra["start"], case.extra["length"]
        st_t, ln_t = torch.from_numpy(st), torch.from_numpy(ln)
        lt_add("lt.sequence_slice(x, offsets, offset, length)",
               lambda: lt.sequence_slice(x, off_t, st_t, ln_t))
        vjp("la.vjp(la.sequence_slice, x, offset, length)",
            lambda r: (data(r[0]), {"x": data(r[1][0])}))
    elif op == "conv":
        w = lv["w"]
        lt_add("lt.sequence_conv(x, offsets, w, context_start=-1, context_length=3)",
               lambda: lt.sequence_conv(x, off_t, w, context_start=-1, context_length=3))
        vjp("la.vjp(la.sequence_conv, x, w, context_start=-1, context_length=3)",
            lambda r: (data(r[0]), {"x": data(r[1][0]), "w": r[1][1]}))
    return cs


def torch_contenders(case):
    """PyTorch's own ways, each on its documented fast path."""
    torch = case.torch
    dd, op = case.data, case.op
    off_t = torch.from_numpy(dd.off)
    lens_t = torch.from_numpy(dd.lens)
    seg = torch.from_numpy(dd.seg)
    mask = torch.from_numpy(dd.mask())
    fs = (1,) * (dd.d > 1)
    fmask = mask.view(dd.B, dd.L, *fs)
    nfmask, nmask = ~fmask, ~mask       # held, as the mask is
    cs = []
    B, L = dd.B, dd.L

    def jag(o):                 # padded (B, L, ...) -> jagged rows
        return o[dd.mask()]

    def gjag(k, g):
        return g[dd.mask()] if k == "x" else g

    def add(name, how, forward, padded=False, nested=False, out_canon=None, dout=None,
            names=None):
        lv = leaves_of(case, names, padded=padded, dim1=nested)
        cs.append(torch_contender(name, "torch", how, case, lv, lambda: forward(**lv),
                                  out_canon=out_canon,
                                  grad_canon=(gjag if padded else None), dout=dout))

    def nt_of(x, off=off_t):
        # max_seqlen given, as the nested docs advise: without it to_padded_tensor pads every
        # sequence to the row count (B x N elements) and sum/max scan the offsets for it
        return torch.nested.nested_tensor_from_jagged(x, off, max_seqlen=L)

    pdout = (dd.padded(case.dout) if op in ("softmax", "reverse", "expand", "expand_as", "conv")
             else None)
    if op.startswith("pool_"):
        kind = op[5:]
        if kind in ("sum", "average", "sqrt"):
            red = "sum" if kind != "average" else "mean"
            if kind == "sqrt":
                sq = lens_t.double().sqrt().float().view(-1, *fs)
                add("segment_reduce", "torch.segment_reduce(x, 'sum', offsets=offsets, unsafe=True) / "
                    "sqrt(lengths)", lambda x: torch.segment_reduce(
                        x, "sum", offsets=off_t, axis=0, unsafe=True) / sq)
            else:
                add("segment_reduce", f"torch.segment_reduce(x, {red!r}, offsets=offsets, unsafe=True)",
                    lambda x: torch.segment_reduce(x, red, offsets=off_t, axis=0, unsafe=True))
            div = {"sum": None, "average": lens_t.float().view(-1, *fs),
                   "sqrt": lens_t.double().sqrt().float().view(-1, *fs)}[kind]
            add("index_add", "zeros(B, D).index_add(0, seg, x)" + ("" if div is None else
                f" / {'lengths' if kind == 'average' else 'sqrt(lengths)'}"),
                lambda x: (torch.zeros((B,) + dd.fshape).index_add(0, seg, x)
                           if div is None else
                           torch.zeros((B,) + dd.fshape).index_add(0, seg, x) / div))
            nmeth = "sum" if kind != "average" else "mean"
            add("nested", f"nested_tensor_from_jagged(x, offsets, max_seqlen=L).{nmeth}(dim=1)"
                + (" / sqrt(lengths)" if kind == "sqrt" else ""),
                lambda x: (getattr(nt_of(x), nmeth)(dim=1) if kind != "sqrt"
                           else nt_of(x).sum(dim=1) / sq.view(-1, 1)), nested=True,
                out_canon=lambda o: o.reshape(case.out_shape))
            mul = "x * mask" if dd.d == 1 else "x * mask[..., None]"
            add("padded+mask", f"({mul}).sum(1)" + ("" if div is None else
                f" / {'lengths' if kind == 'average' else 'sqrt(lengths)'}")
                + "; x padded (B, L, D)",
                lambda x: ((x * fmask).sum(1) if div is None else (x * fmask).sum(1) / div),
                padded=True)
        elif kind in ("max", "min"):
            am = "a" + kind
            fill = -math.inf if kind == "max" else math.inf
            add("segment_reduce", f"torch.segment_reduce(x, {kind!r}, offsets=offsets, "
                "unsafe=True)",
                lambda x: torch.segment_reduce(x, kind, offsets=off_t, axis=0, unsafe=True))
            idx = seg.view(-1, *fs).expand(dd.x.shape)
            add("scatter_reduce", f"zeros(B, D).scatter_reduce(0, seg, x, {am!r}, "
                "include_self=False)", lambda x: torch.zeros((B,) + dd.fshape).scatter_reduce(
                    0, idx, x, am, include_self=False))
            add("nested", f"nested_tensor_from_jagged(x, offsets, max_seqlen=L).{am}(dim=1)",
                lambda x: getattr(nt_of(x), am)(dim=1), nested=True,
                out_canon=lambda o: o.reshape(case.out_shape))
            add("padded+mask", f"x.masked_fill(~mask, {'-' if kind == 'max' else ''}inf)"
                f".{am}(1); x padded (B, L, D), ~mask held",
                lambda x: getattr(x.masked_fill(nfmask, fill), am)(1), padded=True)
        else:
            rows = off_t[:-1] if kind == "first" else off_t[1:] - 1
            add("index_select", f"x.index_select(0, {'offsets[:-1]' if kind == 'first' else 'offsets[1:] - 1'})",
                lambda x: x.index_select(0, rows))
            ar = torch.arange(B)
            add("padded+mask", "x[:, 0]; x padded (B, L, D)" if kind == "first" else
                "x[arange(B), lengths - 1]; x padded (B, L, D)",
                (lambda x: x[:, 0]) if kind == "first" else (lambda x: x[ar, lens_t - 1]),
                padded=True)
    elif op == "softmax":
        add("segment_reduce", "m = segment_reduce(x, 'max', offsets, unsafe=True); e = exp(x - m[seg]); "
            "e / segment_reduce(e, 'sum', offsets, unsafe=True)[seg]",
            lambda x: _seg_softmax(torch, x, off_t, seg))
        add("nested", "torch.softmax(nested_tensor_from_jagged(x[:, None], offsets, max_seqlen=L), dim=1)",
            lambda x: torch.softmax(nt_of(x), dim=1).values(), nested=True,
            dout=case.dout.reshape(-1, 1))
        add("padded+mask", "x.masked_fill(~mask, -inf).softmax(1); x padded (B, L), ~mask held",
            lambda x: x.masked_fill(nmask, -math.inf).softmax(1), padded=True, out_canon=jag,
            dout=pdout)
    elif op == "topk":
        add("padded+mask", f"top = x.masked_fill(~mask, -inf).topk({max(TOPKS)}, 1).values; "
            f"where(isinf(top), 0, top).cumsum(1)[:, k - 1] / k, k = {list(TOPKS)}; x padded "
            "(B, L), ~mask held", lambda x: _topk_padded(torch, mask, x), padded=True)
    elif op == "scatter":
        ids = torch.from_numpy(case.extra["ids"])
        flat = seg * SCATTER_WIDTH + ids                                       # held
        add("index_put", "x.index_put((seg, ids), upd, accumulate=True)",
            lambda x, upd: x.index_put((seg, ids), upd, accumulate=True))
        add("index_add", "x.view(-1).index_add(0, seg * W + ids, upd).view(B, W); the flat "
            "index held", lambda x, upd: x.view(-1).index_add(0, flat, upd).view(
                B, SCATTER_WIDTH))
    elif op in ("expand", "expand_as"):
        add("repeat_interleave", "x.repeat_interleave(lengths, dim=0, output_size=N)",
            lambda x: x.repeat_interleave(lens_t, dim=0, output_size=dd.rows))
        add("index_select", "x.index_select(0, seg)  (backward: index_add)",
            lambda x: x.index_select(0, seg))
        ex = (B, L) + dd.fshape
        add("padded+mask", "x[:, None].expand(B, L, D) * mask  (padded output)",
            lambda x: x.unsqueeze(1).expand(ex) * fmask, out_canon=jag, dout=pdout)
    elif op == "pad":
        add("nested", "torch.nested.to_padded_tensor(nested_tensor_from_jagged(x, offsets, max_seqlen=L), 0)",
            lambda x: torch.nested.to_padded_tensor(nt_of(x), 0.0), nested=True,
            out_canon=lambda o: o.reshape(case.out_shape))
        lens_list = dd.lens.tolist()
        if B <= PAD_SEQUENCE_MAX:
            add("pad_sequence", "pad_sequence(torch.split(x, lengths), batch_first=True)",
                lambda x: torch.nn.utils.rnn.pad_sequence(torch.split(x, lens_list),
                                                          batch_first=True))
        else:
            cs.append(Skipped("pad_sequence", "torch", "pad_sequence(torch.split(x, lengths), "
                              "batch_first=True)", f"not run at {B:,} sequences: {PAD_SEQUENCE_WHY}"))
        add("index_put", "zeros(B, L, D).index_put((mask,), x)",
            lambda x: torch.zeros((B, L) + dd.fshape).index_put((mask,), x))
    elif op == "unpad":
        add("masked index", "x[mask]", lambda x: x[mask])
        add("nested", "torch.nested.masked_select(x, mask).values()",
            lambda x: torch.nested.masked_select(x, mask if dd.d == 1 else
                                                 mask[..., None].expand(x.shape)).values())
    elif op == "concat":
        e = case.extra
        oa, ob = torch.from_numpy(e["oa"]), torch.from_numpy(e["ob"])
        sa, sb = torch.from_numpy(e["seg_a"]), torch.from_numpy(e["seg_b"])

        # the permutation from the two layouts, made once (held, as seg is)
        pos = torch.cat([torch.arange(len(e["seg_a"])) + ob[sa],
                         torch.arange(len(e["seg_b"])) + oa[sb + 1]])
        perm = torch.empty_like(pos).scatter_(0, pos, torch.arange(pos.shape[0]))
        add("index_select", "torch.cat([a, b]).index_select(0, perm); perm (from seg_a, seg_b "
            "and the offsets) held", lambda a, b: torch.cat([a, b]).index_select(0, perm))
        add("nested", "torch.cat([nt_a, nt_b], dim=1)",
            lambda a, b: torch.cat([nt_of(a, oa), nt_of(b, ob)], dim=1).values())
    elif op == "reverse":
        rrows = off_t[:-1][seg] + off_t[1:][seg] - 1 - torch.arange(dd.rows)   # held
        add("index_select", "x.index_select(0, rows); rows = start[seg] + end[seg] - 1 - "
            "arange(N) held", lambda x: x.index_select(0, rrows))
        add("nested", "torch.flip(nested_tensor_from_jagged(x, offsets, max_seqlen=L), [1])",
            lambda x: torch.flip(nt_of(x), [1]).values())
        rev = (lens_t[:, None] - 1 - torch.arange(L)[None, :]).clamp(min=0)
        rev = rev.view(B, L, *fs).expand((B, L) + dd.fshape)
        add("padded+mask", "x.gather(1, (lengths - 1 - arange(L)).clamp(0)) * mask; "
            "x padded (B, L, D)", lambda x: x.gather(1, rev) * fmask, padded=True,
            out_canon=jag, dout=pdout)
    elif op == "slice":
        st = torch.from_numpy(case.extra["start"])
        ln = torch.from_numpy(case.extra["length"])
        oo = torch.from_numpy(case.extra["out_off"])
        m = int(oo[-1])

        srows = (torch.repeat_interleave(off_t[:-1] + st - oo[:-1], ln, output_size=m)
                 + torch.arange(m))                                            # held
        add("index_select", "x.index_select(0, rows); rows (from offsets, offset, length) "
            "held", lambda x: x.index_select(0, srows))
        # the nested docs' route to a jagged view of part of each sequence: a non-contiguous
        # nested tensor (offsets: where each slice starts, lengths: how long), made contiguous
        vstart = torch.cat([off_t[:-1] + st, off_t[-1:]])                      # held
        add("nested", "nested_tensor_from_jagged(x, offsets=offsets[:-1] + offset (+ N), "
            "lengths=length).contiguous().values()",
            lambda x: torch.nested.nested_tensor_from_jagged(
                x, offsets=vstart, lengths=ln, max_seqlen=SLICE_MAX).contiguous().values(),
            nested=True, out_canon=lambda o: o.reshape(case.out_shape))
    elif op == "conv":
        # conv1d's own layout: x held as a contiguous (B, D, L) tensor, the output (B, F, L)
        # (its gradient held in that layout too); the filter as conv1d keeps its weight
        # (F, D, 3): the jagged filter's view, a leaf of its own, gradient mapped back
        cmask = mask.unsqueeze(1)                                       # (B, 1, L)

        def conv(x, w):
            return torch.nn.functional.conv1d(x, w, padding=1) * cmask

        w3 = case.inputs["w"].reshape(3, dd.d, CONV_FILTERS).transpose(2, 1, 0)
        lv = {"x": torch.from_numpy(np.ascontiguousarray(
                  dd.padded(case.inputs["x"]).transpose(0, 2, 1))).requires_grad_(),
              "w": torch.from_numpy(np.ascontiguousarray(w3)).requires_grad_()}
        cs.append(torch_contender(
            "padded conv1d+mask", "torch", "conv1d(x, w, padding=1) * mask; x padded "
            "(B, D, L) contiguous, w (F, D, 3)", case, lv, lambda: conv(**lv),
            out_canon=lambda o: o.transpose(0, 2, 1)[dd.mask()],
            grad_canon=lambda k, g: (g.transpose(0, 2, 1)[dd.mask()] if k == "x" else
                                     g.transpose(2, 1, 0).reshape(3 * dd.d, CONV_FILTERS)),
            dout=np.ascontiguousarray(pdout.transpose(0, 2, 1))))
        # im2col over the jagged rows: each row's 3 context rows by one gather (a zero row
        # past the end stands for outside the sequence), then one matmul
        rows = torch.arange(dd.rows)
        ln = lens_t[seg]
        pos = torch.from_numpy(dd.pos)
        ctx = torch.stack([torch.where((pos + k >= 0) & (pos + k < ln), rows + k,
                                       torch.tensor(dd.rows)) for k in (-1, 0, 1)], 1)
        ctx = ctx.reshape(-1)                                           # held, (N * 3,)
        zero = torch.zeros((1, dd.d))
        add("jagged im2col", "torch.cat([x, zeros(1, D)]).index_select(0, ctx).view(N, 3 D) @ w;"
            " ctx (N * 3 context rows) held",
            lambda x, w: torch.cat([x, zero]).index_select(0, ctx).view(dd.rows, 3 * dd.d) @ w)
    return cs


def _seg_softmax(torch, x, off, seg):
    m = torch.segment_reduce(x.detach(), "max", offsets=off, axis=0, unsafe=True)
    e = (x - m[seg]).exp()
    return e / torch.segment_reduce(e, "sum", offsets=off, axis=0, unsafe=True)[seg]


def fbgemm_contenders(case):
    """FBGEMM's jagged operators (``torch.ops.fbgemm``; import ``fbgemm_gpu`` first)."""
    torch = case.torch
    f = torch.ops.fbgemm
    dd, op = case.data, case.op
    off_t = torch.from_numpy(dd.off)
    lens_t = torch.from_numpy(dd.lens)
    B, L = dd.B, dd.L
    cs = []

    def add(name, how, forward, names=None, out_canon=None, dout=None):
        lv = leaves_of(case, names)
        cs.append(torch_contender(name, "fbgemm", how, case, lv, lambda: forward(**lv),
                                  out_canon=out_canon, dout=dout))

    def v2(x):
        return x if x.ndim == 2 else x.view(-1, 1)

    def j2pd(x, pad=0.0):
        return f.jagged_to_padded_dense(v2(x), [off_t], [L], pad)

    def unflat(o):
        return o.reshape(case.out_shape)

    if op.startswith("pool_"):
        kind = op[5:]
        if kind in ("sum", "average", "sqrt"):
            div = {"sum": None, "average": lens_t.float().view(-1, 1),
                   "sqrt": lens_t.double().sqrt().float().view(-1, 1)}[kind]
            tail = "" if div is None else (" / lengths" if kind == "average"
                                           else " / sqrt(lengths)")
            add("jagged_to_padded_dense", "jagged_to_padded_dense(x, [offsets], [L]).sum(1)"
                + tail, lambda x: (j2pd(x).sum(1) if div is None else j2pd(x).sum(1) / div),
                out_canon=unflat, dout=case.dout.reshape(B, -1))
            # FBGEMM's own fast reductions (no padding): a weighted sum over each sequence,
            # the weights (1, 1 / L or 1 / sqrt(L)) held like the offsets
            wb = (torch.ones(B, 1) if div is None else 1.0 / div).expand(B, L).contiguous()
            add("batched_dense_vec_jagged_2d_mul", "batched_dense_vec_jagged_2d_mul(w, x, "
                "offsets) with w (B, L) = " + {"sum": "1", "average": "1 / lengths",
                                               "sqrt": "1 / sqrt(lengths)"}[kind]
                + " held (no padded copy of x)",
                lambda x: f.batched_dense_vec_jagged_2d_mul(wb, v2(x), off_t),
                out_canon=unflat, dout=case.dout.reshape(B, -1))
            seg_t = torch.from_numpy(dd.seg)
            wr = (torch.ones(B, 1) if div is None else 1.0 / div)[seg_t].contiguous()
            add("jagged_jagged_bmm", "jagged_jagged_bmm(x, w, offsets, L) with w (N, 1) = "
                + {"sum": "1", "average": "1 / lengths[seg]",
                   "sqrt": "1 / sqrt(lengths[seg])"}[kind] + " held",
                lambda x: f.jagged_jagged_bmm(v2(x), wr, off_t, L).view(B, -1),
                out_canon=unflat, dout=case.dout.reshape(B, -1))
            if dd.d == 1:
                # FBGEMM registers no CPU autograd for segment_sum_csr: its backward written
                # by hand, the gradient of a segmented sum (dout to every row of its segment)
                csr = off_t.to(torch.int32)
                seg = torch.from_numpy(dd.seg)
                sdiv = None if div is None else div.view(-1)

                class SegmentSumCSR(torch.autograd.Function):
                    @staticmethod
                    def forward(ctx, x):
                        return f.segment_sum_csr(1, csr, x)

                    @staticmethod
                    def backward(ctx, g):
                        return g.index_select(0, seg)

                add("segment_sum_csr", "segment_sum_csr(1, offsets, x)" + tail + "; backward "
                    "by hand: dout.index_select(0, seg) (FBGEMM has no CPU autograd for it)",
                    lambda x: (SegmentSumCSR.apply(x) if sdiv is None
                               else SegmentSumCSR.apply(x) / sdiv))
            else:
                cs.append(Skipped("segment_sum_csr", "fbgemm", "segment_sum_csr(1, offsets, x)",
                                  "not applicable: segment_sum_csr sums all the features of a "
                                  "sequence into one value (no per-feature sum)"))
        elif kind in ("max", "min"):
            am, fill = ("amax", -math.inf) if kind == "max" else ("amin", math.inf)
            add("jagged_to_padded_dense", "jagged_to_padded_dense(x, [offsets], [L], "
                f"{'-' if kind == 'max' else ''}inf).{am}(1)",
                lambda x: getattr(j2pd(x, fill), am)(1), out_canon=unflat,
                dout=case.dout.reshape(B, -1))
        elif dd.d == 1:
            start = torch.zeros(B, dtype=torch.int64) if kind == "first" else lens_t - 1
            add("jagged_slice", f"jagged_slice(x, lengths, {'0' if kind == 'first' else 'lengths - 1'}, 1)",
                lambda x: f.jagged_slice(x, lens_t, start, 1)[0])
        else:
            col = 0 if kind == "first" else None
            ar = torch.arange(B)
            add("jagged_to_padded_dense", "jagged_to_padded_dense(x, [offsets], [L])"
                + ("[:, 0]" if col == 0 else "[arange(B), lengths - 1]"),
                lambda x: j2pd(x)[:, 0] if col == 0 else j2pd(x)[ar, lens_t - 1])
    elif op == "softmax":
        add("jagged_softmax", "jagged_softmax(x[:, None], offsets, L)[0]",
            lambda x: f.jagged_softmax(v2(x), off_t, L)[0], out_canon=lambda o: o.reshape(-1),
            dout=case.dout.reshape(-1, 1))
    elif op in ("expand", "expand_as"):
        ones = torch.ones(dd.rows, 1)
        add("jagged_dense_bmm", "jagged_dense_bmm(ones (N, 1), offsets, x.view(B, 1, D), "
            "L)[0], ones held (no padded copy)",
            lambda x: f.jagged_dense_bmm(ones, off_t, v2(x).view(B, 1, -1), L)[0],
            out_canon=lambda o: o.reshape(case.out_shape), dout=case.dout.reshape(dd.rows, -1))
        add("dense_to_jagged", "dense_to_jagged(x[:, None].expand(B, L, D), [offsets])[0]",
            lambda x: f.dense_to_jagged(v2(x).unsqueeze(1).expand(B, L, v2(x).shape[1]),
                                        [off_t])[0], out_canon=lambda o: o.reshape(
                                            case.out_shape),
            dout=case.dout.reshape(dd.rows, -1))
    elif op == "pad":
        add("jagged_to_padded_dense", "jagged_to_padded_dense(x, [offsets], [L])",
            lambda x: j2pd(x), out_canon=lambda o: o.reshape(case.out_shape),
            dout=case.dout.reshape(B, L, -1))
        # FBGEMM's other way to pad (CPU autograd: its PackSegments node)
        add("pack_segments", "pack_segments(x, lengths, L)",
            lambda x: f.pack_segments(x, lens_t, L),
            out_canon=lambda o: o.reshape(case.out_shape))
    elif op == "unpad":
        add("dense_to_jagged", "dense_to_jagged(x, [offsets])[0]",
            lambda x: f.dense_to_jagged(x if x.ndim == 3 else x.unsqueeze(2), [off_t])[0],
            out_canon=lambda o: o.reshape(case.out_shape), dout=case.dout.reshape(dd.rows, -1))
    elif op == "slice" and dd.d == 1:
        st = torch.from_numpy(case.extra["start"])
        add("jagged_slice", f"jagged_slice(x, lengths, offset, {SLICE_MAX})[0]",
            lambda x: f.jagged_slice(x, lens_t, st, SLICE_MAX)[0])
    return cs


#: what FBGEMM has no operator for, said in the table
FBGEMM_NONE = {"concat": "no jagged concatenation operator in FBGEMM",
               "reverse": "no jagged reverse operator in FBGEMM",
               "conv": "no jagged convolution operator in FBGEMM",
               "slice": "jagged_slice takes 1-D values only (D=1)",
               "scatter": "no jagged scatter operator in FBGEMM",
               "topk": "no jagged top-k pooling operator in FBGEMM"}


# ============================================================================= checking
def compare(got, ref):
    """None if ``got`` equals ``ref`` within float32 tolerance, else why not; and the largest
    error relative to max|ref|."""
    got = np.asarray(got, dtype=np.float64).ravel()
    ref = np.asarray(ref, dtype=np.float64).ravel()
    if got.shape != ref.shape:
        return f"it has {got.size} values, the reference {ref.size}", None
    if not ref.size:
        return None, 0.0
    scale = float(np.abs(ref).max()) or 1.0
    err = np.abs(got - ref)
    rel = float(err.max() / scale)
    bad = err > 1e-4 * np.abs(ref) + 2e-5 * scale
    if np.isnan(got).any() or bad.any():
        k = int(np.argmax(err))
        return (f"{int(bad.sum())} of {ref.size} values differ (worst at {k}: {got[k]:.6g} vs "
                f"{ref[k]:.6g})"), rel
    return None, rel


def check(c, ref):
    """Run ``c`` once and compare its output and gradients with ``ref``: a dict."""
    out_ref, grads_ref = ref
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out, grads = c.result(c.run())
    except Exception as exc:   # noqa: BLE001 - reported in the table
        return {"ok": False, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
                if str(exc) else type(exc).__name__}
    # torch's own warning says why a result is wrong (e.g. no autograd kernel registered)
    said = next((f" (torch warned: {str(w.message).splitlines()[0][:160]})" for w in caught
                 if "autograd" in str(w.message)), "")
    why, rel = compare(out, out_ref)
    worst = rel or 0.0
    if why:
        return {"ok": False, "error": f"output differs from torch's: {why}{said}"}
    for k, g in grads_ref.items():
        if grads.get(k) is None:
            return {"ok": False, "error": f"no gradient for {k}{said}"}
        why, rel = compare(grads[k], g)
        if why:
            return {"ok": False, "error": f"gradient of {k} differs from torch's: {why}{said}"}
        worst = max(worst, rel)
    return {"ok": True, "max_rel_err": worst}


def timed(c):
    t0 = time.perf_counter()
    c.run()
    return time.perf_counter() - t0


# ============================================================================ the worker
def worker_main(args):
    """``--worker``: FBGEMM's side, driven over stdin / stdout, one JSON object a line."""
    import torch

    torch.set_num_threads(args.threads)
    info = {"torch": torch.__version__, "threads": torch.get_num_threads(),
            "python": platform.python_version(), "numpy": np.__version__,
            "allocator": allocator_info()}
    try:
        import fbgemm_gpu

        info["fbgemm_gpu"] = getattr(fbgemm_gpu, "__version__", "?")
        from importlib import metadata

        try:
            info["fbgemm_gpu_dist"] = "fbgemm-gpu-cpu " + metadata.version("fbgemm-gpu-cpu")
        except metadata.PackageNotFoundError:
            info["fbgemm_gpu_dist"] = None
    except Exception as exc:   # noqa: BLE001 - reported
        info["error"] = f"{type(exc).__name__}: {exc}"[:300]
    print(json.dumps(info), flush=True)
    datas, cs = {}, {}
    for line in sys.stdin:
        msg = json.loads(line)
        if msg["cmd"] == "case":
            key = (msg["workload"], json.dumps(msg["params"]))
            if key not in datas:
                datas.clear()
                datas[key] = Data(**msg["params"])
            case = Case(msg["op"], datas[key])
            ref = case.reference()
            cs.clear()
            out = []
            for c in fbgemm_contenders(case):
                if isinstance(c, Skipped):
                    out.append({"ok": False, "error": c.why, "name": c.name, "how": c.how})
                    continue
                r = check(c, ref)
                r.update(name=c.name, how=c.how)
                if r["ok"]:
                    cs[c.name] = c
                out.append(r)
            print(json.dumps({"contenders": out}), flush=True)
        elif msg["cmd"] == "time":
            print(json.dumps({"s": timed(cs[msg["name"]])}), flush=True)
        else:
            break


class Worker:
    """The FBGEMM worker process, or why there is none."""

    def __init__(self, python, threads):
        self.proc, self.info, self.error = None, {}, None
        if not python:
            self.error = ("no --fbgemm-python given (an interpreter with fbgemm-gpu-cpu and "
                          "the torch it was built for)")
            return
        env = dict(os.environ, LODARROW_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads),
                   THP_MEM_ALLOC_ENABLE=os.environ.get("THP_MEM_ALLOC_ENABLE", "1"),
                   OPENBLAS_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads),
                   PYTHONWARNINGS="ignore")
        try:
            self.proc = subprocess.Popen(
                [python, os.path.abspath(__file__), "--worker", "--threads", str(threads)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                text=True, env=env)
            self.info = json.loads(self.proc.stdout.readline())
        except (OSError, json.JSONDecodeError) as exc:
            self.error = f"the worker did not start: {type(exc).__name__}: {exc}"
            self.proc = None
            return
        self.info["python_path"] = python
        if "error" in self.info:
            self.error = f"fbgemm_gpu does not import in {python}: {self.info['error']}"

    def ask(self, **msg):
        self.proc.stdin.write(json.dumps(msg) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the FBGEMM worker exited")
        return json.loads(line)

    def close(self):
        if self.proc:
            try:
                self.proc.stdin.write(json.dumps({"cmd": "close"}) + "\n")
                self.proc.stdin.close()
            except OSError:
                pass
            self.proc.wait(timeout=60)


class Remote:
    """A contender living in the worker: timed there, one call a message."""

    def __init__(self, worker, name, how):
        self.worker, self.name, self.how, self.lib = worker, name, how, "fbgemm"

    def time(self):
        return self.worker.ask(cmd="time", name=self.name)["s"]


# ============================================================================ the driver
def small_calls(args, torch, lt):
    """Per-call seconds of a 1,000-row sum pool forward + backward (D=16), lodarrow.torch
    against a bare torch.segment_reduce: ``args.small_pairs`` pairs of samples of
    ``args.small_calls`` calls each, the order alternating (A B, B A, A B, ...), each sample
    timed by ``time.thread_time`` (this thread's CPU time: what another process's load does
    not add) and ``time.perf_counter`` (wall).  The figure: the median of the pairs' ratios,
    with its interquartile range."""
    dd = Data(1000, 16, args.mean_length, args.sigma, args.max_length, args.seed + 7)
    off = torch.from_numpy(dd.off)
    x = torch.from_numpy(dd.x).requires_grad_()
    g = torch.from_numpy(np.random.default_rng(args.seed).standard_normal((dd.B, 16), dtype=np.float32))

    def lt_call():
        x.grad = None
        lt.sequence_pool(x, off, "sum").backward(g)

    def sr_call():
        x.grad = None
        torch.segment_reduce(x, "sum", offsets=off, axis=0, unsafe=True).backward(g)

    lt_call()
    a = x.grad.clone()
    sr_call()
    ok = bool(torch.allclose(a, x.grad, rtol=1e-5, atol=1e-5))
    fns = {"lodarrow.torch": lt_call, "segment_reduce": sr_call}
    n = args.small_calls
    clocks = {"cpu": time.thread_time, "wall": time.perf_counter}
    samples = {c: {k: [] for k in fns} for c in clocks}
    for fn in fns.values():      # warm-up
        for _ in range(max(10, n // 10)):
            fn()
    for p in range(args.small_pairs):
        for name in (("lodarrow.torch", "segment_reduce") if p % 2 == 0
                     else ("segment_reduce", "lodarrow.torch")):
            fn = fns[name]
            c0, w0 = time.thread_time(), time.perf_counter()
            for _ in range(n):
                fn()
            w1, c1 = time.perf_counter(), time.thread_time()
            samples["cpu"][name].append((c1 - c0) / n)
            samples["wall"][name].append((w1 - w0) / n)
    out = {"rows": dd.rows, "sequences": dd.B, "d": 16, "calls_per_sample": n,
           "pairs": args.small_pairs, "order": "alternating: A B, B A, A B, ... "
           "(A lodarrow.torch, B segment_reduce)", "checked": ok}
    for c in clocks:
        sm = samples[c]
        ratios = [a / b for a, b in zip(sm["lodarrow.torch"], sm["segment_reduce"])]
        q1, q2, q3 = (float(q) for q in np.quantile(ratios, [0.25, 0.5, 0.75]))
        out[c] = {"samples_s": sm, "median_s": {k: statistics.median(v) for k, v in sm.items()},
                  "ratios": ratios, "ratio_median": q2, "ratio_iqr": [q1, q3]}
    return out


def small_calls_sentence(sc):
    """The small-call figure in words, from the JSON (old runs: one wall clock, fixed order)."""
    if "cpu" not in sc:
        med = sc["median_s"]
        return (f"Small calls ({sc['rows']:,} rows of {sc['d']} in {sc['sequences']} "
                f"sequences, sum pool, forward + backward, the median of "
                f"{len(sc['samples_s']['segment_reduce'])} interleaved samples of "
                f"{sc['calls_per_sample']} calls; gradients equal: {sc['checked']}): "
                f"lodarrow.torch {med['lodarrow.torch'] * 1e6:.0f} us a call, a bare "
                f"torch.segment_reduce(..., unsafe=True) {med['segment_reduce'] * 1e6:.0f} us: "
                f"{sc['ratio']:.2f}x (goal: within 2x)"
                + (f"; the fastest samples: {sc['ratio_fastest']:.2f}x"
                   if "ratio_fastest" in sc else "") + ".")

    def clock(c, what):
        r = sc[c]
        med = r["median_s"]
        return (f"{what}: lodarrow.torch {med['lodarrow.torch'] * 1e6:.0f} us a call, "
                f"segment_reduce {med['segment_reduce'] * 1e6:.0f} us (medians), the median "
                f"ratio {r['ratio_median']:.2f}x (interquartile range "
                f"{r['ratio_iqr'][0]:.2f}-{r['ratio_iqr'][1]:.2f})")
    return (f"Small calls ({sc['rows']:,} rows of {sc['d']} in {sc['sequences']} sequences, "
            f"sum pool, forward + backward; gradients equal: {sc['checked']}), lodarrow.torch "
            f"against a bare torch.segment_reduce(..., unsafe=True) and its backward, "
            f"{sc['pairs']} pairs of samples of {sc['calls_per_sample']} calls each, the "
            f"order alternating (A B, B A, ...), each pair's ratio lodarrow.torch / "
            f"segment_reduce (goal: within 2x).  "
            + clock("cpu", "CPU time of the thread (time.thread_time)") + "; "
            + clock("wall", "wall time") + ".")


def run_case(args, op, wname, data, worker, params, bandwidth=None):
    """Check and time every contender of one case; a list of result rows.  With a list
    ``bandwidth`` (and ``bandwidth`` not in ``--skip``), then append to it the memory bandwidth
    row of lodarrow's own kernels on the case (``bandwidth_case``)."""
    case = Case(op, data)
    ref = case.reference()
    rows, local = [], []
    skip = set(filter(None, args.skip.split(",")))
    for c in lodarrow_contenders(case) + torch_contenders(case):
        if c.name in skip:
            continue
        if isinstance(c, Skipped):
            rows.append({"op": op, "workload": wname, "name": c.name, "lib": c.lib,
                         "how": c.how, "ok": False, "error": c.why})
            continue
        r = check(c, ref)
        r.update(op=op, workload=wname, name=c.name, lib=c.lib, how=c.how)
        rows.append(r)
        if r["ok"]:
            local.append((r, c.run))
    remote = []
    if worker.error:
        rows.append({"op": op, "workload": wname, "name": "fbgemm", "lib": "fbgemm",
                     "how": "", "ok": False, "error": "not run: " + worker.error})
    else:
        answer = worker.ask(cmd="case", op=op, workload=wname, params=params)
        for r in answer["contenders"]:
            r.update(op=op, workload=wname, lib="fbgemm")
            rows.append(r)
            if r["ok"]:
                remote.append((r, Remote(worker, r["name"], r["how"]).time))
        if not answer["contenders"]:
            why = FBGEMM_NONE.get(op, "no FBGEMM operator for this case")
            rows.append({"op": op, "workload": wname, "name": "fbgemm", "lib": "fbgemm",
                         "how": "", "ok": False, "error": "not run: " + why})
    runners = []
    for r, fn in local:
        runners.append((r, (lambda fn=fn: timed_local(fn))))
    runners += remote
    for r, fn in runners:   # warm-up
        fn()
    for r, _ in runners:
        r["samples_s"] = []
    load0 = os.getloadavg()[0]
    rounds = []                 # the 1-minute load after each round
    for _ in range(args.repeat):
        for r, fn in runners:
            r["samples_s"].append(fn())
        rounds.append(round(os.getloadavg()[0], 2))
    load1 = os.getloadavg()[0]
    for r, _ in runners:
        r["median_s"] = statistics.median(r["samples_s"])
        r["min_s"] = min(r["samples_s"])
        r["load"] = [round(load0, 2), round(load1, 2)]
        r["load_rounds"] = rounds
    if bandwidth is not None and "bandwidth" not in skip:
        bandwidth.append({"op": op, "workload": wname, **bandwidth_case(args, case, ref)})
    return rows


def timed_local(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


# ====================================================================== memory bandwidth
#: The least memory traffic of each of lodarrow's NumPy kernels, in bytes: (forward, backward).
#: Values read + values written + offsets / saved indices read, nothing else (no scratch, no
#: zeroing pass, no re-reads): N rows, B sequences, D features, L the longest sequence (the
#: padded width), M rows sequence_slice keeps, F conv filters, C the conv context (3), W
#: sequence_scatter's input width, K the k of top-k pooling (P the largest); e the value size
#: (float32: 4), i an index's (int64: 8), (B+1)*i one offsets array.
#: E.g. pool sum's forward reads x (N*D*e) and the offsets and writes out (B*D*e); its backward
#: reads dout (B*D*e) and the offsets and writes dx (N*D*e).  A kernel that moves more than this
#: pays for it in its share; the forward here is the operator alone (no saved index).
BYTES_MODEL = {
    **{f"pool_{p}": ("N*D*e + B*D*e + (B+1)*i",              # x read, out written
                     "B*D*e + N*D*e + (B+1)*i")              # dout read, dx written
       for p in ("sum", "average", "sqrt")},
    **{f"pool_{p}": ("N*D*e + B*D*e + (B+1)*i",
                     "B*D*e + B*D*i + N*D*e + (B+1)*i")      # + the saved max / min index
       for p in ("max", "min")},
    **{f"pool_{p}": ("B*D*e + B*D*e + (B+1)*i",              # one row of each sequence
                     "B*D*e + N*D*e + (B+1)*i")              # dx: zeros but that row
       for p in ("first", "last")},
    "softmax": ("N*D*e + N*D*e + (B+1)*i",
                "N*D*e + N*D*e + N*D*e + (B+1)*i"),          # dout and the saved output y
    **{op: ("B*D*e + N*D*e + (B+1)*i",
            "N*D*e + B*D*e + (B+1)*i") for op in ("expand", "expand_as")},
    # x (B, W) copied into out, the updates and their ids read; backward: dinput is dout
    # itself (no bytes), dupdates gathered from dout at the ids
    "scatter": ("B*W*e + B*W*e + N*e + N*i + (B+1)*i",
                "N*i + N*e + N*e + (B+1)*i"),
    # every value read, K averages a sequence written (row and col offsets read); backward:
    # dout read, the saved positions (P = the largest k a sequence) read, dx written whole
    "topk": ("N*e + B*K*e + 3*(B+1)*i",
             "B*K*e + B*P*i + N*e + 3*(B+1)*i"),
    "pad": ("N*D*e + B*L*D*e + (B+1)*i + B*i",                # the padded block, the lengths
            "N*D*e + N*D*e + (B+1)*i"),                       # dout's real slots only
    "unpad": ("N*D*e + N*D*e + B*i",                          # the real slots, the lengths
              "N*D*e + B*L*D*e + (B+1)*i"),                   # dx: the whole block
    "concat": ("N*D*e + N*D*e + 2*(B+1)*i",                   # a and b: N rows together
               "N*D*e + N*D*e + 2*(B+1)*i"),
    "reverse": ("N*D*e + N*D*e + (B+1)*i",
                "N*D*e + N*D*e + (B+1)*i"),
    "slice": ("M*D*e + M*D*e + (B+1)*i + 2*B*i",              # offset and length read
              "M*D*e + N*D*e + (B+1)*i + B*i + (B+1)*i"),     # dx: zeros outside the slices
    "conv": ("N*D*e + C*D*F*e + N*F*e + (B+1)*i",             # x, w read; out written
             "N*F*e + N*D*e + C*D*F*e + N*D*e + C*D*F*e + (B+1)*i"),  # dout, x, w; dx, dw
}
#: the goal: each backward at the forward's share of the copy bandwidth; a row
#: counts as there at this fraction of it
BW_GOAL = 0.9


def model_bytes(expr, sizes):
    """One of BYTES_MODEL's formulas in bytes, for a case's ``sizes``."""
    return int(eval(expr, {"__builtins__": {}}, dict(sizes)))  # our own table, no names but sizes


def la_call(case):
    """lodarrow's NumPy call of the case: ``(operator, positional args, keyword args)``, the
    operator and arguments the ``la.vjp`` row differentiates (LoDTensors built once)."""
    import lodarrow as la

    dd, op, inp = case.data, case.op, case.inputs
    x = (la.LoDTensor(inp["x"], lod=[dd.off])
         if "x" in inp and op not in ("expand", "expand_as", "unpad", "scatter")
         else None)   # expand's x: a row per sequence; unpad's: the padded block
    if op.startswith("pool_"):
        return la.sequence_pool, (x, op[5:]), {}
    if op == "expand_as":
        y = la.LoDTensor(np.lib.stride_tricks.as_strided(np.zeros(1, np.int8), (dd.rows,), (0,)),
                         lod=[dd.off])
        return la.sequence_expand_as, (inp["x"], y), {}
    if op == "topk":
        row = la.LoDTensor(np.lib.stride_tricks.as_strided(np.zeros(1, np.int8), (dd.B,), (0,)),
                           lod=[np.arange(dd.B + 1, dtype=np.int64)])
        col = la.LoDTensor(np.lib.stride_tricks.as_strided(np.zeros(1, np.int8), (dd.rows,), (0,)),
                           lod=[dd.off])
        return la.sequence_topk_avg_pooling, (x, row, col, list(TOPKS), 1), {}
    if op == "scatter":
        index = la.LoDTensor(case.extra["ids"], lod=[dd.off])
        return la.sequence_scatter, (inp["x"], index, inp["upd"]), {}
    if op == "softmax":
        return la.sequence_softmax, (x,), {}
    if op == "expand":
        y = la.LoDTensor(np.lib.stride_tricks.as_strided(np.zeros(1, np.int8), (dd.rows,), (0,)),
                         lod=[dd.off])
        return la.sequence_expand, (inp["x"], y), {}
    if op == "pad":
        return la.sequence_pad, (x, 0.0), {}
    if op == "unpad":
        return la.sequence_unpad, (inp["x"], dd.lens), {}
    if op == "concat":
        return la.sequence_concat, ([la.LoDTensor(inp["a"], lod=[case.extra["oa"]]),
                                     la.LoDTensor(inp["b"], lod=[case.extra["ob"]])],), {}
    if op == "reverse":
        return la.sequence_reverse, (x,), {}
    if op == "slice":
        return la.sequence_slice, (x, case.extra["start"], case.extra["length"]), {}
    if op == "conv":
        return la.sequence_conv, (x, inp["w"]), {"context_start": -1, "context_length": 3}
    raise ValueError(op)


def _values(t):
    return t.data if hasattr(t, "data") and not isinstance(t, np.ndarray) else t


def _flat_grads(grads):
    """The pullback's gradients, None dropped and sequence_concat's tuple opened, in order."""
    out = []
    for g in grads:
        if isinstance(g, tuple):
            out += _flat_grads(g)
        elif g is not None:
            out.append(_values(g))
    return out


def bandwidth_case(args, case, ref):
    """Memory bandwidth of lodarrow's own NumPy kernels on one case (no torch): the forward
    alone (``la.<op>(...)``), the pullback alone (``pullback(dout)`` of one ``la.vjp``) and a
    plain ``np.copyto`` of a buffer the size of the forward's input values, interleaved
    (forward, backward, copy, ...) ``args.repeat`` times after one warm-up each; medians.  GB/s
    is BYTES_MODEL's bytes over the median; a kernel's share is its GB/s over the copy's (read
    + written bytes).  Both results are first checked against the float64 reference."""
    dd, op = case.data, case.op
    fn, a, k = la_call(case)
    forward = (lambda: fn(*a, **k))
    sizes = {"N": dd.rows, "B": dd.B, "D": dd.d, "L": dd.L, "F": CONV_FILTERS, "C": 3,
             "M": int(case.extra["length"].sum()) if op == "slice" else 0,
             "W": SCATTER_WIDTH, "K": len(TOPKS), "P": max(TOPKS),
             "e": np.dtype(np.float32).itemsize, "i": np.dtype(np.int64).itemsize}
    fexpr, bexpr = BYTES_MODEL[op]
    row = {"bytes_model": {"forward": fexpr, "backward": bexpr, "sizes": sizes},
           "forward_bytes": model_bytes(fexpr, sizes), "backward_bytes": model_bytes(bexpr, sizes)}
    import lodarrow as la

    try:
        out = forward()
        _, pullback = la.vjp(fn, *a, **k)
        first = out[0] if isinstance(out, tuple) else out
        dout = case.dout.reshape(_values(first).shape)
        grads = _flat_grads(pullback(dout))
    except Exception as exc:   # noqa: BLE001 - reported in the table
        return dict(row, ok=False, error=f"{type(exc).__name__}: {str(exc)[:160]}")
    why, _ = compare(_values(first), ref[0])
    for name, g in zip(ref[1], grads):
        why = why or compare(g, ref[1][name])[0]
    if why or len(grads) != len(ref[1]):
        return dict(row, ok=False, error=f"differs from torch's: {why or 'gradients missing'}")
    # as many bytes as the forward moves (half read, half written; never fewer than its
    # input's, so a small input does not measure a copy held in cache)
    nbytes = max(sum(v.nbytes for v in case.inputs.values()), row["forward_bytes"] // 2)
    src = np.random.default_rng(0).standard_normal(nbytes // 4, dtype=np.float32)
    dst = np.empty_like(src)
    # the copy into a buffer made once, and a copy that allocates its output on every call
    # from NumPy (glibc's malloc, or what LD_PRELOAD put in its place: above glibc's mmap
    # threshold, fresh pages the OS faults in and zeroes every call)
    # and the least a backward returning new arrays from lodarrow's own allocator
    # (lodarrow._backends.cpu.empty: Arrow's pool from 1 MiB, which keeps freed pages mapped)
    # can take: allocating its gradients there and writing each of their bytes once (nothing
    # read); the same through np.empty for comparison
    from lodarrow._backends.cpu import empty as la_empty

    shapes = [(g.shape, g.dtype) for g in grads]
    fns = {"forward": forward, "backward": lambda: pullback(dout),
           "copy": lambda: np.copyto(dst, src), "fresh_copy": lambda: src.copy(),
           "write_floor": lambda: [la_empty(sh, dt).fill(0.5) for sh, dt in shapes],
           "write_floor_numpy": lambda: [np.empty(sh, dt).fill(0.5) for sh, dt in shapes]}
    samples = {name: [] for name in fns}
    for f in fns.values():   # warm-up
        f()
    load0 = os.getloadavg()[0]
    for _ in range(args.repeat):
        for name, f in fns.items():
            samples[name].append(timed_local(f))
    load1 = os.getloadavg()[0]
    med = {name: statistics.median(s) for name, s in samples.items()}
    copy_gbs = 2 * src.nbytes / med["copy"] / 1e9
    fresh_gbs = 2 * src.nbytes / med["fresh_copy"] / 1e9
    fgbs = row["forward_bytes"] / med["forward"] / 1e9
    bgbs = row["backward_bytes"] / med["backward"] / 1e9
    return dict(row, ok=True, forward_s=med["forward"], backward_s=med["backward"],
                copy_s=med["copy"], copy_bytes=2 * src.nbytes, copy_gbs=copy_gbs,
                fresh_copy_s=med["fresh_copy"], fresh_copy_gbs=fresh_gbs,
                write_floor_s=med["write_floor"], gradients_bytes=sum(g.nbytes for g in grads),
                backward_over_floor=med["backward"] / med["write_floor"],
                write_floor_allocator="lodarrow", write_floor_numpy_s=med["write_floor_numpy"],
                backward_over_numpy_floor=med["backward"] / med["write_floor_numpy"],
                forward_gbs=fgbs, backward_gbs=bgbs, forward_share=fgbs / copy_gbs,
                backward_share=bgbs / copy_gbs, share_ratio=bgbs / fgbs,
                samples_s=samples, load=[round(load0, 2), round(load1, 2)])


def driver(args):
    threads = args.threads
    os.environ["LODARROW_NUM_THREADS"] = str(threads)
    # torch's CPU allocator asks for transparent huge pages only when told (NumPy, and so
    # lodarrow, does for large arrays): told here, before torch allocates, and in the FBGEMM
    # worker, so every contender's fresh gradients cost the same page faults
    os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")
    import torch

    torch.set_num_threads(threads)
    import lodarrow as la
    import lodarrow.torch as lt

    started = time.time()
    report = {"command": _command(args), "settings": _settings(args), "note": args.note,
              "machine": machine(), "lodarrow": lodarrow_revision(la),
              "versions": {"python": platform.python_version(), "torch": torch.__version__,
                           "numpy": np.__version__, "lodarrow": la.__version__},
              "threads": {"torch.get_num_threads()": torch.get_num_threads(),
                          "LODARROW_NUM_THREADS": os.environ["LODARROW_NUM_THREADS"],
                          "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS"),
                          "THP_MEM_ALLOC_ENABLE": os.environ.get("THP_MEM_ALLOC_ENABLE"),
                          "lodarrow.openmp_enabled()": bool(la.openmp_enabled())},
              "allocators": {"process": allocator_info(), "lodarrow_pool": lodarrow_pool_info(),
                             "preload": args.preload},
              "started": _now(), "results": [], "workloads": {}, "bandwidth": []}
    worker = Worker(args.fbgemm_python, threads)
    report["fbgemm"] = {"info": worker.info, "error": worker.error, "note": args.fbgemm_note}
    print(f"fbgemm: {worker.error or worker.info}", file=sys.stderr)
    wls = workloads(args)
    only = set(filter(None, args.ops.split(",")))
    try:
        for wname, wl in wls.items():
            params = {"rows": wl["rows"], "d": wl["d"], "mean": args.mean_length,
                      "sigma": args.sigma, "max_length": args.max_length, "seed": args.seed}
            data = Data(**params)
            report["workloads"][wname] = {
                "rows": data.rows, "d": data.d, "sequences": data.B,
                "mean_length": float(data.lens.mean()),
                "median_length": float(np.median(data.lens)), "max_length": data.L,
                "padded_fraction": float(data.rows / (data.B * data.L)),
                "padded_fraction_256": padded_fraction(data.lens, 256)}
            for op, wnames in OPS:
                if wname not in wnames or (only and op not in only
                                           and op.split("_")[0] not in only):
                    continue
                t0 = time.perf_counter()
                rows = run_case(args, op, wname, data, worker, params, report["bandwidth"])
                report["results"] += rows
                if args.json:   # what is measured so far survives a run stopped part-way
                    _write_json(args.json, dict(report, complete=False))
                best = _summary_line(rows)
                bw = next((b for b in report["bandwidth"][-1:] if b["op"] == op
                           and b["workload"] == wname and b["ok"]), None)
                if bw:
                    best += (f"; bandwidth: forward {bw['forward_share']:.2f}, backward "
                             f"{bw['backward_share']:.2f} of the copy's")
                print(f"{op:>12} {wname:>4}: {best}  ({time.perf_counter() - t0:.1f} s, load "
                      f"{os.getloadavg()[0]:.1f})", file=sys.stderr, flush=True)
            del data
        report["small_calls"] = small_calls(args, torch, lt)
        print(small_calls_sentence(report["small_calls"]), file=sys.stderr)
    finally:
        worker.close()
    report["finished"] = _now()
    report["complete"] = True
    report["wall_s"] = round(time.time() - started, 1)
    report["load_at_end"] = round(os.getloadavg()[0], 2)
    return report


def allocator_info():
    """The malloc serving this process (glibc's unless LD_PRELOAD put another in its place)."""
    found = "glibc malloc"
    try:
        with open("/proc/self/maps") as f:
            maps = f.read()
        for name in ("jemalloc", "tcmalloc", "mimalloc"):
            if f"lib{name}" in maps:
                found = name
                break
    except OSError:
        found = "?"
    return {"malloc": found, "LD_PRELOAD": os.environ.get("LD_PRELOAD") or None}


def lodarrow_pool_info():
    """Where lodarrow's large outputs come from (lodarrow._backends.cpu.empty)."""
    from lodarrow._backends import cpu

    info = {"enabled": bool(cpu.USE_ARROW_POOL), "min_bytes": cpu.POOL_MIN_BYTES,
            "LODARROW_ARROW_POOL": os.environ.get("LODARROW_ARROW_POOL")}
    if cpu.USE_ARROW_POOL:
        import pyarrow as pa

        info["backend"] = pa.default_memory_pool().backend_name
    return info


def _write_json(path, report):
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(str(path) + ".tmp")
    tmp.write_text(json.dumps(report, indent=1, default=str) + "\n")
    tmp.replace(path)


def _summary_line(rows):
    timed_rows = [r for r in rows if r.get("median_s")]
    return "  ".join(f"{r['name']} {r['median_s'] * 1e3:.1f}" for r in timed_rows) + " ms"


def _now():
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")


def _settings(args):
    return {k: v for k, v in vars(args).items()
            if k not in ("json", "docs", "markdown", "from_json", "worker")}


def _command(args):
    from lodarrow._bench._docs import command_line

    env = ("LODARROW_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")
    return command_line("benchmarks/grad.py", args.argv,
                        env=env + (() if args.preload else ("LD_PRELOAD",)))  # --preload says it


def machine():
    model = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"cpu_model": model, "cpus": usable, "cpus_online": os.cpu_count(),
            "platform": platform.platform(), "load_at_start": round(os.getloadavg()[0], 2)}


def lodarrow_revision(la):
    """The lodarrow measured: its version, the commit and the tracked files changed from it."""
    from lodarrow._bench._docs import revision

    return {"version": la.__version__, **revision(ROOT)}


# ============================================================================ reporting
OP_TITLES = {**{f"pool_{p}": f"sequence_pool {p}" for p in POOLS},
             "softmax": "sequence_softmax", "expand": "sequence_expand",
             "pad": "sequence_pad", "unpad": "sequence_unpad",
             "concat": "sequence_concat (2 inputs)", "reverse": "sequence_reverse",
             "slice": f"sequence_slice (<= {SLICE_MAX} rows)", "expand_as": "sequence_expand_as",
             "scatter": f"sequence_scatter (into {SCATTER_WIDTH} columns)",
             "topk": f"sequence_topk_avg_pooling (k {', '.join(map(str, TOPKS))})",
             "conv": f"sequence_conv (context 3, {CONV_FILTERS} filters)"}


def _ms(s):
    return "—" if s is None else (f"{s * 1e3:,.1f}" if s >= 0.01 else f"{s * 1e3:.2f}")


def summary(report):
    """Per case: lodarrow.torch, la.vjp, the best peer and lodarrow's lead over it."""
    out = []
    by = {}
    for r in report["results"]:
        by.setdefault((r["op"], r["workload"]), []).append(r)
    for (op, wl), rows in by.items():
        lt = next((r for r in rows if r["name"] == "lodarrow.torch" and r.get("median_s")), None)
        vj = next((r for r in rows if r["name"] == "la.vjp" and r.get("median_s")), None)
        peers = [r for r in rows if r["lib"] != "lodarrow" and r.get("median_s")]
        best = min(peers, key=lambda r: r["median_s"]) if peers else None
        fastest = (lambda r: min(r["samples_s"]))
        lead_min = (min(fastest(r) for r in peers) / fastest(lt)) if peers and lt else None
        out.append({"op": op, "workload": wl, "lodarrow.torch": lt and lt["median_s"],
                    "la.vjp": vj and vj["median_s"],
                    "best_peer": best and f"{best['lib']} {best['name']}",
                    "best_peer_s": best and best["median_s"],
                    "lead": (best["median_s"] / lt["median_s"]) if best and lt else None,
                    "lead_fastest": lead_min})
    return out


def _case_name(op, wl):
    return f"{OP_TITLES.get(op, op)} {wl}"


def fbgemm_sentence(report):
    """Which torch FBGEMM's rows ran on, from the worker's recorded versions."""
    fbi = (report.get("fbgemm") or {}).get("info") or {}
    tv = fbi.get("torch")
    if not tv or report["fbgemm"].get("error"):
        return ""
    out = []
    if "+cu" in tv:
        out.append(f"torch {tv} is PyPI's CUDA build of torch, run here on the CPU (the torch "
                   f"that fbgemm-gpu-cpu's release was built against)")
    main = report["versions"]["torch"]
    if tv != main:
        out.append(f"FBGEMM's rows (their sum, amax, index_select and the rest included) run "
                   f"on torch {tv}, the torch rows on torch {main}")
    return "; ".join(out)


def allocator_sentence(report):
    """Which allocator each side's large arrays come from, as recorded (old runs: what
    lodarrow's code did then, the backend unrecorded)."""
    al = report.get("allocators")
    fbi = (report.get("fbgemm") or {}).get("info") or {}
    if not al:
        return ("Allocators (not recorded in this run's JSON): lodarrow's kernels take each "
                "output of 1 MiB or more from Arrow's memory pool, which keeps freed pages "
                "mapped; torch's tensors and NumPy's arrays (the peers' outputs and gradients) "
                "come from glibc's malloc, which above its mmap threshold gets fresh pages from "
                "the OS on every call (page faults, zeroing).")
    pool, proc = al["lodarrow_pool"], al["process"]
    lodarrow = (f"Arrow's memory pool ({pool.get('backend', '?')}) for each output of "
                f"{pool['min_bytes'] // (1 << 20)} MiB or more, which keeps freed pages mapped, "
                f"NumPy below that" if pool["enabled"] else
                "NumPy's allocator for every output (LODARROW_ARROW_POOL="
                f"{pool.get('LODARROW_ARROW_POOL')})")

    def malloc(a):
        return (f"{a['malloc']}" + (f" (LD_PRELOAD={a['LD_PRELOAD']})" if a.get("LD_PRELOAD")
                                    else ""))
    text = (f"Allocators: lodarrow's kernels: {lodarrow}; torch's tensors and NumPy's arrays "
            f"in this process: {malloc(proc)}")
    if proc["malloc"] == "glibc malloc":
        text += (" (glibc's malloc gets fresh pages from the OS for each large tensor, faulted "
                 "in and zeroed on every call; PyTorch's CPU performance guide advises "
                 "jemalloc or tcmalloc through LD_PRELOAD: `--preload`)")
    if "allocator" in fbi:
        text += f"; FBGEMM's worker: {malloc(fbi['allocator'])}"
    return text + "."


def load_statement(report):
    """The peak 1-minute load around the rows, and the cases run above threads + 1."""
    threads = report["threads"]["torch.get_num_threads()"]
    loads = {}
    for r in report["results"] + [b for b in report.get("bandwidth", []) if b.get("ok")]:
        vals = list(r.get("load") or []) + list(r.get("load_rounds") or [])
        if vals:
            key = (r["op"], r["workload"])
            loads[key] = max(loads.get(key, 0.0), max(vals))
    if not loads:
        return ""
    peak = max(loads.values())
    where = [k for k, v in loads.items() if v == peak]
    over = [k for k, v in loads.items() if v > threads + 1]
    text = (f"Peak 1-minute load average around the rows: {peak:.2f} (at "
            f"{', '.join(_case_name(*k) for k in where)}); ")
    if over:
        text += (f"{len(over)} of {len(loads)} cases ran with it above threads + 1 "
                 f"({threads + 1}): " + ", ".join(_case_name(*k) for k in over))
    else:
        text += f"no case ran with it above threads + 1 ({threads + 1})"
    return text + "."


def goal_rows(report):
    """Per case with a lodarrow row and a timed peer: by medians, ahead or behind; by the
    samples, resolved only when lodarrow's slowest call beats every peer's fastest ("ahead")
    or its fastest loses to some peer's slowest ("behind"), else "not resolved"."""
    by = {}
    for r in report["results"]:
        by.setdefault((r["op"], r["workload"]), []).append(r)
    out = []
    for key, rows in by.items():
        peers = [r for r in rows if r["lib"] != "lodarrow" and r.get("median_s")]
        if not peers:
            continue
        best = min(peers, key=lambda r: r["median_s"])
        row = {"case": key}
        for name in ("lodarrow.torch", "la.vjp"):
            mine = next((r for r in rows if r["name"] == name and r.get("median_s")), None)
            if mine is None:
                continue
            samples = mine.get("samples_s") or [mine["median_s"]]
            if max(samples) < min(min(p.get("samples_s") or [p["median_s"]]) for p in peers):
                resolved = "ahead"
            elif any(min(samples) > max(p.get("samples_s") or [p["median_s"]]) for p in peers):
                resolved = "behind"
            else:
                resolved = "not resolved"
            row[name] = {"lead": best["median_s"] / mine["median_s"], "resolved": resolved}
        out.append(row)
    return out


def goal_statement(report):
    """The goal "ahead of the best peer on every row", counted from the JSON."""
    rows = goal_rows(report)
    if not rows:
        return ""
    parts = []
    for name in ("lodarrow.torch", "la.vjp"):
        mine = [r for r in rows if name in r]
        if not mine:
            continue
        behind = [r for r in mine if r[name]["lead"] <= 1]
        ahead = len(mine) - len(behind)
        res = {k: [r for r in mine if r[name]["resolved"] == k]
               for k in ("ahead", "behind", "not resolved")}
        text = f"{name} ahead on {ahead} of {len(mine)} rows by medians"
        if behind:
            text += " (behind on " + ", ".join(
                f"{_case_name(*r['case'])}: {r[name]['lead']:.2f}x" for r in behind) + ")"
        text += (f"; by the samples (ahead only where its slowest call beats every peer's "
                 f"fastest) ahead on {len(res['ahead'])}")
        if res["behind"]:
            text += ", behind on " + ", ".join(_case_name(*r["case"]) for r in res["behind"])
        if res["not resolved"]:
            text += (", not resolved (the samples overlap) on "
                     + ", ".join(_case_name(*r["case"]) for r in res["not resolved"]))
        parts.append(text)
    return ("Goal, ahead of the best peer on every row: " + "; ".join(parts) + ".")


def coverage_statement(report):
    """Which differentiable operators (GRAD.md section 1) have rows in this run."""
    ops = {r["op"] for r in report["results"]}
    timed = [k for k, v in DIFFERENTIABLE.items() if v and set(v) <= ops]
    missing = [k + (f" (no row for {', '.join(OP_TITLES[o] for o in v if o not in ops)})"
                    if set(v) & ops else "")
               for k, v in DIFFERENTIABLE.items() if v and not set(v) <= ops]
    text = (f"Operators: {len(timed)} of the {sum(1 for v in DIFFERENTIABLE.values() if v)} "
            f"differentiable operators with a kernel of their own have every row here")
    if missing:
        text += "; not measured in this run: " + "; ".join(missing)
    return text + ".  " + UNTIMED + "."


def markdown(report):
    from lodarrow._bench._docs import changes_words

    m, s = report["machine"], report["settings"]
    rev, fb, th = report["lodarrow"], report["fbgemm"], report["threads"]
    fbi = fb.get("info") or {}
    head = (f"Commit: {rev['commit'] or '?'}{changes_words(rev)} (lodarrow {rev['version']}).  "
            f"Machine: "
            f"{m['cpu_model']}, {m['cpus']} CPUs usable ({m['cpus_online']} online), "
            f"{m['platform']}; " + (
                f"{report['started']} to {report['finished']} ({report['wall_s'] / 60:.1f} "
                f"min); 1-minute load average {m['load_at_start']:.1f} at the start, "
                f"{report['load_at_end']:.1f} at the end"
                if report.get("complete", True) else
                f"started {report['started']}, stopped part-way (the rows below are those "
                f"measured); 1-minute load average {m['load_at_start']:.1f} at the start")
            + " (a shared machine: the load around each case is in the last table).")
    if fb["error"]:
        fbgemm = f"FBGEMM not run: {fb['error']}"
    else:
        dist = fbi.get("fbgemm_gpu_dist") or f"fbgemm_gpu {fbi.get('fbgemm_gpu')}"
        nt = fbi.get("threads")
        fbgemm = (f"FBGEMM: {dist} with torch {fbi.get('torch')} (Python {fbi.get('python')}"
                  + (f", NumPy {fbi['numpy']}" if fbi.get("numpy") else "")
                  + f", a venv of its own, {nt} torch thread{'' if nt == 1 else 's'})")
        said = fbgemm_sentence(report)
        if said:
            fbgemm += f"; {said}"
    if fb.get("note"):
        fbgemm += f" ({fb['note'].rstrip('.')})"
    blas = (f", OPENBLAS_NUM_THREADS={th['OPENBLAS_NUM_THREADS']} (NumPy's BLAS: "
            f"sequence_conv's matmuls)" if th.get("OPENBLAS_NUM_THREADS") else "")
    threads = (f"Threads: torch.set_num_threads({th['torch.get_num_threads()']}) and "
               f"LODARROW_NUM_THREADS={th['LODARROW_NUM_THREADS']}{blas}"
               + (f"; THP_MEM_ALLOC_ENABLE={th['THP_MEM_ALLOC_ENABLE']} (torch's CPU allocator "
                  f"asks for transparent huge pages for large tensors, as NumPy does for "
                  f"large arrays)"
                  if th.get("THP_MEM_ALLOC_ENABLE") else "")
               + f".  Versions: Python "
               f"{report['versions']['python']}, torch {report['versions']['torch']}, NumPy "
               f"{report['versions']['numpy']}; {fbgemm}.")
    sizes = "; ".join(f"{k}: {v['rows']:,} rows of {v['d']} in {v['sequences']:,} sequences "
                      f"(mean {v['mean_length']:.1f}, longest {v['max_length']}; real rows "
                      f"{100 * v['padded_fraction']:.0f}% of the padded block"
                      + (f", {100 * v['padded_fraction_256']:.0f}% in batches of 256 "
                         f"sequences padded each to its own longest"
                         if "padded_fraction_256" in v else "") + ")"
                      for k, v in report["workloads"].items())
    work = (f"Workloads: float32, lognormal lengths (mean {s['mean_length']:g} before "
            f"clipping to [1, {s['max_length']}], sigma {s['sigma']:g}): {sizes}.  One call "
            f"is one batch of all the workload's sequences: the padded rows pad to its "
            f"longest.")
    method = (f"Each figure: the median of {s['repeat']} forward + backward calls, in "
              "milliseconds, the contenders of a case interleaved after one warm-up call each. "
              "Every row's output and input gradients were first checked against a float64 "
              "PyTorch reference (the largest error relative to max|ref| is in the last table); "
              "a row that raised or differed was not timed.  Lead: the best peer's median over "
              "lodarrow's (above 1: lodarrow ahead); the last column compares each one's "
              "fastest call instead, less disturbed by a loaded machine.  lodarrow.torch's "
              "rows validate their offsets inside every call; la.vjp's hold LoDTensors, whose "
              "LoD was validated once, when they were made.")
    note = [report["note"], ""] if report.get("note") else []
    load = load_statement(report)
    lines = [f"Command: `{report['command']}`", "", head + (f"  {load}" if load else ""), "",
             *note, threads, "", allocator_sentence(report), "", work, "", method, "",
             ("| operator | workload | lodarrow.torch | la.vjp (NumPy) | best peer | its ms "
              "| lead of lodarrow.torch | lead of la.vjp | lead of lodarrow.torch, fastest "
              "calls |"),
             "| --- | --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |"]
    for r in summary(report):
        lead = "—" if r["lead"] is None else f"{r['lead']:.2f}x"
        flead = "—" if r["lead_fastest"] is None else f"{r['lead_fastest']:.2f}x"
        vlead = ("—" if r["best_peer_s"] is None or r["la.vjp"] is None
                 else f"{r['best_peer_s'] / r['la.vjp']:.2f}x")
        lines.append(f"| {OP_TITLES[r['op']]} | {r['workload']} | {_ms(r['lodarrow.torch'])} "
                     f"| {_ms(r['la.vjp'])} | {r['best_peer'] or '—'} | "
                     f"{_ms(r['best_peer_s'])} | {lead} | {vlead} | {flead} |")
    goal = goal_statement(report)
    if goal:
        lines += ["", goal]
    lines += ["", coverage_statement(report)]
    sc = report.get("small_calls")
    if sc:
        lines += ["", small_calls_sentence(sc)]
    if report.get("bandwidth"):      # runs before it measured none
        lines += ["", *bandwidth_markdown(report)]
    lines += ["", "<details><summary>Every row: what it times, ms, load, check</summary>", "",
              "| operator | workload | library | contender | what is timed | ms | load | check |",
              "| --- | --- | --- | --- | --- | ---: | --- | --- |"]
    for r in report["results"]:
        chk = (f"ok ({r['max_rel_err']:.1e})" if r["ok"] else r["error"]).replace("|", "/")
        load = f"{r['load'][0]:.1f}-{r['load'][1]:.1f}" if r.get("load") else ""
        how = f"`{r['how']}`".replace("|", "/") if r["how"] else ""
        lines.append(f"| {OP_TITLES[r['op']]} | {r['workload']} | {r['lib']} | {r['name']} | "
                     f"{how} | {_ms(r.get('median_s'))} | {load} | {chk} |")
    lines += ["", "</details>"]
    return "\n".join(lines) + "\n"


def _ms3(s):
    """Milliseconds to three significant figures (a small run's kernels take microseconds)."""
    ms = s * 1e3
    return f"{ms:,.0f}" if ms >= 100 else f"{ms:.3g}"


#: What the table's method means for its rows (no figures: those are the table's, and the
#: statements computed from them).
BW_READING = (
    "The model counts bytes, not the cache lines they sit in, and no read for ownership of a "
    "line written.  sequence_conv's backward runs two matrix products to the forward's one, "
    "each of the forward's size.")

#: first / last pooling: the forward moves one row per sequence, counted in bytes, not in the
#: cache lines those rows sit in, so its share is under-counted and the ratio over-stated
UNDERCOUNTED = ("pool_first", "pool_last")

#: Operators bound by arithmetic, not memory: their floating-point operations, forward and
#: backward (sequence_conv: an (N, C*D) @ (C*D, F) product forward; dx's and dw's products of
#: the same size backward), so the goal is read as the backward's rate of them at BW_GOAL x
#: the forward's (the memory share is shown too)
FLOP_MODEL = {"conv": ("2*N*C*D*F", "2*N*F*C*D + 2*N*C*D*F")}


def flop_ratio(r):
    """The backward's FLOP rate over the forward's for a FLOP_MODEL row (None elsewhere)."""
    model = FLOP_MODEL.get(r["op"])
    if model is None or not r.get("ok"):
        return None
    sizes = r["bytes_model"]["sizes"]
    fwd, bwd = (model_bytes(expr, sizes) for expr in model)
    return (bwd / r["backward_s"]) / (fwd / r["forward_s"])


def write_heavy(r):
    """Whether the row's backward mostly writes (its gradients are at least half the bytes it
    must move): the rows where writing the gradients is a least time (not, e.g., a
    reduction)."""
    return ("backward_over_floor" in r and "gradients_bytes" in r
            and 2 * r["gradients_bytes"] >= r["backward_bytes"])


def bandwidth_statement(rows):
    """How many rows meet the goal (backward at BW_GOAL x the forward's share or more), how
    many of those only because their forward is under-counted, and which rows do not:
    computed from the JSON's rows."""
    ok = [r for r in rows if r["ok"]]
    compute = [r for r in ok if r["op"] in FLOP_MODEL]
    memory = [r for r in ok if r not in compute]
    below = [r for r in memory if round(r["share_ratio"], 2) < BW_GOAL]   # as the table shows
    trivial = [r for r in memory if r not in below and r["op"] in UNDERCOUNTED]
    failed = [r for r in rows if not r["ok"]]
    text = (f"Backward at >= {BW_GOAL:g}x the forward's share of the copy bandwidth on "
            f"{len(memory) - len(below)} of {len(memory)} rows"
            + (" bound by memory" if compute else ""))

    if trivial:
        text += (f" ({len(trivial)} of them first / last pooling, "
                 + ", ".join(f"{r['workload']} {r['op'][5:]} {r['share_ratio']:.2f}x"
                             for r in trivial)
                 + ", whose forward moves one row per sequence, counted in bytes and not in "
                   "the cache lines it sits in: they pass trivially; "
                 + f"{len(memory) - len(below) - len(trivial)} of "
                   f"{len(memory) - len(trivial)} without them)")
    if below:
        text += "; not met on: " + ", ".join(
            f"{_case_name(r['op'], r['workload'])} ({r['share_ratio']:.2f}x)" for r in below)
    if failed:
        text += "; not measured: " + ", ".join(
            _case_name(r["op"], r["workload"]) for r in failed)
    text += "."
    for r in compute:
        met = round(flop_ratio(r), 2) >= BW_GOAL
        rounds = flop_rounds(r)
        text += (f"  {_case_name(r['op'], r['workload'])} is judged by its rate of "
                 f"floating-point operations instead (a matrix product is bound by arithmetic, "
                 f"not memory; the backward runs {_flop_words(r)}; its memory share is in the "
                 f"table): by medians {flop_ratio(r):.2f}x the forward's, "
                 f"{'met' if met else 'not met'}")
        if rounds:
            text += (f"; round by round (each backward against the forward of its round) "
                     f"{min(rounds):.2f}x-{max(rounds):.2f}x, at or above {BW_GOAL:g}x in "
                     f"{sum(round(x, 2) >= BW_GOAL for x in rounds)} of {len(rounds)}")
        text += "."
    return text


def flop_rounds(r):
    """The FLOP-rate ratio of each round (the backward's sample against the forward's of the
    same round: they run interleaved); [] without samples."""
    f, b = (r.get("samples_s", {}).get(k) or [] for k in ("forward", "backward"))
    model = FLOP_MODEL[r["op"]]
    sizes = r["bytes_model"]["sizes"]
    fwd, bwd = (model_bytes(expr, sizes) for expr in model)
    return [(bwd / tb) / (fwd / tf) for tf, tb in zip(f, b)]


def _flop_words(r):
    """``r``'s floating-point operations forward and backward, in words."""
    sizes = r["bytes_model"]["sizes"]
    fwd, bwd = (model_bytes(expr, sizes) for expr in FLOP_MODEL[r["op"]])
    return f"{bwd / 1e9:.2f} G of them to the forward's {fwd / 1e9:.2f} G"


def floor_statement(rows):
    """The write-heavy backwards against writing their gradients (through the allocator the
    JSON says), counted: under 1 means the backward took less than that."""
    heavy = [r for r in rows if r["ok"] and write_heavy(r)]
    if not heavy:
        return ""
    pooled = all(r.get("write_floor_allocator") == "lodarrow" for r in heavy)
    under = [r for r in heavy if round(r["backward_over_floor"], 2) < 1]
    text = (f"Write-heavy backwards ({len(heavy)} rows) against allocating their gradients "
            + ("from lodarrow's own allocator" if pooled else "with `np.empty`")
            + " and writing them once: at or above that time on "
            f"{len(heavy) - len(under)}")
    if under:
        text += (", under it on " + ", ".join(
            f"{_case_name(r['op'], r['workload'])} ({r['backward_over_floor']:.2f}x)"
            for r in under))
        if not pooled:
            text += (" (`np.empty` takes fresh pages from glibc on every call while lodarrow's "
                     "kernels draw their large outputs from Arrow's pool, so this time is no "
                     "floor for them)")
        else:
            text += " (within the samples' noise or no floor there)"
    numpy_ = [r for r in heavy if "backward_over_numpy_floor" in r]
    if numpy_:
        lo = min(r["backward_over_numpy_floor"] for r in numpy_)
        hi = max(r["backward_over_numpy_floor"] for r in numpy_)
        text += (f"; against the same through `np.empty` (fresh pages from the process's malloc) "
                 f"{lo:.2f}x-{hi:.2f}x")
    return text + "."


def bandwidth_markdown(report):
    """The table of ``report["bandwidth"]`` (lodarrow's own kernels against a plain copy)."""
    rows = report["bandwidth"]
    s, th = report["settings"], report["threads"]
    pooled = all(r.get("write_floor_allocator") == "lodarrow" for r in rows if r["ok"])
    floor_words = (
        "allocating the gradients' shapes from lodarrow's own allocator "
        "(`lodarrow._backends.cpu.empty`: Arrow's pool from 1 MiB, as the kernels' outputs) "
        "and writing each byte once, nothing read: the least a backward returning new arrays "
        "from that allocator can take" if pooled else
        "`np.empty(...).fill(...)` of the gradients' shapes (NumPy's allocator: glibc, fresh "
        "pages the OS zeroes on every call above its mmap threshold; not the allocator "
        "lodarrow's kernels use for outputs of 1 MiB or more, Arrow's pool, so no floor for "
        "them)")
    floor = floor_statement(rows)
    lines = [(f"**Memory bandwidth of lodarrow's kernels.**  lodarrow's own NumPy kernels, no "
              f"torch: the forward alone (`la.<op>(...)`) and the pullback alone "
              f"(`pullback(dout)` of one `la.vjp`), each the median of {s['repeat']} calls "
              f"interleaved with a plain `np.copyto` of max(the forward's input bytes, half "
              f"the bytes the forward moves) into a buffer made once (the machine's copy "
              f"bandwidth: bytes read + written)"
              + (" and with the same copy allocating its output from NumPy on every call "
                 "(`src.copy()`: \"fresh copy\"; lodarrow's kernels allocate large outputs "
                 "from Arrow's pool instead)" if all(
                     "fresh_copy_gbs" in r for r in rows if r["ok"]) else "")
              + f", LODARROW_NUM_THREADS={th['LODARROW_NUM_THREADS']}.  GB/s: the least "
              f"bytes the kernel must move (the model below) over its median time; share: its "
              f"GB/s over the copy's; the goal: each backward at the forward's share, the last "
              f"column but one (which does not use the copy) at {BW_GOAL:.2f}x or more; "
              f"the last column: the backward's median over that of {floor_words}, in the "
              f"same rounds, given where the gradients are at least half the bytes the "
              f"backward must move" + (" (elsewhere, e.g. a reduction, it is no floor)" if pooled
                                       else "") + ".  "
              + bandwidth_statement(rows) + ("  " + floor if floor else "") + "  "
              + BW_READING), "",
             ("| operator | workload | copy MB | forward ms | backward ms | copy GB/s "
              "| fresh copy GB/s | forward GB/s | backward GB/s | forward share "
              "| backward share | backward / forward share | backward / writing its gradients |"),
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
             "| ---: |"]
    for r in rows:
        head = f"| {OP_TITLES[r['op']]} | {r['workload']} |"
        if not r["ok"]:
            lines.append(head + " — |" * 10 + " not measured: " + r["error"].replace("|", "/")
                         + " |")
            continue
        lines.append(f"{head} {r['copy_bytes'] / 2 / 1e6:.2f} | {_ms3(r['forward_s'])} | "
                     f"{_ms3(r['backward_s'])} | {r['copy_gbs']:.1f} | "
                     + (f"{r['fresh_copy_gbs']:.1f}" if "fresh_copy_gbs" in r else "—")
                     + f" | {r['forward_gbs']:.1f} | {r['backward_gbs']:.1f} | "
                     f"{r['forward_share']:.2f} | {r['backward_share']:.2f} | "
                     f"{r['share_ratio']:.2f}x | "
                     + (f"{r['backward_over_floor']:.2f}x" if write_heavy(r) else "—") + " |")
    lines += ["", "<details><summary>The bytes each kernel must move (the model)</summary>", "",
              ("N rows, B sequences, D features, L the longest sequence (the padded width), M "
               "rows sequence_slice keeps, F conv filters, C the context (3), W "
               f"sequence_scatter's input width ({SCATTER_WIDTH}), K the k of top-k pooling "
               f"({len(TOPKS)}: {', '.join(map(str, TOPKS))}; P the largest); e the value size "
               "(float32: 4 bytes), i an index's (int64: 8); (B+1)*i is one offsets array.  "
               "Values read + values written + offsets and saved indices read, nothing else."),
              "", "| operator | forward | backward |", "| --- | --- | --- |"]
    seen = set()
    for r in rows:
        if r["op"] not in seen:
            seen.add(r["op"])
            m = r["bytes_model"]
            lines.append(f"| {OP_TITLES[r['op']]} | `{m['forward']}` | `{m['backward']}` |")
    lines += ["", "</details>"]
    return lines


#: the small-call figure quoted in the prose (docs/gradients.md, "How it runs"), between
#: these inline markers: replaced from the JSON like the Speed section
SMALL_BEGIN = "<!-- small-calls:begin -->"
SMALL_END = "<!-- small-calls:end -->"


def small_calls_prose(report):
    """The small-call figure as the prose outside the Speed section quotes it."""
    sc, m = report["small_calls"], report["machine"]
    threads = report["threads"]["torch.get_num_threads()"]
    where = (f"{threads} thread{'s' if threads != 1 else ''} on a shared "
             f"{m['cpus']}-CPU machine")
    if "cpu" not in sc:
        med = sc["median_s"]
        return (f"{sc['ratio']:.2f} times a bare `torch.segment_reduce` and its backward "
                f"({med['lodarrow.torch'] * 1e6:.0f} us against "
                f"{med['segment_reduce'] * 1e6:.0f} us a call, the medians of "
                f"{len(sc['samples_s']['segment_reduce'])} interleaved samples, {where})")
    c, w = sc["cpu"], sc["wall"]
    return (f"{c['ratio_median']:.2f} times the CPU time of a bare `torch.segment_reduce` and "
            f"its backward ({c['median_s']['lodarrow.torch'] * 1e6:.0f} us against "
            f"{c['median_s']['segment_reduce'] * 1e6:.0f} us a call; the median of "
            f"{sc['pairs']} paired ratios, samples in alternating order, interquartile range "
            f"{c['ratio_iqr'][0]:.2f}-{c['ratio_iqr'][1]:.2f}; in wall time "
            f"{w['ratio_median']:.2f} times, {w['ratio_iqr'][0]:.2f}-{w['ratio_iqr'][1]:.2f}; "
            f"{where})")


def write_docs(path, table, report=None):
    """Replace the generated section of ``path`` (between the markers), or append it under
    ``## Speed``; and the small-call figure between its inline markers, where they are."""
    path = Path(path)
    text = path.read_text() if path.exists() else ""
    if report is not None and report.get("small_calls") and SMALL_BEGIN in text:
        a = text.index(SMALL_BEGIN) + len(SMALL_BEGIN)
        b = text.index(SMALL_END, a)
        text = text[:a] + small_calls_prose(report) + text[b:]
    block = f"{BEGIN}\n\n{table}\n{END}"
    start = BEGIN.split(":")[0] + ":begin"
    if start in text and END in text:
        a = text.index(start)
        b = text.index(END) + len(END)
        text = text[:a] + block + text[b:]
    else:
        intro = ("## Speed\n\n" + NEW_INTRO + "\n\n")
        text = text.rstrip("\n") + "\n\n" + intro + block + "\n"
    path.write_text(text)


# ================================================================================= main
def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows-d1", type=float, default=1e7, help="rows at D=1 (default 1e7)")
    p.add_argument("--rows-d16", type=float, default=1e6, help="rows at D=16 (default 1e6)")
    p.add_argument("--small", action="store_true", help="both sizes / 100 (a quick run)")
    p.add_argument("--mean-length", type=float, default=60.0)
    p.add_argument("--sigma", type=float, default=0.6)
    p.add_argument("--max-length", type=int, default=256,
                   help="lengths are clipped to [1, max-length] (default 256)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeat", type=int, default=5,
                   help="timed calls each (median; default 5; at least 1, and fewer than 5 "
                        "warns: the samples then say little about the noise)")
    p.add_argument("--threads", type=int,
                   default=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                   else os.cpu_count(),
                   help="torch.set_num_threads and LODARROW_NUM_THREADS (default: usable CPUs)")
    p.add_argument("--ops", default="",
                   help="comma-separated: pool, pool_max, softmax, expand, pad, unpad, concat, "
                        "reverse, slice, conv (default all)")
    p.add_argument("--skip", default="",
                   help="comma-separated contender names not to run (e.g. nested,pad_sequence;"
                        " bandwidth: not the memory bandwidth of lodarrow's kernels)")
    p.add_argument("--small-calls", type=int, default=200, help="calls a small-call sample")
    p.add_argument("--small-pairs", type=int, default=40,
                   help="pairs of small-call samples, the order alternating (default 40)")
    p.add_argument("--fbgemm-python", default=None,
                   help="an interpreter with fbgemm-gpu-cpu and its torch (FBGEMM's rows)")
    p.add_argument("--note", default="",
                   help="a sentence about this run (why these sizes or threads), into the JSON "
                        "and the table")
    p.add_argument("--fbgemm-note", default="",
                   help="how FBGEMM's interpreter was chosen (into the JSON and the table)")
    p.add_argument("--json", help="write everything measured here")
    p.add_argument("--markdown", help="write the generated tables here")
    p.add_argument("--docs", help="replace the generated section of this Markdown file")
    p.add_argument("--from-json", help="measure nothing: the tables from this JSON")
    p.add_argument("--preload", default=None, metavar="PATH",
                   help="a malloc library (e.g. /usr/lib/x86_64-linux-gnu/libjemalloc.so.2, as "
                        "PyTorch's CPU performance guide advises) for this process and FBGEMM's "
                        "worker: the benchmark re-executes itself with LD_PRELOAD=PATH unless "
                        "it is already set so (lodarrow's outputs of 1 MiB or more still come "
                        "from Arrow's pool); recorded in the JSON")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.argv = list(argv)
    if args.repeat < 1:
        p.error("--repeat must be >= 1")
    if args.repeat < 5 and not args.worker and not args.from_json:
        print(f"warning: --repeat {args.repeat}: fewer than 5 samples a row; leads near 1 "
              f"are then not resolved", file=sys.stderr)
    if args.preload and not os.path.exists(args.preload):
        p.error(f"--preload {args.preload}: no such file")
    return args


def _preloaded(path):
    return path in os.environ.get("LD_PRELOAD", "").replace(":", " ").split()


def preload_exec(args, as_program):
    """With ``--preload PATH`` not yet in LD_PRELOAD: re-execute this script with it (the
    loader reads LD_PRELOAD only when a process starts), or, when main() was called from
    Python, refuse."""
    if not args.preload or args.worker or args.from_json or _preloaded(args.preload):
        return
    if not as_program:
        raise SystemExit(f"--preload {args.preload}: LD_PRELOAD is read when a process "
                         f"starts; run benchmarks/grad.py as a program")
    env = dict(os.environ, LD_PRELOAD=" ".join(
        filter(None, [args.preload, os.environ.get("LD_PRELOAD", "")])))
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, os.path.abspath(__file__), *args.argv], env)


def main(argv=None):
    args = parse(sys.argv[1:] if argv is None else argv)
    preload_exec(args, as_program=argv is None)
    if args.worker:
        worker_main(args)
        return None
    from lodarrow._bench._docs import publish, report_of

    report = report_of(args, driver, write=_write_json)
    table = markdown(report)
    publish(args, table)
    if args.docs:
        write_docs(args.docs, table, report)
    return report


if __name__ == "__main__":
    main()
