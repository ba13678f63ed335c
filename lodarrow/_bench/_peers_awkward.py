"""Awkward Array's peers: ``ak.*`` functions on jagged arrays.

Importing this module registers them with :mod:`lodarrow._bench._peers`, whose docstring
says what a peer is.
"""

import functools

import numpy as np

from lodarrow._bench._peers import _arrow_parts, ERASE_TOKENS, _in_rows, _only_d1, _pad_norm, peer

__all__ = []  # the peers are reached through the registry


def _awkward_flat(a):
    import awkward as ak

    return ak.to_numpy(ak.fill_none(ak.flatten(a, axis=None), np.nan)).reshape(-1)


def _awkward_offsets(a):
    import awkward as ak

    counts = ak.to_numpy(ak.num(a, axis=1)).astype(np.int64)
    return np.concatenate(([0], np.cumsum(counts)))


# ====================================================================== sequence_pool
@peer("sequence_pool", "awkward", "ak.sum/mean/max")
def awkward_pool(w, variant):
    import awkward as ak

    a = w.awkward
    axis = 1 if w.d > 1 else -1  # var axis; for var * 16 * float32 that is axis 1
    if variant == "sum":
        return (lambda: ak.sum(a, axis=axis)), _in_rows(w, _awkward_flat)
    fn = ak.mean if variant == "average" else ak.max  # empty -> None, filled with 0
    return (lambda: ak.fill_none(fn(a, axis=axis, mask_identity=True), 0)), \
        _in_rows(w, _awkward_flat)


# ====================================================================== sequence_softmax
@peer("sequence_softmax", "awkward", "np.exp(a - ak.max) / ak.sum")
def awkward_softmax(w, variant):
    import awkward as ak

    a = w.awkward

    def run():
        e = np.exp(a - ak.max(a, axis=-1, keepdims=True))
        return e / ak.sum(e, axis=-1, keepdims=True)
    return run, _awkward_flat


# ====================================================================== first / last step
def _awkward_step(w, last):
    import awkward as ak

    a = w.awkward
    fill = np.zeros(w.d, np.float32) if w.d > 1 else 0  # a whole zero row for D > 1
    if last:
        return (lambda: ak.fill_none(ak.firsts(a[:, -1:], axis=1), fill, axis=0)), \
            _in_rows(w, _awkward_flat)
    return (lambda: ak.fill_none(ak.firsts(a, axis=1), fill, axis=0)), \
        _in_rows(w, _awkward_flat)


for _op, _last in (("sequence_first_step", False), ("sequence_last_step", True)):
    peer(_op, "awkward", "ak.firsts")(functools.partial(
        lambda w, variant, last: _awkward_step(w, last), last=_last))


# ====================================================================== sequence_expand
@peer("sequence_expand", "awkward", "ak.broadcast_arrays")
def awkward_expand(w, variant):
    import awkward as ak

    a = w.awkward
    x = w.per_sequence
    x = x[:, np.newaxis, :] if x.ndim == 2 else x

    def run():
        return ak.flatten(ak.broadcast_arrays(x, a)[0], axis=1)
    return run, _in_rows(w, _awkward_flat)


# ====================================================================== sequence_pad
@peer("sequence_pad", "awkward", "ak.pad_none + fill_none")
def awkward_pad(w, variant):
    import awkward as ak

    a = w.awkward
    fill = np.zeros(w.d, np.float32) if w.d > 1 else 0  # a whole zero row for D > 1

    def run():
        lengths = ak.num(a, axis=1)
        p = int(ak.max(lengths) or 0)
        padded = ak.fill_none(ak.pad_none(a, p, axis=1, clip=True), fill, axis=1)
        return ak.to_numpy(padded), lengths
    return run, _pad_norm


# ====================================================================== sequence_unpad
@peer("sequence_unpad", "awkward", "local_index < lengths")
def awkward_unpad(w, variant):
    import awkward as ak

    xpad, _ = w.padded
    a = ak.from_regular(ak.from_numpy(xpad), axis=1)
    lengths = w.lengths[:, np.newaxis]

    def run():
        return a[ak.local_index(a, axis=1) < lengths]

    return run, lambda r: (_awkward_flat(r).reshape(-1, w.d), _awkward_offsets(r))


# ====================================================================== data movers (D=1)
def _awkward_values_offsets(a):
    return _awkward_flat(a), _awkward_offsets(a)


@peer("sequence_reverse", "awkward", "a[:, ::-1]")
def awkward_reverse(w, variant):
    _only_d1(w)
    a = w.awkward
    return (lambda: a[:, ::-1]), _awkward_values_offsets


@peer("sequence_concat", "awkward", "ak.concatenate(axis=1)")
def awkward_concat(w, variant):
    import awkward as ak

    _only_d1(w)
    a = w.awkward
    return (lambda: ak.concatenate([a, a], axis=1)), _awkward_values_offsets


@peer("sequence_slice", "awkward", "local_index mask")
def awkward_slice(w, variant):
    import awkward as ak

    _only_d1(w)
    a = w.awkward
    offset, length = w.slice_args

    def run():
        li = ak.local_index(a, axis=1)
        return a[(li >= offset) & (li < offset + length)]
    return run, _awkward_values_offsets


@peer("sequence_erase", "awkward", "a[(a != t1) & ...]")
def awkward_erase(w, variant):
    import awkward as ak

    _only_d1(w)
    a = ak.Array(ak.contents.ListOffsetArray(ak.index.Index64(w.offsets[-1]),
                                             ak.contents.NumpyArray(w.int_ids)))

    def run():
        keep = a != ERASE_TOKENS[0]
        for tok in ERASE_TOKENS[1:]:
            keep = keep & (a != tok)
        return a[keep]
    return run, _awkward_values_offsets


# ====================================================================== Arrow conversions
@peer("to_arrow", "awkward", "ak.to_arrow")
def awkward_to_arrow(w, variant):
    import awkward as ak

    a = w.awkward
    return (lambda: ak.to_arrow(a, extensionarray=False)), _arrow_parts


@peer("from_arrow", "awkward", "ak.from_arrow")
def awkward_from_arrow(w, variant):
    import awkward as ak

    arr = w.arrow

    return (lambda: ak.from_arrow(arr)), lambda r: (_awkward_offsets(r), _awkward_flat(r))


# ====================================================================== LoDTensor from offsets
@peer("from_offsets", "awkward", "ListOffsetArray + ak.validity_error")
def awkward_from_offsets(w, variant):
    import awkward as ak

    _only_d1(w)
    x, off = w.data, w.offsets[-1]

    def run():
        a = ak.Array(ak.contents.ListOffsetArray(ak.index.Index64(off),
                                                 ak.contents.NumpyArray(x)))
        problem = ak.validity_error(a)  # ak.Array itself checks nothing
        if problem:
            raise ValueError(problem)
        return a
    return run, lambda a: (_awkward_offsets(a), _awkward_flat(a))
