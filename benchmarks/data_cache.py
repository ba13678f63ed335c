"""Epoch times and bytes fetched of a batch_loader over a corpus on a local S3 server (moto),
with and without the data cache (cache_bytes=), and from local files for reference.

    python benchmarks/data_cache.py [--sequences 100000] [--files 4] [--repeat 3]

Needs moto[server] (the test extra); the bytes are counted by the tests' CountingHandler
(tests/test_remote_sources.py), for both loaders alike.
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

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, os.pardir, "tests"))
from test_remote_sources import CountingHandler  # noqa: E402

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


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sequences", type=int, default=100_000)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    from moto.server import ThreadedMotoServer

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
        print(f"{args.sequences:,} sequences ({tokens / 1e6:.1f}M int32 tokens), "
              f"{args.files} files of {ROW_GROUP}-row row groups, {total / 1e6:.1f} MB on S3 "
              f"(moto, 127.0.0.1); the loader reads 'ids' and 'label': {read / 1e6:.1f} MB "
              f"compressed; lengths from the lengths cache; median of {args.repeat}")
        results = {}
        for rep in range(args.repeat):
            for name, source, kw in (
                    ("S3, no cache", "bench/c", {"filesystem": counting}),
                    ("S3, cache_bytes=2**30 (empty at epoch 0)", "bench/c",
                     {"filesystem": counting, "cache_bytes": 1 << 30}),
                    ("local files", os.path.join(work, "local"), {})):
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
                    t0 = time.perf_counter()
                    batches = sum(1 for _ in loader)
                    dt = time.perf_counter() - t0
                    results.setdefault((name, epoch), []).append(
                        (dt, handler.counter["bytes"] if "S3" in name else 0,
                         handler.counter["reads"] if "S3" in name else 0, batches))
        print("| loader | epoch | seconds | MB fetched | GET requests | batches |")
        print("| --- | ---: | ---: | ---: | ---: | ---: |")
        for (name, epoch), runs in results.items():
            dt = statistics.median(r[0] for r in runs)
            print(f"| {name} | {epoch} | {dt:.3f} | {runs[0][1] / 1e6:.2f} | {runs[0][2]} | "
                  f"{runs[0][3]} |")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
