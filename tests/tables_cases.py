"""Random tables and one table-form call per operator use (shared by the tables tests).

``make_table(rng, n)`` builds ``n`` rows holding every kind of column the operators read,
each row generated on its own (so any split of the table is again such a table):

========  =====================================  ============================================
column    type                                   used by
========  =====================================  ============================================
id        int64                                  (passes through)
title     string                                 (passes through)
x, x2     list<double>                           pool, softmax, reverse, slice, concat ...
emb       list<fixed_size_list<float, 3>>        pool, pad, reverse, conv, reshape
tok       list<int64>                            enumerate, erase, pad
doc       list<list<double>>                     2-level pool, softmax, erase, concat
xcut      list<list<int32>>                      lod_reset / lod_append: row i cuts x's row i
v, fv     double, fixed_size_list<double, 2>     expand, expand_as
off, len  int64                                  slice (off + len <= len(x row))
n         int64                                  mask
tlen      list<int64>                            mask of a list column
padded    fixed_size_list<double, 4>             unpad (plen <= 4)
plen      int64                                  unpad
base      fixed_size_list<double, 5>             scatter input
ids, upd  list<int64>, list<double>              scatter index (< 5) and updates
mat       list<float>                            topk: channel_num * R_i * C_i values
rows      list<int32>, cols list<int32>          topk: R_i and C_i values
========  =====================================  ============================================
"""

import numpy as np
import pyarrow as pa

import lodarrow as la

CHANNELS = 2
MAXLEN = 6


def _lists(parts, value_type):
    return pa.array([list(p) for p in parts], type=pa.list_(value_type))


def addresses(column):
    """The addresses of every buffer of a column (pyarrow Array or ChunkedArray)."""
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    return [None if b is None else b.address for c in chunks for b in c.buffers()]


def _close(a, b):
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        # sequence_conv multiplies through BLAS, whose float32 rounding may depend on how
        # many rows a call holds: equal to float32 precision, not bit for bit
        return a == b or (a != a and b != b) or abs(a - b) <= 1e-6 * max(1.0, abs(a), abs(b))
    return a == b and type(a) is type(b)


def assert_rows_equal(got, want, what=""):
    """Equal row lists (floats to float32 precision, see ``_close``)."""
    assert got == want or _close(got, want), f"{what}: {got} != {want}"


def assert_tables_equal(a, b, what=""):
    """Same schema, and equal columns (floats to float32 precision)."""
    assert a.schema == b.schema, what
    for name in a.schema.names:
        assert_rows_equal(a.column(name).to_pylist(), b.column(name).to_pylist(),
                          f"{what}: column {name}")


def make_table(rng, n):
    """A random table of ``n`` rows (see the module docstring)."""
    lx = rng.integers(0, 5, n)
    x = [rng.normal(size=k).round(3) for k in lx]
    x2 = [rng.normal(size=k).round(3) for k in rng.integers(0, 4, n)]
    le = rng.integers(0, 4, n)
    emb = [rng.normal(size=(k, 3)).astype(np.float32).round(3) for k in le]
    emb_flat = np.concatenate([e.reshape(-1) for e in emb] or [np.zeros(0, np.float32)])
    emb_arr = pa.ListArray.from_arrays(
        pa.array(np.concatenate([[0], np.cumsum(le)]).astype(np.int32)),
        pa.FixedSizeListArray.from_arrays(pa.array(emb_flat, type=pa.float32()), 3))
    tok = [rng.integers(0, 6, k) for k in rng.integers(0, 5, n)]
    doc = [[rng.normal(size=k).round(3).tolist() for k in rng.integers(0, 3, m)]
           for m in rng.integers(0, 3, n)]
    xcut = []
    for k in lx:  # cut x's row into sub-sequences summing to its length
        cuts = np.sort(rng.integers(0, k + 1, rng.integers(0, 3)))
        bounds = np.concatenate([[0], cuts, [k]])
        xcut.append([list(range(int(b - a))) for a, b in zip(bounds[:-1], bounds[1:])])
    off = np.array([rng.integers(0, k + 1) for k in lx], dtype=np.int64)
    ln = np.array([rng.integers(0, k - o + 1) for k, o in zip(lx, off)], dtype=np.int64)
    tlen = [rng.integers(0, MAXLEN + 2, k) for k in rng.integers(0, 4, n)]
    plen = rng.integers(0, 5, n)
    r = rng.integers(0, 3, n)
    c = rng.integers(0, 3, n)
    mat = [rng.normal(size=CHANNELS * ri * ci).astype(np.float32).round(3) for ri, ci in zip(r, c)]
    lids = rng.integers(0, 4, n)
    return pa.table({
        "id": pa.array(np.arange(n, dtype=np.int64)),
        "title": pa.array([f"row {i}" for i in range(n)]),
        "x": _lists(x, pa.float64()),
        "x2": _lists(x2, pa.float64()),
        "emb": emb_arr,
        "tok": _lists(tok, pa.int64()),
        "doc": pa.array(doc, type=pa.list_(pa.list_(pa.float64()))),
        "xcut": pa.array(xcut, type=pa.list_(pa.list_(pa.int32()))),
        "v": pa.array(rng.normal(size=n).round(3)),
        "fv": pa.FixedSizeListArray.from_arrays(pa.array(rng.normal(size=2 * n).round(3)), 2),
        "off": pa.array(off),
        "len": pa.array(ln),
        "n": pa.array(rng.integers(0, MAXLEN + 2, n)),
        "tlen": _lists(tlen, pa.int64()),
        "padded": pa.FixedSizeListArray.from_arrays(pa.array(rng.normal(size=4 * n).round(3)), 4),
        "plen": pa.array(plen),
        "base": pa.FixedSizeListArray.from_arrays(pa.array(rng.normal(size=5 * n).round(3)), 5),
        "ids": _lists([rng.integers(0, 5, k) for k in lids], pa.int64()),
        "upd": _lists([rng.normal(size=k).round(3) for k in lids], pa.float64()),
        "mat": _lists(mat, pa.float32()),
        "rows": _lists([np.zeros(k, np.int32) for k in r], pa.int32()),
        "cols": _lists([np.zeros(k, np.int32) for k in c], pa.int32()),
    })


C = la.col
_FILTER = np.arange(3 * 3 * 2, dtype=np.float32).reshape(9, 2) / 10

#: (id, operator, arguments, out): every operator, in every row-aligned table form.
CASES = [
    ("lod_reset", la.lod_reset, dict(x=C("x"), y=C("xcut")), "r"),
    ("lod_append", la.lod_append, dict(x=C("x"), level=C("xcut")), "r"),
    ("expand_plain", la.sequence_expand, dict(x=C("v"), y=C("x")), "r"),
    ("expand_fsl_ref0", la.sequence_expand, dict(x=C("fv"), y=C("doc"), ref_level=0), "r"),
    ("expand_as", la.sequence_expand_as, dict(x=C("fv"), y=C("x")), "r"),
    ("scatter", la.sequence_scatter, dict(input=C("base"), index=C("ids"), updates=C("upd")),
     "r"),
    ("pool_avg", la.sequence_pool, dict(input=C("emb"), pool_type="average"), "r"),
    ("pool_sum_2level", la.sequence_pool, dict(input=C("doc"), pool_type="sum", pad_value=-1.0),
     "r"),
    ("pool_max_index", la.sequence_pool,
     dict(input=C("emb"), pool_type="max", return_index=True), ("r", "i")),
    ("pool_min_index_2level", la.sequence_pool,
     dict(input=C("doc"), pool_type="min", return_index=True), ("r", "i")),
    ("first_step", la.sequence_first_step, dict(input=C("x")), "r"),
    ("last_step", la.sequence_last_step, dict(input=C("emb")), "r"),
    ("softmax", la.sequence_softmax, dict(input=C("x")), "r"),
    ("softmax_2level", la.sequence_softmax, dict(input=C("doc")), "r"),
    ("pad", la.sequence_pad, dict(x=C("emb"), pad_value=0.0, maxlen=MAXLEN), ("r", "l")),
    ("pad_tok", la.sequence_pad, dict(x=C("tok"), pad_value=-1, maxlen=MAXLEN), ("r", "l")),
    ("unpad", la.sequence_unpad, dict(x=C("padded"), length=C("plen")), "r"),
    ("concat", la.sequence_concat, dict(input=[C("x"), C("x2")]), "r"),
    ("slice", la.sequence_slice, dict(input=C("x"), offset=C("off"), length=C("len")), "r"),
    ("reverse", la.sequence_reverse, dict(x=C("emb")), "r"),
    ("enumerate", la.sequence_enumerate, dict(input=C("tok"), win_size=3, pad_value=-1), "r"),
    ("erase", la.sequence_erase, dict(input=C("tok"), tokens=[0, 2]), "r"),
    ("erase_2level", la.sequence_erase, dict(input=C("doc"), tokens=[]), "r"),
    ("mask", la.sequence_mask, dict(x=C("n"), maxlen=MAXLEN), "r"),
    ("mask_list", la.sequence_mask, dict(x=C("tlen"), maxlen=MAXLEN, dtype="bool"), "r"),
    ("reshape", la.sequence_reshape, dict(input=C("emb"), new_dim=1), "r"),
    ("conv", la.sequence_conv, dict(input=C("emb"), filter=_FILTER, context_length=3), "r"),
    ("topk", la.sequence_topk_avg_pooling,
     dict(input=C("mat"), row=C("rows"), col=C("cols"), topks=[1, 2], channel_num=CHANNELS),
     "r"),
]

#: Every public operator appears in CASES.
COVERED = {op.__name__ for _, op, _, _ in CASES}
