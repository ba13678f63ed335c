"""The CUDA sources (``lodarrow/_cuda/<group>.cu``) against their launchers.

Without a GPU these still check that every ``_ext/<group>.pyx`` has its ``.cu`` and launcher
module, that every kernel instantiation a launcher lists names a ``__global__`` kernel of its
``.cu`` with the right number of template arguments (and no kernel is left unlisted), and,
where ``nvcc`` is on PATH, that each ``.cu`` compiles with exactly those instantiations; the
launchers also run with NumPy standing in for CuPy, so every kernel they would ask a GPU for
must be one they list.  With
CuPy and a GPU, each module is compiled through ``cupy.RawModule`` as the launchers do.
"""

import importlib
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
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
    # A group whose CUDA launcher lists no kernels (KERNELS == (): its entries raise
    # NotImplementedError naming the operator, as seq_grad's do) has no .cu yet.
    host_only = {g for g in pyx if g not in GROUPS and (CUDA_DIR / f"{g}.py").is_file()
                 and _launcher(g).KERNELS == ()}
    assert set(GROUPS) | host_only == pyx
    for group in pyx:
        assert (CUDA_DIR / f"{group}.py").is_file(), group


def test_a_group_without_gpu_kernels_raises_not_implemented():
    """``seq_grad``'s CUDA entries (no ``.cu`` yet) refuse with the operator's name, never
    falling back to the host."""
    launcher = _launcher("seq_grad")
    assert launcher.KERNELS == ()
    for name, entry in launcher.ENTRIES.items():
        import inspect
        args = [None] * len(inspect.signature(entry).parameters)
        with pytest.raises(NotImplementedError, match=r"^sequence_\w+: the backward has no "
                                                      r"GPU kernel yet"):
            entry(*args)


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
    proc = subprocess.run(["nvcc", "-std=c++17", "-arch=sm_90", "-ptx", str(unit), "-o",
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


@pytest.mark.parametrize("group", GROUPS)
def test_launcher_literals_name_listed_kernels(group):
    text = (CUDA_DIR / f"{group}.py").read_text()
    listed = {_template_args(e)[0] for e in _launcher(group).KERNELS}
    used = set(re.findall(r'"(lodarrow_\w+)', text))
    assert used and used <= listed, sorted(used - listed)


# ---- the launchers run with NumPy standing in for CuPy: every kernel they ask for is listed
class _HostArray(np.ndarray):
    """A NumPy array with CuPy's ``get()``."""

    def get(self):
        return np.asarray(self)


class _FakeCupy:
    """Enough of ``cupy`` for the launchers, on the host."""

    def __getattr__(self, name):
        return getattr(np, name)

    @staticmethod
    def zeros(*args, **kwargs):
        return np.zeros(*args, **kwargs).view(_HostArray)

    # Scratch the launchers cast (float32 -> float16) must hold no garbage that overflows.
    empty = zeros


class _FakeModule:
    """Records the kernels a launcher asks for; each launch does nothing."""

    def __init__(self, listed):
        self.listed = listed
        self.asked = []

    def get_function(self, name):
        assert name in self.listed, f"{name} is launched but not in KERNELS"
        self.asked.append(name)
        return lambda grid, block, args: None


@pytest.fixture
def fake_gpu(monkeypatch):
    """``{group: _FakeModule}``, with every launcher wired to NumPy and the fake modules."""
    fakes = {}
    for group in GROUPS:
        launcher = _launcher(group)
        fakes[group] = _FakeModule(launcher.KERNELS)
        monkeypatch.setattr(launcher, "module",
                            lambda g, names, _f=fakes[group]: _f, raising=False)
        for attr in ("cupy", "get_cupy"):
            if hasattr(launcher, attr):
                monkeypatch.setattr(launcher, attr, lambda *a: _FakeCupy())
    return fakes


_ALL = ["bool", "int8", "uint8", "int16", "uint16", "int32", "int64", "float16", "float32",
        "float64"]
_NUMERIC = _ALL[1:]
_OFF = np.array([0, 2, 2, 5], dtype=np.int64)


def test_pool_and_softmax_launch_listed_kernels(fake_gpu):
    from lodarrow._cuda import seq_pool, seq_softmax

    for dt in _ALL:
        for d in (1, 3):
            x = np.ones((5, d), dtype=dt)
            for pool in ("sum", "average", "sqrt", "max", "min", "first", "last"):
                if dt == "bool" and pool in ("sum", "average", "sqrt"):
                    continue
                out_dt = "float64" if pool in ("average", "sqrt") and dt[0] in "iu" else dt
                out = np.empty((3, d), dtype=out_dt)
                index = np.empty((3, d), np.int64) if pool in ("max", "min") else None
                seq_pool.pool(out, index, x, _OFF, np.zeros(d, out_dt), pool)
    for dt in _NUMERIC:
        out = np.empty(5, dtype="float64" if dt[0] in "iu" else dt)
        seq_softmax.softmax(out, np.ones(5, dtype=dt), _OFF)
    assert fake_gpu["seq_pool"].asked and fake_gpu["seq_softmax"].asked


def test_conv_topk_scatter_launch_listed_kernels(fake_gpu):
    from lodarrow._cuda import seq_conv, seq_scatter, seq_topk

    for compute in ("float32", "float64"):
        w = np.ones((6, 2), dtype=compute)
        seq_conv.conv(np.empty((5, 2), compute), np.ones((5, 2), "float16"), _OFF, w,
                      None, None, -1, 3, 1, 1 << 20)
    one = np.array([0, 1], dtype=np.int64)
    for dt in _NUMERIC:
        out = np.empty((1, 2), dtype=dt if dt[0] == "f" else "float64")
        seq_topk.topk_avg_pool(out, np.ones(2, dtype=dt), one, one, np.array([0, 2]),
                               np.array([1, 2]), 1)
    for dt in _NUMERIC:
        work = "float32" if dt == "float16" else dt
        seq_scatter.scatter(np.zeros((1, 3), work), np.array([0, 2]), np.ones(2, work),
                            np.array([0, 2]))
    for group in ("seq_conv", "seq_topk", "seq_scatter"):
        assert fake_gpu[group].asked, group


def test_layout_launches_listed_kernels(fake_gpu):
    from lodarrow._cuda import seq_layout

    for dt in _ALL:
        x = np.zeros((5, 2), dtype=dt)
        seq_layout.reverse(np.empty_like(x), x, _OFF)
        seq_layout.pad(np.empty((3, 4, 2), dt), x, np.zeros(2, dt), _OFF, 4)
        seq_layout.unpad(np.empty((5, 2), dt), np.zeros((3, 4, 2), dt), _OFF)
        seq_layout.enumerate_windows(np.empty((5, 2), dt), x[:, 0].copy(), np.zeros(1, dt),
                                     _OFF)
        cmp = "float32" if dt == "float16" else dt
        seq_layout.erase(np.zeros(5, cmp), np.zeros(1, cmp), _OFF)
        for lengths in ("int8", "uint8", "int16", "uint16", "int32", "int64", "float32",
                        "float64"):
            seq_layout.mask(np.empty(6, dt), np.array([1, 2], dtype=lengths), 3)
    assert fake_gpu["seq_layout"].asked
