"""Sphinx configuration of lodarrow's documentation site (``bash .ci/docs`` builds it).

The pages are the Markdown files of ``docs/`` (MyST); the API reference (``docs/api/``) is
autodoc + autosummary over the numpydoc docstrings of every public name, which this file
checks at build time: a name of ``lodarrow.__all__`` or ``lodarrow.torch.__all__`` that no
API page documents is a warning, so an error under ``-W``.

No network during the build: intersphinx is off unless ``LODARROW_DOCS_INTERSPHINX=1`` (it
fetches the inventories of Python, NumPy, pyarrow, pandas and torch), and the references to
those libraries' names are then left unresolved on purpose (``nitpick_ignore_regex``).
"""

import importlib.util
import os
import pathlib
import re

import lodarrow

HERE = pathlib.Path(__file__).resolve().parent

project = "lodarrow"
author = "lodarrow developers"
copyright = "lodarrow developers"
release = version = lodarrow.__version__

extensions = [
    "myst_parser",
    "numpydoc",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.intersphinx",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]
# docs/*.md are also read by tests/test_docs.py, which runs their examples; they are pages
# here as they are, GitHub-style heading anchors included (file.md#a-heading links resolve)
myst_heading_anchors = 4
myst_enable_extensions = ["colon_fence"]
suppress_warnings = ["myst.header"]  # the documents start at "#" and may skip a level

# the API reference: signatures from the functions themselves, docstrings through numpydoc
autosummary_generate = False  # the API pages list their names by hand (checked below)
autodoc_typehints = "none"  # the runtime functions carry no annotations; the .pyi stubs do
autodoc_member_order = "bysource"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False  # types are prose ("ndarray of shape (n, d)"), not targets

nitpicky = True
# other libraries' names: resolvable only through their intersphinx inventories (network)
nitpick_ignore_regex = [(r"py:.*", (r"(numpy|np|pyarrow|pa|pandas|pd|polars|pl|torch|jax|"
                                    r"tensorflow|tf|paddle|awkward|ak|cupy|ray|dask|pyspark|"
                                    r"datasets|fsspec)(\..*)?"))]
# private helpers that a public docstring names in passing (not part of the API)
nitpick_ignore = [("py:class", "lodarrow._training._resume.Position"),
                  ("py:class", "MixedParts"), ("py:func", "mixed_table")]
if os.environ.get("LODARROW_DOCS_INTERSPHINX") == "1":
    intersphinx_mapping = {
        "python": ("https://docs.python.org/3", None),
        "numpy": ("https://numpy.org/doc/stable", None),
        "pyarrow": ("https://arrow.apache.org/docs", None),
        "pandas": ("https://pandas.pydata.org/docs", None),
        "torch": ("https://pytorch.org/docs/stable", None),
    }
else:
    intersphinx_mapping = {}

html_theme = "pydata_sphinx_theme"
html_title = f"lodarrow {release}"
html_theme_options = {"navigation_with_keys": False, "show_toc_level": 2}
html_static_path = []


def _documented_names():
    """The full names the API pages document with ``.. autofunction::``, ``autoclass::``, ...
    (under the ``.. currentmodule::`` / ``.. module::`` in force)."""
    names = set()
    for page in (HERE / "api").glob("*.rst"):
        text = page.read_text()
        module = "lodarrow"
        for line in text.splitlines():
            m = re.match(r"\.\. (?:current)?module:: (\S+)", line)
            if m:
                module = m[1]
            m = re.match(r"\.\. auto(?:function|class|exception|data):: (\S+)", line)
            if m:
                names.add(f"{module}.{m[1]}" if "." not in m[1] else m[1])
    return names


def _check_api_reference(app):
    from sphinx.util import logging

    logger = logging.getLogger("lodarrow.docs")
    public = {f"lodarrow.{n}" for n in lodarrow.__all__}
    # lodarrow.torch needs torch itself (its annotations and custom operators are built at
    # import; a mocked torch cannot stand in): without it the reference is incomplete
    if importlib.util.find_spec("torch") is None:
        logger.warning("torch is not installed: lodarrow.torch cannot be documented "
                       "(.ci/docs installs the test extra's torch pin)")
    else:
        torch_api = importlib.import_module("lodarrow.torch")
        public |= {f"lodarrow.torch.{n}" for n in torch_api.__all__}
    documented = _documented_names()
    for name in sorted(public - documented):
        logger.warning(f"{name} is public but no page of docs/api/ documents it")
    for name in sorted(documented - public):
        if "._" not in name:  # the objects public functions return live in private modules
            logger.warning(f"docs/api/ documents {name}, which is not a public name")


def _resolve_short_names(app, env, node, contnode):
    """Resolve ``BatchLoader.state_dict``, ``TorchVarlen`` (as the docstrings write them) to
    the one documented object whose full name ends so; ambiguous or absent names stay
    unresolved (a nitpicky warning)."""
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"].lstrip("~.")
    domain = env.get_domain("py")
    found = {(obj.docname, obj.node_id): name for name, obj in domain.objects.items()
             if name.endswith("." + target) and not obj.aliased}
    if len(found) != 1:
        return None
    (docname, node_id), name = found.popitem()
    from sphinx.util.nodes import make_refnode

    return make_refnode(app.builder, node["refdoc"], docname, node_id, contnode, name)


def _link_benchmarks_page(app, docname, source):
    """The benchmark notes (benchmarks/README.md) are the page ``benchmarks`` here: the
    documents' links to the file point at the page in the site."""
    source[0] = source[0].replace("](../benchmarks/README.md", "](benchmarks.md")


def _unlink_scripts(app, relative_path, parent_docname, content):
    """benchmarks/README.md links its scripts (``loop_baseline.py``), which are no pages of
    the site: their names stay, as code."""
    if relative_path.name == "README.md":
        content[0] = re.sub(r"\[(`[^`]+`)\]\((?!https?:)[\w./-]+\.py\)", r"\1", content[0])


def setup(app):
    app.connect("source-read", _link_benchmarks_page)
    app.connect("include-read", _unlink_scripts)
    app.connect("builder-inited", _check_api_reference)
    app.connect("missing-reference", _resolve_short_names)
