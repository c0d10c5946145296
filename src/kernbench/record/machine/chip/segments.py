"""One memory's accesses on the chip's scoreboard (``board.py``), by segment of its address
line: the decided latest ends, the undecided accesses themselves, and the prune that folds
the decided ones and forgets what no op still to be issued can wait for."""

from __future__ import annotations

from bisect import bisect_left

from kernbench.record.machine.chip.node import Node

#: a memory's segment bounds kept as they are by a prune (as record/machine/ranges.py)
_KEEP_BOUNDS = 256


class Segments:
    """One memory's accesses: segment ``k`` is ``[bounds[k], bounds[k + 1])``; ``wend[k]`` /
    ``rend[k]`` the latest decided end of a write / of any access there, ``wn[k]`` the
    undecided last writer (None: none), ``rn[k]`` the undecided readers since it."""

    __slots__ = ("bounds", "wend", "wn", "rend", "rn")

    def __init__(self) -> None:
        self.bounds: list[int] = []
        self.wend: list[int] = []
        self.wn: list[Node | None] = []
        self.rend: list[int] = []
        self.rn: list[list[Node]] = []

    def split(self, x: int) -> None:
        """Make ``x`` a segment bound; the new segment copies the one it cuts."""
        b = self.bounds
        i = bisect_left(b, x)
        if i < len(b) and b[i] == x:
            return
        b.insert(i, x)
        if i:
            self.wend.insert(i, self.wend[i - 1])
            self.wn.insert(i, self.wn[i - 1])
            self.rend.insert(i, self.rend[i - 1])
            self.rn.insert(i, list(self.rn[i - 1]))
        else:
            self.wend.insert(0, 0)
            self.wn.insert(0, None)
            self.rend.insert(0, 0)
            self.rn.insert(0, [])

    def forget(self, floor: int) -> int:
        """Fold decided accesses into the ends, drop ends at or before ``floor`` (no op still
        to be issued starts before it) and merge runs of empty segments; the bounds left.
        Up to ``_KEEP_BOUNDS`` bounds nothing merges: the segments change in place, and an
        empty one (most of an HBM line between its tiles) costs one test."""
        if len(self.bounds) > _KEEP_BOUNDS:  # below that, buffers find their bounds
            return self._merge(floor)
        wend, wn, rend, rn = self.wend, self.wn, self.rend, self.rn
        for k, (w, wnode, r, readers) in enumerate(zip(wend, wn, rend, rn, strict=True)):
            if wnode is None and not readers:
                if w and w <= floor:
                    wend[k] = 0
                if r and r <= floor:
                    rend[k] = 0
                continue
            if wnode is not None and wnode.done:
                e = wnode.end
                if e > w:
                    w = e
                if e > r:
                    r = e
                wn[k] = None
            if readers:
                kept = []
                for n in readers:
                    if n.done:
                        e = n.end if n.rend < 0 else n.rend
                        if e > r:
                            r = e
                    else:
                        kept.append(n)
                rn[k] = kept
            wend[k] = 0 if w <= floor else w
            rend[k] = 0 if r <= floor else r
        return len(self.bounds)

    def _merge(self, floor: int) -> int:
        """``forget`` over many bounds: the segments rebuilt, runs of empty ones merged."""
        bounds: list[int] = []
        wend: list[int] = []
        wn: list[Node | None] = []
        rend: list[int] = []
        rn: list[list[Node]] = []
        empty_before = False
        for x, w, wnode, r, readers in zip(self.bounds, self.wend, self.wn, self.rend,
                                           self.rn, strict=True):
            if wnode is not None and wnode.done:
                w = max(w, wnode.end)
                r = max(r, wnode.end)
                wnode = None
            if readers:
                kept = []
                for n in readers:
                    if n.done:
                        e = n.end if n.rend < 0 else n.rend
                        if e > r:
                            r = e
                    else:
                        kept.append(n)
                readers = kept
            if w <= floor:
                w = 0
            if r <= floor:
                r = 0
            empty = not w and not r and wnode is None and not readers
            if empty and empty_before:
                continue
            empty_before = empty
            bounds.append(x)
            wend.append(w)
            wn.append(wnode)
            rend.append(r)
            rn.append(readers)
        self.bounds, self.wend, self.wn, self.rend, self.rn = bounds, wend, wn, rend, rn
        return len(bounds)
