"""Generated sections of Markdown documents (``docs/performance.md``).

A program that writes figures into a document owns one block of it, between

    <!-- generated: KEY, by COMMAND; do not edit -->
    ...
    <!-- end generated: KEY -->

and rewrites only that block: the rest of the file (prose, other programs' blocks) is kept.
KEY names the block (``bench``, ``parquet-writers`` ...); COMMAND is how to regenerate it.
A block whose figures come from a run whose JSON was not kept says so in its header instead
(``pasted``): the test of the documents (tests/test_bench_docs.py) checks every block that has
a committed JSON against that JSON rendered again.
"""

import os
import shlex
import subprocess
import time

__all__ = ["OPTION_HELP", "add_output_options", "begin_marker", "block", "block_main", "body_of",
           "command_line", "commit_and_machine", "cpu_model", "end_marker", "find_block",
           "machine", "changes_words", "machine_line", "pending", "publish", "report_of",
           "revision", "revision_line", "run_header", "run_record", "run_span", "utc_now",
           "write_block", "write_json"]


def begin_marker(key, command):
    return f"<!-- generated: {key}, by `{command}`; do not edit -->"


def end_marker(key):
    return f"<!-- end generated: {key} -->"


def block(key, command, body):
    """``body`` between ``key``'s markers (``command`` regenerates it)."""
    return f"{begin_marker(key, command)}\n{body.rstrip(chr(10))}\n{end_marker(key)}\n"


def find_block(text, key):
    """``(start, end)`` of ``key``'s block in ``text``, markers included, or None."""
    start = text.find(f"<!-- generated: {key}, by ")
    if start < 0:
        return None
    end = text.find(end_marker(key), start)
    if end < 0:
        raise ValueError(f"the generated block {key!r} has no end marker "
                         f"({end_marker(key)!r})")
    end += len(end_marker(key))
    return start, end + (text[end:end + 1] == "\n")


def body_of(text, key):
    """What lies between ``key``'s markers in ``text`` (None when there is no block)."""
    span = find_block(text, key)
    if span is None:
        return None
    inner = text[span[0]:span[1]]
    return inner[inner.index("\n") + 1:inner.rindex(end_marker(key))]


def write_block(path, key, command, body):
    """Put ``body`` in ``key``'s block of the Markdown file ``path``: in place of the block,
    or appended when there is none (a new file holds just the block)."""
    try:
        with open(path) as fh:
            text = fh.read()
    except FileNotFoundError:
        text = ""
    new = block(key, command, body)
    span = find_block(text, key)
    if span is not None:
        text = text[:span[0]] + new + text[span[1]:]
    else:
        text = (text.rstrip("\n") + "\n\n" if text else "") + new
    with open(path, "w") as fh:
        fh.write(text)


#: The usual help of a benchmark's output options (:func:`add_output_options`).
OPTION_HELP = {"json": "write everything measured here",
               "docs": "write this benchmark's block of that Markdown file",
               "from_json": "measure nothing: the Markdown from this JSON"}
#: The metavars of the output options, where a benchmark shows them.
_METAVARS = {"json": "PATH", "docs": "FILE.md", "from_json": "PATH"}


def add_output_options(parser, *, metavars=False, **options):
    """Add a benchmark's output options (``--json``, ``--docs``, ``--from-json`` ...).

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The benchmark's parser.
    metavars : bool, default False
        Show ``PATH`` / ``FILE.md`` for ``--json``, ``--docs`` and ``--from-json``.
    **options : str or None
        Each option, in the order of ``--help``: its name with ``_`` for ``-`` (``json``,
        ``markdown``, ``docs``, ``readme``, ``from_json`` ...) and its help, or None for
        :data:`OPTION_HELP`'s.
    """
    for name, text in options.items():
        kwargs = {"help": OPTION_HELP[name] if text is None else text}
        if metavars and name in _METAVARS:
            kwargs["metavar"] = _METAVARS[name]
        parser.add_argument("--" + name.replace("_", "-"), **kwargs)


def write_json(path, report, default=None):
    """Write ``report`` to ``path`` as a benchmark's JSON (indented by 1, a final newline).

    Parameters
    ----------
    path : str or os.PathLike
        The file, replaced.
    report : dict
        What the benchmark measured.
    default : callable, optional
        ``json.dumps``'s ``default``: how a value JSON does not hold is written.
    """
    import json

    with open(path, "w") as fh:
        fh.write(json.dumps(report, indent=1, default=default) + "\n")


def report_of(args, measure, write=write_json):
    """A benchmark's report: read from ``args.from_json`` (nothing measured), or
    ``measure(args)`` written to ``args.json`` when given (by ``write(path, report)``)."""
    import json

    if args.from_json:
        with open(args.from_json) as fh:
            return json.load(fh)
    report = measure(args)
    if args.json:
        write(args.json, report)
    return report


def publish(args, text, blocks=(), echo=True):
    """Print a benchmark's Markdown and write it where its options say.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed options.  ``args.markdown``, where the parser has it, names a file to
        hold ``text`` whole.
    text : str
        The Markdown of the run.
    blocks : iterable of tuple
        ``(option, key, command, body)``: where ``getattr(args, option)`` names a file,
        ``body`` (a str, or a function of no argument that returns it) becomes that file's
        block ``key`` (:func:`write_block`, ``command`` in its marker).
    echo : bool or None, default True
        Print ``text`` first (True), never (False), or only when no file is written (None).
    """
    written = [b for b in blocks if getattr(args, b[0], None)]
    whole = getattr(args, "markdown", None)
    if echo or (echo is None and not (written or whole)):
        print(text)
    if whole:
        with open(whole, "w") as fh:
            fh.write(text)
    for option, key, command, body in written:
        write_block(getattr(args, option), key, command, body() if callable(body) else body)


def block_main(parser, argv, measure, markdown, key, command, json_help):
    """The ``main`` of a benchmark that owns one block: its options, its report, its block.

    Adds ``--json PATH``, ``--docs FILE.md`` and ``--from-json PATH`` to ``parser``, reads
    ``argv`` (kept as ``args.argv``), measures or reads the report (:func:`report_of`), and
    writes ``markdown(report)`` into ``--docs``' block ``key``, or prints it without ``--docs``.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The benchmark's parser, with its own options.
    argv : list of str or None
        The arguments; None: ``sys.argv[1:]``.
    measure : callable
        ``measure(args)``: the report of a run.
    markdown : callable
        ``markdown(report)``: the block's body.
    key, command : str
        The block's key and the command that writes it again (:func:`write_block`).
    json_help : str
        ``--json``'s help.
    """
    import sys

    add_output_options(parser, metavars=True, json=json_help, docs=None,
                       from_json="run nothing: --docs (or the printed block) from an earlier JSON")
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    text = markdown(report_of(args, measure))
    publish(args, text, [("docs", key, command, text)], echo=None)


def command_line(script, argv, env=("LODARROW_NUM_THREADS",), quote=True):
    """How a benchmark was run, as its JSON records it.

    Parameters
    ----------
    script : str
        The script, as typed from the checkout (``benchmarks/resume.py``).
    argv : list of str
        Its arguments.
    env : tuple of str, default ("LODARROW_NUM_THREADS",)
        Variables that decide the run: those set come first, ``NAME=value``.
    quote : bool, default True
        Quote the arguments for a shell (``shlex.join``), else join them with spaces.

    Returns
    -------
    str
        ``LODARROW_NUM_THREADS=1 python benchmarks/resume.py --repeat 3``, say.
    """
    prefix = "".join(f"{n}={shlex.quote(os.environ[n])} " for n in env if n in os.environ)
    return prefix + f"python {script} " + (shlex.join(argv) if quote else " ".join(argv))


def utc_now(seconds=False):
    """The time now in UTC, ``2026-01-31 12:00 UTC`` (with ``:SS`` when ``seconds``)."""
    return time.strftime("%Y-%m-%d %H:%M:%S UTC" if seconds else "%Y-%m-%d %H:%M UTC",
                         time.gmtime())


def run_record(command, libraries=("numpy", "pyarrow", "lodarrow"), root=None, seconds=False):
    """The head of a benchmark's JSON: what ran, on which commit and machine, and when.

    Parameters
    ----------
    command : str
        How the benchmark was run (:func:`command_line`).
    libraries : tuple of str, default ("numpy", "pyarrow", "lodarrow")
        The modules whose versions :func:`machine` records.
    root : str, optional
        The checkout measured (:func:`revision`); by default this one.
    seconds : bool, default False
        ``started`` to the second (:func:`utc_now`).

    Returns
    -------
    dict
        ``{"command", "revision", "machine", "started"}``, in that order.
    """
    return {"command": command, "revision": revision(root), "machine": machine(libraries),
            "started": utc_now(seconds)}


def pending(command):
    """The body of a block whose figures were never measured (no JSON committed yet):
    which command measures them."""
    return f"Not measured yet: `{command}` writes the figures of this block, and their JSON."


def _written_by_benchmarks(path):
    """Whether ``path`` is what benchmarks write (Markdown, their JSON under
    ``benchmarks/results/``): a change there changes no measurement."""
    return path.endswith(".md") or path.startswith("benchmarks/results/")


def revision(root=None):
    """The commit measured: ``{"commit": short hash or None, "changes": bool or None,
    "changed": [paths], "documents": [paths]}`` (``changes``: the work tree's tracked code
    differed from the commit; ``changed``: which files, relative to the checkout;
    ``documents``: changed Markdown and results JSON, which no measurement reads: a run of
    several benchmarks writes them one after the other)."""
    root = root or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = {"commit": None, "changes": None, "changed": [], "documents": []}
    try:
        out["commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root,
                                       capture_output=True, text=True, check=True,
                                       timeout=10).stdout.strip() or None
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                                cwd=root, capture_output=True, text=True, check=True,
                                timeout=30).stdout
        # porcelain v1: two status letters, a space, the path ("old -> new" for a rename)
        paths = sorted(line[3:].split(" -> ")[-1] for line in status.splitlines()
                       if line.strip())
        out["documents"] = [p for p in paths if _written_by_benchmarks(p)]
        out["changed"] = [p for p in paths if not _written_by_benchmarks(p)]
        out["changes"] = bool(out["changed"])
    except (OSError, subprocess.SubprocessError):  # not a checkout (an installed wheel)
        pass
    return out


def revision_line(rev):
    """``Commit: abc1234 with uncommitted changes`` (or that it is not known)."""
    if not rev or not rev.get("commit"):
        return "Commit: not known (not run from a git checkout)"
    return f"Commit: {rev['commit']}{changes_words(rev)}"


def changes_words(rev):
    """`` with uncommitted changes to a.py, b.py`` (the first 6 paths), or ``""``."""
    if not rev.get("changes"):
        return ""
    paths = rev.get("changed") or []
    if not paths:  # a JSON of an earlier version: which paths was not recorded
        return " with uncommitted changes"
    more = f" and {len(paths) - 6} more" if len(paths) > 6 else ""
    return f" with uncommitted changes to {', '.join(paths[:6])}{more}"


def cpu_model():
    """The CPU's model name (``/proc/cpuinfo``), else what ``platform`` knows."""
    import platform

    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine(libraries=("numpy", "pyarrow", "lodarrow")):
    """CPU model, usable cores, platform, Python and ``libraries``' versions, load average:
    what a benchmark's JSON records of the machine that ran it."""
    import platform

    cpu = cpu_model()
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count()
    versions = {"python": platform.python_version()}
    for mod in libraries:
        try:
            versions[mod] = __import__(mod).__version__
        except (ImportError, AttributeError):  # not installed: recorded as such
            versions[mod] = None
    try:
        load = list(os.getloadavg())
    except (AttributeError, OSError):
        load = None
    return {"cpu": cpu, "cores": cores, "platform": platform.platform(), "versions": versions,
            "load_average": load}


def machine_line(m, load_end=None):
    """``AMD EPYC, 2 usable cores (Linux-...); Python 3.11.7, pyarrow 26.0.1, ...; load
    average (1 min) 0.7 at the start, 1.2 at the end``."""
    v = ", ".join(f"{k} {val}" for k, val in m["versions"].items() if val is not None)
    load = ""
    if m.get("load_average"):
        load = f"; load average (1 min) {m['load_average'][0]:.1f} at the start"
        if load_end:
            load += f", {load_end[0]:.1f} at the end"
    return f"{m['cpu']}, {m['cores']} usable cores ({m['platform']}); {v}{load}"


def commit_and_machine(report):
    """``Commit: abc1234.  Machine: AMD EPYC, ...`` of a report (no final stop), the load
    average at the end from ``load_average_end``."""
    return (f"{revision_line(report['revision'])}.  Machine: "
            f"{machine_line(report['machine'], report.get('load_average_end'))}")


def run_span(report):
    """``Commit: abc1234; AMD EPYC, ...; 2026-01-31 12:00 UTC to 2026-01-31 12:05 UTC`` of a
    report with ``started``, ``finished`` and ``load_at_end`` (no final stop)."""
    return (f"{revision_line(report['revision'])}; "
            f"{machine_line(report['machine'], [report['load_at_end']])}; "
            f"{report['started']} to {report['finished']}")


def run_header(report):
    """The first lines of a block: the command, then :func:`run_span`, each followed by a
    blank line."""
    return [f"Command: `{report['command']}`", "", run_span(report) + ".", ""]
