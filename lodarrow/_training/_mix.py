"""Several corpora mixed by weight (docs/training.md#mixing-corpora): which sequences of each
source an epoch holds.

A :class:`Mixture` (made by :func:`lodarrow.mix`) names the sources and how much of each an
epoch takes: ``weights`` (shares of ``epoch_size``, counted in sequences or in tokens) or
``counts`` (sequences an epoch).  Each epoch, a source of ``n`` sequences gives ``c``:

- ``c // n`` whole copies (a small source is upsampled by repetition);
- ``c % n`` more, chosen without replacement from a stream of seeded permutations of the
  source (one a *cycle*): epoch ``e`` takes positions ``[e * r, (e + 1) * r)`` of the stream
  (``r = c % n``), so a down-sampled source is covered every ``n / r`` epochs, with another
  choice each epoch.  Where an epoch's positions straddle two cycles, the sequences the
  second would give twice are swapped for others from its end: no sequence is chosen twice
  in one epoch.

The epoch is then a *virtual source* (:class:`EpochMix`): its positions map to the sources'
sequences (all sources side by side, as the loader reads them), copies of a row group are row
groups of their own, and the sources are interleaved in proportion.  The loader's plan
(:mod:`lodarrow._training._epoch`) runs over it unchanged: every virtual position once per
epoch across the ranks (every source's count exact), budgets, shapes, resume and elastic
resume as for one source.
"""

import numpy as np
import pyarrow as pa

from lodarrow._training._epoch import shuffled
from lodarrow._training._source import (check_level, hf_table, is_parquet_source, list_depth,
                                        pick_column, widen)
from lodarrow._validation import as_nonnegative_int, as_positive_int, check_choice

__all__ = ["EpochMix", "Mixture", "epoch_mix", "members_of_parts", "mix", "mixed_files",
           "mixed_table"]

_FN = "mix"
#: The randomness of the choices: ``[seed, _SALT, source, cycle]`` (apart from the plan's).
_SALT = 0x6D6978


def mix(sources, weights=None, *, counts=None, epoch_size=None, by="sequences"):
    """Several corpora as one source of :func:`lodarrow.batch_loader`, mixed by weight.

    Each epoch holds a planned number of sequences of each source: a small source is
    upsampled by repetition (whole copies), a large one down-sampled by a seeded choice that
    changes every epoch and covers the whole source across epochs; never a sequence twice in
    one epoch's choice.  The loader then plans the epoch as for one source: every chosen
    sequence delivered once across the ranks, the sources interleaved in proportion (with
    ``shuffle=True``, each step holds the mixture on average), resume and elastic resume
    exact.  See docs/training.md#mixing-corpora.

    Parameters
    ----------
    sources : list or dict
        The corpora: Parquet sources (a file, directory, glob, URI or list of files) or
        in-memory tables (``pyarrow.Table``, ``datasets.Dataset``), all of one kind; a dict
        names them (default names ``"0"``, ``"1"``, ...).  They must hold the loader's column
        (and ``extra_columns``) with types that widen to one.
    weights : list of float (or dict keyed like ``sources``), optional
        Each source's share of an epoch (normalised; 0 leaves a source out).  Default: equal
        weights, unless ``counts`` is given.
    counts : list of int (or dict keyed like ``sources``), optional
        Sequences of each source an epoch (instead of ``weights``); e.g. ``2 * len(source)``
        for two copies.
    epoch_size : int, optional
        With ``weights``: the epoch's sequences (``by="sequences"``) or tokens
        (``by="tokens"``); default: all the sources of a weight above 0 hold.
    by : {"sequences", "tokens"}, default "sequences"
        What ``weights`` share out.  With ``"tokens"`` a source's count is its share of the
        tokens over its mean length (rounded): the planned counts are exact, the tokens hold
        the weights on average.

    Returns
    -------
    Mixture
        Give it to :func:`lodarrow.batch_loader` as its source.

    Examples
    --------
    >>> import pyarrow as pa, lodarrow as la
    >>> web = pa.table({"ids": [[1, 2], [3], [4, 5, 6], [7], [8, 9]]})
    >>> code = pa.table({"ids": [[10, 11, 12], [13]]})
    >>> loader = la.batch_loader(la.mix({"web": web, "code": code}, counts=[5, 4]), "ids",
    ...                          batch_size=3)
    >>> loader.statistics()["sources"]["code"]["sequences"]
    4
    """
    return Mixture(sources, weights, counts=counts, epoch_size=epoch_size, by=by)


class Mixture:
    """Several sources and how much of each an epoch takes (see :func:`lodarrow.mix`)."""

    def __init__(self, sources, weights=None, *, counts=None, epoch_size=None, by="sequences"):
        if isinstance(sources, dict):
            names = list(sources)
            for name in names:
                if not isinstance(name, str):
                    raise TypeError(f"{_FN}: the names of sources must be str, got "
                                    f"{type(name).__name__} {name!r}")
            sources = [sources[n] for n in names]
        elif isinstance(sources, (list, tuple)):
            names = [str(k) for k in range(len(sources))]
            sources = list(sources)
        else:
            raise TypeError(f"{_FN}: sources must be a list or a dict of sources, got "
                            f"{type(sources).__name__}")
        if not sources:
            raise ValueError(f"{_FN}: sources is empty; give at least one source")
        self.names, self.sources = names, sources
        self.by = check_choice(by, f"{_FN}: by", ("sequences", "tokens"))
        if epoch_size is not None:
            epoch_size = as_positive_int(epoch_size, f"{_FN}: epoch_size")
        counts = None if counts is None else self._per_source(counts, "counts")
        weights = None if weights is None else self._per_source(weights, "weights")
        if weights is not None and counts is not None:
            raise ValueError(f"{_FN}: give weights or counts, not both")
        if counts is not None:
            self.counts = [as_nonnegative_int(c, f"{_FN}: counts[{names[k]!r}]")
                           for k, c in enumerate(counts)]
            if epoch_size is not None:
                raise ValueError(f"{_FN}: epoch_size applies to weights; counts give each "
                                 f"source's sequences themselves")
            if self.by != "sequences":
                raise ValueError(f"{_FN}: counts are sequences; by={by!r} applies to weights")
            if not sum(self.counts):
                raise ValueError(f"{_FN}: counts are all 0: an epoch would hold nothing")
            self.weights = None
        else:
            ws = [1.0] * len(sources) if weights is None else weights
            out = []
            for k, w in enumerate(ws):
                if isinstance(w, (bool, np.bool_)) or not isinstance(w, (int, float, np.number)):
                    raise TypeError(f"{_FN}: weights[{names[k]!r}] must be a number, got "
                                    f"{type(w).__name__}")
                if not (np.isfinite(w) and w >= 0):
                    raise ValueError(f"{_FN}: weights[{names[k]!r}] must be a finite number "
                                     f">= 0, got {w!r}")
                out.append(float(w))
            if not sum(out) > 0:
                raise ValueError(f"{_FN}: weights are all 0: an epoch would hold nothing")
            self.weights, self.counts = out, None
        self.epoch_size = epoch_size

    def _per_source(self, values, arg):
        if isinstance(values, dict):
            extra = sorted(set(values) - set(self.names))
            missing = [n for n in self.names if n not in values]
            if extra or missing:
                raise ValueError(f"{_FN}: {arg} must name the sources "
                                 f"{self.names}; {'unknown ' + str(extra) if extra else ''}"
                                 f"{'; ' if extra and missing else ''}"
                                 f"{'missing ' + str(missing) if missing else ''}")
            return [values[n] for n in self.names]
        if isinstance(values, (str, bytes)) or not hasattr(values, "__len__"):
            raise TypeError(f"{_FN}: {arg} must be a list (or a dict keyed like sources), got "
                            f"{type(values).__name__}")
        values = list(values)
        if len(values) != len(self.names):
            raise ValueError(f"{_FN}: {arg} has {len(values)} entries for {len(self.names)} "
                             f"sources")
        return values

    def __repr__(self):
        how = (f"counts={self.counts}" if self.counts is not None
               else f"weights={self.weights}, by={self.by!r}"
               + ("" if self.epoch_size is None else f", epoch_size={self.epoch_size}"))
        return f"Mixture({self.names}, {how})"

    def on_parquet(self, fn):
        """Whether the sources are Parquet sources (all of them) or tables in memory (all);
        a ``TypeError`` when they are of both kinds."""
        parquet = [is_parquet_source(src) for src in self.sources]
        if any(parquet) and not all(parquet):
            k = parquet.index(not parquet[0])
            kinds = ("in memory", "a Parquet source")
            raise TypeError(f"{fn}: a mixture's sources must all be Parquet sources or all "
                            f"in-memory tables; source {self.names[0]!r} is "
                            f"{kinds[parquet[0]]}, source {self.names[k]!r} "
                            f"{kinds[parquet[k]]}")
        return parquet[0]

    def spec(self):
        """What decides the choices (a saved loader state names it)."""
        return {"names": list(self.names), "weights": self.weights, "counts": self.counts,
                "epoch_size": self.epoch_size, "by": self.by}

    def plan_counts(self, lengths, members, fn):
        """Each source's sequences an epoch, from the weights (or the counts as given).

        ``lengths``: every sequence's length, the sources side by side; ``members``: each
        source's positions among them."""
        sizes = np.array([len(m) for m in members], np.int64)
        names = self.names
        if self.counts is not None:
            counts = np.array(self.counts, np.int64)
        else:
            w = np.array(self.weights) / sum(self.weights)
            if self.by == "sequences":
                # by default an epoch is as long as the sources it takes from, together
                total = (int(sizes[w > 0].sum()) if self.epoch_size is None
                         else self.epoch_size)
                counts = _largest_remainder(w * total, total)
            else:
                tokens = np.array([int(lengths[m].sum()) for m in members], np.float64)
                total = (float(tokens[w > 0].sum()) if self.epoch_size is None
                         else self.epoch_size)
                means = np.divide(tokens, sizes, out=np.zeros(len(sizes)), where=sizes > 0)
                for k in np.flatnonzero((w > 0) & (means == 0)):
                    raise ValueError(f"{fn}: source {names[k]!r} holds no tokens, so no "
                                     f"count of its sequences gives it weight {w[k]:.3g} of "
                                     f"the tokens")
                counts = np.rint(np.divide(w * total, means, out=np.zeros(len(w)),
                                           where=means > 0)).astype(np.int64)
        for k in np.flatnonzero((counts > 0) & (sizes == 0)):
            raise ValueError(f"{fn}: source {names[k]!r} holds no sequence, but the mixture "
                             f"gives it {int(counts[k])} an epoch")
        if not counts.sum():
            raise ValueError(f"{fn}: the mixture's epoch holds no sequence (counts "
                             f"{counts.tolist()})")
        return counts


def mixed_files(mixture, filesystem, fn):
    """Every Parquet source's files, listed together: ``(files, owner, filesystem)``, ``owner``
    mapping each file to its source's number (a file belongs to one source; one filesystem)."""
    from lodarrow._tables._sources import resolve_source

    files, owner, fs = [], {}, None
    for k, (name, src) in enumerate(zip(mixture.names, mixture.sources)):
        got = resolve_source(src, fn, f"source {name!r}", filesystem)
        if k and type(got.filesystem) is not type(fs):
            raise ValueError(f"{fn}: a mixture's sources must be on one filesystem; source "
                             f"{name!r} is on {type(got.filesystem).__name__}, source "
                             f"{mixture.names[0]!r} on {type(fs).__name__}")
        fs = got.filesystem
        for path, _ in got.files:
            if path in owner:
                raise ValueError(f"{fn}: {path!r} is in source {mixture.names[owner[path]]!r} "
                                 f"and in source {name!r}; a file belongs to one source of a "
                                 f"mixture")
            owner[path] = k
            files.append(path)
    return files, owner, fs


def members_of_parts(parts, part_starts, owner, n_sources):
    """Each source's sequence positions, from the row groups ``parts`` (``(path, group,
    rows)``, their first positions ``part_starts``) and each file's source ``owner``."""
    source_of = np.array([owner[path] for path, _, _ in parts], np.int64)
    members = []
    for k in range(n_sources):
        mine = np.flatnonzero(source_of == k)
        members.append(np.concatenate([np.arange(part_starts[p], part_starts[p + 1],
                                                 dtype=np.int64) for p in mine])
                       if len(mine) else np.zeros(0, np.int64))
    return members


def mixed_table(mixture, column, extra_columns, level, fn):
    """The in-memory sources' columns read (``column`` and ``extra_columns``), concatenated:
    ``(table, column, sequences of each source, first row of each source)``.

    Each column's type is one every source's converts to without loss (as across the files of
    a Parquet source), never a lossy promotion (int ids to float).
    """
    import pyarrow.compute as pc

    tables, sizes = [], []
    for name, src in zip(mixture.names, mixture.sources):
        table = hf_table(src)
        if table is None and isinstance(src, pa.RecordBatch):
            table = pa.Table.from_batches([src])
        if table is None and isinstance(src, pa.Table):
            table = src
        if table is None:
            raise TypeError(f"{fn}: source {name!r} of the mixture must be a Parquet source, a "
                            f"pyarrow Table or RecordBatch or a datasets.Dataset, got "
                            f"{type(src).__name__}")
        where = f"{fn} (source {name!r})"
        column = pick_column(table.schema, column, where)  # the first names it for all
        for extra in extra_columns:
            pick_column(table.schema, extra, where)
        table = table.select([column] + list(extra_columns))
        col = table.column(column)
        if list_depth(col.type) == 0:
            raise TypeError(f"{where}: column {column!r} is {col.type}, not a list column of "
                            f"sequences; name the list column with column=")
        check_level(level, list_depth(col.type), where)
        for _ in range(level):
            col = pc.list_flatten(col)
        tables.append(table)
        sizes.append(len(col))
    fields = []
    for name in tables[0].schema.names:
        target = tables[0].schema.field(name).type
        for k, t in enumerate(tables[1:], 1):
            other = t.schema.field(name).type
            wider = widen(target, other)
            if wider is None:
                raise TypeError(f"{fn}: column {name!r} is {target} in source "
                                f"{mixture.names[0]!r} but {other} in source "
                                f"{mixture.names[k]!r}, and neither converts to the other "
                                f"without loss")
            target = wider
        fields.append(pa.field(name, target))
    schema = pa.schema(fields)
    table = pa.concat_tables([t.cast(schema) for t in tables])
    row_starts = np.concatenate([[0], np.cumsum([len(t) for t in tables])]).astype(np.int64)
    return table, column, sizes, row_starts


class EpochMix:
    """One epoch of a mixture as a virtual source: position ``v`` is sequence ``vmap[v]`` of
    the sources side by side, of source ``source[v]``; ``part_starts`` (Parquet) cut the
    positions into row groups (a row group's copy, or the rows chosen from it)."""

    __slots__ = ("vmap", "source", "lengths", "part_starts", "part_source")

    def __init__(self, vmap, source, lengths, part_starts, part_source=None):
        self.vmap, self.source, self.lengths = vmap, source, lengths
        self.part_starts, self.part_source = part_starts, part_source


def epoch_mix(counts, members, lengths, part_starts, seed, epoch):
    """The :class:`EpochMix` of epoch ``epoch`` (a pure function of its arguments).

    ``members[s]``: source ``s``'s positions, ascending; ``part_starts``: the row groups'
    first positions (None: an in-memory source, no row groups).
    """
    pieces, keys, owners, streams = [], [], [], []
    for s, (c, members_s) in enumerate(zip(counts.tolist(), members)):
        n = len(members_s)
        if c == 0:
            continue
        full, r = divmod(c, n)
        copies = [members_s] * full
        if r:
            copies.append(np.sort(members_s[_choice(n, r, epoch, seed, s)]))
        if part_starts is None:
            streams.append((s, np.concatenate(copies)))
            continue
        done = 0
        for copy in copies:
            for part in _by_row_group(copy, part_starts):
                # interleave the sources: a piece sits at the middle of its share of the source
                keys.append((done + len(part) / 2) / c)
                pieces.append(part)
                owners.append(s)
                done += len(part)
    if part_starts is None:  # one stream interleaved position by position
        vmap = np.concatenate([p for _, p in streams])
        source_of = np.concatenate([np.full(len(p), s, np.int32) for s, p in streams])
        fraction = np.concatenate([(np.arange(len(p)) + 0.5) / len(p) for _, p in streams])
        order = np.argsort(fraction, kind="stable")
        vmap, source_of = vmap[order], source_of[order]
        vstarts = part_source = None
    else:  # row group by row group
        sizes = np.array([len(p) for p in pieces], np.int64)
        order = np.argsort(np.array(keys), kind="stable")
        vmap = np.concatenate([pieces[k] for k in order])
        source_of = np.repeat(np.array(owners, np.int32)[order], sizes[order])
        vstarts = np.zeros(len(order) + 1, np.int64)
        np.cumsum(sizes[order], out=vstarts[1:])
        part_source = np.array(owners, np.int64)[order]
    return EpochMix(vmap.astype(np.int64, copy=False), source_of, lengths[vmap], vstarts,
                    part_source)


def _choice(n, r, epoch, seed, source):
    """Positions ``[epoch * r, (epoch + 1) * r)`` of the stream of seeded permutations of
    ``range(n)`` (``r < n``), with no position twice."""
    a = epoch * r
    cycle, at = divmod(a, n)
    first = _cycle(n, seed, source, cycle)
    if at + r <= n:
        return first[at:at + r]
    tail = first[at:]
    second = _cycle(n, seed, source, cycle + 1)
    h = r - len(tail)
    head = second[:h]
    taken = np.zeros(n, bool)
    taken[tail] = True
    twice = taken[head]
    if twice.any():  # swap them for the second cycle's last ones not yet taken
        taken[head] = True
        rest = second[h:][::-1]
        spare = rest[~taken[rest]][:int(twice.sum())]
        head = np.concatenate([head[~twice], spare])
    return np.concatenate([tail, head])


def _cycle(n, seed, source, cycle):
    return shuffled(n, np.random.default_rng([seed, _SALT, source, cycle]))


def _by_row_group(positions, part_starts):
    """Ascending ``positions`` cut where a row group begins."""
    cuts = np.searchsorted(positions, part_starts[1:-1])
    return [p for p in np.split(positions, cuts) if len(p)]


def _largest_remainder(quotas, total):
    """Integers summing to ``total``, each the floor of its quota or one more (the largest
    remainders first; ties to the first source)."""
    base = np.floor(quotas).astype(np.int64)
    left = int(total - base.sum())
    if left > 0:
        order = np.argsort(-(quotas - base), kind="stable")
        base[order[:left]] += 1
    return base
