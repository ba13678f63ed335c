"""What lodarrow writes, every reader reads (issue 43, docs/tables.md#where-the-lengths-live).

A read-back matrix: every writer of lodarrow -- ``write_parquet`` (one file; several files
into one directory), ``map_parquet`` (flat; hive-partitioned; to the local S3 server), the
engine writers ``la.dask_write_parquet`` and ``la.ray_parquet_sink`` -- against every reader
a user points at the directory: polars ``scan_parquet(dir)`` and with a glob, DuckDB
``read_parquet('dir/**')`` and ``'dir/**/*.parquet'`` with ``hive_partitioning``,
``pyarrow.dataset``, ``pandas.read_parquet(dir)``, Dask, Spark, Ray Data and Hugging Face
``load_dataset("parquet", data_dir=...)``.  Each must see the input's row count and values;
a dataset directory holds the data files and nothing else (``_SUCCESS``, empty, where a job
on an object store writes one), while the lengths recorded in the footers stay valid.

The real libraries, no mocks.  Spark (the session's ``spark`` of conftest.py) and Ray start
slowly: their rows are marked ``engines``, as in test_engines.py.
"""

import os

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

import lodarrow as la
from lodarrow._tables._lengths_store import fingerprint
from lodarrow._tables._sources import resolve_source

pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.*"),
    # Dask's Parquet reader calls reset_index(inplace=True), which pandas 3.1 deprecates
    # (Pandas4Warning, matched by message: the class does not exist in pandas 2)
    pytest.mark.filterwarnings("ignore:The inplace keyword"),
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
]

ROWS = 240
#: The columns every reader must give back as written (hive keys and udf outputs aside).
COLUMNS = ["id", "ids", "docs", "name"]


def source_table():
    """Token ids with null rows and empty lists, documents of sentences, a string, a key."""
    rng = np.random.default_rng(43)
    lengths = rng.integers(0, 9, ROWS)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    ids = pa.ListArray.from_arrays(pa.array(offsets), pa.array(
        rng.integers(0, 1000, int(offsets[-1])), pa.int32()),
        mask=pa.array(np.arange(ROWS) % 11 == 3))
    docs = pa.array([[list(range(j)) for j in range(i % 4)] if i % 13 else None
                     for i in range(ROWS)], pa.list_(pa.list_(pa.int32())))
    return pa.table({"id": pa.array(np.arange(ROWS)), "ids": ids, "docs": docs,
                     "name": [f"row-{i}" for i in range(ROWS)],
                     "lang": ["en" if i % 3 else "fr" for i in range(ROWS)]})


def with_lengths(batch):
    """The udf every map_parquet row runs: one more column, the inputs kept."""
    return batch.append_column("n", pc.list_value_length(batch.column("ids")))


def expected_rows(table):
    return sorted(table.select(COLUMNS).to_pylist(), key=lambda r: r["id"])


# ---------------------------------------------------------------------------- the writers
@pytest.fixture(scope="module")
def table():
    return source_table()


@pytest.fixture(scope="module")
def sources(table, tmp_path_factory):
    """``(flat, hive)``: the table as pyarrow writes it, in two files and by ``lang``."""
    root = tmp_path_factory.mktemp("readback-src")
    flat, hive = root / "flat", root / "hive"
    flat.mkdir()
    data = table.drop_columns(["lang"])
    pq.write_table(data.slice(0, 100), flat / "part-0.parquet", row_group_size=40)
    pq.write_table(data.slice(100), flat / "part-1.parquet", row_group_size=40)
    for lang in ("en", "fr"):
        (hive / f"lang={lang}").mkdir(parents=True)
        rows = table.filter(pc.equal(table.column("lang"), lang)).drop_columns(["lang"])
        pq.write_table(rows, hive / f"lang={lang}" / "part-0.parquet", row_group_size=50)
    return flat, hive


def _mirror(fs, prefix, local):
    """Every object under ``prefix`` copied to the local directory ``local`` (what a reader
    of the bucket lists)."""
    for info in fs.get_file_info(pafs.FileSelector(prefix, recursive=True)):
        if info.type == pafs.FileType.File:
            target = os.path.join(local, os.path.relpath(info.path, prefix))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with fs.open_input_stream(info.path) as f, open(target, "wb") as out:
                out.write(f.read())


@pytest.fixture(scope="module")
def remote(sources, s3_endpoint, tmp_path_factory):
    """``map_parquet`` of the flat source to ``s3://<bucket>/out`` on the local S3 server:
    ``(filesystem, bucket, local mirror of out/)``."""
    import uuid

    root = tmp_path_factory.mktemp("readback-s3")
    fs = pafs.S3FileSystem(access_key="testing", secret_key="testing", region="us-east-1",
                           endpoint_override=s3_endpoint.split("://")[1], scheme="http",
                           allow_bucket_creation=True, allow_bucket_deletion=True)
    bucket = f"lodarrow-readback-{uuid.uuid4().hex[:8]}"
    fs.create_dir(bucket)
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1",
           "AWS_ENDPOINT_URL": s3_endpoint, "AWS_ENDPOINT_URL_S3": s3_endpoint,
           "AWS_EC2_METADATA_DISABLED": "true"}
    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        la.map_parquet(sources[0], f"s3://{bucket}/out", with_lengths, batch_rows=64)
    _mirror(fs, f"{bucket}/out", str(root / "out"))
    yield fs, bucket, root / "out", s3_endpoint
    fs.delete_dir(bucket)


@pytest.fixture(scope="module")
def written(table, sources, tmp_path_factory):
    """writer name -> the directory it wrote, for lodarrow's own writers on a local disk."""
    root = tmp_path_factory.mktemp("readback")
    flat, hive = sources
    data = table.drop_columns(["lang"])
    out = {"write_parquet_one": root / "one", "write_parquet_many": root / "many",
           "map_parquet_flat": root / "mapped", "map_parquet_hive": root / "mapped-hive"}
    out["write_parquet_one"].mkdir()
    la.write_parquet(data, root / "one" / "data.parquet", row_group_size=64)
    out["write_parquet_many"].mkdir()
    for k, start in enumerate((0, 80, 160)):
        la.write_parquet(data.slice(start, 80), root / "many" / f"part-{k}.parquet",
                         row_group_size=32)
    la.map_parquet(flat, root / "mapped", with_lengths, batch_rows=64)
    la.map_parquet(hive, root / "mapped-hive", with_lengths, batch_rows=64)
    return out


@pytest.fixture(scope="module")
def dask_written(table, tmp_path_factory):
    """``la.dask_write_parquet`` of the table, partitioned by ``lang``."""
    dd = pytest.importorskip("dask.dataframe", reason="dask is not installed (lodarrow[dask])")
    import pandas as pd

    dest = tmp_path_factory.mktemp("readback-dask") / "dask"
    frame = table.to_pandas(types_mapper=pd.ArrowDtype)
    la.dask_write_parquet(dd.from_pandas(frame, npartitions=3), dest, partition_cols=["lang"])
    return dest


@pytest.fixture(scope="module")
def ray_module():
    """Ray for this module: the session's where test_engines.py started it, else started
    here and shut down at the module's end."""
    ray = pytest.importorskip("ray", reason="ray is not installed (lodarrow[ray])")
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 configure_logging=False, namespace="lodarrow-tests")
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    if hasattr(ctx, "use_datasource_v2"):  # the classic reader starts in seconds (see
        ctx.use_datasource_v2 = False       # test_engines.py)
    yield ray
    if started:
        ray.shutdown()


@pytest.fixture(scope="module")
def ray_written(table, ray_module, tmp_path_factory):
    dest = tmp_path_factory.mktemp("readback-ray") / "ray"
    ray_module.data.from_arrow(table.drop_columns(["lang"])).repartition(3) \
        .write_datasink(la.ray_parquet_sink(dest))
    return dest


def dataset_of(writer, request):
    """The local directory ``writer`` wrote (an object store's mirrored)."""
    if writer == "map_parquet_s3":
        return request.getfixturevalue("remote")[2]
    if writer == "dask_write_parquet":
        return request.getfixturevalue("dask_written")
    if writer == "ray_parquet_sink":
        return request.getfixturevalue("ray_written")
    return request.getfixturevalue("written")[writer]


ENGINES = pytest.mark.engines
WRITERS = ["write_parquet_one", "write_parquet_many", "map_parquet_flat", "map_parquet_hive",
           "map_parquet_s3", "dask_write_parquet",
           pytest.param("ray_parquet_sink", marks=ENGINES)]
#: Writers that record the lengths in each file's footer (the engines' writers do not).
RECORDING = {"write_parquet_one", "write_parquet_many", "map_parquet_flat", "map_parquet_hive",
             "map_parquet_s3"}


# ---------------------------------------------------------------------------- the readers
def read_polars_dir(d, request):
    import polars as pl

    return pl.scan_parquet(str(d)).collect().to_arrow()


def read_polars_glob(d, request):
    import polars as pl

    return pl.scan_parquet(f"{d}/**/*.parquet").collect().to_arrow()


def _duckdb(query):
    import duckdb

    return pa.table(duckdb.sql(query).arrow())  # a reader (DuckDB 2) or a table (1.x)


def read_duckdb_all(d, request):
    return _duckdb(f"select * from read_parquet('{d}/**')")


def read_duckdb_glob_hive(d, request):
    return _duckdb(f"select * from read_parquet('{d}/**/*.parquet', hive_partitioning = true)")


def read_pyarrow_dataset(d, request):
    import pyarrow.dataset as pads

    return pads.dataset(d, format="parquet", partitioning="hive").to_table()


def read_pandas(d, request):
    import pandas as pd

    return pa.Table.from_pandas(pd.read_parquet(d), preserve_index=False)


def read_dask(d, request):
    dd = pytest.importorskip("dask.dataframe", reason="dask is not installed (lodarrow[dask])")

    return pa.Table.from_pandas(dd.read_parquet(str(d)).compute(), preserve_index=False)


def read_hugging_face(d, request):
    datasets = pytest.importorskip("datasets", reason="datasets is not installed (the test "
                                                      "extra)")

    cache = request.getfixturevalue("tmp_path") / "hf-cache"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_DATASETS_OFFLINE", "1")
        ds = datasets.load_dataset("parquet", data_dir=str(d), split="train",
                                   cache_dir=str(cache))
    return ds.data.table


def read_spark(d, request):
    return request.getfixturevalue("spark").read.parquet(str(d)).toArrow()


def read_ray(d, request):
    ray = request.getfixturevalue("ray_module")
    return pa.concat_tables(ray.get(ray.data.read_parquet(str(d)).to_arrow_refs()))


READERS = ["polars_dir", "polars_glob", "duckdb_all", "duckdb_glob_hive", "pyarrow_dataset",
           "pandas", "dask", "hugging_face", pytest.param("spark", marks=ENGINES),
           pytest.param("ray", marks=ENGINES)]

#: (writer, reader) pairs that fail, loudly, by design: a job on an object store ends with an
#: empty ``_SUCCESS`` (Hadoop's and Spark's marker), and these two read every file of the
#: directory, that one too (docs/tables.md#what-every-reader-sees).
SUCCESS_MARKER = {("map_parquet_s3", "duckdb_all"): "_SUCCESS' too small to be a Parquet",
                  ("map_parquet_s3", "hugging_face"): "Parquet file size is 0 bytes"}


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("writer", WRITERS)
def test_every_reader_sees_the_rows(writer, reader, table, request):
    d = dataset_of(writer, request)
    read = globals()[f"read_{reader}"]
    if (writer, reader) in SUCCESS_MARKER:
        with pytest.raises(Exception, match=SUCCESS_MARKER[writer, reader]):
            read(d, request)
        return
    got = read(d, request)
    assert got.num_rows == ROWS, f"{reader} counts {got.num_rows} rows of {writer}'s {ROWS}"
    assert expected_rows(got) == expected_rows(table), f"{reader} on {writer}'s output"


@pytest.mark.parametrize("writer", WRITERS)
def test_a_dataset_directory_holds_its_data_files_only(writer, request):
    d = dataset_of(writer, request)
    files = sorted(os.path.relpath(os.path.join(a, n), d)
                   for a, _, names in os.walk(d) for n in names)
    data = [f for f in files if f.endswith(".parquet")]
    assert data and not [f for f in data if os.path.basename(f).startswith((".", "_"))]
    rest = sorted(set(files) - set(data))
    if writer == "map_parquet_s3":  # the object store job's marker, empty
        assert rest == ["_SUCCESS"] and os.path.getsize(os.path.join(d, "_SUCCESS")) == 0
    else:
        assert rest == [], f"{writer} left {rest} beside its data files"
    for f in data:  # and the lengths are in the footers, valid
        assert (fingerprint(os.path.join(d, f))[0].recorded is not None) == \
            (writer in RECORDING), f


@pytest.mark.parametrize("writer", sorted(RECORDING))
def test_the_lengths_read_back_from_the_footers(writer, table, request, monkeypatch):
    """lodarrow itself: the lengths come from the footers (no column decoded) and equal
    the data's, null rows as empty sequences."""
    from lodarrow._training import _source

    d = dataset_of(writer, request)
    want = pc.list_value_length(table.column("ids")).fill_null(0).to_numpy()
    files = [p for p, _ in resolve_source(str(d), "test").files]
    order = np.concatenate([pq.read_table(p, columns=["id"]).column("id").to_numpy()
                            for p in files])  # the rows in lodarrow's reading order
    monkeypatch.setattr(_source.ParquetParts, "read_group",
                        lambda *a, **k: (_ for _ in ()).throw(AssertionError("decoded")))
    np.testing.assert_array_equal(la.sequence_lengths(d, "ids", cache_dir=False), want[order])


def test_remote_readers_see_the_rows(remote, table):
    """On the bucket itself: pyarrow.dataset, polars (its own object-store client) and
    lodarrow, with the lengths from the footers."""
    import polars as pl
    import pyarrow.dataset as pads

    fs, bucket, _, endpoint = remote
    got = pads.dataset(f"{bucket}/out", format="parquet", filesystem=fs).to_table()
    assert got.num_rows == ROWS and expected_rows(got) == expected_rows(table)
    options = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing",
               "aws_region": "us-east-1", "aws_endpoint_url": endpoint,
               "aws_allow_http": "true"}
    got = pl.scan_parquet(f"s3://{bucket}/out/", storage_options=options).collect()
    assert expected_rows(got.to_arrow()) == expected_rows(table)
    files = [i.path for i in fs.get_file_info(pafs.FileSelector(f"{bucket}/out"))
             if i.path.endswith(".parquet")]
    assert files and all(fingerprint(f, fs)[0].recorded is not None for f in files)
    lengths = la.sequence_lengths(f"{bucket}/out", "ids", filesystem=fs, cache_dir=False)
    np.testing.assert_array_equal(
        lengths, pc.list_value_length(table.column("ids")).fill_null(0).to_numpy())
