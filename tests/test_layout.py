"""The package layout: few modules at the top, and an import graph without a cycle.

The graph is read from the source (an AST walk over ``src/kernbench``), so an import made
late, inside a function, is an edge like any other: a cycle dodged by a late import is still
a cycle. Only imports under ``if TYPE_CHECKING:`` are left out (they never run).

Edges, as the import system makes them:

* ``import a.b`` and ``from a.b import name``: an edge to ``a.b``; ``from a import b`` where
  ``b`` is a submodule: an edge to ``a.b`` (and none to ``a``, whose ``__init__`` only
  re-exports; like import-linter, the implicit run of a parent package's ``__init__`` is not
  an edge). A package ``__init__``'s own imports (its re-exports) are edges from the package.
* ``kernbench/__init__.py`` imports nothing when it loads: a public name is imported on its
  first use through the ``_LAZY`` table (docs/adr/0006-lazy-package-imports.md). That use is
  the import, so ``from kernbench import Name`` and ``kb.Name`` (with ``import kernbench as
  kb``) are edges from the *using* module to the module ``_LAZY`` names for ``Name``.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PKG = SRC / "kernbench"
#: the entry points: the package, the CLI, tl, the pytest plugin, notebook display, errors
MAX_TOP_LEVEL = 8


def _name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_name(p): p for p in sorted(PKG.rglob("*.py"))}


def _lazy_table(name: str) -> dict[str, str]:
    """A table of ``kernbench/__init__.py`` (public name -> module), read from the source."""
    tree = ast.parse((PKG / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.AnnAssign | ast.Assign):
            targets = [node.target] if isinstance(node, ast.AnnAssign) else node.targets
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                # a dict display with ``**dict.fromkeys(...)``: only ``dict`` is in scope
                return eval(ast.unparse(node.value), {"__builtins__": {}, "dict": dict})
    raise AssertionError(f"kernbench/__init__.py has no {name} table")


LAZY = _lazy_table("_LAZY")
SUBMODULES = _lazy_table("_SUBMODULES")


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _walk(node: ast.AST, typing: bool = False):
    """Every node, but not under ``if TYPE_CHECKING:`` (unless ``typing``)."""
    for child in ast.iter_child_nodes(node):
        if not typing and isinstance(child, ast.If) and _is_type_checking(child):
            for other in child.orelse:
                yield other
                yield from _walk(other)
            continue
        yield child
        yield from _walk(child, typing)


def _module_of(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _root_name(name: str) -> str | None:
    """The module a public name of the lazy ``kernbench`` package comes from."""
    if name in SUBMODULES:
        return SUBMODULES[name]
    if f"kernbench.{name}" in MODULES:
        return f"kernbench.{name}"
    return LAZY.get(name)


def edges_of(module: str, typing: bool = False) -> set[str]:
    """``module``'s import edges; ``typing``: those under ``if TYPE_CHECKING:`` too (but the
    lazy package's own, which name ``kb.X`` for type checkers only)."""
    path = MODULES[module]
    typing = typing and module != "kernbench"
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: set[str] = set()
    aliases: set[str] = set()  # local names bound to the kernbench package itself
    nodes = list(_walk(ast.parse(path.read_text()), typing))
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "kernbench":
                    aliases.add(alias.asname or "kernbench")
                elif (target := _module_of(alias.name)) is not None:
                    out.add(target)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            for alias in node.names:
                if base == "kernbench":
                    target = _root_name(alias.name)
                elif f"{base}.{alias.name}" in MODULES:
                    target = f"{base}.{alias.name}"
                else:
                    target = _module_of(base)
                if target is not None:
                    out.add(target)
    for node in nodes:  # kb.Name, with kb bound to the lazy package
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in aliases):
            if (target := _root_name(node.attr)) is not None:
                out.add(target)
    out.discard(module)
    return out


@functools.cache
def graph() -> dict[str, set[str]]:
    """Every module's import edges (parsed when a test first asks, not at collection)."""
    return {m: edges_of(m) for m in MODULES}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1 or v in graph[v]:
                        found.append(sorted(comp))
    return found


def test_at_most_eight_modules_at_the_top_of_the_package():
    top = sorted(p.name for p in PKG.glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL, top


def test_the_import_graph_has_no_cycle_counting_late_imports():
    assert cycles(graph()) == []


def test_no_cycle_even_through_type_checking_imports():
    """A module that names another's type only for the type checker still depends on it:
    no two modules name each other, even behind ``if TYPE_CHECKING:`` (the lazy package's
    names for type checkers aside)."""
    assert cycles({m: edges_of(m, typing=True) for m in MODULES}) == []


def test_the_graph_sees_late_imports_and_lazy_package_names():
    """The walk is honest: a function-local import and a ``kb.Name`` use are edges."""
    assert "kernbench.record.recorder" in graph()["kernbench.cli"]  # imported inside a command
    assert "kernbench.case" in graph()["kernbench.kernels.gqa"]  # kb.Case, kb.register_case
    assert "kernbench.case.references" in graph()["kernbench.kernels.gqa"]  # kb's submodule
    assert "kernbench.kernels.registry" in LAZY.values()
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_trace_format_imports_no_other_layer():
    """``trace/`` is the bottom layer: it reads nothing above schemas/, errors and notebook."""
    allowed = ("kernbench.trace", "kernbench.schemas", "kernbench.errors", "kernbench.notebook")
    for module, targets in graph().items():
        if module == "kernbench.trace" or module.startswith("kernbench.trace."):
            above = [t for t in targets if not t.startswith(allowed)]
            assert above == [], (module, above)
