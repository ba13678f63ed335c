"""``udf`` and ``pipeline``: an operator call on table columns, shippable to workers.

A :class:`udf` holds the operator's name, its arguments and the output names -- never data --
so it pickles in a few hundred bytes for Ray, Dask or Spark workers.  Its output schema
depends only on the input schema and the arguments (docs/tables.md): it is computed by
running the call on an empty table of the input schema, so it is the schema every batch's
result has, by construction.

That also makes a udf's result on a table the concatenation of its results on the table's
record batches, which is how a table whose columns come in several chunks is mapped (a Ray
block: one chunk per batch read): each batch's columns are read zero-copy, where the whole
table's would be joined into one copy first.
"""

import numpy as np
import pyarrow as pa

from lodarrow._tables._adapters import is_pandas_frame, variable_levels
from lodarrow._tables._apply import (CONTRACTS, OPERATORS, BatchNotes, Call, ColumnRef,
                                     check_arguments, check_device, check_out, check_required,
                                     refs_in, resolve_op)

__all__ = ["udf", "pipeline"]


#: A chunked table is mapped batch by batch only where the columns read average this many
#: bytes a batch: at 2 MiB a batch that is 1.4x as fast as joining the chunks (a copy into
#: fresh memory, page faults and all), at 4 MiB 3.6-4x, at 1 MiB about even, and below it
#: the calls per batch cost more than the join (benchmarks/udf_chunked_tables.py).
_MIN_BATCH_BYTES = 1 << 20


def _by_batch(calls, table):
    """``calls`` applied in turn to each record batch of ``table`` (a ``pyarrow.Table``), as
    one table; None where the table is better run whole: the columns the calls read in one
    chunk each (read zero-copy as they are), or its batches small.

    The result is the whole table's (a udf's result on a table is the concatenation of its
    results on the rows), warnings included (:class:`~lodarrow._tables._apply.BatchNotes`),
    except where the batches disagree or one fails: then None, and the whole table gives the
    result or the error it gives, located at its first failing row.
    """
    # (a column a later call reads may be an earlier one's result: it only sways the choice;
    # a column missing or named twice is left to the whole table's KeyError)
    schema = table.schema
    read = []
    chunked = False
    for c in calls:
        for name in c.names:
            i = schema.get_field_index(name)
            if i >= 0:
                column = table.column(i)
                chunked = chunked or column.num_chunks > 1
                read.append(column)
    if not chunked:  # the common case, on every call: kept to a few attribute reads
        return None
    batches = [b for b in table.to_batches() if b.num_rows]
    if len(batches) < 2 or sum(col.nbytes for col in read) < _MIN_BATCH_BYTES * len(batches):
        return None
    notes = [BatchNotes() for _ in calls]
    try:
        results = []
        for batch in batches:
            for c, seen in zip(calls, notes):
                batch = c(batch, seen)
            results.append(batch)
        result = pa.Table.from_batches(results)
    except Exception:  # noqa: BLE001 -- run whole: its result or its exact error
        return None
    for c, seen in zip(calls, notes):
        seen.warn(c, stacklevel=3)  # the caller of udf / pipeline
    return result


class _Base:
    """What udf and pipeline share: ``output_schema`` callers and ``dask_meta``."""

    __slots__ = ()

    def __call__(self, batch):
        """Apply to one table or batch (any kind :func:`lodarrow.apply` takes)."""
        calls = self._calls()
        if type(batch) is pa.Table:
            result = _by_batch(calls, batch)
            if result is not None:
                return result
        for c in calls:
            batch = c(batch)
        return batch

    def dask_meta(self, ddf):
        """The empty pandas DataFrame a Dask ``map_partitions`` needs as ``meta``.

        Parameters
        ----------
        ddf : dask.dataframe.DataFrame or pandas.DataFrame
            The Dask DataFrame the udf maps over (its ``_meta`` is read), or that meta
            itself.  Columns the udf reads must be ``pd.ArrowDtype`` (read the data with
            ``dtype_backend="pyarrow"``).

        Returns
        -------
        pandas.DataFrame
            No rows; the input's columns with their dtypes, and every output column as
            ``pd.ArrowDtype`` of :meth:`output_schema`'s type.

        Raises
        ------
        TypeError
            If ``ddf`` is neither, or a column the udf reads is not ``pd.ArrowDtype``.

        Examples
        --------
        >>> import pandas as pd, pyarrow as pa, lodarrow as la
        >>> meta = pd.DataFrame({"x": pd.Series([], dtype=pd.ArrowDtype(pa.list_(pa.float64())))})
        >>> f = la.udf(la.sequence_pool, input=la.col("x"), pool_type="sum", out="s")
        >>> f.dask_meta(meta).dtypes["s"]
        double[pyarrow]
        """
        import pandas as pd

        meta = getattr(ddf, "_meta", ddf)
        if not is_pandas_frame(meta):
            raise TypeError(f"dask_meta: ddf must be a Dask or pandas DataFrame, got "
                            f"{type(ddf).__name__}")
        meta = meta.iloc[:0]
        read = self._reads()
        fields = []
        for name in meta.columns:
            dtype = meta.dtypes[name]
            if isinstance(dtype, pd.ArrowDtype):
                fields.append(pa.field(name, dtype.pyarrow_dtype))
                continue
            if name in read:
                raise TypeError(f"dask_meta: column {name!r} has dtype {dtype}; the columns a "
                                f"udf reads must be pd.ArrowDtype (read the data with "
                                f"dtype_backend='pyarrow')")
            try:
                fields.append(pa.field(name, pa.from_numpy_dtype(dtype)))
            except (TypeError, pa.ArrowNotImplementedError):
                fields.append(pa.field(name, pa.null()))  # passed through, never read
        schema = self.output_schema(pa.schema(fields))
        out = meta.copy(deep=False)
        written = set(self._writes())
        for field in schema:
            if field.name in written:
                out[field.name] = pd.Series(
                    pd.arrays.ArrowExtensionArray(pa.array([], type=field.type)),
                    index=out.index, name=field.name)
        return out


def _as_schema(schema, fn):
    if isinstance(schema, pa.Schema):
        return schema
    if isinstance(schema, (pa.Table, pa.RecordBatch)):
        return schema.schema
    if hasattr(schema, "__arrow_c_schema__"):
        return pa.schema(schema)
    raise TypeError(f"{fn}: schema must be a pyarrow.Schema, got {type(schema).__name__}")


class udf(_Base):
    """An operator call on table columns, as a small picklable callable.

    ``la.udf(op, out=..., **args)(table)`` is ``la.apply(table, op, out=..., **args)``; the
    udf holds the operator's name, the arguments and the output names, never data, so Ray,
    Dask and Spark can ship it to workers.

    Parameters
    ----------
    op : callable or str
        A public lodarrow operator or its name.
    out : str or tuple of str
        The result column(s), as for :func:`lodarrow.apply`.
    device : str, optional
        ``"cuda"`` to run on the GPU (see :func:`lodarrow.apply`).
    **args
        The operator's arguments; :func:`lodarrow.col` references name columns.

    Raises
    ------
    ValueError
        For ``sequence_pad`` / ``sequence_mask`` without ``maxlen`` (their width would depend
        on each batch's data, and the batches of one dataset must share one schema); for a
        ``lod_reset`` / ``lod_append`` whose new LoD is a literal (it cannot fit every batch:
        give ``y=col(...)``/``level=col(...)``); for ``out`` of the wrong length; for a
        literal argument the operator itself refuses (``pool_type="avg"``: the same error the
        tensor call gives).
    TypeError
        If ``op`` is not an operator or ``out`` not names; for an argument name the operator
        does not take (the message names the closest one) or a missing one; for a bare
        column name where the operator takes a tensor (``input="emb"``: write
        ``la.col("emb")``).

    See Also
    --------
    pipeline, lodarrow.apply : Chain udfs; run an operator on a table (docs/tables.md).

    Examples
    --------
    >>> import pickle, pyarrow as pa, lodarrow as la
    >>> f = la.udf(la.sequence_pad, x=la.col("tok"), pad_value=0, maxlen=3,
    ...            out=("tok_pad", "tok_len"))
    >>> g = pickle.loads(pickle.dumps(f))
    >>> g(pa.table({"tok": [[1, 2], [3]]})).column("tok_pad").to_pylist()
    [[1, 2, 0], [3, 0, 0]]
    >>> f.output_schema(pa.schema([("tok", pa.list_(pa.int64()))])).field("tok_len").type
    DataType(int64)
    """

    __slots__ = ("op", "args", "out", "device", "_call")

    def __init__(self, op, *, out, device=None, **args):
        # everything the data does not decide is checked now, not first in a worker
        name, _ = resolve_op(op, "udf")
        contract = CONTRACTS[name]
        check_arguments(name, args, "udf", literals=True)
        outs = check_out(out, contract.n_results(args), name, "udf")
        check_device(device, "udf")
        width = contract.width
        if width is not None and args.get(width) is None:
            raise ValueError(f"udf: {name} without {width} gives each batch the width of its "
                             f"longest sequence, but the batches of one dataset must share one "
                             f"schema; pass {width}=")
        for key in contract.udf_columns:
            if not isinstance(args.get(key), ColumnRef):
                given = f"a literal {key}" if args.get(key) is not None else f"no {key}"
                raise ValueError(f"udf: {name} with {given} cannot fit every batch of a "
                                 f"dataset; give {key}=la.col(list column) whose rows cut each "
                                 f"row's values")
        check_required(name, args, "udf")
        self.op = name
        self.args = dict(args)
        self.out = outs
        self.device = device
        self._call = None

    def _calls(self):
        c = self._call
        if c is None or not c.fits(self.op, self.args, self.out, self.device):
            # worked out once per udf (and again only if its attributes were changed)
            c = self._call = Call(self.op, OPERATORS[self.op], self.args, self.out,
                                  self.device, "udf").remember()
        return (c,)

    def __getstate__(self):
        return (self.op, self.args, self.out, self.device)

    def __setstate__(self, state):
        self.op, self.args, self.out, self.device = state
        self._call = None

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.args.items())
        out = self.out[0] if len(self.out) == 1 else self.out
        return f"udf({self.op}, {args}, out={out!r})"

    def __eq__(self, other):
        return isinstance(other, udf) and self.__getstate__()[:1] == other.__getstate__()[:1] \
            and self.out == other.out and self.device == other.device \
            and _args_equal(self.args, other.args)

    __hash__ = None

    def _reads(self):
        return {r.name for r in refs_in(self.args)}

    def _writes(self):
        return tuple(o for o in self.out if o is not None)

    def output_schema(self, schema):
        """The schema of this udf's result on a table of ``schema``, computed without data.

        Parameters
        ----------
        schema : pyarrow.Schema
            The input schema (a Table or RecordBatch gives its own).

        Returns
        -------
        pyarrow.Schema
            The input fields (with their metadata, and the schema's) with the outputs
            replaced in place or appended: the exact schema :meth:`__call__` gives an Arrow
            table of this schema.  List outputs are ``List`` when every list column read is
            ``List`` / ``ListView`` (an overflow of int32 offsets in a batch would make that
            batch ``LargeList``).

        Raises
        ------
        KeyError
            If a referenced column is not in ``schema``.
        ValueError
            If a ``col(name, lod_level=k)`` folds list levels into feature dimensions without
            ``feature_shape``: their widths are in the data only.
        TypeError
            If a column cannot be a LoDTensor, or the arguments do not fit the operator.
        """
        schema = _as_schema(schema, "output_schema")
        for ref in refs_in(self.args):
            i = schema.get_field_index(ref.name)
            if i < 0:
                raise KeyError(f"output_schema: no column {ref.name!r}; the columns are "
                               f"{schema.names}")
            if ref.lod_level is not None and ref.feature_shape is None:
                levels = variable_levels(schema.field(i).type)
                if levels > ref.lod_level:
                    raise ValueError(
                        f"output_schema: col({ref.name!r}, lod_level={ref.lod_level}) folds "
                        f"{levels - ref.lod_level} list level(s) of {schema.field(i).type} "
                        f"into feature dimensions whose widths only the data knows; give "
                        f"col(..., feature_shape=(...)) so the schema can be computed")
        return self(schema.empty_table()).schema


def _args_equal(a, b):
    if a.keys() != b.keys():
        return False
    for k in a:
        x, y = a[k], b[k]
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            if not (isinstance(x, np.ndarray) and isinstance(y, np.ndarray)
                    and x.dtype == y.dtype and np.array_equal(x, y)):
                return False
        elif x != y:
            return False
    return True


class pipeline(_Base):
    """Several udfs applied in order, as one udf (picklable; ``output_schema`` composed).

    Parameters
    ----------
    *udfs : udf or pipeline
        Applied left to right; each sees the columns the previous ones wrote.  Nested
        pipelines are flattened.

    Raises
    ------
    ValueError
        If no udf is given.
    TypeError
        If an argument is not a udf or pipeline.

    See Also
    --------
    udf : An operator call on table columns as a picklable callable (docs/tables.md).

    Examples
    --------
    >>> import pyarrow as pa, lodarrow as la
    >>> g = la.pipeline(
    ...     la.udf(la.sequence_reverse, x=la.col("x"), out="r"),
    ...     la.udf(la.sequence_first_step, input=la.col("r"), out="last"))
    >>> g(pa.table({"x": [[1.0, 2.0], [3.0]]})).column("last").to_pylist()
    [2.0, 3.0]
    """

    __slots__ = ("udfs",)

    def __init__(self, *udfs):
        if not udfs:
            raise ValueError("pipeline: give at least one udf")
        flat = []
        for i, u in enumerate(udfs):
            if isinstance(u, pipeline):
                flat.extend(u.udfs)
            elif isinstance(u, udf):
                flat.append(u)
            else:
                raise TypeError(f"pipeline: udfs[{i}] must be a udf or a pipeline, got "
                                f"{type(u).__name__}")
        self.udfs = tuple(flat)

    def _calls(self):
        return tuple(c for u in self.udfs for c in u._calls())

    def __getstate__(self):
        return self.udfs

    def __setstate__(self, state):
        self.udfs = state

    def __repr__(self):
        return "pipeline(" + ", ".join(repr(u) for u in self.udfs) + ")"

    def __eq__(self, other):
        return isinstance(other, pipeline) and self.udfs == other.udfs

    __hash__ = None

    def _reads(self):
        """The input columns read before any udf of the pipeline writes them."""
        read, written = set(), set()
        for u in self.udfs:
            read |= u._reads() - written
            written |= set(u._writes())
        return read

    def _writes(self):
        out = []
        for u in self.udfs:
            out.extend(o for o in u._writes() if o not in out)
        return tuple(out)

    def output_schema(self, schema):
        """The schema of the pipeline's result on a table of ``schema`` (each udf's
        :meth:`udf.output_schema` in turn)."""
        schema = _as_schema(schema, "output_schema")
        for u in self.udfs:
            schema = u.output_schema(schema)
        return schema
