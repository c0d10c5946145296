"""``kernbench export``: Chrome/Perfetto trace-event JSON of a trace's timeline.

One process per PE; one thread (track) per capacity-1 engine instance (``link_tx`` once per
direction) carrying an ``X`` event for every op over the span it holds the engine
(``[t_start, t_start + busy)``); a ``stall`` track per PE with the time its kernel waited
before issuing an op (``[t_issue - wait, t_issue)``); a ``scratch`` counter (``C``) per PE with
the kernel-scratch cursor; flow arrows (``s``/``f``) from each ``dma_read`` to the first op
that reads the bytes it loaded.

Exactness: every time is first made an integer number of nanoseconds by flooring the
picoseconds (``ns = ps // 1000``, monotone, so spans that do not overlap in ps do not overlap
in ns), and a span's ``dur`` is ``end_ns - start_ns``. The format's unit is the microsecond:
``ts = ns / 1000`` is written as the shortest decimal that reads back to it, which for an
integer ``ns`` is the exact decimal ``ns / 1000``. One counter sample per timestamp (the
cursor after the last op issued at it). ``.pftrace`` outputs go to
``kernbench.analyze.export_proto`` (the native Perfetto protobuf format).
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from kernbench.analyze.frames import open_trace, operands, scan_ops
from kernbench.analyze.metrics import ENGINES, lane_expr
from kernbench.analyze.report import to_json
from kernbench.errors import BadInputError
from kernbench.schemas.ops import Kind, Op
from kernbench.trace import Trace

PS_PER_NS = 1000
SCRATCH_COUNTER = "scratch"
STALL_TRACK = "stall"
#: suffixes written as native Perfetto protobuf instead of JSON
PROTO_SUFFIXES = (".pftrace", ".perfetto-trace", ".pb")


def ns(col: str | pl.Expr) -> pl.Expr:
    """Integer nanoseconds of a picosecond column (floor: monotone)."""
    return (pl.col(col) if isinstance(col, str) else col) // PS_PER_NS


def _us(expr: pl.Expr) -> pl.Expr:
    return expr / 1000.0


def _tracks(held: pl.DataFrame, stall_pes: list[int]) -> pl.DataFrame:
    """(pe, engine, lane) -> tid and track name; engines in vocabulary order, then stall."""
    order = {str(e): i for i, e in enumerate(ENGINES)} | {STALL_TRACK: len(ENGINES)}
    stalls = pl.DataFrame({"pe": stall_pes, "engine": STALL_TRACK, "lane": ""},
                          schema=held.select("pe", "engine", "lane").schema)
    return (pl.concat([held.select("pe", "engine", "lane").unique(), stalls])
            .with_columns(rank=pl.col("engine").replace_strict(order, return_dtype=pl.Int64))
            .sort("pe", "rank", "lane")
            .with_columns(tid=pl.int_range(1, pl.len() + 1).over("pe"),
                          track=pl.when(pl.col("lane") == "").then(pl.col("engine"))
                          .otherwise(pl.format("{}[{}]", pl.col("engine"), pl.col("lane")))))


@dataclass(frozen=True)
class Timeline:
    """The exported timeline as frames (integer ns): spans (op and stall ``X`` events),
    counters, flows, and the tracks they sit on."""

    spans: pl.DataFrame  # pe, tid, start_ns, end_ns, name, cat, op_id, src, nbytes, wait_ps
    counters: pl.DataFrame  # pe, ts_ns, bytes
    flows: pl.DataFrame  # id, pe, tid, ts_ns (load side), c_pe, c_tid, c_ts_ns (consumer)
    tracks: pl.DataFrame  # pe, engine, lane, tid, track
    pes: list[int]


def first_consumers(ops: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
    """load_id -> consumer: for each ``dma_read``, the first later op reading its on-chip
    output address (same space and PE), provided nothing wrote that address in between. A
    composite's parent row is not a consumer (its children that hold engines are)."""
    ops = ops.lazy()
    parents = ops.filter(pl.col("kind") == Kind.COMPOSITE.value).select("op_id").collect()["op_id"]
    opnd = (operands(ops.select("op_id", "inputs", "output"))
            .filter((pl.col("space") != "hbm") & ~pl.col("op_id").is_in(parents.to_list()))
            .select("op_id", "role", pl.format("{}@{}", "space", "mem_pe").alias("mem_pe"),
                    "addr")
            .collect())
    loads = (ops.filter(pl.col("name") == Op.DMA_READ.value).select("op_id").collect()
             .join(opnd.filter(pl.col("role") == "out"), on="op_id")
             .select(load_id="op_id", mem_pe="mem_pe", addr="addr").sort("load_id"))

    def first_after(left: pl.DataFrame, right: pl.DataFrame, on: str) -> pl.DataFrame:
        """Each load joined with the first ``right`` row of its (mem_pe, addr) after it."""
        return left.join_asof(right, left_on="load_id", right_on=on, by=["mem_pe", "addr"],
                              strategy="forward", allow_exact_matches=False)

    reads = (opnd.filter(pl.col("role") == "in").select(reader="op_id", mem_pe="mem_pe",
                                                         addr="addr").unique().sort("reader"))
    writes = (opnd.filter(pl.col("role") == "out")
              .select(writer="op_id", mem_pe="mem_pe", addr="addr").sort("writer"))
    with warnings.catch_warnings():  # sorted by op_id within every (mem_pe, addr) group
        warnings.simplefilter("ignore", UserWarning)
        found = first_after(first_after(loads, reads, "reader"), writes, "writer")
    return (found.filter(pl.col("reader").is_not_null()
                         & (pl.col("writer").is_null() | (pl.col("reader") <= pl.col("writer"))))
            .select("load_id", consumer="reader"))


def timeline(trace: Trace) -> Timeline:
    scan = scan_ops(trace)
    ops = scan.select(
        "op_id", "pe", "kind", "name", "engine", "parent", "t_issue_ps", "t_start_ps",
        "busy_ps", "wait_ps", "nbytes", "scratch_cursor", "src", lane_expr()).collect()
    held = ops.filter(pl.col("engine").is_in([str(e) for e in ENGINES]) & (pl.col("busy_ps") > 0))
    waits = ops.filter(pl.col("parent").is_null() & (pl.col("wait_ps") > 0))
    pes = sorted(ops["pe"].unique().to_list())
    tracks = _tracks(held, pes)  # a stall track on every PE, empty if it never waited
    tid = tracks.select("pe", "engine", "lane", "tid")
    cols = ["pe", "tid", "start_ns", "end_ns", "name", "cat", "op_id", "src", "nbytes",
            "wait_ps"]
    op_spans = held.join(tid, on=["pe", "engine", "lane"]).select(
        "pe", "tid", start_ns=ns("t_start_ps"), end_ns=ns(pl.col("t_start_ps") + pl.col("busy_ps")),
        name="name", cat="kind", op_id="op_id", src="src", nbytes="nbytes", wait_ps="wait_ps")
    stall_tid = tid.filter(pl.col("engine") == STALL_TRACK).select("pe", "tid")
    stall_spans = waits.join(stall_tid, on="pe").select(
        "pe", "tid", start_ns=ns(pl.col("t_issue_ps") - pl.col("wait_ps")),
        end_ns=ns("t_issue_ps"), name=pl.lit(STALL_TRACK), cat=pl.lit(STALL_TRACK),
        op_id="op_id", src="src", nbytes="nbytes", wait_ps="wait_ps")
    spans = pl.concat([op_spans.select(cols), stall_spans.select(cols)]).sort(
        "pe", "tid", "start_ns", "op_id")
    counters = (ops.select("pe", "op_id", ts_ns=ns("t_issue_ps"), bytes="scratch_cursor")
                .sort("pe", "ts_ns", "op_id")
                .group_by("pe", "ts_ns", maintain_order=True).agg(pl.col("bytes").last()))
    at = op_spans.select("op_id", "pe", "tid",
                         mid=pl.col("start_ns") + (pl.col("end_ns") - pl.col("start_ns")) // 2)
    flows = (first_consumers(scan)  # operand structs are read for this alone
             .join(at, left_on="load_id", right_on="op_id")
             .join(at.rename({"pe": "c_pe", "tid": "c_tid", "mid": "c_ts_ns"}),
                   left_on="consumer", right_on="op_id")
             .select(id="load_id", pe="pe", tid="tid", ts_ns="mid", consumer="consumer",
                     c_pe="c_pe", c_tid="c_tid", c_ts_ns="c_ts_ns").sort("id"))
    return Timeline(spans, counters, flows, tracks, pes)


def timeline_events(trace: Trace) -> list[dict[str, Any]]:
    """The trace-event list: metadata, ``X`` spans, ``C`` counters, ``s``/``f`` flows."""
    tl = timeline(trace)
    x = tl.spans.select(
        "name", "cat", ph=pl.lit("X"), pid="pe", tid="tid", ts=_us(pl.col("start_ns")),
        dur=_us(pl.col("end_ns") - pl.col("start_ns")),
        args=pl.struct("op_id", "src", "nbytes", "wait_ps"))
    c = tl.counters.select(name=pl.lit(SCRATCH_COUNTER), ph=pl.lit("C"), pid="pe",
                           tid=pl.lit(0), ts=_us(pl.col("ts_ns")), args=pl.struct("bytes"))
    flow = dict(name="load", cat="flow")
    starts = tl.flows.select(**{k: pl.lit(v) for k, v in flow.items()}, ph=pl.lit("s"),
                             id="id", pid="pe", tid="tid", ts=_us(pl.col("ts_ns")))
    ends = tl.flows.select(**{k: pl.lit(v) for k, v in flow.items()}, ph=pl.lit("f"),
                           bp=pl.lit("e"), id="id", pid="c_pe", tid="c_tid",
                           ts=_us(pl.col("c_ts_ns")))
    meta: list[dict[str, Any]] = []
    for pe in tl.pes:
        meta += [{"name": "process_name", "ph": "M", "pid": pe, "args": {"name": f"PE {pe}"}},
                 {"name": "process_sort_index", "ph": "M", "pid": pe,
                  "args": {"sort_index": pe}}]
    for t in tl.tracks.iter_rows(named=True):
        meta += [{"name": "thread_name", "ph": "M", "pid": t["pe"], "tid": t["tid"],
                  "args": {"name": t["track"]}},
                 {"name": "thread_sort_index", "ph": "M", "pid": t["pe"], "tid": t["tid"],
                  "args": {"sort_index": t["tid"]}}]
    return (meta + x.to_dicts() + c.to_dicts() + starts.to_dicts() + ends.to_dicts())


@dataclass(frozen=True)
class ExportReport:
    path: str
    trace: str
    n_events: int
    n_spans: int
    format: str = "json"
    n_bytes: int = 0
    exit_code: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"out": self.path, "trace": self.trace, "events": self.n_events,
                "spans": self.n_spans, "format": self.format, "bytes": self.n_bytes}

    def to_text(self) -> str:
        return (f"wrote {self.n_events} events ({self.n_spans} spans, {self.format}, "
                f"{self.n_bytes:,} bytes) to {self.path}; open it in ui.perfetto.dev\n")

    def to_json(self) -> str:
        return to_json(self.to_dict())


def _write(out: Path, data: bytes) -> None:
    try:
        out.write_bytes(data)
    except OSError as exc:
        raise BadInputError(f"cannot write {str(out)!r}: {exc.strerror}") from None


def export_perfetto(trace_or_path: Trace | str | Path, out: str | Path) -> ExportReport:
    """Write the Perfetto timeline of a trace to ``out``: Chrome JSON, or the native
    protobuf format when ``out`` ends in ``.pftrace`` (needs ``kernbench[perfetto]``)."""
    trace = open_trace(trace_or_path)
    out = Path(out)
    if out.suffix.lower() in PROTO_SUFFIXES:
        from kernbench.analyze.export_proto import export_proto, protos

        protos()  # the one-line "pip install" error before any file is touched
        tl = timeline(trace)
        try:
            with open(out, "wb") as f:
                n_events, n_spans = export_proto(tl, f)
        except OSError as exc:
            raise BadInputError(f"cannot write {str(out)!r}: {exc.strerror}") from None
        return ExportReport(str(out), str(trace.path), n_events, n_spans, "protobuf",
                            out.stat().st_size)
    events = timeline_events(trace)
    doc = {"traceEvents": events, "displayTimeUnit": "ns",
           "otherData": {"trace": str(trace.path), "case": str(trace.manifest.get("case")),
                         "kernel": str(trace.manifest.get("kernel"))}}
    data = json.dumps(doc, separators=(",", ":")).encode()
    _write(out, data)
    return ExportReport(str(out), str(trace.path), len(events),
                        sum(e["ph"] == "X" for e in events), "json", len(data))
