"""Time to the first batch after a resume, against the first batch of a fresh epoch.

    python benchmarks/resume.py --sequences 10000000

An in-memory table of ``--sequences`` token sequences (lengths 1-32: the plan, not the data,
is what a resume recomputes), a token budget, ``--ranks`` ranks; rank 0 is timed.  Rows:
the loader made (lengths and epoch 0's plan), the first batch of a fresh epoch
(``set_epoch``), the first batch after ``load_state_dict`` of a state saved mid-epoch on the
same world, and after an elastic resume on half the ranks.  Best of ``--repeat``.
"""

import argparse
import json
import os
import time

import numpy as np
import pyarrow as pa

import lodarrow as la


def _best(fn, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sequences", type=int, default=10_000_000)
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 33, args.sequences)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    values = pa.array(np.zeros(offsets[-1], np.int32))
    table = pa.table({"ids": pa.LargeListArray.from_arrays(pa.array(offsets), values)})
    kw = dict(max_tokens=args.max_tokens, cost="packed", num_replicas=args.ranks, rank=0,
              balance="tokens", progress=False)

    t0 = time.perf_counter()
    loader = la.batch_loader(table, "ids", **kw)
    made = time.perf_counter() - t0
    steps = len(loader)
    loader.set_epoch(1, start_step=steps // 2)
    state = json.loads(json.dumps(loader.state_dict()))

    def fresh():
        loader.set_epoch(2 + len(times))  # a new epoch: a new plan
        times.append(1)
        next(iter(loader))

    def resumed():
        loader._plans.clear()  # as after a restart: no plan in memory
        loader.load_state_dict(state)
        next(iter(loader))

    half = dict(kw, num_replicas=max(args.ranks // 2, 1))
    elastic_loader = la.batch_loader(table, "ids", **half)

    def elastic():
        elastic_loader._plans.clear()
        elastic_loader.load_state_dict(state)
        next(iter(elastic_loader))

    times = []
    rows = [("loader made (lengths + epoch 0's plan)", made),
            ("first batch of a fresh epoch (set_epoch)", _best(fresh, args.repeat)),
            (f"first batch after load_state_dict at step {steps // 2} of {steps}",
             _best(resumed, args.repeat)),
            (f"first batch after an elastic resume ({args.ranks} -> {half['num_replicas']} "
             f"ranks)", _best(elastic, args.repeat))]
    load = os.getloadavg()[0]
    print(f"{args.sequences:,} sequences, {args.ranks} ranks, max_tokens={args.max_tokens}, "
          f"load average {load:.1f}, {os.cpu_count()} CPUs; best of {args.repeat}, seconds")
    print("| step | seconds |\n| --- | ---: |")
    for name, t in rows:
        print(f"| {name} | {t:.3f} |")


if __name__ == "__main__":
    main()
