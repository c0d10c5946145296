"""``kernbench sweep`` over ``hw.engine_arbitration`` (issue 41, docs/hardware-model.md
"Programs that wait"): both policies are points of one sweep, crossed with presets and
resident programs, and a policy the machine does not have is one line of bad input."""

from __future__ import annotations

import polars as pl
from click.testing import CliRunner

from kernbench.cli import main

CHAIN = "kernbench.bench.concurrency_kernels:tile_chain_case"
SMALL = ["-p", "programs=32", "-p", "tiles=4", "-p", "n=1024"]


def test_sweep_over_engine_arbitration_records_both_policies(tmp_path):
    out = tmp_path / "A"
    res = CliRunner().invoke(main, ["sweep", CHAIN, *SMALL,
                                    "-p", "hw.engine_arbitration=in_order,ready_first",
                                    "-p", "hw.preset=ahbm-v2,ahbm-v3",
                                    "-o", str(out), "--workers", "1"])
    assert res.exit_code == 0, res.output
    assert "4 points (4 ok, 0 failed, 0 resumed" in res.output
    points = pl.read_parquet(out / "points.parquet")
    latency = {(r["hw.preset"], r["hw.engine_arbitration"]): r["latency_ps"]
               for r in points.iter_rows(named=True)}
    assert set(latency) == {(p, a) for p in ("ahbm-v2", "ahbm-v3")
                            for a in ("in_order", "ready_first")}
    # 4 resident programs per PE, each a chain of dependent ops: ready_first hides one
    # program's wait behind another's, in_order does not
    assert latency["ahbm-v2", "ready_first"] * 2 < latency["ahbm-v2", "in_order"], latency
    assert latency["ahbm-v3", "ready_first"] < latency["ahbm-v3", "in_order"], latency
    report = CliRunner().invoke(main, ["report", str(out)])
    assert report.exit_code == 0 and "hw.engine_arbitration" in report.output


def test_sweep_over_an_unknown_arbitration_policy_is_bad_input(tmp_path):
    res = CliRunner().invoke(main, ["sweep", CHAIN, *SMALL,
                                    "-p", "hw.engine_arbitration=in_order,fifo",
                                    "-o", str(tmp_path / "B")])
    assert res.exit_code == 2 and "'fifo'" in res.output and "engine_arbitration" in res.output
    assert "Traceback" not in res.output and not (tmp_path / "B").exists()
