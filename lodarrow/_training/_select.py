"""The loader's first stage, *which sequences*: the column and level, nulls, over-long
sequences, shuffling, ranks, balance and budgets (docs/training.md#where-options-meet).

:class:`Selection` checks these options once and, bound to the shape stage
(:class:`lodarrow._training._shape.BatchShape`), states what the plan may rely on: the
planning arguments (:meth:`Selection.plan_args`), each batch's sequence cap (the smaller of
``batch_size`` and the shape's ``max_count``), and which sequences ``nulls`` and ``oversize``
leave out or refuse (:meth:`Selection.left_out`: the plan module's one decision,
:func:`lodarrow._training._epoch.left_out`).  Where two options of the stages
cannot meet (a ``batch_size`` above ``num_rows``, ``oversize="split"`` without packed rows)
the loader is refused here, when it is made.
"""

import numpy as np

from lodarrow._training._epoch import PlanArgs, left_out
from lodarrow._validation import (as_flag, as_int, as_nonnegative_int, as_positive_int,
                                  check_choice)

__all__ = ["BALANCES", "NULLS", "OVERSIZE", "Selection"]

NULLS = ("error", "empty", "drop")
BALANCES = ("batches", "tokens", "compute")
OVERSIZE = ("alone", "error", "drop", "split")

#: The keys a batch of each mode holds (the loader adds ``rows``, and ``source`` for a
#: mixture): an extra column may not take one of them.
_COMMON = frozenset({"values", "lengths", "rows", "source"})
_ROWS = _COMMON | {"position_ids", "attention_mask", "cu_seqlens", "seq_idx", "seq_row",
                   "max_seqlen"}
BATCH_KEYS = {"padded": _COMMON | {"attention_mask"},
              "packed": _COMMON | {"cu_seqlens", "max_seqlen", "position_ids", "seq_idx"},
              "segments": _COMMON | {"segment_ids", "num_segments", "position_ids"},
              "packed_rows": _ROWS, "blocks": _ROWS}


class Selection:
    """Which sequences go in which batch, on which rank: the options checked once."""

    def __init__(self, *, batch_size, max_tokens, level, extra_columns, shuffle, seed,
                 drop_last, num_replicas, rank, balance, alpha, oversize, nulls, bucket,
                 window, row_groups, fn="batch_loader"):
        self.fn = fn
        self.batch_size = _opt_pos(batch_size, "batch_size", fn)
        self.max_tokens = _opt_pos(max_tokens, "max_tokens", fn)
        if isinstance(level, (bool, np.bool_)):
            raise TypeError(f"{fn}: level must be an integer, got bool")
        self.level = as_int(level, f"{fn}: level")
        if isinstance(extra_columns, str) or not isinstance(extra_columns, (list, tuple)):
            raise TypeError(f"{fn}: extra_columns must be a list of column names, got "
                            f"{type(extra_columns).__name__}")
        for k, name in enumerate(extra_columns):
            if not isinstance(name, str):
                raise TypeError(f"{fn}: extra_columns[{k}] must be a str, got "
                                f"{type(name).__name__}")
        if len(set(extra_columns)) != len(extra_columns):
            raise ValueError(f"{fn}: extra_columns names a column twice: {list(extra_columns)}")
        if extra_columns and self.level != 0:
            raise ValueError(f"{fn}: extra_columns need level=0 (rows), got level={level}")
        self.extra_columns = list(extra_columns)
        self.shuffle = as_flag(shuffle, f"{fn}: shuffle")
        self.bucket = as_flag(bucket, f"{fn}: bucket")
        self.window = as_positive_int(window, f"{fn}: window")
        self.row_groups = as_positive_int(row_groups, f"{fn}: row_groups")
        self.seed = as_nonnegative_int(seed, f"{fn}: seed")
        self.drop_last = as_flag(drop_last, f"{fn}: drop_last")
        self.num_replicas = as_positive_int(num_replicas, f"{fn}: num_replicas")
        self.rank = as_nonnegative_int(rank, f"{fn}: rank")
        if self.rank >= self.num_replicas:
            raise ValueError(f"{fn}: rank must be in [0, num_replicas={num_replicas}), "
                             f"got {rank}")
        self.oversize = check_choice(oversize, f"{fn}: oversize", OVERSIZE)
        self.nulls = check_choice(nulls, f"{fn}: nulls", NULLS)
        self.balance = check_choice(balance, f"{fn}: balance", BALANCES)
        given = alpha is not None
        alpha = 0.0 if alpha is None else alpha
        if isinstance(alpha, (bool, np.bool_)) or not isinstance(alpha, (int, float,
                                                                           np.number)):
            raise TypeError(f"{fn}: alpha must be a number, got {type(alpha).__name__}")
        if given and self.balance != "compute":
            raise ValueError(f"{fn}: alpha applies to balance='compute' only "
                             f"(balance={balance!r})")
        self.alpha = float(alpha)
        if not (self.alpha >= 0 and np.isfinite(self.alpha)):
            raise ValueError(f"{fn}: alpha must be a finite number >= 0, got {alpha!r}")
        self.shape = None

    def bind(self, shape):
        """Meet the shape stage: check the options where they meet, and keep the shape
        (``shape.bind`` settles planned packed rows against ``max_tokens``)."""
        fn = self.fn
        rows_given = shape.row_length is not None and shape.collate.num_rows is not None
        if self.batch_size is None and self.max_tokens is None and not rows_given:
            raise ValueError(f"{fn}: give batch_size, max_tokens or both (both are None)")
        if self.oversize == "split" and shape.mode != "packed_rows":
            raise ValueError(f"{fn}: oversize='split' applies to mode='packed_rows' only "
                             f"(mode={shape.mode!r})")
        if shape.mode == "blocks" and self.oversize != "alone":
            raise ValueError(f"{fn}: oversize does not apply to mode='blocks' (a sequence is cut "
                             f"at every block boundary it crosses); leave it out")
        cap = shape.max_count
        if cap is not None and self.batch_size is not None and self.batch_size > cap:
            name = "num_rows" if shape.mode == "padded" else "num_segments"
            raise ValueError(f"{fn}: batch_size={self.batch_size} is more than {name}={cap}: a "
                             f"batch could not hold its sequences; give batch_size <= {cap} "
                             f"(or leave batch_size out: batches then hold at most {cap})")
        self.shape = shape.bind(self.max_tokens)
        if shape.mode == "blocks" and shape.rows_per_batch is None:
            raise ValueError(f"{fn}: mode='blocks' needs max_tokens or num_rows (a batch is "
                             f"that many blocks of row_length={shape.row_length}; the plan "
                             f"cuts the whole stream into blocks, not each batch)")
        if shape.rows_per_batch is not None and self.batch_size is not None:
            raise ValueError(f"{fn}: batch_size={self.batch_size} does not apply to rows the "
                             f"plan lays out (max_tokens or num_rows given: a batch is "
                             f"{shape.rows_per_batch} rows of row_length={shape.row_length}, "
                             f"whatever number of sequences they hold); leave batch_size out, "
                             f"or give batch_size alone to pack each batch of that many "
                             f"sequences at collation")
        # an extra column is delivered under its name, and a nullable numeric one also as
        # "<name>_mask": neither may take a key the batch holds, or another column's name
        taken = BATCH_KEYS[shape.mode]
        for k, name in enumerate(self.extra_columns):
            mask = name + "_mask"
            if name in taken or mask in taken:
                key = name if name in taken else mask
                raise ValueError(
                    f"{fn}: extra_columns[{k}] {name!r} would be delivered as "
                    + (f"the batch key {key!r}" if key == name else
                       f"{name!r} and, where it has nulls, {key!r}")
                    + f", which mode={shape.mode!r} batches already hold ("
                    + ", ".join(sorted(taken)) + "); rename the column (e.g. "
                    "pyarrow.Table.rename_columns) or leave it out")
            if mask in self.extra_columns:
                raise ValueError(
                    f"{fn}: extra_columns[{k}] {name!r} and {mask!r}: where {name!r} has "
                    f"nulls, its null mask is delivered as {mask!r}; rename one of them")
        if shape.mode == "padded" and shape.collate.num_rows and self.max_tokens is not None:
            narrowest = int(shape.alone(np.array([1]))[0])
            if narrowest < 0 or narrowest > self.max_tokens:
                raise ValueError(
                    f"{fn}: num_rows={shape.collate.num_rows} rows of the narrowest width "
                    f"({shape.describe()}) take {narrowest} slots, more than max_tokens="
                    f"{self.max_tokens}: no batch fits; give fewer rows or a larger budget")
        return self

    @property
    def read_nulls(self):
        """How the reader takes a null row of the sequence column (``from_arrow``'s ``nulls``):
        always ``"empty"``.  ``nulls="error"`` refused every null row when the loader was made
        (none is read); ``"empty"`` delivers it as an empty sequence; ``"drop"`` reads it beside
        its neighbours and never delivers it."""
        return "empty"

    @property
    def count_cap(self):
        """The most sequences of a batch: ``batch_size`` and the shape's cap, the smaller."""
        caps = [c for c in (self.batch_size, self.shape.max_count) if c is not None]
        return min(caps) if caps else None

    def plan_args(self, cell_rows):
        """The planning arguments of :func:`lodarrow._training._epoch.plan_epoch`."""
        # blocks concatenate the sequences in the stream's (shuffled) order: no bucketing
        return PlanArgs(batch_size=self.count_cap, max_tokens=self.max_tokens,
                        packed=self.shape.cost == "packed",
                        bucket=self.bucket and self.shape.mode != "blocks",
                        shuffle=self.shuffle, drop_last=self.drop_last, balance=self.balance,
                        alpha=self.alpha,
                        oversize="alone" if self.oversize == "split" else self.oversize,
                        cell_rows=cell_rows, fn=self.fn, shape=self.shape)

    def left_out(self, lengths, row_nulls, value_nulls):
        """``nulls`` and ``oversize`` applied to the source's ``lengths`` and nulls (see
        :func:`lodarrow._training._epoch.left_out`) with this stage's options, budget and
        shape: a :class:`~lodarrow._training._epoch.LeftOut`, decided when the loader is made."""
        return left_out(lengths, nulls=self.nulls, oversize=self.oversize, shape=self.shape,
                        max_tokens=self.max_tokens, level=self.level, row_nulls=row_nulls,
                        value_nulls=value_nulls)

    def fingerprint(self):
        """The options that decide the plan (a saved state names them)."""
        return {"level": self.level, "batch_size": self.batch_size,
                "max_tokens": self.max_tokens, "shuffle": self.shuffle,
                "drop_last": self.drop_last, "balance": self.balance, "alpha": self.alpha,
                "oversize": self.oversize, "nulls": self.nulls, "bucket": self.bucket,
                "window": self.window, "row_groups": self.row_groups}


def _opt_pos(value, name, fn):
    return None if value is None else as_positive_int(value, f"{fn}: {name}")
