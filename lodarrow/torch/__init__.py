"""lodarrow's sequence operators on torch tensors, differentiable.

See docs/gradients.md#pytorch-lodarrowtorch.

``import lodarrow.torch as lt`` (torch is the ``[torch]`` extra; ``import lodarrow`` never
imports this package).  Every operator takes its LoD as an int64 ``offsets`` tensor (or a
list of them, outermost level first, as FBGEMM's jagged operators take) or as a jagged
``torch.nested`` tensor, and returns its ragged results in the form they came in.  The
operators are ``torch.library`` custom operators (namespace ``lodarrow``) with fake kernels
and autograd formulas, so they run under ``torch.compile(fullgraph=True)``.
"""

from lodarrow.torch import _functional
from lodarrow.torch._functional import *  # its __all__, below
from lodarrow.torch._modules import SequenceConv

#: the functions (``_functional.__all__``, their one list) and the module; __init__.pyi lists
#: them again for type checkers (tests/test_torch_ops.py checks the two lists agree)
__all__ = ["SequenceConv"]
__all__ += _functional.__all__
