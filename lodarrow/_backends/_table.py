"""A backend's kernel table, built from its launcher modules' ``ENTRIES``."""

import importlib
import pkgutil

__all__ = ["launchers", "kernel_table", "check_twins"]


def launchers(package):
    """Every launcher module of ``package`` (``lodarrow._cpu`` or ``lodarrow._cuda``), by name.

    A launcher is a public module of the package (``<group>.py``); finding them here, not
    listing them, is what lets a new kernel group add its two launchers and touch no backend.
    """
    names = sorted(m.name for m in pkgutil.iter_modules(package.__path__)
                   if not m.name.startswith("_"))
    return [importlib.import_module(f"{package.__name__}.{name}") for name in names]


def kernel_table(*launchers):
    """``{kernel name: entry point}`` over the ``ENTRIES`` of ``launchers`` (modules).

    A name that two launchers define is an ``ImportError``: each kernel has one home.
    """
    table = {}
    for launcher in launchers:
        for name, entry in launcher.ENTRIES.items():
            if name in table:
                raise ImportError(f"lodarrow._backends: kernel {name!r} is defined by two "
                                  f"launchers (the second: {launcher.__name__})")
            table[name] = entry
    return table


def check_twins(cpu, cuda):
    """``ImportError`` unless the two kernel tables have the same names."""
    if cpu.keys() != cuda.keys():  # a kernel added to one backend only
        raise ImportError(f"lodarrow._backends: cpu and cuda kernels differ: "
                          f"{sorted(cpu.keys() ^ cuda.keys())}")
