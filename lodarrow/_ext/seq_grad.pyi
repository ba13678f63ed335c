import numpy as np
import numpy.typing as npt

_I64 = npt.NDArray[np.int64]
_F64 = npt.NDArray[np.float64]
_U8 = npt.NDArray[np.uint8]    # C-contiguous (rows, bytes_per_row) views of any dtype
_Floating = npt.NDArray[np.float32] | npt.NDArray[np.float64]

# Outputs first, then inputs, then scalars; 2-D arrays are C-contiguous (rows, D).
# bounds: chunk_bounds() sequence indices, or None (serial).  dx is written in full.
# mode: 0 sum, 1 average, 2 sqrt.  dx: (N, D); dout: (n_seq, D).
def pool_sum_backward(dx: _Floating, dout: _Floating, offsets: _I64, mode: int,
                      bounds: _I64 | None = None, num_threads: int = 1) -> None: ...
# One thread, no memoryviews (small calls); False when the arguments do not fit (then call
# pool_sum_backward).  dx: offsets[-1] * D values, dout: n_seq * D, any shapes.
def pool_sum_backward_serial(dx: _Floating, dout: _Floating, offsets: _I64, mode: int) -> bool: ...
# index: (n_seq, D), the forward's winning rows (-1: empty sequence).
def pool_index_backward(dx: _Floating, dout: _Floating, index: _I64, offsets: _I64,
                        bounds: _I64 | None = None, num_threads: int = 1) -> None: ...
def pool_pick_backward(dx: _U8, dout: _U8, offsets: _I64, last: bool,
                       bounds: _I64 | None = None, num_threads: int = 1) -> None: ...
# dx: (n_rows, bytes), dout: (sum(lengths), bytes); the slices in order, without overlap.
def slice_backward(dx: _U8, dout: _U8, start: _I64, out_offsets: _I64,
                   bounds: _I64 | None = None, num_threads: int = 1) -> None: ...
# Flat (N,) arrays; y the forward's softmax.
def softmax_backward(dx: _Floating, y: _Floating, dout: _Floating, offsets: _I64,
                     bounds: _I64 | None = None, num_threads: int = 1) -> None: ...
# bounds over x's blocks (balanced by the rows of dout they read).
def expand_blocks_backward(dx: _Floating, dout: _Floating, x_off: _I64, rep_off: _I64,
                           out_lod: _I64, bounds: _I64 | None = None,
                           num_threads: int = 1) -> None: ...
# dctx: (N, context_length * D) = dout @ filter.T.
def conv_input_backward(dx: _Floating, dctx: _Floating, offsets: _I64, context_start: int,
                        context_length: int, bounds: _I64 | None = None,
                        num_threads: int = 1) -> None: ...
# dpad: (up + down, D); one thread (deterministic sum over sequences).
def conv_padding_backward(dpad: _Floating, dctx: _Floating, offsets: _I64, context_start: int,
                          context_length: int, up: int) -> None: ...
# pos: (sum(rows) * channels, m); work: (n_chunks, m) float64 scratch.
def topk_positions(pos: _I64, work: _F64, data: _Floating, in_off: _I64, row_off: _I64,
                   col_off: _I64, channels: int, bounds: _I64 | None = None,
                   num_threads: int = 1) -> None: ...
# dx: flat (N,); dout: (sum(rows), channels * len(topks)).
def topk_avg_pool_backward(dx: _Floating, dout: _Floating, pos: _I64, in_off: _I64,
                           row_off: _I64, col_off: _I64, topks: _I64, channels: int,
                           bounds: _I64 | None = None, num_threads: int = 1) -> None: ...
# sequence_concat backward: src sequence i (rows from src_off[i]) -> outs[k] rows
# [offsets[k][i], offsets[k][i + 1]) for k in order (concat_blocks' inverse); one pass.
def split_blocks(outs: list[_U8], src: _U8, offsets: list[_I64], src_off: _I64,
                 bounds: _I64 | None = None, num_threads: int = 1) -> None: ...
