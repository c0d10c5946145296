"""The picture of one HBM tensor's accesses (``kernbench plot TRACE --access TENSOR``): which
program touched each element first (the owner), at which kernel line, and a heat map of how
often it was touched. The data is ``kernbench.analyze.access.access_map``; a tensor of more
than two dimensions is drawn with its leading dimensions flattened into rows, and a 1-D
tensor (one row) is folded into a near-square grid whose width is a power of two, so the
runs of elements a program owns show as blocks (a Triton ``BLOCK`` is one, or a few, grid
rows) instead of a strip one pixel high (ADR-0803). Few programs get a colour each; many get
a sequential colour map whose bar names a handful of program ids, readable at 10^5 programs.

Gathers, scatters and atomics at loaded offsets move elements known only at replay: the
picture draws the placed accesses and says how many such ops it leaves out; a tensor with no
placed access at all is refused in one line (BadInputError) rather than drawn blank."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.colors import BoundaryNorm, Colormap, ListedColormap, Normalize
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from kernbench.analyze.access import access_map, unplaced_ops
from kernbench.errors import BadInputError
from kernbench.plot.data import src_labels
from kernbench.plot.trace_figure import preset
from kernbench.trace import Trace

#: the categorical palette of programs and sites (20 colours); untouched elements are white
PALETTE = tuple(colormaps["tab20"](i) for i in range(20))
#: up to this many programs get a colour (and a colour-bar tick) each
FEW = len(PALETTE)


def fold(rows: int, cols: int) -> tuple[int, int]:
    """The grid a tensor is drawn on: its own (rows, cols), or for one row of ``n > 4``
    elements a near-square grid ``cols' = 2^round(log2 sqrt n)`` wide (element =
    row * cols' + col), the last row padded."""
    if rows != 1 or cols <= 4:
        return rows, cols
    width = 2 ** round(math.log2(math.sqrt(cols)))
    return math.ceil(cols / width), width


def _grid(frame: pl.DataFrame, column: str, rows: int, cols: int) -> np.ma.MaskedArray:
    values = frame[column].to_numpy().astype(np.float64)
    padded = np.full(rows * cols, np.nan)
    padded[:values.size] = values
    return np.ma.masked_invalid(padded.reshape(rows, cols))


def _categorical(n: int) -> tuple[Colormap, BoundaryNorm]:
    colours = [PALETTE[i % len(PALETTE)] for i in range(max(n, 1))]
    cmap = ListedColormap(colours).with_extremes(bad="white")
    return cmap, BoundaryNorm(np.arange(-0.5, max(n, 1) + 0.5), cmap.N)


def _draw_owners(fig: Figure, ax: Axes, owners: np.ma.MaskedArray) -> None:
    """First program per element: a colour per program for a few, else a sequential map
    whose bar ticks a handful of program ids (0 .. n-1)."""
    n = int(owners.max()) + 1 if owners.count() else 1
    if n <= FEW:
        cmap, norm = _categorical(n)
        im = ax.imshow(owners, cmap=cmap, norm=norm, interpolation="nearest", aspect="auto")
        fig.colorbar(im, ax=ax, ticks=range(n), label="program")
    else:
        cmap = colormaps["viridis"].with_extremes(bad="white")
        im = ax.imshow(owners, cmap=cmap, norm=Normalize(-0.5, n - 0.5),
                       interpolation="nearest", aspect="auto")
        bar = fig.colorbar(im, ax=ax, label=f"program (of {n})")
        bar.locator = MaxNLocator(nbins=6, integer=True)
        bar.update_ticks()


def _draw_touches(fig: Figure, ax: Axes, heat: np.ma.MaskedArray) -> None:
    """Touches per element: integers, so an integer bar (one tick for a constant count)."""
    lo, hi = (int(heat.min()), int(heat.max())) if heat.count() else (0, 0)
    if hi - lo <= 10:
        cmap = colormaps["viridis"].resampled(hi - lo + 1).with_extremes(bad="white")
        im = ax.imshow(heat, cmap=cmap, norm=BoundaryNorm(np.arange(lo - 0.5, hi + 1), cmap.N),
                       interpolation="nearest", aspect="auto")
        fig.colorbar(im, ax=ax, ticks=range(lo, hi + 1), label="touches")
    else:
        im = ax.imshow(heat, cmap="viridis", interpolation="nearest", aspect="auto")
        bar = fig.colorbar(im, ax=ax, label="touches")
        bar.locator = MaxNLocator(nbins=6, integer=True)
        bar.update_ticks()


def access_figure(trace: Trace, tensor: str) -> Figure:
    """Three panels of ``tensor``: owner program, owner's kernel line, touches."""
    frame = access_map(trace, tensor)
    unplaced = unplaced_ops(trace, tensor)
    if not frame["touches"].sum():
        raise BadInputError(_nothing_placed(tensor, unplaced))
    shape = (int(frame["row"].to_numpy().max()) + 1, int(frame["col"].to_numpy().max()) + 1)
    rows, cols = fold(*shape)
    folded = (rows, cols) != shape
    sites = sorted(s for s in frame["site"].unique().to_list() if s is not None)
    frame = frame.with_columns(site_id=pl.col("site").replace_strict(
        {s: i for i, s in enumerate(sites)}, default=None, return_dtype=pl.Int64))
    fig = Figure(figsize=(15, 4.8), layout="constrained")
    axes = fig.subplots(1, 3)
    _draw_owners(fig, axes[0], _grid(frame, "owner", rows, cols))
    axes[0].set_title(f"{tensor}: first program to touch each element")
    cmap, norm = _categorical(len(sites))
    im = axes[1].imshow(_grid(frame, "site_id", rows, cols), cmap=cmap, norm=norm,
                        interpolation="nearest", aspect="auto")
    axes[1].set_title("its load/store site (kernel line)")
    bar = fig.colorbar(im, ax=axes[1])
    label = src_labels(trace)
    bar.set_ticks(range(len(sites)), labels=[label(s) for s in sites])  # one label a tick
    heat = np.ma.masked_equal(_grid(frame, "touches", rows, cols).filled(0), 0)
    _draw_touches(fig, axes[2], heat)
    axes[2].set_title("touches per element (reads + writes; white: never)")
    for ax in axes:
        ax.set_xlabel(f"element % {cols}" if folded else "column")
        ax.set_ylabel(f"element // {cols}" if folded else "row")
    title = f"{tensor} of {trace.manifest.get('case')} on {preset(trace)}"
    if folded:
        title += f" (1-D, {frame.height:,} elements folded {cols} wide)"
    if unplaced.height:
        title += (f"\nnot drawn: {_ops(unplaced)} on {tensor} (element offsets loaded "
                  "from data, known only at replay)")
    fig.suptitle(title)
    return fig


def _ops(unplaced: pl.DataFrame) -> str:
    """``2 scatter ops, 1 atomic_add op``: the unplaced ops by name."""
    counts = unplaced.group_by("name").len().sort("name").iter_rows()
    return ", ".join(f"{n} {name} op{'s' * (n != 1)}" for name, n in counts)


def _nothing_placed(tensor: str, unplaced: pl.DataFrame) -> str:
    if unplaced.height:
        return (f"cannot draw the accesses of {tensor!r}: it is moved only by "
                f"{_ops(unplaced)}, at element offsets loaded from data (known only at "
                "replay, not in the trace); kernbench report counts them as gather_ops")
    return (f"cannot draw the accesses of {tensor!r}: no load, store or atomic in the trace "
            "touches it")
