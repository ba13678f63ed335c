#!/usr/bin/env python
"""``pd.read_parquet`` of a lodarrow-style column: object columns against the Arrow backend.

    python benchmarks/pandas_read.py [--rows 20000] [--repeat 5] \
        [--json benchmarks/results/pandas_read.json --docs docs/tables.md]
    python benchmarks/pandas_read.py --from-json benchmarks/results/pandas_read.json \
        --docs docs/tables.md

Writes ``--rows`` rows of ``emb: list<fixed_size_list<float, 16>>`` (geometric sequence
lengths, mean 10) to a temporary Parquet file, then times ``pd.read_parquet(path)`` (object
columns of NumPy arrays: the feature dimension becomes arrays of 16 floats) and
``pd.read_parquet(path, dtype_backend="pyarrow")`` (``pd.ArrowDtype``: the column keeps its
``fixed_size_list`` type), best of ``--repeat`` each, in turn (docs/tables.md).

``--json PATH`` keeps the times with the commit, versions, CPU, load and command; ``--docs
FILE.md`` writes the block between ``<!-- generated: pandas-read, ... -->`` and ``<!-- end
generated: pandas-read -->`` of that file from the JSON (the rest is kept); ``--from-json
PATH`` writes that block (or prints it) from an earlier run's JSON without running anything.
"""

import argparse
import os
import shutil
import tempfile
import time

import numpy as np

KEY = "pandas-read"
REGENERATE = ("python benchmarks/pandas_read.py --from-json benchmarks/results/pandas_read.json "
              "--docs docs/tables.md")


def measure(args):
    """Both reads, in turn, best of ``args.repeat``; the report --json keeps."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    from lodarrow._bench import _docs

    command = _docs.command_line("benchmarks/pandas_read.py", args.argv, env=(), quote=False)
    report = {**_docs.run_record(command, ("numpy", "pyarrow", "pandas", "lodarrow")),
              "rows": args.rows, "repeat": args.repeat}
    rng = np.random.default_rng(0)
    lengths = rng.geometric(1 / 10, args.rows) - 1
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    values = rng.random(int(offsets[-1]) * 16, dtype=np.float32)
    emb = pa.ListArray.from_arrays(
        offsets, pa.FixedSizeListArray.from_arrays(pa.array(values), 16))
    tmp = tempfile.mkdtemp()
    try:
        path = os.path.join(tmp, "emb.parquet")
        pq.write_table(pa.table({"doc_id": np.arange(args.rows), "emb": emb}), path)
        reads = {"objects": lambda: pd.read_parquet(path),
                 "arrow": lambda: pd.read_parquet(path, dtype_backend="pyarrow")}
        times = {name: [] for name in reads}
        for _ in range(args.repeat):  # in turn: the machine's load falls on both alike
            for name, read in reads.items():
                t0 = time.perf_counter()
                read()
                times[name].append(time.perf_counter() - t0)
        report.update(vectors=int(offsets[-1]), file_bytes=os.path.getsize(path),
                      seconds=times,
                      object_item=type(reads["objects"]()["emb"].iloc[0][0]).__name__,
                      arrow_dtype=str(reads["arrow"]()["emb"].dtype))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    report["load_average_end"] = list(os.getloadavg())
    return report


def markdown(report):
    """The block of docs/tables.md, from the JSON alone."""
    from lodarrow._bench import _docs

    objects, arrow = min(report["seconds"]["objects"]), min(report["seconds"]["arrow"])
    head = (f"Measured by `{report['command']}`, started {report['started']}.  "
            f"{_docs.commit_and_machine(report)}.  "
            f"{report['rows']:,} rows of `emb: list<fixed_size_list<float32, 16>>` "
            f"({report['vectors']:,} vectors, {report['file_bytes'] / 1e6:.1f} MB on disk); "
            f"best of {report['repeat']}, the two reads in turn:")
    out = [head, "", "| read | column | ms |", "| --- | --- | ---: |",
           (f"| `pd.read_parquet(path)` | object, of `{report['object_item']}` items | "
            f"{objects * 1e3:.1f} |"),
           (f"| `pd.read_parquet(path, dtype_backend=\"pyarrow\")` | "
            f"`{report['arrow_dtype']}` | {arrow * 1e3:.1f} |"), ""]
    if arrow < objects:
        out.append(f"The Arrow backend read it in {arrow / objects:.2f} of the object "
                   f"columns' time ({objects / arrow:.1f}x faster).")
    else:
        out.append(f"The Arrow backend took {arrow / objects:.2f}x the object columns' time "
                   f"in this run.")
    return "\n".join(out) + "\n"


def main(argv=None):
    from lodarrow._bench import _docs

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=20000)
    p.add_argument("--repeat", type=int, default=5)
    _docs.block_main(p, argv, measure, markdown, KEY, REGENERATE, "write the times as JSON")


if __name__ == "__main__":
    main()
