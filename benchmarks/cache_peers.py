"""A local cache for a remote corpus: lodarrow's ``cache_bytes=`` against MosaicML streaming's
local shard cache, on one corpus on a local S3 server (moto), in one invocation
(docs/training.md#a-local-cache-for-remote-corpora).

The corpus: ``--sequences`` token sequences (int32 ids drawn uniformly from a 50,257-token
vocabulary, lognormal lengths of mean ~300, at most 4,096), written once under ``--workdir``
as one Parquet file of 10,000-row row groups (lodarrow's source) and as MDS shards of the same
sequences (``MDSWriter(columns={"tokens": "ndarray:int32"}, size_limit="64mb")``, MosaicML's
source: uncompressed, the default, and ``compression="zstd"`` for a second MosaicML row, as
the Parquet file is dictionary-encoded).  Both are uploaded to the bucket of a moto S3 server
started by this script (untimed).

Each loader makes packed batches of 32 sequences (torch: the tokens flattened and
``cu_seqlens``), 3 epochs in one process, with a cold cache directory of ``--cache-bytes``:

- lodarrow: ``la.batch_loader("s3://bench/corpus", "input_ids", batch_size=32,
  mode="packed", to="torch", bucket=False, filesystem=S3FileSystem(endpoint), cache_dir=DIR,
  cache_bytes=N)`` (``bucket=False``: random batches of 32, as MosaicML's shuffle makes, not
  windows sorted by length); and, for reference, the same loader without ``cache_bytes``;
- MosaicML: ``StreamingDataset(remote="s3://bench/mds", local=DIR, shuffle=True,
  batch_size=32, cache_limit=N)`` + ``StreamingDataLoader(batch_size=32, num_workers=0,
  collate_fn=...)`` flattening the samples into the same two tensors; boto3 pointed at the
  server by ``S3_ENDPOINT_URL``.

Measured, per loader: the seconds to make the loader and to run each epoch (lodarrow's start
reads the whole sequence column of a pyarrow-written file for the lengths, through the cache
when there is one; MosaicML's start fetches ``index.json``, its shards come in epoch 1); the
bytes the S3 server sent meanwhile (response bodies of every request, counted by a WSGI
middleware around moto's app: one count for both loaders, whatever client fetched them); the
sequences and tokens delivered (each epoch whole); the cache directory's size on disk after
the run (allocated blocks, and the files' apparent size); and whether the third epoch runs
with the server **stopped** after the second (its listening socket and open connections
closed; a failure is reported with its error and after how long).

Each loader runs in a child process (``--child NAME``) under its interpreter
(``--peer-python streaming=/path/venv/bin/python``); the child asks the parent, which runs
the server, for the byte count at each mark, and to stop the server, over its stdin/stdout.
Every process runs with ``LODARROW_NUM_THREADS=1`` and ``torch.set_num_threads(1)``.  moto
is a mock, not S3: its latency and throughput are a local Python server's, so the seconds
compare the loaders on this server only; the bytes do not depend on it.  MosaicML refuses a
``cache_limit`` under four times its largest shard (raw and compressed), so a cache smaller
than the corpus (``--cache-bytes``) compares only with shards much smaller than 64 MB.

Usage::

    LODARROW_NUM_THREADS=1 python benchmarks/cache_peers.py --workdir /tmp/bench-cache \\
        --peer-python streaming=/path/venv/bin/python \\
        --json benchmarks/results/cache_peers.json --docs benchmarks/README.md
    python benchmarks/cache_peers.py --from-json benchmarks/results/cache_peers.json \\
        --docs benchmarks/README.md

``--json PATH`` keeps every loader's marks with the commit, the machine, the load and the
command; ``--docs FILE.md`` writes the block between ``<!-- generated: cache-peers, ... -->``
and ``<!-- end generated: cache-peers -->`` of that file from the JSON (the rest is kept);
``--from-json PATH`` writes that block (or prints the table) from an earlier run's JSON
without running anything; ``--markdown PATH`` writes the table alone to a file of its own.
"""

import argparse
import contextlib
import json
import logging
import os
import platform
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

BUCKET = "bench"
PEERS = ("lodarrow-nocache", "lodarrow", "streaming", "streaming-zstd")
ROOT = Path(__file__).resolve().parent.parent
KEY = "cache-peers"
REGENERATE = ("python benchmarks/cache_peers.py --from-json benchmarks/results/cache_peers.json "
              "--docs benchmarks/README.md")
#: What measures the block: MosaicML streaming in an environment of its own beside this one.
MEASURE = ("LODARROW_NUM_THREADS=1 python benchmarks/cache_peers.py --peer-python "
           "streaming=PYTHON --json benchmarks/results/cache_peers.json "
           "--docs benchmarks/README.md")
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
               "AWS_DEFAULT_REGION": "us-east-1"}


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workdir", default="/tmp/bench-cache")
    p.add_argument("--sequences", type=int, default=100_000)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--epochs", type=int, default=3, help="the server stops before the last")
    p.add_argument("--cache-bytes", type=int, default=1 << 30,
                   help="lodarrow's cache_bytes and MosaicML's cache_limit")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--peers", default=",".join(PEERS))
    p.add_argument("--peer-python", action="append", default=[], metavar="NAME=PYTHON")
    p.add_argument("--epoch-timeout", type=float, default=120,
                   help="seconds the last epoch (server stopped) may take before it is "
                        "reported as hanging")
    p.add_argument("--markdown", help="write the table to this file (the whole file)")
    p.add_argument("--json", help="write every loader's marks as JSON")
    p.add_argument("--docs", metavar="FILE.md",
                   help="write this benchmark's block of that Markdown file")
    p.add_argument("--from-json", metavar="PATH",
                   help="run nothing: --docs / --markdown from the JSON of an earlier run")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, help=argparse.SUPPRESS)
    p.add_argument("--cache-dir", help=argparse.SUPPRESS)
    return p.parse_args(argv)


# --- the corpus -----------------------------------------------------------------------------

def sequences(args):
    """``(offsets, values)``: the corpus's sequences, the same for every format."""
    rng = np.random.default_rng(args.seed)
    # lognormal(mu, 1.0) has mean exp(mu + 0.5): mean ~300 tokens
    lengths = np.clip(rng.lognormal(np.log(300) - 0.5, 1.0, args.sequences), 1,
                      4096).astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return offsets, rng.integers(0, 50257, int(offsets[-1]), dtype=np.int32)


def parquet_corpus(args):
    """The Parquet file (column ``input_ids``, 10,000-row row groups), written once."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(args.workdir) / f"corpus-{args.sequences}-{args.seed}" / "part-0.parquet"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        offsets, values = sequences(args)
        table = pa.table({"input_ids": pa.ListArray.from_arrays(
            pa.array(offsets.astype(np.int32)), pa.array(values))})
        pq.write_table(table, str(path) + ".tmp", row_group_size=10_000)
        os.replace(str(path) + ".tmp", path)
    return path


def mds_corpus(args, compression):
    """The MDS shards of the same sequences (64 MB shards), written once."""
    streaming = _streaming()
    out = Path(args.workdir) / f"mds-{args.sequences}-{args.seed}-{compression or 'raw'}"
    if not (out / "index.json").exists():
        shutil.rmtree(out, ignore_errors=True)
        offsets, values = sequences(args)
        with streaming.MDSWriter(out=str(out), columns={"tokens": "ndarray:int32"},
                                 compression=compression, size_limit="64mb") as w:
            for j in range(len(offsets) - 1):
                w.write({"tokens": values[offsets[j]:offsets[j + 1]]})
    return out


def _streaming():
    """``import streaming`` without ``streaming.vision`` (as benchmarks/loaders.py: its
    torchvision import does not load beside the CPU torch; no vision dataset is used)."""
    import types

    sys.modules.setdefault("streaming.vision", types.ModuleType("streaming.vision"))
    import streaming

    return streaming


# --- the S3 server (in the parent) ----------------------------------------------------------

class CountingApp:
    """A WSGI middleware summing the response bodies' bytes (and the requests) of the app it
    wraps: what the server sent, whoever asked."""

    def __init__(self, app):
        self.app = app
        self.lock = threading.Lock()
        self.bytes = self.requests = 0

    def __call__(self, environ, start_response):
        with self.lock:
            self.requests += 1
        return self._count(self.app(environ, start_response))

    def _count(self, body):
        n = 0
        try:
            for chunk in body:
                n += len(chunk)
                yield chunk
        finally:
            with self.lock:
                self.bytes += n
            close = getattr(body, "close", None)
            if close is not None:
                close()

    def snapshot(self):
        with self.lock:
            return {"bytes": self.bytes, "requests": self.requests}


class Server:
    """moto's S3 in this process, counted; :meth:`stop` closes the listening socket and every
    open connection (a client's pooled keep-alive connection included), so the server is
    gone, not merely idle.  moto's buckets outlive a stop: the next :meth:`start` serves
    them again."""

    def __init__(self):
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, \
            create_backend_app

        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        self.counter = CountingApp(DomainDispatcherApplication(create_backend_app))
        self.server = self.thread = None

    def start(self):
        from werkzeug.serving import WSGIRequestHandler, make_server

        conns = set()

        class Handler(WSGIRequestHandler):
            def setup(self):
                super().setup()
                conns.add(self.connection)

            def finish(self):
                conns.discard(self.connection)
                super().finish()

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.server = make_server("127.0.0.1", self.port, self.counter, threaded=True,
                                  request_handler=Handler)
        self.conns = conns
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self.port

    def stop(self):
        if self.server is None:
            return
        self.server.shutdown()
        self.server.server_close()
        for c in list(self.conns):
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)
        self.thread.join()
        self.server = None


def upload(port, folder, prefix):
    """Every file of ``folder`` into the bucket under ``prefix`` (boto3, untimed); their
    bytes."""
    import boto3

    s3 = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}",
                      aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
                      aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
                      region_name=CREDENTIALS["AWS_DEFAULT_REGION"])
    with contextlib.suppress(s3.exceptions.BucketAlreadyOwnedByYou):
        s3.create_bucket(Bucket=BUCKET)
    total = 0
    for f in sorted(Path(folder).iterdir()):
        s3.upload_file(str(f), BUCKET, f"{prefix}/{f.name}")
        total += f.stat().st_size
    return total


def s3_filesystem(port, **kw):
    import pyarrow.fs as pafs

    return pafs.S3FileSystem(access_key=CREDENTIALS["AWS_ACCESS_KEY_ID"],
                             secret_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
                             region=CREDENTIALS["AWS_DEFAULT_REGION"],
                             endpoint_override=f"127.0.0.1:{port}", scheme="http", **kw)


# --- the loaders (each in a child process) ---------------------------------------------------

def ask(message):
    """Ask the parent (which runs the server): ``mark`` (the bytes sent so far) or ``stop``."""
    print("@@" + json.dumps(message), flush=True)
    return json.loads(sys.stdin.readline())


def packed(seqs):
    """The batch flattened: lengths, values and cu_seqlens (as lodarrow's packed mode)."""
    import torch

    lengths = np.array([len(x) for x in seqs], np.int64)
    cu = np.zeros(len(seqs) + 1, np.int32)
    np.cumsum(lengths, out=cu[1:])
    values = np.concatenate(seqs) if seqs else np.zeros(0, np.int32)
    return {"lengths": torch.from_numpy(lengths), "values": torch.from_numpy(values),
            "cu_seqlens": torch.from_numpy(cu)}


def make_lodarrow(args, cache_dir, cached):
    import lodarrow as la

    kw = {"cache_bytes": args.cache_bytes} if cached else {}
    loader = la.batch_loader(f"s3://{BUCKET}/corpus", "input_ids", batch_size=args.batch_size,
                             mode="packed", to="torch", bucket=False,
                             filesystem=s3_filesystem(args.port), cache_dir=cache_dir,
                             seed=args.seed, progress=False, **kw)

    def epoch(e):
        loader.set_epoch(e)
        for b in loader:
            yield len(b["cu_seqlens"]) - 1, int(b["cu_seqlens"][-1])
    how = ("la.batch_loader('s3://bench/corpus', 'input_ids', batch_size=32, mode='packed', "
           "to='torch', bucket=False, filesystem=S3FileSystem, cache_dir" +
           (", cache_bytes=N)" if cached else ") (no cache_bytes)"))
    return epoch, how


def make_streaming(args, cache_dir, compression):
    streaming = _streaming()
    from streaming.base.util import clean_stale_shared_memory

    clean_stale_shared_memory()
    ds = streaming.StreamingDataset(remote=f"s3://{BUCKET}/{args.prefix}", local=cache_dir,
                                    shuffle=True, shuffle_seed=args.seed,
                                    batch_size=args.batch_size, cache_limit=args.cache_bytes)

    def collate(samples):  # "lengths" first: StreamingDataLoader counts samples by it
        return packed([s["tokens"] for s in samples])
    data = streaming.StreamingDataLoader(ds, batch_size=args.batch_size, num_workers=0,
                                         collate_fn=collate)

    def epoch(e):  # each pass of the loader is the dataset's next epoch
        for b in data:
            yield len(b["lengths"]), int(b["cu_seqlens"][-1])
    how = (f"StreamingDataset(remote='s3://bench/{args.prefix}', local, shuffle=True, "
           f"batch_size=32, cache_limit=N) + StreamingDataLoader(num_workers=0); "
           f"{'zstd' if compression else 'uncompressed'} MDS, flattened with NumPy")
    return epoch, how


def _hangs(signum, frame):
    raise TimeoutError("still running after --epoch-timeout seconds")


def child(args):
    import torch

    torch.set_num_threads(1)
    cache_dir = args.cache_dir
    if args.child.startswith("streaming"):
        compression = "zstd" if args.child.endswith("zstd") else None
        args.prefix = f"mds-{compression or 'raw'}"
        upload(args.port, mds_corpus(args, compression), args.prefix)
        make = lambda: make_streaming(args, cache_dir, compression)  # noqa: E731
    else:
        make = lambda: make_lodarrow(args, cache_dir, args.child == "lodarrow")  # noqa: E731
    marks = [ask({"mark": "start"})]
    t0 = time.perf_counter()
    epoch, how = make()
    start_s = time.perf_counter() - t0
    marks.append(ask({"mark": "made"}))
    epochs = []
    for e in range(args.epochs):
        if e == args.epochs - 1:
            ask({"stop": True})
        out = {"epoch": e, "server": e < args.epochs - 1, "sequences": 0, "tokens": 0}
        t = time.perf_counter()
        if not out["server"]:  # an epoch that hangs on the missing server is ended
            signal.signal(signal.SIGALRM, _hangs)
            signal.alarm(int(args.epoch_timeout))
        try:
            for n, tokens in epoch(e):
                out["sequences"] += n
                out["tokens"] += tokens
        except Exception as exc:  # the server is gone and the loader needed it
            out["error"] = f"{type(exc).__name__}: {' '.join(str(exc).split())[:600]}"
        signal.alarm(0)
        out["seconds"] = time.perf_counter() - t
        marks.append(ask({"mark": f"epoch {e}"}))
        epochs.append(out)
        print(f"{args.child} epoch {e}: {out['seconds']:.2f} s, {out['sequences']} sequences"
              + (f", {out['error']}" if "error" in out else ""), file=sys.stderr, flush=True)
    for k, ep in enumerate(epochs):
        ep["bytes"] = marks[k + 2]["bytes"] - marks[k + 1]["bytes"]
        ep["requests"] = marks[k + 2]["requests"] - marks[k + 1]["requests"]
    print("@@" + json.dumps({"result": {
        "peer": args.child, "how": how, "start_s": start_s,
        "start_bytes": marks[1]["bytes"] - marks[0]["bytes"],
        "start_requests": marks[1]["requests"] - marks[0]["requests"], "epochs": epochs}}),
        flush=True)


# --- the driver ---------------------------------------------------------------------------

def disk_usage(folder):
    """``(allocated, apparent)`` bytes of the files under ``folder``."""
    blocks = size = 0
    for root, _, files in os.walk(folder):
        for f in files:
            with contextlib.suppress(FileNotFoundError):
                st = os.stat(os.path.join(root, f))
                blocks += st.st_blocks * 512
                size += st.st_size
    return blocks, size


def run_child(args, argv, peer, python, server):
    """One loader: a fresh server port, a cold cache directory, the child's marks answered."""
    cache_dir = Path(args.workdir) / f"cache-{peer}"
    shutil.rmtree(cache_dir, ignore_errors=True)
    cache_dir.mkdir(parents=True)
    port = server.start()
    env = dict(os.environ, **CREDENTIALS, S3_ENDPOINT_URL=f"http://127.0.0.1:{port}",
               LODARROW_NUM_THREADS="1")
    cmd = [python, os.path.abspath(__file__), "--child", peer, "--port", str(port),
           "--cache-dir", str(cache_dir)] + argv
    log = Path(args.workdir) / f"{peer}.log"
    result = None
    with open(log, "w") as err:
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=err, text=True, env=env, bufsize=1)
        timer = None
        for line in proc.stdout:
            if not line.startswith("@@"):
                continue
            msg = json.loads(line[2:])
            if "result" in msg:
                result = msg["result"]
                continue
            if msg.get("stop"):
                server.stop()
                # the child ends a last epoch that hangs (SIGALRM); this, one it cannot end
                timer = threading.Timer(args.epoch_timeout + 60, proc.kill)
                timer.start()
            proc.stdin.write(json.dumps(server.counter.snapshot()) + "\n")
            proc.stdin.flush()
        proc.wait()
        if timer is not None:
            timer.cancel()
    server.stop()
    if result is None:
        tail = log.read_text()[-2000:]
        print(f"{peer}: failed\n{tail}", file=sys.stderr)
        return {"peer": peer, "error": tail.strip().splitlines()[-1] if tail.strip()
                else f"exit {proc.returncode}"}
    result["cache_disk"], result["cache_size"] = disk_usage(cache_dir)
    return result


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    if args.child:
        return child(args)
    from lodarrow._bench import _docs

    report = _docs.report_of(args, lambda args: measure(args, argv))
    text = markdown(report)
    _docs.publish(args, text, [("docs", KEY, REGENERATE, text)], echo=None)


def measure(args, argv):
    """Every loader in turn; the report --json keeps (main writes it)."""
    os.environ["LODARROW_NUM_THREADS"] = "1"
    Path(args.workdir).mkdir(parents=True, exist_ok=True)
    pythons = dict(x.split("=", 1) for x in args.peer_python)
    parquet = parquet_corpus(args)
    server = Server()
    port = server.start()
    s3_parquet = upload(port, parquet.parent, "corpus")
    server.stop()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load0 = os.getloadavg()[0]
    results = []
    for peer in args.peers.split(","):
        python = pythons.get(peer.split("-")[0], sys.executable)
        before = os.getloadavg()[0]
        r = run_child(args, argv, peer, python, server)
        r["load"] = [before, os.getloadavg()[0]]
        results.append(r)
    import pyarrow.parquet as pq

    meta = pq.read_metadata(parquet)
    report = {"command": "LODARROW_NUM_THREADS=1 python benchmarks/cache_peers.py " +
              shlex.join(argv), "started": started,
              "finished": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "load": [load0, os.getloadavg()[0]], "machine": platform.platform(),
              "cpus": os.cpu_count(), "args": vars(args), "revision": _revision(),
              "corpus": {"sequences": meta.num_rows, "row_groups": meta.num_row_groups,
                         "parquet_bytes": s3_parquet,
                         "tokens": int(sequences(args)[0][-1]),
                         "mds_bytes": {c: sum(f.stat().st_size for f in d.iterdir())
                                       for c in ("raw", "zstd")
                                       if (d := Path(args.workdir) /
                                           f"mds-{args.sequences}-{args.seed}-{c}").exists()}},
              "results": results}
    return report


def _revision():
    """The commit measured (lodarrow/_bench/_docs.py's record), None without lodarrow."""
    try:
        from lodarrow._bench import _docs
    except ImportError:
        return None
    return _docs.revision(str(ROOT))


def markdown(report):
    """The table and the lines above it, from the JSON alone."""
    c = report["corpus"]
    args = argparse.Namespace(**report["args"])
    mds = (", ".join(f"{v / 1e6:.1f} MB ({k})" for k, v in c["mds_bytes"].items())
           or "not written (no MosaicML loader ran)")
    revision = ""
    if report.get("revision"):
        from lodarrow._bench import _docs

        revision = f"  {_docs.revision_line(report['revision'])}."
    lines = [f"Command: `{report['command']}`.{revision}", "",
             f"Machine: {report['machine']}, {report['cpus']} CPUs; {report['started']} to "
             f"{report['finished']}, 1-minute load average {report['load'][0]:.2f} at the "
             f"start, {report['load'][1]:.2f} at the end.", "",
             f"Corpus: {c['sequences']:,} sequences, {c['tokens'] / 1e6:.1f}M int32 tokens "
             f"(lognormal lengths, mean ~300); one Parquet file of {c['row_groups']} row "
             f"groups, {c['parquet_bytes'] / 1e6:.1f} MB; MDS shards {mds}; on a moto S3 "
             f"server on 127.0.0.1.  Packed batches of {args.batch_size} (torch), "
             f"{args.epochs} epochs in one process, a cold cache of "
             f"{args.cache_bytes / 2**30:.3g} GiB; the server stopped before epoch "
             f"{args.epochs}; MB = 10^6 bytes sent by the server (response bodies); "
             f"LODARROW_NUM_THREADS=1, torch 1 thread.", "",
             "| loader | how | start: s / MB | " +
             " | ".join(f"epoch {e + 1}: s / MB" for e in range(args.epochs - 1)) +
             f" | epoch {args.epochs}, server stopped | MB fetched in all | cache on disk "
             f"after (allocated / apparent MB) | load |",
             "| --- | --- | ---: | " + "---: | " * (args.epochs - 1) +
             "--- | ---: | ---: | --- |"]
    for r in report["results"]:
        if "error" in r:
            lines.append(f"| {r['peer']} | failed: {r['error'][:160]} | | " +
                         "| " * (args.epochs - 1) + "| | | |")
            continue
        cells = []
        for ep in r["epochs"][:-1]:
            cell = f"{ep['seconds']:.2f} / {ep['bytes'] / 1e6:.1f}"
            if ep["sequences"] != c["sequences"] or "error" in ep:
                cell += f" ({ep['sequences']:,} sequences{'; ' + ep.get('error', '')})"
            cells.append(cell)
        last = r["epochs"][-1]
        if "error" in last:
            err = last["error"]
            err = err if len(err) <= 150 else err[:60] + " ... " + err[-90:]
            stopped = f"fails after {last['seconds']:.1f} s: {err}"
        elif last["sequences"] != c["sequences"]:
            stopped = f"{last['sequences']:,} sequences only, {last['seconds']:.2f} s"
        else:
            stopped = (f"runs: {last['seconds']:.2f} s, {last['bytes'] / 1e6:.1f} MB")
        fetched = r["start_bytes"] + sum(ep["bytes"] for ep in r["epochs"])
        lines.append(f"| {r['peer']} | {r['how']} | {r['start_s']:.2f} / "
                     f"{r['start_bytes'] / 1e6:.2f} | " + " | ".join(cells) +
                     f" | {stopped} | {fetched / 1e6:.1f} | {r['cache_disk'] / 1e6:.1f} / "
                     f"{r['cache_size'] / 1e6:.1f} | "
                     f"{r['load'][0]:.1f}-{r['load'][1]:.1f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
