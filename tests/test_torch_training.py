"""A model trained end to end on lodarrow.torch, equal step by step to the
same model written in plain torch over padded batches; and SequenceConv itself."""

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pa = pytest.importorskip("pyarrow")

import lodarrow as la
import lodarrow.torch as lt

F64 = torch.float64
VOCAB, EMB, HIDDEN, CLASSES, CONTEXT = 30, 6, 5, 3, 3


class Packed(torch.nn.Module):
    """embedding -> SequenceConv -> sequence_pool -> linear, on packed batches."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, EMB, dtype=F64)
        self.conv = lt.SequenceConv(EMB, HIDDEN, CONTEXT, dtype=F64)
        self.out = torch.nn.Linear(HIDDEN, CLASSES, dtype=F64)

    def forward(self, ids, cu_seqlens):
        h, offsets = self.conv(self.embed(ids), cu_seqlens)
        return self.out(lt.sequence_pool(torch.tanh(h), offsets, "average"))


def padded_forward(params, ids, lengths):
    """The same model in plain torch over a padded batch: its own context convolution (taps
    gathered from a zero-padded, masked copy) and a masked mean."""
    embed, weight, bias, out_w, out_b = params
    width = ids.shape[1]
    mask = torch.arange(width)[None, :] < lengths[:, None]
    x = torch.nn.functional.embedding(ids, embed) * mask[..., None]
    start = -(CONTEXT // 2)
    up, down = -start, CONTEXT - 1 + start
    xp = torch.nn.functional.pad(x, (0, 0, up, down))
    taps = [xp[:, up + start + k: up + start + k + width] for k in range(CONTEXT)]
    h = torch.tanh(torch.cat(taps, dim=2) @ weight + bias) * mask[..., None]
    mean = h.sum(1) / lengths.clamp(min=1)[:, None].to(F64)
    return mean @ out_w.T + out_b


def _table(n=48, seed=0):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 9, n)
    lengths[3] = 0                      # an empty sequence, pooled to 0 (pad_value)
    label = rng.integers(0, CLASSES, n)
    ids = [(rng.integers(1, VOCAB // 2, k) + (VOCAB // 2) * (y == 2)).tolist()
           for y, k in zip(label, lengths)]
    return pa.table({"ids": ids, "label": label})


def test_training_equals_plain_torch_over_padded_batches():
    table = _table()
    common = {"batch_size": 8, "extra_columns": ["label"], "to": "torch", "seed": 3,
              "progress": False}
    packed = la.batch_loader(table, "ids", mode="packed", **common)
    padded = la.batch_loader(table, "ids", mode="padded", pad_value=0, **common)
    torch.manual_seed(0)
    model = Packed()
    params = [model.embed.weight, model.conv.weight, model.conv.bias, model.out.weight,
              model.out.bias]
    twin = [p.detach().clone().requires_grad_() for p in params]
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    opt_twin = torch.optim.SGD(twin, lr=0.5)
    steps = 0
    losses = []
    for epoch in range(2):
        packed.set_epoch(epoch)
        padded.set_epoch(epoch)
        for a, b in zip(packed, padded, strict=True):
            assert torch.equal(a["rows"], b["rows"])       # the same sequences, two layouts
            assert a["cu_seqlens"].dtype == torch.int32      # taken as it comes (a cast)
            loss = torch.nn.functional.cross_entropy(model(a["values"], a["cu_seqlens"]),
                                                     a["label"])
            loss_twin = torch.nn.functional.cross_entropy(
                padded_forward(twin, b["values"], b["lengths"]), b["label"])
            torch.testing.assert_close(loss, loss_twin, rtol=1e-10, atol=1e-10)
            for opt_, loss_ in ((opt, loss), (opt_twin, loss_twin)):
                opt_.zero_grad()
                loss_.backward()
            for p, q in zip(params, twin):
                torch.testing.assert_close(p.grad, q.grad, rtol=1e-10, atol=1e-10)
            opt.step()
            opt_twin.step()
            for p, q in zip(params, twin):
                torch.testing.assert_close(p, q, rtol=1e-10, atol=1e-10)
            losses.append(loss.item())
            steps += 1
    assert steps == 12
    assert np.mean(losses[-3:]) < np.mean(losses[:3])    # it learns


# ------------------------------------------------------------------ SequenceConv
def test_sequence_conv_is_initialised_as_conv1d():
    torch.manual_seed(1)
    conv = lt.SequenceConv(4, 7, 3, dtype=F64)
    torch.manual_seed(1)
    ref = torch.nn.Conv1d(4, 7, 3, padding=1, dtype=F64)
    torch.testing.assert_close(conv.weight, ref.weight.permute(2, 1, 0).reshape(12, 7))
    torch.testing.assert_close(conv.bias, ref.bias)
    bound = 1 / math.sqrt(3 * 4)
    assert conv.weight.abs().max() <= bound
    # and on one sequence it is that convolution (context_start = -padding)
    x = torch.randn(9, 4, dtype=F64)
    got, _ = conv(x, torch.tensor([0, 9]))
    want = ref(x.T[None])[0].T
    torch.testing.assert_close(got, want)


def test_sequence_conv_state_dict_round_trips():
    torch.manual_seed(0)
    a = lt.SequenceConv(3, 2, 4, context_start=-3, padding_trainable=True, bias=False)
    assert a.padding.shape == (3 + 0, 3) and a.bias is None
    with torch.no_grad():
        a.padding.normal_()
    b = lt.SequenceConv(3, 2, 4, context_start=-3, padding_trainable=True, bias=False)
    b.load_state_dict(a.state_dict())
    assert set(a.state_dict()) == {"weight", "padding"}
    x, off = torch.randn(7, 3), torch.tensor([0, 2, 2, 7])
    torch.testing.assert_close(a(x, off)[0], b(x, off)[0])
    assert "context_length=4, context_start=-3" in repr(a)


def test_sequence_conv_trains_its_padding():
    torch.manual_seed(0)
    conv = lt.SequenceConv(2, 3, 3, padding_trainable=True, dtype=F64)
    x = torch.randn(5, 2, dtype=F64)
    nt = torch.nested.nested_tensor_from_jagged(x, torch.tensor([0, 2, 5]))
    out = conv(nt)
    assert out.is_nested
    out.values().square().sum().backward()
    assert conv.padding.grad.abs().sum() > 0 and conv.weight.grad.shape == (6, 3)
    w, b = conv.weight.detach(), conv.bias.detach()
    assert torch.autograd.gradcheck(
        lambda p: lt.sequence_conv(x, torch.tensor([0, 2, 5]), w, padding_data=p, bias=b)[0],
        [conv.padding.detach().clone().normal_().requires_grad_()])


def test_sequence_conv_bad_arguments():
    with pytest.raises(ValueError, match="context_stride must be 1"):
        lt.SequenceConv(2, 3, 3, context_stride=2)
    with pytest.raises(ValueError, match="context_length must be >= 1"):
        lt.SequenceConv(2, 3, 0)
    with pytest.raises(TypeError, match="in_features"):
        lt.SequenceConv(2.5, 3, 3)
