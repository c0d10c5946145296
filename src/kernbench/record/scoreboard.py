"""The scoreboard of an ``async`` PE (docs/hardware-model.md): when an issued op may start.

An op starts at the latest of its issue time, its engine being free (the engine serves its
queue in issue order), its inputs being visible (RAW: the overlapping earlier writes' ends)
and its output range being free (WAR and WAW: every earlier op that reads or writes an
overlapping range has ended). TCM and staging ranges are the PE's (resident programs own
disjoint slots of TCM and share staging, so a PE-wide check is the per-program rule plus the
staging area); HBM ranges only order the ops of one program (between programs ordering is
the kernel's business). A ``scope_exit`` is a read of its rewound range at the time it is
timed, so the next writer of those bytes comes after Phase 2 invalidated them.

Each memory keeps an interval index (``Ranges``): its address line cut into segments at the
bounds of the accesses, each segment holding the latest end of a write and of any access
that covers it. A query is two bisections and a ``max`` over the segments between them,
whatever the number of accesses in flight (ADR-0595). Values that ended before the earliest
clock of the PE's programs are forgotten: no op still to be issued can start before it.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable
from typing import Any

from kernbench.schemas.ops import ATOMICS

#: test-only switch: drop the WAR edge (a writer no longer waits for earlier readers), which
#: must make a replay that reuses a buffer still read by an async op fail (tests/record)
DROP_WAR = False

#: an HBM access whose bytes are not its operand's contiguous extent (strided, indexed)
#: covers the rest of memory, to stay safe
_FAR = 1 << 62
_HBM = "hbm"
#: segment bounds held before the first prune (then twice what survived the last one)
_PRUNE_AT = 64
#: a memory's segment bounds kept as they are by a prune (more: equal neighbours merge)
_KEEP_BOUNDS = 32


def extent(h: Any, cmd: Any) -> tuple[Any, int, int]:
    """(key, lo, hi) of the bytes an operand covers: its whole buffer; for HBM operands of a
    strided or indexed access, everything from its address on."""
    buf = h.buf
    if buf.space == _HBM:
        hi = buf.addr + buf.nbytes if cmd.attrs == "{}" else _FAR
        return (_HBM, buf.pe), buf.addr, hi
    return (buf.space, buf.pe), buf.addr, buf.addr + buf.nbytes


def accesses(cmd: Any) -> tuple[list[tuple[Any, int, int]], list[tuple[Any, int, int]]]:
    """(reads, writes) of a command as extents; an atomic also writes its HBM input."""
    reads = [extent(h, cmd) for h in cmd.inputs]
    writes = [] if cmd.out is None else [extent(cmd.out, cmd)]
    if cmd.op in ATOMICS:
        writes += [r for r in reads if r[0][0] == _HBM]
    return reads, writes


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


class Scoreboard:
    """The in-flight accesses of one PE: an interval index per memory (and per program for
    HBM)."""

    __slots__ = ("memories", "count", "limit", "floor", "tcm_key", "tcm")

    def __init__(self, floor: Callable[[], int], pe: int = 0) -> None:
        self.memories: dict[Any, Ranges] = {}
        self.count = 0  # accesses added since the last prune, plus the bounds it left
        self.limit = _PRUNE_AT
        #: the earliest time an op still to be issued on this PE can start (the earliest clock
        #: of its programs): what ended by then can no longer delay anything
        self.floor = floor
        #: the PE's own TCM, the memory almost every access is in (no key to build)
        self.tcm_key = ("tcm", pe)
        self.tcm = self.memories[self.tcm_key] = Ranges()

    def claim(self, program: int, cmd: Any) -> tuple[int, list]:
        """``ready`` and the accesses ``commit`` notes, for one command in one pass: (the
        earliest start its data allows, its accesses). Each extent's bounds become segment
        bounds here (a cut copies its segment, so no answer changes), and ``commit`` raises
        the segments between them without searching again, unless a cut moved them."""
        t = 0
        plan = []
        memories = self.memories
        tcm, pe = self.tcm, self.tcm_key[1]
        drop_war = DROP_WAR
        out = cmd.out
        n_in = len(cmd.inputs)
        cut = False
        for k, h in enumerate(cmd.inputs if out is None else (*cmd.inputs, out)):
            buf = h.buf
            space = buf.space
            lo = buf.addr
            write = k == n_in
            if space == "tcm" and buf.pe == pe:
                m = tcm
                hi = lo + buf.nbytes
            else:
                if space == _HBM:
                    hi = lo + buf.nbytes if cmd.attrs == "{}" else _FAR
                    key: Any = ((space, buf.pe), program)
                    if not write and cmd.op in ATOMICS:
                        write = True  # an atomic reads and writes its HBM input
                else:
                    hi = lo + buf.nbytes
                    key = (space, buf.pe)
                m = memories.get(key)  # type: ignore[assignment]
                if m is None:
                    m = memories[key] = Ranges()
            b = m.bounds
            i = bisect_left(b, lo)
            if i == len(b) or b[i] != lo:
                m.cut(i, lo)
                cut = True
            j = bisect_left(b, hi, i)
            if j == len(b) or b[j] != hi:
                m.cut(j, hi)
                cut = True
            plan.append((m, lo, hi, write, i, j))
            if j > i:  # RAW: a read waits for writes; WAR and WAW: a write for all
                vals = m.rw if write and not drop_war else m.wr
                v = vals[i] if j == i + 1 else max(vals[i:j])
                if v > t:
                    t = v
        if cut and len(plan) > 1:  # a later cut may have moved an earlier extent's segments
            plan = [(m, lo, hi, w, bisect_left(m.bounds, lo), bisect_left(m.bounds, hi))
                    for m, lo, hi, w, _, _ in plan]
        return t, plan

    def commit(self, plan: list, t_end: int) -> None:
        """Note the accesses ``claim`` gave, in flight until ``t_end``."""
        for m, _, _, write, i, j in plan:
            rw = m.rw
            if j == i + 1:  # one segment: the common case
                if rw[i] < t_end:
                    rw[i] = t_end
                if write and m.wr[i] < t_end:
                    m.wr[i] = t_end
            elif write:
                wr = m.wr
                for k in range(i, j):
                    if rw[k] < t_end:
                        rw[k] = t_end
                    if wr[k] < t_end:
                        wr[k] = t_end
            else:
                for k in range(i, j):
                    if rw[k] < t_end:
                        rw[k] = t_end
        self.count += len(plan)
        if self.count > self.limit:  # amortised: the index stays as small as what flies
            self.prune(self.floor())
            self.limit = max(_PRUNE_AT, 2 * self.count)

    def ready(self, program: int, reads: list, writes: list) -> int:
        """The earliest start the data allows: RAW for ``reads``, WAR and WAW for ``writes``."""
        t = 0
        memories = self.memories
        for key, lo, hi in reads:
            m = memories.get((key, program) if key[0] == _HBM else key)
            if m is not None:
                v = m.latest(lo, hi, True)
                if v > t:
                    t = v
        war = not DROP_WAR
        for key, lo, hi in writes:
            m = memories.get((key, program) if key[0] == _HBM else key)
            if m is not None:
                v = m.latest(lo, hi, not war)
                if v > t:
                    t = v
        return t

    def note(self, program: int, reads: list, writes: list, t_end: int) -> None:
        """Remember an issued op's accesses; they are in flight until ``t_end``."""
        memories = self.memories
        plan = []
        for write, extents in ((False, reads), (True, writes)):
            for key, lo, hi in extents:
                if key[0] == _HBM:
                    key = (key, program)
                m = memories.get(key)
                if m is None:
                    m = memories[key] = Ranges()
                m.split(lo)  # every extent's bounds are cut before any segment is found:
                m.split(hi)  # a cut moves the indices after it
                plan.append((m, lo, hi, write))
        self.commit([(m, lo, hi, w, bisect_left(m.bounds, lo), bisect_left(m.bounds, hi))
                     for m, lo, hi, w in plan], t_end)

    def touched(self, key: Any, lo: int, hi: int) -> int:
        """When the last access overlapping ``[lo, hi)`` of memory ``key`` ends (0: none)."""
        m = self.memories.get(key)
        return 0 if m is None else m.latest(lo, hi, False)

    def prune(self, before: int) -> None:
        """Forget the accesses that ended at or before ``before``."""
        n = 0
        for key, m in list(self.memories.items()):
            left = m.forget(before)
            n += left
            if not left and m is not self.tcm:
                del self.memories[key]
        self.count = n
