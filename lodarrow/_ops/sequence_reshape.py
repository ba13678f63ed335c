"""``sequence_reshape``: re-view each sequence's values with a new row width.

Semantics, edge cases, errors and departures from Paddle: docs/operators.md#sequence_reshape.
"""

import numpy as np

from lodarrow._backends import backend_of_array
from lodarrow._ops._common import ANY_LEVELS, as_lod_tensor, check_growth, require_lod_levels
from lodarrow._ops._contract import TableContract
from lodarrow._ops._out import into, landed
from lodarrow._validation import as_int

__all__ = ["sequence_reshape"]


def sequence_reshape(input, new_dim, name=None, *, out=None):
    """Reshape the data of ``input`` to rows of ``new_dim`` values, sequence by sequence.

    The values are read row-major: a sequence of ``L`` rows of width ``D`` becomes
    ``L * D / new_dim`` rows of width ``new_dim``.

    Parameters
    ----------
    input : LoDTensor or Arrow array of lists
        Data of shape ``(N, D)`` or ``(N,)`` (read as ``(N, 1)``,
        docs/operators.md#fewer-restrictions), any dtype, with at least one LoD level; outer levels
        are kept (docs/operators.md#multi-level-input).
    new_dim : int
        The new row width, >= 1.  Every sequence's ``L * D`` must be divisible by it.
    name : str, optional
        Ignored (Paddle compatibility).
    out : numpy.ndarray or cupy.ndarray, optional
        Keyword-only: a preallocated array that receives the result's data (exactly its shape
        and dtype, on the input's device, C-contiguous, writable)
        (docs/operators.md#out-writing-into-a-preallocated-array).

    Returns
    -------
    LoDTensor
        Shape ``(N * D / new_dim, new_dim)``, a copy of the data (never a view of the input).
        LoD: ``input``'s outer levels, and the last level with lengths ``L * D / new_dim``.

    Raises
    ------
    LoDError
        If ``input`` has no LoD.
    ValueError
        If the data has rank > 2, ``new_dim < 1``, or a sequence's element count is not divisible by
        ``new_dim`` (the message names the first such sequence); if the input holds no values and
        ``new_dim`` exceeds 2**30 (docs/data-model.md#decisions-at-the-edges).
    TypeError
        If ``new_dim`` is not an integer.

    See Also
    --------
    lodarrow.torch.sequence_reshape : The same operator on torch tensors, differentiable.

    Examples
    --------
    >>> import numpy as np, lodarrow as la
    >>> x = la.LoDTensor(np.arange(1, 13).reshape(6, 2), lod=[[0, 2, 6]])
    >>> out = la.sequence_reshape(x, new_dim=4)
    >>> out.lod()
    [[0, 1, 3]]
    >>> out.numpy()
    array([[ 1,  2,  3,  4],
           [ 5,  6,  7,  8],
           [ 9, 10, 11, 12]])
    """
    x = as_lod_tensor(input, "input")
    require_lod_levels(x, "input", "sequence_reshape", ANY_LEVELS)
    data = x.data
    be = backend_of_array(data)
    new_dim = _new_dim(new_dim)
    if data.ndim > 2:
        raise ValueError(f"sequence_reshape: input must be of shape [N, D] (or [N]), got "
                         f"shape {tuple(data.shape)}")
    width = data.shape[1] if data.ndim == 2 else 1
    last = x.offsets[-1]
    if new_dim > data.size:  # divides no non-empty sequence (and keeps the arithmetic int64)
        if data.size:
            k = int(np.argmax(last[1:] > last[:-1]))
            rows = int(last[k + 1] - last[k])
            raise ValueError(f"sequence_reshape: sequence {k} of input has {rows} rows of "
                             f"width {width} = {rows * width} values, not divisible by "
                             f"new_dim={new_dim}")
        check_growth("sequence_reshape", "new_dim", new_dim, 1, 0)
    if width == new_dim:
        offsets = last  # same rows: the (read-only) level is shared
    elif width % new_dim == 0:
        offsets = last * (width // new_dim)
    else:
        # Offsets in values; every one divisible by new_dim <=> every sequence's count is.
        scaled = last * width
        rest = scaled % new_dim
        if rest.any():
            k = int(np.argmax(rest != 0))
            rows = int(last[k] - last[k - 1])
            raise ValueError(f"sequence_reshape: sequence {k - 1} of input has {rows} rows "
                             f"of width {width} = {rows * width} values, not divisible by "
                             f"new_dim={new_dim}")
        offsets = scaled // new_dim
    if offsets is not last:
        offsets.flags.writeable = False
    shape = (int(offsets[-1]), new_dim)
    with be.device(data):
        res = (be.empty(shape, data.dtype) if out is None
               else into(out, "sequence_reshape", shape, data.dtype, be, data, (data,)))
        _copy(res, data)
    if out is not None:
        res = landed(res, out)
    return x._derive(res, (*x.offsets[:-1], offsets))


def _copy(out, data):
    """One pass from any layout (strided, Fortran-ordered, read-only) into ``out``.

    A reshape is a memcpy; NumPy's and CuPy's own copies are as fast as a kernel could be.
    """
    if out.size:
        out.reshape(data.shape)[...] = data


def _new_dim(new_dim):
    new_dim = as_int(new_dim, "new_dim")
    if new_dim < 1:
        raise ValueError(f"sequence_reshape: new_dim must be >= 1, got {new_dim}")
    return new_dim


def _check_literals(args):
    if "new_dim" in args:
        _new_dim(args["new_dim"])


#: The table form (docs/tables.md).
TABLE = {"sequence_reshape": TableContract(("input",), check=_check_literals)}
