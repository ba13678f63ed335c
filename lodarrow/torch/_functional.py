"""The public functions of ``lodarrow.torch``: lodarrow's operators on torch tensors.

Each one parses its ragged arguments (``_bridge.ragged``: a jagged nested tensor, or values
with an ``offsets`` tensor or a list of them, outermost level first), checks what it can
without reading data (dtypes, devices, ranks, literals), and calls one custom operator of
``_library``; the operator's kernel validates the offsets once and runs lodarrow's kernel.
Ragged results come back in the form the ragged input came in.
"""

import functools

import torch

from lodarrow._ops.sequence_pool import _pool_type
from lodarrow._validation import as_flag, as_int
from lodarrow.torch import _bridge, _library

__all__ = [
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


def _nested_shift(fn):
    """``f(nt, a, ...)`` with a nested ``nt`` means ``f(nt, None, a, ...)``: a nested tensor
    carries its offsets, so its second positional argument is the operator's next one (a
    floating-point tensor there is a pad value, never offsets)."""
    @functools.wraps(fn)
    def wrapper(input, *args, **kwargs):
        if args and _bridge.is_nested(input) and args[0] is not None \
                and (not _bridge.is_offsets(args[0])
                     or (isinstance(args[0], torch.Tensor) and args[0].is_floating_point())):
            args = (None, *args)
        return fn(input, *args, **kwargs)
    return wrapper


def _pad(value, op, name, values):
    """A pad value as the custom operators take it: ``(float,)`` for a Python number, or
    ``(0.0, tensor)`` for a tensor of shape ``()``, ``(1,)`` or the values' feature shape (one
    value per feature, as ``lodarrow.sequence_pad`` and Paddle take it) whose dtype casts
    safely to the values' (a float32 pad for float64 values, not the reverse)."""
    if not isinstance(value, torch.Tensor):
        return (_scalar(value, op, name),)
    if value.is_nested or value.dtype.is_complex or value.dtype == torch.bool:
        raise TypeError(f"{op}: {name} must be a real number or a real tensor, got "
                        f"{'a nested tensor' if value.is_nested else value.dtype}")
    if torch.promote_types(value.dtype, values.dtype) != values.dtype:
        raise TypeError(f"{op}: {name} of dtype {value.dtype} cannot be cast safely to the "
                        f"values' dtype {values.dtype}")
    feature = tuple(values.shape[1:])
    if tuple(value.shape) not in ((), (1,), feature):
        raise ValueError(f"{op}: {name} must have shape (), (1,) or the feature shape "
                         f"{feature}, got {tuple(value.shape)}")
    return 0.0, value


def _scalar(value, op, name):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{op}: {name} must be a Python number, got {type(value).__name__}")
    return float(value)


def _level_of(obj, op, name, device):
    """The LoD levels of a reference argument (``y``, ``row``, ``col``): an offsets tensor, a
    list of them, or a nested tensor (its offsets); and whether it was nested."""
    if _bridge.is_nested(obj):
        return [_bridge.check_offsets(obj.offsets(), op, f"{name}.offsets()", device)], True
    if isinstance(obj, torch.Tensor):
        return [_bridge.check_offsets(obj, op, name, device)], False
    if isinstance(obj, (list, tuple)) and obj:
        return [_bridge.check_offsets(o, op, f"{name}[{k}]", device)
                for k, o in enumerate(obj)], False
    raise TypeError(f"{op}: {name} must be offsets (an int64 tensor or a list of them) or a "
                    f"jagged nested tensor, got {type(obj).__name__}")


def _indices(obj, op, name, device):
    """An integer argument given as a tensor or a Python sequence, as an int64 tensor."""
    if isinstance(obj, torch.Tensor):
        if obj.dtype.is_floating_point or obj.dtype == torch.bool:
            raise TypeError(f"{op}: {name} must hold integers, got {obj.dtype}")
        return obj.to(device=device, dtype=torch.int64)
    try:
        return torch.as_tensor(obj, dtype=torch.int64, device=device)
    except (TypeError, ValueError, RuntimeError):
        raise TypeError(f"{op}: {name} must be an integer tensor or a sequence of integers, "
                        f"got {type(obj).__name__}") from None


# ============================================================================ pooling
@_nested_shift
def sequence_pool(input, offsets=None, pool_type=None, is_test=False, pad_value=0.0,
                  return_index=False, name=None):
    """Pool every sequence of the last LoD level into one row (differentiable).

    The torch form of :func:`lodarrow.sequence_pool` (docs/operators.md#sequence_pool): sum,
    average, sqrt, max, min, first or last over each sequence; an empty sequence gives
    ``pad_value`` and no gradient.

    Parameters
    ----------
    input : torch.Tensor
        Values ``(N, *feature_shape)`` (float16, float32 or float64), or a jagged nested
        tensor (its values and offsets).
    offsets : torch.Tensor or list of torch.Tensor, optional
        The LoD: int64 offsets ``(B + 1,)``, or a list of levels, outermost first (required
        unless ``input`` is nested).
    pool_type : str
        ``"sum"``, ``"average"``, ``"sqrt"``, ``"max"``, ``"min"``, ``"first"`` or
        ``"last"`` (any case); required (a keyword default only because ``offsets`` may be
        left out for a nested ``input``).
    is_test : bool, default False
        Ignored (Paddle compatibility).
    pad_value : float or torch.Tensor, default 0.0
        The row of an empty sequence: a Python number (not a bool; ``-0.0`` keeps its sign)
        or a tensor of shape ``()``, ``(1,)`` or the feature shape (one value per feature)
        whose dtype casts safely to ``input``'s.  Not differentiable.
    return_index : bool, default False
        Also return the max / min row numbers (int64, -1 for an empty sequence).
    name : str, optional
        Ignored (Paddle compatibility).

    Returns
    -------
    torch.Tensor or tuple
        ``(B, *feature_shape)``; for a list of several levels ``(values, offsets[:-1])``.
        With ``return_index`` also the index, as a second element.

    Raises
    ------
    TypeError
        If ``input`` is not a float tensor, or the offsets are not integer tensors (or
        require grad).
    ValueError
        If ``pool_type`` is unknown, or tensors live on different devices.
    lodarrow.LoDError
        If the offsets are not a valid LoD for the rows (naming the level and position).

    See Also
    --------
    lodarrow.sequence_pool : The same operator on LoDTensors (NumPy and CuPy arrays).
    lodarrow.vjp : The backward of any operator, on NumPy and CuPy arrays.

    Examples
    --------
    >>> import torch, lodarrow.torch as lt
    >>> x = torch.tensor([1.0, 3.0, 2.0, 4.0, 6.0], requires_grad=True)
    >>> y = lt.sequence_pool(x, torch.tensor([0, 2, 5]), "average")
    >>> y.detach(), y.requires_grad
    (tensor([2., 4.]), True)
    >>> y.sum().backward()
    >>> x.grad
    tensor([0.5000, 0.5000, 0.3333, 0.3333, 0.3333])
    """
    if (type(input) is torch.Tensor and type(offsets) is torch.Tensor and is_test is False
            and return_index is False and type(pad_value) is float):
        out = _library.pool_small(input, offsets, pool_type, pad_value)   # None: not common
        if out is not None:
            return out
    op = "sequence_pool"
    r = _bridge.ragged(input, offsets, op)
    if pool_type is None:
        raise TypeError(f"{op}: pool_type is required (sum, average, sqrt, max, min, first "
                        f"or last)")
    pool = _pool_type(pool_type)
    as_flag(is_test, f"{op}: is_test")
    as_flag(return_index, f"{op}: return_index")
    if return_index and pool not in ("max", "min"):
        raise ValueError(f"{op}: return_index=True needs pool_type 'max' or 'min', got "
                         f"{pool!r}")
    out, index = _library.call(_library.sequence_pool, r.values, r.lod, pool,
                               *_pad(pad_value, op, "pad_value", r.values))
    if len(r.lod) > 1:
        out = r.wrap(out, r.lod[:-1])
    return (out, index) if return_index else out


def _step(which):
    """``sequence_first_step`` / ``sequence_last_step``: ``sequence_pool(input, offsets,
    which)``, one definition for both (the docstring names the row)."""
    @_nested_shift
    def step(input, offsets=None, name=None):
        return sequence_pool(input, offsets, which)
    index = "0" if which == "first" else "-1"
    got = "tensor([0., 0., 2.])" if which == "first" else "tensor([1., 0., 4.])"
    step.__name__ = step.__qualname__ = f"sequence_{which}_step"
    step.__doc__ = f"""The {which} row of every last-level sequence: ``sequence_pool(input, offsets, "{which}")``.

    Parameters
    ----------
    input : torch.Tensor
        Float values ``(N, *feature_shape)`` or a jagged nested tensor.
    offsets : torch.Tensor or list of torch.Tensor, optional
        The LoD (see :func:`sequence_pool`).
    name : str, optional
        Ignored (Paddle compatibility).

    Returns
    -------
    torch.Tensor or tuple
        As :func:`sequence_pool` (row ``{index}`` of each sequence); 0 for an empty sequence.

    See Also
    --------
    lodarrow.sequence_{which}_step : The same operator on LoDTensors (NumPy and CuPy arrays).
    lodarrow.vjp : The backward of any operator, on NumPy and CuPy arrays.

    Examples
    --------
    >>> import torch, lodarrow.torch as lt
    >>> lt.sequence_{which}_step(torch.arange(5.0), torch.tensor([0, 2, 2, 5]))
    {got}
    """
    return step


sequence_first_step = _step("first")
sequence_last_step = _step("last")


@_nested_shift
def sequence_softmax(input, offsets=None, use_cudnn=False, name=None):
    """Softmax over the values of every last-level sequence (numerically stable).

    Parameters
    ----------
    input : torch.Tensor
        Float values ``(N,)`` or ``(N, 1)``, or a jagged nested tensor.
    offsets : torch.Tensor or list of torch.Tensor, optional
        The LoD (required unless ``input`` is nested).
    use_cudnn : bool, default False
        Ignored (Paddle compatibility).
    name : str, optional
        Ignored (Paddle compatibility).

    Returns
    -------
    tuple or torch.Tensor
        ``(values, offsets)`` (the same offsets) or a nested tensor, as ``input`` came.

    See Also
    --------
    lodarrow.sequence_softmax : The same operator on LoDTensors (NumPy and CuPy arrays).
    lodarrow.vjp : The backward of any operator, on NumPy and CuPy arrays.

    Examples
    --------
    >>> import torch, lodarrow.torch as lt
    >>> y, off = lt.sequence_softmax(torch.zeros(3), torch.tensor([0, 1, 3]))
    >>> y
    tensor([1.0000, 0.5000, 0.5000])
    """
    op = "sequence_softmax"
    r = _bridge.ragged(input, offsets, op)
    as_flag(use_cudnn, f"{op}: use_cudnn")
    return r.wrap(_library.call(_library.sequence_softmax, r.values, r.lod), r.lod)


# ============================================================================ expansion
def sequence_expand(x, y, ref_level=-1, name=None, *, x_offsets=None):
    """Repeat each row (or sequence) of ``x`` as ``y``'s level ``ref_level`` says.

    Parameters
    ----------
    x : torch.Tensor
        Float values: one row per sequence of ``y``'s level (``x`` without LoD), or a jagged
        nested tensor / values with ``x_offsets`` (one sequence per sequence of that level,
        repeated whole).
    y : torch.Tensor or list of torch.Tensor
        ``y``'s LoD: an offsets tensor, a list of levels, or a jagged nested tensor (its data
        is not read).
    ref_level : int, default -1
        The level of ``y`` to follow; -1 means the last.
    name : str, optional
        Ignored (Paddle compatibility).
    x_offsets : torch.Tensor, optional
        Keyword-only: ``x``'s one LoD level.

    Returns
    -------
    tuple or torch.Tensor
        ``(values, offsets)``: for ``x`` with a LoD the new level; for ``x`` without, the
        level of ``y`` that grouped the copies.  A nested tensor when ``x`` (or, for ``x``
        without LoD, ``y``) was one.

    See Also
    --------
    sequence_expand_as : Repeat row ``i`` of ``x`` as many times as ``y``'s sequence ``i`` is long.
    lodarrow.sequence_expand : The same operator on LoDTensors (NumPy and CuPy arrays).
    lodarrow.vjp : The backward of any operator, on NumPy and CuPy arrays.

    Examples
    --------
    >>> import torch, lodarrow.torch as lt
    >>> v, off = lt.sequence_expand(torch.tensor([[1.0], [2.0]]), torch.tensor([0, 2, 3]))
    >>> v.ravel(), off
    (tensor([1., 1., 2.]), tensor([0, 2, 3]))
    """
    op = "sequence_expand"
    if _bridge.is_nested(x):
        r = _bridge.ragged(x, x_offsets, op, "x", "x_offsets")
    else:
        if isinstance(x_offsets, (list, tuple)) and len(x_offsets) == 1:
            x_offsets = x_offsets[0]
        r = _bridge.ragged(x, x_offsets, op, "x", "x_offsets", required=False)
    y_lod, y_nested = _level_of(y, op, "y", r.values.device)
    ref_level = as_int(ref_level, f"{op}: ref_level")
    levels = len(y_lod)
    if not (ref_level == -1 or 0 <= ref_level < levels):
        raise ValueError(f"{op}: ref_level must be -1 or in [0, {levels}) for a y with "
                         f"{levels} LoD level(s), got {ref_level}")
    out, new = _library.call(_library.sequence_expand, r.values, r.lod, y_lod, ref_level)
    if r.lod:
        return r.wrap(out, [new])
    ref = y_lod[ref_level]
    if y_nested:
        return torch.nested.nested_tensor_from_jagged(out, ref)
    return out, ref


def sequence_expand_as(x, y, name=None):
    """Repeat row ``i`` of ``x`` ``len(y seq i)`` times; the result takes ``y``'s LoD.

    Parameters
    ----------
    x : torch.Tensor
        Float values, one row per sequence of ``y``.
    y : torch.Tensor
        ``y``'s one LoD level: an offsets tensor, or a jagged nested tensor (data not read).
    name : str, optional
        Ignored (Paddle compatibility).

    Returns
    -------
    tuple or torch.Tensor
        ``(values, y_offsets)``, or a nested tensor when ``y`` is one.

    See Also
    --------
    sequence_expand : Repeat rows or sequences by the lengths of a LoD level.
    lodarrow.sequence_expand_as : The same operator on LoDTensors (NumPy and CuPy arrays).
    lodarrow.vjp : The backward of any operator, on NumPy and CuPy arrays.

    Examples
    --------
    >>> import torch, lodarrow.torch as lt
    >>> v, off = lt.sequence_expand_as(torch.tensor([1.0, 2.0]), torch.tensor([0, 3, 4]))
    >>> v
    tensor([1., 1., 1., 2.])
    """
    op = "sequence_expand_as"
    values = _bridge.check_values(x, op, "x")
    y_lod, y_nested = _level_of(y, op, "y", values.device)
    if len(y_lod) != 1:
        raise ValueError(f"{op}: y must have exactly 1 LoD level, got {len(y_lod)}")
    out = _library.call(_library.sequence_expand_as, values, y_lod[0])
    if y_nested:
        return torch.nested.nested_tensor_from_jagged(out, y_lod[0])
    return out, y_lod[0]


# ============================================================================ layout
@_nested_shift
def sequence_pad(x, offsets=None, pad_value=0.0, maxlen=None, name=None):
    """Pad every last-level sequence to one length.

    Parameters
    ----------
    x : torch.Tensor
        Float values ``(N, *feature_shape)`` or a jagged nested tensor.
    offsets : torch.Tensor or list of torch.Tensor, optional
        The LoD (required unless ``x`` is nested).
    pad_value : float or torch.Tensor, default 0.0
        The padding: a Python number (not a bool) or a tensor of shape ``()``, ``(1,)`` or
        the feature shape (one value per feature) whose dtype casts safely to ``x``'s.  Not
        differentiable.
    maxlen : int, optional
        The padded length; None (or -1): the longest sequence.
    name : str, optional
        Ignored (Paddle compatibility).

    Returns
    -------
    padded : torch.Tensor
        ``(B, P, *feature_shape)``.  For several levels its outer LoD is ``offsets[:-1]``.
    length : torch.Tensor
        The lengths, int64 ``(B,)``.

    See Also
    --------
    sequence_unpad : The inverse: padded rows back to values and offsets.
    lodarrow.sequence_pad : The same operator on LoDTensors (NumPy and CuPy arrays).
    lodarrow.vjp : The backward of any operator, on NumPy and CuPy arrays.

    Examples
    --------
    >>> import torch, lodarrow.torch as lt
    >>> padded, length = lt.sequence_pad(torch.arange(3.0), torch.tensor([0, 1, 3]))
    >>> padded, length
    (tensor([[0., 0.],
            [1., 2.]]), tensor([1, 2]))
    """
    op = "sequence_pad"
    r = _bridge.ragged(x, offsets, op, "x")
    width = -1 if maxlen is None else as_int(maxlen, f"{op}: maxlen")
    if width < -1:
        raise ValueError(f"{op}: maxlen must be None, -1 or >= 0, got {width}")
    pad_value, *pad = _pad(pad_value, op, "pad_value", r.values)
    return _library.call(_library.sequence_pad, r.values, r.lod, pad_value, width, *pad)


def sequence_unpad(x, length, name=None):
    """Cut padded rows back into sequences: row ``i`` keeps its first ``length[i]`` steps.

    Parameters
    ----------
    x : torch.Tensor
        Float padded values ``(B, L, *feature_shape)``.
    length : torch.Tensor or sequence of int
        ``B`` lengths, each in ``[0, L]``.
    name : str, optional
        Ignored (Paddle compatibility).

    Returns
    -------
    tuple
        ``(values, offsets)``: values ``(sum(length), *feature_shape)`` (``(sum, 1)`` for a
        2-D ``x``, as Paddle) and int64 offsets ``(B + 1,)``.

    See Also
    --------
    sequence_pad : The inverse: sequences to padded rows and their lengths.
    lodarrow.sequence_unpad : The same operator on LoDTensors (NumPy and CuPy arrays).
    lodarrow.vjp : The backward of any operator, on NumPy and CuPy arrays.

    Examples
    --------
    >>> import torch, lodarrow.torch as lt
    >>> v, off = lt.sequence_unpad(torch.arange(6.0).reshape(2, 3), [2, 1])
    >>> v.ravel(), off
    (tensor([0., 1., 3.]), tensor([0, 2, 3]))
    """
    op = "sequence_unpad"
    values = _bridge.check_values(x, op, "x")
    if values.ndim < 2:
        raise ValueError(f"{op}: x must have rank >= 2 ([batch, padded_length, ...]), got "
                         f"shape {tuple(values.shape)}")
    lens = _indices(length, op, "length", values.device).reshape(-1)
    return _library.call(_library.sequence_unpad, values, lens)


def sequence_concat(input, offsets=None, name=None):
    """Concatenate several ragged tensors sequence by sequence.

    Parameters
    ----------
    input : list of torch.Tensor
        Jagged nested tensors, or float values (one per input) with ``offsets``.
    offsets : list, optional
        One LoD per input: an offsets tensor or a list of levels (the outer levels equal).
    name : str, optional
        Ignored (Paddle compatibility).

    Returns
    -------
    tuple or torch.Tensor
        ``(values, offsets)`` in the first input's form, or a nested tensor.

    See Also
    --------
    lodarrow.sequence_concat : The same operator on LoDTensors (NumPy and CuPy arrays).
    lodarrow.vjp : The backward of any operator, on NumPy and CuPy arrays.

    Examples
    --------
    >>> import torch, lodarrow.torch as lt
    >>> v, off = lt.sequence_concat([torch.tensor([1.0, 2.0]), torch.tensor([10.0, 20.0])],
    ...                             [torch.tensor([0, 1, 2]), torch.tensor([0, 2, 2])])
    >>> v, off
    (tensor([ 1., 10., 20.,  2.]), tensor([0, 3, 4]))
    """
    op = "sequence_concat"
    if not isinstance(input, (list, tuple)) or not input:
        raise TypeError(f"{op}: input must be a non-empty list of tensors")
    if offsets is None:
        offsets = [None] * len(input)
    if not isinstance(offsets, (list, tuple)) or len(offsets) != len(input):
        raise ValueError(f"{op}: offsets must be a list with one LoD per input "
                         f"({len(input)})")
    rs = [_bridge.ragged(v, o, op, f"input[{k}]", f"offsets[{k}]")
          for k, (v, o) in enumerate(zip(input, offsets))]
    first = rs[0]
    for k, r in enumerate(rs):
        if len(r.lod) != len(first.lod):
            raise ValueError(f"{op}: input[{k}] has {len(r.lod)} LoD levels but input[0] has "
                             f"{len(first.lod)}")
        if r.values.dtype != first.values.dtype:
            raise TypeError(f"{op}: input[{k}] has dtype {r.values.dtype} but input[0] has "
                            f"{first.values.dtype}; all inputs need one dtype")
        if r.values.device != first.values.device:
            raise ValueError(f"{op}: input[{k}] is on {r.values.device}, input[0] on "
                             f"{first.values.device}")
    out, new = _library.call(_library.sequence_concat, [r.values for r in rs],
                             first.lod[:-1], [r.lod[-1] for r in rs])
    return first.wrap(out, [*first.lod[:-1], new])


@_nested_shift
def sequence_slice(input, offsets=None, offset=None, length=None, name=None):
    """Keep rows ``[offset[i], offset[i] + length[i])`` of every last-level sequence ``i``.

    Parameters
    ----------
    input : torch.Tensor
        Float values or a jagged nested tensor.
    offsets : torch.Tensor or list of torch.Tensor, optional
        The LoD (required unless ``input`` is nested).
    offset, length : torch.Tensor or sequence of int
        One entry per last-level sequence.
    name : str, optional
        Ignored (Paddle compatibility).

    Returns
    -------
    tuple or torch.Tensor
        ``(values, offsets)`` with the new last level, or a nested tensor.

    See Also
    --------
    lodarrow.sequence_slice : The same operator on LoDTensors (NumPy and CuPy arrays).
    lodarrow.vjp : The backward of any operator, on NumPy and CuPy arrays.

    Examples
    --------
    >>> import torch, lodarrow.torch as lt
    >>> v, off = lt.sequence_slice(torch.arange(5.0), torch.tensor([0, 2, 5]), [1, 0], [1, 2])
    >>> v, off
    (tensor([1., 2., 3.]), tensor([0, 1, 3]))
    """
    op = "sequence_slice"
    r = _bridge.ragged(input, offsets, op)
    if offset is None or length is None:
        raise TypeError(f"{op}: offset and length are required")
    dev = r.values.device
    out, new = _library.call(_library.sequence_slice, r.values, r.lod,
                             _indices(offset, op, "offset", dev).reshape(-1),
                             _indices(length, op, "length", dev).reshape(-1))
    return r.wrap(out, [*r.lod[:-1], new])


@_nested_shift
def sequence_reverse(x, offsets=None, name=None):
    """Reverse the rows inside every last-level sequence.

    Parameters
    ----------
    x : torch.Tensor
        Float values or a jagged nested tensor.
    offsets : torch.Tensor or list of torch.Tensor, optional
        The LoD (required unless ``x`` is nested).
    name : str, optional
        Ignored (Paddle compatibility).

    Returns
    -------
    tuple or torch.Tensor
        ``(values, offsets)`` (the same offsets) or a nested tensor.

    See Also
    --------
    lodarrow.sequence_reverse : The same operator on LoDTensors (NumPy and CuPy arrays).
    lodarrow.vjp : The backward of any operator, on NumPy and CuPy arrays.

    Examples
    --------
    >>> import torch, lodarrow.torch as lt
    >>> v, off = lt.sequence_reverse(torch.arange(5.0), torch.tensor([0, 2, 5]))
    >>> v
    tensor([1., 0., 4., 3., 2.])
    """
    r = _bridge.ragged(x, offsets, "sequence_reverse", "x")
    return r.wrap(_library.call(_library.sequence_reverse, r.values, r.lod), r.lod)


@_nested_shift
def sequence_reshape(input, offsets=None, new_dim=None, name=None):
    """Re-view each sequence's values as rows of ``new_dim`` values.

    Parameters
    ----------
    input : torch.Tensor
        Float values ``(N, D)`` or ``(N,)``, or a jagged nested tensor.
    offsets : torch.Tensor or list of torch.Tensor, optional
        The LoD (required unless ``input`` is nested).
    new_dim : int
        The new row width; every sequence's value count must divide by it.
    name : str, optional
        Ignored (Paddle compatibility).

    Returns
    -------
    tuple or torch.Tensor
        ``(values (M, new_dim), offsets)`` with the new last level, or a nested tensor.

    See Also
    --------
    lodarrow.sequence_reshape : The same operator on LoDTensors (NumPy and CuPy arrays).
    lodarrow.vjp : The backward of any operator, on NumPy and CuPy arrays.

    Examples
    --------
    >>> import torch, lodarrow.torch as lt
    >>> v, off = lt.sequence_reshape(torch.zeros(3, 2), torch.tensor([0, 1, 3]), new_dim=1)
    >>> v.shape, off
    (torch.Size([6, 1]), tensor([0, 2, 6]))
    """
    op = "sequence_reshape"
    r = _bridge.ragged(input, offsets, op)
    if new_dim is None:
        raise TypeError(f"{op}: new_dim is required")
    dim = as_int(new_dim, f"{op}: new_dim")
    if dim < 1:
        raise ValueError(f"{op}: new_dim must be >= 1, got {dim}")
    out, new = _library.call(_library.sequence_reshape, r.values, r.lod, dim)
    return r.wrap(out, [*r.lod[:-1], new])


# ============================================================================ LoD only
def lod_reset(x, y=None, target_lod=None, name=None):
    """Give the rows of ``x`` a new LoD; the values pass through unchanged (no copy).

    Parameters
    ----------
    x : torch.Tensor
        The values (or a jagged nested tensor, whose values are taken).
    y : torch.Tensor or list of torch.Tensor, optional
        The new LoD: an offsets tensor, a list of levels, or a nested tensor's offsets.
    target_lod : torch.Tensor or sequence of int, optional
        One level of offsets, used when ``y`` is None.
    name : str, optional
        Ignored (Paddle compatibility).

    Returns
    -------
    tuple or torch.Tensor
        ``(x, offsets)`` (a list of levels for a list ``y``), or a nested tensor for a
        nested ``y``.  The values are ``x`` itself: gradients flow through unchanged.

    See Also
    --------
    lodarrow.lod_reset : The same operator on LoDTensors (NumPy and CuPy arrays).
    lodarrow.vjp : The backward of any operator, on NumPy and CuPy arrays.

    Examples
    --------
    >>> import torch, lodarrow.torch as lt
    >>> x = torch.arange(4.0)
    >>> y, off = lt.lod_reset(x, target_lod=[0, 1, 4])
    >>> y is x, off
    (True, tensor([0, 1, 4]))
    """
    op = "lod_reset"
    values = x.values() if _bridge.is_nested(x) else x
    values = _bridge.check_values(values, op, "x")
    if y is not None:
        lod, nested = _level_of(y, op, "y", values.device)
        form, arg = ("nested" if nested else "list" if isinstance(y, (list, tuple))
                     else "tensor"), "y"
    elif target_lod is not None:
        lod, nested, form, arg = [_check_level(target_lod, op, "target_lod", values)], \
            False, "tensor", "target_lod"
    else:
        raise TypeError(f"{op}: y and target_lod should not be both none; give y (offsets) "
                        f"or target_lod")
    checked = _library.call(_library.lod_check, values, lod, op, arg)
    return _bridge.Ragged(values, checked, form).wrap(values, checked)


def lod_append(x, level, name=None, *, x_offsets=None):
    """Append one level of offsets after ``x``'s levels; the values pass through unchanged.

    Parameters
    ----------
    x : torch.Tensor
        The values, or a jagged nested tensor (its level is kept).
    level : torch.Tensor or sequence of int
        The new level, as offsets.
    name : str, optional
        Ignored (Paddle compatibility).
    x_offsets : torch.Tensor or list of torch.Tensor, optional
        Keyword-only: ``x``'s existing levels.

    Returns
    -------
    tuple
        ``(x, [*levels, level])`` as a list of levels (``(x, level)`` when ``x`` had none).

    See Also
    --------
    lodarrow.lod_append : The same operator on LoDTensors (NumPy and CuPy arrays).
    lodarrow.vjp : The backward of any operator, on NumPy and CuPy arrays.

    Examples
    --------
    >>> import torch, lodarrow.torch as lt
    >>> x, lod = lt.lod_append(torch.arange(4.0), [0, 1, 1, 4], x_offsets=torch.tensor([0, 3]))
    >>> lod
    [tensor([0, 3]), tensor([0, 1, 1, 4])]
    """
    op = "lod_append"
    r = _bridge.ragged(x, x_offsets, op, "x", "x_offsets", required=False)
    new = _check_level(level, op, "level", r.values)
    checked = _library.call(_library.lod_check, r.values, [*r.lod, new], op, "level")
    if not r.lod:
        return r.values, checked[0]
    return r.values, list(checked)


def _check_level(obj, op, name, values):
    if isinstance(obj, torch.Tensor):
        return _bridge.check_offsets(obj, op, name, values.device)
    return _bridge.check_offsets(_indices(obj, op, name, values.device), op, name,
                                 values.device)


# ============================================================================ scatter
def sequence_scatter(input, index, updates, name=None, *, index_offsets=None):
    """Add each index sequence's updates into its row: ``out[i, index[p]] += updates[p]``.

    Parameters
    ----------
    input : torch.Tensor
        Float ``(N, ...)``.
    index : torch.Tensor
        Integer ids ``(M,)`` or ``(M, 1)`` with ``index_offsets``, or a jagged nested
        tensor of ids.
    updates : torch.Tensor
        Float ``(M,)`` or ``(M, 1)``, of ``input``'s dtype.
    name : str, optional
        Ignored (Paddle compatibility).
    index_offsets : torch.Tensor, optional
        Keyword-only: ``index``'s one LoD level.

    Returns
    -------
    torch.Tensor
        ``input``'s shape; differentiable in ``input`` and ``updates``.

    See Also
    --------
    lodarrow.sequence_scatter : The same operator on LoDTensors (NumPy and CuPy arrays).
    lodarrow.vjp : The backward of any operator, on NumPy and CuPy arrays.

    Examples
    --------
    >>> import torch, lodarrow.torch as lt
    >>> lt.sequence_scatter(torch.zeros(2, 3), torch.tensor([0, 2, 1]), torch.ones(3),
    ...                     index_offsets=torch.tensor([0, 2, 3]))
    tensor([[1., 0., 1.],
            [0., 1., 0.]])
    """
    op = "sequence_scatter"
    values = _bridge.check_values(input, op, "input")
    if _bridge.is_nested(index):
        if index_offsets is not None:
            raise TypeError(f"{op}: index is a nested tensor; pass no index_offsets")
        index_offsets, index = index.offsets(), index.values()
    if index_offsets is None:
        raise TypeError(f"{op}: index_offsets is required with a dense index")
    ids = _bridge.check_values(index, op, "index", floating=False)
    if ids.dtype.is_floating_point or ids.dtype == torch.bool:
        raise TypeError(f"{op}: index must hold integers, got {ids.dtype}")
    upd = _bridge.check_values(updates, op, "updates")
    if upd.dtype != values.dtype:
        raise TypeError(f"{op}: updates has dtype {upd.dtype} but input has {values.dtype}; "
                        f"they must match (autograd returns each gradient in its own dtype)")
    off = _bridge.check_offsets(index_offsets, op, "index_offsets", values.device)
    return _library.call(_library.sequence_scatter, values, ids, off, upd)


# ============================================================================ conv, top-k
@_nested_shift
def sequence_conv(input, offsets=None, filter=None, context_start=None, context_length=None,
                  context_stride=1, padding_data=None, bias=None, name=None):
    """Convolve every last-level sequence with ``filter`` along its rows.

    Differentiable in the input, the filter, the padding data and the bias.

    Parameters
    ----------
    input : torch.Tensor
        Float values ``(N, D)`` (or ``(N,)``), or a jagged nested tensor.
    offsets : torch.Tensor or list of torch.Tensor, optional
        The LoD (required unless ``input`` is nested).
    filter : torch.Tensor
        ``(context_length * D, F)``, of the input's dtype.
    context_start : int, optional
        Default ``-(context_length // 2)``.
    context_length : int, optional
        Default ``filter.shape[0] // D``.
    context_stride : int, default 1
        Must be 1.
    padding_data : torch.Tensor, optional
        ``(up + down, D)`` rows used outside the sequences (trainable padding).
    bias : torch.Tensor, optional
        ``(F,)``.
    name : str, optional
        Ignored (Paddle compatibility).

    Returns
    -------
    tuple or torch.Tensor
        ``(values (N, F), offsets)`` (the same offsets) or a nested tensor.

    See Also
    --------
    lodarrow.sequence_conv : The same operator on LoDTensors (NumPy and CuPy arrays).
    lodarrow.vjp : The backward of any operator, on NumPy and CuPy arrays.

    Examples
    --------
    >>> import torch, lodarrow.torch as lt
    >>> w = torch.eye(3)   # context_length 3 over D = 1: the row before, itself, the row after
    >>> v, off = lt.sequence_conv(torch.tensor([1.0, 2.0, 3.0, 4.0]), torch.tensor([0, 3, 4]), w)
    >>> v
    tensor([[0., 1., 2.],
            [1., 2., 3.],
            [2., 3., 0.],
            [0., 4., 0.]])
    """
    op = "sequence_conv"
    r = _bridge.ragged(input, offsets, op)
    values = r.values
    if values.ndim > 2:
        raise ValueError(f"{op}: input must have shape [N, D] (or [N]), got "
                         f"{list(values.shape)}")
    d = values.shape[1] if values.ndim == 2 else 1
    if filter is None:
        raise TypeError(f"{op}: filter is required")
    w = _bridge.check_values(filter, op, "filter")
    if w.ndim != 2:
        raise ValueError(f"{op}: filter must be 2-D [context_length * D, F], got shape "
                         f"{list(w.shape)}")
    cl = w.shape[0] // d if context_length is None else as_int(context_length,
                                                               f"{op}: context_length")
    cs = -(cl // 2) if context_start is None else as_int(context_start, f"{op}: context_start")
    if as_int(context_stride, f"{op}: context_stride") != 1:
        raise ValueError(f"{op}: context_stride must be 1 (as in Paddle), got {context_stride}")
    tensors = {"filter": w}
    for arg, t in (("padding_data", padding_data), ("bias", bias)):
        if t is not None:
            tensors[arg] = _bridge.check_values(t, op, arg)
    for arg, t in tensors.items():
        if t.dtype != values.dtype or t.device != values.device:
            raise TypeError(f"{op}: {arg} is {t.dtype} on {t.device} but input is "
                            f"{values.dtype} on {values.device}; they must match")
    out = _library.call(_library.sequence_conv, values, r.lod, w, tensors.get("padding_data"),
                        tensors.get("bias"), cs, cl)
    return r.wrap(out, r.lod)


@_nested_shift
def sequence_topk_avg_pooling(input, offsets=None, row=None, col=None, topks=None,
                              channel_num=None, name=None):
    """Average of the top-k values of every row of every channel of each sequence.

    Parameters
    ----------
    input : torch.Tensor
        Float values ``(N,)`` or ``(N, 1)``, or a jagged nested tensor: sequence ``i`` holds
        ``channel_num * rows_i * cols_i`` values.
    offsets : torch.Tensor, optional
        The input's one LoD level (required unless ``input`` is nested).
    row, col : torch.Tensor
        The LoD of ``row`` and ``col`` (offsets tensors or nested tensors).
    topks : sequence of int
        The k values.
    channel_num : int
        Channels per sequence.
    name : str, optional
        Ignored (Paddle compatibility).

    Returns
    -------
    tuple or torch.Tensor
        ``(values (sum(rows), len(topks) * channel_num), row_offsets)``, or a nested tensor
        when ``row`` is one.

    See Also
    --------
    lodarrow.sequence_topk_avg_pooling : The same operator on LoDTensors (NumPy and CuPy
        arrays).
    lodarrow.vjp : The backward of any operator, on NumPy and CuPy arrays.

    Examples
    --------
    >>> import torch, lodarrow.torch as lt
    >>> v, off = lt.sequence_topk_avg_pooling(
    ...     torch.tensor([3.0, 1.0, 2.0]), torch.tensor([0, 3]), row=torch.tensor([0, 1]),
    ...     col=torch.tensor([0, 3]), topks=[1, 2], channel_num=1)
    >>> v
    tensor([[3.0000, 2.5000]])
    """
    op = "sequence_topk_avg_pooling"
    r = _bridge.ragged(input, offsets, op)
    if row is None or col is None or topks is None or channel_num is None:
        raise TypeError(f"{op}: row, col, topks and channel_num are required")
    rows, row_nested = _level_of(row, op, "row", r.values.device)
    cols, _ = _level_of(col, op, "col", r.values.device)
    ks = [as_int(k, f"{op}: topks[{i}]") for i, k in enumerate(topks)]
    out, _ = _library.call(_library.sequence_topk_avg_pooling, r.values, r.lod, rows[-1],
                           cols[-1], ks, as_int(channel_num, f"{op}: channel_num"))
    if row_nested:
        return torch.nested.nested_tensor_from_jagged(out, rows[-1])
    return out, rows[-1]
