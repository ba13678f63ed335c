"""Backward kernels on the GPU: the twin of ``lodarrow/_cpu/seq_grad.py``, with the same
kernel names and arguments.

These backwards have no CUDA kernel yet: each entry raises ``NotImplementedError`` naming its
operator, so a CuPy array never takes a silent round trip through the host.  The backwards
made of other operators' kernels (pad, unpad, concat, slice, reverse, reshape, scatter,
``sequence_expand`` of rows, ``sequence_expand_as``) run on the GPU already
(docs/gradients.md#devices).
"""

__all__ = ["ENTRIES", "KERNELS"]

#: The kernel instantiations this module launches: none yet (there is no ``seq_grad.cu``).
KERNELS = ()


def _missing(op):
    raise NotImplementedError(
        f"{op}: the backward has no GPU kernel yet; move the data to the CPU first "
        f"(t.cpu() / cupy.asnumpy) to compute this gradient")


def pool_sum_backward(dx, dout, offsets, pool_type):
    """Not on the GPU yet (``sequence_pool``)."""
    _missing("sequence_pool")


def pool_index_backward(dx, dout, index, offsets):
    """Not on the GPU yet (``sequence_pool``)."""
    _missing("sequence_pool")


def pool_pick_backward(dx, dout, offsets, last, zeroed=False):
    """Not on the GPU yet (``sequence_pool``)."""
    _missing("sequence_pool")


def scatter_backward(dupd, dout, ids, offsets):
    """Not on the GPU yet (``sequence_scatter``; ``lodarrow._grad`` gathers CuPy arrays by
    fancy indexing instead of calling this)."""
    _missing("sequence_scatter")


def slice_backward(dx, dout, start, out_offsets):
    """Not on the GPU yet (``sequence_slice``; ``lodarrow._grad`` scatters CuPy arrays by
    fancy indexing instead of calling this)."""
    _missing("sequence_slice")


def split_blocks(outs, src, offsets, src_off):
    """Not on the GPU yet (``sequence_concat``; ``lodarrow._grad`` gathers each CuPy
    gradient with ``gather_blocks`` instead of calling this)."""
    _missing("sequence_concat")


def softmax_backward(dx, y, dout, offsets):
    """Not on the GPU yet (``sequence_softmax``)."""
    _missing("sequence_softmax")


def expand_blocks_backward(dx, dout, x_off, rep_off, out_lod):
    """Not on the GPU yet (``sequence_expand``)."""
    _missing("sequence_expand")


def conv_input_backward(dx, dpad, dout, filter, offsets, context_start, context_length, up,
                        chunk_elements):
    """Not on the GPU yet (``sequence_conv``)."""
    _missing("sequence_conv")


def conv_filter_backward(dw, data, offsets, dout, pad_rows, cs, cl, up, chunk_elements):
    """Not on the GPU yet (``sequence_conv``)."""
    _missing("sequence_conv")


def topk_positions(pos, data, in_off, row_off, col_off, channels):
    """Not on the GPU yet (``sequence_topk_avg_pooling``)."""
    _missing("sequence_topk_avg_pooling")


def topk_avg_pool_backward(dx, dout, pos, in_off, row_off, col_off, ks, channels):
    """Not on the GPU yet (``sequence_topk_avg_pooling``)."""
    _missing("sequence_topk_avg_pooling")


#: Kernel name -> entry point, the arguments of the CPU twin's (``lodarrow/_cpu/seq_grad.py``).
ENTRIES = {
    "pool_sum_backward": pool_sum_backward,
    "pool_index_backward": pool_index_backward,
    "pool_pick_backward": pool_pick_backward,
    "scatter_backward": scatter_backward,
    "slice_backward": slice_backward,
    "softmax_backward": softmax_backward,
    "split_blocks": split_blocks,
    "expand_blocks_backward": expand_blocks_backward,
    "conv_input_backward": conv_input_backward,
    "conv_filter_backward": conv_filter_backward,
    "topk_positions": topk_positions,
    "topk_avg_pool_backward": topk_avg_pool_backward,
}
