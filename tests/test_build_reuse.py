"""setup.py reuses an extension compiled into the checkout instead of compiling it again.

The README's two set-up commands are both ``pip install -e``; each builds in a fresh
temporary directory, so without the reuse every kernel was compiled twice.  The check runs
``setup.py build_ext`` on a copy of the build inputs with one small module (``lod_utils``).
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(not (ROOT / "setup.py").exists() or not (ROOT / "_ext").is_dir(),
                                reason="needs a source checkout")
# it runs setup.py itself, in this environment (not pip's isolated build environment)
pytest.importorskip("Cython", reason="builds the extensions: needs Cython (the test extra)")


def _build(tree, build_lib, **env):
    proc = subprocess.run(
        [sys.executable, "setup.py", "-q", "build_ext", "--build-lib", str(build_lib),
         "--inplace"],
        cwd=tree, capture_output=True, text=True,
        env=dict(os.environ, LODARROW_EXT="lod_utils", LODARROW_NO_OPENMP="1", **env))
    assert proc.returncode == 0, proc.stderr
    return proc.stderr


@pytest.fixture
def tree(tmp_path_factory):
    """A copy of the build inputs of its own for each test: a test's first build compiles
    whatever ran before it (a tree shared by the module was built already when the tests ran
    in another order)."""
    tree = tmp_path_factory.mktemp("src")
    shutil.copy2(ROOT / "setup.py", tree / "setup.py")
    shutil.copytree(ROOT / "_ext", tree / "_ext", ignore=shutil.ignore_patterns("*.c"))
    (tree / "lodarrow" / "_ext").mkdir(parents=True)
    return tree


def test_second_build_reuses_and_changes_rebuild(tree, tmp_path):
    first = _build(tree, tmp_path / "a")
    assert "reusing" not in first
    (so,) = (tree / "lodarrow" / "_ext").glob("lod_utils*.so")
    built = so.stat().st_mtime_ns
    second = _build(tree, tmp_path / "b")
    assert "reusing lodarrow/_ext/lod_utils" in second
    assert so.stat().st_mtime_ns == built  # not compiled again
    # Other settings (LODARROW_REBUILD here; debug or OpenMP flags likewise) compile again.
    third = _build(tree, tmp_path / "c", LODARROW_REBUILD="1")
    assert "reusing" not in third
    # An extension that is not the recorded one is never reused.
    so.write_bytes(so.read_bytes() + b"\0")
    assert "reusing" not in _build(tree, tmp_path / "d")


def test_changed_source_or_regenerated_c(tree, tmp_path):
    _build(tree, tmp_path / "a")
    # Cython regenerating the C file (pip's fresh build env) does not force a compile ...
    for c in (tree / "build").rglob("lod_utils.c"):
        c.touch()
    assert "reusing" in _build(tree, tmp_path / "b")
    # ... a changed source does.
    pyx = tree / "_ext" / "lod_utils.pyx"
    pyx.write_text(pyx.read_text() + "\n# changed\n")
    assert "reusing" not in _build(tree, tmp_path / "c")
