"""The command line: ``lodarrow demo``, ``lodarrow bench`` and ``lodarrow info FILE``.

Exit status: 0 on success, 1 when a check of ``demo`` fails, 2 for a usage error, a missing or
unreadable file, or a missing optional dependency.
"""

import argparse
import os
import sys
import time

__all__ = ["main", "build_parser"]

BENCH_EXTRA_HINT = "install the benchmark extra: pip install 'lodarrow[bench]'"


def build_parser():
    """The ``argparse`` parser of ``python -m lodarrow``."""
    parser = argparse.ArgumentParser(
        prog="lodarrow",
        description="LoD tensors on Arrow offsets: an end-to-end demo, the benchmark suite, "
                    "and the LoD structure of Parquet / Arrow IPC files.")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="{demo,bench,info}")

    demo = sub.add_parser("demo", help="run the end-to-end pipeline on a synthetic corpus",
                          description="Build LoDTensors from a synthetic corpus (documents -> "
                          "sentences -> tokens), round-trip them through Parquet, run the "
                          "operators, check every result and print a timing table.")
    demo.add_argument("--docs", type=int, default=None,
                      help="number of documents (default: about 300k tokens' worth)")
    demo.add_argument("--seed", type=int, default=None, help="corpus seed (default fixed)")
    demo.add_argument("--no-progress", action="store_true", help="no progress bars")

    bench = sub.add_parser("bench", help="benchmark the operators against NumPy, polars, "
                           "Awkward Array, pyarrow.compute and numba",
                           description="Time every operator and conversion against the peers "
                           "installed (each checked against lodarrow's result first). Needs "
                           "the 'bench' extra.")
    bench.add_argument("--quick", action="store_true", help="sizes divided by 10")
    bench.add_argument("--scale", type=float, default=1.0,
                       help="multiply the workload sizes by this (after --quick); e.g. "
                            "0.001 for a smoke test")
    bench.add_argument("--ops", default="", help="comma-separated operators to run: "
                       "names, prefixes or words of names ('pool,pad,arrow,parquet')")
    bench.add_argument("--peers", default="", help="comma-separated peers to run "
                       "(numpy, polars, awkward, pyarrow, numba); lodarrow always runs")
    bench.add_argument("--repeat", type=int, default=None,
                       help="exact number of timed samples (default: adaptive, 3-30)")
    bench.add_argument("--budget", type=float, default=None,
                       help="seconds of timing per implementation (default 0.6, quick 0.25)")
    bench.add_argument("--probe-mib", type=int, default=1024,
                       help="size of the memory-bandwidth probe in MiB (default 1024)")
    bench.add_argument("--json", metavar="FILE", help="write the results as JSON")
    bench.add_argument("--markdown", metavar="FILE", help="write the results as Markdown")
    bench.add_argument("--plot", metavar="FILE.png", help="write a bar chart of GB/s")
    bench.add_argument("--no-progress", action="store_true", help="no progress bar")

    info = sub.add_parser("info", help="show the LoD structure of a Parquet or Arrow IPC file, "
                          "or of a Parquet dataset directory",
                          description="Levels, sequence counts, length statistics, dtype and "
                          "feature shape of each list column (for a directory: totals over "
                          "its Parquet files).")
    info.add_argument("file", help="a Parquet or Arrow IPC file, or a directory of Parquet "
                      "files")
    info.add_argument("--json", action="store_true", help="print JSON")
    return parser


def main(argv=None):
    """Run the command line; return the exit status."""
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    args.argv = argv
    if args.version:
        import lodarrow

        print(f"lodarrow {lodarrow.__version__}")
        return 0
    if args.command is None:
        parser.print_help()
        return 2
    return {"demo": _demo, "bench": _bench, "info": _info}[args.command](args)


def _error(message):
    print(f"lodarrow: {message}", file=sys.stderr)
    return 2


def _split(text):
    return tuple(s.strip() for s in text.split(",") if s.strip())


def _info(args):
    path = args.file
    if not os.path.exists(path):
        return _error(f"info: no such file or directory: {path}")
    from lodarrow._info import info

    try:
        text = info(path, as_json=args.json)
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        return _error(f"info: cannot read {path}: {str(exc).removeprefix('info: ')}")
    print(text)
    return 0


def _demo(args):
    from lodarrow._demo import run_demo

    kwargs = {"progress": not args.no_progress}
    if args.docs is not None:
        if args.docs < 1:
            return _error("demo: --docs must be >= 1")
        kwargs["n_docs"] = args.docs
    if args.seed is not None:
        kwargs["seed"] = args.seed
    return 0 if run_demo(**kwargs) else 1


def _bench(args):
    missing = [mod for mod in ("rich",) if not _importable(mod)]
    if args.plot and not _importable("matplotlib"):
        missing.append("matplotlib")
    if missing:
        return _error(f"bench needs {', '.join(missing)}: {BENCH_EXTRA_HINT}")
    if args.scale <= 0:
        return _error("bench: --scale must be > 0")
    if args.repeat is not None and args.repeat < 1:
        return _error("bench: --repeat must be >= 1")
    if args.probe_mib < 1:
        return _error("bench: --probe-mib must be >= 1")
    from rich.console import Console

    from lodarrow._bench import _report, _runner

    options = _runner.BenchOptions(
        quick=args.quick, scale=args.scale, ops=_split(args.ops), peers=_split(args.peers),
        repeat=args.repeat, budget=args.budget, probe_mib=args.probe_mib,
        progress=not args.no_progress)
    unknown = [p for p in options.peers
               if not any(_runner._wanted(lib, (p,)) for lib in _runner._peers.PEER_LIBRARIES)]
    if unknown:
        return _error(f"bench: unknown peer(s) {', '.join(unknown)}; choose from "
                      f"{', '.join(_runner._peers.PEER_LIBRARIES)}")
    if not _runner.select_cases(options):
        return _error(f"bench: --ops {args.ops!r} matches no benchmark")
    console = Console()
    if not console.is_terminal:  # files and pipes: wide enough that the table does not fold
        console = Console(width=max(console.width, 160))
    t0 = time.perf_counter()
    report = _runner.run_bench(options, console=Console(stderr=True))
    report["wall_s"] = time.perf_counter() - t0
    report["command"] = "python -m lodarrow " + " ".join(args.argv)
    _report.print_table(report, console)
    if args.json:
        _report.write_json(report, args.json)
    if args.markdown:
        _report.write_markdown(report, args.markdown, plot=args.plot)
    if args.plot:
        _report.write_plot(report, args.plot)
    return 0


def _importable(module):
    import importlib

    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True
