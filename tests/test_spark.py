"""``la.spark_map`` and the types Spark's Arrow exchange carries (docs/scale-out.md, Spark).

The first tests need no Spark: the casts of every Arrow type lodarrow writes to one Spark's
JVM takes (checked with pyspark's own ``from_arrow_type``, values equal, columns that need no
cast left as they are), and ``col(name, lod_level=0)``.  The others (``-m engines``) run a
local Spark (the session-wide ``spark`` fixture of conftest.py, skipped only where no Java is
found): the schema before any data, the ``feature_shape`` errors, Spark's types for every
kind of output and their way back into lodarrow through ``col(..., lod_level, feature_shape)``.
The every-operator pipeline over the engines' dataset is in ``test_engines.py``.
"""

import sys

import numpy as np
import pyarrow as pa
import pytest
from tables_cases import addresses

import lodarrow as la
from lodarrow._tables._spark import spark_arrow_schema, spark_arrow_type, to_spark_batch

#: pyspark 4.3 warns that it is not yet tested with pandas 3 (mapInArrow uses no pandas).
_PANDAS3 = pytest.mark.filterwarnings(
    "ignore:PySpark does not yet fully support pandas:FutureWarning")

F32 = pa.float32()


# (array, the type Spark carries): every list kind, feature dimensions, the small types
ARRAYS = [
    pytest.param(pa.array([[1.0], [], None], pa.list_(F32)), pa.list_(F32), id="list"),
    pytest.param(pa.array([[1.0], [], None, [2.0, 3.0]], pa.large_list(F32)).slice(1),
                 pa.list_(F32), id="large_list-sliced"),
    pytest.param(pa.array([[[1, 2, 3]], None, [], [[4, 5, 6], [7, 8, 9]]],
                          pa.list_(pa.list_(pa.int32(), 3))),
                 pa.list_(pa.list_(pa.int32())), id="list-of-fixed"),
    pytest.param(pa.array([[[[1, 2], [3, 4]]], []], pa.large_list(pa.list_(pa.list_(
        pa.float64(), 2), 2))), pa.list_(pa.list_(pa.list_(pa.float64()))),
                 id="large_list-of-fixed-2d"),
    pytest.param(pa.array([[1, 2], [3, 4], [5, 6]], pa.list_(pa.int64(), 2)).slice(1),
                 pa.list_(pa.int64()), id="fixed-plain-sliced"),
    pytest.param(pa.ListViewArray.from_arrays(pa.array([2, 0, 1, 0], pa.int32()),
                                              pa.array([1, 1, 2, 0], pa.int32()),
                                              pa.array([1.0, 2.0, 3.0, 4.0], F32),
                                              mask=pa.array([False, False, False, True])),
                 pa.list_(F32), id="list_view-out-of-order-null"),
    pytest.param(pa.array([[[1.0], [2.0]], None, [[3.0]], [], [None]],
                          pa.list_(pa.large_list_view(pa.float64()))).slice(1),
                 pa.list_(pa.list_(pa.float64())), id="list-of-large_list_view"),
    pytest.param(pa.array([[[1, 2]], [], [[3, 4], [5, 6]]],
                          pa.large_list_view(pa.list_(pa.int16(), 2))),
                 pa.list_(pa.list_(pa.int16())), id="large_list_view-of-fixed"),
    # float16 from NumPy: pyarrow < 17 builds no half floats from Python floats
    pytest.param(pa.array(np.array([0.5, 0.0, -2.0], np.float16),
                          mask=np.array([False, True, False])), F32, id="float16"),
    pytest.param(pa.LargeListArray.from_arrays(
        pa.array([0, 1, 1, 2], pa.int64()), pa.array(np.array([0.5, 65504.0], np.float16)),
        mask=pa.array([False, True, False])), pa.list_(F32), id="large_list-float16"),
    pytest.param(pa.array([0, 255], pa.uint8()), pa.int16(), id="uint8"),
    pytest.param(pa.array([[0, 65535]], pa.list_(pa.uint16(), 2)),
                 pa.list_(pa.int32()), id="fixed-uint16"),
    pytest.param(pa.array([0, 2**32 - 1], pa.uint32()), pa.int64(), id="uint32"),
    pytest.param(pa.array([0, 2**63 - 1, None], pa.uint64()), pa.int64(), id="uint64"),
    pytest.param(pa.array(["a", "b", "a"]).dictionary_encode(), pa.string(), id="dictionary"),
    pytest.param(pa.array([{"v": [1.0, 2.0]}], pa.struct([("v", pa.list_(pa.float64(), 2))])),
                 pa.struct([("v", pa.list_(pa.float64()))]), id="struct-of-fixed"),
]


@pytest.mark.parametrize(("arr", "want"), ARRAYS)
def test_spark_arrow_type_is_what_pyspark_converts_and_keeps_the_values(arr, want):
    types = pytest.importorskip("pyspark.sql.pandas.types",
                                reason="pyspark is not installed (lodarrow[spark])")
    from_arrow_type = types.from_arrow_type

    got = spark_arrow_type(arr.type)
    assert got == want
    from_arrow_type(got)  # pyspark's own converter takes it
    batch = pa.record_batch([arr], names=["c"])
    out = to_spark_batch(batch)
    out.validate(full=True)
    assert out.schema.field("c").type == want
    assert out.column(0).to_pylist() == arr.to_pylist()


def test_types_spark_takes_are_left_as_they_are():
    # Spark's own list types (value fields named "element") and every scalar it knows
    types = [pa.list_(pa.field("element", pa.float64())), pa.list_(pa.list_(pa.int32())),
             pa.int8(), pa.int16(), pa.int32(), pa.int64(), F32, pa.float64(), pa.bool_(),
             pa.string(), pa.large_string(), pa.binary(), pa.date32(), pa.decimal128(10, 2),
             pa.timestamp("us", tz="UTC"), pa.struct([("a", pa.int64())]),
             pa.map_(pa.string(), pa.list_(pa.int64()))]
    for t in types:
        assert spark_arrow_type(t) is t or spark_arrow_type(t) == t, t
    batch = pa.record_batch([pa.array([[1.0]], types[0]), pa.array([1], pa.int64())],
                            names=["l", "i"])
    assert to_spark_batch(batch) is batch  # nothing to cast: the same batch, no copy
    mixed = pa.record_batch([batch.column(0), pa.array([[1, 2]], pa.list_(pa.int64(), 2))],
                            names=["l", "f"])
    out = to_spark_batch(mixed)
    # only the column that needs a cast is touched: the other keeps its buffers
    assert addresses(out.column(0)) == addresses(mixed.column(0))


def test_spark_arrow_schema_keeps_names_nullability_and_metadata():
    schema = pa.schema([pa.field("emb", pa.list_(pa.list_(F32, 4)), nullable=False,
                                 metadata={"k": "v"}),
                        pa.field("id", pa.int64())], metadata={"s": "t"})
    out = spark_arrow_schema(schema)
    assert out.names == ["emb", "id"] and out.metadata == schema.metadata
    assert out.field("emb").type == pa.list_(pa.list_(F32))
    assert not out.field("emb").nullable and out.field("emb").metadata == {b"k": b"v"}


def test_values_that_do_not_fit_spark_name_the_column():
    with pytest.raises(ValueError, match=r"spark_map: output column 'm' of type uint64 cannot "
                                         r"be carried by Spark as int64: .*not in range"):
        to_spark_batch(pa.record_batch([pa.array([2**64 - 1], pa.uint64())], names=["m"]))
    n = 2**31 + 5  # null values take no memory: offsets beyond int32 for free
    big = pa.LargeListArray.from_arrays(pa.array([0, n], pa.int64()), pa.nulls(n))
    with pytest.raises(ValueError, match=r"spark_map: output column 'big' of type "
                                         r"large_list<item: null> cannot be carried by Spark"):
        to_spark_batch(pa.record_batch([big], names=["big"]))


def test_col_lod_level_0_reads_spark_plain_fixed_columns():
    """``col(name, lod_level=0, feature_shape=(d,))`` on ``list<double>`` is the plain column
    ``fixed_size_list<double, d>``, null rows of the call's list columns included."""
    x = pa.array([[1.0, 2.0], None, [3.0], []])
    fixed = pa.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]], pa.list_(pa.float64(), 2))
    lists = fixed.cast(pa.list_(pa.float64()))
    arrow = la.apply(pa.table({"fv": fixed, "x": x}), la.sequence_expand_as, x=la.col("fv"),
                     y=la.col("x"), out="r")
    f = la.udf(la.sequence_expand_as, x=la.col("fv", lod_level=0, feature_shape=(2,)),
               y=la.col("x"), out="r")
    spark_like = f(pa.table({"fv": lists, "x": x}))
    assert spark_like.column("r") == arrow.column("r")
    assert f.output_schema(spark_like.schema.remove(2)).field("r").type == \
        pa.list_(pa.list_(pa.float64(), 2))
    with pytest.raises(ValueError, match=r"col\('fv', lod_level=0\) folds 1 list level"):
        la.udf(la.sequence_expand_as, x=la.col("fv", lod_level=0), y=la.col("x"),
               out="r").output_schema(spark_like.schema)
    # a null plain row (a null fixed-size row at the top) is a null row of the result
    nulls = f(pa.table({"fv": pa.array([[1.0, 2.0], None, [5.0, 6.0], [7.0, 8.0]]), "x": x}))
    assert nulls.column("r").is_null().to_pylist() == [False, True, False, False]
    assert nulls.column("r").filter(pa.array([True, False, True, True])) == \
        arrow.column("r").filter(pa.array([True, False, True, True]))
    with pytest.raises(la.LoDError):
        f(pa.table({"fv": pa.array([[1.0, 2.0], [3.0, 4.0], [5.0], [7.0, 8.0]]), "x": x}))


def test_spark_map_without_pyspark_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyspark.sql", None)
    f = la.udf(la.sequence_reverse, x=la.col("x"), out="r")
    with pytest.raises(ImportError, match=r"pip install -e '\.\[spark\]'"):
        la.spark_map(object(), f)


def test_spark_map_refuses_what_is_not_a_spark_dataframe():
    pytest.importorskip("pyspark.sql", reason="pyspark is not installed (lodarrow[spark])")
    f = la.udf(la.sequence_reverse, x=la.col("x"), out="r")
    with pytest.raises(TypeError, match=r"spark_map: df must be a pyspark.sql.DataFrame, got "
                                        r"Table"):
        la.spark_map(pa.table({"x": [[1.0]]}), f)


# ---------------------------------------------------------------------------- a local Spark
EMB = pa.list_(pa.list_(F32, 3))


def _table():
    """Spark-free source rows: embeddings (3 wide), lengths, a plain 2-wide column."""
    rng = np.random.default_rng(18)
    lens = [2, 0, 3, 1, 4]
    emb = pa.array([rng.normal(size=(k, 3)).round(3).astype(np.float32).tolist()
                    for k in lens], EMB)
    emb = pa.ListArray.from_arrays(emb.offsets, emb.values, mask=pa.array(
        [False, False, False, True, False]))
    return pa.table({
        "id": pa.array(np.arange(5, dtype=np.int64)),
        "name": pa.array([f"r{i}" for i in range(5)]),
        "emb": emb,
        "n": pa.array([0, 3, 1, 5, 2], pa.int64()),
        "tlen": pa.array([[1, 2], [], [0], None, [3]], pa.list_(pa.int64())),
        "fv": pa.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0], [9.0, 0.5]],
                       pa.list_(pa.float64(), 2)),
    })


def _spark_df(spark, table):
    """``table`` as Spark holds it (fixed-size lists become plain arrays)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    arrow = pa.table([c.cast(spark_arrow_type(c.type)) for c in table.columns],
                     names=table.column_names)
    return spark.createDataFrame(arrow, schema=from_arrow_schema(spark_arrow_schema(
        table.schema)))


def _small_types_udf(emb=None, fv=None):
    emb = emb or la.col("emb", lod_level=1, feature_shape=(3,))
    fv = fv or la.col("fv", lod_level=0, feature_shape=(2,))
    return la.pipeline(
        la.udf(la.sequence_pool, input=emb, pool_type="average", out="vec"),
        la.udf(la.sequence_reverse, x=emb, out="rev"),
        la.udf(la.sequence_expand_as, x=fv, y=emb, out="fv_rows"),
        la.udf(la.sequence_mask, x=la.col("n"), maxlen=4, dtype="float16", out="m16"),
        la.udf(la.sequence_mask, x=la.col("tlen"), maxlen=4, dtype="uint8", out="mu8"),
        la.udf(la.sequence_mask, x=la.col("n"), maxlen=4, dtype="uint16", out="mu16"),
        la.udf(la.sequence_mask, x=la.col("n"), maxlen=3, dtype="bool", out="mb"),
    )


@pytest.mark.engines
@_PANDAS3
def test_spark_schema_before_data_and_the_feature_shape_error(spark):
    table = _table()
    df = _spark_df(spark, table)
    assert df.schema["emb"].dataType.simpleString() == "array<array<float>>"
    f = _small_types_udf()
    out = la.spark_map(df, f)
    simple = {fld.name: fld.dataType.simpleString() for fld in out.schema}
    assert simple == {"id": "bigint", "name": "string", "emb": "array<array<float>>",
                      "n": "bigint", "tlen": "array<bigint>", "fv": "array<double>",
                      "vec": "array<float>", "rev": "array<array<float>>",
                      "fv_rows": "array<array<double>>", "m16": "array<float>",
                      "mu8": "array<array<smallint>>", "mu16": "array<int>",
                      "mb": "array<boolean>"}
    # no rows at all: the widths are feature_shape's
    empty = la.spark_map(df.limit(0), f).toArrow()
    assert empty.num_rows == 0 and empty.column_names == list(simple)
    # Spark's types carry no widths: without feature_shape the schema cannot be computed
    no_width = la.udf(la.sequence_pool, input=la.col("emb", lod_level=1), pool_type="sum",
                      out="s")
    with pytest.raises(ValueError, match=r"col\('emb', lod_level=1\) folds 1 list level\(s\) "
                                         r"of list<element: list<element: float>> .* give "
                                         r"col\(\.\.\., feature_shape=\(\.\.\.\)\)"):
        la.spark_map(df, no_width)
    with pytest.raises(TypeError, match=r"spark_map: f must be a la.udf or la.pipeline, got "
                                        r"function"):
        la.spark_map(df, lambda b: b)
    with pytest.raises(KeyError, match=r"no column 'nope'"):
        la.spark_map(df, la.udf(la.sequence_reverse, x=la.col("nope"), out="r"))


@pytest.mark.engines
@_PANDAS3
def test_spark_outputs_and_their_way_back_into_lodarrow(spark):
    """Every kind of output in Spark's types, equal to ``apply``; then read back by a second
    ``spark_map`` through ``col(name, lod_level=k, feature_shape=...)``, equal to the same
    pipeline on the Arrow table (one Spark job for both; the float16 mask comes back as
    float32, its values the same)."""
    table = _table()
    f = _small_types_udf()
    want = f(table)
    back = la.pipeline(  # reads the first map's outputs, as Spark hands them over
        la.udf(la.sequence_reverse, x=la.col("rev", lod_level=1, feature_shape=(3,)),
               out="rev_rev"),
        la.udf(la.sequence_expand_as, x=la.col("m16", lod_level=0, feature_shape=(4,)),
               y=la.col("emb", lod_level=1, feature_shape=(3,)), out="m_rows"),
        la.udf(la.sequence_pool, input=la.col("fv_rows", lod_level=1, feature_shape=(2,)),
               pool_type="max", out="fv_max"))
    want_back = la.pipeline(
        la.udf(la.sequence_reverse, x=la.col("rev"), out="rev_rev"),
        la.udf(la.sequence_expand_as, x=la.col("m16"), y=la.col("emb"), out="m_rows"),
        la.udf(la.sequence_pool, input=la.col("fv_rows"), pool_type="max", out="fv_max"))(want)
    got = la.spark_map(la.spark_map(_spark_df(spark, table), f), back).toArrow().sort_by("id")
    assert got.column_names == want_back.column_names
    for name in want_back.column_names:
        w = want_back.column(name)
        assert _same_but_names(got.schema.field(name).type, spark_arrow_type(w.type)), name
        assert got.column(name).to_pylist() == w.cast(spark_arrow_type(w.type)).to_pylist(), name
    assert got.column("rev_rev").to_pylist() == got.column("emb").to_pylist()


def _same_but_names(a, b):
    """Equal types but for the names of list value fields (Spark's "element", pyarrow's
    "item")."""
    if pa.types.is_list(a) and pa.types.is_list(b):
        return _same_but_names(a.value_type, b.value_type)
    return a == b


@pytest.mark.engines
@_PANDAS3
def test_a_width_that_differs_from_feature_shape_fails_the_spark_task(spark):
    from pyspark.errors import PythonException

    f = la.udf(la.sequence_pool, input=la.col("emb", lod_level=1, feature_shape=(4,)),
               pool_type="sum", out="s")
    out = la.spark_map(_spark_df(spark, _table()), f)  # the schema says 4 wide
    assert out.schema["s"].dataType.simpleString() == "array<float>"
    with pytest.raises(PythonException, match=r"LoDError: udf: column 'emb'"):
        out.toArrow()
