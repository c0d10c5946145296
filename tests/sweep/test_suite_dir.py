"""A suite's output directory (``kernbench sweep milestone -o M``, what ``panel --best``
takes): ``report`` reads every sweep in it; the commands that read one trace or one sweep
say so in one line, naming the sweeps, instead of "not a trace"."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from kernbench.cli import main
from kernbench.sweep import resolve_spec, run_sweep


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    root = tmp_path_factory.mktemp("suite") / "M"
    run_sweep(resolve_spec("scale-exp", ["tile=512,1024"]), root / "exp", workers=1)
    run_sweep(resolve_spec("softmax", ["rows=8", "programs=2,4"]), root / "soft", workers=1)
    return root


def test_report_of_a_suite_directory_reports_each_sweep(suite):
    res = CliRunner().invoke(main, ["report", str(suite)])
    assert res.exit_code == 0, res.output
    assert res.output.startswith(f"suite {suite}: 2 sweeps")
    assert f"sweep {suite / 'exp'} (case scale-exp): 2 points" in res.output
    assert f"sweep {suite / 'soft'} (case softmax): 2 points" in res.output
    doc = json.loads(CliRunner().invoke(main, ["report", str(suite), "--json",
                                               "--sort", "latency"]).output)
    assert [len(s["points"]) for s in doc["sweeps"]] == [2, 2]
    for s in doc["sweeps"]:
        lat = [p["latency_ps"] for p in s["points"]]
        assert lat == sorted(lat)


@pytest.mark.parametrize("argv", [
    ["plot", "{M}", "-o", "{M}/../m.png"], ["check", "{M}"], ["sql", "{M}", "SELECT 1"],
    ["export", "{M}", "-o", "{M}/../m.json"], ["diff", "{M}", "{M}"],
    ["report", "{M}", "--html", "{M}/../m.html"]], ids=lambda a: a[0])
def test_one_sweep_commands_name_the_suites_sweeps(suite, argv):
    res = CliRunner().invoke(main, [a.format(M=suite) for a in argv])
    assert res.exit_code == 2
    assert len(res.output.strip().splitlines()) == 1 and "not a trace;" not in res.output
    assert f"'{suite}' is a suite of 2 sweeps (exp, soft), not a trace or a sweep; name one " \
           f"sweep, e.g. `kernbench {argv[0]} {suite / 'exp'} ...`" in res.output
    assert not any((suite.parent / f"m.{ext}").exists() for ext in ("png", "json", "html"))
