"""The golden traces in traces/ (ahbm-v1) and their twins in traces/v2/ (ahbm-v2): re-recorded
afresh, they must be identical in structure and timing (regenerate on purpose with
``python -m kernbench.kernels.golden traces/``)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import kernbench as kb
from kernbench.analyze import check, diff
from kernbench.kernels.golden import GOLDEN, TWIN_PRESET, record_golden

TRACES = Path(__file__).resolve().parents[1] / "traces"
TIMING = ["op_id", "pe", "seq", "name", "t_issue_ps", "t_start_ps", "t_end_ps", "busy_ps",
          "wait_ps", "scratch_cursor"]


def test_every_builtin_case_has_a_golden_trace_and_a_v2_twin_within_360_kb():
    cases = {case for case, _ in GOLDEN.values()}
    assert cases == set(kb.registry())
    assert {p.name for p in (TRACES / "v2").glob("*.ktrace")} == {f"{n}.ktrace" for n in GOLDEN}
    size = sum(f.stat().st_size for f in TRACES.rglob("*") if f.is_file())
    assert size <= 360 * 1024


@pytest.mark.parametrize("twin", [False, True], ids=["ahbm-v1", "ahbm-v2"])
@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_recording_afresh_matches_the_golden_trace(tmp_path, name, twin):
    folder = TRACES / "v2" if twin else TRACES
    golden = kb.Trace.open(folder / f"{name}.ktrace")
    assert golden.manifest["hw"]["name"] == (TWIN_PRESET if twin else "ahbm-v1")
    fresh = (record_golden(name, tmp_path / f"{name}.ktrace", TWIN_PRESET) if twin
             else record_golden(name, tmp_path / f"{name}.ktrace"))
    report = diff(golden, fresh)
    assert report.first_structural is None, report.to_text()
    assert report.identical, report.to_text()
    a = golden.ops.select(TIMING).with_columns(pl.col("name").cast(pl.String))
    b = fresh.ops.select(TIMING).with_columns(pl.col("name").cast(pl.String))
    assert a.equals(b)
    assert golden.manifest["params"] == fresh.manifest["params"]
    assert check(golden).exit_code == 0
