"""The hardware study's picture (docs/hardware-study.md): a suite of sweeps over ahbm-v3's
shared parts, one row per kernel: latency against the HBM stack, what binds where, and the
Pareto front of latency against the shared bandwidth bought."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from kernbench.plot import plot
from kernbench.plot.study_figure import parts, study_figure
from kernbench.sweep.builtin import SUITES, plan
from kernbench.sweep.driver import kernel_sources
from kernbench.sweep.points import expand


def _sweep(root: Path, name: str, case: str) -> None:
    """A finished sweep's two files, as `kernbench sweep` writes them (data only)."""
    root.mkdir(parents=True)
    (root / "sweep.toml").write_text(f'case = "{case}"\n[hw]\nhbm_total_gbps = [204.8, 819.2]'
                                     "\ntcm_gbps = [64, 1024]\n")
    rows = [{"point_id": f"{name}{i}", "case": case, "hw.hbm_total_gbps": h,
             "hw.tcm_gbps": t, "hw.topology": topo, "hw.n_pe": n, "status": "ok",
             "error": None, "latency_ps": int(1e9 / h + 1e9 / t + 1e6 * n),
             "efficiency": 0.5, "efficiency_bound": "hbm_stack" if h < 500 else "tcm"}
            for i, (h, t, topo, n) in enumerate(
                (h, t, topo, n) for h in (204.8, 819.2) for t in (64, 1024)
                for topo in ("torus2d", "switch") for n in (8, 16))]
    pl.DataFrame(rows).write_parquet(root / "points.parquet")


def test_a_study_suite_draws_a_row_per_kernel_and_its_front(tmp_path):
    _sweep(tmp_path / "S" / "decode", "d", "gqa-decode")
    _sweep(tmp_path / "S" / "triton", "t", "mod:matmul_case")
    (tmp_path / "S" / "notes").mkdir()
    assert [p.name for p in parts(tmp_path / "S")] == ["decode", "triton"]
    fig = study_figure(tmp_path / "S")
    titles = [ax.get_title() for ax in fig.axes]
    assert len(fig.axes) == 6 and titles[0].startswith("decode (gqa-decode): latency")
    binds = [t.get_text() for t in fig.axes[1].texts]
    assert sorted(binds) == ["hbm_stack\n0.50"] * 2 + ["tcm\n0.50"] * 2  # one cell per pair
    assert "Pareto front" in titles[2]
    got = plot(tmp_path / "S", tmp_path / "study.png")
    assert got.kind == "hardware study" and (tmp_path / "study.png").stat().st_size > 0


def test_the_hardware_study_suite_records_each_kernel_once(tmp_path):
    sweeps = plan("hardware-study", tmp_path / "study")
    assert [out.name for _, out in sweeps] == ["decode", "prefill", "ring", "triton"]
    assert SUITES["hardware-study"][-1] == "study-triton"
    for spec, _ in sweeps:
        points = list(expand(spec))
        assert len(points) == 48
        assert len(kernel_sources(points)) == 47  # every point but one is retimed
        assert {k for k, _ in spec.hw} == {"hbm_total_gbps", "tcm_gbps", "topology", "n_pe"}
