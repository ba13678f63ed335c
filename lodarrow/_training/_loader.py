"""A streaming loader: batches from a plan, read a few row groups at a time
(docs/training.md#loader)."""

import os
import sys

import numpy as np
import pyarrow as pa

from lodarrow._training._batching import plan_rank, shuffled
from lodarrow._training._collate import LIBRARIES, MODES, as_sequences, collate_rows, convert
from lodarrow._training._lengths import parquet_part_lengths
from lodarrow._training._source import (ParquetParts, check_level, column_of, hf_table,
                                        is_parquet_source, list_depth,
                                        pick_column)
from lodarrow._validation import (as_flag, as_int, as_nonnegative_int, as_positive_int,
                                  check_choice, coerce_pad_value)

__all__ = ["BatchLoader", "batch_loader"]

_FN = "batch_loader"


def batch_loader(source, column=None, *, batch_size=None, max_tokens=None, cost="padded",
                 shuffle=True, drop_last=False, seed=0, num_replicas=1, rank=0,
                 balance="batches", oversize="alone", mode="padded", row_length=None, level=0,
                 pad_value=0, to="numpy", extra_columns=(), bucket=True, window=65536,
                 row_groups=4, progress=None):
    """Stream model-ready batches from a Parquet dataset or a table, following a batch plan.

    The lengths are read first (:func:`lodarrow.sequence_lengths`, no values); each epoch's
    plan (:func:`lodarrow.batch_plan`) is the same on every rank.  A Parquet source is read
    ``row_groups`` row groups at a time (a *block*; the row groups are shuffled, then the rows
    inside each block): batches never cross a block, blocks are dealt to the ranks in turn
    and, inside a rank, to the ``DataLoader`` workers, so each worker holds one block at a
    time and every sequence is read once per epoch.  An in-memory source (a table, a column,
    a Hugging Face dataset: its Arrow table, zero-copy) is planned in windows of ``window``
    sequences.  A Ray Data ``Dataset`` (or a ``DataIterator`` from ``get_dataset_shard``) is
    streamed through its ``iter_batches``, ``window`` rows a block, each block planned on
    its own (Ray shards it: ``num_replicas`` must be 1).  See docs/training.md#loader.

    Parameters
    ----------
    source : str, list, pyarrow.Table or Array, LoDTensor, datasets.Dataset or ray.data.Dataset
        A Parquet file, directory, glob or list of files, or an in-memory source.
    column : str, optional
        The list column of sequences; optional when the source has one column.
    batch_size, max_tokens : int, optional
        As for :func:`lodarrow.batch_plan`.
    cost : {"padded", "packed"}, default "padded"
        As for :func:`lodarrow.batch_plan`.
    shuffle, drop_last : bool, default True, False
        As for :func:`lodarrow.batch_plan`.
    seed, num_replicas, rank : int, default 0, 1, 0
        As for :func:`lodarrow.batch_plan` (the epoch comes from
        :meth:`BatchLoader.set_epoch`).
    balance : {"batches", "tokens"}, default "batches"
        As for :func:`lodarrow.batch_plan`; for a Parquet source, "tokens" deals the blocks
        most tokens first, each to the rank with the fewest tokens so far, instead of in turn.
    oversize : {"alone", "error", "drop"}, default "alone"
        As for :func:`lodarrow.batch_plan`.
    mode : {"padded", "packed", "packed_rows"}, default "padded"
        As for :func:`lodarrow.collate`.
    row_length : int, optional
        As for :func:`lodarrow.collate`.
    level : int, default 0
        As for :func:`lodarrow.collate`.
    pad_value : scalar, default 0
        As for :func:`lodarrow.collate`.
    to : {"numpy", "torch", "jax", "tf"}, default "numpy"
        As for :func:`lodarrow.collate`.
    extra_columns : sequence of str, default ()
        Other columns (labels, ids ...) given with each batch, as arrays of the batch's rows,
        in its order (``level`` 0 only).
    bucket : bool, default True
        Sort by length inside each block or window (little padding); False: random batches.
    window : int, default 65536
        The bucketing window of an in-memory source, and the block of a Ray source (rows).
    row_groups : int, default 4
        Row groups per block of a Parquet source: what one worker holds in memory.
    progress : bool, optional
        Show a progress bar on stderr; default: when stderr is a terminal.

    Returns
    -------
    BatchLoader
        An iterable of dicts (the arrays of :func:`lodarrow.collate`, plus ``rows``, the
        batch's sequences, and the extra columns); ``len`` is this rank's batch count;
        :meth:`BatchLoader.torch` gives a ``torch.utils.data.IterableDataset``.

    Raises
    ------
    TypeError
        If an argument has the wrong type (the message names it).
    ValueError
        If a value does not fit (the message names the argument), as for
        :func:`lodarrow.batch_plan` and :func:`lodarrow.collate`.

    Examples
    --------
    >>> import pyarrow as pa, lodarrow as la
    >>> table = pa.table({"ids": [[1, 2, 3], [4], [5, 6], [7]], "label": [0, 1, 0, 1]})
    >>> loader = la.batch_loader(table, "ids", max_tokens=4, extra_columns=["label"],
    ...                          shuffle=False)
    >>> for batch in loader:
    ...     print(batch["values"].tolist(), batch["label"].tolist())
    [[4], [7]] [1, 1]
    [[5, 6]] [0]
    [[1, 2, 3]] [0]
    """
    cfg = _Config(batch_size, max_tokens, cost, mode, row_length, level, extra_columns,
                  pad_value, to, bucket, window, row_groups, shuffle, seed, drop_last,
                  num_replicas, rank, oversize, progress)
    cfg.balance = check_choice(balance, f"{_FN}: balance", ("batches", "tokens"))
    return BatchLoader(source, column, cfg)


class _Config:
    def __init__(self, batch_size, max_tokens, cost, mode, row_length, level, extra_columns,
                 pad_value, to, bucket, window, row_groups, shuffle, seed, drop_last,
                 num_replicas, rank, oversize, progress):
        self.batch_size = _opt_pos(batch_size, "batch_size")
        self.max_tokens = _opt_pos(max_tokens, "max_tokens")
        if self.batch_size is None and self.max_tokens is None:
            raise ValueError(f"{_FN}: give batch_size, max_tokens or both (both are None)")
        self.packed = check_choice(cost, f"{_FN}: cost", ("padded", "packed")) == "packed"
        self.mode = check_choice(mode, f"{_FN}: mode", MODES)
        self.row_length = _opt_pos(row_length, "row_length")
        if (self.mode == "packed_rows") != (self.row_length is not None):
            raise ValueError(f"{_FN}: row_length is needed with mode='packed_rows' and only "
                             f"then (mode={mode!r}, row_length={row_length!r})")
        if isinstance(level, (bool, np.bool_)):
            raise TypeError(f"{_FN}: level must be an integer, got bool")
        self.level = as_int(level, f"{_FN}: level")
        if isinstance(extra_columns, str) or not isinstance(extra_columns, (list, tuple)):
            raise TypeError(f"{_FN}: extra_columns must be a list of column names, got "
                            f"{type(extra_columns).__name__}")
        for k, name in enumerate(extra_columns):
            if not isinstance(name, str):
                raise TypeError(f"{_FN}: extra_columns[{k}] must be a str, got "
                                f"{type(name).__name__}")
        if extra_columns and self.level != 0:
            raise ValueError(f"{_FN}: extra_columns need level=0 (rows), got level={level}")
        self.extra_columns = list(extra_columns)
        self.pad_value = pad_value
        if pad_value is None or not (isinstance(pad_value, (int, float, np.generic))
                                     or hasattr(pad_value, "__array__")):
            raise TypeError(f"{_FN}: pad_value must be a number, got "
                            f"{type(pad_value).__name__}")
        self.to = check_choice(to, f"{_FN}: to", LIBRARIES)
        self.bucket = as_flag(bucket, f"{_FN}: bucket")
        self.window = as_positive_int(window, f"{_FN}: window")
        self.row_groups = as_positive_int(row_groups, f"{_FN}: row_groups")
        self.shuffle = as_flag(shuffle, f"{_FN}: shuffle")
        self.seed = _nonneg(seed, "seed")
        self.drop_last = as_flag(drop_last, f"{_FN}: drop_last")
        self.num_replicas = as_positive_int(num_replicas, f"{_FN}: num_replicas")
        self.rank = _nonneg(rank, "rank")
        if self.rank >= self.num_replicas:
            raise ValueError(f"{_FN}: rank must be in [0, num_replicas={num_replicas}), "
                             f"got {rank}")
        self.oversize = check_choice(oversize, f"{_FN}: oversize", ("alone", "error", "drop"))
        if progress is not None:
            progress = as_flag(progress, f"{_FN}: progress")
        self.progress = progress


class BatchLoader:
    """An iterable of training batches (made by :func:`lodarrow.batch_loader`).

    Iterating gives this rank's batches of the current epoch (:meth:`set_epoch`); inside a
    PyTorch ``DataLoader`` worker (:meth:`torch`), that worker's share of them.
    """

    def __init__(self, source, column, cfg):
        self.cfg = cfg
        self.epoch = 0
        self._seqs = self._parts = self._ray = self._cached = None
        if is_parquet_source(source):
            self._init_parquet(source, column)
        elif hasattr(source, "iter_batches") and not isinstance(source, (pa.Table,
                                                                          pa.RecordBatch)):
            if cfg.num_replicas != 1:
                raise ValueError(f"{_FN}: num_replicas must be 1 for a Ray source (Ray Data "
                                 f"shards it: streaming_split / get_dataset_shard)")
            self._ray, self.column = source, column
        else:
            self._init_memory(source, column)

    # --- sources ------------------------------------------------------------------------
    def _init_memory(self, source, column):
        cfg = self.cfg
        table = hf_table(source)
        if table is None and isinstance(source, pa.RecordBatch):
            table = pa.Table.from_batches([source])
        if table is None and isinstance(source, pa.Table):
            table = source
        self._extras = {}
        if table is not None:
            column = pick_column(table.schema, column, _FN)
            for name in cfg.extra_columns:
                pick_column(table.schema, name, _FN)
            self._set_extras(table)
            self._seqs = as_sequences(table, column, cfg.level, _FN)
        else:
            source = column_of(source, column, _FN)  # a column, or a TypeError
            column = None
            if cfg.extra_columns:
                raise ValueError(f"{_FN}: extra_columns need a table source, got "
                                 f"{type(source).__name__}")
            self._seqs = as_sequences(source, column, cfg.level, _FN)
        self.column = column
        self.lengths = self._seqs.lengths
        self._check_pad(self._seqs)
        self._nbytes = int(self._seqs.values.nbytes)

    def _init_parquet(self, source, column):
        cfg = self.cfg
        parts = ParquetParts(source, _FN)
        self.column = pick_column(parts.schema, column, _FN)
        for name in cfg.extra_columns:
            pick_column(parts.schema, name, _FN)
        check_level(cfg.level, list_depth(parts.schema.field(self.column).type), _FN)
        lengths = parquet_part_lengths(parts, self.column, cfg.level)  # one leaf, no values
        self._parts = parts
        self._part_seqs = np.array([len(x) for x in lengths], dtype=np.int64)
        self._part_starts = np.concatenate([[0], np.cumsum(self._part_seqs)]).astype(np.int64)
        self.lengths = (np.concatenate(lengths) if lengths else np.zeros(0, np.int64))
        self._nbytes = int(sum(parts.nbytes))

    def _check_pad(self, seqs):
        self._pad = coerce_pad_value(self.cfg.pad_value, seqs.values.dtype,
                                     seqs.values.shape[1:], name=f"{_FN}: pad_value")

    # --- the plan -----------------------------------------------------------------------
    def set_epoch(self, epoch):
        """Use epoch ``epoch``'s plan from now on (call it on every rank, as with
        ``DistributedSampler``)."""
        if isinstance(epoch, (bool, np.bool_)):
            raise TypeError("set_epoch: epoch must be an integer, got bool")
        self.epoch = as_int(epoch, "set_epoch: epoch")

    def plan(self):
        """This rank's :class:`BatchPlan` for the current epoch (sequence positions of the
        whole source); for a Parquet source ``plan().windows`` is each batch's block."""
        if self._ray is not None:
            raise ValueError(f"{_FN}: a Ray source is planned block by block as it streams")
        if self._cached is not None and self._cached[0] == self.epoch:
            return self._cached[1]
        self._cached = (self.epoch, self._make_plan())
        return self._cached[1]

    def _make_plan(self):
        cfg = self.cfg
        rng = np.random.default_rng([cfg.seed, self.epoch])
        lengths = self.lengths
        if self._parts is None:
            n = len(lengths)
            order = shuffled(n, rng) if cfg.shuffle else np.arange(n, dtype=np.int64)
            order = _oversize(order, lengths, cfg)
            m = len(order)
            windows = np.append(np.arange(0, m, cfg.window, dtype=np.int64), m) if m else \
                np.array([0, 0], dtype=np.int64)
            deal = "round_robin"
            self._blocks = None
        else:
            nparts = len(self._part_seqs)
            part_order = rng.permutation(nparts) if cfg.shuffle else np.arange(nparts)
            blocks = [part_order[i:i + cfg.row_groups]
                      for i in range(0, nparts, cfg.row_groups)]
            pieces, bounds = [], [0]
            for block in blocks:
                rows = np.concatenate([np.arange(self._part_starts[k], self._part_starts[k + 1])
                                       for k in block]) if len(block) else np.zeros(0, np.int64)
                if cfg.shuffle:
                    rows = rows[shuffled(len(rows), rng)]
                rows = _oversize(rows.astype(np.int64), lengths, cfg)
                pieces.append(rows)
                bounds.append(bounds[-1] + len(rows))
            order = np.concatenate(pieces) if pieces else np.zeros(0, np.int64)
            windows = np.array(bounds, dtype=np.int64)
            deal = "window"
            self._blocks = blocks
        return plan_rank(lengths, order, windows, sort=cfg.bucket, batch_size=cfg.batch_size,
                         max_tokens=cfg.max_tokens, packed=cfg.packed,
                         rng=rng if cfg.shuffle else None, drop_last=cfg.drop_last,
                         num_replicas=cfg.num_replicas, rank=cfg.rank, balance=cfg.balance,
                         deal=deal, seed=cfg.seed, epoch=self.epoch)

    def __len__(self):
        if self._ray is not None:
            raise TypeError(f"{_FN}: a Ray source has no length before it is read")
        return len(self.plan())

    # --- iteration ----------------------------------------------------------------------
    def __iter__(self):
        return self._iterate(0, 1)

    def _iterate(self, worker, num_workers):
        if self._ray is not None:
            yield from self._iterate_ray(worker, num_workers)
            return
        plan = self.plan()
        if self._parts is None:
            units = len(plan)
            nbytes = self._nbytes * len(plan.indices) // max(len(self.lengths), 1)
        else:
            mine = set(plan.windows.tolist())
            units = len(mine)
            nbytes = sum(self._parts.nbytes[int(k)] for w in mine for k in self._blocks[w])
        bar = _bar(self.cfg.progress, units, nbytes)
        ok = False
        try:
            if self._parts is None:
                for b in range(worker, len(plan), num_workers):
                    rows = plan[b]
                    yield self._batch(self._seqs, rows, rows)
                    bar.advance(len(rows), nbytes / max(len(plan), 1))
                    bar.file_done()
            else:
                yield from self._iterate_blocks(plan, worker, num_workers, bar)
            ok = True
        finally:
            bar.close(ok)

    def _iterate_blocks(self, plan, worker, num_workers, bar):
        windows = plan.windows
        mine = [w for k, w in enumerate(dict.fromkeys(windows.tolist()))
                if k % num_workers == worker]
        for w in mine:
            block = self._blocks[w]
            table = pa.concat_tables([self._parts.read(int(k), [self.column]
                                                       + self.cfg.extra_columns)
                                      for k in block])
            seqs = as_sequences(table, self.column, self.cfg.level, _FN)
            self._check_pad(seqs)
            # sequence position in the whole source -> position in this block: the block's
            # row groups by first position, and where each starts in the block
            firsts = self._part_starts[block]
            local_firsts = np.concatenate([[0], np.cumsum(self._part_seqs[block])[:-1]])
            by_first = np.argsort(firsts)
            firsts, local_firsts = firsts[by_first], local_firsts[by_first]
            self._set_extras(table)
            nbytes = sum(self._parts.nbytes[int(k)] for k in block)
            batches = np.flatnonzero(windows == w)
            for b in batches:
                rows = plan[int(b)]
                j = np.searchsorted(firsts, rows, side="right") - 1
                local = rows - firsts[j] + local_firsts[j]
                yield self._batch(seqs, local, rows)
                bar.advance(len(rows), nbytes / max(len(batches), 1))
            bar.file_done()
            del table, seqs

    def _iterate_ray(self, worker, num_workers):
        cfg = self.cfg
        block_no = 0
        for table in self._ray.iter_batches(batch_size=cfg.window, batch_format="pyarrow"):
            if block_no % num_workers == worker:
                column = pick_column(table.schema, self.column, _FN)
                seqs = as_sequences(table, column, cfg.level, _FN)
                self._check_pad(seqs)
                self._set_extras(table)
                rng = np.random.default_rng([cfg.seed, self.epoch, block_no])
                n = len(seqs)
                order = _oversize(shuffled(n, rng) if cfg.shuffle else
                                  np.arange(n, dtype=np.int64), seqs.lengths, cfg)
                plan = plan_rank(seqs.lengths, order, np.array([0, len(order)], np.int64),
                                 sort=cfg.bucket, batch_size=cfg.batch_size,
                                 max_tokens=cfg.max_tokens, packed=cfg.packed,
                                 rng=rng if cfg.shuffle else None, drop_last=cfg.drop_last,
                                 num_replicas=1, rank=0, balance="batches",
                                 deal="round_robin", seed=cfg.seed, epoch=self.epoch)
                for rows in plan:
                    yield self._batch(seqs, rows, rows)
            block_no += 1

    def _batch(self, seqs, local, rows):
        cfg = self.cfg
        out = collate_rows(seqs, local, cfg.mode, self._pad, cfg.row_length)
        out["rows"] = rows
        for name, values in self._extras.items():
            out[name] = values[local]
        return convert(out, seqs.on_gpu, cfg.to)

    def _set_extras(self, table):
        """The extra columns of ``table`` (the source, or the block read) as NumPy arrays."""
        self._extras = {name: table.column(name).to_numpy()
                        for name in self.cfg.extra_columns}

    # --- PyTorch ------------------------------------------------------------------------
    def torch(self):
        """This loader as a ``torch.utils.data.IterableDataset``.

        Give it to ``DataLoader(dataset, batch_size=None, num_workers=k)``: each worker
        iterates its share (Parquet blocks, or every k-th batch of an in-memory source), with
        ``LODARROW_NUM_THREADS=1``; together they give this rank's batches once.
        """
        from lodarrow._interop._optional import import_optional

        torch = import_optional("torch", "BatchLoader.torch")
        return _torch_class(torch)(self)


_TORCH_CLASS = None


def _torch_class(torch):
    global _TORCH_CLASS
    if _TORCH_CLASS is None:
        class TorchBatches(torch.utils.data.IterableDataset):
            """A :class:`BatchLoader` as a PyTorch ``IterableDataset``."""

            def __init__(self, loader):
                super().__init__()
                self.loader = loader

            def __iter__(self):
                info = torch.utils.data.get_worker_info()
                if info is None:
                    return iter(self.loader)
                os.environ["LODARROW_NUM_THREADS"] = "1"  # the workers share the cores
                return self.loader._iterate(info.id, info.num_workers)

            def __len__(self):
                return len(self.loader)

            def set_epoch(self, epoch):
                self.loader.set_epoch(epoch)

        _TORCH_CLASS = TorchBatches
    return _TORCH_CLASS


def _oversize(order, lengths, cfg):
    from lodarrow._training._batching import _apply_oversize

    return _apply_oversize(order, lengths, cfg.max_tokens, cfg.oversize)


def _bar(progress, blocks, nbytes):
    from lodarrow._progress import Progress
    from lodarrow._tables._dataset import _isatty

    enabled = _isatty(sys.stderr) if progress is None else progress
    return Progress(blocks, nbytes, enabled, label="batch_loader", unit="blocks")


def _opt_pos(value, name):
    return None if value is None else as_positive_int(value, f"{_FN}: {name}")


def _nonneg(value, name):
    return as_nonnegative_int(value, f"{_FN}: {name}")

