#!/usr/bin/env python
"""lodarrow's batch loader against a hand-written NumPy/Arrow loop and the loaders users pick,
one corpus, one invocation per table.

    python benchmarks/loaders.py --sequences 100000 --workers 2 --repeat 3 \\
        --peer-python hf=/work/venv-peers/bin/python \\
        --peer-python grain=/work/venv-peers/bin/python \\
        --peer-python litdata=/work/venv-peers/bin/python \\
        --peer-python streaming=/work/venv-mds/bin/python \\
        --json benchmarks/results/loaders.json --docs docs/training.md \\
        --readme benchmarks/README.md
    python benchmarks/loaders.py --from-json benchmarks/results/loaders.json \\
        --docs docs/training.md --readme benchmarks/README.md

(benchmarks/loader_figures.sh runs it at the published sizes with the other loader
benchmarks.)

The corpus (``--sequences`` token-id sequences, lognormal lengths, one ``list<int32>`` column
in a Parquet file) is written once, untimed, under ``--workdir`` and reused while its
parameters do not change; so are the peers' own conversions of it (Hugging Face ``datasets``'
Arrow cache, MosaicML ``streaming``'s MDS shards, litdata's ``optimize`` chunks).

Every row is one loader doing one job, in a fresh process of its own (``--peer-python`` picks
another interpreter for a peer, by peer name or library: hf, grain, litdata, streaming; the
torchdata rows read HF's dataset and run with hf's), with ``torch.set_num_threads(1)`` in that
process (DataLoader workers set it themselves).  Each peer runs the path its documentation
gives for the job, cited in the row's "what it runs" (``fast_path``); its shuffle scope is
stated as it is (HF's iterable row: shard order and a buffer, not global):

- the jobs: "padded" (batches of ``--batch-size`` sequences, grouped by length), "packed"
  (the same batches flattened: ``cu_seqlens``), "packed_rows" (rows of ``--row-length``,
  ``--rows-per-batch`` rows a batch), "segments" (JAX's flat layout, at most
  ``rows-per-batch * row-length`` tokens a batch, that fixed width), and a different job,
  "concatenated blocks" (the token stream cut into ``row-length`` blocks, as litdata's
  ``TokensLoader`` and llm-foundry's concatenated MDS samples do);
- every batch is a dict of torch tensors;
- the timed window is whole epochs: ``--warmup`` epochs first (untimed; the start-up is in
  them), then whole epochs until at least ``--seconds`` have passed (at most
  ``--max-epochs``).  A loader with no epochs of its own (Grain's ``repeat``) counts an
  epoch as the corpus' tokens delivered.  The resume measurement comes after the window;
- **tokens/s**: real tokens (padding not counted) over the timed epochs; **÷ loop**: that
  over the NumPy/Arrow loop's, same job, same source (where that source has no loop row,
  as for peers with a conversion of their own: over the loop on the in-memory table), the
  loop in one process for a row in one process and the loop in the same number of
  ``DataLoader`` workers for a row with workers;
- **Parquet decode alone**: the file's row groups decoded one at a time on one thread by
  lodarrow's read call, in a shuffled order, and nothing else (no block joined, no batch
  made): the most a reader decoding with that call on one thread can deliver (one
  measurement); "÷ decode": the share of it a row delivers;
- **start s**: from making the loader to the first batch (every row's imports made before,
  pandas among them: pyarrow imports it at its first conversion to NumPy); **resume s**: a new loader, made as
  a restarted job makes it, with the state saved ``--resume-at`` into the epoch after the
  window (each loader's own mechanism), to its first batch;
- **RSS MiB**: the peak resident set of the process, and of each worker;
- a loader measured in several documented settings (Grain's ``ReadOptions(num_threads=)`` 0,
  1 and 16; litdata's ``batch_decode``) has a row for each, and the summary tables one line
  for the group: each worker count's fastest variant, its setting named (:func:`headline`); what
  a reader of a row must know (why litdata slows with workers, what HF's iterable resume loses)
  is its ``notes``, printed with the row;
- every cell (a loader and its worker count) is run ``--repeat`` times, the cells in turn
  (round robin: every cell once, then every cell again), so the cells compared saw the same
  spells of load; the tables give each cell's median, the JSON every run with the 1-minute
  load average before and after it.

A peer whose library does not import (in its interpreter) is listed with the import error.
The JSON (``--json``) holds the commit measured (uncommitted changes named), the machine
(CPU model, cores, load), the versions of every interpreter's libraries, every setting (the
window and Grain's bins as used, ``LODARROW_NUM_THREADS``) and every run.  ``--markdown``
gets the whole output; ``--docs`` rewrites the ``loaders`` block of docs/training.md
("Measured against other loaders": the summary tables and the sentences computed from the
JSON) and ``--readme`` the ``loaders-run`` block of benchmarks/README.md (the whole output),
each between its markers (lodarrow/_bench/_docs.py), the text around them kept;
``--from-json`` writes them again from a saved JSON without measuring.
"""

import argparse
import fnmatch
import functools
import gc
import importlib
import itertools
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

# benchmarks/loop_baseline.py, beside this file, by name: spawned DataLoader workers unpickle
# its classes by that name.  Appended, not inserted: imported by a test, this file's folder
# then shadows no other module for the rest of the session.
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.append(str(Path(__file__).resolve().parent))
import loop_baseline  # noqa: E402

# ----------------------------------------------------------------------------------------
# the corpus
# ----------------------------------------------------------------------------------------

COLUMN = "input_ids"


def corpus_lengths(n, mean, sigma, max_length, seed):
    """``n`` lognormal lengths of mean ``mean`` (before clipping to [1, max_length])."""
    mu = math.log(mean) - sigma * sigma / 2
    rng = np.random.default_rng(seed)
    return np.clip(np.rint(rng.lognormal(mu, sigma, n)), 1, max_length).astype(np.int64)


def write_corpus(path, lengths, vocab, row_group_size, seed):
    """One ``list<int32>`` column of token ids, ``row_group_size`` rows a row group."""
    rng = np.random.default_rng(seed + 1)
    schema = pa.schema([(COLUMN, pa.list_(pa.int32()))])
    tmp = path.with_suffix(".tmp")
    with pq.ParquetWriter(tmp, schema) as writer:
        for lo in range(0, len(lengths), row_group_size):
            part = lengths[lo:lo + row_group_size]
            offsets = np.concatenate([[0], np.cumsum(part)]).astype(np.int32)
            values = rng.integers(0, vocab, int(offsets[-1]), dtype=np.int32)
            arr = pa.ListArray.from_arrays(pa.array(offsets), pa.array(values))
            writer.write_table(pa.table({COLUMN: arr}, schema=schema),
                               row_group_size=row_group_size)
    tmp.replace(path)


class Context:
    """What every loader is given: the corpus and the shape of the batches."""

    def __init__(self, args, meta):
        self.workdir = Path(args.workdir)
        self.corpus = self.workdir / "corpus.parquet"
        self.sequences = meta["sequences"]
        self.tokens = meta["tokens"]
        self.row_groups_total = meta.get("row_groups") or pq.ParquetFile(
            self.corpus).num_row_groups
        self.batch_size = args.batch_size
        self.row_length = args.row_length
        self.rows_per_batch = args.rows_per_batch
        self.max_tokens = args.row_length * args.rows_per_batch
        self.window = args.window or 50 * args.batch_size
        self.row_groups = args.row_groups
        self.seed = args.seed
        self.resume_at = args.resume_at
        self.resume_budget = args.resume_budget
        self.hf_shards = args.hf_shards
        self.hf_buffer = args.hf_buffer
        self.grain_bins = args.grain_bins or 8 * args.rows_per_batch
        self.grain_buffer = args.grain_buffer
        self.table = None       # the in-memory table, read before the clock where a row uses it

    def conversion(self, name):
        return self.workdir / name

    def source(self, kind):
        """``kind``: "table" (the in-memory table), "parquet" or "parquet-global"."""
        return self.table if kind == "table" else str(self.corpus)

    def shuffle_scope(self, kind):
        if kind == "table":
            return f"global; sorted in {self.window:,}-row windows"
        if kind == "parquet-global":
            return f"global: one block of all {self.row_groups_total} row groups, sorted whole"
        blocks = max(1, self.row_groups_total // self.row_groups)
        return (f"block-local: row groups shuffled, {blocks} blocks of "
                f"~{self.row_groups_total / blocks:.3g} row groups (~"
                f"{self.sequences // blocks:,} rows) shuffled and sorted whole")


def arrow_rows(path):
    """The corpus as one in-memory table (what the "table" rows are given)."""
    return pq.read_table(path, columns=[COLUMN])


# ----------------------------------------------------------------------------------------
# batch glue shared by the peers (the same NumPy collation as the loop)
# ----------------------------------------------------------------------------------------

def packed_from_list(seqs):
    """Per-sequence items (1-D NumPy arrays) to the "packed" batch of the loop and lodarrow."""
    import torch

    lengths = np.fromiter((len(s) for s in seqs), np.int64, len(seqs))
    values = np.concatenate(seqs)
    cu = np.zeros(len(seqs) + 1, np.int64)
    np.cumsum(lengths, out=cu[1:])
    t = torch.from_numpy
    # "lengths" first: MosaicML's StreamingDataLoader counts a dict batch's samples by the
    # length of its first value
    return {"lengths": t(lengths), "values": t(values), "cu_seqlens": t(cu.astype(np.int32)),
            "max_seqlen": int(lengths.max()),
            "position_ids": t(np.arange(len(values)) - np.repeat(cu[:-1], lengths)),
            "seq_idx": t(np.repeat(np.arange(len(seqs), dtype=np.int32), lengths))}


def _arrow_collate(mode, table):
    offsets, values = loop_baseline.list_parts(table.column(COLUMN))
    return loop_baseline.collate(mode, offsets[:-1], np.diff(offsets), values)


def arrow_collate(mode):
    """A batch's ``pyarrow.Table`` (``ds[indices]`` of a ``datasets`` Dataset in the "arrow"
    format) to the loop's batch of ``mode`` (picklable: torchdata.nodes' process workers get
    it)."""
    return functools.partial(_arrow_collate, mode)


def stack_blocks(blocks):
    """Concatenated-token samples (NumPy or torch, ``row_length`` each) to one tensor."""
    import torch

    if isinstance(blocks[0], torch.Tensor):
        return {"values": torch.stack(blocks)}
    return {"values": torch.from_numpy(np.stack(blocks))}


def _numpy_batch(collate, items):
    batch = collate(items)
    return {k: (v.numpy() if hasattr(v, "numpy") else v) for k, v in batch.items()}


def worker_collate(collate, workers):
    """``collate`` for a loader with ``workers``: in worker processes it returns NumPy arrays,
    which cross pickled, and :func:`loop_baseline.to_torch` makes the tensors in the main
    process, as the loop's workers do.  (torch tensors made in a worker cross through torch's
    shared memory, a segment per tensor: 7x slower for the loop's packed batches.)"""
    return functools.partial(_numpy_batch, collate) if workers else collate


def worker_batches(data, workers):
    """The batches of ``data`` (a loader collated by :func:`worker_collate`) as tensors."""
    return loop_baseline.to_torch(iter(data)) if workers else iter(data)


def counts_of(kind, batch):
    """(real tokens, slots, sequences) of a batch of ``kind``: cheap reads of what the batch
    already holds (no pass over its values)."""
    v = batch["values"]
    if kind == "blocks" and "attention_mask" in batch:  # lodarrow's blocks: a padded tail
        return (int(batch["attention_mask"].sum()), int(v.numel()),
                int(len(batch["lengths"])))
    if kind == "blocks" and "cu_seqlens" in batch:  # token_arrays=False: each row's tokens
        return (int(batch["cu_seqlens"][:, -1].sum()), int(v.numel()),  # end its cu_seqlens
                int(len(batch["lengths"])))
    if kind in ("packed", "blocks"):
        n = int(v.numel())
        return n, n, int(len(batch["lengths"])) if "lengths" in batch else int(v.shape[0])
    return int(batch["lengths"].sum()), int(v.numel()), int(len(batch["lengths"]))


class EpochBatches:
    """A batch sampler re-made each epoch by ``make(epoch)`` (seeded by the epoch, as
    ``accelerate``'s seedable samplers are), skipping the first ``skip`` batches of the epoch
    it resumes (``skip_first_batches``, without reading the skipped samples)."""

    def __init__(self, make, epoch=0, skip=0):
        self.make, self.epoch, self.skip = make, epoch, skip

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __iter__(self):
        skip, self.skip = self.skip, 0
        for k, batch in enumerate(self.make(self.epoch)):
            if k >= skip:
                yield batch

    def __len__(self):
        return len(self.make(self.epoch))


# ----------------------------------------------------------------------------------------
# the loaders
# ----------------------------------------------------------------------------------------

class Run:
    """An open loader: ``epoch(e)`` iterates epoch ``e`` (from the resumed step, the first
    time, after a resume), or ``stream()`` with ``epoch_tokens`` (no epochs of its own)."""

    epoch_tokens = None

    def __init__(self, epoch=None, stream=None, close=None, save=None, **extra):
        self._epoch, self._stream, self._close, self._save = epoch, stream, close, save
        self.__dict__.update(extra)

    def epoch(self, e):
        return self._epoch(e)

    def stream(self):
        return self._stream()

    def save(self, epoch, steps):
        return self._save(epoch, steps)

    def close(self):
        if self._close is not None:
            self._close()
        self._close = None


def first_epoch(peer, run):
    """Real tokens of ``run``'s epoch 0, read to its end."""
    return sum(peer.counts(batch)[0] for _, batch in
               itertools.takewhile(lambda eb: eb[1] is not END, with_epochs(run, peer)))


def scratch_dir(ctx, prefix):
    """A fresh folder under the work directory (the corpus's disk), for one measurement."""
    import tempfile

    return Path(tempfile.mkdtemp(prefix=prefix, dir=ctx.workdir))


class Peer:
    """One loader configuration (a row per worker count it runs with).

    ``open(ctx, workers, state)`` returns a :class:`Run`; ``state`` is None (epoch 0 from the
    start) or ``{"epoch", "step", ...}`` (what ``Run.save`` added for a loader that saves its
    own state).  ``resume(workers)`` names the mechanism (None: none);
    ``saves_state(workers)``: True when the state is saved by the loader once the batches
    are received (the driver iterates to the point first), False when it is a step count the
    training loop keeps.
    """

    name = label = ""
    kind = "padded"          # the job: padded, packed, rows, segments, blocks
    library = ""             # --peer-python key besides the name
    source = "own"           # table, parquet, parquet-global, own (a conversion of its own)
    requires = ()
    workers_modes = None     # None: every --modes entry; else the subset it runs
    fast_path = ""           # what runs, with the documentation it follows
    shuffle = ""
    threads = ""
    notes = ""               # what a reader of the table must know (the tables print it)
    # variants of one loader measured side by side (Grain's read threads, litdata's
    # decoding): the summary tables give one line per group, each worker count's fastest
    # variant, labelled so
    group = None             # the group's name, shared by its variants
    group_label = ""         # the summary's label of the group
    variant = ""             # this variant's setting, as the summary names it

    def prepare(self, ctx):
        """The peer's own conversion of the corpus (untimed); seconds it took, or 0."""
        return 0.0

    def warm_imports(self):
        """Import what ``open`` imports, before the clock starts."""

    def resume(self, workers):
        return None

    def saves_state(self, workers):
        return False

    def counts(self, batch):
        return counts_of(self.kind, batch)

    def describe_threads(self, workers, ctx):
        return self.threads

    def describe_shuffle(self, ctx):
        return self.shuffle

    def describe_fast_path(self, ctx):
        return self.fast_path.format(B=ctx.batch_size, L=ctx.row_length, R=ctx.rows_per_batch)

    def describe_notes(self, ctx):
        return self.notes

    def cold_start(self, ctx, workers):
        """Seconds to the first batch with the loader's own caches empty, where it keeps
        one between starts that the timed start then uses (None: no such cache)."""
        return None

    #: measured from scratch (:meth:`from_scratch`): the corpus's Parquet file to the end of
    #: a first epoch, whatever the loader prepares first included
    scratch = False

    def from_scratch(self, ctx):
        """``{"seconds", "tokens", ...}``: from the corpus's Parquet file, with nothing made
        before (no conversion, no cache), to the end of epoch 0 in one process."""
        raise NotImplementedError

    def runs_with(self, workers):
        return self.workers_modes is None or workers in self.workers_modes


def _torch_loader(dataset, workers, **kwargs):
    import torch

    return torch.utils.data.DataLoader(dataset, num_workers=workers,
                                       persistent_workers=workers > 0, **kwargs)


def _shutdown(loader):
    it = getattr(loader, "_iterator", None)
    if it is not None and hasattr(it, "_shutdown_workers"):
        it._shutdown_workers()


HAND_OVER = "NumPy arrays cross pickled, torch.from_numpy in the main process"

JOB_NAMES = {"padded": "padded", "packed": "packed (cu_seqlens)",
             "packed_rows": "packed_rows", "segments": "segments (JAX)"}
KIND_OF = {"padded": "padded", "packed": "packed", "packed_rows": "rows",
           "segments": "segments", "blocks": "blocks"}
SOURCE_NAMES = {"table": "in-memory table", "parquet": "Parquet",
                "parquet-global": "Parquet, global shuffle",
                "parquet-decoded": "Parquet through the decoded cache"}


class Lodarrow(Peer):
    requires = ("lodarrow", "torch")
    library = "lodarrow"

    def __init__(self, mode, source, prefetch=None, token_arrays=True, pickled=False):
        self.mode, self.source, self.prefetch = mode, source, prefetch
        self.token_arrays, self.pickled = token_arrays, pickled
        self.kind = KIND_OF[mode]
        tail = ("" if prefetch is None else f"-prefetch{prefetch}") + (
            "" if token_arrays else "-ids") + ("-pickled" if pickled else "")
        self.name = f"lodarrow-{mode.replace('_', '-')}-{source}{tail}"
        pf = "" if prefetch is None else f", prefetch={prefetch}"
        self.label = f"lodarrow {mode}, {SOURCE_NAMES[source]}{pf}"
        if mode == "blocks" and token_arrays:
            self.label += (" (documents shuffled, then joined: position_ids, seq_idx, "
                           "cu_seqlens per piece)")
            self.workers_modes = None
        elif mode == "blocks":  # the token ids of litdata's TokensLoader (+ cu_seqlens)
            self.label += (" (documents shuffled, then joined; token_arrays=False: values "
                           "and cu_seqlens, no per-token arrays)")
            self.workers_modes = None
        if prefetch is not None or source == "parquet-global":
            self.workers_modes = (0,)
        if pickled:
            self.label += ", batches pickled (the loop's transport)"
        # the equal-threads column: one thread in all, the loop's; every other lodarrow cell
        # runs on its defaults (the environment as given: load-aware kernel threads)
        self.env = {"LODARROW_NUM_THREADS": "1"} if prefetch == 0 else {}
        # blocks from Parquet on its defaults: litdata's TokensLoader reads only what its
        # optimize wrote, so from the Parquet file the two are timed with what they prepare
        self.scratch = (mode == "blocks" and source in ("parquet", "parquet-decoded")
                        and prefetch is None and token_arrays and not pickled)

    def runs_with(self, workers):
        # the pickled transport is a workers' row: in one process nothing crosses
        return bool(workers) if self.pickled else super().runs_with(workers)

    def describe_fast_path(self, ctx):
        kw = ", ".join(f"{k}={v!r}" for k, v in self.kwargs(ctx).items() if k != "seed")
        return (f"la.batch_loader({'table' if self.source == 'table' else 'path'}, "
                f"{COLUMN!r}, {kw}); workers: DataLoader(loader.torch(), batch_size=None, "
                f"num_workers=w, persistent_workers=True)"
                + ("; each worker's NumPy batch pickled through DataLoader's queue, as the "
                   "loop's are, instead of lodarrow's shared-memory ring" if self.pickled
                   else ""))

    def kwargs(self, ctx):
        kw = dict(to="torch", seed=ctx.seed, progress=False, mode=self.mode)
        if self.mode in ("padded", "packed"):
            kw["batch_size"] = ctx.batch_size
        elif self.mode in ("packed_rows", "blocks"):
            kw.update(max_tokens=ctx.max_tokens, row_length=ctx.row_length)
        else:
            kw.update(max_tokens=ctx.max_tokens, pad_to_multiple_of=ctx.max_tokens)
        if self.mode == "blocks":  # the whole stream joined (the defaults): no bucketing
            if self.source == "parquet-global":
                kw["row_groups"] = ctx.row_groups_total
        elif self.source == "table":
            kw["window"] = ctx.window
        elif self.source == "parquet":
            kw["row_groups"] = ctx.row_groups
        else:
            kw["row_groups"] = ctx.row_groups_total
        if self.source == "parquet-decoded":
            kw["decoded_cache"] = True
        if self.prefetch is not None:
            kw["prefetch"] = self.prefetch
        if not self.token_arrays:
            kw["token_arrays"] = False
        if self.source != "table" and getattr(ctx, "cache_dir", None):
            kw["cache_dir"] = ctx.cache_dir
        return kw

    def from_scratch(self, ctx):
        """Epoch 0 in one process with an empty ``cache_dir``: the lengths read from the
        file, and through the decoded cache each row group decoded and written there."""
        import shutil

        cache = scratch_dir(ctx, "lodarrow-scratch-")
        ctx.cache_dir = str(cache)
        try:
            t0 = time.perf_counter()
            run = self.open(ctx, 0)
            tokens = first_epoch(self, run)
            seconds = time.perf_counter() - t0
            run.close()
        finally:
            shutil.rmtree(cache, ignore_errors=True)
        return {"seconds": seconds, "tokens": tokens}

    def cold_start(self, ctx, workers):
        """From Parquet, with an empty lengths cache (a fresh ``cache_dir``): the corpus's
        lengths read from the file before the first batch, as on its first start; the cache
        is then the warm start's (``start_s``).  None from the in-memory table (no cache)."""
        if self.source == "table":
            return None
        import atexit
        import shutil
        import tempfile

        ctx.cache_dir = tempfile.mkdtemp(prefix="lodarrow-lengths-")
        atexit.register(shutil.rmtree, ctx.cache_dir, True)
        t0 = time.perf_counter()
        run = self.open(ctx, workers)
        stream = with_epochs(run, self)
        next(stream)
        seconds = time.perf_counter() - t0
        stream.close()
        run.close()
        return seconds

    def open(self, ctx, workers, state=None):
        import lodarrow as la

        loader = la.batch_loader(ctx.source(self.source), COLUMN, **self.kwargs(ctx))
        if state is not None:
            if "state_dict" in state:
                loader.load_state_dict(state["state_dict"])
            else:
                loader.set_epoch(state["epoch"], start_step=state["step"])
        resumed = [state is not None]
        if workers and self.pickled:
            _pickle_worker_batches()
        if workers:
            data = _torch_loader(loader.torch(), workers, batch_size=None)

            def epoch(e):
                if not resumed[0]:
                    loader.set_epoch(e)
                resumed[0] = False
                return iter(data)
            return Run(epoch, close=lambda: _shutdown(data), loader=loader)

        def epoch(e):
            if not resumed[0]:
                loader.set_epoch(e)
            resumed[0] = False
            return iter(loader)

        def save(e, steps):
            return {"epoch": e, "step": steps,
                    "state_dict": json.loads(json.dumps(loader.state_dict()))}
        return Run(epoch, save=save, loader=loader)

    def resume(self, workers):
        return "set_epoch(e, start_step=s)" if workers else "state_dict / load_state_dict"

    def saves_state(self, workers):
        return not workers

    def describe_threads(self, workers, ctx):
        from lodarrow._threads import num_threads

        # what crosses from a worker: the per-token arrays are made in the main process
        # (token_arrays=False: left out, made nowhere)
        rows_ = ("the values, cu_seqlens and each piece's sequence; position_ids, "
                 "attention_mask and seq_idx made there by the collation kernel")
        rows = {"packed_rows": rows_, "blocks": rows_,
                "packed": ("the values and cu_seqlens; position_ids and seq_idx made there by "
                           "the collation kernel"),
                "padded": "the values and lengths; attention_mask made there",
                "segments": ("the values and lengths; segment_ids and position_ids made there "
                             "by the collation kernel"),
                }.get(self.mode) if self.token_arrays else (
                    "the values and cu_seqlens; no per-token arrays, sent or made")
        rows = f" ({rows})" if rows else ""
        if workers and self.pickled:
            return (f"{workers} DataLoader workers (torch 1 thread, kernels 1 thread each); "
                    f"{HAND_OVER}{rows.replace(' made there', ' made in the main process')}")

        how = ("LODARROW_NUM_THREADS" if os.environ.get("LODARROW_NUM_THREADS")
               else "load-aware")
        reads = ("mapping the next block's row groups from the decoded cache"
                 if self.source == "parquet-decoded" else "decoding the next block")
        if workers and workers > 1 and self.source in ("parquet", "parquet-global"):
            reads = ("reading the next block, its row groups decoded once between the "
                     "workers")
        if workers:
            ahead = ("" if self.source == "table" else f" + a read-ahead thread {reads}")
            return (f"{workers} DataLoader workers (torch 1 thread, kernels up to "
                    f"{num_threads()} thread(s) ({how}; 1 in a worker unless set){ahead} "
                    f"each); batches through a shared-memory ring per worker, copied out into "
                    f"tensors in the main process{rows}")
        pf = 2 if self.prefetch is None else self.prefetch
        extra = "a batch prefetch thread (works while the consumer is away)" if pf else (
            "no prefetch thread")
        if pf and self.source != "table":
            extra += f" + a read-ahead thread {reads}"
        return f"main + {extra}; kernels up to {num_threads()} thread(s) ({how})"

    def describe_shuffle(self, ctx):
        if self.mode == "blocks":
            return ("documents shuffled (in memory: all; Parquet: row groups, then the rows of "
                    "blocks of 4 row groups), joined in that order and cut; batches shuffled "
                    "within a block")
        return ctx.shuffle_scope(self.source) + "; batches shuffled within a block"


#: What the equal-transport statements add where lodarrow's pickled batches crossed slim
SLIM_WIRE = ("; lodarrow's batches cross without the per-token arrays the loop's carry, "
             "made again in the main process: padded ones without attention_mask, packed "
             "ones without position_ids and seq_idx, packed rows also without "
             "attention_mask{segments}")


def slim_wire_text(report):
    """:data:`SLIM_WIRE` for ``report``: segments batches cross without their per-token
    arrays from the run whose pickled segments row says so (a187e0b's successor on)."""
    slim_segments = any(r.get("peer", "").startswith("lodarrow-segments-")
                        and r.get("peer", "").endswith("-pickled")
                        and "segment_ids and position_ids made" in r.get("threads", "")
                        for r in report.get("results", []))
    return SLIM_WIRE.format(segments=", segments ones without segment_ids and position_ids"
                            if slim_segments else " (segments whole)")


def slim_wire(report):
    """Whether the run's pickled lodarrow rows crossed without their per-token arrays (from
    8b5ee23 on; what each row's threads description says), so the pickled column compares
    the transport with fewer bytes on lodarrow's side."""
    return any(r.get("peer", "").endswith("-pickled") and "made in the main process"
               in r.get("threads", "") for r in report.get("results", []))


def _pickle_worker_batches():
    """Make lodarrow's DataLoader workers hand their batches over as the loop's and the
    peers' do: the NumPy arrays pickled by value through the worker's queue (lodarrow's own
    fallback where its ring cannot take a batch, ``_torch._WireBatch``), not through the
    shared-memory ring.  Patched in this run's process before its workers fork; the batches,
    and their conversion to tensors in the main process, are unchanged."""
    from lodarrow._training import _torch

    _torch._for_the_wire = lambda ring, out: _torch._WireBatch(
        {k: v for k, v in out.items() if isinstance(v, np.ndarray)},
        {k: v for k, v in out.items() if not isinstance(v, np.ndarray)})


class Loop(Peer):
    requires = ("torch",)
    library = "loop"
    threads = "one thread (NumPy, pyarrow reads)"

    def __init__(self, mode, source):
        self.mode, self.source = mode, source
        if source == "parquet-global":
            self.workers_modes = (0,)
        self.kind = KIND_OF[mode]
        self.name = f"loop-{mode.replace('_', '-')}-{source}"
        self.label = f"NumPy/Arrow loop {mode}, {SOURCE_NAMES[source]}"

    def describe_fast_path(self, ctx):
        return (f"loop_baseline.Loop(" + ("table" if self.source == "table" else "path")
                + f", {self.mode!r}, " + {
                    "padded": f"batch_size={ctx.batch_size}",
                    "packed": f"batch_size={ctx.batch_size}",
                    "packed_rows": f"row_length={ctx.row_length}, "
                                   f"num_rows={ctx.rows_per_batch}",
                    "segments": f"max_tokens={ctx.max_tokens}"}[self.mode]
                + (f", window={ctx.window}" if self.source == "table" else
                   f", window=None, row_groups="
                   f"{ctx.row_groups_total if self.source == 'parquet-global' else ctx.row_groups}")
                + "): shuffle, sort in windows, cut, shuffle batches; one NumPy slice copy "
                  "a sequence into the batch's arrays; torch.from_numpy")

    def open(self, ctx, workers, state=None):
        src = ctx.source(self.source)
        loop = loop_baseline.Loop(
            src, COLUMN, self.mode, batch_size=ctx.batch_size, max_tokens=ctx.max_tokens,
            row_length=ctx.row_length, num_rows=ctx.rows_per_batch,
            window=ctx.window if self.source == "table" else None,
            row_groups=ctx.row_groups_total if self.source == "parquet-global"
            else ctx.row_groups, seed=ctx.seed)
        skip = [0 if state is None else state["step"]]
        if workers:  # worker i makes batches i, i + k, ...: the DataLoader's order is the loop's
            dataset = loop_baseline.LoopDataset(loop)
            data = _torch_loader(dataset, workers, batch_size=None,
                                 collate_fn=loop_baseline.identity)

            def epoch(e):
                s, skip[0] = skip[0], 0
                dataset.set_epoch(e, s)
                return loop_baseline.to_torch(iter(data))
            return Run(epoch, close=lambda: _shutdown(data))

        def epoch(e):
            s, skip[0] = skip[0], 0
            return loop.epoch(e, start=s)
        return Run(epoch)

    def describe_threads(self, workers, ctx):
        return (f"{workers} DataLoader workers (torch 1 thread each); {HAND_OVER}" if workers
                else self.threads)

    def resume(self, workers):
        return "plan the epoch again, skip s batches (a Parquet block is still read)"

    def describe_shuffle(self, ctx):
        scope = ctx.shuffle_scope(self.source)
        return scope + ("; batches shuffled globally" if self.source == "table"
                        else "; batches shuffled within a block")


class DecodeOnly(Peer):
    """Parquet decoding alone: each epoch's row groups, in a shuffled order, read one at a
    time by the call lodarrow reads with (``read_row_group`` of one column, one thread, no
    pre-buffering), the values viewed as NumPy (no copy; the offsets rebased, a small copy),
    and nothing else: no block joined, no batch made.  Its tokens/s is the ceiling of a
    reader decoding this file with that call on one thread: the floor under every Parquet
    row (a global shuffle decodes the same row groups)."""

    name = "decode-parquet"
    label = "Parquet decode alone (no batches)"
    kind = "decode"
    source = "parquet"
    requires = ()
    library = "pyarrow"
    workers_modes = (0,)
    threads = "one thread (pyarrow decoding)"
    shuffle = "row groups shuffled"
    fast_path = (f"ParquetFile(path, pre_buffer=False).read_row_group(g, columns=[{COLUMN!r}], "
                 f"use_threads=False) for each row group g in a shuffled order; offsets and "
                 f"values viewed as NumPy")

    def counts(self, batch):
        n = int(len(batch["values"]))
        return n, n, int(len(batch["offsets"]) - 1)

    def open(self, ctx, workers, state=None):
        pf = pq.ParquetFile(str(ctx.corpus), pre_buffer=False)

        def epoch(e):
            order = np.random.default_rng([ctx.seed, e]).permutation(pf.num_row_groups)
            for g in order.tolist():
                col = pf.read_row_group(g, columns=[COLUMN], use_threads=False).column(0)
                offsets, values = loop_baseline.list_parts(col)
                yield {"offsets": offsets, "values": values}
        return Run(epoch, close=pf.close)


class LoopBlocks(Peer):
    name = "loop-blocks-table"
    label = "NumPy/Arrow loop, concatenated blocks, in-memory table"
    kind = "blocks"
    source = "table"
    requires = ("torch",)
    library = "loop"
    workers_modes = (0,)
    threads = "one thread"
    fast_path = "values cut into {L}-token blocks, block order shuffled, blocks[idx] per batch"
    shuffle = "global (block order)"

    def open(self, ctx, workers, state=None):
        import torch

        _, values = loop_baseline.list_parts(ctx.table.column(COLUMN))
        L, R = ctx.row_length, ctx.rows_per_batch
        blocks = values[:len(values) // L * L].reshape(-1, L)
        skip = [0 if state is None else state["step"]]

        def epoch(e):
            s, skip[0] = skip[0], 0
            order = np.random.default_rng([ctx.seed, e]).permutation(len(blocks))
            for k in range(s * R, len(order), R):
                yield {"values": torch.from_numpy(blocks[np.sort(order[k:k + R])])}
        return Run(epoch)

    def resume(self, workers):
        return "skip s batches"


# --- Hugging Face datasets ----------------------------------------------------------------

def _hf_prepare(ctx):
    import datasets

    out = ctx.conversion("hf-dataset")
    if (out / "dataset_info.json").exists():
        return 0.0
    t = time.perf_counter()
    ds = datasets.Dataset.from_parquet(str(ctx.corpus), cache_dir=str(ctx.conversion("hf-cache")))
    ds.save_to_disk(str(out))
    return time.perf_counter() - t


class HFPadded(Peer):
    name = "hf-padded"
    label = "HF datasets (arrow format) + LengthGroupedSampler(lengths=)"
    kind = "padded"
    library = "hf"
    requires = ("datasets", "transformers", "torch")
    fast_path = ("load_from_disk(...).with_format('arrow'); lengths from Arrow "
                 "(pc.list_value_length); LengthGroupedSampler({B}, lengths=); one ds[indices] a "
                 "batch (a pyarrow Table); the loop's NumPy collation")
    shuffle = "global; sorted in {W:,}-row megabatches (LengthGroupedSampler: 50 x {B})"
    threads = "main process (torch 1 thread)"

    def prepare(self, ctx):
        return _hf_prepare(ctx)

    def describe_shuffle(self, ctx):
        return self.shuffle.format(W=50 * ctx.batch_size, B=ctx.batch_size)

    def warm_imports(self):
        import transformers.trainer_pt_utils  # noqa: F401

    def sampler(self, ctx, ds, gen_seed):
        import pyarrow.compute as pc
        import torch
        from transformers.trainer_pt_utils import LengthGroupedSampler

        lengths = pc.list_value_length(ds.data.column(COLUMN)).to_numpy().tolist()
        return lambda e: torch.utils.data.BatchSampler(
            LengthGroupedSampler(ctx.batch_size, lengths=lengths,
                                 generator=torch.Generator().manual_seed(gen_seed + e)),
            ctx.batch_size, False)

    def open(self, ctx, workers, state=None):
        import datasets
        import transformers

        transformers.logging.set_verbosity_error()
        ds = datasets.load_from_disk(str(ctx.conversion("hf-dataset"))).with_format("arrow")
        batches = EpochBatches(self.sampler(ctx, ds, ctx.seed),
                               *((state["epoch"], state["step"]) if state else (0, 0)))
        data = _torch_loader(ds, workers, sampler=batches, batch_size=None,
                             collate_fn=worker_collate(arrow_collate(self.kind), workers))
        first = [state is not None]

        def epoch(e):
            if not first[0]:
                batches.set_epoch(e)
            first[0] = False
            return worker_batches(data, workers)
        return Run(epoch, close=lambda: _shutdown(data))

    def resume(self, workers):
        return "sampler skip (skip_first_batches)"

    def describe_threads(self, workers, ctx):
        return (f"{workers} DataLoader workers (torch 1 thread each); {HAND_OVER}" if workers
                else self.threads)


class HFPacked(HFPadded):
    name = "hf-packed"
    label = "HF datasets (arrow format) + random batches, flattened"
    kind = "packed"
    fast_path = ("load_from_disk(...).with_format('arrow'); RandomSampler batches of {B}; one "
                 "ds[indices] a batch; flattened with NumPy (what DataCollatorWithFlattening "
                 "makes, from Arrow)")
    shuffle = "global (RandomSampler)"

    def sampler(self, ctx, ds, gen_seed):
        import torch

        n = len(ds)
        return lambda e: torch.utils.data.BatchSampler(
            torch.utils.data.RandomSampler(range(n), generator=torch.Generator().manual_seed(
                gen_seed + e)), ctx.batch_size, False)


def _nested_collate(mode, table):
    col = table.column(COLUMN)
    col = col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
    offsets, values = loop_baseline.list_parts(col.flatten())
    return loop_baseline.collate(mode, offsets[:-1], np.diff(offsets), values)


def nested_collate(mode):
    """A batch of ``IterableDataset.batch()`` in the "arrow" format (one row whose
    ``input_ids`` holds the batch's sequences, ``list<list<int32>>``) to the loop's batch of
    ``mode``: the inner lists are viewed as one ``list<int32>`` array, then collated as
    :func:`arrow_collate` collates."""
    return functools.partial(_nested_collate, mode)


HF_DOCS = ("datasets' docs, \"Differences between Dataset and IterableDataset\" (Speed "
           "differences: a shuffled Dataset reads through an indices mapping; for shuffled "
           "reads, to_iterable_dataset(num_shards=...) then .shuffle(seed=, buffer_size=)), "
           "\"Stream\" (shuffle buffer, set_epoch, state_dict) and "
           "Dataset.to_iterable_dataset's docstring (a DataLoader's workers share the shards)")


class HFIterable(HFPadded):
    """HF ``datasets``' documented path for shuffled reads: the map-style dataset as a sharded
    ``IterableDataset`` read contiguously, shuffled by shard order and a buffer (not a
    global shuffle), batched in Arrow."""

    name = "hf-iterable-packed"
    label = "HF datasets IterableDataset (to_iterable_dataset + shuffle buffer), flattened"
    kind = "packed"
    requires = ("datasets", "torch")

    def describe_fast_path(self, ctx):
        B = ctx.batch_size
        return (f"load_from_disk(...).to_iterable_dataset(num_shards={ctx.hf_shards})"
                f".shuffle(seed=s, buffer_size={ctx.hf_buffer}).with_format('arrow'), "
                f"set_epoch(e) each epoch; one process: .iter(batch_size={B}) (a pyarrow Table "
                f"a batch); workers: .batch({B}) in DataLoader(batch_size=None, num_workers=w, "
                f"persistent_workers=True), the shards split across the workers; flattened with "
                f"the loop's NumPy code.  Following {HF_DOCS}")

    def describe_shuffle(self, ctx):
        return (f"not global: {ctx.hf_shards} shards (~{ctx.sequences // ctx.hf_shards:,} "
                f"rows) in a shuffled order, a buffer of {ctx.hf_buffer:,} rows fed from up to "
                f"10 shards at a time, permuted, half of it yielded each round (with workers, "
                f"each its share of the shards and a buffer of its own)")

    def describe_notes(self, ctx):
        return ("Resume: IterableDataset.state_dict() in one process (the rows in the shuffle "
                "buffer when it was saved are not delivered: datasets documents it); with "
                "workers a plain DataLoader has none (datasets points to torchdata's "
                "StatefulDataLoader).  The padded job is not run this way: grouping by length "
                "would need a sort of the buffer, which datasets does not offer")

    def warm_imports(self):
        import datasets  # noqa: F401

    def open(self, ctx, workers, state=None):
        import datasets

        ids = (datasets.load_from_disk(str(ctx.conversion("hf-dataset")))
               .to_iterable_dataset(num_shards=ctx.hf_shards)
               .shuffle(seed=ctx.seed, buffer_size=ctx.hf_buffer).with_format("arrow"))
        first = [state is not None]
        if state is not None:
            ids.set_epoch(state["epoch"])
            ids.load_state_dict(state["state_dict"])
        if workers:
            batched = ids.batch(batch_size=ctx.batch_size)
            data = _torch_loader(batched, workers, batch_size=None,
                                 collate_fn=worker_collate(nested_collate(self.kind), workers))

            def epoch(e):
                batched.set_epoch(e)
                return worker_batches(data, workers)
            return Run(epoch, close=lambda: _shutdown(data))
        collate = arrow_collate(self.kind)

        def epoch(e):
            if not first[0]:
                ids.set_epoch(e)
            first[0] = False
            return (collate(t) for t in ids.iter(batch_size=ctx.batch_size))

        def save(e, steps):
            return {"epoch": e, "step": steps, "state_dict": ids.state_dict()}
        return Run(epoch, save=save)

    def resume(self, workers):
        return None if workers else "IterableDataset.state_dict / load_state_dict"

    def saves_state(self, workers):
        return not workers


# --- torchdata ----------------------------------------------------------------------------

class MapAndCollate:
    """torchdata.nodes' map function: a batch of indices to the batch (one ``ds[indices]``, as
    the HF rows read, then the collation); picklable for its process workers."""

    def __init__(self, dataset, collate):
        self.dataset, self.collate = dataset, collate

    def __call__(self, indices):
        return self.collate(self.dataset[indices])


TORCHDATA_DOCS = ("torchdata's docs, \"Stateful DataLoader\" (torchdata.stateful_dataloader: "
                  "a drop-in replacement for torch.utils.data.DataLoader with state_dict / "
                  "load_state_dict; a sampler without a state of its own is fast-forwarded)")
NODES_DOCS = ("torchdata's docs, \"Migrating to torchdata.nodes from torch.utils.data\" "
              "(SamplerWrapper -> Batcher -> ParallelMapper(map_and_collate, method='process') "
              "-> Prefetcher(2 x workers) -> Loader; here the sampler yields whole batches, so "
              "no Batcher) and \"Getting Started With torchdata.nodes\"")


def _nodes_shutdown(obj, seen=None):
    """Stop every worker thread and process under a ``torchdata.nodes`` graph (its iterators'
    ``_shutdown``), as their finalizers would."""
    seen = set() if seen is None else seen
    for attr in ("root", "source", "_it"):
        child = getattr(obj, attr, None)
        if child is None or id(child) in seen:
            continue
        seen.add(id(child))
        _nodes_shutdown(child, seen)
        if hasattr(child, "_shutdown"):
            child._shutdown()


class TorchdataStateful(HFPadded):
    """HF's padded row (the same map-style dataset, ``LengthGroupedSampler`` batches, one
    ``ds[indices]`` a batch, the loop's collation) in torchdata's ``StatefulDataLoader``:
    its resume is the loader's own ``state_dict``."""

    name = "torchdata-stateful-padded"
    label = ("torchdata StatefulDataLoader + HF datasets (arrow format) + "
             "LengthGroupedSampler(lengths=)")
    requires = ("torchdata", "datasets", "transformers", "torch")
    fast_path = ("load_from_disk(...).with_format('arrow'); LengthGroupedSampler({B}, lengths=) "
                 "batches, one ds[indices] a batch, the loop's NumPy collation, as HF padded; "
                 "in StatefulDataLoader(ds, sampler=batches, batch_size=None, num_workers=w, "
                 "persistent_workers=w > 0).  Following " + TORCHDATA_DOCS)

    def warm_imports(self):
        super().warm_imports()
        import torchdata.stateful_dataloader  # noqa: F401

    def open(self, ctx, workers, state=None):
        import datasets
        import transformers
        from torchdata.stateful_dataloader import StatefulDataLoader

        transformers.logging.set_verbosity_error()
        ds = datasets.load_from_disk(str(ctx.conversion("hf-dataset"))).with_format("arrow")
        batches = EpochBatches(self.sampler(ctx, ds, ctx.seed), state["epoch"] if state else 0)
        data = StatefulDataLoader(ds, sampler=batches, batch_size=None, num_workers=workers,
                                  persistent_workers=workers > 0,
                                  collate_fn=worker_collate(arrow_collate(self.kind), workers))
        if state is not None:
            data.load_state_dict(state["state_dict"])
        first = [state is not None]

        def epoch(e):
            if not first[0]:
                batches.set_epoch(e)
            first[0] = False
            return worker_batches(data, workers)

        def save(e, steps):
            return {"epoch": e, "step": steps, "state_dict": data.state_dict()}
        return Run(epoch, close=lambda: _shutdown(data), save=save)

    def resume(self, workers):
        return "StatefulDataLoader.state_dict / load_state_dict (the sampler fast-forwarded)"

    def saves_state(self, workers):
        return True

    def describe_threads(self, workers, ctx):
        return (f"{workers} StatefulDataLoader workers (torch 1 thread each); {HAND_OVER}"
                if workers else self.threads)


class TorchdataNodes(TorchdataStateful):
    """The same batches through ``torchdata.nodes``, built as its migration guide builds a
    DataLoader: the batch sampler wrapped, each batch read and collated by a (parallel)
    mapper, a prefetcher, the ``Loader`` (epochs and ``state_dict``)."""

    name = "torchdata-nodes-padded"
    label = ("torchdata.nodes (SamplerWrapper -> ParallelMapper -> Loader) + HF datasets "
             "(arrow format) + LengthGroupedSampler(lengths=)")
    fast_path = ("load_from_disk(...).with_format('arrow'); LengthGroupedSampler({B}, lengths=) "
                 "batches as HF padded, in SamplerWrapper(batches) (set_epoch each epoch) -> "
                 "ParallelMapper(one ds[indices] + the loop's NumPy collation, num_workers=w, "
                 "method='process'; w = 0: inline) -> Prefetcher(prefetch_factor=2w) where "
                 "w > 0 -> Loader.  Following " + NODES_DOCS)
    notes = ("torchdata.nodes 0.11 starts its process workers again each epoch (the migration "
             "guide: persistent workers \"coming soon\"): with workers every epoch pays their "
             "start")

    def warm_imports(self):
        HFPadded.warm_imports(self)
        import torchdata.nodes  # noqa: F401

    def open(self, ctx, workers, state=None):
        import datasets
        import torchdata.nodes as tn
        import transformers

        transformers.logging.set_verbosity_error()
        ds = datasets.load_from_disk(str(ctx.conversion("hf-dataset"))).with_format("arrow")
        node = tn.SamplerWrapper(EpochBatches(self.sampler(ctx, ds, ctx.seed)))
        node = tn.ParallelMapper(node, map_fn=MapAndCollate(ds, worker_collate(
            arrow_collate(self.kind), workers)), num_workers=workers, method="process",
            in_order=True)
        if workers:
            node = tn.Prefetcher(node, prefetch_factor=2 * workers)
        loader = tn.Loader(node)
        if state is not None:
            loader.load_state_dict(state["state_dict"])

        def close():
            _nodes_shutdown(loader)

        def save(e, steps):
            return {"epoch": e, "step": steps, "state_dict": loader.state_dict()}
        # the sampler wrapper counts the epochs: each pass of the Loader is the next one
        return Run(lambda e: worker_batches(loader, workers), close=close, save=save)

    def resume(self, workers):
        return "Loader.state_dict / load_state_dict (the sampler fast-forwarded)"

    def describe_threads(self, workers, ctx):
        return (f"{workers} ParallelMapper processes, started each epoch, + a prefetch thread "
                f"(torch 1 thread each); {HAND_OVER}" if workers
                else "main process (torch 1 thread), batches mapped inline")


# --- MosaicML streaming -------------------------------------------------------------------

def _streaming():
    """``import streaming`` without ``streaming.vision``: the only module importing
    torchvision, whose PyPI build for torch 2.13 is the CUDA one and does not load beside the
    CPU torch (the benchmark uses no vision dataset)."""
    import types

    sys.modules.setdefault("streaming.vision", types.ModuleType("streaming.vision"))
    import streaming

    return streaming


def _import(name):
    return _streaming() if name == "streaming" else importlib.import_module(name)


def _parquet_row_groups(path):
    f = pq.ParquetFile(path)
    for k in range(f.num_row_groups):
        yield loop_baseline.list_parts(f.read_row_group(k, columns=[COLUMN]).column(0))


def _concatenated_blocks(path, block):
    """The corpus' tokens, one stream, cut into ``block``-token pieces (the tail dropped), as
    llm-foundry's ``ConcatTokensDataset`` makes them (here without BOS/EOS tokens)."""
    carry = np.zeros(0, np.int32)
    for _, values in _parquet_row_groups(path):
        values = np.concatenate([carry, values])
        n = len(values) // block * block
        yield from values[:n].reshape(-1, block)
        carry = values[n:]


class Mosaic(Peer):
    name = "streaming-sequences"
    label = "MosaicML streaming, one sample per sequence, flattened"
    kind = "packed"
    library = "streaming"
    requires = ("streaming", "torch")
    fast_path = ("MDSWriter(ndarray:int32, 64 MB shards); StreamingDataset(local, "
                 "shuffle=True, batch_size={B}) + StreamingDataLoader; flattened with NumPy")
    shuffle = ("py1e (the default): shards shuffled, samples shuffled within blocks of "
               "262,144 (the default for one node; the whole corpus here)")
    threads = "main process (torch 1 thread)"
    out = "mds"

    def prepare(self, ctx):
        out = ctx.conversion(self.out)
        if (out / "index.json").exists():
            return 0.0
        MDSWriter = _streaming().MDSWriter
        t = time.perf_counter()
        with MDSWriter(out=str(out), columns={"tokens": "ndarray:int32"},
                       size_limit="64mb") as writer:
            for sample in self.samples(ctx):
                writer.write({"tokens": sample})
        return time.perf_counter() - t

    def samples(self, ctx):
        for offsets, values in _parquet_row_groups(ctx.corpus):
            for j in range(len(offsets) - 1):
                yield values[offsets[j]:offsets[j + 1]]

    def batch_size(self, ctx):
        return ctx.batch_size

    def collate(self, samples):
        return packed_from_list([s["tokens"] for s in samples])

    def warm_imports(self):
        _streaming()

    def open(self, ctx, workers, state=None):
        streaming = _streaming()
        from streaming.base.util import clean_stale_shared_memory

        clean_stale_shared_memory()
        ds = streaming.StreamingDataset(local=str(ctx.conversion(self.out)), shuffle=True,
                                        shuffle_seed=ctx.seed, batch_size=self.batch_size(ctx))
        data = streaming.StreamingDataLoader(ds, batch_size=self.batch_size(ctx),
                                             num_workers=workers,
                                             collate_fn=worker_collate(self.collate, workers),
                                             persistent_workers=workers > 0)
        if state is not None:
            data.load_state_dict(state["state_dict"])

        def save(e, steps):
            return {"epoch": e, "step": steps, "state_dict": data.state_dict()}
        # the dataset counts its epochs itself: each pass of the loader is the next one
        return Run(lambda e: worker_batches(data, workers), close=lambda: _shutdown(data),
                   save=save)

    def resume(self, workers):
        return "StreamingDataLoader.state_dict"

    def saves_state(self, workers):
        return True

    def describe_threads(self, workers, ctx):
        return (f"{workers} StreamingDataLoader workers (torch 1 thread each); {HAND_OVER}"
                if workers else self.threads)


class MosaicConcat(Mosaic):
    name = "streaming-concat"
    label = "MosaicML streaming, concatenated blocks (llm-foundry) [other job]"
    kind = "blocks"
    fast_path = ("llm-foundry's concatenated layout: MDS 'tokens' ndarray:int32 samples of "
                 "{L}; StreamingDataset + StreamingDataLoader, {R} samples a batch, "
                 "stacked")
    out = "mds-concat"

    def samples(self, ctx):
        return _concatenated_blocks(ctx.corpus, ctx.row_length)

    def batch_size(self, ctx):
        return ctx.rows_per_batch

    def collate(self, samples):
        return stack_blocks([s["tokens"] for s in samples])


# --- litdata ------------------------------------------------------------------------------

def _litdata_rows(row_group, path=None):
    """litdata ``optimize``'s function: the sequences of one row group."""
    col = pq.ParquetFile(path).read_row_group(row_group, columns=[COLUMN]).column(0)
    offsets, values = loop_baseline.list_parts(col)
    for j in range(len(offsets) - 1):
        yield values[offsets[j]:offsets[j + 1]].copy()


class LitData(Peer):
    name = "litdata-sequences"
    label = "litdata, one item per sequence, flattened"
    kind = "packed"
    library = "litdata"
    requires = ("litdata", "torch")
    fast_path = ("optimize(fn yielding each sequence, 64 MB chunks); StreamingDataset("
                 "shuffle=True) + StreamingDataLoader(batch_size={B}) (litdata's README: "
                 "optimize, then StreamingDataset in its StreamingDataLoader, which keeps the "
                 "state to resume); flattened with NumPy")
    shuffle = ("block-local: chunks shuffled and dealt to the workers; each worker's items "
               "shuffled in blocks of 256 (item_shuffle_window, the default: the blocks' order "
               "shuffled, then the items in each block)")
    threads = "main process (torch 1 thread) + litdata's chunk thread"
    out = "litdata"
    group = "litdata-sequences"
    group_label = ("litdata, one item per sequence, flattened, the faster of batch_decode="
                   "'auto' (the default) and 0 measured")
    variant = "batch_decode='auto'"
    batch_decode = None
    notes = ("With workers StreamingDataLoader deals each worker whole batches of items, so a "
             "worker's share can start inside a chunk off a multiple of 256; litdata (0.2.76) "
             "shuffles a worker's items in blocks of 256 and, by default (batch_decode='auto'), "
             "decodes aligned 256-item windows of a chunk, keeping one: a block that straddles "
             "two windows alternates between them and decodes 256 items at each switch, so "
             "that worker decodes many times the items it delivers, and the DataLoader, "
             "taking the workers' batches in turn, waits on it.  The chunks are read in "
             "place (a local input_dir: no cache copy), each item once an epoch.  "
             "batch_decode=0 (per-item decoding; StreamingDataset's docstring) avoids the "
             "re-decoding: its own row")

    def prepare(self, ctx):
        out = ctx.conversion(self.out)
        if (out / "index.json").exists():
            return 0.0
        t = time.perf_counter()
        self.optimize(ctx, out)
        return time.perf_counter() - t

    def optimize(self, ctx, out):
        """litdata's ``optimize`` of the corpus into ``out`` (2 processes: the cores)."""
        import litdata

        groups = list(range(pq.ParquetFile(ctx.corpus).num_row_groups))
        litdata.optimize(fn=functools.partial(_litdata_rows, path=str(ctx.corpus)),
                         inputs=groups, output_dir=str(out), num_workers=2, verbose=False,
                         **self.optimize_kwargs(ctx))

    def optimize_kwargs(self, ctx):
        return {"chunk_bytes": "64MB"}

    def dataset(self, ctx, path=None):
        import litdata

        kw = {} if self.batch_decode is None else {"batch_decode": self.batch_decode}
        return litdata.StreamingDataset(str(path or ctx.conversion(self.out)), shuffle=True,
                                        seed=ctx.seed, **kw)

    def batch_size(self, ctx):
        return ctx.batch_size

    def collate(self, items):
        return packed_from_list(items)

    def open(self, ctx, workers, state=None, path=None):
        import litdata

        data = litdata.StreamingDataLoader(self.dataset(ctx, path),
                                           batch_size=self.batch_size(ctx),
                                           num_workers=workers,
                                           collate_fn=worker_collate(self.collate, workers),
                                           persistent_workers=workers > 0)
        if state is not None:
            data.load_state_dict(state["state_dict"])

        def save(e, steps):
            return {"epoch": e, "step": steps, "state_dict": data.state_dict()}
        return Run(lambda e: worker_batches(data, workers), close=lambda: _shutdown(data),
                   save=save)

    def resume(self, workers):
        return "StreamingDataLoader.state_dict"

    def saves_state(self, workers):
        return True

    def describe_threads(self, workers, ctx):
        return (f"{workers} StreamingDataLoader workers (torch 1 thread each); {HAND_OVER}"
                if workers else self.threads)


class LitDataDecode0(LitData):
    """litdata's per-sequence row with ``batch_decode=0``: each item decoded alone, no
    256-item window (see :attr:`LitData.notes`)."""

    name = "litdata-sequences-decode0"
    label = "litdata, one item per sequence, flattened, batch_decode=0"
    fast_path = ("as litdata per sequence, StreamingDataset(shuffle=True, batch_decode=0): each "
                 "item decoded alone (StreamingDataset's docstring: batch_decode 0 is per item; "
                 "the default 'auto' decodes aligned 256-item windows for this data)")
    variant = "batch_decode=0"
    batch_decode = 0
    notes = ""


def _litdata_tokens(row_group, path=None):
    """litdata ``optimize``'s function for ``TokensLoader``: each sequence's tokens (litdata
    concatenates them into the chunks)."""
    yield from _litdata_rows(row_group, path)


class LitDataTokens(LitData):
    name = "litdata-tokens"
    label = "litdata TokensLoader, concatenated blocks [other job]"
    kind = "blocks"
    fast_path = ("optimize(item_loader=TokensLoader(), chunk_size={L}*1024 tokens); "
                 "StreamingDataset(item_loader=TokensLoader(block_size={L}), "
                 "shuffle=True, drop_last=True) + StreamingDataLoader(batch_size={R})")
    shuffle = ("block-local: chunks shuffled and dealt to the workers; each worker's blocks "
               "shuffled in groups of 256 (item_shuffle_window, the default)")
    out = "litdata-tokens"
    group = None
    variant = ""
    batch_decode = None
    notes = ""

    def optimize_kwargs(self, ctx):
        import litdata

        return {"chunk_size": ctx.row_length * 1024, "item_loader": litdata.TokensLoader()}

    def dataset(self, ctx, path=None):
        import litdata

        return litdata.StreamingDataset(str(path or ctx.conversion(self.out)), shuffle=True,
                                        seed=ctx.seed, drop_last=True,
                                        item_loader=litdata.TokensLoader(
                                            block_size=ctx.row_length))

    scratch = True

    def from_scratch(self, ctx):
        """``optimize`` into a fresh folder, then epoch 0 from it in one process."""
        import shutil

        out = scratch_dir(ctx, "litdata-scratch-")
        try:
            t0 = time.perf_counter()
            self.optimize(ctx, out / "chunks")
            t1 = time.perf_counter()
            run = self.open(ctx, 0, path=out / "chunks")
            tokens = first_epoch(self, run)
            t2 = time.perf_counter()
            run.close()
        finally:
            shutil.rmtree(out, ignore_errors=True)
        return {"seconds": t2 - t0, "prepare_s": t1 - t0, "tokens": tokens}

    def batch_size(self, ctx):
        return ctx.rows_per_batch

    def collate(self, items):
        return stack_blocks(items)


# --- Grain --------------------------------------------------------------------------------

class ArrowRows:
    """A random-access source over the corpus' Arrow table: item ``i`` is sequence ``i``'s
    token ids (a dict), a zero-copy NumPy slice.  Given the in-memory table (read before the
    clock, as the other "table" rows are given it); a worker process that gets it pickled
    reads the file itself."""

    def __init__(self, path, table=None):
        self.path = str(path)
        self._parts = None if table is None else loop_baseline.list_parts(table.column(COLUMN))
        self._len = pq.ParquetFile(self.path).metadata.num_rows

    def __getstate__(self):
        return {"path": self.path, "_len": self._len, "_parts": None}

    def __len__(self):
        return self._len

    def __getitem__(self, i):
        if self._parts is None:
            with self.__dict__.setdefault("_lock", threading.Lock()):
                if self._parts is None:
                    self._parts = loop_baseline.list_parts(arrow_rows(self.path).column(0))
        offsets, values = self._parts
        return {COLUMN: values[offsets[i]:offsets[i + 1]]}


def _grain_to_torch(batch):
    import torch

    return {k: torch.from_numpy(v) for k, v in batch.items()}


#: Grain's ``ReadOptions(num_threads=)`` measured, each a row: 0 (items read in the packing
#: thread), 1, and 16 (Grain's default).
GRAIN_THREADS = (0, 1, 16)


class GrainPacking(Peer):
    """Grain's packing pipeline with ``ReadOptions(num_threads=threads)``: a row per value of
    :data:`GRAIN_THREADS`, the summary giving the fastest (a group)."""

    kind = "rows"
    source = "table"
    library = "grain"
    requires = ("grain", "torch")
    group = "grain-packing"
    group_label = ("Grain MapDataset + BestFitPackIterDataset, the fastest of ReadOptions("
                   "num_threads=" + ", ".join(map(str, GRAIN_THREADS)) + ") measured")

    def __init__(self, threads):
        self.threads_n = threads
        self.name = f"grain-packing-t{threads}"
        self.label = ("Grain MapDataset + BestFitPackIterDataset, "
                      f"ReadOptions(num_threads={threads})")
        self.variant = f"num_threads={threads}"

    def describe_shuffle(self, ctx):
        return (f"global (MapDataset.shuffle, reshuffled each repeat); packed online into "
                f"{ctx.grain_bins} open rows")

    def describe_fast_path(self, ctx):
        return (f"MapDataset.source(Arrow rows).shuffle().repeat().to_iter_dataset("
                f"ReadOptions(num_threads={self.threads_n}, prefetch_buffer_size="
                f"{ctx.grain_buffer})) -> BestFitPackIterDataset(length_struct="
                f"{ctx.row_length}, num_packing_bins={ctx.grain_bins}) -> batch("
                f"{ctx.rows_per_batch}); workers: .mp_prefetch(num_workers=w); torch.from_numpy "
                f"in the main process.  Grain's ReadOptions docstring: num_threads 0 for "
                f"data already in memory (no GIL contention between read threads), the "
                f"default 16 chosen for remote disks; each measured")

    def describe_threads(self, workers, ctx):
        where = f"{workers} mp_prefetch workers" if workers else "main process"
        reads = (f"{self.threads_n} read thread(s)" if self.threads_n
                 else "items read in the packing thread")
        return f"{where}; {reads}"

    def warm_imports(self):
        import grain.experimental  # noqa: F401

    def _dataset(self, ctx, workers):
        import grain
        import grain.experimental as gx

        ds = (grain.MapDataset.source(ArrowRows(ctx.corpus, ctx.table)).shuffle(seed=ctx.seed)
              .repeat(None)
              .to_iter_dataset(grain.ReadOptions(num_threads=self.threads_n,
                                                 prefetch_buffer_size=ctx.grain_buffer)))
        ds = gx.BestFitPackIterDataset(ds, length_struct={COLUMN: ctx.row_length},
                                       num_packing_bins=ctx.grain_bins, seed=ctx.seed)
        ds = ds.batch(ctx.rows_per_batch)
        if workers:
            ds = ds.mp_prefetch(grain.MultiprocessingOptions(num_workers=workers))
        return ds.map(_grain_to_torch)

    def open(self, ctx, workers, state=None):
        from absl import flags

        if not flags.FLAGS.is_parsed():   # Grain's worker pool reads absl flags
            flags.FLAGS.mark_as_parsed()
        it = iter(self._dataset(ctx, workers))
        if state is not None:
            it.set_state(state["state_dict"])

        def close():
            if hasattr(it, "close"):
                it.close()

        def save(e, steps):
            return {"epoch": e, "step": steps, "state_dict": it.get_state()}
        run = Run(stream=lambda: it, close=close, save=save)
        run.epoch_tokens = ctx.tokens
        return run

    def resume(self, workers):
        return "DatasetIterator.get_state / set_state"

    def saves_state(self, workers):
        return True

    def counts(self, batch):
        seg = batch[f"{COLUMN}_segment_ids"]
        return (int(seg.count_nonzero()), int(seg.numel()),
                int(seg.amax(dim=1).sum()))


def _all_peers():
    peers = []
    for mode in ("padded", "packed", "packed_rows", "segments"):
        for source in ("table", "parquet"):
            peers += [Lodarrow(mode, source), Lodarrow(mode, source, prefetch=0),
                      Lodarrow(mode, source, pickled=True)]
        peers += [Lodarrow(mode, "parquet-global")]
        peers += [Loop(mode, s) for s in ("table", "parquet", "parquet-global")]
    peers += [DecodeOnly()]
    # blocks: documents shuffled and joined, with each piece's positions (a richer job than
    # cutting the stored stream: labelled so in the table)
    # and through the decoded cache (row groups decoded by the warm-up epoch, then mapped:
    # what litdata's TokensLoader reads is its own optimize's output, made before the runs)
    peers += [Lodarrow("blocks", source, token_arrays=t) for t in (True, False)
              for source in ("table", "parquet", "parquet-decoded")]
    # and against litdata on its terms: one thread (prefetch=0), batches pickled from workers
    peers += [Lodarrow("blocks", source, prefetch=0) for source in ("table", "parquet-decoded")]
    # (and with token_arrays=False: what litdata's batches hold, the per-token arrays costed
    # apart by the pair)
    peers += [Lodarrow("blocks", source, token_arrays=t, pickled=True)
              for t in (True, False) for source in ("table", "parquet-decoded")]
    peers += [LoopBlocks(), HFPadded(), HFPacked(), HFIterable(), TorchdataStateful(),
              TorchdataNodes(), Mosaic(), MosaicConcat(), LitData(), LitDataDecode0(),
              LitDataTokens()]
    peers += [GrainPacking(t) for t in GRAIN_THREADS]
    return {p.name: p for p in peers}


PEERS = _all_peers()
#: The sources of lodarrow's blocks rows, as the statements name them.
BLOCK_SOURCES = {"table": "from the in-memory table",
                 "parquet": "from Parquet decoding every epoch",
                 "parquet-decoded": "from Parquet through the decoded cache (decoded once, "
                                    "before the timed epochs)"}
JOBS = [("padded", "padded"), ("packed", "packed (cu_seqlens)"), ("rows", "packed_rows"),
        ("segments", "segments (JAX)"),
        ("blocks", "concatenated blocks: a different job (no sequence boundaries)"),
        ("decode", "Parquet decode alone: no batches, the most a reader decoding with "
                   "lodarrow's read call on one thread delivers")]


# ----------------------------------------------------------------------------------------
# one run, in its own process
# ----------------------------------------------------------------------------------------

class Memory(threading.Thread):
    """Peak resident set of this process and of each of its descendants (the workers), read
    by psutil every ``every`` seconds (without psutil: this process' peak, from getrusage)."""

    def __init__(self, every=0.25):
        super().__init__(daemon=True)
        try:
            import psutil
        except ImportError:
            psutil = None
        self._psutil = psutil
        self._me = psutil.Process() if psutil else None
        self.every, self.peak, self._done = every, {}, threading.Event()

    def sample(self):
        if self._psutil is None:
            return
        procs = [self._me]
        try:
            procs += self._me.children(recursive=True)
        except self._psutil.Error:
            pass
        for p in procs:
            try:
                rss = p.memory_info().rss
            except self._psutil.Error:
                continue
            self.peak[p.pid] = max(self.peak.get(p.pid, 0), rss)

    def run(self):
        while not self._done.wait(self.every):
            self.sample()

    def stop(self):
        self._done.set()
        self.join()
        self.sample()
        mib = 1 << 20
        if self._psutil is None:
            import resource

            kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            return {"rss_main_mib": round(kib * 1024 / mib), "workers_seen": None,
                    "rss_worker_mib": None}
        me = self.peak.pop(self._me.pid, 0)
        others = list(self.peak.values())
        return {"rss_main_mib": round(me / mib), "workers_seen": len(others),
                "rss_worker_mib": round(max(others) / mib) if others else None}


END = object()   # an epoch's end, in the stream of batches


def with_epochs(run, peer, first_epoch=0):
    """``(epoch, batch)`` pairs, and ``(epoch, END)`` after each epoch's last batch: the
    loader's own epochs, or (``run.epoch_tokens``) an epoch per corpus' tokens delivered."""
    if run.epoch_tokens is None:
        e = first_epoch
        while True:
            for batch in run.epoch(e):
                yield e, batch
            yield e, END
            e += 1
    e, delivered = first_epoch, 0
    for batch in run.stream():
        yield e, batch
        delivered += peer.counts(batch)[0]
        if delivered >= (e - first_epoch + 1) * run.epoch_tokens:
            yield e, END
            e += 1


def run_one(peer, ctx, workers, seconds, warmup, max_epochs=1000):
    """Start, throughput, resume and memory of one loader with ``workers`` workers."""
    import torch

    torch.set_num_threads(1)          # as a data loader process sets it (workers do)
    for name in peer.requires:        # imports are not the loader's start-up
        _import(name)
    peer.warm_imports()
    # pyarrow imports pandas, where installed, at its first conversion to NumPy (a few
    # tenths of a second): an import like the others, made before every row's clock
    try:
        import pandas  # noqa: F401
    except ImportError:
        pass
    if peer.source == "table" and ctx.table is None:
        ctx.table = arrow_rows(ctx.corpus)     # the in-memory source: given, not timed
    result = {"peer": peer.name, "label": peer.label, "kind": peer.kind, "workers": workers,
              "source": peer.source, "fast_path": peer.describe_fast_path(ctx),
              "shuffle": peer.describe_shuffle(ctx), "threads": peer.describe_threads(workers, ctx),
              "torch_threads": torch.get_num_threads(),
              "load_before": round(os.getloadavg()[0], 2)}
    notes = peer.describe_notes(ctx)
    if notes:
        result["notes"] = notes
    if peer.group:
        result.update(group=peer.group, group_label=peer.group_label, variant=peer.variant)
    cold = peer.cold_start(ctx, workers)  # its cache then filled: the start below is warm
    if cold is not None:
        result["cold_start_s"] = cold
        gc.collect()
    mem = Memory()
    mem.start()
    t0 = time.perf_counter()
    run = peer.open(ctx, workers)
    result["start_open_s"] = time.perf_counter() - t0     # the loader made, no batch yet
    stream = with_epochs(run, peer)
    _, batch = next(stream)
    result["start_s"] = time.perf_counter() - t0
    result["first_batch"] = list(peer.counts(batch))
    epochs_done, in_epoch = 0, 1
    while epochs_done < warmup:       # whole warm-up epochs, untimed
        _, batch = next(stream)
        if batch is END:
            epochs_done, in_epoch = epochs_done + 1, 0
        else:
            in_epoch += 1
    result["warmup_s"] = time.perf_counter() - t0
    tokens = slots = seqs = batches = timed_epochs = epoch_batches = 0
    t1 = time.perf_counter()
    for e, batch in stream:
        if batch is END:
            timed_epochs += 1
            epoch_batches, in_epoch = in_epoch, 0
            if time.perf_counter() - t1 >= seconds or timed_epochs >= max_epochs:
                break
            continue
        tk, sl, sq = peer.counts(batch)
        tokens, slots, seqs, batches, in_epoch = (tokens + tk, slots + sl, seqs + sq,
                                                  batches + 1, in_epoch + 1)
    elapsed = time.perf_counter() - t1
    result.update(timed_s=elapsed, timed_epochs=timed_epochs, timed_batches=batches,
                  timed_tokens=tokens, tokens_per_s=tokens / elapsed,
                  batches_per_s=batches / elapsed, seqs_per_s=seqs / elapsed,
                  padding_pct=100.0 * (1 - tokens / slots),
                  packing_pct=100.0 * tokens / slots if peer.kind == "rows" else None,
                  tokens_per_epoch=tokens / max(timed_epochs, 1))
    result["resume"] = peer.resume(workers)
    result["steps_per_epoch"] = epoch_batches
    if result["resume"] is not None and epoch_batches:
        resume_epoch = warmup + timed_epochs
        step = max(1, min(int(epoch_batches * ctx.resume_at), epoch_batches))
        if peer.saves_state(workers):
            # the state is saved after ``step`` batches: go there (untimed), within
            # --resume-budget seconds at the measured pace (a slow loader saves earlier; the
            # fraction is reported)
            step = max(1, min(step, int(batches / elapsed * ctx.resume_budget)))
            got = 0
            while got < step:
                _, batch = next(stream)
                if batch is END:
                    break
                got += 1
            step = got
            state = run.save(resume_epoch, step)
        else:
            state = {"epoch": resume_epoch, "step": step}
        stream.close()
        run.close()
        del run, stream, batch
        gc.collect()
        t2 = time.perf_counter()
        run = peer.open(ctx, workers, state)
        result["resume_open_s"] = time.perf_counter() - t2
        next(with_epochs(run, peer, resume_epoch))
        result["resume_s"] = time.perf_counter() - t2
        result["resume_step"] = step
        result["resume_fraction"] = step / epoch_batches
    run.close()
    result.update(mem.stop())
    result["load_after"] = round(os.getloadavg()[0], 2)
    return result


def scratch_one(peer, ctx):
    """:meth:`Peer.from_scratch` with the row's imports made first (not its work) and the
    load around it."""
    import torch

    torch.set_num_threads(1)
    for name in peer.requires:
        _import(name)
    peer.warm_imports()
    try:
        import pandas  # noqa: F401 - pyarrow's first conversion imports it (run_one)
    except ImportError:
        pass
    load = round(os.getloadavg()[0], 2)
    return dict(peer.from_scratch(ctx), load_before=load)


def child_main(args):
    """``--job run|prepare --peer PEER``: one job, its JSON on the last line of stdout."""
    meta = json.loads((Path(args.workdir) / "corpus.json").read_text())
    ctx = Context(args, meta)
    peer = PEERS[args.peer]
    if args.job == "prepare":
        out = {"prepare_s": peer.prepare(ctx)}
    elif args.job == "scratch":
        out = scratch_one(peer, ctx)
    else:
        out = run_one(peer, ctx, args.workers, args.seconds, args.warmup, args.max_epochs)
    out["versions"] = versions(peer)
    print("\n" + json.dumps(out), flush=True)


def versions(peer):
    names = {"lodarrow", "torch", "numpy", "pyarrow", *peer.requires}
    out = {"python": platform.python_version()}
    for name in sorted(names):
        try:
            mod = _import(name)
            out[name] = getattr(mod, "__version__", "?")
        except Exception:   # noqa: BLE001 - reported, not raised
            out[name] = None
    return out


# ----------------------------------------------------------------------------------------
# the driver
# ----------------------------------------------------------------------------------------

def ensure_corpus(args):
    """The corpus under ``--workdir`` (written if missing or made with other parameters)."""
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    params = {"sequences": args.sequences, "mean_length": args.mean_length, "sigma": args.sigma,
              "max_length": args.max_length, "vocab": args.vocab,
              "row_group_size": args.row_group_size, "seed": args.seed}
    meta_path = work / "corpus.json"
    if meta_path.exists():
        meta = json.loads(meta_path.read_text())
        if meta.get("params") == params and (work / "corpus.parquet").exists():
            return meta
        for child in work.iterdir():      # other parameters: conversions are stale too
            if child.is_dir():
                import shutil

                shutil.rmtree(child)
    t = time.perf_counter()
    lengths = corpus_lengths(args.sequences, args.mean_length, args.sigma, args.max_length,
                             args.seed)
    write_corpus(work / "corpus.parquet", lengths, args.vocab, args.row_group_size, args.seed)
    meta = {"params": params, "sequences": int(len(lengths)), "tokens": int(lengths.sum()),
            "mean_length": float(lengths.mean()), "median_length": float(np.median(lengths)),
            "max_length": int(lengths.max()),
            "row_groups": pq.ParquetFile(work / "corpus.parquet").num_row_groups,
            "parquet_mib": round((work / "corpus.parquet").stat().st_size / (1 << 20)),
            "write_s": round(time.perf_counter() - t, 1)}
    meta_path.write_text(json.dumps(meta, indent=1))
    return meta


def inline(args, job, peer, workers=0):
    """``child`` in this process (``--in-process``: quick checks, not measurements)."""
    ctx = Context(args, json.loads((Path(args.workdir) / "corpus.json").read_text()))
    try:
        if job == "prepare":
            return {"prepare_s": PEERS[peer].prepare(ctx)}
        if job == "scratch":
            return scratch_one(PEERS[peer], ctx)
        return run_one(PEERS[peer], ctx, workers, args.seconds, args.warmup, args.max_epochs)
    except Exception as exc:   # noqa: BLE001 - reported in the table
        return {"error": f"{type(exc).__name__}: {exc}"}


def child(args, python, job, peer, workers=0, timeout=None):
    """Run ``--job job --peer peer`` in a fresh process; its JSON, or an error."""
    if args.in_process:
        return inline(args, job, peer, workers)
    cmd = [python, os.path.abspath(__file__), "--job", job, "--peer", peer,
           "--workers", str(workers)] + passthrough(args)
    env = dict(os.environ, TOKENIZERS_PARALLELISM="false", PYTHONWARNINGS="ignore")
    known = PEERS.get(peer)
    if "LODARROW_NUM_THREADS" not in os.environ and known is not None:
        env.update(getattr(known, "env", {}))  # a value set for the whole run is kept
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s"}
    lines = proc.stdout.strip().splitlines()
    if proc.returncode == 0 and lines:
        try:
            return json.loads(lines[-1])
        except json.JSONDecodeError:
            pass
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
    return {"error": " | ".join(tail) or f"exit status {proc.returncode}"}


def passthrough(args):
    out = []
    for key in ("workdir", "batch_size", "row_length", "rows_per_batch", "seed", "seconds",
                "warmup", "max_epochs", "resume_at", "resume_budget", "window", "row_groups",
                "hf_shards", "hf_buffer", "grain_buffer", "grain_bins"):
        if getattr(args, key) is not None:
            out += [f"--{key.replace('_', '-')}", str(getattr(args, key))]
    return out


def available(python, peer, in_process=False):
    """None if ``peer``'s libraries import in ``python``, else the error."""
    requires = list(PEERS[peer].requires)
    if in_process:
        for name in requires:
            try:
                _import(name)
            except Exception as exc:   # noqa: BLE001 - the reason it is not run
                return f"{name}: {type(exc).__name__}: {exc}"[:300]
        return None
    code = ("import importlib, sys, types\n"
            "sys.modules.setdefault('streaming.vision', types.ModuleType('streaming.vision'))\n"
            f"for m in {requires!r}:\n"
            "    try: importlib.import_module(m)\n"
            "    except Exception as e: print(f'{m}: {type(e).__name__}: {e}'); sys.exit(1)\n")
    proc = subprocess.run([python, "-c", code], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONWARNINGS="ignore"))
    if proc.returncode == 0:
        return None
    return (proc.stdout.strip() or proc.stderr.strip().splitlines()[-1])[:300]


def fmt(value, digits=1, thousands=False):
    if value is None:
        return "—"
    if thousands:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def resumed(r):
    if r.get("resume_s") is None:
        return "—"
    return f"{r['resume_s']:.2f} ({100 * r['resume_fraction']:.0f}%)"


def loop_rates(results):
    """The NumPy/Arrow loop's tokens/s by (job, source, with workers or not)."""
    return {(r["kind"], r["source"], bool(r["workers"])): r["tokens_per_s"] for r in results
            if r["peer"].startswith("loop-") and "error" not in r}


def loop_base(loops, kind, source, workers):
    """The loop a row compares with: the same job and source, in one process, or in
    DataLoader workers for a row with workers (the same hand-over to pay)."""
    for src in (source, "table"):
        base = loops.get((kind, src, bool(workers)))
        if base:
            return base
    return None


def ratio(r, loops):
    base = loop_base(loops, r["kind"], r.get("source"), r["workers"])
    if not base or "error" in r:
        return "—"
    return f"{r['tokens_per_s'] / base:.2f}"


def workers_text(r):
    if not r["workers"]:
        return "0"
    return str(r["workers"])


MODES = ("padded", "packed", "packed_rows", "segments")
SOURCES = ("table", "parquet", "parquet-global")
MODE_OF = {"padded": "padded", "packed": "packed", "rows": "packed_rows",
           "segments": "segments"}


def mega(value):
    """Tokens/s in millions, as the summary tables give them."""
    return "—" if value is None else f"{value / 1e6:,.1f} M"


def _span(values, digits=2, unit="x"):
    """``lo-hi`` (or the one value) of ``values``, or "none"."""
    values = sorted(v for v in values if v is not None)
    if not values:
        return "none"
    lo, hi = f"{values[0]:,.{digits}f}", f"{values[-1]:,.{digits}f}"
    return (lo if lo == hi else f"{lo}-{hi}") + unit


def _cells(report, variant):
    """lodarrow over the loop, each (job, source) of the four jobs that keep sequence
    boundaries: ``[(mode, source, lodarrow tokens/s, loop tokens/s)]`` where both ran;
    ``variant``: "default" (one process), "prefetch0", "workers" (DataLoader workers) or
    "pickled" (workers whose batches cross pickled, as the loop's do)."""
    results = report["results"]
    loops = loop_rates(results)
    out = []
    for mode in MODES:
        for source in SOURCES:
            stem = f"lodarrow-{mode.replace('_', '-')}-{source}"
            name = {"prefetch0": stem + "-prefetch0", "pickled": stem + "-pickled"}.get(
                variant, stem)
            workers = variant in ("workers", "pickled")
            rows = [r for r in results if r["peer"] == name and bool(r["workers"]) == workers
                    and "error" not in r]
            base = loops.get((KIND_OF[mode], source, workers))
            if rows and base:
                out.append((mode, source, rows[0]["tokens_per_s"], base))
    return out


def _cell_pairs(report, variant):
    """``(mode, source, own, base)`` of each cell :func:`_cells` gives, in its order: lodarrow's
    cell of ``variant`` and the loop's of the same job, source and workers (None if none)."""
    results = [r for r in report["results"] if "error" not in r]
    for mode, source, _, _ in _cells(report, variant):
        stem = f"lodarrow-{mode.replace('_', '-')}-{source}"
        name = {"prefetch0": stem + "-prefetch0", "pickled": stem + "-pickled"}.get(
            variant, stem)
        workers = variant in ("workers", "pickled")
        own = next(r for r in results if r["peer"] == name and bool(r["workers"]) == workers)
        base = next((r for r in results if r["peer"].startswith("loop-")
                     and r["kind"] == KIND_OF[mode] and r["source"] == source
                     and bool(r["workers"]) == workers), None)
        yield mode, source, own, base


def _cell_rounds(report, variant):
    """:func:`_by_round` of each cell :func:`_cells` gives, in its order."""
    return [None if base is None else _by_round(own, base)
            for _, _, own, base in _cell_pairs(report, variant)]


def _round_ratios(own, base):
    """lodarrow's runs over the loop's, round by round (the rounds both ran)."""
    mine = {x["round"]: x["tokens_per_s"] for x in own.get("samples", [])
            if x.get("tokens_per_s") and "round" in x}
    theirs = {x["round"]: x["tokens_per_s"] for x in base.get("samples", [])
              if x.get("tokens_per_s") and "round" in x}
    return [mine[k] / theirs[k] for k in sorted(mine.keys() & theirs.keys())]


def _either_way(report, variant):
    """``(job, source, per-round ratios)`` of the cells of ``variant`` that were ahead in some
    rounds and behind in others."""
    return [(JOB_NAMES[mode], source, _round_ratios(own, base))
            for mode, source, own, base in _cell_pairs(report, variant)
            if base is not None and _by_round(own, base) == "noise"]


def _by_round(own, base):
    """lodarrow's cell ``own`` against the loop's ``base`` round by round (runs of the same
    round ran one after the other): "ahead" if every round's ratio is above 1, "behind" if
    every one is below, else "noise"; None without rounds to pair."""
    ratios = _round_ratios(own, base)
    if not ratios:
        return None
    return "ahead" if min(ratios) > 1 else "behind" if max(ratios) < 1 else "noise"


def headline(results):
    """The rows the summary gives: the variants of a group (``group`` in a run: Grain's read
    threads, litdata's decoding) as one line, each worker count's fastest variant under the
    group's label with its setting in ``headline_variant`` (a group with one row measured
    keeps that row's label); every other row as it is, in the order of ``results``."""
    best, count, order = {}, {}, []
    for r in results:
        if not r.get("group"):
            order.append(r)
            continue
        key = (r["group"], r["workers"])
        count[key] = count.get(key, 0) + 1
        cur = best.get(key)
        if cur is None:
            order.append(key)
            best[key] = r
        elif "error" not in r and ("error" in cur or r["tokens_per_s"] > cur["tokens_per_s"]):
            best[key] = r
    out = []
    for item in order:
        if isinstance(item, dict):
            out.append(item)
            continue
        r = best[item]
        if count[item] > 1:
            r = dict(r, label=r["group_label"], headline_variant=r.get("variant"))
        out.append(r)
    return out


def notes_of(results):
    """``(label, notes)`` of each loader whose runs carry notes, once a label."""
    seen = {}
    for r in results:
        if r.get("notes") and r["label"] not in seen:
            seen[r["label"]] = r["notes"]
    return list(seen.items())


#: How a blocks row pickled with ``token_arrays=False`` is named: litdata's batch (token ids
#: and nothing a token more), beside the same row with the per-token arrays
IDS_PICKLED = "pickled, token_arrays=False: the values and cu_seqlens, as litdata's ids"


def claims_blocks(by, results):
    """The blocks claims against litdata's ``TokensLoader``: each lodarrow blocks source's
    ratio (``blocks``), the rows on litdata's terms (``blocks_equal``: one thread, pickled
    from workers, with and without the per-token arrays) and the decoded cache's cold starts (``decoded_fill``); ``by`` maps
    ``(peer, workers)`` to the cell."""
    out = {}
    out["decoded_fill"] = [r["cold_start_s"] for r in results
                           if r["peer"].startswith("lodarrow-blocks-parquet-decoded")
                           and r.get("cold_start_s") is not None]
    out["blocks"] = [
        {"source": src, "workers": w,
         "over_litdata": by[(f"lodarrow-blocks-{src}", w)]["tokens_per_s"]
         / by[("litdata-tokens", w)]["tokens_per_s"]}
        for src in BLOCK_SOURCES for w in sorted({r["workers"] for r in results})
        if (f"lodarrow-blocks-{src}", w) in by and ("litdata-tokens", w) in by]
    # on litdata's terms: one thread in one process, pickled from workers
    out["blocks_equal"] = [
        {"source": src, "workers": w, "how": how,
         "over_litdata": by[(f"lodarrow-blocks-{src}-{tail}", w)]["tokens_per_s"]
         / by[("litdata-tokens", w)]["tokens_per_s"]}
        for src in BLOCK_SOURCES for tail, how in (("prefetch0", "one thread"),
                                                   ("pickled", "pickled"),
                                                   ("ids-pickled", IDS_PICKLED))
        for w in sorted({r["workers"] for r in results})
        if (f"lodarrow-blocks-{src}-{tail}", w) in by and ("litdata-tokens", w) in by]
    return out


#: The rows measured from scratch, as the blocks sentence names them
SCRATCH_ROWS = {"lodarrow-blocks-parquet-decoded": "lodarrow through the decoded cache "
                                                   "(which that epoch fills)",
                "lodarrow-blocks-parquet": "lodarrow decoding Parquet"}


def claims_scratch(samples):
    """From the Parquet file to the end of a first epoch (``report["scratch"]``): litdata's
    median seconds (and its ``optimize``'s), and each lodarrow row's median with the ratio
    of litdata's seconds over its own, round by round; None without litdata's."""
    runs = {}
    for r in samples or ():
        if "error" not in r:
            runs.setdefault(r["peer"], {})[r["round"]] = r
    lit = runs.pop("litdata-tokens", None)
    if not lit or not runs:
        return None
    rows = []
    for peer in [p for p in SCRATCH_ROWS if p in runs]:
        own = runs[peer]
        rounds = sorted(set(own) & set(lit))
        rows.append({"peer": peer, "seconds": statistics.median(
            x["seconds"] for x in own.values()),
            "tokens": statistics.median(x["tokens"] for x in own.values()),
            "over": [lit[k]["seconds"] / own[k]["seconds"] for k in rounds]})
    return {"litdata": {"seconds": statistics.median(x["seconds"] for x in lit.values()),
                        "prepare_s": statistics.median(x["prepare_s"] for x in lit.values()),
                        "tokens": statistics.median(x["tokens"] for x in lit.values()),
                        "rounds": len(lit)},
            "rows": rows}


def claims(report):
    """What the summary sentences state, computed from the report (tests check them)."""
    results = [r for r in report["results"] if "error" not in r]
    out = {}
    for variant in ("default", "prefetch0", "workers", "pickled"):
        cells = _cells(report, variant)
        out[variant] = {
            "ahead": sum(own > base for _, _, own, base in cells), "cells": len(cells),
            "ratios": [own / base for _, _, own, base in cells],
            "by_source": {src: [own / base for _, s, own, base in cells if s == src]
                          for src in SOURCES},
            "rounds": _cell_rounds(report, variant)}
    by = {(r["peer"], r["workers"]): r for r in results}
    decode = by.get(("decode-parquet", 0))
    own = {(m, s): r for m, s, r, _ in _cells(report, "default")}
    out["decode"] = None if decode is None else {
        "tokens_per_s": decode["tokens_per_s"],
        "shares": [v / decode["tokens_per_s"] for (m, s), v in own.items() if s != "table"]}
    p0 = {(m, s): v for m, s, v, _ in _cells(report, "prefetch0")}
    out["prefetch_gain"] = {src: [own[k] / p0[k] for k in own if k in p0 and k[1] == src]
                            for src in ("table", "parquet")}
    peers_all = [r for r in results if r["peer"] not in PEERS or PEERS[r["peer"]].library
                 not in ("lodarrow", "loop", "pyarrow")]
    peers = headline(peers_all)     # a group of variants: its fastest, a worker count
    loops = loop_rates(report["results"])
    out["peers"] = []
    for r in peers:
        base = loop_base(loops, r["kind"], r.get("source"), r["workers"])
        mode = MODE_OF.get(r["kind"])
        mine = by.get((f"lodarrow-{mode.replace('_', '-')}-table", r["workers"])) if mode \
            else None
        stem = f"lodarrow-{mode.replace('_', '-')}" if mode else None
        from_file = by.get((f"{stem}-parquet", r["workers"])) if mode else None
        pickled = by.get((f"{stem}-table-pickled", r["workers"])) if mode and r["workers"] \
            else None
        out["peers"].append({"label": r["label"], "kind": r["kind"], "workers": r["workers"],
                             "over_loop": r["tokens_per_s"] / base if base else None,
                             "lodarrow_over": mine["tokens_per_s"] / r["tokens_per_s"]
                             if mine else None,
                             "parquet_over": from_file["tokens_per_s"] / r["tokens_per_s"]
                             if from_file else None,
                             "pickled_over": pickled["tokens_per_s"] / r["tokens_per_s"]
                             if pickled else None})
    out.update(claims_blocks(by, results))
    out["scratch"] = claims_scratch(report.get("scratch"))
    spreads = [(max(x) / min(x), r["label"], r["workers"]) for r in results
               for x in [[s["tokens_per_s"] for s in r.get("samples", [])
                          if s.get("tokens_per_s")]] if len(x) > 1]
    out["spread"] = {"median": statistics.median(v for v, _, _ in spreads) if spreads
                     else None, "max": max(spreads) if spreads else None}
    loads = [(s["load_before"], s["load_after"]) for r in report["results"]
             for s in r.get("samples", []) if "load_before" in s]
    out["load"] = [min(a for a, _ in loads), max(b for _, b in loads)] if loads else None

    def group(pred, key):
        return [r[key] for r in results if pred(r) and r.get(key) is not None]

    mine_p = lambda r: r["peer"].startswith("lodarrow-")
    loop_p = lambda r: r["peer"].startswith("loop-")
    peer_p = lambda r: r in peers_all
    for key in ("start_s", "resume_s"):
        out[key] = {"lodarrow": group(mine_p, key), "loop": group(loop_p, key),
                    "peers": group(peer_p, key)}
    cold = [r for r in results if mine_p(r) and r.get("cold_start_s") is not None]
    out["cold_start"] = {w: {"cold": [r["cold_start_s"] for r in cold if bool(r["workers"]) == w],
                             "warm": [r["start_s"] for r in cold if bool(r["workers"]) == w],
                             "slower_warm": sum(r["start_s"] > r["cold_start_s"] for r in cold
                                                if bool(r["workers"]) == w)}
                         for w in (False, True)}
    one = lambda pred: (lambda r: pred(r) and not r["workers"])
    out["rss"] = {"lodarrow": group(one(mine_p), "rss_main_mib"),
                  "loop": group(one(loop_p), "rss_main_mib"),
                  "peers": group(one(peer_p), "rss_main_mib")}
    out["padding"] = {(who, src): [r["padding_pct"] for r in results
                                   if r["peer"] == f"{who}-padded-{src}" and not r["workers"]]
                      for who in ("lodarrow", "loop") for src in SOURCES}
    return out


def scratch_sentence(sc):
    """The from-scratch comparison, as the blocks line ends (empty where it did not run)."""
    if not sc or not sc["rows"]:
        return ""
    lit = sc["litdata"]
    parts = []
    for row in sc["rows"]:
        over = row["over"]
        verdict = ("ahead in every round" if over and min(over) > 1 else
                   "behind in every round" if over and max(over) < 1 else
                   "either way round by round")
        parts.append(f"{SCRATCH_ROWS[row['peer']]} {row['seconds']:.2f} s "
                     f"({row['tokens'] / 1e6:.1f} M tokens), {verdict} "
                     f"({', '.join(f'{x:.2f}x' for x in over)})")
    return (f"  From the corpus's Parquet file with nothing made before (no conversion, no "
            f"cache) to the end of a first epoch, in one process, the medians of "
            f"{lit['rounds']} rounds run in turn after each round's cells: litdata "
            f"{lit['seconds']:.2f} s (its `optimize`, 2 processes, {lit['prepare_s']:.2f} s, "
            f"then the epoch: {lit['tokens'] / 1e6:.1f} M tokens); " + "; ".join(parts)
            + " (litdata's seconds over lodarrow's, each round).  `optimize` starts its "
              "processes and writes an index whatever the corpus's size, so the ratio is this "
              "corpus's, not a rate a token: per token, the decoded cache's row above compares "
              "the two.")


def summary_lines(report):
    """The sentences under the tables: each a count or range computed from the JSON."""
    c, s = claims(report), report["settings"]
    lines = []
    names = {"default": "In one process, on its defaults (`prefetch=2`)",
             "prefetch0": ("In one process with `prefetch=0` and `LODARROW_NUM_THREADS=1` "
                           "(one thread, as the loop)" if s.get("prefetch0_threads") else
                           "In one process with `prefetch=0` (no thread of its own besides "
                           "the kernels')"),
             "workers": f"With {s['workers']} `DataLoader` workers",
             "pickled": f"With {s['workers']} `DataLoader` workers and the loop's transport "
                        f"(batches pickled through the workers' queues, not lodarrow's "
                        f"shared-memory ring{slim_wire_text(report) if slim_wire(report) else ''})"}
    where = {"table": "the in-memory table", "parquet": "Parquet",
             "parquet-global": "Parquet with the global shuffle"}
    for variant, name in names.items():
        v = c[variant]
        if not v["cells"]:
            continue
        parts = "; ".join(f"from {where[src]} {_span(r)}" for src, r in v["by_source"].items()
                          if r)
        rounds = [x for x in v.get("rounds", []) if x]
        said = ""
        if rounds:
            said = (f"; round by round (each run against the loop's of the same round): ahead "
                    f"in every round in {rounds.count('ahead')}, behind in every round in "
                    f"{rounds.count('behind')}, either way in {rounds.count('noise')}")
            ways = _either_way(report, variant)
            if ways:  # a tie within the machine's noise, not a lead: named, with its rounds
                said += " (" + "; ".join(
                    f"{job} from {where[src]}: " + ", ".join(f"{x:.2f}x" for x in ratios)
                    for job, src, ratios in ways) + ")"
        lines.append(f"- {name} lodarrow is ahead of the NumPy/Arrow loop in {v['ahead']} of "
                     f"{v['cells']} cells of the four jobs that keep sequence boundaries by "
                     f"medians ({_span(v['ratios'])}; {parts}){said}.")
    if c["decode"] and c["decode"]["shares"]:
        lines.append(f"- Parquet decoding alone (no batches, one thread) delivers "
                     f"{mega(c['decode']['tokens_per_s'])} tokens/s; from Parquet, lodarrow's "
                     f"default delivers {_span(c['decode']['shares'])} of it.")
    gain = c["prefetch_gain"]
    if gain["table"] or gain["parquet"]:
        what = ("lodarrow's defaults over `prefetch=0` on one thread" if
                s.get("prefetch0_threads") else "`prefetch=2` over `prefetch=0`")
        lines.append(f"- {what}, drained as fast as it goes: "
                     f"{_span(gain['table'])} from the in-memory table, "
                     f"{_span(gain['parquet'])} from Parquet.")
    for w in sorted({p["workers"] for p in c["peers"]}):
        ps = [p for p in c["peers"] if p["workers"] == w]
        mine = [p["lodarrow_over"] for p in ps if p["lodarrow_over"] is not None]
        where_w = "in one process" if not w else f"with {w} workers"
        more = ""
        files = [p["parquet_over"] for p in ps if p.get("parquet_over") is not None]
        if files:
            more += (f"; lodarrow reading the Parquet file (as the peers read files) ahead of "
                     f"{sum(x > 1 for x in files)} of {len(files)} ({_span(files)})")
        wire = [p["pickled_over"] for p in ps if p.get("pickled_over") is not None]
        if wire:
            more += (f"; with the peers' transport (its batches pickled, from the in-memory "
                     f"table{'; without their per-token arrays' if slim_wire(report) else ''}) "
                     f"ahead of {sum(x > 1 for x in wire)} of {len(wire)} ({_span(wire)})")
        lines.append(f"- The peers {where_w} deliver {_span(p['over_loop'] for p in ps)} the "
                     f"loop's tokens/s; lodarrow (on its defaults; same job, in-memory table, "
                     f"same workers) is ahead of {sum(x > 1 for x in mine)} of the "
                     f"{len(mine)} peer rows of the jobs it shares ({_span(mine)} their tokens/s){more}.")
    if c["blocks"]:
        b = c["blocks"]
        where = "; ".join(
            f"{BLOCK_SOURCES[src]} ahead in "
            f"{sum(x['over_litdata'] > 1 for x in b if x['source'] == src)} of "
            f"{sum(x['source'] == src for x in b)} "
            f"({_span(x['over_litdata'] for x in b if x['source'] == src)})"
            for src in BLOCK_SOURCES if any(x["source"] == src for x in b))
        terms = []
        for x in c.get("blocks_equal") or []:
            where_x = f"{x['workers']} workers, " if x["workers"] else "one process, "
            terms.append(f"{BLOCK_SOURCES[x['source']]} ({where_x}{x['how']}) "
                         f"{x['over_litdata']:.2f}x")
        equal = ("  On litdata's terms (lodarrow with `prefetch=0` and one kernel thread in "
                 "one process; its workers' batches pickled, as litdata's are): "
                 + "; ".join(terms) + "." if terms else "")
        fill = c.get("decoded_fill") or []
        filled = (f"  The decoded cache is filled before the timed epochs, untimed, as "
                  f"litdata's chunks are made before its runs: the cold start (an empty cache "
                  f"directory) of those rows, {_span(fill, 2, ' s')}, keeps what its first "
                  f"batch reads, the warm-up epoch the rest." if fill else "")
        decode, lit0 = c.get("decode"), [x for x in report["results"]
                                          if x["peer"] == "litdata-tokens"
                                          and x["workers"] == 0 and "error" not in x]
        floor = (f"  Parquet's decode of the column alone (the decode row: one thread, no "
                 f"batches; lodarrow's Parquet rows decode on up to two, its read-ahead "
                 f"thread's and the consumer's) runs at {decode['tokens_per_s'] / 1e6:.1f} M "
                 f"tokens/s, litdata's whole TokensLoader at "
                 f"{lit0[0]['tokens_per_s'] / 1e6:.1f} M in one process: its chunks hold the "
                 f"ids decoded once, as the decoded cache does."
                 if decode and lit0 and any(x["source"] == "parquet" for x in b) else "")
        lines.append(f"- Concatenated blocks (another job): lodarrow's `mode=\"blocks\"`, which "
                     f"also gives each piece's positions and boundaries, against litdata's "
                     f"`TokensLoader` (reading the raw token chunks its `optimize` wrote), by "
                     f"medians: {where}.  lodarrow's rows with workers cross through its "
                     f"shared-memory ring, litdata's pickled (NumPy, as every peer's here); in "
                     f"one process lodarrow runs on its defaults (a prefetch and a read-ahead "
                     f"thread), litdata with its chunk thread.{floor}{equal}{filled}"
                     f"{scratch_sentence(c.get('scratch'))}")
    pad = c["padding"]
    if pad[("lodarrow", "table")]:
        lines.append(f"- Padding of the padded job: lodarrow "
                     f"{_span(pad[('lodarrow', 'table')], 1, '%')} from the in-memory table "
                     f"({s['window']:,}-row windows), "
                     f"{_span(pad[('lodarrow', 'parquet')], 1, '%')} from Parquet blocks of "
                     f"{s['row_groups']} row groups; the loop "
                     f"{_span(pad[('loop', 'table')], 1, '%')} and "
                     f"{_span(pad[('loop', 'parquet')], 1, '%')}.")
    st, rs, rss = c["start_s"], c["resume_s"], c["rss"]
    lines.append(f"- Start (making the loader to its first batch): lodarrow "
                 f"{_span(st['lodarrow'], 2, ' s')}, the loop {_span(st['loop'], 2, ' s')}, "
                 f"the peers {_span(st['peers'], 2, ' s')}; resume at "
                 f"{s['resume_at']:.0%} of an epoch: lodarrow {_span(rs['lodarrow'], 2, ' s')}, "
                 f"the loop {_span(rs['loop'], 2, ' s')}, the peers "
                 f"{_span(rs['peers'], 2, ' s')}.")
    cs = c.get("cold_start", {})
    if any(v["cold"] for v in cs.values()):
        parts = []
        for w, v in cs.items():
            if not v["cold"]:
                continue
            where = f"with {s['workers']} workers" if w else "in one process"
            why = ": the workers' start varies more than the lengths pass costs" if w else ""
            odd = (f" (the warm start the slower in {v['slower_warm']} of {len(v['cold'])} "
                   f"cells{why})" if v["slower_warm"] else "")
            parts.append(f"{where} {_span(v['cold'], 2, ' s')} cold, "
                         f"{_span(v['warm'], 2, ' s')} warm{odd}")
        lines.append(f"- Cold and warm starts from Parquet (per cell, the cold start made just "
                     f"before the warm one in the same process, so the warm one also finds "
                     f"the file in the OS page cache and the imports warm): lodarrow "
                     f"{'; '.join(parts)}; cold: its lengths cache empty (the lengths read "
                     f"from the file before the first batch); warm: the cache filled.  The loop "
                     f"keeps no cache (every start as it is); the peers read their own "
                     f"formats, made before the runs (their conversions' times are the run "
                     f"table's).")
    lines.append(f"- Peak resident set in one process: lodarrow "
                 f"{_span(rss['lodarrow'], 0, ' MiB')}, the loop {_span(rss['loop'], 0, ' MiB')}, "
                 f"the peers {_span(rss['peers'], 0, ' MiB')}.")
    sp = c["spread"]
    runs = (f"Each cell is the median of its {s['repeat']} runs, the cells run in turn "
            f"(round robin)")
    if sp["median"] is not None:
        runs += (f"; fastest over slowest run of a cell: {sp['median']:.2f}x in the median "
                 f"cell, {sp['max'][0]:.2f}x at most ({sp['max'][1]}, {sp['max'][2]} "
                 f"workers)")
    if c["load"]:
        runs += (f"; 1-minute load average {c['load'][0]:.1f}-{c['load'][1]:.1f} around the "
                 f"runs")
    lines.append(f"- {runs}: compare the cells of one invocation, not figures across runs.")
    return lines


def header_lines(report):
    """Command, commit, machine, dates and corpus of the run."""
    from lodarrow._bench._docs import run_span

    meta, s = report["corpus"], report["settings"]
    threads = s.get("LODARROW_NUM_THREADS")
    return [
        f"Command: `{report['command']}`", "",
        f"{run_span(report)} ({report['wall_s'] / 60:.0f} min).", "",
        f"Corpus: {meta['sequences']:,} sequences, {meta['tokens']:,} int32 token ids "
        f"(lognormal lengths, mean {meta['mean_length']:.0f}, median "
        f"{meta['median_length']:.0f}, max {meta['max_length']:,}), one Parquet file of "
        f"{meta['parquet_mib']:,} MiB in {meta.get('row_groups', '?')} row groups.  "
        f"Batches: {s['batch_size']} sequences (padded, packed); {s['rows_per_batch']} rows "
        f"of {s['row_length']:,} (packed_rows, concatenated blocks); at most "
        f"{s['max_tokens']:,} tokens in that fixed width (segments).  In-memory rows sorted "
        f"in {s['window']:,}-row windows; Parquet blocks of {s['row_groups']} row groups "
        f"({s['row_groups_total']} for the global shuffle).  Window: {s['warmup']} warm-up "
        f"epoch(s), then whole epochs until {s['seconds']:g} s (at most {s['max_epochs']}); "
        f"each cell run {s['repeat']} time(s), round robin, its median published.  "
        f"`LODARROW_NUM_THREADS` {threads if threads else 'not set (load-aware)'}"
        f"{_one_thread_column(s)}; every "
        f"process torch.set_num_threads(1); DataLoader workers: {s['workers']}, persistent, "
        f"torch 1 thread each.  Resume at {s['resume_at']:.0%} of the epoch after the window.",
        ""]


def _one_thread_column(settings):
    """Said of a run on lodarrow's default threads whose ``prefetch=0`` column ran on one."""
    if not settings.get("prefetch0_threads"):
        return ""
    return (f" (lodarrow's defaults), {settings['prefetch0_threads']} in the `prefetch=0` "
            f"column (the loop's threads)")


def summary_table(report, cell=mega):
    """lodarrow's three ways of running against the loop, per job and source."""
    results = report["results"]
    loops = loop_rates(results)
    w = report["settings"]["workers"]
    by = {(r["peer"], r["workers"]): r for r in results if "error" not in r}
    # runs from before the equal-transport rows render as they did
    pickled = any(p.endswith("-pickled") for p, _ in by)
    one = report["settings"].get("prefetch0_threads")
    lines = ["| job | source | loop tokens/s | lodarrow "
             + ("defaults (prefetch=2, load-aware threads)" if one else "prefetch=2")
             + " | ÷ loop | prefetch=0" + (f", {one} thread " if one else " ")
             + f"| ÷ loop | loop, {w} DataLoader workers | lodarrow, {w} DataLoader workers "
             "| ÷ loop with workers "
             + (f"| lodarrow, {w} workers, pickled as the loop's"
                + (" (its slimmer batches: per-token arrays made in the main process; the "
                   "loop's carry them)" if slim_wire(report) else "")
                + " | ÷ loop with workers " if pickled else "")
             + "| Parquet decode alone | lodarrow prefetch=2 ÷ decode |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
             + ("| ---: | ---: " if pickled else "") + "| ---: |"]
    decode = by.get(("decode-parquet", 0))
    for mode in MODES:
        for source in SOURCES:
            base = loops.get((KIND_OF[mode], source, False))
            wbase = loops.get((KIND_OF[mode], source, True))
            stem = f"lodarrow-{mode.replace('_', '-')}-{source}"
            workers = [r for (p, wk), r in by.items() if p == stem and wk]

            def rate(r, b):
                if r is None:
                    return ["—", "—"]
                return [cell(r["tokens_per_s"]), f"{r['tokens_per_s'] / b:.2f}" if b else "—"]
            cells = (rate(by.get((stem, 0)), base) + rate(by.get((stem + "-prefetch0", 0)), base)
                     + [cell(wbase) if wbase else "—"]
                     + rate(workers[0] if workers else None, wbase))
            if pickled:
                mine = [r for (p, wk), r in by.items() if p == stem + "-pickled" and wk]
                cells += rate(mine[0] if mine else None, wbase)
            if decode is None or source == "table":
                cells += ["—", "—"]
            else:
                own = by.get((stem, 0))
                cells += [cell(decode["tokens_per_s"]),
                          f"{own['tokens_per_s'] / decode['tokens_per_s']:.2f}" if own else "—"]
            if base is None and all(c == "—" for c in cells[:-2]):  # decoding alone: no row
                continue
            lines.append(f"| {JOB_NAMES[mode]} | {SOURCE_NAMES[source]} | "
                         f"{cell(base) if base else '—'} | " + " | ".join(cells) + " |")
    return lines


def peers_table(report):
    """The peers (and lodarrow's blocks), one line a loader: tokens/s by worker count."""
    results = report["results"]
    loops = loop_rates(results)
    modes = sorted({r["workers"] for r in results})
    rows = {}
    for r in headline(results):
        peer = PEERS.get(r["peer"])
        if peer is not None and peer.library in ("loop", "pyarrow"):
            continue
        if peer is not None and peer.library == "lodarrow" and r["kind"] != "blocks":
            continue
        rows.setdefault(r["label"], {})[r["workers"]] = r
    if not rows:
        return []
    heads = " | ".join("one process" if not w else f"{w} workers" for w in modes)
    lines = [f"| loader | job | {heads} | ÷ loop (same job and workers) | padding % |",
             "| --- | --- | " + "---: | " * len(modes) + "--- | ---: |"]
    for label, by_w in rows.items():
        first = next(iter(by_w.values()))
        cells = []
        for w in modes:
            r = by_w.get(w)
            cells.append("—" if r is None else "failed" if "error" in r
                         else mega(r["tokens_per_s"]) + (f" ({r['headline_variant']})"
                                                         if r.get("headline_variant") else ""))
        ratios = ", ".join(ratio(by_w[w], loops) for w in modes if w in by_w)
        pad = fmt(first.get("padding_pct")) if "error" not in first else "—"
        lines.append(f"| {label} | {JOB_NAMES.get(MODE_OF.get(first['kind'], ''), first['kind'])}"
                     f" | " + " | ".join(cells) + f" | {ratios} | {pad} |")
    return lines


def docs_markdown(report):
    """The ``loaders`` block of docs/training.md: the run, the tables, the sentences."""
    lines = header_lines(report)
    lines += summary_table(report) + [""]
    peers = peers_table(report)
    if peers:
        lines += peers + [""]
    notes = notes_of(report["results"])
    if notes:
        lines += ["Notes:", ""] + [f"- {label}: {text}." for label, text in notes] + [""]
    lines += summary_lines(report)
    if report["missing"]:
        lines += ["", "Not run: " + "; ".join(f"{name} ({why})" for name, why in
                                              report["missing"].items()) + "."]
    return "\n".join(lines) + "\n"


def markdown(report):
    """The whole output: the summary, a table per job, what each row runs, the versions."""
    lines = header_lines(report) + summary_table(report, lambda v: fmt(v, thousands=True))
    results = report["results"]
    loops = loop_rates(results)
    for kind, title in JOBS:
        rows = [r for r in results if r.get("kind") == kind]
        if not rows:
            continue
        cold = any("cold_start_s" in r for r in results)  # older runs render as they did
        lines += ["", f"### {title}", "",
                  "| loader | workers | tokens/s | ÷ loop | padding % | packing % | epochs (s) "
                  "| start s " + ("(warm) | cold start s " if cold else "")
                  + "| resume s (at % of epoch) | resume by | RSS MiB (main / worker) "
                  "| load | runs | shuffle scope | threads |",
                  "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | "
                  + ("---: | " if cold else "") + "---: | --- | ---: "
                  "| ---: | ---: | --- | --- |"]
        for r in rows:
            if "error" in r:
                lines.append(f"| {r['label']} | {workers_text(r)} | failed: "
                             f"{r['error'][:200]} | | | | | | | | | | | | |"
                             + (" |" if cold else ""))
                continue
            # the epochs and seconds of the run whose tokens/s is published (the median)
            mid = median_run([s for s in r.get("samples", []) if s.get("tokens_per_s")]
                             or [r])
            epochs = f"{mid.get('timed_epochs', r['timed_epochs'])} " \
                     f"({mid.get('timed_s', r['timed_s']):.1f})"
            rss = f"{r['rss_main_mib']:,.0f}"
            if r["workers"]:
                rss += f" / {r['rss_worker_mib']:,.0f}" if r.get("rss_worker_mib") else " / —"
            lines.append(
                f"| {r['label']} | {workers_text(r)} | {fmt(r['tokens_per_s'], thousands=True)} "
                f"| {ratio(r, loops)} | {fmt(r['padding_pct'])} | {fmt(r['packing_pct'])} "
                f"| {epochs} | {fmt(r['start_s'], 2)} "
                + (f"| {fmt(r.get('cold_start_s'), 2)} " if cold else "")
                + f"| {resumed(r)} | {r['resume'] or 'not supported'} | {rss} "
                f"| {r['load_before']:.1f}-{r['load_after']:.1f} "
                f"| {r.get('runs_ok', 1)} of {r.get('runs', 1)} | {r['shuffle']} "
                f"| {r['threads']} |")
    lines += ["", "What each row runs:", ""]
    seen = set()
    for r in results:
        if r["peer"] in seen or "error" in r:
            continue
        seen.add(r["peer"])
        note = f"  Note: {r['notes']}." if r.get("notes") else ""
        lines.append(f"- {r['label']}: {r['fast_path']}{note}")
    if report["missing"]:
        lines += ["", "Not run:", ""]
        lines += [f"- {name}: {why}" for name, why in report["missing"].items()]
    prep = {k: v for k, v in report["prepare"].items() if v}
    if prep:
        lines += ["", "Conversions (untimed above): " + ", ".join(
            f"{k} {v:.0f} s" for k, v in prep.items()) + "."]
    vers = {}
    for r in results:
        for k, v in (r.get("versions") or {}).items():
            vers.setdefault(k, set()).add(str(v))
    if vers:
        lines += ["", "Versions (of every interpreter that ran a row): " + ", ".join(
            f"{k} {'/'.join(sorted(v))}" for k, v in sorted(vers.items())) + "."]
    lines += [""] + summary_lines(report)
    return "\n".join(lines) + "\n"


def select_peers(spec):
    if spec == "all":
        return list(PEERS)
    names = []
    for part in spec.split(","):
        hits = [n for n in PEERS if fnmatch.fnmatchcase(n, part)]
        if not hits:
            raise SystemExit(f"--peers: unknown peer {part!r}; peers: {sorted(PEERS)}")
        names += [n for n in hits if n not in names]
    return names


#: Fields of a run that a cell publishes as the median of its runs.
MEDIANS = ("tokens_per_s", "batches_per_s", "seqs_per_s", "start_open_s", "start_s",
           "cold_start_s",
           "warmup_s", "timed_s", "resume_open_s", "resume_s", "rss_main_mib",
           "rss_worker_mib")
#: Fields of each run kept in the cell's ``samples``.
SAMPLE_KEYS = ("round", "position", "tokens_per_s", "timed_epochs", "timed_s", "start_s",
               "cold_start_s",
               "resume_s", "rss_main_mib", "rss_worker_mib", "load_before", "load_after",
               "error")


def aggregate(samples):
    """One cell from its runs: the fields of its median run (by tokens/s: its epochs, its
    threads), each of :data:`MEDIANS` the median over the good runs, the load the lowest
    before and the highest after, and every run in ``samples`` (a cell whose runs all failed
    keeps the first error)."""
    ok = [s for s in samples if "error" not in s]
    out = dict(median_run(ok) if ok else samples[0])
    for key in MEDIANS:
        values = [s[key] for s in ok if s.get(key) is not None]
        if values:
            out[key] = statistics.median(values)
    loads = [s for s in samples if "load_before" in s]
    if loads:
        out["load_before"] = min(s["load_before"] for s in loads)
        out["load_after"] = max(s["load_after"] for s in loads)
    out["runs"], out["runs_ok"] = len(samples), len(ok)
    out["samples"] = [{k: s[k] for k in SAMPLE_KEYS if k in s} for s in samples]
    return out


def median_run(runs):
    """The run whose tokens/s is the cell's median (the lower middle one of an even count)."""
    ranked = sorted(runs, key=lambda s: s.get("tokens_per_s") or 0)
    return ranked[(len(ranked) - 1) // 2]


def settings(args, meta):
    """Every setting of the run, the derived ones as used (window, Grain's bins)."""
    ctx = Context(args, meta)
    out = {k: v for k, v in vars(args).items()
           if k not in ("argv", "job", "peer", "json", "markdown", "docs", "readme",
                        "from_json")}
    out.update(window=ctx.window, grain_bins=ctx.grain_bins,
               row_groups_total=ctx.row_groups_total, max_tokens=ctx.max_tokens,
               LODARROW_NUM_THREADS=os.environ.get("LODARROW_NUM_THREADS"),
               OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS"))
    if not out["LODARROW_NUM_THREADS"]:  # the defaults measured, one column on one thread
        out["prefetch0_threads"] = 1
    return out


def driver(args):
    pythons = dict(p.split("=", 1) for p in args.peer_python)
    libraries = {p.library for p in PEERS.values()}
    unknown = set(pythons) - set(PEERS) - libraries
    if unknown:
        raise SystemExit(f"--peer-python: unknown peer(s) {sorted(unknown)}; peers: "
                         f"{sorted(PEERS)}, or libraries: {sorted(libraries - {''})}")
    names = select_peers(args.peers)
    modes = [int(m) for m in args.modes.split(",")] if args.modes else [0, args.workers]
    meta = ensure_corpus(args)
    for stale in Path(args.workdir).glob("*-scratch-*"):  # a timed-out run's (scratch_dir)
        import shutil

        shutil.rmtree(stale, ignore_errors=True)
    print(f"corpus: {meta['sequences']:,} sequences, {meta['tokens']:,} tokens, "
          f"{meta['parquet_mib']} MiB", file=sys.stderr)
    from lodarrow._bench._docs import command_line, machine, revision, utc_now

    started = time.time()
    report = {"command": command_line("benchmarks/loaders.py",
                                      sys.argv[1:] if args.argv is None else args.argv,
                                      env=("LODARROW_NUM_THREADS", "OMP_NUM_THREADS")),
              "revision": revision(), "machine": machine(("numpy", "pyarrow", "torch",
                                                          "lodarrow")),
              "settings": settings(args, meta), "corpus": meta, "results": [],
              "missing": {}, "prepare": {}, "started": utc_now()}
    cells = []      # (peer name, interpreter, workers), in the order of the table
    for name in names:
        peer = PEERS[name]
        python = pythons.get(name) or pythons.get(peer.library) or sys.executable
        why = available(python, name, args.in_process)
        if why is not None:
            report["missing"][peer.label] = why
            print(f"{name}: not run ({why})", file=sys.stderr)
            continue
        prep = child(args, python, "prepare", name, timeout=args.timeout * 4)
        if "error" in prep:
            report["missing"][peer.label] = "conversion failed: " + prep["error"]
            print(f"{name}: conversion failed: {prep['error']}", file=sys.stderr)
            continue
        report["prepare"][name] = prep["prepare_s"]
        cells += [(name, python, w) for w in modes if peer.runs_with(w)]
    samples = {cell: [] for cell in cells}
    if not args.prepare_only:
        position = 0
        for rnd in range(args.repeat):  # round robin: A B C A B C, never A A B B
            for cell in cells:
                name, python, workers = cell
                r = child(args, python, "run", name, workers, timeout=args.timeout)
                r.update(round=rnd, position=position)
                position += 1
                samples[cell].append(r)
                print(f"[{rnd + 1}/{args.repeat}] {name} workers={workers}: " + (
                    r["error"] if "error" in r else
                    f"{r['tokens_per_s']:,.0f} tokens/s over {r['timed_epochs']} epochs, "
                    f"start {r['start_s']:.2f} s, resume {fmt(r.get('resume_s'), 2)} s, "
                    f"load {r['load_before']}-{r['load_after']}"), file=sys.stderr)
            # the rows measured from scratch, after the round's cells, in turn (the order
            # reversed every other round)
            scratch = [(n, py) for n, py, w in cells if w == 0 and PEERS[n].scratch]
            for name, python in scratch[::-1] if rnd % 2 else scratch:
                r = child(args, python, "scratch", name, timeout=args.timeout * 4)
                r.update(peer=name, round=rnd, load_after=round(os.getloadavg()[0], 2))
                report.setdefault("scratch", []).append(r)
                print(f"[{rnd + 1}/{args.repeat}] {name} from scratch: " + (
                    r["error"] if "error" in r else f"{r['seconds']:.2f} s"), file=sys.stderr)
    for (name, python, workers), runs in samples.items():
        if not runs:
            continue
        peer = PEERS[name]
        r = aggregate(runs)
        r.setdefault("label", peer.label)
        r.setdefault("peer", name)
        r.setdefault("kind", peer.kind)
        r.setdefault("source", peer.source)
        r.setdefault("workers", workers)
        r["python"] = python
        report["results"].append(r)
    report["load_at_end"] = os.getloadavg()[0]
    end = revision()
    if end != report["revision"]:  # the checkout moved under the run: its cells mixed code
        report["revision_at_end"] = end
        print(f"loaders.py: the checkout changed during the run ({report['revision']} at the "
              f"start, {end} at the end): run it again from a checkout nothing edits (a git "
              f"worktree)", file=sys.stderr)
    report["finished"] = utc_now()
    report["wall_s"] = time.time() - started
    return report


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sequences", type=int, default=100_000)
    p.add_argument("--mean-length", type=float, default=300.0,
                   help="mean of the lognormal lengths before clipping (default 300)")
    p.add_argument("--sigma", type=float, default=1.0, help="lognormal sigma (default 1.0)")
    p.add_argument("--max-length", type=int, default=4096,
                   help="lengths are clipped to [1, max-length] (default 4096: one row)")
    p.add_argument("--vocab", type=int, default=50_257)
    p.add_argument("--row-group-size", type=int, default=10_000)
    p.add_argument("--batch-size", type=int, default=32,
                   help="sequences per batch of the padded and packed jobs")
    p.add_argument("--row-length", type=int, default=4096,
                   help="packed row length, and the block of the concatenated job")
    p.add_argument("--rows-per-batch", type=int, default=8,
                   help="rows per batch (packed_rows, blocks); x row-length: the token budget "
                        "of segments")
    p.add_argument("--window", type=int, default=None,
                   help="rows sorted together in the in-memory rows (lodarrow window=, the "
                        "loop's windows; default 50 x batch-size, LengthGroupedSampler's "
                        "megabatch)")
    p.add_argument("--row-groups", type=int, default=4,
                   help="row groups a block of the Parquet rows (lodarrow row_groups=, the "
                        "loop's blocks; default 4, lodarrow's default)")
    p.add_argument("--hf-shards", type=int, default=64,
                   help="the HF iterable row's to_iterable_dataset(num_shards=) (default 64, "
                        "datasets' documented example)")
    p.add_argument("--hf-buffer", type=int, default=10_000,
                   help="the HF iterable row's shuffle(buffer_size=) (default 10,000, "
                        "datasets' documented example)")
    p.add_argument("--grain-buffer", type=int, default=16,
                   help="Grain ReadOptions(prefetch_buffer_size=) (default 16: Grain checks "
                        "every slot of the buffer for each element it yields)")
    p.add_argument("--grain-bins", type=int, default=None,
                   help="Grain num_packing_bins (default 8 x rows-per-batch)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--seconds", type=float, default=10.0,
                   help="whole epochs are timed until at least this many seconds (default 10)")
    p.add_argument("--warmup", type=int, default=1,
                   help="untimed whole epochs first (default 1; the start-up is in them)")
    p.add_argument("--max-epochs", type=int, default=1000,
                   help="at most this many timed epochs (default 1000)")
    p.add_argument("--resume-at", type=float, default=0.5,
                   help="the resume point, as a fraction of the epoch (default 0.5)")
    p.add_argument("--resume-budget", type=float, default=60.0,
                   help="seconds a loader that saves its state may iterate (untimed) to reach "
                        "the resume point; a slower one saves earlier (default 60)")
    p.add_argument("--workers", type=int, default=2, help="DataLoader workers (default 2)")
    p.add_argument("--modes", default=None,
                   help="comma-separated worker counts to run (default: 0 and --workers)")
    p.add_argument("--peers", default="all",
                   help="comma-separated names or patterns (e.g. 'lodarrow-padded-*,loop-*')")
    p.add_argument("--peer-python", action="append", default=[], metavar="PEER=PYTHON",
                   help="run PEER (a name, or a library: hf, grain, litdata, streaming) with "
                        "another interpreter (repeatable)")
    p.add_argument("--workdir", default=os.path.join(os.environ.get("TMPDIR", "/tmp"),
                                                     "lodarrow-bench-loaders"),
                   help="the corpus and the peers' conversions (kept between runs)")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per run")
    p.add_argument("--prepare-only", action="store_true",
                   help="write the corpus and the peers' conversions, time nothing")
    p.add_argument("--in-process", action="store_true",
                   help="run every job in this process (a quick check of the script; the "
                        "figures are not comparable)")
    p.add_argument("--repeat", type=int, default=3,
                   help="runs of every cell, round robin; the median is published (default 3)")
    p.add_argument("--markdown", help="write the whole output here")
    p.add_argument("--json", help="write everything measured here")
    p.add_argument("--docs", help="rewrite the loaders block of this Markdown file "
                                  "(docs/training.md)")
    p.add_argument("--readme", help="rewrite the loaders-run block of this Markdown file "
                                    "(benchmarks/README.md)")
    p.add_argument("--from-json", help="measure nothing: the Markdown from this JSON")
    p.add_argument("--job", choices=["run", "prepare", "scratch"], help=argparse.SUPPRESS)
    p.add_argument("--peer", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.argv = list(argv)
    if args.repeat < 1:
        p.error("--repeat must be >= 1")
    if not 0 < args.resume_at < 1:
        p.error(f"--resume-at must be in (0, 1), got {args.resume_at}")
    return args


DOCS_KEY, README_KEY = "loaders", "loaders-run"
FROM_JSON = "python benchmarks/loaders.py --from-json benchmarks/results/loaders.json"


def write_outputs(report, args):
    """The Markdown of ``report`` into ``--markdown``, ``--docs`` and ``--readme``."""
    from lodarrow._bench._docs import publish

    text = markdown(report)
    publish(args, text, [("docs", DOCS_KEY, FROM_JSON + " --docs docs/training.md",
                          lambda: docs_markdown(report)),
                         ("readme", README_KEY, FROM_JSON + " --readme benchmarks/README.md",
                          text)])


def main(argv=None):
    args = parse(sys.argv[1:] if argv is None else argv)
    if args.job:
        child_main(args)
        return None
    from lodarrow._bench._docs import report_of, write_json

    report = report_of(args, driver, write=lambda path, r: write_json(path, r, default=str))
    write_outputs(report, args)
    return report


if __name__ == "__main__":
    main()
