"""lodarrow.torch under torch.compile(fullgraph=True): no graph break, equal to eager.

Kept to two small compiled functions: compiling is slow on a few cores.
"""

import pytest

torch = pytest.importorskip("torch")

import lodarrow.torch as lt

F64 = torch.float64


def model(x, offsets, w, ids, cu_seqlens):
    """Several operators, one graph: conv, softmax, pool, expand_as, pad, unpad, expand."""
    h, _ = lt.sequence_conv(x, offsets, w)
    a, _ = lt.sequence_softmax(h[:, :1], offsets)
    pooled = lt.sequence_pool(h * a, offsets, "max")
    e, _ = lt.sequence_expand_as(pooled, offsets)
    padded, length = lt.sequence_pad(e - h, offsets)
    v, _ = lt.sequence_unpad(padded, length)
    r, _ = lt.sequence_expand(pooled, cu_seqlens)           # int32 offsets, cast
    return padded.square().sum() + pooled.sum() + v.sum() + r.sin().sum() + ids.sum()


# inductor's own import of torch.jit warns (torch's deprecation, not lodarrow's)
@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")
def test_compiled_model_equals_eager_forward_and_gradients():
    torch.manual_seed(0)
    x = torch.randn(6, 2, dtype=F64, requires_grad=True)
    w = torch.randn(6, 3, dtype=F64, requires_grad=True)
    offsets = torch.tensor([0, 2, 2, 5, 6])
    cu = torch.tensor([0, 1, 1, 4, 6], dtype=torch.int32)
    ids = torch.arange(3)
    compiled = torch.compile(model, fullgraph=True)
    got = compiled(x, offsets, w, ids, cu)
    gx, gw = torch.autograd.grad(got, (x, w))
    want = model(x, offsets, w, ids, cu)
    wx, ww = torch.autograd.grad(want, (x, w))
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(gx, wx, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(gw, ww, rtol=1e-12, atol=1e-12)


def test_compiled_layer_on_nested_and_two_level_input():
    torch.manual_seed(0)
    conv = lt.SequenceConv(2, 3, 3, dtype=F64)

    def f(values, outer, offsets):
        h, _ = conv(values, [outer, offsets])
        docs, _ = lt.sequence_pool(h, [outer, offsets], "average")   # pooled: keeps outer
        nt = lt.sequence_softmax(torch.nested.nested_tensor_from_jagged(h[:, 0], offsets))
        return (lt.sequence_pool(docs, outer, "sum").square().sum()
                + lt.sequence_pool(nt, "max").sum() + nt.values().square().sum())

    values = torch.randn(6, 2, dtype=F64, requires_grad=True)
    outer, offsets = torch.tensor([0, 1, 1, 4]), torch.tensor([0, 2, 2, 5, 6])
    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    got = compiled(values, outer, offsets)
    (g,) = torch.autograd.grad(got, values)
    want = f(values, outer, offsets)
    (h,) = torch.autograd.grad(want, values)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(g, h, rtol=1e-12, atol=1e-12)
