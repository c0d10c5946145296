"""Types a checker reads (issue 28): the type checker runs over every function body, the
silenced lines and the untyped values in the Triton front end stay within their budgets, and
the layout doc names every package. Each count is read from the source, so a change that
adds a ``# type: ignore`` past the budget fails here, not in review."""

from __future__ import annotations

import re
import shlex
import tomllib
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "kernbench"
IGNORE = re.compile(r"#\s*type:\s*ignore")
ANY = re.compile(r"\bAny\b")


def _lines(where: Path, pattern: re.Pattern[str]) -> list[str]:
    return [f"{p.relative_to(ROOT)}:{i}" for p in sorted(where.rglob("*.py"))
            for i, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]


def _commands(script: str) -> list[list[str]]:
    """The statements a shell script runs, each split as the shell splits its words
    (comments dropped; a new line or ``;`` ends a statement). ``&&``, ``||``, ``|`` and ``&``
    stay words of their statement: ``set -e`` does not end the script when a command fails
    before ``&&`` or ``||``, nor for one in the background, so ``mypy || true`` is not
    ``["mypy"]``."""
    commands: list[list[str]] = []
    for line in script.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)  # '#' starts a comment
        commands.append([])
        for word in lexer:
            if word == ";":
                commands.append([])
            else:
                commands[-1].append(word)
    return [c for c in commands if c]


def test_ci_runs_the_type_checker_over_untyped_function_bodies_of_the_whole_package() -> None:
    mypy = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert mypy["check_untyped_defs"] is True
    assert mypy["files"] == ["src/kernbench"]
    commands = _commands((ROOT / ".ci" / "run").read_text())
    assert ["set", "-euo", "pipefail"] in commands  # a failing command fails CI
    # mypy runs as a statement of its own, with no arguments (so over ``files`` above),
    # before the tests, not in a comment, an echo, an argument of something else, a list
    # whose failure ``set -e`` ignores (``mypy || true``) or the background
    assert ["mypy"] in commands
    assert commands.index(["mypy"]) < commands.index(["pytest", "-n", "2"])


@pytest.mark.parametrize("script", [
    "set -euo pipefail\n# mypy\npytest -n 2\n",
    "set -euo pipefail\necho mypy\npytest -n 2\n",
    "set -euo pipefail\nlint-imports mypy\npytest -n 2\n",
    "set -euo pipefail\nmypy || true\npytest -n 2\n",
    "set -euo pipefail\nmypy && echo typed\npytest -n 2\n",
    "set -euo pipefail\nmypy &\npytest -n 2\n",
])
def test_a_ci_script_that_only_names_mypy_does_not_run_it(script: str) -> None:
    assert ["mypy"] not in _commands(script)
    assert ["pytest", "-n", "2"] in _commands(script)  # the rest of it is read


def test_at_most_40_type_ignores_in_the_package() -> None:
    silenced = _lines(SRC, IGNORE)
    assert len(silenced) <= 40, silenced


def test_at_most_120_lines_of_any_in_the_triton_front_end() -> None:
    untyped = _lines(SRC / "triton", ANY)
    per_file = Counter(line.rsplit(":", 1)[0] for line in untyped)
    assert len(untyped) <= 120, f"{len(untyped)} lines: {per_file.most_common()}"


def test_no_module_name_is_in_three_packages() -> None:
    names = Counter(p.name for p in SRC.rglob("*.py")
                    if p.name != "__init__.py" and p.parent != SRC)
    assert [n for n, k in names.items() if k >= 3] == []


def test_the_layout_doc_names_every_package_and_top_level_module() -> None:
    doc = (ROOT / "docs" / "layout.md").read_text()
    rooms = [f"`{p.name}/`" for p in SRC.iterdir() if (p / "__init__.py").exists()]
    rooms += [f"`{p.name}`" for p in SRC.glob("*.py") if p.name != "__init__.py"]
    assert [r for r in sorted(rooms) if r not in doc] == []
