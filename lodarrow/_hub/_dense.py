"""Dense (non-ragged) arrays handed to a tensor library without a copy.

NumPy and CuPy arrays go through DLPack, so host memory stays host memory and device memory
stays on its device; the result shares the buffer with the input.
"""

import numpy as np

from lodarrow._hub._tf import _as_tf
from lodarrow._interop._optional import import_optional

__all__ = ["LIBRARIES", "check_jax_dtype", "dense_to", "jax_x64"]

LIBRARIES = ("numpy", "torch", "jax", "tf")


def jax_x64():
    """Whether JAX keeps 64-bit types (``jax_enable_x64``); imports JAX."""
    jax = import_optional("jax", "conversion to JAX")
    return bool(jax.config.jax_enable_x64)


def check_jax_dtype(dtype, name):
    """Raise a ``ValueError`` naming ``name`` if JAX, as configured, would narrow ``dtype``
    (a 64-bit type without ``jax_enable_x64``) silently.  Imports JAX."""
    dtype = np.dtype(dtype)
    wide = (dtype.itemsize == 8 and dtype.kind in "iuf") or dtype == np.complex128
    if wide and not jax_x64():
        raise ValueError(f"{name}: JAX keeps {dtype} values only with 64-bit types enabled (it "
                         f"would silently narrow them to 32 bits): "
                         f"jax.config.update('jax_enable_x64', True), or convert the data to a "
                         f"32-bit dtype first")


def dense_to(array, library, name="array"):
    """Return ``array`` (NumPy or CuPy) as ``library``'s array type, zero-copy.

    Parameters
    ----------
    array : numpy.ndarray or cupy.ndarray
        A dense array.
    library : {"numpy", "torch", "jax", "tf"}
        The target; ``"numpy"`` returns ``array`` itself (CuPy arrays stay CuPy arrays).
    name : str, default "array"
        What the array is, for the error message.

    Returns
    -------
    array-like
        ``torch.Tensor``, ``jax.Array`` or ``tf.Tensor`` sharing ``array``'s memory where the
        library allows (JAX on the CPU and TensorFlow may copy arrays that are not aligned as
        they require).

    Raises
    ------
    ValueError
        If ``library`` is not one of the names above, or is ``"jax"`` and ``array`` holds
        64-bit values while ``jax_enable_x64`` is off (JAX would narrow them silently; the
        message names ``name``).
    """
    if library == "numpy":
        return array
    if library == "torch":
        torch = import_optional("torch", "conversion to torch")
        if type(array) is np.ndarray and array.flags.writeable:
            return torch.from_numpy(array)  # the same sharing, a fifth of DLPack's cost
        return torch.from_dlpack(array)
    if library == "jax":
        jax = import_optional("jax", "conversion to JAX")
        check_jax_dtype(array.dtype, name)
        return jax.dlpack.from_dlpack(array)
    if library == "tf":
        # TensorFlow aborts on unaligned DLPack buffers: _as_tf shares aligned ones only
        return _as_tf(import_optional("tensorflow", "conversion to TensorFlow"), array)
    raise ValueError(f"library must be one of {', '.join(map(repr, LIBRARIES))}; got {library!r}")
