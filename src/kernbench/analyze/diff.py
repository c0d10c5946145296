"""``kernbench diff A B``: what changed between two traces, and CI thresholds (``--fail-on``).

Ops are aligned by ``(pe, seq)``. An op's *structure* is everything but its times,
addresses and source line: kind, name, engine, program, top-level or child, operand
(space, pe, shape, dtype, transposed), num_elements, nbytes, flops and attrs.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from kernbench.analyze.frames import load_ops, load_values, open_trace, scan_ops
from kernbench.analyze.guards import first_guard_difference, guard_text
from kernbench.analyze.metrics import ENGINES, Metrics, metrics, resolve_metric
from kernbench.analyze.report import fmt, format_table, op_breakdown, to_json
from kernbench.errors import BadInputError, TraceFormatError
from kernbench.trace import Trace

_STRUCT_FIELDS = ("kind", "name", "engine", "program", "top", "inputs", "output",
                  "num_elements", "nbytes", "flops", "attrs")
_OPERAND_FIELDS = ("space", "pe", "shape", "dtype", "transposed")
_FAIL_ON = re.compile(r"^(?P<key>[A-Za-z_][\w.]*)=(?P<sign>[+\-±]?)"
                      r"(?P<num>\d+(?:\.\d*)?|\.\d+)(?P<unit>%|ps|ns|us)?$")
#: the time units a ``--fail-on`` amount may carry, in ps
TIME_UNITS: dict[str, int] = {"ps": 1, "ns": 1_000, "us": 1_000_000}


@dataclass(frozen=True)
class Threshold:
    """``KEY=+X%`` (fail if B rose by more than X%), ``-X%`` (fell by more), ``±X%`` or
    ``X%`` (either way). An absolute amount carries a time unit (``ps``, ``ns``, ``us``) for
    a time metric (``*_ps``) and no unit for a count or size (ADR-0124)."""

    key: str
    sign: str
    number: float
    unit: str  # "%", "ps", "ns", "us" or "" (a plain count)

    @classmethod
    def parse(cls, spec: str) -> Threshold:
        m = _FAIL_ON.match(spec.strip().replace(" ", ""))
        if not m:
            raise BadInputError(f"--fail-on {spec!r}: expected KEY=+X% / KEY=-X% / KEY=±X% or "
                                "an amount with a unit (e.g. latency=+1%, latency=+50ns)")
        return cls(m["key"], m["sign"] or "±", float(m["num"]), m["unit"] or "")

    @property
    def percent(self) -> bool:
        return self.unit == "%"

    @property
    def amount(self) -> float:
        """The threshold in the metric's own unit (ps for times, % for percentages)."""
        return self.number * TIME_UNITS.get(self.unit, 1)

    def check_unit(self, metric: str, spec: str) -> None:
        """BadInputError unless the unit fits ``metric`` (times need one, counts none)."""
        is_time = metric.endswith("_ps")
        if is_time and not self.unit:
            raise BadInputError(f"--fail-on {spec!r}: {metric} is a time; give a unit: "
                                f"%, ps, ns or us (e.g. {self.key}=+1% or {self.key}=+50ns)")
        if not is_time and self.unit in TIME_UNITS:
            raise BadInputError(f"--fail-on {spec!r}: {metric} is not a time; use % or a "
                                "plain number")

    def __str__(self) -> str:
        return f"{self.key}={self.sign}{fmt(self.number)}{self.unit}"

    def change(self, a: float, b: float) -> float:
        if not self.percent:
            return b - a
        if a == 0:
            return 0.0 if b == 0 else math.copysign(math.inf, b)
        return (b - a) / abs(a) * 100.0

    def exceeded(self, a: float, b: float) -> bool:
        c = self.change(a, b)
        return {"+": c > self.amount, "-": c < -self.amount, "±": abs(c) > self.amount}[
            self.sign]


@dataclass(frozen=True)
class ThresholdResult:
    threshold: Threshold
    metric: str
    a: float
    b: float
    change: float
    exceeded: bool

    def to_dict(self) -> dict[str, Any]:
        return {"fail_on": str(self.threshold), "metric": self.metric, "a": self.a, "b": self.b,
                "change": self.change, "percent": self.threshold.percent,
                "exceeded": self.exceeded}


def _structure(ops: pl.DataFrame) -> pl.DataFrame:
    e, out = pl.element(), pl.col("output")
    derived = {
        "inputs": pl.col("inputs").list.eval(
            pl.struct([e.struct.field(k) for k in _OPERAND_FIELDS])),
        "output": pl.when(out.is_not_null()).then(
            pl.struct([out.struct.field(k) for k in _OPERAND_FIELDS])),
        "top": pl.col("parent").is_null(),
    }
    return ops.select("pe", "seq", "op_id", "src",
                      *[derived.get(k, pl.col(k)).alias(k) for k in _STRUCT_FIELDS])


def _side(row: dict[str, Any], suffix: str) -> dict[str, Any] | None:
    keys = ("op_id", "src", *_STRUCT_FIELDS)
    return None if row[f"op_id{suffix}"] is None else {k: row[f"{k}{suffix}"] for k in keys}


def first_structural_difference(a: pl.DataFrame, b: pl.DataFrame) -> dict[str, Any] | None:
    """The first (by seq, then pe) aligned op pair whose structure differs, or an op only
    one trace has; None when the two op logs have the same structure."""
    sa, sb = _structure(a), _structure(b)
    key = pl.struct(_STRUCT_FIELDS).struct.json_encode()
    joined = (sa.with_columns(sig=key).join(sb.with_columns(sig=key), on=["pe", "seq"],
                                            how="full", coalesce=True, suffix="_b")
              .filter(pl.col("sig").is_null() | pl.col("sig_b").is_null()
                      | (pl.col("sig") != pl.col("sig_b")))
              .sort("seq", "pe"))
    if not joined.height:
        return None
    row = joined.row(0, named=True)
    left, right = _side(row, ""), _side(row, "_b")
    fields = [k for k in _STRUCT_FIELDS if left and right and left[k] != right[k]]
    return {"pe": row["pe"], "seq": row["seq"], "a": left, "b": right, "fields": fields,
            "n_different": joined.height}


def first_value_difference(a: pl.DataFrame, b: pl.DataFrame, va: pl.DataFrame,
                           vb: pl.DataFrame) -> dict[str, Any] | None:
    """The earliest (by A's t_end) aligned op whose replayed output checksum differs."""
    cols = ("op_id", "checksum", "min", "max", "mean", "nonfinite")

    def side(ops: pl.DataFrame, values: pl.DataFrame) -> pl.DataFrame:
        return ops.select("op_id", "pe", "seq", "name", "src", "t_end_ps").join(
            values.select(cols), on="op_id")

    joined = (side(a, va).join(side(b, vb), on=["pe", "seq"], suffix="_b")
              .filter(pl.col("checksum") != pl.col("checksum_b"))
              .sort("t_end_ps", "op_id"))
    if not joined.height:
        return None
    row = joined.row(0, named=True)
    return {"pe": row["pe"], "seq": row["seq"], "name": row["name"], "src": row["src"],
            "a": {k: row[k] for k in cols}, "b": {k: row[f"{k}_b"] for k in cols},
            "n_different": joined.height}


def _by_op(a: Trace, b: Trace) -> list[dict[str, Any]]:
    keep = [pl.col("kind"), pl.col("name"), pl.col("count").cast(pl.Int64),
            pl.col("busy_ps").cast(pl.Int64)]  # signed: a count may fall (pl.len is UInt32)
    j = (op_breakdown(a).select(keep).join(op_breakdown(b).select(keep), on=["kind", "name"],
                                           how="full", coalesce=True, suffix="_b")
         .fill_null(0).select("kind", "name", count_a="count", count_b="count_b",
                 d_count=pl.col("count_b") - pl.col("count"), busy_ps_a="busy_ps",
                 busy_ps_b="busy_ps_b", d_busy_ps=pl.col("busy_ps_b") - pl.col("busy_ps"))
         .sort("kind", "name"))
    return j.to_dicts()


def _by_line(a: Trace, b: Trace) -> list[dict[str, Any]]:
    """Per kernel source line: busy time and the kernel's stalls before its ops in A and B
    (what a hardware change buys, line by line: ``kernbench diff ORIGINAL RETIMED``)."""
    def per(t: Trace) -> pl.LazyFrame:
        return scan_ops(t).group_by("src").agg(
            busy_ps=pl.col("busy_ps").sum().cast(pl.Int64),
            wait_ps=pl.col("wait_ps").sum().cast(pl.Int64)).with_columns(
            pl.col("src").cast(pl.String))

    j = (per(a).join(per(b), on="src", how="full", coalesce=True, suffix="_b").fill_null(0)
         .select("src", busy_ps_a="busy_ps", busy_ps_b="busy_ps_b",
                 d_busy_ps=pl.col("busy_ps_b") - pl.col("busy_ps"), wait_ps_a="wait_ps",
                 wait_ps_b="wait_ps_b", d_wait_ps=pl.col("wait_ps_b") - pl.col("wait_ps"))
         .sort(pl.col("d_busy_ps").abs() + pl.col("d_wait_ps").abs(), "src",
               descending=[True, False]).collect())
    return j.to_dicts()


#: source lines a diff's text shows (``to_dict`` holds them all)
LINES_SHOWN = 12


def _pct(a: float, b: float) -> float | None:
    return None if a == 0 else (b - a) / abs(a) * 100.0


@dataclass(frozen=True)
class DiffReport:
    a: str
    b: str
    metrics_a: Metrics
    metrics_b: Metrics
    by_op: tuple[dict[str, Any], ...]
    first_structural: dict[str, Any] | None
    values_compared: bool  # both traces were replayed
    first_value: dict[str, Any] | None
    thresholds: tuple[ThresholdResult, ...]
    warnings: tuple[str, ...] = ()  # e.g. a corrupt replay/values.parquet left out
    #: the first decision on data whose value (or line) differs (``analyze/guards.py``)
    first_guard: dict[str, Any] | None = None
    #: per kernel source line: busy and stall time in A and B (``_by_line``)
    by_line: tuple[dict[str, Any], ...] = ()

    @property
    def changed_metrics(self) -> list[str]:
        return [k for k, v in self.metrics_a.items() if self.metrics_b.get(k) != v]

    @property
    def identical(self) -> bool:
        return not (self.changed_metrics or any(r["d_count"] or r["d_busy_ps"]
                                                for r in self.by_op)
                    or self.first_structural or self.first_value or self.first_guard)

    @property
    def exit_code(self) -> int:
        return 1 if any(t.exceeded for t in self.thresholds) else 0

    def engines(self) -> list[dict[str, Any]]:
        rows = []
        for e in ENGINES:
            a, b = self.metrics_a[f"busy_ps_{e}"], self.metrics_b[f"busy_ps_{e}"]
            rows.append({"engine": str(e), "busy_ps_a": a, "busy_ps_b": b, "delta": b - a,
                         "pct": _pct(a, b)})
        return rows

    def to_dict(self) -> dict[str, Any]:
        la, lb = self.metrics_a["latency_ps"], self.metrics_b["latency_ps"]
        return {
            "a": self.a, "b": self.b, "identical": self.identical,
            "latency_ps": {"a": la, "b": lb, "delta": lb - la, "pct": _pct(la, lb)},
            "metrics": {k: {"a": self.metrics_a[k], "b": self.metrics_b.get(k)}
                        for k in self.changed_metrics},
            "by_op": list(self.by_op), "engines": self.engines(),
            "by_line": list(self.by_line),
            "first_structural_difference": self.first_structural,
            "values_compared": self.values_compared,
            "first_value_difference": self.first_value,
            "first_guard_difference": self.first_guard,
            "fail_on": [t.to_dict() for t in self.thresholds],
            "warnings": list(self.warnings),
        }

    def to_json(self) -> str:
        return to_json(self.to_dict())

    def __repr__(self) -> str:
        from kernbench.notebook import diff_repr

        return diff_repr(self)

    def _repr_html_(self) -> str:
        from kernbench.notebook import diff_html

        return diff_html(self)

    def to_text(self) -> str:
        head = f"diff {self.a} -> {self.b}"
        if self.identical and not self.thresholds:
            values = "" if self.values_compared else " (replayed values not compared)"
            return f"{head}\n\nno differences{values}\n"
        parts = [head, _metric_table(self)]
        ops = [r for r in self.by_op if r["d_count"] or r["d_busy_ps"]]
        if ops:
            parts.append("ops by (kind, name)\n" + format_table(list(ops[0]), [
                list(r.values()) for r in ops]))
        eng = [r for r in self.engines() if r["delta"]]
        if eng:
            parts.append("engine busy\n" + format_table(list(eng[0]),
                                                          [list(r.values()) for r in eng]))
        lines = [r for r in self.by_line if r["d_busy_ps"] or r["d_wait_ps"]][:LINES_SHOWN]
        if lines:
            parts.append("by source line (busy, and the kernel's stall before its ops)\n"
                         + format_table(list(lines[0]), [list(r.values()) for r in lines]))
        guard = guard_text(self.first_guard)
        if guard is not None:
            parts.append(guard)
        parts.append(_structural_text(self.first_structural))
        parts.append(_value_text(self.first_value) if self.values_compared else
                     "replayed values: not compared (both traces need replay/values.parquet)")
        if self.thresholds:
            parts.append("fail-on\n" + format_table(
                ["threshold", "a", "b", "change", "status"],
                [[str(t.threshold), t.a, t.b, _change_text(t), "FAIL" if t.exceeded else "ok"]
                 for t in self.thresholds]))
        return "\n\n".join(parts) + "\n"


def _change_text(t: ThresholdResult) -> str:
    return f"{t.change:+.3f}%" if t.threshold.percent else f"{t.change:+g}"


def _metric_table(r: DiffReport) -> str:
    keys = ["latency_ps"] + [k for k in r.changed_metrics if k != "latency_ps"]
    rows = []
    for k in keys:
        a, b = r.metrics_a[k], r.metrics_b.get(k)
        if isinstance(a, int | float) and isinstance(b, int | float):
            rows.append([k, a, b, b - a, _pct(a, b)])
        else:
            rows.append([k, a, b, None, None])
    return format_table(["metric", "a", "b", "delta", "pct"], rows)


def _describe(side: dict[str, Any] | None) -> str:
    if side is None:
        return "(no op)"
    shapes = [i["shape"] for i in side["inputs"]]
    out = side["output"]["shape"] if side["output"] else None
    return f"op {side['op_id']} {side['name']} {shapes} -> {out} @ {side['src']}"


def _structural_text(d: dict[str, Any] | None) -> str:
    if d is None:
        return "structure: identical (aligned by (pe, seq))"
    fields = f"; differing: {', '.join(d['fields'])}" if d["fields"] else ""
    return (f"first structural difference at pe {d['pe']} seq {d['seq']} "
            f"({d['n_different']} aligned ops differ){fields}\n"
            f"  a: {_describe(d['a'])}\n  b: {_describe(d['b'])}")


def _value_text(d: dict[str, Any] | None) -> str:
    if d is None:
        return "replayed values: identical checksums"
    return (f"first value difference: pe {d['pe']} seq {d['seq']} {d['name']} @ {d['src']} "
            f"({d['n_different']} ops differ)\n"
            f"  a: op {d['a']['op_id']} checksum {d['a']['checksum']:#018x} "
            f"mean {fmt(d['a']['mean'])}\n"
            f"  b: op {d['b']['op_id']} checksum {d['b']['checksum']:#018x} "
            f"mean {fmt(d['b']['mean'])}")


def _thresholds(specs: list[str], ma: Metrics, mb: Metrics) -> list[ThresholdResult]:
    out = []
    for spec in specs:
        t = Threshold.parse(spec)
        try:
            key = resolve_metric(t.key, ma)
        except KeyError as exc:
            raise BadInputError(f"--fail-on {spec!r}: {exc.args[0]}") from None
        t.check_unit(key, spec)
        a, b = ma[key], mb[key]
        if isinstance(a, str) or isinstance(b, str):
            raise BadInputError(f"--fail-on {spec!r}: metric {key} is not a number")
        out.append(ThresholdResult(t, key, a, b, t.change(a, b), t.exceeded(a, b)))
    return out


def diff(a: Trace | str | Path, b: Trace | str | Path, fail_on: list[str] | None = None
         ) -> DiffReport:
    """Compare trace ``a`` (before) with ``b`` (after); ``fail_on`` holds ``KEY=±X%``
    thresholds that set ``exit_code`` 1 when exceeded."""
    ta, tb = open_trace(a), open_trace(b)
    for t in (ta, tb):  # ops are aligned by (pe, seq): duplicates would multiply the join
        if t.validation.counts.get("dense_seq"):
            raise TraceFormatError(f"{t.path}: seq is not dense per PE (kernbench check lists "
                                   "the ops); diff aligns ops by (pe, seq)")
    ma, mb = metrics(ta), metrics(tb)
    thresholds = _thresholds(list(fail_on or []), ma, mb)
    ops_a, ops_b = load_ops(ta), load_ops(tb)
    warnings: list[str] = []
    va, vb = load_values(ta, warnings), load_values(tb, warnings)
    both = va is not None and vb is not None
    return DiffReport(
        str(ta.path), str(tb.path), ma, mb, tuple(_by_op(ta, tb)),
        first_structural_difference(ops_a, ops_b), both,
        first_value_difference(ops_a, ops_b, va, vb) if va is not None and vb is not None
        else None,
        tuple(thresholds), tuple(warnings), first_guard_difference(ops_a, ops_b),
        tuple(_by_line(ta, tb)))
