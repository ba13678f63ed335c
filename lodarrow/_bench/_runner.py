"""Timing: median and best over repeats, GB/s, ratio to the best peer, peak memory, bandwidth.

Method
------
* Every implementation is called once untimed (the warm-up, which also JIT-compiles numba
  kernels); that result is checked against lodarrow's before anything is timed, and a peer
  whose answer differs is reported as wrong and not timed.
* Timing: ``time.perf_counter`` around ``number`` calls (``number`` chosen so one sample
  lasts >= 2 ms, for the microsecond-scale calls), garbage collection off, repeated until
  the time budget is spent (3 to 30 samples, or ``--repeat`` exactly).  Median and best are
  per call; GB/s and the ratio to the best peer use the best time (the machine is shared:
  slower samples measure the neighbours, as timeit's documentation says).
* Peak memory: one more untimed call, measured two ways and reported as the larger:
  ``tracemalloc``'s peak (NumPy registers its buffers with it, so it sees lodarrow, NumPy,
  Awkward and numba allocations exactly; plus what Arrow's pool still holds for the result,
  where lodarrow's large outputs live) and, on Linux, the rise of the process's peak
  resident set (``VmHWM``, reset through ``/proc/self/clear_refs``), which also sees
  memory from Arrow's and polars' own allocators.  The result of the call is alive when
  measured, so the figure includes the output.  Memory an allocator reuses without returning
  it to the OS is invisible to the second method, so figures for polars/pyarrow are lower
  bounds.
* Bandwidth: NumPy reads (``np.add.reduce``) and copies (``np.copyto``, read + write bytes
  counted) of a 1 GiB float64 array, on one thread and on two (each thread taking half);
  the best of 3.  The reference for "% of bandwidth" is the best of the four figures.
"""

import dataclasses
import gc
import os
import statistics
import sys
import tempfile
import time
import tracemalloc
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from lodarrow._bench import _cases, _hub, _peers, _workloads
from lodarrow._bench._cases import wanted as _wanted
# Importing a library's peers module registers its peers with _peers.
from lodarrow._bench import (_peers_awkward, _peers_numba, _peers_numpy,  # noqa: F401
                             _peers_polars, _peers_pyarrow)
from lodarrow._progress import task_progress
from lodarrow._threads import num_threads

__all__ = ["BenchOptions", "run_bench", "probe_bandwidth", "peak_memory", "time_call",
           "machine_info"]


@dataclasses.dataclass
class BenchOptions:
    """What ``lodarrow bench`` runs (see ``lodarrow bench --help``)."""

    quick: bool = False
    scale: float = 1.0
    ops: tuple = ()
    peers: tuple = ()
    repeat: int | None = None
    budget: float | None = None  # seconds of timing per implementation
    probe_mib: int = 1024
    seed: int = _workloads.SEED
    progress: bool = True

    @property
    def size_factor(self):
        return self.scale * (0.1 if self.quick else 1.0)

    @property
    def time_budget(self):
        if self.budget is not None:
            return self.budget
        return 0.25 if self.quick else 0.6


# ====================================================================== measuring
def time_call(fn, repeat=None, budget=0.5, min_repeat=3, max_repeat=30, estimate=None):
    """Per-call times (seconds) of ``fn()``: ``repeat`` samples, or as many as ``budget``
    allows within ``[min_repeat, max_repeat]``.  ``estimate`` (seconds per call, e.g. from
    the warm-up) saves the calibration call."""
    first = estimate
    if first is None:
        t0 = time.perf_counter()
        fn()
        first = time.perf_counter() - t0
    number = 1 if first >= 2e-3 else max(1, min(100_000, int(2e-3 / max(first, 1e-7))))
    samples = []
    enabled = gc.isenabled()
    gc.disable()
    try:
        start = time.perf_counter()
        while True:
            t0 = time.perf_counter()
            for _ in range(number):
                fn()
            samples.append((time.perf_counter() - t0) / number)
            if repeat is not None:
                if len(samples) >= repeat:
                    break
            elif len(samples) >= max_repeat or (
                    len(samples) >= min_repeat and time.perf_counter() - start >= budget):
                break
    finally:
        if enabled:
            gc.enable()
    return samples


def _status_kib(key):
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _reset_peak_rss():
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def _release_arrow_pool():
    """Return Arrow's cached free memory to the OS, so reuse cannot hide an allocation."""
    pa = sys.modules.get("pyarrow")
    if pa is not None:
        try:
            pa.default_memory_pool().release_unused()
        except Exception:  # older pyarrow, or a pool without the call
            pass


def _arrow_pool_bytes():
    pa = sys.modules.get("pyarrow")
    return 0 if pa is None else pa.total_allocated_bytes()


def peak_memory(fn):
    """Peak bytes allocated while ``fn()`` runs, its result included (see module docstring)."""
    gc.collect()
    _release_arrow_pool()
    rss_method = _reset_peak_rss()
    rss0 = _status_kib("VmRSS") if rss_method else None
    pool0 = _arrow_pool_bytes()
    tracemalloc.start()
    try:
        result = fn()
        _, traced = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # lodarrow's large outputs come from Arrow's pool, which tracemalloc does not see: count
    # what the pool still holds for the (alive) result, a lower bound where VmHWM is missing.
    peak = max(traced, _arrow_pool_bytes() - pool0)
    if rss0 is not None:
        hwm = _status_kib("VmHWM")
        if hwm is not None:
            peak = max(peak, hwm - rss0)
    del result
    return peak


def probe_bandwidth(nbytes=1 << 30, repeat=3):
    """This machine's memory bandwidth in GB/s: ``{"read_1t", "read_2t", "copy_1t",
    "copy_2t", "reference", "bytes"}`` (copies count read + write bytes)."""
    n = max(1024, nbytes // 8)
    src = np.ones(n)
    dst = np.zeros(n)
    half = n // 2
    parts = (slice(0, half), slice(half, n))

    def best(fn):
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return min(times)

    with ThreadPoolExecutor(2) as pool:
        def two(job):
            list(pool.map(job, parts))
        res = {
            "read_1t": src.nbytes / best(lambda: np.add.reduce(src)),
            "read_2t": src.nbytes / best(lambda: two(lambda s: np.add.reduce(src[s]))),
            "copy_1t": 2 * src.nbytes / best(lambda: np.copyto(dst, src)),
            "copy_2t": 2 * src.nbytes / best(lambda: two(lambda s: np.copyto(dst[s], src[s]))),
        }
    res = {k: v / 1e9 for k, v in res.items()}
    res["reference"] = max(res.values())
    res["bytes"] = int(src.nbytes)
    return res


def machine_info():
    """CPU model, cores, memory and library versions, for the report header."""
    import platform

    from lodarrow._bench._docs import cpu_model

    cpu = cpu_model()
    mem = None
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    mem = int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    versions = {"python": platform.python_version(), "numpy": np.__version__}
    for mod in ("lodarrow", "pyarrow", "polars", "awkward", "numba"):
        try:
            versions[mod] = __import__(mod).__version__
        except Exception:
            versions[mod] = None
    try:
        import lodarrow

        openmp = bool(lodarrow.openmp_enabled())
    except Exception:
        openmp = None
    try:
        load = os.getloadavg()
    except (AttributeError, OSError):
        load = None
    return {"cpu": cpu, "cores": usable, "memory_bytes": mem, "platform": platform.platform(),
            "versions": versions, "openmp": openmp, "load_average": load}


# ====================================================================== checking
def _kind(dtype):
    """"bool", "integer" or "number" (floats and the rest): what must agree between two
    implementations (float32 against float64 is a difference of precision, not of answer)."""
    if dtype.kind == "b":
        return "bool"
    return "integer" if dtype.kind in "iu" else "number"


def _compare(expected, got, case):
    """None if ``got`` matches ``expected`` (arrays, or tuples of arrays), else what differs.

    Each part must have the expected shape (a transposed or differently cut result of the
    right size is wrong) and the same kind of values (bool, integer or floating); integers
    and bools must be equal, floats close within ``case.rtol``/``case.atol``.
    """
    if not isinstance(expected, tuple):
        expected = (expected,)
    if not isinstance(got, tuple):
        got = (got,)
    if len(expected) != len(got):
        return f"returned {len(got)} parts, expected {len(expected)}"
    for k, (e, g) in enumerate(zip(expected, got)):
        e, g = np.asarray(e), np.asarray(g)
        if e.shape != g.shape:
            return f"part {k}: shape {g.shape} ({g.size} values), expected {e.shape} " \
                   f"({e.size} values)"
        if _kind(e.dtype) != _kind(g.dtype):
            return f"part {k}: {_kind(g.dtype)} values (dtype {g.dtype}), expected " \
                   f"{_kind(e.dtype)} values (dtype {e.dtype})"
        e, g = e.reshape(-1), g.reshape(-1)
        if _kind(e.dtype) != "number":
            bad = np.flatnonzero(e != g)
        else:
            e64, g64 = e.astype(np.float64), g.astype(np.float64)
            close = np.isclose(g64, e64, rtol=case.rtol, atol=case.atol, equal_nan=True)
            bad = np.flatnonzero(~close)
        if bad.size:
            i = int(bad[0])
            return f"part {k}: {bad.size} values differ, first at flat index {i} " \
                   f"({g[i]!r} != {e[i]!r})"
    return None


# ====================================================================== running
def _rows_for(case, options):
    if case.fixed_rows:
        return case.rows
    return max(200, int(round(case.rows * options.size_factor)))


def select_cases(options):
    # the conversion hub's cases (lodarrow/_bench/_hub.py) run only when --ops names them
    return [c for c in _cases.all_cases() if _wanted(c.op, options.ops)] + \
        _hub.select(options.ops)


def _measure(run, norm, expected, case, options):
    """Warm up, check, time and measure one implementation: a result-row fragment."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a peer's deprecation notice is not a result
        t0 = time.perf_counter()
        result = run()  # the warm-up: compiles numba kernels, fills caches
        warm = time.perf_counter() - t0
        got = norm(result)
    del result
    if expected is not None:
        problem = _compare(expected, got, case)
        if problem:
            return {"status": "wrong", "note": f"wrong answer, not timed: {problem}"}, got
    # A slow warm-up is a fine estimate (one call per sample either way); a fast one may
    # be dominated by first-call costs, so time_call calibrates again.
    estimate = warm if warm > 0.05 else None
    # the threads lodarrow's kernels may use (LODARROW_NUM_THREADS, or the usable CPUs less
    # the busy ones) just before and after the samples: what a lodarrow row ran on, and for a
    # peer's row how busy the machine looked to lodarrow beside it
    before = num_threads()
    samples = time_call(run, repeat=options.repeat, budget=options.time_budget,
                        estimate=estimate)
    threads = [before, num_threads()]
    peak = peak_memory(run)
    return {"status": "ok", "median_s": statistics.median(samples), "best_s": min(samples),
            "repeats": len(samples), "peak_bytes": int(peak),
            "lodarrow_threads": threads}, got


def run_bench(options, console=None):
    """Run the selected cases; return the report dict (machine, bandwidth, rows, skipped)."""
    cases = select_cases(options)
    hub_cases = [c for c in cases if isinstance(c, _hub.HubCase)]
    cases = [c for c in cases if not isinstance(c, _hub.HubCase)]
    peer_libs = [lib for lib in _peers.PEER_LIBRARIES if _wanted(lib, options.peers)]
    skipped = {}
    for lib in peer_libs:
        reason = _peers.available(lib)
        if reason:
            skipped[lib] = reason
    active = [lib for lib in peer_libs if lib not in skipped]

    report = {"machine": machine_info(), "options": dataclasses.asdict(options),
              "command": None, "skipped_peers": skipped, "rows": []}
    report["bandwidth"] = probe_bandwidth(options.probe_mib << 20)
    bw = report["bandwidth"]["reference"]

    steps = [(case, None) for case in cases]
    total = sum(1 + len([p for p in _peers.peers_for(c.peers_key) if p[0] in active])
                for c, _ in steps)
    progress = task_progress(console, options.progress, counts=True)
    workloads = {}
    with tempfile.TemporaryDirectory(prefix="lodarrow-bench-") as tmp, progress as bar:
        task = bar.add_task("bench", total=total)
        for index, case in enumerate(cases):
            key = (case.workload, _rows_for(case, options))
            bar.update(task, description=f"{case.title} [{case.workload}]: generating data")
            if key not in workloads:
                workloads[key] = _workloads.make_workload(case.workload, key[1], options.seed)
            w = workloads[key]
            rows = _run_case(case, w, active, options, tmp, bar, task, bw)
            report["rows"].extend(rows)
            # free workloads no later case needs (the pad/unpad inputs are large)
            later = {(c.workload, _rows_for(c, options)) for c in cases[index + 1:]}
            dropped = [k for k in workloads if k not in later]
            for k in dropped:
                del workloads[k]
            if dropped:  # a full collection takes most of a second in a large process
                gc.collect()
    if hub_cases:
        report["rows"].extend(_hub.run(hub_cases, options, bw, _measure, _add_ratios))
    try:
        report["machine"]["load_average_end"] = os.getloadavg()
    except (AttributeError, OSError):
        pass
    return report


def _run_case(case, w, active, options, tmp, bar, task, bw):
    nbytes = case.nbytes(w)
    base = {"op": case.op, "variant": case.variant, "title": case.title,
            "workload": w.label, "workload_name": case.workload, "rows": int(w.rows),
            "bytes": nbytes}
    path = None
    if case.uses_path:
        path = os.path.join(tmp, "input.parquet")
        if case.op == "read_parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq

            pq.write_table(pa.table({"data": w.arrow}), path)
    peers = [p for p in _peers.peers_for(case.peers_key) if p[0] in active]
    rows = []
    bar.update(task, description=f"{case.title} [{w.label}]: lodarrow")
    lib_path = os.path.join(tmp, "lodarrow.parquet") if case.op == "write_parquet" else path
    try:
        run, norm = _cases.lodarrow_call(case, w, lib_path)
        frag, expected = _measure(run, norm, None, case, options)
    except NotImplementedError:
        bar.advance(task, 1 + len(peers))
        return [dict(base, impl="lodarrow", library="lodarrow", status="not implemented",
                     note="not implemented in this build")]
    except Exception as exc:  # a crash in lodarrow is a result worth reporting
        bar.advance(task, 1 + len(peers))
        return [dict(base, impl="lodarrow", library="lodarrow", status="error",
                     note=f"lodarrow raised {exc.__class__.__name__}: {exc}"[:300])]
    rows.append(dict(base, impl="lodarrow", library="lodarrow", **frag,
                     **({"how": case.note} if case.note else {})))
    bar.advance(task)
    for library, label, factory in peers:
        bar.update(task, description=f"{case.title} [{w.label}]: {library}")
        variant = os.path.join(tmp, f"{library}.parquet") if case.op == "write_parquet" \
            else (path if case.uses_path else case.variant)
        row = dict(base, impl=f"{library} ({label})", library=library, how=label)
        try:
            run, norm = factory(w, variant)
            frag, _ = _measure(run, norm, expected, case, options)
            row.update(frag)
        except _peers.NotApplicable:
            bar.advance(task)
            continue
        except Exception as exc:
            row.update(status="error", note=f"{exc.__class__.__name__}: {exc}"[:300])
        rows.append(row)
        bar.advance(task)
    _add_ratios(rows, bw)
    return rows


def _add_ratios(rows, bw):
    """GB/s, fraction of bandwidth and ratio to the fastest peer, all from the *best* time:
    on a shared machine, slower samples measure the neighbours (timeit's advice); the
    median is reported beside it as the spread."""
    ok_peers = [r for r in rows if r["library"] != "lodarrow" and r["status"] == "ok"]
    best_peer = min((r["best_s"] for r in ok_peers), default=None)
    for r in rows:
        if r["status"] != "ok":
            continue
        if r["bytes"]:
            r["gbps"] = r["bytes"] / r["best_s"] / 1e9
            r["fraction_of_bandwidth"] = r["gbps"] / bw
        r["ratio_to_best_peer"] = r["best_s"] / best_peer if best_peer else None
        r["best_peer"] = r["library"] != "lodarrow" and r["best_s"] == best_peer
