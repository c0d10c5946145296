"""``kernbench sweep`` on the command line: exit codes, bad input, suites, panel --best."""

from __future__ import annotations

import polars as pl
from click.testing import CliRunner

from kernbench.cli import main
from kernbench.sweep.builtin import SUITES, plan

from .conftest import FAILING, GEMM


def _p(items):
    return sum((["-p", i] for i in items), [])


def test_sweep_cli_ok_then_failed_point_exits_1(tmp_path):
    runner = CliRunner()
    res = runner.invoke(main, ["sweep", "gemm", *_p(GEMM), "-o", str(tmp_path / "G"),
                               "--workers", "2"])
    assert res.exit_code == 0, res.output
    assert "4 points (4 ok, 0 failed, 0 resumed, 2 retimed)" in res.output
    res = runner.invoke(main, ["sweep", "gemm", *_p(FAILING), "-o", str(tmp_path / "F"),
                               "--workers", "2"])
    assert res.exit_code == 1 and "1 failed" in res.output
    best = runner.invoke(main, ["panel", "--best", str(tmp_path / "G")])
    fastest = pl.read_parquet(tmp_path / "G" / "points.parquet").sort("latency_ps").row(
        0, named=True)
    assert best.exit_code == 0 and fastest["point_id"] in best.output


def test_sweep_cli_bad_input_is_exit_2_and_writes_nothing(tmp_path):
    runner = CliRunner()
    for args, msg in ((["nope"], "unknown case 'nope'"),
                      (["gemm", "-p", "Q=1,2"], "no parameter"),
                      (["gemm", "-p", "N"], "KEY=V1,V2"),
                      ([str(tmp_path / "missing.toml")], "missing.toml"),
                      (["gemm", "--rules", str(tmp_path / "nope.toml")], "nope.toml")):
        res = runner.invoke(main, ["sweep", *args, "-o", str(tmp_path / "S")])
        assert res.exit_code == 2, (args, res.output)
        assert msg in res.output and "Traceback" not in res.output
        assert not (tmp_path / "S").exists()


def test_suite_plans_one_sweep_per_part(tmp_path):
    pairs = plan("milestone", tmp_path / "M")
    assert [p.name for _, p in pairs] == ["decode", "decode-tile", "prefill", "ring",
                                          "ring-combine", "ring-causal"]
    assert [s.case for s, _ in pairs] == (["gqa-decode"] * 2 + ["gqa-prefill"]
                                          + ["ring-attention"] * 3)
    assert len(pairs) == len(SUITES["milestone"])
