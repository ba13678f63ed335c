"""Rough edges a new user hits: no hang, no unchecked structure, errors that say what to do."""

import traceback

import numpy as np
import pytest

import lodarrow as la
from lodarrow import LoDError


# ---------------------------------------------------------------- public exception names
def _formatted(exc):
    return "".join(traceback.format_exception_only(type(exc), exc))


@pytest.mark.parametrize("call, bases", [
    (lambda: la.LoDTensor(np.zeros(1), lengths=[[-1]]), (LoDError, TypeError)),
    (lambda: la.create_lod_tensor([[1, 2], [3]], [[1, 2]], la.CPUPlace()),
     (LoDError, AssertionError)),
])
def test_private_error_classes_show_public_names(call, bases):
    with pytest.raises(bases[0]) as info:
        call()
    exc = info.value
    assert all(isinstance(exc, b) for b in bases)  # either except clause still catches it
    shown = _formatted(exc)
    assert shown.startswith("lodarrow.LoDError: "), shown
    assert "_Negative" not in shown and "_Length" not in shown
    assert repr(exc).startswith("LoDError(")


def test_argument_error_shows_as_type_error():
    with pytest.raises(TypeError) as info:
        la.lod_reset(la.LoDTensor(np.zeros(2)))
    assert isinstance(info.value, ValueError)  # Paddle's Python layer raises ValueError
    assert _formatted(info.value).startswith("TypeError: lod_reset: y and target_lod")
