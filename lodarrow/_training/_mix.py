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
from lodarrow._training._readahead import DEFERRED
from lodarrow._training._source import (check_level, hf_table, is_parquet_source, list_depth,
                                        pick_column, widen)
from lodarrow._validation import as_nonnegative_int, as_positive_int, check_choice

__all__ = ["EpochMix", "MixedParts", "Mixture", "epoch_mix", "members_of_parts", "mix",
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
        The corpora: Parquet sources (a file, directory, glob, URI or list of files, each on
        its own filesystem) or in-memory tables (``pyarrow.Table``, ``datasets.Dataset``), in
        any combination; a dict names them (default names ``"0"``, ``"1"``, ...).  Each holds
        the loader's column (or its own, given by a dict ``column``) with types that widen
        to one; an extra column a source lacks is null for its rows.
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

    Raises
    ------
    TypeError
        ``sources`` neither a list nor a dict (or a name not a str); a weight or count not a
        number; ``weights``/``counts`` neither a list nor a dict.
    ValueError
        No sources; ``weights`` and ``counts`` both given; a weight negative or not finite,
        or all 0; counts all 0; ``weights``/``counts`` of another length than ``sources``
        or naming other sources; ``epoch_size`` with ``counts``; ``by`` not one of its
        choices.  Each source itself is checked when the loader is made.

    See Also
    --------
    batch_loader : The loader a mixture is a source of.

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
            keys = [repr(n) for n in names]
        elif isinstance(sources, (list, tuple)):
            names = [str(k) for k in range(len(sources))]
            keys = names  # weights[1], not weights['1']
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
            self.counts = [as_nonnegative_int(c, f"{_FN}: counts[{keys[k]}]")
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
                    raise TypeError(f"{_FN}: weights[{keys[k]}] must be a number, got "
                                    f"{type(w).__name__}")
                if not (np.isfinite(w) and w >= 0):
                    raise ValueError(f"{_FN}: weights[{keys[k]}] must be a finite number "
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
        """Whether some source is a Parquet source: the mixture is then read as row groups
        (:class:`MixedParts`, its tables in memory in parts of their own); else the tables
        are concatenated in memory (:func:`mixed_table`)."""
        return any(is_parquet_source(src) for src in self.sources)

    def columns(self, column, fn):
        """Each source's sequence column from the loader's ``column``: one name for all (or
        None: each source's one column), or a dict naming each source's own (a corpus's
        ``input_ids`` mixed with another's ``tokens``), keyed like the sources."""
        if not isinstance(column, dict):
            return [column] * len(self.names)
        extra = sorted(set(column) - set(self.names), key=str)
        missing = [n for n in self.names if n not in column]
        if extra or missing:
            raise ValueError(f"{fn}: column, a dict, must name the column of each source of "
                             f"the mixture {self.names}; "
                             + "; ".join(([f"unknown {extra}"] if extra else [])
                                         + ([f"missing {missing}"] if missing else [])))
        for name in self.names:
            if not isinstance(column[name], str):
                raise TypeError(f"{fn}: column[{name!r}] must be a column name (str), got "
                                f"{type(column[name]).__name__}")
        return [column[n] for n in self.names]

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


#: An in-memory source mixed with Parquet ones is read in parts of this many rows (its "row
#: groups": zero-copy slices).
TABLE_PART_ROWS = 4096


def _as_table(src):
    """The Arrow table of an in-memory source (a Table, RecordBatch, ``datasets.Dataset``),
    or None."""
    table = hf_table(src)
    if table is None and isinstance(src, pa.RecordBatch):
        table = pa.Table.from_batches([src])
    if table is None and isinstance(src, pa.Table):
        table = src
    return table


class TableParts:
    """An in-memory source of a mixture with Parquet sources, read as
    :class:`~lodarrow._training._source.ParquetParts` are: in parts of
    :data:`TABLE_PART_ROWS` rows (zero-copy slices), its lengths from its offsets."""

    filesystem = cache = None

    def __init__(self, table, label, fn):
        self.table, self.fn, self.label = table, fn, label
        self.schema = table.schema
        n = table.num_rows
        bounds = list(range(0, n, TABLE_PART_ROWS)) + [n]
        self._bounds = np.asarray(bounds, np.int64)
        self.parts = [(label, k, int(b - a)) for k, (a, b) in
                      enumerate(zip(self._bounds[:-1], self._bounds[1:]))]
        per_row = table.nbytes / max(n, 1)
        self.nbytes = [int(rows * per_row) for _, _, rows in self.parts]
        self.files, self.sizes = [label], [int(table.nbytes)]
        self.types = {}

    def unify(self, columns):
        self.types.update({c: self.schema.field(c).type for c in columns})
        return {c: self.types[c] for c in columns}

    def null_count(self, name):
        return self.table.column(name).null_count

    def name(self, path):
        return path

    def lengths(self, column, level):
        """Each part's lengths, null rows and rows holding a null value (part row numbers)."""
        from lodarrow._training._columns import null_rows, value_null_rows
        from lodarrow._training._lengths import _in_memory_lengths

        out = ([], [], [])
        for k in range(len(self.parts)):
            col = self.read(k, [column]).column(column)
            out[0].append(np.asarray(_in_memory_lengths(col, level), np.int64))
            out[1].append(null_rows(col))
            out[2].append(value_null_rows(col)[0])
        return out

    def read(self, k, columns, lo=0, hi=None):
        a = int(self._bounds[k])
        b = int(self._bounds[k + 1]) if hi is None else a + hi
        return self.table.select(list(columns)).slice(a + lo, b - a - lo)


def _extras_somewhere(schemas, extra_columns, fn):
    """``extra_columns``, each in at least one of the sources' ``schemas`` (a source that
    lacks one gives nulls there), else a ``ValueError`` naming it."""
    for extra in extra_columns:
        if not any(extra in schema.names for schema in schemas):
            raise ValueError(f"{fn}: column {extra!r} is in no source of the mixture "
                             f"(extra_columns are read where a source has them, nulls "
                             f"elsewhere)")
    return list(extra_columns)


class MixedParts:
    """A Parquet mixture's sources side by side, each its own
    :class:`~lodarrow._training._source.ParquetParts` (its files, its filesystem: local and
    ``s3://`` mixed; the data cache where it is remote; its own sequence column), read as one
    source: its row groups the sources' in order, its columns named as the first source names
    them (``column``), each of a type every source's widens to.

    ``columns``: each source's sequence column (None: the source's one column, or the first
    source's name); ``extra_columns``: the common names, each in every source.
    """

    def __init__(self, mixture, columns, extra_columns, fn, filesystem=None, cache=None,
                 decoded=None):
        from lodarrow._training._source import ParquetParts

        self.fn = fn
        self.children, self.own = [], []
        owner = {}
        for k, (name, src) in enumerate(zip(mixture.names, mixture.sources)):
            if is_parquet_source(src):
                parts = ParquetParts(src, fn, f"source {name!r}", filesystem=filesystem,
                                     cache=cache, decoded=decoded)
            else:  # an in-memory source mixed with Parquet ones
                table = _as_table(src)
                if table is None:
                    raise TypeError(f"{fn}: source {name!r} of the mixture must be a Parquet "
                                    f"source, a pyarrow Table or RecordBatch or a "
                                    f"datasets.Dataset, got {type(src).__name__}")
                parts = TableParts(table, f"<table of source {name!r}>", fn)
            if parts.schema is None:
                raise ValueError(f"{fn}: source {name!r} of the mixture holds no Parquet file")
            where = f"{fn} (source {name!r})"
            column = pick_column(parts.schema, columns[k], where)
            for path in parts.files:
                if path in owner:
                    raise ValueError(f"{fn}: {path!r} is in source "
                                     f"{mixture.names[owner[path]]!r} and in source {name!r}; "
                                     f"a file belongs to one source of a mixture")
                owner[path] = k
            self.children.append(parts)
            self.own.append(column)
        self.column = self.own[0]
        self.extra_columns = _extras_somewhere([c.schema for c in self.children],
                                               extra_columns, fn)
        self.owner = owner
        self.parts = [p for c in self.children for p in c.parts]
        self.nbytes = [n for c in self.children for n in c.nbytes]
        self.files = [f for c in self.children for f in c.files]
        self.sizes = [n for c in self.children for n in c.sizes]
        self.rows = np.array([p[2] for p in self.parts], dtype=np.int64)
        counts = [len(c.parts) for c in self.children]
        self._first = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        self._child_of = {path: c for c in self.children for path in c.files}
        self.types = {}

    def _names(self, k):
        """Source ``k``'s own names of the common columns (None: an extra column it lacks,
        read as nulls)."""
        names = self.children[k].schema.names
        return {self.column: self.own[k],
                **{e: e if e in names else None for e in self.extra_columns}}

    def unify(self, columns):
        """Each of ``columns`` (common names) read as a type every source's widens to, else
        a ``TypeError`` naming two sources' files and both types."""
        out = {}
        for name in columns:
            first = target = None
            for k, child in enumerate(self.children):
                own = self._names(k)[name]
                if own is None:  # an extra column this source lacks
                    continue
                t = child.unify([own])[own]
                if target is None:
                    first, target = (child.files[0], own, t), t
                    continue
                wider = widen(target, t)
                if wider is None:
                    raise TypeError(f"{self.fn}: column {first[1]!r} is {first[2]} in "
                                    f"{first[0]!r} but column {own!r} is {t} in "
                                    f"{child.files[0]!r}, and neither converts to the other "
                                    f"without loss")
                target = wider
            out[name] = target
        self.types.update(out)
        return out

    def null_count(self, name):
        """Nulls of the common column ``name`` across the sources (None: a row group has no
        statistics)."""
        total = 0
        for k, child in enumerate(self.children):
            own = self._names(k)[name]
            if own is None:  # lacks it: every row null
                total += int(sum(rows for _, _, rows in child.parts))
                continue
            n = child.null_count(own)
            if n is None:
                return None
            total += n
        return total

    def lengths(self, level, cache_dir):
        """:func:`~lodarrow._training._lengths.parquet_part_lengths` of every source, with its
        own column, side by side (with the nulls)."""
        from lodarrow._training._lengths import parquet_part_lengths

        out = ([], [], [])
        for k, child in enumerate(self.children):
            if isinstance(child, TableParts):
                got = child.lengths(self.own[k], level)
            else:
                got = parquet_part_lengths(child, self.own[k], level, with_nulls=True,
                                           cache_dir=cache_dir)
            for acc, part in zip(out, got):
                acc.extend(part)
        return out

    def name(self, path):
        return self._child_of[path].name(path)

    def local(self, path):
        """Whether ``path`` is a local file (its source's filesystem is None)."""
        return self._child_of[path].filesystem is None

    def read(self, k, columns, lo=0, hi=None):
        """Rows ``[lo, hi)`` of row group ``k``, ``columns`` (common names) as the unified
        types; errors name the file and the row group."""
        c = int(np.searchsorted(self._first, k, side="right")) - 1
        names = self._names(c)
        have = [n for n in columns if names[n] is not None]
        table = self.children[c].read(k - int(self._first[c]), [names[n] for n in have],
                                      lo, hi)
        if table is DEFERRED:  # another worker decodes it (_exchange.reading)
            return table
        table = table.rename_columns(have)
        if len(have) < len(columns):  # extra columns this source lacks: nulls
            table = pa.table({n: table.column(n) if names[n] is not None
                              else pa.nulls(table.num_rows, self.types[n]) for n in columns})
        want = [self.types.get(n) for n in columns]
        if any(t is not None and not table.schema.field(n).type.equals(t)
               for n, t in zip(columns, want)):
            table = table.cast(pa.schema([pa.field(n, t or table.schema.field(n).type)
                                          for n, t in zip(columns, want)]))
        return table


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


def mixed_table(mixture, columns, extra_columns, level, fn):
    """The in-memory sources' columns read (each source's of ``columns`` and
    ``extra_columns``), concatenated: ``(table, column, sequences of each source, first row
    of each source, each source's column)``; the sequence column named as the first source
    names it.

    Each column's type is one every source's converts to without loss (as across the files of
    a Parquet source), never a lossy promotion (int ids to float).
    """
    import pyarrow.compute as pc

    tables, sizes, own = [], [], []
    common = None
    for name, src, column in zip(mixture.names, mixture.sources, columns):
        table = _as_table(src)
        if table is None:
            raise TypeError(f"{fn}: source {name!r} of the mixture must be a Parquet source, a "
                            f"pyarrow Table or RecordBatch or a datasets.Dataset, got "
                            f"{type(src).__name__}")
        where = f"{fn} (source {name!r})"
        column = pick_column(table.schema, column or common, where)
        common = common or column  # the first source names it for all
        own.append(column)
        have = [e for e in extra_columns if e in table.schema.names]
        table = table.select([column] + have).rename_columns([common] + have)
        col = table.column(common)
        if list_depth(col.type) == 0:
            raise TypeError(f"{where}: column {column!r} is {col.type}, not a list column of "
                            f"sequences; name the list column with column=")
        check_level(level, list_depth(col.type), where)
        for _ in range(level):
            col = pc.list_flatten(col)
        tables.append(table)
        sizes.append(len(col))
    extras = _extras_somewhere([t.schema for t in tables], extra_columns, fn)
    fields = []
    for name in [common] + extras:
        first = target = None
        for k, t in enumerate(tables):
            if name not in t.schema.names:  # an extra column this source lacks
                continue
            other = t.schema.field(name).type
            if target is None:
                first, target = k, other
                continue
            wider = widen(target, other)
            if wider is None:
                raise TypeError(f"{fn}: column {name!r} is {target} in source "
                                f"{mixture.names[first]!r} but {other} in source "
                                f"{mixture.names[k]!r}, and neither converts to the other "
                                f"without loss")
            target = wider
        fields.append(pa.field(name, target))
    schema = pa.schema(fields)
    table = pa.concat_tables([
        pa.table({f.name: t.column(f.name) if f.name in t.schema.names
                  else pa.nulls(t.num_rows, f.type) for f in schema}).cast(schema)
        for t in tables])
    row_starts = np.concatenate([[0], np.cumsum([len(t) for t in tables])]).astype(np.int64)
    return table, common, sizes, row_starts, own


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
