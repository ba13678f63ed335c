# The types of lodarrow.torch's public API (the functions' own docstrings say what each
# argument and result holds).  A ragged result comes back in its input's form: a jagged nested
# tensor, or ``(values, offsets)`` with one offsets tensor or a list of them, outermost first.
from collections.abc import Sequence
from typing import Any, TypeAlias

from torch import Tensor, dtype, nn
from torch.types import Device

__all__ = [
    "SequenceConv",
    "lod_append",
    "lod_reset",
    "sequence_concat",
    "sequence_conv",
    "sequence_expand",
    "sequence_expand_as",
    "sequence_first_step",
    "sequence_last_step",
    "sequence_pad",
    "sequence_pool",
    "sequence_reshape",
    "sequence_reverse",
    "sequence_scatter",
    "sequence_slice",
    "sequence_softmax",
    "sequence_topk_avg_pooling",
    "sequence_unpad",
]

#: The LoD: one int64 (or int32) offsets tensor, or one per level, outermost first.
_Offsets: TypeAlias = Tensor | Sequence[Tensor]
#: A ragged result: a nested tensor, or values with their offsets (one level or several).
_Ragged: TypeAlias = Tensor | tuple[Tensor, Tensor] | tuple[Tensor, list[Tensor]]
#: A pad value: a Python number (not a bool), or a tensor of shape (), (1,) or the feature
#: shape (one value per feature).
_Scalar: TypeAlias = float | int | Tensor

def sequence_pool(input: Tensor, offsets: _Offsets | str | None = None,
                  pool_type: str | None = None, is_test: bool = False,
                  pad_value: _Scalar = 0.0, return_index: bool = False,
                  name: str | None = None) -> Any: ...
def sequence_first_step(input: Tensor, offsets: _Offsets | None = None,
                        name: str | None = None) -> Any: ...
def sequence_last_step(input: Tensor, offsets: _Offsets | None = None,
                       name: str | None = None) -> Any: ...
def sequence_softmax(input: Tensor, offsets: _Offsets | None = None, use_cudnn: bool = False,
                     name: str | None = None) -> _Ragged: ...
def sequence_expand(x: Tensor, y: _Offsets, ref_level: int = -1, name: str | None = None, *,
                    x_offsets: _Offsets | None = None) -> _Ragged: ...
def sequence_expand_as(x: Tensor, y: _Offsets, name: str | None = None) -> _Ragged: ...
def sequence_pad(x: Tensor, offsets: _Offsets | _Scalar | None = None,
                 pad_value: _Scalar = 0.0, maxlen: int | None = None,
                 name: str | None = None) -> tuple[Tensor, Tensor]: ...
def sequence_unpad(x: Tensor, length: Tensor, name: str | None = None) -> _Ragged: ...
def sequence_concat(input: Sequence[Tensor],
                    offsets: Sequence[_Offsets] | None = None,
                    name: str | None = None) -> _Ragged: ...
def sequence_slice(input: Tensor, offsets: _Offsets | Tensor | None = None,
                   offset: Tensor | None = None, length: Tensor | None = None,
                   name: str | None = None) -> _Ragged: ...
def sequence_reverse(x: Tensor, offsets: _Offsets | None = None,
                     name: str | None = None) -> _Ragged: ...
def sequence_reshape(input: Tensor, offsets: _Offsets | int | None = None,
                     new_dim: int | None = None, name: str | None = None) -> _Ragged: ...
def lod_reset(x: Tensor, y: _Offsets | None = None, target_lod: Sequence[int] | None = None,
              name: str | None = None) -> _Ragged: ...
def lod_append(x: Tensor, level: Tensor | Sequence[int], name: str | None = None, *,
               x_offsets: _Offsets | None = None) -> _Ragged: ...
def sequence_scatter(input: Tensor, index: Tensor, updates: Tensor, name: str | None = None, *,
                     index_offsets: _Offsets | None = None) -> Tensor: ...
def sequence_conv(input: Tensor, offsets: _Offsets | Tensor | None = None,
                  filter: Tensor | None = None, context_start: int | None = None,
                  context_length: int | None = None, context_stride: int = 1,
                  padding_data: Tensor | None = None, bias: Tensor | None = None,
                  name: str | None = None) -> _Ragged: ...
def sequence_topk_avg_pooling(input: Tensor, offsets: _Offsets | Tensor | None = None,
                              row: _Offsets | None = None, col: _Offsets | None = None,
                              topks: Sequence[int] | None = None,
                              channel_num: int | None = None,
                              name: str | None = None) -> _Ragged: ...

class SequenceConv(nn.Module):
    in_features: int
    out_features: int
    context_length: int
    context_start: int
    context_stride: int
    weight: nn.Parameter
    bias: nn.Parameter | None
    padding: nn.Parameter | None
    def __init__(self, in_features: int, out_features: int, context_length: int,
                 context_start: int | None = None, context_stride: int = 1, bias: bool = True,
                 padding_trainable: bool = False, device: Device = None,
                 dtype: dtype | None = None) -> None: ...
    def reset_parameters(self) -> None: ...
    def forward(self, input: Tensor, offsets: _Offsets | None = None) -> _Ragged: ...
    def extra_repr(self) -> str: ...
