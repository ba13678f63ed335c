"""Operators on table columns: ``col`` references and ``apply`` (docs/tables.md).

A table row is one top-level sequence: a list column with ``k`` list levels is a LoDTensor of
``k`` levels whose ``lod[0]`` has one sequence per row, a plain column (numeric, bool or
FixedSizeList) a tensor with one data row per table row.  ``apply`` reads the columns an
operator's ``col(...)`` arguments name (zero-copy where ``from_arrow`` is), calls the operator,
and writes its row-aligned results back as columns of a table of the same kind; every other
column is the caller's own object.

This is a generic engine: what an operator's arguments and results mean in table form is the
operator's own declaration (``TABLE`` in its module, :mod:`lodarrow._ops._contract`), and the
Arrow null handling is the Arrow layer's (:mod:`lodarrow._interop._arrow_nulls`).
"""

import difflib
import inspect
import operator as _operator
import warnings

import numpy as np
import pyarrow as pa

from lodarrow import _ops
from lodarrow._interop._arrow import from_arrow, trusted_to_arrow
from lodarrow._interop._arrow_nulls import check_inner_nulls, drop_rows, spread_rows, validity
from lodarrow._errors import RegularLevelWarning
from lodarrow._place import Place, as_place, parse_place
from lodarrow._tables._adapters import ArrowAdapter, adapt, list_levels, representable
from lodarrow._tensor import LoDTensor

__all__ = ["col", "ColumnRef", "apply", "resolve_op", "n_results", "check_arguments", "run"]

#: name -> operator function, for every public operator.
OPERATORS = {name: getattr(_ops, name) for name in _ops.__all__}
_BY_FUNCTION = {fn: name for name, fn in OPERATORS.items()}
#: name -> the operator's table form (its module's ``TABLE``).
CONTRACTS = _ops.CONTRACTS

class ColumnRef:
    """A reference to a table column, made by :func:`col` (picklable, holds no data)."""

    __slots__ = ("name", "lod_level", "feature_shape")

    def __init__(self, name, lod_level=None, feature_shape=None):
        self.name = name
        self.lod_level = lod_level
        self.feature_shape = feature_shape

    def __repr__(self):
        extra = ""
        if self.lod_level is not None:
            extra += f", lod_level={self.lod_level}"
        if self.feature_shape is not None:
            extra += f", feature_shape={self.feature_shape}"
        return f"col({self.name!r}{extra})"

    def __eq__(self, other):
        return (isinstance(other, ColumnRef) and self.name == other.name
                and self.lod_level == other.lod_level
                and self.feature_shape == other.feature_shape)

    def __hash__(self):
        return hash((self.name, self.lod_level, self.feature_shape))

    def __getstate__(self):
        return (self.name, self.lod_level, self.feature_shape)

    def __setstate__(self, state):
        self.name, self.lod_level, self.feature_shape = state

    def arrow_kwargs(self):
        kw = {}
        if self.lod_level is not None:
            kw["lod_level"] = self.lod_level
        if self.feature_shape is not None:
            kw["feature_shape"] = self.feature_shape
        return kw


def col(name, lod_level=None, feature_shape=None):
    """A reference to the table column ``name``, usable as any tensor or array argument.

    Parameters
    ----------
    name : str
        The column.  A list column (List / LargeList / ListView levels over numeric values,
        with FixedSizeList feature dimensions) is a LoDTensor with one top-level sequence per
        table row; a plain column (numeric, bool, FixedSizeList) a tensor with one data row
        per table row.
    lod_level : int, optional
        Read only the outer ``lod_level`` list levels as the LoD; deeper list levels must be
        regular and become feature dimensions (as :func:`lodarrow.from_arrow` with
        ``lod_level``): what reads back a lodarrow column written by DuckDB, polars or Spark.
        ``lod_level=0`` reads a plain column: every list level is a feature dimension (what
        Spark makes of a ``FixedSizeList`` column).
    feature_shape : tuple of int, optional
        With ``lod_level``: the widths of those folded levels (checked against the data), so
        that :meth:`udf.output_schema` can be computed from a schema alone.

    Returns
    -------
    ColumnRef
        Small and picklable (a name and two options, never data).

    Raises
    ------
    TypeError
        If ``name`` is not a string, ``lod_level`` not an integer or ``feature_shape`` not a
        tuple of integers.
    ValueError
        If ``lod_level`` < 0 or a width < 0, or ``feature_shape`` is given without
        ``lod_level``.

    See Also
    --------
    apply, udf : Run an operator on the columns of a table (docs/tables.md).

    Examples
    --------
    >>> import lodarrow as la
    >>> la.col("tokens")
    col('tokens')
    """
    if not isinstance(name, str):
        raise TypeError(f"col: name must be a string, got {type(name).__name__}")
    if lod_level is not None:
        try:
            lod_level = _operator.index(lod_level)
        except TypeError:
            raise TypeError(f"col: lod_level must be an integer, got "
                            f"{type(lod_level).__name__}") from None
        if lod_level < 0:
            raise ValueError(f"col: lod_level must be >= 0 (0: a plain column whose list "
                             f"levels are all feature dimensions), got {lod_level}")
    if feature_shape is not None:
        if lod_level is None:
            raise ValueError("col: feature_shape states the widths of the levels lod_level "
                             "folds into feature dimensions; give lod_level too")
        if isinstance(feature_shape, (int, np.integer)):
            feature_shape = (feature_shape,)
        try:
            feature_shape = tuple(_operator.index(d) for d in feature_shape)
        except TypeError:
            raise TypeError(f"col: feature_shape must be a tuple of integers, got "
                            f"{feature_shape!r}") from None
        if any(d < 0 for d in feature_shape):
            raise ValueError(f"col: feature_shape must hold widths >= 0, got {feature_shape}")
    return ColumnRef(name, lod_level, feature_shape)


# ---------------------------------------------------------------------------- operators
def resolve_op(op, fn):
    """``(name, function)`` of a public operator given as the function or its name."""
    if isinstance(op, str):
        f = OPERATORS.get(op)
        if f is None:
            raise ValueError(f"{fn}: unknown operator {op!r}; the operators are "
                             f"{sorted(OPERATORS)}")
        return op, f
    name = _BY_FUNCTION.get(op) if callable(op) else None
    if name is None:
        raise TypeError(f"{fn}: op must be a lodarrow operator (the function, e.g. "
                        f"la.sequence_pool, or its name as a string), got {op!r}")
    return name, op


def n_results(name, args):
    """How many results the operator returns for these arguments."""
    return CONTRACTS[name].n_results(args)


# operator name -> (parameter names, required names); ``out`` is apply's own keyword
_SIGNATURES = {}


def _signature(name):
    sig = _SIGNATURES.get(name)
    if sig is None:
        params = inspect.signature(OPERATORS[name]).parameters
        names = tuple(p for p in params if p != "out")
        required = tuple(p for p, v in params.items()
                         if v.default is inspect.Parameter.empty and p != "out")
        sig = _SIGNATURES[name] = (frozenset(names), names, required)
    return sig


def check_arguments(name, args, fn, literals=False):
    """Check ``args`` against the operator's signature and table form, before any data.

    A name the operator does not take is a ``TypeError`` naming it and the closest one; a
    string where the operator takes a tensor is a
    column name given without ``col`` (a ``TypeError`` suggesting ``la.col(...)``).  With
    ``literals``, the arguments given as values go through the operator's own checks (what a
    ``udf`` does where it is made, so no mistake surfaces first in a worker).
    """
    known, names, required = _signature(name)
    for key in args:
        if key not in known:
            close = difflib.get_close_matches(key, names, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise TypeError(f"{fn}: {name} has no argument {key!r}{hint} (its arguments: "
                            f"{', '.join(names)})")
    contract = CONTRACTS[name]
    for key in contract.tensors:
        v = args.get(key)
        bare = v if isinstance(v, str) else next(
            (x for x in v if isinstance(x, str)), None) if isinstance(v, (list, tuple)) else None
        if bare is not None:
            raise TypeError(f"{fn}: {name}'s {key} takes a tensor or a column, got the string "
                            f"{bare!r}; to read the column {bare!r} write la.col({bare!r})")
    if literals and contract.check is not None:
        contract.check({k: v for k, v in args.items()
                        if not isinstance(v, ColumnRef) and not refs_in({k: v})})


def check_required(name, args, fn):
    """A ``TypeError`` naming the operator's required arguments missing from ``args``."""
    missing = [r for r in _signature(name)[2] if r not in args]
    if missing:
        raise TypeError(f"{fn}: {name} needs the argument(s) {', '.join(map(repr, missing))}")


def check_out(out, count, name, fn):
    """``out`` as a tuple of ``count`` names (None drops a result)."""
    if isinstance(out, str):
        outs = (out,)
    elif isinstance(out, (tuple, list)):
        outs = tuple(out)
    else:
        raise TypeError(f"{fn}: out must be a column name or a tuple of names, got "
                        f"{type(out).__name__}")
    for o in outs:
        if o is not None and not isinstance(o, str):
            raise TypeError(f"{fn}: out must hold column names (strings, or None to drop a "
                            f"result), got {o!r}")
    if len(outs) != count:
        what = "results" if count > 1 else "result"
        raise ValueError(f"{fn}: {name} returns {count} {what} here, so out needs {count} "
                         f"name(s), got {outs!r}" +
                         (" (None drops a result)" if count > 1 else ""))
    named = [o for o in outs if o is not None]
    if len(set(named)) != len(named):
        raise ValueError(f"{fn}: out names a column twice: {outs!r}")
    if not named:
        raise ValueError(f"{fn}: out must name at least one column, got {outs!r}")
    return outs


def refs_in(args):
    """The column references among the argument values (also inside lists and tuples)."""
    found = []
    for v in args.values():
        if isinstance(v, ColumnRef):
            found.append(v)
        elif isinstance(v, (list, tuple)):
            found.extend(x for x in v if isinstance(x, ColumnRef))
    return found


# ---------------------------------------------------------------------------- columns
# Recently seen (type, kinds) pairs: comparing types with ``==`` is cheaper than hashing one,
# as in from_arrow's own plan cache.
_RECENT_KINDS = []


def _kinds(arrow_type):
    """``(is_list, narrow, representable, inner_variable)`` of a column type: whether it has a
    variable-size list level, whether all of those are 32-bit (``List`` / ``ListView``),
    whether it can be a LoDTensor at all, and whether its innermost list level is a
    variable-size one (what :func:`_warn_if_regular` looks at)."""
    for known, hit in _RECENT_KINDS:
        if known == arrow_type:
            return hit
    kinds, _ = list_levels(arrow_type)
    variable = [k for k in kinds if isinstance(k, str)]
    hit = (bool(variable), all(k in ("list", "list_view") for k in variable),
           representable(arrow_type), bool(kinds) and isinstance(kinds[-1], str))
    _RECENT_KINDS.insert(0, (arrow_type, hit))
    del _RECENT_KINDS[8:]
    return hit


_NO_KW = {}


def _not_representable(data, name, fn):
    t = data.type
    kinds, leaf = list_levels(t)
    if kinds:
        return TypeError(f"{fn}: column {name!r}: a list column whose values of Arrow type "
                         f"{leaf} are not numbers or bools (operators read list and plain "
                         f"columns of numbers or bools)")
    what = ("a string" if pa.types.is_string(t) or pa.types.is_large_string(t)
            or pa.types.is_string_view(t) else "a struct" if pa.types.is_struct(t)
            else "a binary" if pa.types.is_binary(t) or pa.types.is_large_binary(t)
            else "a map" if pa.types.is_map(t) else "a dictionary"
            if pa.types.is_dictionary(t) else "a temporal" if pa.types.is_temporal(t)
            else "an unsupported")
    return TypeError(f"{fn}: column {name!r} is {what} column (type {t}); operators read list "
                     f"columns and plain columns of numbers or bools")


def _read(data, ref, fn):
    """A column's Arrow data (no null rows) as a LoDTensor."""
    kw = ref.arrow_kwargs() if ref.lod_level is not None or ref.feature_shape is not None \
        else _NO_KW
    try:
        return from_arrow(data, **kw)
    except ValueError as exc:  # LoDError too (an irregular level under lod_level=): kept
        if "null" in str(exc):
            check_inner_nulls(data, ref.name, fn)
        raise _same_error(exc, f"{fn}: column {ref.name!r}: {exc}") from None
    except TypeError as exc:
        raise TypeError(f"{fn}: column {ref.name!r}: {exc}") from None


def _same_error(exc, message):
    """``exc``'s class with ``message`` (a ValueError where the class needs other args)."""
    try:
        return type(exc)(message)
    except TypeError:
        return ValueError(message)


def _innermost_width(t):
    """``(n, d)``: how many innermost lists ``t`` has and the length ``d >= 2`` every one of
    them has, ``d = -1`` where they differ or are shorter (a regular innermost level is most
    likely a lost feature dimension).  Ragged data answers from its first two lists."""
    off = t._offsets[-1]  # lengths only: a malformed level fails in the operator's checks
    n = off.shape[0] - 1
    if n == 0:
        return 0, -1
    first = off.item(0)  # Python ints: cheaper than NumPy scalars for these few reads
    d = off.item(1) - first
    if d < 2 or (n > 1 and off.item(2) - off.item(1) != d) or off.item(n) - first != d * n \
            or (np.diff(off) != d).any():
        return n, -1
    return n, d


def _warn_if_regular(t, ref, fn, stacklevel):
    """One :class:`~lodarrow.RegularLevelWarning` when the innermost level of ``t`` (a column
    read without ``lod_level`` whose innermost list level is a variable-size one) is regular:
    at least two lists, all of one length ``d >= 2`` (:func:`_innermost_width`).
    ``stacklevel`` counts from :func:`_run`'s caller (1)."""
    n, d = _innermost_width(t)
    if n >= 2 and d >= 2:
        warn_regular(ref, d, t.lod_level, fn, stacklevel + 3)


def warn_regular(ref, d, lod_level, fn, stacklevel):
    """The :class:`~lodarrow.RegularLevelWarning` of column ``ref``, whose innermost lists
    (of a ``lod_level``-level tensor) all have ``d`` entries."""
    k = lod_level - 1  # the levels above the innermost
    warnings.warn(
        f"{fn}: every innermost list of column {ref.name!r} has {d} entries: if they are "
        f"feature vectors that a writer turned into lists (pandas object columns, Spark "
        f"and DuckDB do), read them as features with "
        f"col({ref.name!r}, lod_level={k}, feature_shape=({d},)); an explicit lod_level "
        f"silences this warning", RegularLevelWarning, stacklevel=stacklevel)


class BatchesDisagree(Exception):
    """Raised by :meth:`BatchNotes.saw` when a record batch's column decodes to another kind
    of tensor than the batches before it (the whole table decides what that means)."""


class BatchNotes:
    """What one :class:`Call` saw of the columns it read over the record batches of one
    table, so that mapping the table batch by batch answers as the whole table would.

    Per column read (its index in ``Call.refs``): the tensor's dtype, feature shape and
    number of levels, which must agree between batches (else :class:`BatchesDisagree`: a
    width only the data gives may differ, and the whole table then fails), and, for a
    column that may warn of a regular innermost level, the length every innermost list had
    so far with their count (``(d, n)``; ``d`` is -1 once two lengths differ).
    """

    __slots__ = ("kinds", "regular")

    def __init__(self):
        self.kinds = {}
        self.regular = {}

    def saw(self, i, t, may_warn):
        """Note tensor ``t``, read for column ``i`` from one batch."""
        kind = (t._data.dtype, t._data.shape[1:], t.lod_level)
        if self.kinds.setdefault(i, kind) != kind:
            raise BatchesDisagree(i)
        if not may_warn:
            return
        n, d = _innermost_width(t)
        if n == 0:
            return
        d0, n0 = self.regular.get(i, (d, 0))
        self.regular[i] = (d if d0 == d else -1, n0 + n)

    def warn(self, c, stacklevel):
        """Give the warnings the whole table would have given, in the same order
        (``stacklevel`` as :func:`warnings.warn`'s, counted from the caller of this)."""
        for i, (d, n) in sorted(self.regular.items()):
            if d >= 2 and n >= 2:
                warn_regular(c.refs[i], d, self.kinds[i][2], c.fn, stacklevel + 2)


# ---------------------------------------------------------------------------- results
def _aligned(t, n_rows, name, out, fn):
    """Raise unless ``t`` is row-aligned with a table of ``n_rows`` rows."""
    if t.lod_level:
        got = t._offsets[0].shape[0] - 1
        what = "top-level sequences"
    else:
        got = t._data.shape[0]
        what = "rows"
    if got != n_rows:
        raise ValueError(f"{fn}: {name} gives output {out!r} with {got} {what} for a table of "
                         f"{n_rows} rows; in table form a result needs one sequence (or row) "
                         f"per table row")


def _to_column(t, narrow):
    # t is an operator's result (or built from one): valid, so to_arrow's checks are skipped
    if t._offsets and narrow:
        try:
            return trusted_to_arrow(t, False)
        except ValueError:  # offsets past int32: LargeList, as to_arrow's default
            pass
    return trusted_to_arrow(t, True)


# ---------------------------------------------------------------------------- apply
def _unique(refs):
    out = []
    for r in refs:
        if not any(r is o or r == o for o in out):
            out.append(r)
    return out


def device_place(device, fn):
    """``device`` as a Place (None stays None), or a TypeError naming ``device``."""
    if device is None:
        return None
    try:
        return as_place(device)
    except TypeError:
        raise TypeError(f"{fn}: device must be 'cpu', 'cuda', 'cuda:N' or a Place, "
                        f"got {device!r}") from None


def check_device(device, fn):
    """A TypeError naming ``device`` unless it could name a place (the grammar of
    :func:`lodarrow._place.parse_place`); nothing is allocated or imported, so a udf for GPU
    workers can be made where there is no GPU."""
    if device is None or isinstance(device, Place) or parse_place(device) is not None:
        return
    raise TypeError(f"{fn}: device must be 'cpu', 'cuda', 'cuda:N' or a Place, got {device!r}")


class Call:
    """An operator call on table columns with what its arguments alone decide worked out
    once (the columns read, where each goes), so that a :class:`~lodarrow.udf` applied to
    many batches pays for it once.  Holds no data."""

    __slots__ = ("name", "fn_op", "args", "outs", "device", "fn", "refs", "names", "contract",
                 "items", "out", "literals", "columns", "lists", "warn", "fields")

    def __init__(self, name, fn_op, args, outs, device, fn):
        self.name, self.fn_op, self.args, self.outs = name, fn_op, args, outs
        self.items = self.out = None  # see remember(), apply()
        self.device, self.fn = device, fn
        self.refs = refs = _unique(refs_in(args))
        self.names = tuple(r.name for r in refs)
        self.contract = contract = CONTRACTS[name]
        # the arguments sorted for _run: the literals as a ready dict, the column arguments
        # as (key, index in refs, must be plain), the lists holding columns as (key, value)
        self.literals, columns, lists = {}, [], []
        for key, v in args.items():
            if isinstance(v, ColumnRef):
                columns.append((key, _index(refs, v), key in contract.plain))
            elif isinstance(v, (list, tuple)) and any(isinstance(x, ColumnRef) for x in v):
                lists.append((key, v))
            else:
                self.literals[key] = v
        self.columns, self.lists = tuple(columns), tuple(lists)
        # which columns a regular innermost level may warn about (read without lod_level)
        self.warn = tuple(r.lod_level is None for r in refs)
        self.fields = {}  # (out name, Arrow type) -> the result's field, made once

    def __call__(self, table, notes=None):
        # notes: a BatchNotes while a table is mapped batch by batch (errors are then
        # located by running the whole table, so not here)
        return _run(self, table, notes is None, notes)

    def remember(self):
        """Note the arguments' state, for :meth:`fits` (a udf keeps its call)."""
        self.items = tuple((key, v, _state(v)) for key, v in self.args.items())
        return self

    def fits(self, name, args, outs, device):
        """Whether this call was made from these very arguments, unchanged since (the
        values by identity, the column references by their state)."""
        if name != self.name or outs != self.outs or device is not self.device \
                or self.items is None or len(args) != len(self.items):
            return False
        for (key, v), (key0, v0, state) in zip(args.items(), self.items):
            if v is not v0 or key != key0 or (state is not None and _state(v) != state):
                return False
        return True

    def fits_apply(self, name, args, out, device):
        """:meth:`fits` for :func:`apply`, whose column references are usually made anew
        for each call: equal references fit too (while the remembered ones are unchanged),
        and ``out`` is the argument as given."""
        if name != self.name or device is not self.device or out != self.out \
                or len(args) != len(self.items):
            return False
        for (key, v), (key0, v0, state) in zip(args.items(), self.items):
            if key != key0:
                return False
            if v is v0:
                if state is not None and _state(v) != state:
                    return False
            elif not (type(v) is ColumnRef and type(v0) is ColumnRef
                      and _state(v) == state == _state(v0)):
                return False
        return True


def _state(v):
    """What can change in place in an argument value: a column reference's name and
    options; a list holding references, the references it holds.  None otherwise (a value
    is compared by identity)."""
    if isinstance(v, ColumnRef):
        return (v.name, v.lod_level, v.feature_shape)
    if isinstance(v, (list, tuple)) and any(isinstance(x, ColumnRef) for x in v):
        return tuple(_state(x) for x in v if isinstance(x, ColumnRef))
    return None


#: apply's recent calls, newest first: apply in a loop with the same operator and arguments
#: works its call out once, as a udf does.
_RECENT_CALLS = []
_RECENT_CALLS_SIZE = 8


def _index(refs, ref):
    for i, r in enumerate(refs):
        if r is ref:
            return i
    for i, r in enumerate(refs):
        if r == ref:
            return i
    raise KeyError(ref)  # pragma: no cover - refs holds every reference of the arguments


def run(table, name, fn_op, args, outs, device, fn):
    """The body of :func:`apply` (shared with :class:`udf`)."""
    return _run(Call(name, fn_op, args, outs, device, fn), table, stacklevel=2)


def _run(c, table, locate=True, notes=None, stacklevel=3):
    fn, refs = c.fn, c.refs
    kind = type(table)
    adapter = ArrowAdapter(table) if kind is pa.Table or kind is pa.RecordBatch \
        else adapt(table, fn)
    n_rows = adapter.n_rows
    raw = []
    keep = None  # rows that are not null in any column read (None: all of them)
    for ref in refs:
        data, from_objects = adapter.column(ref.name, fn)
        if type(data) is pa.ChunkedArray and data.num_chunks == 1:
            data = data.chunk(0)  # from_arrow's quickest path
        kinds = _kinds(data.type)
        if not kinds[2]:  # what the column is, before anything about its nulls
            raise _not_representable(data, ref.name, fn)
        raw.append((data, from_objects, kinds))
        if data.null_count:
            v = validity(data)
            keep = v if keep is None else (keep & v)
    if keep is not None and keep.all():
        keep = None
    n_kept = n_rows if keep is None else int(np.count_nonzero(keep))
    tensors = []
    narrow = True
    for i, (ref, (data, from_objects, kinds), warn) in enumerate(zip(refs, raw, c.warn)):
        if keep is not None:
            check_inner_nulls(data, ref.name, fn)  # O(levels) unless there are some
            data = drop_rows(data, keep)
        t = _read(data, ref, fn)
        if notes is not None:
            notes.saw(i, t, bool(t._offsets) and kinds[3] and warn)
        if t._offsets:
            if kinds[3] and warn and locate and notes is None:
                _warn_if_regular(t, ref, fn, stacklevel)
            narrow = narrow and (kinds[1] or from_objects)
        tensors.append(t)
    place = None if c.device is None else device_place(c.device, fn)
    call = dict(c.literals)
    columns = {}
    for key, i, plain in c.columns:
        t = tensors[i]
        listed = bool(t._offsets)
        if listed and plain:
            raise ValueError(f"{fn}: in table form {c.name}'s {key} must be a plain column "
                             f"(one value per row); column {refs[i].name!r} is a list column")
        call[key] = t if place is None else t.to(place)
        columns[key] = listed
    for key, v in c.lists:
        items = [tensors[_index(refs, x)] if isinstance(x, ColumnRef) else x for x in v]
        if place is not None:
            items = [x.to(place) if isinstance(x, LoDTensor) else x for x in items]
        call[key] = type(v)(items) if isinstance(v, tuple) else items
    try:
        results = _call(c, call, columns, n_kept)
    except (ValueError, IndexError) as exc:
        if not locate:
            raise
        located = _locate(c, refs, raw, exc)
        if located is None:
            raise
        raise located from None
    new = {}
    fields = c.fields
    for t, out in zip(results, c.outs):
        if out is None:
            continue
        arr = _to_column(t, narrow)
        if keep is not None:
            arr = spread_rows(arr, keep)
        # a field made once per output name and type: cheaper for pyarrow than a name
        field = fields.get((out, arr.type))
        if field is None:
            field = fields[(out, arr.type)] = pa.field(out, arr.type)
            if len(fields) > 16:
                fields.clear()
        new[out] = (field, arr)
    return adapter.finish(new)


def _call(c, call, columns, n_rows):
    """The operator's results on the kept rows, in table form and checked row-aligned."""
    result = c.fn_op(**call)
    results = result if isinstance(result, tuple) else (result,)
    fixup = c.contract.fixup
    out = []
    for i, (t, o) in enumerate(zip(results, c.outs)):
        if o is None:
            out.append(None)
            continue
        if t._place.is_cuda:
            t = t.cpu()
        if fixup is not None:
            t = fixup(i, t, call, columns, c.fn)
        _aligned(t, n_rows, c.name, o, c.fn)
        out.append(t)
    return out


def _locate(c, refs, raw, exc):
    """``exc`` told in the frame of the first table row that fails, or None.

    Rows are independent, so a prefix of the table fails exactly when it holds a failing row:
    a binary search over prefix lengths finds the first one in log2(n) calls, and the call on
    that row alone gives the message whose sequence numbers count within the row.  None when
    the call fails without any row (the error is not about a row).
    """
    names = {}
    for ref, (data, _, _) in zip(refs, raw):
        names.setdefault(ref.name, data)
    sub = pa.table(names)

    def error(start, k):
        try:
            _run(c, sub.slice(start, k), locate=False)
        except (ValueError, IndexError) as e:
            return e
        except Exception:  # another failure: not the one being located
            return None
        return None

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if error(0, 0) is not None or error(0, sub.num_rows) is None:
            return None
        lo, hi = 0, sub.num_rows  # prefix lo succeeds, prefix hi fails
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if error(0, mid) is not None:
                hi = mid
            else:
                lo = mid
        row = hi - 1
        alone = error(row, 1) or exc
    message = str(alone.args[0]) if alone.args else str(alone)
    prefix = f"{c.fn}: "
    if message.startswith(prefix):
        message = message[len(prefix):]
    located = _same_error(alone, f"{c.fn}: table row {row}: {message}")
    located.table_row = row
    located.row_message = message
    return located


def apply(table, op, *, out, device=None, **args):
    """Run an operator on the columns of a table; add its results as columns.

    Parameters
    ----------
    table : pyarrow.Table, pyarrow.RecordBatch, pandas.DataFrame, polars.DataFrame or stream
        Any object with ``__arrow_c_stream__`` is read as a ``pyarrow.Table``.  pandas columns
        may be ``pd.ArrowDtype`` (read zero-copy) or object columns of lists / NumPy arrays at
        any depth (what ``pd.read_parquet`` returns by default).
    op : callable or str
        A public lodarrow operator (``la.sequence_pool``) or its name (``"sequence_pool"``).
    out : str or tuple of str
        The result column(s): a tuple for an operator with several results
        (``sequence_pad`` -> (padded, length); ``sequence_pool(..., return_index=True)`` ->
        (out, index)); ``None`` in the tuple drops that result.  A name equal to an existing
        column replaces it in place; new names are appended in order.
    device : str or Place, optional
        ``"cuda"`` runs the operator on the GPU (inputs moved once, results brought back as
        host Arrow columns); needs CuPy and a GPU, else ``lodarrow.BackendError``.
    **args
        The operator's arguments; :func:`col` references are replaced by the columns'
        tensors, everything else is passed as it is.

    Returns
    -------
    table of the same kind
        The other columns are the caller's own (zero-copy, with the schema's metadata).  A list
        result is a list column whose levels are ``List`` (int32 offsets) when every list
        column the call reads is ``List`` / ``ListView`` (a pandas object column counts as
        ``List``) and the offsets fit, else ``LargeList``.  New pandas columns are
        ``pd.ArrowDtype``.

    Raises
    ------
    ValueError
        If a result is not row-aligned (the message names the operator, the output and the
        row counts); on a null inside a list (naming the column, the row and the level); on a
        list column where the operator reads a plain one's rows.  An error that a row of the
        data causes names that table row and is that row's own error (its sequence numbers
        count within the row); the exception's ``table_row`` attribute holds the row.
    KeyError
        If a referenced column does not exist.
    TypeError
        If ``table`` or ``op`` is of the wrong kind, a column cannot be a LoDTensor (a string
        or struct column says so), an argument name is not the operator's (the message names
        the closest), or a string stands where the operator takes a tensor (a column name
        without ``la.col``).

    Warns
    -----
    RegularLevelWarning
        When a column read without ``lod_level`` has a regular innermost list level (every
        list ``d >= 2`` long): most likely a feature dimension a writer turned into lists.

    Notes
    -----
    A null row of any input column (list or plain) is a null row of every result: the
    operator runs on the other rows (docs/tables.md#nulls).
    ``sequence_pool(..., return_index=True)`` gives indices relative to the
    first value of the table row (-1 stays -1), so they do not depend on how a table is split.
    ``sequence_expand(x=col(plain), y=col(list))`` and ``sequence_expand_as`` repeat row ``i``
    of ``x`` within row ``i`` of ``y``; ``sequence_mask(x=col(list))`` keeps ``x``'s rows.
    See docs/tables.md.

    Examples
    --------
    >>> import pyarrow as pa, lodarrow as la
    >>> tab = pa.table({"id": [7, 8], "emb": [[1.0, 3.0], [5.0]]})
    >>> la.apply(tab, la.sequence_pool, input=la.col("emb"), pool_type="average",
    ...          out="avg").column("avg").to_pylist()
    [2.0, 5.0]
    """
    name, fn_op = resolve_op(op, "apply")
    for c in _RECENT_CALLS:
        if c.fits_apply(name, args, out, device):
            return _run(c, table, stacklevel=2)
    check_arguments(name, args, "apply")
    outs = check_out(out, n_results(name, args), name, "apply")
    check_required(name, args, "apply")
    c = Call(name, fn_op, args, outs, device, "apply").remember()
    c.out = out
    _RECENT_CALLS.insert(0, c)
    del _RECENT_CALLS[_RECENT_CALLS_SIZE:]
    return _run(c, table, stacklevel=2)
