# Typed stub of lodarrow._ext.seq_layout (built from _ext/seq_layout.pyx).
# "Bytes" arguments are flat C-contiguous uint8 views (``flat_bytes``); "values" arguments
# are flat arrays of one of the kernels' fused dtypes (int8, uint8, int16, uint16, int32,
# int64, float32, float64).  Offsets and bounds are int64.
import numpy as np
import numpy.typing as npt

_I64 = npt.NDArray[np.int64]
_U8 = npt.NDArray[np.uint8]
_Values = npt.NDArray[np.number]

def reverse(out: _U8, x: _U8, offsets: _I64, bounds: _I64, width: int,
            n_threads: int) -> None: ...
def pad(out: _U8, x: _U8, pad_row: _U8, offsets: _I64, bounds: _I64, padded_length: int,
        width: int, n_threads: int) -> None: ...
def unpad(out: _U8, x: _U8, offsets: _I64, bounds: _I64, padded_length: int, width: int,
          n_threads: int) -> None: ...
def enumerate_windows(out: _Values, x: _Values, pad: _Values, offsets: _I64, bounds: _I64,
                      win_size: int, n_threads: int) -> None: ...
def erase_count(counts: _I64, x: _Values, tokens: _Values, table: _U8, table_low: int,
                offsets: _I64, bounds: _I64, n_threads: int) -> None: ...
def erase_copy(out: _Values, x: _Values, tokens: _Values, table: _U8, table_low: int,
               offsets: _I64, new_offsets: _I64, bounds: _I64, n_threads: int) -> None: ...
def mask(out: _U8, x: _Values, maxlen: int, itemsize: int, one_bits: int,
         n_threads: int) -> None: ...
