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
whatever the number of accesses in flight (ADR-0595); ``issue`` times an op's data and notes
its accesses in one call (ADR-0700). Values that ended before the earliest clock of the
PE's programs are forgotten: no op still to be issued can start before it.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable
from typing import Any

from kernbench.record.machine.ranges import Ranges
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


def extent(h: Any, cmd: Any) -> tuple[Any, int, int]:
    """(key, lo, hi) of the bytes an operand covers: its whole buffer; for HBM operands of a
    strided or indexed access, everything from its address on."""
    buf = h.buf
    if buf.space == _HBM:
        hi = buf.addr + buf.nbytes if cmd.attrs == "{}" else _FAR
        return (_HBM, buf.pe), buf.addr, hi
    return (buf.space, buf.pe), buf.addr, buf.addr + buf.nbytes


def accesses(cmd: Any) -> tuple[list[tuple[Any, int, int]], list[tuple[Any, int, int]]]:
    """(reads, writes) of a command as extents; an atomic also writes its HBM input, and
    is acq_rel (Triton's default): its HBM extent is all of HBM."""
    reads = [extent(h, cmd) for h in cmd.inputs]
    writes = [] if cmd.out is None else [extent(cmd.out, cmd)]
    if cmd.op in ATOMICS:
        reads = [(r[0], 0, _FAR) if r[0][0] == _HBM else r for r in reads]
        writes += [r for r in reads if r[0][0] == _HBM]
    return reads, writes


class Scoreboard:
    """The in-flight accesses of one PE: an interval index per memory (and per program for
    HBM)."""

    __slots__ = ("memories", "count", "limit", "floor", "tcm_key", "tcm", "pe")

    def __init__(self, floor: Callable[[], int], pe: int = 0) -> None:
        self.memories: dict[Any, Ranges] = {}
        self.count = 0  # accesses added since the last prune, plus the bounds it left
        self.limit = _PRUNE_AT
        #: the earliest time an op still to be issued on this PE can start (the earliest clock
        #: of its programs): what ended by then can no longer delay anything
        self.floor = floor
        #: the PE's own TCM, the memory almost every access is in (no key to build)
        self.tcm_key = ("tcm", pe)
        self.pe = pe
        self.tcm = self.memories[self.tcm_key] = Ranges()

    def issue(self, program: int, cmd: Any, start: int, span: int) -> int:
        """When ``cmd`` starts: at ``start`` (what its issue and its engine allow) or when its
        data lets it, if later; its accesses are noted in flight until that start plus
        ``span``. This is the common case, every operand one whole segment of this PE's TCM
        (no cut, no other memory): anything else is ``_issue``'s, which starts over."""
        tcm = self.tcm
        b, wr, rw = tcm.bounds, tcm.wr, tcm.rw
        n = len(b) - 1
        pe = self.pe
        t = start
        reads = []
        for h in cmd.inputs:  # RAW: a read waits for writes
            buf = h.buf
            lo = buf.addr
            i = bisect_left(b, lo)
            if i >= n or b[i] != lo or b[i + 1] != lo + buf.nbytes or buf.space != "tcm" \
                    or buf.pe != pe:
                return self._issue(program, cmd, start, span)
            if wr[i] > t:
                t = wr[i]
            reads.append(i)
        out = cmd.out
        o = -1
        if out is not None:  # WAR and WAW: a write waits for every access
            buf = out.buf
            lo = buf.addr
            o = bisect_left(b, lo)
            if o >= n or b[o] != lo or b[o + 1] != lo + buf.nbytes or buf.space != "tcm" \
                    or buf.pe != pe or DROP_WAR:
                return self._issue(program, cmd, start, span)
            if rw[o] > t:
                t = rw[o]
        t_end = t + span
        for i in reads:
            if rw[i] < t_end:
                rw[i] = t_end
        if o < 0:
            self.count += len(reads)
        else:  # nothing there ends after ``t`` (and a write's end is an access's end)
            rw[o] = wr[o] = t_end
            self.count += len(reads) + 1
        if self.count > self.limit:  # ``noted``, inlined
            self.prune(self.floor())
            self.limit = max(_PRUNE_AT, 2 * self.count)
        return t

    def _issue(self, program: int, cmd: Any, start: int, span: int) -> int:
        """When ``cmd`` starts: at ``start`` (what its issue and its engine allow) or when its
        data lets it, if later. Its accesses are noted in flight until that start plus
        ``span``. One pass finds each extent's segments (cutting bounds at its ends where
        there are none: a cut copies its segment, so no answer changes) and the latest end
        there; the same segments are raised once the start is known."""
        t = start
        # (index, lo, hi, first segment, end segment, written) per access
        plan: list[tuple[Ranges, int, int, int, int, bool]] = []
        tcm, pe = self.tcm, self.pe
        war = not DROP_WAR
        moved = False  # a cut may have moved an earlier extent's segments (same memory)
        # the reads, then the write: the same steps, written twice (a loop over both costs
        # as much as the steps on this per-op path)
        for h in cmd.inputs:  # RAW: a read waits for writes (an atomic's HBM input: for all)
            buf = h.buf
            lo = buf.addr
            if buf.space == "tcm" and buf.pe == pe:
                m, hi, write = tcm, lo + buf.nbytes, False
            else:
                m, hi, write = self._memory(program, cmd, buf, False)
                if write and buf.space == _HBM:  # an atomic is acq_rel (Triton's default):
                    lo = 0  # it orders all HBM accesses of its program before and after it
            b = m.bounds
            i = bisect_left(b, lo)
            if i + 1 < len(b) and b[i] == lo and b[i + 1] == hi:  # one segment: the common case
                j = i + 1
                v = (m.rw if write and war else m.wr)[i]
            else:
                i, j, v = m.span(i, lo, hi, write and war)
                moved = moved or any(p[0] is m for p in plan)
            plan.append((m, lo, hi, i, j, write))
            if v > t:
                t = v
        out = cmd.out
        if out is not None:  # WAR and WAW: a write waits for every access
            buf = out.buf
            lo = buf.addr
            if buf.space == "tcm" and buf.pe == pe:
                m, hi = tcm, lo + buf.nbytes
            else:
                m, hi, _ = self._memory(program, cmd, buf, True)
            b = m.bounds
            i = bisect_left(b, lo)
            if i + 1 < len(b) and b[i] == lo and b[i + 1] == hi:
                j = i + 1
                v = (m.rw if war else m.wr)[i]
            else:
                i, j, v = m.span(i, lo, hi, war)
                moved = moved or any(p[0] is m for p in plan)
            plan.append((m, lo, hi, i, j, True))
            if v > t:
                t = v
        if moved:
            plan = [(m, lo, hi, bisect_left(m.bounds, lo), bisect_left(m.bounds, hi), w)
                    for m, lo, hi, _, _, w in plan]
        t_end = t + span
        for m, _, _, i, j, write in plan:
            rw = m.rw
            if j == i + 1:  # one segment: the common case
                if rw[i] < t_end:
                    rw[i] = t_end
                if write and m.wr[i] < t_end:
                    m.wr[i] = t_end
            else:
                wr = m.wr
                for k in range(i, j):
                    if rw[k] < t_end:
                        rw[k] = t_end
                    if write and wr[k] < t_end:
                        wr[k] = t_end
        self.noted(len(plan))
        return t

    def _memory(self, program: int, cmd: Any, buf: Any, write: bool) -> tuple[Ranges, int, bool]:
        """(index, end of the extent, written) of an operand outside this PE's TCM: HBM per
        program (strided or indexed: to the end of memory; an atomic writes its HBM input),
        staging and other PEs' memories per memory."""
        space = buf.space
        if space == _HBM:
            hi = buf.addr + buf.nbytes if cmd.attrs == "{}" else _FAR
            key: Any = ((space, buf.pe), program)
            if not write and cmd.op in ATOMICS:
                write, hi = True, _FAR  # an atomic reads and writes its HBM input
        else:
            hi = buf.addr + buf.nbytes
            key = (space, buf.pe)
        m = self.memories.get(key)
        if m is None:
            m = self.memories[key] = Ranges()
        return m, hi, write

    def commit(self, plan: list, t_end: int) -> None:
        """Note accesses in flight until ``t_end`` (``note``, ``rewound``): per access, its
        memory's latest ends of any access and of a write (None: a read) and its segments."""
        for rw, wr, i, j in plan:
            if j == i + 1:  # one segment: the common case
                if rw[i] < t_end:
                    rw[i] = t_end
                if wr is not None and wr[i] < t_end:
                    wr[i] = t_end
            elif wr is not None:
                for k in range(i, j):
                    if rw[k] < t_end:
                        rw[k] = t_end
                    if wr[k] < t_end:
                        wr[k] = t_end
            else:
                for k in range(i, j):
                    if rw[k] < t_end:
                        rw[k] = t_end
        self.noted(len(plan))

    def noted(self, n: int) -> None:
        """``n`` accesses more were noted: prune once the index has grown (amortised: it
        stays as small as what flies)."""
        self.count += n
        if self.count > self.limit:
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
        self.commit([(m.rw, m.wr if w else None, bisect_left(m.bounds, lo),
                      bisect_left(m.bounds, hi)) for m, lo, hi, w in plan], t_end)

    def rewound(self, lo: int, hi: int, now: int) -> int:
        """A scope's rewind of this PE's TCM ``[lo, hi)`` at ``now``: the time it is timed
        at (``now`` or the end of the last access overlapping the range, if later), noted as
        a read of the range until then (``touched`` and ``note``, for the one extent)."""
        m = self.tcm
        if hi <= lo:  # nothing rewound: nothing noted (an empty range inside a segment
            t = m.latest(lo, hi, False)  # still counts as touching it, as ``touched`` says)
            return now if now > t else t
        # cuts copy their segments: the latest end over the range holds
        i, j, t = m.span(bisect_left(m.bounds, lo), lo, hi, True)
        if now > t:
            t = now
        # the next writer of these bytes waits for it, as for their last reader: ``t`` is no
        # earlier than any end there, so every segment's latest end becomes ``t``
        m.rw[i:j] = [t] * (j - i)
        self.noted(1)
        return t

    def touched(self, key: Any, lo: int, hi: int) -> int:
        """When the last access overlapping ``[lo, hi)`` of memory ``key`` ends (0: none)."""
        m = self.memories.get(key)
        return 0 if m is None else m.latest(lo, hi, False)

    def prune(self, before: int) -> None:
        """Forget the accesses that ended at or before ``before``. A memory other than the
        PE's TCM with nothing left in flight goes, bounds and all (HBM is per program: a
        finished program's would stay, and every prune would walk it). ``count`` restarts
        at what the next prune walks, memories and bounds, so prunes stay amortised."""
        n = 0
        tcm = self.tcm
        for key, m in list(self.memories.items()):
            if m is not tcm and (not m.rw or max(m.rw) <= before):  # ``rw``: writes too
                del self.memories[key]
            else:
                n += m.forget(before) + 1
        self.count = n
