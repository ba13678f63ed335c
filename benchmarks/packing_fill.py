#!/usr/bin/env python
"""How full packed rows are: best-fit decreasing within windows of consecutive sequences.

    LODARROW_NUM_THREADS=1 python benchmarks/packing_fill.py [--sequences 1000000] \
        [--row-length 4096] [--repeat 3] \
        [--json benchmarks/results/packing_fill.json --docs docs/training.md]
    python benchmarks/packing_fill.py --from-json benchmarks/results/packing_fill.json \
        --docs docs/training.md

The packing of ``mode="packed_rows"`` (docs/training.md#packing-rows): lodarrow's
``pack_placement`` puts each window's sequences, longest first, into the fullest row of
``--row-length`` slots they fit.  For ``--sequences`` lognormal lengths of mean 300 (sigma
0.5 and 1.0, clipped to [1, row length]) and windows of 128 to 16,384 sequences and all of
them, it records the rows made, the share of slots holding tokens, the share of the empty
slots that lie in each window's emptiest row, and the seconds of the packing (best of
``--repeat``, on the threads ``LODARROW_NUM_THREADS`` allows).  The shares do not depend on
the machine; the seconds do.

``--json PATH`` keeps every cell with the commit, versions, CPU, load and command;
``--docs FILE.md`` writes the block between ``<!-- generated: packing-fill, ... -->`` and
``<!-- end generated: packing-fill -->`` of that file from the JSON (the rest is kept);
``--from-json PATH`` writes that block (or prints it) from an earlier run's JSON without
running anything.

``pack_placement`` is lodarrow's private function: this script follows it, it is not an API.
"""

import argparse
import os
import sys
import time

import numpy as np

KEY = "packing-fill"
REGENERATE = ("python benchmarks/packing_fill.py --from-json benchmarks/results/packing_fill.json "
              "--docs docs/training.md")
SIGMAS = (0.5, 1.0)
WINDOWS = (128, 256, 512, 1024, 4096, 16384, None)
MEAN = 300


def lengths_of(n, sigma, row_length, seed=0):
    """``n`` lognormal lengths of mean ``MEAN`` (before clipping to [1, row_length])."""
    rng = np.random.default_rng(seed)
    mu = np.log(MEAN) - sigma * sigma / 2
    return np.clip(rng.lognormal(mu, sigma, n), 1, row_length).astype(np.int64)


def fill(lengths, placement, window):
    """``(rows, slots holding tokens, share of the empty slots in each window's emptiest
    row)`` of a placement."""
    n_rows, row_length = placement.n_rows, placement.row_length
    per_row = np.bincount(placement.row, weights=placement.length, minlength=n_rows)
    empty = row_length - per_row
    # rows are numbered window after window: a window's first row is its first item's
    w = window or len(lengths)
    first_items = np.flatnonzero(np.diff(placement.seq // w, prepend=-1) != 0)
    starts = placement.row[first_items]
    worst = np.maximum.reduceat(empty, starts).sum()
    total = empty.sum()
    return (int(n_rows), float(lengths.sum() / (n_rows * row_length)),
            float(worst / total) if total else 1.0)


def measure(args):
    """Every (sigma, window) cell; the report --json keeps."""
    from lodarrow._bench import _docs
    from lodarrow._threads import num_threads
    from lodarrow._training._collate import pack_placement

    command = _docs.command_line("benchmarks/packing_fill.py", args.argv, env=(), quote=False)
    report = {**_docs.run_record(command),
              "settings": {"LODARROW_NUM_THREADS": os.environ.get("LODARROW_NUM_THREADS")},
              "threads": num_threads(), "sequences": args.sequences,
              "row_length": args.row_length, "repeat": args.repeat, "mean": MEAN,
              "cells": []}
    for sigma in SIGMAS:
        lengths = lengths_of(args.sequences, sigma, args.row_length)
        for window in WINDOWS:
            seconds = []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                placement = pack_placement(lengths, args.row_length, window=window)
                seconds.append(time.perf_counter() - t0)
            rows, full, worst = fill(lengths, placement, window)
            report["cells"].append({"sigma": sigma, "window": window, "rows": rows,
                                    "filled": full, "emptiest_share": worst,
                                    "tokens": int(lengths.sum()), "seconds": seconds})
            print(f"sigma {sigma} window {window}: {full:.2%} of {rows:,} rows, "
                  f"{min(seconds):.3f} s", file=sys.stderr)
    report["load_average_end"] = list(os.getloadavg())
    return report


def _window(w, n):
    return f"all {n:,}" if w is None else f"{w:,}"


def _pct(x):
    """A share as the table prints it: enough digits to tell 99.95% from 100%."""
    for digits in (1, 2, 3, 4):
        text = f"{x:.{digits}%}"
        if x >= 1 or not text.startswith("100."):
            break
    return text


def markdown(report):
    """The block of docs/training.md ("Packing rows"), from the JSON alone."""
    from lodarrow._bench import _docs

    n, cells = report["sequences"], report["cells"]
    head = (f"Measured by `{report['command']}`, started {report['started']}.  "
            f"{_docs.commit_and_machine(report)}.  "
            f"{n:,} lognormal lengths of mean {report['mean']} (before clipping to [1, "
            f"{report['row_length']:,}]), rows of {report['row_length']:,} slots, each window "
            f"of consecutive sequences packed on its own; seconds: the best of "
            f"{report['repeat']}, on {report['threads']} thread(s).")
    out = [head, "",
           ("| sigma | window (sequences) | rows | slots holding tokens | empty slots in each "
            "window's emptiest row | seconds |"),
           "| ---: | ---: | ---: | ---: | ---: | ---: |"]
    for c in cells:
        out.append(f"| {c['sigma']:g} | {_window(c['window'], n)} | {c['rows']:,} | "
                   f"{_pct(c['filled'])} | {c['emptiest_share']:.0%} | "
                   f"{min(c['seconds']):.3f} |")
    out.append("")
    lo = min(cells, key=lambda c: c["filled"])
    hi = max(cells, key=lambda c: c["filled"])
    shares = [c["emptiest_share"] for c in cells if c["window"] is not None]
    sizes = [c["window"] for c in cells if c["window"] is not None]
    seconds = [min(c["seconds"]) for c in cells if c["window"] is None]
    out.append(f"Slots holding tokens: from {_pct(lo['filled'])} (sigma {lo['sigma']:g}, "
               f"window {_window(lo['window'], n)}) to {_pct(hi['filled'])} (sigma "
               f"{hi['sigma']:g}, window {_window(hi['window'], n)}).  With windows of "
               f"{min(sizes):,} to {max(sizes):,} sequences, each window's emptiest row holds "
               f"{min(shares):.0%}-{max(shares):.0%} of the empty slots.  "
               f"Packing all {n:,} sequences as one window took "
               + " and ".join(f"{s:.2f} s" for s in seconds) + " (sigma "
               + " and ".join(f"{c['sigma']:g}" for c in cells if c["window"] is None) + ").")
    return "\n".join(out) + "\n"


def main(argv=None):
    from lodarrow._bench import _docs

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sequences", type=int, default=1_000_000)
    p.add_argument("--row-length", type=int, default=4096)
    p.add_argument("--repeat", type=int, default=3)
    _docs.block_main(p, argv, measure, markdown, KEY, REGENERATE, "write every cell as JSON")


if __name__ == "__main__":
    main()
