"""The conversion hub imports its target libraries lazily (docs/interop.md#surface): ``import
lodarrow`` imports none of them, and a missing one is an ImportError naming the extra."""

import sys

import numpy as np
import pytest
from conftest import run_python

import lodarrow as la

TARGETS = ["torch", "jax", "tensorflow", "awkward", "paddle"]


def test_import_lodarrow_imports_no_target_library():
    code = ("import sys, lodarrow; "
            f"loaded = [m for m in {TARGETS!r} if m in sys.modules]; "
            "assert not loaded, loaded")
    proc = run_python(["-c", code])
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("module, extra, call", [
    ("torch", "torch", lambda t: t.to_torch()),
    ("awkward", "awkward", lambda t: t.to_awkward()),
    ("jax", "jax", lambda t: t.to_jax()),
    ("tensorflow", "tf", lambda t: t.to_tf()),
    ("paddle", "paddle", lambda t: t.to_paddle()),
])
def test_a_missing_library_names_its_extra(monkeypatch, module, extra, call):
    monkeypatch.setitem(sys.modules, module, None)  # import raises ImportError
    t = la.LoDTensor(np.arange(3, dtype=np.float32), lengths=[[2, 1]])
    with pytest.raises(ImportError, match=rf"pip install -e '\.\[{extra}\]'"):
        call(t)
