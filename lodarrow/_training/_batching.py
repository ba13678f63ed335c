"""Batch plans: which rows go in which batch, on which rank (docs/training.md#plans)."""

import numpy as np

from lodarrow._cpu import _batch_plan as _k
from lodarrow._threads import num_threads
from lodarrow._validation import as_flag, as_nonnegative_int, as_positive_int, check_choice

__all__ = ["BatchPlan", "batch_plan"]

#: Sort windows on several threads from this many sequences on.
_PARALLEL_SORT = 1 << 20

_FN = "batch_plan"


class BatchPlan:
    """The batches of one rank for one epoch, as data: row indices per batch.

    Batch ``b`` holds the rows ``indices[offsets[b]:offsets[b + 1]]`` (positions in the
    ``lengths`` the plan was made from, hence rows of the table or dataset).  Made by
    :func:`lodarrow.batch_plan`; see docs/training.md#plans.

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
        The shuffle window (loader block) each batch was cut from.
    """

    def __init__(self, offsets, indices, tokens, longest, windows, *, rank=0, num_replicas=1,
                 seed=0, epoch=0):
        self.offsets, self.indices = offsets, indices
        self.tokens, self.longest, self.windows = tokens, longest, windows
        self.rank, self.num_replicas, self.seed, self.epoch = rank, num_replicas, seed, epoch

    def __len__(self):
        return len(self.offsets) - 1

    def __getitem__(self, b):
        b = range(len(self))[b]
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
               balance="batches", oversize="alone"):
    """Plan the batches of one epoch from the sequence lengths, in a compiled kernel.

    The rows are shuffled (``seed``, ``epoch``), sorted by length inside each ``window`` of
    consecutive shuffled rows (bucketing), and cut greedily into batches of at most
    ``batch_size`` sequences and ``max_tokens`` tokens, never across a window; the batches
    are then shuffled and dealt to the ranks.  Every rank computes the same plan and takes
    its share: every sequence is in exactly one batch of one rank per epoch (unless
    ``drop_last`` or ``oversize="drop"``).  See docs/training.md#plans.

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
        Sort the rows by length inside each window of this many shuffled rows (bucketing:
        batches of similar lengths, little padding); default: no sorting (random batches).
    shuffle : bool, default True
        Shuffle the rows and the batches; False keeps the rows' order.
    seed, epoch : int, default 0
        The randomness: the same (seed, epoch) gives the same plan, on every rank and run.
    drop_last : bool, default False
        Drop the incomplete batches of a fixed-size plan (fewer than ``batch_size``, when no
        ``max_tokens`` is given: the last of each window), and balance ranks by dropping
        batches instead of splitting them (see ``num_replicas``).
    num_replicas, rank : int, default 1, 0
        Sharding: this plan is rank ``rank``'s share of ``num_replicas``.  Every rank gets as
        many batches: while the batch count is not a multiple of ``num_replicas``, the ranks
        short of a batch split their largest batch in two (each sequence still once, no budget
        exceeded); with ``drop_last`` the surplus batches are dropped instead.
    balance : {"batches", "tokens"}, default "batches"
        "batches" deals the shuffled batches round-robin; "tokens" makes each step's
        ``num_replicas`` batches of similar size (sorted by tokens, dealt in snake order), so
        that ranks wait little for one another and get about as many tokens in total.
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

    Examples
    --------
    >>> import lodarrow as la
    >>> plan = la.batch_plan([5, 1, 4, 2, 3, 6], max_tokens=8, cost="packed", shuffle=False)
    >>> [b.tolist() for b in plan]
    [[0, 1], [2, 3], [4], [5]]
    >>> plan.tokens
    array([6, 6, 3, 6])
    """
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
    balance = check_choice(balance, f"{_FN}: balance", ("batches", "tokens"))
    oversize = check_choice(oversize, f"{_FN}: oversize", ("alone", "error", "drop"))

    rng = np.random.default_rng([seed, epoch])
    n = len(lengths)
    order = shuffled(n, rng) if shuffle else np.arange(n, dtype=np.int64)
    order = _apply_oversize(order, lengths, max_tokens, oversize)
    m = len(order)
    windows = (np.append(np.arange(0, m, window, dtype=np.int64), m) if window and m
               else np.array([0, m], dtype=np.int64))
    return plan_rank(lengths, order, windows, sort=window is not None, batch_size=batch_size,
                     max_tokens=max_tokens, packed=packed, rng=rng if shuffle else None,
                     drop_last=drop_last, num_replicas=num_replicas, rank=rank,
                     balance=balance, deal="round_robin", seed=seed, epoch=epoch)


def shuffled(n, rng):
    """A random permutation of ``0..n-1`` from ``rng`` (a compiled Fisher-Yates, twice as
    fast as NumPy's on large ``n``)."""
    out = np.empty(n, dtype=np.int64)
    _k.permutation(out, int(rng.integers(0, 2**63)))
    return out


def plan_rank(lengths, order, windows, *, sort, batch_size, max_tokens, packed, rng, drop_last,
              num_replicas, rank, balance, deal, seed, epoch):
    """The shared core of :func:`batch_plan` and the loader (trusted arguments).

    ``deal="round_robin"`` shuffles the batches globally and deals them in turn;
    ``deal="window"`` keeps each window's batches together (shuffled inside it) and deals
    whole windows to the ranks (the loader: a rank reads only its windows): in turn, or with
    ``balance="tokens"`` most tokens first, each to the rank with the fewest so far.
    """
    m = len(order)
    threads = num_threads() if m >= _PARALLEL_SORT else 1  # OpenMP start-up costs ~ms
    if sort and m:
        sorted_order = np.empty_like(order)
        seq_lengths = np.empty_like(order)
        if _k.sort_windows(order, lengths, windows, sorted_order, seq_lengths, False,
                           threads) != 0:
            raise MemoryError(f"{_FN}: no memory to sort a window")
        order = sorted_order
    else:
        seq_lengths = lengths[order]
    bounds = np.empty(m + 1, dtype=np.int64)
    nb = _k.cut_batches(seq_lengths, windows, batch_size or 0, max_tokens or 0, packed, bounds)
    bounds = bounds[:nb + 1]
    lo, hi = bounds[:-1], bounds[1:]
    win = np.searchsorted(windows, lo, side="right") - 1
    if drop_last and batch_size is not None and max_tokens is None:
        keep = (hi - lo) == batch_size
        lo, hi, win = lo[keep], hi[keep], win[keep]
    if deal != "window" and not drop_last and len(lo) % num_replicas:
        lo, hi, win = _split_largest(lo, hi, win, num_replicas - len(lo) % num_replicas,
                                     num_replicas)
    nb = len(lo)
    if deal != "window" and balance == "tokens" and num_replicas > 1:
        tokens, _ = _range_stats(seq_lengths, lo, hi)

    if deal == "window":
        perm = rng.permutation(nb) if rng is not None else np.arange(nb)
        batch_order = perm[np.argsort(win[perm], kind="stable")]
        nwin = len(windows) - 1
        if balance == "tokens" and num_replicas > 1:
            csum = np.concatenate([[0], np.cumsum(seq_lengths)])
            owner_of = _longest_first(csum[windows[1:]] - csum[windows[:-1]], num_replicas)
        else:
            owner_of = np.arange(nwin) % num_replicas
        owner = owner_of[win[batch_order]]
        mine = batch_order[owner == rank]
        others = [np.count_nonzero(owner == r) for r in range(num_replicas)]
    else:
        # unsorted rows are already in random order: their batches need no second shuffle
        batch_order = rng.permutation(nb) if rng is not None and sort else np.arange(nb)
        if balance == "tokens" and num_replicas > 1:
            batch_order = _token_steps(batch_order, tokens, num_replicas, rng)
        mine = batch_order[rank::num_replicas]
        others = [len(batch_order[r::num_replicas]) for r in range(num_replicas)]
    mine_lo, mine_hi, mine_win = lo[mine], hi[mine], win[mine]
    target = min(others) if drop_last else max(others)
    if len(mine_lo) > target:
        mine_lo, mine_hi, mine_win = mine_lo[:target], mine_hi[:target], mine_win[:target]
    elif len(mine_lo) < target:
        mine_lo, mine_hi, mine_win = _split_largest(mine_lo, mine_hi, mine_win,
                                                    target - len(mine_lo), num_replicas)
    sizes = mine_hi - mine_lo
    offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    if len(sizes) and mine_lo[0] == 0 and np.array_equal(mine_lo[1:], mine_hi[:-1]):
        indices = order[:offsets[-1]]  # batches in order, back to back: no gather
    else:
        pos = np.repeat(mine_lo - offsets[:-1], sizes) + np.arange(offsets[-1], dtype=np.int64)
        indices = order[pos]
    tokens, longest = _range_stats(seq_lengths, mine_lo, mine_hi)
    return BatchPlan(offsets, indices, tokens, longest, mine_win, rank=rank,
                     num_replicas=num_replicas, seed=seed, epoch=epoch)


def _range_stats(seq_lengths, lo, hi):
    tokens = np.empty(len(lo), dtype=np.int64)
    longest = np.empty(len(lo), dtype=np.int64)
    _k.range_stats(seq_lengths, np.ascontiguousarray(lo), np.ascontiguousarray(hi), tokens,
                   longest)
    return tokens, longest


def _longest_first(tokens, num_replicas):
    """The rank of each window: the windows by tokens, most first, each to the rank with the
    fewest tokens so far (ties: the lowest rank)."""
    import heapq

    owner = np.empty(len(tokens), dtype=np.int64)
    heap = [(0, r) for r in range(num_replicas)]
    for w in np.argsort(-tokens, kind="stable"):
        load, r = heapq.heappop(heap)
        owner[w] = r
        heapq.heappush(heap, (load + int(tokens[w]), r))
    return owner


def _token_steps(batch_order, tokens, num_replicas, rng):
    """Batches regrouped into steps of ``num_replicas`` batches of similar tokens, each step
    dealt in snake order (alternate steps reversed), the steps shuffled."""
    by_tokens = batch_order[np.argsort(tokens[batch_order], kind="stable")]
    nb = len(by_tokens)
    full = nb - nb % num_replicas
    steps = by_tokens[:full].reshape(-1, num_replicas)
    steps[1::2] = steps[1::2, ::-1]
    if rng is not None:
        steps = steps[rng.permutation(len(steps))]
    return np.concatenate([steps.ravel(), by_tokens[full:]])


def _split_largest(lo, hi, win, count, num_replicas):
    """Split the batch with most sequences in two, ``count`` times (the halves stay in
    place, one after the other)."""
    for _ in range(count):
        sizes = hi - lo
        b = int(np.argmax(sizes)) if len(sizes) else 0
        if not len(sizes) or sizes[b] < 2:
            raise ValueError(f"{_FN}: too few sequences to give each of num_replicas="
                             f"{num_replicas} ranks as many batches; use drop_last=True or "
                             f"fewer replicas")
        mid = lo[b] + sizes[b] // 2
        lo = np.insert(lo, b + 1, mid)
        hi = np.insert(hi, b, mid)
        win = np.insert(win, b, win[b])
    return lo, hi, win


def _apply_oversize(order, lengths, max_tokens, oversize):
    if max_tokens is None or oversize == "alone":
        return order
    over = lengths[order] > max_tokens
    if not over.any():
        return order
    if oversize == "error":
        row = int(order[np.argmax(over)])
        raise ValueError(f"{_FN}: sequence {row} has {int(lengths[row])} tokens, more than "
                         f"max_tokens={max_tokens} (oversize='error'; 'alone' gives it a batch "
                         f"of its own, 'drop' leaves it out)")
    return order[~over]


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
