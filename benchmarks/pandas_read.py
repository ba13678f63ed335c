#!/usr/bin/env python
"""``pd.read_parquet`` of a lodarrow-style column: object columns against the Arrow backend.

    python benchmarks/pandas_read.py [ROWS]

Writes ``ROWS`` (default 20000) rows of ``emb: list<fixed_size_list<float, 16>>`` (geometric
sequence lengths, mean 10) to a temporary Parquet file, then times ``pd.read_parquet(path)``
(object columns of NumPy arrays: the feature dimension becomes arrays of 16 floats) and
``pd.read_parquet(path, dtype_backend="pyarrow")`` (``pd.ArrowDtype``: the column keeps its
``fixed_size_list`` type), best of 5 each, and prints both and their ratio (docs/tables.md).
"""

import os
import sys
import tempfile
import time

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq


def best(fn, repeat=5):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main(rows=20000):
    rng = np.random.default_rng(0)
    lengths = rng.geometric(1 / 10, rows) - 1
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    values = rng.random(int(offsets[-1]) * 16, dtype=np.float32)
    emb = pa.ListArray.from_arrays(
        offsets, pa.FixedSizeListArray.from_arrays(pa.array(values), 16))
    path = os.path.join(tempfile.mkdtemp(), "emb.parquet")
    pq.write_table(pa.table({"doc_id": np.arange(rows), "emb": emb}), path)
    objects = best(lambda: pd.read_parquet(path))
    arrow = best(lambda: pd.read_parquet(path, dtype_backend="pyarrow"))
    df = pd.read_parquet(path, dtype_backend="pyarrow")
    print(f"{rows} rows, {int(offsets[-1])} vectors of 16 float32, "
          f"{os.path.getsize(path) / 1e6:.1f} MB on disk; pandas {pd.__version__}, "
          f"pyarrow {pa.__version__}")
    print(f"  pd.read_parquet(path)                          {objects * 1e3:8.1f} ms "
          f"(object column: {type(pd.read_parquet(path)['emb'].iloc[0][0]).__name__} items)")
    print(f"  pd.read_parquet(path, dtype_backend='pyarrow') {arrow * 1e3:8.1f} ms "
          f"({df['emb'].dtype})")
    print(f"  the Arrow backend is {objects / arrow:.1f}x faster")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20000)
