"""One memory's accesses on the chip's scoreboard (``board.py``), by segment of its address
line: the decided latest ends, the undecided accesses themselves, and the prune that folds
the decided ones and forgets what no op still to be issued can wait for.

A segment is one object (``Seg``), found by its first byte in ``at`` (the per-op path: an
operand that is exactly one segment needs no search) or by bisecting ``bounds``."""

from __future__ import annotations

from bisect import bisect_left

from kernbench.record.machine.chip.node import Node

#: a memory's segment bounds kept as they are by a prune (as record/machine/ranges.py)
_KEEP_BOUNDS = 256
#: the end of the last segment (it runs to the end of the address line)
_END = 1 << 63


class Seg:
    """The bytes ``[lo, hi)``: ``wend`` / ``rend`` the latest decided end of a write / of
    any access there, ``wn`` the undecided last writer (None: none), ``rn`` the undecided
    readers since it."""

    __slots__ = ("lo", "hi", "wend", "wn", "rend", "rn")

    def __init__(self, lo: int, hi: int, wend: int, wn: Node | None, rend: int,
                 rn: list[Node]) -> None:
        self.lo, self.hi, self.wend, self.wn, self.rend, self.rn = lo, hi, wend, wn, rend, rn


class Segments:
    """One memory's accesses: segment ``segs[k]`` is ``[bounds[k], bounds[k + 1])`` (the
    last one runs to the end); ``at`` finds a segment by its first byte."""

    __slots__ = ("bounds", "segs", "at")

    def __init__(self) -> None:
        self.bounds: list[int] = []
        self.segs: list[Seg] = []
        self.at: dict[int, Seg] = {}

    def split(self, x: int) -> None:
        """Make ``x`` a segment bound; the new segment copies the one it cuts."""
        if x in self.at:  # a bound already
            return
        b = self.bounds
        i = bisect_left(b, x)
        b.insert(i, x)
        if i:
            cut = self.segs[i - 1]
            seg = Seg(x, cut.hi, cut.wend, cut.wn, cut.rend, list(cut.rn))
            cut.hi = x
        else:
            seg = Seg(x, b[1] if len(b) > 1 else _END, 0, None, 0, [])
        self.segs.insert(i, seg)
        self.at[x] = seg

    def forget(self, floor: int) -> int:
        """Fold decided accesses into the ends, drop ends at or before ``floor`` (no op still
        to be issued starts before it) and merge runs of empty segments; the bounds left.
        Up to ``_KEEP_BOUNDS`` bounds nothing merges: the segments change in place, and an
        empty one (most of an HBM line between its tiles) costs one test."""
        if len(self.bounds) > _KEEP_BOUNDS:  # below that, buffers find their bounds
            return self._merge(floor)
        for seg in self.segs:
            if seg.wn is not None or seg.rn:
                _fold(seg, floor)
            else:  # ends only: drop those at or before the floor
                if seg.wend and seg.wend <= floor:
                    seg.wend = 0
                if seg.rend and seg.rend <= floor:
                    seg.rend = 0
        return len(self.bounds)

    def _merge(self, floor: int) -> int:
        """``forget`` over many bounds: the segments rebuilt, runs of empty ones merged."""
        bounds: list[int] = []
        segs: list[Seg] = []
        empty_before = False
        for seg in self.segs:
            _fold(seg, floor)
            empty = not seg.wend and not seg.rend and seg.wn is None and not seg.rn
            if empty and empty_before:
                segs[-1].hi = seg.hi  # the empty run before it covers it
                continue
            empty_before = empty
            bounds.append(seg.lo)
            segs.append(seg)
        self.bounds, self.segs = bounds, segs
        self.at = {seg.lo: seg for seg in segs}
        return len(bounds)


def _fold(seg: Seg, floor: int) -> None:
    """Fold ``seg``'s decided accesses into its ends; drop ends at or before ``floor``."""
    wnode, readers = seg.wn, seg.rn
    if wnode is None and not readers:
        if seg.wend and seg.wend <= floor:
            seg.wend = 0
        if seg.rend and seg.rend <= floor:
            seg.rend = 0
        return
    w, r = seg.wend, seg.rend
    if wnode is not None and wnode.done:
        e = wnode.end
        if e > w:
            w = e
        if e > r:
            r = e
        seg.wn = None
    if readers:
        kept = []
        for n in readers:
            if n.done:
                e = n.end if n.rend < 0 else n.rend
                if e > r:
                    r = e
            else:
                kept.append(n)
        seg.rn = kept
    seg.wend = 0 if w <= floor else w
    seg.rend = 0 if r <= floor else r
