"""The CUDA sources (``lodarrow/_cuda/<group>.cu``) against their launchers.

Without a GPU these still check that every ``_ext/<group>.pyx`` has its ``.cu`` and launcher
module, that every kernel instantiation a launcher lists names a ``__global__`` kernel of its
``.cu`` with the right number of template arguments (and no kernel is left unlisted), and,
where ``nvcc`` is on PATH, that each ``.cu`` compiles with exactly those instantiations.  With
CuPy and a GPU, each module is compiled through ``cupy.RawModule`` as the launchers do.
"""

import importlib
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import cuda_unavailable_reason
from lodarrow import _cuda

ROOT = Path(__file__).resolve().parent.parent
CUDA_DIR = Path(_cuda.__file__).parent
GROUPS = sorted(p.stem for p in CUDA_DIR.glob("*.cu"))
# C++ kernels: optional template header, then "__global__ void name(".
_KERNEL = re.compile(r'(?:template\s*<([^>]*)>\s*)?(?:extern\s+"C"\s+)?__global__\s+void\s+'
                     r'(\w+)\s*\(')


def _kernels_of(source):
    """``{name: number of template parameters}`` of the ``__global__`` kernels in ``source``."""
    return {name: len(params.split(",")) if params else 0
            for params, name in _KERNEL.findall(source)}


def _template_args(expression):
    """``("name", n_args)`` of a name expression such as ``"k<float, double>"``."""
    name, _, args = expression.partition("<")
    return name, (len(args.rstrip(">").split(",")) if args else 0)


def _launcher(group):
    return importlib.import_module(f"lodarrow._cuda.{group}")


def test_every_kernel_group_has_its_cu_and_launcher():
    pyx = {p.stem for p in (ROOT / "_ext").glob("seq_*.pyx")}
    if not pyx:
        pytest.skip("no _ext sources next to the tests (installed package)")
    assert set(GROUPS) == pyx
    for group in GROUPS:
        assert (CUDA_DIR / f"{group}.py").is_file(), group


@pytest.mark.parametrize("group", GROUPS)
def test_listed_kernels_exist_in_source(group):
    defined = _kernels_of(_cuda.source(group))
    listed = _launcher(group).KERNELS
    assert listed, f"{group}.py lists no kernels"
    assert len(set(listed)) == len(listed), f"{group}.py lists a kernel twice"
    for expression in listed:
        name, n_args = _template_args(expression)
        assert name in defined, f"{expression} is not a __global__ kernel of {group}.cu"
        assert defined[name] == n_args, (f"{expression}: {group}.cu's {name} takes "
                                         f"{defined[name]} template arguments")
    unused = set(defined) - {_template_args(e)[0] for e in listed}
    assert not unused, f"{group}.cu defines kernels its launcher never loads: {sorted(unused)}"


@pytest.mark.parametrize("group", GROUPS)
def test_source_is_self_contained(group):
    # CuPy keys its kernel cache on the source text: a local header must be pasted in, never
    # left as an #include whose changes the cache would not see.
    assert not re.search(r'^\s*#\s*include\s*"', _cuda.source(group), re.M)


def _instantiation_unit(group):
    """The source of ``group`` plus host code taking every listed instantiation's address."""
    refs = ",\n    ".join(f"(const void*)&{e}" for e in _launcher(group).KERNELS)
    return f"{_cuda.source(group)}\nconst void* lodarrow_instances[] = {{\n    {refs}\n}};\n"


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
@pytest.mark.parametrize("group", GROUPS)
def test_source_compiles_with_nvcc(group, tmp_path):
    unit = tmp_path / f"{group}.cu"
    unit.write_text(_instantiation_unit(group))
    proc = subprocess.run(["nvcc", "-std=c++14", "-ptx", str(unit), "-o",
                           str(tmp_path / f"{group}.ptx")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.cuda
@pytest.mark.skipif(cuda_unavailable_reason() is not None,
                    reason=str(cuda_unavailable_reason()))
@pytest.mark.parametrize("group", GROUPS)
def test_raw_module_loads_every_kernel(group):
    listed = _launcher(group).KERNELS
    module = _cuda.module(group, listed)
    for expression in listed:
        assert module.get_function(expression) is not None
