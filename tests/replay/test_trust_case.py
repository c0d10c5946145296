"""Trust points 2 and 3: a ``--case`` factory is rebuilt with the recorded params and must
rebuild the recorded case (else exit 2 saying what differs, never a false WRONG); the built-in
registry only checks built-in kernels; an unverified replay says so and, under
``--require-reference``, exits 1."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from tests.replay.conftest import write_trace
from tests.replay.usercases import import_user_module

import kernbench as kb
from kernbench.cli import main
from kernbench.errors import BadInputError
from kernbench.kernels.registry import build_case
from kernbench.replay.__main__ import main as replay_main
from kernbench.replay.verdict import resolve_reference


@pytest.fixture
def mycases(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    yield import_user_module(tmp_path / "cases", monkeypatch)
    sys.modules.pop("mycases", None)


def _cli(*args: str):
    return CliRunner().invoke(main, list(args))


def _rows(trace: kb.Trace) -> list[dict]:
    return trace.tensors_table.select(["name", "shape", "dtype", "role", "init"]).to_pylist()


def test_trust_2_a_factory_is_rebuilt_with_the_recorded_params(mycases, tmp_path) -> None:
    trace = kb.record(mycases.double_case(n=1 << 12, tile=256, scale=1.0), tmp_path / "t.ktrace")
    res = _cli("replay", str(trace.path), "--case", "mycases:double_case")
    assert res.exit_code == 0, res.output
    assert res.output.startswith("verified: ") and "against mycases:double_case" in res.output


def test_trust_2_a_case_that_does_not_rebuild_says_what_differs_and_exits_2(
        mycases, tmp_path) -> None:
    # rows and scale are factory arguments the manifest does not record for a direct call
    trace = kb.record(mycases.double_case(rows=3, n=256, tile=64, scale=2.0),
                      tmp_path / "t.ktrace")
    res = _cli("replay", str(trace.path), "--case", "mycases:double_case")
    assert res.exit_code == 2, res.output
    line = res.output.strip()
    assert "\n" not in line and "WRONG" not in line
    assert "does not rebuild the recorded case" in line
    assert "grid: recorded [3], rebuilt [2]" in line
    assert "tensor x shape: recorded [3, 256], rebuilt [2, 256]" in line
    assert "tensor x init: recorded {'kind': 'randn', 'scale': 2.0" in line
    assert not (trace.path / "replay").exists()


def test_trust_2_a_different_kernel_or_params_is_named(mycases, tmp_path) -> None:
    trace = kb.record(mycases.double_case(n=256, tile=64), tmp_path / "t.ktrace")
    with pytest.raises(BadInputError, match=r"kernel: recorded 'mycases:double', rebuilt "
                                            r"'kernbench.kernels.examples:scale_exp'"):
        resolve_reference(trace.manifest, "kernbench.kernels.examples:scale_exp_case",
                          _rows(trace))
    manifest = dict(trace.manifest, params={"n": 256, "tile": 32})
    with pytest.raises(BadInputError, match=r"params: recorded \{'n': 256, 'tile': 32\}, "
                                            r"rebuilt \{'n': 256, 'tile': 64\}"):
        resolve_reference(dict(manifest, case_params={"n": 256, "tile": 64}),
                          "mycases:double_case", _rows(trace))


def test_trust_2_a_user_case_named_like_a_builtin_is_not_checked_against_it(
        mycases, tmp_path) -> None:
    case = mycases.softmax_named(n=256, tile=64)
    assert case.name == "softmax" and not case.builtin
    trace = kb.record(case, tmp_path / "softmax.ktrace")
    assert trace.manifest["builtin"] is False and trace.manifest["factory"] is None
    res = _cli("replay", str(trace.path))
    assert res.exit_code == 0, res.output
    assert "not verified" in res.output and "registry:softmax" not in res.output
    # an older trace without the flag: the recorded kernel is not the built-in softmax's
    manifest = {k: v for k, v in trace.manifest.items() if k not in ("builtin", "factory")}
    ref = resolve_reference(manifest, None, _rows(trace))
    assert ref.fn is None and "was recorded from kernel 'mycases:double', not the built-in" \
        in ref.note
    # and with the user's factory it verifies against the user's reference
    ok = _cli("replay", str(trace.path), "--case", "mycases:softmax_named")
    assert ok.exit_code == 0 and ok.output.startswith("verified: "), ok.output


def test_trust_2_the_manifest_records_where_the_case_came_from(tmp_path) -> None:
    trace = kb.record(build_case("scale-exp", {"n": 256, "tile": 64}), tmp_path / "s.ktrace")
    assert trace.manifest["builtin"] is True
    assert trace.manifest["factory"] == "kernbench.kernels.examples:scale_exp_case"
    # a registered factory called directly is built in too, with its full params
    direct = kb.kernels.examples.scale_exp_case(n=256, tile=64)
    assert direct.builtin and direct.case_params == {"rows": 2, "n": 256, "tile": 64}


def _unverifiable(tmp_path: Path) -> Path:
    import numpy as np

    return write_trace(tmp_path / "u.ktrace", [], {"x": (np.ones(4, np.float32), "input"),
                                                    "y": (np.zeros(4, np.float32), "output")})


def test_trust_3_an_unverified_replay_says_so_and_exits_0(tmp_path) -> None:
    res = _cli("replay", str(_unverifiable(tmp_path)))
    assert res.exit_code == 0
    assert res.output.startswith("replayed 0/0 ops, no invalid reads; not verified: case "
                                 "'synthetic' is not a built-in case; pass --case MODULE:FUNC")


def test_trust_3_require_reference_exits_1_when_unverified(tmp_path, capsys) -> None:
    path = _unverifiable(tmp_path)
    res = _cli("replay", str(path), "--require-reference")
    assert res.exit_code == 1 and "not verified" in res.output
    assert replay_main([str(path), "--require-reference"]) == 1
    assert "not verified" in capsys.readouterr().out
    assert replay_main([str(path)]) == 0


def test_trust_3_require_reference_passes_a_verified_replay(tmp_path) -> None:
    trace = kb.record(build_case("scale-exp", {"n": 256, "tile": 64}), tmp_path / "s.ktrace")
    res = _cli("replay", str(trace.path), "--require-reference")
    assert res.exit_code == 0 and res.output.startswith("verified: "), res.output
    saved = json.loads((trace.path / "replay" / "verdict.json").read_text())
    assert (saved["status"], saved["ok"]) == ("verified", True)
