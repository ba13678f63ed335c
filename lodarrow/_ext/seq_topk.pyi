import numpy as np
import numpy.typing as npt

_I64 = npt.NDArray[np.int64]
_F64 = npt.NDArray[np.float64]
_Floating = npt.NDArray[np.float32] | npt.NDArray[np.float64]

# out: (sum(rows), channels * len(topks)); work: (n_chunks, m) float64 scratch, one row per
# chunk.  bounds: chunk_bounds() sequence indices, or None (serial).
def topk_avg_pool(out: _Floating, work: _F64, data: _Floating, in_off: _I64, row_off: _I64,
                  col_off: _I64, topks: _I64, channels: int, bounds: _I64 | None = None,
                  num_threads: int = 1) -> None: ...
