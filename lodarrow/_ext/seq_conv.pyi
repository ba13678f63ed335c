import numpy as np
import numpy.typing as npt

_I64 = npt.NDArray[np.int64]
_Floating = npt.NDArray[np.float32] | npt.NDArray[np.float64]

# ctx: (rows, context_length * D); src: input rows [base, base + len(src)) as (rows, D);
# padding: (up + down, D), read only when use_padding.  All C-contiguous, one dtype.
def conv_gather(ctx: _Floating, src: _Floating, base: int, offsets: _I64, r0: int,
                context_start: int, context_length: int, padding: _Floating, up: int,
                use_padding: bool, num_threads: int = 1) -> None: ...
