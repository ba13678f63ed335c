"""LoDTensor <-> PaddlePaddle's own ``LoDTensor`` (``set`` / ``set_lod`` / ``lod()``), the object
lodarrow's model comes from (docs/interop.md#paddlepaddle).
"""

import numpy as np

from lodarrow._hub import _common
from lodarrow._interop._optional import import_optional

__all__ = ["from_paddle", "to_paddle"]


def _paddle(fn):
    return import_optional("paddle", fn)


def _core(paddle):
    base = getattr(paddle, "base", None) or paddle.fluid  # 2.6: paddle.base; older: fluid
    return base.core


class _Capsule:
    __slots__ = ("capsule",)

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, stream=None, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU


def to_paddle(obj, column=None, *, nulls="error"):
    """A LoDTensor (or a table column) as a PaddlePaddle ``LoDTensor``, on the CPU.

    Parameters
    ----------
    obj : LoDTensor or table
        A LoDTensor, or a table with ``column`` (see :func:`lodarrow.to_torch`).
    column : str, optional
        The column to convert when ``obj`` is a table.
    nulls : {"error", "empty"}, default "error"
        For a table column: what a null list becomes.

    Returns
    -------
    paddle.base.core.LoDTensor
        Built as Paddle's documentation builds one: ``set(data, CPUPlace())`` (Paddle copies
        the data into its own memory: docs/interop.md#copies) then ``set_lod(offsets)``.

    Raises
    ------
    TypeError
        If the dtype is uint16 (Paddle reads uint16 arrays as bfloat16).
    ValueError
        If the tensor has zero sequences at a level (Paddle's LoD check refuses an offsets
        level of one entry).
    ImportError
        If PaddlePaddle is not installed (the ``paddle`` extra: ``pip install -e '.[paddle]'``
        in the checkout).

    See Also
    --------
    from_paddle : The inverse.

    Examples
    --------
    >>> import numpy as np, lodarrow as la
    >>> t = la.LoDTensor(np.arange(3.0), lengths=[[2, 1]])
    >>> t.to_paddle().lod()  # doctest: +SKIP
    [[0, 2, 3]]
    """
    fn = "to_paddle"
    t = _common.as_tensor(obj, column, fn, nulls)
    data, offsets = _common.parts(t, fn)
    if data.dtype == np.uint16:
        raise TypeError(f"{fn}: Paddle reads uint16 arrays as bfloat16, so uint16 data would "
                        f"change meaning; convert it first (a wider integer dtype)")
    for k, off in enumerate(offsets):
        if off.shape[0] == 1:
            raise ValueError(f"{fn}: Paddle's LoD cannot hold zero sequences (level {k} has "
                             f"none); drop the empty batch, or keep it in lodarrow")
    paddle = _paddle(fn)
    out = _core(paddle).LoDTensor()
    out.set(_common.host_array(data, fn), paddle.CPUPlace())
    if offsets:
        out.set_lod([_common.host_array(o, fn).tolist() for o in offsets])
    return out


def from_paddle(tensor):
    """A LoDTensor from a PaddlePaddle ``LoDTensor`` (its data and ``lod()``) or ``Tensor``.

    Parameters
    ----------
    tensor : paddle.base.core.LoDTensor or paddle.Tensor
        Paddle's LoDTensor (its LoD becomes the levels), or an eager ``paddle.Tensor`` (no
        LoD), on the CPU.

    Returns
    -------
    LoDTensor
        The data shared with Paddle's LoDTensor through DLPack (read-only; bool data, and an
        eager ``paddle.Tensor``'s, are copied); the offsets copied from ``lod()``, which
        Paddle returns as Python lists (docs/interop.md#copies).

    Raises
    ------
    TypeError
        If ``tensor`` is not a Paddle tensor, or it holds bfloat16.
    ValueError
        If it is not on the CPU, or its LoD does not match its rows.
    ImportError
        If PaddlePaddle is not installed.

    See Also
    --------
    to_paddle : The inverse.

    Examples
    --------
    >>> import lodarrow as la
    >>> import numpy as np, paddle  # doctest: +SKIP
    >>> pt = paddle.base.core.LoDTensor()  # doctest: +SKIP
    >>> pt.set(np.arange(3.0), paddle.CPUPlace())  # doctest: +SKIP
    >>> pt.set_lod([[0, 2, 3]])  # doctest: +SKIP
    >>> la.from_paddle(pt).lod()  # doctest: +SKIP
    [[0, 2, 3]]
    """
    fn = "from_paddle"
    paddle = _paddle(fn)
    core = _core(paddle)
    if isinstance(tensor, paddle.Tensor):
        # an eager tensor: its inner LoDTensor does not own the memory (reading it after
        # the eager tensor is gone crashes), so its values are copied while it is alive
        if not tensor.place.is_cpu_place():
            raise ValueError(f"{fn}: the Paddle tensor is on {tensor.place}; only CPU tensors "
                             f"convert (tensor.cpu() first)")
        if "bfloat16" in str(tensor.dtype):
            raise TypeError(f"{fn}: bfloat16 has no NumPy dtype lodarrow holds; cast it first "
                            f"(paddle.cast(x, 'float32'))")
        return _common.build(np.array(tensor.numpy(), copy=True), [], fn)
    if not isinstance(tensor, core.LoDTensor):
        raise TypeError(f"{fn}: tensor must be a Paddle LoDTensor or Tensor, got "
                        f"{type(tensor).__name__}")
    if not tensor._is_initialized():
        raise ValueError(f"{fn}: this Paddle LoDTensor holds no data (set() was never called)")
    if not tensor._place().is_cpu_place():
        raise ValueError(f"{fn}: the Paddle tensor is on {tensor._place()}; only CPU tensors "
                         f"convert (copy it to paddle.CPUPlace() first)")
    dtype = str(tensor._dtype())
    if "bfloat16" in dtype:
        raise TypeError(f"{fn}: bfloat16 has no NumPy dtype lodarrow holds; cast it first "
                        f"(paddle.cast(x, 'float32'))")
    if "bool" in dtype or 0 in tensor.shape():
        data = np.array(tensor)  # Paddle exports bool through DLPack as uint8: a copy
    else:
        data = np.from_dlpack(_Capsule(tensor._to_dlpack()))
    levels = [_common.check_offsets(np.asarray(level, dtype=np.int64), fn, f"lod()[{k}]")
              for k, level in enumerate(tensor.lod())]
    levels, lo, hi = _common.rebase_levels(levels, data.shape[0], fn)
    if lo or hi != data.shape[0]:
        data = data[lo:hi]
    return _common.build(data, levels, fn)
