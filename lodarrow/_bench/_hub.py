"""Benchmarks of the conversion hub (docs/interop.md#benchmarks): each conversion against the way
users build the same object today, from the same sequences, side by side with ratios.

``python -m lodarrow bench --ops hub`` runs them (``--ops hub_torch`` one library's); a plain
``bench`` run does not, so it needs none of torch, JAX or TensorFlow.  Every row is checked
against lodarrow's result (flat values and sequence lengths) before it is timed, as the
operator rows are (``_runner._measure``).

The starting points are what each side holds after reading a Parquet column:

* lodarrow: the LoDTensor (``la.from_arrow`` of the column, zero-copy);
* the peers: what they are documented to start from -- a list of per-sequence arrays (what a
  ``Dataset.__getitem__`` yields) for ``as_nested_tensor``, ``pad_sequence`` and ``torch.cat``;
  Python lists for ``tf.ragged.constant``; the Arrow column for ``ak.from_arrow`` (and Awkward's
  ``to_raggedtensor``).  Building those inputs is not timed.

Paddle is not benchmarked here: it cannot share a process with TensorFlow (docs/interop.md).
"""

import dataclasses
import importlib

import numpy as np

__all__ = ["HubCase", "run", "select"]

SEED = 23
#: sequences and mean length of the full-size workloads (``--quick`` / ``--scale`` scale them)
SEQUENCES = 20_000
MEAN_LENGTH = 50
FEATURES = 16  # the "emb" workload's row width (the torch rows, as attention sees them)


@dataclasses.dataclass(frozen=True)
class HubCase:
    op: str  # "hub_<library>_<layout>": the --ops filter
    workload: str  # "tokens" (int32, 1-D rows) or "emb" (float32, FEATURES per row)
    library: str  # the module the case needs
    variant: str | None = None
    rtol: float = 0.0
    atol: float = 0.0

    @property
    def title(self):
        return self.op


def _cases():
    return [
        HubCase("hub_torch_varlen", "emb", "torch"),
        HubCase("hub_torch_jagged", "emb", "torch"),
        HubCase("hub_torch_padded", "emb", "torch"),
        HubCase("hub_torch_table", "tokens", "torch"),
        HubCase("hub_jax_segments", "tokens", "jax"),
        HubCase("hub_tf_ragged", "tokens", "tensorflow"),
        HubCase("hub_awkward", "tokens", "awkward"),
        HubCase("hub_from_awkward", "tokens", "awkward"),
    ]


def select(filters):
    """The hub cases that ``--ops`` names (none without an explicit filter)."""
    from lodarrow._bench._cases import wanted as _wanted

    if not filters:
        return []
    return [c for c in _cases() if _wanted(c.op, filters)]


class _Workload:
    """Random lengths (1 .. 2 x mean), the LoDTensor, the Arrow column and the per-sequence
    inputs of the peers."""

    def __init__(self, name, n_seq, seed):
        import pyarrow as pa

        import lodarrow as la

        rng = np.random.default_rng(seed)
        lengths = rng.integers(1, 2 * MEAN_LENGTH, size=n_seq).astype(np.int64)
        offsets = np.zeros(n_seq + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        rows = int(offsets[-1])
        def arrow_owned(array):
            # copied into Arrow's memory pool (64-byte aligned), as a column read from Parquet
            # is: NumPy's own allocations are aligned by chance only
            return pa.concat_arrays([pa.array(array), pa.array(array[:0])])

        if name == "emb":
            data = rng.standard_normal((rows, FEATURES), dtype=np.float32)
            values = pa.FixedSizeListArray.from_arrays(arrow_owned(data.reshape(-1)), FEATURES)
        else:
            data = rng.integers(0, 50_000, size=rows, dtype=np.int32)
            values = arrow_owned(data)
        self.name = name
        self.lengths = lengths
        self.arrow = pa.LargeListArray.from_arrays(arrow_owned(offsets), values)
        self.tensor = la.from_arrow(self.arrow)
        self.table = pa.table({"tokens": self.arrow})
        self.seqs = [data[offsets[i]:offsets[i + 1]] for i in range(n_seq)]
        self.rows = rows
        self.label = f"{name}: {n_seq} seqs, {rows} rows" + (
            f" x {FEATURES}" if name == "emb" else "")
        self.nbytes = data.nbytes + offsets.nbytes


def _flat(values, lengths):
    return (np.ascontiguousarray(np.asarray(values)), np.asarray(lengths, dtype=np.int64))


def _implementations(case, w):
    """``[(library, how, run, norm), ...]``: lodarrow first, then the peers."""
    import lodarrow as la

    t, seqs, lengths = w.tensor, w.seqs, w.lengths
    op = case.op
    if op.startswith("hub_torch"):
        import torch

        tensors = [torch.from_numpy(s) for s in seqs]
        lens_t = torch.from_numpy(lengths)
    if op == "hub_torch_varlen":
        def peer():
            values = torch.cat(tensors)
            cu = torch.nn.functional.pad(torch.cumsum(lens_t, 0), (1, 0)).to(torch.int32)
            return values, cu, int(lens_t.max())

        def norm_v(v):
            cu = np.asarray(v[1], dtype=np.int64)
            return _flat(v[0], np.diff(cu))
        return [("lodarrow", "t.to_torch('varlen')", lambda: t.to_torch("varlen"), norm_v),
                ("torch", "torch.cat(list) + cumsum(lengths)", peer, norm_v)]
    if op == "hub_torch_jagged":
        def norm_j(nt):
            return _flat(nt.values(), np.diff(nt.offsets().numpy()))
        return [("lodarrow", "t.to_torch('jagged')", lambda: t.to_torch("jagged"), norm_j),
                ("torch", "torch.nested.as_nested_tensor(list, layout=jagged)",
                 lambda: torch.nested.as_nested_tensor(tensors, layout=torch.jagged), norm_j)]
    if op == "hub_torch_padded":
        def peer_p():
            padded = torch.nn.utils.rnn.pad_sequence(tensors, batch_first=True)
            mask = torch.arange(padded.shape[1])[None, :] < lens_t[:, None]
            return padded, lens_t, mask

        def norm_p(p):
            mask = np.asarray(p[2])
            return (np.asarray(p[0])[mask], mask.sum(axis=1).astype(np.int64))
        return [("lodarrow", "t.to_torch('padded')", lambda: t.to_torch("padded"), norm_p),
                ("torch", "pad_sequence(list) + mask", peer_p, norm_p)]
    if op == "hub_torch_table":
        column = w.table.column("tokens")

        def peer_t():
            lists = column.to_pylist()
            return (torch.cat([torch.tensor(x, dtype=torch.int32) for x in lists]),
                    torch.tensor([len(x) for x in lists]))
        return [("lodarrow", "la.to_torch(table, column=..., layout='varlen')",
                 lambda: la.to_torch(w.table, column="tokens"),
                 lambda v: _flat(v.values, np.diff(v.lod[0].numpy()))),
                ("torch", "to_pylist() + torch.tensor per row + cat", peer_t,
                 lambda v: _flat(v[0], v[1]))]
    if op == "hub_jax_segments":
        import jax.numpy as jnp

        def peer_s():
            values = jnp.concatenate([jnp.asarray(s) for s in seqs])
            ids = jnp.repeat(jnp.arange(len(seqs)), jnp.asarray(lengths),
                             total_repeat_length=w.rows)
            return values, ids

        def norm_s(s):
            return _flat(s[0], np.bincount(np.asarray(s[1]), minlength=len(seqs)))
        return [("lodarrow", "t.to_jax('segments')", lambda: t.to_jax(), norm_s),
                ("jax", "jnp.concatenate(list) + jnp.repeat(ids)", peer_s, norm_s)]
    if op == "hub_tf_ragged":
        import awkward as ak
        import tensorflow as tf

        lists = [s.tolist() for s in seqs]

        def norm_r(r):
            return _flat(r.flat_values.numpy(), np.diff(r.row_splits.numpy()))
        return [("lodarrow", "t.to_tf()", lambda: t.to_tf(), norm_r),
                ("tensorflow", "tf.ragged.constant(lists)",
                 lambda: tf.ragged.constant(lists, dtype=tf.int32), norm_r),
                ("awkward", "ak.to_raggedtensor(ak.drop_none(ak.from_arrow(column)))",
                 # from_arrow types every value as optional; to_raggedtensor refuses those
                 lambda: ak.to_raggedtensor(ak.drop_none(ak.from_arrow(w.arrow))), norm_r)]
    if op == "hub_awkward":
        import awkward as ak

        def norm_a(a):
            return _flat(ak.to_numpy(ak.flatten(a)), ak.to_numpy(ak.num(a)))
        return [("lodarrow", "t.to_awkward()", lambda: t.to_awkward(), norm_a),
                ("awkward", "ak.from_arrow(column)", lambda: ak.from_arrow(w.arrow), norm_a)]
    if op == "hub_from_awkward":
        import awkward as ak

        a = ak.from_arrow(w.arrow)

        def norm_l(x):
            if isinstance(x, la.LoDTensor):
                return _flat(x.data, np.diff(x.offsets[0]))
            return _flat(x.values.to_numpy(), np.diff(x.offsets.to_numpy()))
        return [("lodarrow", "la.from_awkward(array)", lambda: la.from_awkward(a), norm_l),
                ("awkward", "ak.to_arrow(array)", lambda: ak.to_arrow(a, extensionarray=False),
                 norm_l)]
    raise ValueError(op)


def run(cases, options, bandwidth, measure, add_ratios, progress=None):
    """Rows (the operator rows' format) for ``cases``; a library that does not import is
    reported as skipped."""
    rows = []
    workloads = {}
    n_seq = max(200, int(round(SEQUENCES * options.size_factor)))
    for case in cases:
        try:
            importlib.import_module(case.library)
        except Exception as exc:
            rows.append({"op": case.op, "variant": None, "title": case.title,
                         "workload": case.workload, "workload_name": case.workload, "rows": 0,
                         "bytes": None, "impl": "lodarrow", "library": "lodarrow",
                         "status": "skipped",
                         "note": f"{case.library} is not installed ({type(exc).__name__})"})
            continue
        version = getattr(importlib.import_module(case.library), "__version__", None)
        if case.workload not in workloads:
            workloads[case.workload] = _Workload(case.workload, n_seq, options.seed + SEED)
        w = workloads[case.workload]
        base = {"op": case.op, "variant": None, "title": case.title, "workload": w.label,
                "workload_name": case.workload, "rows": w.rows, "bytes": None,
                "versions": {case.library: version}}
        if progress is not None:
            progress(case.title)
        group = []
        expected = None
        for library, how, fn, norm in _implementations(case, w):
            row = dict(base, impl=f"{library} ({how})" if library != "lodarrow" else library,
                       library=library, how=how)
            try:
                frag, got = measure(fn, norm, expected, case, options)
                if library == "lodarrow":
                    expected = got
                row.update(frag)
            except Exception as exc:  # a peer's failure is a result worth reporting
                row.update(status="error", note=f"{type(exc).__name__}: {exc}"[:300])
            group.append(row)
        add_ratios(group, bandwidth)
        rows.extend(group)
    return rows
