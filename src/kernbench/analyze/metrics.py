"""The metrics of docs/analysis.md: one flat dict (str -> int | float | str) computed with polars.

Only the scalar op columns are scanned (lazily, with projection), never the operand structs.
Engine sets come from the op vocabulary (``CAPACITY_ONE``), so a new engine appears here
without touching this file.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from kernbench.analyze.frames import hw_of, open_trace, scan_ops
from kernbench.analyze.shared_ceilings import SHARED_CEILINGS, shared_metrics
from kernbench.errors import closest_name
from kernbench.notebook import MetricsDict
from kernbench.schemas.ops import CAPACITY_ONE, Engine, Kind, Op
from kernbench.trace import Trace
from kernbench.trace.hw import HwConfig
from kernbench.trace.scalars import as_float, as_int

Metrics = dict[str, Any]  # int | float | str values

#: capacity-1 engines in vocabulary order: every trace reports all of them (0 when unused)
ENGINES: tuple[Engine, ...] = tuple(e for e in Engine if e in CAPACITY_ONE)
DMA_ENGINES = frozenset({Engine.DMA_RD, Engine.DMA_WR})
COMPUTE_ENGINES = frozenset({Engine.GEMM, Engine.MATH})

_COLUMNS = ("op_id", "pe", "kind", "name", "engine", "parent", "t_start_ps", "t_end_ps",
            "busy_ps", "wait_ps", "nbytes", "flops", "scratch_cursor", "attrs")

#: the ideal time an op needs on its engine, for the roofline bound (ps)
ROOFLINE: dict[Engine, Callable[[HwConfig], pl.Expr]] = {
    Engine.DMA_RD: lambda hw: pl.col("nbytes") * 1000.0 / hw.hbm_gbps,
    Engine.DMA_WR: lambda hw: pl.col("nbytes") * 1000.0 / hw.hbm_gbps,
    Engine.GEMM: lambda hw: pl.col("busy_ps").cast(pl.Float64),
    Engine.MATH: lambda hw: pl.col("busy_ps").cast(pl.Float64),
    Engine.LINK_TX: lambda hw: pl.col("nbytes") * 1000.0 / hw.link_gbps,
}


def lane_expr() -> pl.Expr:
    """The instance of an engine within a PE: the link direction for ``link_tx`` (attrs
    ``dir``), else ``""``. (pe, engine, lane) identifies one capacity-1 server."""
    return pl.col("attrs").str.json_path_match("$.dir").fill_null("").alias("lane")


def scalar_ops(trace: Trace, pe: int | None = None) -> pl.DataFrame:
    """The scalar op columns (plus ``lane``), optionally only one PE's ops."""
    lf = scan_ops(trace).select(_COLUMNS)
    if pe is not None:
        lf = lf.filter(pl.col("pe") == pe)
    return lf.with_columns(lane_expr()).collect()


def _ratio(a: float, b: float) -> float:
    return float(a) / float(b) if b else 0.0


def _engine_metrics(ops: pl.DataFrame, latency: int) -> Metrics:
    held = ops.filter(pl.col("engine").is_in([e.value for e in ENGINES]))
    per = held.group_by("pe", "engine", "lane").agg(pl.col("busy_ps").sum())
    out: Metrics = {}
    for e in ENGINES:
        rows = per.filter(pl.col("engine") == e.value)["busy_ps"]
        total, peak = int(rows.sum() or 0), as_int(rows.max())
        n_servers = max(len(rows), 1)
        out[f"busy_ps_{e}"] = total
        out[f"busy_max_ps_{e}"] = peak
        out[f"util_{e}"] = _ratio(peak, latency)
        out[f"util_mean_{e}"] = _ratio(total, latency * n_servers)
    # ties (e.g. equal read and write traffic) break by pe, engine name, lane: never by the
    # group order, which polars does not fix
    top = per.sort(pl.col("busy_ps"), pl.col("pe"), pl.col("engine").cast(pl.String),
                   pl.col("lane"), descending=[True, False, False, False]).head(1)
    best = int(top["busy_ps"][0]) if top.height else 0
    out["max_engine_busy_ps"] = best
    out["bottleneck_engine"] = str(top["engine"][0]) if top.height else ""
    out["bottleneck_pe"] = int(top["pe"][0]) if top.height else -1
    out["efficiency"] = _ratio(best, latency)
    return out


def _balance_metrics(ops: pl.DataFrame) -> Metrics:
    """Per-PE work balance: the busiest PE's compute busy (GEMM + MATH) over the mean of the
    PEs that ran an op (1.0: every PE computes the same; 0.0: nothing computed)."""
    per = (ops.group_by("pe").agg(pl.col("busy_ps").filter(
        pl.col("engine").is_in([e.value for e in COMPUTE_ENGINES])).sum()))["busy_ps"]
    mean = as_float(per.mean())
    return {"pe_busy_balance": _ratio(as_int(per.max()), mean)}


def _overlap_metrics(ops: pl.DataFrame) -> Metrics:
    """Time a DMA channel and a compute engine of one PE are both busy, summed over PEs."""
    held = ops.filter(pl.col("busy_ps") > 0).select(
        "pe", t0=pl.col("t_start_ps"), t1=pl.col("t_start_ps") + pl.col("busy_ps"),
        dma=pl.col("engine").is_in([e.value for e in DMA_ENGINES]).cast(pl.Int64),
        cmp=pl.col("engine").is_in([e.value for e in COMPUTE_ENGINES]).cast(pl.Int64))
    events = pl.concat([
        held.select("pe", t="t0", d_dma="dma", d_cmp="cmp"),
        held.select("pe", t="t1", d_dma=-pl.col("dma"), d_cmp=-pl.col("cmp")),
    ])
    sweep = (events.group_by("pe", "t").agg(pl.col("d_dma", "d_cmp").sum()).sort("pe", "t")
             .with_columns(n_dma=pl.col("d_dma").cum_sum().over("pe"),
                           n_cmp=pl.col("d_cmp").cum_sum().over("pe"),
                           dur=(pl.col("t").shift(-1).over("pe") - pl.col("t")).fill_null(0)))
    both = sweep.filter((pl.col("n_dma") > 0) & (pl.col("n_cmp") > 0))["dur"].sum()
    dma = sweep.filter(pl.col("n_dma") > 0)["dur"].sum()
    return {"dma_active_ps": int(dma or 0), "dma_compute_overlap_ps": int(both or 0),
            "dma_compute_overlap_frac": _ratio(as_float(both), as_float(dma))}


def _roofline_metrics(ops: pl.DataFrame, hw: HwConfig, latency: int) -> Metrics:
    out: Metrics = {}
    for e in ENGINES:
        need = (ops.filter(pl.col("engine") == e.value)
                .group_by("pe", "lane").agg(ROOFLINE[e](hw).sum().alias("ps")))["ps"].max()
        out[f"roofline_ps_{e}"] = as_float(need)
    bound = max(ENGINES, key=lambda e: out[f"roofline_ps_{e}"])
    out["roofline_ps"] = out[f"roofline_ps_{bound}"]
    out["roofline_bound"] = str(bound) if out["roofline_ps"] else ""
    out["roofline_frac"] = _ratio(out["roofline_ps"], latency)
    return out


def _hbm_bytes(ops: pl.DataFrame) -> int:
    """HBM bytes the DMA engines moved (composite parents are bookkeeping)."""
    dma = ops.filter(pl.col("engine").is_in([e.value for e in DMA_ENGINES])
                     & (pl.col("kind") != Kind.COMPOSITE.value))
    return int(dma["nbytes"].sum() or 0)


def _binding(m: Metrics, shared: Metrics, latency: int) -> Metrics:
    """The shared ceilings' keys, and what binds once they count (ADR-0742): ``efficiency``
    against the largest of the busiest engine's busy time and every shared ceiling's time
    (``efficiency_bound``, ``efficiency_bound_ps``), the roofline against the largest ideal
    time. A shared ceiling binds only when strictly larger, so without one (ahbm-v1, v2:
    every shared time 0) nothing but the new keys changes."""
    out: Metrics = dict(shared)
    bound, bound_ps = str(m["bottleneck_engine"]), float(m["max_engine_busy_ps"])
    roof, roof_ps = str(m["roofline_bound"]), float(m["roofline_ps"])
    for name, key in SHARED_CEILINGS.items():
        ps = float(shared[key])
        if ps > bound_ps:
            bound, bound_ps = name, ps
        if ps > roof_ps:
            roof, roof_ps = name, ps
    out["efficiency_bound"], out["efficiency_bound_ps"] = bound, bound_ps
    if bound in SHARED_CEILINGS:
        out["efficiency"] = _ratio(bound_ps, latency)
    if roof in SHARED_CEILINGS:
        out.update(roofline_ps=roof_ps, roofline_bound=roof,
                   roofline_frac=_ratio(roof_ps, latency))
    return out


#: the ceilings of the roofline: one per kind of engine, over the engines of ``ENGINES`` it
#: groups (the two HBM channels are one ceiling: HBM)
CEILINGS: dict[str, tuple[Engine, ...]] = {
    "hbm": (Engine.DMA_RD, Engine.DMA_WR), "gemm": (Engine.GEMM,), "math": (Engine.MATH,),
    "link": (Engine.LINK_TX,),
}


@dataclass(frozen=True)
class Ceiling:
    """One roof of a kernel's roofline: the rate (its flops per second) the kernel would reach
    if this engine were its only limit, each instance at full speed (``ideal_ps``: the
    largest ``roofline_ps`` over its engines; ``inf`` GFLOP/s when it had no work)."""

    name: str
    ideal_ps: float
    gflops: float
    frac: float  # ideal_ps / latency: 1.0 when this engine alone sets the latency
    binds: bool  # the lowest ceiling: the roofline bound


def ceilings(m: Metrics, work: float | None = None) -> tuple[Ceiling, ...]:
    """The four ceilings (HBM, GEMM, MATH, link) of the metrics ``m``, in that order, then
    the shared ones the hardware has (``SHARED_CEILINGS``: the HBM stack, the busiest PE's
    TCM, the busiest link; those of time 0 are left out). The binding one is
    ``roofline_bound``'s; the kernel's point (``flops / latency``) sits at
    ``roofline_frac`` of it, which is ``efficiency`` whenever the bound engine's busy time is
    its ideal time (always for GEMM and MATH; for HBM when its loads are contiguous).
    ``work``: the amount the rates count instead of flops (a kernel without GEMM flops is
    placed by its MATH element results, ``plot.data.roofline``)."""
    flops, latency = float(m["flops"] if work is None else work), int(m["latency_ps"])
    bound = str(m["roofline_bound"])
    out = []
    for name, engines in CEILINGS.items():
        ideal = max(float(m[f"roofline_ps_{e}"]) for e in engines)
        rate = flops / ideal * 1000.0 if ideal else float("inf")  # flops/ps -> GFLOP/s
        out.append(Ceiling(name, ideal, rate, _ratio(ideal, latency),
                           bound in {str(e) for e in engines}))
    for name, key in SHARED_CEILINGS.items():
        ideal = float(m.get(key) or 0.0)
        if ideal:
            out.append(Ceiling(name, ideal, flops / ideal * 1000.0, _ratio(ideal, latency),
                               bound == name))
    return tuple(out)


def _scratch_metrics(ops: pl.DataFrame, n_pe: int | None) -> Metrics:
    peak = ops.group_by("pe").agg(pl.col("scratch_cursor").max())
    by_pe = dict(zip(peak["pe"].to_list(), peak["scratch_cursor"].to_list(), strict=True))
    out: Metrics = {"scratch_peak_bytes": int(max(by_pe.values(), default=0))}
    if n_pe is not None:
        for p in range(n_pe):
            out[f"scratch_peak_bytes_pe{p}"] = int(by_pe.get(p, 0))
    return out


def _count_metrics(ops: pl.DataFrame, latency: int) -> Metrics:
    top = ops.filter(pl.col("parent").is_null())  # the kernel's own issues: stalls
    real = ops.filter(pl.col("kind") != Kind.COMPOSITE.value)  # parents would double count
    rd = real.filter(pl.col("name") == Op.DMA_READ.value)["nbytes"]
    wr = real.filter(pl.col("name") == Op.DMA_WRITE.value)["nbytes"]
    moved = int(rd.sum() or 0) + int(wr.sum() or 0)
    return {
        "n_ops": ops.height,
        "n_pe_used": ops["pe"].n_unique(),
        "dma_read_count": rd.len(), "dma_write_count": wr.len(),
        "dma_read_bytes": int(rd.sum() or 0), "dma_write_bytes": int(wr.sum() or 0),
        "hbm_gbps_achieved": _ratio(moved * 1000, latency),
        "flops": int(real["flops"].sum() or 0),
        "stall_ps": int(top["wait_ps"].sum() or 0),
    }


def metrics(trace_or_path: Trace | str | Path, pe: int | None = None) -> Metrics:
    """The metrics (docs/analysis.md) of a trace as a flat dict.

    With ``pe``, the metrics of that PE's ops alone (``latency_ps`` is then the PE's last
    ``t_end_ps`` and every ratio uses it); per-PE ``scratch_peak_bytes_pe{N}`` keys appear
    only for the whole trace.
    """
    trace = open_trace(trace_or_path)
    hw = hw_of(trace)
    ops = scalar_ops(trace, pe)
    if pe is None:
        latency = int(trace.manifest.get("t_end_ps") or 0)
    else:
        latency = as_int(ops["t_end_ps"].max())
    out: Metrics = {"latency_ps": latency}
    out.update(_count_metrics(ops, latency))
    out.update(_engine_metrics(ops, latency))
    out.update(_balance_metrics(ops))
    out.update(_overlap_metrics(ops))
    out.update(_scratch_metrics(ops, hw.n_pe if pe is None else None))
    out.update(_roofline_metrics(ops, hw, latency))
    out.update(_binding(out, shared_metrics(trace, hw, _hbm_bytes(ops), pe), latency))
    return MetricsDict(out)  # a dict, with a short repr and an HTML table in notebooks


def resolve_metric(name: str, available: dict[str, object] | list[str]) -> str:
    """The metric key ``name`` refers to: itself, or ``name_ps`` (``latency`` ->
    ``latency_ps``). Raises KeyError naming close keys otherwise."""
    keys = list(available)
    for candidate in (name, f"{name}_ps"):
        if candidate in keys:
            return candidate
    aliases = {k.removesuffix("_ps"): k for k in keys if k.endswith("_ps")}
    match = closest_name(name, [*keys, *aliases])  # "latncy" -> latency -> latency_ps
    guess = f"; did you mean {aliases.get(match, match)!r}?" if match else ""
    close = [k for k in keys if name in k][:8]
    hint = f"; similar: {', '.join(close)}" if close else f"; known: {', '.join(keys)}"
    raise KeyError(f"unknown metric {name!r}{guess}{hint}")
