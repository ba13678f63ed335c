#!/usr/bin/env python
"""lodarrow's batch loader against the loaders users pick, on one Parquet corpus, in one run.

    python benchmarks/loaders.py --sequences 1000000 --workers 2 \\
        --markdown loaders.md --json loaders.json \\
        --peer-python streaming=/path/to/other/venv/bin/python \\
        --peer-python litdata=/path/to/other/venv/bin/python

The corpus (``--sequences`` token-id sequences, lognormal lengths, one ``list<int32>`` column
in a Parquet file) is written once, untimed, under ``--workdir`` and reused while its
parameters do not change.  Each peer's own conversion (MosaicML ``streaming``'s MDS shards,
litdata's ``optimize``, Hugging Face ``datasets``' Arrow cache) is made from it once,
untimed.  Then every loader runs in a fresh process of its own (``--peer-python`` picks
another interpreter for a peer whose requirements do not install beside the others), once in
the process and once through ``torch.utils.data.DataLoader(num_workers=--workers)`` (or the
peer's own worker pool), and reports:

- **start s**: from making the loader (the corpus and conversions exist) to the first batch:
  lengths, plans, samplers, index files, worker start-up;
- **tokens/s** delivered (real tokens, padding not counted) over ``--seconds`` seconds after
  ``--warmup`` batches, or until the resume point, whichever comes first;
- **padding %**: slots of the delivered arrays that hold no token;
- **packing %**: for loaders that pack into fixed rows, the share of row slots holding tokens;
- **resume s**: a new loader, made as a restarted job makes it, with the state saved after
  ``--resume-at`` of the epoch (each peer's own mechanism), to its first batch;
- **RSS MiB**: the peak resident set of the process, and of each worker (shared pages of a
  memory-mapped file count in every process that touched them);
- the 1-minute load average before and after each run: the machine may be shared, so the
  figures are noisy; compare the rows of one run only.

A peer whose library is not installed (for that interpreter) is listed with the import error.
The Markdown table (one row per loader and mode) goes to ``--markdown``, everything measured
to ``--json``.  See benchmarks/README.md ("Loaders").
"""

import argparse
import gc
import importlib
import inspect
import json
import math
import os
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

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
    """What every peer is given: the corpus and the shape of the batches."""

    def __init__(self, args, meta):
        self.workdir = Path(args.workdir)
        self.corpus = self.workdir / "corpus.parquet"
        self.sequences = meta["sequences"]
        self.tokens = meta["tokens"]
        self.batch_size = args.batch_size
        self.row_length = args.row_length
        self.rows_per_batch = args.rows_per_batch
        self.seed = args.seed
        self.resume_at = args.resume_at
        self.prefetch = args.prefetch
        self.resume_budget = args.resume_budget

    def conversion(self, name):
        return self.workdir / name

    def steps_padded(self):
        """Batches of ``batch_size`` sequences in an epoch."""
        return math.ceil(self.sequences / self.batch_size)

    def steps_rows(self):
        """Batches of ``rows_per_batch`` full rows in an epoch (a lower bound)."""
        return math.ceil(self.tokens / (self.row_length * self.rows_per_batch))


def parquet_row_groups(path):
    """Row group by row group: (offsets, values) as NumPy arrays."""
    f = pq.ParquetFile(path)
    for k in range(f.num_row_groups):
        col = f.read_row_group(k, columns=[COLUMN]).column(0).combine_chunks()
        yield (col.offsets.to_numpy(zero_copy_only=False),
               col.values.to_numpy(zero_copy_only=False))


# ----------------------------------------------------------------------------------------
# batch arrays shared by the PyTorch peers
# ----------------------------------------------------------------------------------------

def pad_collate(samples):
    """``torch.nn.utils.rnn.pad_sequence`` of a list of 1-D arrays, with the mask."""
    import torch
    from torch.nn.utils.rnn import pad_sequence

    seqs = [torch.as_tensor(s) for s in samples]
    lengths = torch.tensor([len(s) for s in seqs])
    values = pad_sequence(seqs, batch_first=True, padding_value=0)
    mask = torch.arange(values.shape[1])[None, :] < lengths[:, None]
    return {COLUMN: values, "attention_mask": mask, "lengths": lengths}


def padded_counts(batch):
    """(tokens, slots, sequences) of a padded batch with ``lengths`` or ``attention_mask``."""
    values = batch[COLUMN] if COLUMN in batch else batch["values"]
    if "lengths" in batch:
        tokens = int(batch["lengths"].sum())
    else:
        tokens = int(batch["attention_mask"].sum())
    return tokens, int(values.numel()), int(values.shape[0])


class SkipBatches:
    """A batch sampler without its first ``skip`` batches: how ``accelerate``'s
    ``skip_first_batches`` (the Hugging Face Trainer's resume) fast-forwards a map-style
    loader without reading the skipped samples."""

    def __init__(self, batch_sampler, skip):
        self.batch_sampler, self.skip = batch_sampler, skip

    def __iter__(self):
        for k, batch in enumerate(self.batch_sampler):
            if k >= self.skip:
                yield batch

    def __len__(self):
        return max(len(self.batch_sampler) - self.skip, 0)


class ArrowRows:
    """A random-access dataset over the corpus' Arrow table (``pq.read_table``): item ``i``
    is sequence ``i``'s token ids, a zero-copy NumPy slice.  The table is read on first use
    in each process (a worker that is spawned, not forked, reads its own)."""

    def __init__(self, path, as_dict=False):
        self.path, self.as_dict = str(path), as_dict
        self._chunks = None
        self._len = pq.ParquetFile(self.path).metadata.num_rows

    def _load(self):
        # Grain reads items from 16 threads: one reads the table (dict.setdefault is atomic;
        # the lock is not pickled: Grain pickles the source for its workers)
        with self.__dict__.setdefault("_lock", threading.Lock()):
            if self._chunks is not None:
                return
            col = pq.read_table(self.path, columns=[COLUMN]).column(0)
            chunks = [(c.offsets.to_numpy(), c.values.to_numpy()) for c in col.chunks]
            self._starts = np.cumsum([0] + [len(o) - 1 for o, _ in chunks])
            self._chunks = chunks

    def __getstate__(self):
        return {"path": self.path, "as_dict": self.as_dict, "_len": self._len,
                "_chunks": None}

    def __len__(self):
        return self._len

    def __getitem__(self, i):
        if self._chunks is None:
            self._load()
        i = int(i)
        c = int(np.searchsorted(self._starts, i, side="right")) - 1
        offsets, values = self._chunks[c]
        j = i - int(self._starts[c])
        seq = values[offsets[j]:offsets[j + 1]]
        return {COLUMN: seq} if self.as_dict else seq


# ----------------------------------------------------------------------------------------
# the peers
# ----------------------------------------------------------------------------------------

class Peer:
    """One loader configuration.

    ``open(ctx, workers, state)`` returns an object with ``batches()`` (an iterator) and
    ``close()``; ``state`` is None (from the start of the epoch) or what ``save`` gave.
    ``resume`` names the peer's own mechanism; ``save(run, steps)`` is called after ``steps``
    batches were received (None: the peer cannot save a state in that mode).
    """

    name = label = kind = resume = ""
    requires = ()
    worker_note = "DataLoader(num_workers)"

    def prepare(self, ctx):
        """The peer's own conversion of the corpus (untimed); seconds it took, or 0."""
        return 0.0

    def steps_per_epoch(self, ctx, run):
        return ctx.steps_padded()

    def warm_imports(self):
        """Import what ``open`` imports, before the clock starts."""

    def saves_state(self, workers):
        """True: the state is saved by the loader after the batches received (the driver
        iterates to the resume point first); False: it is a step count kept by the user."""
        return True

    def counts(self, batch):
        return padded_counts(batch)


class _Run:
    def __init__(self, iterator, close=None, **extra):
        self._iterator, self._close = iterator, close
        self.__dict__.update(extra)

    def batches(self):
        return self._iterator

    def close(self):
        if self._close is not None:
            self._close()
        self._iterator = None


def _torch_loader(dataset, workers, **kwargs):
    import torch

    return torch.utils.data.DataLoader(dataset, num_workers=workers,
                                       persistent_workers=False, **kwargs)


def _shutdown(loader):
    it = getattr(loader, "_iterator", None)
    if it is not None and hasattr(it, "_shutdown_workers"):
        it._shutdown_workers()


class Lodarrow(Peer):
    requires = ("lodarrow", "torch")

    def __init__(self, mode):
        self.mode = mode
        self.name = f"lodarrow-{mode.replace('_', '-')}"
        self.kind = "rows" if mode == "packed_rows" else mode
        self.label = {"padded": "lodarrow padded, bucketed (batch_size)",
                      "packed": "lodarrow packed (cu_seqlens, batch_size)",
                      "packed_rows": "lodarrow packed_rows (rows of row_length)"}[mode]
        self.worker_note = "DataLoader(loader.torch(), batch_size=None, num_workers)"

    def kwargs(self, ctx):
        import lodarrow as la

        params = inspect.signature(la.batch_loader).parameters
        kw = dict(to="torch", seed=ctx.seed, progress=False)
        if self.mode == "padded":
            kw.update(batch_size=ctx.batch_size, mode="padded")
        elif self.mode == "packed":
            kw.update(batch_size=ctx.batch_size, cost="packed", mode="packed", bucket=False)
        else:
            kw.update(max_tokens=ctx.row_length * ctx.rows_per_batch, cost="packed",
                      mode="packed_rows", row_length=ctx.row_length)
        # what later versions add, used where this build has it
        if "prefetch" in params and ctx.prefetch is not None:
            kw["prefetch"] = ctx.prefetch
        return kw

    def _make(self, ctx):
        import lodarrow as la

        return la.batch_loader(str(ctx.corpus), COLUMN, **self.kwargs(ctx))

    def open(self, ctx, workers, state=None):
        loader = self._make(ctx)
        if workers:
            if state is not None:
                loader.set_epoch(0, start_step=state["step"])
            data = _torch_loader(loader.torch(), workers, batch_size=None)
            return _Run(iter(data), lambda: _shutdown(data), loader=loader)
        if state is not None:
            if "state_dict" in state:
                loader.load_state_dict(state["state_dict"])
            else:   # no resume API in this build: skip by iterating
                it = iter(loader)
                for _ in range(state["step"]):
                    next(it)
                return _Run(it, loader=loader)
        return _Run(iter(loader), loader=loader)

    def resume_api(self):
        import lodarrow as la

        cls = type(la.batch_loader(pa.array([[1]]), batch_size=1, progress=False))
        has_state = hasattr(cls, "state_dict") and hasattr(cls, "load_state_dict")
        has_start = "start_step" in inspect.signature(cls.set_epoch).parameters
        return has_state, has_start

    def describe_resume(self, workers):
        has_state, has_start = self.resume_api()
        if workers:
            return "set_epoch(0, start_step=s)" if has_start else None
        return "state_dict / load_state_dict" if has_state else "skip by iterating (no API)"

    def saves_state(self, workers):
        return not workers and self.resume_api()[0]

    def save(self, run, steps, workers):
        has_state, has_start = self.resume_api()
        if workers:
            return {"step": steps} if has_start else None
        if has_state:
            return {"state_dict": json.loads(json.dumps(run.loader.state_dict())),
                    "step": steps}
        return {"step": steps}

    def steps_per_epoch(self, ctx, run):
        return len(run.loader)

    def counts(self, batch):
        v = batch["values"]
        if self.mode == "padded":
            return int(batch["lengths"].sum()), int(v.numel()), int(v.shape[0])
        if self.mode == "packed":
            return int(v.shape[0]), int(v.shape[0]), int(len(batch["lengths"]))
        return int(batch["attention_mask"].sum()), int(v.numel()), int(len(batch["lengths"]))


class PlainTorch(Peer):
    name = "torch-arrow"
    label = "torch Dataset over Arrow + pad_sequence (random batches)"
    kind = "padded"
    requires = ("torch",)
    resume = "sampler skip (skip_first_batches)"

    def open(self, ctx, workers, state=None):
        import torch

        dataset = ArrowRows(ctx.corpus)
        dataset._load()       # in __init__, as a user writes it: workers inherit it by fork
        gen = torch.Generator().manual_seed(ctx.seed)
        sampler = torch.utils.data.BatchSampler(
            torch.utils.data.RandomSampler(dataset, generator=gen), ctx.batch_size, False)
        if state is not None:
            sampler = SkipBatches(sampler, state["step"])
        data = _torch_loader(dataset, workers, batch_sampler=sampler, collate_fn=pad_collate)
        return _Run(iter(data), lambda: _shutdown(data))

    def describe_resume(self, workers):
        return self.resume

    def saves_state(self, workers):
        return False

    def save(self, run, steps, workers):
        return {"step": steps}


def _hf_prepare(ctx):
    import datasets

    out = ctx.conversion("hf-dataset")
    if (out / "dataset_info.json").exists():
        return 0.0
    t = time.perf_counter()
    ds = datasets.Dataset.from_parquet(str(ctx.corpus), cache_dir=str(ctx.conversion("hf-cache")))
    ds.save_to_disk(str(out))
    return time.perf_counter() - t


def _hf_tokenizer():
    """A tokenizer made here (nothing downloaded): ``tokenizer.pad`` only needs the pad id."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(WordLevel({"[PAD]": 0, "[UNK]": 1}, unk_token="[UNK]"))
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]")


class HFGroupByLength(Peer):
    name = "hf-group-by-length"
    label = "HF datasets + LengthGroupedSampler + DataCollatorWithPadding"
    kind = "padded"
    requires = ("datasets", "transformers", "torch")
    resume = "sampler skip (skip_first_batches)"

    def prepare(self, ctx):
        return _hf_prepare(ctx)

    def warm_imports(self):
        import transformers.trainer_pt_utils  # noqa: F401

    def open(self, ctx, workers, state=None):
        import datasets
        import torch
        import transformers
        from transformers.trainer_pt_utils import LengthGroupedSampler

        transformers.logging.set_verbosity_error()
        ds = datasets.load_from_disk(str(ctx.conversion("hf-dataset")))
        gen = torch.Generator().manual_seed(ctx.seed)
        # group_by_length=True without a "length" column: the Trainer's sampler reads every
        # row's length from the dataset
        sampler = torch.utils.data.BatchSampler(
            LengthGroupedSampler(ctx.batch_size, dataset=ds, generator=gen), ctx.batch_size,
            False)
        if state is not None:
            sampler = SkipBatches(sampler, state["step"])
        collate = transformers.DataCollatorWithPadding(_hf_tokenizer(), return_tensors="pt")
        data = _torch_loader(ds, workers, batch_sampler=sampler, collate_fn=collate)
        return _Run(iter(data), lambda: _shutdown(data))

    def describe_resume(self, workers):
        return self.resume

    def saves_state(self, workers):
        return False

    def save(self, run, steps, workers):
        return {"step": steps}


class HFFlattening(Peer):
    name = "hf-flattening"
    label = "HF IterableDataset (shuffle buffer) + DataCollatorWithFlattening"
    kind = "packed"
    requires = ("datasets", "transformers", "torch")
    resume = "IterableDataset.state_dict"

    def prepare(self, ctx):
        return _hf_prepare(ctx)

    def warm_imports(self):
        import transformers.data.data_collator  # noqa: F401

    def open(self, ctx, workers, state=None):
        import datasets
        import transformers

        transformers.logging.set_verbosity_error()
        ds = datasets.load_from_disk(str(ctx.conversion("hf-dataset")))
        ids = ds.to_iterable_dataset(num_shards=64).shuffle(seed=ctx.seed, buffer_size=1000)
        collate = transformers.DataCollatorWithFlattening(return_flash_attn_kwargs=True)
        if workers:
            # the state lives in the workers: torchdata's StatefulDataLoader collects it
            from torchdata.stateful_dataloader import StatefulDataLoader

            data = StatefulDataLoader(ids, batch_size=ctx.batch_size, collate_fn=collate,
                                      num_workers=workers)
            if state is not None:
                data.load_state_dict(state["state_dict"])
            return _Run(iter(data), lambda: _shutdown(data), loader=data)
        if state is not None:
            ids.load_state_dict(state["state_dict"])
        data = _torch_loader(ids, 0, batch_size=ctx.batch_size, collate_fn=collate)
        return _Run(iter(data), dataset=ids)

    def describe_resume(self, workers):
        if not workers:
            return self.resume
        try:
            import torchdata.stateful_dataloader  # noqa: F401
        except ImportError:
            return None
        return "StatefulDataLoader.state_dict"

    def save(self, run, steps, workers):
        state = run.loader.state_dict() if workers else run.dataset.state_dict()
        return {"state_dict": state, "step": steps}

    def counts(self, batch):
        n = int(batch[COLUMN].numel())
        return n, n, int(len(batch["cu_seq_lens_q"]) - 1)


class MosaicStreaming(Peer):
    name = "streaming"
    label = "MosaicML streaming (MDS) + pad_sequence"
    kind = "padded"
    requires = ("streaming", "torch")
    resume = "StreamingDataLoader.state_dict"
    worker_note = "StreamingDataLoader(num_workers)"

    def prepare(self, ctx):
        from streaming import MDSWriter

        out = ctx.conversion("mds")
        if (out / "index.json").exists():
            return 0.0
        t = time.perf_counter()
        with MDSWriter(out=str(out), columns={COLUMN: "ndarray:int32"},
                       size_limit="64mb") as writer:
            for offsets, values in parquet_row_groups(ctx.corpus):
                for j in range(len(offsets) - 1):
                    writer.write({COLUMN: values[offsets[j]:offsets[j + 1]]})
        return time.perf_counter() - t

    def open(self, ctx, workers, state=None):
        from streaming import StreamingDataLoader, StreamingDataset
        from streaming.base.util import clean_stale_shared_memory

        clean_stale_shared_memory()
        ds = StreamingDataset(local=str(ctx.conversion("mds")), shuffle=True,
                              shuffle_seed=ctx.seed, batch_size=ctx.batch_size)
        data = StreamingDataLoader(ds, batch_size=ctx.batch_size, num_workers=workers,
                                   collate_fn=_streaming_collate)
        if state is not None:
            data.load_state_dict(state["state_dict"])
        return _Run(iter(data), lambda: _shutdown(data), loader=data, dataset=ds)

    def describe_resume(self, workers):
        return self.resume

    def save(self, run, steps, workers):
        return {"state_dict": run.loader.state_dict(), "step": steps}


def _streaming_collate(samples):
    return pad_collate([s[COLUMN] for s in samples])


def _litdata_rows(row_group, path=None):
    """litdata ``optimize``'s function: the sequences of one row group."""
    f = pq.ParquetFile(path)
    col = f.read_row_group(row_group, columns=[COLUMN]).column(0).combine_chunks()
    offsets, values = col.offsets.to_numpy(), col.values.to_numpy()
    for j in range(len(offsets) - 1):
        yield values[offsets[j]:offsets[j + 1]].copy()


class LitData(Peer):
    name = "litdata"
    label = "litdata (optimize) + pad_sequence"
    kind = "padded"
    requires = ("litdata", "torch")
    resume = "StreamingDataLoader.state_dict"
    worker_note = "StreamingDataLoader(num_workers)"

    def prepare(self, ctx):
        import functools

        import litdata

        out = ctx.conversion("litdata")
        if (out / "index.json").exists():
            return 0.0
        t = time.perf_counter()
        groups = list(range(pq.ParquetFile(ctx.corpus).num_row_groups))
        litdata.optimize(fn=functools.partial(_litdata_rows, path=str(ctx.corpus)),
                         inputs=groups, output_dir=str(out), chunk_bytes="64MB",
                         num_workers=2, verbose=False)
        return time.perf_counter() - t

    def open(self, ctx, workers, state=None):
        import litdata

        ds = litdata.StreamingDataset(str(ctx.conversion("litdata")), shuffle=True,
                                      seed=ctx.seed)
        data = litdata.StreamingDataLoader(ds, batch_size=ctx.batch_size, num_workers=workers,
                                           collate_fn=pad_collate)
        if state is not None:
            data.load_state_dict(state["state_dict"])
        return _Run(iter(data), lambda: _shutdown(data), loader=data)

    def describe_resume(self, workers):
        return self.resume

    def save(self, run, steps, workers):
        return {"state_dict": run.loader.state_dict(), "step": steps}


class GrainPacking(Peer):
    name = "grain-packing"
    label = "Grain MapDataset (shuffle) + BestFitPackIterDataset + batch"
    kind = "rows"
    requires = ("grain", "torch")
    resume = "DatasetIterator.get_state / set_state"
    worker_note = "mp_prefetch(num_workers)"

    def warm_imports(self):
        import grain.experimental  # noqa: F401

    def _dataset(self, ctx, workers):
        import grain
        import grain.experimental as gx

        pack = getattr(gx, "BestFitPackIterDataset", None) or gx.FirstFitPackIterDataset
        ds = (grain.MapDataset.source(ArrowRows(ctx.corpus, as_dict=True))
              .shuffle(seed=ctx.seed).to_iter_dataset())
        ds = pack(ds, length_struct={COLUMN: ctx.row_length},
                  num_packing_bins=ctx.rows_per_batch, seed=ctx.seed)
        ds = ds.batch(ctx.rows_per_batch)
        if workers:
            ds = ds.mp_prefetch(grain.MultiprocessingOptions(num_workers=workers))
        return ds, pack.__name__

    def open(self, ctx, workers, state=None):
        from absl import flags

        if not flags.FLAGS.is_parsed():   # Grain's worker pool reads absl flags
            flags.FLAGS.mark_as_parsed()
        ds, _ = self._dataset(ctx, workers)
        it = iter(ds)
        if state is not None:
            it.set_state(state["state_dict"])

        def close():
            if hasattr(it, "close"):
                it.close()
        return _Run(it, close, grain_iterator=it)

    def describe_resume(self, workers):
        return self.resume

    def save(self, run, steps, workers):
        return {"state_dict": run.grain_iterator.get_state(), "step": steps}

    def steps_per_epoch(self, ctx, run):
        return ctx.steps_rows()

    def counts(self, batch):
        seg = batch[f"{COLUMN}_segment_ids"]
        tokens = int(np.count_nonzero(seg))
        seqs = int(sum(len(np.unique(r[r > 0])) for r in seg))
        return tokens, int(seg.size), seqs


PEERS = {p.name: p for p in [Lodarrow("padded"), Lodarrow("packed"), Lodarrow("packed_rows"),
                             HFGroupByLength(), HFFlattening(), MosaicStreaming(), LitData(),
                             GrainPacking(), PlainTorch()]}
# which interpreter's import decides whether a peer is there: the one it runs in
LIBRARY = {"lodarrow-padded": "lodarrow", "lodarrow-packed": "lodarrow",
           "lodarrow-packed-rows": "lodarrow", "hf-group-by-length": "transformers",
           "hf-flattening": "transformers", "streaming": "streaming", "litdata": "litdata",
           "grain-packing": "grain", "torch-arrow": "torch"}


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


def run_one(peer, ctx, workers, seconds, warmup):
    """Start, throughput, resume and memory of one peer in one mode (this process)."""
    import torch

    torch.manual_seed(ctx.seed)
    for name in peer.requires:   # imports are not the loader's start-up
        importlib.import_module(name)
    peer.warm_imports()
    result = {"peer": peer.name, "label": peer.label, "kind": peer.kind,
              "workers": workers, "load_before": round(os.getloadavg()[0], 2)}
    mem = Memory()
    mem.start()
    t0 = time.perf_counter()
    run = peer.open(ctx, workers)
    result["start_open_s"] = time.perf_counter() - t0   # the loader made, no batch yet
    it = run.batches()
    counts = peer.counts(next(it))
    result["start_s"] = time.perf_counter() - t0
    steps = 1
    for _ in range(warmup):
        next(it)
        steps += 1
    epoch_steps = peer.steps_per_epoch(ctx, run)
    resume_step = max(int(epoch_steps * ctx.resume_at), steps + 1)
    tokens = slots = seqs = batches = 0
    t1 = time.perf_counter()
    deadline = t1 + seconds
    for batch in it:
        steps += 1
        tk, sl, sq = peer.counts(batch)
        tokens, slots, seqs, batches = tokens + tk, slots + sl, seqs + sq, batches + 1
        if steps >= resume_step or time.perf_counter() >= deadline:
            break
    elapsed = time.perf_counter() - t1
    result.update(timed_s=elapsed, timed_batches=batches, timed_tokens=tokens,
                  tokens_per_s=tokens / elapsed, batches_per_s=batches / elapsed,
                  seqs_per_s=seqs / elapsed, padding_pct=100.0 * (1 - tokens / slots),
                  packing_pct=100.0 * tokens / slots if peer.kind == "rows" else None,
                  first_batch=list(counts))
    result["resume"] = peer.describe_resume(workers)
    if result["resume"] is not None:
        if peer.saves_state(workers):   # saved after resume_step batches: go there (untimed)
            # ... within --resume-budget seconds at the measured pace: a slow loader saves
            # earlier in the epoch (the fraction is reported)
            reachable = steps + int(batches / elapsed * ctx.resume_budget)
            resume_step = max(min(resume_step, reachable), steps)
            while steps < resume_step:
                next(it)
                steps += 1
        state = peer.save(run, resume_step, workers)
        run.close()
        del run, it
        gc.collect()
        t2 = time.perf_counter()
        run = peer.open(ctx, workers, state)
        result["resume_open_s"] = time.perf_counter() - t2
        next(run.batches())
        result["resume_s"] = time.perf_counter() - t2
        result["resume_step"] = resume_step
        result["resume_fraction"] = resume_step / max(epoch_steps, 1)
        result["steps_per_epoch"] = epoch_steps
    run.close()
    result.update(mem.stop())
    result["load_after"] = round(os.getloadavg()[0], 2)
    return result


def child_main(args):
    """``--run PEER``/``--prepare PEER``: one job, its JSON on the last line of stdout."""
    meta = json.loads((Path(args.workdir) / "corpus.json").read_text())
    ctx = Context(args, meta)
    peer = PEERS[args.peer]
    if args.job == "prepare":
        out = {"prepare_s": peer.prepare(ctx)}
    else:
        out = run_one(peer, ctx, args.workers, args.seconds, args.warmup)
    out["versions"] = versions(peer)
    print("\n" + json.dumps(out), flush=True)


def versions(peer):
    names = {"lodarrow", "torch", "numpy", "pyarrow", *peer.requires}
    out = {"python": platform.python_version()}
    for name in sorted(names):
        try:
            out[name] = getattr(importlib.import_module(name), "__version__", "?")
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
        return run_one(PEERS[peer], ctx, workers, args.seconds, args.warmup)
    except Exception as exc:   # noqa: BLE001 - reported in the table
        return {"error": f"{type(exc).__name__}: {exc}"}


def child(args, python, job, peer, workers=0, timeout=None):
    """Run ``--job job --peer peer`` in a fresh process; its JSON, or an error."""
    if args.in_process:
        return inline(args, job, peer, workers)
    cmd = [python, os.path.abspath(__file__), "--job", job, "--peer", peer,
           "--workers", str(workers)] + passthrough(args)
    env = dict(os.environ, TOKENIZERS_PARALLELISM="false", PYTHONWARNINGS="ignore")
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
                "warmup", "resume_at", "resume_budget", "prefetch"):
        if getattr(args, key) is not None:
            out += [f"--{key.replace('_', '-')}", str(getattr(args, key))]
    return out


def available(python, peer, in_process=False):
    """None if ``peer``'s libraries import in ``python``, else the error."""
    if in_process:
        for name in PEERS[peer].requires:
            try:
                importlib.import_module(name)
            except Exception as exc:   # noqa: BLE001 - the reason it is not run
                return f"{name}: {type(exc).__name__}: {exc}"[:300]
        return None
    code = ("import importlib, sys\n"
            f"for m in {list(PEERS[peer].requires)!r}:\n"
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


def markdown(report):
    meta = report["corpus"]
    lines = [f"Corpus: {meta['sequences']:,} sequences, {meta['tokens']:,} int32 token ids "
             f"(lognormal lengths, mean {meta['mean_length']:.0f}, median "
             f"{meta['median_length']:.0f}, max {meta['max_length']:,}), one Parquet file of "
             f"{meta['parquet_mib']:,} MiB; batches of {report['args']['batch_size']} "
             f"sequences, rows of {report['args']['row_length']:,} "
             f"({report['args']['rows_per_batch']} a batch); resume at "
             f"{report['args']['resume_at']:.0%} of the epoch.", "",
             "| loader | workers | tokens/s | padding % | packing % | start s | resume s "
             "(at % of epoch) | resume by | RSS MiB (main / worker) | load |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |"]
    for r in report["results"]:
        if "error" in r:
            lines.append(f"| {r['label']} | {r['workers']} | failed: {r['error'][:160]} "
                         "| | | | | | | |")
            continue
        rss = f"{r['rss_main_mib']:,}"
        if r["workers"]:
            rss += f" / {r['rss_worker_mib']:,}" if r.get("rss_worker_mib") else " / —"
        lines.append(
            f"| {r['label']} | {r['workers']} | {fmt(r['tokens_per_s'], thousands=True)} "
            f"| {fmt(r['padding_pct'])} | {fmt(r['packing_pct'])} | {fmt(r['start_s'], 2)} "
            f"| {resumed(r)} | {r['resume'] or 'not supported'} | {rss} "
            f"| {r['load_before']:.1f}-{r['load_after']:.1f} |")
    if report["missing"]:
        lines += ["", "Not run:", ""]
        lines += [f"- {name}: {why}" for name, why in report["missing"].items()]
    prep = {k: v for k, v in report["prepare"].items() if v}
    if prep:
        lines += ["", "Conversions (untimed above): " + ", ".join(
            f"{k} {v:.0f} s" for k, v in prep.items()) + "."]
    return "\n".join(lines) + "\n"


def driver(args):
    pythons = dict(p.split("=", 1) for p in args.peer_python)
    unknown = set(pythons) - set(PEERS)
    if unknown:
        raise SystemExit(f"--peer-python: unknown peer(s) {sorted(unknown)}; "
                         f"peers: {sorted(PEERS)}")
    names = list(PEERS) if args.peers == "all" else args.peers.split(",")
    for name in names:
        if name not in PEERS:
            raise SystemExit(f"--peers: unknown peer {name!r}; peers: {sorted(PEERS)}")
    modes = [int(m) for m in args.modes.split(",")] if args.modes else [0, args.workers]
    meta = ensure_corpus(args)
    print(f"corpus: {meta['sequences']:,} sequences, {meta['tokens']:,} tokens, "
          f"{meta['parquet_mib']} MiB", file=sys.stderr)
    report = {"args": vars(args), "corpus": meta, "machine": machine(), "results": [],
              "missing": {}, "prepare": {},
              "command": "python benchmarks/loaders.py " + " ".join(sys.argv[1:])}
    for name in names:
        python = pythons.get(name, sys.executable)
        why = available(python, name, args.in_process)
        if why is not None:
            report["missing"][PEERS[name].label] = why
            print(f"{name}: not run ({why})", file=sys.stderr)
            continue
        prep = child(args, python, "prepare", name, timeout=args.timeout * 4)
        if "error" in prep:
            report["missing"][PEERS[name].label] = "conversion failed: " + prep["error"]
            print(f"{name}: conversion failed: {prep['error']}", file=sys.stderr)
            continue
        report["prepare"][name] = prep["prepare_s"]
        if args.prepare_only:
            continue
        for workers in modes:
            r = child(args, python, "run", name, workers, timeout=args.timeout)
            r.setdefault("label", PEERS[name].label)
            r.setdefault("peer", name)
            r.setdefault("workers", workers)
            r["python"] = python
            report["results"].append(r)
            print(f"{name} workers={workers}: " + (r["error"] if "error" in r else
                  f"{r['tokens_per_s']:,.0f} tokens/s, start {r['start_s']:.2f} s, "
                  f"resume {fmt(r.get('resume_s'), 2)} s, load {r['load_before']}"),
                  file=sys.stderr)
    table = markdown(report)
    print(table)
    if args.markdown:
        Path(args.markdown).write_text(table)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1, default=str))
    return report


def machine():
    return {"cpus": os.cpu_count(), "platform": platform.platform(),
            "python": platform.python_version(), "load_at_start": os.getloadavg()}


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sequences", type=int, default=1_000_000)
    p.add_argument("--mean-length", type=float, default=300.0,
                   help="mean of the lognormal lengths before clipping (default 300)")
    p.add_argument("--sigma", type=float, default=1.0, help="lognormal sigma (default 1.0)")
    p.add_argument("--max-length", type=int, default=4096,
                   help="lengths are clipped to [1, max-length] (default 4096: one row)")
    p.add_argument("--vocab", type=int, default=50_257)
    p.add_argument("--row-group-size", type=int, default=10_000)
    p.add_argument("--batch-size", type=int, default=32,
                   help="sequences per batch of the padded and flattened loaders")
    p.add_argument("--row-length", type=int, default=4096, help="packed row length")
    p.add_argument("--rows-per-batch", type=int, default=8,
                   help="rows per batch of the row packers (lodarrow: the token budget)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--seconds", type=float, default=10.0,
                   help="throughput window per run (after the warm-up)")
    p.add_argument("--warmup", type=int, default=5, help="untimed batches after the first")
    p.add_argument("--resume-at", type=float, default=0.5,
                   help="the resume point, as a fraction of the epoch (default 0.5)")
    p.add_argument("--resume-budget", type=float, default=60.0,
                   help="seconds a peer that saves its state may iterate (untimed) to reach "
                        "the resume point; a slower one saves earlier (default 60)")
    p.add_argument("--prefetch", type=int, default=None,
                   help="lodarrow's prefetch= (batches made ahead in a thread), where the "
                        "build has it (default: the loader's default)")
    p.add_argument("--workers", type=int, default=2, help="DataLoader workers (default 2)")
    p.add_argument("--modes", default=None,
                   help="comma-separated worker counts to run (default: 0 and --workers)")
    p.add_argument("--peers", default="all", help=f"comma-separated, of {', '.join(PEERS)}")
    p.add_argument("--peer-python", action="append", default=[], metavar="PEER=PYTHON",
                   help="run PEER with another interpreter (repeatable)")
    p.add_argument("--workdir", default=os.path.join(os.environ.get("TMPDIR", "/tmp"),
                                                     "lodarrow-bench-loaders"),
                   help="the corpus and the peers' conversions (kept between runs)")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per run")
    p.add_argument("--prepare-only", action="store_true",
                   help="write the corpus and the peers' conversions, time nothing")
    p.add_argument("--in-process", action="store_true",
                   help="run every job in this process (a quick check of the script; the "
                        "figures are not comparable)")
    p.add_argument("--markdown", help="write the table here")
    p.add_argument("--json", help="write everything measured here")
    p.add_argument("--job", choices=["run", "prepare"], help=argparse.SUPPRESS)
    p.add_argument("--peer", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if not 0 < args.resume_at < 1:
        p.error(f"--resume-at must be in (0, 1), got {args.resume_at}")
    return args


def main(argv=None):
    args = parse(sys.argv[1:] if argv is None else argv)
    if args.job:
        child_main(args)
    else:
        driver(args)


if __name__ == "__main__":
    main()
