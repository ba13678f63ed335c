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
import subprocess

__all__ = ["begin_marker", "block", "body_of", "cpu_model", "end_marker", "find_block", "machine",
           "changes_words", "machine_line", "pending", "report_of", "revision", "revision_line",
           "write_block"]


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


def report_of(args, measure):
    """A benchmark's report: read from ``args.from_json`` (nothing measured), or
    ``measure(args)`` written to ``args.json`` when given."""
    import json

    if args.from_json:
        with open(args.from_json) as fh:
            return json.load(fh)
    report = measure(args)
    if args.json:
        with open(args.json, "w") as fh:
            fh.write(json.dumps(report, indent=1) + "\n")
    return report


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
