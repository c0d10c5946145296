"""Shared sweep specs: small points (milliseconds each) so whole sweeps stay cheap."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from kernbench.sweep import resolve_spec
from kernbench.sweep.table import WALL_COLUMNS

#: gemm points: DMA reads always outweigh writes, so every metric has one answer
GEMM = ["M=128", "N=128,256", "K=256", "hw.hbm_gbps=64,128"]
#: gemm with K=8192 (a 2 MiB A tile in 1 MiB of scratch) fails at record; K=256 runs
FAILING = ["M=128", "N=128", "K=256,8192"]


@pytest.fixture
def gemm_spec():
    return resolve_spec("gemm", GEMM, replay=True, check=True)


@pytest.fixture
def failing_spec():
    return resolve_spec("gemm", FAILING, replay=True)


def points_without_walls(root: Path) -> pl.DataFrame:
    return pl.read_parquet(Path(root) / "points.parquet").drop(WALL_COLUMNS)
