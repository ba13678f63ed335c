"""The sequence operators, one public function per module (docs/operators.md).

Each module also declares its operators' table form (``TABLE``, a
:class:`~lodarrow._ops._contract.TableContract` per operator), gathered here in ``CONTRACTS``.
"""

import sys as _sys

from lodarrow._ops.lod_reset import lod_reset
from lodarrow._ops.lod_append import lod_append
from lodarrow._ops.sequence_expand import sequence_expand
from lodarrow._ops.sequence_expand_as import sequence_expand_as
from lodarrow._ops.sequence_scatter import sequence_scatter
from lodarrow._ops.sequence_concat import sequence_concat
from lodarrow._ops.sequence_slice import sequence_slice
from lodarrow._ops.sequence_reverse import sequence_reverse
from lodarrow._ops.sequence_reshape import sequence_reshape
from lodarrow._ops.sequence_pad import sequence_pad
from lodarrow._ops.sequence_unpad import sequence_unpad
from lodarrow._ops.sequence_mask import sequence_mask
from lodarrow._ops.sequence_enumerate import sequence_enumerate
from lodarrow._ops.sequence_erase import sequence_erase
from lodarrow._ops.sequence_pool import sequence_pool, sequence_first_step, sequence_last_step
from lodarrow._ops.sequence_softmax import sequence_softmax
from lodarrow._ops.sequence_conv import sequence_conv
from lodarrow._ops.sequence_topk_avg_pooling import sequence_topk_avg_pooling


__all__ = [
    "lod_append",
    "lod_reset",
    "sequence_concat",
    "sequence_conv",
    "sequence_enumerate",
    "sequence_erase",
    "sequence_expand",
    "sequence_expand_as",
    "sequence_first_step",
    "sequence_last_step",
    "sequence_mask",
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

#: operator name -> its TableContract, from the ``TABLE`` of each operator's own module
CONTRACTS = {}
for _name in __all__:
    CONTRACTS.update(_sys.modules[globals()[_name].__module__].TABLE)
del _name
