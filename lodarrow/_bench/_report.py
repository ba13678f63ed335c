"""Benchmark output: a rich table on the terminal, JSON, Markdown and a matplotlib bar chart."""

import json

from lodarrow._bench import _docs

__all__ = ["FAMILIES", "README_BLOCKS", "SUMMARY_BLOCK", "behind_markdown", "behind_rows",
           "family_summary", "format_time", "machine_lines", "print_table", "readme_beside",
           "section_markdown", "summary_markdown", "to_markdown", "write_json",
           "write_markdown", "write_plot", "write_readme", "write_summary"]

COLUMNS = ("op", "workload", "impl", "median", "best", "GB/s", "% BW", "x best peer",
           "peak MiB", "how / note")


def format_time(seconds):
    """``1.23 ms``-style time."""
    if seconds is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def _cells(row):
    ok = row["status"] == "ok"
    gbps = row.get("gbps")
    frac = row.get("fraction_of_bandwidth")
    ratio = row.get("ratio_to_best_peer")
    how = row.get("how") or ""
    note = row.get("note") or ("best peer" if row.get("best_peer") else "")
    note = "; ".join(s for s in (how, note) if s)
    return (
        row["title"], row["workload"], row["library"],
        format_time(row.get("median_s")) if ok else "-",
        format_time(row.get("best_s")) if ok else "-",
        f"{gbps:.2f}" if gbps is not None else "-",
        f"{100 * frac:.0f}%" if frac is not None else "-",
        f"{ratio:.2f}" if ratio is not None else "-",
        f"{row['peak_bytes'] / 2**20:.1f}" if ok else "-",
        note,
    )


def machine_lines(report):
    """Plain-text lines describing the machine and its measured bandwidth."""
    m, bw = report["machine"], report["bandwidth"]
    mem = f"{m['memory_bytes'] / 2**30:.0f} GiB" if m.get("memory_bytes") else "?"
    v = m["versions"]
    lines = [
        f"CPU: {m['cpu']}, {m['cores']} usable cores, {mem} RAM ({m['platform']})",
        "Python {python}, NumPy {numpy}, pyarrow {pyarrow}, polars {polars}, Awkward {awkward}, "
        "numba {numba}, lodarrow {lodarrow} (OpenMP: {omp})".format(omp=m.get("openmp"), **v),
        f"Memory bandwidth ({bw['bytes'] / 2**30:.2g} GiB NumPy probe): read {bw['read_1t']:.1f} "
        f"GB/s (1 thread) / {bw['read_2t']:.1f} GB/s (2 threads); copy {bw['copy_1t']:.1f} / "
        f"{bw['copy_2t']:.1f} GB/s (read + write bytes). '% BW' is of {bw['reference']:.1f} GB/s.",
    ]
    load0, load1 = m.get("load_average"), m.get("load_average_end")
    if load0:
        end = f", {load1[0]:.1f} at the end" if load1 else ""
        lines.append(f"Load average (1 min) {load0[0]:.1f} at the start{end}, on "
                     f"{m['cores']} cores: other processes share this machine")
    for lib, reason in report.get("skipped_peers", {}).items():
        lines.append(f"skipped peer {lib}: {reason}")
    return lines


def print_table(report, console=None):
    """Print the results as a rich table (one section per case)."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    for line in machine_lines(report):
        console.print(line, highlight=False, markup=False)
    table = Table(title="lodarrow bench (GB/s = bytes read + written / best time; "
                        "'x best peer' = best time / fastest peer's best time)",
                  show_lines=False, title_justify="left")
    for col in COLUMNS:
        table.add_column(col, justify="right" if col in COLUMNS[3:9] else "left",
                         overflow="fold")
    previous = None
    for row in report["rows"]:
        key = (row["title"], row["workload"])
        if previous is not None and key != previous:
            table.add_section()
        previous = key
        style = None
        if row["status"] in ("wrong", "error"):
            style = "red"
        elif row["library"] == "lodarrow":
            style = "bold"
        table.add_row(*_cells(row), style=style)
    console.print(table)


def write_json(report, path):
    with open(path, "w") as fh:
        json.dump(report, fh, indent=1, default=str)


MARKDOWN_TITLE = "# Performance\n"

#: How the operator results' block of a document is regenerated (its marker says so).
REGENERATE = ("python -m lodarrow bench --markdown FILE, or from the run's JSON: "
              "python -m lodarrow bench --from-json JSON --markdown FILE")

MARKDOWN_INTRO = """\
Produced by `lodarrow bench` (see `benchmarks/README.md` for the method).  Every peer's
result was checked against lodarrow's before it was timed.  GB/s counts the bytes an operation
must read plus the bytes it writes, divided by the best time; "% BW" is that as a fraction of
the memory bandwidth measured at the start of the run; "x best peer" is the best time divided
by the fastest peer's best time (below 1: lodarrow is faster than every peer); "peak MiB" is
the peak memory of one call, output included.  Zero-copy conversions and the 10-row call are
compared by time.  `from_offsets` is in the table only, not the plot: its check reads offsets
that sit in cache (GB/s above the memory bandwidth), and polars' row checks nothing.  A
"% BW" above 100% elsewhere (D=16 rows of a few tens of MB) is the same effect: the best of
repeated calls finds part of its input still in the last-level cache from the call before.
"""

#: Cases the plot leaves out (the table has them): their GB/s is no memory-bound figure.
#: ``from_offsets``: a scan of cache-resident offsets, and polars checks nothing, so its bar
#: ran to 300 GB/s, several times the bandwidth line, and flattened every other bar.
NOT_PLOTTED = frozenset({"from_offsets"})


def section_markdown(report, plot=None):
    """The results' block: intro, machine, commit, command, table (and the plot)."""
    out = [MARKDOWN_INTRO, "## Machine and run", ""]
    if "revision" in report:
        out.append(f"- {_docs.revision_line(report['revision'])}")
    out += [f"- {line}" for line in machine_lines(report)]
    if report.get("command"):
        out.append(f"- Command: `{report['command']}`")
    if report.get("wall_s"):
        out.append(f"- The whole run took {report['wall_s'] / 60:.1f} minutes.")
    if plot:
        out += ["", f"![GB/s per operator, lodarrow beside each peer]({plot})"]
    out += ["", "## Results", ""]
    out.append("| " + " | ".join(COLUMNS) + " |")
    out.append("| " + " | ".join("---:" if c in COLUMNS[3:9] else "---" for c in COLUMNS) + " |")
    for row in report["rows"]:
        cells = [str(c).replace("|", "\\|") for c in _cells(row)]
        if row["library"] == "lodarrow" and row["status"] == "ok":
            cells[2] = f"**{cells[2]}**"
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def to_markdown(report, plot=None):
    """The results as a Markdown document: a title, then :func:`section_markdown` between the
    ``bench`` block's markers (see :mod:`lodarrow._bench._docs`)."""
    return MARKDOWN_TITLE + "\n" + _docs.block("bench", REGENERATE,
                                                section_markdown(report, plot))


#: The key and regenerating command of the block that quotes the ``apply_overhead`` row in
#: the prose ("apply per call"); :func:`write_markdown` rewrites it where a file has it.
APPLY_BLOCK = "bench-apply"


def apply_markdown(report):
    """The ``apply_overhead`` row of ``report`` as the sentence the prose quotes."""
    rows = [r for r in report["rows"] if r.get("op") == "apply_overhead"
            and r["library"] == "lodarrow" and r["status"] == "ok"]
    if not rows:
        return "The run above has no `apply_overhead` row.\n"
    r = rows[0]
    return (f"In the run above (`{report.get('command', '?')}`), the `apply_overhead` row "
            f"took {format_time(r['median_s'])} (median; best {format_time(r['best_s'])}; "
            f"target: 20 us).\n")


#: The blocks of ``benchmarks/README.md`` that a run writes (section "Where lodarrow is not
#: ahead"): key -> renderer of the report.  :func:`write_markdown` rewrites them in the README
#: beside the document it writes (``../benchmarks/README.md`` of ``docs/performance.md``).
BEHIND_BLOCK = "bench-behind"


def _run_line(report):
    """``Run: `COMMAND`; Commit: ...; CPU, cores (...); versions; load ...``: which run."""
    m = report["machine"]
    parts = [f"Run: `{report.get('command', '?')}`"]
    if "revision" in report:
        parts.append(_docs.revision_line(report["revision"]))
    parts.append(_docs.machine_line(m, m.get("load_average_end")))
    return "; ".join(parts) + "."


def behind_rows(report):
    """``(lodarrow's row, the fastest peer's row or None)`` of each case in which lodarrow is
    not ahead: its ``ratio_to_best_peer`` (best time / the fastest peer's best time, the
    table's "x best peer") is 1 or more, or its own call failed ("wrong", "error").  Cases
    without a peer (no ratio) are not listed."""
    cases = {}
    for row in report["rows"]:
        cases.setdefault((row["title"], row["workload"]), []).append(row)
    out = []
    for rows in cases.values():
        mine = next((r for r in rows if r["library"] == "lodarrow"), None)
        if mine is None:
            continue
        peer = next((r for r in rows if r.get("best_peer")), None)
        ratio = mine.get("ratio_to_best_peer")
        if mine["status"] != "ok" or (ratio is not None and ratio >= 1.0):
            out.append((mine, peer))
    return out


def behind_markdown(report):
    """The ``bench-behind`` block of ``benchmarks/README.md``: the cases of
    :func:`behind_rows` as a table, with the run they come from."""
    rows = behind_rows(report)
    threads = any("lodarrow_threads" in mine for mine, _ in rows)
    out = [
        "The cases of the run in `docs/performance.md` where lodarrow's best time is not below "
        "the fastest peer's (\"x best peer\", best time / the fastest peer's best time, of 1.00 "
        "or more; below 1 lodarrow is faster than every peer"
        + ("; lodarrow's threads: what its kernels could use just before and after the "
           "samples, `LODARROW_NUM_THREADS` or the usable CPUs less the busy ones"
           if threads else "") + ").  " + _run_line(report),
        "",
    ]
    if not rows:
        out.append("In this run lodarrow is ahead of every peer in every case that has one.")
        return "\n".join(out) + "\n"
    out += ["| operator | workload | lodarrow (best) | fastest peer | its best | x best peer |"
            + (" lodarrow's threads |" if threads else ""),
            "| --- | --- | ---: | --- | ---: | ---: |" + (" ---: |" if threads else "")]
    for mine, peer in rows:
        ok = mine["status"] == "ok"
        ratio = mine.get("ratio_to_best_peer")
        cells = [f"`{mine['title']}`", mine["workload"],
                 format_time(mine["best_s"]) if ok else mine["status"],
                 peer["impl"] if peer else "-",
                 format_time(peer["best_s"]) if peer else "-",
                 f"{ratio:.2f}" if ok and ratio is not None else "-"]
        if threads:  # what num_threads() gave just before and after its samples
            t = mine.get("lodarrow_threads")
            cells.append("-" if not t else str(t[0]) if t[0] == t[1] else f"{t[0]}-{t[1]}")
        out.append("| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |")
    return "\n".join(out) + "\n"


README_BLOCKS = {BEHIND_BLOCK: behind_markdown}


def readme_beside(path):
    """``benchmarks/README.md`` of the checkout whose ``docs/`` holds ``path``."""
    import os

    docs = os.path.dirname(os.path.abspath(path))
    return os.path.join(os.path.dirname(docs), "benchmarks", "README.md")


def write_readme(report, path):
    """Rewrite the blocks of :data:`README_BLOCKS` that the Markdown file ``path`` has (none
    is added: a file without them is left as it is)."""
    try:
        with open(path) as fh:
            text = fh.read()
    except OSError:
        return
    for key, render in README_BLOCKS.items():
        if _docs.find_block(text, key) is not None:
            _docs.write_block(path, key, REGENERATE, render(report))


#: The block of the project's README.md ("Performance") that :func:`summary_markdown` writes:
#: a few lines per family of operators, and a link to the document with every row.
SUMMARY_BLOCK = "bench-summary"

#: How the summary is regenerated (its marker says so).
SUMMARY_REGENERATE = ("python -m lodarrow bench --readme README.md, or from the run's JSON: "
                      "python -m lodarrow bench --from-json JSON --readme README.md")

#: The summary's families of cases, in its order: a name and the ``op`` of their rows.  A
#: case of an ``op`` no family names is counted under "other cases".
FAMILIES = (
    ("pooling, softmax, steps, top-k, conv",
     ("sequence_pool", "sequence_softmax", "sequence_first_step", "sequence_last_step",
      "sequence_topk_avg_pooling", "sequence_conv")),
    ("layout: pad, unpad, expand, slice, concat, ...",
     ("sequence_pad", "sequence_unpad", "sequence_expand", "sequence_expand_as",
      "sequence_reverse", "sequence_concat", "sequence_slice", "sequence_erase",
      "sequence_enumerate", "sequence_mask", "sequence_scatter")),
    ("Arrow conversions", ("to_arrow", "from_arrow", "from_offsets")),
    ("Parquet read and write (pyarrow's reader and polars' writer inside lodarrow's)",
     ("read_parquet", "write_parquet")),
    ("per-call overhead (a call on 10 rows)", ("call_overhead",)),
)


def family_summary(report):
    """``[(family, cases, ahead, speed-ups)]`` in :data:`FAMILIES`' order (families with no
    case left out): the cases of lodarrow's rows that have a peer (a ``ratio_to_best_peer``,
    or a failed call), how many lodarrow is ahead in (ratio below 1), and the speed-ups over
    the fastest peer (1 / ratio) of those that ran."""
    which = {op: name for name, ops in FAMILIES for op in ops}
    found = {}
    for row in report["rows"]:
        if row["library"] != "lodarrow":
            continue
        ratio = row.get("ratio_to_best_peer")
        if row["status"] == "ok" and ratio is None:  # no peer: nothing to compare
            continue
        found.setdefault(which.get(row["op"], "other cases"), []).append(
            ratio if row["status"] == "ok" else None)
    out = []
    for name in [n for n, _ in FAMILIES] + ["other cases"]:
        ratios = found.get(name)
        if ratios:
            ran = [r for r in ratios if r is not None]
            out.append((name, len(ratios), sum(r < 1.0 for r in ran), [1 / r for r in ran]))
    return out


def _extreme_cases(report):
    """``"; the lowest speed-up ..., the highest ..."``: the cases at the ends of the
    summary's ranges, named (empty when fewer than two cases ran)."""
    rows = [r for r in report["rows"] if r["library"] == "lodarrow" and r["status"] == "ok"
            and r.get("ratio_to_best_peer")]
    if len(rows) < 2:
        return ""
    rows.sort(key=lambda r: r["ratio_to_best_peer"])
    name = (lambda r: f"`{r.get('title') or r['op']}` ({r['workload']}, "
                      f"{1 / r['ratio_to_best_peer']:.2f}x)")
    return (f"; the lowest speed-up is {name(rows[-1])}, the highest {name(rows[0])} "
            f"(why lodarrow is behind where it is: "
            f"[benchmarks/README.md](benchmarks/README.md#where-lodarrow-is-not-ahead))")


def summary_markdown(report, link="docs/performance.md"):
    """The ``bench-summary`` block of README.md: per family of :data:`FAMILIES`, the cases
    lodarrow is ahead in and its median speed-up over the fastest peer, then the commit and
    the machine, and ``link`` (the document with every row and the plot)."""
    import statistics

    m = report["machine"]
    rev = _docs.revision_line(report["revision"]) if "revision" in report else "Commit: not known"
    out = ["Speed-up: the fastest peer's best time over lodarrow's, so above 1x lodarrow is "
           "the faster (the full tables give the inverse, lodarrow's time over the fastest "
           "peer's); each case the best of repeated calls on generated data of 10 to 10 "
           "million rows, on the CPU of the machine named below.", "",
           "| operators | lodarrow ahead of the fastest peer | speed-up over it: median (range) |",
           "| --- | ---: | ---: |"]
    total = ahead = 0
    ends = _extreme_cases(report)
    for name, cases, won, ups in family_summary(report):
        total, ahead = total + cases, ahead + won
        spread = ("-" if not ups else f"{ups[0]:.2f}x" if len(ups) == 1 else
                  f"{statistics.median(ups):.2f}x ({min(ups):.2f}x-{max(ups):.2f}x)")
        out.append(f"| {name} | {won} of {cases} | {spread} |")
    out += ["", (f"lodarrow is ahead of the fastest peer in {ahead} of {total} cases{ends}.  "
                 f"{rev}; "
                 f"{_docs.machine_line(m, m.get('load_average_end'))}.  Every case, the "
                 f"peers, the plot and the method: [{link}]({link}).")]
    return "\n".join(out) + "\n"


def write_summary(report, path, link="docs/performance.md"):
    """Put :func:`summary_markdown` in the ``bench-summary`` block of ``path`` (README.md),
    the rest of the file kept."""
    _docs.write_block(path, SUMMARY_BLOCK, SUMMARY_REGENERATE, summary_markdown(report, link))


#: The block of docs/interop.md ("Benchmarks") that a run of the conversion hub
#: (``bench --ops hub``) writes: :func:`write_markdown` rewrites only it where the file has it.
HUB_BLOCK = "bench-hub"

#: What each hub case converts, as the table names it.
HUB_TITLES = {"hub_torch_varlen": "varlen (values + int32 `cu_seqlens`)",
              "hub_torch_jagged": "jagged nested tensor",
              "hub_torch_padded": "padded + lengths + mask",
              "hub_torch_table": "table column -> varlen",
              "hub_jax_segments": "JAX segments (values + ids + sizes)",
              "hub_tf_ragged": "`tf.RaggedTensor`",
              "hub_awkward": "Awkward Array",
              "hub_from_awkward": "from Awkward"}


def hub_markdown(report):
    """The ``bench-hub`` block: the run (command, commit, machine, libraries' versions, load)
    and one line a conversion, lodarrow's best time beside each peer's, from ``report``'s
    hub rows (``op`` starting with ``hub_``)."""
    m = report["machine"]
    rows = [r for r in report["rows"] if str(r.get("op", "")).startswith("hub_")]
    versions = {}
    for r in rows:
        versions.update({k: v for k, v in (r.get("versions") or {}).items() if v})
    mem = f", {m['memory_bytes'] / 2**30:.0f} GiB" if m.get("memory_bytes") else ""
    out = [f"Command: `{report.get('command', '?')}`", ""]
    if "revision" in report:
        out.append(f"{_docs.revision_line(report['revision'])}.")
    libs = {k: v for k, v in m["versions"].items() if v and k != "python"}
    libs.update(versions)
    line = (f"{m['cpu']}, {m['cores']} usable cores{mem} ({m['platform']}); Python "
            f"{m['versions'].get('python')}"
            + "".join(f", {k} {v}" for k, v in sorted(libs.items())))
    load0, load1 = m.get("load_average"), m.get("load_average_end")
    if load0:
        line += f"; load average (1 min) {load0[0]:.1f} at the start"
        line += f", {load1[0]:.1f} at the end" if load1 else ""
    if report.get("wall_s"):
        line += f"; the run took {report['wall_s'] / 60:.1f} minutes"
    out += [line + ".", "", "Workloads: " + "; ".join(sorted({r["workload"] for r in rows
                                                              if r.get("rows")})) + ".", "",
            "| conversion | workload | lodarrow (best) | the usual way (best) | how | "
            "lodarrow / fastest peer |", "|---|---|---:|---:|---|---:|"]
    cases = {}
    for r in rows:
        cases.setdefault(r["op"], []).append(r)
    for op, group in cases.items():
        mine = next((r for r in group if r["library"] == "lodarrow"), None)
        peers = [r for r in group if r["library"] != "lodarrow"]
        title = HUB_TITLES.get(op, f"`{op}`")
        if mine is None or mine["status"] == "skipped":
            note = (mine or {}).get("note", "not run")
            out.append(f"| {title} | {group[0]['workload_name']} | not run: {note} | | | |")
            continue
        ok = mine["status"] == "ok"
        peer_t = " / ".join(format_time(r["best_s"]) if r["status"] == "ok" else r["status"]
                            for r in peers) or "-"
        how = " / ".join(f"`{r.get('how', '')}`" for r in peers) or "-"
        ratio = mine.get("ratio_to_best_peer")
        fastest = next((r for r in peers if r.get("best_peer")), None)
        rcell = "-" if not ok or ratio is None else (
            f"{ratio:.2g}" + (f" (vs {fastest['library']})" if len(peers) > 1 and fastest
                             else ""))
        out.append("| " + " | ".join(str(c).replace("|", "\\|") for c in (
            title, mine["workload_name"], format_time(mine["best_s"]) if ok else mine["status"],
            peer_t, how, rcell)) + " |")
    return "\n".join(out) + "\n"


def write_markdown(report, path, plot=None, readme=None):
    """Write the results into the Markdown file ``path``; ``plot`` (a PNG path) is linked
    relative to ``path``.  The blocks of :data:`README_BLOCKS` are rewritten too, in
    ``readme`` (default: :func:`readme_beside` ``path``, ``benchmarks/README.md`` for
    ``docs/performance.md``) where that file has them.

    Where the file has the ``bench-hub`` block (docs/interop.md), only that block is
    rewritten, as :func:`hub_markdown`, and no README.
    Where the file has the ``bench`` block, only that block is rewritten: every other part
    (the title, prose, the blocks other benchmarks write) is kept as it is.  A file without
    it is written as :func:`to_markdown`, followed by the ``## `` sections it had that this
    run does not write (``bench --datasets``' figures, notes), in their order.
    """
    import os

    if plot:
        plot = os.path.relpath(os.path.abspath(plot), os.path.dirname(os.path.abspath(path)))
    text = None
    try:
        with open(path) as fh:
            text = fh.read()
    except OSError:
        pass
    if text is not None and _docs.find_block(text, HUB_BLOCK) is not None:
        # docs/interop.md: the conversion hub's table only (no README block)
        _docs.write_block(path, HUB_BLOCK, REGENERATE, hub_markdown(report))
        return
    if text is not None and _docs.find_block(text, "bench") is not None:
        body = _docs.body_of(to_markdown(report, plot), "bench")
        _docs.write_block(path, "bench", REGENERATE, body)
        if _docs.find_block(text, APPLY_BLOCK) is not None:
            _docs.write_block(path, APPLY_BLOCK, REGENERATE, apply_markdown(report))
    else:
        kept = _kept_sections(path)
        with open(path, "w") as fh:
            fh.write(to_markdown(report, plot))
            for section in kept:
                fh.write("\n" + section.rstrip("\n") + "\n")
    write_readme(report, readme or readme_beside(path))


#: The sections :func:`to_markdown` writes; every other ``## `` section of the file is kept.
_GENERATED = ("## Machine and run", "## Results")


def _kept_sections(path):
    """The ``## `` sections of the Markdown file ``path`` that a new run does not rewrite."""
    try:
        with open(path) as fh:
            text = fh.read()
    except OSError:
        return []
    parts = ("\n" + text).split("\n## ")[1:]
    return ["## " + part for part in parts
            if not any(("## " + part).startswith(head) for head in _GENERATED)]


def write_plot(report, path):
    """A horizontal bar chart of GB/s per case, lodarrow beside each peer, with the machine's
    measured bandwidth as a vertical line (the cases of :data:`NOT_PLOTTED` left out)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = {}
    for row in report["rows"]:
        if row.get("gbps") is None or row.get("op") in NOT_PLOTTED:
            continue
        groups.setdefault(f"{row['title']}\n{row['workload']}", {})[row["library"]] = row["gbps"]
    libraries = ["lodarrow"] + sorted({lib for g in groups.values() for lib in g} - {"lodarrow"})
    colors = dict(zip(libraries, ["#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#8c564b",
                                  "#ff7f0e", "#7f7f7f"]))
    names = list(groups)
    height = 0.8 / max(1, len(libraries))
    fig, ax = plt.subplots(figsize=(10, 0.45 * max(4, len(names)) + 1.5))
    for k, lib in enumerate(libraries):
        ys = [i + k * height for i, n in enumerate(names) if lib in groups[n]]
        xs = [groups[n][lib] for n in names if lib in groups[n]]
        ax.barh(ys, xs, height=height, color=colors[lib], label=lib)
    bw = report["bandwidth"]["reference"]
    ax.axvline(bw, color="black", linestyle="--", linewidth=1,
               label=f"memory bandwidth {bw:.1f} GB/s")
    ax.set_yticks([i + 0.4 - height / 2 for i in range(len(names))], names, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("GB/s (bytes read + written / best time)")
    ax.set_title(f"lodarrow bench: {report['machine']['cpu']}, {report['machine']['cores']} cores")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
