"""lodarrow's sequence operators on torch tensors, differentiable.

See docs/gradients.md#pytorch-lodarrowtorch.

``import lodarrow.torch as lt`` (torch is the ``[torch]`` extra; ``import lodarrow`` never
imports this package).  Every operator takes its LoD as an int64 ``offsets`` tensor (or a
list of them, outermost level first, as FBGEMM's jagged operators take) or as a jagged
``torch.nested`` tensor, and returns its ragged results in the form they came in.  The
operators are ``torch.library`` custom operators (namespace ``lodarrow``) with fake kernels
and autograd formulas, so they run under ``torch.compile(fullgraph=True)``.
"""

from lodarrow.torch._functional import (
                                        lod_append,
                                        lod_reset,
                                        sequence_concat,
                                        sequence_conv,
                                        sequence_expand,
                                        sequence_expand_as,
                                        sequence_first_step,
                                        sequence_last_step,
                                        sequence_pad,
                                        sequence_pool,
                                        sequence_reshape,
                                        sequence_reverse,
                                        sequence_scatter,
                                        sequence_slice,
                                        sequence_softmax,
                                        sequence_topk_avg_pooling,
                                        sequence_unpad,
)
from lodarrow.torch._modules import SequenceConv

__all__ = [
    "SequenceConv",
    "lod_append",
    "lod_reset",
    "sequence_concat",
    "sequence_conv",
    "sequence_expand",
    "sequence_expand_as",
    "sequence_first_step",
    "sequence_last_step",
    "sequence_pad",
    "sequence_pool",
    "sequence_reshape",
    "sequence_reverse",
    "sequence_scatter",
    "sequence_slice",
    "sequence_softmax",
    "sequence_topk_avg_pooling",
    "sequence_unpad",
]
