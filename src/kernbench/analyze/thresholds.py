"""User rules: a TOML file of ``[[rule]]`` tables ``{metric, op, value, pe?}``.

A rule compares one metric (of the whole trace, or of one PE's ops with ``pe``) with a
literal value. Nothing in a rules file is evaluated as an expression.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernbench.analyze.metrics import Metrics, metrics, resolve_metric
from kernbench.errors import BadInputError
from kernbench.trace import Trace
from kernbench.trace.tomlfile import read_toml

Value = int | float | str | bool

#: the comparison operators a rule may name
COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt,
    "<=": operator.le, ">": operator.gt, ">=": operator.ge,
}
ORDERED = frozenset({"<", "<=", ">", ">="})
_KEYS = frozenset({"metric", "op", "value", "pe"})


@dataclass(frozen=True)
class Rule:
    metric: str
    op: str
    value: Value
    pe: int | None = None

    def __str__(self) -> str:
        where = f"[pe{self.pe}]" if self.pe is not None else ""
        return f"{self.metric}{where} {self.op} {self.value!r}"


@dataclass(frozen=True)
class RuleResult:
    rule: Rule
    metric: str  # the resolved metric key
    actual: Value
    ok: bool

    def to_dict(self) -> dict[str, Any]:
        return {"rule": str(self.rule), "metric": self.metric, "op": self.rule.op,
                "value": self.rule.value, "pe": self.rule.pe, "actual": self.actual,
                "ok": self.ok}


def _rule(table: Any, where: str) -> Rule:
    if not isinstance(table, dict):
        raise BadInputError(f"{where}: a [[rule]] must be a table, got {table!r}")
    unknown = sorted(set(table) - _KEYS)
    missing = sorted({"metric", "op", "value"} - set(table))
    if unknown or missing:
        raise BadInputError(f"{where}: unknown keys {unknown} / missing keys {missing}; a rule "
                            "is {metric, op, value, pe?}")
    metric, op, value, pe = table["metric"], table["op"], table["value"], table.get("pe")
    if not isinstance(metric, str) or not metric:
        raise BadInputError(f"{where}: metric must be a metric name, got {metric!r}")
    if op not in COMPARE:
        raise BadInputError(f"{where}: op {op!r} is not one of {' '.join(COMPARE)}")
    if not isinstance(value, int | float | str):
        raise BadInputError(f"{where}: value must be a number or string, got {value!r}")
    if isinstance(value, str) and op in ORDERED:
        raise BadInputError(f"{where}: op {op!r} needs a number, got the string {value!r}")
    if pe is not None and (isinstance(pe, bool) or not isinstance(pe, int) or pe < 0):
        raise BadInputError(f"{where}: pe must be a PE index (int >= 0), got {pe!r}")
    return Rule(metric, op, value, pe)


def parse_rules(data: dict[str, Any], where: str = "rules") -> list[Rule]:
    """Rules from a parsed TOML document (``{"rule": [table, ...]}``)."""
    extra = sorted(set(data) - {"rule"})
    if extra:
        raise BadInputError(f"{where}: unknown top-level keys {extra}; expected [[rule]] tables")
    tables = data.get("rule", [])
    if not isinstance(tables, list):
        raise BadInputError(f"{where}: 'rule' must be an array of tables ([[rule]])")
    return [_rule(t, f"{where} rule {i + 1}") for i, t in enumerate(tables)]


def load_rules(path: str | Path) -> list[Rule]:
    """Rules from a TOML file; BadInputError if it is unreadable or malformed."""
    path = Path(path)
    data = read_toml(path, "rules file")
    return parse_rules(data, str(path))


def _compare(rule: Rule, key: str, actual: Value) -> bool:
    if isinstance(actual, str) != isinstance(rule.value, str):
        raise BadInputError(f"rule {rule}: metric {key} is {actual!r}, not comparable with "
                            f"{rule.value!r}")
    if isinstance(actual, str) and rule.op in ORDERED:
        raise BadInputError(f"rule {rule}: metric {key} is a string; use == or !=")
    return bool(COMPARE[rule.op](actual, rule.value))


def evaluate(rules: list[Rule], trace: Trace) -> list[RuleResult]:
    """Each rule against the trace's metrics (computed once per distinct ``pe``)."""
    cache: dict[int | None, Metrics] = {}
    out = []
    for rule in rules:
        if rule.pe not in cache:
            n_pe = int(trace.manifest.get("hw", {}).get("n_pe", 0))
            if rule.pe is not None and rule.pe >= n_pe:
                raise BadInputError(f"rule {rule}: pe {rule.pe} is outside 0..{n_pe - 1}")
            cache[rule.pe] = metrics(trace, pe=rule.pe)
        values = cache[rule.pe]
        try:
            key = resolve_metric(rule.metric, values)
        except KeyError as exc:
            raise BadInputError(f"rule {rule}: {exc.args[0]}") from None
        actual = values[key]
        out.append(RuleResult(rule, key, actual, _compare(rule, key, actual)))
    return out
