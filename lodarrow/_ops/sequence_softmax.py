"""``sequence_softmax``: softmax over the values of every last-level sequence.

Semantics, edge cases, errors and departures from Paddle: docs/operators.md#sequence_softmax.
"""

import numpy as np

from lodarrow._backends import backend_of_array
from lodarrow._errors import LoDError
from lodarrow._ops._common import as_lod_tensor
from lodarrow._ops._contract import TableContract
from lodarrow._ops._out import into, landed
from lodarrow._validation import as_flag

__all__ = ["sequence_softmax"]

_F64 = np.dtype(np.float64)


def sequence_softmax(input, use_cudnn=False, name=None, *, out=None):
    """Softmax over the values of every sequence of the last LoD level.

    ``out[j] = exp(x[j] - m) / sum_k exp(x[k] - m)`` over a sequence, with ``m`` its maximum:
    numerically stable (no overflow for inputs around 1000, where Paddle's CPU kernel returns
    NaN), and equal to Paddle's result wherever that is finite.  A sequence that holds NaN
    becomes NaN (as does one whose maximum is infinite); empty sequences write nothing.

    Parameters
    ----------
    input : LoDTensor or Arrow array of lists
        Shape ``(N,)`` or ``(N, 1)`` (one value per row) with at least one LoD level; the
        softmax runs over the sequences of the last level.  Any numeric dtype (not bool).
    use_cudnn : bool, default False
        Accepted for Paddle compatibility and ignored.
    name : str, optional
        Ignored (Paddle compatibility).
    out : numpy.ndarray or cupy.ndarray, optional
        Keyword-only: a preallocated array that receives the result's data (exactly its shape
        and dtype, on the input's device, C-contiguous, writable)
        (docs/operators.md#out-writing-into-a-preallocated-array).

    Returns
    -------
    LoDTensor
        The input's shape and full LoD, on its place.  dtype: the input's for floats
        (float16 is computed in float32), float64 for integers.

    Raises
    ------
    LoDError
        If ``input`` has no LoD.
    ValueError
        If ``input`` is not of shape ``(N,)`` or ``(N, 1)``.
    TypeError
        If ``input`` is bool.

    See Also
    --------
    lodarrow.torch.sequence_softmax : The same operator on torch tensors, differentiable.

    Examples
    --------
    >>> import numpy as np, lodarrow as la
    >>> x = la.LoDTensor(np.array([[0.], [0.], [1000.], [1000.], [7.]], dtype="float32"),
    ...                  lod=[[0, 2, 4, 4, 5]])
    >>> la.sequence_softmax(x).numpy().ravel().tolist()
    [0.5, 0.5, 0.5, 0.5, 1.0]
    """
    x = as_lod_tensor(input, "input")
    as_flag(use_cudnn, "sequence_softmax: use_cudnn")
    if not x.offsets:
        raise LoDError("sequence_softmax: input must have at least 1 LoD level, got 0")
    data = x.data
    shape = data.shape
    if not (len(shape) == 1 or (len(shape) == 2 and shape[1] == 1)):
        raise ValueError(f"sequence_softmax: input must have shape [N] or [N, 1] (one value "
                         f"per row), got {list(shape)}")
    kind = data.dtype.kind
    if kind == "b":
        raise TypeError("sequence_softmax: input of dtype bool cannot be softmaxed; cast it to "
                        "a numeric dtype first")
    out_dtype = _F64 if kind in "iu" else data.dtype
    be = backend_of_array(data)
    with be.device(data):
        res = (be.empty(shape, out_dtype) if out is None
               else into(out, "sequence_softmax", shape, out_dtype, be, data, (data,)))
        be.kernel("softmax")(res, data, be.offsets(x, -1))
    if out is not None:
        res = landed(res, out)
    return x._derive(res)


def _check_literals(args):
    if "use_cudnn" in args:
        as_flag(args["use_cudnn"], "sequence_softmax: use_cudnn")


#: The table form (docs/tables.md).
TABLE = {"sequence_softmax": TableContract(("input",), check=_check_literals)}
