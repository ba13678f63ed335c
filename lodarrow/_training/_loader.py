"""A streaming loader: the batches of the global plan, read a few row groups at a time
(docs/training.md#loader).

The loader joins the stages (docs/training.md#where-options-meet): the source
(:mod:`lodarrow._training._source`), which sequences (:mod:`lodarrow._training._select`, the
plan of :mod:`lodarrow._training._epoch`), what shape (:mod:`lodarrow._training._shape`) and
how delivered (:mod:`lodarrow._training._deliver`; the batches made by
:mod:`lodarrow._training._produce`).  It keeps the plans, the position (epoch, cursor, the
epoch's legs: :mod:`lodarrow._training._resume`) and the public API.  Every rank computes the
epoch's whole plan and delivers its share in plan order; workers (``DataLoader`` processes)
take every ``num_workers``-th step, so what the training loop received is a step count
whatever the worker count.  All that can be known from the footers, the lengths and the
arguments is checked here, when the loader is made.
"""

import warnings
import weakref

import numpy as np

from lodarrow._training._columns import check_jax_x64
from lodarrow._training._deliver import Delivery, prefetched
from lodarrow._training._epoch import PLAN_VERSION
from lodarrow._training._mix import MixedParts, Mixture, epoch_mix, members_of_parts, mixed_table
from lodarrow._training._parquet_source import ParquetSource
from lodarrow._training._produce import Producer
from lodarrow._training._ray import RaySource, is_ray_source, ray_epoch_plan
from lodarrow._training._readahead import ReadAhead
from lodarrow._training._resume import FORMAT, Position, check_state, fingerprint, segment_plan
from lodarrow._training._select import Selection
from lodarrow._training._shape import BatchShape
from lodarrow._training._source import is_parquet_source
from lodarrow._training._table_source import TableSource
from lodarrow._validation import (
    as_flag,
    as_int,
    as_nonnegative_int,
    as_positive_int,
    coerce_pad_value,
)

__all__ = ["BatchLoader", "batch_loader"]

_FN = "batch_loader"


def batch_loader(source, column=None, *, batch_size=None, max_tokens=None, cost=None,
                 shuffle=True, drop_last=False, seed=0, num_replicas=1, rank=0,
                 balance="batches", alpha=None, oversize="alone", nulls="error", mode="padded",
                 row_length=None, level=0, pad_value=0, to="numpy", extra_columns=(),
                 bucket=True, window=65536, row_groups=4, num_rows=None,
                 pad_to_multiple_of=None, pad_widths=None, num_segments=None, separator=None,
                 remainder=None, token_arrays=True, prefetch=2, progress=None,
                 filesystem=None, cache_dir=None, cache_bytes=None, decoded_cache=False):
    """Stream model-ready batches from a Parquet dataset or a table, following one global plan.

    The lengths are read first (:func:`lodarrow.sequence_lengths`, no values) and everything
    that can be known before the first batch is checked then.  Each epoch's plan is one
    function of the lengths, the source's row groups, the arguments, ``seed`` and the epoch,
    the same on every rank: every rank gets the same number of steps, and across the ranks
    every sequence is delivered exactly once per epoch (``drop_last``, ``oversize="drop"`` and
    ``nulls="drop"`` drop only what they say, counted in :meth:`BatchLoader.statistics`),
    whatever the number of row groups.  A Parquet source is read a block at a time: each
    rank's share of a block covers about ``row_groups`` row groups; a row group is split into
    row ranges only where ranks need it.  The loader's position is data
    (:meth:`BatchLoader.state_dict`): it resumes exactly, on the same or another number of
    ranks.  See docs/training.md#loader.

    Parameters
    ----------
    source : str, list, pyarrow.Table or Array, LoDTensor, datasets.Dataset or ray.data.Dataset
        A Parquet file, directory, glob or list of files, or an in-memory source.  A Ray Data
        ``Dataset`` (or a ``DataIterator`` from ``get_dataset_shard``) is read through its
        ``iter_batches``, ``window`` rows a block in Ray's order: once when the loader is made
        (its lengths and nulls, checked as for any source), then a block at a time as it is
        iterated, each block planned on its own (``num_replicas`` must be 1: Ray shards it).
    column : str or dict, optional
        The list column of sequences; optional when the source has one column.  For a
        mixture (:func:`lodarrow.mix`), a dict keyed like its sources names each source's
        own column (a batch names it as the first source does).
    batch_size, max_tokens : int, optional
        The most sequences, and the budget of *slots*, of a batch (at least one of them).  A
        batch's slots are what its values array holds once collated, padding included:
        ``rows x width`` padded (``num_rows`` rows when given, the width rounded by
        ``pad_to_multiple_of`` / ``pad_widths``), the tokens packed, the flat width of
        "segments", ``num_rows x row_length`` packed rows.  Every batch is within
        ``max_tokens`` (but a sequence alone over it under ``oversize="alone"``).
    cost : {"padded", "packed"}, optional
        How a flat batch ("packed", "segments") counts against ``max_tokens``: its slots
        (``"packed"``, the default for those modes) or also ``count * longest``
        (``"padded"``: batches that would fit padded too).  A padded batch holds
        ``rows x width`` slots whatever ``cost`` says.
    shuffle : bool, default True
        Shuffle the row groups, the rows inside each block and the steps.  False keeps the
        source's order of row groups, blocks and rows, but ``bucket=True`` (the default)
        still sorts each rank's share of a block by length, and its batches come in that
        order; ``shuffle=False, bucket=False`` delivers the sequences in the source's order.
    drop_last : bool, default False
        Drop what cannot fill a step: a fixed-size plan (``batch_size`` without
        ``max_tokens``) drops fewer than ``num_replicas * batch_size`` sequences so that every
        batch is full; otherwise the last step's sequences are split across the ranks.
    seed, num_replicas, rank : int, default 0, 1, 0
        The randomness (with the epoch: :meth:`BatchLoader.set_epoch`), the ranks and this
        one's number.
    balance : {"batches", "tokens", "compute"}, default "batches"
        What the ranks' shares even out.  "batches": each rank's share of a block holds as
        many sequences, and each rank's batches come in a random order.  "tokens": each
        rank's share of a block holds as many tokens, and the batches are matched by size:
        step ``j`` gives every rank its ``j``-th largest batch, so the batches of one step
        hold similar token counts (the ranks wait little for one another).  "compute": as
        "tokens", with a sequence costing ``len + alpha * len**2`` (attention's quadratic
        term) instead of ``len``.
    alpha : float, optional
        The quadratic weight of ``balance="compute"`` (default 0.0; another balance: a
        ``ValueError``).
    oversize : {"alone", "error", "drop", "split"}, default "alone"
        A sequence whose batch alone is over ``max_tokens`` after padding (or longer than
        ``row_length`` with ``mode="packed_rows"``, or than the widest of ``pad_widths``): a
        batch of its own, a ``ValueError`` when the loader is made, or left out (counted).  Under ``mode="packed_rows"`` "alone" is an error too (a row
        cannot hold it), and "split" cuts it into ``row_length`` chunks, each its own sequence
        in ``cu_seqlens`` (positions restart at 0 in each chunk; ``seq_idx`` names the
        sequence; counted in the statistics).
    nulls : {"error", "empty", "drop"}, default "error"
        A null row of the sequence column: a ``ValueError`` when the loader is made (naming
        the file, row group and row), an empty sequence, or left out (counted).  A row
        holding a null value inside its lists is an error under "error" and "empty" (no
        number to put in the batch), left out under "drop"; known before the first batch.
    mode : {"padded", "packed", "packed_rows", "segments", "blocks"}, default "padded"
        As for :func:`lodarrow.collate`.  With "packed_rows" and ``max_tokens`` (or
        ``num_rows``) the plan itself packs: each rank's share of a block is packed best-fit
        decreasing into rows of ``row_length``, and a batch is ``num_rows`` (default
        ``max_tokens // row_length``) rows: one shape for the whole run.  "blocks" (with
        ``max_tokens`` or ``num_rows``) joins each rank's share of a block end to end, in the
        shuffled order, and cuts it into blocks of ``row_length``: every token once per epoch,
        ``num_rows`` blocks a batch (docs/training.md#token-blocks).
    row_length : int, optional
        As for :func:`lodarrow.collate`.
    level : int, default 0
        As for :func:`lodarrow.collate`.
    pad_value : scalar, default 0
        As for :func:`lodarrow.collate`.
    to : {"numpy", "torch", "jax", "tf"}, default "numpy"
        As for :func:`lodarrow.collate`.  With "jax" and ``jax_enable_x64`` off, a 64-bit
        column is a ``ValueError`` (JAX would narrow it silently).
    extra_columns : sequence of str, default ()
        Other columns (labels, ids ...) given with each batch (``level`` 0 only): numbers and
        bools as arrays of the batch's rows (a column with nulls keeps its dtype, with a bool
        ``<name>_mask``); strings, lists and other types as ``pyarrow.Array``.  A name the
        batches already hold (``attention_mask``, ``lengths``, ``rows`` ...), or whose
        ``<name>_mask`` would be one, is a ``ValueError``: rename the column.
    bucket : bool, default True
        Sort by length inside each rank's share of a block (little padding); False: the
        share's order as ``shuffle`` leaves it (random, or the source order).
    window : int, default 65536
        The sequences of one rank's share of a block, for an in-memory source (and the block
        of a Ray source).
    row_groups : int, default 4
        About how many row groups one rank's share of a block covers (a Parquet source):
        what one reader holds in memory, and how many row groups a batch mixes.
    num_rows, pad_to_multiple_of, pad_widths, num_segments : optional
        Fixed shapes, as for :func:`lodarrow.collate` (``num_rows``: the rows of every
        padded or packed-rows batch).  The plan honours them: a batch holds at most
        ``num_rows`` (padded) or ``num_segments`` sequences, a width of ``pad_widths``, and
        its slots after the rounding within ``max_tokens``; what cannot be honoured
        (``batch_size`` above ``num_rows``, ``num_rows x row_length`` above ``max_tokens``) is
        a ``ValueError`` when the loader is made.
    separator : scalar, optional
        ``mode="blocks"``: a token id (of the column's dtype) appended to every sequence
        before the stream is cut into blocks (counted in the lengths and the statistics).
    remainder : {"pad", "drop"}, optional
        ``mode="blocks"``: each rank's share of a block ends with a part-full block, padded
        (the default: every token once) or left out (its tokens counted in
        ``statistics()["packing"]["remainder_tokens"]``).
    token_arrays : bool, default True
        ``mode="packed"``, ``"packed_rows"`` and ``"blocks"``: False leaves out the per-token
        arrays ``cu_seqlens`` determines (``position_ids``, ``attention_mask``, ``seq_idx``):
        for attention that takes ``cu_seqlens`` alone (FlashAttention's varlen functions)
        and for token-ids-only training: a batch of int32 token blocks then writes 4 bytes a
        token instead of 17 (``cu_seqlens`` gives the others back where needed).
    prefetch : int, default 2
        Batches made ahead in a background thread when iterated in this process (the kernels
        and Parquet decoding release the GIL), and a Parquet source's next block read while
        the batches of the current one are made; at the last block, the next epoch's first
        block (two blocks in memory, the one read ahead kept until the next pass; see
        docs/training.md#loader); 0: each batch made when asked for, each block read when
        its first batch is.
    progress : bool, optional
        Show a progress bar (batches, tokens/s) on stderr; default: when stderr is a terminal.
    filesystem : pyarrow.fs.FileSystem or fsspec filesystem, optional
        Where a Parquet source's paths live; ``s3://`` and ``gs://`` URIs name their own
        (docs/scale-out.md#remote-corpora).  Only the column chunks read are fetched.
    cache_dir : str, path-like or False, optional
        The lengths cache's directory (docs/training.md#lengths-cache), also that of the
        data cache and the decoded cache where they are asked for: by default
        ``$LODARROW_CACHE_DIR``, else ``$XDG_CACHE_HOME/lodarrow``, else
        ``~/.cache/lodarrow``; False: none.  A start whose lengths the cache (or the
        footers of lodarrow's writers) holds decodes no column before the first batch.
    cache_bytes : int, optional
        Keep the row groups read from a remote source (``s3://``, ``gs://``, ``filesystem=``)
        on the local disk, at most this many bytes, under ``cache_dir``'s ``data-v1/``
        (docs/training.md#a-local-cache-for-remote-corpora): what was read once (by any
        process of the machine: ranks, ``DataLoader`` workers, a later run) is not fetched
        again, so a second epoch that fits fetches nothing.  Least recently used files are
        evicted first, never one a process is reading.  Default: no data cache; a local
        source is always read in place.
    decoded_cache : bool, default False
        Keep every row group of a Parquet source, once read and decoded, as an uncompressed
        Arrow IPC file under ``cache_dir``'s ``decoded-v1/``
        (docs/training.md#a-decoded-cache): later reads (the next epochs, ``DataLoader``
        workers, other ranks and later runs on the machine) map it into memory instead of
        decoding the file again.  It takes the decoded columns' size on disk (4 bytes an
        int32 token), unbounded: :func:`lodarrow.clear_decoded_cache` empties it.  Only for a
        Parquet source (or a mixture with one).

    Returns
    -------
    BatchLoader
        An iterable of dicts (the arrays of :func:`lodarrow.collate`, plus ``rows``, the
        batch's sequences, and the extra columns); ``len`` is the epoch's steps (of this
        rank; after an elastic resume, in the current world);
        :meth:`BatchLoader.torch` gives a ``torch.utils.data.IterableDataset``.

    Raises
    ------
    FileNotFoundError
        If a source path, or a file a directory or glob names, does not exist.
    TypeError
        If an argument has the wrong type (the message names it), or a column's type differs
        across files with no lossless conversion.
    ValueError
        If a value does not fit (the message names the argument), a sequence is over-long
        under ``oversize="error"``, a null row under ``nulls="error"``, a 64-bit column
        for ``to="jax"`` without x64, too few sequences for the ranks, or none at all (an
        empty source, or every sequence left out by ``nulls`` / ``oversize="drop"``).

    See Also
    --------
    sequence_lengths : The lengths the plan is made from, read without the values.
    batch_plan, collate : The plan and the collation of one batch, on their own.
    mix : Several corpora in planned proportions, as one source.
    BatchLoader : The loader returned: ``set_epoch``, ``state_dict``, ``statistics``,
        ``torch``.

    Examples
    --------
    Without shuffling or bucketing the batches follow the source's order, each within
    ``max_tokens`` slots once padded (``[4]`` and ``[5, 6]`` padded to width 2 take 4):

    >>> import pyarrow as pa, lodarrow as la
    >>> table = pa.table({"ids": [[1, 2, 3], [4], [5, 6], [7]], "label": [0, 1, 0, 1]})
    >>> loader = la.batch_loader(table, "ids", max_tokens=4, extra_columns=["label"],
    ...                          shuffle=False, bucket=False)
    >>> for batch in loader:
    ...     print(batch["values"].tolist(), batch["label"].tolist())
    [[1, 2, 3]] [0]
    [[4, 0], [5, 6]] [1, 0]
    [[7]] [1]

    Bucketing (``bucket=True``, the default) sorts each block by length before cutting it
    into batches, so sequences of similar lengths share a batch and need no padding here;
    with ``shuffle=False`` the batches then come shortest first:

    >>> loader = la.batch_loader(table, "ids", max_tokens=4, extra_columns=["label"],
    ...                          shuffle=False)
    >>> for batch in loader:
    ...     print(batch["values"].tolist(), batch["label"].tolist())
    [[4], [7]] [1, 1]
    [[5, 6]] [0]
    [[1, 2, 3]] [0]
    """
    select = Selection(batch_size=batch_size, max_tokens=max_tokens, level=level,
                       extra_columns=extra_columns, shuffle=shuffle, seed=seed,
                       drop_last=drop_last, num_replicas=num_replicas, rank=rank,
                       balance=balance, alpha=alpha, oversize=oversize, nulls=nulls,
                       bucket=bucket, window=window, row_groups=row_groups, fn=_FN)
    shape = BatchShape(mode, cost, row_length, split=select.oversize == "split",
                       num_rows=num_rows, pad_to_multiple_of=pad_to_multiple_of,
                       pad_widths=pad_widths, num_segments=num_segments, pad_value=pad_value,
                       separator=separator, remainder=remainder, token_arrays=token_arrays,
                       fn=_FN)
    deliver = Delivery(to=to, prefetch=prefetch, progress=progress, fn=_FN)
    select.bind(shape)
    from lodarrow._tables._data_cache import data_cache
    from lodarrow._tables._decoded_cache import decoded_cache as decoded_cache_of
    from lodarrow._tables._filesystems import as_filesystem
    from lodarrow._tables._lengths_store import check_cache_dir

    # where the source lives and where its lengths and bytes are kept: not planning arguments
    # (a state saved on one filesystem resumes on a copy of the corpus on another)
    cache_dir = check_cache_dir(cache_dir, _FN)
    return BatchLoader(source, column, select, deliver,
                       filesystem=as_filesystem(filesystem, _FN), cache_dir=cache_dir,
                       data_cache=data_cache(cache_bytes, cache_dir, _FN),
                       decoded_cache=decoded_cache_of(decoded_cache, cache_dir, _FN))


class BatchLoader:
    """An iterable of training batches, made by :func:`lodarrow.batch_loader`.

    Iterating gives this rank's batches of the current epoch from the cursor on (the steps
    already received are skipped without being read); :meth:`set_epoch`,
    :meth:`state_dict` and :meth:`load_state_dict` move the cursor; ``len`` is the epoch's
    steps on this rank; :meth:`statistics` says what the epoch's plan does;
    :meth:`~BatchLoader.torch` gives a PyTorch ``IterableDataset`` (torchdata's ``StatefulDataLoader`` protocol
    included).  Make one with :func:`lodarrow.batch_loader`, not by calling the class.

    See Also
    --------
    batch_loader : Make a loader (its parameters are the loader's options).
    mix : Several corpora in planned proportions, as one source of a loader.

    Examples
    --------
    >>> import pyarrow as pa, lodarrow as la
    >>> table = pa.table({"ids": [[1, 2, 3], [4], [5, 6], [7]]})
    >>> loader = la.batch_loader(table, "ids", batch_size=2, seed=0)
    >>> isinstance(loader, la.BatchLoader), len(loader)
    (True, 2)
    >>> loader.set_epoch(1)
    >>> for batch in loader:    # the first step of epoch 1, then a break
    ...     break
    >>> batch["rows"], loader.state_dict()["cursor"]
    (array([1, 3]), 1)
    >>> resumed = la.batch_loader(table, "ids", batch_size=2, seed=0)
    >>> resumed.load_state_dict(loader.state_dict())
    >>> [b["rows"].tolist() for b in resumed]    # the rest of epoch 1
    [[2, 0]]
    """

    def __init__(self, source, column, select, deliver, *, filesystem=None, cache_dir=None,
                 data_cache=None, decoded_cache=None):
        self.select, self.shape, self.deliver = select, select.shape, deliver
        self._filesystem, self._cache_dir = filesystem, cache_dir
        self._data_cache, self._decoded_cache = data_cache, decoded_cache
        # epoch, cursor, legs (segments): read and written through it alone (_resume.Position)
        self.position = Position(self.select.num_replicas)
        self._plans = {}
        self._dropped_nulls = self._oversize_dropped = 0
        self._datasets = weakref.WeakSet()     # torch datasets to tell of a new position
        self._sep = None                       # blocks: the separator's value row
        self._mix = None                       # a Mixture: its counts, each source's members
        self._column_print = None              # a mixture's columns per source, where given
        self._mixes = {}                       # EpochMix of the epochs planned
        if isinstance(source, Mixture):
            src = self._mixture_source(source, column)
        elif is_parquet_source(source):
            src = ParquetSource(source, column, self.select, _FN, filesystem=filesystem,
                                cache=data_cache, cache_dir=cache_dir, decoded=decoded_cache)
        elif is_ray_source(source):
            if self.select.num_replicas != 1:
                raise ValueError(f"{_FN}: num_replicas must be 1 for a Ray source (Ray Data "
                                 f"shards it: streaming_split / get_dataset_shard)")
            src = RaySource(source, column, self.select.level, self.select.window,
                            self.select.extra_columns, _FN, nulls=self.select.read_nulls)
        else:
            src = TableSource(source, column, self.select, _FN)
        if decoded_cache is not None and not isinstance(src, ParquetSource):
            raise ValueError(f"{_FN}: decoded_cache=True keeps the row groups of Parquet files "
                             f"decoded, and this source has none (it is read as it is held); "
                             f"leave decoded_cache out")
        self._use(src)
        self._ahead = ReadAhead(self._read) if src.kind == "blocks" else None
        self._producer = self._new_producer()  # the delivery stage (_produce)
        self._check_lengths()
        self._source_print = fingerprint(self.lengths, src.file_list())
        self.plan()  # epoch 0's plan: what the arguments cannot do fails here

    # --- the source -------------------------------------------------------------------------
    def _use(self, src):
        """Take what the plan and the checks need from the source ``src`` (one of
        :mod:`lodarrow._training._source`'s kinds); a separator joins its sequences."""
        self._src = src
        self.column, self._label = src.column, src.label
        self._row_nulls, self._value_nulls = src.row_nulls, src.value_nulls
        self._extra_specs = src.extra_specs
        self._pad = self._pad_for(src.empty)
        self._sep = self._separator_for(src.empty)
        self.lengths = src.lengths
        if self._sep is not None:  # blocks: each sequence ends with the separator
            src.add_separator(self._sep)
            self.lengths = self.lengths + 1
        self._check_to(src.empty.values.dtype)
        self._nbytes = src.nbytes
        if self._mix is not None:
            self._mix_counts = self._mix.plan_counts(self.lengths, self._members, _FN)
            n = len(self.lengths)
            self._src_of = np.zeros(n, np.int64)
            self._pos_in_src = np.zeros(n, np.int64)
            for k, m in enumerate(self._members):
                self._src_of[m] = k
                self._pos_in_src[m] = np.arange(len(m), dtype=np.int64)

    def _mixture_source(self, mixture, column):
        """A mixture's sources side by side (Parquet files listed together, or tables
        concatenated), each source's sequences among them (its members)."""
        columns = mixture.columns(column, _FN)
        if mixture.on_parquet(_FN):
            parts = MixedParts(mixture, columns, self.select.extra_columns, _FN,
                               filesystem=self._filesystem, cache=self._data_cache,
                               decoded=self._decoded_cache)
            src = ParquetSource(None, None, self.select, _FN, parts=parts,
                                cache_dir=self._cache_dir)
            members = members_of_parts(parts.parts, src.part_starts, parts.owner,
                                       len(mixture.names))
            columns = parts.own
        else:
            table, name, sizes, row_starts, columns = mixed_table(
                mixture, columns, self.select.extra_columns, self.select.level, _FN)
            edges = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
            src = TableSource(table, name, self.select, _FN,
                              mixture=(mixture.names, row_starts, edges))
            members = [np.arange(a, b, dtype=np.int64) for a, b in zip(edges[:-1], edges[1:])]
        src.label = f"the mixture of {', '.join(map(repr, mixture.names))}"
        self._mix, self._members = mixture, members
        if isinstance(column, dict):  # each source's own column: a saved state names them
            self._column_print = dict(zip(mixture.names, columns))
        return src

    # the source's parts as earlier versions kept them (read by tests and benchmarks)
    _parts = property(lambda self: getattr(self._src, "parts", None))
    _part_starts = property(lambda self: self._src.part_starts)
    _seqs = property(lambda self: getattr(self._src, "seqs", None))

    def _epoch_mix(self, epoch=None):
        """The mixture's epoch ``epoch`` (default: the current one) as a virtual source
        (:class:`EpochMix`)."""
        epoch = self.epoch if epoch is None else epoch
        em = self._mixes.get(epoch)
        if em is None:
            if len(self._mixes) > 2:
                self._mixes.clear()
            em = epoch_mix(self._mix_counts, self._members, self.lengths, self._src.part_starts,
                           self.select.seed, epoch)
            self._mixes[epoch] = em
        return em

    def _source_rows(self, rows, epoch=None):
        """The sources' positions of plan positions (a mixture's plan is of its epoch)."""
        return rows if self._mix is None else self._epoch_mix(epoch).vmap[rows]

    def _dropped(self):
        """``(nulls, oversize)``: the sequences of the epoch left out before planning."""
        if self._mix is None or self._keep is None:
            return self._dropped_nulls, self._oversize_dropped
        vmap = self._epoch_mix().vmap
        out = vmap[~self._keep[vmap]]
        nulls = int(np.count_nonzero(np.isin(out, self._null_seqs)))
        return nulls, len(out) - nulls

    def _fingerprint(self, column):
        """The arguments that decide the plan and the batches (a saved state names them)."""
        out = {"column": column, **self.select.fingerprint(), "cost": self.shape.cost,
               "mode": self.shape.mode, "row_length": self.shape.row_length,
               "shape": self.shape.fingerprint()}
        if self._mix is not None:
            out["mix"] = self._mix.spec()
        return out

    def _separator_for(self, seqs):
        """``separator`` as one value row of the column's dtype (None: none)."""
        if self.shape.separator is None:
            return None
        if seqs.on_gpu:
            raise ValueError(f"{_FN}: separator= needs the values on the host (a GPU "
                             f"LoDTensor: append the separator to its sequences first)")
        return coerce_pad_value(self.shape.separator, seqs.values.dtype,
                                seqs.values.shape[1:], name=f"{_FN}: separator")

    def _pad_for(self, seqs):
        return coerce_pad_value(self.shape.pad_value, seqs.values.dtype, seqs.values.shape[1:],
                                name=f"{_FN}: pad_value")

    def _check_to(self, value_dtype):
        if self.deliver.to != "jax":
            return
        dtypes = {self.column or "the source": value_dtype}
        dtypes.update({e.name: e.dtype for e in self._extra_specs})
        check_jax_x64(dtypes, _FN)

    def _check_lengths(self):
        """Nulls and over-long sequences, known from the lengths pass: before any batch.

        A null row, or a row holding a null value inside its lists, is an error under
        ``nulls="error"`` naming where it is; ``"drop"`` leaves both out; ``"empty"`` reads a
        null row as an empty sequence, while a null value (no number to read) stays an
        error.  A sequence that no batch holds within ``max_tokens`` after padding (or that no
        width of ``pad_widths``, no row of ``row_length`` holds) follows ``oversize``.
        :func:`lodarrow._training._epoch.left_out` decides (through :meth:`Selection.left_out`);
        the loader words its refusal, naming where the row is.
        """
        sel = self.select
        out = sel.left_out(self.lengths, self._row_nulls, self._value_nulls)  # the decision
        if out.refused is not None:
            raise ValueError(self._refusal_message(out.refused))
        self._keep, self._base_rows, self._null_seqs = out.keep, out.base_rows, out.null_seqs
        self._dropped_nulls, self._oversize_dropped = out.nulls, out.oversize
        if len(self.lengths) == 0 or (self._base_rows is not None and not len(self._base_rows)):
            raise ValueError(self._nothing_message())

    def _nothing_message(self):
        """Why the source gives no sequence to deliver (an empty corpus is refused when the
        loader is made, never a loader of 0 steps)."""
        head = f"{_FN}: {self._label} gives no sequence to deliver"
        if len(self.lengths) == 0:
            what = ("0 rows" if self.select.level == 0 else
                    f"no sequence at level={self.select.level}")
            return f"{head}: it holds {what} (an empty file, table or filter?)"
        why = []
        if self._dropped_nulls:
            why.append(f"{self._dropped_nulls} null (nulls='drop')")
        if self._oversize_dropped:
            why.append(f"{self._oversize_dropped} over-long (oversize='drop')")
        return (f"{head}: every one of its {len(self.lengths)} sequence(s) is left out "
                f"({', '.join(why)})")

    def _refusal_message(self, refused):
        """The error for what :func:`lodarrow._training._epoch.left_out` refused."""
        kind, *args = refused
        if kind == "oversize":
            return self._oversize_message(*args)
        row, count = args
        sel, value_rows = self.select, self._value_nulls[0]
        if kind == "null_row":
            advice = ("pass nulls='empty' to read them as empty sequences or nulls='drop' to "
                      "leave them out" if not len(value_rows) else
                      f"pass nulls='drop' to leave them out (the column also holds null "
                      f"values inside {len(value_rows)} row(s), which nulls='empty' cannot "
                      f"read)")
            return (f"{_FN}: {self._src.where(row)} of column {self.column!r} is null "
                    f"({count} null row(s)); {advice}")
        advice = ("or pass nulls='drop' to leave those rows out" if sel.nulls != "drop"
                  else f"(at level={sel.level} which sequences of the row hold it is not "
                       f"known without reading the values, so nulls='drop' cannot leave "
                       f"them out)")
        return (f"{_FN}: {self._src.where(row)} of column {self.column!r} holds a "
                f"null value inside its list ({count} such row(s)); a "
                f"batch has no number to put there: fill the nulls first (e.g. "
                f"pyarrow.compute.fill_null on the list's values) {advice}")

    def _oversize_message(self, k, count, unplaceable):
        """Why sequence ``k`` cannot be delivered within the limits (``count`` such)."""
        shape, sel = self.shape, self.select
        length = int(self.lengths[k])
        head = f"{_FN}: {self._src.name_sequence(k)} has {length} tokens"
        if unplaceable and shape.mode == "packed_rows":
            return (f"{head}, more than row_length={shape.row_length} ({count} such "
                    f"sequence(s)); oversize='drop' leaves them out, 'split' cuts them into rows")
        if unplaceable:
            return (f"{head}, more than the widest of pad_widths={shape.collate.pad_widths} "
                    f"({count} such sequence(s)); oversize='drop' leaves them out")
        slots = int(shape.alone(np.array([length]))[0])
        padded = "" if slots == length else (f"; a batch of it alone takes {slots} slots "
                                             f"after padding ({shape.describe()})")
        return (f"{head}{padded}, more than max_tokens={sel.max_tokens} ({count} such "
                f"sequence(s)); oversize='drop' leaves them out, oversize='alone' gives each "
                f"a batch of its own")

    # --- the plan ---------------------------------------------------------------------------
    def _epoch_plan(self, epoch=None):
        """The plan of the epoch's current leg, and the epoch step it starts at;
        ``epoch``: that epoch's plan from its start instead (what ``set_epoch`` makes)."""
        args = self.select.plan_args(self._src.cell_rows(self.select))
        segments = self.position.segments
        if epoch is None:
            epoch = self.position.epoch
        else:
            segments = [[self.select.num_replicas, 0]]
        if self._src.kind == "stream":  # one rank (Ray shards): one leg, blocks in order
            key = ("ray", epoch)
            if key not in self._plans:
                if len(self._plans) > 4:
                    self._plans.clear()
                self._plans[key] = ray_epoch_plan(self.lengths, self._src.block_starts, args,
                                                  self.select.seed, epoch, self._keep)
            return self._plans[key], 0
        if self._mix is None:
            return segment_plan(self.lengths, args, segments, self.select.seed, epoch,
                                self._src.part_starts, self._plans, base_rows=self._base_rows,
                                pieces=self.position.pieces)
        em = self._epoch_mix(epoch)  # the plan is of the epoch's virtual source
        base = None if self._keep is None else np.flatnonzero(self._keep[em.vmap])
        return segment_plan(em.lengths, args, segments, self.select.seed, epoch,
                            em.part_starts, self._plans, base_rows=base,
                            part_groups=em.part_source, pieces=self.position.pieces)

    def plan(self):
        """This rank's :class:`BatchPlan` for the current epoch.

        Returns
        -------
        BatchPlan
            The epoch's batches on this rank (sequence positions of the whole source;
            ``windows`` is each batch's block), from the start of the epoch's current leg
            (after a change of world size: the steps planned for this world).
        """
        from lodarrow._training._batching import rank_plan

        plan, _ = self._epoch_plan()
        out = rank_plan(plan, self.select.rank, seed=self.select.seed, epoch=self.epoch)
        out.indices = self._source_rows(out.indices)
        return out

    def __len__(self):
        """The steps of the whole current epoch on this rank, as ``len`` of a PyTorch
        ``DataLoader`` (and of torchdata's ``StatefulDataLoader`` after a resume).

        The cursor does not change it: after :meth:`load_state_dict` or
        ``set_epoch(epoch, start_step)`` mid-epoch, iterating gives the ``len(loader) -
        cursor`` steps left (``state_dict()["cursor"]``).  After an elastic resume it counts
        the steps received before the world changed plus this world's steps of the rest.
        """
        plan, base = self._epoch_plan()
        return base + plan.steps

    # --- epochs and the cursor --------------------------------------------------------------
    def set_epoch(self, epoch, start_step=0):
        """Use epoch ``epoch``'s plan from now on, from step ``start_step`` (call it on every
        rank, as with ``DistributedSampler``).

        Parameters
        ----------
        epoch : int
            The epoch, from 0: with the same ``seed``, the same epoch is the same plan.
        start_step : int, default 0
            A counter the training loop keeps (the steps of this epoch it received, as with
            any ``DataLoader``): iteration resumes with the first step not yet received, on
            the same ``num_replicas``.

        Raises
        ------
        TypeError
            If ``epoch`` or ``start_step`` is not an integer (a bool included).
        ValueError
            If ``epoch`` or ``start_step`` is negative, or ``start_step`` is past the
            epoch's steps on this rank (``len(loader)`` after the call).
        """
        if isinstance(epoch, (bool, np.bool_)):
            raise TypeError("set_epoch: epoch must be an integer, got bool")
        epoch = as_int(epoch, "set_epoch: epoch")
        if epoch < 0:
            raise ValueError(f"set_epoch: epoch must be >= 0, got {epoch}")
        if isinstance(start_step, (bool, np.bool_)):
            raise TypeError("set_epoch: start_step must be an integer, got bool")
        start_step = as_nonnegative_int(start_step, "set_epoch: start_step")
        self.position.reset(epoch, self.select.num_replicas, 0)
        if start_step:
            steps = len(self)  # the cursor is 0 here: the whole epoch
            if start_step > steps:
                raise ValueError(f"set_epoch: start_step={start_step} is past the epoch's "
                                 f"{steps} steps")
        self.position.reset(epoch, self.select.num_replicas, start_step)
        self._tell_datasets()

    def state_dict(self, steps=None):
        """The loader's position as a small JSON-serialisable dict (docs/training.md#resuming).

        Parameters
        ----------
        steps : int, optional
            The steps of the current epoch the training loop received, when batches reach it
            through a ``DataLoader`` with workers (which this object does not see); default:
            what this object delivered itself.

        Returns
        -------
        dict
            ``format``, ``plan_version``, ``args`` (the planning arguments), ``source`` (the
            source's fingerprint: sequences, tokens, a digest of the lengths, files), ``seed``,
            ``epoch``, ``cursor``, ``num_replicas`` and ``segments``: the epoch's legs, one
            ``[num_replicas, first_step]`` pair per world size it ran on, with the step that
            world began at (docs/training.md#resuming).

        Raises
        ------
        TypeError
            If ``steps`` is not an integer.
        ValueError
            If ``steps`` is negative or past the current epoch's steps on this rank
            (``len(loader)``).
        """
        cursor = self.position.cursor
        if steps is not None:
            cursor = as_nonnegative_int(steps, "state_dict: steps")
            total = len(self)
            if cursor > total:
                raise ValueError(f"state_dict: steps={cursor} is past the epoch's {total} steps "
                                 f"(steps counts the batches of the current epoch the loop "
                                 f"received, not a global step)")
        at = self.position.state(cursor, self.shape.mode in ("packed_rows", "blocks"))
        state = {"format": FORMAT, "plan_version": PLAN_VERSION,
                 "args": self._fingerprint(self._column_print or self.column),
                 "source": dict(self._source_print), "seed": self.select.seed,
                 "epoch": at.pop("epoch"), "cursor": at.pop("cursor"),
                 "num_replicas": self.select.num_replicas, "segments": at.pop("segments")}
        state.update(at)  # "pieces": the world changes planned the tokens left (_resume)
        return state

    def load_state_dict(self, state, strict=True):
        """Resume from :meth:`state_dict`: the next batch is the first one not yet received.

        On another ``num_replicas`` than at the save, the sequences not yet received are
        planned again for this world (an elastic resume): across the runs every sequence of
        the epoch is still delivered exactly once, with equal steps on every rank.

        Parameters
        ----------
        state : dict
            What :meth:`state_dict` returned (through JSON or not).
        strict : bool, default True
            A state saved for another source or other planning arguments is a ``ValueError``
            naming every difference; False resumes anyway, at the saved epoch and step of
            this loader's plan, with no exactly-once guarantee (a ``UserWarning`` lists the
            differences).

        Raises
        ------
        TypeError
            If ``state`` is not a dict, or ``strict`` not a bool.
        ValueError
            If ``state`` is not what :meth:`state_dict` returns (another ``format``, a key
            missing, a malformed ``cursor`` or ``segments``), its cursor is past the saved
            epoch's steps, or (with ``strict=True``) it was saved for another source,
            ``seed``, planning arguments or plan version: the message names every
            difference.
        """
        strict = as_flag(strict, "load_state_dict: strict")
        expected = self.state_dict()
        problems = check_state(state, expected, strict)
        epoch = as_nonnegative_int(state["epoch"], "load_state_dict: state['epoch']")
        cursor = as_nonnegative_int(state["cursor"], "load_state_dict: state['cursor']")
        segments = state["segments"]
        if (not isinstance(segments, list) or not segments or any(
                not isinstance(s, (list, tuple)) or len(s) != 2 for s in segments)):
            raise ValueError("load_state_dict: state['segments'] must be a list of "
                             "[num_replicas, first_step] pairs")
        segments = [[as_positive_int(r, "load_state_dict: segments"),
                     as_nonnegative_int(f, "load_state_dict: segments")] for r, f in segments]
        # a state saved after a world change without "pieces" planned what was left whole
        # (a lodarrow before token pieces): its later worlds are planned so again
        pieces = len(segments) == 1 or bool(state.get("pieces"))
        if problems:
            warnings.warn(f"load_state_dict(strict=False): resuming although "
                          f"{'; '.join(problems)}", UserWarning, stacklevel=2)
            segments, pieces = [[self.select.num_replicas, 0]], True
        elif segments[-1][0] != self.select.num_replicas:
            segments.append([self.select.num_replicas, cursor])
        self.position.restore(epoch, cursor, segments, pieces)
        self._tell_datasets()
        plan, base = self._epoch_plan()
        if cursor - base > plan.steps:
            raise ValueError(f"load_state_dict: the saved cursor {cursor} is past the epoch's "
                             f"{base + plan.steps} steps")

    @property
    def epoch(self):
        """The current epoch (:meth:`set_epoch`, :meth:`load_state_dict`)."""
        return self.position.epoch

    def _tell_datasets(self):
        for dataset in list(self._datasets):
            dataset._publish()

    def __getstate__(self):
        # what a DataLoader worker gets (pickled under the spawn start method): no caches
        state = dict(self.__dict__)
        state["_datasets"] = None
        state["_plans"] = {}
        state["_mixes"] = {}
        state["_ahead"] = state["_producer"] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._datasets = weakref.WeakSet()
        self._ahead = ReadAhead(self._read) if self._src.kind == "blocks" else None
        self._producer = self._new_producer()

    def statistics(self):
        """What the current epoch's plan does, as data (docs/training.md#statistics).

        Returns
        -------
        dict
            ``steps``; per rank ``sequences``, ``tokens`` and ``padded_tokens``;
            ``padding`` (the share of padding in padded batches); ``dropped`` (sequences left
            out, by reason: ``nulls``, ``oversize``, ``drop_last``); ``step_balance``
            (max/mean per step of tokens and of compute, median and worst); ``decodes`` (for
            a Parquet source: how many times the ranks decode each row group in the epoch,
            one reader per rank).
        """
        from lodarrow._training._stats import plan_statistics

        plan, base = self._epoch_plan()
        row_groups = mixture = None
        if self._src.part_starts is not None:
            row_groups = (self._src.part_starts, self._source_rows)
        if self._mix is not None:
            mixture = (self._mix.names, self._mix_counts, self._epoch_mix())
        return plan_statistics(plan, base, self.shape, epoch=self.epoch,
                               dropped=self._dropped(), row_groups=row_groups,
                               mixture=mixture)

    # --- iteration ----------------------------------------------------------------------------
    def __iter__(self):
        self._note_pass()
        return self._deliver()

    def _note_pass(self):
        """A pass after a whole pass, with no set_epoch or load_state_dict between, is the
        same batches again (from where the epoch was set to start), with a warning, as with
        DataLoader workers; a pass after one broken off goes on from the cursor."""
        at = self.position
        if at.begin_pass(len(self)) and not at.warned:
            at.warned = True
            warnings.warn(f"{_FN}: epoch {at.epoch} is iterated again from step "
                          f"{at.start}: the same batches as before (call "
                          f"set_epoch(epoch) before each epoch, or load_state_dict to "
                          f"resume)", UserWarning, stacklevel=3)

    def _deliver(self):
        """This process's iteration: batches in plan order, made ahead in a thread; the
        cursor counts what was handed out."""
        plan, base = self._epoch_plan()
        start = self.position.cursor - base
        if start >= plan.steps:
            return
        bar = self.deliver.bar(plan.steps - start, self._nbytes, plan.steps)
        at = self.position
        share = self._nbytes / max(plan.steps, 1)
        ok = False
        made = self._produce(plan, range(start, plan.steps))
        if self.deliver.prefetch:
            made = prefetched(made, self.deliver.prefetch)
        try:
            if not bar.enabled:  # the per-batch path, as short as it goes
                for step, batch, _ in made:
                    at.cursor = base + step + 1
                    yield batch
            else:
                rank = self.select.rank
                for step, batch, tokens in made:
                    at.cursor = base + step + 1
                    bar.step_done(int(plan.hi[rank, step] - plan.lo[rank, step]), share,
                                  tokens)
                    yield batch
            ok = True
        finally:
            made.close()
            bar.close(ok)

    def _produce(self, plan, steps, next_first=0, hand_over=None):
        """The delivery stage's ``(step, batch, tokens)`` for each step of ``steps`` (a range
        of this rank's steps of ``plan``, the current epoch's): :meth:`Producer.produce`,
        given the epoch's mixture choice and, to read the next pass's first block ahead from
        its step ``next_first`` (None: not), the next epoch's plan; ``hand_over``: a
        ``DataLoader`` worker's ring (:meth:`Producer.handing_over`)."""
        producer = self._producer
        if hand_over is not None:
            producer = producer.handing_over(hand_over)
        vmap = None if self._mix is None else self._epoch_mix().vmap
        return producer.produce(plan, steps, next_first, vmap=vmap, next_plan=self._next_plan)

    def _next_plan(self):
        """``(plan, vmap)`` of the pass likely next: epoch ``epoch + 1`` from its start (what
        ``set_epoch(epoch + 1)`` makes), its mixture's choice (None: no mixture)."""
        epoch = self.epoch + 1
        plan, _ = self._epoch_plan(epoch)
        return plan, None if self._mix is None else self._epoch_mix(epoch).vmap

    def _read(self, rows, stop=None, shared=None):
        """A block's sequences ``rows`` read from the source (``kind`` "blocks":
        :meth:`~lodarrow._training._parquet_source.ParquetSource.read`), in this thread or
        read ahead in another (through :attr:`_ahead`, which holds it weakly)."""
        return self._src.read(rows, stop, shared)

    def _new_producer(self):
        """The delivery stage's maker of this loader's batches (:mod:`_produce`)."""
        mix = None if self._mix is None else (self._pos_in_src, self._src_of)
        return Producer(self._src, self.shape, self.select.rank, self._pad,
                        extra_specs=self._extra_specs, lengths=self.lengths,
                        to=self.deliver.to, prefetch=self.deliver.prefetch, ahead=self._ahead,
                        mix=mix)

    # --- PyTorch ------------------------------------------------------------------------------
    def torch(self):
        """This loader as a ``torch.utils.data.IterableDataset``.

        Give it to ``DataLoader(dataset, batch_size=None, num_workers=k)``: worker ``i`` makes
        steps ``i, i + k, ...``, each worker runs its kernels on one thread (lodarrow sets
        ``LODARROW_NUM_THREADS=1`` in it), and the ``DataLoader`` hands them out in plan order.
        ``set_epoch`` reaches persistent workers too; the dataset follows torchdata's
        ``StatefulDataLoader`` protocol (``state_dict`` / ``load_state_dict``).  See
        docs/training.md#loader.

        Returns
        -------
        torch.utils.data.IterableDataset
            This loader's batches for a ``DataLoader``, in plan order whatever the number of
            workers; :meth:`set_epoch` and :meth:`load_state_dict` on the loader reach it.

        Raises
        ------
        ImportError
            If torch is not installed (the ``torch`` extra).
        """
        from lodarrow._interop._optional import import_optional
        from lodarrow._training._torch import torch_dataset

        torch = import_optional("torch", "BatchLoader.torch")
        return torch_dataset(torch, self, DatasetLink(self))


class DatasetLink:
    """What a PyTorch dataset over a loader (:mod:`lodarrow._training._torch`) uses of it
    beyond its public methods (``state_dict``, ``load_state_dict``, ``set_epoch``,
    ``position``, ``len``): the one internal interface between the two modules, so that the
    dataset reads no private member of :class:`BatchLoader`.  Pickled with the loader into
    ``DataLoader`` workers started by spawn or forkserver."""

    __slots__ = ("loader",)

    def __init__(self, loader):
        self.loader = loader

    def __reduce__(self):
        return DatasetLink, (self.loader,)

    def watch(self, dataset):
        """Tell ``dataset`` (its ``_publish()``) of every new position (``set_epoch``,
        ``load_state_dict``); held weakly."""
        self.loader._datasets.add(dataset)

    def epoch_plan(self):
        """``(plan, base)``: the plan of the epoch's current leg (every rank's batches)
        and the epoch step it starts at."""
        return self.loader._epoch_plan()

    def share_decoding(self, root, worker, num_workers):
        """In ``DataLoader`` worker ``worker`` (of ``num_workers``): hand the row groups it
        decodes to the other workers, and take theirs, through the folder ``root``
        (:mod:`._exchange`), for a Parquet source without a decoded cache (which shares them
        already); once a process."""
        from lodarrow._training._exchange import Exchange

        parts = self.loader._parts
        children = [p for p in getattr(parts, "children", [parts])
                    if hasattr(p, "exchange") and p.decoded is None]
        if not children or any(p.exchange is not None for p in children):
            return
        exchange = Exchange(root, worker, num_workers)
        for p in children:
            p.exchange = exchange

    def produce(self, plan, steps, next_first=0, hand_over=None):
        """``(step, batch, tokens)`` for each step of ``steps`` of ``plan``, each block read
        once; ``next_first``: the next pass's first step to read ahead (None: none);
        ``hand_over``: each host batch, as NumPy arrays, given to ``hand_over(batch)`` (a
        worker's ring to the main process), which returns what is delivered instead."""
        return self.loader._produce(plan, steps, next_first, hand_over)

