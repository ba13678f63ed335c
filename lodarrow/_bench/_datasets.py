"""The dataset benchmark: ``map_parquet`` against pyarrow alone, Ray Data and Dask.

Run by ``python -m lodarrow bench --datasets`` (``docs/performance.md`` holds the last figures).

The dataset (generated once, fixed seed, reused when its directory already holds it): files of
documents with a ``doc_id`` and a ``title`` string, ``tokens: list<list<int32>>`` (document ->
sentence -> token ids) and ``emb: list<fixed_size_list<float32, 16>>`` (one vector per
sentence), with 0.5% null rows in ``tokens`` and ``emb``, 32768 rows per row group.

Every timed run reads the whole dataset and writes a new one, in its own subprocess (so peak
RSS is that run's: ``ru_maxrss`` of the child), one after the other:

* ``pyarrow copy``: ``ParquetFile.iter_batches`` -> ``ParquetWriter.write_batch``, file by
  file, the loop ``map_parquet`` runs, without a udf: what reading and writing costs;
* ``map_parquet identity``: ``map_parquet`` with ``lambda b: b``: its own overhead;
* ``hand loop + udf`` and ``map_parquet + udf``: the benchmark pipeline in the plain loop and
  through ``map_parquet``;
* ``ray`` / ``dask``: the same pipeline on a local Ray (2 CPUs; Ray's default Parquet
  reader; its blocks mapped whole, so that Ray fuses read, udf and write into one task) and
  on a ``distributed.LocalCluster`` of 2 worker processes (one partition per file), engine
  start-up (the engine's start, one task per worker importing lodarrow and, for Ray, the
  same job on 2 x 1024 rows: a worker's first Data task imports Ray Data's executor) timed
  separately, written by the engine's own ``write_parquet`` / ``to_parquet``; ``ray +
  lodarrow sink`` / ``dask + lodarrow writer``: the same, written by
  ``la.ray_parquet_sink`` / ``la.dask_write_parquet`` (lodarrow's writer and layout);
* ``spark copy`` / ``spark identity`` / ``spark``: a local Spark (``local[2]``, Arrow batches
  of ``map_parquet``'s size) reading and writing the dataset in the JVM alone, through an
  identity ``mapInArrow`` (what Spark's JVM-Python round trip costs), and through
  ``la.spark_map`` with the pipeline (``emb`` read with ``feature_shape=(16,)``): lodarrow's
  share is the difference between the last two.  Start-up timed separately.
"""

import json
import os
import resource
import subprocess
import sys
import time

import numpy as np

from lodarrow._bench import _docs
from lodarrow._tables._dataset import _READ_BUFFER, _auto_batch_rows

__all__ = ["generate", "dataset_udf", "RUNS", "run_one", "measure"]

SEED = 20261123
ROWS_PER_GROUP = 32768
#: About this many bytes on disk per document (measured on the generator's output).
_BYTES_PER_ROW = 820
_ROWS_PER_FILE = 131072
_D = 16
_WORDS = np.array("the of and to in is was for on that with as by at from his an were are "
                  "which this be or has had not but first one their its new after who".split())


def generate(root, size_gb, seed=SEED, progress=None):
    """Write the dataset under ``root`` (about ``size_gb`` GB on disk); return its files.

    Reuses what is there when ``root/_lodarrow_bench.json`` says it was generated with the
    same size and seed.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    stamp = os.path.join(root, "_lodarrow_bench.json")
    want = {"size_gb": size_gb, "seed": seed, "version": 1}
    if os.path.exists(stamp):
        with open(stamp) as f:
            if json.load(f) == want:
                return _files(root)
    os.makedirs(root, exist_ok=True)
    for name in os.listdir(root):
        if name.startswith("part-") or name == "_lodarrow_bench.json":
            os.remove(os.path.join(root, name))
    n_rows = int(size_gb * 1e9 / _BYTES_PER_ROW)
    n_files = max(1, -(-n_rows // _ROWS_PER_FILE))
    for k in range(n_files):
        rows = min(_ROWS_PER_FILE, n_rows - k * _ROWS_PER_FILE)
        table = make_table(rows, np.random.default_rng([seed, k]), start=k * _ROWS_PER_FILE)
        pq.write_table(table, os.path.join(root, f"part-{k:05d}.parquet"),
                       row_group_size=ROWS_PER_GROUP)
        if progress:
            progress(k + 1, n_files)
    with open(stamp, "w") as f:
        json.dump(want, f)
    del pa
    return _files(root)


def _files(root):
    return sorted(os.path.join(root, n) for n in os.listdir(root) if n.startswith("part-"))


def make_table(rows, rng, start=0):
    """One file's documents (see the module docstring)."""
    import pyarrow as pa

    sentences = rng.geometric(1 / 8, rows).astype(np.int64)  # mean 8 sentences per document
    n_sent = int(sentences.sum())
    tokens_per = rng.geometric(1 / 20, n_sent).astype(np.int64)  # mean 20 tokens
    n_tok = int(tokens_per.sum())
    doc_off = np.zeros(rows + 1, np.int32)
    np.cumsum(sentences, out=doc_off[1:])
    sent_off = np.zeros(n_sent + 1, np.int32)
    np.cumsum(tokens_per, out=sent_off[1:])
    token_ids = rng.zipf(1.3, n_tok).clip(max=50000).astype(np.int32)  # word-like frequencies
    nulls = rng.random(rows) < 0.005
    mask = pa.array(nulls)
    tokens = pa.ListArray.from_arrays(
        pa.array(doc_off), pa.ListArray.from_arrays(pa.array(sent_off), pa.array(token_ids)),
        mask=mask)
    vectors = rng.standard_normal((n_sent, _D), dtype=np.float32)
    emb = pa.ListArray.from_arrays(
        pa.array(doc_off), pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), _D),
        mask=mask)
    ids = pa.array([f"doc-{start + i:09d}" for i in range(rows)])
    words = _WORDS[rng.integers(0, len(_WORDS), (rows, 4))]
    titles = pa.array([" ".join(w) for w in words.tolist()])
    return pa.table({"doc_id": ids, "title": titles, "tokens": tokens, "emb": emb})


def dataset_udf():
    """The benchmark pipeline: document vectors, token counts per sentence, padded ids."""
    import lodarrow as la

    return la.pipeline(
        la.udf(la.sequence_pool, input=la.col("emb"), pool_type="average", out="doc_vec"),
        la.udf(la.sequence_pool, input=la.col("tokens"), pool_type="max", out="max_token"),
        la.udf(la.sequence_last_step, input=la.col("emb"), out="last_emb"),
    )


def _pyarrow_copy(src_files, dest, batch_rows, f=None):
    """Read every file in batches with pyarrow and write each batch (through ``f`` if given)
    to a file of the same name under ``dest``."""
    import pyarrow.parquet as pq

    os.makedirs(dest)
    for path in src_files:
        with pq.ParquetFile(path, pre_buffer=False, buffer_size=_READ_BUFFER) as pf:
            writer = None
            rows = batch_rows or _auto_batch_rows(pf.metadata)
            for batch in pf.iter_batches(batch_size=rows, use_threads=True):
                out = batch if f is None else f(batch)
                if writer is None:
                    writer = pq.ParquetWriter(os.path.join(dest, os.path.basename(path)),
                                              out.schema)
                writer.write_batch(out)
            writer.close()


def _hand_loop(src_files, dest, batch_rows):
    _pyarrow_copy(src_files, dest, batch_rows, dataset_udf())


def _map_identity(src_files, dest, batch_rows):
    import lodarrow as la

    la.map_parquet(os.path.dirname(src_files[0]), dest, _identity, batch_rows=batch_rows,
                   progress=False)


def _map_identity_pyarrow(src_files, dest, batch_rows):
    import lodarrow as la

    la.map_parquet(os.path.dirname(src_files[0]), dest, _identity, batch_rows=batch_rows,
                   progress=False, engine="pyarrow")


def _identity(batch):
    return batch


def _map_udf(src_files, dest, batch_rows, threads=1):
    import lodarrow as la

    la.map_parquet(os.path.dirname(src_files[0]), dest, dataset_udf(), batch_rows=batch_rows,
                   progress=False, threads=threads)


def _map_udf_2(src_files, dest, batch_rows):
    _map_udf(src_files, dest, batch_rows, threads=2)


def _map_udf_pyarrow(src_files, dest, batch_rows):
    import lodarrow as la

    la.map_parquet(os.path.dirname(src_files[0]), dest, dataset_udf(), batch_rows=batch_rows,
                   progress=False, engine="pyarrow")


def _warm_worker():
    """What an engine's worker imports for the udf and the writers (its start-up, timed apart
    as the engine's own start is: a long-running cluster has paid it before the job)."""
    import time as _time

    import polars  # noqa: F401
    import pyarrow.dataset  # noqa: F401
    import pyarrow.parquet  # noqa: F401

    import lodarrow  # noqa: F401

    _time.sleep(0.3)  # held a moment, so that each CPU's task starts its own worker
    return os.getpid()


def _ray(src_files, dest, batch_rows, lodarrow_sink=False):
    import ray

    t0 = time.perf_counter()
    try:
        ray_start(src_files[0], lodarrow_sink)
        started = time.perf_counter() - t0
        t1 = time.perf_counter()
        ray_job(os.path.dirname(src_files[0]), dest, lodarrow_sink)
        return {"startup_s": started, "run_s": time.perf_counter() - t1}
    finally:
        ray.shutdown()


def ray_start(src_file, lodarrow_sink):
    """A local Ray of 2 CPUs ready for :func:`ray_job`, as a cluster that has run a job is:
    its workers started (Ray starts them on demand: one task per CPU) and the same job run
    once on 2 x 1024 rows of ``src_file`` (a worker imports Ray Data's executor on its first
    Data task, about 2.5 CPU s each here)."""
    import tempfile

    import pyarrow.parquet as pq
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             configure_logging=False)
    ray.get([ray.remote(num_cpus=1)(_warm_worker).remote() for _ in range(2)])
    ray.data.DataContext.get_current().enable_progress_bars = False
    with tempfile.TemporaryDirectory(prefix="lodarrow-bench-ray-") as tmp:
        rows = pq.ParquetFile(src_file).read_row_group(0).slice(0, 1024)
        os.mkdir(os.path.join(tmp, "src"))
        for k in range(2):  # one read task per worker
            pq.write_table(rows, os.path.join(tmp, "src", f"part-{k}.parquet"))
        ray_job(os.path.join(tmp, "src"), os.path.join(tmp, "out"), lodarrow_sink)


def ray_job(src_dir, dest, lodarrow_sink):
    """The benchmark udf over the Parquet files of ``src_dir`` on Ray Data, into ``dest``."""
    import ray

    import lodarrow as la

    # the directory, not the list: Ray's resolver of file lists imports fsspec's HTTP
    # filesystem, which fails without aiohttp.  No batch_size (docs/scale-out.md): Ray then
    # fuses read, udf and write into one task per read unit; a batch_size keeps the read
    # apart and sends every block through the object store
    mapped = ray.data.read_parquet(src_dir).map_batches(
        dataset_udf(), batch_format="pyarrow", zero_copy_batch=True)
    if lodarrow_sink:
        mapped.write_datasink(la.ray_parquet_sink(dest))
    else:
        mapped.write_parquet(dest)


def _ray_sink(src_files, dest, batch_rows):
    return _ray(src_files, dest, batch_rows, lodarrow_sink=True)


def _dask(src_files, dest, batch_rows, lodarrow_writer=False):
    import dask.dataframe as dd
    from distributed import Client, LocalCluster

    import lodarrow as la

    t0 = time.perf_counter()
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address="127.0.0.1:0") as cluster, Client(cluster) as client:
        client.run(_warm_worker)  # the workers' imports, as for Ray
        started = time.perf_counter() - t0
        t1 = time.perf_counter()
        f = dataset_udf()
        ddf = dd.read_parquet(os.path.dirname(src_files[0]), dtype_backend="pyarrow")
        mapped = ddf.map_partitions(f, meta=f.dask_meta(ddf))
        if lodarrow_writer:
            la.dask_write_parquet(mapped, dest)
        else:
            mapped.to_parquet(dest, write_index=False)
        return {"startup_s": started, "run_s": time.perf_counter() - t1}


def _dask_writer(src_files, dest, batch_rows):
    return _dask(src_files, dest, batch_rows, lodarrow_writer=True)


def _spark_session(batch_rows):
    from pyspark.sql import SparkSession

    return (SparkSession.builder.master("local[2]").appName("lodarrow-bench")
            .config("spark.driver.memory", "3g")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.sql.execution.arrow.maxRecordsPerBatch", str(batch_rows))
            .config("spark.pyspark.python", sys.executable)
            .getOrCreate())


def _identity_batches(batches):
    yield from batches


def _spark_run(src_files, dest, batch_rows, how):
    import pyarrow.parquet as pq

    if batch_rows is None:  # map_parquet's batches, not Spark's default 10000 rows
        with pq.ParquetFile(src_files[0]) as pf:
            batch_rows = _auto_batch_rows(pf.metadata)
    t0 = time.perf_counter()
    spark = _spark_session(batch_rows)
    spark.sparkContext.setLogLevel("ERROR")
    started = time.perf_counter() - t0
    try:
        t1 = time.perf_counter()
        df = spark.read.parquet(os.path.dirname(src_files[0]))
        if how == "identity":
            df = df.mapInArrow(_identity_batches, df.schema)
        elif how == "udf":
            import lodarrow as la

            df = la.spark_map(df, spark_udf())
        df.write.parquet(dest)
        return {"startup_s": started, "run_s": time.perf_counter() - t1}
    finally:
        spark.stop()


def spark_udf():
    """:func:`dataset_udf` as a Spark user writes it: Spark reads ``emb``'s 16-wide
    fixed-size lists as plain arrays, so the udf states the width."""
    import lodarrow as la

    emb = la.col("emb", lod_level=1, feature_shape=(_D,))
    return la.pipeline(
        la.udf(la.sequence_pool, input=emb, pool_type="average", out="doc_vec"),
        la.udf(la.sequence_pool, input=la.col("tokens"), pool_type="max", out="max_token"),
        la.udf(la.sequence_last_step, input=emb, out="last_emb"),
    )


def _spark_copy(src_files, dest, batch_rows):
    return _spark_run(src_files, dest, batch_rows, "copy")


def _spark_identity(src_files, dest, batch_rows):
    return _spark_run(src_files, dest, batch_rows, "identity")


def _spark(src_files, dest, batch_rows):
    return _spark_run(src_files, dest, batch_rows, "udf")


def _spark_udf_alone(src_files, dest, batch_rows):
    """What ``spark_map`` itself does in Spark's workers, timed alone: the udf and the casts
    on each batch, the batches read with pyarrow and given Spark's types first (untimed)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from lodarrow._tables._spark import _MapBatches, spark_arrow_type

    mapper = _MapBatches(spark_udf())
    spent = 0.0
    for path in src_files:
        with pq.ParquetFile(path, pre_buffer=False, buffer_size=_READ_BUFFER) as pf:
            rows = batch_rows or _auto_batch_rows(pf.metadata)
            for batch in pf.iter_batches(batch_size=rows, use_threads=True):
                batch = pa.record_batch([c.cast(spark_arrow_type(c.type)) for c in batch.columns],
                                        names=batch.schema.names)
                t0 = time.perf_counter()
                for _ in mapper(iter((batch,))):
                    pass
                spent += time.perf_counter() - t0
    os.makedirs(dest)
    return {"startup_s": 0.0, "run_s": spent}


#: name -> (function, what it is)
RUNS = {
    "pyarrow copy": (_pyarrow_copy, "iter_batches -> ParquetWriter.write_batch, no udf"),
    "map_parquet identity": (_map_identity, "map_parquet(src, dest, lambda b: b)"),
    "map_parquet identity, pyarrow writer": (
        _map_identity_pyarrow, "the same with engine='pyarrow': one thread encodes"),
    "hand loop + udf": (_hand_loop, "the pyarrow copy loop calling the udf"),
    "map_parquet + udf": (_map_udf, "map_parquet(src, dest, udf)"),
    "map_parquet + udf, threads=2": (_map_udf_2, "two files at a time"),
    "map_parquet + udf, pyarrow writer": (
        _map_udf_pyarrow, "engine='pyarrow': the writer Ray and Dask use"),
    "ray": (_ray, "read_parquet().map_batches(udf, batch_format='pyarrow').write_parquet()"),
    "dask": (_dask, "read_parquet(dtype_backend='pyarrow').map_partitions(udf, "
                    "meta=udf.dask_meta(ddf)).to_parquet()"),
    "ray + lodarrow sink": (_ray_sink, "the same, .write_datasink(la.ray_parquet_sink(dest))"),
    "dask + lodarrow writer": (_dask_writer, "the same, la.dask_write_parquet(mapped, dest)"),
    "spark copy": (_spark_copy, "spark.read.parquet().write.parquet(), no Python"),
    "spark identity": (_spark_identity, "df.mapInArrow(identity, df.schema): Spark's JVM-Python "
                                        "round trip alone"),
    "spark": (_spark, "la.spark_map(df, udf).write.parquet()"),
    "spark_map work alone": (_spark_udf_alone, "spark_map's per-batch work (udf + casts to "
                                               "Spark's types) on Spark-typed batches, no "
                                               "Spark: lodarrow's share"),
}
#: The runs that start an engine (start-up timed apart, no peak RSS: the work is elsewhere).
ENGINE_RUNS = ("ray", "dask", "ray + lodarrow sink", "dask + lodarrow writer", "spark copy",
               "spark identity", "spark", "spark_map work alone")
#: What each engine runs (at the large size with the default runs).
ENGINE_OF = {"ray": ("ray", "ray + lodarrow sink"), "dask": ("dask", "dask + lodarrow writer"),
             "spark": ("spark copy", "spark identity", "spark", "spark_map work alone")}


def run_one(name, src_dir, dest, batch_rows):
    """Run one benchmark in this process; return its figures (called in a subprocess)."""
    fn = RUNS[name][0]
    files = _files(src_dir)
    t0 = time.perf_counter()
    extra = fn(files, dest, batch_rows) or {}
    wall = time.perf_counter() - t0
    out_bytes = sum(os.path.getsize(os.path.join(d, n))
                    for d, _, names in os.walk(dest) for n in names)
    rows = None
    try:
        import pyarrow.dataset as pads

        rows = pads.dataset(dest, format="parquet").count_rows()
    except Exception:  # an engine's extra files: the row count is only informative
        pass
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {"name": name, "wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime,
            **_peak_rss(), "bytes_out": out_bytes, "rows_out": rows, **extra}


def _peak_rss():
    """This process's own peak resident set: ``VmHWM`` (Linux: the high-water mark of this
    program's memory, begun at its ``exec``), as ``{"peak_rss": bytes, "peak_rss_kind":
    "VmHWM"}``; ``{}`` where there is none.  Not ``ru_maxrss``: on Linux a child's starts
    from its parent's peak (kept across ``fork`` and ``exec``), so it measured the benchmark's
    own process, which generated the dataset."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return {"peak_rss": int(line.split()[1]) * 1024, "peak_rss_kind": "VmHWM"}
    except OSError:
        pass
    return {}


def measure(name, src_dir, dest_root, batch_rows, timeout=1800):
    """Run ``name`` in a fresh subprocess (so its peak RSS is its own); return its figures."""
    import shutil

    dest = os.path.join(dest_root, name.replace(" ", "_").replace("/", "_").replace(",", ""))
    shutil.rmtree(dest, ignore_errors=True)
    code = ("import json, sys; from lodarrow._bench._datasets import run_one; "
            f"print('RESULT' + json.dumps(run_one({name!r}, {src_dir!r}, {dest!r}, "
            f"{batch_rows!r})))")
    env = dict(os.environ)
    import lodarrow

    env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [os.path.dirname(os.path.dirname(lodarrow.__file__)),
                      env.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=timeout, env=env)
    shutil.rmtree(dest, ignore_errors=True)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT"):
            return json.loads(line[len("RESULT"):])
    return {"name": name, "error": (proc.stderr or proc.stdout).strip().splitlines()[-1:]}


#: The runs at each size, in order (the small size holds the comparisons that need not be
#: repeated on the whole dataset: the machine is shared and every run reads all of it).
SMALL_RUNS = ("pyarrow copy", "map_parquet identity", "map_parquet identity, pyarrow writer",
              "hand loop + udf", "map_parquet + udf", "map_parquet + udf, threads=2")
LARGE_RUNS = ("pyarrow copy", "map_parquet identity", "map_parquet identity, pyarrow writer",
              "map_parquet + udf", "map_parquet + udf, pyarrow writer", "ray",
              "ray + lodarrow sink", "dask", "dask + lodarrow writer",
              "spark copy", "spark identity", "spark", "spark_map work alone")


def run_datasets(data_dir, size_gb, engines=("ray", "dask"), log=print, only=None,
                 only_size="small"):
    """Generate (or reuse) the dataset and time every run; return the report dict.

    The small size is the first quarter of the files (the same files, fewer of them), so the
    two peak-RSS figures differ only in how much data goes through.  ``only`` (run names)
    times just those, at ``only_size``.
    """
    import pyarrow.parquet as pq

    from lodarrow._bench._runner import machine_info

    t0 = time.perf_counter()
    log(f"dataset: {data_dir} ({size_gb} GB; generated once, then reused)")
    files = generate(data_dir, size_gb,
                     progress=lambda k, n: log(f"  generated file {k}/{n}") if k % 4 == 0 or
                     k == n else None)
    generated_s = time.perf_counter() - t0
    small = files[:max(1, len(files) // 4)]
    sizes = {"small": small, "large": files}
    machine = machine_info()
    machine["load_average"] = os.getloadavg()
    machine["engine_versions"] = _engine_versions()
    batch = _auto_batch_rows(pq.ParquetFile(files[0]).metadata)
    rows = []
    out_root = os.path.join(os.path.dirname(os.path.abspath(data_dir)),
                            os.path.basename(os.path.abspath(data_dir)) + "-out")
    os.makedirs(out_root, exist_ok=True)
    plan = (("small", SMALL_RUNS), ("large", LARGE_RUNS)) if only is None else \
        ((only_size, tuple(only)),)
    chosen_engines = {run for e in engines for run in ENGINE_OF[e]}
    for size, names in plan:
        chosen = sizes[size]
        src = _link_dir(out_root, size, chosen)
        info = {"size": size, "files": len(chosen),
                "bytes_in": sum(os.path.getsize(f) for f in chosen),
                "rows_in": sum(pq.ParquetFile(f).metadata.num_rows for f in chosen)}
        for name in names:
            if name in ENGINE_RUNS and name not in chosen_engines:
                continue
            log(f"  {size}: {name} ...")
            result = measure(name, src, out_root, None)
            result.update(info)
            rows.append(result)
            if "error" in result:
                log(f"    failed: {result['error']}")
            else:
                log(f"    {result['wall_s']:.1f} s, peak RSS {result.get('peak_rss', 0) / 2**20:.0f} MiB")
    machine["load_average_end"] = os.getloadavg()
    _add_ratios(rows)
    return {"machine": machine, "rows": rows, "batch_rows": batch,
            "generate_s": generated_s, "wall_s": time.perf_counter() - t0,
            "data_dir": os.path.abspath(data_dir), "size_gb": size_gb}


def _link_dir(root, size, files):
    """A directory of symbolic links to ``files`` (a dataset of just those files)."""
    import shutil

    d = os.path.join(root, f"src-{size}")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    for f in files:
        os.symlink(os.path.abspath(f), os.path.join(d, os.path.basename(f)))
    return d


def _run_wall(r):
    """Wall time of the work: an engine's start-up (timed apart) is left out."""
    return r.get("run_s", r["wall_s"])


def _add_ratios(rows):
    """Throughput against the pyarrow copy of the same size; engines against map_parquet."""
    by = {(r["size"], r["name"]): r for r in rows if "error" not in r}
    for r in rows:
        if "error" in r:
            continue
        r["mb_per_s"] = r["bytes_in"] / _run_wall(r) / 1e6
        base = by.get((r["size"], "pyarrow copy"))
        if base and r["name"] != "pyarrow copy":
            r["vs_pyarrow_copy"] = base["wall_s"] / _run_wall(r)
        if r["name"] == "map_parquet + udf":
            loop = by.get((r["size"], "hand loop + udf"))
            if loop:
                r["vs_hand_loop"] = loop["wall_s"] / r["wall_s"]
        if r["name"] in ENGINE_RUNS and r["name"] != "spark_map work alone":
            ref = by.get((r["size"], "map_parquet + udf"))
            if ref:
                r["wall_vs_map_parquet"] = _run_wall(r) / ref["wall_s"]
                r["wall_with_startup_vs_map_parquet"] = r["wall_s"] / ref["wall_s"]
            # Ray and Dask write with pyarrow's writer: their own overhead is against the
            # map_parquet that does too (Spark writes with the JVM's)
            same = by.get((r["size"], "map_parquet + udf, pyarrow writer"))
            if same and r["name"] in ("ray", "dask"):
                r["wall_vs_same_writer"] = _run_wall(r) / same["wall_s"]
        if r["name"] == "spark":
            ident = by.get((r["size"], "spark identity"))
            if ident:
                r["lodarrow_share_s"] = r["run_s"] - ident["run_s"]


def table_rows(report):
    """The report's rows as (cells...) for printing: see ``TABLE_COLUMNS``."""
    out = []
    for r in report["rows"]:
        what = RUNS[r["name"]][1]
        if "error" in r:
            out.append((r["size"], r["name"], "-", "-", "-", "-", "-", "-", "failed: " +
                        " ".join(r["error"])))
            continue
        engine = r["name"] in ENGINE_RUNS
        notes = [what]
        wall = _run_wall(r)
        ratio = r.get("wall_vs_map_parquet")
        if engine and ratio is not None:
            notes.append(f"{ratio:.2f}x map_parquet's wall time (start-up "
                         f"{r.get('startup_s', 0):.1f} s apart; with it "
                         f"{r['wall_with_startup_vs_map_parquet']:.2f}x)")
            if "wall_vs_same_writer" in r:
                notes.append(f"{r['wall_vs_same_writer']:.2f}x map_parquet's with pyarrow's "
                             f"writer")
        if "lodarrow_share_s" in r:
            notes.append(f"{r['lodarrow_share_s']:.1f} s more than the identity mapInArrow")
        if "vs_hand_loop" in r:
            notes.append(f"{r['vs_hand_loop']:.2f}x the hand loop's throughput")
        out.append((
            r["size"], r["name"], f"{r['files']} / {r['bytes_in'] / 1e9:.2f} GB",
            f"{wall:.1f}", "-" if engine else f"{r['cpu_s']:.1f}",
            f"{r['bytes_in'] / wall / 1e6:.0f}",
            f"{r['vs_pyarrow_copy']:.2f}" if "vs_pyarrow_copy" in r else "-",
            f"{r['peak_rss'] / 2**20:.0f}" if not engine and _own_peak(r) else "-",
            "; ".join(n for n in notes if n)))
    return out


TABLE_COLUMNS = ("size", "run", "files / in", "wall s", "CPU s", "MB/s in", "x pyarrow copy",
                 "peak RSS MiB", "what / note")


def _own_peak(row):
    """Whether ``row``'s peak RSS is its run's own (:func:`_peak_rss`; a JSON of an earlier
    version recorded the inherited ``ru_maxrss``, shown as "-")."""
    return row.get("peak_rss_kind") == "VmHWM"


def to_markdown(report, command):
    """The report as a Markdown section for ``docs/performance.md``."""
    m = report["machine"]
    v = m["versions"]
    lines = [
        "## Datasets: map_parquet, pyarrow alone, Ray Data, Dask, Spark",
        "",
        f"- Command: `{command}`",
        *([f"- {_docs.revision_line(report['revision'])}"] if "revision" in report else []),
        f"- Dataset: {report['rows'][-1]['files'] if report['rows'] else '?'} files generated "
        f"by `lodarrow/_bench/_datasets.py` under `{report['data_dir']}` (documents with a "
        f"string id and title, `tokens: list<list<int32>>`, `emb: list<fixed_size_list<float, "
        f"16>>`, 0.5% null rows, 32768-row row groups); the small size is the first quarter "
        f"of the files.  Batches of {report['batch_rows']} rows (map_parquet's default, about "
        f"32 MiB decoded) everywhere but in Ray, which maps its blocks whole (no "
        f"`batch_size`: its read, udf and write then run fused in one task).  An engine's "
        f"start-up, timed apart, is its start and one task per worker importing lodarrow; "
        f"for Ray also the same job on 2 x 1024 rows (a worker's first Ray Data task "
        f"imports Ray Data's executor, which a cluster that has run a job has paid).",
        "- Udf: `dataset_udf()` there: `sequence_pool` average of `emb`, `sequence_pool` max "
        "of `tokens`, `sequence_last_step` of `emb`.",
        f"- Machine: {m['cpu']}, {m['cores']} cores, Python {v['python']}, pyarrow "
        f"{v['pyarrow']}, {m.get('engine_versions') or _engine_versions()}; load average "
        f"(1 min) {m['load_average'][0]:.1f} at the start, {m['load_average_end'][0]:.1f} at "
        f"the end: other processes share these {m['cores']} cores, so wall times are noisy "
        f"(CPU s is the process's own).",
        f"- Each run is a fresh subprocess reading every file and writing a new dataset; "
        + ("peak RSS is that process's own high-water mark (`VmHWM`; for Ray and Dask only "
           "the driver's: not shown).  "
           if any(_own_peak(r) for r in report["rows"]) else
           "peak RSS not shown: this run recorded `ru_maxrss`, which on Linux a child starts "
           "from its parent's peak (the dataset's generation), not its own.  ")
        + f"The whole benchmark took {report['wall_s'] / 60:.1f} min.",
        "",
        "| " + " | ".join(TABLE_COLUMNS) + " |",
        "| " + " | ".join("---" if i in (0, 1, 8) else "---:" for i in range(len(TABLE_COLUMNS)))
        + " |",
    ]
    for cells in table_rows(report):
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", *summary_lines(report)]
    return "\n".join(lines) + "\n"


def summary_lines(report):
    """The figures the targets are about, as Markdown bullets."""
    by = {(r["size"], r["name"]): r for r in report["rows"] if "error" not in r}
    sizes = {r["size"]: r["bytes_in"] / 1e9 for r in report["rows"]}
    out = []

    def ratio(name, key):
        return ", ".join(f"{by[(size, name)][key]:.2f} at {sizes[size]:.2f} GB"
                         for size in ("small", "large") if key in by.get((size, name), {}))

    identity = ratio("map_parquet identity", "vs_pyarrow_copy")
    if identity:
        out.append(f"- map_parquet's throughput / pyarrow alone's (identity udf, same loop "
                   f"and batches; target >= 1.5): {identity}; with the udf: "
                   f"{ratio('map_parquet + udf', 'vs_pyarrow_copy') or '-'}; with pyarrow's "
                   f"writer: {ratio('map_parquet identity, pyarrow writer', 'vs_pyarrow_copy')}.")
    sized = [f"{name} {by[(size, name)]['bytes_out'] / 1e9:.2f} GB"
             for size in ("large", "small") for name in
             ("pyarrow copy", "map_parquet identity", "map_parquet identity, pyarrow writer")
             if (size, name) in by and by[(size, name)].get("bytes_out")]
    if sized:
        out.append(f"- Output on disk: {', '.join(sized[:3])} (polars' writer chooses its "
                   f"dictionary pages itself).")
    if ratio("map_parquet + udf", "vs_hand_loop"):
        out.append(f"- map_parquet + udf / the same udf in a hand-written pyarrow loop: "
                   f"{ratio('map_parquet + udf', 'vs_hand_loop')}.")
    peaks = [f"{name} {by[('small', name)]['peak_rss'] / 2**20:.0f} MiB at "
             f"{sizes['small']:.2f} GB, {by[('large', name)]['peak_rss'] / 2**20:.0f} MiB at "
             f"{sizes['large']:.2f} GB"
             for name in ("map_parquet + udf", "map_parquet identity", "pyarrow copy")
             if ("small", name) in by and ("large", name) in by
             and _own_peak(by[("small", name)]) and _own_peak(by[("large", name)])]
    if peaks:
        out.append(f"- Peak RSS (flat as the dataset grows {sizes['large'] / sizes['small']:.0f}"
                   f"x): {'; '.join(peaks)}.")
    for name in ("ray", "ray + lodarrow sink", "dask", "dask + lodarrow writer"):
        r = by.get(("large", name))
        if r and "wall_vs_map_parquet" in r:
            same = (f"; against map_parquet with the same (pyarrow's) writer, the engine's own "
                    f"overhead (target <= 1.5): {r['wall_vs_same_writer']:.2f}"
                    if "wall_vs_same_writer" in r else "")
            out.append(f"- {name} wall time / map_parquet + udf's: "
                       f"{r['wall_vs_map_parquet']:.2f} without its start-up, "
                       f"{r['wall_with_startup_vs_map_parquet']:.2f} with it{same}.")
    for size in ("small", "large"):
        r, ident = by.get((size, "spark")), by.get((size, "spark identity"))
        alone = by.get((size, "spark_map work alone"))
        if r and "wall_vs_map_parquet" in r:
            out.append(f"- spark (la.spark_map) wall time / map_parquet + udf's at "
                       f"{sizes[size]:.2f} GB: {r['wall_vs_map_parquet']:.2f} without its "
                       f"start-up; Spark's identity mapInArrow alone: "
                       + (f"{ident['wall_vs_map_parquet']:.2f}" if ident else "-")
                       + (f"; spark_map's own per-batch work {alone['run_s']:.1f} s of the "
                          f"{r['run_s']:.1f} s" if alone else "") + ".")
    return out


def _engine_versions():
    out = []
    for mod in ("ray", "dask", "distributed", "pyspark"):
        try:
            out.append(f"{mod} {__import__(mod).__version__}")
        except Exception:  # not installed: not shown
            continue
    return ", ".join(out)


#: The heading of this benchmark's section in ``docs/performance.md``.
SECTION = "## Datasets:"


def section_of(text):
    """``(start, end)`` of the datasets section in a Markdown text, or None."""
    start = text.find("\n" + SECTION)
    if start < 0:
        if not text.startswith(SECTION):
            return None
        start = 0
    else:
        start += 1
    end = text.find("\n## ", start + len(SECTION))
    return start, (len(text) if end < 0 else end + 1)


#: The key of this benchmark's generated block (:mod:`lodarrow._bench._docs`).
BLOCK = "datasets"
REGENERATE = ("python -m lodarrow bench --datasets ... --json JSON --markdown FILE, or from "
              "that JSON: python -m lodarrow bench --datasets --from-json JSON --markdown FILE")


def write_section(path, section):
    """Put ``section`` into the Markdown file ``path``: in place of its generated ``datasets``
    block where it has one (the rest of the file is kept), else in place of its datasets
    section, or appended; a new file holds just the section."""
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        text = ""
    if _docs.find_block(text, BLOCK) is not None:
        _docs.write_block(path, BLOCK, REGENERATE, section)
        return
    span = section_of(text)
    if span is not None:
        text = text[:span[0]] + section.rstrip("\n") + "\n" + \
            ("\n" if span[1] < len(text) else "") + text[span[1]:]
    else:
        text = (text.rstrip("\n") + "\n\n" if text else "") + section
    with open(path, "w") as f:
        f.write(text)
