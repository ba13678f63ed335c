#!/usr/bin/env python
"""A threaded kernel in a loop on an idle and on a busy machine: calls/s, p50, p99, max.

    python benchmarks/threads_under_load.py [--seconds 8] [--busy 0,2] [--rows 1000000]
        [--sequences 100000] [--repeat 1] [--variant "LABEL:VAR=VALUE ..."]... [--before PATH]

The call is ``la.sequence_pool(x, "max")`` over ``--rows`` float32 rows in ``--sequences``
sequences (10^6 / 10^5: issue 35's loop), repeated for ``--seconds``; each call is timed
with ``time.perf_counter``.  Every measurement runs in a fresh interpreter (OpenMP reads its
environment once, at load), while ``--busy`` other processes keep CPUs busy (a pure Python
loop each, started before the measurement and ended after it); ``0`` is the machine as it is.

The variants: ``default`` (lodarrow's own thread policy), ``1 thread``
(``LODARROW_NUM_THREADS=1``) and ``numpy reduceat`` (``np.maximum.reduceat`` over the same
sequences: a one-threaded C loop without lodarrow or OpenMP, so its p99 / p50 is what the
operating system's scheduling alone does to a call of about a millisecond under the same
load), plus any ``--variant "LABEL:VAR=VALUE ..."`` (environment settings, e.g.
``"passive:OMP_WAIT_POLICY=passive"``).  ``--repeat N`` measures every cell N times, the
variants in a rotated order each time (so that none always runs first, beside freshly started
competitors), and pools the calls: calls/s is all calls over all the cells' seconds.
``--before PATH`` runs the two default variants again with another lodarrow checkout (built in
place) first on ``PYTHONPATH``: the policy before a change, side by side in the same run (the
published run's: main at 4d4c993, before issue 35's thread policy, a worktree built with
``python setup.py build_ext --inplace``).  The machine's load average is printed
with the table, since other work on the machine moves every figure.

``--json PATH`` keeps every cell with the commit (and ``--before``'s), versions, CPU, load and
command (benchmarks/results/threads_under_load.json); ``--docs FILE.md`` writes the block
between ``<!-- generated: threads-under-load, ... -->`` and ``<!-- end generated:
threads-under-load -->`` of that file from the JSON (the rest is kept); ``--from-json PATH``
writes that block from an earlier run's JSON without running anything:

    python benchmarks/threads_under_load.py --seconds 4 --busy 0,1,2 --repeat 3 \
        --before OTHER_CHECKOUT --json benchmarks/results/threads_under_load.json \
        --docs docs/performance.md
    python benchmarks/threads_under_load.py \
        --from-json benchmarks/results/threads_under_load.json --docs docs/performance.md
"""

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import time


def _busy():  # a competitor: one core's worth of pure Python work
    while True:
        pass


def child(args):
    """One measurement in this interpreter: prints a JSON line of the call times."""
    import numpy as np

    import lodarrow as la
    from lodarrow._threads import threads_for

    rng = np.random.default_rng(0)
    cuts = np.sort(rng.choice(np.arange(1, args.rows), args.sequences - 1, replace=False))
    offsets = np.concatenate([[0], cuts, [args.rows]]).astype(np.int64)
    values = rng.random(args.rows, dtype=np.float32)
    x = la.LoDTensor(values, lod=[offsets.tolist()])
    if args.numpy:  # the reference: the same reduction as one C loop, no lodarrow, no OpenMP
        starts = offsets[:-1].copy()

        def call():
            np.maximum.reduceat(values, starts)
    else:
        def call():
            la.sequence_pool(x, "max")
    for _ in range(20):  # warm-up: threads started, pool pages mapped
        call()
    times = []
    clock = time.perf_counter
    start = clock()
    end = start + args.seconds
    while True:
        t0 = clock()
        call()
        t1 = clock()
        times.append(t1 - t0)
        if t1 >= end:
            break
    threads = 1 if args.numpy else threads_for(args.rows)
    print(json.dumps({"times": times, "wall": clock() - start, "threads": threads,
                      "file": la.__file__}))


def measure(args, env_extra, busy, pythonpath, numpy_reference=False):
    """Run one child with ``busy`` competitors; returns its call times and wall time."""
    env = dict(os.environ)
    env.pop("LODARROW_NUM_THREADS", None)
    env.update(env_extra)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath + os.pathsep + env.get("PYTHONPATH", "")
    competitors = [multiprocessing.Process(target=_busy, daemon=True) for _ in range(busy)]
    for p in competitors:
        p.start()
    try:
        cmd = [sys.executable, __file__, "--child", "--seconds", str(args.seconds),
               "--rows", str(args.rows), "--sequences", str(args.sequences)]
        if numpy_reference:
            cmd.append("--numpy")
        out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    finally:
        for p in competitors:
            p.terminate()
        for p in competitors:
            p.join()
    found = json.loads(out.strip().splitlines()[-1])
    if pythonpath and not os.path.realpath(found["file"]).startswith(
            os.path.realpath(pythonpath) + os.sep):
        raise SystemExit(f"threads_under_load: the 'before' child imported {found['file']}, "
                         f"not the checkout {pythonpath} (is it built in place?)")
    return found


def summarize(found):
    """Pool the measurements of one cell (one or more runs): calls/s, p50, p99, max."""
    times = sorted(t for f in found for t in f["times"])
    n = len(times)
    threads = sorted({f["threads"] for f in found})
    return {"calls": n, "calls_s": n / sum(f["wall"] for f in found),
            "p50": times[n // 2] * 1e3, "p99": times[min(n - 1, int(n * 0.99))] * 1e3,
            "max": times[-1] * 1e3, "threads": "/".join(map(str, threads))}


def parse_variant(text):
    label, _, settings = text.partition(":")
    env = dict(item.split("=", 1) for item in settings.split())
    return label, env


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KEY = "threads-under-load"
REGENERATE = ("python benchmarks/threads_under_load.py --from-json "
              "benchmarks/results/threads_under_load.json --docs docs/performance.md")
#: How the table names a variant.
LABELS = {"default": "**default**", "1 thread": "`LODARROW_NUM_THREADS=1`",
          "before: 1 thread": "before: `LODARROW_NUM_THREADS=1`"}
#: How the sentences below the table name a variant.
NAMES = {"default": "the default", "1 thread": "one thread",
         "numpy reduceat": "`numpy reduceat`"}


def markdown(report):
    """The block of docs/performance.md, from the JSON alone."""
    from lodarrow._bench import _docs

    a = report["args"]
    before = ""
    if a.get("before"):
        before = (f"; `before` is the checkout `{a['before']}` (built in place) at "
                  f"{_docs.revision_line(report.get('before_revision')).split(': ', 1)[1]}")
    out = [
        f"Measured with `{report['command']}` (`sequence_pool(x, \"max\")` over "
        f"{a['rows']:,} float32 rows in {a['sequences']:,} sequences, in a loop for "
        f"{a['seconds']:g} s per cell, each cell run {a['repeat']}x in rotated order, pooled; "
        f"`busy` is how many pure-Python busy loops ran beside it; `numpy reduceat` is "
        f"`np.maximum.reduceat` over the same sequences, a one-threaded C loop without "
        f"lodarrow or OpenMP; `threads` is what the thread policy gave at the end of each "
        f"run of the cell{before}).  {_docs.commit_and_machine(report)}.",
        "",
        "| variant | busy | threads | calls/s | p50 ms | p99 ms | max ms | p99 / p50 |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for c in report["cells"]:
        out.append(f"| {LABELS.get(c['variant'], c['variant'])} | {c['busy']} | {c['threads']} "
                   f"| {c['calls_s']:.0f} | {c['p50']:.3f} | {c['p99']:.3f} | {c['max']:.2f} "
                   f"| {c['p99'] / c['p50']:.1f} |")
    out += ["", *summary_lines(report)]
    return "\n".join(out) + "\n"


#: issue 35's target for a call's latency on a busy machine: p99 at most this times p50
P99_TARGET = 3.0


def summary_lines(report):
    """The ratios the prose is about, from the JSON."""
    cell = {(c["variant"], c["busy"]): c for c in report["cells"]}
    busy = sorted({c["busy"] for c in report["cells"]})

    def ratios(a, b, key="calls_s"):
        return ", ".join(f"{cell[(a, n)][key] / cell[(b, n)][key]:.2f} with {n} busy"
                         for n in busy if (a, n) in cell and (b, n) in cell)

    out = ["- calls/s of the default / of one thread (`LODARROW_NUM_THREADS=1`): "
           + ratios("default", "1 thread") + "."]
    if any(v == "before: default" for v, _ in cell):
        out.append("- the same before: " + ratios("before: default", "before: 1 thread") + ".")
        out.append("- calls/s of the default / before's default: "
                   + ratios("default", "before: default") + "; p50: "
                   + ratios("default", "before: default", "p50") + ".")
    if any(v == "before: default" for v, _ in cell):
        out.append("- p99 of before's default, then of the default: " + ", ".join(
            f"{cell[('before: default', n)]['p99']:.2f} then {cell[('default', n)]['p99']:.2f} "
            f"ms with {n} busy" for n in busy
            if ("before: default", n) in cell and ("default", n) in cell) + ".")

    def per_variant(what, fmt):
        return "; ".join(
            f"{NAMES[v]} " + ", ".join(
                f"{fmt(what(cell[(v, n)]))} with {n} busy" for n in busy if (v, n) in cell)
            for v in ("default", "1 thread", "numpy reduceat") if any((v, n) in cell
                                                                       for n in busy))

    out.append("- p99 / p50: " + per_variant(lambda c: c["p99"] / c["p50"],
                                             lambda x: f"{x:.1f}") + ".")
    out.append("- p99 - p50, the milliseconds the slowest 1% of calls add: " + per_variant(
        lambda c: c["p99"] - c["p50"], lambda x: f"{x:.2f}") + ".")
    met = []
    for n in busy:
        names = [NAMES[v] for v in ("default", "1 thread", "numpy reduceat")
                 if (v, n) in cell and cell[(v, n)]["p99"] <= P99_TARGET * cell[(v, n)]["p50"]]
        met.append(f"with {n} busy: " + (", ".join(names) if names else "none"))
    out.append(f"- issue 35's target, p99 within {P99_TARGET:g}x of p50, met "
               + "; ".join(met) + ".")
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--busy", default="0,2", help="competitor counts, comma-separated")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--sequences", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=1,
                        help="measure every cell this many times, in rotated order, pooled")
    parser.add_argument("--variant", action="append", default=[], type=parse_variant)
    parser.add_argument("--before", default=None,
                        help="another lodarrow checkout, built in place: the policy before")
    # no lodarrow here: a --child imports the checkout its PYTHONPATH names (--before's)
    parser.add_argument("--json", metavar="PATH", help="write every cell as JSON")
    parser.add_argument("--docs", metavar="FILE.md",
                        help="write this benchmark's block of that Markdown file")
    parser.add_argument("--from-json", metavar="PATH",
                        help="run nothing: --docs from the JSON of an earlier run")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--numpy", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args)
    from lodarrow._bench import _docs

    argv = list(sys.argv[1:] if argv is None else argv)
    report = _docs.report_of(args, lambda args: run(args, argv))
    if args.docs:
        _docs.write_block(args.docs, KEY, REGENERATE, markdown(report))


def run(args, argv):
    """Every cell; prints the table as it goes and returns the report (what --json keeps)."""
    from lodarrow._bench import _docs

    report = {"command": "python benchmarks/threads_under_load.py " + " ".join(argv),
              "revision": _docs.revision(ROOT),
              "before_revision": _docs.revision(args.before) if args.before else None,
              "machine": _docs.machine(("numpy", "lodarrow")),
              "args": {k: getattr(args, k) for k in ("seconds", "busy", "rows", "sequences",
                                                     "repeat", "before")},
              "variants": [[label, env] for label, env in args.variant], "cells": []}
    variants = [("default", {}, None), ("1 thread", {"LODARROW_NUM_THREADS": "1"}, None),
                ("numpy reduceat", {}, None)]
    variants += [(label, env, None) for label, env in args.variant]
    if args.before:
        variants = [("before: default", {}, args.before),
                    ("before: 1 thread", {"LODARROW_NUM_THREADS": "1"}, args.before)] + variants
    busy_counts = [int(b) for b in args.busy.split(",")]
    print(f"sequence_pool(max), {args.rows:,} float32 rows / {args.sequences:,} sequences, "
          f"{args.seconds:g} s a cell x {args.repeat}; {os.cpu_count()} CPUs, load average "
          f"before {os.getloadavg()[0]:.2f}")
    print(f"{'variant':<22} {'busy':>4} {'threads':>7} {'calls':>7} {'calls/s':>8} "
          f"{'p50 ms':>7} {'p99 ms':>7} {'max ms':>7} {'p99/p50':>7}")
    for busy in busy_counts:
        found = {label: [] for label, _, _ in variants}
        for k in range(args.repeat):
            for label, env, path in variants[k % len(variants):] + variants[:k % len(variants)]:
                found[label].append(measure(args, env, busy, path,
                                            numpy_reference=label == "numpy reduceat"))
        for label, _, _ in variants:
            r = summarize(found[label])
            report["cells"].append(dict(r, variant=label, busy=busy))
            print(f"{label:<22} {busy:>4} {r['threads']:>7} {r['calls']:>7} "
                  f"{r['calls_s']:>8.0f} {r['p50']:>7.3f} {r['p99']:>7.3f} {r['max']:>7.2f} "
                  f"{r['p99'] / r['p50']:>7.1f}", flush=True)
    print(f"load average after {os.getloadavg()[0]:.2f}")
    report["load_average_end"] = list(os.getloadavg())
    return report


if __name__ == "__main__":
    if "--child" not in sys.argv:  # a child imports the checkout its PYTHONPATH names
        sys.path.insert(0, ROOT)  # run from a checkout: its in-place build
    main()
