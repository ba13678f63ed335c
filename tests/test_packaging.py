"""What a distributor checks: the pyarrow floor is enforced at import and agrees with the
metadata, and the version is written once."""

import importlib.metadata
import re
import tomllib

import pytest
from conftest import checkout_root, run_python

import lodarrow
from lodarrow._versions import PYARROW_MIN


def _declared_requirements():
    """The runtime requirements: pyproject.toml's in a checkout, else the installed metadata."""
    root = checkout_root()
    if root is not None:
        with open(root / "pyproject.toml", "rb") as fh:
            return tomllib.load(fh)["project"]["dependencies"]
    return [r for r in importlib.metadata.requires("lodarrow") or [] if "extra ==" not in r]


def test_the_pyarrow_floor_checked_at_import_is_the_declared_one():
    floors = [re.fullmatch(r"pyarrow\s*>=\s*([\d.]+)", r) for r in _declared_requirements()]
    declared = [m.group(1) for m in floors if m]
    assert len(declared) == 1, _declared_requirements()
    assert tuple(([int(p) for p in declared[0].split(".")] + [0, 0])[:2]) == PYARROW_MIN


@pytest.mark.parametrize("version", ["25.0.1", "17.0.0", "16.0.0"])
def test_an_old_pyarrow_is_named_at_import(version):
    code = ("import sys, types\n"
            "fake = types.ModuleType('pyarrow')\n"
            f"fake.__version__ = {version!r}\n"
            "fake.__file__ = '/somewhere/pyarrow/__init__.py'\n"
            "sys.modules['pyarrow'] = fake\n"
            "import lodarrow\n")
    proc = run_python(["-c", code])
    assert proc.returncode != 0
    need = ".".join(map(str, PYARROW_MIN))
    assert (f"ImportError: lodarrow needs pyarrow >= {need}, found pyarrow {version} "
            f"(/somewhere/pyarrow/__init__.py); upgrade it: pip install 'pyarrow>={need}'"
            in proc.stderr), proc.stderr


def test_a_development_pyarrow_passes():
    code = ("import sys, types\n"
            "import pyarrow\n"
            "pyarrow.__version__ = '99.1.0.dev42'\n"
            "import lodarrow\n")
    proc = run_python(["-c", code])
    assert proc.returncode == 0, proc.stderr


def test_the_version_is_written_once():
    assert re.fullmatch(r"\d+\.\d+\.\d+(\.dev\d+|rc\d+)?", lodarrow.__version__)
    root = checkout_root()
    if root is not None:
        with open(root / "pyproject.toml", "rb") as fh:
            project = tomllib.load(fh)
        assert "version" not in project["project"]
        assert "version" in project["project"]["dynamic"]
        assert project["tool"]["setuptools"]["dynamic"]["version"] == {
            "attr": "lodarrow.__version__"}
    else:
        assert importlib.metadata.version("lodarrow") == lodarrow.__version__


def test_the_license_travels_with_the_package():
    root = checkout_root()
    if root is not None:
        text = (root / "LICENSE").read_text()
        with open(root / "pyproject.toml", "rb") as fh:
            project = tomllib.load(fh)["project"]
        assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]
    else:
        dist = importlib.metadata.distribution("lodarrow")
        assert dist.metadata["License-Expression"] == "Apache-2.0"
        files = [f for f in dist.files or [] if f.name == "LICENSE"]
        assert files, "no LICENSE in the installed distribution"
        text = files[0].read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text  # the whole text, not a pointer to it


# ---------------------------------------------------------------------------- the type stub
def _stub():
    import ast
    import pathlib

    path = pathlib.Path(lodarrow.__file__).with_suffix(".pyi")
    return ast.parse(path.read_text(), str(path))


def _stub_functions():
    import ast

    found = {}
    for node in _stub().body:
        if isinstance(node, ast.FunctionDef):
            found.setdefault(node.name, node)  # the first of overloads
    return found


def test_the_stub_types_every_public_name():
    import ast

    defined = set()
    for node in _stub().body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            defined.add(node.target.id)
    missing = sorted(set(lodarrow.__all__) - defined)
    assert not missing, f"lodarrow/__init__.pyi lacks {missing}"


@pytest.mark.parametrize("name", sorted(_stub_functions()))
def test_the_stub_signatures_are_the_functions(name):
    """Parameter names, kinds and which have defaults: as the function has them."""
    import inspect

    fn = getattr(lodarrow, name)
    try:
        runtime = inspect.signature(fn)
    except ValueError:  # a compiled function without a signature
        pytest.skip(f"{name} has no introspectable signature")
    args = _stub_functions()[name].args
    stub = [(a.arg, "positional", d) for a, d in zip(
        args.posonlyargs + args.args,
        [False] * (len(args.posonlyargs + args.args) - len(args.defaults))
        + [True] * len(args.defaults))]
    if args.vararg:
        stub.append((args.vararg.arg, "*", False))
    stub += [(a.arg, "keyword", d is not None) for a, d in zip(args.kwonlyargs, args.kw_defaults)]
    if args.kwarg:
        stub.append((args.kwarg.arg, "**", False))
    kinds = {inspect.Parameter.POSITIONAL_ONLY: "positional",
             inspect.Parameter.POSITIONAL_OR_KEYWORD: "positional",
             inspect.Parameter.VAR_POSITIONAL: "*", inspect.Parameter.KEYWORD_ONLY: "keyword",
             inspect.Parameter.VAR_KEYWORD: "**"}
    want = [(p.name, kinds[p.kind], p.default is not p.empty) for p in runtime.parameters.values()]
    assert stub == want
