"""The examples in ``README.md`` and ``docs/*.md`` run and print what the documents say.

Every fenced ```` ```pycon ```` block of a document is a doctest; the blocks of one document
share one namespace, in order, so a later block may use what an earlier one built.  A wrong
example fails here with the document's own line number.

Every ```` ```python ```` block runs too, the blocks of one document in order in one namespace
(their own, not the pycon blocks'), in a temporary working directory: an example is what a user
pastes, so it builds its own files and tables.  A block that is one function's signature
(``lod_append(x, level, name=None)``, as ``operators.md`` heads each operator) is compared
with lodarrow's function instead: the same parameters, kinds and defaults.  A block that
cannot run here (a GPU, a cloud bucket) carries the line ``<!-- not run: why -->`` just before
its fence (GitHub renders nothing for it: say why in the block too); keep those rare.  Other
fences (``bash``, plain) are not run.

An example that imports an optional library skips where it is not installed (a pycon
document as a whole, a python block by itself), and the documents themselves where the tests
run outside the source tree.  Documents whose python blocks start a local Ray, Dask cluster
or Spark are marked ``engines``; whatever Ray or Spark a document started is shut down after
it.
"""

import doctest
import importlib.util
import inspect
import pathlib
import re
import sys
import textwrap
import traceback

import pytest
from conftest import checkout_root, needs_checkout

ROOT = checkout_root() or pathlib.Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

#: ``import a, b as c`` / ``from a.b import c``, in python code or after ``>>>``: the modules
#: an example imports.
_IMPORT = re.compile(r"^\s*(?:>>> )?(?:import ((?:[\w.]+(?: as \w+)?(?:, )?)+)|from ([\w.]+) "
                     r"import)", re.MULTILINE)

_FENCE = re.compile(r"^```pycon\n(.*?)^```", re.MULTILINE | re.DOTALL)

#: A python fence (indented too, inside a list item), with the ``<!-- not run: why -->`` line
#: before it if there is one (a mark without a reason is no mark).
_PYTHON_FENCE = re.compile(r"^(?:[ \t]*<!-- not run: (\S[^\n]*?) -->\n)?([ \t]*)```python[ \t]*\n"
                           r"(.*?)^\2```[ \t]*$", re.MULTILINE | re.DOTALL)

#: A block that is one signature: ``name(parameters)``, maybe ``-> result``.
_SIGNATURE = re.compile(r"(\w+)\((.*?)\)(?:\s*->.*)?", re.DOTALL)

#: The modules whose examples start a local cluster (``engines`` marker); Dask's default
#: scheduler is threads in this process.
ENGINES = {"ray", "distributed", "pyspark"}

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


def _missing_libraries(code):
    """The top-level modules ``code`` (examples, pycon or python) imports that are not
    installed."""
    return sorted(n for n in _imported(code) if importlib.util.find_spec(n) is None)


def _imported(code):
    """The top-level modules ``code`` imports."""
    names = set()
    for plain, source in _IMPORT.findall(code):
        modules = [source] if source else [m.split(" as ")[0] for m in plain.split(", ")]
        names.update(m.split(".")[0] for m in modules)
    return names


@needs_checkout
def test_the_documents_have_examples():
    names = {p.name for p in _documents()}
    assert {"operators.md", "data-model.md"} <= names
    assert {"README.md", "operators.md", "interop.md"} <= {p.id for p in _code_documents()}


@pytest.mark.parametrize("path", _documents(), ids=lambda p: p.name)
def test_document_examples(path, tmp_path, monkeypatch):
    text = path.read_text()
    missing = _missing_libraries("".join(code for _, code in _blocks(text)))
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


def _code_documents():
    """README.md and the docs/*.md with python blocks, each marked ``engines`` where its
    examples start a local Ray, Dask cluster or Spark."""
    paths = [ROOT / "README.md"] if checkout_root() else []
    paths += sorted(DOCS.glob("*.md"))
    params = []
    for path in paths:
        blocks = [code for _, code, why in _python_blocks(path.read_text()) if why is None]
        if blocks:
            marks = [pytest.mark.engines] if _imported("".join(blocks)) & ENGINES else []
            params.append(pytest.param(path, id=path.name, marks=marks))
    return params


def _python_blocks(text):
    """(first line number, code, why it is not run or None) of every python block of
    ``text``; line numbers from 1, the code dedented."""
    for match in _PYTHON_FENCE.finditer(text):
        yield (text.count("\n", 0, match.start(3)) + 1, textwrap.dedent(match.group(3)),
               match.group(1))


def _documented_signature(code):
    """``(function, its parameters as documented)`` when ``code`` is the signature of one of
    lodarrow's functions (``name(parameters)``, maybe ``-> result``), else None."""
    import lodarrow

    match = _SIGNATURE.fullmatch(code.strip())
    if match is None or not callable(getattr(lodarrow, match[1], None)):
        return None
    documented = {}
    try:
        exec(f"def {match[1]}({match[2]}): pass", documented)
    except SyntaxError:  # a call, not parameters: a one-line example
        return None
    return getattr(lodarrow, match[1]), _parameters(inspect.signature(documented[match[1]]))


def _parameters(signature):
    """``signature`` without annotations, as a string: ``(x, maxlen=None, *, name=None)``."""
    return str(signature.replace(
        parameters=[p.replace(annotation=p.empty) for p in signature.parameters.values()],
        return_annotation=signature.empty))


def _engine_sessions():
    """(Ray is initialised, the active Spark session or None) in this process."""
    ray, spark = sys.modules.get("ray"), sys.modules.get("pyspark.sql")
    return (ray is not None and ray.is_initialized(),
            spark.SparkSession.getActiveSession() if spark is not None else None)


def _stop_engines_started_since(before):
    """Shut down the Ray and Spark sessions the examples started (the engine tests start
    their own, configured for the test session)."""
    ray_was, spark_was = before
    ray_is, spark_is = _engine_sessions()
    if ray_is and not ray_was:
        sys.modules["ray"].shutdown()
    if spark_is is not None and spark_is is not spark_was:
        spark_is.stop()


@pytest.mark.parametrize("path", _code_documents())
# Ray Data's own modules use deprecated Ray settings internally (as in test_engines.py), and
# Dask's Parquet reader calls reset_index(inplace=True), which pandas 3.1 deprecates
@pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.*")
@pytest.mark.filterwarnings("ignore:The inplace keyword")
def test_document_code(path, tmp_path, monkeypatch):
    """The python blocks of ``path`` run, in order, in one namespace."""
    text = path.read_text()
    monkeypatch.chdir(tmp_path)  # examples that write files write them here
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)  # Spark's workers: this interpreter
    namespace = {"__name__": "__main__"}
    failed, skipped = [], []
    before = _engine_sessions()
    try:
        for first_line, code, why_not in _python_blocks(text):
            where = f"{path.name}:{first_line}"
            if why_not is not None:
                continue
            signature = _documented_signature(code)
            if signature is not None:
                function, documented = signature
                actual = _parameters(inspect.signature(function))
                if documented != actual:
                    failed.append(f"{where}: documents {function.__name__}{documented}, "
                                  f"lodarrow has {function.__name__}{actual}")
                continue
            if skipped:  # the blocks share one namespace: a later one may need a skipped one's
                skipped.append(f"{where} (after a skipped block)")
                continue
            missing = _missing_libraries(code)
            if missing:
                skipped.append(f"{where} (imports {', '.join(missing)}, not installed)")
                continue
            try:  # the block's own line numbers in the traceback: blank lines before it
                exec(compile("\n" * (first_line - 1) + code, str(path), "exec"), namespace)
            except Exception as exc:  # the traceback from the document's line on
                missing = _not_installed(exc)
                if missing:  # lodarrow asked for an optional library that is not installed
                    skipped.append(f"{where} (needs {missing}, not installed)")
                    continue
                lines = traceback.format_exception(exc.__class__, exc, exc.__traceback__.tb_next)
                failed.append(f"{where}: the block failed:\n{''.join(lines)}")
    finally:
        _stop_engines_started_since(before)
    assert not failed, "\n".join(failed)
    if skipped:
        pytest.skip(f"{path.name}: the other blocks ran; skipped {'; '.join(skipped)}")


def _not_installed(exc):
    """The optional library an ``ImportError`` (lodarrow's ``import_optional``) names, when it
    is not installed; else None."""
    if not isinstance(exc, ImportError):
        return None
    name = (exc.name or "").partition(".")[0]
    try:
        return name if name and importlib.util.find_spec(name) is None else None
    except (ImportError, ValueError):  # a module set to None in sys.modules
        return name


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


@needs_checkout
def test_the_api_reference_lists_every_public_name():
    """docs/api/ documents every name of ``lodarrow.__all__`` (the site's build checks
    ``lodarrow.torch``'s too: docs/conf.py)."""
    documented = set()
    for page in (DOCS / "api").glob("*.rst"):
        module = "lodarrow"
        for line in page.read_text().splitlines():
            if match := re.match(r"\.\. (?:current)?module:: (\S+)", line):
                module = match[1]
            elif match := re.match(r"\.\. auto(?:function|class|exception):: (\w+)$", line):
                documented.add(f"{module}.{match[1]}")
    import lodarrow

    missing = sorted(n for n in lodarrow.__all__ if f"lodarrow.{n}" not in documented)
    assert not missing, f"public names no page of docs/api/ documents: {missing}"
