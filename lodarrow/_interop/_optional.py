"""Lazy imports of optional libraries, with the extra that installs each."""

import importlib
import sys

__all__ = ["import_optional"]

# module name -> the lodarrow extra that installs it
EXTRAS = {
    "torch": "torch",
    "jax": "jax",
    "tensorflow": "tf",
    "awkward": "awkward",
    "paddle": "paddle",
    "cupy": "gpu",
}


def import_optional(name, purpose):
    """Import module ``name`` or raise an ``ImportError`` saying how to install it.

    Parameters
    ----------
    name : str
        The module to import (``"torch"``, ``"jax"``, ...).
    purpose : str
        What needs it, for the message (``"LoDTensor.to_torch"``).

    Returns
    -------
    module
    """
    module = sys.modules.get(name)  # the common case, once per array of every batch
    if module is not None:
        return module
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        extra = EXTRAS.get(name.partition(".")[0], name)
        raise ImportError(
            f"{purpose} needs {name.partition('.')[0]}: install the '{extra}' extra "
            f"(pip install -e '.[{extra}]' in the checkout)", name=name) from exc
