#!/usr/bin/env python
"""Every Parquet writer lodarrow could use, on the bench's tables, side by side in one run.

The writers ``write_parquet`` chose between (docs/performance.md#parquet-writes): pyarrow with
its defaults, pyarrow with lodarrow's settings for LoDTensor columns (no dictionary, no
statistics), polars' Rust writer (with its own row groups and with pyarrow's 2**20 rows),
DuckDB's parallel ``COPY``, and ``lodarrow.write_parquet`` itself, with its pyarrow writer also
without compression and with zstd (polars' default) in place of snappy.  Each file is read
back by pyarrow and compared with pyarrow's; its size on disk is kept.

    python benchmarks/parquet_writers.py [--repeat 5] \\
        --json benchmarks/results/parquet_writers.json --docs docs/performance.md
    python benchmarks/parquet_writers.py \\
        --from-json benchmarks/results/parquet_writers.json --docs docs/performance.md

``--json`` keeps everything measured with the commit, versions, CPU, load and command;
``--docs`` writes the block between ``<!-- generated: parquet-writers, ... -->`` and
``<!-- end generated: parquet-writers -->`` of that Markdown file from the JSON (the rest of
the file is kept); ``--from-json`` rewrites that block from an earlier run's JSON without
running anything.  tests/test_bench_docs.py checks docs/performance.md against the committed
JSON.
"""

import argparse
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KEY = "parquet-writers"
REGENERATE = ("python benchmarks/parquet_writers.py --from-json "
              "benchmarks/results/parquet_writers.json --docs docs/performance.md")

#: The writers, in the table's order: (key, label in the docs).
WRITERS = (
    ("pyarrow", "pyarrow, defaults"),
    ("pyarrow-lodarrow", "pyarrow, lodarrow's settings (no dictionary, no statistics)"),
    ("polars", "polars (snappy, no statistics)"),
    ("polars-2**20", "polars, pyarrow's row groups (`row_group_size=2**20`)"),
    ("duckdb", "DuckDB `COPY`"),
    ("la-pyarrow", "`la.write_parquet(engine=\"pyarrow\")`"),
    ("la-auto", "`la.write_parquet()` (engine=\"auto\": polars)"),
    ("la-pyarrow-none", "`la.write_parquet(engine=\"pyarrow\", compression=\"none\")`"),
    ("la-pyarrow-zstd", "`la.write_parquet(engine=\"pyarrow\", compression=\"zstd\")`"),
)
TABLES = ((1, 10_000_000), (16, 1_000_000))


def table(d, n_values, seed=0):
    """``list<float32>`` (d=1) or ``list<fixed_size_list<float32, d>>``: lengths 0..16."""
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    n = n_values // 8
    off = np.zeros(n + 1, np.int64)
    np.cumsum(rng.integers(0, 17, n), out=off[1:])
    values = pa.array(rng.random(int(off[-1]) * d, dtype=np.float32))
    inner = values if d == 1 else pa.FixedSizeListArray.from_arrays(values, d)
    return pa.table({"data": pa.ListArray.from_arrays(pa.array(off.astype(np.int32)), inner)})


def writers(t, tensor):
    import duckdb
    import polars as pl
    import pyarrow.parquet as pq

    import lodarrow as la

    con = duckdb.connect()
    con.register("t", t)
    fns = {
        "pyarrow": lambda p: pq.write_table(t, p),
        "pyarrow-lodarrow": lambda p: pq.write_table(
            t, p, use_dictionary=False, write_statistics=False),
        "polars": lambda p: pl.from_arrow(t, rechunk=False).write_parquet(
            p, compression="snappy", statistics=False),
        "polars-2**20": lambda p: pl.from_arrow(t, rechunk=False).write_parquet(
            p, compression="snappy", statistics=False, row_group_size=2**20),
        "duckdb": lambda p: con.execute(f"COPY (SELECT * FROM t) TO '{p}' (FORMAT parquet)"),
        "la-pyarrow": lambda p: la.write_parquet(tensor, p, engine="pyarrow"),
        "la-auto": lambda p: la.write_parquet(tensor, p),
        "la-pyarrow-none": lambda p: la.write_parquet(tensor, p, engine="pyarrow",
                                                      compression="none"),
        "la-pyarrow-zstd": lambda p: la.write_parquet(tensor, p, engine="pyarrow",
                                                      compression="zstd"),
    }
    return [(key, fns[key]) for key, _ in WRITERS]


def run(args):
    import pyarrow.parquet as pq

    import lodarrow as la
    from lodarrow._bench import _docs

    command = _docs.command_line("benchmarks/parquet_writers.py", args.argv, env=(), quote=False)
    report = {**_docs.run_record(command, ("numpy", "pyarrow", "polars", "duckdb", "lodarrow"),
                                 root=ROOT, seconds=True),
              "repeat": args.repeat, "tables": []}
    print(f"load average at the start: {report['machine']['load_average'][0]:.1f}",
          file=sys.stderr)
    tmp = tempfile.mkdtemp()
    for d, n_values in TABLES:
        t = table(d, n_values)
        tensor = la.from_arrow(t.column("data"), lod_level=1)
        ref = os.path.join(tmp, "ref.parquet")
        pq.write_table(t, ref)
        expect = pq.read_table(ref).column(0)
        rows = []
        for key, write in writers(t, tensor):
            path = os.path.join(tmp, "out.parquet")
            samples = []
            for _ in range(args.repeat):
                start = time.perf_counter()
                write(path)
                samples.append(time.perf_counter() - start)
            back = pq.read_table(path).column(0)
            if back.equals(expect):
                same = "same type and values"
            elif back.cast(expect.type).equals(expect):
                same = f"values equal as `{back.type}`"
            else:
                same = "DIFFERENT"
            rows.append({"writer": key, "samples_s": samples, "best_s": min(samples),
                         "reads_back": same, "bytes_on_disk": os.path.getsize(path)})
            print(f"D={d} {key}: {min(samples) * 1e3:.1f} ms, {same}", file=sys.stderr)
        report["tables"].append({"d": d, "values": n_values, "nbytes": t.nbytes, "rows": rows})
    try:
        report["load_average_end"] = list(os.getloadavg())
    except OSError:
        report["load_average_end"] = None
    return report


def _table_name(t):
    return f"D={t['d']}, {t['values']:.0e} values".replace("e+0", "e")


def markdown(report):
    """The block of docs/performance.md, from the JSON alone."""
    from lodarrow._bench import _docs

    labels = dict(WRITERS)
    out = [
        f"Every option measured side by side in one run of `{report['command']}` (best of "
        f"{report['repeat']}; the bench's tables: lengths 0-16, float32 values, `list<float>` "
        f"and `list<fixed_size_list<float, 16>>`), started {report['started']}.  "
        f"{_docs.commit_and_machine(report)}: other processes share "
        f"this machine, so compare within the run.",
        "",
        "| table | writer | best ms | GB/s | x polars | MB on disk | pyarrow reads back |",
        "| --- | --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for t in report["tables"]:
        best = {r["writer"]: r["best_s"] for r in t["rows"]}
        for r in t["rows"]:
            out.append(f"| {_table_name(t)} | {labels[r['writer']]} | {r['best_s'] * 1e3:.1f} | "
                       f"{t['nbytes'] / r['best_s'] / 1e9:.2f} | "
                       f"{r['best_s'] / best['polars']:.2f} | "
                       f"{r['bytes_on_disk'] / 1e6:.1f} | {r['reads_back']} |")
    out.append("")
    out += summary_lines(report)
    return "\n".join(out) + "\n"


def summary_lines(report):
    """The figures the prose leans on, written from the JSON."""
    def per_table(fn):
        return "; ".join(f"{fn({r['writer']: r['best_s'] for r in t['rows']}):.2f} on "
                         f"{_table_name(t)}" for t in report["tables"])

    d1 = next(t for t in report["tables"] if t["d"] == 1)
    b1 = {r["writer"]: r["best_s"] for r in d1["rows"]}
    slowest = "; ".join(
        f"{dict(WRITERS)[max(t['rows'], key=lambda r: r['best_s'])['writer']]} on "
        f"{_table_name(t)}" for t in report["tables"])
    def sizes(t):
        return {r["writer"]: r["bytes_on_disk"] for r in t["rows"]}

    codecs = "; ".join(
        f"{_table_name(t)}: no compression {b['la-pyarrow-none'] / b['la-pyarrow']:.2f} the "
        f"time and {z['la-pyarrow-none'] / z['la-pyarrow']:.2f} the bytes, zstd "
        f"{b['la-pyarrow-zstd'] / b['la-pyarrow']:.2f} the time and "
        f"{z['la-pyarrow-zstd'] / z['la-pyarrow']:.2f} the bytes"
        for t in report["tables"]
        for b, z in [({r["writer"]: r["best_s"] for r in t["rows"]}, sizes(t))])
    return [
        "- pyarrow's writer with its defaults / polars' time: "
        + per_table(lambda b: b["pyarrow"] / b["polars"]) + ".",
        "- pyarrow's writer with its defaults (dictionary tried, statistics) / with "
        "lodarrow's settings: " + per_table(lambda b: b["pyarrow"] / b["pyarrow-lodarrow"])
        + ".",
        "- `la.write_parquet(engine=\"pyarrow\")` without compression and with zstd, against "
        "its snappy: " + codecs + ".",
        "- `la.write_parquet()`'s time / `la.write_parquet(engine=\"pyarrow\")`'s: "
        + per_table(lambda b: b["la-auto"] / b["la-pyarrow"]) + ".",
        "- `la.write_parquet(engine=\"pyarrow\")`'s time / pyarrow's writer with lodarrow's "
        "settings called directly (the same options; `la.write_parquet` also makes the Arrow "
        "column from the LoDTensor and writes the lengths footer entry): "
        + per_table(lambda b: b["la-pyarrow"] / b["pyarrow-lodarrow"]) + ".",
        "- DuckDB's `COPY` / polars' time: " + per_table(lambda b: b["duckdb"] / b["polars"])
        + ".  The slowest writer: " + slowest + ".",
        f"- polars with pyarrow's row groups of 2**20 rows on {_table_name(d1)}: "
        f"{b1['polars-2**20'] * 1e3:.1f} ms, against {b1['polars'] * 1e3:.1f} ms with its own.",
    ]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    from lodarrow._bench import _docs

    _docs.add_output_options(parser, metavars=True, json="write everything measured as JSON",
                             docs=None, from_json="run nothing: --docs from the JSON of an "
                             "earlier run")
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    text = markdown(_docs.report_of(args, run))
    _docs.publish(args, text, [("docs", KEY, REGENERATE, text)])


if __name__ == "__main__":
    sys.path.insert(0, ROOT)  # run from a checkout: its in-place build
    main()
