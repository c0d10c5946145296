"""Reports: aligned terminal tables and JSON. ``report(trace)`` is ``kernbench report``.

Every report object the analysis returns has ``to_text()``, ``to_json()`` and ``exit_code``
(the CLI prints one of the first two and exits with the third).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from kernbench.analyze.critical import critical_path
from kernbench.analyze.frames import hw_of, open_trace, scan_ops
from kernbench.analyze.metrics import ENGINES, Metrics, ceilings, metrics
from kernbench.analyze.path_parts import PART_COLUMNS
from kernbench.analyze.path_summary import summary
from kernbench.notebook import fmt
from kernbench.schemas.replay_status import UNVERIFIED, VERIFIED, verdict_status
from kernbench.trace import Trace
from kernbench.trace.replayed import read_verdict, stale_reason


def _numeric(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], indent: int = 0) -> str:
    """An aligned text table: numbers right-aligned, text left-aligned, a rule under the
    header row."""
    cells = [[fmt(v) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    right = [bool(rows) and all(_numeric(r[i]) or r[i] is None for r in rows)
             for i in range(len(headers))]

    def line(values: Sequence[str]) -> str:
        parts = [v.rjust(w) if r else v.ljust(w) for v, w, r in zip(values, widths, right,
                                                                      strict=True)]
        return (" " * indent + "  ".join(parts)).rstrip()

    out = [line(list(headers)), " " * indent + "  ".join("-" * w for w in widths)]
    out += [line(r) for r in cells]
    return "\n".join(out)


def to_json(obj: Any) -> str:
    """Stable, indented JSON (sorted keys stay off so tables keep their order)."""
    return json.dumps(obj, indent=2, default=str)


#: the summary rows of ``kernbench report``, in order: (label, metric key)
SUMMARY: tuple[tuple[str, str], ...] = (
    ("latency (ps)", "latency_ps"), ("efficiency", "efficiency"),
    ("efficiency against", "efficiency_bound"),
    ("bottleneck engine", "bottleneck_engine"), ("max engine busy (ps)", "max_engine_busy_ps"),
    ("roofline bound", "roofline_bound"), ("roofline (ps)", "roofline_ps"),
    ("roofline fraction", "roofline_frac"),
    ("stall (ps)", "stall_ps"), ("ops", "n_ops"), ("PEs used", "n_pe_used"),
    ("PE compute busy max/mean", "pe_busy_balance"),
    ("dma reads", "dma_read_count"), ("dma read bytes", "dma_read_bytes"),
    ("dma writes", "dma_write_count"), ("dma write bytes", "dma_write_bytes"),
    ("HBM GB/s achieved", "hbm_gbps_achieved"), ("flops", "flops"),
    ("DMA active (ps)", "dma_active_ps"), ("DMA/compute overlap (ps)", "dma_compute_overlap_ps"),
    ("DMA/compute overlap (frac)", "dma_compute_overlap_frac"),
    ("scratch peak (bytes)", "scratch_peak_bytes"),
)


def op_breakdown(trace: Trace) -> pl.DataFrame:
    """Per (kind, name): count, total busy_ps, total nbytes, total wait_ps."""
    return (scan_ops(trace).group_by("kind", "name")
            .agg(count=pl.len(), busy_ps=pl.col("busy_ps").sum(), nbytes=pl.col("nbytes").sum(),
                 wait_ps=pl.col("wait_ps").sum())
            .sort("busy_ps", "kind", "name", descending=[True, False, False]).collect())


@dataclass(frozen=True)
class MetricsReport:
    """``kernbench report``: the metrics of one trace, plus its per-op breakdown."""

    path: str
    case: str
    metrics: Metrics
    by_op: list[dict[str, Any]] = field(default_factory=list)
    critical: dict[str, Any] = field(default_factory=dict)  # ``critical.summary``
    exit_code: int = 0
    #: what ``replay/`` says of this trace (None: not replayed); a stale one says so
    replay: str | None = None
    warnings: tuple[str, ...] = ()
    #: per HBM tensor: bytes read / used / written, re-reads (``analyze.access``)
    tensors: list[dict[str, Any]] = field(default_factory=list)
    #: the manifest's ``retimed_from``: the trace this one was retimed from, its
    #: hardware and latency; None for a recording
    retimed_from: dict[str, Any] | None = None

    def engine_rows(self) -> list[list[Any]]:
        m = self.metrics
        return [[str(e), m[f"busy_ps_{e}"], m[f"busy_max_ps_{e}"], m[f"util_{e}"],
                 m[f"util_mean_{e}"], m[f"roofline_ps_{e}"]] for e in ENGINES]

    def ceiling_rows(self) -> list[list[Any]]:
        """One row per roofline ceiling (HBM, GEMM, MATH, link): what ``kernbench plot``
        draws; ``binds`` marks the bound the kernel's point sits under."""
        return [[c.name, c.ideal_ps, None if c.gflops == float("inf") else c.gflops, c.frac,
                 "*" if c.binds else ""] for c in ceilings(self.metrics)]

    def to_text(self) -> str:
        m = self.metrics
        scratch = sorted(k for k in m if k.startswith("scratch_peak_bytes_pe"))
        head = f"trace {self.path} (case {self.case})"
        if self.retimed_from is not None:
            was = self.retimed_from
            head += (f"\nretimed from {was['trace']} (hw {was['hw']}, latency "
                     f"{was['t_end_ps']} ps)")
        parts = [
            head if self.replay is None else f"{head}\nreplay: {self.replay}",
            format_table(["metric", "value"], [[label, m[key]] for label, key in SUMMARY]),
            "engines",
            format_table(["engine", "busy_ps", "busy_max_ps", "util", "util_mean",
                          "roofline_ps"], self.engine_rows()),
            "roofline (a ceiling per engine, then per shared part: the kernel's GFLOP/s were "
            "it the only limit)",
            format_table(["ceiling", "ideal_ps", "gflops", "frac_of_latency", "binds"],
                         self.ceiling_rows()),
            "ops",
            format_table(["kind", "name", "count", "busy_ps", "nbytes", "wait_ps"],
                         [list(r.values()) for r in self.by_op]),
        ]
        if self.critical:
            parts += critical_text(self.critical)
        if self.tensors:
            parts += ["HBM tensors (used: distinct elements read; rereads: read / used)",
                      format_table(list(self.tensors[0]), [list(r.values())
                                                           for r in self.tensors])]
        if scratch:
            parts += ["scratch per PE", format_table(
                ["pe", "peak_bytes"], [[int(k.removeprefix("scratch_peak_bytes_pe")), m[k]]
                                       for k in scratch])]
        return "\n\n".join(parts) + "\n"

    def to_dict(self) -> dict[str, Any]:
        return {"trace": self.path, "case": self.case, "metrics": self.metrics,
                "by_op": self.by_op, "critical_path": self.critical, "replay": self.replay,
                "tensors": self.tensors, "retimed_from": self.retimed_from}

    def __repr__(self) -> str:
        from kernbench.notebook import report_repr

        return report_repr(self)

    def _repr_html_(self) -> str:
        from kernbench.notebook import report_html

        return report_html(self)

    def to_json(self) -> str:
        return to_json(self.to_dict())


def report(trace_or_path: Trace | str | Path) -> MetricsReport:
    """The ``kernbench report`` of a trace."""
    from kernbench.analyze.access import tensor_traffic

    trace = open_trace(trace_or_path)
    m = metrics(trace)
    replay, warnings = replay_line(trace)
    critical = summary(critical_path(trace), int(m["latency_ps"]))
    critical["shared_parts"] = hw_of(trace).shared  # the by-part table is shown then
    return MetricsReport(str(trace.path), str(trace.manifest.get("case")), m,
                         op_breakdown(trace).to_dicts(), critical,
                         replay=replay, warnings=warnings,
                         tensors=tensor_traffic(trace).to_dicts(),
                         retimed_from=trace.manifest.get("retimed_from"))


#: the critical-path tables: (title, key, columns); the part and head-of-line columns
#: (``WAIT_COLUMNS``) follow when any row has some
CRITICAL_TABLES = (("by engine", "by_engine", ("engine", "path_ps", "share", "ops")),
                   ("by source line", "by_line", ("src", "path_ps", "share", "ops", "wait_ps")),
                   ("by part (the engines' own work, then waits for a shared part)", "by_part",
                    ("part", "path_ps", "share")),
                   ("by shared resource", "by_resource",
                    ("resource", "part", "path_ps", "share", "ops")),
                   ("head-of-line waits (an op behind another program's op on its engine or "
                    "queue)", "behind",
                    ("src", "engine", "behind_src", "programs", "ops", "behind_ps", "wait_ps",
                     "path_ps")))
WAIT_COLUMNS = (*PART_COLUMNS, "behind_ps")
#: tables shown even when empty (by part: on hardware with a shared part, or when any is
#: on the path)
_ALWAYS = frozenset({"by_engine", "by_line"})


def critical_tables(c: dict[str, Any]) -> list[tuple[str, list[str], list[list[Any]]]]:
    """The critical path's tables as (title, headers, rows), for the text and HTML reports."""
    out = []
    for title, key, cols in CRITICAL_TABLES:
        rows = c.get(key, [])
        if key == "by_part" and not (c.get("shared_parts") or any(
                r["path_ps"] for r in rows if r["part"] != "engine")):
            continue
        if not rows and key not in _ALWAYS:
            continue
        extra = [w for w in WAIT_COLUMNS if w not in cols and any(r.get(w) for r in rows)]
        headers = [*cols, *extra]
        out.append((title, headers, [[r.get(k) for k in headers] for r in rows]))
    return out


def critical_text(c: dict[str, Any]) -> list[str]:
    """The critical-path sections of ``kernbench report``."""
    parts = [f"critical path (the chain of ops that sets the latency: {c['ops']} ops, "
             f"{fmt(c['path_ps'])} ps, {c['share']:.3f} of the latency)"]
    for title, headers, rows in critical_tables(c):
        parts += [f"critical path {title}", format_table(headers, rows)]
    return parts


def replay_line(trace: Trace) -> tuple[str | None, tuple[str, ...]]:
    """(what the trace's ``replay/`` found, warnings): None without a replay; a replay of
    other contents is ignored and said so (ADR-0538)."""
    if not (trace.path / "replay").exists():
        return None, ()
    verdict = read_verdict(trace.path)
    reason = verdict if isinstance(verdict, str) else stale_reason(verdict, trace.manifest)
    if reason is not None:
        return f"ignored: {reason}", (f"ignoring {trace.path / 'replay'}: {reason}",)
    assert isinstance(verdict, dict)
    if verdict.get("reference") is None:
        return "replayed, not verified (no reference)", ()
    status = verdict_status(verdict)
    if status == UNVERIFIED:
        return f"replayed, not verified ({verdict.get('reference')} compared not every output)", ()
    return ("verified" if status == VERIFIED else "WRONG") + \
        f" against {verdict.get('reference')}", ()
