"""The picture of a hardware study (docs/hardware-study.md): a suite of sweeps, one per
kernel, over ahbm-v3's shared parts (``hw.hbm_total_gbps``, ``hw.tcm_gbps``,
``hw.topology``, ``hw.n_pe``). Per kernel, one row: latency against the HBM stack's
bandwidth (a line per TCM bandwidth), which ceiling binds where (the roofline's binding part
over HBM x TCM bandwidth), and the Pareto front of latency against the shared bandwidth the
hardware buys. Reads each sweep's ``points.parquet`` and ``sweep.toml`` only."""

from __future__ import annotations

from pathlib import Path

import polars as pl
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from kernbench.plot.sweep_figure import is_sweep, load_points, pareto_front

#: the knobs a study sweeps: the HBM stack and TCM bandwidths (drawn), topology and PEs
KNOBS = ("hw.hbm_total_gbps", "hw.tcm_gbps", "hw.topology", "hw.n_pe")
#: a binding ceiling's colour (``efficiency_bound``: an engine or a shared part)
BINDS = {"hbm_stack": "#d62728", "tcm": "#ff7f0e", "links": "#9467bd", "dma_rd": "#e377c2",
         "dma_wr": "#8c564b", "gemm": "#1f77b4", "math": "#2ca02c", "link_tx": "#17becf"}


def parts(path: Path) -> list[Path]:
    """The sweeps of a study: the suite's sweeps that vary every knob."""
    if not path.is_dir() or is_sweep(path):
        return []
    found = []
    for p in sorted(q for q in path.iterdir() if is_sweep(q)):
        cols = pl.read_parquet_schema(p / "points.parquet")
        if all(k in cols for k in KNOBS):
            found.append(p)
    return found


def _base(points: pl.DataFrame) -> tuple[pl.DataFrame, str]:
    """The points at the study's first topology and PE count (where two knobs are drawn)."""
    topo, n_pe = points["hw.topology"][0], points["hw.n_pe"][0]
    sel = points.filter((pl.col("hw.topology") == topo) & (pl.col("hw.n_pe") == n_pe))
    return sel, f"{topo}, {n_pe} PEs"


def draw_latency(ax: Axes, points: pl.DataFrame, where: str) -> None:
    for tcm in sorted(points["hw.tcm_gbps"].unique().to_list()):
        part = points.filter(pl.col("hw.tcm_gbps") == tcm).sort("hw.hbm_total_gbps")
        ax.plot(part["hw.hbm_total_gbps"].to_list(), (part["latency_ps"] * 1e-6).to_list(),
                "o-", ms=4, lw=1, label=f"TCM {tcm:g} GB/s")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("HBM stack GB/s (hbm_total_gbps)")
    ax.set_ylabel("latency (µs)")
    ax.set_title(f"latency ({where})", fontsize=9)
    ax.grid(True, color="#eeeeee")
    ax.legend(fontsize=6, frameon=False)


def draw_binds(ax: Axes, points: pl.DataFrame, where: str) -> None:
    """What binds where: a cell per (HBM, TCM) bandwidth, coloured by the binding ceiling
    and labelled with the efficiency against it."""
    hbm = sorted(points["hw.hbm_total_gbps"].unique().to_list())
    tcm = sorted(points["hw.tcm_gbps"].unique().to_list())
    for row in points.iter_rows(named=True):
        x, y = hbm.index(row["hw.hbm_total_gbps"]), tcm.index(row["hw.tcm_gbps"])
        bound = str(row.get("efficiency_bound") or "?")
        ax.add_patch(_cell(x, y, BINDS.get(bound, "#7f7f7f")))
        ax.text(x, y, f"{bound}\n{row['efficiency']:.2f}", ha="center", va="center",
                fontsize=6, color="white")
    ax.set_xlim(-0.5, len(hbm) - 0.5)
    ax.set_ylim(-0.5, len(tcm) - 0.5)
    ax.set_xticks(range(len(hbm)), [f"{v:g}" for v in hbm], fontsize=7)
    ax.set_yticks(range(len(tcm)), [f"{v:g}" for v in tcm], fontsize=7)
    ax.set_xlabel("HBM stack GB/s")
    ax.set_ylabel("TCM GB/s per PE")
    ax.set_title(f"what binds (efficiency against it; {where})", fontsize=9)


def _cell(x: int, y: int, colour: str) -> Rectangle:
    return Rectangle((x - 0.5, y - 0.5), 1, 1, color=colour)


def draw_front(ax: Axes, points: pl.DataFrame) -> None:
    """Latency against the shared bandwidth bought (HBM stack + every PE's TCM port), every
    point (colour: topology; marker: PE count) and the Pareto front."""
    points = points.with_columns(
        bought=pl.col("hw.hbm_total_gbps") + pl.col("hw.n_pe") * pl.col("hw.tcm_gbps"))
    markers = dict(zip(sorted(points["hw.n_pe"].unique().to_list()), "os^D", strict=False))
    for (topo, n_pe), part in points.group_by("hw.topology", "hw.n_pe", maintain_order=True):
        ax.plot(part["bought"].to_list(), (part["latency_ps"] * 1e-6).to_list(),
                markers.get(n_pe, "o"), ms=4, alpha=0.7, label=f"{topo}, {n_pe} PEs")
    front = pareto_front(points, "bought", "latency_ps")
    ax.plot(front["bought"].to_list(), (front["latency_ps"] * 1e-6).to_list(), "-",
            color="black", lw=1, label="Pareto front")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("shared GB/s bought (HBM stack + PEs x TCM)")
    ax.set_ylabel("latency (µs)")
    ax.set_title(f"Pareto front: {front.height} of {points.height} points", fontsize=9)
    ax.grid(True, color="#eeeeee")
    ax.legend(fontsize=6, frameon=False)


def study_figure(path: Path) -> Figure:
    sweeps = parts(path)
    fig = Figure(figsize=(15, 3.6 * len(sweeps) + 0.6), layout="constrained")
    grid = fig.add_gridspec(len(sweeps), 3)
    for i, sweep in enumerate(sweeps):
        points, _ = load_points(sweep)
        base, where = _base(points)
        draw_latency(fig.add_subplot(grid[i, 0]), base, where)
        draw_binds(fig.add_subplot(grid[i, 1]), base, where)
        ax = fig.add_subplot(grid[i, 2])
        draw_front(ax, points)
        fig.axes[3 * i].set_title(f"{sweep.name} ({points['case'][0]}): "
                                  f"{fig.axes[3 * i].get_title()}", fontsize=9)
    fig.suptitle(f"hardware study {path.name} on ahbm-v3's shared parts: "
                 f"{len(sweeps)} kernels", fontsize=11)
    return fig
