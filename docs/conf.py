"""Sphinx configuration of lodarrow's documentation site (``bash .ci/docs`` builds it).

The pages are the Markdown files of ``docs/`` (MyST); the API reference (``docs/api/``) is
autodoc + autosummary over the numpydoc docstrings of every public name, which this file
checks at build time: a name of ``lodarrow.__all__`` or ``lodarrow.torch.__all__`` that no
API page documents is a warning, so an error under ``-W``.

The pages link to the reference without markup: inline code that names a public name
(``la.batch_loader``, ``lt.sequence_pool(...)``, ``LoDTensor.to_arrow``) is a link to its entry
(:func:`_link_guide_literals`; :func:`_link_names` in the docstrings), and a plain
``docs/X.md#heading`` a link to that page (:func:`_link_guide_paths`, :func:`_link_documents`).

No network during the build: intersphinx is off unless ``LODARROW_DOCS_INTERSPHINX=1`` (it
fetches the inventories of Python, NumPy, pyarrow, pandas and torch), and the references to
those libraries' names are then left unresolved on purpose (``nitpick_ignore_regex``).
"""

import functools
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
# the parameter types are prose ("ndarray of shape (n, d)"): only the words below become links
# (xref_ignore "all": no other word is a target), lodarrow's own classes and other libraries'
numpydoc_xref_param_type = True
numpydoc_xref_ignore = "all"
# (lodarrow's own classes and exceptions are added below, from the API pages: _type_aliases)
numpydoc_xref_aliases = {
    "ndarray": "numpy.ndarray",
    "numpy.ndarray": "numpy.ndarray",
    "np.ndarray": "numpy.ndarray",
    "pa.Table": "pyarrow.Table",
    "pyarrow.Table": "pyarrow.Table",
    "pa.Array": "pyarrow.Array",
    "pyarrow.Array": "pyarrow.Array",
    "pa.ChunkedArray": "pyarrow.ChunkedArray",
    "pyarrow.ChunkedArray": "pyarrow.ChunkedArray",
    "pa.RecordBatch": "pyarrow.RecordBatch",
    "pyarrow.RecordBatch": "pyarrow.RecordBatch",
    "pa.DataType": "pyarrow.DataType",
    "pyarrow.DataType": "pyarrow.DataType",
}

# `name` in a docstring or an API page is a reference to that name (``la.`` as lodarrow.,
# ``lt.`` as lodarrow.torch.: see _resolve_short_names), not italic text
default_role = "py:obj"

nitpicky = True
# other libraries' names: resolvable only through their intersphinx inventories (network)
nitpick_ignore_regex = [(r"py:.*", (r"(numpy|np|pyarrow|pa|pandas|pd|polars|pl|torch|jax|"
                                    r"tensorflow|tf|paddle|awkward|ak|cupy|ray|dask|pyspark|"
                                    r"datasets|fsspec)(\..*)?"))]
# private helpers that a public docstring names in passing (not part of the API)
nitpick_ignore = [("py:class", "lodarrow._training._resume.Position"),
                  ("py:class", "MixedParts"), ("py:func", "mixed_table")]
_INTERSPHINX = os.environ.get("LODARROW_DOCS_INTERSPHINX") == "1"
if not _INTERSPHINX:
    # numpydoc links its default words (int, list, None, bool, array_like ...) into Python's and
    # NumPy's inventories: without them, those words stay plain text
    from numpydoc.xref import DEFAULT_LINKS

    numpydoc_xref_aliases = {**{k: k for k in DEFAULT_LINKS}, **numpydoc_xref_aliases}
if _INTERSPHINX:
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


def _documented_objects():
    """``{full name: "function" | "class" | "exception" | "data"}``: what the API pages
    document with ``.. autofunction::``, ``autoclass::``, ... (under the
    ``.. currentmodule::`` / ``.. module::`` in force)."""
    found = {}
    for page in sorted((HERE / "api").glob("*.rst")):
        text = page.read_text()
        module = "lodarrow"
        for line in text.splitlines():
            m = re.match(r"\.\. (?:current)?module:: (\S+)", line)
            if m:
                module = m[1]
            m = re.match(r"\.\. auto(function|class|exception|data):: (\S+)", line)
            if m:
                found[f"{module}.{m[2]}" if "." not in m[2] else m[2]] = m[1]
    return found


def _documented_names():
    """The full names the API pages document (:func:`_documented_objects`)."""
    return set(_documented_objects())


def _type_aliases():
    """The words of numpydoc's parameter, return and raises types that name a class or
    exception of the API pages (``BatchLoader``, ``LoDError``, ``lodarrow.LoDError``,
    ``la.LoDError``, ``SequenceConv``) -> its full name, so that they link to its entry."""
    out = {}
    for full, kind in _documented_objects().items():
        if kind in ("class", "exception"):
            short = full.rsplit(".", 1)[1]
            public = full.startswith("lodarrow.torch.") or "._" not in full
            out[short] = full
            if public:
                module = full.rsplit(".", 1)[0]
                out[full] = full
                out[("lt." if module == "lodarrow.torch" else "la.") + short] = full
    return out


numpydoc_xref_aliases = {**_type_aliases(), **numpydoc_xref_aliases}


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


#: How the docstrings abbreviate the modules (``import lodarrow as la``, ``lodarrow.torch as
#: lt``), longest first.
_PREFIXES = (("lt.", "lodarrow.torch."), ("la.", "lodarrow."))


def _resolve_short_names(app, env, node, contnode):
    """Resolve ``BatchLoader.state_dict``, ``TorchVarlen``, ``la.batch_loader`` (as the
    docstrings write them) to the one documented object whose full name is or ends so;
    ambiguous or absent names stay unresolved (a nitpicky warning)."""
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"].lstrip("~.")
    for short, full in _PREFIXES:  # la.batch_loader -> lodarrow.batch_loader
        if target.startswith(short):
            target = full + target[len(short):]
            break
    domain = env.get_domain("py")
    found = {(obj.docname, obj.node_id): name for name, obj in domain.objects.items()
             if (name == target or name.endswith("." + target)) and not obj.aliased}
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
    the site: their names stay, as code.  Its plain ``docs/X.md`` become links to the pages
    (:func:`_link_plain_docs`; ``../docs/``: the include's ``relative-docs``)."""
    if relative_path.name == "README.md":
        content[0] = re.sub(r"\[(`[^`]+`)\]\((?!https?:)[\w./-]+\.py\)", r"\1", content[0])
        content[0] = _link_plain_docs(content[0], "benchmarks/README.md",
                                      lambda page: None if page == "benchmarks"
                                      else f"../docs/{page}.md")


#: ``docs/tables.md#nulls``, ``benchmarks/README.md``, as the docstrings cite the documents
#: (plain, or as ````literal````): made links to the site's pages by :func:`_link_documents`.
_DOC_REF = re.compile(r"(``)?\b(docs/([\w-]+)|benchmarks/README)\.md(?:#([\w-]+))?(``)?")


def _anchors(path):
    """The GitHub-style anchors of a Markdown file's headings (MyST gives the site's sections
    the same ids: myst_heading_anchors), as tests/test_docs.py computes them."""
    return set(_titles(path)) - {None}


def _cited(page, anchor):
    """The Markdown file a docs/``page``.md#``anchor`` citation names (None for
    benchmarks/README.md), or None where the site has no such page or heading."""
    path = HERE / f"{page}.md" if page else HERE.parent / "benchmarks" / "README.md"
    if not path.exists() or (anchor and anchor not in _anchors(path)):
        return None
    return path


@functools.lru_cache(maxsize=None)
def _titles(path):
    """``{anchor: title}`` of a Markdown file's headings, fenced blocks skipped, and ``{None:
    the page's title}`` (its first heading): the titles as plain text, inline code, links and
    emphasis reduced to their words, for the text of a link."""
    found, fence = {}, None
    for line in path.read_text().splitlines():
        marker = re.match(r"\s*(`{3,}|~{3,})", line)
        if marker and fence is None:
            fence = marker[1]
            continue
        if marker and marker[1][0] == fence[0] and len(marker[1]) >= len(fence):
            fence = None
            continue
        m = None if fence else re.match(r"#{1,6} (.+)", line)
        if m:
            title = m[1].strip()
            anchor = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
            text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title)  # a link: its text
            text = re.sub(r"[`*]", "", text).replace("<", r"\<")
            found.setdefault(anchor, text)
            found.setdefault(None, text)
    return found


def _link_documents(app, what, name, obj, options, lines):
    """Turn the docstrings' ``docs/X.md#anchor`` into links to page X of the site, titled
    as the heading they point at (the page's title without an anchor); a reference to a
    missing page or heading is a warning (an error under -W).  Example lines (``>>>``) and
    literal blocks are left as they are."""
    import posixpath

    from sphinx.util import logging

    logger = logging.getLogger("lodarrow.docs")
    here = posixpath.dirname(app.env.docname)
    for i in _prose_lines(lines):
        line = lines[i]
        if "docs/" not in line and "benchmarks/" not in line:
            continue

        def link(m):
            page = m[3] or "benchmarks"
            path = _cited(m[3], m[4])
            if path is None:
                logger.warning(f"{name}'s docstring cites {m[0].strip('`')}, which the site "
                               f"has no page or heading for")
                return m[0]
            uri = posixpath.relpath(page, here or ".") + ".html" + (f"#{m[4]}" if m[4] else "")
            text = _titles(path).get(m[4]) or m[0].strip("`")
            return f"`{text} <{uri}>`__"

        lines[i] = _DOC_REF.sub(link, line)


#: ````la.batch_loader````, ````lodarrow.LoDError````, ````sequence_pad()````,
#: ````BatchLoader.torch()````: a name in a docstring's literal, made a link by
#: :func:`_link_names` where it is a documented object.
_NAME_LITERAL = re.compile(r"``((?:lodarrow\.torch\.|lodarrow\.|la\.|lt\.)?"
                           r"([A-Za-z_]\w*)((?:\.[A-Za-z_]\w*)*))(\(\))?``")


def _link_names(app, what, name, obj, options, lines):
    """Turn the docstrings' literals that name a documented object (````la.batch_loader````,
    ````lodarrow.LoDError````, ````sequence_pad````, ````BatchLoader.torch()````) into links
    to its entry, the text kept.  A bare name that is a parameter of the object documented
    (``udf`` of ``map_parquet``) stays a literal, as do the examples and literal blocks; in
    lodarrow.torch's docstrings a bare name is lodarrow.torch's."""
    import inspect

    documented = _documented_objects()
    short = {full.rsplit(".", 1)[1]: full for full in documented if "._" in full}
    try:
        params = set(inspect.signature(obj).parameters) if callable(obj) else set()
    except (TypeError, ValueError):
        params = set()
    here = "lodarrow.torch." if name.startswith("lodarrow.torch.") else "lodarrow."

    def target(m):
        text, head, rest = m[1], m[2], m[3]
        prefix = text[:len(text) - len(head) - len(rest)]
        if prefix:
            full = dict(_PREFIXES).get(prefix, prefix) + head
        elif head in params or f"{name}.{head}" == name:
            return None
        else:
            full = next((c for c in (here + head, "lodarrow." + head) if c in documented),
                        short.get(head))
        if full not in documented or full == name:
            return None
        if rest and not _documented_member(full, rest):
            return None
        return full + rest

    def link(m):
        full = target(m)
        if full is None:
            return m[0]
        return f":py:obj:`{m[1]}{m[4] or ''} <{full}>`"

    for i in _prose_lines(lines):
        if "``" in lines[i]:
            lines[i] = _NAME_LITERAL.sub(link, lines[i])


def _documented_member(full, rest):
    """Whether ``rest`` (``.torch``) names a public attribute of the object ``full`` with a
    docstring of its own: one its ``:members:`` entry documents."""
    import importlib
    import inspect

    module, _, attr = full.rpartition(".")
    obj = getattr(importlib.import_module(module), attr, None)
    for part in rest.strip(".").split("."):
        if part.startswith("_") or obj is None:
            return False
        obj = inspect.getattr_static(obj, part, None)
    return obj is not None and bool(getattr(obj, "__doc__", None))


def _prose_lines(lines):
    """The indices of ``lines`` (a docstring, as autodoc hands it) that are prose: not
    examples (``>>>``, ``...``) nor literal blocks (after a ``::``)."""
    literal_indent = None
    for i, line in enumerate(lines):
        stripped = line.lstrip()
        indent = len(line) - len(stripped)
        if literal_indent is not None:
            if stripped and indent <= literal_indent:
                literal_indent = None
            else:
                continue
        if stripped.startswith((">>>", "...")):
            continue
        yield i
        if stripped.endswith("::") and not stripped.startswith(".."):
            literal_indent = indent


#: Public classes that a function makes (``la.batch_loader`` returns a ``BatchLoader``), not
#: made by calling the class: documented without a constructor signature, as those of
#: private modules.
_MADE_BY_FUNCTIONS = {"lodarrow.BatchLoader"}


def _hide_private_signatures(app, what, name, obj, options, signature, return_annotation):
    """The classes public functions return live in private modules (or in
    ``_MADE_BY_FUNCTIONS``) and are made by those functions, not by hand: no constructor
    signature for them."""
    if what == "class" and ("._" in name or name in _MADE_BY_FUNCTIONS):
        return "", return_annotation
    return None


def _clean_private_names(app, domain, objtype, contentnode):
    """``lodarrow._training.BatchPlan`` shows as ``BatchPlan``: the private module path is
    no name a user imports."""
    from sphinx import addnodes

    for sig in contentnode.parent.findall(addnodes.desc_signature):
        if "._" in (sig.get("module") or ""):
            for addname in list(sig.findall(addnodes.desc_addname)):
                addname.parent.remove(addname)


#: An inline literal of a guide that is a name and nothing else, maybe called:
#: ``la.batch_loader``, ``lodarrow.torch.sequence_pool``, ``lt.sequence_pool(x, offsets, "sum")``,
#: ``LoDTensor.to_arrow()``, ``BatchLoader.state_dict``.
_GUIDE_NAME = re.compile(r"(?P<prefix>lodarrow\.torch\.|lodarrow\.|la\.|lt\.)?"
                         r"(?P<name>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)(?P<call>\(.*\))?", re.DOTALL)


def _one_call(text):
    """Whether ``text`` (``(...)``) is one parenthesised group: ``(x).y()`` is not."""
    depth = 0
    for i, ch in enumerate(text):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0:
            return i == len(text) - 1
    return False


def _guide_target(text, domain):
    """``(docname, node_id, full name)`` of the documented object an inline literal of a guide
    names, or None.  A literal names one when it is nothing but a name, maybe followed by one
    call: a name of ``lodarrow`` or ``lodarrow.torch`` spelled in full or as the guides
    abbreviate them (``la.``, ``lt.``), or, unprefixed, a documented class and its members
    (``LoDTensor.to_arrow``, ``BatchLoader.state_dict``).  Anything else stays code: an
    expression (``la.col("x").name``), a bare function name (``batch_loader``: lodarrow's or
    lodarrow.torch's, by context), a name no API page documents."""
    m = _GUIDE_NAME.fullmatch(text.strip())
    if m is None or (m["call"] and not _one_call(m["call"])):
        return None
    name = m["name"]
    if m["prefix"]:
        target = dict(_PREFIXES).get(m["prefix"], m["prefix"]) + name
        if target in domain.modules:  # ``lodarrow.torch``
            module = domain.modules[target]
            return module.docname, module.node_id, target
        found = [(n, o) for n, o in domain.objects.items() if n == target and not o.aliased]
    elif name[0].isupper():  # a class of the API pages, or its member
        head = name.split(".", 1)[0]
        found = [(n, o) for n, o in domain.objects.items()
                 if (n == name or n.endswith("." + name)) and not o.aliased]
        classes = {n.rsplit(".", 1)[1] for n, o in domain.objects.items()
                   if o.objtype in ("class", "exception")}
        if head not in classes:
            return None
    else:
        return None
    if len(found) != 1:
        return None
    full, obj = found[0]
    return obj.docname, obj.node_id, full


def _link_guide_literals(app, doctree, docname):
    """The guides' (docs/*.md) inline literals that name a documented object
    (:func:`_guide_target`: ``la.batch_loader``, ``lt.sequence_pool(...)``,
    ``LoDTensor.to_arrow``) become links to its entry in the API reference, as code still;
    literals inside a link or a heading, and every other literal, are left as they are."""
    if not str(app.env.doc2path(docname)).endswith(".md"):
        return
    from docutils import nodes
    from sphinx import addnodes
    from sphinx.util.nodes import make_refnode

    domain = app.env.get_domain("py")
    for literal in list(doctree.findall(nodes.literal)):
        if any(isinstance(a, (nodes.reference, addnodes.pending_xref, nodes.title))
               for a in _ancestors(literal)):
            continue
        found = _guide_target(literal.astext(), domain)
        if found is None:
            continue
        todoc, node_id, full = found
        literal["classes"] += ["xref", "py", "py-obj"]
        literal.replace_self(make_refnode(app.builder, docname, todoc, node_id,
                                          literal.deepcopy(), full))


def _ancestors(node):
    node = node.parent
    while node is not None:
        yield node
        node = node.parent


#: A plain mention of a document (``docs/tables.md#nulls``, ``benchmarks/README.md``) in a
#: page's prose, not in a link: made a link by :func:`_link_guide_paths`.
_PLAIN_DOC = re.compile(r"(?<!\]\()(?<![\w/.\[`-])(docs/([\w-]+)|benchmarks/README)\.md"
                        r"(?:#([\w-]+))?(?![\w\]`])")

#: What is no prose in Markdown text: inline code (a line break inside it too) and comments.
_NOT_PROSE = re.compile(r"(`+)[\s\S]*?\1|<!--[\s\S]*?-->")


def _link_guide_paths(app, docname, source):
    """The guides write other documents' places as links (``[the footer](tables.md#where-the-
    lengths-live)``); a plain ``docs/X.md#anchor`` left in their prose (the blocks the
    benchmarks write are not edited by hand) becomes such a link here.  Fenced blocks, inline
    code, HTML comments and links are left alone; a page or heading that does not exist is a
    warning."""
    if str(app.env.doc2path(docname)).endswith(".md"):
        import posixpath

        here = posixpath.dirname(docname) or "."
        source[0] = _link_plain_docs(source[0], docname,
                                     lambda page: posixpath.relpath(page, here) + ".md")


def _link_plain_docs(text, where, uri):
    """``text`` (Markdown) with the plain document paths of its prose made links:
    ``uri(page)`` is the link to page ``page`` (``tables``) from where ``text`` is read (None:
    no link)."""
    from sphinx.util import logging

    logger = logging.getLogger("lodarrow.docs")

    def link(m):
        page = m[2] or "benchmarks"
        if _cited(m[2], m[3]) is None:
            logger.warning(f"{where} cites {m[0]}, which the site has no page or heading for")
            return m[0]
        target = uri(page)
        return m[0] if target is None else f"[{m[0]}]({target}{'#' + m[3] if m[3] else ''})"

    def prose(chunk):
        out, last = [], 0
        for m in _NOT_PROSE.finditer(chunk):
            out += [_PLAIN_DOC.sub(link, chunk[last:m.start()]), m[0]]
            last = m.end()
        return "".join(out + [_PLAIN_DOC.sub(link, chunk[last:])])

    # fenced blocks are left alone; the text between them is prose (with inline code)
    out, chunk, fence = [], [], None
    for line in text.split("\n"):
        marker = re.match(r"\s*(`{3,}|~{3,})", line)
        if fence is None and marker:
            if chunk:
                out.append(prose("\n".join(chunk)))
            chunk, fence = [], marker[1]
            out.append(line)
        elif fence is not None:
            out.append(line)
            if line.strip().startswith(fence):
                fence = None
        else:
            chunk.append(line)
    if chunk:
        out.append(prose("\n".join(chunk)))
    return "\n".join(out)


#: The API pages, in the order of docs/api/index.rst's toctree.
_API_PAGES = ("tensor", "operators", "tables", "training", "interop", "gradients")


def _index_every_name(app, docname, source):
    """docs/api/index.rst gets one table per page of every name the page lists in its
    autosummary tables (so every name is a link from the index, searchable by name)."""
    if docname != "api/index":
        return
    out = ["", "Every name", "----------", ""]
    for page in _API_PAGES:
        text = (HERE / "api" / f"{page}.rst").read_text().splitlines()
        title = text[0].strip()
        module, names, in_table = "lodarrow", [], False
        for line in text:
            m = re.match(r"\.\. (?:current)?module:: (\S+)", line)
            if m:
                module = m[1]
            if line.startswith(".. autosummary::"):
                in_table = True
                continue
            if in_table:
                if line.startswith("   ") and not line.strip().startswith(":"):
                    names.append(f"~{module}.{line.strip()}" if module == "lodarrow"
                                 else f"{module}.{line.strip()}")
                elif line.strip() and not line.startswith("   "):
                    in_table = False
        out += [f".. rubric:: :doc:`{title} <{page}>`", "", ".. autosummary::", ""]
        out += [f"   {n}" for n in names] + [""]
    source[0] += "\n".join(out)


def setup(app):
    app.connect("source-read", _index_every_name)
    app.connect("autodoc-process-docstring", _link_documents)
    app.connect("autodoc-process-docstring", _link_names)
    app.connect("autodoc-process-signature", _hide_private_signatures)
    app.connect("object-description-transform", _clean_private_names)
    app.connect("source-read", _link_benchmarks_page)
    app.connect("source-read", _link_guide_paths)
    app.connect("doctree-resolved", _link_guide_literals)
    app.connect("include-read", _unlink_scripts)
    app.connect("builder-inited", _check_api_reference)
    app.connect("missing-reference", _resolve_short_names)
