"""Build script for lodarrow's Cython extensions.

Every ``_ext/<name>.pyx`` is compiled into the extension module ``lodarrow._ext.<name>``; its C
helpers live in ``_ext/include/*.h``.
Cython directives are set once, here.  Environment variables:

``LODARROW_CYTHON_DEBUG=1``
    Turn bounds checking, wraparound and initialisation checks back on (the debug CI build).
``LODARROW_NO_OPENMP=1``
    Build without OpenMP even where the compiler has it.
``LODARROW_EXT=name[,name...]``
    Build only these modules (developer convenience for fast rebuilds).
"""

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
    if DEBUG and sys.platform != "win32":
        extra_compile = ["-O1", "-g"]
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
                extra_link_args=omp_link,
            )
        )
    return cythonize(
        exts,
        compiler_directives=COMPILER_DIRECTIVES,
        include_path=["_ext"],
        # Debug and release builds must not share generated C files.
        build_dir="build/cython-debug" if DEBUG else "build/cython",
    )


setup(
    ext_modules=extensions(),
    # Compile the extension modules in parallel (pip gives no -j of its own).
    options={"build_ext": {"parallel": os.cpu_count() or 1}},
)
