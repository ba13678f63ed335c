import numpy as np
import numpy.typing as npt

_I64 = npt.NDArray[np.int64]
# out, src: C-contiguous (rows, width); updates: 1-D; all of one dtype among int8, uint8,
# int16, uint16, int32, int64, float32, float64 (float16 goes through float32).
_Numeric = npt.NDArray[np.number]

# Returns the first position of an id outside [0, width) (out is then unfinished), or -1.
def sequence_scatter(out: _Numeric, src: _Numeric, ids: _I64, updates: _Numeric,
                     offsets: _I64, num_threads: int = 1) -> int: ...
