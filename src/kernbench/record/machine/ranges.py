"""One memory's in-flight accesses as an interval index (the scoreboard's, ADR-0595): its
address line cut into segments at the bounds of the accesses, each segment holding the
latest end of a write and of any access that covers it. A query is two bisections and a
``max`` over the segments between them, whatever the number of accesses in flight."""

from __future__ import annotations

from bisect import bisect_left, bisect_right

#: a memory's segment bounds kept as they are by a prune (more: equal neighbours merge).
#: Kept bounds let a buffer that comes back to the same bytes find its one segment (the
#: short path of ``issue``); 32 resident programs of a few buffers each need a few hundred
#: in one TCM (ADR-0700). A prune walks them all, so prunes come that much less often.
_KEEP_BOUNDS = 256


class Ranges:
    """One memory's in-flight accesses as segments: segment ``k`` is ``[bounds[k],
    bounds[k + 1])`` (the last one runs to the end of memory and is always empty);
    ``wr[k]`` is the latest end of a write covering it, ``rw[k]`` of any access (0: none)."""

    __slots__ = ("bounds", "wr", "rw")

    def __init__(self) -> None:
        self.bounds: list[int] = []
        self.wr: list[int] = []
        self.rw: list[int] = []

    def latest(self, lo: int, hi: int, writes_only: bool) -> int:
        """The latest end of a write (``writes_only``) or of any access overlapping
        ``[lo, hi)`` (0: none)."""
        b = self.bounds
        i = bisect_right(b, lo) - 1
        if i < 0:
            i = 0
        j = bisect_left(b, hi, i)
        if j <= i:
            return 0
        return max((self.wr if writes_only else self.rw)[i:j])

    def cut(self, i: int, x: int) -> None:
        """Make ``x`` a segment bound at index ``i`` (where bisection put it): the new
        segment copies the one it cuts."""
        self.bounds.insert(i, x)
        if i:
            self.wr.insert(i, self.wr[i - 1])
            self.rw.insert(i, self.rw[i - 1])
        else:
            self.wr.insert(0, 0)
            self.rw.insert(0, 0)

    def split(self, x: int) -> None:
        """Make ``x`` a segment bound (if it is not one)."""
        b = self.bounds
        i = bisect_left(b, x)
        if i == len(b) or b[i] != x:
            self.cut(i, x)

    def span(self, i: int, lo: int, hi: int, after_all: bool) -> tuple[int, int, int]:
        """Segments ``i`` (``lo`` bisected into these bounds) to ``j`` of ``[lo, hi)``, cutting
        bounds where there are none: (i, j, the latest end of any access there if ``after_all``,
        else of a write; 0: none)."""
        b = self.bounds
        if i == len(b) or b[i] != lo:
            self.cut(i, lo)
        j = bisect_left(b, hi, i)
        if j == len(b) or b[j] != hi:
            self.cut(j, hi)
        if j <= i:
            return i, j, 0
        return i, j, max((self.rw if after_all else self.wr)[i:j])

    def forget(self, before: int) -> int:
        """Drop what ended at or before ``before``; bounds left. Equal neighbours merge once
        there are more than ``_KEEP_BOUNDS`` bounds (below that the bounds stay, and the
        buffers that come back to the same bytes find them)."""
        bounds: list[int] = []
        wrs: list[int] = []
        rws: list[int] = []
        merge = len(self.bounds) > _KEEP_BOUNDS
        last_w = last_r = 0  # before the first bound: nothing
        for x, w, r in zip(self.bounds, self.wr, self.rw, strict=True):
            if w <= before:
                w = 0
            if r <= before:
                r = 0
            if not merge or w != last_w or r != last_r:
                bounds.append(x)
                wrs.append(w)
                rws.append(r)
                last_w, last_r = w, r
        self.bounds, self.wr, self.rw = bounds, wrs, rws
        return len(bounds)
