"""The hand-written baseline of benchmarks/loaders.py ("NumPy/Arrow loop"): what a competent
engineer writes with NumPy and pyarrow for each job, one process, torch tensors out.

A source is a ``pyarrow.Table`` (one block: every row) or a Parquet file, read a block of about
``row_groups`` row groups at a time (as many blocks as whole ``row_groups`` fit, the row groups
shared evenly), the row groups in a random order.  Each epoch shuffles the rows of a
block, sorts them by length inside windows of ``window`` rows (None: the whole block), cuts
batches there (``batch_size`` sequences; "segments": at most ``max_tokens`` tokens;
"packed_rows": best-fit decreasing into rows of ``row_length``, ``num_rows`` rows a batch) and
shuffles the block's batches.  Collation copies each sequence with one NumPy slice into the
batch's preallocated arrays (cheaper than one fancy-index gather a batch at these sizes).
"""

import bisect

import numpy as np
import pyarrow.parquet as pq
import torch


def list_parts(col):
    """(offsets from 0, flat values) of a list column as NumPy: the values a view of Arrow's
    buffer, copied only where the column has several chunks (``read_row_groups`` of several
    row groups returns one)."""
    if hasattr(col, "num_chunks"):
        col = col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
    off = col.offsets.to_numpy()
    return off - off[0], col.flatten().to_numpy()


def pack_rows(lengths, row_length):
    """Best-fit decreasing: each sequence, longest first, into the open row it fills best.
    Returns each sequence's (row, offset)."""
    row, off, used, free, ids = (np.empty(len(lengths), np.int64), np.empty(len(lengths),
                                 np.int64), [], [], [])     # free: open rows' room, sorted
    for i in np.argsort(-lengths, kind="stable").tolist():
        n = int(lengths[i])
        k = bisect.bisect_left(free, n)
        if k < len(free):
            del free[k]
            r = ids.pop(k)
        else:
            r = len(used)
            used.append(0)
        row[i], off[i] = r, used[r]
        used[r] += n
        if used[r] < row_length:
            k = bisect.bisect_left(free, row_length - used[r])
            free.insert(k, row_length - used[r])
            ids.insert(k, r)
    return row, off


class Loop:
    """``for batch in loop.epoch(e)``: epoch ``e``'s batches (dicts of torch tensors)."""

    def __init__(self, source, column, mode, *, batch_size=32, max_tokens=32768,
                 row_length=4096, num_rows=8, window=1600, row_groups=4, seed=0):
        self.mode, self.bs, self.budget, self.L, self.per = (mode, batch_size, max_tokens,
                                                             row_length, num_rows)
        self.window, self.row_groups, self.seed, self.column = window, row_groups, seed, column
        if isinstance(source, (str, bytes)) or hasattr(source, "__fspath__"):
            self.file, self.table = pq.ParquetFile(source), None
        else:
            self.file, self.table = None, list_parts(source.column(column))

    def blocks(self, rng):
        if self.file is None:
            yield self.table
            return
        order = rng.permutation(self.file.num_row_groups)   # blocks of about row_groups
        for part in np.array_split(order, max(1, len(order) // self.row_groups)):
            yield list_parts(self.file.read_row_groups(part.tolist(),
                                                       columns=[self.column]).column(0))

    def cut(self, rows, lengths):
        """A window's rows (sorted by length) as batches: (rows, rows' (row, offset) or None)."""
        if self.mode == "packed_rows":
            row, off = pack_rows(lengths, self.L)
            by = np.argsort(row, kind="stable")
            edges = np.searchsorted(row[by], np.arange(0, row.max() + 1 + self.per, self.per))
            return [(rows[by[a:b]], (row[by[a:b]] % self.per, off[by[a:b]]))
                    for a, b in zip(edges[:-1], edges[1:]) if b > a]
        if self.mode == "segments":    # greedy: as many sequences as fit the budget
            ends, edges = np.cumsum(lengths), [0]
            while edges[-1] < len(rows):
                edges.append(max(int(np.searchsorted(ends, ends[edges[-1]] - lengths[
                    edges[-1]] + self.budget, "right")), edges[-1] + 1))
            return [(rows[a:b], None) for a, b in zip(edges[:-1], edges[1:])]
        return [(rows[k:k + self.bs], None) for k in range(0, len(rows), self.bs)]

    def epoch(self, epoch, start=0, every=1, first=0):
        """Epoch ``epoch``'s batches from batch ``start`` (those before are planned, not made);
        of those, every ``every``-th from the ``first``-th (a DataLoader worker's share)."""
        rng, seen = np.random.default_rng([self.seed, epoch]), 0
        for offsets, values in self.blocks(rng):
            lengths = np.diff(offsets)
            perm, batches = rng.permutation(len(lengths)), []
            for w in range(0, len(perm), self.window or len(perm)):
                rows = perm[w:w + (self.window or len(perm))]
                rows = rows[np.argsort(lengths[rows], kind="stable")]
                batches += self.cut(rows, lengths[rows])
            for k in rng.permutation(len(batches)).tolist():
                seen += 1
                if seen > start and (seen - start - 1) % every == first:
                    yield self.collate(offsets[batches[k][0]], lengths[batches[k][0]], values,
                                       batches[k][1])

    def collate(self, starts, lengths, values, place):
        return collate(self.mode, starts, lengths, values, place, size=self.budget,
                       row_length=self.L, num_rows=self.per)


_AR = np.arange(1 << 16, dtype=np.int64)  # positions 0, 1, ... to slice from


def collate(mode, starts, lengths, values, place=None, *, size=None, row_length=None,
            num_rows=None):
    """One batch: the sequences at ``starts`` (``lengths`` tokens) of ``values``; ``place``:
    packed_rows' (row, offset) of each; ``size``: the flat width of "segments".  One slice
    copy a sequence (a few microseconds each, cheaper than a fancy-index gather)."""
    t, n = torch.from_numpy, len(lengths)
    S, Ls = starts.tolist(), lengths.tolist()
    if mode == "padded":
        mask = np.arange(lengths.max()) < lengths[:, None]
        out = np.zeros(mask.shape, values.dtype)
        for i, (s, l) in enumerate(zip(S, Ls)):
            out[i, :l] = values[s:s + l]
        return {"values": t(out), "lengths": t(lengths), "attention_mask": t(mask)}
    if mode == "packed":
        cu = np.zeros(n + 1, np.int32)
        np.cumsum(lengths, out=cu[1:])
        return {"values": t(np.concatenate([values[s:s + l] for s, l in zip(S, Ls)])),
                "cu_seqlens": t(cu), "max_seqlen": int(lengths.max()),
                "position_ids": t(np.concatenate([_AR[:l] for l in Ls])),
                "seq_idx": t(np.repeat(np.arange(n, dtype=np.int32), lengths)),
                "lengths": t(lengths)}
    if mode == "segments":
        tot = int(lengths.sum())
        out, pos = np.zeros(size, values.dtype), np.zeros(size, np.int64)
        seg = np.full(size, n, np.int32)
        out[:tot] = np.concatenate([values[s:s + l] for s, l in zip(S, Ls)])
        pos[:tot] = np.concatenate([_AR[:l] for l in Ls])
        seg[:tot] = np.repeat(np.arange(n, dtype=np.int32), lengths)
        return {"values": t(out), "segment_ids": t(seg), "num_segments": n,
                "position_ids": t(pos), "lengths": t(lengths)}
    L, per = row_length, num_rows
    size = per * L
    out, pos = np.zeros(size, values.dtype), np.zeros(size, np.int64)
    seg = np.full(size, -1, np.int32)
    for i, (s, l, a) in enumerate(zip(S, Ls, (place[0] * L + place[1]).tolist())):
        out[a:a + l], pos[a:a + l], seg[a:a + l] = values[s:s + l], _AR[:l], i
    shape = (per, L)
    return {"values": t(out.reshape(shape)), "attention_mask": t((seg >= 0).reshape(shape)),
            "position_ids": t(pos.reshape(shape)), "seq_idx": t(seg.reshape(shape)),
            "lengths": t(lengths)}


class LoopDataset(torch.utils.data.IterableDataset):
    """The loop in ``DataLoader`` workers: worker ``i`` of ``k`` makes batches ``i, i + k,
    ...`` of the epoch set last (shared with persistent workers), so the ``DataLoader`` hands
    them out in the loop's order; every worker plans the whole epoch and reads every block.  A
    batch crosses as NumPy arrays pickled by value (``collate_fn`` returns them as made),
    turned into torch tensors by ``torch.from_numpy`` in the main process."""

    def __init__(self, loop):
        import multiprocessing

        super().__init__()
        self.loop = loop
        self._epoch = multiprocessing.Value("q", 0)
        self._start = multiprocessing.Value("q", 0)

    def set_epoch(self, epoch, start=0):
        self._epoch.value, self._start.value = epoch, start

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        every, first = (1, 0) if info is None else (info.num_workers, info.id)
        torch.set_num_threads(1)
        # NumPy arrays cross the pipe pickled (torch would give each tensor a shared-memory
        # segment of its own); torch.from_numpy in the main process (to_torch)
        return ({k: (v.numpy() if isinstance(v, torch.Tensor) else v) for k, v in b.items()}
                for b in self.loop.epoch(self._epoch.value, self._start.value, every, first))


def identity(batch):
    """The DataLoader's collate_fn for the loop's workers: the batch as the worker made it."""
    return batch


def to_torch(batches):
    """The worker batches' NumPy arrays as torch tensors (in the main process, no copy)."""
    for b in batches:
        yield {k: (torch.from_numpy(v) if isinstance(v, np.ndarray) else v) for k, v in b.items()}
