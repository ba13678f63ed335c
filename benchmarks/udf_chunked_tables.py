#!/usr/bin/env python
"""A udf on a table of several chunks: batch by batch (zero-copy) against the chunks joined.

    python benchmarks/udf_chunked_tables.py [--chunks 16] [--repeat 15] \
        [--json benchmarks/results/udf_chunked_tables.json --docs docs/tables.md]
    python benchmarks/udf_chunked_tables.py \
        --from-json benchmarks/results/udf_chunked_tables.json --docs docs/tables.md

A ``la.pipeline`` of two ``sequence_pool`` udfs (max, sum) over a ``list<float64>`` column of
``--chunks`` chunks (the shape of a Ray block: one chunk per batch read), for several batch
sizes (rows x values per row, random lengths): the median time of ``--repeat`` calls mapping
the table one record batch at a time (what a udf does from ``_MIN_BATCH_BYTES`` a batch) and
the same with the whole table read at once (its chunks joined into one copy: the threshold
patched).  The last column is the ratio: below 1 batch by batch is faster.  Where the table
is larger than the allocator keeps around, the join writes into fresh memory and pays its
page faults on every call; in an engine's worker that is the common case.

``--json PATH`` keeps every shape with the commit, versions, CPU, load and command;
``--docs FILE.md`` writes the block between ``<!-- generated: udf-chunked-tables, ... -->``
and ``<!-- end generated: udf-chunked-tables -->`` of that file from the JSON (the rest is
kept); ``--from-json PATH`` writes that block (or prints it) from an earlier run's JSON
without running anything.

The threshold is lodarrow's private setting: this script follows it, it is not an API.
"""

import argparse
import os
import statistics
import sys
import time
from unittest import mock

import numpy as np
import pyarrow as pa

import lodarrow as la
from lodarrow._tables import _udf

SHAPES = ((256, 4), (1024, 32), (4096, 32), (8192, 16), (8192, 32), (2048, 128),
          (32768, 8), (4096, 128), (16384, 32))
KEY = "udf-chunked-tables"
REGENERATE = ("python benchmarks/udf_chunked_tables.py --from-json "
              "benchmarks/results/udf_chunked_tables.json --docs docs/tables.md")


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


def measure(args):
    """Every shape, both ways; the report --json keeps."""
    from lodarrow._bench import _docs

    command = _docs.command_line("benchmarks/udf_chunked_tables.py", args.argv, env=(),
                                 quote=False)
    report = {**_docs.run_record(command),
              "chunks": args.chunks, "repeat": args.repeat,
              "threshold_bytes": _udf._MIN_BATCH_BYTES, "rows": []}
    rng = np.random.default_rng(0)
    f = la.pipeline(la.udf(la.sequence_pool, input=la.col("x"), pool_type="max", out="m"),
                    la.udf(la.sequence_pool, input=la.col("x"), pool_type="sum", out="s"))
    for rows, values in SHAPES:
        t = table(rng, rows, values, args.chunks)
        with mock.patch.object(_udf, "_MIN_BATCH_BYTES", 1):
            by_batch = median_ms(f, t, args.repeat)
        with mock.patch.object(_udf, "_MIN_BATCH_BYTES", 2**62):
            joined = median_ms(f, t, args.repeat)
        report["rows"].append({"rows": rows, "values": values,
                               "batch_bytes": t.nbytes / args.chunks,
                               "by_batch_ms": by_batch, "joined_ms": joined})
        print(f"{rows} x ~{values}: {by_batch:.2f} ms batch by batch, {joined:.2f} ms joined",
              file=sys.stderr)
    report["load_average_end"] = list(os.getloadavg())
    return report


def _range(ratios):
    lo, hi = min(ratios), max(ratios)
    return f"{lo:.2f}" if f"{lo:.2f}" == f"{hi:.2f}" else f"{lo:.2f}-{hi:.2f}"


def markdown(report):
    """The block of docs/tables.md, from the JSON alone."""
    from lodarrow._bench import _docs

    mib = report["threshold_bytes"] / 2**20
    head = (f"Measured by `{report['command']}`, started {report['started']}.  "
            f"{_docs.commit_and_machine(report)}.  "
            f"{report['chunks']} chunks, the median of {report['repeat']} calls each way; "
            f"ratio: batch by batch over joined (below 1: batch by batch is faster).")
    out = [head, "",
           "| rows a batch | values a row | MiB a batch | batch by batch ms | joined ms | ratio |",
           "| ---: | ---: | ---: | ---: | ---: | ---: |"]
    above, below = [], []
    for r in report["rows"]:
        ratio = r["by_batch_ms"] / r["joined_ms"]
        # the rule of la.udf: batch by batch where a batch holds the threshold on average
        (above if r["batch_bytes"] >= report["threshold_bytes"] else below).append(ratio)
        out.append(f"| {r['rows']} | ~{r['values']} | {r['batch_bytes'] / 2**20:.2f} | "
                   f"{r['by_batch_ms']:.2f} | {r['joined_ms']:.2f} | {ratio:.2f} |")
    out.append("")
    words = []
    if above:
        faster = sum(x < 1 for x in above)
        words.append(f"from {mib:g} MiB a batch (where the udf maps batch by batch) the ratio "
                     f"is {_range(above)}, batch by batch faster in {faster} of {len(above)} "
                     f"shapes")
    if below:
        slower = sum(x > 1 for x in below)
        words.append(f"below it (where the udf runs the table whole) {_range(below)}, batch "
                     f"by batch slower in {slower} of {len(below)}")
    out.append("In this run " + "; ".join(words) + ".")
    return "\n".join(out) + "\n"


def main(argv=None):
    from lodarrow._bench import _docs

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--chunks", type=int, default=16)
    p.add_argument("--repeat", type=int, default=15)
    _docs.block_main(p, argv, measure, markdown, KEY, REGENERATE, "write every shape as JSON")


if __name__ == "__main__":
    main()
