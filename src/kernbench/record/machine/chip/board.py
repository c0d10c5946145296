"""Which earlier ops an op's data waits for, while they may still be undecided (the chip's
scoreboard; docs/hardware-model.md).

An op starts once its inputs are visible (RAW: the earlier writes of those bytes have
ended) and its output range is free (WAR and WAW: every earlier read and write of it has
ended). On the chip an earlier op may not have been decided yet when a later one is issued,
so each memory keeps, per segment of its address line, the decided latest ends (of a write,
of any access) and the undecided accesses themselves (the last writer, the readers since);
an op's dependencies are the undecided accesses it must wait for, and its readiness the
latest decided end. A write waits for every earlier access of its bytes, so once it is
noted it stands for them all (the segments forget what came before it).

TCM and staging are the PE's (resident programs own disjoint slots of TCM and share the
staging area); HBM orders the ops of one program only (between programs ordering is the
kernel's business, which the race detector checks); a message slot (``ipcq``) is its
receiver PE's. A ``scope_exit`` reads its rewound range: the next writer of those bytes
comes after it (after Phase 2 invalidated them).
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Any

from kernbench.record.machine.chip.atomics import in_issue_order
from kernbench.record.machine.chip.node import Node
from kernbench.record.machine.chip.segments import Seg, Segments
from kernbench.schemas.ops import ATOMICS

#: test-only switch: a write no longer waits for earlier reads of its bytes, which must make
#: a replay that reuses a buffer still being read fail (tests/record/machine/chip)
DROP_WAR = False

_FAR = 1 << 62  # an HBM access that is not its operand's contiguous extent covers the rest
_PRUNE_AT = 256


class _Read:
    """``node`` waits for a send to stop reading its source (the link has it), not for the
    message to arrive."""

    __slots__ = ("node",)

    def __init__(self, node: Node) -> None:
        self.node = node

    def __call__(self, sender: Node) -> None:
        node = self.node
        e = sender.end if sender.rend < 0 else sender.rend
        if e > node.ready:
            node.ready = e
        node.deps -= 1
        if not node.deps:
            node.prog.chip.on_ready(node)


def _folded(seg: Seg, readers: list[Node]) -> list[Node]:
    """``readers`` without the decided ones, folded into ``seg.rend`` (bounded lists)."""
    kept = []
    for r in readers:
        if r.done:
            e = r.end if r.rend < 0 else r.rend
            if e > seg.rend:
                seg.rend = e
        else:
            kept.append(r)
    return kept


def _extent(buf: Any, cmd: Any) -> tuple[int, int]:
    if buf.space == "hbm" and cmd.attrs != "{}":
        return buf.addr, _FAR
    return buf.addr, buf.addr + buf.nbytes


class Board:
    """The accesses of every memory of the chip, keyed by memory (HBM: per program)."""

    __slots__ = ("memories", "stamp", "count", "limit", "tcm", "hbm", "atomic")

    def __init__(self) -> None:
        self.memories: dict[Any, Segments] = {}
        self.stamp = 0
        self.count = 0
        self.limit = _PRUNE_AT
        self.tcm: dict[int, Segments] = {}  # each PE's kernel scratch, by PE
        self.hbm: dict[int, list[Any]] = {}  # each program's keys of HBM memories
        self.atomic: dict[int, Node] = {}  # each PE's last atomic issued

    def op(self, node: Node, cmd: Any, program: int) -> int:
        """``claim`` of every operand of ``cmd``, noted. The common case — every operand one
        whole segment of a PE's TCM already cut — takes a short path (no cut, no key);
        anything else the general one."""
        tcm = self.tcm
        segs = []
        for h in cmd.inputs:
            buf = h.buf
            if buf.space != "tcm":
                t = self.claim(node, self.extents(cmd, program))
                return in_issue_order(self.atomic, node, t) if cmd.op in ATOMICS else t
            m = tcm.get(buf.pe)
            seg = m.at.get(buf.addr) if m is not None else None
            if seg is None or seg.hi != buf.addr + buf.nbytes:
                return self.claim(node, self.extents(cmd, program))
            segs.append(seg)
        out = cmd.out
        ws = None
        if out is not None:
            buf = out.buf
            m = tcm.get(buf.pe) if buf.space == "tcm" and cmd.op not in ATOMICS else None
            ws = m.at.get(buf.addr) if m is not None else None
            if ws is None or ws.hi != buf.addr + buf.nbytes:
                return self.claim(node, self.extents(cmd, program))
        self.stamp = stamp = self.stamp + 1
        node.stamp = stamp
        t = 0
        for seg in segs:  # RAW: the segment's writer
            w = seg.wn
            if w is not None:
                if w.done:
                    e = w.end
                    if e > seg.wend:
                        seg.wend = e
                    if e > seg.rend:
                        seg.rend = e
                    seg.wn = None
                elif w.stamp != stamp:
                    w.stamp = stamp
                    w.after.append(node)
                    node.deps += 1
            if seg.wend > t:
                t = seg.wend
        if ws is not None:  # WAR and WAW: every access of the segment
            w = ws.wn
            if w is not None:
                if w.done:
                    if w.end > ws.rend:
                        ws.rend = w.end
                elif w.stamp != stamp:
                    w.stamp = stamp
                    w.after.append(node)
                    node.deps += 1
            if DROP_WAR:
                if ws.wend > t:
                    t = ws.wend
            else:
                r_end = ws.rend
                for r in ws.rn:
                    if r.done:
                        e = r.end if r.rend < 0 else r.rend
                        if e > r_end:
                            r_end = e
                    elif r.stamp != stamp:
                        r.stamp = stamp
                        r.after.append(node if r.engine is None or r.engine.dst < 0
                                       else _Read(node))
                        node.deps += 1
                if r_end > t:
                    t = r_end
        for seg in segs:  # noted: a reader of its segments
            readers = seg.rn
            if len(readers) > 16:
                seg.rn = readers = _folded(seg, readers)
            readers.append(node)
        if ws is not None:  # the writer of its segment, standing for all before it
            ws.wn = node
            ws.wend = ws.rend = 0
            ws.rn = []
        self.count += len(segs) + (ws is not None)
        return t

    def _memory(self, buf: Any, program: int) -> Segments:
        if buf.space == "tcm":
            m = self.tcm.get(buf.pe)
            if m is not None:
                return m
        key: Any = (buf.space, buf.pe)
        if buf.space == "hbm":
            key = (key, program)
        m = self.memories.get(key)
        if m is None:
            m = self.memories[key] = Segments()
            if buf.space == "tcm":
                self.tcm[buf.pe] = m
            elif buf.space == "hbm":
                self.hbm.setdefault(program, []).append(key)
        return m

    def extents(self, cmd: Any, program: int) -> list[tuple[Segments, int, int, bool]]:
        """(memory, lo, hi, written) of every operand: the inputs, then the output; an
        atomic also writes its HBM input, and is acq_rel (Triton's default, ADR-0841): its
        HBM extent is all of its program's HBM (earlier accesses first, later after it)."""
        out = []
        atomic = cmd.op in ATOMICS
        for h in cmd.inputs:
            buf = h.buf
            lo, hi = _extent(buf, cmd)
            if atomic and buf.space == "hbm":  # acq_rel (ADR-0841): all of its program's HBM
                lo, hi = 0, _FAR
            out.append((self._memory(buf, program), lo, hi, atomic and buf.space == "hbm"))
        if cmd.out is not None:
            buf = cmd.out.buf
            lo, hi = _extent(buf, cmd)
            out.append((self._memory(buf, program), lo, hi, True))
        return out

    def claim(self, node: Node, extents: list[tuple[Segments, int, int, bool]],
              note: bool = True) -> int:
        """Make ``node`` wait for the undecided accesses its extents need (adding it to their
        ``after`` lists, counting them in ``node.deps``); the latest decided end they need.
        With ``note`` the extents are then noted as ``node``'s accesses."""
        for m, lo, hi, _ in extents:  # cut first: a cut moves the indices after it
            m.split(lo)
            m.split(hi)
        self.stamp = stamp = self.stamp + 1
        node.stamp = stamp  # never its own dependency
        t = 0
        war = not DROP_WAR
        spans = []
        for m, lo, hi, write in extents:
            b = m.bounds
            i = bisect_left(b, lo)
            span = m.segs[i:bisect_left(b, hi, i)]
            spans.append((span, write))
            for seg in span:
                w = seg.wn
                if w is not None:
                    if w.done:
                        e = w.end
                        if e > seg.wend:
                            seg.wend = e
                        if e > seg.rend:
                            seg.rend = e
                        seg.wn = None
                    elif w.stamp != stamp:
                        w.stamp = stamp
                        w.after.append(node)
                        node.deps += 1
                if write and war:
                    if seg.rend > t:
                        t = seg.rend
                    readers = seg.rn
                    if readers:
                        kept = []
                        for r in readers:
                            if r.done:
                                e = r.end if r.rend < 0 else r.rend
                                if e > seg.rend:
                                    seg.rend = e
                                if e > t:
                                    t = e
                            else:
                                kept.append(r)
                                if r.stamp != stamp:
                                    r.stamp = stamp
                                    r.after.append(node if r.engine is None
                                                   or r.engine.dst < 0 else _Read(node))
                                    node.deps += 1
                        seg.rn = kept
                elif seg.wend > t:
                    t = seg.wend
        if note:
            for span, write in spans:
                if write:
                    for seg in span:
                        seg.wn = node
                        seg.wend = seg.rend = 0
                        seg.rn = []
                else:
                    for seg in span:
                        readers = seg.rn
                        if len(readers) > 16:
                            seg.rn = readers = _folded(seg, readers)
                        readers.append(node)
            self.count += len(spans)
        return t

    def rewind(self, node: Node, key: Any, lo: int, hi: int) -> int:
        """A scope exit rewinding ``[lo, hi)`` of memory ``key``: it waits for every access
        there (like a write), then stands as their reader (later writers wait for it)."""
        m = self.memories.get(key)
        if m is None:
            m = self.memories[key] = Segments()
            if key[0] == "tcm":  # the per-op path finds a PE's scratch here (``op``)
                self.tcm[key[1]] = m
        t = self.claim(node, [(m, lo, hi, True)], note=False)
        if hi > lo:
            b = m.bounds
            for seg in m.segs[bisect_left(b, lo):bisect_left(b, hi)]:
                seg.rn.append(node)
            self.count += 1
        return t

    def pending(self, buf: Any, program: int) -> tuple[list[Node], int]:
        """The undecided accesses of ``buf``'s bytes and the latest decided end (what
        ``tl.wait`` waits for: its writes and its in-flight reads)."""
        m = self._memory(buf, program)
        lo, hi = buf.addr, buf.addr + buf.nbytes
        m.split(lo)
        m.split(hi)
        self.stamp = stamp = self.stamp + 1
        waits: list[Node] = []
        t = 0
        b = m.bounds
        for seg in m.segs[bisect_left(b, lo):bisect_left(b, hi)]:
            w = seg.wn
            for n in seg.rn if w is None else (w, *seg.rn):
                if n.done:
                    e = n.end if n.rend < 0 or n is w else n.rend
                    if e > t:
                        t = e
                elif n.stamp != stamp:
                    n.stamp = stamp
                    waits.append(n)
            t = max(t, seg.wend, seg.rend)
        return waits, t

    def noted(self, floor: int) -> None:
        """Prune once the index has grown (amortised: it stays as small as what flies)."""
        if self.count > self.limit:
            n = 0
            for m in self.memories.values():
                n += m.forget(floor)
            self.count = n
            self.limit = max(_PRUNE_AT, 2 * n)

    def drop_program(self, program: int) -> None:
        """A program ended: its HBM ordering is over (no other program's op waits on it)."""
        for key in self.hbm.pop(program, ()):
            del self.memories[key]
