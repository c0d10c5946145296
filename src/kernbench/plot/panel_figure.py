"""The milestone panel's chart: latency and efficiency per configuration."""

from __future__ import annotations

from pathlib import Path

import polars as pl
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from kernbench.plot import save
from kernbench.plot.trace_figure import COLOURS


def _split(frame: pl.DataFrame) -> tuple[pl.DataFrame, dict[str, float], str]:
    """The rows of the panel's own preset, the baseline efficiency by config (rows recorded
    on a second preset, side by side) and the baseline's name ("" when there is none)."""
    if "hw" not in frame.columns or frame["hw"].n_unique() < 2:
        return frame, {}, ""
    main = frame["hw"][0]
    other = frame.filter(pl.col("hw") != main)
    base = dict(zip(other["config"].to_list(), other["efficiency"].to_list(), strict=True))
    return frame.filter(pl.col("hw") == main), base, str(other["hw"][0])


def panel_figure(frame: pl.DataFrame) -> Figure:
    """Two bar charts over the panel rows: latency (coloured by the roofline bound) and
    efficiency (busiest engine / latency). A panel run on a second preset draws the
    headline rows' baseline efficiency as an outlined bar under each."""
    frame, base, base_hw = _split(frame)
    labels = frame["config"].to_list()
    ys = list(range(len(labels)))
    fig = Figure(figsize=(11, 1.2 + 0.35 * len(labels)), layout="constrained")
    lat, eff = fig.subplots(1, 2, sharey=True)
    bounds = frame["roofline_bound"].to_list() if "roofline_bound" in frame.columns else []
    colours = [COLOURS.get(str(b), "#7f7f7f") for b in bounds] or None
    lat.barh(ys, frame["latency_us"].to_list(), color=colours)
    lat.set_yticks(ys, labels, fontsize=8)
    lat.invert_yaxis()
    lat.set_xscale("log")
    lat.set_xlabel("latency (µs, log); colour: roofline-bound engine")
    own = str(frame["hw"][0]) if base else None
    eff.barh(ys, frame["efficiency"].to_list(), color="#555555", label=own)
    if base:
        at = [y for y, c in zip(ys, labels, strict=True) if c in base]
        eff.barh(at, [base[labels[y]] for y in at], height=0.3, fill=False,
                 edgecolor="#d62728", linewidth=1.2, label=base_hw)
        eff.legend(fontsize=7, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.12),
                   frameon=False)  # under the axis, never over a bar
    eff.set_xlim(0, 1)
    eff.set_xlabel("efficiency (busiest engine / latency)")
    for y, v in zip(ys, frame["efficiency"].to_list(), strict=True):
        inside = v > 0.85  # label inside the bar's end, else just past it
        eff.text(v - 0.01 if inside else v + 0.01, y, f"{v:.3f}", va="center", fontsize=7,
                 ha="right" if inside else "left", color="white" if inside else "black")
    if bounds:
        lat.legend(handles=[Patch(color=COLOURS.get(b, "#7f7f7f"), label=b)
                            for b in sorted({str(b) for b in bounds})],
                   fontsize=7, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.12),
                   frameon=False)
    title = "milestone-gqa-headline panel" + (f" on {own} (outlined: {base_hw})" if base else "")
    fig.suptitle(title, fontsize=11)
    return fig


def save_panel_chart(frame: pl.DataFrame, out: str | Path) -> Path:
    return save(panel_figure(frame), out)
