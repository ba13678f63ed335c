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
competitors), and pools the calls: calls/s is all calls over all the cells' seconds.  ``--before PATH`` runs the two default
variants again with another lodarrow checkout (built in place) first on ``PYTHONPATH``: the
policy before a change, side by side in the same run.  The machine's load average is printed
with the table, since other work on the machine moves every figure.
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
    return json.loads(out.strip().splitlines()[-1])


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
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--numpy", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args)
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
            print(f"{label:<22} {busy:>4} {r['threads']:>7} {r['calls']:>7} "
                  f"{r['calls_s']:>8.0f} {r['p50']:>7.3f} {r['p99']:>7.3f} {r['max']:>7.2f} "
                  f"{r['p99'] / r['p50']:>7.1f}", flush=True)
    print(f"load average after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
