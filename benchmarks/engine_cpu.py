#!/usr/bin/env python
"""The whole machine's CPU time for one dataset job: map_parquet against Ray Data.

    python benchmarks/engine_cpu.py DATA_DIR [--runs map,ray,ray-footer-actors-2] [--repeat 1]

Runs the dataset benchmark's udf (``lodarrow._bench._datasets.dataset_udf``) over the Parquet
files of ``DATA_DIR`` (e.g. the directory ``python -m lodarrow bench --datasets`` generated)
and prints, per run: the wall time and the CPU seconds of the whole machine from
``/proc/stat`` (every process, Ray's raylet, GCS, driver and the worker and actor processes
that exit during the job included, which a per-process count misses).  On ``n`` cores a job
cannot take less wall time than its CPU seconds / ``n``.

* ``map``: ``la.map_parquet(src, dest, udf)``;
* ``ray``: a local Ray (2 CPUs), ``read_parquet(src).map_batches(udf, batch_format="pyarrow",
  zero_copy_batch=True).write_datasink(la.ray_parquet_sink(dest))``, timed after the
  workers have started and run the same job on 2 x 1024 rows (as in the benchmark);
* ``ray-footer-actors-2``: the same with ``RAY_DATA_PARQUET_FOOTER_NUM_ACTORS=2`` (Ray Data
  starts 32 footer-reading actors for each ``read_parquet`` by default).

Each run is a fresh interpreter; the machine should be otherwise idle.  Linux only.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

RUNS = ("map", "ray", "ray-footer-actors-2")


def machine_cpu_s():
    """Busy CPU seconds of the whole machine since boot (all but idle and iowait)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def child(run, src):
    import lodarrow as la
    from lodarrow._bench._datasets import dataset_udf, ray_job, ray_start

    dest = tempfile.mkdtemp(prefix="lodarrow-engine-cpu-")
    os.rmdir(dest)
    try:
        if run == "map":
            cpu, start = machine_cpu_s(), time.perf_counter()
            la.map_parquet(src, dest, dataset_udf())
        else:
            if run == "ray-footer-actors-2":
                os.environ["RAY_DATA_PARQUET_FOOTER_NUM_ACTORS"] = "2"
            first = sorted(f for f in os.listdir(src) if f.endswith(".parquet"))[0]
            ray_start(os.path.join(src, first), lodarrow_sink=True)
            time.sleep(1)  # the warm-up job's processes settle
            cpu, start = machine_cpu_s(), time.perf_counter()
            ray_job(src, dest, lodarrow_sink=True)
        wall, cpu = time.perf_counter() - start, machine_cpu_s() - cpu
        print(f"| {run} | {wall:.1f} | {cpu:.1f} | {cpu / wall:.2f} |", flush=True)
    finally:
        shutil.rmtree(dest, ignore_errors=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("data_dir", help="a directory of Parquet files")
    p.add_argument("--runs", default=",".join(RUNS))
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        return child(args.child, args.data_dir)
    runs = [r.strip() for r in args.runs.split(",") if r.strip()]
    bad = [r for r in runs if r not in RUNS]
    if bad:
        p.error(f"unknown run(s) {', '.join(bad)}; choose from {', '.join(RUNS)}")
    if not os.path.isdir(args.data_dir):
        p.error(f"data_dir {args.data_dir!r} is not a directory")
    print(f"{os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.1f} at the start")
    print("| run | wall s | machine CPU s | cores busy |")
    print("| --- | ---: | ---: | ---: |")
    for _ in range(args.repeat):
        for run in runs:  # alternated, so that the machine's drift falls on every run alike
            subprocess.run([sys.executable, __file__, args.data_dir, "--child", run],
                           check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
