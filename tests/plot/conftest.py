"""Fixtures for the picture tests: a small sweep directory built from real recordings."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import kernbench as kb
from kernbench.kernels.registry import build_case

GOLDEN = Path(__file__).resolve().parents[2] / "traces"


@pytest.fixture(scope="session")
def sweep_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sweep directory (docs/sweeps.md): scale-exp over n x tile, one failed point, the metrics of
    each recorded trace as its row."""
    root = tmp_path_factory.mktemp("sweep") / "scale.sweep"
    (root / "points").mkdir(parents=True)
    (root / "sweep.toml").write_text('case = "scale-exp"\n[grid]\nn = [1024, 2048, 4096]\n'
                                     'tile = [256, 512]\n[stages]\nreplay = false\n')
    rows = []
    for n in (1024, 2048, 4096):
        for tile in (256, 512):
            pid = f"p{n}x{tile}"
            trace = kb.record(build_case("scale-exp", {"n": n, "tile": tile}),
                              root / "points" / f"{pid}.ktrace")
            m = kb.analyze.metrics(trace)
            rows.append({"point_id": pid, "case": "scale-exp", "n": n, "tile": tile,
                         "status": "ok", "error": None, **m, "replay_ok": None, "wall_s": 0.1})
    failed = {k: None for k in rows[0]}
    failed.update(point_id="pbad", case="scale-exp", n=8192, tile=4096, status="failed",
                  error="ScratchOverflowError: scratch overflow")
    pl.DataFrame([*rows, failed], infer_schema_length=None).write_parquet(
        root / "points.parquet")
    return root
