"""The guard against tests that cannot fail (issue 44): no test function in tests/ has all
its assertions under an ``if`` or inside a loop over data with no count check beside it
(``tests/honesty.py`` says exactly what counts). A deliberately vacuous fixture is flagged,
an honest one is not."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from tests.honesty import helper_table, module_name, vacuous_tests
from tests.wall_clock import timed_tests

TESTS = Path(__file__).resolve().parent
CASES = TESTS / "fixtures" / "honesty_cases.py"


def _cases() -> tuple[set[str], set[str]]:
    tree = ast.parse(CASES.read_text())
    names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    return ({n for n in names if n.startswith("test_vacuous_")},
            {n for n in names if n.startswith("test_honest_")})


def test_the_guard_flags_every_vacuous_case_and_no_honest_one() -> None:
    vacuous, honest = _cases()
    assert len(vacuous) == 10 and len(honest) == 9
    flagged = {f.test for f in vacuous_tests(CASES.read_text(), str(CASES))}
    assert flagged == vacuous


def test_the_fixture_is_not_collected_as_tests() -> None:
    assert not CASES.name.startswith("test_") and not CASES.name.endswith("_test.py")


@functools.cache
def _suite() -> dict[Path, ast.Module]:
    """Every module of tests/ parsed once (the fixtures are not test modules)."""
    return {path: ast.parse(path.read_text()) for path in sorted(TESTS.rglob("*.py"))}


def test_no_test_in_the_suite_is_vacuous() -> None:
    trees = _suite()
    modules = helper_table({module_name(p, TESTS): t for p, t in trees.items()})
    found = [str(f) for path, tree in trees.items() if path.name.startswith("test_")
             for f in vacuous_tests(tree, str(path.relative_to(TESTS.parent)), modules,
                                    module_name(path, TESTS))]
    assert found == [], "tests whose every assertion is conditional or in a loop over " \
                        "data with no count check:\n" + "\n".join(found)


TIMING = TESTS / "fixtures" / "timing_cases.py"


def test_the_wall_clock_guard_flags_a_timed_assertion_and_not_a_deadline() -> None:
    names = {n.name for n in ast.parse(TIMING.read_text()).body if isinstance(n, ast.FunctionDef)}
    timed = {n for n in names if n.startswith("test_timed_")}
    assert len(timed) == 4 and len(names - timed) == 2 + 1  # and the helper
    assert {f.test for f in timed_tests(TIMING.read_text())} == timed


def test_no_test_asserts_a_wall_clock_duration() -> None:
    """Speed is measured by ``kernbench bench``, never asserted by a test."""
    found = [str(f) for path, tree in _suite().items() if path.name.startswith("test_")
             for f in timed_tests(tree, str(path.relative_to(TESTS.parent)))]
    assert found == []
