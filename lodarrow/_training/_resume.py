"""A loader's position as data: the state a checkpoint keeps, and the plans it implies
(docs/training.md#resuming).

The state is small whatever the dataset's size: the plan version, the planning arguments, a
fingerprint of the source, the seed, the epoch, the cursor (steps of the epoch the training
loop received) and the epoch's *legs* (one per world size it ran on: ``segments``, a
``[num_replicas, first_step]`` pair per leg).  From it, :func:`segment_plan` rebuilds the plan
that delivers exactly the sequences not yet received:

- the same ``num_replicas`` as at the save: the epoch's plan, from step ``cursor`` on;
- another ``num_replicas`` (an *elastic* resume): the sequences of the steps not yet received
  are planned again for the new world, as a new *leg* of the epoch (its own randomness:
  ``seed``, ``epoch`` and the leg's number).  A chain of changes is a chain of legs.

Worker counts do not enter: batches reach the training loop in plan order whatever the
number of ``DataLoader`` workers or prefetch threads, so a step count alone says what was
received.
"""

import hashlib
import json

import numpy as np

from lodarrow._training._epoch import PLAN_VERSION, plan_epoch, plan_pieces

__all__ = ["FORMAT", "Position", "check_state", "fingerprint", "segment_plan"]

FORMAT = "lodarrow.batch_loader"


class Position:
    """Where a loader is: the one owner of its epoch, its cursor (the steps of the epoch the
    training loop received) and the epoch's legs (the worlds it ran on, with the step each
    began at).  ``set_epoch``, ``load_state_dict``, ``state_dict``, the iteration (in this
    process and in ``DataLoader`` workers) and torchdata's ``StatefulDataLoader`` read and
    write it through these methods; :meth:`state` is its part of the saved state.

    Attributes
    ----------
    epoch, cursor : int
    start : int
        The cursor ``set_epoch`` / ``load_state_dict`` set: where a replayed pass starts.
    segments : list of [num_replicas, first_step]
        The epoch's legs, in order.
    pieces : bool
        A world change plans the tokens left (:func:`segment_plan`); False for a state saved
        after a world change by a lodarrow that planned the sequences left whole.
    fresh : bool
        Set since the last pass began (a pass then is not a replay).
    """

    __slots__ = ("cursor", "epoch", "fresh", "pieces", "segments", "start", "warned")

    def __init__(self, num_replicas):
        self.warned = False
        self.reset(0, num_replicas, 0)

    def reset(self, epoch, num_replicas, start):
        """Epoch ``epoch`` from step ``start`` on one world (``set_epoch``)."""
        self.epoch, self.segments, self.pieces = epoch, [[num_replicas, 0]], True
        self.cursor = self.start = start
        self.fresh = True

    def restore(self, epoch, cursor, segments, pieces):
        """The position a saved state names (``load_state_dict``)."""
        self.epoch, self.segments, self.pieces = epoch, segments, pieces
        self.cursor = self.start = cursor
        self.fresh = True

    def state(self, cursor, items):
        """This position's part of a saved state, at ``cursor``; ``items``: whether the plan
        lays out items (packed rows, blocks), whose world changes plan token pieces."""
        out = {"epoch": self.epoch, "cursor": cursor,
               "segments": [list(s) for s in self.segments]}
        if len(self.segments) > 1 and self.pieces and items:
            out["pieces"] = 1
        return out

    def replays(self, steps):
        """Whether a pass begun now replays a whole pass (of an epoch of ``steps`` steps): no
        ``set_epoch`` or ``load_state_dict`` since a pass that ended.  Such a pass gives the
        same batches again, from :attr:`start`, with a warning."""
        return not self.fresh and self.cursor >= steps

    def begin_pass(self, steps):
        """A pass begins in this process: from the cursor, or from :attr:`start` again when
        it replays a whole pass (True then)."""
        replay = self.replays(steps)
        if replay:
            self.cursor = self.start
        self.fresh = False
        return replay


def fingerprint(lengths, files=None):
    """What identifies a source: its sequence count, tokens, a digest of the lengths, and for
    a Parquet source the files (relative names, sizes, rows) as a digest."""
    digest = hashlib.blake2b(np.ascontiguousarray(lengths, dtype=np.int64).view(np.uint8),
                             digest_size=16).hexdigest()
    out = {"sequences": int(len(lengths)), "tokens": int(lengths.sum()),
           "lengths_digest": digest}
    if files is not None:
        text = json.dumps(files, sort_keys=True).encode()
        out["files"] = len(files)
        out["files_digest"] = hashlib.blake2b(text, digest_size=16).hexdigest()
    return out


def rng_of(seed, epoch, segment):
    key = [seed, epoch] if segment == 0 else [seed, epoch, segment]
    return np.random.default_rng(key)


def segment_plan(lengths, args, segments, seed, epoch, part_starts=None, cache=None,
                 base_rows=None, part_groups=None, pieces=True):
    """The plan of the epoch's last leg and the step it starts at.

    ``segments`` lists the legs' ``(num_replicas, first_step)`` in the order the epoch ran
    them: leg ``i`` delivered steps ``[first_step_i, first_step_{i+1})`` of the epoch.
    ``cache`` (a dict) keeps the plans already made, keyed by their prefix of legs;
    ``base_rows`` are the sequences the epoch plans (default all: nulls and over-long
    sequences a loader drops are not among them); ``part_groups``: each row group's source
    (a mixture).

    A packed-rows or blocks plan may have delivered part of a sequence (its first block, a
    chunk of a split one) before the world changed: with ``pieces`` the next leg plans
    the token pieces not yet delivered (:func:`~lodarrow._training._epoch.plan_pieces`), so
    that every token is delivered once across any chain of worlds.  Without (a state saved
    after a world change by a lodarrow that planned what was left whole: no ``pieces`` in
    it; it resumes as it was saved) the sequences not yet wholly delivered are planned
    whole, and the plan's ``redelivered`` counts the tokens delivered again.
    """
    plan, rows, base, key = None, base_rows, 0, (epoch,)
    cut, redelivered = None, 0
    for i, (replicas, first) in enumerate(segments):
        if plan is not None:
            if replicas == plan.num_replicas:  # a restart on the same world: the same plan
                continue
            # what leg i-1 had not delivered when leg i began
            rows, cut, again = _left(plan, first - base, lengths, pieces)
            redelivered += again
            base = first
        key = key + ((replicas, first),)
        hit = None if cache is None else cache.get(key)
        if hit is None:
            rng = rng_of(seed, epoch, i)
            if cut is None:
                hit = plan_epoch(lengths, args, replicas, rng, rows=rows,
                                 part_starts=part_starts, part_groups=part_groups)
            else:
                hit = plan_pieces(cut, args, replicas, rng, part_starts=part_starts,
                                  part_groups=part_groups)
            if cache is not None:
                if len(cache) > 4:
                    cache.clear()
                cache[key] = hit
        plan = hit
    plan.redelivered = redelivered
    return plan, base


def _left(plan, step, lengths, pieces):
    """``(rows, pieces, redelivered)``: what ``plan`` had not delivered before its step
    ``step``, as the sequences to plan (``rows``) or, where a sequence was partly delivered
    and ``pieces`` is on, as token pieces; and the tokens planned again that were delivered
    already (0 with pieces)."""
    if plan.items is None:
        return np.sort(plan.rows_of_steps(step, plan.steps)), None, 0
    seq, first, tokens = plan.pieces_of_steps(step, plan.steps)
    partial = bool(len(seq)) and (np.any(first > 0) or np.any(tokens != lengths[seq])
                                  or len(np.unique(seq)) != len(seq))
    if partial and pieces:
        return None, (seq, first, tokens), 0
    rows = np.unique(seq)
    if not partial:
        return rows, None, 0
    return rows, None, int(lengths[rows].sum() - tokens.sum())

def check_state(state, expected, strict, fn="load_state_dict"):
    """Check a saved state against this loader (``expected``: what its state_dict would
    hold): a ``ValueError`` naming every difference, unless ``strict`` is False."""
    if not isinstance(state, dict):
        raise TypeError(f"{fn}: state must be a dict (from state_dict()), got "
                        f"{type(state).__name__}")
    if state.get("format") != FORMAT:
        raise ValueError(f"{fn}: state is not a batch_loader state (format "
                         f"{state.get('format')!r}, expected {FORMAT!r})")
    for key in ("epoch", "cursor", "num_replicas", "segments", "seed", "plan_version"):
        if key not in state:
            raise ValueError(f"{fn}: state has no {key!r}")
    problems = []
    if state["plan_version"] != PLAN_VERSION:
        problems.append(f"plan_version {state['plan_version']} was saved, this lodarrow plans "
                        f"with version {PLAN_VERSION}")
    if state["seed"] != expected["seed"]:
        problems.append(f"seed {state['seed']} was saved, the loader has {expected['seed']}")
    for name, saved in sorted(state.get("args", {}).items()):
        now = expected["args"].get(name)
        if saved != now:
            problems.append(f"argument {name}={saved!r} was saved, the loader has {now!r}")
    for name, saved in sorted(state.get("source", {}).items()):
        now = expected["source"].get(name)
        if saved != now:
            problems.append(f"source {name} {saved!r} was saved, the loader's is {now!r}")
    if problems and strict:
        raise ValueError(f"{fn}: the state does not match this loader: " + "; ".join(problems)
                         + ". Pass strict=False to resume anyway (the plan of the current "
                         "source and arguments, from the saved step: no exactly-once "
                         "guarantee)")
    return problems
