"""Property tests take their example counts from the hypothesis profile (``suite`` by
default, ``thorough`` with ``KERNBENCH_HYPOTHESIS=thorough``): no test fixes a count of its
own, and a slower property's smaller count (``tests.conftest.examples``) scales with it."""

from __future__ import annotations

import ast
from pathlib import Path

from hypothesis import settings

from tests.conftest import SUITE_EXAMPLES, examples

TESTS = Path(__file__).resolve().parent


def test_no_test_fixes_its_example_count() -> None:
    """``max_examples=`` is given only through ``examples(...)`` (or by the profiles)."""
    fixed = []
    for path in sorted(TESTS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.keyword) and node.arg == "max_examples":
                call = node.value
                through = (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
                           and call.func.id == "examples")
                if not through and path.name != "conftest.py":
                    fixed.append(f"{path.relative_to(TESTS)}:{node.value.lineno}")
    assert fixed == []


def test_example_counts_scale_with_the_profile() -> None:
    before = settings.default.max_examples
    try:
        settings.load_profile("suite")
        assert (settings.default.max_examples, examples(12), examples(25)) == (
            SUITE_EXAMPLES, 12, 25)
        settings.load_profile("thorough")
        assert (settings.default.max_examples, examples(12), examples(25)) == (
            10 * SUITE_EXAMPLES, 120, 250)
    finally:
        settings.load_profile("thorough" if before == 10 * SUITE_EXAMPLES else "suite")
    assert settings.default.max_examples == before
