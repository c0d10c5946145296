"""The picture of one HBM tensor's accesses (``kernbench plot TRACE --access TENSOR``): which
program touched each element first (the owner), at which kernel line, and a heat map of how
often it was touched. The data is ``kernbench.analyze.access.access_map``; a tensor of more
than two dimensions is drawn with its leading dimensions flattened into rows.

Gathers, scatters and atomics at loaded offsets move elements known only at replay: the
picture draws the placed accesses and says how many such ops it leaves out; a tensor with no
placed access at all is refused in one line (BadInputError) rather than drawn blank."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
from matplotlib.colors import BoundaryNorm, Colormap, ListedColormap
from matplotlib.figure import Figure

from kernbench.analyze.access import access_map, unplaced_ops
from kernbench.errors import BadInputError
from kernbench.trace import Trace

#: the categorical palette of programs and sites (cycled); untouched elements are white
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf")


def _grid(frame: pl.DataFrame, column: str, rows: int, cols: int) -> np.ma.MaskedArray:
    values = frame[column].to_numpy().astype(np.float64)
    return np.ma.masked_invalid(values.reshape(rows, cols))


def _categorical(n: int) -> tuple[Colormap, BoundaryNorm]:
    colours = [PALETTE[i % len(PALETTE)] for i in range(max(n, 1))]
    cmap = ListedColormap(colours).with_extremes(bad="white")
    return cmap, BoundaryNorm(np.arange(-0.5, max(n, 1) + 0.5), cmap.N)


def access_figure(trace: Trace, tensor: str) -> Figure:
    """Three panels of ``tensor``: owner program, owner's kernel line, touches."""
    frame = access_map(trace, tensor)
    unplaced = unplaced_ops(trace, tensor)
    if not frame["touches"].sum():
        raise BadInputError(_nothing_placed(tensor, unplaced))
    rows, cols = int(frame["row"].to_numpy().max()) + 1, int(frame["col"].to_numpy().max()) + 1
    sites = sorted(s for s in frame["site"].unique().to_list() if s is not None)
    frame = frame.with_columns(site_id=pl.col("site").replace_strict(
        {s: i for i, s in enumerate(sites)}, default=None, return_dtype=pl.Int64))
    fig = Figure(figsize=(15, 4.8), layout="constrained")
    axes = fig.subplots(1, 3)
    owners = _grid(frame, "owner", rows, cols)
    n_prog = int(owners.max()) + 1 if owners.count() else 1
    cmap, norm = _categorical(n_prog)
    im = axes[0].imshow(owners, cmap=cmap, norm=norm, interpolation="nearest", aspect="auto")
    axes[0].set_title(f"{tensor}: first program to touch each element")
    if n_prog <= 32:
        fig.colorbar(im, ax=axes[0], ticks=range(n_prog), label="program")
    else:
        fig.colorbar(im, ax=axes[0], label="program")
    cmap, norm = _categorical(len(sites))
    im = axes[1].imshow(_grid(frame, "site_id", rows, cols), cmap=cmap, norm=norm,
                        interpolation="nearest", aspect="auto")
    axes[1].set_title("its load/store site (kernel line)")
    bar = fig.colorbar(im, ax=axes[1])
    bar.set_ticks(range(len(sites)), labels=[_short(s) for s in sites])  # one label a tick
    heat = np.ma.masked_equal(frame["touches"].to_numpy().reshape(rows, cols), 0)
    im = axes[2].imshow(heat, cmap="viridis", interpolation="nearest", aspect="auto")
    axes[2].set_title("touches per element (reads + writes; white: never)")
    fig.colorbar(im, ax=axes[2], label="touches")
    for ax in axes:
        ax.set_xlabel("column")
        ax.set_ylabel("row")
    if unplaced.height:
        fig.suptitle(f"not drawn: {_ops(unplaced)} on {tensor} (element offsets loaded "
                     "from data, known only at replay)")
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


def _short(src: str) -> str:
    """``file.py:LINE`` of a kernel line (the directory dropped)."""
    path, _, line = src.rpartition(":")
    return f"{Path(path).name}:{line}" if path else src
