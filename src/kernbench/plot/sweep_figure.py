"""The picture of a sweep (docs/sweeps.md): each metric against each swept parameter, and the
Pareto front of two metrics to minimise. Reads ``points.parquet`` and ``sweep.toml`` only."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import polars as pl
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from kernbench.errors import BadInputError

#: metrics drawn against the parameters: (column, axis label, scale to the label's unit)
METRICS: tuple[tuple[str, str, float], ...] = (
    ("latency_ps", "latency (µs)", 1e-6), ("efficiency", "efficiency", 1.0),
    ("scratch_peak_bytes", "scratch peak (KiB)", 1 / 1024),
    ("hbm_gbps_achieved", "HBM GB/s achieved", 1.0),
    ("pe_busy_balance", "PE compute busy max/mean", 1.0),
)
#: the two metrics the Pareto front minimises, by default
PARETO = ("latency_ps", "scratch_peak_bytes")
#: columns of points.parquet that are never parameters
NOT_PARAMS = frozenset({"point_id", "case", "status", "error", "replay_ok", "wall_s"})
MAX_LINES = 8


def is_sweep(path: Path) -> bool:
    return (path / "points.parquet").is_file() and (path / "sweep.toml").is_file()


def load_points(path: Path) -> tuple[pl.DataFrame, list[str]]:
    """The ok rows of ``points.parquet`` and the swept parameter columns (those that vary)."""
    try:
        points = pl.read_parquet(path / "points.parquet")
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise BadInputError(f"{path}/points.parquet: not a readable Parquet file ({exc})") from None
    try:
        spec = tomllib.loads((path / "sweep.toml").read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise BadInputError(f"{path}/sweep.toml: not readable TOML ({exc})") from None
    named = list((spec.get("grid") or {}).keys())
    named += [f"hw.{k}" for k in (spec.get("hw") or {})]
    cols = points.columns
    between: list[str] = []
    if "case" in cols and "status" in cols:
        between = cols[cols.index("case") + 1:cols.index("status")]
    params = [c for c in dict.fromkeys(named + between) if c in cols and c not in NOT_PARAMS]
    if "status" in cols:
        points = points.filter(pl.col("status") == "ok")
    varying = [c for c in params if points[c].n_unique() > 1]
    return points, varying


def pareto_front(points: pl.DataFrame, x: str, y: str) -> pl.DataFrame:
    """The rows no other row beats on both ``x`` and ``y`` (both minimised), by ``x``."""
    rows = points.sort(x, y)
    best = pl.col(y).cum_min().shift(1)
    return rows.filter(best.is_null() | (pl.col(y) < best))


def _label(row: dict[str, Any], params: list[str]) -> str:
    return ", ".join(f"{p}={row[p]}" for p in params)


def draw_metric(ax: Axes, points: pl.DataFrame, param: str, others: list[str],
                metric: tuple[str, str, float], legend: bool = True) -> None:
    """``metric`` against ``param``, a line per combination of the ``others``; the legend
    (``legend``: the column's top chart only, the lines are the same below) sits above the
    axes, never over the lines."""
    col, label, scale = metric
    groups = points.select(others).unique().sort(others) if others else pl.DataFrame([{}])
    many = groups.height > MAX_LINES
    for g in ([{}] if many else groups.iter_rows(named=True)):
        part = points
        for k, v in g.items():
            part = part.filter(pl.col(k) == v)
        part = part.sort(param)
        xs, ys = part[param].to_list(), (part[col] * scale).to_list()
        if many:
            ax.plot(xs, ys, "o", ms=3, alpha=0.6)
        else:
            ax.plot(xs, ys, "o-", ms=4, lw=1, label=_label(g, others) or None)
    lo, hi = points[param].min(), points[param].max()  # numbers for a numeric column
    if (points[param].dtype.is_numeric() and isinstance(lo, int | float)
            and isinstance(hi, int | float) and lo > 0 and hi / lo >= 16):
        ax.set_xscale("log", base=2)
    ax.set_xlabel(param)
    ax.set_ylabel(label)
    ax.grid(True, color="#eeeeee")
    if legend and not many and others and groups.height > 1:
        ax.legend(fontsize=6, loc="lower center", bbox_to_anchor=(0.5, 1.02), frameon=False)


def draw_pareto(ax: Axes, points: pl.DataFrame, params: list[str],
                objectives: tuple[str, str] = PARETO) -> None:
    x, y = objectives
    front = pareto_front(points, x, y)
    ax.plot((points[x] * 1e-6).to_list(), (points[y] / 1024).to_list(), "o", color="#bbbbbb",
            ms=5, label="point")
    ax.plot((front[x] * 1e-6).to_list(), (front[y] / 1024).to_list(), "o-", color="#d62728",
            ms=6, label="Pareto front")
    xs = points[x].cast(pl.Float64).to_numpy()
    mid = (float(xs.min()) + float(xs.max())) / 2 * 1e-6
    for row in front.iter_rows(named=True):
        right = row[x] * 1e-6 > mid  # a label on the right half points left: never cut
        ax.annotate(_label(row, params), (row[x] * 1e-6, row[y] / 1024), fontsize=7,
                    textcoords="offset points", xytext=(-5 if right else 5, 4),
                    ha="right" if right else "left")
    ax.set_xlabel("latency (µs)")
    ax.set_ylabel("scratch peak (KiB)")
    ax.set_title(f"Pareto front: {x} vs {y} (both lower is better; {front.height} of "
                 f"{points.height} points)", fontsize=9)
    ax.grid(True, color="#eeeeee")
    ax.legend(fontsize=7, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.14),
              frameon=False)


def presets(path: Path, points: pl.DataFrame) -> str:
    """The hardware the sweep's points ran on: the ``hw.preset`` column, else the name in a
    point trace's manifest (a sweep that names no preset runs on the recording default)."""
    if "hw.preset" in points.columns:
        return ", ".join(str(p) for p in points["hw.preset"].unique(maintain_order=True))
    for manifest in sorted((path / "points").glob("*.ktrace/manifest.json"))[:1]:
        try:
            return str(json.loads(manifest.read_text())["hw"]["name"])
        except (OSError, ValueError, KeyError, TypeError):
            break
    return "unknown hardware"


def sweep_figure(path: Path) -> Figure:
    points, params = load_points(path)
    if points.height == 0:
        raise BadInputError(f"{path}: the sweep has no successful points to draw")
    metrics = [m for m in METRICS if m[0] in points.columns]
    shown = params[:4]
    n_rows, n_cols = len(metrics), max(1, len(shown))
    fig = Figure(figsize=(4 * n_cols + 1, 2.6 * n_rows + 4.5), layout="constrained")
    grid = fig.add_gridspec(n_rows + 1, n_cols, height_ratios=[2.6] * n_rows + [4.5])
    for i, metric in enumerate(metrics):
        for j, param in enumerate(shown):
            draw_metric(fig.add_subplot(grid[i, j]), points, param,
                        [p for p in params if p != param], metric, legend=i == 0)
    if all(c in points.columns for c in PARETO):
        draw_pareto(fig.add_subplot(grid[n_rows, :]), points, params)
    case = points["case"][0] if "case" in points.columns else path.name
    fig.suptitle(f"sweep {path.name} ({case}) on {presets(path, points)}: {points.height} "
                 "points", fontsize=11)
    return fig
