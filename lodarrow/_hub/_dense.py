"""Dense (non-ragged) arrays handed to a tensor library without a copy.

NumPy and CuPy arrays go through DLPack, so host memory stays host memory and device memory
stays on its device; the result shares the buffer with the input.
"""

from lodarrow._hub._tf import _as_tf
from lodarrow._interop._optional import import_optional

__all__ = ["LIBRARIES", "dense_to"]

LIBRARIES = ("numpy", "torch", "jax", "tf")


def dense_to(array, library):
    """Return ``array`` (NumPy or CuPy) as ``library``'s array type, zero-copy.

    Parameters
    ----------
    array : numpy.ndarray or cupy.ndarray
        A dense array.
    library : {"numpy", "torch", "jax", "tf"}
        The target; ``"numpy"`` returns ``array`` itself (CuPy arrays stay CuPy arrays).

    Returns
    -------
    array-like
        ``torch.Tensor``, ``jax.Array`` or ``tf.Tensor`` sharing ``array``'s memory where the
        library allows (JAX on the CPU and TensorFlow may copy arrays that are not aligned as
        they require).

    Raises
    ------
    ValueError
        If ``library`` is not one of the names above.
    """
    if library == "numpy":
        return array
    if library == "torch":
        torch = import_optional("torch", "conversion to torch")
        return torch.from_dlpack(array)
    if library == "jax":
        jax = import_optional("jax", "conversion to JAX")
        return jax.dlpack.from_dlpack(array)
    if library == "tf":
        # TensorFlow aborts on unaligned DLPack buffers: _as_tf shares aligned ones only
        return _as_tf(import_optional("tensorflow", "conversion to TensorFlow"), array)
    raise ValueError(f"library must be one of {', '.join(map(repr, LIBRARIES))}; got {library!r}")
