"""polars' peers: list columns and their ``list.*`` expressions.

Importing this module registers them with :mod:`lodarrow._bench._peers`, whose docstring
says what a peer is.
"""

import functools

from lodarrow._bench._peers import (_arrow_parts, ERASE_TOKENS, _flat_values, NotApplicable,
                                    numpy_view, _only_d1, _pad_norm, peer)

__all__ = []  # the peers are reached through the registry


# ====================================================================== sequence_pool
@peer("sequence_pool", "polars", "list.sum/mean/max")
def polars_pool(w, variant):
    import polars as pl

    if w.d > 1:  # list.sum does not reduce array[f32, d]: one list column per feature
        frame = w.polars_columns
        expr = {"sum": pl.all().list.sum(), "average": pl.all().list.mean().fill_null(0),
                "max": pl.all().list.max().fill_null(0)}[variant]
        return (lambda: frame.select(expr)), lambda r: r.to_numpy()
    s = w.polars
    if len(w.offsets) == 2:
        inner = {"sum": pl.element().list.sum(),
                 "average": pl.element().list.mean().fill_null(0),
                 "max": pl.element().list.max().fill_null(0)}[variant]
        return (lambda: s.list.eval(inner)), lambda r: _flat_values(r.to_arrow())
    if variant == "sum":
        return (lambda: s.list.sum()), numpy_view
    if variant == "average":
        return (lambda: s.list.mean().fill_null(0)), numpy_view
    return (lambda: s.list.max().fill_null(0)), numpy_view


# ====================================================================== sequence_softmax
@peer("sequence_softmax", "polars", "list.eval(exp / sum)")
def polars_softmax(w, variant):
    import polars as pl

    if w.d > 1 or len(w.offsets) > 1:
        raise NotApplicable("D=1, one level only")
    s = w.polars
    e = (pl.element() - pl.element().max()).exp()
    return (lambda: s.list.eval(e / e.sum())), lambda r: r.explode().drop_nulls().to_numpy()


# ====================================================================== first / last step
def _polars_step(w, last):
    import polars as pl

    if w.d > 1:
        frame = w.polars_columns
        expr = (pl.all().list.last() if last else pl.all().list.first()).fill_null(0)
        return (lambda: frame.select(expr)), lambda r: r.to_numpy()
    s = w.polars
    return (lambda: (s.list.last() if last else s.list.first()).fill_null(0)), numpy_view


for _op, _last in (("sequence_first_step", False), ("sequence_last_step", True)):
    peer(_op, "polars", "list.last" if _last else "list.first")(functools.partial(
        lambda w, variant, last: _polars_step(w, last), last=_last))


# ====================================================================== sequence_expand
@peer("sequence_expand", "polars", "gather(list_parent_indices)")
def polars_expand(w, variant):
    import polars as pl
    import pyarrow.compute as pc

    s, arr = pl.Series(w.per_sequence), w.arrow
    return (lambda: s.gather(pc.list_parent_indices(arr).to_numpy())), numpy_view


# ====================================================================== sequence_pad
@peer("sequence_pad", "polars", "list.gather(range, null_on_oob)")
def polars_pad(w, variant):
    if w.d > 1:
        raise NotApplicable("fill_null of array rows")
    s = w.polars

    def run():
        lengths = s.list.len()
        p = int(lengths.max() or 0)
        flat = s.list.gather(list(range(p)), null_on_oob=True).explode().fill_null(0)
        return flat.to_numpy().reshape(len(s), p), lengths
    return run, _pad_norm


# ====================================================================== sequence_unpad
@peer("sequence_unpad", "polars", "arr.to_list().list.head(n)")
def polars_unpad(w, variant):
    import polars as pl

    if w.d > 1:
        raise NotApplicable("2-D rows")
    xpad, _ = w.padded
    frame = pl.DataFrame({"x": xpad, "n": w.lengths})

    def run():
        return frame.select(pl.col("x").arr.to_list().list.head(pl.col("n")))["x"]

    def norm(s):
        offsets, values = _arrow_parts(s.to_arrow())
        return values.reshape(-1, 1), offsets
    return run, norm


# ====================================================================== data movers (D=1)
def _polars_values_offsets(s):
    offsets, values = _arrow_parts(s.to_arrow())
    return values, offsets


@peer("sequence_reverse", "polars", "list.reverse")
def polars_reverse(w, variant):
    _only_d1(w)
    s = w.polars
    return (lambda: s.list.reverse()), _polars_values_offsets


@peer("sequence_concat", "polars", "list.concat")
def polars_concat(w, variant):
    _only_d1(w)
    s = w.polars
    return (lambda: s.list.concat(s)), _polars_values_offsets


@peer("sequence_slice", "polars", "list.slice(expr, expr)")
def polars_slice(w, variant):
    import polars as pl

    _only_d1(w)
    offset, length = w.slice_args
    frame = pl.DataFrame({"x": w.polars, "o": offset[:, 0], "n": length[:, 0]})
    return (lambda: frame.select(pl.col("x").list.slice(pl.col("o"), pl.col("n")))["x"]), \
        _polars_values_offsets


@peer("sequence_erase", "polars", "list.eval(filter(~is_in))")
def polars_erase(w, variant):
    import polars as pl

    _only_d1(w)
    s = pl.from_arrow(w.ids_arrow)
    expr = pl.element().filter(~pl.element().is_in(list(ERASE_TOKENS)))
    return (lambda: s.list.eval(expr)), _polars_values_offsets


# ====================================================================== Arrow conversions
@peer("to_arrow", "polars", "Series.to_arrow")
def polars_to_arrow(w, variant):
    s = w.polars
    return (lambda: s.to_arrow()), _arrow_parts


@peer("from_arrow", "polars", "pl.from_arrow")
def polars_from_arrow(w, variant):
    import polars as pl

    arr = w.arrow
    return (lambda: pl.from_arrow(arr)), lambda s: _arrow_parts(s.to_arrow())


# ====================================================================== Parquet
@peer("write_parquet", "polars", "write_parquet(compression='snappy', statistics=False)")
def polars_write_parquet(w, variant):
    """lodarrow's settings (snappy, no statistics; polars never dictionary-encodes floats);
    polars' own default is zstd, which costs more than it saves on random float32 values."""
    import polars as pl
    import pyarrow.parquet as pq

    frame = pl.DataFrame({"data": w.polars})
    path = variant

    def run():
        frame.write_parquet(path, compression="snappy", statistics=False)
        return path
    return run, lambda p: _arrow_parts(pq.read_table(p).column(0))


@peer("read_parquet", "polars", "pl.read_parquet")
def polars_read_parquet(w, variant):
    import polars as pl

    path = variant
    return (lambda: pl.read_parquet(path)), lambda df: _arrow_parts(df["data"].to_arrow())


# ====================================================================== LoDTensor from offsets
@peer("from_offsets", "polars", "pl.from_arrow(LargeListArray.from_arrays)")
def polars_from_offsets(w, variant):
    import polars as pl
    import pyarrow as pa

    _only_d1(w)
    x, off = w.data, w.offsets[-1]
    return (lambda: pl.from_arrow(pa.LargeListArray.from_arrays(pa.array(off), pa.array(x)))), \
        lambda s: _arrow_parts(s.to_arrow())
