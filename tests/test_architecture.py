"""The import rules of docs/ARCHITECTURE.md#import-rules, read from the source with ``ast``.

Every ``import`` of a ``lodarrow`` module counts, at module level and inside functions alike
(a function-level import is a circle all the same, only postponed).  The graph of
``lodarrow.*`` modules has no cycle but the documented lazy links: ``LoDTensor``'s conversion
methods (``to_arrow``, ``to_pandas``, ``__arrow_c_device_array__``; ``to_torch``, ``to_jax``,
...) import their module of ``lodarrow._interop`` or of the hub, ``lodarrow._hub``, inside the
method, as pandas' ``DataFrame.to_parquet`` does, because those modules build LoDTensors and so
import ``lodarrow._tensor``.  The same holds between the package's rooms (its subpackages).
"""

import ast
import pathlib

import pytest

import lodarrow

#: The package under test (a checkout's, or an installed one's sources).
PACKAGE = pathlib.Path(lodarrow.__file__).resolve().parent
ROOT = PACKAGE.parent

#: The documented lazy links: (importer, prefix of the imported modules), each taken only
#: inside a function.  Nothing else may close a circle.
LAZY_LINKS = (
    ("lodarrow._tensor", "lodarrow._interop."),
    ("lodarrow._tensor", "lodarrow._hub."),
)

#: Leaf modules: they import no lodarrow module (``_errors`` aside), so anything may use them.
LEAVES = ("lodarrow._cupy", "lodarrow._threads", "lodarrow._errors", "lodarrow._progress")


def _modules():
    mods = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        mods[".".join(parts)] = path
    return mods


MODULES = _modules()


def _resolve(name):
    """The module ``name`` names: itself, or its longest prefix that is a module."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module):
    """``{imported lodarrow module: (line, lazy)}`` of ``module`` (lazy: inside a function)."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(), str(path))
    is_package = path.name == "__init__.py"
    found = {}

    def visit(node, lazy):
        for child in ast.iter_child_nodes(node):
            inner = lazy or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                               ast.Lambda))
            targets = []
            if isinstance(child, ast.Import):
                targets = [alias.name for alias in child.names]
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    pkg = module.split(".") if is_package else module.split(".")[:-1]
                    pkg = pkg[:len(pkg) - (child.level - 1)]
                    base = ".".join(pkg + ([child.module] if child.module else []))
                # ``from pkg import sub`` imports the submodule; ``from pkg import name``
                # the package itself.
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base
                           for a in child.names]
            for target in targets:
                if not target.startswith("lodarrow"):
                    continue
                resolved = _resolve(target)
                if resolved and resolved != module:
                    old = found.get(resolved)
                    if old is None or (old[1] and not lazy):  # a module-level one wins
                        found[resolved] = (child.lineno, lazy)
            visit(child, inner)

    visit(tree, False)
    return found


GRAPH = {module: _imports(module) for module in MODULES}


def _allowed(importer, imported, lazy):
    return lazy and any(importer == a and _under(imported, b) for a, b in LAZY_LINKS)


def _under(module, prefix):
    """``module`` is ``prefix`` or inside it (``prefix`` ending with a dot: inside only)."""
    return module.startswith(prefix) if prefix.endswith(".") else (
        module == prefix or module.startswith(prefix + "."))


def _cycles(graph):
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(graph[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_graph_sees_the_package():
    assert "lodarrow._tensor" in GRAPH and "lodarrow._backends.cpu" in GRAPH
    assert "lodarrow._backends" in GRAPH["lodarrow._ops.sequence_pool"]


def test_no_import_circle_but_the_documented_lazy_link():
    graph = {m: {t for t, (_, lazy) in imports.items() if not _allowed(m, t, lazy)}
             for m, imports in GRAPH.items()}
    cycles = _cycles(graph)
    detail = [[f"{a} -> {b} (line {GRAPH[a][b][0]})" for a in c for b in sorted(graph[a])
               if b in c] for c in cycles]
    assert not cycles, f"import circles (see docs/ARCHITECTURE.md#import-rules): {detail}"


def _room(module):
    """The room of ``module``: its subpackage of ``lodarrow`` (``lodarrow._ops``), or the
    module itself for a top-level one (``lodarrow._tensor``)."""
    return ".".join(module.split(".")[:2])


def test_no_circle_between_rooms_but_the_documented_lazy_link():
    """Folded onto the rooms (subpackages), the graph has no circle either: a circle through
    two rooms would be a circle of folders even where no two modules close one."""
    graph = {}
    for module, imports in GRAPH.items():
        edges = graph.setdefault(_room(module), {})
        for target, (line, lazy) in imports.items():
            if not _allowed(module, target, lazy) and _room(target) != _room(module):
                edges.setdefault(_room(target), f"{module} -> {target} (line {line})")
    for room in list(graph.values()):
        for target in room:
            graph.setdefault(target, {})
    cycles = _cycles({room: set(edges) for room, edges in graph.items()})
    detail = [[graph[a][b] for a in c for b in sorted(graph[a]) if b in c] for c in cycles]
    assert not cycles, f"circles between rooms (see docs/ARCHITECTURE.md#import-rules): {detail}"


def test_the_hub_is_not_imported_from_below():
    """Only the public API, the training layer and ``LoDTensor``'s lazy methods import the
    conversion hub."""
    allowed = {"lodarrow", "lodarrow._tensor"}
    for module, imports in GRAPH.items():
        if _under(module, "lodarrow._hub") or _under(module, "lodarrow._training"):
            continue
        bad = [t for t in imports if _under(t, "lodarrow._hub")]
        assert not bad or module in allowed, f"{module} imports {bad}"


def test_the_lazy_link_is_lazy_and_used():
    used = set()
    for importer, prefix in LAZY_LINKS:
        for target, (line, lazy) in GRAPH[importer].items():
            if _under(target, prefix):
                assert lazy, f"{importer} imports {target} at module level (line {line})"
                used.add((importer, prefix))
    assert used == set(LAZY_LINKS), "a documented lazy link that no longer exists"


@pytest.mark.parametrize("leaf", LEAVES)
def test_leaves_import_no_lodarrow_module(leaf):
    assert set(GRAPH[leaf]) <= {"lodarrow._errors"}, GRAPH[leaf]


def test_only_the_cupy_module_imports_cupy():
    for module, path in MODULES.items():
        if module == "lodarrow._cupy":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            assert not any(n.split(".")[0] in ("cupy", "cupyx") for n in names), (
                f"{module} line {node.lineno} imports CuPy: use lodarrow._cupy")


def test_kernel_launchers_import_no_backend():
    """A launcher (``_cpu/<group>.py``, ``_cuda/<group>.py``) serves a backend; it never
    imports one, nor the other device's launchers."""
    for module, imports in GRAPH.items():
        for prefix, other in (("lodarrow._cpu", "lodarrow._cuda"),
                              ("lodarrow._cuda", "lodarrow._cpu")):
            if module == prefix or module.startswith(prefix + "."):
                bad = [t for t in imports if t.startswith(("lodarrow._backends", other))]
                assert not bad, f"{module} imports {bad}"


def test_only_launchers_and_planning_import_the_extension():
    """The compiled code (``lodarrow._ext``) is reached through the CPU launchers, the host
    planning of ``_plan.py``, the LoD checks of ``_validation.py`` (``lod_utils``) and the
    package's ``openmp_enabled``."""
    allowed = {"lodarrow", "lodarrow._plan", "lodarrow._validation"}
    for module, imports in GRAPH.items():
        if any(t == "lodarrow._ext" or t.startswith("lodarrow._ext.") for t in imports):
            assert module.startswith("lodarrow._cpu.") or module in allowed, module


def test_twin_launchers_have_the_same_entries():
    """``_cpu/<group>.py`` and ``_cuda/<group>.py`` come in pairs with the same kernel names
    and arguments; the backends' tables are exactly their ENTRIES."""
    import importlib
    import inspect

    from lodarrow._backends import cpu, cuda

    groups = sorted(p.stem for p in (PACKAGE / "_cpu").glob("seq_*.py"))
    assert groups == sorted(p.stem for p in (PACKAGE / "_cuda").glob("seq_*.py"))
    names = set()
    for group in groups:
        host = importlib.import_module(f"lodarrow._cpu.{group}").ENTRIES
        device = importlib.import_module(f"lodarrow._cuda.{group}").ENTRIES
        assert host.keys() == device.keys(), group
        for name in host:
            assert (list(inspect.signature(host[name]).parameters)
                    == list(inspect.signature(device[name]).parameters)), name
        names |= host.keys()
    assert names == cpu.KERNELS.keys() == cuda.KERNELS.keys()


#: The layers of docs/ARCHITECTURE.md#the-layers, top first; a module imports only its own
#: layer and the layers below (the documented lazy link aside).  Modules beside the layers
#: (``_plan``, ``_validation``, ``_place``, the leaves, the command line) are not listed.
LAYERS = (
    # the torch operators: opt-in (``import lodarrow.torch``), built on the gradient rules
    ("lodarrow.torch",),
    ("lodarrow._training",),
    # the conversion hub: a tensor library's forms are built with the operators
    # (sequence_pad / sequence_unpad) and read from table columns, so it sits on top
    ("lodarrow._hub",),
    ("lodarrow._tables",),
    # gradients: the rules run the operators and the backward kernels; nothing below
    # imports them (lodarrow.torch, above, builds on them)
    ("lodarrow._grad",),
    ("lodarrow._ops",),
    ("lodarrow._interop",),
    ("lodarrow._tensor", "lodarrow._construct", "lodarrow._elementwise"),
    ("lodarrow._backends",),
    ("lodarrow._cpu", "lodarrow._cuda"),
)


def _layer(module):
    for depth, members in enumerate(LAYERS):
        if any(_under(module, m) for m in members):
            return depth
    return None


def test_layers_import_downward():
    upward = []
    for module, imports in GRAPH.items():
        mine = _layer(module)
        if mine is None:
            continue
        for target, (line, lazy) in imports.items():
            theirs = _layer(target)
            if theirs is not None and theirs < mine and not _allowed(module, target, lazy):
                upward.append(f"{module} -> {target} (line {line})")
    assert not upward, upward


def test_nothing_in_the_package_imports_lodarrow_torch():
    """``lodarrow.torch`` imports torch at its top: only ``import lodarrow.torch`` loads it,
    never ``import lodarrow`` (nor any module of the package outside it)."""
    for module, imports in GRAPH.items():
        if _under(module, "lodarrow.torch"):
            continue
        bad = [t for t in imports if _under(t, "lodarrow.torch")]
        assert not bad, f"{module} imports {bad}"
