"""Epoch times and bytes fetched of a batch_loader over a corpus on a local S3 server (moto),
with and without the data cache (cache_bytes=), and from local files for reference
(docs/training.md, "The data cache").

    python benchmarks/data_cache.py [--sequences 100000] [--files 4] [--repeat 7] \\
        [--json benchmarks/results/data_cache.json] [--docs docs/training.md]
    python benchmarks/data_cache.py --from-json benchmarks/results/data_cache.json \\
        --docs docs/training.md

Needs moto[server] (the test extra); the bytes are counted by the tests' CountingHandler
(tests/test_remote_sources.py), for both loaders alike.  The loaders run in turn, ``--repeat``
rounds (each loader's two epochs once a round), the median seconds published; the JSON holds
the commit measured, the machine, every setting and every epoch's seconds with the 1-minute
load average around it.  ``--docs`` rewrites the ``data-cache`` block of the Markdown file
between its markers (lodarrow/_bench/_docs.py); ``--from-json`` writes it again without
measuring.
"""

import argparse
import logging
import os
import socket
import statistics
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

import lodarrow as la
from lodarrow._bench._docs import (add_output_options, command_line, publish, report_of,
                                   run_header, run_record, utc_now)

HERE = os.path.dirname(os.path.abspath(__file__))

ROW_GROUP = 8192


def corpus(n, seed):
    """``n`` token sequences (int32 ids, lognormal lengths of mean ~100), a label, and a wide
    column the loader does not read."""
    rng = np.random.default_rng(seed)
    lengths = np.minimum(rng.lognormal(4.2, 0.8, n).astype(np.int64), 4096)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    ids = pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)),
                                   pa.array(rng.integers(0, 32000, int(offsets[-1]),
                                                         dtype=np.int32)))
    emb = pa.FixedSizeListArray.from_arrays(pa.array(rng.random(n * 64, dtype=np.float32)), 64)
    return pa.table({"ids": ids, "label": pa.array(rng.integers(0, 2, n)), "emb": emb})


LOADERS = ("S3, no cache", "S3, cache_bytes=2**30 (empty at epoch 0)", "local files")
FROM_JSON = ("python benchmarks/data_cache.py --from-json benchmarks/results/data_cache.json "
             "--docs docs/training.md")


def parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sequences", type=int, default=100_000)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    add_output_options(parser, json=None, docs="rewrite the data-cache block of this Markdown "
                       "file", from_json=None)
    args = parser.parse_args(argv)
    args.argv = list(argv)
    return args


def measure(args):
    """Every loader's two epochs, ``--repeat`` rounds: the report (JSON)."""
    from moto.server import ThreadedMotoServer

    sys.path.insert(0, os.path.join(HERE, os.pardir, "tests"))
    from test_remote_sources import CountingHandler

    report = run_record(command_line("benchmarks/data_cache.py", args.argv))
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    work = tempfile.mkdtemp(prefix="cache-bench-")
    try:
        fs = pafs.S3FileSystem(access_key="x", secret_key="x", region="us-east-1",
                               endpoint_override=f"127.0.0.1:{port}", scheme="http",
                               allow_bucket_creation=True)
        fs.create_dir("bench")
        per = args.sequences // args.files
        total = tokens = 0
        os.makedirs(os.path.join(work, "local"))
        for k in range(args.files):
            table = corpus(per, k)
            tokens += len(table.column("ids").combine_chunks().values)
            pq.write_table(table, os.path.join(work, "local", f"part-{k}.parquet"),
                           row_group_size=ROW_GROUP)
            with fs.open_output_stream(f"bench/c/part-{k}.parquet") as f:
                pq.write_table(table, f, row_group_size=ROW_GROUP)
            total += fs.get_file_info(f"bench/c/part-{k}.parquet").size
        read = 0
        for k in range(args.files):
            meta = pq.read_metadata(os.path.join(work, "local", f"part-{k}.parquet"))
            read += sum(meta.row_group(g).column(i).total_compressed_size
                        for g in range(meta.num_row_groups) for i in (0, 1))
        handler = CountingHandler(fs)
        counting = pafs.PyFileSystem(handler)
        lengths = os.path.join(work, "lengths")
        la.sequence_lengths("bench/c", "ids", filesystem=counting, cache_dir=lengths)
        la.sequence_lengths(os.path.join(work, "local"), "ids", cache_dir=lengths)
        loader_args = dict(max_tokens=32768, seed=1, extra_columns=["label"], progress=False)
        report["settings"] = {"sequences": args.sequences, "files": args.files,
                              "repeat": args.repeat, "row_group": ROW_GROUP,
                              "loader": loader_args, "cache_bytes": 1 << 30,
                              "LODARROW_NUM_THREADS": os.environ.get("LODARROW_NUM_THREADS")}
        report["corpus"] = {"sequences": per * args.files, "tokens": tokens,
                            "s3_bytes": total, "read_bytes": read}
        runs = {}
        for rep in range(args.repeat):
            for name, source, kw in (
                    (LOADERS[0], "bench/c", {"filesystem": counting}),
                    (LOADERS[1], "bench/c", {"filesystem": counting, "cache_bytes": 1 << 30}),
                    (LOADERS[2], os.path.join(work, "local"), {})):
                cache = os.path.join(work, f"cache-{rep}")
                os.makedirs(cache, exist_ok=True)
                loader = la.batch_loader(source, "ids", cache_dir=lengths, **loader_args,
                                         **kw)
                if loader._parts.cache is not None:  # the data cache in a fresh directory
                    from lodarrow._tables._data_cache import DataCache

                    loader._parts.cache = DataCache(1 << 30, cache)
                for epoch in range(2):
                    loader.set_epoch(epoch)
                    handler.reset()
                    before = os.getloadavg()[0]
                    t0 = time.perf_counter()
                    batches = sum(1 for _ in loader)
                    dt = time.perf_counter() - t0
                    remote = "S3" in name
                    runs.setdefault((name, epoch), []).append(
                        {"round": rep, "seconds": dt, "batches": batches,
                         "bytes": handler.counter["bytes"] if remote else 0,
                         "requests": handler.counter["reads"] if remote else 0,
                         "load": [before, os.getloadavg()[0]]})
    finally:
        server.stop()
    report["rows"] = [{"loader": name, "epoch": epoch,
                       "seconds": statistics.median(r["seconds"] for r in samples),
                       "bytes": samples[0]["bytes"], "requests": samples[0]["requests"],
                       "batches": samples[0]["batches"], "samples": samples}
                      for (name, epoch), samples in runs.items()]
    report["finished"] = utc_now()
    report["load_at_end"] = os.getloadavg()[0]
    return report


def claims(report):
    """The ratios the sentences state: the cached epoch against local files' and against the
    uncached one's, the first cached epoch against the uncached first."""
    row = {(r["loader"], r["epoch"]): r for r in report["rows"]}
    nocache, cached, local = LOADERS
    return {"cached_over_local": row[(cached, 1)]["seconds"] / row[(local, 1)]["seconds"],
            "cached_over_nocache": row[(cached, 1)]["seconds"] / row[(nocache, 1)]["seconds"],
            "first_over_nocache": row[(cached, 0)]["seconds"] / row[(nocache, 0)]["seconds"],
            "cached_bytes": row[(cached, 1)]["bytes"],
            "cached_requests": row[(cached, 1)]["requests"],
            "requests_first": row[(cached, 0)]["requests"],
            "requests_nocache": row[(nocache, 0)]["requests"]}


def markdown(report):
    """The ``data-cache`` block: the run, the table, the sentences from the JSON."""
    s, c = report["settings"], report["corpus"]
    loads = [x for r in report["rows"] for smp in r["samples"] for x in smp["load"]]
    lines = run_header(report) + [
             f"{c['sequences']:,} sequences of lognormal lengths ({c['tokens'] / 1e6:.1f}M "
             f"int32 tokens), {s['files']} files of {s['row_group']:,}-row row groups with a "
             f"wide column the loader does not read, {c['s3_bytes'] / 1e6:.1f} MB on a moto S3 "
             f"server on 127.0.0.1; the loader (`max_tokens={s['loader']['max_tokens']}`, one "
             f"extra column) reads {c['read_bytes'] / 1e6:.1f} MB of column chunks an epoch; "
             f"lengths from the lengths cache; bytes and requests counted by a filesystem "
             f"wrapper.  Seconds: the median of {s['repeat']} rounds, the loaders in turn "
             f"(1-minute load average {min(loads):.1f}-{max(loads):.1f} around the epochs).",
             "", "| loader | epoch | seconds | MB fetched | GET requests | batches |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in report["rows"]:
        lines.append(f"| {r['loader']} | {r['epoch']} | {r['seconds']:.3f} | "
                     f"{r['bytes'] / 1e6:.2f} | {r['requests']} | {r['batches']} |")
    k = claims(report)
    lines += ["", f"- The cached epoch (epoch 1 with `cache_bytes`) fetched "
                  f"{k['cached_bytes'] / 1e6:.2f} MB in {k['cached_requests']} requests and took "
                  f"{k['cached_over_local']:.2f}x the local files' epoch 1 and "
                  f"{k['cached_over_nocache']:.2f}x the uncached epoch 1.",
              f"- The first epoch with the cache, empty, took {k['first_over_nocache']:.2f}x "
              f"the first without it, in {k['requests_first']} requests against "
              f"{k['requests_nocache']}."]
    return "\n".join(lines) + "\n"


def main(argv=None):
    args = parse(sys.argv[1:] if argv is None else argv)
    report = report_of(args, measure)
    text = markdown(report)
    publish(args, text, [("docs", "data-cache", FROM_JSON, text)])
    return report


if __name__ == "__main__":
    main()
