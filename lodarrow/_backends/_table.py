"""A backend's kernel table, built from its launcher modules' ``ENTRIES``."""

__all__ = ["kernel_table", "check_twins"]


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
