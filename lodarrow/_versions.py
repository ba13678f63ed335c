"""The dependency floor checked when lodarrow is imported (pip may not have enforced it:
``--no-deps``, a conda environment, a vendored copy); pyproject.toml declares the same."""

#: The oldest pyarrow lodarrow works with: older ones cannot read back the nested fixed-size
#: lists with null rows they wrote (25), refuse to write them (17-24), lack the Arrow C Device
#: interface (16).
PYARROW_MIN = (26, 0)


def check_pyarrow():
    """Raise ``ImportError`` naming the installed and the needed pyarrow if it is too old."""
    import pyarrow

    try:
        found = tuple(int(p) for p in pyarrow.__version__.split(".")[:2])
    except ValueError:  # not "MAJOR.MINOR...": a build of its own, taken as new enough
        return
    if found < PYARROW_MIN:
        need = ".".join(map(str, PYARROW_MIN))
        raise ImportError(f"lodarrow needs pyarrow >= {need}, found pyarrow "
                          f"{pyarrow.__version__} ({pyarrow.__file__}); upgrade it: "
                          f"pip install 'pyarrow>={need}'")


check_pyarrow()
