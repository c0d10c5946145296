"""``diff``: identity, a tile-size change, replayed values, and --fail-on thresholds."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from kernbench.analyze import diff
from kernbench.analyze.diff import Threshold
from kernbench.errors import BadInputError
from kernbench.trace import Trace

from .conftest import set_cell, write_values


def test_a_trace_against_itself(traces) -> None:
    path = traces("gemm", N=256)
    report = diff(path, path)
    assert report.identical and report.exit_code == 0
    assert report.first_structural is None
    assert "no differences" in report.to_text()
    doc = json.loads(report.to_json())
    assert doc["identical"] is True and doc["latency_ps"]["delta"] == 0


def test_tile_size_change(traces) -> None:
    a, b = traces("gemm", N=256), traces("gemm", N=256, BN=64)
    report = diff(a, b)
    assert not report.identical and report.exit_code == 0
    by_op = {(r["kind"], r["name"]): r for r in report.by_op}
    assert by_op[("gemm", "dot")]["count_a"] == 4 and by_op[("gemm", "dot")]["count_b"] == 8
    assert by_op[("gemm", "dot")]["d_busy_ps"] == (8 - 4) * 288_000  # padded to 128 cols
    assert by_op[("memory", "dma_read")]["d_count"] == 4
    first = report.first_structural
    # seq 0 loads the same A block; seq 1 is the first Bt block, now [64, 256]
    assert (first["pe"], first["seq"]) == (0, 1)
    assert first["a"]["inputs"][0]["shape"] == [128, 256]
    assert first["b"]["inputs"][0]["shape"] == [64, 256]
    assert {"inputs", "output", "nbytes"} <= set(first["fields"])
    eng = {r["engine"]: r for r in report.engines()}
    assert eng["gemm"]["delta"] == by_op[("gemm", "dot")]["d_busy_ps"]
    text = report.to_text()
    assert "first structural difference at pe 0 seq 1" in text
    assert "ops by (kind, name)" in text and "dot" in text


def test_only_in_one_trace(traces, edit_trace) -> None:
    src = traces("gemm", N=256)
    last = Trace.open(src).n_ops - 1
    shorter = edit_trace(src, lambda df: df.filter(pl.col("op_id") != last), n_ops=last)
    first = diff(src, shorter).first_structural
    assert first["a"]["op_id"] == last and first["b"] is None and first["fields"] == []


def _replayed(src: Path, dst: Path, checksums: dict[int, int]) -> Path:
    shutil.copytree(src, dst)
    write_values(dst, checksums)
    return dst


def test_replays_differing_in_one_op(traces, tmp_path: Path) -> None:
    src = traces("scale-exp")
    n = Trace.open(src).n_ops
    base = {i: 1000 + i for i in range(n)}
    a = _replayed(src, tmp_path / "a.ktrace", base)
    b = _replayed(src, tmp_path / "b.ktrace", base | {9: 7})
    report = diff(a, b)
    assert report.values_compared and report.first_structural is None
    v = report.first_value
    assert v["a"]["op_id"] == 9 and v["b"]["checksum"] == 7 and v["n_different"] == 1
    assert "first value difference" in report.to_text() and not report.identical
    assert diff(a, a).first_value is None


def test_values_need_both_replays(traces, tmp_path: Path) -> None:
    src = traces("scale-exp")
    a = _replayed(src, tmp_path / "a.ktrace", {0: 1})
    report = diff(a, src)
    assert not report.values_compared
    assert "not compared" in report.to_text()


def test_fail_on_latency(traces) -> None:
    a, b = traces("gemm", N=256), traces("gemm", N=256, BN=64)
    worse = diff(a, b, fail_on=["latency=+1%"])
    assert worse.thresholds[0].metric == "latency_ps" and worse.thresholds[0].exceeded
    assert worse.exit_code == 1 and "FAIL" in worse.to_text()
    assert diff(b, a, fail_on=["latency=+1%"]).exit_code == 0  # it got faster
    assert diff(b, a, fail_on=["latency=-1%"]).exit_code == 1
    assert diff(a, a, fail_on=["latency=+1%"]).exit_code == 0
    assert diff(a, b, fail_on=["latency=+1000%"]).exit_code == 0


@pytest.mark.parametrize("spec,a,b,exceeded", [
    ("x=+1%", 100, 101, False), ("x=+1%", 100, 101.5, True), ("x=-5%", 100, 94, True),
    ("x=5%", 100, 94, True), ("x=±5%", 100, 104, False), ("x=+10", 100, 111, True),
    ("x=+1%", 0, 1, True), ("x=+1%", 0, 0, False),
])
def test_threshold_semantics(spec: str, a: float, b: float, exceeded: bool) -> None:
    assert Threshold.parse(spec).exceeded(a, b) is exceeded


@pytest.mark.parametrize("spec,match", [
    ("latency", "expected KEY=\\+X%"), ("latency=+x%", "expected KEY"),
    ("nope=+1%", "unknown metric 'nope'"), ("roofline_bound=+1%", "not a number"),
])
def test_bad_fail_on(traces, spec: str, match: str) -> None:
    path = traces("gemm", N=256)
    with pytest.raises(BadInputError, match=match):
        diff(path, path, fail_on=[spec])


def test_structure_ignores_times_and_addresses(traces, edit_trace) -> None:
    src = traces("gemm", N=256)
    moved = edit_trace(src, lambda df: set_cell(df, 5, t_end_ps=10**9), t_end_ps=10**9)
    report = diff(src, moved)
    assert report.first_structural is None
    assert report.metrics_b["latency_ps"] == 10**9
