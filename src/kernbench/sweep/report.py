"""``kernbench report SWEEP``: the points table, sorted best first (``--sort``), the Pareto
front of some metrics (``--pareto``), and the best point per group (``[best]`` of the spec;
what the panel shows for the milestone sweeps).

Every metric has a direction: lower is better, except the ratios in ``HIGHER_IS_BETTER``.
``max:NAME`` / ``min:NAME`` override it.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from kernbench.analyze.metrics import resolve_metric
from kernbench.analyze.report import format_table, to_json
from kernbench.errors import BadInputError
from kernbench.sweep.kinds import KERNEL, WORKLOAD, case_kind
from kernbench.sweep.spec import SweepSpec, parse_spec
from kernbench.sweep.store import SPEC_FILE, is_sweep
from kernbench.sweep.table import read_points

#: metrics (exact names or prefixes) where a larger value is the better one
HIGHER_IS_BETTER = ("efficiency", "util_", "hbm_gbps_achieved", "dma_compute_overlap",
                    "tokens_per_s")
#: metric columns a sweep report shows, when present, by the kind of the sweep's case
SHOWN = {
    KERNEL: ("latency_ps", "efficiency", "roofline_bound", "dma_read_bytes",
             "scratch_peak_bytes", "replay_ok", "check_ok"),
    WORKLOAD: ("layer_s", "token_s", "tokens_per_s", "ttft_s", "binding_kernel",
               "binding_part", "verified", "launches_retimed", "launches_recorded",
               "check_ok", "retimed_from"),
}


def load_sweep(root: str | Path) -> tuple[SweepSpec, pl.DataFrame]:
    """The spec as run and the points table of a sweep directory."""
    root = Path(root)
    if not is_sweep(root):
        raise BadInputError(f"{str(root)!r} is not a sweep directory (no {SPEC_FILE})")
    try:
        spec = parse_spec(tomllib.loads((root / SPEC_FILE).read_text()), base=root)
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise BadInputError(f"{root / SPEC_FILE}: unreadable ({exc})") from None
    return spec, read_points(root)


def direction(spec: str, columns: list[str]) -> tuple[str, bool]:
    """``(column, maximise)`` of ``NAME``, ``max:NAME`` or ``min:NAME``."""
    how, sep, name = spec.partition(":")
    if not sep:
        how, name = "", spec
    if how not in ("", "max", "min"):
        raise BadInputError(f"metric {spec!r}: expected NAME, max:NAME or min:NAME")
    try:
        col = resolve_metric(name.strip(), columns)
    except KeyError as exc:
        raise BadInputError(str(exc.args[0])) from None
    maximise = col.startswith(HIGHER_IS_BETTER) if not how else how == "max"
    return col, maximise


def _numeric(points: pl.DataFrame, col: str) -> None:
    if not points.schema[col].is_numeric():
        raise BadInputError(f"metric {col!r} is not numeric; cannot rank points by it")


def sort_best_first(points: pl.DataFrame, metric: str) -> pl.DataFrame:
    col, maximise = direction(metric, points.columns)
    _numeric(points, col)
    return points.sort(col, descending=maximise, nulls_last=True, maintain_order=True)


def pareto_front(points: pl.DataFrame, metrics: list[str]) -> pl.DataFrame:
    """The ok points no other ok point beats or equals in every metric and beats in one."""
    dirs = [direction(m, points.columns) for m in metrics]
    for col, _ in dirs:
        _numeric(points, col)
    ok = points.filter(pl.col("status") == "ok").drop_nulls([c for c, _ in dirs])
    if ok.height == 0:
        return ok
    x = np.column_stack([ok[c].cast(pl.Float64).to_numpy() * (-1.0 if mx else 1.0)
                         for c, mx in dirs])
    keep = np.ones(len(x), dtype=bool)
    for i in range(len(x)):
        no_worse = (x <= x[i]).all(axis=1)
        better = (x < x[i]).any(axis=1)
        keep[i] = not (no_worse & better).any()
    return ok.filter(pl.Series(keep)).sort(dirs[0][0], descending=dirs[0][1])


def best_points(root: str | Path, metric: str | None = None,
                per: list[str] | None = None) -> pl.DataFrame:
    """The best ok point (by the spec's ``[best]`` metric, or ``metric``) of each group of
    the ``per`` parameters (the spec's ``[best] per``, or ``per``)."""
    spec, points = load_sweep(root)
    metric = metric or spec.best_metric
    per = list(spec.best_per if per is None else per)
    ok = points.filter(pl.col("status") == "ok")
    if ok.height == 0:
        return ok
    ranked = sort_best_first(ok, metric)
    if not per:
        return ranked.head(1)
    return ranked.group_by(per, maintain_order=True).head(1).sort(per)


@dataclass(frozen=True)
class SweepReport:
    path: str
    columns: list[str]
    points: pl.DataFrame
    title: str
    exit_code: int = 0

    def to_text(self) -> str:
        shown = self.points.select([c for c in self.columns if c in self.points.columns])
        rows = [list(r) for r in shown.iter_rows()]
        return f"{self.title}\n\n{format_table(shown.columns, rows)}\n"

    def to_json(self) -> str:
        return to_json({"sweep": self.path, "title": self.title,
                        "points": self.points.to_dicts()})


@dataclass(frozen=True)
class SuiteReport:
    """``kernbench report SUITE``: the report of each sweep of a suite's directory."""

    path: str
    parts: tuple[SweepReport, ...]
    exit_code: int = 0

    def to_text(self) -> str:
        return (f"suite {self.path}: {len(self.parts)} sweeps\n\n"
                + "\n".join(p.to_text() for p in self.parts))

    def to_json(self) -> str:
        return to_json({"suite": self.path, "sweeps": [
            {"sweep": p.path, "title": p.title, "points": p.points.to_dicts()}
            for p in self.parts]})


def suite_report(parts: list[Path], root: str | Path, sort: str | None = None,
                 pareto: str | None = None) -> SuiteReport:
    """``kernbench report SUITE``: ``sweep_report`` of every sweep in ``parts``."""
    return SuiteReport(str(root), tuple(sweep_report(p, sort, pareto) for p in parts))


def sweep_report(root: str | Path, sort: str | None = None,
                 pareto: str | None = None) -> SweepReport:
    """``kernbench report SWEEP [--sort METRIC] [--pareto M1,M2]``."""
    spec, points = load_sweep(root)
    n_all, n_failed = points.height, points.filter(pl.col("status") != "ok").height
    title = f"sweep {root} (case {spec.case}): {n_all} points, {n_failed} failed"
    columns = ["point_id", *spec.swept, *spec.hw_columns, "status",
               *SHOWN[case_kind(spec.case)]]
    if pareto:
        names = [m.strip() for m in pareto.split(",") if m.strip()]
        if len(names) < 2:
            raise BadInputError(f"--pareto {pareto!r}: name two or more metrics, e.g. "
                                "latency,dma_read_bytes")
        points = pareto_front(points, names)
        title += f"; Pareto front of {', '.join(names)}: {points.height} points"
        columns += [direction(m, points.columns)[0] for m in names]
    elif sort:
        points = sort_best_first(points, sort)
        col, mx = direction(sort, points.columns)
        title += f"; sorted by {col} ({'highest' if mx else 'lowest'} first)"
        columns.append(col)
    columns.append("error")
    seen: dict[str, Any] = dict.fromkeys(columns)
    return SweepReport(str(root), list(seen), points, title)
