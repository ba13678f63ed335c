"""What an epoch's plan does, as data: the loader's statistics (docs/training.md#statistics)."""

import numpy as np

__all__ = ["batch_slots", "plan_statistics"]


def plan_statistics(plan, base, shape, *, epoch, dropped, row_groups=None, mixture=None):
    """The statistics of ``plan`` (the current leg of the loader's epoch, from step
    ``base`` of the epoch) for :meth:`BatchLoader.statistics`, from what the loader passes:

    - ``shape``: its :class:`~lodarrow._training._shape.BatchShape`; ``epoch``: the epoch;
    - ``dropped``: ``(nulls, oversize)``, the sequences of the epoch left out before planning;
    - ``row_groups``: a Parquet source's ``(part_starts, source_rows)``, the first sequence of
      each row group (and the total) and the function from plan positions to the source's
      (None: not Parquet);
    - ``mixture``: ``(names, counts, epoch_mix)``, a mixture's source names, the sequences the
      epoch plans of each, and its :class:`~lodarrow._training._mix.EpochMix` (None: none).
    """
    tokens = plan.tokens
    padded = batch_slots(plan, shape)
    nulls, oversize = dropped
    total_padded = int(padded.sum())
    out = {
        "epoch": epoch,
        "num_replicas": plan.num_replicas,
        "first_step": base,
        "steps": plan.steps,
        "sequences": _sequences(plan).sum(axis=1).tolist(),
        "tokens": tokens.sum(axis=1).tolist(),
        "padded_tokens": padded.sum(axis=1).tolist(),
        "padding": 0.0 if total_padded == 0 else 1.0 - int(tokens.sum()) / total_padded,
        "dropped": {"nulls": nulls,
                    "oversize": oversize + int(plan.dropped["oversize"]),
                    "drop_last": int(plan.dropped["drop_last"])},
        "step_balance": {"tokens": _ratios(tokens), "compute": _ratios(plan.compute)},
    }
    if getattr(plan, "redelivered", 0):  # a state saved when re-plans were whole sequences
        out["redelivered_tokens"] = int(plan.redelivered)
    if shape.mode == "blocks":  # remainder="drop": sequences wholly in a cut block
        out["dropped"]["remainder"] = int(plan.dropped.get("remainder", 0))
    if plan.items is not None:
        out["packing"] = _packing(plan, shape)
        if shape.mode == "blocks":
            out["packing"]["remainder_tokens"] = int(plan.dropped.get("remainder_tokens", 0))
    if row_groups is not None:
        out["decodes"] = _decodes(plan, *row_groups)
    if mixture is not None:
        out["sources"] = _sources(plan, *mixture)
    return out


def _sources(plan, names, counts, em):
    """A mixture's sources in the plan (all ranks): the sequences the epoch plans of each
    (``planned``, before what is dropped), and those and their tokens in this leg's
    batches."""
    rows = plan.rows_of_steps(0, plan.steps)
    k = len(names)
    seqs = np.bincount(em.source[rows], minlength=k)
    tokens = np.bincount(em.source[rows], weights=em.lengths[rows], minlength=k)
    total = max(int(seqs.sum()), 1)
    return {name: {"planned": int(counts[s]), "sequences": int(seqs[s]),
                   "tokens": int(tokens[s]), "share": float(seqs[s] / total)}
            for s, name in enumerate(names)}


def _sequences(plan):
    """The sequences of every batch (a sequence split into chunks counts once a batch)."""
    if plan.items is None or not plan.split:
        return plan.sizes
    out = np.empty(plan.lo.shape, np.int64)
    for r in range(plan.num_replicas):
        for s in range(plan.steps):
            out[r, s] = len(np.unique(plan.order[plan.lo[r, s]:plan.hi[r, s]]))
    return out


def batch_slots(plan, shape):
    """The slots of every batch of ``plan`` (``(ranks, steps)``) as collation lays them out
    (:class:`lodarrow._training._shape.BatchShape`): padding, widths and fixed rows
    counted."""
    if plan.items is not None or not shape.rows_at_collation:
        return shape.slots(plan.sizes, plan.longest, plan.tokens)
    # packed rows packed at collation: each batch packed as collate packs it
    lo, hi = plan.lo.ravel(), plan.hi.ravel()
    sizes = hi - lo
    bounds = np.zeros(len(sizes) + 1, np.int64)
    np.cumsum(sizes, out=bounds[1:])
    pos = np.repeat(lo - bounds[:-1], sizes) + np.arange(bounds[-1], dtype=np.int64)
    return shape.packed_rows_slots(plan.seq[pos], bounds).reshape(plan.lo.shape)


def _packing(plan, cfg):
    """Planned packed rows: the share of row slots holding tokens (rows with data, and the
    batches' fixed ``num_rows``), and the sequences split into chunks."""
    _, row, _, length = plan.items
    used = 0
    for r in range(plan.num_replicas):
        for a, b in zip(plan.lo[r], plan.hi[r]):
            if b > a:
                used += int(row[b - 1] - row[a] + 1)
    tokens = int(plan.tokens.sum())
    slots = plan.num_replicas * plan.steps * cfg.rows_per_batch * length
    seqs, counts = np.unique(plan.order, return_counts=True)
    return {"row_length": int(length), "rows_per_batch": int(cfg.rows_per_batch),
            "efficiency": tokens / (used * length) if used else 1.0,
            "batch_efficiency": tokens / slots if slots else 1.0,
            "split": int(np.count_nonzero(counts > 1))}


def _ratios(cost):
    """max / mean over the ranks of each step: the median and the worst step."""
    cost = np.asarray(cost, np.float64)
    if cost.shape[1] == 0:
        return {"median": 1.0, "max": 1.0}
    mean = cost.mean(axis=0)
    ok = mean > 0
    ratio = np.where(ok, cost.max(axis=0) / np.where(ok, mean, 1.0), 1.0)
    return {"median": float(np.median(ratio)), "max": float(ratio.max())}


def _decodes(plan, starts, source_rows):
    """How many times the epoch decodes each row group: once per (rank, block) that reads it
    (one reader per rank; ``DataLoader`` workers each read the blocks of their steps).
    ``starts``: each row group's first sequence, and the total; ``source_rows``: the
    source's positions of plan positions."""
    n_parts = len(starts) - 1
    counts = np.zeros(n_parts, np.int64)
    for r in range(plan.num_replicas):
        for k in np.unique(plan.block[r]):
            steps = np.flatnonzero(plan.block[r] == k)
            rows = source_rows(np.concatenate([plan.batch(r, s) for s in steps]))
            counts[np.unique(np.searchsorted(starts, rows, side="right") - 1)] += 1
    read = counts[counts > 0]
    return {"row_groups": int(n_parts), "max": int(counts.max()) if n_parts else 0,
            "mean": float(read.mean()) if len(read) else 0.0,
            "per_row_group": counts.tolist() if n_parts <= 4096 else None}
