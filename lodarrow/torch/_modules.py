"""``nn.Module``s for the operators that own parameters."""

import math

import torch
from torch import nn

from lodarrow._validation import as_int
from lodarrow.torch._functional import sequence_conv

__all__ = ["SequenceConv"]


class SequenceConv(nn.Module):
    """Paddle's ``sequence_conv`` layer: a context convolution within every sequence.

    Row ``t`` of a sequence sees rows ``t + context_start ... t + context_start +
    context_length - 1`` of its own sequence (zeros, or the trainable padding rows, outside
    it); the output row is that context ``@ weight (+ bias)``.  See
    :func:`lodarrow.torch.sequence_conv`.

    Parameters
    ----------
    in_features : int
        ``D``, the input's row width.
    out_features : int
        ``F``, the output's row width.
    context_length : int
        Rows per context (Paddle's ``filter_size``).
    context_start : int, optional
        The first context row relative to ``t``; default ``-(context_length // 2)`` (Paddle's
        ``padding_start``), centring the window.
    context_stride : int, default 1
        Must be 1 (as in Paddle).
    bias : bool, default True
        Learn a bias of ``out_features``.
    padding_trainable : bool, default False
        Learn the rows used outside the sequences (Paddle's ``PaddingData``:
        ``max(0, -context_start) + max(0, context_start + context_length - 1)`` rows),
        initialised to zeros (so it starts as the zero-padded convolution).
    device, dtype : optional
        Where and in which float dtype the parameters are created.

    Attributes
    ----------
    weight : torch.nn.Parameter
        ``(context_length * in_features, out_features)``, initialised as ``nn.Conv1d``'s
        weight: uniform in ``+-1 / sqrt(fan_in)`` with ``fan_in = context_length *
        in_features`` (``kaiming_uniform_`` with ``a = sqrt(5)``); the bias the same.
    bias : torch.nn.Parameter or None
        ``(out_features,)``.
    padding : torch.nn.Parameter or None
        ``(up + down, in_features)`` with ``padding_trainable``.

    Examples
    --------
    >>> import torch, lodarrow.torch as lt
    >>> conv = lt.SequenceConv(in_features=4, out_features=8, context_length=3)
    >>> values, offsets = conv(torch.randn(5, 4), torch.tensor([0, 2, 5]))
    >>> values.shape
    torch.Size([5, 8])
    """

    def __init__(self, in_features, out_features, context_length, context_start=None,
                 context_stride=1, bias=True, padding_trainable=False, device=None,
                 dtype=None):
        super().__init__()
        name = "SequenceConv"
        self.in_features = as_int(in_features, f"{name}: in_features")
        self.out_features = as_int(out_features, f"{name}: out_features")
        self.context_length = as_int(context_length, f"{name}: context_length")
        for arg, v in (("in_features", self.in_features), ("out_features", self.out_features),
                       ("context_length", self.context_length)):
            if v < 1:
                raise ValueError(f"{name}: {arg} must be >= 1, got {v}")
        self.context_start = (-(self.context_length // 2) if context_start is None
                              else as_int(context_start, f"{name}: context_start"))
        if as_int(context_stride, f"{name}: context_stride") != 1:
            raise ValueError(f"{name}: context_stride must be 1 (as in Paddle), got "
                             f"{context_stride}")
        self.context_stride = 1
        factory = {"device": device, "dtype": dtype}
        self.weight = nn.Parameter(torch.empty(self.context_length * self.in_features,
                                               self.out_features, **factory))
        self.bias = (nn.Parameter(torch.empty(self.out_features, **factory)) if bias
                     else None)
        if padding_trainable:
            up = max(0, -self.context_start)
            down = max(0, self.context_start + self.context_length - 1)
            self.padding = nn.Parameter(torch.empty(up + down, self.in_features, **factory))
        else:
            self.padding = None
        self.reset_parameters()

    def reset_parameters(self):
        """Initialise as ``nn.Conv1d(in_features, out_features, context_length)`` does.

        The same draws, in the same order: a ``(out_features, in_features,
        context_length)`` weight by ``kaiming_uniform_(a=sqrt(5))`` (``fan_in =
        context_length * in_features``), laid out as this layer's filter (row ``k *
        in_features + d`` is tap ``k`` of input feature ``d``), then the bias uniform in
        ``+-1 / sqrt(fan_in)``.  Under one seed, this layer and that ``nn.Conv1d`` hold the
        same numbers.
        """
        cl, d, f = self.context_length, self.in_features, self.out_features
        with torch.no_grad():
            w = torch.empty(f, d, cl, device=self.weight.device, dtype=self.weight.dtype)
            nn.init.kaiming_uniform_(w, a=math.sqrt(5))
            self.weight.copy_(w.permute(2, 1, 0).reshape(cl * d, f))
        if self.bias is not None:
            bound = 1.0 / math.sqrt(cl * d)
            nn.init.uniform_(self.bias, -bound, bound)
        if self.padding is not None:
            nn.init.zeros_(self.padding)

    def forward(self, input, offsets=None):
        """Convolve ``input`` (values with ``offsets``, or a jagged nested tensor).

        Parameters
        ----------
        input : torch.Tensor
            ``(N, in_features)`` values, or a jagged nested tensor.
        offsets : torch.Tensor or list of torch.Tensor, optional
            The LoD (required unless ``input`` is nested).

        Returns
        -------
        tuple or torch.Tensor
            ``(values (N, out_features), offsets)`` or a nested tensor, as ``input`` came.
        """
        return sequence_conv(input, offsets, self.weight, self.context_start,
                             self.context_length, 1, self.padding, self.bias)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"context_length={self.context_length}, context_start={self.context_start}, "
                f"bias={self.bias is not None}, padding_trainable={self.padding is not None}")
