"""``sequence_unpad``: cut padded rows back into sequences.

Semantics, edge cases, errors and departures from Paddle: docs/operators.md#sequence_unpad.
"""

import numpy as np

from lodarrow._backends import backend_of
from lodarrow._cupy import is_cupy_array
from lodarrow._ops._common import as_lod_tensor, data_of
from lodarrow._ops._contract import TableContract
from lodarrow._ops._out import into, landed
from lodarrow._tensor import LoDTensor
from lodarrow._validation import as_index_array

__all__ = ["sequence_unpad"]


def sequence_unpad(x, length, name=None, *, out=None):
    """Remove the padding of ``x``: row ``i`` keeps its first ``length[i]`` steps.

    The inverse of :func:`sequence_pad`.

    Parameters
    ----------
    x : array_like or LoDTensor
        Padded data of shape ``(B, L, *feature_shape)``, rank >= 2, any dtype.  If it has a
        LoD (``B`` rows cut into sequences, as :func:`sequence_pad` returns for a multi-level
        input), the output keeps it as its outer levels.
    length : array_like or LoDTensor
        ``B`` lengths, shape ``(B,)`` or ``(B, 1)``, any integer dtype, each in ``[0, L]``;
        on ``x``'s device, or a Python list (which goes with either).
        When ``x`` has no LoD and ``length`` has one, that LoD is used as the outer levels.
    name : str, optional
        Ignored (Paddle compatibility).
    out : numpy.ndarray or cupy.ndarray, optional
        Keyword-only: a preallocated array that receives the result's data (exactly its shape
        and dtype, on the input's device, C-contiguous, writable)
        (docs/operators.md#out-writing-into-a-preallocated-array).

    Returns
    -------
    LoDTensor
        The rows ``x[i, :length[i]]`` of every ``i``, concatenated: shape
        ``(sum(length), *feature_shape)``, or ``(sum(length), 1)`` for a 2-D ``x`` (as
        Paddle).  LoD: ``x``'s LoD (if any) followed by one level with lengths ``length``.
        All-zero lengths give an empty output whose last level is all zeros
        (docs/operators.md#nothing-undefined; Paddle crashes).

    Raises
    ------
    ValueError
        If ``x`` has rank < 2, ``length`` has a wrong shape or count, a length is negative
        or longer than ``L``, or ``x`` and ``length`` carry different LoDs; if the inputs live
        on different devices.
    TypeError
        If ``length`` does not hold integers.

    See Also
    --------
    sequence_pad : The inverse: sequences to padded rows and their lengths.
    lodarrow.torch.sequence_unpad : The same operator on torch tensors, differentiable.

    Examples
    --------
    >>> import numpy as np, lodarrow as la
    >>> x = np.arange(1.0, 16.0).reshape(3, 5)
    >>> out = la.sequence_unpad(x, np.array([2, 3, 4]))
    >>> out.lod()
    [[0, 2, 5, 9]]
    >>> out.numpy()[:, 0]
    array([ 1.,  2.,  6.,  7.,  8., 11., 12., 13., 14.])
    """
    x = as_lod_tensor(x, "x")
    # a Python list of lengths has no device: it goes with x on either (as sequence_slice's)
    be = backend_of("sequence_unpad", x=x.data,
                    length=None if isinstance(length, (list, tuple)) else data_of(length))
    data = x.data
    if data.ndim < 2:
        raise ValueError(f"sequence_unpad: x must have rank >= 2 ([batch, padded_length, "
                         f"...]), got shape {tuple(data.shape)}")
    batch, padded = data.shape[0], data.shape[1]
    lens, length_lod = _host_lengths(length)
    if lens.shape[0] != batch:
        raise ValueError(f"sequence_unpad: length has {lens.shape[0]} entries but x has "
                         f"{batch} rows (its batch size)")
    if batch:
        low, high = lens.min(), lens.max()
        if low < 0:
            pos = int(np.argmax(lens < 0))
            raise ValueError(f"sequence_unpad: length[{pos}] = {int(lens[pos])} is negative")
        if high > padded:
            pos = int(np.argmax(lens > padded))
            raise ValueError(f"sequence_unpad: length[{pos}] = {int(lens[pos])} exceeds the "
                             f"padded length of x ({padded}, x.shape[1])")
    outer = x.offsets
    if length_lod:
        if not outer:
            outer = length_lod
        elif len(outer) != len(length_lod) or not all(
                np.array_equal(a, b) for a, b in zip(outer, length_lod)):
            raise ValueError(f"sequence_unpad: x and length carry different LoDs "
                             f"({x.lod()} and {[lv.tolist() for lv in length_lod]})")
    offsets = np.empty(batch + 1, dtype=np.int64)
    offsets[0] = 0
    np.cumsum(lens, out=offsets[1:])
    offsets.flags.writeable = False
    fshape = tuple(data.shape[2:]) if data.ndim > 2 else (1,)
    shape = (int(offsets[-1]), *fshape)
    with be.device(data):
        res = (be.empty(shape, data.dtype) if out is None
               else into(out, "sequence_unpad", shape, data.dtype, be, data, (data,)))
        result = x._derive(res, (*outer, offsets))
        be.kernel("unpad")(res, data, be.offsets(result, -1))
    if out is not None and res is not out:
        result = x._derive(landed(res, out), result.offsets)
    return result


def _host_lengths(length):
    """``(lengths as host int64 1-D, the LoD it carries or ())``."""
    lod = ()
    if isinstance(length, LoDTensor):
        length._check_valid("length")
        lod, length = length.offsets, length.data
    elif not (isinstance(length, (np.ndarray, list, tuple)) or is_cupy_array(length)
              or np.isscalar(length)):
        t = as_lod_tensor(length, "length")  # Arrow arrays
        lod, length = t.offsets, t.data
    if is_cupy_array(length):
        length = length.get()
    return as_index_array(length, "length"), lod

#: The table form (docs/tables.md).
TABLE = {"sequence_unpad": TableContract(("x", "length"), plain=("x", "length"))}
