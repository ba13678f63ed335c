#!/usr/bin/env python
"""A threaded kernel in a loop on an idle and on a busy machine: calls/s, p50, p99, max.

    python benchmarks/threads_under_load.py [--seconds 8] [--busy 0,2] [--rows 1000000]
        [--sequences 100000] [--variant "LABEL:VAR=VALUE ..."]... [--before PATH]

The call is ``la.sequence_pool(x, "max")`` over ``--rows`` float32 rows in ``--sequences``
sequences (10^6 / 10^5: issue 35's loop), repeated for ``--seconds``; each call is timed
with ``time.perf_counter``.  Every measurement runs in a fresh interpreter (OpenMP reads its
environment once, at load), while ``--busy`` other processes keep CPUs busy (a pure Python
loop each, started before the measurement and ended after it); ``0`` is the machine as it is.

The variants: ``default`` (lodarrow's own thread policy) and ``1 thread``
(``LODARROW_NUM_THREADS=1``), plus any ``--variant "LABEL:VAR=VALUE ..."`` (environment
settings, e.g. ``"passive:OMP_WAIT_POLICY=passive"``).  ``--before PATH`` runs the two default
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
    x = la.LoDTensor(rng.random(args.rows, dtype=np.float32), lod=[offsets.tolist()])
    for _ in range(20):  # warm-up: threads started, pool pages mapped
        la.sequence_pool(x, "max")
    times = []
    clock = time.perf_counter
    start = clock()
    end = start + args.seconds
    while True:
        t0 = clock()
        la.sequence_pool(x, "max")
        t1 = clock()
        times.append(t1 - t0)
        if t1 >= end:
            break
    print(json.dumps({"times": times, "wall": clock() - start, "threads": threads_for(args.rows),
                      "file": la.__file__}))


def measure(args, env_extra, busy, pythonpath):
    """Run one child with ``busy`` competitors; returns its summary dict."""
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
        out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    finally:
        for p in competitors:
            p.terminate()
        for p in competitors:
            p.join()
    found = json.loads(out.strip().splitlines()[-1])
    times = sorted(found["times"])
    n = len(times)
    return {"calls": n, "calls_s": n / found["wall"], "p50": times[n // 2] * 1e3,
            "p99": times[min(n - 1, int(n * 0.99))] * 1e3, "max": times[-1] * 1e3,
            "threads": found["threads"], "file": found["file"]}


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
    parser.add_argument("--variant", action="append", default=[], type=parse_variant)
    parser.add_argument("--before", default=None,
                        help="another lodarrow checkout, built in place: the policy before")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args)
    variants = [("default", {}, None), ("1 thread", {"LODARROW_NUM_THREADS": "1"}, None)]
    variants += [(label, env, None) for label, env in args.variant]
    if args.before:
        variants = [("before: default", {}, args.before),
                    ("before: 1 thread", {"LODARROW_NUM_THREADS": "1"}, args.before)] + variants
    busy_counts = [int(b) for b in args.busy.split(",")]
    print(f"sequence_pool(max), {args.rows:,} float32 rows / {args.sequences:,} sequences, "
          f"{args.seconds:g} s a cell; {os.cpu_count()} CPUs, load average before "
          f"{os.getloadavg()[0]:.2f}")
    print(f"{'variant':<22} {'busy':>4} {'threads':>7} {'calls':>7} {'calls/s':>8} "
          f"{'p50 ms':>7} {'p99 ms':>7} {'max ms':>7} {'p99/p50':>7}")
    for busy in busy_counts:
        for label, env, path in variants:
            r = measure(args, env, busy, path)
            print(f"{label:<22} {busy:>4} {r['threads']:>7} {r['calls']:>7} "
                  f"{r['calls_s']:>8.0f} {r['p50']:>7.3f} {r['p99']:>7.3f} {r['max']:>7.2f} "
                  f"{r['p99'] / r['p50']:>7.1f}", flush=True)
    print(f"load average after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
