"""A LoDTensor read from 32-bit lists remembers the offset width: ``to_arrow()``,
``pa.array(t)`` and ``write_parquet`` give it back where the offsets fit
(docs/data-model.md#arrow-mapping)."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lodarrow as la
from lodarrow._interop import _arrow

LIST = pa.list_(pa.list_(pa.int32()))
LARGE = pa.large_list(pa.large_list(pa.int32()))
ROWS = [[[1, 2], [3]], [], [[4], [], [5, 6]]]


def test_list_comes_back_as_list():
    t = la.from_arrow(pa.array(ROWS, LIST))
    assert t.to_arrow().type == LIST
    assert t.to_arrow().to_pylist() == ROWS
    assert _arrow.to_arrow(t).type == LIST
    assert pa.array(t).type == LIST  # the Arrow PyCapsule export too
    assert la.to_table({"x": t}).schema.field("x").type == LIST


def test_large_list_and_tensors_built_in_python_stay_large():
    assert la.from_arrow(pa.array(ROWS, LARGE)).to_arrow().type == LARGE
    t = la.LoDTensor(np.arange(6, dtype=np.int32), lengths=[[2, 0, 3], [2, 1, 1, 0, 2]])
    assert t.to_arrow().type == LARGE


def test_large_offsets_forces_either_width():
    t = la.from_arrow(pa.array(ROWS, LIST))
    assert t.to_arrow(large_offsets=True).type == LARGE
    assert t.to_arrow(large_offsets=False).type == LIST
    big = la.from_arrow(pa.array(ROWS, LARGE))
    assert big.to_arrow(large_offsets=False).type == LIST
    assert _arrow.to_arrow(big, large_offsets=True).type == LARGE
    with pytest.raises(TypeError, match="to_arrow: large_offsets must be True, False or None"):
        t.to_arrow(large_offsets="yes")


def test_list_views_and_mixed_levels():
    if not hasattr(pa, "list_view"):
        pytest.skip("this pyarrow has no ListView")
    view = pa.array(ROWS, pa.list_view(pa.list_view(pa.int32())))
    assert la.from_arrow(view).to_arrow().type == LIST
    large_view = pa.array(ROWS, pa.large_list_view(pa.large_list_view(pa.int32())))
    assert la.from_arrow(large_view).to_arrow().type == LARGE
    # a LargeList level anywhere: LargeList (the default)
    mixed = pa.array(ROWS, pa.list_(pa.large_list(pa.int32())))
    assert la.from_arrow(mixed).to_arrow().type == LARGE


def test_feature_dimensions_and_chunks_keep_the_width():
    emb = pa.array([[[1.0, 2.0]], [], [[3.0, 4.0], [5.0, 6.0]]],
                   pa.list_(pa.list_(pa.float32(), 2)))
    assert la.from_arrow(emb).to_arrow().type == emb.type
    chunked = pa.chunked_array([emb, emb])
    assert la.from_arrow(chunked).to_arrow().type == emb.type
    folded = pa.array([[[1, 2], [3, 4]], [[5, 6]]], pa.list_(pa.list_(pa.int64())))
    t = la.from_arrow(folded, lod_level=1)
    assert t.to_arrow().type == pa.list_(pa.list_(pa.int64(), 2))


def test_views_keep_the_width_and_operator_results_do_not():
    t = la.from_arrow(pa.array(ROWS, LIST))
    for derived in (t[1:], t[2], t.take([2, 0]), t.merge_levels(0, 1), t.cpu()):
        assert pa.types.is_list(derived.to_arrow().type), derived
    # operators: the table layer chooses its results' width itself (docs/tables.md)
    assert pa.types.is_large_list(la.sequence_reverse(t).to_arrow().type)


def test_real_offsets_past_int32_fall_back_to_large_list():
    """2**31 + 1 rows of width 0 (no bytes): an offset int32 cannot hold, for real."""
    t = la.from_arrow(pa.array([[[]], []], pa.list_(pa.list_(pa.float32(), 0))))
    assert pa.types.is_list(t.to_arrow().type)
    n = 2**31 + 1
    t.set(np.empty((n, 0), np.float32))
    t.set_lod([[0, n, n]])  # a new LoD keeps the remembered width, which no longer fits
    arr = t.to_arrow()
    assert arr.type == pa.large_list(pa.list_(pa.float32(), 0))
    assert arr.offsets.to_pylist() == [0, n, n]
    with pytest.raises(ValueError, match="offset 2147483649 at position 2, which does not fit"):
        t.to_arrow(large_offsets=False)


def test_offsets_past_int32_fall_back_to_large_list(monkeypatch):
    t = la.from_arrow(pa.array(ROWS, LIST))
    monkeypatch.setattr(_arrow, "_INT32_MAX", 5)  # the last offset of level 1 is 6
    assert t.to_arrow().type == LARGE
    assert t.to_arrow().to_pylist() == ROWS
    with pytest.raises(ValueError, match="does not fit the int32 offsets"):
        t.to_arrow(large_offsets=False)
    monkeypatch.setattr(_arrow, "_INT32_MAX", 6)
    assert t.to_arrow().type == LIST


def test_parquet_round_trip_keeps_list_types(tmp_path):
    src = tmp_path / "src.parquet"
    table = pa.table({"tok": pa.array(ROWS, LIST),
                      "emb": pa.array([[[1.0, 2.0]], [], [[3.0, 4.0]]],
                                      pa.list_(pa.list_(pa.float32(), 2))),
                      "big": pa.array(ROWS, LARGE)})
    pq.write_table(table, src)
    cols = la.read_parquet(src)
    la.write_parquet(cols, tmp_path / "out.parquet")
    assert pq.read_schema(tmp_path / "out.parquet").remove_metadata() == table.schema
    back = la.read_parquet(tmp_path / "out.parquet")
    assert {k: v.to_arrow().type for k, v in back.items()} == \
        {k: table.schema.field(k).type for k in table.schema.names}
    # without the stored Arrow schema, lodarrow's metadata restores both widths
    la.write_parquet(cols, tmp_path / "bare.parquet", store_schema=False)
    bare = la.read_parquet(tmp_path / "bare.parquet")
    assert bare["tok"].to_arrow().type == LIST and bare["big"].to_arrow().type == LARGE


def test_pickle_keeps_the_width():
    import pickle

    t = la.from_arrow(pa.array(ROWS, LIST))
    assert pickle.loads(pickle.dumps(t)).to_arrow().type == LIST
