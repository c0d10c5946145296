"""The built-in milestone suite passes (ADR-0812): its decode sweep, the part that failed,
runs every point; the point it leaves out cannot fit the machine."""

from __future__ import annotations

import polars as pl
import pytest

from kernbench.errors import ScratchOverflowError
from kernbench.kernels.registry import build_case
from kernbench.record.recorder import record
from kernbench.sweep import resolve_spec, run_sweep
from kernbench.sweep.builtin import SUITES
from kernbench.sweep.points import expand
from kernbench.trace.hw import HwConfig


def test_milestone_suite_decode_sweep_runs_every_point(tmp_path):
    assert "milestone-decode" in SUITES["milestone"]
    summary = run_sweep(resolve_spec("milestone-decode"), tmp_path / "decode", workers=1)
    assert summary.exit_code == 0, summary.to_text()
    points = pl.read_parquet(tmp_path / "decode" / "points.parquet")
    assert points.height == 10 and set(points["status"]) == {"ok"}
    pairs = set(points.select("T_kv", "stream").iter_rows())
    assert pairs == {(256, "lazy"), (512, "lazy"), (256, "composite"), (512, "composite"),
                     (1024, "composite")}


def test_milestone_decode_leaves_out_the_lazy_tile_that_cannot_fit(tmp_path):
    """Lazy decode double-buffers K and V: four [T_kv, D] bf16 buffers, at T_kv = 1024 the
    whole scratch budget before Q is counted."""
    d, t_kv = 128, 1024
    assert 4 * t_kv * d * 2 == HwConfig().kernel_scratch_bytes
    with pytest.raises(ScratchOverflowError, match="scratch overflow"):
        record(build_case("gqa-decode", {"S_kv": 4096, "T_kv": t_kv, "stream": "lazy"}),
               tmp_path / "d.ktrace")
    planned = {(dict(p.params)["T_kv"], dict(p.params)["stream"])
               for p in expand(resolve_spec("milestone-decode"))}
    assert (t_kv, "lazy") not in planned and (t_kv, "composite") in planned
