"""Per-element counts of one HBM tensor, accumulated chunk by chunk (``access_map``): reads,
writes, touches, distinct programs and the first row to touch each element (ADR-0820).

The chunks are ``analyze.footprint.pieces`` of rows sorted by (program, op_id): the first
row to touch an element is the lowest index, and a program seen again for an element can
only be the last one it was seen with, so neither needs the pairs of earlier chunks.
"""

from __future__ import annotations

import numpy as np
import polars as pl

_I64 = np.int64


class ElementCounts:
    """Counters over ``n`` elements for rows of ``program`` ids, ``src`` lines and
    ``read``/``write`` flags (all in the rows' order: program, then op_id)."""

    def __init__(self, n: int, program: np.ndarray, src: pl.Series, read: np.ndarray,
                 write: np.ndarray) -> None:
        self.program, self.src, self.read, self.write = program, src, read, write
        self.reads = np.zeros(n, _I64)
        self.writes = np.zeros(n, _I64)
        self.touches = np.zeros(n, _I64)
        self.programs = np.zeros(n, _I64)
        self.first_row = np.full(n, len(program), _I64)  # len(program): untouched
        self.last_program = np.full(n, -1, _I64)

    def add(self, elements: np.ndarray, weights: np.ndarray, rows: np.ndarray) -> None:
        """Row ``rows[i]`` touches ``elements[i]`` ``weights[i]`` times; rows come in
        nondecreasing order across calls."""
        np.add.at(self.touches, elements, weights)
        for flag, out in ((self.read, self.reads), (self.write, self.writes)):
            hit = flag[rows]
            np.add.at(out, elements[hit], weights[hit])
        np.minimum.at(self.first_row, elements, rows)
        prog = self.program[rows]
        order = np.lexsort((prog, elements))
        e, p = elements[order], prog[order]
        pair = np.concatenate(([True], (e[1:] != e[:-1]) | (p[1:] != p[:-1])))
        e, p = e[pair], p[pair]
        fresh = p != self.last_program[e]  # only an element's first pair can be its last
        np.add.at(self.programs, e[fresh], 1)
        last = np.concatenate((e[1:] != e[:-1], [True]))
        self.last_program[e[last]] = p[last]

    def frame(self, cols: int) -> pl.DataFrame:
        """element, row, col (``cols`` a row), reads, writes, touches, programs, owner (the
        first row's program) and site (its src line); owner and site null if untouched."""
        n = len(self.reads)
        element = np.arange(n, dtype=_I64)
        touched = self.first_row < len(self.program)
        at = np.where(touched, self.first_row, 0)
        owner = self.program[at] if len(self.program) else np.zeros(n, _I64)
        site = (self.src.gather(at) if len(self.program)
                else pl.Series("site", [None] * n, dtype=pl.String))
        return pl.DataFrame({
            "element": element, "row": element // cols, "col": element % cols,
            "reads": self.reads, "writes": self.writes, "touches": self.touches,
            "programs": self.programs,
            "owner": pl.Series("owner", owner.astype(_I64)),
            "site": site.cast(pl.String).alias("site"),
            "_touched": touched,
        }).with_columns(pl.when("_touched").then(pl.col("owner", "site"))).drop("_touched")
