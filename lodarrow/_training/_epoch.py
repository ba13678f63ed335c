"""The global plan of one epoch: every rank's batches, step by step (docs/training.md#plans).

One function, :func:`plan_epoch`, decides which sequences go in which batch of which rank at
which step.  It is a pure function of the lengths, the source's layout (the row groups of a
Parquet source), the arguments, ``seed`` and ``epoch``: every rank computes the whole plan and
takes its share, so ranks, workers, statistics and resume all derive from it.

How a plan is made
------------------
1. **The stream.**  The sequences in a random order: a permutation of the rows for an
   in-memory source (random access is free); for a Parquet source the row groups in a random
   order, each row group's rows in storage order (a reader decodes whole row groups).
2. **Cells.**  The stream is cut into ``K * R`` consecutive *cells* (``R`` ranks, ``K``
   blocks): cell ``(k, r)`` is rank ``r``'s share of block ``k``.  Cells are equal in rows
   (fixed-size plans: exactly so many full batches each) or in the balanced measure (tokens,
   or ``len + alpha * len**2`` for ``balance="compute"``); for a Parquet source a cut moves to
   a row-group boundary when one is near, so most row groups are read by one rank only.  A
   row group is cut into row ranges only where a cell needs it: when there are fewer row
   groups than ranks, or to even out the ranks.
3. **Batches.**  Inside a cell the rows are shuffled (Parquet), sorted by length (bucketing)
   and cut greedily under ``batch_size`` / ``max_tokens``.
4. **Steps.**  The cells of a block get as many batches each: a block whose batch count is
   no multiple of ``R`` splits its largest batches (every sequence still once, no budget
   exceeded), then ranks with a surplus hand batches to ranks short of one.  With
   ``balance="tokens"`` / ``"compute"`` each cell's batches are sorted by cost, so step ``j``
   of a block holds every rank's ``j``-th largest batch (matched quantiles: the ranks of a
   step wait little for one another); the steps of a block are then shuffled alike on every
   rank.
"""

import numpy as np

from lodarrow._cpu import _batch_plan as _k
from lodarrow._threads import num_threads

__all__ = ["PLAN_VERSION", "EpochPlan", "LeftOut", "PlanArgs", "decide_oversize", "left_out",
           "oversized", "plan_epoch", "plan_pieces"]

#: Bumped whenever the planning algorithm changes: a saved loader state names it.
#: 3: budgets count the slots of the delivered batch (padding, widths, rows, segments).
PLAN_VERSION = 3
#: Snap a cell's cut to a row-group boundary this close (a share of the cell's weight): far
#: with ``balance="batches"`` (decode each row group once), near with "tokens" / "compute"
#: (the ranks' totals stay within about 1%).
_SNAP = {"batches": 0.125, "tokens": 0.01, "compute": 0.01}
#: Sort cells on several threads from this many sequences on.
_PARALLEL_SORT = 1 << 20


class PlanArgs:
    """The planning arguments (already checked by the caller)."""

    __slots__ = ("batch_size", "max_tokens", "packed", "bucket", "shuffle", "drop_last",
                 "balance", "alpha", "oversize", "cell_rows", "fn", "shape")

    def __init__(self, *, batch_size, max_tokens, packed, bucket, shuffle, drop_last, balance,
                 alpha, oversize, cell_rows, fn, shape=None):
        self.batch_size, self.max_tokens, self.packed = batch_size, max_tokens, packed
        self.bucket, self.shuffle, self.drop_last = bucket, shuffle, drop_last
        self.balance, self.alpha, self.oversize = balance, alpha, oversize
        self.cell_rows, self.fn = cell_rows, fn
        # the loader's BatchShape (lodarrow._training._shape): what a batch's slots are;
        # None (batch_plan): ``count * longest`` or the sum of lengths, as ``packed`` says
        self.shape = shape

    @property
    def fixed_size(self):
        """Batches of exactly ``batch_size`` (no budget of tokens or widths)."""
        return (self.batch_size is not None and self.max_tokens is None and not self.packing
                and not self.capped)

    @property
    def capped(self):
        """A flat batch whose length must fit the widest of ``pad_widths``."""
        return (self.shape is not None and self.shape.mode == "segments"
                and self.shape.width_cap is not None)

    @property
    def packing(self):
        return self.shape is not None and self.shape.rows_per_batch is not None

    @property
    def row_length(self):
        return self.shape.row_length

    @property
    def rows_per_batch(self):
        return self.shape.rows_per_batch

    @property
    def split(self):
        return self.shape.split

    def kernel_args(self):
        """``(measure, fixed_rows, multiple, widths)`` of ``cut_batches``."""
        if self.shape is None:
            return int(self.packed), 0, 1, np.zeros(0, np.int64)
        return self.shape.kernel_args()


def oversized(lengths, shape, max_tokens):
    """The one "over budget alone" test: which of ``lengths`` a batch of its own cannot hold.

    Returns ``(unplaceable, over)``, boolean masks: ``unplaceable`` where no width of the
    shape holds the sequence (``pad_widths``, a row of ``row_length`` without ``split``),
    ``over`` where a batch of it alone takes more than ``max_tokens`` slots after padding
    (:meth:`lodarrow._training._shape.BatchShape.alone`).  ``shape`` None
    (:func:`lodarrow.batch_plan`): a batch's cost is its length, and nothing is unplaceable.
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    if shape is None:
        unplaceable = np.zeros(len(lengths), bool)
        over = (lengths > max_tokens) if max_tokens is not None else unplaceable.copy()
        return unplaceable, over
    alone = shape.alone(lengths)
    unplaceable = alone < 0
    over = alone > max_tokens if max_tokens is not None else np.zeros_like(unplaceable)
    return unplaceable, over


def decide_oversize(lengths, oversize, shape, max_tokens, skip=None):
    """The one decision of ``oversize`` over the sequences :func:`oversized` finds.

    ``"drop"`` leaves out every such sequence; ``"alone"`` (and ``"split"``, whose chunks fit a
    row) gives one over ``max_tokens`` a batch of its own; an unplaceable sequence under any
    option but ``"drop"``, and an over-long one under ``"error"``, is refused.  ``skip``: a
    boolean mask (or positions) of sequences already left out (``nulls="drop"``), neither
    dropped nor refused again.

    Returns ``(dropped, refused)``: the positions ``oversize="drop"`` leaves out (int64), and
    ``None`` or ``(position, count, unplaceable)`` for the first sequence refused, the count of
    such sequences and whether no width holds it (the caller words the error).
    """
    unplaceable, over = oversized(lengths, shape, max_tokens)
    if skip is not None:
        unplaceable[skip] = over[skip] = False
    dropped = []
    for mask, allowed in ((unplaceable, ("drop",)), (over, ("drop", "alone", "split"))):
        bad = np.flatnonzero(mask)
        if not len(bad):
            continue
        if oversize not in allowed:
            return np.zeros(0, np.int64), (int(bad[0]), len(bad), mask is unplaceable)
        if oversize == "drop":
            dropped.append(bad)
    if not dropped:
        return np.zeros(0, np.int64), None
    return np.concatenate(dropped).astype(np.int64), None


class LeftOut:
    """What :func:`left_out` decided: the sequences every epoch plans, or why none can be.

    Attributes
    ----------
    refused : tuple or None
        Why the source is refused, for the caller to word: ``("null_row", row, count)`` (a
        null row under ``nulls="error"``), ``("null_value", row, count)`` (a null value inside
        a row's list that ``nulls`` cannot leave out), ``("oversize", k, count,
        unplaceable)`` (:func:`decide_oversize`); None: none.
    keep : numpy.ndarray of bool or None
        Which sequences are planned (None: all).
    base_rows : numpy.ndarray of int64 or None
        Their positions (None: all).
    null_seqs : numpy.ndarray of int64
        The sequences ``nulls="drop"`` leaves out.
    nulls, oversize : int
        How many sequences ``nulls="drop"`` and ``oversize="drop"`` leave out.
    """

    __slots__ = ("base_rows", "keep", "null_seqs", "nulls", "oversize", "refused")

    def __init__(self, refused=None, keep=None, null_seqs=None, nulls=0, oversize=0):
        self.refused, self.keep, self.nulls, self.oversize = refused, keep, nulls, oversize
        self.null_seqs = np.zeros(0, np.int64) if null_seqs is None else null_seqs
        self.base_rows = None if keep is None else np.flatnonzero(keep)


def left_out(lengths, *, nulls, oversize, shape, max_tokens, level, row_nulls, value_nulls):
    """The one decision of ``nulls`` and ``oversize`` before any plan: which sequences of
    ``lengths`` every epoch plans (:class:`LeftOut`).

    ``row_nulls``: the null rows of the sequence column; ``value_nulls``: ``(rows,
    sequences)`` holding a null value inside their lists (``sequences`` empty where they are not
    known without reading the values).  A null row is refused under ``nulls="error"``, read as
    an empty sequence under ``"empty"`` and left out under ``"drop"`` (at ``level`` 0, where a
    row is a sequence; deeper, a null row holds no sequence).  A null value is refused unless
    ``"drop"`` can leave its sequences out.  Then ``oversize`` (:func:`decide_oversize`) over
    the sequences the nulls leave in.
    """
    value_rows, value_seqs = value_nulls
    if len(row_nulls) and nulls == "error":
        return LeftOut(("null_row", int(row_nulls[0]), len(row_nulls)))
    if len(value_rows) and (nulls != "drop" or len(value_seqs) == 0):
        return LeftOut(("null_value", int(value_rows[0]), len(value_rows)))
    exclude = []
    null_seqs = None
    if nulls == "drop":
        rows = row_nulls if level == 0 else np.zeros(0, np.int64)
        seqs = np.union1d(rows, value_seqs)
        null_seqs = seqs.astype(np.int64)
        exclude.append(seqs)
    over, refused = decide_oversize(lengths, oversize, shape, max_tokens,
                                    exclude[0] if exclude else None)
    if refused is not None:
        return LeftOut(("oversize", *refused))
    if len(over):
        exclude.append(over)
    if not exclude:
        return LeftOut(null_seqs=null_seqs)
    keep = np.ones(len(lengths), bool)
    for rows in exclude:
        keep[rows] = False
    dropped_nulls = 0 if null_seqs is None else len(null_seqs)
    return LeftOut(keep=keep, null_seqs=null_seqs, nulls=dropped_nulls,
                   oversize=len(lengths) - int(np.count_nonzero(keep)) - dropped_nulls)


class EpochPlan:
    """Every rank's batches of one epoch (or of what was left of it, after an elastic resume).

    Batch ``(r, s)`` (rank ``r``, step ``s``) holds the sequences
    ``order[lo[r, s]:hi[r, s]]``; ``block[r, s]`` is the block it was cut from (batches of
    one block are read together).  ``dropped`` counts what the plan left out, by reason.
    """

    def __init__(self, order, lo, hi, block, seq, alpha, dropped, items=None):
        self.order, self.lo, self.hi, self.block = order, lo, hi, block
        # packed rows: ``order`` lists items (a sequence, or a chunk of one), and ``items``
        # their (start, row, offset) arrays; ``seq``: the length of each entry of ``order``
        self.items = items
        self._split = None
        self.num_replicas, self.steps = lo.shape
        self.dropped = dropped
        self.seq, self._alpha, self._compute = seq, alpha, None
        flat_lo, flat_hi = lo.ravel(), hi.ravel()
        tokens = np.empty(len(flat_lo), np.int64)
        longest = np.empty(len(flat_lo), np.int64)
        if len(flat_lo):
            _k.range_stats(seq, np.ascontiguousarray(flat_lo), np.ascontiguousarray(flat_hi),
                           tokens, longest)
        self.tokens = tokens.reshape(lo.shape)
        self.longest = longest.reshape(lo.shape)

    @property
    def compute(self):
        """Each batch's cost ``sum(len) + alpha * sum(len**2)`` (float64)."""
        if self._compute is None:
            squares = np.zeros(len(self.seq) + 1, np.float64)
            np.cumsum(self.seq.astype(np.float64) ** 2, out=squares[1:])
            self._compute = self.tokens + self._alpha * (squares[self.hi] - squares[self.lo])
        return self._compute

    def batch(self, rank, step):
        """The rows (sequence positions) of rank ``rank``'s batch at step ``step``."""
        rows = self.order[self.lo[rank, step]:self.hi[rank, step]]
        if self.items is None:
            return rows
        return np.sort(rows) if not self.split else np.unique(rows)

    @property
    def split(self):
        """Whether a packed-rows plan cut a sequence into chunks (an item not from 0)."""
        if self._split is None:
            self._split = bool(self.items is not None and np.any(self.items[0]))
        return self._split

    def placement(self, rank, step):
        """A packed batch's layout: ``(rows, Placement)``, the placement's ``seq`` indexing
        ``rows``."""
        from lodarrow._training._collate import Placement

        a, b = self.lo[rank, step], self.hi[rank, step]
        seq = self.order[a:b]
        if self.split:
            rows, index = np.unique(seq, return_inverse=True)
        else:  # each sequence one item: the same, without unique's passes
            by_row = np.argsort(seq, kind="stable")
            rows = seq[by_row]
            index = np.empty(len(seq), np.int64)
            index[by_row] = np.arange(len(seq), dtype=np.int64)
        start, row, offset = (x[a:b] for x in self.items[:3])
        first = int(row[0]) if b > a else 0
        n_rows = int(row[-1]) - first + 1 if b > a else 0
        return rows, Placement(index.astype(np.int64).reshape(-1), start, self.seq[a:b],
                               row - first, offset, n_rows, self.items[3],
                               np.zeros(0, np.int64))

    def rows_of_steps(self, start, stop):
        """Every sequence of steps ``[start, stop)``, all ranks together."""
        if stop <= start:
            return np.zeros(0, np.int64)
        lo, hi = self.lo[:, start:stop].ravel(), self.hi[:, start:stop].ravel()
        sizes = hi - lo
        pos = np.repeat(lo - np.cumsum(sizes) + sizes, sizes) + np.arange(sizes.sum())
        return self.order[pos] if self.items is None else np.unique(self.order[pos])

    def pieces_of_steps(self, start, stop):
        """A plan of items' (packed rows, blocks) token pieces in steps ``[start, stop)``,
        all ranks together: ``(sequence, first token, tokens)`` arrays sorted by sequence
        and first token, the pieces of a sequence that follow one another joined."""
        lo, hi = self.lo[:, start:stop].ravel(), self.hi[:, start:stop].ravel()
        sizes = hi - lo
        pos = np.repeat(lo - np.cumsum(sizes) + sizes, sizes) + np.arange(sizes.sum())
        seq, first, tokens = self.order[pos], self.items[0][pos], self.seq[pos]
        by = np.lexsort((first, seq))
        seq, first, tokens = seq[by], first[by], tokens[by]
        if not len(seq):
            return seq, first, tokens
        new = np.ones(len(seq), bool)
        new[1:] = (seq[1:] != seq[:-1]) | (first[1:] != first[:-1] + tokens[:-1])
        at = np.flatnonzero(new)
        return seq[at], first[at], np.add.reduceat(tokens, at).astype(np.int64)

    @property
    def sizes(self):
        return self.hi - self.lo


def plan_epoch(lengths, args, num_replicas, rng, *, rows=None, part_starts=None,
               part_groups=None):
    """The plan of one epoch (see the module's docstring).

    Parameters
    ----------
    lengths : numpy.ndarray of int64
        Every sequence's length (the whole source).
    args : PlanArgs
        The checked planning arguments.
    num_replicas : int
        The ranks.
    rng : numpy.random.Generator
        The epoch's randomness (``default_rng([seed, epoch, ...])``).
    rows : numpy.ndarray of int64, optional
        Plan only these sequences (an elastic resume: those not yet received); default all.
    part_starts : numpy.ndarray of int64, optional
        The first sequence of each row group, and the total (a Parquet source).
    part_groups : numpy.ndarray of int, optional
        Each row group's group (a mixture's source): the shuffled row groups are interleaved
        group by group in proportion (:func:`_stratified`), so that every stretch of the
        stream holds the groups in their shares.
    """
    fn = args.fn
    stream, edges = _stream(len(lengths), rows, part_starts, args.shuffle, rng, part_groups)
    dropped = {"oversize": 0, "drop_last": 0}
    if args.oversize == "drop":
        out, _ = decide_oversize(lengths[stream], "drop", args.shape, args.max_tokens)
        if len(out):
            keep = np.ones(len(stream), bool)
            keep[out] = False
            dropped["oversize"] = int(len(keep) - np.count_nonzero(keep))
            edges = _edges_after(edges, keep)
            stream = stream[keep]
    m, R = len(stream), num_replicas
    if m < R:
        if m and not args.drop_last:
            raise ValueError(f"{fn}: {m} sequence(s) cannot give each of num_replicas={R} "
                             f"ranks a batch; use fewer ranks, or drop_last=True to drop them")
        dropped["drop_last"] += m
        return _empty(R, args.alpha, dropped)
    if args.fixed_size and args.drop_last:
        cells, tails = _fixed_cells(m, R, args)
        if cells is None:
            dropped["drop_last"] += m
            return _empty(R, args.alpha, dropped)
        dropped["drop_last"] += m - int(cells[-1][-1])
        stream = stream[:int(cells[-1][-1])]
    else:
        cells, tails = _weighted_cells(stream, lengths, R, args, edges), 0
    if args.fixed_size and args.balance != "batches" and edges is None and R > 1:
        stream, cells = _stratify(stream, lengths, cells, rng)
    order, seq = _arrange(stream, lengths, cells, args, rng, in_memory=part_starts is None)
    items = splits = None
    if args.packing:
        order, seq, items, cells, splits, remainder = _pack(order, seq, cells, args)
        if args.shape.mode == "blocks":
            dropped["remainder"], dropped["remainder_tokens"] = remainder
        blocks = _cut_rows(items[1], cells, args, R)
    else:
        blocks = _cut(seq, cells, tails, args, R)
    lo, hi, block, extra_drop = _steps(blocks, seq, order, args, R, rng, splits,
                                       None if items is None else items[2])
    dropped["drop_last"] += extra_drop
    if tails and len(cells) > 1:  # the tail step is read with the last block
        block[block == len(cells) - 1] = len(cells) - 2
    return EpochPlan(order, lo, hi, block, seq, args.alpha, dropped, items)


def plan_pieces(pieces, args, num_replicas, rng, *, part_starts=None, part_groups=None):
    """The plan of token *pieces* of sequences (:meth:`EpochPlan.pieces_of_steps`: what an
    earlier world left of a packed-rows or blocks epoch, where a sequence may be partly
    delivered): each piece planned as a sequence of its own, then its items named by their
    sequence and first token, so that collation reads exactly the piece's tokens.
    ``part_starts``: the source's row groups (the pieces of one row group stay together)."""
    seq, first, tokens = pieces
    parts = (None if part_starts is None
             else np.searchsorted(seq, part_starts, side="left").astype(np.int64))
    plan = plan_epoch(tokens, args, num_replicas, rng, part_starts=parts,
                      part_groups=part_groups)
    if plan.items is not None:
        start, row, offset, length = plan.items
        plan.items = (start + first[plan.order], row, offset, length)
    plan.order = seq[plan.order]
    plan._split = None
    return plan


def shuffled(n, rng):
    """A random permutation of ``0..n-1`` from ``rng`` (a compiled Fisher-Yates, twice as
    fast as NumPy's on large ``n``)."""
    out = np.empty(n, dtype=np.int64)
    _k.permutation(out, int(rng.integers(0, 2**63)))
    return out


# --- 1. the stream --------------------------------------------------------------------------

def _stream(n, rows, part_starts, shuffle, rng, part_groups=None):
    """The sequences in stream order, and the positions in it where a row group starts (None
    for an in-memory source)."""
    if part_starts is None:
        if rows is None:  # a permutation of all rows is the stream itself
            return (shuffled(n, rng) if shuffle else np.arange(n, dtype=np.int64)), None
        return (rows[shuffled(len(rows), rng)] if shuffle else rows), None
    counts = np.diff(part_starts)
    if not shuffle:
        parts = np.arange(len(counts))
    elif part_groups is None:
        parts = rng.permutation(len(counts))
    else:
        parts = _stratified(counts, part_groups, rng)
    counts = counts[parts]
    firsts = np.zeros(len(counts), np.int64)
    np.cumsum(counts[:-1], out=firsts[1:])
    stream = np.repeat(part_starts[:-1][parts] - firsts, counts) + np.arange(
        counts.sum(), dtype=np.int64)
    edges = firsts[counts > 0]
    if rows is not None:
        keep = np.zeros(n, bool)
        keep[rows] = True
        keep = keep[stream]
        edges = _edges_after(edges, keep)
        stream = stream[keep]
    return stream, edges


def _stratified(counts, groups, rng):
    """The row groups shuffled within each group, then merged so that each group's row groups
    sit at the middle of their share of the group's rows: every stretch of the stream holds
    the groups in proportion (a mixture's sources, at the row-group scale)."""
    order, keys = [], []
    for g in np.unique(groups):
        mine = rng.permutation(np.flatnonzero(groups == g))
        rows = counts[mine].astype(np.float64)
        total = max(rows.sum(), 1.0)
        order.append(mine)
        keys.append((np.cumsum(rows) - rows / 2) / total)
    order, keys = np.concatenate(order), np.concatenate(keys)
    return order[np.argsort(keys, kind="stable")]


def _edges_after(edges, keep):
    """Row-group starts in the stream after ``stream[keep]``."""
    if edges is None:
        return None
    before = np.concatenate([[0], np.cumsum(keep)])
    return np.unique(before[edges])


# --- 2. cells ---------------------------------------------------------------------------------

def _blocks_wanted(m, R, cell_rows):
    return max(1, min(m // R, m // max(R * cell_rows, 1)))


def _fixed_cells(m, R, args):
    """Cells of exactly ``S_k * batch_size`` rows (every batch full: a fixed-size plan with
    ``drop_last``), and the tail: the rows that fill no step, dropped (``drop_last``) or
    dealt as one last step of smaller batches.

    Returns ``(cells, tail_blocks)``: a list of per-block cell boundaries (positions in the
    stream, ``R + 1`` each) and how many of the last blocks are tails (their cells are cut
    into 1 or 2 batches each, not by ``batch_size``).
    """
    bs = args.batch_size
    full_steps = m // (R * bs)
    rem = m - full_steps * R * bs
    tail = None
    if rem and not args.drop_last:
        if rem >= R:
            tail = (rem, 1)
        elif full_steps >= 1 and bs >= 2:
            full_steps -= 1
            tail = (rem + R * bs, 2)
        else:
            raise ValueError(f"{args.fn}: {m} sequences cannot be dealt to num_replicas={R} "
                             f"ranks in equal steps of batches of at most batch_size={bs} "
                             f"sequences; use drop_last=True to drop the last {rem}")
    if full_steps == 0 and tail is None:
        return None, 0
    K = min(_blocks_wanted(m, R, args.cell_rows), full_steps) if full_steps else 0
    cells, start = [], 0
    for k in range(K):
        steps = full_steps // K + (k < full_steps % K)
        cells.append(start + np.arange(R + 1, dtype=np.int64) * steps * bs)
        start += R * steps * bs
    if tail is not None:
        rows, _ = tail
        sizes = np.full(R, rows // R, np.int64)
        sizes[:rows % R] += 1
        cells.append(start + np.concatenate([[0], np.cumsum(sizes)]))
    return cells, (tail[1] if tail else 0)


def _weighted_cells(stream, lengths, R, args, edges):
    """Cells of equal weight (rows, tokens or compute), cut at row-group edges when near.
    A fixed-size plan's cells are equal in rows (its batch counts then match)."""
    m = len(stream)
    if edges is None and (args.balance == "batches" or args.fixed_size):
        return _window_cells(m, R, args.cell_rows)
    K = _blocks_wanted(m, R, args.cell_rows)
    n_cells = K * R
    fractions = np.arange(1, n_cells, dtype=np.float64) / n_cells
    cw = None
    # equal rows give equal batch counts; a Parquet source balanced by tokens cuts by tokens
    # even for fixed-size batches (an in-memory one is stratified instead, see _stratify)
    if args.balance != "batches" and not (args.fixed_size and edges is None):
        seq = lengths[stream]
        if args.balance == "compute":
            seq = seq.astype(np.float64)
            seq += args.alpha * seq * seq
        cw = np.cumsum(seq)
        if cw[-1] <= 0:
            cw = None
    if cw is None:
        cuts = np.round(m * fractions).astype(np.int64)
    else:
        targets = cw[-1] * fractions
        if cw.dtype.kind == "i":  # integer targets: no float copy of the cumulative sums
            targets = np.ceil(targets).astype(cw.dtype)
        cuts = np.searchsorted(cw, targets, side="left").astype(np.int64) + 1
    if edges is not None and len(edges):
        # the distance to a row-group edge in the cells' own weight (rows, tokens, compute)
        if cw is None:
            at, total = (lambda p: p.astype(np.float64)), float(m)
        else:
            full = np.concatenate([[0], cw])
            at, total = (lambda p: full[p].astype(np.float64)), float(full[-1])
        tol = _SNAP[args.balance] * total / n_cells
        right = np.clip(np.searchsorted(edges, cuts), 0, len(edges) - 1)
        left = np.maximum(right - 1, 0)
        d_left, d_right = np.abs(at(edges[left]) - at(cuts)), np.abs(at(edges[right]) - at(cuts))
        nearest = np.where(d_left <= d_right, edges[left], edges[right])
        cuts = np.where(np.minimum(d_left, d_right) <= tol, nearest, cuts)
    cuts = _strictly_inside(cuts, m)
    bounds = np.concatenate([[0], cuts, [m]]).astype(np.int64)
    return [bounds[k * R:(k + 1) * R + 1] for k in range(K)]


def _window_cells(m, R, window):
    """In-memory cells of exactly ``window`` rows, the last block's cells sharing what is
    left (at least one row each): the bucketing windows of :func:`lodarrow.batch_plan`."""
    full = max(-(-m // (R * window)) - 1, 0)
    rem = m - full * R * window
    if full and rem < R:
        full -= 1
        rem += R * window
    starts = (np.arange(full * R, dtype=np.int64) * window).tolist()
    last = full * R * window
    starts += [last + (rem * r) // R for r in range(R)]
    bounds = np.array(starts + [m], dtype=np.int64)
    return [bounds[k * R:(k + 1) * R + 1] for k in range(full + 1)]


def _stratify(stream, lengths, cells, rng):
    """Equal-count cells of near-equal tokens (a fixed-size plan balanced by tokens, in
    memory, where any row can go to any rank): each block's rows by length, dealt to its
    cells in snake order, then shuffled inside each cell."""
    stream = stream.copy()
    out = []
    for bounds in cells:
        lo, hi, R = int(bounds[0]), int(bounds[-1]), len(bounds) - 1
        rows = stream[lo:hi]
        by_length = rows[np.argsort(lengths[rows], kind="stable")]
        i = np.arange(len(rows))
        lap = i % (2 * R)
        cell = np.where(lap < R, lap, 2 * R - 1 - lap)
        dealt = by_length[np.argsort(cell, kind="stable")]
        counts = np.bincount(cell, minlength=R)
        starts = lo + np.concatenate([[0], np.cumsum(counts)])
        for a, b in zip(starts[:-1], starts[1:]):
            dealt[a - lo:b - lo] = dealt[a - lo:b - lo][shuffled(int(b - a), rng)]
        stream[lo:hi] = dealt
        out.append(starts.astype(np.int64))
    return stream, out


def _strictly_inside(cuts, m):
    """Cut positions made strictly increasing inside ``(0, m)``: every cell non-empty."""
    cuts = np.sort(cuts)
    n = len(cuts)
    low = np.arange(1, n + 1, dtype=np.int64)
    high = m - np.arange(n, 0, -1, dtype=np.int64)
    cuts = np.clip(cuts, low, high)
    # strictly increasing: c_j >= c_{j-1} + 1  <=>  c_j - j non-decreasing
    shifted = np.maximum.accumulate(cuts - np.arange(n))
    return shifted + np.arange(n)


# --- 3. batches -------------------------------------------------------------------------------

def _arrange(stream, lengths, cells, args, rng, in_memory):
    """The stream with each cell's rows shuffled (a Parquet stream is in storage order inside
    a row group) and sorted by length (bucketing); and the lengths in that order."""
    order = stream
    bounds = np.unique(np.concatenate(cells))
    if args.shuffle and not in_memory:  # an in-memory stream is shuffled whole already
        order = order.copy()
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            order[lo:hi] = order[lo:hi][shuffled(int(hi - lo), rng)]
    if not args.bucket or len(order) == 0:
        return order, np.ascontiguousarray(lengths[order])
    sorted_order = np.empty_like(order)
    seq = np.empty_like(order)
    threads = num_threads() if len(order) >= _PARALLEL_SORT else 1
    if _k.sort_windows(order, lengths, bounds, sorted_order, seq, False, threads) != 0:
        raise MemoryError(f"{args.fn}: no memory to sort a cell")
    return sorted_order, seq


def _cut(seq, cells, tails, args, R):
    """Each block's batches, cell by cell: ``[(lo array, hi array) per rank]`` per block."""
    blocks = []
    bs, mt = args.batch_size or 0, args.max_tokens or 0
    measure, fixed_rows, multiple, widths = args.kernel_args()
    for k, bounds in enumerate(cells):
        tail = tails if k == len(cells) - 1 and tails else 0
        lanes = []
        for r in range(R):
            lo, hi = int(bounds[r]), int(bounds[r + 1])
            if tail:  # a tail cell: one batch, or two halves
                mids = [lo, (lo + hi) // 2, hi] if tail == 2 else [lo, hi]
                lanes.append((np.array(mids[:-1], np.int64), np.array(mids[1:], np.int64)))
                continue
            cut = np.empty(hi - lo + 1, np.int64)
            nb = _k.cut_batches(seq, np.array([lo, hi], np.int64), bs, mt, measure,
                                fixed_rows, multiple, widths, cut)
            cut[0] = lo  # the kernel starts its bounds at 0
            lanes.append((cut[:nb].copy(), cut[1:nb + 1].copy()))
        blocks.append(lanes)
    return blocks


def _pack(order, seq, cells, args):
    """Packed rows, planned: each cell's sequences packed best-fit decreasing into rows of
    ``row_length`` (split into chunks first under ``oversize="split"``).  Returns the items
    in row order (their sequences, lengths, and ``(start, row, offset, row_length)``, rows
    numbered across the plan), the cells in item positions, and where a batch may be split
    (row starts)."""
    from lodarrow._training._collate import block_placement, pack_placement

    L = args.row_length
    blocks = args.shape.mode == "blocks"
    out_seq, out_len, starts, rows, offsets, new_cells = [], [], [], [], [], []
    pos = row_base = 0
    remainder = [0, 0]  # blocks' remainder="drop": the sequences and tokens left out
    for bounds in cells:
        new = [pos]
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            if blocks:  # the cell's sequences, in stream order, cut into blocks
                p = block_placement(seq[lo:hi], L, remainder=args.shape.collate.remainder)
                remainder[0] += len(p.dropped)
                remainder[1] += int(seq[lo:hi].sum()) - p.tokens
            else:
                p = pack_placement(seq[lo:hi], L, oversize="split" if args.split else "error",
                                   fn=args.fn)
            out_seq.append(order[lo:hi][p.seq])
            out_len.append(p.length)
            starts.append(p.start)
            rows.append(p.row + row_base)
            offsets.append(p.offset)
            row_base += p.n_rows
            pos += len(p.seq)
            new.append(pos)
        new_cells.append(np.array(new, np.int64))
    cat = (lambda xs: np.concatenate(xs) if xs else np.zeros(0, np.int64))
    row = cat(rows)
    splits = np.ones(len(row) + 1, bool)
    splits[1:-1] = row[1:] != row[:-1]
    return (cat(out_seq), np.ascontiguousarray(cat(out_len)),
            (cat(starts), row, cat(offsets), L), new_cells, splits, remainder)


def _cut_rows(row, cells, args, R):
    """Each cell's items cut into batches of ``rows_per_batch`` rows."""
    blocks = []
    per = args.rows_per_batch
    for bounds in cells:
        lanes = []
        for r in range(R):
            lo, hi = int(bounds[r]), int(bounds[r + 1])
            if hi == lo:
                lanes.append((np.zeros(0, np.int64), np.zeros(0, np.int64)))
                continue
            rel = row[lo:hi] - row[lo]
            cuts = lo + np.flatnonzero(np.diff(rel // per)) + 1
            edges = np.concatenate([[lo], cuts, [hi]]).astype(np.int64)
            lanes.append((edges[:-1], edges[1:]))
        blocks.append(lanes)
    return blocks


# --- 4. steps ---------------------------------------------------------------------------------

def _steps(blocks, seq, order, args, R, rng, splits=None, offsets=None):
    """Equal batch counts per rank in every block, batches matched into steps (``splits``
    and ``offsets``: a packed-rows plan's row starts and item slots)."""
    los, his, block_ids, dropped = [], [], [], 0
    carry = None
    csum = sq = None
    if args.balance != "batches":
        csum = np.concatenate([[0], np.cumsum(seq)])
    if args.balance == "compute":
        sq = np.concatenate([[0.0], np.cumsum(seq.astype(np.float64) ** 2)])
    for k, lanes in enumerate(blocks):
        if carry is not None:  # a block that could not be evened out joins this one
            lanes = [(np.concatenate([a[0], b[0]]), np.concatenate([a[1], b[1]]))
                     for a, b in zip(carry, lanes)]
            carry = None
        # the last block has no next one to carry into: it may merge batches instead
        last = k + 1 == len(blocks)
        evened = _even_out(lanes, R, splits, _fits(seq, args) if last else None, offsets)
        if evened is None:
            if k + 1 < len(blocks):
                carry = lanes
                continue
            count = sum(len(a) for a, _ in lanes)
            if not args.drop_last:
                what = ("one packed row of one item" if splits is not None
                        else "one sequence")
                raise ValueError(f"{args.fn}: the sequences cannot be dealt to num_replicas="
                                 f"{R} ranks in equal steps: every batch holds {what} (the "
                                 f"last block's {count} batches), and their count is no "
                                 f"multiple of {R}; use drop_last=True (drops {count % R} "
                                 f"batch(es)), or another num_replicas")
            evened, lost = _deal(lanes, R)
            dropped += _dropped(lost, evened, order, args.fn)
        lo = np.stack([lane[0] for lane in evened])
        hi = np.stack([lane[1] for lane in evened])
        lo, hi = _match(lo, hi, csum, sq, args, rng)
        los.append(lo)
        his.append(hi)
        block_ids.append(np.full(lo.shape, k, np.int64))
    if not los:
        z = np.zeros((R, 0), np.int64)
        return z, z.copy(), z.copy(), dropped
    return np.hstack(los), np.hstack(his), np.hstack(block_ids), dropped


def _fits(seq, args):
    """Whether the batch ``seq[lo:hi]`` keeps every limit of the plan (for a merge)."""
    if args.packing:
        return lambda lo, hi: False  # a batch of rows is full by construction

    def fits(lo, hi):
        count = hi - lo
        if args.batch_size is not None and count > args.batch_size:
            return False
        part = seq[lo:hi]
        longest, tokens = int(part.max()), int(part.sum())
        if args.shape is not None:
            cost = int(args.shape.measure(np.array([count]), np.array([longest]),
                                          np.array([tokens]))[0])
            if cost < 0:
                return False
        else:
            cost = tokens if args.packed else count * longest
        return args.max_tokens is None or cost <= args.max_tokens
    return fits


def _even_out(lanes, R, splits=None, fits=None, offsets=None):
    """Give every lane as many batches.  First each lane short of the longest splits its own
    largest batches (a split exceeds no budget, and no rank reads another's rows); where that
    is not enough, the block's batch count is made a multiple of ``R`` by splits and surplus
    batches move to the lanes short of one.  ``splits`` marks the positions a batch may be
    split at (packed rows: row starts; default anywhere); where no batch of packed rows has a
    row start inside (batches of one row), a row of several items is cut in two (``offsets``,
    the items' slots in their rows, updated).  None when no batch can be split."""
    counts = [len(lo) for lo, _ in lanes]
    if min(counts) == max(counts):
        return lanes
    lanes = [(lo.copy(), hi.copy()) for lo, hi in lanes]
    top = max(counts)
    for r in range(R):
        while len(lanes[r][0]) < top and _split_one(lanes, r, splits):
            pass
    if min(len(lo) for lo, _ in lanes) == top:
        return lanes
    total = sum(len(lo) for lo, _ in lanes)
    def split(r):
        return _split_one(lanes, r, splits) or (
            offsets is not None and _cut_row(lanes, r, splits, offsets)
            and _split_one(lanes, r, splits))

    while total % R:
        short = min(len(lo) for lo, _ in lanes)
        order = sorted(range(R), key=lambda r: len(lanes[r][0]) != short)
        if not any(split(r) for r in order):
            break
        total += 1
    # no batch left to split (batches of one sequence): merge neighbours that fit together
    while total % R and fits is not None:
        if not _merge_one(lanes, fits):
            return None
        total -= 1
    if total % R:
        return None
    return _deal(lanes, R)[0]


def _merge_one(lanes, fits):
    """Merge two neighbouring batches of the block (in stream order, across lanes too: the
    smallest pair that keeps the limits) into the first one's lane; False if none fits."""
    lane = np.concatenate([np.full(len(lo), r) for r, (lo, _) in enumerate(lanes)])
    los = np.concatenate([lo for lo, _ in lanes])
    his = np.concatenate([hi for _, hi in lanes])
    order = np.argsort(los, kind="stable")
    lane, los, his = lane[order], los[order], his[order]
    adjacent = np.flatnonzero(his[:-1] == los[1:])
    for j in adjacent[np.argsort(his[adjacent + 1] - los[adjacent], kind="stable")]:
        a, b = int(los[j]), int(his[j + 1])
        if not fits(a, b):
            continue
        first, second = int(lane[j]), int(lane[j + 1])
        lo, hi = lanes[second]
        keep = lo != los[j + 1]
        lanes[second] = (lo[keep], hi[keep])
        lo, hi = lanes[first]
        hi = np.where(lo == a, b, hi)
        lanes[first] = (lo, hi)
        return True
    return False


def _cut_row(lanes, r, splits, offsets):
    """Cut a row of lane ``r`` holding several items in two rows (the one with the most
    items, at its middle item): the second part's items start again at slot 0, and a row
    start is marked there.  False if every row of the lane holds one item."""
    lo, hi = lanes[r]
    best, at = 0, -1
    for a, b in zip(lo.tolist(), hi.tolist()):
        starts = a + np.flatnonzero(splits[a:b])  # each row of the batch: [start, next)
        ends = np.append(starts[1:], b)
        sizes = ends - starts
        k = int(np.argmax(sizes))
        if sizes[k] > best:
            best, at = int(sizes[k]), int(starts[k])
    if best < 2:
        return False
    mid = at + best // 2
    offsets[mid:at + best] -= offsets[mid]
    splits[mid] = True
    return True


def _split_one(lanes, r, splits):
    """Split lane ``r``'s largest batch in two; False if no batch of it can be split."""
    lo, hi = lanes[r]
    if not len(lo):
        return False
    if splits is None:
        size = hi - lo
    else:  # a batch of one row cannot be split
        size = np.array([np.count_nonzero(splits[a + 1:b]) + 1 for a, b in zip(lo, hi)])
    j = int(np.argmax(size))
    if size[j] < 2:
        return False
    mid = (lo[j] + hi[j]) // 2
    if splits is not None:  # the row start nearest the middle
        inside = lo[j] + 1 + np.flatnonzero(splits[lo[j] + 1:hi[j]])
        mid = int(inside[np.argmin(np.abs(inside - mid))])
    lanes[r] = (np.insert(lo, j + 1, mid), np.insert(hi, j, mid))
    return True


def _dropped(lost, kept, order, fn):
    """The sequences the batches ``lost`` (``(lo, hi)`` ranges of ``order``) leave out.  A
    sequence cut into chunks must be left out whole or not at all: a chunk of it in a kept
    batch is a ``ValueError`` (the loader is refused, never a part delivered)."""
    if not lost:
        return 0
    gone = np.unique(np.concatenate([order[a:b] for a, b in lost]))
    kept_rows = np.concatenate([order[a:b] for lane in kept for a, b in zip(*lane)] or
                               [np.zeros(0, np.int64)])
    if np.isin(gone, kept_rows).any():
        raise ValueError(f"{fn}: drop_last would deliver part of a sequence that "
                         "oversize='split' cut into rows (the rest dropped); use another "
                         "num_replicas, or drop_last=False")
    return int(len(gone))


def _deal(lanes, R):
    """Move surplus batches to the lanes short of ``total // R``; the batches left over (fewer
    than ``R``: what cannot fill a step, none when the total is a multiple of ``R``) are
    dropped.  A lane gives away
    batches spread evenly over its (length-sorted) batches, so the receiver gets typical
    ones.  Returns the lanes and the sequences dropped."""
    total = sum(len(lo) for lo, _ in lanes)
    target = total // R
    spare_lo, spare_hi, out = [], [], []
    for lo, hi in lanes:
        extra = len(lo) - target
        if extra <= 0:
            out.append([lo, hi])
            continue
        give = np.unique(np.linspace(0, len(lo) - 1, extra).round().astype(np.int64))
        keep = np.ones(len(lo), bool)
        keep[give] = False
        out.append([lo[keep], hi[keep]])
        spare_lo.extend(lo[give].tolist())
        spare_hi.extend(hi[give].tolist())
    for lane in out:
        need = target - len(lane[0])
        if need > 0:
            lane[0] = np.concatenate([lane[0], spare_lo[-need:]]).astype(np.int64)
            lane[1] = np.concatenate([lane[1], spare_hi[-need:]]).astype(np.int64)
            del spare_lo[-need:], spare_hi[-need:]
    lost = list(zip(spare_lo, spare_hi))
    return [(lo, hi) for lo, hi in out], lost


def _match(lo, hi, csum, sq, args, rng):
    """Order each lane's batches into steps: by cost (matched quantiles) for the balances
    "tokens" and "compute", shuffled per lane for "batches"; steps shuffled alike."""
    R, T = lo.shape
    if T == 0:
        return lo, hi
    if args.balance != "batches":
        cost = (csum[hi] - csum[lo]).astype(np.float64)
        if args.balance == "compute":
            cost = cost + args.alpha * (sq[hi] - sq[lo])
        by_cost = np.argsort(-cost, axis=1, kind="stable")
        lo = np.take_along_axis(lo, by_cost, 1)
        hi = np.take_along_axis(hi, by_cost, 1)
        if args.shuffle:
            perm = rng.permutation(T)
            lo, hi = lo[:, perm], hi[:, perm]
    elif args.shuffle:
        perm = np.argsort(rng.random((R, T)), axis=1)
        lo = np.take_along_axis(lo, perm, 1)
        hi = np.take_along_axis(hi, perm, 1)
    return lo, hi


def _empty(R, alpha, dropped):
    z = np.zeros((R, 0), np.int64)
    return EpochPlan(np.zeros(0, np.int64), z, z.copy(), z.copy(), np.zeros(0, np.int64),
                     alpha, dropped)
