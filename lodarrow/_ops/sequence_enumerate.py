"""``sequence_enumerate``: every window of ``win_size`` ids of a sequence.

Semantics, edge cases, errors and departures from Paddle: docs/operators.md#sequence_enumerate.
"""

from lodarrow._backends import backend_of_array
from lodarrow._ops._common import (ANY_LEVELS, as_lod_tensor, check_growth, pad_array,
                                   require_lod_levels)
from lodarrow._ops._contract import TableContract
from lodarrow._ops._out import into, landed
from lodarrow._validation import as_int

__all__ = ["sequence_enumerate"]


def sequence_enumerate(input, win_size, pad_value=0, name=None, *, out=None):
    """Enumerate all windows of ``win_size`` consecutive values inside each sequence.

    For row ``t`` of a last-level sequence ending at row ``end``:
    ``out[t, k] = input[t + k]`` if ``t + k < end``, else ``pad_value``.

    Parameters
    ----------
    input : LoDTensor or Arrow array of lists
        Data of shape ``(N, 1)`` or ``(N,)`` (docs/operators.md#fewer-restrictions), any integer or
        float dtype (bool too: values only move), with at least one LoD level; outer levels are
        carried through and windows stop at the end of a last-level sequence.
    win_size : int
        The window length, >= 1.  It may exceed the longest sequence (the rest is padding)
        as long as the output stays within ``max(1 GiB, 16 x`` the output at
        ``win_size`` = the longest sequence).
    pad_value : scalar or array_like, default 0
        Fills window positions past the sequence's end: a Python scalar converted exactly, or a
        shape ``()``/``(1,)`` array whose dtype casts safely (docs/operators.md#exact-pad-values).
    name : str, optional
        Ignored (Paddle compatibility).
    out : numpy.ndarray or cupy.ndarray, optional
        Keyword-only: a preallocated array that receives the result's data (exactly its shape
        and dtype, on the input's device, C-contiguous, writable)
        (docs/operators.md#out-writing-into-a-preallocated-array).

    Returns
    -------
    LoDTensor
        Shape ``(N, win_size)``, ``input``'s dtype and full LoD.

    Raises
    ------
    LoDError
        If ``input`` has no LoD.
    ValueError
        If the data is not of shape ``(N, 1)`` or ``(N,)``, ``win_size < 1`` or absurdly
        large, or ``pad_value`` has a wrong shape.
    TypeError
        If ``win_size`` is not an integer or ``pad_value`` does not convert exactly.

    Examples
    --------
    >>> import numpy as np, lodarrow as la
    >>> x = la.LoDTensor(np.array([[1], [2], [3], [4], [5]]), lod=[[0, 3, 5]])
    >>> out = la.sequence_enumerate(x, win_size=2, pad_value=0)
    >>> out.numpy()
    array([[1, 2],
           [2, 3],
           [3, 0],
           [4, 5],
           [5, 0]])
    >>> out.lod()
    [[0, 3, 5]]
    """
    x = as_lod_tensor(input, "input")
    require_lod_levels(x, "input", "sequence_enumerate", ANY_LEVELS)
    data = x.data
    be = backend_of_array(data)
    if data.ndim > 2 or (data.ndim == 2 and data.shape[1] != 1):
        raise ValueError(f"sequence_enumerate: input must be of shape [N, 1] or [N], got "
                         f"shape {tuple(data.shape)}")
    win = _win_size(win_size)
    offsets = x.offsets[-1]
    n_rows = data.shape[0]
    check_growth("sequence_enumerate", "win_size", win,
                 lambda: int((offsets[1:] - offsets[:-1]).max()) if offsets.shape[0] > 1 else 0,
                 n_rows * data.itemsize)
    with be.device(data):
        pad = pad_array(pad_value, data.dtype, (), be.xp)
        res = (be.empty((n_rows, win), data.dtype) if out is None
               else into(out, "sequence_enumerate", (n_rows, win), data.dtype, be, data,
                         (data, pad)))
        be.kernel("enumerate_windows")(res, data, pad, be.offsets(x, -1))
    if out is not None:
        res = landed(res, out)
    return x._derive(res)


def _win_size(win_size):
    win = as_int(win_size, "win_size")
    if win < 1:
        raise ValueError(f"sequence_enumerate: win_size must be >= 1, got {win}")
    return win


def _check_literals(args):
    if "win_size" in args:
        _win_size(args["win_size"])


#: The table form (docs/tables.md).
TABLE = {"sequence_enumerate": TableContract(("input",), check=_check_literals)}
