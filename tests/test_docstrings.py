"""The public API's docstrings: their examples run, they follow numpydoc, they cite only files
users have.

- Every ``>>>`` example in a docstring of a ``lodarrow`` module runs and prints what it says
  (the same as ``pytest --doctest-modules lodarrow``, but inside the normal test command, with
  its warnings-as-errors setting).
- ``numpydoc.validate`` passes for every name in ``lodarrow.__all__``, except the checks in
  ``IGNORED`` (each with its reason).
- No source file of the package, and no user-facing document, cites the specification files
  the repository does not ship; every ``docs/<file>.md#anchor`` citation resolves.
"""

import doctest
import importlib
import importlib.util
import inspect
import pkgutil
import re

import pytest

import lodarrow
from conftest import checkout_root, needs_checkout
from test_docs import anchors

numpydoc_validate = pytest.importorskip("numpydoc.validate")

#: The source tree (None when the tests run against an installed package, outside one).
ROOT = checkout_root()
PACKAGE = ROOT / "lodarrow" if ROOT else None


# --- docstring examples -------------------------------------------------------------------

def _modules():
    names = ["lodarrow"] + [m.name for m in pkgutil.walk_packages(lodarrow.__path__,
                                                                   "lodarrow.")]
    if importlib.util.find_spec("torch") is None:  # lodarrow.torch needs the [torch] extra
        names = [n for n in names if n != "lodarrow.torch"
                 and not n.startswith("lodarrow.torch.")]
    return sorted(names)


def _doctests():
    finder = doctest.DocTestFinder(exclude_empty=True)
    seen = set()
    for name in _modules():
        module = importlib.import_module(name)
        for test in finder.find(module):
            if test.examples:
                seen.add(test.name.rsplit(".", 1)[-1])
                yield pytest.param(test, id=test.name)
    # Compiled (Cython) functions are not found by DocTestFinder: parse their docstrings.
    parser = doctest.DocTestParser()
    for name in lodarrow.__all__:
        doc = getattr(lodarrow, name).__doc__ or ""
        if name not in seen and ">>>" in doc:
            test = parser.get_doctest(doc, {}, f"lodarrow.{name}", None, 0)
            yield pytest.param(test, id=test.name)


@pytest.mark.parametrize("test", list(_doctests()))
def test_docstring_examples(test, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # examples that write files write them here
    runner = doctest.DocTestRunner(
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} example(s) of {test.name} failed (see above)"


def test_the_public_api_has_examples():
    """Every public function has at least one example (so the test above checks it)."""
    missing = [name for name in lodarrow.__all__
               if inspect.isfunction(getattr(lodarrow, name))
               and ">>>" not in (getattr(lodarrow, name).__doc__ or "")]
    assert not missing, f"public functions without an Examples section: {missing}"


# --- numpydoc -----------------------------------------------------------------------------

#: numpydoc checks that do not fit lodarrow, and why.
IGNORED = {
    "ES01": "an extended summary is optional: many functions say all in one line",
    "SA01": "a See Also section only where a reader wants a sibling next (sequence_pad: unpad)",
}

#: Cython strips the trailing newline of a compiled function's docstring, so GL02 (closing
#: quotes on their own line) cannot hold for these.
COMPILED = {"openmp_enabled"}

#: Exception and place classes are used, not called: the user-facing documents show them.
NO_EXAMPLES = {"BackendError", "LoDError", "CPUPlace", "CUDAPlace", "CUDAPinnedPlace"}


#: Classes that a function makes (not called by users): their constructor's parameters are
#: that function's business, documented there.
MADE_BY = {"BatchLoader": "batch_loader"}


@pytest.mark.parametrize("name", lodarrow.__all__)
def test_numpydoc(name):
    result = numpydoc_validate.validate(f"lodarrow.{name}")
    ignored = set(IGNORED) | ({"EX01"} if name in NO_EXAMPLES else set())
    ignored |= {"GL02"} if name in COMPILED else set()
    ignored |= {"PR01"} if name in MADE_BY else set()
    errors = [f"{code}: {message}" for code, message in result["errors"]
              if code not in ignored]
    assert not errors, f"lodarrow.{name}:\n" + "\n".join(errors)


#: lodarrow.torch's public names (the [torch] extra): validated as lodarrow's own.
TORCH_NAMES = (importlib.import_module("lodarrow.torch").__all__
               if importlib.util.find_spec("torch") is not None else [])


@pytest.mark.parametrize("name", TORCH_NAMES)
def test_numpydoc_torch(name):
    result = numpydoc_validate.validate(f"lodarrow.torch.{name}")
    errors = [f"{code}: {message}" for code, message in result["errors"]
              if code not in IGNORED]
    assert not errors, f"lodarrow.torch.{name}:\n" + "\n".join(errors)


# --- citations ----------------------------------------------------------------------------

#: Files users do not have: the specification behind the code.  Docstrings, comments and the
#: tests cite docs/operators.md, docs/data-model.md, docs/ARCHITECTURE.md instead.
_UNPUBLISHED = re.compile(r"OPS\.md|TABLES\.md|STYLE\.md|\bSPEC\b|SPEC\.md|\bseeds/")

_SOURCES = ("*.py", "*.pyx", "*.pxd", "*.pyi", "*.h", "*.cu")


def _source_files():
    for folder in (PACKAGE, ROOT / "_ext"):
        for pattern in _SOURCES:
            yield from folder.rglob(pattern)
    yield from (f for f in (ROOT / "tests").glob("*.py") if f.name != "test_docstrings.py")
    yield ROOT / "README.md"
    yield from (ROOT / "docs").glob("*.md")
    yield from (ROOT / "benchmarks").glob("*.md")


@needs_checkout
def test_no_citation_of_unpublished_files():
    hits = []
    for path in _source_files():
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            if _UNPUBLISHED.search(line):
                hits.append(f"{path.relative_to(ROOT)}:{lineno}: {line.strip()}")
    assert not hits, "cite docs/*.md instead of:\n" + "\n".join(hits)




_DOC_CITATION = re.compile(r"docs/([\w.-]+\.md)(?:#([\w-]+))?")


@needs_checkout
def test_doc_citations_resolve():
    """Every ``docs/<file>.md#anchor`` a source file cites exists."""
    broken = []
    for path in _source_files():
        if path.suffix == ".md":
            continue
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            for doc, anchor in _DOC_CITATION.findall(line):
                target = ROOT / "docs" / doc
                if not target.exists() or anchor and anchor not in anchors(target):
                    broken.append(f"{path.relative_to(ROOT)}:{lineno}: docs/{doc}#{anchor}")
    assert not broken, "citations of missing documents or anchors:\n" + "\n".join(broken)
