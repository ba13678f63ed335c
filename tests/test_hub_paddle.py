"""LoDTensor <-> PaddlePaddle (docs/interop.md#paddlepaddle): tests/hub_paddle_cases.py, run in a
process of its own, since Paddle and TensorFlow cannot be imported into the same process."""

import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent


@pytest.mark.skipif(importlib.util.find_spec("paddle") is None,
                    reason="PaddlePaddle is not installed")
def test_paddle_cases_in_their_own_process():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(HERE)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x",
         str(HERE / "hub_paddle_cases.py")],
        cwd=HERE.parent, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-3000:]
    assert " passed" in run.stdout.splitlines()[-1], run.stdout[-2000:]
