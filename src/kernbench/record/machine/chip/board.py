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
from kernbench.schemas.ops import ATOMICS

#: test-only switch: a write no longer waits for earlier reads of its bytes, which must make
#: a replay that reuses a buffer still being read fail (tests/record/machine/chip)
DROP_WAR = False

_FAR = 1 << 62  # an HBM access that is not its operand's contiguous extent covers the rest
_PRUNE_AT = 256
#: a memory's segment bounds kept as they are by a prune (as record/machine/ranges.py)
_KEEP_BOUNDS = 256


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
        to be issued starts before it) and merge runs of empty segments; the bounds left."""
        bounds, wend, wn, rend, rn = [], [], [], [], []
        merge = len(self.bounds) > _KEEP_BOUNDS  # below that, buffers find their bounds
        empty_before = False
        for k, x in enumerate(self.bounds):
            w, r, wnode, readers = self.wend[k], self.rend[k], self.wn[k], self.rn[k]
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
            if empty and empty_before and merge:
                continue
            empty_before = empty
            bounds.append(x)
            wend.append(w)
            wn.append(wnode)
            rend.append(r)
            rn.append(readers)
        self.bounds, self.wend, self.wn, self.rend, self.rn = bounds, wend, wn, rend, rn
        return len(bounds)


def _extent(buf: Any, cmd: Any) -> tuple[int, int]:
    if buf.space == "hbm" and cmd.attrs != "{}":
        return buf.addr, _FAR
    return buf.addr, buf.addr + buf.nbytes


class Board:
    """The accesses of every memory of the chip, keyed by memory (HBM: per program)."""

    __slots__ = ("memories", "stamp", "count", "limit", "tcm", "atomic")

    def __init__(self) -> None:
        self.memories: dict[Any, Segments] = {}
        self.stamp = 0
        self.count = 0
        self.limit = _PRUNE_AT
        self.tcm: dict[int, Segments] = {}  # each PE's kernel scratch, by PE
        self.atomic: dict[int, Node] = {}  # each PE's last atomic issued

    def op(self, node: Node, cmd: Any, program: int) -> int:
        """``claim`` of every operand of ``cmd``, noted. The common case — every operand one
        whole segment of a PE's TCM already cut — takes a short path (no cut, no key);
        anything else the general one."""
        tcm = self.tcm
        spans = []
        for h in cmd.inputs:
            buf = h.buf
            if buf.space != "tcm":
                t = self.claim(node, self.extents(cmd, program))
                return in_issue_order(self.atomic, node, t) if cmd.op in ATOMICS else t
            m = tcm.get(buf.pe)
            if m is None:
                return self.claim(node, self.extents(cmd, program))
            b = m.bounds
            lo = buf.addr
            i = bisect_left(b, lo)
            if i + 1 >= len(b) or b[i] != lo or b[i + 1] != lo + buf.nbytes:
                return self.claim(node, self.extents(cmd, program))
            spans.append((m, i))
        out = cmd.out
        wm = None
        w_i = 0
        if out is not None:
            buf = out.buf
            if buf.space != "tcm" or cmd.op in ATOMICS:
                return self.claim(node, self.extents(cmd, program))
            wm = tcm.get(buf.pe)
            if wm is None:
                return self.claim(node, self.extents(cmd, program))
            b = wm.bounds
            lo = buf.addr
            w_i = bisect_left(b, lo)
            if w_i + 1 >= len(b) or b[w_i] != lo or b[w_i + 1] != lo + buf.nbytes:
                return self.claim(node, self.extents(cmd, program))
        self.stamp = stamp = self.stamp + 1
        node.stamp = stamp
        t = 0
        for m, k in spans:  # RAW: the segment's writer
            w = m.wn[k]
            if w is not None:
                if w.done:
                    if w.end > m.wend[k]:
                        m.wend[k] = w.end
                    if w.end > m.rend[k]:
                        m.rend[k] = w.end
                    m.wn[k] = None
                elif w.stamp != stamp:
                    w.stamp = stamp
                    w.after.append(node)
                    node.deps += 1
            if m.wend[k] > t:
                t = m.wend[k]
        if wm is not None:  # WAR and WAW: every access of the segment
            k = w_i
            w = wm.wn[k]
            if w is not None:
                if w.done:
                    if w.end > wm.rend[k]:
                        wm.rend[k] = w.end
                elif w.stamp != stamp:
                    w.stamp = stamp
                    w.after.append(node)
                    node.deps += 1
            if DROP_WAR:
                if wm.wend[k] > t:
                    t = wm.wend[k]
            else:
                r_end = wm.rend[k]
                for r in wm.rn[k]:
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
        for m, k in spans:  # noted: a reader of its segments
            readers = m.rn[k]
            if len(readers) > 16:  # fold the decided ones (bounded lists)
                kept = []
                for r in readers:
                    if r.done:
                        e = r.end if r.rend < 0 else r.rend
                        if e > m.rend[k]:
                            m.rend[k] = e
                    else:
                        kept.append(r)
                m.rn[k] = readers = kept
            readers.append(node)
        if wm is not None:  # the writer of its segment, standing for all before it
            wm.wn[w_i] = node
            wm.wend[w_i] = wm.rend[w_i] = 0
            wm.rn[w_i] = []
        self.count += len(spans) + (wm is not None)
        return t

    def _memory(self, buf: Any, program: int) -> Segments:
        key: Any = (buf.space, buf.pe)
        if buf.space == "hbm":
            key = (key, program)
        m = self.memories.get(key)
        if m is None:
            m = self.memories[key] = Segments()
            if buf.space == "tcm":
                self.tcm[buf.pe] = m
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
            j = bisect_left(b, hi, i)
            spans.append((m, i, j, write))
            wend, wn, rend, rn = m.wend, m.wn, m.rend, m.rn
            for k in range(i, j):
                w = wn[k]
                if w is not None:
                    if w.done:
                        if w.end > wend[k]:
                            wend[k] = w.end
                        if w.end > rend[k]:
                            rend[k] = w.end
                        wn[k] = None
                    elif w.stamp != stamp:
                        w.stamp = stamp
                        w.after.append(node)
                        node.deps += 1
                if write and war:
                    if rend[k] > t:
                        t = rend[k]
                    readers = rn[k]
                    if readers:
                        kept = []
                        for r in readers:
                            if r.done:
                                e = r.end if r.rend < 0 else r.rend
                                if e > rend[k]:
                                    rend[k] = e
                                if e > t:
                                    t = e
                            else:
                                kept.append(r)
                                if r.stamp != stamp:
                                    r.stamp = stamp
                                    r.after.append(node if r.engine is None
                                                   or r.engine.dst < 0 else _Read(node))
                                    node.deps += 1
                        rn[k] = kept
                elif wend[k] > t:
                    t = wend[k]
        if note:
            for m, i, j, write in spans:
                if write:
                    for k in range(i, j):
                        m.wn[k] = node
                        m.wend[k] = m.rend[k] = 0
                        m.rn[k] = []
                else:
                    rn = m.rn
                    for k in range(i, j):
                        readers = rn[k]
                        if len(readers) > 16:  # fold the decided ones (bounded lists)
                            rend = m.rend
                            kept = []
                            for r in readers:
                                if r.done:
                                    e = r.end if r.rend < 0 else r.rend
                                    if e > rend[k]:
                                        rend[k] = e
                                else:
                                    kept.append(r)
                            rn[k] = readers = kept
                        readers.append(node)
            self.count += len(spans)
        return t

    def rewind(self, node: Node, key: Any, lo: int, hi: int) -> int:
        """A scope exit rewinding ``[lo, hi)`` of memory ``key``: it waits for every access
        there (like a write), then stands as their reader (later writers wait for it)."""
        m = self.memories.get(key)
        if m is None:
            m = self.memories[key] = Segments()
        t = self.claim(node, [(m, lo, hi, True)], note=False)
        if hi > lo:
            b = m.bounds
            for k in range(bisect_left(b, lo), bisect_left(b, hi)):
                m.rn[k].append(node)
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
        for k in range(bisect_left(b, lo), bisect_left(b, hi)):
            w = m.wn[k]
            for n in m.rn[k] if w is None else (w, *m.rn[k]):
                if n.done:
                    e = n.end if n.rend < 0 or n is w else n.rend
                    if e > t:
                        t = e
                elif n.stamp != stamp:
                    n.stamp = stamp
                    waits.append(n)
            t = max(t, m.wend[k], m.rend[k])
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
        for key in [k for k in self.memories if len(k) == 2 and k[1] == program
                    and isinstance(k[0], tuple)]:
            del self.memories[key]
