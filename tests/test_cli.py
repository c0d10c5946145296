"""The CLI: every command has --help; bad input is one line and exit 2."""

from __future__ import annotations

import json

import click
import pyarrow.parquet as pq
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
    from kernbench.case.case import _REGISTRY

    @kb.kernel
    def broken(x):
        tl.dot(tl.zeros((2, 3), tl.float32), tl.zeros((2, 3), tl.float32))

    monkeypatch.setitem(_REGISTRY, "broken", lambda: kb.Case(
        "broken", broken, (1,), {"x": kb.tensor((1,), "float32")}))
    result = CliRunner().invoke(main, ["record", "broken", "-o", str(tmp_path / "b.ktrace")])
    assert result.exit_code == 2
    assert "ShapeError" in result.output and "test_cli.py:" in result.output


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    from kernbench.kernels.registry import build_case
    from kernbench.record.recorder import record

    d = tmp_path_factory.mktemp("cli")
    a = record(build_case("gemm", {"N": 256}), d / "a.ktrace").path
    b = record(build_case("gemm", {"N": 256, "BN": 64}), d / "b.ktrace").path
    return a, b


def test_report_prints_a_table_and_json(traces):
    a, _ = traces
    table = CliRunner().invoke(main, ["report", str(a)])
    assert table.exit_code == 0 and "efficiency" in table.output
    as_json = CliRunner().invoke(main, ["report", str(a), "--json"])
    assert as_json.exit_code == 0 and "latency_ps" in json.loads(as_json.output)["metrics"]


def test_check_passes_a_clean_trace_and_fails_a_violated_rule(traces, tmp_path):
    a, _ = traces
    assert CliRunner().invoke(main, ["check", str(a)]).exit_code == 0
    rules = tmp_path / "r.toml"
    rules.write_text('[[rule]]\nmetric = "efficiency"\nop = ">="\nvalue = 0.999\n')
    result = CliRunner().invoke(main, ["check", str(a), "--rules", str(rules)])
    assert result.exit_code == 1 and "efficiency" in result.output


def test_diff_of_a_trace_with_itself_is_clean_and_fail_on_trips(traces):
    a, b = traces
    assert CliRunner().invoke(main, ["diff", str(a), str(a)]).exit_code == 0
    worse = CliRunner().invoke(main, ["diff", str(a), str(b), "--fail-on", "latency=+1%"])
    slower = kb_latency(b) > kb_latency(a) * 1.01
    assert worse.exit_code == (1 if slower else 0)
    assert "dot" in worse.output


def kb_latency(path) -> int:
    import kernbench as kb

    return kb.Trace.open(path).t_end_ps


def test_export_writes_perfetto_json_and_sql_answers(traces, tmp_path):
    a, _ = traces
    out = tmp_path / "t.json"
    assert CliRunner().invoke(main, ["export", str(a), "-o", str(out)]).exit_code == 0
    assert "traceEvents" in json.loads(out.read_text())
    # the op count, read apart from the SQL engine: the Parquet footer's row count
    n_ops = pq.read_metadata(a / "ops.parquet").num_rows
    assert n_ops > 0
    res = CliRunner().invoke(main, ["sql", str(a), "SELECT count(*) AS n FROM ops", "--json"])
    assert res.exit_code == 0 and json.loads(res.output) == [{"n": n_ops}]
    table = CliRunner().invoke(main, ["sql", str(a), "SELECT count(*) AS n FROM ops"])
    assert table.output.split() == ["n", "--", str(n_ops), "(1", "rows)"]


def test_replay_command_verifies_and_reports_bad_input(traces, tmp_path):
    a, _ = traces
    ok = CliRunner().invoke(main, ["replay", str(a)])
    assert ok.exit_code == 0 and "verified" in ok.output
    bad = CliRunner().invoke(main, ["replay", str(tmp_path / "missing.ktrace")])
    assert bad.exit_code == 2 and len(bad.output.strip().splitlines()) == 1


@pytest.mark.parametrize("cmd", [["check"], ["report"], ["sql", "-", "SELECT 1"]])
def test_analysis_commands_on_a_missing_trace_exit_2(tmp_path, cmd):
    args = [cmd[0], str(tmp_path / "nope.ktrace"), *cmd[2:]]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2 and "Traceback" not in result.output
