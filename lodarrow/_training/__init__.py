"""Training batches straight from Arrow and Parquet: sequence lengths from offsets, batch
plans (fixed size, token budgets, bucketing, sharding), collation (padded, packed varlen,
packed rows) and a streaming loader.  See docs/training.md.
"""

from lodarrow._training._batching import BatchPlan, batch_plan
from lodarrow._training._collate import collate
from lodarrow._training._lengths import sequence_lengths
from lodarrow._training._loader import BatchLoader, batch_loader
from lodarrow._training._mix import Mixture, mix

__all__ = ["BatchLoader", "BatchPlan", "Mixture", "batch_loader", "batch_plan", "collate", "mix",
           "sequence_lengths"]
