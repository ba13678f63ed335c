"""The examples in ``docs/*.md`` run and print what the documents say they print.

Every fenced ```` ```pycon ```` block of a document is a doctest; the blocks of one document
share one namespace, in order, so a later block may use what an earlier one built.  Other
fences (``python``, ``bash``, GPU-only code) are not run.  A wrong example fails here with the
document's own line number.

A document's examples that import an optional library (torch in ``training.md``) skip where it
is not installed, and the documents themselves where the tests run outside the source tree.
"""

import doctest
import importlib.util
import pathlib
import re

import pytest
from conftest import checkout_root, needs_checkout

DOCS = (checkout_root() or pathlib.Path(__file__).resolve().parent.parent) / "docs"

#: ``>>> import a, b as c`` / ``>>> from a.b import c``: the modules an example imports.
_IMPORT = re.compile(r"^\s*>>> (?:import ((?:[\w.]+(?: as \w+)?(?:, )?)+)|from ([\w.]+) import)",
                     re.MULTILINE)

_FENCE = re.compile(r"^```pycon\n(.*?)^```", re.MULTILINE | re.DOTALL)

FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


class Checker(doctest.OutputChecker):
    """doctest's checker, reading ``lodarrow._errors.LoDError`` as ``lodarrow.LoDError``.

    The documents show the name users import; which private module defines the class is not
    part of what they promise.
    """

    def check_output(self, want, got, optionflags):
        got = got.replace("lodarrow._errors.", "lodarrow.")
        return super().check_output(want, got, optionflags)


def _documents():
    return sorted(p for p in DOCS.glob("*.md") if "```pycon" in p.read_text())


def _blocks(text):
    """(first line number, code) of every pycon block of ``text``; line numbers from 1."""
    for match in _FENCE.finditer(text):
        yield text.count("\n", 0, match.start(1)) + 1, match.group(1)


def _missing_libraries(text):
    """The top-level modules the examples of ``text`` import that are not installed."""
    names = set()
    for plain, source in _IMPORT.findall(text):
        modules = [source] if source else [m.split(" as ")[0] for m in plain.split(", ")]
        names.update(m.split(".")[0] for m in modules)
    return sorted(n for n in names if importlib.util.find_spec(n) is None)


@needs_checkout
def test_the_documents_have_examples():
    names = {p.name for p in _documents()}
    assert {"operators.md", "data-model.md"} <= names


@pytest.mark.parametrize("path", _documents(), ids=lambda p: p.name)
def test_document_examples(path, tmp_path, monkeypatch):
    text = path.read_text()
    missing = _missing_libraries(text)
    if missing:
        pytest.skip(f"{path.name}'s examples import {', '.join(missing)}, not installed")
    monkeypatch.chdir(tmp_path)  # examples that write files write them here
    parser = doctest.DocTestParser()
    runner = doctest.DocTestRunner(checker=Checker(), optionflags=FLAGS)
    globs = {}
    found = 0
    for first_line, code in _blocks(text):
        # lineno is 0-based in doctest's reports; example line numbers are relative to it.
        test = parser.get_doctest(code, globs, f"{path.name}:{first_line}", str(path),
                                  first_line - 1)
        found += len(test.examples)
        runner.run(test, clear_globs=False)
        globs = test.globs  # DocTest copies its globals: carry them to the next block
    assert found, f"{path.name} has pycon fences but no >>> examples"
    result = runner.summarize(verbose=False)
    assert result.failed == 0, (f"{result.failed} of {result.attempted} examples of "
                                f"{path.name} failed (see the output above)")


def anchors(path):
    """The anchors GitHub gives the headings of a markdown file (its slug rule)."""
    found = set()
    for line in path.read_text().splitlines():
        match = re.match(r"#{1,6} (.+)", line)
        if match:
            found.add(re.sub(r"[^\w\- ]", "", match.group(1).strip().lower()).replace(" ", "-"))
    return found


_LINK = re.compile(r"\]\(([\w./-]*?\.md)?#([\w-]+)\)")


@pytest.mark.parametrize("path", sorted(DOCS.glob("*.md")), ids=lambda p: p.name)
def test_document_links_point_at_headings(path):
    """Every ``[..](#anchor)`` / ``[..](other.md#anchor)`` link of a document resolves."""
    broken = []
    for target, anchor in _LINK.findall(path.read_text()):
        target_path = path.parent / target if target else path
        if not target_path.exists() or anchor not in anchors(target_path):
            broken.append(f"{target or path.name}#{anchor}")
    assert not broken, f"{path.name} links to missing anchors: {broken}"
