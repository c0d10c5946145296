"""The CLI: every command has --help; bad input is one line and exit 2."""

from __future__ import annotations

import json

import click
import pytest
from click.testing import CliRunner

from kernbench.cli import main


def _commands(group: click.Group, prefix: tuple[str, ...] = ()):
    for name, cmd in group.commands.items():
        yield prefix + (name,)
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, prefix + (name,))


@pytest.mark.parametrize("path", [()] + list(_commands(main)), ids=lambda p: " ".join(p) or "-")
def test_every_command_has_help(path):
    result = CliRunner().invoke(main, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output


def test_cases_lists_the_builtin_cases_with_params():
    result = CliRunner().invoke(main, ["cases"])
    assert result.exit_code == 0
    for name in ("scale-exp", "gemm", "softmax"):
        assert name in result.output
    assert "tile=512" in result.output


def test_record_writes_a_trace(tmp_path):
    out = tmp_path / "s.ktrace"
    result = CliRunner().invoke(main, ["record", "scale-exp", "-p", "tile=1024", "-o", str(out)])
    assert result.exit_code == 0, result.output
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["params"]["tile"] == 1024 and manifest["case_params"]["tile"] == 1024


@pytest.mark.parametrize("args,needle", [
    (["record", "no-such-case"], "unknown case 'no-such-case'"),
    (["record", "scale-exp", "-p", "tile"], "parameter 'tile' is not KEY=VALUE"),
    (["record", "scale-exp", "-p", "bogus=1"], "has no parameter(s) ['bogus']"),
    (["record", "scale-exp", "--hw", "ahbm-v9"], "unknown hw 'ahbm-v9'"),
    (["record", "gemm", "-p", "M=100"], "M=100 is not a multiple"),
    (["record", "scale-exp", "-p", "tile=abc"], "parameter tile expects int"),
])
def test_bad_input_prints_one_line_and_exits_2(tmp_path, args, needle):
    result = CliRunner().invoke(main, [*args, "-o", str(tmp_path / "x.ktrace")])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0]
    assert "Traceback" not in result.output


def test_unwritable_output_is_bad_input(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    result = CliRunner().invoke(main, ["record", "scale-exp", "-o", str(blocker / "t.ktrace")])
    assert result.exit_code == 2
    assert len(result.output.strip().splitlines()) == 1


def test_kernel_mistake_is_one_line_naming_the_kernel_line(tmp_path, monkeypatch):
    import kernbench as kb
    from kernbench import tl
    from kernbench.case import _REGISTRY

    @kb.kernel
    def broken(x):
        tl.dot(tl.zeros((2, 3), tl.float32), tl.zeros((2, 3), tl.float32))

    monkeypatch.setitem(_REGISTRY, "broken", lambda: kb.Case(
        "broken", broken, (1,), {"x": kb.tensor((1,), "float32")}))
    result = CliRunner().invoke(main, ["record", "broken", "-o", str(tmp_path / "b.ktrace")])
    assert result.exit_code == 2
    assert "ShapeError" in result.output and "test_cli.py:" in result.output
