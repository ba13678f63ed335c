"""Benchmark workloads: float32 rows cut into geometric-length sequences (fixed seed).

As benchmarks/README.md describes: sequence lengths are geometric with mean 20 and 5% empty; 1e7
rows with D=1, 1e6 rows with D=16, and a 2-level variant (documents of sentences over the D=1
rows).  Each workload holds the raw parts (``data``, ``offsets``) plus, built lazily and cached, the
forms each library starts from: a LoDTensor, a pyarrow ``LargeListArray``, a polars Series and an
Awkward Array, all sharing the same buffers where the library allows.
"""

import functools
import math

import numpy as np

__all__ = ["SEED", "BASE_ROWS", "geometric_lengths", "Workload", "TopkWorkload", "make_workload"]

#: The one seed every workload derives from.
SEED = 20240601

#: Full-size row counts (``--quick`` divides them by 10).
BASE_ROWS = {"D=1": 10_000_000, "D=16": 1_000_000, "2-level": 10_000_000, "tiny": 10}

MEAN_LENGTH = 20.0
P_EMPTY = 0.05
OUTER_MEAN = 10.0  # sentences per document in the 2-level variant


def geometric_lengths(n_rows, rng, mean=MEAN_LENGTH, p_empty=P_EMPTY):
    """Sequence lengths summing to exactly ``n_rows``: 0 with probability ``p_empty``, else
    geometric on 1, 2, ... so that the overall mean is ``mean``."""
    if n_rows == 0:
        return np.zeros(0, dtype=np.int64)
    nonempty_mean = mean / (1.0 - p_empty)
    chunks, total = [], 0
    while total < n_rows:
        k = int(math.ceil((n_rows - total) / mean * 1.1)) + 16
        lengths = rng.geometric(1.0 / nonempty_mean, size=k).astype(np.int64)
        lengths[rng.random(k) < p_empty] = 0
        chunks.append(lengths)
        total += int(lengths.sum())
    lengths = np.concatenate(chunks)
    ends = np.cumsum(lengths)
    cut = int(np.searchsorted(ends, n_rows))  # first sequence reaching n_rows
    lengths = lengths[:cut + 1].copy()
    lengths[cut] -= int(ends[cut]) - n_rows
    return lengths


def _offsets(lengths):
    off = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=off[1:])
    return off


class Workload:
    """One benchmark input: ``data`` of shape ``(rows,)`` or ``(rows, d)`` and LoD ``offsets``.

    Parameters
    ----------
    name : str
        ``"D=1"``, ``"D=16"``, ``"2-level"`` or ``"tiny"``.
    rows : int
        Number of rows.
    seed : int
        Seed of the generator (the workload name is mixed in so workloads differ).
    """

    def __init__(self, name, rows, seed=SEED):
        self.name = name
        self.rows = int(rows)
        rng = np.random.default_rng([seed, sum(map(ord, name))])
        self.d = 16 if name == "D=16" else 1
        lengths = geometric_lengths(self.rows, rng)
        shape = (self.rows, self.d) if self.d > 1 else (self.rows,)
        self.data = rng.standard_normal(shape, dtype=np.float32)
        levels = [_offsets(lengths)]
        if name == "2-level":
            outer = geometric_lengths(len(lengths), rng, mean=OUTER_MEAN)
            levels.insert(0, _offsets(outer))
        for level in levels:
            level.setflags(write=False)
        self.offsets = levels
        self.lengths = lengths
        self.starts = levels[-1][:-1]

    # ------------------------------------------------------------------ sizes
    @property
    def n_seq(self):
        """Number of last-level sequences."""
        return len(self.lengths)

    @property
    def row_bytes(self):
        return self.data.itemsize * self.d

    @property
    def data_bytes(self):
        return self.data.nbytes

    @property
    def offsets_bytes(self):
        return sum(level.nbytes for level in self.offsets)

    @functools.cached_property
    def max_length(self):
        return int(self.lengths.max()) if self.n_seq else 0

    @property
    def label(self):
        rows = f"{self.rows:.0e}".replace("e+0", "e")
        return f"{self.name}, {rows} rows"

    # ------------------------------------------------------------------ derived inputs
    @functools.cached_property
    def parent(self):
        """The sequence number of every row (int64)."""
        return np.repeat(np.arange(self.n_seq, dtype=np.int64), self.lengths)

    @functools.cached_property
    def per_sequence(self):
        """One float32 row per last-level sequence (the input of ``sequence_expand``)."""
        rng = np.random.default_rng([SEED, 7, self.d])
        shape = (self.n_seq, self.d) if self.d > 1 else (self.n_seq,)
        return rng.standard_normal(shape, dtype=np.float32)

    @functools.cached_property
    def int_ids(self):
        """int64 token ids in ``[0, 100)``, one per row (erase / enumerate / scatter input)."""
        rng = np.random.default_rng([SEED, 11])
        return rng.integers(0, 100, size=self.rows, dtype=np.int64)

    @functools.cached_property
    def ids_tensor(self):
        import lodarrow

        return lodarrow.LoDTensor(self.int_ids, self.offsets)

    @functools.cached_property
    def ids_arrow(self):
        import pyarrow as pa

        return pa.LargeListArray.from_arrays(pa.array(self.offsets[-1]), pa.array(self.int_ids))

    @functools.cached_property
    def slice_args(self):
        """``sequence_slice`` arguments: skip a quarter of each sequence, keep half."""
        offset = (self.lengths // 4).reshape(-1, 1)
        length = (self.lengths // 2).reshape(-1, 1)
        return offset, length

    @functools.cached_property
    def tensor(self):
        """The workload as a LoDTensor (shares ``data`` and ``offsets``)."""
        import lodarrow

        return lodarrow.LoDTensor(self.data, self.offsets)

    @functools.cached_property
    def arrow(self):
        """``large_list<float>`` (D=1) or ``large_list<fixed_size_list<float, 16>>``, nested
        once more for the 2-level variant; built with pyarrow alone, zero-copy."""
        import pyarrow as pa

        values = pa.array(self.data.reshape(-1))
        if self.d > 1:
            values = pa.FixedSizeListArray.from_arrays(values, self.d)
        for level in reversed(self.offsets):
            values = pa.LargeListArray.from_arrays(pa.array(level), values)
        return values

    @functools.cached_property
    def polars(self):
        """A polars Series of lists (``list[f32]``, ``list[array[f32, 16]]`` ...)."""
        import polars as pl

        return pl.from_arrow(self.arrow)

    @functools.cached_property
    def polars_columns(self):
        """D > 1 as polars users hold it: one ``list[f32]`` column per feature."""
        import polars as pl
        import pyarrow as pa

        off = pa.array(self.offsets[-1])
        cols = {f"f{j}": pa.LargeListArray.from_arrays(off, pa.array(np.ascontiguousarray(
            self.data[:, j]))) for j in range(self.d)}
        return pl.DataFrame(pl.from_arrow(pa.table(cols)))

    @functools.cached_property
    def awkward(self):
        """An Awkward Array over the same buffers (``var * float32`` or ``var * 16 * float32``)."""
        import awkward as ak

        content = ak.contents.NumpyArray(self.data)
        if self.d > 1:
            content = ak.contents.RegularArray(ak.contents.NumpyArray(self.data.reshape(-1)),
                                               self.d, zeros_length=self.rows)
        for level in reversed(self.offsets):
            content = ak.contents.ListOffsetArray(ak.index.Index64(level), content)
        return ak.Array(content)

    @functools.cached_property
    def padded(self):
        """``(n_seq, max_length[, d])`` zero-padded copy and the lengths (``sequence_unpad``'s
        input)."""
        shape = (self.n_seq, self.max_length) + ((self.d,) if self.d > 1 else ())
        out = np.zeros(shape, dtype=self.data.dtype)
        mask = np.arange(self.max_length) < self.lengths[:, None]
        out[mask] = self.data
        return out, mask


class TopkWorkload:
    """``sequence_topk_avg_pooling``'s input: sequence i is a ``[channels, row_i, col_i]``
    block of float32 values; ``row_i``/``col_i`` are geometric (mean 20, 5% empty).

    ``rows`` is the nominal size: the number of pairs is ``rows // 1200`` so that there are
    about ``rows`` values (``E[row_i * col_i] = 400``).
    """

    name = "topk"
    channels = 3
    topks = (1, 3, 5)

    def __init__(self, rows, seed=SEED):
        rng = np.random.default_rng([seed, 99])
        n = max(1, int(rows) // 1200)
        self.row_len = geometric_lengths(n * 20, rng)[:n]
        self.col_len = geometric_lengths(n * 20, rng)[:n]
        n = min(len(self.row_len), len(self.col_len))
        self.row_len, self.col_len = self.row_len[:n], self.col_len[:n]
        sizes = self.channels * self.row_len * self.col_len
        self.offsets = [_offsets(sizes)]
        self.data = rng.standard_normal(int(sizes.sum()), dtype=np.float32)
        self.rows = len(self.data)
        self.n_seq = n

    @property
    def label(self):
        return f"{self.channels}ch, {self.n_seq} pairs, {self.rows:.0e} values".replace("e+0", "e")

    @functools.cached_property
    def tensors(self):
        import lodarrow

        x = lodarrow.LoDTensor(self.data, self.offsets)
        row = lodarrow.LoDTensor(np.zeros(int(self.row_len.sum()), np.float32),
                                 lengths=[self.row_len])
        col = lodarrow.LoDTensor(np.zeros(int(self.col_len.sum()), np.float32),
                                 lengths=[self.col_len])
        return x, row, col


def make_workload(name, rows, seed=SEED):
    """The workload ``name`` with ``rows`` rows (the runner caches and frees them)."""
    if name == "topk":
        return TopkWorkload(rows, seed)
    return Workload(name, rows, seed)
