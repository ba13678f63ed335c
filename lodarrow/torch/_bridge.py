"""torch tensors <-> the arrays lodarrow's kernels take, and the LoD forms of the public API.

Inside a custom operator's kernel (below autograd) a CPU tensor becomes a NumPy view
(``Tensor.numpy()``: no copy) and a CUDA tensor a CuPy array (DLPack: no copy) used on the
tensor's current stream; results come back the same ways.  Offsets are read on the host:
lodarrow plans on the LoD there (docs/ARCHITECTURE.md), so CUDA offsets are copied to the host
(O(sequences)) once per call.
"""

import contextlib
import re

import numpy as np
import torch

from lodarrow._cupy import get_cupy
from lodarrow._errors import LoDError
from lodarrow._tensor import LoDTensor, _freeze
from lodarrow._validation import lod_problem

#: The dtypes the differentiable operators take (gradients exist for these: docs/gradients.md).
FLOAT_DTYPES = (torch.float16, torch.float32, torch.float64)
#: The dtypes offsets may have (int32 is cast to int64, O(sequences); others are refused, not
#: cast, as awkward refuses them: a narrow dtype suggests offsets that overflowed).
OFFSET_DTYPES = (torch.int64, torch.int32)


# ------------------------------------------------------------------ inside the kernels
def array(t):
    """A plain (autograd-free) tensor as a NumPy (CPU) or CuPy (CUDA) array, sharing memory.

    The public functions hand contiguous tensors in; one that is not (a direct call of
    ``torch.ops.lodarrow.*``) is copied here once (``Tensor.contiguous()``).
    """
    # each step only where needed: these run on every call (``is_cuda`` is an attribute,
    # ``device.type`` builds a device object)
    if t.requires_grad:
        t = t.detach()
    if not t.is_contiguous():
        t = t.contiguous()
    if t.is_cuda:
        return get_cupy("a CUDA tensor in lodarrow.torch").from_dlpack(t)
    return t.numpy()


def host(t):
    """An integer tensor (offsets, lengths) as a host int64 NumPy array."""
    if t.requires_grad:
        t = t.detach()
    if not t.is_cpu:
        t = t.cpu()
    if t.dtype is not torch.int64:
        t = t.to(torch.int64)
    if not t.is_contiguous():
        t = t.contiguous()
    return t.numpy()


def host_array(t):
    """A small tensor (a pad value) as a host NumPy array (a copy off the CPU)."""
    if t.requires_grad:
        t = t.detach()
    if not t.is_cpu:
        t = t.cpu()
    return t.contiguous().numpy()


def tensor(arr, like):
    """A kernel's result array as a tensor on ``like``'s device, sharing its memory."""
    if like.is_cuda:
        return torch.from_dlpack(arr)
    if not arr.flags.writeable:  # a frozen LoD level: torch cannot mark tensors read-only
        arr = arr.copy()
    return torch.from_numpy(arr)


def offsets_tensor(level, like):
    """A host offsets level as a fresh int64 tensor on ``like``'s device."""
    out = torch.from_numpy(np.array(level, dtype=np.int64, copy=True))
    return out if like.device.type == "cpu" else out.to(like.device)


@contextlib.contextmanager
def stream_of(t):
    """Run CuPy work on ``t``'s device and torch's current stream there (CPU: nothing)."""
    if not t.is_cuda:
        yield
        return
    cupy = get_cupy("a CUDA tensor in lodarrow.torch")
    stream = torch.cuda.current_stream(t.device)
    with cupy.cuda.Device(t.device.index), cupy.cuda.ExternalStream(stream.cuda_stream):
        yield


def checked_lod(lod, n_rows, op, name):
    """Host offsets of every level, validated once (the checks and messages of a LoDTensor's
    LoD, naming ``op`` and the argument ``name``); raises ``LoDError``."""
    levels = [host(o) for o in lod]
    problem = lod_problem(levels, n_rows, name)
    if problem is not None:
        raise LoDError(f"{op}: {_torch_naming(problem, name, len(levels))}")
    return levels


def _torch_naming(problem, name, n_levels):
    """``lod_problem``'s message in this API's names: the levels are ``name[k]`` (a list of
    offsets tensors, outermost first), and one level is the tensor ``name`` itself."""
    if n_levels == 1:
        return problem.replace(f"{name}[0] (the last level)", name).replace(f"{name}[0]", name)
    return re.sub(r"but level (\d+) has", lambda m: f"but {name}[{m.group(1)}] has", problem)


def lod_tensor(values, levels):
    """A LoDTensor over ``values``' memory and already validated ``levels`` (no second scan)."""
    return LoDTensor._from_trusted(array(values), _freeze(levels))


# ------------------------------------------------------------------ the public forms
class Ragged:
    """One ragged argument of a public function: its values, its LoD levels (int64 tensors,
    outermost first) and the form it came in: ``"tensor"`` (values + one offsets tensor),
    ``"list"`` (values + a list of offsets tensors), ``"nested"`` (a jagged nested tensor) or
    ``"plain"`` (a dense tensor without LoD)."""

    __slots__ = ("form", "lod", "values")

    def __init__(self, values, lod, form):
        self.values, self.lod, self.form = values, lod, form

    def wrap(self, values, lod):
        """A ragged result in this argument's form: ``(values, offsets)`` (a list of them for
        the list form) or a nested tensor."""
        if self.form == "nested":
            return torch.nested.nested_tensor_from_jagged(values, lod[-1])
        if self.form == "list":
            return values, list(lod)
        return values, lod[-1]


def is_nested(obj):
    return isinstance(obj, torch.Tensor) and obj.is_nested


def is_offsets(obj):
    """Whether ``obj`` is given as offsets: a tensor, or a list / tuple of tensors."""
    if isinstance(obj, torch.Tensor):
        return not obj.is_nested
    return (isinstance(obj, (list, tuple)) and len(obj) > 0
            and all(isinstance(o, torch.Tensor) for o in obj))


def check_values(values, op, name, floating=True):
    """``values`` as a contiguous tensor (a documented copy otherwise), of a float dtype."""
    if not isinstance(values, torch.Tensor):
        raise TypeError(f"{op}: {name} must be a torch.Tensor, got {type(values).__name__}")
    if floating and values.dtype not in FLOAT_DTYPES:
        if values.dtype == torch.bfloat16:
            raise TypeError(f"{op}: {name} is bfloat16, which lodarrow's kernels do not take; "
                            f"cast it to float32 or float64 first ({name}.float())")
        if values.dtype.is_complex:
            raise TypeError(f"{op}: {name} is {values.dtype}; lodarrow.torch takes real "
                            f"floating-point tensors (float16, float32 or float64)")
        raise TypeError(f"{op}: {name} must be a floating-point tensor (float16, float32 or "
                        f"float64), got {values.dtype}; lodarrow.torch holds the differentiable "
                        f"operators (integer data: the lodarrow.{op} on NumPy arrays)")
    if values.device.type not in ("cpu", "cuda"):
        raise ValueError(f"{op}: {name} is on device {values.device}; lodarrow.torch runs on "
                         f"CPU and CUDA tensors")
    if values.ndim == 0:
        raise ValueError(f"{op}: {name} must have at least one dimension (rows), got a scalar")
    return values if values.is_contiguous() else values.contiguous()


def check_offsets(off, op, name, device):
    """One level of offsets: a 1-D integer tensor without grad on ``device`` (int64)."""
    if not isinstance(off, torch.Tensor) or off.is_nested:
        raise TypeError(f"{op}: {name} must be a 1-D integer tensor of offsets, got "
                        f"{type(off).__name__}")
    if off.requires_grad:
        raise TypeError(f"{op}: {name} requires grad; offsets are integer positions, not "
                        f"differentiable: pass an int64 tensor (offsets.detach())")
    if off.dtype not in OFFSET_DTYPES:
        raise TypeError(f"{op}: {name} must be an int64 or int32 tensor, got {off.dtype}"
                        + ("" if off.dtype.is_floating_point or off.dtype.is_complex
                           or off.dtype == torch.bool else
                           f"; cast it first ({name}.long())"))
    if off.ndim != 1:
        raise ValueError(f"{op}: {name} must be 1-D, got shape {tuple(off.shape)}")
    if off.device != device:
        raise ValueError(f"{op}: {name} is on {off.device} but the values are on {device}; "
                         f"move them to one device")
    if off.dtype != torch.int64:
        off = off.to(torch.int64)  # int32 offsets: a cast, O(sequences)
    return off if off.is_contiguous() else off.contiguous()


def ragged(input, offsets, op, name="input", offsets_name="offsets", required=True):
    """Parse a ragged argument: a jagged nested tensor, or values with ``offsets`` (a tensor
    or a list of tensors, outermost level first)."""
    if is_nested(input):
        if offsets is not None:
            raise TypeError(f"{op}: {name} is a nested tensor, which carries its offsets; "
                            f"pass no {offsets_name}")
        if input.layout != torch.jagged:
            raise TypeError(f"{op}: {name} is a nested tensor of layout {input.layout}; "
                            f"lodarrow.torch takes layout=torch.jagged "
                            f"(torch.nested.nested_tensor_from_jagged)")
        if input._ragged_idx != 1:
            raise ValueError(f"{op}: the ragged dimension of {name} is {input._ragged_idx}, "
                             f"not 1 (transposed); transpose it back first")
        if input.lengths() is not None:
            raise ValueError(f"{op}: {name} is a nested tensor with holes (offsets and "
                             f"lengths, from narrow()); make it contiguous first "
                             f"(nested_tensor_from_jagged over the kept rows)")
        values = check_values(input.values(), op, name)
        off = check_offsets(input.offsets(), op, f"{name}.offsets()", values.device)
        return Ragged(values, [off], "nested")
    values = check_values(input, op, name)
    if offsets is None:
        if required:
            raise TypeError(f"{op}: {offsets_name} is required with a dense {name} (or pass "
                            f"a jagged nested tensor)")
        return Ragged(values, [], "plain")
    if isinstance(offsets, torch.Tensor):
        return Ragged(values, [check_offsets(offsets, op, offsets_name, values.device)],
                      "tensor")
    if isinstance(offsets, (list, tuple)):
        if not offsets:
            raise ValueError(f"{op}: {offsets_name} is an empty list; give at least one level")
        return Ragged(values, [check_offsets(o, op, f"{offsets_name}[{k}]", values.device)
                               for k, o in enumerate(offsets)], "list")
    raise TypeError(f"{op}: {offsets_name} must be an int64 tensor or a list of them "
                    f"(outermost level first), got {type(offsets).__name__}")


def shifted(input, offsets, rest):
    """``(offsets, rest)`` with the positional arguments shifted when a nested ``input`` came
    without offsets: ``f(nt, "max")`` means ``f(nt, None, "max")``."""
    if is_nested(input) and offsets is not None and not is_offsets(offsets):
        return None, (offsets,) + rest
    return offsets, rest
