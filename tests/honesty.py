"""Tests that cannot fail, found by reading them (issue 44; ``tests/test_test_honesty.py``).

A test function is **vacuous** when it asserts something but none of its assertions is
*firm*: each one sits under an ``if`` (or ``elif``/``else``, an ``except`` handler, a
``match`` case) or inside a loop over data, so when the condition is false or the data are
empty the test passes having checked nothing.

- An *assertion* is an ``assert`` statement, a call whose name starts with ``assert`` or is
  ``fail``, ``fnmatch_lines`` or ``re_match_lines`` (``np.testing.assert_*``,
  ``assert_replay_ok``, ``pytest.fail``, pytester's line matchers), ``pytest.raises``/
  ``warns`` (called or as a ``with`` item), ``raise AssertionError``, or a call of a
  function of the tests (same module, or imported from ``tests.``) that makes one.
- A loop is *over data* unless its iterable is a literal display (tuple, list, set, dict,
  string), ``range`` of constants, a module-level name bound to a literal display, or
  ``enumerate``/``zip``/``sorted``/``reversed``/``.items()``/``.keys()``/``.values()`` of
  those. ``assert all(x for x in data)`` and ``assert not any(x for x in data)`` are loops
  over data too (true when empty).
- An ``if`` whose body only fails (``pytest.fail``, ``raise AssertionError``) is a firm
  assertion of the negated condition; so is an ``if``/``else`` both of whose branches
  assert (one of them runs).

Assertions inside a function defined in the test (a hypothesis ``@given`` property) count
where the definition stands. The rule is syntactic: it cannot see that a helper returns
non-empty data, which is why a loop over data needs a count check beside it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ASSERTING_NAMES = frozenset({"fail", "fnmatch_lines", "re_match_lines", "raises", "warns",
                             "deprecated_call"})
STATIC_WRAPPERS = frozenset({"enumerate", "zip", "sorted", "reversed", "list", "tuple", "set"})
STATIC_METHODS = frozenset({"items", "keys", "values"})
DISPLAYS = ast.Tuple | ast.List | ast.Set | ast.Dict
#: what one module offers the others: its asserting functions, its literal constants
Imported = tuple[dict[str, bool], set[str]]
Table = dict[str, Imported]


@dataclass(frozen=True)
class Finding:
    path: str
    test: str
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.test}"


def _name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


class Module:
    """One test module: its literal constants and which of its functions assert."""

    def __init__(self, tree: ast.Module, imported: Imported | None = None) -> None:
        helpers, constants = imported or ({}, set())
        self.constants = set(constants) | _literal_names(tree.body)
        self.module_constants = set(self.constants)
        self.helpers = dict(helpers)  # name -> asserts (imported from tests.*)
        self._memo: dict[tuple[int, bool], tuple[bool, ...]] = {}
        defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)
                and not n.name.startswith("test")}
        changed = True
        while changed:  # to a fixed point: helpers calling helpers
            asserts = {name: any(self.is_assertion(n) for n in ast.walk(node))
                       for name, node in defs.items()}
            changed = any(self.helpers.get(n) != a for n, a in asserts.items())
            self.helpers.update(asserts)

    def is_assertion(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Assert):
            return True
        if isinstance(node, ast.Raise) and node.exc is not None:
            exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            return _name(exc) == "AssertionError"
        if isinstance(node, ast.Call):
            name = _name(node.func)
            return name is not None and (name.startswith("assert") or name in ASSERTING_NAMES
                                         or self.helpers.get(name, False))
        return False

    def static(self, it: ast.expr) -> bool:
        if isinstance(it, DISPLAYS):
            return bool(getattr(it, "elts", None) or getattr(it, "keys", None))
        if isinstance(it, ast.Constant):
            return isinstance(it.value, str | bytes) and bool(it.value)
        if isinstance(it, ast.Name):
            return it.id in self.constants
        if isinstance(it, ast.Subscript):  # a slice of a literal: its length is written out
            return self.static(it.value)
        if isinstance(it, ast.Call):
            name = _name(it.func)
            if name == "range":
                return all(isinstance(a, ast.Constant) for a in it.args)
            if name in STATIC_WRAPPERS and isinstance(it.func, ast.Name):
                return bool(it.args) and all(self.static(a) for a in it.args)
            if name in STATIC_METHODS and isinstance(it.func, ast.Attribute):
                return self.static(it.func.value)
        return False

    def _vacuous_all(self, test: ast.expr) -> bool:
        """``all(... for x in data)`` or ``not any(... for x in data)`` (and ``and`` of
        those): true for empty data."""
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
            return all(self._vacuous_all(v) for v in test.values)
        wanted = "all"
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            test, wanted = test.operand, "any"
        return (isinstance(test, ast.Call) and _name(test.func) == wanted and len(test.args) == 1
                and isinstance(test.args[0], ast.GeneratorExp | ast.ListComp)
                and not all(self.static(g.iter) for g in test.args[0].generators))

    def block(self, body: list[ast.stmt], firm: bool) -> Iterator[bool]:
        """The sites of a block of statements: after an ``if`` that may leave it (``return``,
        ``continue``, ``break`` with no assertion before), the rest runs only sometimes."""
        for stmt in body:
            yield from self.sites(stmt, firm)
            if isinstance(stmt, ast.If) and any(self._leaves(b) for b in (stmt.body,
                                                                            stmt.orelse)):
                firm = False

    def _leaves(self, body: list[ast.stmt]) -> bool:
        return bool(body) and isinstance(body[-1], ast.Return | ast.Continue | ast.Break) and (
            not any(self.sites(s) for s in body))

    def sites(self, node: ast.AST, firm: bool = True) -> tuple[bool, ...]:
        """One bool per assertion under ``node``: whether it is firm (remembered)."""
        key = (id(node), firm)
        got = self._memo.get(key)
        if got is None:
            got = self._memo[key] = tuple(self._sites(node, firm))
        return got

    def _sites(self, node: ast.AST, firm: bool) -> Iterator[bool]:
        if isinstance(node, ast.If):
            body_fails = all(self._only_fails(s) for s in node.body)
            both = any(self.block(node.body, True)) and any(self.block(node.orelse, True))
            if body_fails or both:  # fails unless the condition is false / each branch asserts
                yield firm
            yield from self.sites(node.test, firm)
            yield from self.block(node.body, False)
            yield from self.block(node.orelse, False)
            return
        if isinstance(node, ast.For | ast.AsyncFor | ast.While):
            loop_firm = firm and isinstance(node, ast.For | ast.AsyncFor) and self.static(
                node.iter)
            yield from self.sites(node.iter if isinstance(node, ast.For | ast.AsyncFor)
                                  else node.test, firm)  # evaluated once at least
            yield from self.block(node.body, loop_firm)
            yield from self.block(node.orelse, firm)
            return
        if isinstance(node, ast.Try):
            for body in (node.body, node.orelse, node.finalbody):
                yield from self.block(body, firm)
            for h in node.handlers:
                yield from self.block(h.body, False)
            return
        if isinstance(node, ast.Match):
            for case in node.cases:
                yield from self.block(case.body, False)
            return
        if isinstance(node, ast.Assert):
            yield firm and not self._vacuous_all(node.test)
            return
        if self.is_assertion(node):
            yield firm
        for name, value in ast.iter_fields(node):
            if name == "body" and isinstance(value, list):  # with, def: a block
                yield from self.block(value, firm)
            elif isinstance(value, ast.AST) and not isinstance(value, ast.expr_context):
                yield from self.sites(value, firm)
            elif isinstance(value, list):
                for item in value:
                    if isinstance(item, ast.AST):
                        yield from self.sites(item, firm)

    def _only_fails(self, stmt: ast.stmt) -> bool:
        if isinstance(stmt, ast.Raise):
            return self.is_assertion(stmt)
        return (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
                and _name(stmt.value.func) == "fail")

    def vacuous(self, test: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
        local = _literal_names(test.body)  # lists and tuples written out in the test
        self.constants |= local
        self._memo.clear()
        try:
            found = list(self.block(test.body, True))
        finally:
            self.constants -= local - self.module_constants
            self._memo.clear()
        return bool(found) and not any(found)


def _literal_names(body: list[ast.stmt]) -> set[str]:
    """Names every assignment of which (among ``body``'s statements) is a non-empty literal
    display."""
    bound: dict[str, bool] = {}
    for node in body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            literal = isinstance(node.value, DISPLAYS) and bool(
                getattr(node.value, "elts", None) or getattr(node.value, "keys", None))
            for t in targets:
                if isinstance(t, ast.Name):
                    bound[t.id] = bound.get(t.id, True) and literal
    return {n for n, ok in bound.items() if ok}


def _imported(tree: ast.Module, here: str, modules: Table) -> Imported:
    """The helpers and literal constants ``here`` imports from other modules of the tests."""
    helpers: dict[str, bool] = {}
    constants: set[str] = set()
    for node in tree.body:
        if not isinstance(node, ast.ImportFrom):
            continue
        base = here.rsplit(".", node.level)[0] if node.level else ""
        name = ".".join(p for p in (base, node.module or "") if p)
        if not name.startswith("tests"):
            continue
        their_helpers, their_constants = modules.get(name, ({}, set()))
        for alias in node.names:
            helpers[alias.asname or alias.name] = their_helpers.get(alias.name, False)
            if alias.name in their_constants:
                constants.add(alias.asname or alias.name)
    return helpers, constants


def _tests(tree: ast.Module) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith(
                "test"):
            yield node
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            yield from (n for n in node.body if isinstance(n, ast.FunctionDef)
                        and n.name.startswith("test"))


def vacuous_tests(source: str | ast.Module, path: str = "<test>",
                  modules: Table | None = None, name: str = "tests.case") -> list[Finding]:
    """The vacuous test functions of one module (its source or tree; ``name``: its module
    name, for its imports from the other modules of ``modules``)."""
    tree = ast.parse(source) if isinstance(source, str) else source
    module = Module(tree, _imported(tree, name, modules or {}))
    return [Finding(path, t.name, t.lineno) for t in _tests(tree) if module.vacuous(t)]


def module_name(path: Path, root: Path) -> str:
    return ".".join(path.relative_to(root.parent).with_suffix("").parts)


def helper_table(trees: dict[str, ast.Module]) -> Table:
    """``{"tests.x.y": (its asserting functions, its literal constants)}`` for every module
    of ``trees`` (module name -> tree)."""
    table: Table = {}
    for name, tree in trees.items():
        module = Module(tree)
        table[name] = (module.helpers, module.module_constants)
    return table

