"""Trust point 8: the replay child is started isolated, so modules in the trace directory or
the current directory are never imported; a ``--case`` module is imported from where it
resolves in the user's process, and cannot shadow an installed package."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from tests.replay.usercases import imported_markers, plant_hostile, write_user_module

import kernbench as kb
from kernbench.cli import main
from kernbench.kernels.registry import build_case
from kernbench.replay.child import PACKAGE_DIR, child_command


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    return kb.record(build_case("scale-exp", {"n": 256, "tile": 64}), tmp_path / "s.ktrace").path


def test_trust_8_modules_inside_the_trace_dir_are_never_imported(
        trace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plant_hostile(trace)
    monkeypatch.chdir(trace)
    monkeypatch.syspath_prepend("")  # as `python -m kernbench ...` run from there would have it
    res = CliRunner().invoke(main, ["replay", "."])
    assert res.exit_code == 0 and res.output.startswith("verified: "), res.output
    assert imported_markers(trace) == []


def test_trust_8_the_child_command_is_isolated_and_gets_explicit_paths(
        trace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(trace)
    monkeypatch.syspath_prepend(str(trace))
    cmd = child_command(Path("."), "r1", "mymod:f", ["/opt/cases"])
    assert cmd[1] == "-I" and cmd[4] == str(PACKAGE_DIR.parent)
    assert cmd[6] == str(trace)  # the trace path is absolute: the child runs in PACKAGE_DIR
    extra = json.loads(cmd[5])
    assert extra and str(trace) not in extra and "" not in extra
    assert cmd[cmd.index("--case-path") + 1] == "/opt/cases"


def test_trust_8_a_case_module_in_the_cwd_is_imported_but_cannot_shadow_packages(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "project"
    write_user_module(project)
    plant_hostile(project, ("ml_dtypes", "numpy", "pyarrow", "kernbench"))
    sys.path.insert(0, str(project))
    try:
        import mycases

        kb.record(mycases.double_case(n=256, tile=64), project / "d.ktrace")
    finally:
        sys.path.remove(str(project))
        sys.modules.pop("mycases", None)
    monkeypatch.chdir(project)  # the module is found in the cwd only, as the user ran it
    res = CliRunner().invoke(main, ["replay", "d.ktrace", "--case", "mycases:double_case"])
    assert res.exit_code == 0 and res.output.startswith("verified: "), res.output
    assert imported_markers(project) == []
    sys.modules.pop("mycases", None)


def test_trust_8_a_case_module_that_resolves_elsewhere_in_the_child_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trace: Path) -> None:
    from kernbench.case.factory import load_factory
    from kernbench.errors import BadInputError

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with pytest.raises(BadInputError, match=r"'json' imports from .*, not from"):
        load_factory("json:loads", [str(elsewhere)])
    shutil.rmtree(elsewhere)
