"""Analysis over a whole sweep: report (--sort, --pareto, best), check, diff, sql."""

from __future__ import annotations

import json
import shutil

import polars as pl
import pytest
from click.testing import CliRunner

from kernbench.cli import main
from kernbench.errors import BadInputError
from kernbench.sweep import run_sweep
from kernbench.sweep.report import best_points, sweep_report
from kernbench.sweep.table import write_points
from kernbench.trace import Trace


@pytest.fixture(scope="module")
def gemm_sweep(tmp_path_factory):
    from kernbench.sweep import resolve_spec

    from .conftest import GEMM

    out = tmp_path_factory.mktemp("sweeps") / "G"
    run_sweep(resolve_spec("gemm", GEMM), out, workers=2)
    return out


@pytest.fixture(scope="module")
def failing_sweep(tmp_path_factory):
    from kernbench.sweep import resolve_spec

    from .conftest import FAILING

    out = tmp_path_factory.mktemp("sweeps") / "F"
    run_sweep(resolve_spec("gemm", FAILING), out, workers=2)
    return out


def test_sql_ops_spans_every_trace_with_point_id(gemm_sweep):
    res = CliRunner().invoke(main, ["sql", str(gemm_sweep), "--json",
                                    "SELECT point_id, COUNT(*) AS n, MAX(t_end_ps) AS t_end "
                                    "FROM ops GROUP BY point_id ORDER BY point_id"])
    assert res.exit_code == 0, res.output
    import json

    rows = json.loads(res.output)
    points = pl.read_parquet(gemm_sweep / "points.parquet")
    assert [r["point_id"] for r in rows] == sorted(points["point_id"].to_list())
    for r in rows:
        trace = Trace.open(gemm_sweep / "points" / f"{r['point_id']}.ktrace")
        assert r["n"] == trace.n_ops == trace.ops.height
        assert r["t_end"] == trace.t_end_ps


def test_sql_joins_points_and_ops(gemm_sweep):
    from kernbench.sweep.query import sweep_sql

    res = sweep_sql(gemm_sweep, 'SELECT p."hw.hbm_gbps" AS hbm, SUM(o.nbytes) AS bytes FROM ops o '
                                "JOIN points p ON o.point_id = p.point_id WHERE o.name = "
                                "'dma_read' GROUP BY hbm ORDER BY hbm")
    points = pl.read_parquet(gemm_sweep / "points.parquet")
    want = points.group_by("hw.hbm_gbps").agg(pl.col("dma_read_bytes").sum()).sort("hw.hbm_gbps")
    assert res.frame["bytes"].to_list() == want["dma_read_bytes"].to_list()
    with pytest.raises(BadInputError, match="tables: points"):
        sweep_sql(gemm_sweep, "SELECT * FROM nowhere")


def test_sql_shared_spans_every_point_with_point_id(gemm_sweep, tmp_path):
    from kernbench.sweep.query import sweep_sql
    from tests.conftest import add_shared

    root = tmp_path / "G"
    shutil.copytree(gemm_sweep, root)
    ids = sorted(pl.read_parquet(root / "points.parquet")["point_id"].to_list())
    add_shared(root / "points" / f"{ids[1]}.ktrace", [(2, "hbm", "hbm.ch5", 300),
                                                      (2, "tcm", "tcm.pe0", 40)])
    res = sweep_sql(root, "SELECT point_id, part, SUM(wait_ps) AS w FROM shared "
                          "GROUP BY point_id, part ORDER BY part")
    assert res.frame.rows() == [(ids[1], "hbm", 300), (ids[1], "tcm", 40)]
    empty = sweep_sql(root, "SELECT COUNT(*) AS n FROM shared s JOIN points p USING "
                            f"(point_id) WHERE p.point_id = '{ids[0]}'")
    assert empty.frame.item() == 0


def test_sweep_sql_reads_no_file_a_query_names(gemm_sweep):
    from kernbench.sweep.query import sweep_sql

    with pytest.raises(BadInputError, match="'read_csv' reads files or URLs"):
        sweep_sql(gemm_sweep, "SELECT * FROM read_csv('/etc/passwd')")


def test_report_sort_puts_the_best_first(gemm_sweep):
    rep = sweep_report(gemm_sweep, sort="latency")
    lat = rep.points["latency_ps"].to_list()
    assert lat == sorted(lat)
    eff = sweep_report(gemm_sweep, sort="efficiency").points["efficiency"].to_list()
    assert eff == sorted(eff, reverse=True)  # higher is better
    assert "latency_ps" in rep.to_text().splitlines()[2]


def test_pareto_front_matches_brute_force(gemm_sweep):
    points = pl.read_parquet(gemm_sweep / "points.parquet")
    rows = points.select("point_id", "latency_ps", "efficiency").rows()
    front = {a[0] for a in rows if not any(
        b[1] <= a[1] and b[2] >= a[2] and (b[1] < a[1] or b[2] > a[2]) for b in rows)}
    rep = sweep_report(gemm_sweep, pareto="latency,efficiency")
    assert set(rep.points["point_id"]) == front and front
    with pytest.raises(BadInputError, match="two or more"):
        sweep_report(gemm_sweep, pareto="latency")
    with pytest.raises(BadInputError, match="unknown metric"):
        sweep_report(gemm_sweep, sort="nope")


def test_best_point_per_group(gemm_sweep):
    best = best_points(gemm_sweep, metric="latency_ps", per=["N"])
    points = pl.read_parquet(gemm_sweep / "points.parquet")
    want = points.group_by("N").agg(pl.col("latency_ps").min()).sort("N")
    assert best.select("N", "latency_ps").equals(want)


def test_check_names_failing_points(failing_sweep, gemm_sweep, tmp_path):
    runner = CliRunner()
    res = runner.invoke(main, ["check", str(failing_sweep)])
    bad = pl.read_parquet(failing_sweep / "points.parquet").filter(pl.col("status") == "failed")
    assert res.exit_code == 1 and bad["point_id"][0] in res.output
    assert "ScratchOverflowError" in res.output
    ok = runner.invoke(main, ["check", str(gemm_sweep)])
    assert ok.exit_code == 0, ok.output
    points = pl.read_parquet(gemm_sweep / "points.parquet").sort("latency_ps")
    limit = points["latency_ps"][-1]  # only the slowest point breaks latency < limit
    rules = tmp_path / "r.toml"
    rules.write_text(f'[[rule]]\nmetric = "latency"\nop = "<"\nvalue = {limit}\n')
    res = runner.invoke(main, ["check", str(gemm_sweep), "--rules", str(rules)])
    assert res.exit_code == 1
    assert points["point_id"][-1] in res.output
    assert not any(pid in res.output for pid in points["point_id"][:-1])


def test_diff_point_by_point_with_fail_on(gemm_sweep, tmp_path):
    runner = CliRunner()
    same = runner.invoke(main, ["diff", str(gemm_sweep), str(gemm_sweep),
                                "--fail-on", "latency=+1%"])
    assert same.exit_code == 0, same.output
    slower = tmp_path / "B"
    shutil.copytree(gemm_sweep, slower)
    points = pl.read_parquet(slower / "points.parquet")
    victim = points["point_id"][2]
    points = points.with_columns(
        pl.when(pl.col("point_id") == victim).then(pl.col("latency_ps") * 2)
        .otherwise(pl.col("latency_ps")).alias("latency_ps"))
    write_points(slower, points)
    res = runner.invoke(main, ["diff", str(gemm_sweep), str(slower), "--fail-on", "latency=+1%"])
    assert res.exit_code == 1
    exceeded = res.output.split("fail-on exceeded:")[1]
    assert victim in exceeded and len(exceeded.strip().splitlines()) == 1
    res = runner.invoke(main, ["diff", str(gemm_sweep), str(slower), "--fail-on", "latency=-1%"])
    assert res.exit_code == 0


def test_report_and_cli_on_sweeps(gemm_sweep, tmp_path):
    runner = CliRunner()
    res = runner.invoke(main, ["report", str(gemm_sweep), "--pareto", "latency,dma_read_bytes"])
    assert res.exit_code == 0 and "Pareto front" in res.output
    res = runner.invoke(main, ["report", str(tmp_path), "--sort", "latency"])
    assert res.exit_code == 2 and "not a sweep" in res.output


def test_check_sweep_shows_the_measured_value(gemm_sweep, tmp_path):
    """A failed rule of a sweep point shows its actual value, as single-trace check does."""
    points = pl.read_parquet(gemm_sweep / "points.parquet").sort("latency_ps")
    slowest = points.row(-1, named=True)
    rules = tmp_path / "r.toml"
    rules.write_text(f'[[rule]]\nmetric = "latency"\nop = "<"\nvalue = {slowest["latency_ps"]}\n')
    res = CliRunner().invoke(main, ["check", str(gemm_sweep), "--rules", str(rules)])
    assert res.exit_code == 1
    want = f"rule latency < {slowest['latency_ps']} (actual {slowest['latency_ps']})"
    line = next(x for x in res.output.splitlines() if x.startswith(slowest["point_id"]))
    assert line.rstrip().endswith(want)
    single = CliRunner().invoke(main, ["check", str(gemm_sweep / "points" / (
        slowest["point_id"] + ".ktrace")), "--rules", str(rules)])
    assert f"{slowest['latency_ps']}  FAIL" in single.output  # the same figure
    doc = json.loads(CliRunner().invoke(main, ["check", str(gemm_sweep), "--rules", str(rules),
                                               "--json"]).output)
    bad = next(p for p in doc["points"] if p["point_id"] == slowest["point_id"])
    assert bad["rules"][0]["actual"] == slowest["latency_ps"] and not bad["rules"][0]["ok"]
