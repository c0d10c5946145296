"""A Triton case goes through the whole pipeline like any other (docs/triton.md): the command line
records and replays it (``--case module:factory`` rebuilds it), a sweep over an autotuned
kernel's ``config`` is one line of a spec, and ``diff`` and ``plot`` read the results."""

from __future__ import annotations

import json

from click.testing import CliRunner

from kernbench.cli import main

FACTORY = "tests.triton.kernels.autotuned:case"


def _cli(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_the_command_line_records_and_replays_a_triton_factory(tmp_path) -> None:
    out = _cli("record", FACTORY, "-p", "n=700", "-o", str(tmp_path / "t.ktrace"))
    assert "t.ktrace" in out
    verdict = _cli("replay", str(tmp_path / "t.ktrace"), "--case", FACTORY)
    assert "verified" in verdict and "out_ptr" in verdict


def test_a_sweep_over_config_is_one_line_and_diff_and_plot_read_it(tmp_path) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(f'case = "{FACTORY}"\n[grid]\nconfig = [0, 1]\n'
                    "[stages]\nreplay = true\n")
    _cli("sweep", str(spec), "-o", str(tmp_path / "s.sweep"), "--workers", "1")
    rows = json.loads(_cli("report", str(tmp_path / "s.sweep"), "--json"))["points"]
    assert sorted(r["config"] for r in rows) == [0, 1]
    assert all(r["status"] == "ok" and r["replay_ok"] for r in rows)
    lat = {r["config"]: r["latency_ps"] for r in rows}
    assert lat[0] != lat[1]  # 4 programs of 256 against 16 of 64: different timelines
    traces = sorted((tmp_path / "s.sweep").rglob("*.ktrace"))
    assert len(traces) == 2
    diff = json.loads(_cli("diff", str(traces[0]), str(traces[1]), "--json"))
    assert diff
    _cli("plot", str(tmp_path / "s.sweep"), "-o", str(tmp_path / "s.png"))
    _cli("plot", str(traces[0]), "-o", str(tmp_path / "t.png"))
    assert (tmp_path / "s.png").stat().st_size > 0 and (tmp_path / "t.png").stat().st_size > 0
