#!/usr/bin/env python
"""A udf on a table of several chunks: batch by batch (zero-copy) against the chunks joined.

    python benchmarks/udf_chunked_tables.py [--chunks 16] [--repeat 15]

A ``la.pipeline`` of two ``sequence_pool`` udfs (max, sum) over a ``list<float64>`` column of
``--chunks`` chunks (the shape of a Ray block: one chunk per batch read), for several batch
sizes (rows x values per row, random lengths): the median time of ``--repeat`` calls mapping
the table one record batch at a time (what a udf does from ``_MIN_BATCH_BYTES`` a batch) and
the same with the whole table read at once (its chunks joined into one copy: the threshold
patched).  The last column is the ratio: below 1 batch by batch is faster.  Where the table
is larger than the allocator keeps around, the join writes into fresh memory and pays its
page faults on every call; in an engine's worker that is the common case.

The threshold is lodarrow's private setting: this script follows it, it is not an API.
"""

import argparse
import statistics
import time
from unittest import mock

import numpy as np
import pyarrow as pa

import lodarrow as la
from lodarrow._tables import _udf

SHAPES = ((256, 4), (1024, 32), (4096, 32), (8192, 16), (8192, 32), (2048, 128),
          (32768, 8), (4096, 128), (16384, 32))


def table(rng, rows, values, chunks):
    parts = []
    for _ in range(chunks):
        lens = rng.integers(0, 2 * values, rows)
        off = pa.array(np.concatenate([[0], np.cumsum(lens)]).astype(np.int32))
        parts.append(pa.ListArray.from_arrays(off, pa.array(rng.normal(size=int(lens.sum())))))
    return pa.table({"x": pa.chunked_array(parts)})


def median_ms(f, t, repeat):
    f(t)  # warm: the udf's call worked out, the allocator's first pages
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        f(t)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--chunks", type=int, default=16)
    p.add_argument("--repeat", type=int, default=15)
    args = p.parse_args(argv)
    rng = np.random.default_rng(0)
    f = la.pipeline(la.udf(la.sequence_pool, input=la.col("x"), pool_type="max", out="m"),
                    la.udf(la.sequence_pool, input=la.col("x"), pool_type="sum", out="s"))
    print(f"{args.chunks} chunks; threshold {_udf._MIN_BATCH_BYTES / 2**20:g} MiB a batch")
    print("| rows a batch | values a row | MiB a batch | batch by batch ms | joined ms | ratio |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for rows, values in SHAPES:
        t = table(rng, rows, values, args.chunks)
        with mock.patch.object(_udf, "_MIN_BATCH_BYTES", 1):
            by_batch = median_ms(f, t, args.repeat)
        with mock.patch.object(_udf, "_MIN_BATCH_BYTES", 2**62):
            joined = median_ms(f, t, args.repeat)
        print(f"| {rows} | ~{values} | {t.nbytes / args.chunks / 2**20:.2f} | {by_batch:.2f} "
              f"| {joined:.2f} | {by_batch / joined:.2f} |")


if __name__ == "__main__":
    main()
