#!/usr/bin/env python
"""Where ``la.apply`` spends its time on a small table: each piece of the call timed alone.

    python benchmarks/apply_overhead.py [--profile] \
        [--json benchmarks/results/apply_overhead.json --docs docs/performance.md]
    python benchmarks/apply_overhead.py \
        --from-json benchmarks/results/apply_overhead.json --docs docs/performance.md

The call is the ``apply_overhead`` row of ``lodarrow bench``: ``la.apply(table,
la.sequence_pool, input=la.col("x"), pool_type="sum", out="s")`` on a 10-row one-column
``pyarrow.Table``.  Prints, best of 7 x 20,000 calls each: the whole call, a ``la.udf`` of it
on a Table and on a RecordBatch, the table engine alone, the pieces it is made of (reading the
column, ``from_arrow`` and its offsets check, the operator, ``to_arrow``, adding the column),
and the same chain written by hand with those building blocks: the floor the generic engine
adds its bookkeeping to (docs/performance.md, "apply per call").  ``--profile`` adds the
``cProfile`` function count per call and the top functions by their own time.

``--json PATH`` keeps every piece with the commit, versions, CPU, load and command;
``--docs FILE.md`` writes the block between ``<!-- generated: apply-overhead, ... -->`` and
``<!-- end generated: apply-overhead -->`` of that file from the JSON (the rest is kept);
``--from-json PATH`` writes that block from an earlier run's JSON without running anything.

The pieces are lodarrow's private functions: this script follows them, it is not an API.
"""

import argparse
import os
import sys
import timeit

import numpy as np
import pyarrow as pa

import lodarrow as la
from lodarrow._interop._arrow import from_arrow, trusted_to_arrow
from lodarrow._tables import _apply


def best(fn, number=20000, repeat=7):
    """Best time of one call, in microseconds."""
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e6


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KEY = "apply-overhead"
REGENERATE = ("python benchmarks/apply_overhead.py --from-json "
              "benchmarks/results/apply_overhead.json --docs docs/performance.md")


def markdown(report):
    """The block of docs/performance.md, from the JSON alone."""
    from lodarrow._bench import _docs

    us = report["pieces_us"]
    out = [f"Each piece timed alone in one run of `{report['command']}` (`timeit`, best of "
           f"{report['repeat']} x {report['number']:,} calls), started {report['started']}.  "
           f"{_docs.commit_and_machine(report)}.",
           "", "| piece | us a call |", "| --- | ---: |"]
    out += [f"| {name} | {value:.2f} |" for name, value in us.items()]
    out.append("")
    out.append(f"- The same chain written by hand with the same building blocks (read the "
               f"column, `from_arrow`, the operator, `to_arrow`, `append_column`): "
               f"{us['the same chain by hand']:.2f} us, "
               f"{us['the same chain by hand'] / us['la.apply']:.2f} of `la.apply`'s time; "
               f"the rest is the generic engine (null rows, row alignment, result fields, the "
               f"recent-call match) in Python.")
    if report.get("calls_per_apply") is not None:
        out.append(f"- Under `cProfile` a `la.apply` makes {report['calls_per_apply']:.0f} "
                   f"Python and builtin calls.")
    return "\n".join(out) + "\n"


def main(argv=None):
    from lodarrow._bench import _docs

    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--profile", action="store_true",
                   help="add cProfile's calls per la.apply and its top functions")
    _docs.add_output_options(p, metavars=True, json="write every piece as JSON", docs=None,
                             from_json="run nothing: --docs from the JSON of an earlier run")
    args = p.parse_args(argv)
    report = _docs.report_of(args, lambda args: run(argv))
    if args.docs:
        _docs.write_block(args.docs, KEY, REGENERATE, markdown(report))


def run(argv, number=20000, repeat=7):
    """Time every piece (printing them) and return the report --json keeps."""
    from lodarrow._bench import _docs

    command = _docs.command_line("benchmarks/apply_overhead.py", argv, env=(), quote=False)
    report = {**_docs.run_record(command, root=ROOT, seconds=True),
              "number": number, "repeat": repeat, "pieces_us": {}, "calls_per_apply": None}
    offsets = np.array([0, 2, 3, 5, 5, 8, 9, 10, 12, 14, 15])
    values = np.random.default_rng(0).random(15)
    column = pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(values))
    table = pa.table({"x": column})
    batch = pa.record_batch({"x": column})
    ref = la.col("x")

    def call():
        return la.apply(table, la.sequence_pool, input=ref, pool_type="sum", out="s")

    call()
    remembered = _apply._RECENT_CALLS[0]
    u = la.udf(la.sequence_pool, input=la.col("x"), pool_type="sum", out="s")
    data = table.column(0).chunk(0)
    t = from_arrow(data)
    result = la.sequence_pool(t, "sum")
    arr = trusted_to_arrow(result, True)
    field = pa.field("s", arr.type)

    def by_hand():
        tensor = from_arrow(table.column(0).chunk(0))
        out = trusted_to_arrow(la.sequence_pool(tensor, "sum"), True)
        return table.append_column(field, out)

    def fresh_tensor():
        return from_arrow(table.column(0).chunk(0))._check_valid("x")

    pieces = [
        ("la.apply", call),
        ("la.udf on a Table", lambda: u(table)),
        ("la.udf on a RecordBatch", lambda: u(batch)),
        ("matching the recent call", lambda: remembered.fits_apply(
            "sequence_pool", {"input": ref, "pool_type": "sum"}, "s", None)),
        ("the table engine (_run)", lambda: _apply._run(remembered, table)),
        ("reading the column", lambda: table.column(0).chunk(0)),
        ("from_arrow + offsets check", fresh_tensor),
        ("the operator", lambda: la.sequence_pool(t, "sum")),
        ("to_arrow of the result", lambda: trusted_to_arrow(result, True)),
        ("append_column", lambda: table.append_column(field, arr)),
        ("the same chain by hand", by_hand),
    ]
    for name, fn in pieces:
        report["pieces_us"][name] = best(fn, number, repeat)
        print(f"{name:30s} {report['pieces_us'][name]:7.2f} us")
    if "--profile" in argv:
        import cProfile
        import pstats

        n = 50000
        profile = cProfile.Profile()
        profile.runcall(lambda: [call() for _ in range(n)])
        stats = pstats.Stats(profile)
        report["calls_per_apply"] = stats.total_calls / n
        print(f"\ncProfile: {stats.total_calls / n:.0f} function calls per la.apply")
        stats.sort_stats("tottime").print_stats(12)
    report["load_average_end"] = list(os.getloadavg())
    return report


if __name__ == "__main__":
    main()
