"""LoDTensor <-> PyTorch: varlen (``cu_seqlens``), nested jagged tensors and padded batches.

See docs/interop.md#pytorch for the model of each layout and the table of copies.  torch is
imported on the first call (``import lodarrow`` never imports it).
"""

import warnings
from typing import NamedTuple

import numpy as np

from lodarrow._cupy import array_module, is_cupy_array
from lodarrow._hub import _common
from lodarrow._interop._optional import import_optional
from lodarrow._ops import sequence_pad
from lodarrow._validation import check_choice

__all__ = ["LAYOUTS", "TorchPadded", "TorchVarlen", "from_torch", "to_torch"]

LAYOUTS = ("varlen", "jagged", "padded")


class TorchVarlen(NamedTuple):
    """The varlen layout of FlashAttention / ``torch.nn.attention.varlen`` (docs/interop.md).

    ``values`` ``(T, *feature_shape)`` shares the tensor's memory; ``cu_seqlens`` ``(N + 1,)``
    are the last level's offsets (int32 by default: a cast, O(N)); ``max_seqlen`` the longest
    sequence (a Python int); ``lod`` every level's int64 offsets, outermost first, zero-copy
    (``lod[-1]`` holds the same offsets as ``cu_seqlens``).
    """

    values: object
    cu_seqlens: object
    max_seqlen: int
    lod: tuple


class TorchPadded(NamedTuple):
    """A padded batch: ``values`` ``(N, P, *feature_shape)``, ``lengths`` int64 ``(N,)``,
    ``mask`` bool ``(N, P)`` (True on real steps), ``lod`` the outer levels' int64 offsets
    (empty for a one-level tensor), as :func:`lodarrow.sequence_pad` cuts them."""

    values: object
    lengths: object
    mask: object
    lod: tuple


def _torch(fn):
    return import_optional("torch", fn)


def _as_torch(torch, array):
    """NumPy / CuPy array -> torch.Tensor sharing its memory.

    NumPy goes through ``torch.from_numpy`` (strided views kept); LoD offsets and Arrow
    buffers are read-only NumPy arrays, which torch can share but not mark read-only: its
    warning about that is silenced here and the rule stated in docs/interop.md (do not
    write into a converted tensor in place).
    """
    if is_cupy_array(array):
        return torch.from_dlpack(array)
    if array.strides and any(s < 0 for s in array.strides):
        array = np.ascontiguousarray(array)  # torch has no negative strides: a copy
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        return torch.from_numpy(array)


def _xp(array):
    return array_module(array)


def to_torch(obj, column=None, layout="varlen", *, cu_seqlens_dtype="int32", pad_value=0,
             maxlen=None, nulls="error"):
    """A LoDTensor (or a table column) as PyTorch tensors, in one of three layouts.

    Parameters
    ----------
    obj : LoDTensor or table
        A LoDTensor, or a pyarrow Table / RecordBatch, pandas or polars DataFrame with
        ``column`` naming a list column (read zero-copy through :func:`lodarrow.from_arrow`).
    column : str, optional
        The column to convert when ``obj`` is a table.
    layout : {"varlen", "jagged", "padded"}, default "varlen"
        ``"varlen"``: a :class:`TorchVarlen` (values + ``cu_seqlens`` + ``max_seqlen``, for
        ``torch.nn.attention.varlen`` / FlashAttention); ``"jagged"``: a nested tensor of
        layout ``torch.jagged`` (``nested_tensor_from_jagged``, one LoD level); ``"padded"``:
        a :class:`TorchPadded` (values padded to the longest sequence, lengths and mask).
    cu_seqlens_dtype : {"int32", "int64"}, default "int32"
        The dtype of ``cu_seqlens`` (varlen): int32, as FlashAttention takes it (a cast; a
        ``ValueError`` past 2**31 - 1 rows), or int64 (the offsets themselves, zero-copy).
    pad_value : scalar, default 0
        The padding (padded); see :func:`lodarrow.sequence_pad`.
    maxlen : int, optional
        The padded length (padded); None: the longest sequence.
    nulls : {"error", "empty"}, default "error"
        For a table column: what a null list becomes (see :func:`lodarrow.from_arrow`).

    Returns
    -------
    TorchVarlen, torch.Tensor or TorchPadded
        On the tensor's device (CuPy data gives CUDA tensors, through DLPack).  The values
        share the LoDTensor's memory in the varlen and jagged layouts; docs/interop.md#copies
        lists what is copied.

    Raises
    ------
    ValueError
        If ``layout`` is unknown; if ``"jagged"`` is asked for a tensor with several LoD
        levels (merge them with :meth:`LoDTensor.merge_levels` or use ``"varlen"``, which keeps
        them all); if int32 ``cu_seqlens`` cannot hold the row count; if the tensor has no
        LoD level (varlen, jagged, padded all need one).
    ImportError
        If torch is not installed (the ``torch`` extra: ``pip install -e '.[torch]'``
        in the checkout).

    See Also
    --------
    from_torch : The inverse.

    Examples
    --------
    >>> import numpy as np, lodarrow as la
    >>> t = la.LoDTensor(np.arange(5.0), lengths=[[2, 3]])
    >>> v = t.to_torch("varlen")  # doctest: +SKIP
    >>> v.cu_seqlens.tolist(), v.max_seqlen  # doctest: +SKIP
    ([0, 2, 5], 3)
    """
    fn = "to_torch"
    check_choice(layout, f"{fn}: layout", LAYOUTS)
    check_choice(cu_seqlens_dtype, f"{fn}: cu_seqlens_dtype", ("int32", "int64"))
    _common.check_pad_value(pad_value, fn)
    maxlen = _common.check_maxlen(maxlen, fn)
    fn = f"to_torch({layout!r})"
    t, data, offsets = _common.sequence_parts(obj, column, nulls, fn,
                                              "torch.from_dlpack(t) (or t.numpy())")
    torch = _torch(fn)
    if layout == "jagged":
        return _to_jagged(torch, t, data, offsets, fn)
    if layout == "padded":
        return _to_padded(torch, t, pad_value, maxlen, fn)
    values = _as_torch(torch, data)
    lod = tuple(_as_torch(torch, _common.host_offsets(t, k)) for k in range(len(offsets)))
    last = offsets[-1]
    n = last.shape[0] - 1
    max_seqlen = int((last[1:] - last[:-1]).max()) if n else 0
    if cu_seqlens_dtype == "int64":
        return TorchVarlen(values, lod[-1], max_seqlen, lod)
    if int(last[-1]) > _common.INT32_MAX:
        raise ValueError(f"{fn}: int32 cu_seqlens cannot hold {int(last[-1])} rows (more "
                         f"than 2**31 - 1); pass cu_seqlens_dtype='int64', or convert in "
                         f"smaller batches (t[i:j])")
    return TorchVarlen(values, lod[-1].to(torch.int32), max_seqlen, lod)


def _to_jagged(torch, t, data, offsets, fn):
    if len(offsets) > 1:
        raise ValueError(f"{fn}: a nested tensor of layout torch.jagged holds one ragged "
                         f"dimension, this tensor has {len(offsets)} LoD levels; merge them "
                         f"first (t.merge_levels(0, {len(offsets) - 1})) or use "
                         f"layout='varlen', which keeps every level")
    if offsets[0].shape[0] == 1:
        raise ValueError(f"{fn}: torch cannot build a jagged nested tensor of zero sequences; "
                         f"use layout='varlen' or 'padded'")
    values = _as_torch(torch, data)
    off = _as_torch(torch, _common.host_offsets(t, 0))
    # nested_tensor_from_jagged keeps both tensors as they are (zero-copy)
    return torch.nested.nested_tensor_from_jagged(values, off)


def _to_padded(torch, t, pad_value, maxlen, fn):
    padded, length = sequence_pad(t, pad_value, maxlen)
    data, lens = padded._data, length._data
    xp = _xp(lens)
    width = data.shape[1]
    mask = xp.arange(width, dtype=np.int64)[None, :] < lens[:, None]
    lod = tuple(_as_torch(torch, o) for o in (
        [padded._device_offsets_for(k) for k in range(len(padded._offsets))]
        if is_cupy_array(data) else padded._offsets))
    return TorchPadded(_as_torch(torch, data), _as_torch(torch, lens), _as_torch(torch, mask),
                       lod)


# ---------------------------------------------------------------------------- from torch
def _to_array(torch, x, fn, what="values"):
    """torch.Tensor -> NumPy (CPU, zero-copy) or CuPy (CUDA, zero-copy through DLPack)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{fn}: {what} must be a torch.Tensor, got {type(x).__name__}")
    x = x.detach()
    if x.dtype == torch.bfloat16:
        raise TypeError(f"{fn}: {what} of dtype torch.bfloat16 have no NumPy dtype; convert "
                        f"them first (x.to(torch.float32))")
    if x.is_conj() or x.is_neg():
        x = x.resolve_conj().resolve_neg()
    if x.device.type == "cuda":
        cupy = import_optional("cupy", fn)
        return cupy.from_dlpack(x)
    if x.device.type != "cpu":
        raise ValueError(f"{fn}: {what} on device {x.device} (only CPU and CUDA tensors "
                         f"convert); move them first (x.cpu())")
    return x.numpy()


def _offsets(torch, x, fn, what):
    arr = _to_array(torch, x, fn, what) if isinstance(x, torch.Tensor) else x
    try:
        arr = _common.host_array(arr, fn)
    except (TypeError, ValueError):
        raise TypeError(f"{fn}: {what} must be a 1-D integer tensor or array, got "
                        f"{type(x).__name__}") from None
    return _common.check_offsets(arr, fn, what)


def _lod(lod, fn):
    if isinstance(lod, (str, bytes)) or not hasattr(lod, "__len__"):
        raise TypeError(f"{fn}: lod must be a sequence of offset tensors, got "
                        f"{type(lod).__name__}")
    return list(lod)


def from_torch(obj, *, cu_seqlens=None, lod=None, lengths=None):
    """A LoDTensor from PyTorch: nested, varlen or padded tensors (docs/interop.md#pytorch).

    ``obj`` is a jagged nested tensor, a :class:`TorchVarlen` / :class:`TorchPadded`, or
    values with their offsets or lengths.

    Parameters
    ----------
    obj : torch.Tensor, TorchVarlen or TorchPadded
        A nested tensor of layout ``torch.jagged`` (its values and offsets, zero-copy); what
        :func:`to_torch` returned; or a dense tensor: the values ``(T, *feature_shape)`` with
        ``cu_seqlens`` or ``lod``, the padded block ``(N, P, *feature_shape)`` with
        ``lengths``, or alone (a LoDTensor without LoD).
    cu_seqlens : torch.Tensor or array_like, optional
        The offsets of one level (int32 or int64; a first entry other than 0 reads a slice).
    lod : sequence of torch.Tensor or array_like, optional
        Every level's offsets, outermost first (instead of ``cu_seqlens``).  With
        ``lengths``: the outer levels of a padded batch.
    lengths : torch.Tensor or array_like, optional
        The real length of each padded row (``obj`` is padded; :func:`lodarrow.sequence_unpad`
        copies the steps out).

    Returns
    -------
    LoDTensor
        On the CPU for CPU tensors, on the GPU (CuPy) for CUDA tensors; the values are shared
        but for padded input (docs/interop.md#copies).

    Raises
    ------
    TypeError
        If ``obj`` is not one of the above, or its dtype has no NumPy equivalent (bfloat16).
    ValueError
        If the offsets decrease or do not match the values.
    ImportError
        If torch is not installed.

    See Also
    --------
    to_torch : The inverse.

    Examples
    --------
    >>> import lodarrow as la
    >>> import torch  # doctest: +SKIP
    >>> values = torch.arange(5.0)  # doctest: +SKIP
    >>> la.from_torch(values, cu_seqlens=torch.tensor([0, 2, 5])).lod()  # doctest: +SKIP
    [[0, 2, 5]]
    >>> la.from_torch(torch.tensor([[1, 2], [3, 0]]), lengths=[2, 1]).lod()  # doctest: +SKIP
    [[0, 2, 3]]
    """
    fn = "from_torch"
    torch = _torch(fn)
    if isinstance(obj, TorchVarlen):
        if cu_seqlens is not None or lod is not None or lengths is not None:
            raise TypeError(f"{fn}: a TorchVarlen carries its offsets; pass no other")
        lod = obj.lod if obj.lod else (obj.cu_seqlens,)
        obj = obj.values
    elif isinstance(obj, TorchPadded):
        if cu_seqlens is not None or lod is not None or lengths is not None:
            raise TypeError(f"{fn}: a TorchPadded carries its lengths; pass no other")
        lod, lengths, obj = obj.lod, obj.lengths, obj.values
    if isinstance(obj, torch.Tensor) and obj.is_nested:
        if cu_seqlens is not None or lod is not None or lengths is not None:
            raise TypeError(f"{fn}: a nested tensor carries its offsets; pass no other")
        return _from_nested(torch, obj, fn)
    values = _to_array(torch, obj, fn, "obj")
    if lod is not None:
        lod = _lod(lod, fn)
    if lengths is not None:
        return _from_padded(torch, values, lengths, lod, fn)
    if cu_seqlens is not None:
        if lod is not None:
            raise TypeError(f"{fn}: give cu_seqlens or lod, not both")
        levels = [_offsets(torch, cu_seqlens, fn, "cu_seqlens")]
    elif lod is None:
        return _common.build(values, [], fn)
    else:
        levels = [_offsets(torch, o, fn, f"lod[{k}]") for k, o in enumerate(lod)]
    levels, lo, hi = _common.rebase_levels(levels, values.shape[0], fn)
    if lo or hi != values.shape[0]:
        values = values[lo:hi]
    return _common.build(values, levels, fn)


def _from_nested(torch, nt, fn):
    if nt.layout != torch.jagged:
        raise TypeError(f"{fn}: nested tensors of layout {nt.layout} hold no offsets; convert "
                        f"with nt.to_padded_tensor(...) and pass lengths=, or build the nested "
                        f"tensor with layout=torch.jagged")
    if nt._ragged_idx != 1:
        raise ValueError(f"{fn}: the ragged dimension of this nested tensor is "
                         f"{nt._ragged_idx}, not 1 (transposed); call .transpose back first")
    values = _to_array(torch, nt.values(), fn)
    off = _offsets(torch, nt.offsets(), fn, "offsets")
    lens = nt.lengths()
    if lens is not None:  # a narrowed nested tensor: offsets + lengths, holes between
        lens = _common.host_array(_to_array(torch, lens, fn, "lengths"), fn).astype(np.int64)
        starts = off[:-1]
        new = np.zeros(lens.shape[0] + 1, dtype=np.int64)
        np.cumsum(lens, out=new[1:])
        rows = np.repeat(starts - new[:-1], lens) + np.arange(new[-1], dtype=np.int64)
        xp = _xp(values)
        return _common.build(values.take(xp.asarray(rows), axis=0), [new], fn)
    levels, lo, hi = _common.rebase_levels([off], values.shape[0], fn)
    if lo or hi != values.shape[0]:
        values = values[lo:hi]
    return _common.build(values, levels, fn)


def _from_padded(torch, values, lengths, lod, fn):
    lens = lengths
    if isinstance(lens, torch.Tensor):
        lens = _to_array(torch, lens, fn, "lengths")
    elif not isinstance(lens, (np.ndarray, list, tuple)) and not hasattr(lens, "__array__"):
        raise TypeError(f"{fn}: lengths must be a 1-D integer tensor or array, got "
                        f"{type(lens).__name__}")
    if values.ndim < 2:
        raise ValueError(f"{fn}: padded values need shape (N, P, ...), got {values.shape}")
    outer = [] if lod is None else [_offsets(torch, o, fn, f"lod[{k}]")
                                    for k, o in enumerate(lod)]
    return _common.unpad(values, lens, outer, fn)
