"""``spark_map``: a udf or pipeline on Spark's ``mapInArrow`` (docs/scale-out.md, Spark).

Spark's Arrow exchange carries fewer types than lodarrow writes.  Its JVM side refuses
``LargeList``, ``ListView`` and ``FixedSizeList`` (``UNSUPPORTED_ARROWTYPE``), float16 and the
unsigned integers; it has no fixed widths at all (a fixed-size list column is read back as
``array<array<float>>``).  So every output batch is cast, column by column and only where
needed, to what Spark carries (:func:`spark_arrow_type`):

- every list kind -> 32-bit ``List`` (a ``LargeList`` whose offsets do not fit is an error
  naming the column), ``FixedSizeList`` feature dimensions -> ``List`` of that length;
- float16 -> float32 (exact);
- uint8 / uint16 / uint32 -> int16 / int32 / int64 (exact: what Spark's own Parquet reader
  makes of them); uint64 -> int64, checked (a value above 2**63 - 1 is an error naming the
  column; Spark's Parquet reader would give ``decimal(20, 0)``, which no operator reads);
- dictionary-encoded -> its values.

The output schema is ``f.output_schema`` of the input Arrow schema (pyspark's own
``to_arrow_schema`` of ``df.schema``), with the same casts, converted by pyspark's own
``from_arrow_schema``: no type table of lodarrow's own.  The inputs are not cast: a udf reads
Spark's lists directly, and ``col(name, lod_level=k, feature_shape=(d, ...))`` folds the
regular list levels Spark made of fixed-size ones back into feature dimensions (an O(n)
check of their offsets, the values stay in place).
"""

import functools

import numpy as np
import pyarrow as pa

from lodarrow._interop._arrow_layout import LARGE_LIST_VIEW, LIST_VIEW, type_chain

__all__ = ["spark_arrow_schema", "spark_arrow_type", "spark_map", "to_spark_batch"]


#: Unsigned integer -> the signed type Spark carries it as.
_WIDER = {pa.uint8(): pa.int16(), pa.uint16(): pa.int32(), pa.uint32(): pa.int64(),
          pa.uint64(): pa.int64()}


@functools.lru_cache(maxsize=256)
def spark_arrow_type(arrow_type):
    """The Arrow type Spark's ``mapInArrow`` exchange carries for ``arrow_type``.

    The type itself where Spark takes it as it is; see the module docstring for the casts.
    List value fields keep their names and nullability; structs, maps and the values of every
    list kind are converted recursively.

    Parameters
    ----------
    arrow_type : pyarrow.DataType
        A column's type, as a udf returns it.

    Returns
    -------
    pyarrow.DataType
        The type to cast that column to before it goes to Spark.

    Examples
    --------
    >>> import pyarrow as pa
    >>> from lodarrow._tables._spark import spark_arrow_type
    >>> spark_arrow_type(pa.large_list(pa.list_(pa.float16(), 16)))
    ListType(list<item: list<item: float>>)
    """
    t = arrow_type
    if (pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)
            or _is_view(t)):
        field = t.value_field
        value = spark_arrow_type(field.type)
        if pa.types.is_list(t) and value == field.type:
            return t
        return pa.list_(field.with_type(value))
    if pa.types.is_struct(t):
        fields = [t.field(i) for i in range(t.num_fields)]
        new = [f.with_type(spark_arrow_type(f.type)) for f in fields]
        return t if new == fields else pa.struct(new)
    if pa.types.is_map(t):
        key, item = spark_arrow_type(t.key_type), spark_arrow_type(t.item_type)
        if key == t.key_type and item == t.item_type:
            return t
        return pa.map_(t.key_field.with_type(key), t.item_field.with_type(item))
    if pa.types.is_dictionary(t):
        return spark_arrow_type(t.value_type)
    if pa.types.is_float16(t):
        return pa.float32()
    return _WIDER.get(t, t)


def spark_arrow_schema(schema):
    """``schema`` with every field's type as Spark carries it (:func:`spark_arrow_type`).

    Field names, nullability and metadata, and the schema's metadata, are kept.
    """
    return pa.schema([f.with_type(spark_arrow_type(f.type)) for f in schema],
                     metadata=schema.metadata)


def _is_view(t):
    return pa.types.is_list_view(t) or pa.types.is_large_list_view(t)


@functools.lru_cache(maxsize=256)
def _has_view(t):
    return any(kind in (LIST_VIEW, LARGE_LIST_VIEW) for kind, _ in type_chain(t)[0])


def _without_views(arr):
    """``arr`` with every list-view level made a list of the same offset width.

    pyarrow's own cast from a list view to a list gives an invalid array when the views are
    out of order or null (pyarrow 26), so the values are gathered here (a copy, only for
    list views: neither Spark nor lodarrow's operators make them).
    """
    t = arr.type
    if not _has_view(t):
        return arr
    mask = arr.is_null() if arr.null_count else None
    if pa.types.is_fixed_size_list(t):
        size = t.list_size
        values = arr.values.slice(arr.offset * size, len(arr) * size)
        return pa.FixedSizeListArray.from_arrays(_without_views(values), size, mask=mask)
    large = pa.types.is_large_list(t) or pa.types.is_large_list_view(t)
    dtype = np.int64 if large else np.int32
    if _is_view(t):
        starts = arr.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
        sizes = arr.sizes.to_numpy(zero_copy_only=False).astype(np.int64)
        if mask is not None:
            sizes[mask.to_numpy(zero_copy_only=False)] = 0
        ends = np.concatenate([[0], np.cumsum(sizes)])
        # every value of every view, in row order: start of its view + position in it
        index = np.repeat(starts - ends[:-1], sizes) + np.arange(ends[-1], dtype=np.int64)
        values = arr.values.take(pa.array(index))
        offsets = ends
    else:
        offsets = arr.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
        values = arr.values.slice(offsets[0], offsets[-1] - offsets[0])
        offsets = offsets - offsets[0]
    cls = pa.LargeListArray if large else pa.ListArray
    return cls.from_arrays(pa.array(offsets.astype(dtype)), _without_views(values), mask=mask)


def to_spark_batch(batch):
    """``batch`` (a RecordBatch) with each column Spark cannot carry cast to what it can.

    Columns Spark takes as they are stay the same objects (no copy).  A value that does not
    fit its new type (list offsets beyond int32, uint64 above 2**63 - 1) raises
    ``ValueError`` naming the column.
    """
    columns = None
    for i, column in enumerate(batch.columns):
        want = spark_arrow_type(column.type)
        if want is column.type or want == column.type:
            continue
        if columns is None:
            columns = list(batch.columns)
        try:
            columns[i] = _without_views(column).cast(want)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise ValueError(
                f"spark_map: output column {batch.schema.names[i]!r} of type {column.type} "
                f"cannot be carried by Spark as {want}: {exc}") from None
    if columns is None:
        return batch
    fields = [f.with_type(c.type) for f, c in zip(batch.schema, columns)]
    return pa.RecordBatch.from_arrays(columns,
                                      schema=pa.schema(fields, metadata=batch.schema.metadata))


class _MapBatches:
    """The function ``mapInArrow`` runs in Spark's Python workers: ``f`` over each batch,
    then the casts to Spark's types.  Pickled with the udf (a few hundred bytes)."""

    __slots__ = ("f",)

    def __init__(self, f):
        self.f = f

    def __call__(self, batches):
        f = self.f
        for batch in batches:
            yield to_spark_batch(f(batch))


def spark_map(df, f):
    """Run a udf or pipeline over a Spark DataFrame with ``mapInArrow``.

    Each of Spark's Arrow record batches goes through ``f`` in Spark's Python workers; the
    result is the lazy Spark DataFrame of ``df.mapInArrow(...)`` with ``df``'s columns and
    ``f``'s outputs, as ``f`` would give them on an Arrow table, in the types Spark carries.

    Parameters
    ----------
    df : pyspark.sql.DataFrame
        The input.  Spark holds a fixed-size list column (what lodarrow writes for feature
        dimensions) as nested arrays with no width: read it with
        ``la.col(name, lod_level=k, feature_shape=(d, ...))`` (the outer ``k`` levels are the
        LoD, the inner ones regular feature dimensions of widths ``d, ...``; ``lod_level=0``
        for a plain fixed-size column).
    f : udf, pipeline or TokenizeUdf
        Made by :func:`lodarrow.udf` / :func:`lodarrow.pipeline` /
        :func:`lodarrow.tokenize_udf`.  It is pickled to the
        workers (operator names and arguments, never data).

    Returns
    -------
    pyspark.sql.DataFrame
        Lazy, like every ``mapInArrow``.  Its schema is ``f.output_schema`` of ``df``'s Arrow
        schema, converted by pyspark's own ``from_arrow_schema`` after these casts (Spark's
        Arrow exchange knows no other): every list kind and fixed-size feature dimension to
        ``array`` (32-bit ``List``), float16 to ``float``, uint8/16/32 to
        ``smallint``/``int``/``bigint`` and uint64 to ``bigint`` (checked per value).  Read
        a list output back into lodarrow with ``la.col(name, lod_level=k,
        feature_shape=...)``.

    Raises
    ------
    ImportError
        If pyspark is not installed (``pip install -e '.[spark]'`` from a lodarrow checkout).
    TypeError
        If ``df`` is not a Spark DataFrame or ``f`` not a udf or pipeline; or (from
        ``f.output_schema``) a column ``f`` reads cannot be a LoDTensor.
    KeyError
        If ``f`` reads a column ``df`` does not have.
    ValueError
        From ``f.output_schema``: a ``col(name, lod_level=k)`` that folds Spark's list levels
        into feature dimensions without ``feature_shape`` (Spark's types carry no widths and
        Spark needs the schema before any data exists).  At run time, in Spark's task error:
        a width that differs from ``feature_shape`` (``LoDError``), or a value that does not
        fit Spark's type (the column is named).

    See Also
    --------
    lodarrow.udf, lodarrow.map_parquet : The same udf on one machine, Ray or Dask
        (docs/scale-out.md).

    Notes
    -----
    Nothing runs until a Spark action (``write``, ``collect``, ``toArrow`` ...).  The casts
    touch only the columns that need them: a ``List`` output of a udf that read Spark's
    lists, and every column passed through, go to Spark as they are.

    Examples
    --------
    >>> import lodarrow as la
    >>> f = la.udf(la.sequence_pool, pool_type="average", out="doc_vec",
    ...            input=la.col("emb", lod_level=1, feature_shape=(16,)))
    >>> df = spark.read.parquet("corpus/")  # doctest: +SKIP
    >>> df.schema["emb"].dataType.simpleString()  # doctest: +SKIP
    'array<array<float>>'
    >>> out = la.spark_map(df, f)  # doctest: +SKIP
    >>> out.schema["doc_vec"].dataType.simpleString()  # doctest: +SKIP
    'array<float>'
    >>> out.write.parquet("corpus-mapped/")  # doctest: +SKIP
    """
    from lodarrow._tables._tokenize import TokenizeUdf
    from lodarrow._tables._udf import pipeline, udf

    try:
        from pyspark.sql import DataFrame
        from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
    except ImportError as exc:
        raise ImportError("spark_map needs pyspark: install the 'spark' extra (pip install -e "
                          "'.[spark]' in the checkout)") from exc
    if not isinstance(df, DataFrame):
        raise TypeError(f"spark_map: df must be a pyspark.sql.DataFrame, got "
                        f"{type(df).__name__}")
    if not isinstance(f, (udf, pipeline, TokenizeUdf)):
        raise TypeError(f"spark_map: f must be a la.udf or la.pipeline, got "
                        f"{type(f).__name__}")
    conf = df.sparkSession.conf
    arrow_in = to_arrow_schema(
        df.schema, timezone=conf.get("spark.sql.session.timeZone", "UTC"),
        prefers_large_types=conf.get("spark.sql.execution.arrow.useLargeVarTypes",
                                     "false") == "true")
    schema = from_arrow_schema(spark_arrow_schema(f.output_schema(arrow_in)))
    return df.mapInArrow(_MapBatches(f), schema)
