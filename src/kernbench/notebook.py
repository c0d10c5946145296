"""Short ``repr``s and ``_repr_html_`` for the objects a notebook shows: ``Trace``,
``ReplayResult``, metrics dicts, metrics and diff reports.

The classes keep one-line methods that call in here, so how they look lives in one place.
Everything is read from data already in memory (no trace is opened, nothing is computed).
This module imports nothing of kernbench: every layer may call it.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

#: the metrics a short repr and the first rows of an HTML table show, in order
HEADLINE = ("latency_ps", "efficiency", "bottleneck_engine", "roofline_bound", "stall_ps",
            "n_ops", "scratch_peak_bytes")
STYLE = "border-collapse:collapse;font-size:12px"


def fmt(value: Any) -> str:
    """One table cell: ints as is, floats with up to 4 decimals, None as ``-``."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if value != 0 and abs(value) < 1e-3:
            return f"{value:.3g}"
        return f"{value:.4f}".rstrip("0").rstrip(".")
    return str(value)


def table(rows: Sequence[Sequence[Any]], head: Sequence[str] | None = None,
          caption: str | None = None) -> str:
    cap = f"<caption style='text-align:left'><b>{html.escape(caption)}</b></caption>" \
        if caption else ""
    th = ("<tr>" + "".join(f"<th>{html.escape(str(h))}</th>" for h in head) + "</tr>"
          if head else "")
    body = "".join("<tr>" + "".join(
        f"<td style='text-align:{'left' if i == 0 else 'right'}'>{html.escape(fmt(v))}</td>"
        for i, v in enumerate(r)) + "</tr>" for r in rows)
    return f"<table style='{STYLE}'>{cap}{th}{body}</table>"


def metrics_repr(m: Mapping[str, Any]) -> str:
    shown = ", ".join(f"{k}={fmt(m[k])}" for k in HEADLINE if k in m)
    rest = len(m) - sum(k in m for k in HEADLINE)
    return f"Metrics({shown}{f', +{rest} more' if rest else ''})"


def metrics_html(m: Mapping[str, Any], caption: str = "kernbench metrics") -> str:
    keys = [k for k in HEADLINE if k in m] + [k for k in m if k not in HEADLINE]
    return table([[k, m[k]] for k in keys], ["metric", "value"], caption)


def trace_html(trace: Any, replay: str | None = None) -> str:
    """The trace's table; ``replay``: what its ``replay/`` is (a stale one says so)."""
    man = trace.manifest
    hw = man.get("hw") or {}
    rows = [["path", str(trace.path)], ["case", man.get("case")], ["kernel", man.get("kernel")],
            ["params", ", ".join(f"{k}={v}" for k, v in (man.get("params") or {}).items())],
            ["grid", man.get("grid")], ["ops", man.get("n_ops")],
            ["latency (ps)", man.get("t_end_ps")], ["hardware", hw.get("name")],
            ["scratch peak (bytes)", man.get("scratch_peak_bytes")]]
    if replay is not None:
        rows.append(["replay/", replay])
    return table(rows, caption="kernbench Trace")


#: what each ``ReplayResult.status`` reads as (ADR-0830)
_WORDS = {"verified": "verified", "wrong": "WRONG", "failed": "FAILED"}


def replay_word(result: Any) -> str:
    """``verified``, ``WRONG``, ``FAILED`` or ``not verified (...)`` saying why."""
    if result.status in _WORDS:
        return _WORDS[result.status]
    if result.verdict.get("reference") is None:
        return "not verified (no reference)"
    unchecked = [n for n, o in result.verdict.get("outputs", {}).items() if not o.get("checked")]
    return f"not verified (the reference did not compare {', '.join(unchecked) or 'it'})"


def replay_repr(result: Any) -> str:
    errs = ", ".join(f"{k}: {v:.3g}" for k, v in result.max_abs_err.items()
                     if v is not None)
    where = f", path={str(result.path)!r}" if result.path is not None else ""
    return (f"ReplayResult(status={result.status!r}, verified={result.verified}, "
            f"{replay_word(result)}, max_abs_err={{{errs}}}{where})")


def replay_html(result: Any) -> str:
    v = result.verdict
    rows = [["status", result.status], ["verdict", replay_word(result)],
            ["reference", v.get("reference")],
            ["ops executed", f"{v.get('n_executed')}/{v.get('n_ops')}"]]
    rows += [[f"max abs err ({k})", e] for k, e in result.max_abs_err.items()]
    if v.get("invalid_read"):
        rows.append(["invalid read", v["invalid_read"].get("message")])
    return table(rows, caption="kernbench ReplayResult")


def report_repr(rep: Any) -> str:
    return f"MetricsReport({rep.path!r}, case={rep.case!r}, {metrics_repr(rep.metrics)})"


def report_html(rep: Any) -> str:
    return metrics_html(rep.metrics, caption=f"kernbench report: {rep.path} ({rep.case})")


def diff_repr(d: Any) -> str:
    la, lb = d.metrics_a["latency_ps"], d.metrics_b["latency_ps"]
    pct = f" ({100 * (lb - la) / la:+.2f}%)" if la else ""
    return (f"DiffReport({d.a!r} -> {d.b!r}, latency_ps {la} -> {lb}{pct}, "
            f"identical={d.identical}, exit_code={d.exit_code})")


def diff_html(d: Any) -> str:
    keys = [k for k in HEADLINE if k in d.metrics_a] + [
        k for k in d.changed_metrics if k not in HEADLINE]
    rows = [[k, d.metrics_a.get(k), d.metrics_b.get(k)] for k in keys]
    rows += [[f"fail-on {t.threshold}", t.a, t.b, "FAIL" if t.exceeded else "ok"]
             for t in d.thresholds]
    return table(rows, ["metric", "a", "b"], caption=f"kernbench diff: {d.a} -> {d.b}")


class MetricsDict(dict):
    """The flat metrics dict (a plain ``dict`` in every way) with a short repr and an HTML
    table in notebooks."""

    def __repr__(self) -> str:
        return metrics_repr(self)

    def _repr_html_(self) -> str:
        return metrics_html(self)
