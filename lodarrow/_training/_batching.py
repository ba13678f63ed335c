"""Batch plans: which rows go in which batch, on which rank (docs/training.md#plans)."""

import numpy as np

from lodarrow._validation import as_flag, as_nonnegative_int, as_positive_int, check_choice

__all__ = ["BatchPlan", "batch_plan"]

_FN = "batch_plan"


class BatchPlan:
    """The batches of one rank for one epoch, as data: row indices per batch.

    Batch ``b`` holds the rows ``indices[offsets[b]:offsets[b + 1]]`` (positions in the
    ``lengths`` the plan was made from, hence rows of the table or dataset).  Made by
    :func:`lodarrow.batch_plan`; see docs/training.md#plans.

    A plan is a sequence of its batches: ``len(plan)`` is the number of batches, ``plan[b]``
    batch ``b``'s rows (an integer ``b``, negative from the end; a view of ``indices``),
    ``plan[i:j]`` a list of those batches, and iterating gives the batches in order.
    Indexing raises ``IndexError`` for a batch out of range and ``TypeError`` for an index
    that is not an integer or a slice (a bool included).

    Attributes
    ----------
    offsets : numpy.ndarray of int64, shape (n_batches + 1,)
        Where each batch starts in ``indices``.
    indices : numpy.ndarray of int64
        The rows of every batch, batch after batch.
    tokens : numpy.ndarray of int64, shape (n_batches,)
        The sum of the lengths of each batch (its packed size).
    longest : numpy.ndarray of int64, shape (n_batches,)
        The longest sequence of each batch (its padded size is ``count * longest``).
    rank, num_replicas, seed, epoch : int
        Whose share this is, of how many, and the randomness it was drawn with.
    windows : numpy.ndarray of int64, shape (n_batches,)
        The block each batch was cut from (a loader reads a block's batches together).

    Examples
    --------
    >>> import lodarrow as la
    >>> plan = la.batch_plan([3, 1, 2, 5, 4], batch_size=2, seed=0)
    >>> len(plan), plan.sizes
    (3, array([1, 2, 2]))
    >>> plan[0], plan[-1]          # the rows of the first batch and of the last
    (array([3]), array([4, 0]))
    >>> [batch.tolist() for batch in plan]
    [[3], [2, 1], [4, 0]]
    >>> [batch.tolist() for batch in plan[1:]]
    [[2, 1], [4, 0]]
    """

    def __init__(self, offsets, indices, tokens, longest, windows, *, rank=0, num_replicas=1,
                 seed=0, epoch=0):
        self.offsets, self.indices = offsets, indices
        self.tokens, self.longest, self.windows = tokens, longest, windows
        self.rank, self.num_replicas, self.seed, self.epoch = rank, num_replicas, seed, epoch

    def __len__(self):
        return len(self.offsets) - 1

    def __getitem__(self, b):
        if isinstance(b, slice):  # as a list of batches would: a list of the batches
            return [self[k] for k in range(len(self))[b]]
        if isinstance(b, (bool, np.bool_)):  # an index, not a flag (as set_epoch's)
            raise TypeError("BatchPlan indices must be integers or slices, not bool")
        try:
            b = range(len(self))[b]
        except TypeError:
            raise TypeError(f"BatchPlan indices must be integers or slices, not "
                            f"{type(b).__name__}") from None
        except IndexError:
            raise IndexError(f"BatchPlan index {b} is out of range ({len(self)} batches)") \
                from None
        return self.indices[self.offsets[b]:self.offsets[b + 1]]

    def __iter__(self):
        for b in range(len(self)):
            yield self.indices[self.offsets[b]:self.offsets[b + 1]]

    @property
    def sizes(self):
        """The number of sequences of each batch."""
        return np.diff(self.offsets)

    @property
    def padded_tokens(self):
        """Each batch's size padded to its longest sequence: ``count * longest``."""
        return self.sizes * self.longest

    @property
    def padding_waste(self):
        """The share of padding in the plan's padded batches: ``1 - tokens / padded``."""
        padded = int(self.padded_tokens.sum())
        return 0.0 if padded == 0 else 1.0 - int(self.tokens.sum()) / padded

    def __repr__(self):
        return (f"BatchPlan({len(self)} batches, {len(self.indices)} sequences, "
                f"{int(self.tokens.sum())} tokens, padding waste {self.padding_waste:.1%}, "
                f"rank {self.rank} of {self.num_replicas})")


def batch_plan(lengths, *, batch_size=None, max_tokens=None, cost="padded", window=None,
               shuffle=True, seed=0, epoch=0, drop_last=False, num_replicas=1, rank=0,
               balance="batches", alpha=0.0, oversize="alone"):
    """Plan the batches of one epoch from the sequence lengths, in a compiled kernel.

    The one global plan of :func:`lodarrow.batch_loader`, for lengths in memory: the rows are
    shuffled (``seed``, ``epoch``), cut into consecutive *cells*, one per rank per block of
    about ``window`` rows each, sorted by length inside each cell (bucketing) and cut
    greedily into batches of at most ``batch_size`` sequences and ``max_tokens`` tokens.
    Every rank gets the same number of batches (a block whose count is no multiple of
    ``num_replicas`` splits its largest batches, then evens the ranks out), and every
    sequence is in exactly one batch of one rank per epoch (unless ``drop_last`` or
    ``oversize="drop"``).  Every rank computes the same plan and takes its share.  See
    docs/training.md#plans.

    Parameters
    ----------
    lengths : array-like of int
        The length of every sequence, e.g. from :func:`lodarrow.sequence_lengths`.
    batch_size : int, optional
        The most sequences in a batch.
    max_tokens : int, optional
        The token budget of a batch, counted as ``cost`` says.  At least one of
        ``batch_size`` and ``max_tokens`` is needed.
    cost : {"padded", "packed"}, default "padded"
        How a batch's tokens count against ``max_tokens``: ``count * longest`` (the padded
        batch) or the sum of the lengths (a packed batch).
    window : int, optional
        Sort the rows by length inside each rank's cell of about ``window`` shuffled rows
        (bucketing: batches of similar lengths, little padding); default: no sorting (random
        batches), one block.
    shuffle : bool, default True
        Shuffle the rows and the batches.  False keeps the rows' order, but a ``window``
        still sorts each window by length (and its batches follow in that order).
    seed, epoch : int, default 0
        The randomness: the same (seed, epoch) gives the same plan, on every rank and run.
    drop_last : bool, default False
        Drop what cannot fill a step: a fixed-size plan (``batch_size`` without
        ``max_tokens``) drops fewer than ``num_replicas * batch_size`` sequences so that
        every batch is full; otherwise nothing is dropped unless the sequences cannot be
        dealt to the ranks at all.
    num_replicas, rank : int, default 1, 0
        Sharding: this plan is rank ``rank``'s share of ``num_replicas``.
    balance : {"batches", "tokens", "compute"}, default "batches"
        What the ranks' shares even out.  "batches": each rank's share of a block holds as
        many sequences, and each rank's batches come in a random order.  "tokens": each
        rank's share of a block holds as many tokens, and the batches are matched by size:
        step ``j`` gives every rank its ``j``-th largest batch, so the batches of one step
        hold similar token counts.  "compute": as "tokens", with a sequence costing
        ``len + alpha * len**2`` instead of ``len``.
    alpha : float, default 0.0
        The quadratic weight of ``balance="compute"``.
    oversize : {"alone", "error", "drop"}, default "alone"
        A sequence longer than ``max_tokens``: a batch of its own, a ``ValueError``, or left
        out of the plan.

    Returns
    -------
    BatchPlan
        This rank's batches (``offsets``, ``indices``), with their ``tokens``, ``longest``
        and ``padding_waste``.

    Raises
    ------
    TypeError
        If an argument has the wrong type (the message names it).
    ValueError
        If ``lengths`` has negative values, neither ``batch_size`` nor ``max_tokens`` is
        given, a choice is unknown, ``rank`` is not in ``[0, num_replicas)``, a sequence is
        longer than ``max_tokens`` with ``oversize="error"``, or there are too few sequences
        to give every rank a batch.

    See Also
    --------
    sequence_lengths : The lengths of a list column, read without the values.
    collate : Make the arrays of one batch of the plan.
    batch_loader : Plan, read and collate as one stream, epoch after epoch.

    Examples
    --------
    >>> import lodarrow as la
    >>> plan = la.batch_plan([5, 1, 4, 2, 3, 6], max_tokens=8, cost="packed", shuffle=False)
    >>> [b.tolist() for b in plan]
    [[0, 1], [2, 3], [4], [5]]
    >>> plan.tokens
    array([6, 6, 3, 6])
    """
    from lodarrow._training._epoch import PlanArgs, decide_oversize, plan_epoch
    from lodarrow._training._resume import rng_of

    lengths = _lengths(lengths)
    batch_size = _optional_positive(batch_size, "batch_size")
    max_tokens = _optional_positive(max_tokens, "max_tokens")
    if batch_size is None and max_tokens is None:
        raise ValueError(f"{_FN}: give batch_size, max_tokens or both (both are None)")
    packed = check_choice(cost, f"{_FN}: cost", ("padded", "packed")) == "packed"
    window = _optional_positive(window, "window")
    shuffle = as_flag(shuffle, f"{_FN}: shuffle")
    seed = _nonneg(seed, "seed")
    epoch = _nonneg(epoch, "epoch")
    drop_last = as_flag(drop_last, f"{_FN}: drop_last")
    num_replicas = as_positive_int(num_replicas, f"{_FN}: num_replicas")
    rank = _nonneg(rank, "rank")
    if rank >= num_replicas:
        raise ValueError(f"{_FN}: rank must be in [0, num_replicas={num_replicas}), got {rank}")
    balance = check_choice(balance, f"{_FN}: balance", ("batches", "tokens", "compute"))
    alpha = _alpha(alpha)
    oversize = check_choice(oversize, f"{_FN}: oversize", ("alone", "error", "drop"))
    if oversize == "error" and max_tokens is not None:  # "drop": plan_epoch applies it
        _, refused = decide_oversize(lengths, oversize, None, max_tokens)
        if refused is not None:
            row = refused[0]
            raise ValueError(f"{_FN}: sequence {row} has {int(lengths[row])} tokens, more "
                             f"than max_tokens={max_tokens} (oversize='error'; 'alone' gives "
                             f"it a batch of its own, 'drop' leaves it out)")
    args = PlanArgs(batch_size=batch_size, max_tokens=max_tokens, packed=packed,
                    bucket=window is not None, shuffle=shuffle, drop_last=drop_last,
                    balance=balance, alpha=alpha, oversize=oversize,
                    cell_rows=window or max(len(lengths), 1), fn=_FN)
    plan = plan_epoch(lengths, args, num_replicas, rng_of(seed, epoch, 0))
    return rank_plan(plan, rank, seed=seed, epoch=epoch)


def rank_plan(plan, rank, *, seed, epoch, first=0):
    """Rank ``rank``'s share of an :class:`~lodarrow._training._epoch.EpochPlan` (from step
    ``first``) as a :class:`BatchPlan`."""
    lo, hi = plan.lo[rank, first:], plan.hi[rank, first:]
    sizes = hi - lo
    offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    pos = np.repeat(lo - offsets[:-1], sizes) + np.arange(offsets[-1], dtype=np.int64)
    return BatchPlan(offsets, plan.order[pos], plan.tokens[rank, first:].copy(),
                     plan.longest[rank, first:].copy(), plan.block[rank, first:].copy(),
                     rank=rank, num_replicas=plan.num_replicas, seed=seed, epoch=epoch)


def _lengths(lengths):
    from lodarrow._validation import as_index_array

    if lengths is None or isinstance(lengths, (str, bytes)):
        raise TypeError(f"{_FN}: lengths must be an array of integers, got "
                        f"{type(lengths).__name__}")
    try:
        arr = as_index_array(lengths, f"{_FN}: lengths")
    except TypeError as exc:
        raise TypeError(f"{_FN}: lengths must be an array of integers ({exc})") from None
    if len(arr) and arr.min() < 0:
        k = int(np.argmax(arr < 0))
        raise ValueError(f"{_FN}: lengths must be >= 0; lengths[{k}] is {int(arr[k])}")
    return arr


def _optional_positive(value, name):
    return None if value is None else as_positive_int(value, f"{_FN}: {name}")


def _nonneg(value, name):
    return as_nonnegative_int(value, f"{_FN}: {name}")


def _alpha(alpha):
    if isinstance(alpha, (bool, np.bool_)) or not isinstance(alpha, (int, float, np.number)):
        raise TypeError(f"{_FN}: alpha must be a number, got {type(alpha).__name__}")
    alpha = float(alpha)
    if not (alpha >= 0 and np.isfinite(alpha)):
        raise ValueError(f"{_FN}: alpha must be a finite number >= 0, got {alpha!r}")
    return alpha
