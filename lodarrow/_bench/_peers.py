"""The peers: what a user would reach for instead of lodarrow, one small function per peer per op.

Each peer is a *factory* ``f(w, variant) -> (run, norm)`` registered with :func:`peer`:
``f`` does the untimed preparation (building the library's own input form, which a user of
that library would already hold), ``run()`` is the timed call, and ``norm(result)`` turns the
result into NumPy arrays comparable with lodarrow's (untimed).  Everything needed for the
*right* answer is inside ``run``: dropping empty sequences before ``reduceat``, filling the
nulls polars and Awkward give empty sequences, computing parent indices before a gather.
A factory raises :class:`NotApplicable` where its library has no sensible way to do the job.

The peers live in one module per library (``_peers_numpy``, ``_peers_polars``,
``_peers_awkward``, ``_peers_pyarrow``, ``_peers_numba``), which register them here when
imported (the runner imports them all); this module keeps the registry and the helpers and
constants they share.  The numba kernels are what a numba user would write: ``prange`` over
sequences (so they use every core, like lodarrow) with the obvious inner loops.
"""

import functools

import numpy as np

__all__ = ["PEER_LIBRARIES", "NotApplicable", "peer", "peers_for", "available", "numpy_view"]

#: Peer libraries in display order, with the module to import.
PEER_LIBRARIES = {"numpy": "numpy", "polars": "polars", "awkward": "awkward",
                  "pyarrow": "pyarrow.compute", "numba": "numba"}

_REGISTRY = {}


class NotApplicable(Exception):
    """This peer has no sensible implementation for this op/workload."""


def peer(op, library, label):
    """Register the decorated factory as ``library``'s way of doing ``op``."""
    def register(factory):
        _REGISTRY.setdefault(op, []).append((library, label, factory))
        return factory
    return register


def peers_for(op):
    """``[(library, label, factory), ...]`` registered for ``op``, in library order."""
    order = list(PEER_LIBRARIES)
    return sorted(_REGISTRY.get(op, []), key=lambda p: order.index(p[0]))


@functools.cache
def available(library):
    """``None`` if ``library`` imports, else a one-line reason."""
    import importlib

    try:
        importlib.import_module(PEER_LIBRARIES[library])
    except Exception as exc:  # ImportError, or a broken install
        return f"{library} is not installed ({exc.__class__.__name__})"
    return None


def numpy_view(obj):
    """NumPy data of a LoDTensor / array / Arrow array / polars / Awkward result."""
    if hasattr(obj, "_offsets") and hasattr(obj, "numpy"):  # LoDTensor
        return obj.numpy()
    if type(obj).__module__.startswith("polars"):
        return obj.to_numpy()
    if type(obj).__module__.startswith("awkward"):
        import awkward as ak

        return ak.to_numpy(obj)
    return np.asarray(obj)


def _feature(w):
    return (w.d,) if w.d > 1 else ()


def _flat_values(arr):
    """Flattened float values of a (nested) pyarrow list array, as NumPy."""
    import pyarrow as pa

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    while pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type) or \
            pa.types.is_fixed_size_list(arr.type):
        arr = arr.flatten()
    return arr.to_numpy(zero_copy_only=False)


def _arrow_parts(arr):
    """``(offsets of the outermost level, flat values)`` of a pyarrow list array."""
    import pyarrow as pa

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if isinstance(arr, pa.ExtensionArray):
        arr = arr.storage
    offsets = np.asarray(arr.offsets.to_numpy(), dtype=np.int64)
    return offsets - offsets[0], _flat_values(arr)


def _in_rows(w, flat_norm):
    """A norm giving ``flat_norm``'s values as rows of ``w``'s feature shape (``(n,)`` for
    D=1, ``(n, d)`` else): the shape lodarrow returns, which the comparison checks."""
    shape = (-1,) + _feature(w)
    return lambda result: flat_norm(result).reshape(shape)


_POOL_KIND = {"sum": 0, "average": 1, "max": 2}


# ====================================================================== sequence_pad
def _pad_norm(result):
    out, lengths = result
    return numpy_view(out), np.asarray(lengths)


# ====================================================================== sequence_unpad
def _unpad_norm(result):
    """``(values, offsets)`` with values as ``(rows, d)``: Paddle's unpad gives D=1 rows as
    ``[rows, 1]`` (lodarrow does too)."""
    values, offsets = result
    values = numpy_view(values)
    return values.reshape(values.shape[0], -1), np.asarray(offsets)


# ====================================================================== sequence_conv
CONV_CONTEXT = (-1, 3)  # context_start, context_length
CONV_FILTERS = 16


@functools.cache
def conv_filter(d):
    """The ``(context_length * d, CONV_FILTERS)`` float32 filter (fixed seed)."""
    rng = np.random.default_rng([12345, d])
    return rng.standard_normal((CONV_CONTEXT[1] * d, CONV_FILTERS), dtype=np.float32)


# ====================================================================== data movers (D=1)
ERASE_TOKENS = (1, 2, 3)
ENUMERATE_WIN = 3
SCATTER_WIDTH = 64


def _values_offsets(values, offsets):
    return numpy_view(values), np.asarray(offsets, dtype=np.int64)


def _only_d1(w):
    if w.d > 1 or len(w.offsets) > 1:
        raise NotApplicable("D=1, one level")


# ====================================================================== LoDTensor from offsets
# lodarrow checks the offsets (start 0, non-decreasing, last = number of rows) when it builds
# a tensor from offsets and values; each peer builds its own form from the same two arrays
# and, where the library can, checks them the same way inside the timed call.
def _offsets_values(r):
    off, x = r
    return np.asarray(off, dtype=np.int64), numpy_view(x).reshape(-1)
