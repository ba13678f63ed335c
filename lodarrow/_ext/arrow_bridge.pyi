import numpy as np
import numpy.typing as npt
import pyarrow as pa

def import_nested(arrow_type: pa.DataType, values: npt.NDArray[np.generic], n_values: int,
                  rows: int, widths: tuple[int, ...],
                  offsets: tuple[npt.NDArray[np.int32] | npt.NDArray[np.int64], ...]
                  ) -> pa.Array: ...
