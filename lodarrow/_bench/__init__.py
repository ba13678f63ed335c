"""The benchmark suite behind ``python -m lodarrow bench`` (benchmarks/README.md).

``_workloads`` generates the data (fixed seed), ``_peers`` holds one small function per peer per
operator, ``_cases`` pairs each lodarrow call with its peers and the bytes it must move,
``_runner`` times them (median and best, GB/s, ratio to the best peer, peak memory, the
machine's memory bandwidth) and ``_report`` prints and saves the results.  Nothing here is
imported by ``import lodarrow``; the peers (polars, Awkward Array, numba) and the report
libraries (rich, matplotlib) come from the ``bench`` extra and are imported lazily.
"""
