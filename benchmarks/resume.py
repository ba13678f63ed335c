"""Time to the first batch after a resume, against the first batch of a fresh epoch.

    python benchmarks/resume.py [--sequences 10000000] [--ranks 8] [--max-tokens 4096]
        [--repeat 3] [--json benchmarks/results/resume.json] [--docs benchmarks/README.md]
    python benchmarks/resume.py --from-json benchmarks/results/resume.json \\
        --docs benchmarks/README.md

An in-memory table of ``--sequences`` token sequences (lengths 1-32: the plan, not the data,
is what a resume recomputes), a token budget, ``--ranks`` ranks; rank 0 is timed.  Rows:
the loader made (lengths and epoch 0's plan), the first batch of a fresh epoch
(``set_epoch``), the first batch after ``load_state_dict`` of a state saved mid-epoch on the
same world, and after an elastic resume on half the ranks.  Best of ``--repeat``.

The JSON holds the command, the commit measured, the machine (CPU model, cores, versions, load
average before and after), the settings and every sample; ``--docs`` rewrites the ``resume``
block of the Markdown file (benchmarks/README.md, section "Resume") between its markers
(lodarrow/_bench/_docs.py); ``--from-json`` writes it again without measuring.
"""

import argparse
import json
import os
import sys
import time

import numpy as np
import pyarrow as pa

import lodarrow as la
from lodarrow._bench._docs import (add_output_options, command_line, publish, report_of,
                                   run_header, run_record, utc_now)

BLOCK = "resume"
FROM_JSON = ("python benchmarks/resume.py --from-json benchmarks/results/resume.json "
             "--docs benchmarks/README.md")


def _samples(fn, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sequences", type=int, default=10_000_000)
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=3)
    add_output_options(ap, json=None, docs="rewrite the resume block of this Markdown file",
                       from_json=None)
    args = ap.parse_args(argv)
    args.argv = [str(a) for a in argv]
    return args


def measure(args):
    report = {**run_record(command_line("benchmarks/resume.py", args.argv)),
              "settings": {"sequences": args.sequences, "ranks": args.ranks,
                           "max_tokens": args.max_tokens, "repeat": args.repeat,
                           "cost": "packed", "balance": "tokens", "rank": 0,
                           "lengths": [1, 32],
                           "LODARROW_NUM_THREADS": os.environ.get("LODARROW_NUM_THREADS")}}
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
    epochs = iter(range(2, 2 + args.repeat))

    def fresh():
        loader.set_epoch(next(epochs))  # a new epoch: a new plan
        next(iter(loader))

    def resumed():
        loader._plans.clear()  # as after a restart: no plan in memory
        loader.load_state_dict(state)
        next(iter(loader))

    half = max(args.ranks // 2, 1)
    elastic_loader = la.batch_loader(table, "ids", **dict(kw, num_replicas=half))

    def elastic():
        elastic_loader._plans.clear()
        elastic_loader.load_state_dict(state)
        next(iter(elastic_loader))

    report["steps"], report["resume_step"], report["elastic_ranks"] = steps, steps // 2, half
    report["rows"] = [{"what": "made", "samples": [made]},
                      {"what": "fresh", "samples": _samples(fresh, args.repeat)},
                      {"what": "resumed", "samples": _samples(resumed, args.repeat)},
                      {"what": "elastic", "samples": _samples(elastic, args.repeat)}]
    report["finished"] = utc_now()
    report["load_at_end"] = os.getloadavg()[0]
    return report


def _label(report, what):
    return {"made": "loader made (lengths + epoch 0's plan)",
            "fresh": "first batch of a fresh epoch (`set_epoch`)",
            "resumed": (f"first batch after `load_state_dict` at step {report['resume_step']:,} "
                        f"of {report['steps']:,}"),
            "elastic": (f"first batch after an elastic resume ({report['settings']['ranks']} "
                        f"-> {report['elastic_ranks']} ranks)")}[what]


def markdown(report):
    """The ``resume`` block: the run, the table (best of the samples) and the ratios."""
    s = report["settings"]
    best = {r["what"]: min(r["samples"]) for r in report["rows"]}
    lines = run_header(report) + [
             f"An in-memory table of {s['sequences']:,} sequences of {s['lengths'][0]}-"
             f"{s['lengths'][1]} tokens, token budget {s['max_tokens']:,} {s['cost']}, "
             f"{s['ranks']} ranks, `balance=\"{s['balance']}\"`, rank {s['rank']}; best of "
             f"{s['repeat']} (the loader made: once), seconds:", "",
             "| step | seconds |", "| --- | ---: |"]
    for r in report["rows"]:
        lines.append(f"| {_label(report, r['what'])} | {best[r['what']]:.3f} |")
    lines += ["", f"A resume on the same world took {best['resumed'] / best['fresh']:.2f}x the "
                  f"first batch of a fresh epoch; an elastic resume "
                  f"{best['elastic'] / best['fresh']:.2f}x."]
    return "\n".join(lines) + "\n"


def main(argv=None):
    args = parse(sys.argv[1:] if argv is None else argv)
    report = report_of(args, measure)
    text = markdown(report)
    publish(args, text, [("docs", BLOCK, FROM_JSON, text)])
    return report


if __name__ == "__main__":
    main()
