#!/usr/bin/env python
"""Cold vs cached starts of the lengths pass, what the lengths in the footer cost a reader,
and the bytes a remote start fetches.

Side by side in one run (docs/training.md#lengths-cache, docs/tables.md#where-the-lengths-live,
docs/scale-out.md#remote-corpora):

- on a local corpus of ``--sequences`` token sequences (lognormal lengths, mean ~100 tokens,
  ``--files`` files, row groups of 65,536 rows, written by pyarrow: no recorded lengths), the
  time to ``la.sequence_lengths`` cold (decoding, filling a fresh cache), cached, from the
  footers of a copy written by ``la.write_parquet`` (no cache), beside pyarrow's own
  ``read_table(columns=[...])`` + ``pc.list_value_length`` and the sidecars an earlier
  release wrote beside each file; and ``la.batch_loader``'s start, cold, cached and from the
  footers;
- the footer itself (``--footer-sequences`` sequences in one file, written by
  ``la.write_parquet`` with and without ``record_lengths``): its size, the time to open the
  file for a reader that ignores the entry (pyarrow's ``ParquetFile(...).metadata``, DuckDB's
  and polars' row count, which read the footer only), the time ``write_parquet`` spends
  recording, a first ``sequence_lengths`` from the footer against decoding the column, and
  what lodarrow's checks of the entry cost: reading and checking the footer (a ``stat``, the
  footer's read, its SHA-256 and the entry's) and the data check (one ranged read of the
  first data page's header and ``DATA_BYTES`` after it, their SHA-256);
- on a moto S3 server started on 127.0.0.1 (``--s3``), the bytes a cold and a cached
  ``sequence_lengths`` and a one-column ``read_parquet`` fetch, against the column's
  compressed size and the file's size, what opening the file costs with the lengths in
  its footer and without, and the time of the same two checks there.

    python benchmarks/lengths_cache.py [--sequences 1000000] [--files 4] [--repeat 5]
        [--footer-sequences 100000] [--s3] [--json benchmarks/results/lengths_cache.json]
        [--docs docs/training.md] [--s3-docs docs/scale-out.md] [--footer-docs docs/tables.md]
    python benchmarks/lengths_cache.py --from-json benchmarks/results/lengths_cache.json \\
        --docs docs/training.md --s3-docs docs/scale-out.md --footer-docs docs/tables.md

The JSON holds the commit measured, the machine (CPU model, cores, load), every setting and
every median with the load average around its part of the run; ``--docs`` rewrites the
``lengths-cache`` block of the Markdown file (the local table and the sentences computed from
the JSON) between its markers (lodarrow/_bench/_docs.py), ``--s3-docs`` the ``lengths-s3``
block (the S3 bytes table, docs/scale-out.md) and ``--footer-docs`` the ``lengths-footer``
block (what the footer's entry costs a reader, docs/tables.md); ``--from-json`` writes them
again without measuring.
"""

import argparse
import os
import shutil
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

import lodarrow as la
from lodarrow._bench._docs import (add_output_options, command_line, publish, report_of,
                                   run_header, run_record, run_span, utc_now)
from lodarrow._tables._lengths_store import DATA_BYTES, _bound_to_data, fingerprint

ROW_GROUP = 65536


def corpus(n, seed=0, wide=False):
    """A table of ``n`` token sequences (int32 ids, lognormal lengths of mean ~100)."""
    rng = np.random.default_rng(seed)
    lengths = np.minimum(rng.lognormal(4.2, 0.8, n).astype(np.int64), 4096)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    ids = pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)),
                                   pa.array(rng.integers(0, 32000, int(offsets[-1]),
                                                         dtype=np.int32)))
    cols = {"ids": ids, "doc": pa.array(np.arange(n))}
    if wide:  # a column a lengths pass must not fetch
        cols["emb"] = pa.FixedSizeListArray.from_arrays(
            pa.array(rng.random(n * 64, dtype=np.float32)), 64)
    return pa.table(cols), lengths


def median_time(fn, repeat, setup=None):
    times = []
    for _ in range(repeat):
        if setup is not None:
            setup()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def interleaved(fns, repeat):
    """The median time of each of ``fns`` (name -> function), run in turn ``repeat`` times:
    on a shared machine the ones compared see the same load."""
    times = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return {name: float(np.median(t)) for name, t in times.items()}


def local(args, work):
    n, k = args.sequences, args.files
    plain, recorded = os.path.join(work, "plain"), os.path.join(work, "recorded")
    os.makedirs(plain)
    os.makedirs(recorded)
    per = -(-n // k)
    want, tokens = [], 0
    for f in range(k):
        table, lengths = corpus(min(per, n - f * per), seed=f)
        pq.write_table(table, os.path.join(plain, f"part-{f}.parquet"), row_group_size=ROW_GROUP)
        la.write_parquet(table, os.path.join(recorded, f"part-{f}.parquet"),
                         row_group_size=ROW_GROUP)
        want.append(lengths)
        tokens += int(lengths.sum())
    want = np.concatenate(want)
    size = sum(os.path.getsize(os.path.join(plain, x)) for x in os.listdir(plain))
    assert sorted(os.listdir(recorded)) == sorted(os.listdir(plain))  # nothing beside them
    footers = sum(pq.read_metadata(os.path.join(recorded, x)).serialized_size
                  - pq.read_metadata(os.path.join(plain, x)).serialized_size
                  for x in os.listdir(plain))
    cache = os.path.join(work, "cache")

    def fresh():
        shutil.rmtree(cache, ignore_errors=True)

    assert np.array_equal(la.sequence_lengths(plain, "ids", cache_dir=cache), want)
    cold = median_time(lambda: la.sequence_lengths(plain, "ids", cache_dir=cache),
                       args.repeat, fresh)
    la.sequence_lengths(plain, "ids", cache_dir=cache)
    fast = max(args.repeat, 21)  # the quick ones: more repeats against a noisy machine
    # the previous release's layout, for comparison: a sidecar file beside each data file
    legacy = os.path.join(work, "legacy")
    shutil.copytree(plain, legacy)
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "tests"))
    from test_lengths_cache import write_legacy_sidecar

    for x in os.listdir(plain):
        write_legacy_sidecar(os.path.join(legacy, x))
    assert np.array_equal(la.sequence_lengths(plain, "ids", cache_dir=cache), want)
    for where in (recorded, legacy):
        assert np.array_equal(la.sequence_lengths(where, "ids", cache_dir=False), want)
    quick = interleaved({
        "warm": lambda: la.sequence_lengths(plain, "ids", cache_dir=cache),
        "footer": lambda: la.sequence_lengths(recorded, "ids", cache_dir=False),
        "sidecar": lambda: la.sequence_lengths(legacy, "ids", cache_dir=False)}, fast)
    warm, footer, sidecar = quick["warm"], quick["footer"], quick["sidecar"]
    nocache = median_time(lambda: la.sequence_lengths(plain, "ids", cache_dir=False),
                          args.repeat)

    def peer():
        t = pq.read_table(plain, columns=["ids"])
        return pc.list_value_length(t.column("ids"))

    arrow = median_time(peer, args.repeat)
    loader = dict(max_tokens=65536, shuffle=True, seed=0)
    cold_loader = median_time(lambda: la.batch_loader(plain, "ids", cache_dir=cache, **loader),
                              args.repeat, fresh)
    la.batch_loader(plain, "ids", cache_dir=cache, **loader)
    quick = interleaved({
        "warm": lambda: la.batch_loader(plain, "ids", cache_dir=cache, **loader),
        "footer": lambda: la.batch_loader(recorded, "ids", cache_dir=False, **loader)}, fast)
    warm_loader, footer_loader = quick["warm"], quick["footer"]
    return {"sequences": len(want), "tokens": tokens, "files": k, "bytes": size,
            "footer_bytes": footers, "repeat": args.repeat, "fast_repeat": fast,
            "rows": [{"what": name, "seconds": t} for name, t in (
                ("`sequence_lengths`, no cache (decodes the column)", nocache),
                ("pyarrow `read_table(columns=[\"ids\"])` + `pc.list_value_length`", arrow),
                ("`sequence_lengths`, cold (decodes, fills the cache)", cold),
                ("`sequence_lengths`, cached", warm),
                ("`sequence_lengths`, from `write_parquet`'s footers, no cache", footer),
                ("`sequence_lengths`, from an earlier release's sidecars, no cache", sidecar),
                ("`batch_loader` start, cold", cold_loader),
                ("`batch_loader` start, cached", warm_loader),
                ("`batch_loader` start, from the footers, no cache", footer_loader))]}


def footer(args, work):
    """What the lengths in a file's footer cost a reader that ignores them, and save a
    loader's first start: one file of ``--footer-sequences`` sequences, with and without."""
    import duckdb
    import polars as pl

    n = args.footer_sequences
    table, lengths = corpus(n, seed=7)
    paths = {rec: os.path.join(work, f"footer-{rec}.parquet") for rec in (True, False)}
    fast = max(args.repeat, 21)
    write = interleaved({rec: (lambda rec=rec: la.write_parquet(
        table, paths[rec], row_group_size=ROW_GROUP, record_lengths=rec)) for rec in paths},
        args.repeat)
    assert np.array_equal(la.sequence_lengths(paths[True], "ids", cache_dir=False), lengths)
    meta = {rec: pq.read_metadata(p) for rec, p in paths.items()}
    entry = len(meta[True].metadata[b"lodarrow.lengths"])
    def opening(rec):
        path = paths[rec]
        return {
            "pyarrow ParquetFile(f).metadata": lambda: pq.ParquetFile(path).metadata,
            "DuckDB select count(*)": lambda: duckdb.sql(
                f"select count(*) from read_parquet('{path}')").fetchall(),
            "polars scan_parquet(f) row count": lambda: pl.scan_parquet(path).select(
                pl.len()).collect(),
        }

    many = max(fast, 101)  # sub-millisecond: more runs
    rows = [("write_parquet (records the lengths)", write[False], write[True])]
    for what in opening(True):
        quick = interleaved({False: opening(False)[what], True: opening(True)[what]}, many)
        rows.append((what, quick[False], quick[True]))
    decode = median_time(lambda: la.sequence_lengths(paths[False], "ids", cache_dir=False),
                         args.repeat)
    recorded = median_time(lambda: la.sequence_lengths(paths[True], "ids", cache_dir=False),
                           fast)
    rows.append(("first sequence_lengths (decoding / from the footer)", decode, recorded))
    timed = checks(paths[False], paths[True], None, many)
    return {"checks": timed, "sequences": n, "tokens": int(lengths.sum()),
            "row_groups": meta[True].num_row_groups,
            "bytes": os.path.getsize(paths[False]), "footer_without": meta[False].serialized_size,
            "footer_with": meta[True].serialized_size, "entry_bytes": entry,
            "repeat": args.repeat, "fast_repeat": fast, "opening_repeat": many,
            "rows": [{"what": w, "without": a, "with": b} for w, a, b in rows]}


def checks(without, with_, filesystem, repeat):
    """The median seconds of lodarrow's checks of the footer's entry, run in turn ``repeat``
    times: reading and checking the footer (:func:`fingerprint`: the listing, the footer's
    read and SHA-256, and for ``with_`` the entry's SHA-256) of the file without the entry and
    of the one with it, and the data check (:func:`_bound_to_data`: one ranged read of the
    column's first data page header and ``DATA_BYTES`` after it, their SHA-256)."""
    fp, _ = fingerprint(with_, filesystem)
    assert fp.recorded is not None and _bound_to_data(fp, fp.recorded, "ids")
    t = interleaved({"footer_without": lambda: fingerprint(without, filesystem),
                     "footer_with": lambda: fingerprint(with_, filesystem),
                     "data": lambda: _bound_to_data(fp, fp.recorded, "ids")}, repeat)
    return dict(t, repeat=repeat, data_bytes=DATA_BYTES)


def s3(args, work):
    from moto.server import ThreadedMotoServer
    import logging
    import socket

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "tests"))
    from test_remote_sources import CountingHandler

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        fs = pafs.S3FileSystem(access_key="x", secret_key="x", region="us-east-1",
                               endpoint_override=f"127.0.0.1:{port}", scheme="http",
                               allow_bucket_creation=True)
        fs.create_dir("bench")
        n = args.s3_sequences
        table, _ = corpus(n, wide=True)
        with fs.open_output_stream("bench/c/part-0.parquet") as f:
            pq.write_table(table, f, row_group_size=ROW_GROUP)
        meta = pq.read_metadata(fs.open_input_file("bench/c/part-0.parquet"))
        ids = sum(meta.row_group(g).column(0).total_compressed_size
                  for g in range(meta.num_row_groups))
        size = fs.get_file_info("bench/c/part-0.parquet").size
        handler = CountingHandler(fs)
        counting = pafs.PyFileSystem(handler)
        cache = os.path.join(work, "s3cache")
        rows = []
        for name, fn in (
                ("sequence_lengths, cold", lambda: la.sequence_lengths(
                    "bench/c", "ids", filesystem=counting, cache_dir=cache)),
                ("sequence_lengths, cached", lambda: la.sequence_lengths(
                    "bench/c", "ids", filesystem=counting, cache_dir=cache)),
                ("read_parquet(columns='ids')", lambda: la.read_parquet(
                    "bench/c", "ids", filesystem=counting))):
            handler.reset()
            fn()
            rows.append((name, handler.counter["bytes"], handler.counter["reads"]))
        la.write_parquet(table, "bench/r/part-0.parquet", filesystem=fs,
                         row_group_size=ROW_GROUP)  # the lengths in its footer
        for name, path in (("pq.ParquetFile(f).metadata, no lengths in the footer",
                            "bench/c/part-0.parquet"),
                           ("pq.ParquetFile(f).metadata, lengths in the footer",
                            "bench/r/part-0.parquet")):
            handler.reset()
            pq.ParquetFile(path, filesystem=counting).metadata
            rows.append((name, handler.counter["bytes"], handler.counter["reads"]))
        handler.reset()
        la.sequence_lengths("bench/r", "ids", filesystem=counting, cache_dir=False)
        rows.append(("sequence_lengths, from the footer (no cache)", handler.counter["bytes"],
                     handler.counter["reads"]))
        recorded = pq.read_metadata("bench/r/part-0.parquet", filesystem=fs)
        timed = checks("bench/c/part-0.parquet", "bench/r/part-0.parquet", fs,
                       max(args.repeat, 101))
        return {"checks": timed, "sequences": n, "file_bytes": size, "ids_bytes": ids,
                "row_groups": meta.num_row_groups, "footer_without": meta.serialized_size,
                "footer_with": recorded.serialized_size,
                "rows": [{"what": w, "bytes": b, "reads": r} for w, b, r in rows]}
    finally:
        server.stop()


FROM_JSON = ("python benchmarks/lengths_cache.py --from-json "
             "benchmarks/results/lengths_cache.json --docs docs/training.md")
#: The blocks of docs/scale-out.md (the S3 bytes) and docs/tables.md (what the footer's entry
#: costs a reader): their keys and the commands writing them again from the JSON.
S3_BLOCK, FOOTER_BLOCK = "lengths-s3", "lengths-footer"
S3_FROM_JSON = ("python benchmarks/lengths_cache.py --from-json "
                "benchmarks/results/lengths_cache.json --s3-docs docs/scale-out.md")
FOOTER_FROM_JSON = ("python benchmarks/lengths_cache.py --from-json "
                    "benchmarks/results/lengths_cache.json --footer-docs docs/tables.md")


def parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sequences", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--s3", action="store_true", help="also the S3 bytes (moto[server])")
    parser.add_argument("--s3-sequences", type=int, default=100_000)
    parser.add_argument("--footer-sequences", type=int, default=100_000)
    add_output_options(parser, json=None,
                       docs="rewrite the lengths-cache block of this Markdown file",
                       s3_docs="rewrite the lengths-s3 block (the S3 bytes) of this Markdown "
                       "file (docs/scale-out.md)",
                       footer_docs="rewrite the lengths-footer block (what the footer's entry "
                       "costs) of this Markdown file (docs/tables.md)", from_json=None)
    args = parser.parse_args(argv)
    args.argv = list(argv)
    return args


def measure(args):
    """The three parts, each with the 1-minute load average before and after it."""
    report = {**run_record(command_line("benchmarks/lengths_cache.py", args.argv),
                           ("numpy", "pyarrow", "lodarrow", "duckdb", "polars")),
              "settings": {k: v for k, v in vars(args).items()
                           if k not in ("argv", "json", "docs", "s3_docs", "footer_docs",
                                        "from_json")}}
    report["settings"].update(row_group=ROW_GROUP,
                              LODARROW_NUM_THREADS=os.environ.get("LODARROW_NUM_THREADS"))
    work = tempfile.mkdtemp(prefix="lodarrow-lengths-bench-")
    try:
        for part, run in (("local", local), ("footer", footer), ("s3", s3)):
            if part == "s3" and not args.s3:
                continue
            before = os.getloadavg()[0]
            report[part] = run(args, work)
            report[part]["load"] = [before, os.getloadavg()[0]]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report["finished"] = utc_now()
    report["load_at_end"] = os.getloadavg()[0]
    return report


def claims(report):
    """What the sentences state: the cached and footer starts over decoding, the entries'
    bytes, the bytes and reads of a cached start and of a footer's lengths on S3."""
    t = {r["what"]: r["seconds"] for r in report["local"]["rows"]}
    rows = list(t.values())
    nocache, cold, warm, footer = rows[0], rows[2], rows[3], rows[4]
    out = {"cached_x": nocache / warm, "cached_over_cold": cold / warm,
           "footer_x": nocache / footer, "loader_cached_x": rows[6] / rows[7]}
    s3 = report.get("s3")
    if s3:
        b = {r["what"]: r for r in s3["rows"]}
        out["s3_cached"] = b["sequence_lengths, cached"]
        out["s3_footer"] = b["sequence_lengths, from the footer (no cache)"]
    return out


def markdown(report):
    """The ``lengths-cache`` block: the run, the local table and the sentences."""
    s, lo = report["settings"], report["local"]
    lines = run_header(report) + [
             f"{lo['sequences']:,} sequences of lognormal lengths ({lo['tokens'] / 1e6:.1f}M "
             f"int32 tokens, {lo['files']} files of {s['row_group']:,}-row row groups, "
             f"{lo['bytes'] / 1e6:.1f} MB, written by pyarrow, and the same rows written by "
             f"`la.write_parquet` for the footer rows); median of {lo['repeat']} runs, "
             f"{lo['fast_repeat']} for the fast rows (cached, footers, sidecars), which run in "
             f"turn; 1-minute load average {lo['load'][0]:.1f} just before this table's runs "
             f"and {lo['load'][1]:.1f} just after them; \"x\" is the time of decoding (`sequence_lengths` without a cache) over "
             f"the row's.", "", "| start | seconds | x |", "| --- | ---: | ---: |"]
    base = lo["rows"][0]["seconds"]
    for r in lo["rows"]:
        lines.append(f"| {r['what']} | {r['seconds']:.4f} | {base / r['seconds']:.1f} |")
    c = claims(report)
    lines += ["", f"- A cached `sequence_lengths` is {c['cached_x']:.0f}x faster than decoding "
                  f"({c['cached_over_cold']:.0f}x than the cold start), one from the footers "
                  f"{c['footer_x']:.0f}x; a cached `batch_loader` start "
                  f"{c['loader_cached_x']:.1f}x a cold one (the rest of a cached start is the "
                  f"epoch's plan).",
              f"- The lengths in the footers take {lo['footer_bytes'] / 1e6:.2f} MB for the "
              f"{lo['files']} files ({lo['footer_bytes'] / lo['sequences']:.2f} bytes a "
              f"sequence)."]
    if "s3_cached" in c:
        s3, a, b = report["s3"], c["s3_cached"], c["s3_footer"]
        lines.append(f"- On S3 (moto on 127.0.0.1, one file of {s3['sequences']:,} sequences, "
                     f"{s3['file_bytes'] / 1e6:.1f} MB): a cached `sequence_lengths` fetched "
                     f"{a['bytes'] / 1024:,.0f} KiB in {a['reads']} read(s); the lengths from "
                     f"a footer that holds them {b['bytes'] / 1e3:,.0f} KB in {b['reads']} "
                     f"read(s).")
    return "\n".join(lines) + "\n"


def run_line(report):
    """Which run: its command, commit, machine and when."""
    return f"Run: `{report['command']}`; {run_span(report)}."


S3_CALLS = (("sequence_lengths, cold", "`sequence_lengths`, cold"),
            ("sequence_lengths, cached", "`sequence_lengths`, cached"),
            ("sequence_lengths, from the footer (no cache)",
             "`sequence_lengths` of the same rows written by `la.write_parquet` (lengths in "
             "the footer), `cache_dir=False`"),
            ("read_parquet(columns='ids')", "`read_parquet(..., \"ids\")`"))


def s3_markdown(report):
    """The ``lengths-s3`` block of docs/scale-out.md: the bytes a start fetches from S3."""
    s3 = report.get("s3")
    if not s3:
        return (f"{run_line(report)}\n\nThis run had no S3 part: "
                f"`python benchmarks/lengths_cache.py --s3` measures it.\n")
    b = {r["what"]: r for r in s3["rows"]}
    lines = [run_line(report), "",
             f"One file of {s3['sequences']:,} sequences with a 64-float embedding column beside "
             f"the tokens ({s3['file_bytes'] / 1e6:.2f} MB; column `ids` "
             f"{s3['ids_bytes'] / 1e6:.2f} MB compressed, {s3['row_groups']} row groups), on a "
             f"moto S3 server on 127.0.0.1; bytes counted by a `pyarrow.fs.PyFileSystem` "
             f"wrapper around `S3FileSystem`:", "",
             "| call | bytes fetched | reads | / `ids` compressed | / file |",
             "| --- | ---: | ---: | ---: | ---: |"]
    for key, label in S3_CALLS:
        r = b[key]
        lines.append(f"| {label} | {r['bytes']:,} | {r['reads']} | "
                     f"{r['bytes'] / s3['ids_bytes']:.3f} | {r['bytes'] / s3['file_bytes']:.3f} |")
    cold, read = b["sequence_lengths, cold"], b["read_parquet(columns='ids')"]
    lines += ["", f"A cold `sequence_lengths` fetched {cold['bytes'] - s3['ids_bytes']:,} bytes "
                  f"({(cold['bytes'] / s3['ids_bytes'] - 1) * 100:.1f}%) over the column's "
                  f"compressed size; `read_parquet` {read['bytes'] - cold['bytes']:,} bytes and "
                  f"{read['reads'] - cold['reads']} read(s) more than the cold "
                  f"`sequence_lengths`."]
    return "\n".join(lines) + "\n"


def footer_markdown(report):
    """The ``lengths-footer`` block of docs/tables.md: what the ``lodarrow.lengths`` entry of
    a footer costs a reader that ignores it, and saves a first start."""
    f, lo, s3 = report["footer"], report["local"], report.get("s3")
    per = f["entry_bytes"] / f["sequences"]
    rows = {r["what"]: r for r in f["rows"]}
    ms = lambda x: f"{x * 1e3:.2f} ms"  # noqa: E731
    checked = " and for lodarrow's checks" if f.get("checks") else ""
    lines = [run_line(report), "",
             f"One file of {f['sequences']:,} sequences of lognormal lengths "
             f"({f['tokens'] / 1e6:.1f}M int32 tokens, {f['bytes'] / 1e6:.1f} MB, "
             f"{f['row_groups']} row groups) written by `la.write_parquet` with and without the "
             f"entry; medians of {f['repeat']} runs for writing and decoding, "
             f"{f['opening_repeat']} for opening{checked}, {f['fast_repeat']} for the footer, "
             f"the file with and without the entry in turn; 1-minute load average "
             f"{f['load'][0]:.1f} just before this table's runs and {f['load'][1]:.1f} just "
             f"after them.", "",
             "| | without the entry | with it | with / without |",
             "| --- | ---: | ---: | ---: |",
             f"| footer | {f['footer_without']:,} bytes | {f['footer_with']:,} bytes (the entry "
             f"{f['entry_bytes']:,}: {per:.2f} per sequence) | |"]
    labels = {"write_parquet (records the lengths)":
              "`la.write_parquet` of the file (the lengths counted, the footer rewritten)",
              "pyarrow ParquetFile(f).metadata": "pyarrow `ParquetFile(f).metadata`",
              "DuckDB select count(*)": "DuckDB `select count(*) from read_parquet(f)`",
              "polars scan_parquet(f) row count": "polars `scan_parquet(f)` row count"}
    for what, label in labels.items():
        r = rows[what]
        lines.append(f"| {label} | {ms(r['without'])} | {ms(r['with'])} | "
                     f"{r['with'] / r['without']:.2f} |")
    lines += check_rows(f.get("checks"), "", f["opening_repeat"])
    if s3:
        b = {r["what"]: r for r in s3["rows"]}
        a = b["pq.ParquetFile(f).metadata, no lengths in the footer"]
        c = b["pq.ParquetFile(f).metadata, lengths in the footer"]
        on_s3 = f"on S3 (moto; the S3 part's file of {s3['sequences']:,} sequences): "
        lines.append(f"| {on_s3}`ParquetFile(f).metadata` fetches | {a['bytes']:,} bytes, "
                     f"{a['reads']} read(s) | {c['bytes']:,} bytes, {c['reads']} read(s) | |")
        lines += check_rows(s3.get("checks"), on_s3, f["opening_repeat"])
    r = rows["first sequence_lengths (decoding / from the footer)"]
    lines.append(f"| a first `sequence_lengths`: decoding the column / from the footer | "
                 f"{ms(r['without'])} | {ms(r['with'])} | {r['with'] / r['without']:.3f} "
                 f"({r['without'] / r['with']:.0f}x faster) |")
    t = [x["seconds"] for x in lo["rows"]]
    fits = (65536 - f["footer_without"]) / per
    lines += ["",
              f"- The entry takes {per:.2f} bytes a sequence, against the "
              f"{f['bytes'] / f['sequences']:.0f} bytes a sequence of the whole file: a footer "
              f"outgrows the 64 KiB most readers fetch first past about {fits:,.0f} sequences "
              f"a file.",
              f"- On the local corpus of {lo['sequences']:,} sequences ({lo['files']} files, the "
              f"same run; docs/training.md#lengths-cache) a `sequence_lengths` start took "
              f"{ms(t[4])} from the footers, {ms(t[5])} from an earlier release's sidecars, "
              f"{ms(t[3])} from the lengths cache and {ms(t[0])} decoding."]
    if s3:
        n = b["sequence_lengths, from the footer (no cache)"]
        lines.append(f"- On S3 a `sequence_lengths` from the footer with `cache_dir=False` "
                     f"fetched {n['bytes']:,} bytes in {n['reads']} reads, "
                     f"{n['bytes'] - c['bytes']:,} bytes and {n['reads'] - c['reads']} read(s) "
                     f"more than opening the file (the data check; with a cache, the first "
                     f"start only).")
    where = [(k, x) for k, x in (("on the local disk", f.get("checks")),
                                 ("on S3 (moto)", (s3 or {}).get("checks"))) if x]
    if where:
        lines.append("- lodarrow's data check took " + "; ".join(
            f"{fine(x['data'])} {k}, {x['data'] / x['footer_with']:.2f}x the time of its "
            f"reading and checking the footer with the entry ({fine(x['footer_with'])})"
            for k, x in where) + ".")
    return "\n".join(lines) + "\n"


def fine(seconds):
    """Milliseconds, three decimals below one."""
    return f"{seconds * 1e3:.3f} ms" if seconds < 1e-3 else f"{seconds * 1e3:.2f} ms"


def check_rows(t, where, repeat):
    """The footer table's rows of lodarrow's checks (:func:`checks`; none in a JSON of an
    earlier version, which did not time them); ``repeat``: the runs the table's intro names."""
    if not t:
        return []
    runs = "" if t["repeat"] == repeat else f"; medians of {t['repeat']}"
    return [f"| {where}lodarrow reading and checking the footer (the listing, the footer's read "
            f"and SHA-256; with the entry, the entry's SHA-256 too){runs} | "
            f"{fine(t['footer_without'])} | {fine(t['footer_with'])} | "
            f"{t['footer_with'] / t['footer_without']:.2f} |",
            f"| {where}lodarrow's data check (one ranged read of the column's first data page "
            f"header and the {t['data_bytes']:,} bytes after it, their SHA-256){runs} | | "
            f"{fine(t['data'])} | |"]


def full_markdown(report):
    """The block, then the footer's and S3's tables (printed, not published)."""
    lines = [markdown(report)]
    f = report["footer"]
    lines.append(f"One file: {f['sequences']:,} sequences, {f['tokens']:,} tokens, "
                 f"{f['row_groups']} row groups, {f['bytes'] / 1e6:.1f} MB; footer "
                 f"{f['footer_without']:,} bytes without the lengths, {f['footer_with']:,} with "
                 f"(the entry: {f['entry_bytes']:,} bytes).\n\n| what | without | with | with / "
                 f"without |\n| --- | ---: | ---: | ---: |")
    lines += [f"| {r['what']} | {r['without']:.5f} | {r['with']:.5f} | "
              f"{r['with'] / r['without']:.2f} |" for r in f["rows"]]
    s3 = report.get("s3")
    if s3:
        lines.append(f"\nS3: {s3['sequences']:,} sequences, file {s3['file_bytes'] / 1e6:.2f} "
                     f"MB, column 'ids' {s3['ids_bytes'] / 1e6:.2f} MB compressed "
                     f"({s3['row_groups']} row groups), footer {s3['footer_without'] / 1e3:.1f} "
                     f"kB; with the lengths {s3['footer_with'] / 1e3:.1f} kB\n\n| what | bytes "
                     f"fetched | reads | / 'ids' compressed | / file |\n| --- | ---: | ---: | "
                     f"---: | ---: |")
        lines += [f"| {r['what']} | {r['bytes']:,} | {r['reads']} | "
                  f"{r['bytes'] / s3['ids_bytes']:.3f} | {r['bytes'] / s3['file_bytes']:.3f} |"
                  for r in s3["rows"]]
    return "\n".join(lines) + "\n"


def main(argv=None):
    args = parse(sys.argv[1:] if argv is None else argv)
    report = report_of(args, measure)
    publish(args, full_markdown(report),
            [("docs", "lengths-cache", FROM_JSON, lambda: markdown(report)),
             ("s3_docs", S3_BLOCK, S3_FROM_JSON, lambda: s3_markdown(report)),
             ("footer_docs", FOOTER_BLOCK, FOOTER_FROM_JSON, lambda: footer_markdown(report))])
    return report


if __name__ == "__main__":
    main()
