"""The same udf on every engine: map_parquet, Ray Data, Dask, Spark, and apply on the table.

Real engines, no mocks: one local Ray (``ray.init(num_cpus=2)``), one
``distributed.LocalCluster`` with two worker processes and one local Spark (``local[2]``, the
``spark`` fixture of conftest.py, skipped only where no Java is found), each started once per
test session (on first use) and shut down at its end.  The data is a multi-file Parquet dataset
(several row groups per file, a string id, null rows in list columns) and the udf a pipeline that
calls every operator in every row-aligned form (``tables_cases.CASES``).  Each engine cuts the
data differently (Ray blocks and batches, Dask partitions, Spark's Arrow batches,
``map_parquet`` batches); the rows
must be the same as ``apply`` on the whole table, row for row.

Select these tests with ``-m engines`` (or leave them out with ``-m "not engines"``).
"""

import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tables_cases import CASES, COVERED, MAXLEN, assert_rows_equal, make_table

import lodarrow as la

pytestmark = [
    pytest.mark.engines,
    # Ray Data's own modules use deprecated Ray settings internally
    pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.*"),
    # pyspark 4.3 warns that it is not yet tested with pandas 3 (mapInArrow uses no pandas)
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
]

N_FILES = 3
ROWS_PER_FILE = (150, 0, 220)  # an empty file too
ROW_GROUP = 40
#: List columns that get null rows (every 9th row of a file, at a different phase each).
NULLABLE = ("x", "emb", "tok", "doc", "tlen", "ids")


def every_operator_pipeline():
    """One udf per case of ``tables_cases.CASES``, each writing its own columns."""
    udfs = []
    for case_id, op, args, out in CASES:
        outs = (case_id,) if isinstance(out, str) else tuple(f"{case_id}_{k}"
                                                              for k in range(len(out)))
        udfs.append(la.udf(op, out=outs[0] if len(outs) == 1 else outs, **args))
    return la.pipeline(*udfs)


def with_nulls(table, phase):
    """``table`` with null rows in the ``NULLABLE`` list columns."""
    for name in NULLABLE:
        col = table.column(name).combine_chunks()
        mask = pa.array((np.arange(len(table)) + phase + NULLABLE.index(name)) % 9 == 0)
        if pa.types.is_list(col.type):
            col = pa.ListArray.from_arrays(col.offsets, col.values, type=col.type,
                                           mask=mask)
        table = table.set_column(table.schema.get_field_index(name), name, col)
    return table


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """``(directory, whole table)``: the files, and their rows concatenated in file order."""
    root = tmp_path_factory.mktemp("engines")
    src = root / "src"
    src.mkdir()
    rng = np.random.default_rng(20261123)
    schema = make_table(np.random.default_rng(0), 1).schema  # an empty table's types too
    parts = []
    for k, n in enumerate(ROWS_PER_FILE):
        t = with_nulls(make_table(rng, n).cast(schema), phase=k)
        # ids unique over the dataset, as a string column too
        t = t.set_column(0, "id", pa.array(np.arange(n, dtype=np.int64) + 1000 * k))
        t = t.add_column(1, "doc_id", pa.array([f"doc-{k}-{i:04d}" for i in range(n)],
                                               pa.string()))
        pq.write_table(t, src / f"part-{k}.parquet", row_group_size=ROW_GROUP)
        parts.append(t)
    return src, pa.concat_tables(parts)


@pytest.fixture(scope="module")
def expected(dataset):
    """``apply`` of the whole pipeline on the whole table, sorted by id."""
    _, table = dataset
    return sort_by_id(every_operator_pipeline()(table))


@pytest.fixture(scope="session")
def ray_session():
    ray = pytest.importorskip("ray", reason="ray is not installed (lodarrow[ray])")

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             configure_logging=False, namespace="lodarrow-tests")
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    # Ray >= 2.5x reads Parquet through a new datasource that starts a pool of footer-reading
    # actors for every read (20-40 s of process start-up per read on a loaded 2-core machine);
    # the classic reader gives the udf the same pyarrow batches, in a few seconds
    if hasattr(ctx, "use_datasource_v2"):
        ctx.use_datasource_v2 = False
    try:
        yield ray
    finally:
        ray.shutdown()


@pytest.fixture(scope="session")
def dask_client():
    pytest.importorskip("distributed", reason="distributed is not installed (lodarrow[dask])")
    from distributed import Client, LocalCluster

    # a free port on loopback: dashboard_address=None still serves HTTP on 8787 (distributed
    # 2026.8), and a second test session on the machine (or any process there) holding it
    # made the cluster's "port already in use" warning an error here
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address="127.0.0.1:0") as cluster, Client(cluster) as client:
        yield client


def sort_by_id(table):
    return table.sort_by("id")


def assert_same_rows(got, want, what, check_types=True):
    """Same columns in the same order, each equal row for row (floats to float32 precision)."""
    assert got.schema.names == want.schema.names, what
    for name in want.schema.names:
        if check_types:
            assert got.schema.field(name).type == want.schema.field(name).type, \
                f"{what}: column {name}"
        assert_rows_equal(got.column(name).to_pylist(), want.column(name).to_pylist(),
                          f"{what}: column {name}")


def test_the_pipeline_uses_every_operator(dataset):
    f = every_operator_pipeline()
    assert {u.op for u in f.udfs} == COVERED
    assert COVERED == set(la._ops.__all__)  # every operator (la.sequence_lengths is not one)
    assert any(u.op in ("sequence_pad", "sequence_mask") and u.args["maxlen"] == MAXLEN
               for u in f.udfs)
    _, table = dataset
    assert table.column("x").null_count > 0 and table.column("doc_id").type == pa.string()


@pytest.fixture(scope="module")
def mapped(dataset, tmp_path_factory):
    """``map_parquet``'s output (default batches), read back and sorted by id."""
    src, _ = dataset
    dest = tmp_path_factory.mktemp("mapped") / "out"
    f = every_operator_pipeline()
    summary = la.map_parquet(src, dest, f)
    assert summary.files == N_FILES
    for k, n in enumerate(ROWS_PER_FILE):  # one output file per input file, same schema
        out = pq.read_table(dest / f"part-{k}.parquet")
        assert out.num_rows == n and out.schema == f.output_schema(pq.read_schema(
            src / f"part-{k}.parquet"))
    return sort_by_id(pq.read_table(dest))


def test_map_parquet_equals_apply_on_the_whole_table(dataset, expected, mapped, tmp_path):
    assert_same_rows(mapped, expected, "map_parquet")
    src, table = dataset
    summary = la.map_parquet(src, tmp_path / "out", every_operator_pipeline(), batch_rows=13)
    assert summary.rows == len(table)
    assert_same_rows(sort_by_id(pq.read_table(tmp_path / "out")), expected,
                     "map_parquet, batch_rows=13")


def test_ray_map_batches_equals_apply_and_map_parquet(dataset, expected, mapped, ray_session,
                                                      tmp_path):
    """``ds.map_batches(f, batch_format="pyarrow")`` as it is, read-only zero-copy batches."""
    ray = ray_session
    src, _ = dataset
    f = every_operator_pipeline()
    ds = ray.data.read_parquet(str(src))
    # batches of 64 rows cut the files' 40-row row groups anywhere
    (ds.map_batches(f, batch_format="pyarrow", batch_size=64, zero_copy_batch=True)
     .write_parquet(str(tmp_path / "ray")))
    got = sort_by_id(pq.read_table(tmp_path / "ray"))
    assert_same_rows(got, expected, "ray vs apply")
    assert_same_rows(got, mapped, "ray vs map_parquet")


def test_dask_map_partitions_equals_apply_and_map_parquet(dataset, expected, mapped,
                                                          dask_client, tmp_path):
    """``ddf.map_partitions(f, meta=f.dask_meta(ddf))`` on a ``dtype_backend="pyarrow"`` read."""
    import dask.dataframe as dd

    src, _ = dataset
    f = every_operator_pipeline()
    ddf = dd.read_parquet(str(src), dtype_backend="pyarrow")
    assert ddf.npartitions >= 2
    out = ddf.map_partitions(f, meta=f.dask_meta(ddf))
    assert list(out._meta.columns) == expected.schema.names
    # to_parquet writes the schema of the meta: a partition that differed would fail here
    out.to_parquet(str(tmp_path / "dask"), write_index=False)
    got = sort_by_id(pq.read_table(tmp_path / "dask"))
    # pandas' Arrow round trip may turn the strings into large_string: compare their values
    for what, want in (("dask vs apply", expected), ("dask vs map_parquet", mapped)):
        assert_same_rows(got, want, what, check_types=False)
        for name in want.schema.names:
            if name not in ("doc_id", "title"):
                assert got.schema.field(name).type == want.schema.field(name).type, name


def with_widths(f, schema):
    """``f`` as a Spark user writes it: every column whose type has fixed-size lists read with
    ``col(name, lod_level=k, feature_shape=(d, ...))``, since Spark's types lose the widths."""

    def ref(c):
        if isinstance(c, (list, tuple)):
            return type(c)(ref(x) for x in c)
        if not isinstance(c, type(la.col("x"))):
            return c
        t, levels, widths = schema.field(c.name).type, 0, []
        while pa.types.is_list(t) or pa.types.is_fixed_size_list(t):
            if pa.types.is_fixed_size_list(t):
                widths.append(t.list_size)
            else:
                levels += 1
            t = t.value_type
        return la.col(c.name, lod_level=levels, feature_shape=tuple(widths)) if widths else c

    return la.pipeline(*(la.udf(u.op, out=u.out if len(u.out) > 1 else u.out[0],
                                **{k: ref(v) for k, v in u.args.items()}) for u in f.udfs))


def test_spark_map_equals_apply_and_map_parquet(dataset, expected, mapped, spark):
    """``la.spark_map(df, f)`` over ``spark.read.parquet``: the same rows, in Spark's types."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from lodarrow._tables._spark import spark_arrow_schema

    src, table = dataset
    f = with_widths(every_operator_pipeline(), table.schema)
    assert any(r.lod_level == 0 for u in f.udfs for r in u.args.values()
               if isinstance(r, type(la.col("x"))))
    # stating the widths changes nothing where the types carry them
    assert_same_rows(sort_by_id(f(table)), expected, "explicit widths on Arrow types")
    df = spark.read.parquet(str(src))
    assert df.schema["emb"].dataType.simpleString() == "array<array<float>>"
    assert df.schema["fv"].dataType.simpleString() == "array<double>"
    out = la.spark_map(df, f)
    # the schema, before any data: every fixed-size feature dimension an array
    assert out.schema == from_arrow_schema(spark_arrow_schema(expected.schema))
    got = sort_by_id(out.toArrow())
    assert got.num_rows == len(table)
    for what, want in (("spark vs apply", expected), ("spark vs map_parquet", mapped)):
        assert_same_rows(got, want, what, check_types=False)


def _no_staging_left(parent):
    return not [n for n in os.listdir(parent) if ".lodarrow-tmp-" in n]


def _hive_source(dataset, root):
    """The dataset's rows under ``lang=en`` / ``lang=fr`` directories (a Hive dataset)."""
    _, table = dataset
    src = root / "hive"
    for lang, phase in (("en", 0), ("fr", 1)):
        (src / f"lang={lang}").mkdir(parents=True)
        rows = pa.array(np.arange(len(table)) % 2 == phase)
        pq.write_table(table.filter(rows), src / f"lang={lang}" / "part-0.parquet",
                       row_group_size=ROW_GROUP)
    return src


def _read_hive(dest):
    import pyarrow.dataset as pads

    return sort_by_id(pads.dataset(dest, format="parquet", partitioning="hive").to_table())


def test_ray_parquet_sink_equals_apply_and_map_parquet(dataset, expected, mapped, ray_session,
                                                       tmp_path):
    """``write_datasink(la.ray_parquet_sink(dest))``: lodarrow's writer and staging."""
    ray = ray_session
    src, table = dataset
    sink = la.ray_parquet_sink(tmp_path / "ray")
    (ray.data.read_parquet(str(src))
     .map_batches(every_operator_pipeline(), batch_format="pyarrow", batch_size=64,
                  zero_copy_batch=True)
     .write_datasink(sink))
    got = sort_by_id(pq.read_table(tmp_path / "ray"))
    assert_same_rows(got, expected, "ray sink vs apply")
    assert_same_rows(got, mapped, "ray sink vs map_parquet")
    assert sink.summary.rows == len(table) and sink.summary.dest == str(tmp_path / "ray")
    assert sorted(os.listdir(tmp_path)) == ["ray"] and _no_staging_left(tmp_path)


def test_ray_parquet_sink_keeps_hive_partitions(dataset, ray_session, tmp_path):
    ray = ray_session
    src = _hive_source(dataset, tmp_path)
    f = every_operator_pipeline()
    la.map_parquet(src, tmp_path / "mapped", f)
    (ray.data.read_parquet(str(src))  # the key comes back as a column "lang"
     .map_batches(f, batch_format="pyarrow", batch_size=64)
     .write_datasink(la.ray_parquet_sink(tmp_path / "ray", partition_cols=["lang"])))
    assert sorted(os.listdir(tmp_path / "ray")) == ["lang=en", "lang=fr"]
    assert_same_rows(_read_hive(tmp_path / "ray"), _read_hive(tmp_path / "mapped"),
                     "ray sink, hive partitions vs map_parquet")


def test_ray_parquet_sink_failure_leaves_nothing(dataset, ray_session, tmp_path):
    ray = ray_session
    src, _ = dataset
    f = every_operator_pipeline()

    def fails_late(batch):
        import pyarrow.compute as pc

        if pc.max(batch["id"]).as_py() >= 2000:
            raise ValueError("udf failed on purpose")
        return f(batch)

    with pytest.raises(Exception, match="udf failed on purpose"):
        (ray.data.read_parquet(str(src))
         .map_batches(fails_late, batch_format="pyarrow", batch_size=64)
         .write_datasink(la.ray_parquet_sink(tmp_path / "ray")))
    assert os.listdir(tmp_path) == [] and _no_staging_left(tmp_path)


def _probe():
    """A function telling what a lodarrow kernel runs on where it is called: ``(threads for
    large work, usable CPUs, OMP_NUM_THREADS)``; made here, so that Ray and Dask ship it by
    value (the workers cannot import this test module)."""

    def kernel_threads():
        import os

        from lodarrow._threads import threads_for, usable_cpus

        return threads_for(1 << 24), usable_cpus(), os.environ.get("OMP_NUM_THREADS")

    return kernel_threads


def test_kernel_threads_inside_ray_tasks(ray_session):
    """Ray sets OMP_NUM_THREADS in a worker (to the CPUs of the first task it runs, 1 by
    default): a kernel in a task, or in a map_batches udf, runs on that many threads at most,
    so two tasks on two cores do not oversubscribe them.

    A worker keeps the value it started with: a ``num_cpus=2`` task may run in a worker an
    earlier test's one-CPU task started (``"1"``), or a fresh one (``"2"``); whichever, the
    kernel stays within it.
    """
    ray = ray_session
    kernel_threads = _probe()
    probe = ray.remote(kernel_threads)
    cpus = len(os.sched_getaffinity(0))

    def within(n, usable, omp):
        return omp in ("1", "2") and usable == min(int(omp), cpus) and 1 <= n <= usable

    assert ray.get(probe.remote()) == (1, 1, "1")
    assert within(*ray.get(probe.options(num_cpus=2).remote()))

    def in_udf(batch):
        return pa.table({"within": [within(*kernel_threads())] * batch.num_rows})

    got = ray.data.range(8).map_batches(in_udf, batch_format="pyarrow").take_all()
    assert all(r["within"] for r in got)


def test_dask_write_parquet_equals_apply_and_map_parquet(dataset, expected, mapped,
                                                         dask_client, tmp_path):
    """``la.dask_write_parquet(ddf.map_partitions(f, ...), dest)`` on a LocalCluster."""
    import dask.dataframe as dd

    src, table = dataset
    f = every_operator_pipeline()
    ddf = dd.read_parquet(str(src), dtype_backend="pyarrow")
    summary = la.dask_write_parquet(ddf.map_partitions(f, meta=f.dask_meta(ddf)),
                                    tmp_path / "dask")
    got = sort_by_id(pq.read_table(tmp_path / "dask"))
    for what, want in (("dask writer vs apply", expected), ("dask writer vs map_parquet",
                                                            mapped)):
        assert_same_rows(got, want, what, check_types=False)
    assert summary.rows == len(table) and _no_staging_left(tmp_path)


def test_dask_write_parquet_keeps_hive_partitions(dataset, dask_client, tmp_path):
    import dask.dataframe as dd

    src = _hive_source(dataset, tmp_path)
    f = every_operator_pipeline()
    la.map_parquet(src, tmp_path / "mapped", f)
    ddf = dd.read_parquet(str(src), dtype_backend="pyarrow")  # "lang": a categorical
    la.dask_write_parquet(ddf.map_partitions(f, meta=f.dask_meta(ddf)), tmp_path / "dask",
                          partition_cols=["lang"])
    assert sorted(os.listdir(tmp_path / "dask")) == ["lang=en", "lang=fr"]
    assert_same_rows(_read_hive(tmp_path / "dask"), _read_hive(tmp_path / "mapped"),
                     "dask writer, hive partitions vs map_parquet", check_types=False)


def test_kernel_threads_inside_dask_workers(dask_client):
    """Dask's nanny starts each worker process with OMP_NUM_THREADS=1: a kernel in a task
    runs on one thread (the LocalCluster has one thread per worker)."""
    kernel_threads = _probe()
    assert set(dask_client.run(kernel_threads).values()) == {(1, 1, "1")}
    assert dask_client.submit(kernel_threads, pure=False).result() == (1, 1, "1")


def test_tokenize_udf_on_every_engine(ray_session, dask_client, spark, tmp_path):
    """``la.tokenize_udf`` on Ray Data, Dask and Spark gives ``la.tokenize``'s rows (Spark
    carries uint16 as int), a document split into several rows by ``max_length`` too."""
    import dask.dataframe as dd
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    rng = np.random.default_rng(3)
    words = ["alpha", "beta", "gamma", "délta", "日本", "😀"]
    src = tmp_path / "src"
    src.mkdir()
    texts = []
    for k in range(2):
        part = [" ".join(rng.choice(words, int(n))) for n in rng.integers(0, 30, 60)]
        ids = np.arange(len(texts), len(texts) + len(part))
        texts += part
        pq.write_table(pa.table({"id": ids, "text": part}), src / f"p{k}.parquet",
                       row_group_size=25)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False))
    options = dict(eos=0, max_length=12)
    la.tokenize(src, tmp_path / "local", tok, progress=False, **options)
    want = pq.read_table(tmp_path / "local")
    want = want.take(np.argsort(want["id"].to_numpy(), kind="stable"))
    assert want.num_rows > len(texts)  # some documents were split
    f = la.tokenize_udf(tok, **options)

    def same(got, what):
        got = got.take(np.argsort(got["id"].to_numpy(), kind="stable"))
        assert got["id"].to_pylist() == want["id"].to_pylist(), what
        assert got["tokens"].to_pylist() == want["tokens"].to_pylist(), what

    ds = ray_session.data.read_parquet(str(src))
    ds.map_batches(f, batch_format="pyarrow", batch_size=16).write_parquet(str(tmp_path / "ray"))
    same(pq.read_table(tmp_path / "ray"), "ray")
    ddf = dd.read_parquet(str(src), dtype_backend="pyarrow")
    out = ddf.map_partitions(f, meta=f.dask_meta(ddf))
    assert str(out._meta.dtypes["tokens"]) == "list<item: uint16>[pyarrow]"
    same(pa.Table.from_pandas(out.compute(), preserve_index=False), "dask")
    df = la.spark_map(spark.read.parquet(str(src)), f)
    assert df.schema["tokens"].dataType.simpleString() == "array<int>"
    same(df.toArrow(), "spark")
