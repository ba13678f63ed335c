"""LoDTensor <-> PyTorch (docs/interop.md#pytorch): varlen, jagged and padded, both ways, against
the real torch; zero-copy asserted by address."""

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lodarrow as la
from conftest import CUDA
from hub_cases import (ALL_DTYPES, FEATURE_SHAPES, MULTI_LEVEL, ONE_LEVEL, SHAPES, address,
                       all_cases, assert_same, lengths_of, make, ref_padded, sliced,
                       table_with_tokens)
from strategies import lod_tensors

torch = pytest.importorskip("torch")


def _ptr(t):
    return t.data_ptr() if t.numel() else None


# ------------------------------------------------------------------------------- varlen
@pytest.mark.parametrize("t", all_cases(ALL_DTYPES, FEATURE_SHAPES))
def test_varlen_round_trip(t):
    v = t.to_torch("varlen")
    assert v.cu_seqlens.dtype == torch.int32
    assert v.cu_seqlens.tolist() == [int(x) for x in t.offsets[-1]]
    lens = lengths_of(t)
    assert v.max_seqlen == (int(lens.max()) if lens.size else 0)
    assert len(v.lod) == t.lod_level
    assert all(o.dtype == torch.int64 for o in v.lod)
    assert list(v.values.shape) == list(t.shape())
    assert_same(la.from_torch(v), t)


@pytest.mark.parametrize("t", all_cases(("float32", "int64"), ((), (3,))))
def test_varlen_is_zero_copy(t):
    v = t.to_torch()
    if t.data.size:
        assert _ptr(v.values) == address(t.data)
    for k, o in enumerate(v.lod):
        assert o.data_ptr() == address(t.offsets[k])
    back = la.from_torch(v)
    if t.data.size:
        assert address(back.data) == address(t.data)
    # int64 cu_seqlens are the offsets themselves
    v64 = t.to_torch(cu_seqlens_dtype="int64")
    assert v64.cu_seqlens.data_ptr() == address(t.offsets[-1])


def test_varlen_from_values_and_cu_seqlens():
    values = torch.arange(6.0)
    got = la.from_torch(values, cu_seqlens=torch.tensor([0, 2, 2, 6], dtype=torch.int32))
    assert got.lod() == [[0, 2, 2, 6]]
    assert address(got.data) == values.data_ptr()
    got = la.from_torch(values, lod=[torch.tensor([0, 1, 3]), torch.tensor([0, 2, 2, 6])])
    assert got.lod() == [[0, 1, 3], [0, 2, 2, 6]]


def test_varlen_cu_seqlens_that_start_past_zero_read_a_slice():
    values = torch.arange(10.0)
    got = la.from_torch(values, cu_seqlens=torch.tensor([3, 5, 8]))
    assert got.lod() == [[0, 2, 5]]
    assert got.data.tolist() == [3, 4, 5, 6, 7]
    assert address(got.data) == values.data_ptr() + 3 * 4


def test_varlen_int32_overflow_is_an_error_naming_the_way_out(monkeypatch):
    from lodarrow._hub import _common

    monkeypatch.setattr(_common, "INT32_MAX", 4)
    t = make([[2, 3]])
    with pytest.raises(ValueError, match="cu_seqlens_dtype='int64'"):
        t.to_torch("varlen")
    assert t.to_torch("varlen", cu_seqlens_dtype="int64").cu_seqlens.tolist() == [0, 2, 5]


def test_varlen_bad_offsets():
    with pytest.raises(ValueError, match="decrease at position 2"):
        la.from_torch(torch.arange(4.0), cu_seqlens=torch.tensor([0, 3, 2]))
    with pytest.raises(ValueError, match="ends at 9 but the values have only 4 rows"):
        la.from_torch(torch.arange(4.0), cu_seqlens=torch.tensor([0, 9]))


def test_varlen_flash_attention_reference():
    """cu_seqlens cut the values as attention's varlen path reads them."""
    t = make([[3, 1, 2]], "float32", (4,))
    v = t.to_torch()
    cu = v.cu_seqlens.tolist()
    seqs = [v.values[cu[i]:cu[i + 1]] for i in range(len(cu) - 1)]
    assert [s.shape[0] for s in seqs] == [3, 1, 2]
    np.testing.assert_array_equal(seqs[2].numpy(), np.asarray(t.data)[4:6])


# ------------------------------------------------------------------------------- jagged
@pytest.mark.parametrize("t", all_cases(ALL_DTYPES, FEATURE_SHAPES, shapes=[
    s for s in ONE_LEVEL if s != "zero-seqs"]))
def test_jagged_round_trip(t):
    nt = t.to_torch("jagged")
    assert nt.is_nested and nt.layout == torch.jagged
    assert nt.size(0) == len(t)
    for i, part in enumerate(nt.unbind()):
        np.testing.assert_array_equal(part.numpy(), np.asarray(t[i].data))
    assert_same(la.from_torch(nt), t)


@pytest.mark.parametrize("t", [make(SHAPES["1-level"], "float32", (3,)), sliced()],
                         ids=["plain", "sliced"])
def test_jagged_is_zero_copy_both_ways(t):
    nt = t.to_torch("jagged")
    assert nt.values().data_ptr() == address(t.data)
    assert nt.offsets().data_ptr() == address(t.offsets[0])
    back = la.from_torch(nt)
    assert address(back.data) == address(t.data)
    assert address(back.offsets[0]) == address(t.offsets[0])


@pytest.mark.parametrize("shape", MULTI_LEVEL)
def test_jagged_several_levels_names_merge_levels_and_varlen(shape):
    t = make(SHAPES[shape])
    with pytest.raises(ValueError, match=r"merge_levels.*varlen"):
        t.to_torch("jagged")
    merged = t.merge_levels(0, t.lod_level - 1)
    assert_same(la.from_torch(merged.to_torch("jagged")), merged)


def test_jagged_zero_sequences_is_an_error_naming_the_way_out():
    with pytest.raises(ValueError, match="varlen"):
        make(SHAPES["zero-seqs"]).to_torch("jagged")


def test_from_torch_reads_a_jagged_tensor_built_by_torch():
    parts = [torch.arange(3.0), torch.arange(2.0) + 10, torch.zeros(0)]
    nt = torch.nested.as_nested_tensor(parts, layout=torch.jagged)
    got = la.from_torch(nt)
    assert got.lod() == [[0, 3, 5, 5]]
    assert got.data.tolist() == [0, 1, 2, 10, 11]


def test_from_torch_reads_a_narrowed_jagged_tensor():
    base = torch.arange(12.0).reshape(3, 4)
    nt = torch.nested.narrow(base, 1, torch.tensor([0, 1, 3]), torch.tensor([2, 1, 0]),
                             layout=torch.jagged)
    got = la.from_torch(nt)
    assert got.lod() == [[0, 2, 3, 3]]
    assert got.data.tolist() == [0.0, 1.0, 5.0]


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors:UserWarning")
def test_from_torch_strided_nested_tensor_says_what_to_do():
    nt = torch.nested.nested_tensor([torch.arange(2.0), torch.arange(3.0)])
    with pytest.raises(TypeError, match="layout=torch.jagged"):
        la.from_torch(nt)


# ------------------------------------------------------------------------------- padded
@pytest.mark.parametrize("t", all_cases(ALL_DTYPES, FEATURE_SHAPES))
def test_padded_matches_the_reference_and_round_trips(t):
    p = t.to_torch("padded")
    padded, lens, mask = ref_padded(t)
    np.testing.assert_array_equal(p.values.numpy(), padded)
    np.testing.assert_array_equal(p.lengths.numpy(), lens)
    np.testing.assert_array_equal(p.mask.numpy(), mask)
    assert p.mask.dtype == torch.bool
    assert [o.tolist() for o in p.lod] == [[int(x) for x in o] for o in t.offsets[:-1]]
    assert_same(la.from_torch(p), t)


def test_padded_pad_value_and_maxlen():
    t = make([[1, 2]], "float32")
    p = t.to_torch("padded", pad_value=-1.0, maxlen=4)
    assert p.values.tolist() == [[0, -1, -1, -1], [1, 2, -1, -1]]
    assert p.mask.shape == (2, 4)


def test_from_torch_padded_with_lengths():
    x = torch.tensor([[1, 2, 0], [3, 0, 0]])
    got = la.from_torch(x, lengths=torch.tensor([2, 1]))
    assert got.lod() == [[0, 2, 3]]
    assert got.data.tolist() == [1, 2, 3]
    x = torch.zeros(2, 3, 4)
    got = la.from_torch(x, lengths=[3, 0])
    assert list(got.shape()) == [3, 4] and got.lod() == [[0, 3, 3]]


# ------------------------------------------------------------------------------- others
def test_plain_tensor_converts_without_lod():
    got = la.from_torch(torch.arange(4, dtype=torch.int16))
    assert got.lod() == [] and got.dtype == np.int16
    with pytest.raises(ValueError, match="no LoD level"):
        la.LoDTensor(np.arange(3.0)).to_torch()


def test_bfloat16_is_refused_with_the_way_out():
    with pytest.raises(TypeError, match="float32"):
        la.from_torch(torch.zeros(3, dtype=torch.bfloat16), cu_seqlens=[0, 3])


def test_requires_grad_is_detached():
    x = torch.arange(3.0, requires_grad=True)
    got = la.from_torch(x, cu_seqlens=[0, 3])
    assert address(got.data) == x.data_ptr()


def test_bad_arguments_are_named():
    t = make([[2, 1]])
    for kw, word in (({"layout": "ragged"}, "layout"), ({"cu_seqlens_dtype": "int16"},
                                                         "cu_seqlens_dtype"),
                     ({"maxlen": -1}, "maxlen"), ({"nulls": "drop"}, "nulls")):
        with pytest.raises(ValueError, match=word):
            la.to_torch(t, **kw)
    with pytest.raises(TypeError, match="obj"):
        la.to_torch([1, 2])
    with pytest.raises(TypeError, match="column"):
        la.to_torch(t, column="x")
    with pytest.raises(TypeError, match="layout="):
        la.to_torch(t, "padded")  # a LoDTensor's layout goes by keyword
    with pytest.raises(TypeError, match="a TorchVarlen carries"):
        la.from_torch(t.to_torch(), cu_seqlens=[0, 3])


# ------------------------------------------------------------------------------- tables
def test_table_column_to_varlen_without_python_lists():
    tab = table_with_tokens()
    v = la.to_torch(tab, "tokens", layout="varlen")  # the column second, as pandas' habit
    assert v.cu_seqlens.tolist() == [0, 2, 2, 5]
    assert v.values.dtype == torch.int32 and v.values.tolist() == [1, 2, 3, 4, 5]
    chunk = tab.column("tokens").chunk(0)
    assert v.values.data_ptr() == chunk.values.buffers()[1].address


@pytest.mark.parametrize("kind", ["table", "batch", "pandas", "polars"])
def test_every_table_kind(kind):
    tab = table_with_tokens()
    if kind == "batch":
        tab = tab.to_batches()[0]
    elif kind == "pandas":
        tab = tab.to_pandas(types_mapper=pd.ArrowDtype)
    elif kind == "polars":
        pl = pytest.importorskip("polars")
        tab = pl.from_arrow(tab)
    p = la.to_torch(tab, column="tokens", layout="padded")
    assert p.lengths.tolist() == [2, 0, 3]


def test_table_null_is_an_error_naming_the_column_and_row():
    tab = pa.table({"tokens": pa.array([[1], None, [2]], type=pa.list_(pa.int64()))})
    with pytest.raises(ValueError, match=r"column 'tokens'.*sequence 1"):
        la.to_torch(tab, column="tokens")
    v = la.to_torch(tab, column="tokens", nulls="empty")
    assert v.cu_seqlens.tolist() == [0, 1, 1, 2]


def test_table_missing_column_is_a_key_error():
    with pytest.raises(KeyError, match="nope"):
        la.to_torch(table_with_tokens(), column="nope")


# ------------------------------------------------------------------------------- property
@settings(max_examples=40)
@given(lod_tensors(min_levels=1, max_levels=3), st.data())
def test_hypothesis_varlen_and_padded_round_trips(t, data):
    lo = data.draw(st.integers(0, len(t)), label="lo")
    hi = data.draw(st.integers(lo, len(t)), label="hi")
    if data.draw(st.booleans(), label="slice"):
        t = t[lo:hi]  # a view whose data may start past row 0
    assert_same(la.from_torch(t.to_torch("varlen")), t)
    assert_same(la.from_torch(t.to_torch("padded")), t)
    if t.lod_level == 1 and len(t):
        assert_same(la.from_torch(t.to_torch("jagged")), t)


# ------------------------------------------------------------------------------- CUDA
@pytest.mark.parametrize("backend", [CUDA])
@pytest.mark.parametrize("layout", ["varlen", "jagged", "padded"])
def test_cuda_round_trip_stays_on_the_device(backend, layout):
    t = make([[2, 0, 3]], "float32", (3,)).cuda()
    out = t.to_torch(layout)
    values = out.values() if layout == "jagged" else out.values
    assert values.is_cuda
    if layout != "padded":
        assert values.data_ptr() == t.data.data.ptr
    back = la.from_torch(out)
    assert back.place.is_cuda
    assert_same(back.cpu(), t.cpu())
