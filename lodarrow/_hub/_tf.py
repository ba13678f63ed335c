"""LoDTensor <-> TensorFlow: ``tf.RaggedTensor.from_nested_row_splits``, every LoD level as
int64 row splits, feature dimensions kept in ``flat_values`` (docs/interop.md#tensorflow).
"""

import numpy as np

from lodarrow._hub import _common
from lodarrow._interop._optional import import_optional
from lodarrow._ops import sequence_unpad

__all__ = ["from_tf", "to_tf"]

#: TensorFlow's CPU kernels read buffers as aligned to this many bytes (a buffer that is not
#: aborts the process in a strided slice), so only such buffers are shared.
_ALIGN = 64


def _tf(fn):
    return import_optional("tensorflow", fn)


class _Capsule:
    """A DLPack capsule as an object with ``__dlpack__`` (what ``np.from_dlpack`` takes)."""

    __slots__ = ("capsule", "device")

    def __init__(self, capsule, device):
        self.capsule = capsule
        self.device = device

    def __dlpack__(self, stream=None, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return self.device


def _shareable(array):
    """DLPack can hand this NumPy array to TensorFlow without a copy."""
    return (array.size > 0 and array.flags.c_contiguous
            and array.ctypes.data % _ALIGN == 0)


def _as_tf(tf, array):
    """NumPy / CuPy -> tf.Tensor: shared through DLPack when TensorFlow can read the buffer
    in place (64-byte aligned and contiguous: Arrow's buffers are), else copied."""
    if _common.is_cupy(array):
        return tf.experimental.dlpack.from_dlpack(array.__dlpack__())
    if _shareable(array):
        return tf.experimental.dlpack.from_dlpack(_common.exportable(array).__dlpack__())
    return tf.convert_to_tensor(np.ascontiguousarray(array))


def to_tf(obj, column=None, *, nulls="error"):
    """A LoDTensor (or a table column) as a ``tf.RaggedTensor`` with every LoD level.

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
    tf.RaggedTensor or tf.Tensor
        ``tf.RaggedTensor.from_nested_row_splits(flat_values, splits)``: ``ragged_rank`` equal
        to the LoD level, int64 row splits, the feature dimensions uniform in ``flat_values``.
        A tensor without LoD gives a dense ``tf.Tensor``.  Buffers are shared when 64-byte
        aligned (docs/interop.md#copies).

    Raises
    ------
    ImportError
        If TensorFlow is not installed (the ``tf`` extra: ``pip install -e '.[tf]'``
        in the checkout).

    See Also
    --------
    from_tf : The inverse.

    Examples
    --------
    >>> import numpy as np, lodarrow as la
    >>> t = la.LoDTensor(np.arange(3), lengths=[[2, 1]])
    >>> t.to_tf().to_list()  # doctest: +SKIP
    [[0, 1], [2]]
    """
    fn = "to_tf"
    t = _common.as_tensor(obj, column, fn, nulls)
    data, offsets = _common.parts(t, fn)
    tf = _tf(fn)
    values = _as_tf(tf, data)
    if not offsets:
        return values
    splits = [_as_tf(tf, _common.host_offsets(t, k)) for k in range(len(offsets))]
    # the offsets were checked when the LoDTensor was built: TF need not scan them again
    return tf.RaggedTensor.from_nested_row_splits(values, splits, validate=False)


def _to_array(tf, x, fn, what):
    """tf.Tensor -> NumPy through DLPack (shared, read-only) or CuPy on a GPU."""
    if not tf.is_tensor(x) or isinstance(x, (tf.RaggedTensor, tf.SparseTensor)):
        raise TypeError(f"{fn}: {what} must be a tf.Tensor, got {type(x).__name__}")
    if x.dtype == tf.bfloat16:
        raise TypeError(f"{fn}: {what} of dtype bfloat16 have no NumPy dtype lodarrow holds; "
                        f"convert them first (tf.cast(x, tf.float32))")
    if x.dtype in (tf.string, tf.complex64, tf.complex128, tf.resource, tf.variant):
        raise TypeError(f"{fn}: {what} of dtype {x.dtype.name} are not numbers lodarrow holds")
    on_gpu = "GPU" in x.device.upper()
    if on_gpu:
        cupy = import_optional("cupy", fn)
        return cupy.from_dlpack(_Capsule(tf.experimental.dlpack.to_dlpack(x), (2, 0)))
    if x.shape.num_elements() == 0:
        return x.numpy()
    try:
        return np.from_dlpack(_Capsule(tf.experimental.dlpack.to_dlpack(x), (1, 0)))
    except Exception:  # a dtype DLPack does not carry (bool on older NumPy): a copy
        return x.numpy()


def from_tf(obj, *, lengths=None):
    """A LoDTensor from a ``tf.RaggedTensor`` (every level), dense or padded tensor.

    Parameters
    ----------
    obj : tf.RaggedTensor or tf.Tensor
        A ragged tensor: its ``nested_row_splits`` become the LoD (uniform row lengths
        included), its ``flat_values`` the data (inner dimensions: the feature shape).  A
        dense tensor: a LoDTensor without LoD, or padded ``(N, P, ...)`` with ``lengths``.
    lengths : tf.Tensor or array_like, optional
        The real length of each padded row (``obj`` dense).

    Returns
    -------
    LoDTensor
        The values shared with TensorFlow on the CPU (read-only); int32 row splits are cast
        to int64 (docs/interop.md#copies).

    Raises
    ------
    TypeError
        If ``obj`` is not a TensorFlow tensor, or its dtype has no NumPy equivalent.
    ImportError
        If TensorFlow is not installed.

    See Also
    --------
    to_tf : The inverse.

    Examples
    --------
    >>> import lodarrow as la
    >>> import tensorflow as tf  # doctest: +SKIP
    >>> la.from_tf(tf.ragged.constant([[1, 2], [], [3]])).lod()  # doctest: +SKIP
    [[0, 2, 2, 3]]
    """
    fn = "from_tf"
    tf = _tf(fn)
    if isinstance(obj, tf.RaggedTensor):
        if lengths is not None:
            raise TypeError(f"{fn}: a RaggedTensor carries its row splits; pass no lengths")
        values = _to_array(tf, obj.flat_values, fn, "flat_values")
        levels = [_common.check_offsets(_common.host_array(_to_array(tf, s, fn, "row_splits"),
                                                           fn), fn, f"row_splits[{k}]")
                  for k, s in enumerate(obj.nested_row_splits)]
        levels, lo, hi = _common.rebase_levels(levels, values.shape[0], fn)
        if lo or hi != values.shape[0]:
            values = values[lo:hi]
        return _common.build(values, levels, fn)
    if isinstance(obj, tf.SparseTensor):
        raise TypeError(f"{fn}: a SparseTensor has no sequence structure; convert it with "
                        f"tf.RaggedTensor.from_sparse first")
    values = _to_array(tf, obj, fn, "obj")
    if lengths is None:
        return _common.build(values, [], fn)
    if tf.is_tensor(lengths):
        lengths = _to_array(tf, lengths, fn, "lengths")
    elif not isinstance(lengths, (np.ndarray, list, tuple)) and not hasattr(lengths,
                                                                            "__array__"):
        raise TypeError(f"{fn}: lengths must be a 1-D integer tensor or array, got "
                        f"{type(lengths).__name__}")
    if values.ndim < 2:
        raise ValueError(f"{fn}: padded values need shape (N, P, ...), got {values.shape}")
    out = sequence_unpad(values, lengths)
    if values.ndim == 2:  # Paddle's unpad gives (T, 1) for (N, P): rows were scalars
        return _common.build(out._data.reshape(-1), list(out._offsets), fn)
    return out
