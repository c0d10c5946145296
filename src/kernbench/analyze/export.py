"""``kernbench export``: Chrome/Perfetto trace-event JSON of a trace's timeline.

One process per PE; one thread (track) per capacity-1 engine instance (``link_tx`` once per
direction) carrying an ``X`` event for every op over the span it holds the engine
(``[t_start, t_start + busy)``); a ``scratch`` counter (``C``) per PE with the kernel-scratch
cursor after each op. Timestamps are microseconds (the format's unit) from integer ps.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from kernbench.analyze.frames import open_trace, scan_ops
from kernbench.analyze.metrics import ENGINES, lane_expr
from kernbench.analyze.report import to_json
from kernbench.errors import BadInputError
from kernbench.trace import Trace

PS_PER_US = 1_000_000
SCRATCH_COUNTER = "scratch"


def _tracks(held: pl.DataFrame) -> pl.DataFrame:
    """(pe, engine, lane) -> tid, engines in vocabulary order, lanes sorted."""
    order = {str(e): i for i, e in enumerate(ENGINES)}
    return (held.select("pe", "engine", "lane").unique()
            .with_columns(rank=pl.col("engine").replace_strict(order, return_dtype=pl.Int64))
            .sort("pe", "rank", "lane")
            .with_columns(tid=pl.int_range(1, pl.len() + 1).over("pe"),
                          track=pl.when(pl.col("lane") == "").then(pl.col("engine"))
                          .otherwise(pl.format("{}[{}]", pl.col("engine"), pl.col("lane")))))


def timeline_events(trace: Trace) -> list[dict[str, Any]]:
    """The trace-event list: metadata, ``X`` op spans, ``C`` scratch counters."""
    ops = scan_ops(trace).select(
        "op_id", "pe", "kind", "name", "engine", "t_issue_ps", "t_start_ps", "t_end_ps",
        "busy_ps", "wait_ps", "nbytes", "scratch_cursor", "src", lane_expr()).collect()
    held = ops.filter(pl.col("engine").is_in([str(e) for e in ENGINES]) & (pl.col("busy_ps") > 0))
    tracks = _tracks(held)
    spans = held.join(tracks.select("pe", "engine", "lane", "tid"), on=["pe", "engine", "lane"])
    x = spans.sort("pe", "tid", "t_start_ps", "op_id").select(
        name="name", cat="kind", ph=pl.lit("X"), pid="pe", tid="tid",
        ts=pl.col("t_start_ps") / PS_PER_US, dur=pl.col("busy_ps") / PS_PER_US,
        args=pl.struct("op_id", "src", "nbytes", "wait_ps", "t_end_ps"))
    counters = ops.sort("pe", "t_issue_ps", "op_id").select(
        name=pl.lit(SCRATCH_COUNTER), ph=pl.lit("C"), pid="pe", tid=pl.lit(0),
        ts=pl.col("t_issue_ps") / PS_PER_US, args=pl.struct(bytes="scratch_cursor"))
    meta: list[dict[str, Any]] = []
    for pe in sorted(ops["pe"].unique().to_list()):
        meta += [{"name": "process_name", "ph": "M", "pid": pe, "args": {"name": f"PE {pe}"}},
                 {"name": "process_sort_index", "ph": "M", "pid": pe,
                  "args": {"sort_index": pe}}]
    for t in tracks.iter_rows(named=True):
        meta += [{"name": "thread_name", "ph": "M", "pid": t["pe"], "tid": t["tid"],
                  "args": {"name": t["track"]}},
                 {"name": "thread_sort_index", "ph": "M", "pid": t["pe"], "tid": t["tid"],
                  "args": {"sort_index": t["tid"]}}]
    return meta + x.to_dicts() + counters.to_dicts()


@dataclass(frozen=True)
class ExportReport:
    path: str
    trace: str
    n_events: int
    n_spans: int
    exit_code: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"out": self.path, "trace": self.trace, "events": self.n_events,
                "spans": self.n_spans}

    def to_text(self) -> str:
        return (f"wrote {self.n_events} events ({self.n_spans} op spans) to {self.path}; "
                "open it in ui.perfetto.dev\n")

    def to_json(self) -> str:
        return to_json(self.to_dict())


def export_perfetto(trace_or_path: Trace | str | Path, out: str | Path) -> ExportReport:
    """Write the Perfetto/Chrome JSON timeline of a trace to ``out``."""
    trace = open_trace(trace_or_path)
    events = timeline_events(trace)
    doc = {"traceEvents": events, "displayTimeUnit": "ns",
           "otherData": {"trace": str(trace.path), "case": str(trace.manifest.get("case")),
                         "kernel": str(trace.manifest.get("kernel"))}}
    out = Path(out)
    try:
        out.write_text(json.dumps(doc, separators=(",", ":")))
    except OSError as exc:
        raise BadInputError(f"cannot write {str(out)!r}: {exc.strerror}") from None
    return ExportReport(str(out), str(trace.path), len(events),
                        sum(e["ph"] == "X" for e in events))
