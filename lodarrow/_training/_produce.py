"""The delivery stage's making of batches: one rank's steps of a plan read from the source,
collated to the shape and converted to ``to``'s library (docs/training.md#where-options-meet).

A :class:`Producer` is given what the stages before it decided (the source, the shape, the
rank, the pad value, the extra columns' specs, a mixture's maps) and the read-ahead, and
offers one interface, :meth:`Producer.produce`.  The epoch, the cursor and the plans are the
loader's: it says which plan and which steps, and a mixture's choice of the epoch.  A
``DataLoader`` worker's producer (:meth:`Producer.handing_over`) gives each host batch to the
worker's ring instead of converting it.
"""

import copy

import numpy as np

from lodarrow._training._collate import (PACKED_TOKENS, PIECE_IDS, TOKEN_ARRAYS, collate_rows,
                                        convert, rows_batch)
from lodarrow._training._readahead import ReadAhead

__all__ = ["Producer", "blocks_of"]

_FN = "batch_loader"
#: The next epoch's first block is read ahead (held beside the last block of the epoch) up to
#: this many bytes of sequence values.
_AHEAD_BYTES = 1 << 30


class Producer:
    """Makes one rank's batches of a plan, each block of the source read once.

    Parameters
    ----------
    src : TableSource, ParquetSource or RaySource
        The source (:mod:`lodarrow._training._source`): its ``kind`` says how it is read.
    shape : BatchShape
        The shape (:mod:`lodarrow._training._shape`).
    rank : int
        The rank whose batches are made.
    pad : numpy.ndarray
        The pad value, one value row of the column's dtype.
    extra_specs : sequence, default ()
        The extra columns' specs (:mod:`lodarrow._training._columns`).
    lengths : numpy.ndarray of int64, optional
        Every sequence's length as planned (a separator counted): what bounds the next
        epoch's block read ahead (:data:`_AHEAD_BYTES`).
    to : {"numpy", "torch", "jax", "tf"}, default "numpy"
        The arrays' library.
    prefetch : int, default 0
        Nonzero: a Parquet source's next block is read while this one's batches are made.
    ahead : ReadAhead, optional
        The reads made ahead (kept across passes); default: one over ``src.read``.
    mix : tuple of numpy.ndarray, optional
        A mixture's ``(position in its source, source)`` of every sequence.
    hand_over : callable, optional
        A ``DataLoader`` worker's ring: each host batch, as NumPy arrays, is given to it and
        what it returns is delivered instead (the per-token arrays left to the main process).
    """

    def __init__(self, src, shape, rank, pad, *, extra_specs=(), lengths=None, to="numpy",
                 prefetch=0, ahead=None, mix=None, hand_over=None):
        self._src, self._shape, self._rank, self._pad = src, shape, rank, pad
        self._extra_specs, self._lengths = tuple(extra_specs), lengths
        self._to, self._prefetch = to, prefetch
        if ahead is None and src.kind == "blocks":
            ahead = ReadAhead(src.read)
        self._ahead, self._mix = ahead, mix
        self._hand_over = hand_over
        self._token_arrays = shape.token_arrays and hand_over is None

    def handing_over(self, hand_over):
        """This producer for a ``DataLoader`` worker: each host batch given to
        ``hand_over(batch)`` (the worker's ring), which returns what is delivered."""
        out = copy.copy(self)
        out._hand_over = hand_over
        out._token_arrays = self._shape.token_arrays and hand_over is None
        return out

    def produce(self, plan, steps, next_first=0, *, vmap=None, next_plan=None):
        """``(step, batch, tokens)`` for each step of ``steps``, reading each block once for
        the steps that need it.

        With ``prefetch``, the next block is read while this one's batches are made, and at
        the last block the first block of the likely next pass.  The pass, ended or broken
        off, waits for the reads it started.

        Parameters
        ----------
        plan : GlobalPlan
            The plan (:mod:`lodarrow._training._epoch`), every rank's batches.
        steps : range
            This rank's steps to make, in order.
        next_first : int or None, default 0
            The next pass's first step (of the next epoch, then every ``steps.step``-th: a
            ``DataLoader`` worker's share); None: its first block is not read ahead.
        vmap : numpy.ndarray of int64, optional
            A mixture's source position of each plan position (its epoch's choice); None:
            the plan's positions are the source's.
        next_plan : callable, optional
            ``next_plan() -> (plan, vmap)``: the next epoch's, asked for at the last block
            only; None: nothing of the next pass is read ahead.

        Returns
        -------
        generator of (int, dict, int)
            The step, its batch and its tokens.
        """
        rank, src = self._rank, self._src
        if src.kind == "stream":
            return self._produce_stream(plan, steps)
        if src.kind == "whole":
            return ((s, self._batch(src.seqs, None, plan, s, src.extras, vmap),
                     int(plan.tokens[rank, s])) for s in steps)
        if not self._prefetch:
            return self._produce_inline(plan, steps, vmap)
        if next_plan is None:
            next_first = None
        return self._produce_ahead(plan, steps, next_first, vmap, next_plan)

    def _produce_inline(self, plan, steps, vmap):
        """:meth:`produce` reading each block when its first batch is made."""
        rank, ahead = self._rank, self._ahead
        for group in blocks_of(plan, rank, steps):
            # read now, in this thread (through the read-ahead's one read of the source)
            seqs, local_of, extras = ahead.result(None, self._block_rows(plan, group, vmap))
            for s in group:
                yield s, self._batch(seqs, local_of, plan, s, extras, vmap), \
                    int(plan.tokens[rank, s])
            del seqs, extras

    def _produce_ahead(self, plan, steps, next_first, vmap, next_plan):
        """:meth:`produce` reading the next block while this one's batches are made."""
        rank, ahead = self._rank, self._ahead
        groups = blocks_of(plan, rank, steps)
        if not groups:
            return
        rows = self._block_rows(plan, groups[0], vmap)
        pending = ahead.take(rows)
        ended = False
        try:
            for i, group in enumerate(groups):
                future, pending = pending, None
                seqs, local_of, extras = ahead.result(future, rows)
                last = i + 1 == len(groups)
                if not last:
                    rows = self._block_rows(plan, groups[i + 1], vmap)
                    pending = ahead.submit(rows)
                for j, s in enumerate(group):
                    yield (s, self._batch(seqs, local_of, plan, s, extras, vmap),
                           int(plan.tokens[rank, s]))
                    if last and j == 0 and next_first is not None:  # not delaying it
                        self._read_next_pass(next_first, steps.step, next_plan)
                del seqs, extras
            ended = True
        finally:
            if not ended:  # broken off: reads not yet made are not made (a later pass
                ahead.stop()  # that needs a block makes it)
            if pending is not None:  # a pass broken off: its next block may start the next
                ahead.keep(rows, pending)
            ahead.settle()

    def _block_rows(self, plan, group, vmap):
        """The source positions of the steps ``group`` of one block."""
        rank = self._rank
        if plan.items is not None:  # items (rows, blocks): their sequences, once each
            lo, hi = plan.lo[rank], plan.hi[rank]
            rows = _unique(np.concatenate([plan.order[lo[s]:hi[s]] for s in group]))
        else:
            rows = np.concatenate([plan.batch(rank, s) for s in group])
        return rows if vmap is None else vmap[rows]

    def _read_next_pass(self, first, stride, next_plan):
        """Read the first block of the next epoch's pass from step ``first`` every
        ``stride``-th (what follows ``set_epoch(epoch + 1)``), up to :data:`_AHEAD_BYTES`."""
        plan, vmap = next_plan()
        groups = blocks_of(plan, self._rank, range(first, plan.steps, stride), 1)
        if not groups:
            self._ahead.drop()
            return
        rows = self._block_rows(plan, groups[0], vmap)
        if int(self._lengths[rows].sum()) * self._src.value_bytes > _AHEAD_BYTES:
            self._ahead.drop()
            return
        self._ahead.keep(rows)

    def _batch(self, seqs, local_of, plan, step, extras, vmap):
        """Step ``step``'s batch of this rank: ``local_of`` maps source positions to those of
        ``seqs`` (None: the same)."""
        made = None
        if plan.items is not None and not seqs.on_gpu:
            made = self._rows_batch(seqs, local_of, plan, step, vmap)
        if made is not None:
            out, rows, local = made
            src = rows if vmap is None else vmap[rows]
        else:
            placement = None
            if plan.items is not None:
                rows, placement = plan.placement(self._rank, step)
            else:
                rows = plan.batch(self._rank, step)
            src = rows if vmap is None else vmap[rows]
            local = src if local_of is None else local_of(src)
            shape = self._shape
            out = collate_rows(seqs, local, shape.mode, self._pad, shape.row_length,
                               placement=placement, shape=shape.collate, fn=_FN,
                               trusted=True, per_token=self._token_arrays)
            if not shape.token_arrays:
                for key in TOKEN_ARRAYS + (PACKED_TOKENS,):
                    out.pop(key, None)
        if self._mix is None:
            out["rows"] = rows
        else:  # which sequence of which source
            pos_in_src, src_of = self._mix
            out["rows"], out["source"] = pos_in_src[src], src_of[src]
        arrow = {}
        for spec in self._extra_specs:
            spec.take(extras[spec.name], local, out if spec.numeric else arrow)
        if self._hand_over is not None and not seqs.on_gpu:
            out = convert(out, False, "numpy", _FN)
            out.update(arrow)
            return self._hand_over(out)
        out = convert(out, seqs.on_gpu, self._to, _FN)
        out.update(arrow)
        return out

    def _rows_batch(self, seqs, local_of, plan, step, vmap):
        """:meth:`_batch`'s packed rows and blocks in one kernel call (:func:`rows_batch`):
        ``(out, rows, local)``, or None for the general path.  Handing batches over to a
        ring, the per-token arrays are left to the main process; without ``token_arrays``,
        to no one."""
        a, b = plan.lo[self._rank, step], plan.hi[self._rank, step]
        seq = plan.order[a:b]
        src = seq if vmap is None else vmap[seq]
        local = src if local_of is None else local_of(src)
        start, row, offset = (x[a:b] for x in plan.items[:3])
        shape = self._shape
        made = rows_batch(seqs, seq, np.ascontiguousarray(local, np.int64), start,
                          plan.seq[a:b], row, offset, shape.collate.num_rows,
                          shape.row_length, self._pad, self._token_arrays, _FN)
        if made is None:
            return None
        out, rows, first = made
        if not shape.token_arrays:
            out.pop(PIECE_IDS, None)
        return out, rows, local[first]

    def _produce_stream(self, plan, steps):
        """:meth:`produce` for a streamed source (Ray): its blocks read in its order (the
        blocks before the first one needed are read and passed over: Ray cannot skip them)."""
        groups = {int(plan.block[0, g[0]]): g for g in blocks_of(plan, 0, steps)}
        for b, seqs, extras, first in self._src.decoded_blocks(set(groups)):
            def local_of(rows, first=first):
                return rows - first
            for s in groups[b]:
                yield (s, self._batch(seqs, local_of, plan, s, extras, None),
                       int(plan.tokens[0, s]))
            del seqs, extras


def _unique(rows):
    """``np.unique(rows)`` of integer positions, marked in a mask over their span where that
    span is at most a few times their count (a block's rows: the sort of ``np.unique`` took
    a tenth of the consumer's time in an epoch read from Parquet)."""
    if not len(rows):
        return np.unique(rows)
    lo = int(rows.min())
    span = int(rows.max()) - lo + 1
    if span > 8 * len(rows) + (1 << 16):  # sparse: the mask would cost more than the sort
        return np.unique(rows)
    seen = np.zeros(span, np.bool_)
    seen[rows - lo] = True
    return (np.flatnonzero(seen) + lo).astype(rows.dtype, copy=False)


def blocks_of(plan, rank, steps, limit=None):
    """``steps`` (of ``rank`` in ``plan``) cut where their block changes, in order (the
    first ``limit`` groups)."""
    steps = list(steps)
    blocks = plan.block[rank, steps] if steps else np.zeros(0, np.int64)
    groups, k = [], 0
    while k < len(steps) and (limit is None or len(groups) < limit):
        j = k
        while j < len(steps) and blocks[j] == blocks[k]:
            j += 1
        groups.append(steps[k:j])
        k = j
    return groups
