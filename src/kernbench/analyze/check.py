"""``kernbench check``: every built-in invariant, then the user's rules; exit 1 on a violation.

Violations name op ids and, beside each, the op name and the kernel line (``src``) it came
from.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from kernbench.analyze.frames import open_trace
from kernbench.analyze.invariants import INVARIANTS, TraceData, run_invariants
from kernbench.analyze.report import format_table, to_json
from kernbench.analyze.thresholds import Rule, RuleResult, evaluate, load_rules
from kernbench.trace import Trace
from kernbench.trace.validate import RULES

#: violations listed per invariant in text; JSON lists up to JSON_LIMIT
TEXT_LIMIT = 20
JSON_LIMIT = 1000


@dataclass(frozen=True)
class Violation:
    invariant: str
    message: str
    op_id: int | None
    other_op_id: int | None
    src: str | None  # "name @ file:line" of op_id
    other_src: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"op_id": self.op_id, "other_op_id": self.other_op_id, "message": self.message,
                "src": self.src, "other_src": self.other_src}

    def to_text(self) -> str:
        where = [f"op {i}: {s}" for i, s in ((self.op_id, self.src),
                                              (self.other_op_id, self.other_src)) if s]
        return self.message + (f"  [{'; '.join(where)}]" if where else "")


@dataclass(frozen=True)
class InvariantResult:
    name: str
    doc: str
    count: int
    violations: tuple[Violation, ...]  # the first JSON_LIMIT
    skipped: bool = False  # not run: the trace failed validation

    @property
    def ok(self) -> bool:
        return self.count == 0

    @property
    def status(self) -> str:
        return "skipped" if self.skipped else "ok" if self.ok else "FAIL"


@dataclass(frozen=True)
class CheckReport:
    path: str
    invariants: tuple[InvariantResult, ...]
    rules: tuple[RuleResult, ...]

    @property
    def ok(self) -> bool:
        return all(i.ok for i in self.invariants) and all(r.ok for r in self.rules)

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    @property
    def n_violations(self) -> int:
        return sum(i.count for i in self.invariants) + sum(not r.ok for r in self.rules)

    def violated(self) -> list[str]:
        """Names of the failed invariants and the failed rules (as text)."""
        return [i.name for i in self.invariants if not i.ok] + [
            f"rule {r.rule}" for r in self.rules if not r.ok]

    def to_text(self) -> str:
        status = "ok" if self.ok else f"FAIL ({self.n_violations} violations)"
        parts = [f"check {self.path}: {status}",
                 format_table(["invariant", "status", "violations", "what"],
                              [[i.name, i.status, i.count, i.doc]
                               for i in self.invariants])]
        for inv in self.invariants:
            if inv.ok:
                continue
            lines = [f"{inv.name}:"] + [f"  {v.to_text()}" for v in inv.violations[:TEXT_LIMIT]]
            if inv.count > TEXT_LIMIT:
                lines.append(f"  ... and {inv.count - TEXT_LIMIT} more")
            parts.append("\n".join(lines))
        if self.rules:
            parts.append(format_table(["rule", "actual", "status"],
                                      [[str(r.rule), r.actual, "ok" if r.ok else "FAIL"]
                                       for r in self.rules]))
        return "\n\n".join(parts) + "\n"

    def to_dict(self) -> dict[str, Any]:
        return {
            "trace": self.path, "ok": self.ok, "n_violations": self.n_violations,
            "invariants": [{"name": i.name, "doc": i.doc, "ok": i.ok, "skipped": i.skipped,
                            "count": i.count,
                            "truncated": i.count > len(i.violations),
                            "violations": [v.to_dict() for v in i.violations]}
                           for i in self.invariants],
            "rules": [r.to_dict() for r in self.rules],
        }

    def to_json(self) -> str:
        return to_json(self.to_dict())


def _where(ops: pl.DataFrame, frames: dict[str, pl.DataFrame | None]) -> dict[int, str]:
    """``name @ src`` of every op id some violation names."""
    ids = pl.concat([f.head(JSON_LIMIT).select(pl.concat_list("op_id", "other_op_id")
                                               .explode().alias("id"))
                     for f in frames.values() if f is not None]
                    or [pl.DataFrame(schema={"id": pl.Int64})])
    ids = ids.filter(pl.col("id").is_not_null()).unique()
    rows = ops.join(ids, left_on="op_id", right_on="id").select(
        "op_id", where=pl.format("{} @ {}", pl.col("name"), pl.col("src")))
    return dict(zip(rows["op_id"].to_list(), rows["where"].to_list(), strict=True))


def check(trace_or_path: Trace | str | Path, rules: str | Path | list[Rule] | None = None,
          invariants: list[str] | None = None) -> CheckReport:
    """Run the built-in invariants (all, or those named) and the rules (a TOML path or
    parsed rules) over a trace."""
    trace = open_trace(trace_or_path, strict=False)
    rule_list = load_rules(rules) if isinstance(rules, str | Path) else list(rules or [])
    data = TraceData.load(trace)
    frames = run_invariants(data, invariants)
    where = _where(data.ops, frames)
    results = []
    for name, df in frames.items():
        if df is None:
            results.append(InvariantResult(name, INVARIANTS[name].doc, 0, (), skipped=True))
            continue
        vs = tuple(Violation(name, r["message"], r["op_id"], r["other_op_id"],
                             where.get(r["op_id"]), where.get(r["other_op_id"]))
                   for r in df.head(JSON_LIMIT).iter_rows(named=True))
        count = (data.validation.count(name) if data.validation and name in RULES
                 else df.height)
        results.append(InvariantResult(name, INVARIANTS[name].doc, count, vs))
    # user rules compute metrics, which need a valid op log
    valid = data.validation is not None and data.validation.ok
    rule_results = evaluate(rule_list, trace) if valid else []
    return CheckReport(str(trace.path), tuple(results), tuple(rule_results))
