"""LoDTensor <-> JAX: values + segment ids / group sizes (``jax.ops.segment_sum``,
``lax.ragged_dot``), or a padded batch (docs/interop.md#jax).
"""

from typing import NamedTuple

import numpy as np

from lodarrow._cupy import array_module
from lodarrow._hub import _common
from lodarrow._interop._optional import import_optional
from lodarrow._ops import sequence_pad
from lodarrow._validation import check_choice

__all__ = ["JaxPadded", "JaxSegments", "LAYOUTS", "from_jax", "to_jax"]

LAYOUTS = ("segments", "padded")


class JaxSegments(NamedTuple):
    """Values ``(T, ...)`` with ``segment_ids`` int32 ``(T,)`` (sorted: the last level's
    sequence of each row), ``num_segments`` (a Python int, static for ``jit``),
    ``group_sizes`` int32 ``(N,)`` (``lax.ragged_dot``) and ``lod``, every level's offsets
    (int64 with ``jax_enable_x64``, else int32)."""

    values: object
    segment_ids: object
    num_segments: int
    group_sizes: object
    lod: tuple


class JaxPadded(NamedTuple):
    """A padded batch: ``values`` ``(N, P, ...)``, ``lengths`` ``(N,)``, ``mask`` bool
    ``(N, P)`` (True on real steps), ``lod`` the outer levels' offsets."""

    values: object
    lengths: object
    mask: object
    lod: tuple


def _jax(fn):
    return import_optional("jax", fn)


def _x64(jax):
    return bool(jax.config.jax_enable_x64)


def _as_jax(jax, array, fresh=False):
    """NumPy / CuPy -> jax.Array through DLPack: shared when the buffer is 64-byte aligned
    (Arrow's are), else JAX copies it (docs/interop.md#copies).

    ``fresh``: a host array made by this conversion (segment ids, a cast, a padded block),
    which JAX copies into its own memory instead: a NumPy buffer imported through DLPack and
    released from JAX's threads crashed the process under ``tracemalloc`` (the bench's memory
    probe), and sharing a temporary saves nothing.
    """
    if fresh and not _common.is_cupy(array):
        # on JAX's CPU, beside the values DLPack shares: not its default device (a GPU there)
        with jax.default_device(_cpu_device(jax)):
            return jax.numpy.array(array, copy=True)
    return jax.dlpack.from_dlpack(_common.exportable(array))


def _cpu_device(jax):
    """JAX's first CPU device (None, JAX's default, where JAX runs without its CPU backend)."""
    try:
        return jax.devices("cpu")[0]
    except RuntimeError:
        return None


def _index_array(jax, off, fn, what, fresh=False):
    """int64 offsets -> JAX: as they are with x64, else int32 (a cast; ValueError past 2**31)."""
    if _x64(jax):
        return _as_jax(jax, off, fresh)
    if off.shape[0] and int(off[-1]) > _common.INT32_MAX:
        raise ValueError(f"{fn}: {what} past 2**31 - 1 need int64: enable it with "
                         f"jax.config.update('jax_enable_x64', True)")
    return _as_jax(jax, off.astype(np.int32), fresh=True)


def _check_values_dtype(jax, dtype, fn):
    if dtype.itemsize == 8 and not _x64(jax):
        raise ValueError(f"{fn}: JAX keeps {dtype} values only with 64-bit types enabled (it "
                         f"would silently narrow them to 32 bits): "
                         f"jax.config.update('jax_enable_x64', True), or convert the data to a "
                         f"32-bit dtype first")


def to_jax(obj, column=None, layout="segments", *, pad_value=0, maxlen=None, nulls="error"):
    """A LoDTensor (or a table column) as JAX arrays: segments or padded.

    Parameters
    ----------
    obj : LoDTensor or table
        A LoDTensor, or a table with ``column`` (see :func:`lodarrow.to_torch`).
    column : str, optional
        The column to convert when ``obj`` is a table.
    layout : {"segments", "padded"}, default "segments"
        ``"segments"``: a :class:`JaxSegments` (values shared, segment ids and group sizes
        computed; for ``jax.ops.segment_sum(values, segment_ids, num_segments,
        indices_are_sorted=True)`` and ``lax.ragged_dot``); ``"padded"``: a
        :class:`JaxPadded`.
    pad_value : scalar, default 0
        The padding (padded).
    maxlen : int, optional
        The padded length (padded); None: the longest sequence.
    nulls : {"error", "empty"}, default "error"
        For a table column: what a null list becomes.

    Returns
    -------
    JaxSegments or JaxPadded
        On the tensor's device (CuPy data: JAX's GPU, through DLPack).

    Raises
    ------
    ValueError
        If ``layout`` is unknown, the tensor has no LoD level, or it holds 64-bit values
        while ``jax_enable_x64`` is off (JAX would narrow them silently).
    ImportError
        If JAX is not installed (the ``jax`` extra: ``pip install -e '.[jax]'``
        in the checkout).

    See Also
    --------
    from_jax : The inverse.

    Examples
    --------
    >>> import numpy as np, lodarrow as la
    >>> t = la.LoDTensor(np.arange(5, dtype=np.float32), lengths=[[2, 3]])
    >>> s = t.to_jax()  # doctest: +SKIP
    >>> s.segment_ids.tolist(), s.num_segments  # doctest: +SKIP
    ([0, 0, 1, 1, 1], 2)
    """
    fn = "to_jax"
    check_choice(layout, f"{fn}: layout", LAYOUTS)
    _common.check_pad_value(pad_value, fn)
    maxlen = _common.check_maxlen(maxlen, fn)
    fn = f"to_jax({layout!r})"
    t, data, offsets = _common.sequence_parts(obj, column, nulls, fn,
                                              "jax.dlpack.from_dlpack(t)")
    jax = _jax(fn)
    _check_values_dtype(jax, data.dtype, fn)
    if layout == "padded":
        padded, length = sequence_pad(t, pad_value, maxlen)
        pdata, lens = padded._data, length._data
        xp = _xp(lens)
        mask = xp.arange(pdata.shape[1], dtype=np.int64)[None, :] < lens[:, None]
        lod = tuple(_index_array(jax, _host_or_device(padded, k), fn, "offsets", fresh=True)
                    for k in range(len(padded._offsets)))
        return JaxPadded(_as_jax(jax, pdata, fresh=True),
                         _index_array(jax, lens, fn, "lengths", fresh=True),
                         _as_jax(jax, mask, fresh=True), lod)
    last = _host_or_device(t, len(offsets) - 1)
    xp = _xp(last)
    n = int(last.shape[0]) - 1
    if data.shape[0] > _common.INT32_MAX:
        raise ValueError(f"{fn}: int32 segment ids cannot index {data.shape[0]} rows; convert "
                         f"in smaller batches (t[i:j])")
    sizes = (last[1:] - last[:-1]).astype(np.int32)
    if xp is np:  # one O(T) pass: each sequence's id repeated over its rows
        ids = np.repeat(np.arange(n, dtype=np.int32), sizes)
    else:  # CuPy's repeat takes no per-element counts: the sequence each row falls in
        rows = xp.arange(data.shape[0], dtype=np.int64)
        ids = xp.searchsorted(last[1:], rows, side="right").astype(np.int32)
    lod = tuple(_index_array(jax, _host_or_device(t, k), fn, "offsets")
                for k in range(len(offsets)))
    return JaxSegments(_as_jax(jax, data), _as_jax(jax, ids, fresh=True), n,
                       _as_jax(jax, sizes, fresh=True), lod)


def _xp(array):
    return array_module(array)


def _host_or_device(t, k):
    return _common.host_offsets(t, k)


# ---------------------------------------------------------------------------- from JAX
def _to_array(jax, x, fn, what):
    """jax.Array -> NumPy (CPU: a read-only view of JAX's buffer) or CuPy (GPU, DLPack)."""
    if not isinstance(x, jax.Array):
        raise TypeError(f"{fn}: {what} must be a jax.Array, got {type(x).__name__}")
    platform = next(iter(x.devices())).platform
    if platform == "gpu":
        cupy = import_optional("cupy", fn)
        return cupy.from_dlpack(x)
    if platform != "cpu":
        raise ValueError(f"{fn}: {what} on {platform} (only CPU and GPU arrays convert)")
    arr = np.asarray(x)
    if str(arr.dtype) == "bfloat16":
        raise TypeError(f"{fn}: {what} of dtype bfloat16 have no NumPy dtype lodarrow holds; "
                        f"convert them first (x.astype(jnp.float32))")
    return arr


def _int_array(jax, x, fn, what):
    if isinstance(x, jax.Array):
        x = _to_array(jax, x, fn, what)
    try:
        arr = _common.host_array(x, fn)
    except (TypeError, ValueError):
        arr = None
    if arr is None or arr.dtype.kind not in "iu" or arr.ndim != 1:
        raise TypeError(f"{fn}: {what} must be a 1-D integer array, got {type(x).__name__}")
    return arr


def from_jax(obj, *, segment_ids=None, num_segments=None, group_sizes=None, lod=None,
             lengths=None):
    """A LoDTensor from JAX arrays: segments, group sizes, offsets or a padded batch.

    Parameters
    ----------
    obj : jax.Array, JaxSegments or JaxPadded
        What :func:`to_jax` returned, or the values ``(T, ...)`` with one of the keywords
        below (alone: a LoDTensor without LoD), or a padded block with ``lengths``.
    segment_ids : jax.Array or array_like, optional
        Sorted (non-decreasing) int sequence ids, one per row, with ``num_segments``.
    num_segments : int, optional
        The number of sequences (ids ``0 .. num_segments - 1``; trailing ones may be empty).
        None: ``max(segment_ids) + 1``.
    group_sizes : jax.Array or array_like, optional
        The length of each sequence (``lax.ragged_dot``'s ``group_sizes``).
    lod : sequence of jax.Array or array_like, optional
        Every level's offsets, outermost first.  With ``lengths``: a padded batch's outer
        levels.
    lengths : jax.Array or array_like, optional
        The real length of each padded row (``obj`` is padded).

    Returns
    -------
    LoDTensor
        The values shared with JAX on the CPU (read-only; docs/interop.md#copies).

    Raises
    ------
    TypeError
        If an argument has the wrong type, or two ways of giving the LoD are mixed.
    ValueError
        If the segment ids are not sorted or out of range, or the offsets do not match the
        values.
    ImportError
        If JAX is not installed.

    See Also
    --------
    to_jax : The inverse.

    Examples
    --------
    >>> import lodarrow as la
    >>> import jax.numpy as jnp  # doctest: +SKIP
    >>> x = jnp.arange(5.0)  # doctest: +SKIP
    >>> la.from_jax(x, segment_ids=jnp.array([0, 0, 2, 2, 2]), num_segments=3).lod()
    ... # doctest: +SKIP
    [[0, 2, 2, 5]]
    """
    fn = "from_jax"
    jax = _jax(fn)
    if num_segments is not None and (isinstance(num_segments, bool)
                                     or not isinstance(num_segments, (int, np.integer))):
        raise TypeError(f"{fn}: num_segments must be an int, got {type(num_segments).__name__}")
    given = [k for k, v in (("segment_ids", segment_ids), ("group_sizes", group_sizes),
                            ("lod", lod if lengths is None else None),
                            ("lengths", lengths)) if v is not None]
    if isinstance(obj, (JaxSegments, JaxPadded)):
        if given or num_segments is not None:
            raise TypeError(f"{fn}: a {type(obj).__name__} carries its LoD; pass no "
                            f"{', '.join(given) or 'num_segments'}")
        if isinstance(obj, JaxPadded):
            lod, lengths, obj = obj.lod, obj.lengths, obj.values
            given = ["lengths"]
        else:
            lod, obj = obj.lod, obj.values
            given = ["lod"]
    if len(given) > 1:
        raise TypeError(f"{fn}: give one of segment_ids, group_sizes, lod or lengths; got "
                        f"{', '.join(given)}")
    if lod is not None and (isinstance(lod, (str, bytes)) or not hasattr(lod, "__len__")):
        raise TypeError(f"{fn}: lod must be a sequence of offset arrays, got "
                        f"{type(lod).__name__}")
    values = _to_array(jax, obj, fn, "obj")
    if lengths is not None:
        return _from_padded(jax, values, lengths, lod, fn)
    if segment_ids is not None:
        levels = [_offsets_from_ids(_int_array(jax, segment_ids, fn, "segment_ids"),
                                    num_segments, values.shape[0], fn)]
    elif group_sizes is not None:
        sizes = _int_array(jax, group_sizes, fn, "group_sizes").astype(np.int64)
        if sizes.size and int(sizes.min()) < 0:
            raise ValueError(f"{fn}: group_sizes must be >= 0, found {int(sizes.min())}")
        off = np.zeros(sizes.shape[0] + 1, dtype=np.int64)
        np.cumsum(sizes, out=off[1:])
        levels = [off]
    elif lod is not None:
        levels = [_common.check_offsets(_int_array(jax, o, fn, f"lod[{k}]"), fn, f"lod[{k}]")
                  for k, o in enumerate(lod)]
    else:
        return _common.build(values, [], fn)
    levels, lo, hi = _common.rebase_levels(levels, values.shape[0], fn)
    if lo or hi != values.shape[0]:
        values = values[lo:hi]
    return _common.build(values, levels, fn)


def _offsets_from_ids(ids, num_segments, n_rows, fn):
    if ids.shape[0] != n_rows:
        raise ValueError(f"{fn}: segment_ids has {ids.shape[0]} entries for {n_rows} rows")
    ids = ids.astype(np.int64, copy=False)
    if ids.size:
        down = ids[1:] < ids[:-1]
        if down.any():
            i = int(np.argmax(down)) + 1
            raise ValueError(f"{fn}: segment_ids must be sorted (a LoD keeps each sequence's "
                             f"rows together); they decrease at position {i}: sort the rows "
                             f"by segment first (jnp.argsort(segment_ids, stable=True))")
        if int(ids[0]) < 0:
            raise ValueError(f"{fn}: segment_ids must be >= 0, found {int(ids[0])}")
    top = int(ids[-1]) + 1 if ids.size else 0
    n = top if num_segments is None else int(num_segments)
    if top > n:
        raise ValueError(f"{fn}: segment id {top - 1} is out of range for num_segments={n}")
    off = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(ids, minlength=n), out=off[1:])
    return off


def _from_padded(jax, values, lengths, lod, fn):
    lens = _int_array(jax, lengths, fn, "lengths")
    if values.ndim < 2:
        raise ValueError(f"{fn}: padded values need shape (N, P, ...), got {values.shape}")
    outer = [] if lod is None else [
        _common.check_offsets(_int_array(jax, o, fn, f"lod[{k}]"), fn, f"lod[{k}]")
        for k, o in enumerate(lod)]
    return _common.unpad(values, lens, outer, fn)
