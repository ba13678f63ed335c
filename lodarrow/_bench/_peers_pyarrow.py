"""pyarrow's peers: ``pyarrow.compute`` kernels, Arrow conversions and Parquet.

Importing this module registers them with :mod:`lodarrow._bench._peers`, whose docstring
says what a peer is.
"""

import numpy as np

from lodarrow._bench._peers import (_arrow_parts, _flat_values, _in_rows, NotApplicable, numpy_view,
                                    _only_d1, peer)

__all__ = []  # the peers are reached through the registry


# ====================================================================== sequence_pool
@peer("sequence_pool", "pyarrow", "Table.group_by")
def pyarrow_pool(w, variant):
    import pyarrow as pa
    import pyarrow.compute as pc

    if w.d > 1 or len(w.offsets) > 1:
        raise NotApplicable("group_by needs one flat value column")
    arr = w.arrow
    how = {"sum": "sum", "average": "mean", "max": "max"}[variant]

    def run():
        table = pa.table({"seq": pc.list_parent_indices(arr), "x": pc.list_flatten(arr)})
        grouped = table.group_by("seq").aggregate([("x", how)])
        out = np.zeros(len(arr), dtype=np.float64)  # empty sequences have no group
        out[grouped["seq"].to_numpy()] = grouped[f"x_{how}"].to_numpy()
        return out
    return run, numpy_view


# ====================================================================== sequence_expand
@peer("sequence_expand", "pyarrow", "take(list_parent_indices)")
def pyarrow_expand(w, variant):
    import pyarrow as pa
    import pyarrow.compute as pc

    x = w.per_sequence
    xa = pa.array(x) if x.ndim == 1 else pa.FixedSizeListArray.from_arrays(
        pa.array(x.reshape(-1)), x.shape[1])
    arr = w.arrow
    return (lambda: pc.take(xa, pc.list_parent_indices(arr))), _in_rows(w, _flat_values)


# ====================================================================== Arrow conversions
@peer("to_arrow", "pyarrow", "LargeListArray.from_arrays")
def pyarrow_to_arrow(w, variant):
    import pyarrow as pa

    x, off = w.data, w.offsets[-1]
    if x.ndim > 1 or len(w.offsets) > 1:
        raise NotApplicable("D=1, one level")
    return (lambda: pa.LargeListArray.from_arrays(pa.array(off), pa.array(x))), _arrow_parts


@peer("from_arrow", "pyarrow", "offsets/values .to_numpy()")
def pyarrow_from_arrow(w, variant):
    arr = w.arrow
    if len(w.offsets) > 1 or w.d > 1:
        raise NotApplicable("D=1, one level")
    return (lambda: (arr.offsets.to_numpy(), arr.values.to_numpy())), \
        lambda r: (np.asarray(r[0], dtype=np.int64), r[1])


# ====================================================================== Parquet
@peer("write_parquet", "pyarrow", "pq.write_table")
def pyarrow_write_parquet(w, variant):
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"data": w.arrow})
    path = variant  # the runner passes the file path as the variant

    def run():
        pq.write_table(table, path)
        return path
    return run, lambda p: _arrow_parts(pq.read_table(p).column(0))


@peer("read_parquet", "pyarrow", "pq.read_table")
def pyarrow_read_parquet(w, variant):
    import pyarrow.parquet as pq

    path = variant
    return (lambda: pq.read_table(path)), lambda t: _arrow_parts(t.column(0))


# ====================================================================== LoDTensor from offsets
@peer("from_offsets", "pyarrow", "LargeListArray.from_arrays + validate(full=True)")
def pyarrow_from_offsets(w, variant):
    import pyarrow as pa

    _only_d1(w)
    x, off = w.data, w.offsets[-1]

    def run():
        arr = pa.LargeListArray.from_arrays(pa.array(off), pa.array(x))
        arr.validate(full=True)  # from_arrays alone does not check the offsets' order
        return arr
    return run, _arrow_parts
