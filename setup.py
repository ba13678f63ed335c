"""Build script for lodarrow's Cython extensions.

Every ``_ext/<name>.pyx`` is compiled into the extension module ``lodarrow._ext.<name>``; its C
helpers live in ``_ext/include/*.h``.
Cython directives are set once, here.  Environment variables:

``LODARROW_CYTHON_DEBUG=1``
    Turn bounds checking, wraparound and initialisation checks back on, and keep debug
    information (the debug CI build).  Release builds carry no debug information.
``LODARROW_NO_OPENMP=1``
    Build without OpenMP even where the compiler has it.
``LODARROW_EXT=name[,name...]``
    Build only these modules (developer convenience for fast rebuilds).
``LODARROW_REBUILD=1``
    Compile every extension even where an up-to-date one can be reused (see ``ReusingBuildExt``).
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from glob import glob
from pathlib import Path

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).parent.resolve()
DEBUG = os.environ.get("LODARROW_CYTHON_DEBUG", "") not in ("", "0")

COMPILER_DIRECTIVES = {
    "language_level": 3,
    "boundscheck": DEBUG,
    "wraparound": DEBUG,
    "initializedcheck": DEBUG,
    "nonecheck": DEBUG,
    "cdivision": True,
    "binding": True,
    "embedsignature": True,
}


def _openmp_flags():
    """Return (compile_args, link_args) for OpenMP, or empty lists if the compiler lacks it."""
    if os.environ.get("LODARROW_NO_OPENMP", "") not in ("", "0"):
        return [], []
    if sys.platform == "win32":
        return ["/openmp"], []
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    cc = cc.split()
    src = "#include <omp.h>\nint main(void) { return omp_get_max_threads() > 0 ? 0 : 1; }\n"
    with tempfile.TemporaryDirectory() as tmp:
        c_file = os.path.join(tmp, "check_openmp.c")
        with open(c_file, "w") as fh:
            fh.write(src)
        try:
            proc = subprocess.run(
                [*cc, "-fopenmp", c_file, "-o", os.path.join(tmp, "a.out")],
                capture_output=True,
            )
        except OSError:
            proc = None
    if proc is None or proc.returncode != 0:
        sys.stderr.write("warning: the C compiler has no OpenMP; lodarrow kernels will run serially\n")
        return [], []
    return ["-fopenmp"], ["-fopenmp"]


def extensions():
    omp_compile, omp_link = _openmp_flags()
    only = {s.strip() for s in os.environ.get("LODARROW_EXT", "").split(",") if s.strip()}
    extra_compile = ["-O3"] if sys.platform != "win32" else ["/O2"]
    extra_link = []
    if DEBUG and sys.platform != "win32":
        # -O0: the bounds checks are Cython's own code, whatever the optimisation; at -O1 the
        # debug build compiled 3.6x longer (seq_pool.c: 13.6 s against 3.8 s of CPU)
        extra_compile = ["-O0", "-g"]
    elif sys.platform != "win32":
        # release: no debug info (Python's own CFLAGS may carry -g; the last flag wins), which
        # is four fifths of an unstripped extension's size
        extra_compile.append("-g0")
        if sys.platform.startswith("linux"):
            extra_link.append("-Wl,--strip-debug")
    exts = []
    for pyx in sorted(glob("_ext/*.pyx")):
        name = Path(pyx).stem
        if only and name not in only:
            continue
        exts.append(
            Extension(
                f"lodarrow._ext.{name}",
                [pyx],
                include_dirs=[np.get_include(), "_ext/include"],
                define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
                extra_compile_args=extra_compile + omp_compile,
                extra_link_args=extra_link + omp_link,
            )
        )
    return cythonize(
        exts,
        compiler_directives=COMPILER_DIRECTIVES,
        include_path=["_ext"],
        # Debug and release builds must not share generated C files.
        build_dir="build/cython-debug" if DEBUG else "build/cython",
        nthreads=_cython_processes(),
    )


def _cython_processes():
    """Cython's own processes for the .pyx -> .c step, where they fork: a spawned one would
    run this setup.py again as its main module."""
    import multiprocessing

    return (os.cpu_count() or 1) if multiprocessing.get_context().get_start_method() == "fork" else 0


class ReusingBuildExt(build_ext):
    """``build_ext`` that reuses an extension already compiled into the checkout.

    Every ``pip install -e`` builds in a fresh temporary directory, so the README's two
    commands used to compile every kernel twice.  For an editable or in-place build, an
    extension module in ``lodarrow/_ext/`` is reused instead of compiled when this class built
    it (its hash is recorded in ``build/ext-stamps/``) with the same settings (compiler flags,
    debug/OpenMP, Python, NumPy) from the same inputs (the ``.pyx``/``.pxd``/``.h`` files,
    ``setup.py`` and the Cython version, compared by content).  ``LODARROW_REBUILD=1`` compiles anyway.
    """

    def run(self):
        # setuptools clears ``inplace`` while it builds (and copies into the checkout after).
        self._into_checkout = bool(self.inplace or getattr(self, "editable_mode", False))
        super().run()

    def build_extension(self, ext):
        if not getattr(self, "_into_checkout", False):
            return super().build_extension(ext)  # a regular install leaves the checkout alone
        target = Path(self.get_ext_fullpath(ext.name)).resolve()
        local = HERE / self.get_ext_filename(ext.name)  # where --inplace / -e put it
        stamp = HERE / "build" / "ext-stamps" / f"{ext.name}.json"
        signature = _signature(ext, self.compiler)
        if _reusable(local, stamp, signature, ext):
            if target != local:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(local, target)
            sys.stderr.write(f"reusing {local.relative_to(HERE)} (up to date)\n")
            return None
        super().build_extension(ext)
        if target != local:
            local.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(target, local)
        stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp.write_text(json.dumps({"signature": signature, "sha256": _digest(local),
                                     "inputs": _inputs_digest()}))
        return None


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _include_dir(path):
    """An include directory as it matters to the build: NumPy's by name (pip installs it in a
    fresh temporary build environment each time; its version is part of the signature)."""
    return "<numpy>" if os.path.realpath(path) == os.path.realpath(np.get_include()) else str(path)


def _signature(ext, compiler):
    """What decides the compiled code besides the sources."""
    parts = [sys.version, sys.platform, np.__version__, DEBUG, ext.extra_compile_args,
             ext.extra_link_args, ext.define_macros, [_include_dir(d) for d in ext.include_dirs],
             os.environ.get("CC"), os.environ.get("CFLAGS"), os.environ.get("LDFLAGS"),
             getattr(compiler, "compiler_so", None)]
    return hashlib.sha256(repr(parts).encode()).hexdigest()


def _inputs_digest():
    """A hash of what the extensions are compiled from (not the generated C, which Cython
    rewrites whenever a ``.pxd`` in pip's fresh build environment looks newer)."""
    import Cython

    h = hashlib.sha256(Cython.__version__.encode())
    for f in sorted({*glob("_ext/*.pyx"), *glob("_ext/*.pxd"), *glob("_ext/**/*.h", recursive=True),
                     "setup.py"}):
        h.update(f.encode() + b"\0" + (HERE / f).read_bytes())
    return h.hexdigest()


def _reusable(local, stamp, signature, ext):
    if os.environ.get("LODARROW_REBUILD", "") not in ("", "0") or not local.exists():
        return False
    try:
        record = json.loads(stamp.read_text())
    except (OSError, ValueError):
        return False
    return (record.get("signature") == signature and record.get("sha256") == _digest(local)
            and record.get("inputs") == _inputs_digest())


setup(
    ext_modules=extensions(),
    cmdclass={"build_ext": ReusingBuildExt},
    # Compile the extension modules in parallel (pip gives no -j of its own).
    options={"build_ext": {"parallel": os.cpu_count() or 1}},
)
