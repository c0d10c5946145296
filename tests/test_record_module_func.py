"""Issue 15 point 1: ``kernbench record MODULE:FUNC -p K=V -o T`` records a user's case
factory, with ``-p`` values typed by the factory's signature; the manifest names the factory
as data, and ``replay`` never imports it by itself but says which ``--case`` to pass."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import kernbench as kb
from kernbench.case.params import parse_params
from kernbench.cli import main
from kernbench.errors import BadInputError
from tests.replay.usercases import imported_markers, write_user_module


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user's project folder with ``mycases.py``, as the current directory (not on
    sys.path: the CLI finds the module in the cwd as the user ran it)."""
    folder = tmp_path / "project"
    write_user_module(folder)
    monkeypatch.chdir(folder)
    monkeypatch.delitem(sys.modules, "mycases", raising=False)
    yield folder
    sys.modules.pop("mycases", None)


def _cli(*args: str):
    return CliRunner().invoke(main, list(args))


def test_record_module_func_records_a_user_factory_with_typed_params(project: Path) -> None:
    res = _cli("record", "mycases:double_case", "-p", "rows=3", "-p", "n=256", "-p", "tile=64",
               "-p", "scale=2", "-p", "label=123", "-o", "t.ktrace")
    assert res.exit_code == 0, res.output
    assert res.output.startswith("recorded mycases:double_case: ")
    manifest = json.loads((project / "t.ktrace" / "manifest.json").read_text())
    assert manifest["factory"] == "mycases:double_case" and manifest["builtin"] is False
    assert manifest["case"] == "123"  # label is a str parameter: "123" stays a string
    assert manifest["case_params"] == {"rows": 3, "n": 256, "tile": 64, "scale": 2.0,
                                       "label": "123", "reference": "ok"}
    assert isinstance(manifest["case_params"]["scale"], float)
    x = kb.Trace.open(project / "t.ktrace").tensors_table.to_pylist()[0]
    assert x["shape"] == [3, 256] and json.loads(x["init"])["scale"] == 2.0


def test_record_module_func_replays_with_the_case_it_names(project: Path) -> None:
    assert _cli("record", "mycases:double_case", "-p", "rows=3", "-p", "n=256",
                "-p", "tile=64", "-o", "t.ktrace").exit_code == 0
    plain = _cli("replay", "t.ktrace")
    assert plain.exit_code == 0, plain.output
    assert plain.output.startswith("replayed ") and "not verified" in plain.output
    assert "pass --case mycases:double_case to check against its reference" in plain.output
    strict = _cli("replay", "t.ktrace", "--require-reference")
    assert strict.exit_code == 1
    checked = _cli("replay", "t.ktrace", "--case", "mycases:double_case")
    assert checked.exit_code == 0 and checked.output.startswith("verified: "), checked.output
    res = kb.replay("t.ktrace", case="mycases:double_case")
    x = np.random.default_rng(1).standard_normal((3, 256), dtype=np.float32)
    np.testing.assert_array_equal(res.outputs["y"], x * np.float32(2.0))


def test_record_module_func_replay_never_imports_the_recorded_factory(project: Path) -> None:
    assert _cli("record", "mycases:double_case", "-p", "n=256", "-p", "tile=64",
                "-o", "t.ktrace").exit_code == 0
    (project / "mycases.py").write_text(
        "import os\nopen(os.path.join(os.path.dirname(__file__), 'IMPORTED-mycases'), 'w')\n")
    sys.modules.pop("mycases", None)
    res = _cli("replay", "t.ktrace")
    assert res.exit_code == 0 and "pass --case mycases:double_case" in res.output
    assert imported_markers(project) == []


@pytest.mark.parametrize(("args", "needle"), [
    (["mycases:double_case", "-p", "n=abc"], "parameter n expects int, got 'abc'"),
    (["mycases:double_case", "-p", "bogus=1"], "has no parameter(s) ['bogus']"),
    (["mycases:no_such", "-p", "n=1"], "'mycases' has no 'no_such'"),
    (["no_such_module_xyz:f"], "cannot import 'no_such_module_xyz'"),
    (["mycases:double_case", "-p", "reference=nope"], "the factory raised KeyError: 'nope'"),
])
def test_record_module_func_bad_input_is_one_line_exit_2(project: Path, args, needle) -> None:
    res = _cli("record", *args, "-o", "x.ktrace")
    assert res.exit_code == 2, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in res.output
    assert not (project / "x.ktrace").exists()


def test_record_module_func_params_are_typed_by_the_signature() -> None:
    def factory(n: int = 1, scale: float = 1.0, flag: bool = False, name: str = "a", free=None):
        raise AssertionError

    got = parse_params(["n=0x10", "scale=3", "flag=yes", "name=7", "free=2.5"], factory)
    assert got == {"n": 16, "scale": 3.0, "flag": True, "name": "7", "free": 2.5}
    assert isinstance(got["scale"], float)
    with pytest.raises(BadInputError, match="parameter flag expects bool, got 'maybe'"):
        parse_params(["flag=maybe"], factory)
