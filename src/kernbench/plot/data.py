"""The frames a picture draws, computed with polars from a trace (no matplotlib here).

Every frame is bounded in size whatever the trace holds: spans on one track that lie closer
together than a pixel are merged, and step series are reduced to the maximum per time bin, so
a picture of a million-op trace costs about as much as one of a thousand ops.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import polars as pl

from kernbench.analyze.frames import hw_of, scan_ops
from kernbench.analyze.metrics import ENGINES, Ceiling, Metrics, ceilings, lane_expr
from kernbench.schemas.ops import Engine, Kind
from kernbench.trace import Trace
from kernbench.trace.hw import HwConfig

#: horizontal resolution a timeline is reduced to (about a pixel at the default size)
BINS = 2000
#: how many source lines the wait chart shows (the rest are summed as "other")
TOP_LINES = 15


def track_label(engine: str, lane: str) -> str:
    return f"{engine}[{lane}]" if lane else engine


def engine_spans(trace: Trace, bins: int = BINS) -> pl.DataFrame:
    """Columns pe, engine, lane, t0, t1 (ps): the spans each capacity-1 engine is held. On a
    track of more than ``bins`` spans, spans less than ``latency / bins`` apart are merged."""
    gap = max(1, trace.t_end_ps // bins)
    held = (scan_ops(trace)
            .filter(pl.col("engine").is_in([str(e) for e in ENGINES]) & (pl.col("busy_ps") > 0))
            .select("pe", "engine", lane_expr(), t0="t_start_ps",
                    t1=pl.col("t_start_ps") + pl.col("busy_ps"))
            .sort("pe", "engine", "lane", "t0"))
    track = ("pe", "engine", "lane")
    prev_end = pl.col("t1").cum_max().shift(1).over(track)
    few = pl.len().over(track) <= bins
    return (held.with_columns(new=(prev_end.is_null() | few | (pl.col("t0") > prev_end + gap))
                              .cast(pl.Int64).cum_sum().over("pe", "engine", "lane"))
            .group_by("pe", "engine", "lane", "new")
            .agg(pl.col("t0").min(), pl.col("t1").max())
            .drop("new").sort("pe", "engine", "lane", "t0").collect())


def stall_spans(trace: Trace, bins: int = BINS) -> pl.DataFrame:
    """Columns pe, t0, t1 (ps): when each PE's kernel waited before issuing (``wait_ps``)."""
    gap = max(1, trace.t_end_ps // bins)
    waits = (scan_ops(trace).filter(pl.col("parent").is_null() & (pl.col("wait_ps") > 0))
             .select("pe", t0=pl.col("t_issue_ps") - pl.col("wait_ps"), t1="t_issue_ps")
             .sort("pe", "t0"))
    prev_end = pl.col("t1").cum_max().shift(1).over("pe")
    few = pl.len().over("pe") <= bins
    return (waits.with_columns(new=(prev_end.is_null() | few | (pl.col("t0") > prev_end + gap))
                               .cast(pl.Int64).cum_sum().over("pe"))
            .group_by("pe", "new").agg(pl.col("t0").min(), pl.col("t1").max())
            .drop("new").sort("pe", "t0").collect())


def drain_spans(trace: Trace) -> pl.DataFrame:
    """Columns pe, t0, t1 (ps): from a PE's last issue to the end of its last op, when its
    kernel has issued everything and only its engines still run (async issue; under
    blocking issue the span is empty and left out)."""
    return (scan_ops(trace).filter(pl.col("parent").is_null())
            .group_by("pe").agg(t0=pl.col("t_issue_ps").max(), t1=pl.col("t_end_ps").max())
            .filter(pl.col("t1") > pl.col("t0")).sort("pe").collect())


def scratch_steps(trace: Trace, bins: int = BINS) -> pl.DataFrame:
    """Columns pe, t (ps), bytes: the kernel-scratch cursor over time, the maximum per bin
    (so the peak survives the reduction), drawn over the whole recording: each PE's last
    value holds until its last op ends (under async issue the kernel's last allocation comes
    long before its engines finish with it)."""
    width = max(1, trace.t_end_ps // bins)
    ops = scan_ops(trace)
    steps = (ops.select("pe", "t_issue_ps", "scratch_cursor")
             .with_columns(t=(pl.col("t_issue_ps") // width) * width)
             .group_by("pe", "t").agg(bytes=pl.col("scratch_cursor").max())
             .sort("pe", "t").collect())
    ends = ops.group_by("pe").agg(t=pl.col("t_end_ps").max()).collect()
    last = (steps.group_by("pe").agg(pl.col("bytes").last(), pl.col("t").last().alias("at"))
            .join(ends, on="pe").filter(pl.col("t") > pl.col("at")).select(steps.columns))
    return pl.concat([steps, last.cast(steps.schema)]).sort("pe", "t")


def src_labels(trace: Trace) -> Callable[[str], str]:
    """``file:line`` labels relative to the kernel's module: a file under the folder the
    kernel's module was imported from is named from there (``tiled_matmul.py:38``, not
    ``/home/me/proj/examples/tiled_matmul.py:38``); package files keep their
    ``kernbench/...`` spelling; any other absolute path is cut to its last two parts."""
    module = str(trace.manifest.get("kernel") or "").split(":")[0]
    rel = module.replace(".", "/") + ".py" if module and module != "__main__" else ""
    srcs = scan_ops(trace).select(pl.col("src").cast(pl.String).unique()).collect()
    paths = {s.rpartition(":")[0] for s in srcs["src"].to_list() if s}
    root = next((p[:-len(rel)] for p in sorted(paths) if rel and p.endswith("/" + rel)
                 or p == rel), None)
    if root is None:
        absolute = [p for p in paths if os.path.isabs(p)]
        root = os.path.commonpath([os.path.dirname(p) for p in absolute]) + "/" if absolute else ""

    def label(src: str) -> str:
        path, _, line = src.rpartition(":")
        if not path:
            return src
        if root and path.startswith(root):
            path = path[len(root):]
        elif os.path.isabs(path):
            path = "/".join(path.split("/")[-2:])
        return f"{path}:{line}"

    return label


def wait_by_line(trace: Trace, top: int = TOP_LINES) -> pl.DataFrame:
    """Columns src, wait_ps, ops: stall time attributed to the kernel line whose op waited,
    largest first; lines past ``top`` are summed into one ``(other lines)`` row."""
    per = (scan_ops(trace).filter(pl.col("parent").is_null() & (pl.col("wait_ps") > 0))
           .group_by("src").agg(wait_ps=pl.col("wait_ps").sum(), ops=pl.len())
           .sort("wait_ps", "src", descending=[True, False]).collect())
    if per.height <= top:
        return per
    rest = per.slice(top)
    other = pl.DataFrame({"src": ["(other lines)"], "wait_ps": [int(rest["wait_ps"].sum())],
                          "ops": [int(rest["ops"].sum())]}, schema=per.schema)
    return pl.concat([per.head(top), other])


@dataclass(frozen=True)
class Roofline:
    """The kernel's roofline: one ceiling per engine (``metrics.ceilings``: HBM, GEMM, MATH,
    link, in the kernel's GFLOP/s), the point (intensity, achieved GFLOP/s) and the ceiling
    it sits under. ``peak_gflops`` and ``hbm_gbps`` are the machine's (over the PEs used),
    for reference lines."""

    peak_gflops: float  # GEMM peak: 2 * rows * cols flops per cycle per PE
    hbm_gbps: float  # HBM bandwidth over the PEs used
    intensity: float  # the kernel's flops per HBM byte moved (0 when it moved none)
    achieved_gflops: float  # flops / latency
    n_pe: int
    ceilings: tuple[Ceiling, ...] = ()
    moved_bytes: int = 0
    unit: str = "flop"  # what the rates count (``WORK``): flop, element result or byte

    @property
    def ridge(self) -> float:
        """The intensity (flop/byte) where the machine's bandwidth roof meets its GEMM roof."""
        return self.peak_gflops / self.hbm_gbps

    @property
    def bound(self) -> Ceiling | None:
        """The ceiling that binds (``roofline_bound``), if the kernel did any work."""
        return next((c for c in self.ceilings if c.binds), None)

    @property
    def hbm_slope_gbps(self) -> float:
        """The slope of the HBM ceiling: the kernel's bytes over its busiest channel's ideal
        time (GB/s), so the diagonal meets the HBM ceiling at the kernel's intensity."""
        hbm = self.ceilings[0].ideal_ps if self.ceilings else 0.0
        return self.moved_bytes / hbm * 1000.0 if hbm else 0.0

    def ceiling_at(self, c: Ceiling, x: float) -> float:
        """The height of ceiling ``c`` at intensity ``x``: HBM rises with x, the rest are flat."""
        return x * self.hbm_slope_gbps if c.name == "hbm" else c.gflops


#: what a roofline counts, first that the kernel did any of: GEMM flops, else the elements
#: its MATH ops produced, else the HBM bytes it moved (a copy kernel: its point is GB/s)
WORK = ("flop", "element result", "byte")


def math_elements(trace: Trace) -> int:
    """Elements the MATH engine produced (composite parents excluded)."""
    return int(scan_ops(trace).filter((pl.col("engine") == Engine.MATH.value)
                                      & (pl.col("kind") != Kind.COMPOSITE.value))
               .select(pl.col("num_elements").sum()).collect().item() or 0)


def roofline(trace: Trace, m: Metrics) -> Roofline:
    """The roofline of a trace: every kernel that moves HBM bytes gets a point, in the first
    unit of ``WORK`` it did any of."""
    hw: HwConfig = hw_of(trace)
    n_pe = max(1, int(m["n_pe_used"]))
    moved = int(m["dma_read_bytes"]) + int(m["dma_write_bytes"])
    flops = int(m["flops"])
    work, unit = flops, WORK[0]
    if not flops:
        work, unit = math_elements(trace), WORK[1]
        if not work:
            work, unit = moved, WORK[2]
    latency_ns = max(1, int(m["latency_ps"])) / 1000.0
    return Roofline(peak_gflops=2.0 * hw.gemm_rows * hw.gemm_cols * hw.clock_ghz * n_pe,
                    hbm_gbps=float(hw.hbm_gbps) * n_pe,
                    intensity=work / moved if moved else 0.0,
                    achieved_gflops=work / latency_ns, n_pe=n_pe,
                    ceilings=ceilings(m, work), moved_bytes=moved, unit=unit)


def path_spans(path: pl.DataFrame, latency: int, bins: int = BINS) -> pl.DataFrame:
    """Columns pe, engine, lane, t0, t1 (ps): the critical path (``kb.analyze.critical_path``)
    on the engine rows of the timeline, each op over the span it holds the path; spans of one
    row less than ``latency / bins`` apart are merged."""
    gap = max(1, latency // bins)
    on = (path.filter(pl.col("engine").is_in([str(e) for e in ENGINES])
                      & (pl.col("path_ps") > 0))
          .select("pe", "engine", "lane", t0="t_from_ps", t1="t_to_ps")
          .sort("pe", "engine", "lane", "t0"))
    row = ("pe", "engine", "lane")
    prev_end = pl.col("t1").cum_max().shift(1).over(row)
    return (on.with_columns(new=(prev_end.is_null() | (pl.col("t0") > prev_end + gap))
                            .cast(pl.Int64).cum_sum().over(row))
            .group_by(*row, "new").agg(pl.col("t0").min(), pl.col("t1").max())
            .drop("new").sort(*row, "t0"))
