"""The device rows of ``lodarrow bench --device cuda``: every operator on a CUDA GPU.

Method
------
* The workloads are the host bench's (``_workloads``, same sizes and seed); each input is
  copied to the GPU once, before anything is timed (LoDTensors with ``.cuda()``, arrays with
  ``cupy.asarray``; LoD offsets are mirrored by the operators themselves, once, and cached).
* Every case runs first on the CPU (lodarrow's Cython kernels, the reference) and then on the
  GPU; the GPU result is copied back and checked against the CPU one with the host bench's
  comparison (``_runner._compare``) before it is timed.  A wrong answer is reported, not timed.
* Timing: ``number`` calls between two device synchronisations, wall clock
  (``time.perf_counter``), so a figure includes the launches and any host round trip the
  operator makes, as a user sees it; ``number`` is chosen so that one sample lasts >= 2 ms,
  and samples are repeated until the time budget is spent (3 to 30), as on the host.  GB/s
  uses the best sample and the host bench's byte counts (``_cases``).
* Bandwidth: a device-to-device copy (``cupy.copyto``) of ``--probe-mib`` MiB, read + write
  bytes counted, best of 5 after a warm-up; "% copy BW" is an operator's GB/s over it.
"""

import dataclasses
import gc
import statistics
import time

import numpy as np

from lodarrow._bench import _cases, _peers, _workloads
from lodarrow._bench._runner import _compare, _rows_for, machine_info, time_call

__all__ = ["DEVICE_OPS", "select_device_cases", "probe_device_bandwidth", "time_device_call",
           "run_device_bench", "device_lines", "to_markdown", "format_table"]

#: The host bench's cases that have a device row: the operators (and the 10-row call, which
#: shows the per-call cost of a launch); conversions and Parquet stay on the host.
DEVICE_OPS = ("call_overhead",)


def _is_device_case(case):
    return case.op.startswith("sequence_") or case.op in DEVICE_OPS


def select_device_cases(options):
    """The operator cases ``--ops`` selects (the hub's conversions are not device rows)."""
    return [c for c in _cases.all_cases()
            if _is_device_case(c) and _cases.wanted(c.op, options.ops)]


# ====================================================================== measuring
def _synchronize():
    from lodarrow._cupy import get_cupy

    get_cupy().cuda.Device().synchronize()


def time_device_call(fn, repeat=None, budget=0.5, estimate=None):
    """Per-call seconds of ``fn()`` on the GPU: :func:`_runner.time_call` with the device
    synchronised after every sample's calls (and before the first)."""
    def synced():
        fn()
        _synchronize()

    _synchronize()
    return time_call(synced, repeat=repeat, budget=budget, estimate=estimate)


def probe_device_bandwidth(nbytes=1 << 30, repeat=5):
    """The GPU's device-to-device copy bandwidth in GB/s (read + write bytes):
    ``{"copy", "bytes", "device", "reference"}``."""
    from lodarrow._cupy import get_cupy

    cp = get_cupy()
    n = max(1024, nbytes // 8)
    src = cp.ones(n, dtype=cp.float64)
    dst = cp.zeros(n, dtype=cp.float64)
    cp.copyto(dst, src)  # warm-up
    _synchronize()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        cp.copyto(dst, src)
        _synchronize()
        times.append(time.perf_counter() - t0)
    copy = 2 * src.nbytes / min(times) / 1e9
    del src, dst
    cp.get_default_memory_pool().free_all_blocks()
    return {"copy": copy, "reference": copy, "bytes": int(n * 8), "device": device_name()}


def device_name():
    """The GPU's name, compute capability and memory, CUDA runtime and CuPy versions."""
    from lodarrow._cupy import get_cupy

    cp = get_cupy()
    dev = cp.cuda.Device()
    props = cp.cuda.runtime.getDeviceProperties(dev.id)
    name = props["name"]
    name = name.decode() if isinstance(name, bytes) else str(name)
    runtime = cp.cuda.runtime.runtimeGetVersion()
    return (f"{name} (compute capability {dev.compute_capability}, "
            f"{props['totalGlobalMem'] / 2**30:.0f} GiB, {props['multiProcessorCount']} SMs); "
            f"CUDA runtime {runtime // 1000}.{runtime % 1000 // 10}, CuPy {cp.__version__}")


# ====================================================================== inputs on the GPU
class _DeviceWorkload:
    """A host workload's inputs on the GPU, each copied once when first asked for.

    LoDTensors move with ``.cuda()`` and arrays with ``cupy.asarray`` (tuples item by item);
    LoD offsets (``offsets``) stay on the host, as LoDTensor takes them; sizes pass through.
    """

    _HOST = frozenset({"offsets", "name", "rows", "d", "n_seq", "topks", "channels", "label",
                       "row_bytes", "data_bytes", "offsets_bytes", "max_length", "row_len",
                       "col_len"})

    def __init__(self, host):
        self._host = host
        self._moved = {}

    def __getattr__(self, name):
        value = getattr(self._host, name)
        if name in self._HOST:
            return value
        if name not in self._moved:
            self._moved[name] = _to_device(value)
        return self._moved[name]


def _to_device(value):
    import lodarrow
    from lodarrow._cupy import get_cupy

    if isinstance(value, lodarrow.LoDTensor):
        return value.cuda()
    if isinstance(value, np.ndarray):
        return get_cupy().asarray(value)
    if isinstance(value, tuple):
        return tuple(_to_device(v) for v in value)
    return value


def _to_host(value):
    """A result (LoDTensor, CuPy array, tuple of them) copied back to host memory."""
    import lodarrow
    from lodarrow._cupy import is_cupy_array

    if isinstance(value, lodarrow.LoDTensor):
        return value.cpu()
    if is_cupy_array(value):
        return value.get()
    if isinstance(value, tuple):
        return tuple(_to_host(v) for v in value)
    return value


def device_call(case, dw):
    """``(run, norm)`` of ``case`` on the GPU inputs ``dw`` (a :class:`_DeviceWorkload`);
    ``norm`` copies the result back and normalises it as the host case does."""
    import lodarrow
    from lodarrow._cupy import get_cupy

    if case.op == "sequence_scatter":
        # the host case builds its zero base with NumPy: here it is a CuPy array
        cp = get_cupy()
        ids = dw.int_ids % _peers.SCATTER_WIDTH
        index = lodarrow.LoDTensor(ids.reshape(-1, 1), dw.offsets)
        updates = lodarrow.LoDTensor(dw.data.reshape(-1, 1), dw.offsets)
        base = cp.zeros((dw.n_seq, _peers.SCATTER_WIDTH), dtype=cp.float32)
        run, norm = (lambda: lodarrow.sequence_scatter(base, index, updates)), \
            _cases._tensor_norm
    elif case.op == "sequence_conv":
        t = dw.tensor
        filt = get_cupy().asarray(_peers.conv_filter(dw.d))
        start, length = _peers.CONV_CONTEXT
        run, norm = (lambda: lodarrow.sequence_conv(t, filt, context_start=start,
                                                    context_length=length)), \
            _cases._tensor_norm
    else:
        run, norm = _cases.lodarrow_call(case, dw)
    return run, lambda result: norm(_to_host(result))


# ====================================================================== running
def _on_gpu(result):
    """True if the result's data (its first part: a LoDTensor or an array) lives on the GPU;
    a host result is a wrong answer, since the operators keep outputs on the inputs' device."""
    import lodarrow
    from lodarrow._cupy import is_cupy_array

    data = result[0] if isinstance(result, tuple) else result
    if isinstance(data, lodarrow.LoDTensor):
        return data.place.is_cuda
    return is_cupy_array(data)


def _device_row(case, dw, expected, options, bandwidth):
    run, norm = device_call(case, dw)
    t0 = time.perf_counter()
    result = run()  # the warm-up: compiles the kernels (or loads them from CuPy's cache)
    _synchronize()
    warm = time.perf_counter() - t0
    if not _on_gpu(result):
        return {"status": "wrong", "note": "the GPU call returned host data"}
    problem = _compare(expected, norm(result), case)
    del result
    if problem:
        return {"status": "wrong", "note": f"wrong answer, not timed: {problem}"}
    samples = time_device_call(run, repeat=options.repeat, budget=options.time_budget,
                               estimate=warm if warm > 0.05 else None)
    return {"status": "ok", "median_s": statistics.median(samples), "best_s": min(samples),
            "repeats": len(samples), "first_call_s": warm}


def run_device_bench(options, progress=print):
    """Run the selected operator cases on the CPU and the GPU; return the report dict
    (machine, device, bandwidth (host figures are not measured here), rows)."""
    from lodarrow._cupy import get_cupy

    cases = select_device_cases(options)
    cp = get_cupy()
    report = {"machine": machine_info(), "options": dataclasses.asdict(options),
              "command": None, "rows": []}
    report["bandwidth"] = probe_device_bandwidth(options.probe_mib << 20)
    report["device"] = report["bandwidth"]["device"]
    bw = report["bandwidth"]["reference"]
    workloads = {}
    for index, case in enumerate(cases):
        key = (case.workload, _rows_for(case, options))
        if key not in workloads:
            workloads[key] = (_workloads.make_workload(case.workload, key[1], options.seed),)
            workloads[key] += (_DeviceWorkload(workloads[key][0]),)
        w, dw = workloads[key]
        nbytes = case.nbytes(w)
        row = {"op": case.op, "variant": case.variant, "title": case.title,
               "workload": w.label, "rows": int(w.rows), "bytes": nbytes}
        progress(f"{case.title} [{w.label}]")
        try:
            run, norm = _cases.lodarrow_call(case, w)
            expected = norm(run())
            cpu = time_call(run, repeat=options.repeat, budget=options.time_budget)
            row["cpu_best_s"], row["cpu_median_s"] = min(cpu), statistics.median(cpu)
            row.update(_device_row(case, dw, expected, options, bw))
        except Exception as exc:  # a crash on the GPU is a result worth reporting
            row.update(status="error", note=f"{exc.__class__.__name__}: {exc}"[:400])
        if row.get("status") == "ok":
            if nbytes:
                row["gbps"] = nbytes / row["best_s"] / 1e9
                row["fraction_of_bandwidth"] = row["gbps"] / bw
                row["cpu_gbps"] = nbytes / row["cpu_best_s"] / 1e9
            row["speedup"] = row["cpu_best_s"] / row["best_s"]
        report["rows"].append(row)
        later = {(c.workload, _rows_for(c, options)) for c in cases[index + 1:]}
        dropped = [k for k in workloads if k not in later]
        for k in dropped:
            del workloads[k]
        if dropped:  # a full collection takes most of a second in a large process: not per case
            gc.collect()
        cp.get_default_memory_pool().free_all_blocks()
    return report


# ====================================================================== reporting
COLUMNS = ("op", "workload", "CPU best", "CPU GB/s", "GPU best", "GPU median", "GPU GB/s",
           "% copy BW", "GPU speedup", "note")


def _fmt(value, spec):
    return "-" if value is None else format(value, spec)


def _cells(row):
    from lodarrow._bench._report import format_time

    ok = row.get("status") == "ok"
    frac = row.get("fraction_of_bandwidth")
    return (row["title"], row["workload"], format_time(row.get("cpu_best_s")),
            _fmt(row.get("cpu_gbps"), ".1f"),
            format_time(row.get("best_s")) if ok else "-",
            format_time(row.get("median_s")) if ok else "-",
            _fmt(row.get("gbps"), ".1f"), f"{100 * frac:.1f}%" if frac is not None else "-",
            _fmt(row.get("speedup"), ".1f"), row.get("note") or "")


def device_lines(report):
    """Plain-text lines: the GPU, its copy bandwidth, the host."""
    m, bw = report["machine"], report["bandwidth"]
    return [f"GPU: {report['device']}",
            f"Device copy bandwidth ({bw['bytes'] / 2**30:.2g} GiB cupy.copyto, read + write "
            f"bytes): {bw['copy']:.0f} GB/s; '% copy BW' is of it",
            f"Host: {m['cpu']}, {m['cores']} usable cores; lodarrow's CPU kernels are the "
            f"reference each GPU result is checked against"]


def format_table(report):
    """The rows as an aligned plain-text table."""
    rows = [COLUMNS] + [_cells(r) for r in report["rows"]]
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(COLUMNS) - 1)]
    lines = []
    for r in rows:
        cells = [str(c).ljust(w) if i < 2 else str(c).rjust(w)
                 for i, (c, w) in enumerate(zip(r, widths))]
        lines.append("  ".join(cells + [str(r[-1])]))
    return "\n".join(lines)


def to_markdown(report):
    """The device rows as Markdown: the GPU, the command and the table."""
    out = ["# GPU performance", "",
           "Produced by `lodarrow bench --device cuda` (method: lodarrow/_bench/_device.py). "
           "Every GPU result was checked against lodarrow's CPU result before it was timed; "
           "GB/s counts the bytes an operator must read plus write over the best time.", ""]
    out += [f"- {line}" for line in device_lines(report)]
    if report.get("command"):
        out.append(f"- Command: `{report['command']}`")
    out += ["", "| " + " | ".join(COLUMNS) + " |",
            "| " + " | ".join("---" if i < 2 or i == 9 else "---:"
                              for i in range(len(COLUMNS))) + " |"]
    for row in report["rows"]:
        out.append("| " + " | ".join(str(c).replace("|", "\\|") for c in _cells(row)) + " |")
    return "\n".join(out) + "\n"

