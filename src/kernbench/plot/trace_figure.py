"""The picture of one trace: engine timeline per PE, scratch occupancy per PE, wait by
kernel source line, and the kernel's point on the modelled hardware's roofline."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import polars as pl
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from kernbench.analyze.critical import critical_path, summary
from kernbench.analyze.frames import hw_of
from kernbench.analyze.metrics import Metrics
from kernbench.plot import data
from kernbench.trace import Trace
from kernbench.trace.scalars import as_int

#: one colour per engine (and the stall row), by name
COLOURS: dict[str, str] = {
    "dma_rd": "#1f77b4", "dma_wr": "#17becf", "gemm": "#d62728", "math": "#2ca02c",
    "link_tx": "#9467bd", "stall": "#bbbbbb",
}
#: the order of rows inside one PE's block of the timeline
ROW_ORDER = {"dma_rd": 0, "dma_wr": 1, "gemm": 2, "math": 3, "link_tx": 4, "stall": 5}
US = 1e6  # ps per microsecond
MIN_WIDTH = 800  # a drawn span is at least latency / MIN_WIDTH wide (about 1.5 px)
STYLES = ("-", "--", "-.", ":")  # PEs that run in lock-step stay distinguishable
PATH_COLOUR = "#111111"
PATH_LABEL = "critical path"  # the label of the path's lines on the timeline
DRAIN_COLOUR = "#eeeeee"  # the stall row after the kernel's last issue, engines still busy


def _rows(spans: pl.DataFrame, stalls: pl.DataFrame,
          drains: pl.DataFrame | None = None) -> list[tuple[int, str, str]]:
    keys = {(r[0], r[1], r[2]) for r in spans.select("pe", "engine", "lane").iter_rows()}
    keys |= {(pe, "stall", "") for pe in stalls["pe"].unique().to_list()}
    if drains is not None:
        keys |= {(pe, "stall", "") for pe in drains["pe"].to_list()}
    return sorted(keys, key=lambda k: (k[0], ROW_ORDER.get(k[1], 9), k[2]))


def draw_timeline(ax: Axes, trace: Trace,
                  frames: tuple[pl.DataFrame, pl.DataFrame] | None = None,
                  path: pl.DataFrame | None = None) -> None:
    """Busy spans per engine row, the kernel's stalls, and ``path`` (``data.path_spans``:
    the critical path) as a black line through the rows it runs on."""
    spans, stalls = frames or (data.engine_spans(trace), data.stall_spans(trace))
    drains = data.drain_spans(trace)
    rows = _rows(spans, stalls, drains)
    stall_rows = stalls.with_columns(engine=pl.lit("stall"), lane=pl.lit(""))
    both = pl.concat([spans, stall_rows.select(spans.columns)])
    labels = []
    least = trace.t_end_ps // MIN_WIDTH  # every span drawn at least about a pixel wide
    for y, (pe, engine, lane) in enumerate(rows):
        part = both.filter((pl.col("pe") == pe) & (pl.col("engine") == engine)
                           & (pl.col("lane") == lane))
        bars = [(t0 / US, max(t1 - t0, least) / US)
                for t0, t1 in part.select("t0", "t1").iter_rows()]
        edged = len(bars) < 400  # white edges show op boundaries, but would hide thin bars
        wide = [b for b in bars if edged and b[1] > 4 * least / US]
        thin = [b for b in bars if not (edged and b[1] > 4 * least / US)]
        colour = COLOURS.get(engine, "#7f7f7f")
        ax.broken_barh(wide, (y - 0.4, 0.8), facecolors=colour, edgecolor="white", lw=0.4)
        ax.broken_barh(thin, (y - 0.4, 0.8), facecolors=colour, edgecolor="none")
        if engine == "stall":  # the kernel has issued everything; its engines still run
            done = drains.filter(pl.col("pe") == pe)
            ax.broken_barh([(t0 / US, (t1 - t0) / US) for t0, t1 in
                            done.select("t0", "t1").iter_rows()], (y - 0.4, 0.8),
                           facecolors=DRAIN_COLOUR, edgecolor="#999999", hatch="///", lw=0.4)
        labels.append(f"PE{pe} {data.track_label(engine, lane)}")
    ax.set_yticks(range(len(rows)), labels, fontsize=7 if len(rows) > 24 else 8)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlim(0, max(trace.t_end_ps, 1) / US)
    ax.set_xlabel("time (µs)")
    title = "engine timeline per PE\n(busy spans; grey: kernel stalled waiting"
    if drains.height:
        title += "; hatched: all issued, engines still running"
    if path is not None and path.height:
        y_of = {r: y for y, r in enumerate(rows)}
        on = [(y_of[(pe, e, lane)], t0 / US, t1 / US) for pe, e, lane, t0, t1
              in path.select("pe", "engine", "lane", "t0", "t1").iter_rows()
              if (pe, e, lane) in y_of]
        ax.hlines([y for y, _, _ in on], [a for _, a, _ in on], [b for _, _, b in on],
                  colors=PATH_COLOUR, lw=2.4, zorder=4, label=PATH_LABEL)
        title += "; black: the critical path"
    ax.set_title(title + ")")
    for y, (a, b) in enumerate(zip(rows, rows[1:], strict=False)):
        if a[0] != b[0]:
            ax.axhline(y + 0.5, color="#dddddd", lw=0.8)


def draw_scratch(ax: Axes, trace: Trace, budget: int) -> None:
    steps = data.scratch_steps(trace)
    for pe in steps["pe"].unique().sort().to_list():
        s = steps.filter(pl.col("pe") == pe)
        ax.step((s["t"] / US).to_list(), (s["bytes"] / 1024).to_list(), where="post",
                lw=1.2, alpha=0.8, ls=STYLES[pe % len(STYLES)], label=f"PE{pe}")
    peak = as_int(steps["bytes"].max())
    title = "kernel scratch occupancy per PE"
    if peak >= budget // 4:
        ax.axhline(budget / 1024, color="#d62728", ls="--", lw=1, label="budget")
        ax.set_ylim(0, budget / 1024 * 1.08)
    else:  # a small peak would be a flat line against the budget: zoom, say the budget
        ax.set_ylim(0, max(peak, 1) / 1024 * 1.25)
        title += f" (peak {peak / 1024:.1f} KiB; budget {budget / 1024:.0f} KiB, off scale)"
    ax.set_xlim(0, max(trace.t_end_ps, 1) / US)
    ax.set_xlabel("time (µs)")
    ax.set_ylabel("scratch in use (KiB)")
    ax.set_title(title)
    ax.legend(fontsize=7, ncol=10, loc="upper center", bbox_to_anchor=(0.5, -0.22),
              frameon=False)  # under the axis: never over the curves or the budget


def draw_wait(ax: Axes, trace: Trace, critical: dict[str, Any] | None = None) -> None:
    """Stall time by source line; with ``critical`` (``critical.summary``, given when the
    engines issue asynchronously) the time on the critical path by source line instead."""
    if critical is not None:
        return _draw_path_by_line(ax, critical, data.src_labels(trace))
    per = data.wait_by_line(trace)
    ax.set_title("stall time by kernel source line")
    if per.height == 0:
        ax.text(0.5, 0.5, "the kernel never waited", ha="center", va="center",
                transform=ax.transAxes)
        ax.set_axis_off()
        return
    ys = range(per.height)
    ax.barh(list(ys), (per["wait_ps"] / US).to_list(), color=COLOURS["stall"], edgecolor="#555")
    label = data.src_labels(trace)
    ax.set_yticks(list(ys), [f"{label(s)} ({n} ops)"
                             for s, n in per.select("src", "ops").iter_rows()], fontsize=7)
    ax.set_ylim(max(per.height, 6) - 0.5, -0.5)  # thin bars even for one line
    ax.set_xlabel("wait (µs, summed over PEs)")


def _draw_path_by_line(ax: Axes, critical: dict[str, Any], label: Callable[[str], str]) -> None:
    rows = critical["by_line"]
    ax.set_title(f"on the critical path, by kernel source line ({critical['share']:.3f} "
                 "of the latency)")
    ys = list(range(len(rows)))
    ax.barh(ys, [r["path_ps"] / US for r in rows], color=PATH_COLOUR, edgecolor="#555")
    ax.set_yticks(ys, [f"{label(r['src'])} ({r['ops']} ops)" for r in rows], fontsize=7)
    ax.set_ylim(max(len(rows), 6) - 0.5, -0.5)
    ax.set_xlabel("time on the critical path (µs)")


#: the colour of each roofline ceiling: its engine's
CEILING_COLOURS = {"hbm": COLOURS["dma_rd"], "gemm": COLOURS["gemm"], "math": COLOURS["math"],
                   "link": COLOURS["link_tx"]}


def draw_roofline(ax: Axes, trace: Trace, m: Metrics) -> None:
    """One ceiling per engine (``metrics.ceilings``), the kernel's point under the one that
    binds, at ``roofline_frac`` of it (``efficiency``, see ``ceilings``)."""
    r = data.roofline(trace, m)
    ax.set_title(f"roofline per engine\n({r.n_pe} PE; machine: {r.hbm_gbps:.0f} GB/s HBM, "
                 f"{r.peak_gflops / 1000:.0f} TFLOP/s GEMM)", fontsize=9)
    rate = {"flop": "GFLOP/s", "byte": "GB/s"}.get(r.unit, f"G {r.unit}s/s")
    ax.set_xlabel("arithmetic intensity (flop / HBM byte)" if r.unit == "flop"
                  else f"intensity ({r.unit}s / HBM byte; no GEMM flops)")
    ax.set_ylabel(rate)
    bound = r.bound
    if not (r.intensity and r.achieved_gflops and bound is not None):
        ax.text(0.5, 0.1, "no HBM traffic: no point to place",
                ha="center", transform=ax.transAxes, fontsize=8)
        return
    lo, hi = r.intensity / 30, r.intensity * 30
    xs = [lo * (hi / lo) ** (i / 100) for i in range(101)]
    heights = [r.achieved_gflops]
    if r.unit == "flop":  # the GEMM peak counts flops only
        ax.loglog(xs, [r.peak_gflops] * len(xs), color="#999", ls=":", lw=1,
                  label="machine GEMM peak")
        heights.append(r.peak_gflops)
    for c in r.ceilings:
        if c.gflops == float("inf"):
            continue  # the engine did no work: no roof
        ys = [r.ceiling_at(c, x) for x in xs]
        ax.loglog(xs, ys, color=CEILING_COLOURS[c.name], lw=2.2 if c.binds else 1.2,
                  label=f"{c.name}{' (binds)' if c.binds else ''}")
        heights.append(r.ceiling_at(c, r.intensity))
    roof = r.ceiling_at(bound, r.intensity)
    ax.plot([r.intensity], [r.achieved_gflops], "o", color="#111", ms=7, zorder=5)
    ax.vlines(r.intensity, r.achieved_gflops, roof, color="#111", lw=0.8, ls="--")
    ax.annotate(f"kernel: {r.achieved_gflops:.1f} {rate}\n"
                f"{float(m['roofline_frac']):.3f} of the {bound.name} ceiling "
                f"(efficiency {float(m['efficiency']):.3f})",
                (r.intensity, r.achieved_gflops), textcoords="offset points",
                xytext=(0, -12), ha="center", va="top", fontsize=8)
    ax.set_xlim(lo, hi)
    ax.set_ylim(min(heights) / 4, max(heights) * 3)
    ax.legend(fontsize=7, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.16),
              frameon=False)  # under the axis: the ceilings run across the whole plot
    ax.grid(True, which="major", color="#eeeeee")


def critical(trace: Trace, m: Metrics) -> tuple[pl.DataFrame, dict[str, Any] | None]:
    """The critical path's timeline spans, and its summary when the by-line chart shows it
    (the hw issues engine ops asynchronously; under blocking issue the chart stays the
    stalls, which the path agrees with)."""
    path = critical_path(trace)
    latency = int(m["latency_ps"])
    shown = summary(path, latency) if hw_of(trace).engine_issue == "async" else None
    return data.path_spans(path, latency), shown


def trace_figure(trace: Trace, m: Metrics, budget: int) -> Figure:
    """One figure: timeline on top, scratch below, wait and roofline side by side."""
    frames = data.engine_spans(trace), data.stall_spans(trace)
    path, by_line = critical(trace, m)
    timeline_h = max(2.5, 0.18 * len(_rows(*frames, data.drain_spans(trace))))
    fig = Figure(figsize=(12, timeline_h + 7.5), layout="constrained")
    grid = fig.add_gridspec(3, 2, height_ratios=[timeline_h, 3, 4])
    draw_timeline(fig.add_subplot(grid[0, :]), trace, frames, path)
    draw_scratch(fig.add_subplot(grid[1, :]), trace, budget)
    draw_wait(fig.add_subplot(grid[2, 0]), trace, by_line)
    draw_roofline(fig.add_subplot(grid[2, 1]), trace, m)
    latency = int(m["latency_ps"]) / US
    fig.suptitle(f"{trace.manifest.get('case')} on {preset(trace)}  ·  latency {latency:.3f} µs"
                 f"  ·  efficiency {float(m['efficiency']):.3f}  ·  bottleneck "
                 f"{m['bottleneck_engine']}", fontsize=11)
    return fig


def preset(trace: Trace) -> str:
    """The hardware a trace was recorded on, as its title names it (the preset, or the name
    of a TOML file's config)."""
    return str((trace.manifest.get("hw") or {}).get("name") or "unnamed hardware")


def panels(trace: Trace, m: Metrics, budget: int) -> dict[str, Any]:
    """The four charts as separate figures (the HTML report shows them one by one)."""
    out: dict[str, Any] = {}
    frames = data.engine_spans(trace), data.stall_spans(trace)
    path, by_line = critical(trace, m)
    rows = len(_rows(*frames, data.drain_spans(trace)))
    fig = Figure(figsize=(12, max(2.5, 0.18 * rows) + 1), layout="constrained")
    draw_timeline(fig.add_subplot(), trace, frames, path)
    out["timeline"] = fig
    fig = Figure(figsize=(12, 3.5), layout="constrained")
    draw_scratch(fig.add_subplot(), trace, budget)
    out["scratch"] = fig
    fig = Figure(figsize=(7, 4.5), layout="constrained")
    draw_wait(fig.add_subplot(), trace, by_line)
    out["wait"] = fig
    fig = Figure(figsize=(6, 4.5), layout="constrained")
    draw_roofline(fig.add_subplot(), trace, m)
    out["roofline"] = fig
    return out
