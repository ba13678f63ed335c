import numpy as np
import numpy.typing as npt

_I64 = npt.NDArray[np.int64]
_F64 = npt.NDArray[np.float64]
_U8 = npt.NDArray[np.uint8]    # C-contiguous (rows, bytes_per_row) views of any dtype
_U16 = npt.NDArray[np.uint16]  # float16 bit patterns
# Floating: float32 / float64; Integral: int8, uint8, int16, uint16, int32, int64;
# Numeric: both.  2-D arrays are C-contiguous (rows, D); ``out`` has one row per sequence.
_Floating = npt.NDArray[np.float32] | npt.NDArray[np.float64]
_Integral = (npt.NDArray[np.int8] | npt.NDArray[np.uint8] | npt.NDArray[np.int16]
             | npt.NDArray[np.uint16] | npt.NDArray[np.int32] | npt.NDArray[np.int64])
_Numeric = _Floating | _Integral

# mode: 0 sum, 1 average, 2 sqrt.  bounds: chunk_bounds() sequence indices, or None (serial).
def pool_sum_float(out: _Floating, data: _Floating, offsets: _I64, pad: _Floating, mode: int,
                   bounds: _I64 | None = None, num_threads: int = 1) -> None: ...
def pool_sum_int(out: _Integral, data: _Integral, offsets: _I64, pad: _Integral,
                 bounds: _I64 | None = None, num_threads: int = 1) -> None: ...
def pool_mean_int(out: _F64, data: _Integral, offsets: _I64, pad: _F64, mode: int,
                  bounds: _I64 | None = None, num_threads: int = 1) -> None: ...
def pool_sum_half(out: _U16, data: _U16, offsets: _I64, pad: _U16, mode: int,
                  bounds: _I64 | None = None, num_threads: int = 1) -> None: ...
def pool_extreme(out: _Numeric, data: _Numeric, offsets: _I64, pad: _Numeric, is_min: bool,
                 bounds: _I64 | None = None, num_threads: int = 1) -> None: ...
def pool_arg_extreme(out: _Numeric, index: _I64, data: _Numeric, offsets: _I64,
                     pad: _Numeric, is_min: bool, bounds: _I64 | None = None,
                     num_threads: int = 1) -> None: ...
def pool_extreme_half(out: _U16, index: _I64 | None, data: _U16, offsets: _I64, pad: _U16,
                      is_min: bool, bounds: _I64 | None = None,
                      num_threads: int = 1) -> None: ...
def pool_pick(out: _U8, rows: _U8, offsets: _I64, pad: _U8, last: bool,
              bounds: _I64 | None = None, num_threads: int = 1) -> None: ...
def half_to_float(bits: _U16, out: npt.NDArray[np.float32]) -> None: ...
def float_to_half(values: npt.NDArray[np.float32], out: _U16) -> None: ...
# One thread, float32 / float64 only, no memoryviews: op 0-2 the sum family's mode, 3 max,
# 4 min; out / data / pad of any C-contiguous shape with n_seq * d, n_rows * d and d elements.
# False (nothing done) when an argument is not as pool_sum_float / pool_extreme take it.
def pool_float_serial(out: _Floating, data: _Floating, offsets: _I64, pad: _Floating, d: int,
                      op: int) -> bool: ...
