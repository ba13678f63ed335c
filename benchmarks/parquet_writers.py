#!/usr/bin/env python
"""Every Parquet writer lodarrow could use, on the bench's tables, side by side in one run.

The writers ``write_parquet`` chose between (docs/performance.md#parquet-writes): pyarrow with
its defaults, pyarrow with lodarrow's settings for LoDTensor columns (no dictionary, no
statistics), polars' Rust writer, DuckDB's parallel ``COPY``, and ``lodarrow.write_parquet``
itself.  Each file is read back by pyarrow and compared with pyarrow's.

    python benchmarks/parquet_writers.py [--repeat 5]
"""

import argparse
import os
import tempfile
import time

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

import lodarrow as la


def table(d, n_values, seed=0):
    """``list<float32>`` (d=1) or ``list<fixed_size_list<float32, d>>``: lengths 0..16."""
    rng = np.random.default_rng(seed)
    n = n_values // 8
    off = np.zeros(n + 1, np.int64)
    np.cumsum(rng.integers(0, 17, n), out=off[1:])
    values = pa.array(rng.random(int(off[-1]) * d, dtype=np.float32))
    inner = values if d == 1 else pa.FixedSizeListArray.from_arrays(values, d)
    return pa.table({"data": pa.ListArray.from_arrays(pa.array(off.astype(np.int32)), inner)})


def writers(t, tensor):
    con = duckdb.connect()
    con.register("t", t)
    return {
        "pyarrow, defaults": lambda p: pq.write_table(t, p),
        "pyarrow, lodarrow's settings": lambda p: pq.write_table(
            t, p, use_dictionary=False, write_statistics=False),
        "polars (snappy, no statistics)": lambda p: pl.from_arrow(t, rechunk=False).write_parquet(
            p, compression="snappy", statistics=False),
        "duckdb COPY": lambda p: con.execute(f"COPY (SELECT * FROM t) TO '{p}' (FORMAT parquet)"),
        "lodarrow.write_parquet (engine='pyarrow')": lambda p: la.write_parquet(
            tensor, p, engine="pyarrow"),
        "lodarrow.write_parquet (engine='auto': polars)": lambda p: la.write_parquet(tensor, p),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    tmp = tempfile.mkdtemp()
    print(f"load average at the start: {os.getloadavg()[0]:.1f}")
    print("| table | writer | best ms | GB/s | x polars | pyarrow reads back |")
    print("| --- | --- | ---: | ---: | ---: | --- |")
    for d, n_values in ((1, 10_000_000), (16, 1_000_000)):
        t = table(d, n_values)
        tensor = la.from_arrow(t.column("data"), lod_level=1)
        ref = os.path.join(tmp, "ref.parquet")
        pq.write_table(t, ref)
        expect = pq.read_table(ref).column(0)
        times = {}
        for name, write in writers(t, tensor).items():
            path = os.path.join(tmp, "out.parquet")
            best = float("inf")
            for _ in range(args.repeat):
                start = time.perf_counter()
                write(path)
                best = min(best, time.perf_counter() - start)
            times[name] = best
            back = pq.read_table(path).column(0)
            same = "same type and values" if back.equals(expect) else (
                f"values equal as {back.type}" if back.cast(expect.type).equals(expect)
                else "DIFFERENT")
            times[name] = (best, same)
        polars = times["polars (snappy, no statistics)"][0]
        for name, (best, same) in times.items():
            print(f"| D={d}, {n_values:.0e} values | {name} | {best * 1e3:.1f} | "
                  f"{t.nbytes / best / 1e9:.2f} | {best / polars:.2f} | {same} |")
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
