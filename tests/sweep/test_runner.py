"""Running a sweep on the local pool: the directory, failed points, resuming, SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from kernbench.analyze import metrics
from kernbench.errors import BadInputError
from kernbench.sweep import resolve_spec, run_sweep
from kernbench.sweep.points import expand
from kernbench.trace import Trace


def _trace_dirs(root: Path) -> list[Path]:
    return sorted((root / "points").glob("*.ktrace"))


def test_sweep_directory_holds_spec_traces_and_points_table(tmp_path, gemm_spec):
    out = tmp_path / "S"
    summary = run_sweep(gemm_spec, out, workers=2)
    assert (summary.total, summary.ok, summary.failed, summary.exit_code) == (4, 4, 0, 0)
    assert (out / "sweep.toml").read_text() == gemm_spec.to_toml()
    points = pl.read_parquet(out / "points.parquet")
    ids = [p.point_id for p in expand(gemm_spec)]
    assert points["point_id"].to_list() == ids
    assert [p.name for p in _trace_dirs(out)] == sorted(f"{i}.ktrace" for i in ids)
    assert {"N", "hw.hbm_gbps", "status", "error", "replay_ok", "wall_s"} <= set(points.columns)
    for row in points.iter_rows(named=True):
        trace = Trace.open(out / "points" / f"{row['point_id']}.ktrace")
        assert trace.manifest["hw"]["hbm_gbps"] == row["hw.hbm_gbps"]
        assert trace.manifest["params"]["N"] == row["N"]
        m = metrics(trace)
        assert {k: row[k] for k in m} == m  # every metric, as the trace gives it
        assert row["replay_ok"] is True and row["check_ok"] is True
    # a slower HBM is never faster, at the same N
    fast = points.filter(pl.col("hw.hbm_gbps") == 128).sort("N")["latency_ps"].to_numpy()
    slow = points.filter(pl.col("hw.hbm_gbps") == 64).sort("N")["latency_ps"].to_numpy()
    assert np.all(slow > fast)


def test_one_failing_point_fails_alone(tmp_path, failing_spec):
    out = tmp_path / "F"
    summary = run_sweep(failing_spec, out, workers=2)
    assert (summary.ok, summary.failed, summary.exit_code) == (1, 1, 1)
    points = pl.read_parquet(out / "points.parquet").sort("K")
    assert points["status"].to_list() == ["ok", "failed"]
    bad = points.row(1, named=True)
    assert bad["error"].startswith("ScratchOverflowError: ") and "\n" not in bad["error"]
    assert bad["latency_ps"] is None and bad["replay_ok"] is None
    assert points.row(0, named=True)["replay_ok"] is True
    assert len(_trace_dirs(out)) == 1


def test_rerun_resumes_without_re_recording(tmp_path, gemm_spec):
    out = tmp_path / "S"
    run_sweep(gemm_spec, out, workers=1)
    stamps = {p.name: (p / "manifest.json").stat().st_mtime_ns for p in _trace_dirs(out)}
    before = pl.read_parquet(out / "points.parquet")
    summary = run_sweep(gemm_spec, out, workers=1)
    assert (summary.resumed, summary.ok) == (4, 4)
    assert {p.name: (p / "manifest.json").stat().st_mtime_ns for p in _trace_dirs(out)} == stamps
    assert pl.read_parquet(out / "points.parquet").equals(before)


def test_a_tampered_point_is_not_trusted_and_runs_again(tmp_path, gemm_spec):
    out = tmp_path / "S"
    run_sweep(gemm_spec, out, workers=1)
    victim = _trace_dirs(out)[0]
    with open(victim / "ops.parquet", "ab") as f:
        f.write(b"x")
    (out / "points" / ".stage-999999").mkdir()  # a dead driver's staging folder
    summary = run_sweep(gemm_spec, out, workers=1)
    assert (summary.resumed, summary.ok) == (3, 4)
    Trace.open(victim)  # verifies again
    assert not (out / "points" / ".stage-999999").exists()


def test_a_different_spec_into_the_same_directory_is_refused(tmp_path, gemm_spec):
    out = tmp_path / "S"
    run_sweep(gemm_spec, out, workers=1)
    before = sorted(p.name for p in (out / "points").iterdir())
    with pytest.raises(BadInputError, match="different spec"):
        run_sweep(resolve_spec("gemm", ["N=128"]), out, workers=1)
    assert sorted(p.name for p in (out / "points").iterdir()) == before
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "x.txt").write_text("mine")
    with pytest.raises(BadInputError, match="not a sweep"):
        run_sweep(gemm_spec, tmp_path / "other", workers=1)


def test_sigkill_mid_run_then_rerun_runs_every_point_once(tmp_path):
    out = tmp_path / "K"
    params = ["iters=" + ",".join(str(i) for i in range(1500, 1520))]
    cmd = [sys.executable, "-m", "kernbench.cli", "sweep", "small-ops", *sum(
        (["-p", p] for p in params), []), "-o", str(out), "--workers", "2"]
    proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    try:
        while len(_trace_dirs(out)) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        finished = {p.name: (p / "point.json").stat().st_ino for p in _trace_dirs(out)}
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and its workers, mid-run
        proc.wait()
    assert 3 <= len(finished) < 20, "the sweep was not killed mid-run"
    spec = resolve_spec("small-ops", params)
    summary = run_sweep(spec, out, workers=2)
    assert summary.ok == summary.total == 20 and summary.resumed >= len(finished)
    points = pl.read_parquet(out / "points.parquet")
    assert points["point_id"].n_unique() == points.height == 20
    assert sorted(points["iters"].to_list()) == list(range(1500, 1520))
    dirs = _trace_dirs(out)
    assert len(dirs) == 20 and not list((out / "points").glob(".*"))
    for name, ino in finished.items():  # nothing finished was recorded again
        assert (out / "points" / name / "point.json").stat().st_ino == ino
    for d in dirs:
        body = json.loads((d / "point.json").read_text())
        assert body["point_id"] == d.name.removesuffix(".ktrace")
