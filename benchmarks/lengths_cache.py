#!/usr/bin/env python
"""Cold vs cached starts of the lengths pass, and the bytes a remote start fetches.

Side by side in one run (docs/training.md#lengths-cache, docs/scale-out.md#remote-corpora):

- on a local corpus of ``--sequences`` token sequences (lognormal lengths, mean ~100 tokens,
  ``--files`` files, row groups of 65,536 rows, written by pyarrow: no sidecars), the time to
  ``la.sequence_lengths`` cold (decoding, filling a fresh cache), cached, from the sidecars
  of a copy written by ``la.write_parquet`` (no cache), beside pyarrow's own
  ``read_table(columns=[...])`` + ``pc.list_value_length``; and ``la.batch_loader``'s start,
  cold and cached;
- on a moto S3 server started on 127.0.0.1 (``--s3``), the bytes a cold and a cached
  ``sequence_lengths`` and a one-column ``read_parquet`` fetch, against the column's
  compressed size and the file's size.

    python benchmarks/lengths_cache.py [--sequences 1000000] [--files 4] [--repeat 5] [--s3]
"""

import argparse
import os
import shutil
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

import lodarrow as la

ROW_GROUP = 65536


def corpus(n, seed=0, wide=False):
    """A table of ``n`` token sequences (int32 ids, lognormal lengths of mean ~100)."""
    rng = np.random.default_rng(seed)
    lengths = np.minimum(rng.lognormal(4.2, 0.8, n).astype(np.int64), 4096)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    ids = pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)),
                                   pa.array(rng.integers(0, 32000, int(offsets[-1]),
                                                         dtype=np.int32)))
    cols = {"ids": ids, "doc": pa.array(np.arange(n))}
    if wide:  # a column a lengths pass must not fetch
        cols["emb"] = pa.FixedSizeListArray.from_arrays(
            pa.array(rng.random(n * 64, dtype=np.float32)), 64)
    return pa.table(cols), lengths


def median_time(fn, repeat, setup=None):
    times = []
    for _ in range(repeat):
        if setup is not None:
            setup()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def local(args, work):
    n, k = args.sequences, args.files
    plain, recorded = os.path.join(work, "plain"), os.path.join(work, "recorded")
    os.makedirs(plain)
    os.makedirs(recorded)
    per = -(-n // k)
    want, tokens = [], 0
    for f in range(k):
        table, lengths = corpus(min(per, n - f * per), seed=f)
        pq.write_table(table, os.path.join(plain, f"part-{f}.parquet"), row_group_size=ROW_GROUP)
        la.write_parquet(table, os.path.join(recorded, f"part-{f}.parquet"),
                         row_group_size=ROW_GROUP)
        want.append(lengths)
        tokens += int(lengths.sum())
    want = np.concatenate(want)
    size = sum(os.path.getsize(os.path.join(plain, x)) for x in os.listdir(plain))
    side = sum(os.path.getsize(os.path.join(recorded, x)) for x in os.listdir(recorded)
               if x.endswith(".lodarrow-lengths"))
    print(f"corpus: {len(want):,} sequences, {tokens:,} tokens, {k} files, "
          f"{size / 1e6:.1f} MB; sidecars {side / 1e6:.2f} MB in all")
    cache = os.path.join(work, "cache")

    def fresh():
        shutil.rmtree(cache, ignore_errors=True)

    assert np.array_equal(la.sequence_lengths(plain, "ids", cache_dir=cache), want)
    cold = median_time(lambda: la.sequence_lengths(plain, "ids", cache_dir=cache),
                       args.repeat, fresh)
    la.sequence_lengths(plain, "ids", cache_dir=cache)
    fast = max(args.repeat, 21)  # the quick ones: more repeats against a noisy machine
    warm = median_time(lambda: la.sequence_lengths(plain, "ids", cache_dir=cache), fast)
    assert np.array_equal(la.sequence_lengths(plain, "ids", cache_dir=cache), want)
    sidecar = median_time(lambda: la.sequence_lengths(recorded, "ids", cache_dir=False), fast)
    assert np.array_equal(la.sequence_lengths(recorded, "ids", cache_dir=False), want)
    nocache = median_time(lambda: la.sequence_lengths(plain, "ids", cache_dir=False),
                          args.repeat)

    def peer():
        t = pq.read_table(plain, columns=["ids"])
        return pc.list_value_length(t.column("ids"))

    arrow = median_time(peer, args.repeat)
    loader = dict(max_tokens=65536, shuffle=True, seed=0)
    cold_loader = median_time(lambda: la.batch_loader(plain, "ids", cache_dir=cache, **loader),
                              args.repeat, fresh)
    la.batch_loader(plain, "ids", cache_dir=cache, **loader)
    warm_loader = median_time(lambda: la.batch_loader(plain, "ids", cache_dir=cache, **loader),
                              fast)
    print("median seconds; 'x' = decoding (sequence_lengths without a cache) / this\n"
          "| what | seconds | x |\n| --- | ---: | ---: |")
    for name, t in (("sequence_lengths, no cache (decode)", nocache),
                    ("pyarrow read_table(columns=['ids']) + list_value_length", arrow),
                    ("sequence_lengths, cold (decode + fill the cache)", cold),
                    ("sequence_lengths, cached", warm),
                    ("sequence_lengths, from write_parquet's sidecars (no cache)", sidecar),
                    ("batch_loader start, cold", cold_loader),
                    ("batch_loader start, cached", warm_loader)):
        print(f"| {name} | {t:.4f} | {nocache / t:.1f} |")
    print(f"cached: {nocache / warm:.0f}x faster than decoding ({cold / warm:.0f}x than the cold "
          f"start); sidecars: {nocache / sidecar:.0f}x ({cold / sidecar:.0f}x); batch_loader "
          f"start: {cold_loader / warm_loader:.0f}x (the rest of a cached start is planning)")


def s3(args, work):
    from moto.server import ThreadedMotoServer
    import logging
    import socket

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "tests"))
    from test_remote_sources import CountingHandler

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        fs = pafs.S3FileSystem(access_key="x", secret_key="x", region="us-east-1",
                               endpoint_override=f"127.0.0.1:{port}", scheme="http",
                               allow_bucket_creation=True)
        fs.create_dir("bench")
        n = args.s3_sequences
        table, _ = corpus(n, wide=True)
        with fs.open_output_stream("bench/c/part-0.parquet") as f:
            pq.write_table(table, f, row_group_size=ROW_GROUP)
        meta = pq.read_metadata(fs.open_input_file("bench/c/part-0.parquet"))
        ids = sum(meta.row_group(g).column(0).total_compressed_size
                  for g in range(meta.num_row_groups))
        size = fs.get_file_info("bench/c/part-0.parquet").size
        handler = CountingHandler(fs)
        counting = pafs.PyFileSystem(handler)
        cache = os.path.join(work, "s3cache")
        rows = []
        for name, fn in (
                ("sequence_lengths, cold", lambda: la.sequence_lengths(
                    "bench/c", "ids", filesystem=counting, cache_dir=cache)),
                ("sequence_lengths, cached", lambda: la.sequence_lengths(
                    "bench/c", "ids", filesystem=counting, cache_dir=cache)),
                ("read_parquet(columns='ids')", lambda: la.read_parquet(
                    "bench/c", "ids", filesystem=counting))):
            handler.reset()
            fn()
            rows.append((name, handler.counter["bytes"], handler.counter["reads"]))
        print(f"S3 (moto on 127.0.0.1): {n:,} sequences, file {size / 1e6:.2f} MB, column "
              f"'ids' {ids / 1e6:.2f} MB compressed ({meta.num_row_groups} row groups), footer "
              f"{meta.serialized_size / 1e3:.1f} kB")
        print("| what | bytes fetched | reads | / 'ids' compressed | / file |\n"
              "| --- | ---: | ---: | ---: | ---: |")
        for name, b, r in rows:
            print(f"| {name} | {b:,} | {r} | {b / ids:.3f} | {b / size:.3f} |")
    finally:
        server.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sequences", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--s3", action="store_true", help="also the S3 bytes (moto[server])")
    parser.add_argument("--s3-sequences", type=int, default=100_000)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="lodarrow-lengths-bench-")
    try:
        local(args, work)
        if args.s3:
            s3(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
