"""``kernbench diff`` of two sweeps: a gate that compared nothing fails (ADR-0810), and
``--pair params`` pairs points across hardware."""

from __future__ import annotations

import json

import polars as pl
import pytest
from click.testing import CliRunner

from kernbench.cli import main
from kernbench.sweep import resolve_spec, run_sweep

BASE = ["M=128", "N=128,256", "K=256"]


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):
    """A: two gemm points on the default hardware; B: the same points with a faster HBM;
    C: both hardware configs in one sweep."""
    root = tmp_path_factory.mktemp("diff")
    for name, extra in (("A", []), ("B", ["hw.hbm_gbps=512"]), ("C", ["hw.hbm_gbps=64,512"])):
        run_sweep(resolve_spec("gemm", [*BASE, *extra]), root / name, workers=1)
    return root


def _diff(*args):
    return CliRunner().invoke(main, ["diff", *map(str, args)])


def test_diff_fail_on_with_no_common_points_fails_in_one_line(sweeps):
    res = _diff(sweeps / "A", sweeps / "B", "--fail-on", "latency=+1%")
    assert res.exit_code == 1, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1
    assert "FAIL: --fail-on latency=+1% compared nothing (0 common points, 2 only in A, " \
           "2 only in B)" in lines[0]
    assert "they differ in hw.hbm_gbps" in lines[0] and "--pair params pairs 2" in lines[0]
    doc = json.loads(_diff(sweeps / "A", sweeps / "B", "--fail-on", "latency=+1%",
                           "--json").output)
    assert doc["nothing_compared"] is True and doc["compared"] == 0 and doc["exit_code"] == 1


def test_diff_without_fail_on_says_why_nothing_paired_and_passes(sweeps):
    res = _diff(sweeps / "A", sweeps / "B")
    assert res.exit_code == 0, res.output
    assert "0 common points" in res.output and "--pair params pairs 2" in res.output


def test_diff_pair_params_pairs_points_across_hardware(sweeps):
    res = _diff(sweeps / "A", sweeps / "B", "--pair", "params", "--fail-on", "latency=+1%")
    assert res.exit_code == 0, res.output
    assert "2 common points, 0 only in A, 0 only in B (paired by case and parameters)" \
        in res.output
    a = pl.read_parquet(sweeps / "A" / "points.parquet")
    b = pl.read_parquet(sweeps / "B" / "points.parquet")
    for n in (128, 256):
        ia = a.filter(pl.col("N") == n)
        ib = b.filter(pl.col("N") == n)
        assert f"{ia['point_id'][0]}->{ib['point_id'][0]}" in res.output
    # the faster HBM is faster: a "fell by more than 1%" gate fails on the pairs
    slower_gate = _diff(sweeps / "A", sweeps / "B", "--pair", "params", "--fail-on",
                        "latency=-1%")
    assert slower_gate.exit_code == 1 and "fail-on exceeded" in slower_gate.output
    assert (b["latency_ps"] < a["latency_ps"]).all()


def test_diff_pair_params_refuses_points_differing_only_in_hardware(sweeps):
    res = _diff(sweeps / "A", sweeps / "C", "--pair", "params")
    assert res.exit_code == 2
    assert ("sweep B has several points with case=gemm M=128 N=128 K=256 (they differ in "
            "hw.hbm_gbps)") in res.output


def test_diff_pair_on_two_traces_is_bad_input(sweeps):
    trace = next((sweeps / "A" / "points").iterdir())
    res = _diff(trace, trace, "--pair", "params")
    assert res.exit_code == 2 and "only two sweeps pair points" in res.output


def test_diff_fail_on_with_only_points_failed_in_both_compared_nothing(tmp_path):
    failing = ["M=128", "N=128", "K=8192"]  # a 2 MiB A tile: fails at record
    run_sweep(resolve_spec("gemm", failing), tmp_path / "F", workers=1)
    res = _diff(tmp_path / "F", tmp_path / "F", "--fail-on", "latency=+1%")
    assert res.exit_code == 1 and "compared nothing (1 common points" in res.output
