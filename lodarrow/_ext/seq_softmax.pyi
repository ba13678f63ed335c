import numpy as np
import numpy.typing as npt

_I64 = npt.NDArray[np.int64]
_Floating = npt.NDArray[np.float32] | npt.NDArray[np.float64]
_Integral = (npt.NDArray[np.int8] | npt.NDArray[np.uint8] | npt.NDArray[np.int16]
             | npt.NDArray[np.uint16] | npt.NDArray[np.int32] | npt.NDArray[np.int64])

# All arrays are flat and C-contiguous; bounds: chunk_bounds() sequence indices or None.
def softmax_float(out: _Floating, data: _Floating, offsets: _I64, bounds: _I64 | None = None,
                  num_threads: int = 1) -> None: ...
def softmax_int(out: npt.NDArray[np.float64], data: _Integral, offsets: _I64,
                bounds: _I64 | None = None, num_threads: int = 1) -> None: ...
def softmax_half(out: npt.NDArray[np.uint16], data: npt.NDArray[np.uint16], offsets: _I64,
                 bounds: _I64 | None = None, num_threads: int = 1) -> None: ...
def expf_values(x: npt.NDArray[np.float32], out: npt.NDArray[np.float32]) -> None: ...
