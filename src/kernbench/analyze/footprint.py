"""The elements one HBM operand moves, kept small: runs of distinct element offsets, each
with the number of times its elements move (issue 43, ADR-0820).

An analysis that asks which elements an operand touches (the HBM-tensors table, the access
picture, the race detector's byte runs) does not need one entry per tile element: a tile of
stride ``[0, 0]`` moves one element 2^26 times, a row-major tile is one run per row.
``footprint`` finds the runs of an unmasked strided tile in closed form (axes of stride 0
or size 1 only repeat elements; the others, sorted by stride, must nest) and builds element
offsets only otherwise (an ``access`` array, a mask, axes that interleave); then their
number is the tile's, which the validator's tile budget bounds, and it is counted against
the same budget here (``Kept``). ``pieces`` expands the runs of many rows in chunks of at
most ``CHUNK`` elements, clipped to a window, so what a consumer holds does not grow with
a tile's size. Nothing is evaluated: attrs are parsed JSON, arrays come from access.parquet.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kernbench.schemas import elements as ix
from kernbench.schemas import offsets as off
from kernbench.trace import limits

#: the most elements (or runs) one expanded piece holds
CHUNK = 1 << 20
#: bytes the analyses keep per run of a footprint (start, length, weight)
BYTES_PER_RUN = 24
#: bytes building a footprint from element offsets takes per tile element, at its peak
#: (offsets, their sort order, sorted copy, weights)
BUILD_BYTES_PER_ELEMENT = 32

_I64 = np.int64


@dataclass(frozen=True)
class Footprint:
    """Runs ``[start, start + length)`` of distinct element offsets relative to the operand
    address (ascending, disjoint); every element of run ``i`` moves ``weights[i]`` times."""

    starts: np.ndarray
    lengths: np.ndarray
    weights: np.ndarray

    @property
    def moved(self) -> int:
        """The elements the operand moves, repeats included (its masked-in elements)."""
        return int((self.lengths * self.weights).sum())  # < 2^62: the tile's element count

    @property
    def distinct(self) -> int:
        return int(self.lengths.sum())

    def runs(self) -> tuple[np.ndarray, np.ndarray]:
        """(starts, ends) of the maximal runs of distinct elements (weights ignored)."""
        if not len(self.starts):
            return np.zeros(0, _I64), np.zeros(0, _I64)
        ends = self.starts + self.lengths
        cut = np.flatnonzero(self.starts[1:] != ends[:-1]) + 1
        return (self.starts[np.concatenate(([0], cut))],
                ends[np.concatenate((cut - 1, [len(ends) - 1]))])


def _of(starts: Any, lengths: Any, weights: Any) -> Footprint:
    return Footprint(np.asarray(starts, _I64), np.asarray(lengths, _I64),
                     np.asarray(weights, _I64))


EMPTY = _of([], [], [])


def contiguous(n: int) -> Footprint:
    """The footprint of a contiguous operand of ``n`` elements."""
    return _of([0], [n], [1]) if n > 0 else EMPTY


class Kept:
    """What the footprints an analysis builds take, with the ``held`` bytes it keeps
    beside them, counted against the memory budget (``kernbench.trace.limits``) before each
    footprint is built."""

    def __init__(self, what: str, held: int = 0) -> None:
        self.what, self.bytes = what, held

    def need(self, runs: int, building: int = 0) -> None:
        """Count ``runs`` more kept runs (and a build of ``building`` elements);
        TraceLimitError over the budget."""
        self.bytes += BYTES_PER_RUN * runs
        limits.require(self.what, self.bytes + BUILD_BYTES_PER_ELEMENT * building)


def footprint(attrs: Mapping[str, Any], shape: Sequence[int], table: ix.AccessTable = ix.EMPTY,
              kept: Kept | None = None) -> Footprint:
    """The footprint of an HBM operand of tile ``shape`` with (parsed) ``attrs``: the
    contiguous run of a plain row, the masked-in elements of an indexed one, nothing for
    offsets loaded from data (``"offsets": "input"``); ValueError when the attrs do not
    describe the tile (as ``schemas.elements.elements``)."""
    kept = kept or Kept("an operand's elements")
    shape = tuple(int(s) for s in shape)
    if attrs.get("offsets") == ix.INPUT:
        return EMPTY
    if not ix.is_indexed(attrs):
        return contiguous(off.product(shape, "tile"))
    if "strides" in attrs:
        strides, base = ix.strides_of(attrs, shape)
        return _strided(shape, [int(s) for s in strides], int(base),
                        ix.mask_of(attrs, shape, table), kept)
    kept.need(0, off.product(shape, "tile"))
    rel, mask = ix.elements(attrs, shape, table)
    return _from_elements(ix.moved(rel, mask), None, kept)


def _strided(shape: tuple[int, ...], strides: list[int], base: int,
             mask: np.ndarray | None, kept: Kept) -> Footprint:
    off.product(shape, "tile")
    if not all(shape):
        return EMPTY
    off.span(shape, strides, base)  # every offset in range before anything is built
    axes = [ax for ax, (n, s) in enumerate(zip(shape, strides, strict=True))
            if n > 1 and s != 0]
    repeat = [ax for ax in range(len(shape)) if ax not in axes]
    sub = tuple(shape[ax] for ax in axes)
    sub_strides = [strides[ax] for ax in axes]
    if mask is None:
        times = off.product([shape[ax] for ax in repeat], "tile")
        nested = _nested(sub, sub_strides, base, times, kept)
        if nested is not None:
            return nested
        kept.need(0, off.product(sub, "tile"))
        return _from_elements(ix.strided(sub, sub_strides, base), times, kept)
    kept.need(0, off.product(shape, "tile"))
    counts = mask.sum(axis=tuple(repeat), dtype=_I64).reshape(-1) if repeat else \
        mask.reshape(-1).astype(_I64)
    rel = ix.strided(sub, sub_strides, base).reshape(-1)
    hit = counts > 0
    return _from_elements(rel[hit], counts[hit], kept)


def _nested(shape: tuple[int, ...], strides: list[int], base: int, times: int, kept: Kept
            ) -> Footprint | None:
    """The runs of ``base + sum(idx_i * s_i)`` (no stride 0) in closed form when the axes,
    sorted by |stride|, nest: each stride is the span of the axes inside it (they merge
    into one run) or beyond it (runs apart); None when they interleave or touch."""
    lo = base + sum(s * (n - 1) for n, s in zip(shape, strides, strict=True) if s < 0)
    length, extent = 1, 1
    outer: list[tuple[int, int]] = []  # (stride, size) of the axes the runs repeat along
    for s, n in sorted((abs(s), n) for n, s in zip(shape, strides, strict=True)):
        if not outer and s == length:
            length *= n
            extent = length
        elif s > extent:
            outer.append((s, n))
            extent += s * (n - 1)
        else:
            return None
    count = 1
    for _, n in outer:
        count *= n
    kept.need(count)
    starts = np.full(1, lo, _I64)
    for s, n in outer:  # innermost first: each outer axis repeats the block above it
        starts = (starts[None, :] + np.arange(n, dtype=_I64)[:, None] * s).reshape(-1)
    return Footprint(starts, np.full(count, length, _I64), np.full(count, times, _I64))


def _from_elements(rel: np.ndarray, weights: np.ndarray | int | None, kept: Kept
                   ) -> Footprint:
    """The footprint of element offsets ``rel`` (each moving ``weights`` times: one number
    for all, one per offset, or once), repeats merged, then equal-weight neighbours into
    runs. One flat sorted copy of ``rel`` at a time (plus the sort order for per-offset
    weights)."""
    if not rel.size:
        return EMPTY
    if weights is None or isinstance(weights, int):
        u, w = np.unique(rel, return_counts=True)
        w = w.astype(_I64) * (weights or 1)
    else:
        order = np.argsort(rel, axis=None)
        flat = rel.reshape(-1)[order]
        first = np.flatnonzero(np.concatenate(([True], flat[1:] != flat[:-1])))
        u = flat[first]
        del flat
        w = np.add.reduceat(np.asarray(weights, _I64).reshape(-1)[order], first)
        del order
    start = np.concatenate(([True], (np.diff(u) != 1) | (w[1:] != w[:-1])))
    at = np.flatnonzero(start)
    kept.need(len(at))
    return Footprint(u[at].astype(_I64), np.diff(np.append(at, len(u))).astype(_I64),
                     w[at])


def pieces(first: np.ndarray, prints: Sequence[Footprint], which: np.ndarray, lo: int,
           hi: int) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The elements rows move, in chunks of at most ``CHUNK``: row ``r`` moves
    ``prints[which[r]]`` (nothing for -1) placed at element ``first[r]``; only elements in
    ``[lo, hi)`` are kept. Yields (elements, weights, row) arrays, rows in order."""
    n_runs = np.array([len(p.starts) for p in prints] + [0], _I64)
    at = np.concatenate(([0], np.cumsum(n_runs)))
    r_start = np.concatenate([p.starts for p in prints] + [np.zeros(0, _I64)])
    r_len = np.concatenate([p.lengths for p in prints] + [np.zeros(0, _I64)])
    r_w = np.concatenate([p.weights for p in prints] + [np.zeros(0, _I64)])
    per_row = n_runs[which]
    cum = np.cumsum(per_row)
    done = 0
    row0 = 0
    while row0 < len(first):
        # the rows (and of the last one, the runs) whose (row, run) pairs fit in CHUNK
        row1 = max(int(np.searchsorted(cum, done + CHUNK, "right")), row0 + 1)
        rows = np.arange(row0, row1)
        skip = done - (int(cum[row0 - 1]) if row0 else 0)  # pairs of row0 already done
        counts = per_row[rows].copy()
        counts[0] -= skip
        take = min(int(counts.sum()), CHUNK)
        if take < counts.sum():  # one row with more than CHUNK runs: part of it
            counts[0] = take
        pair_row = np.repeat(rows, counts)
        k = np.arange(len(pair_row)) - np.repeat(np.cumsum(counts) - counts, counts)
        k[: counts[0]] += skip
        run = at[which[pair_row]] + k
        start = first[pair_row] + r_start[run]
        yield from _expand(np.maximum(start, lo), np.minimum(start + r_len[run], hi),
                           r_w[run], pair_row)
        done += take
        row0 = int(np.searchsorted(cum, done, "right"))


def _expand(lo: np.ndarray, hi: np.ndarray, w: np.ndarray, row: np.ndarray
            ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The elements of intervals ``[lo, hi)`` (empty ones dropped), at most CHUNK a time."""
    n = hi - lo
    keep = n > 0
    lo, n, w, row = lo[keep], n[keep], w[keep], row[keep]
    if len(n) and int(n.max()) > CHUNK:  # split long intervals into CHUNK-sized parts
        parts = -(-n // CHUNK)
        idx = np.repeat(np.arange(len(n)), parts)
        k = np.arange(len(idx)) - np.repeat(np.cumsum(parts) - parts, parts)
        lo = lo[idx] + k * CHUNK
        n = np.minimum(n[idx] - k * CHUNK, CHUNK)
        w, row = w[idx], row[idx]
    cum = np.cumsum(n)
    i = 0
    while i < len(n):
        j = max(int(np.searchsorted(cum, (int(cum[i - 1]) if i else 0) + CHUNK, "right")),
                i + 1)
        lens = n[i:j]
        total = int(lens.sum())
        shift = np.repeat(lo[i:j] - (np.cumsum(lens) - lens), lens)
        yield shift + np.arange(total, dtype=_I64), np.repeat(w[i:j], lens), np.repeat(
            row[i:j], lens)
        i = j
