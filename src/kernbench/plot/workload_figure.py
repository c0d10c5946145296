"""The picture of a workload (docs/llama3-70b.md): the layer's kernels as one bar of time, in
launch order, each coloured by what binds it, and each kernel's efficiency beside it. Drawn
from the workload's JSON (``WorkloadResult.to_json``), nothing else."""

from __future__ import annotations

from typing import Any

from matplotlib.figure import Figure

#: a binding engine or shared part -> its colour (the rest grey)
COLOURS = {"dma_rd": "#1f77b4", "hbm_stack": "#17becf", "dma_wr": "#9edae5", "gemm": "#d62728",
           "math": "#2ca02c", "tcm": "#ff7f0e", "link_tx": "#9467bd", "links": "#c5b0d5"}


def workload_figure(result: dict[str, Any]) -> Figure:
    """Left: the layer's time, kernel by kernel (µs, stacked in launch order, labelled with
    their share); right: each kernel's efficiency against its binding ceiling."""
    rows = [r for r in result["rows"] if r["scope"] == "layer"]
    fig = Figure(figsize=(11, 0.45 * len(rows) + 2.2))
    ax, eff = fig.subplots(1, 2, gridspec_kw={"width_ratios": [3, 1]})
    names = [r["name"] for r in rows][::-1]
    lat = [r["latency_ps"] / 1e6 for r in rows][::-1]
    starts, t = [], 0.0
    for r in rows:
        starts.append(t)
        t += r["latency_ps"] / 1e6
    starts = starts[::-1]
    colours = [COLOURS.get(r["binding"], "#7f7f7f") for r in rows][::-1]
    ax.barh(names, lat, left=starts, color=colours)
    for y, (x0, w, r) in enumerate(zip(starts, lat, rows[::-1], strict=True)):
        ax.text(x0 + w, y, f" {r['share']:.0%} {r['binding']}", va="center", fontsize=8)
    ax.set_xlabel("time in the layer (µs)")
    ax.set_xlim(0, t * 1.25 if t else 1)
    head = (f"{result['model']} {result['phase']}, batch {result['batch']}, context "
            f"{result['context']} on {result['hw']}: layer {result['layer_s'] * 1e6:.1f} µs")
    if result["phase"] == "decode":
        head += (f", {result['token_s'] * 1e3:.2f} ms/token, "
                 f"{result['tokens_per_s']:.1f} tokens/s")
    else:
        head += f", time to first token {result['ttft_s'] * 1e3:.1f} ms"
    ax.set_title(head, fontsize=10, loc="left")
    eff.barh(names, [r["efficiency"] for r in rows][::-1], color=colours)
    eff.set_xlim(0, 1)
    eff.set_xlabel("efficiency (binding ceiling)")
    eff.set_yticks([])
    fig.tight_layout()
    return fig
