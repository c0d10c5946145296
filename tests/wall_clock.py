"""Tests that assert a wall-clock duration (issue 44; ``tests/test_test_honesty.py``): speed
is measured by ``kernbench bench``, never asserted by a test."""

from __future__ import annotations

import ast

from tests.honesty import Finding, _name, _tests

CLOCKS = frozenset({"perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "time",
                    "time_ns", "process_time"})


def _is_clock(expr: ast.AST) -> bool:
    return isinstance(expr, ast.Call) and _name(expr.func) in CLOCKS


def _readings(fn: ast.AST) -> set[str]:
    """The names ``fn`` binds to a clock reading (``t1 = time.monotonic()``)."""
    return {t.id for n in ast.walk(fn) if isinstance(n, ast.Assign) and _is_clock(n.value)
            for t in n.targets if isinstance(t, ast.Name)}


def _is_duration(expr: ast.AST, readings: set[str] | frozenset[str] = frozenset()) -> bool:
    """``clock() - x`` or ``t1 - x`` (``t1`` a clock reading) somewhere in ``expr``: a
    duration measured on a clock."""
    return any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Sub)
               and (_is_clock(n.left) or isinstance(n.left, ast.Name) and n.left.id in readings)
               for n in ast.walk(expr))


def timed_tests(source: str | ast.Module, path: str = "<test>") -> list[Finding]:
    """Test functions that assert an order on a duration measured on a clock (speed is the
    bench's to measure). A duration is ``clock() - start`` or ``end - start`` (``end`` bound
    to a clock reading), a name bound to one, or one unpacked from a call of a function of
    the module that returns one; comparing the clock with a deadline (a guard against a hang)
    is not a duration."""
    tree = ast.parse(source) if isinstance(source, str) else source
    timing = {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and any(
        isinstance(r, ast.Return) and r.value is not None
        and _is_duration(r.value, _readings(n)) for r in ast.walk(n))}
    found = []
    for test in _tests(tree):
        durations: set[str] = set()
        readings = _readings(test)
        for node in ast.walk(test):
            if isinstance(node, ast.Assign):
                value = node.value
                timed = _is_duration(value, readings) or (isinstance(value, ast.Call)
                                                          and _name(value.func) in timing)
                if timed:
                    durations |= {n.id for t in node.targets for n in ast.walk(t)
                                  if isinstance(n, ast.Name)}
        for node in ast.walk(test):
            if isinstance(node, ast.Assert) and any(
                    isinstance(c, ast.Compare) and any(
                        isinstance(op, ast.Lt | ast.LtE | ast.Gt | ast.GtE) for op in c.ops)
                    and (any(isinstance(n, ast.Name) and n.id in durations
                             for n in ast.walk(c)) or _is_duration(c, readings))
                    for c in ast.walk(node.test)):
                found.append(Finding(path, test.name, node.lineno))
                break
    return found
