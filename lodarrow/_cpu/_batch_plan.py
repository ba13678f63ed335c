"""The training layer's kernels (``_ext/batch_plan.pyx``): batch plans and collation
(docs/training.md).  ``lodarrow/_training`` calls them through this module, which is private
(a leading underscore) because it is no operator launcher: it has no ``ENTRIES`` and no CUDA
twin.  The kernels trust their arguments, which ``lodarrow/_training`` checks."""

from lodarrow._ext.batch_plan import (best_fit, best_fit_windows, cut_batches, gather_padded,
                                      gather_rows, packed_batch, packed_tokens, permutation,
                                      range_stats, rows_batch, rows_tokens, sort_windows)

__all__ = ["best_fit", "best_fit_windows", "cut_batches", "gather_padded", "gather_rows",
           "packed_batch", "packed_tokens", "permutation", "range_stats", "rows_batch",
           "rows_tokens", "sort_windows"]
