"""``check``, ``diff`` and ``sql`` over a whole sweep.

- ``check SWEEP``: the invariants (and rules: ``--rules``, else the sweep's own) on every
  point's trace, one trace at a time; exit 1 naming the failing points (a point that failed
  to run is a failing point).
- ``diff A B``: ``kernbench.sweep.diff``.
- ``sql SWEEP``: ``points`` is the points table; ``ops`` spans every point's trace with a
  ``point_id`` column, scanned lazily (each trace's ``ops.parquet`` through polars
  ``scan_parquet``), never loaded all at once; ``shared`` likewise spans every point's
  waits on the chip's shared parts (``shared.parquet``; no rows for a point without one).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from kernbench.analyze.check import CheckReport, check
from kernbench.analyze.frames import scan_ops, scan_shared
from kernbench.analyze.report import format_table, to_json
from kernbench.analyze.sql import SqlResult, run_query
from kernbench.analyze.thresholds import load_rules
from kernbench.notebook import fmt
from kernbench.sweep.kinds import KINDS, case_kind
from kernbench.sweep.report import load_sweep
from kernbench.sweep.store import POINTS_FILE, RULES_FILE, trace_dir
from kernbench.trace import Trace


def _label(row: dict[str, Any], names: list[str]) -> str:
    return " ".join(f"{n}={row[n]}" for n in names if n in row)


@dataclass(frozen=True)
class SweepCheckReport:
    path: str
    results: list[dict[str, Any]]  # point_id, params, ok, problems

    @property
    def failing(self) -> list[dict[str, Any]]:
        return [r for r in self.results if not r["ok"]]

    @property
    def exit_code(self) -> int:
        return 1 if self.failing else 0

    def to_text(self) -> str:
        bad = self.failing
        head = (f"check {self.path}: {len(self.results)} points, "
                + (f"FAIL ({len(bad)} failing)" if bad else "ok"))
        if not bad:
            return head + "\n"
        return head + "\n\n" + format_table(["point_id", "params", "problems"], [
            [r["point_id"], r["params"], r["problems"]] for r in bad]) + "\n"

    def to_json(self) -> str:
        return to_json({"sweep": self.path, "ok": not self.failing, "points": self.results})


def sweep_check(root: str | Path, rules: str | Path | None = None) -> SweepCheckReport:
    """Check every point of the sweep at ``root``."""
    root = Path(root)
    spec, points = load_sweep(root)
    if rules is None and (root / RULES_FILE).is_file():
        rules = root / RULES_FILE
    rule_list = load_rules(rules) if rules is not None else []
    names = [*spec.swept, *spec.hw_columns]
    kind = case_kind(spec.case)
    results = []
    for row in points.iter_rows(named=True):
        found: dict[str, Any] = {}
        if row["status"] != "ok":
            ok, problems = False, f"point failed: {row['error']}"
        else:  # each launch trace of the point (one for a kernel point)
            launches = KINDS[kind].launches(trace_dir(root, row["point_id"], kind))
            reports = {name: check(path, rules=rule_list) for name, path in launches.items()}
            ok = all(r.ok for r in reports.values())
            problems = "; ".join(f"{name}: {_problems(r)}" if name else _problems(r)
                                 for name, r in reports.items() if not r.ok)
            found = {"rules": [r.to_dict() for rep in reports.values() for r in rep.rules],
                     "violations": _violations(reports.values())}
        results.append({"point_id": row["point_id"], "params": _label(row, names), "ok": ok,
                        "problems": problems or None, **found})
    return SweepCheckReport(str(root), results)


def _violations(reports: Iterable[CheckReport]) -> dict[str, int]:
    """Violations by invariant, summed over a point's launches."""
    out: dict[str, int] = {}
    for report in reports:
        for i in report.invariants:
            if i.count:
                out[i.name] = out.get(i.name, 0) + i.count
    return out


def _problems(report: CheckReport) -> str:
    """What failed, with what was measured (as single-trace ``check`` shows it): each failed
    invariant with its number of violations, each failed rule with its actual value."""
    return ", ".join([f"{i.name} ({i.count} violation{'s' * (i.count != 1)})"
                      for i in report.invariants if not i.ok]
                     + [f"rule {r.rule} (actual {fmt(r.actual)})" for r in report.rules
                        if not r.ok])


def sweep_tables(root: str | Path, with_ops: bool = True, with_shared: bool = False
                 ) -> dict[str, pl.LazyFrame]:
    """``points`` and (lazily) ``ops`` and ``shared`` of every ok point, with a
    ``point_id`` column (and, in a workload sweep, a ``launch`` column naming the launch's
    trace: ``00-attn_norm.ktrace``, ...)."""
    root = Path(root)
    spec, points = load_sweep(root)
    kind = case_kind(spec.case)
    out = {"points": pl.scan_parquet(root / POINTS_FILE)}
    ids = points.filter(pl.col("status") == "ok")["point_id"].to_list()
    traces = [(pid, name, Trace.open(path)) for pid in ids
              for name, path in KINDS[kind].launches(trace_dir(root, pid, kind)).items()
              ] if with_ops or with_shared else []
    tables = {"ops": (with_ops, scan_ops), "shared": (with_shared, scan_shared)}
    for name, (wanted, frame) in tables.items():
        frames = [frame(t).with_columns(pl.lit(pid, pl.String).alias("point_id"),
                                        *([pl.lit(launch, pl.String).alias("launch")]
                                          if launch else []))
                  for pid, launch, t in traces] if wanted else []
        if frames:
            out[name] = pl.concat(frames, how="vertical")
    return out


def sweep_sql(root: str | Path, query: str) -> SqlResult:
    """Run SQL over a sweep's ``points``, ``ops`` and ``shared`` tables (guarded as over a
    trace's)."""
    def names(table: str) -> bool:
        return re.search(rf"\b{table}\b", query, re.IGNORECASE) is not None

    return run_query(sweep_tables(root, with_ops=names("ops"), with_shared=names("shared")),
                     query)
