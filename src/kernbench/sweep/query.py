"""``check``, ``diff`` and ``sql`` over a whole sweep.

- ``check SWEEP``: the invariants (and rules: ``--rules``, else the sweep's own) on every
  point's trace, one trace at a time; exit 1 naming the failing points (a point that failed
  to run is a failing point).
- ``diff A B``: the two points tables joined by point id (same case, params and hardware);
  ``--fail-on`` thresholds apply to every common point.
- ``sql SWEEP``: ``points`` is the points table; ``ops`` spans every point's trace with a
  ``point_id`` column, scanned lazily (each trace's ``ops.parquet`` through polars
  ``scan_parquet``), never loaded all at once; ``shared`` likewise spans every point's
  waits on the chip's shared parts (``shared.parquet``; no rows for a point without one).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from kernbench.analyze.check import check
from kernbench.analyze.diff import Threshold
from kernbench.analyze.frames import scan_ops, scan_shared
from kernbench.analyze.metrics import resolve_metric
from kernbench.analyze.report import format_table, to_json
from kernbench.analyze.sql import SqlResult, guard
from kernbench.analyze.thresholds import load_rules
from kernbench.errors import BadInputError
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
    results = []
    for row in points.iter_rows(named=True):
        if row["status"] != "ok":
            ok, problems = False, f"point failed: {row['error']}"
        else:
            report = check(trace_dir(root, row["point_id"]), rules=rule_list)
            ok, problems = report.ok, ", ".join(report.violated())
        results.append({"point_id": row["point_id"], "params": _label(row, names), "ok": ok,
                        "problems": problems or None})
    return SweepCheckReport(str(root), results)


@dataclass(frozen=True)
class SweepDiffReport:
    a: str
    b: str
    rows: list[dict[str, Any]]  # per common point: ids, params, metric a/b/change
    only_a: list[str]
    only_b: list[str]
    exceeded: list[str]  # "point_id: threshold (a -> b)"
    metrics: list[str]

    @property
    def exit_code(self) -> int:
        return 1 if self.exceeded else 0

    def to_text(self) -> str:
        parts = [f"diff {self.a} -> {self.b}: {len(self.rows)} common points, "
                 f"{len(self.only_a)} only in A, {len(self.only_b)} only in B"]
        if self.rows:
            headers = list(self.rows[0])
            parts.append(format_table(headers, [list(r.values()) for r in self.rows]))
        for label, ids in (("only in A", self.only_a), ("only in B", self.only_b)):
            if ids:
                parts.append(f"{label}: {', '.join(ids)}")
        if self.exceeded:
            parts.append("fail-on exceeded:\n" + "\n".join(f"  {e}" for e in self.exceeded))
        return "\n\n".join(parts) + "\n"

    def to_json(self) -> str:
        return to_json(self.__dict__ | {"exit_code": self.exit_code})


def sweep_diff(a: str | Path, b: str | Path, fail_on: list[str] | None = None
               ) -> SweepDiffReport:
    """Compare sweep ``a`` (before) with sweep ``b`` (after), point by point."""
    spec, pa_ = load_sweep(a)
    _, pb = load_sweep(b)
    thresholds = [Threshold.parse(f) for f in fail_on or []]
    common_cols = [c for c in pa_.columns if c in pb.columns]
    keys: list[str] = []
    for t in thresholds:
        try:
            keys.append(resolve_metric(t.key, common_cols))
        except KeyError as exc:
            raise BadInputError(f"--fail-on {t}: {exc.args[0]}") from None
    shown = list(dict.fromkeys(["latency_ps", *keys]))
    shown = [k for k in shown if k in common_cols]
    names = [*spec.swept, *spec.hw_columns]
    ia, ib = set(pa_["point_id"]), set(pb["point_id"])
    rb = {r["point_id"]: r for r in pb.iter_rows(named=True)}
    rows, exceeded = [], []
    for ra in pa_.iter_rows(named=True):
        other = rb.get(ra["point_id"])
        if other is None:
            continue
        row: dict[str, Any] = {"point_id": ra["point_id"], "params": _label(ra, names),
                               "status": f"{ra['status']}->{other['status']}"}
        for k in shown:
            va, vb = ra.get(k), other.get(k)
            row[f"{k} a"], row[f"{k} b"] = va, vb
            row[f"{k} %"] = (None if va is None or vb is None or not va
                             else round((vb - va) / abs(va) * 100, 4))
        for t, k in zip(thresholds, keys, strict=True):
            va, vb = ra.get(k), other.get(k)
            if va is None or vb is None:
                if ra["status"] == "ok" and other["status"] != "ok":
                    exceeded.append(f"{ra['point_id']} ({row['params']}): failed in B")
                continue
            if t.exceeded(float(va), float(vb)):
                exceeded.append(f"{ra['point_id']} ({row['params']}): {t} ({k} {va} -> {vb})")
        rows.append(row)
    return SweepDiffReport(str(a), str(b), rows, sorted(ia - ib), sorted(ib - ia),
                           list(dict.fromkeys(exceeded)), shown)


def sweep_tables(root: str | Path, with_ops: bool = True, with_shared: bool = False
                 ) -> dict[str, pl.LazyFrame]:
    """``points`` and (lazily) ``ops`` and ``shared`` of every ok point, with a
    ``point_id`` column."""
    root = Path(root)
    _, points = load_sweep(root)
    out = {"points": pl.scan_parquet(root / POINTS_FILE)}
    ids = points.filter(pl.col("status") == "ok")["point_id"].to_list()
    traces = {pid: Trace.open(trace_dir(root, pid)) for pid in ids} if (
        with_ops or with_shared) else {}
    tables = {"ops": (with_ops, scan_ops), "shared": (with_shared, scan_shared)}
    for name, (wanted, frame) in tables.items():
        frames = [frame(t).with_columns(pl.lit(pid, pl.String).alias("point_id"))
                  for pid, t in traces.items()] if wanted else []
        if frames:
            out[name] = pl.concat(frames, how="vertical")
    return out


def sweep_sql(root: str | Path, query: str) -> SqlResult:
    """Run SQL over a sweep's ``points``, ``ops`` and ``shared`` tables."""
    def names(table: str) -> bool:
        return re.search(rf"\b{table}\b", query, re.IGNORECASE) is not None

    guard(query, ["ops", "points", "shared"])  # no file, URL or table function (ADR-0125)
    ctx = pl.SQLContext(sweep_tables(root, with_ops=names("ops"),
                                     with_shared=names("shared")))
    try:
        frame = ctx.execute(query, eager=True)
    except (pl.exceptions.PolarsError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BadInputError(f"sql: {first} (tables: {', '.join(ctx.tables())})") from None
    return SqlResult(query, frame)
