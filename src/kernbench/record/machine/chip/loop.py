"""The chip's event loop: every PE's resident programs as greenlets, and every op's start
decided in one global time order (docs/adr/0735).

Two heaps drive it (``turns.py``: whose turn it is): the programs that can run, by
``(clock, program)``, and the decisions due, by time (an engine that may start an op). A
decision at ``t`` is final: every program has issued everything it issues before ``t``, and
the ops it may wait for were decided earlier, so each shared part sees its requests in time
order. Rows reach the op log in op order, each once it is decided.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable
from typing import Any, cast

from greenlet import greenlet

from kernbench.errors import KernbenchError
from kernbench.record.commands import Wait
from kernbench.record.machine.allocator import ScratchAllocator
from kernbench.record.machine.chip import program as P
from kernbench.record.machine.chip.board import Board
from kernbench.record.machine.chip.engines import ChipEngine
from kernbench.record.machine.chip.ipcq import Ipcq, handlers
from kernbench.record.machine.chip.node import NEVER, Node
from kernbench.record.machine.chip.pe import ChipPE
from kernbench.record.machine.chip.turns import Turns
from kernbench.record.machine.context import KernelContext, ProgramGreenlet
from kernbench.record.machine.resident import slot_bytes
from kernbench.record.rows.writer import ROW, OpWriter
from kernbench.schemas.ops import OPS
from kernbench.trace.hw import HwConfig

_PACK = ROW.pack
_push = heapq.heappush
#: test-only hook: called with every engine op as it starts (its readiness, for the
#: work-conservation property of tests/record/machine/chip)
OBSERVE: Callable[[Node], None] | None = None


def _not_a_command(prog: Any, cmd: Any, model: Any, engine: Any) -> None:
    raise KernbenchError(f"op {cmd.op.value!r} is not issued as a command on the chip")


class Chip(Turns):
    """The machine of one recording on hardware with shared parts."""

    def __init__(self, hw: HwConfig, writer: OpWriter, n_pe: int, parts: Any) -> None:
        self.hw, self.writer, self.parts = hw, writer, parts
        self.pes = [ChipPE(i, hw, parts) for i in range(n_pe)]
        for pe in self.pes:
            pe.by_op = {op: (pe.models[op], pe.engine_of(op),
                             P.SPECIAL.get(op) or (P.timed if pe.engine_of(op) is not None
                                                   else _not_a_command)) for op in OPS}
        self.board = Board()
        self.events: list[tuple[int, int, Callable[[Any, int], None], Any]] = []
        self.order = 0
        self.runnable: list[tuple[int, int, P.Prog]] = []
        self.time = 0  # the time of the decision being made
        self.rows: deque[Node] = deque()  # issued, in op order, not written yet
        self.next_id = 0
        self.main: Any = None
        self.running: P.Prog | None = None
        self.switch_at = NEVER
        self.live = 0  # programs started and not finished
        self.parked: dict[int, tuple[int, str, str | None]] = {}
        self.shared = writer.shared  # each op's waits on the shared parts (shared.parquet)
        self.note_issue_wait = 0
        self.settling: list[Node] | None = None
        self.ipcq = Ipcq(self, n_pe)
        self.requests: dict[type, Callable[[P.Prog, Any], Any]] = {Wait: P.wait,
                                                                  **handlers(self.ipcq)}
        self.alone = False
        self.decide = self._decide  # bound once: an event per engine op holds it
        self.shadow: Any = None  # the value graph of a recording with guards (chip/guard.py)

    # -- programs ------------------------------------------------------------------------
    def run(self, programs: list[list[int]], grid: tuple[int, ...], body: Callable[[], Any],
            k: int) -> None:
        """Run every PE's ``programs`` (``k`` resident at a time) to the end."""
        self.main = greenlet.getcurrent()
        self.grid, self.body, self.k = grid, body, k
        self.size = slot_bytes(self.hw, k)
        # "next" and "prev" name neighbours on the ring of the PEs in use (as ahbm-v1/v2)
        self.ipcq.n = max(1, sum(1 for mine in programs if len(mine)))
        for pe, mine in zip(self.pes, programs, strict=True):
            pe.open_slots(k, mine)
            while (nxt := pe.next_start()) is not None:
                self._start(pe, *nxt)
        self._loop()

    def _start(self, pe: ChipPE, program: int, slot: int, at: int) -> None:
        hw, size, k = self.hw, self.size, self.k
        scratch = ScratchAllocator("tcm", pe.index, slot * size + size, hw.tcm_align)
        scratch.cursor = scratch.peak = slot * size
        scratch.slot_note = (f"; this program holds slot {slot} of {k} on PE {pe.index} "
                             f"(slot size {size} bytes, k = {k} resident programs per PE, "
                             "from program 0's scratch peak)") if k > 1 else ""
        prog = P.Prog(self, pe, program, slot, at, scratch)
        ctx = prog.ctx = KernelContext(cast(Any, prog), program, self.grid)
        ctx.connect(prog.issue, pe.by_op)
        g = prog.greenlet = ProgramGreenlet(self.body, parent=self.main)
        g.ctx = ctx
        self.live += 1
        heapq.heappush(self.runnable, (at, program, prog))

    def wait_for(self, prog: P.Prog, nodes: list[Node]) -> None:
        """Park ``prog`` until ``nodes`` are decided; its clock moves to their latest end."""
        left = [n for n in nodes if not n.done]
        t = max((n.end for n in nodes if n.done), default=0)
        if left:
            box = [len(left), t]

            def one(node: Node) -> None:
                box[0] -= 1
                if node.end > box[1]:
                    box[1] = node.end
                if not box[0]:
                    self.wake(prog, box[1])

            for n in left:
                n.after.append(one)
            self.park(prog)
        prog.stall_to(t)

    def _finish(self, prog: P.Prog) -> None:
        pe = prog.cpe
        end = max(prog.clock, prog.last_end)
        pe.peak = max(pe.peak, prog.ctx.scratch.peak, prog.scratch.peak)
        self.board.drop_program(prog.program)
        for e in pe.engines.values():
            e.drop(prog.program)
        self.live -= 1
        pe.release(prog.slot, end)
        nxt = pe.next_start()
        if nxt is not None:
            self._start(pe, *nxt)

    # -- nodes ---------------------------------------------------------------------------
    def enter(self, node: Node, prog: P.Prog) -> None:
        """Number a node issued now (op order) and hold it for its row."""
        node.op_id = op_id = self.next_id
        self.next_id = op_id + 1
        pe = prog.cpe
        node.seq = pe.seq
        pe.seq += 1
        node.cursor = prog.scratch.cursor
        node.depth = len(prog.ctx.scopes)
        self.rows.append(node)
        prog.live += 1
        if self.note_issue_wait:
            self.shared.add(op_id, "issue", pe.issue_resource, self.note_issue_wait)
            self.note_issue_wait = 0

    def claim(self, node: Node) -> None:
        """``node`` waits for the earlier accesses its operands need."""
        board = self.board
        t = board.op(node, node.cmd, node.prog.program)
        ready = node.t_issue + node.prog.cpe.dispatch_ps
        node.ready = t if t > ready else ready
        board.noted(self.time)

    def on_ready(self, node: Node) -> None:
        """Every op ``node`` waits for is decided: it may start from ``node.ready``."""
        e = node.engine
        if e is None:
            self.settle(node, node.ready)
        elif isinstance(e, ChipEngine):
            t = e.ready(node)
            if t < e.at:  # (``due``'s test, saving the call when no decision moves)
                self.due(e, t)
        else:  # a composite parent, a send: what it does once its data are ready
            e.ready()

    def poke(self, e: ChipEngine) -> None:
        """Schedule ``e``'s next decision, if it moved earlier."""
        self.due(e, e.earliest())

    def due(self, e: ChipEngine, t: int) -> None:
        """``e`` may start an op at ``t`` (its ``earliest``): a decision then, unless one is
        due sooner."""
        if t < e.at:
            e.at = t
            self.order = order = self.order + 1
            _push(self.events, (t, order, self.decide, e))
            if t < self.switch_at - 1:
                self.switch_at = t + 1

    def at(self, t: int, fn: Callable[[int], None]) -> None:
        """Call ``fn(t)`` when the loop reaches ``t`` (in time order with the decisions)."""
        self.order += 1
        heapq.heappush(self.events, (t, self.order, _call, fn))
        if t + 1 < self.switch_at:
            self.switch_at = t + 1

    def at_last(self, t: int, fn: Callable[[int], None]) -> None:
        """Call ``fn(t)`` after every decision due at ``t`` (a guard, chip/guard.py)."""
        self.order += 1
        heapq.heappush(self.events, (t, NEVER + self.order, _call, fn))
        if t + 1 < self.switch_at:
            self.switch_at = t + 1

    def quiet(self, t: int) -> bool:
        """Every decision due at or before ``t`` is made (``at_last`` calls aside) and no
        other program is runnable by ``t``: whatever is issued from now on starts later."""
        r, e = self.runnable, self.events
        return not (r and r[0][0] <= t) and not (e and e[0][0] <= t and e[0][1] < NEVER)

    def _decide(self, e: ChipEngine, t: int) -> None:
        if e.at != t:
            return  # superseded by an earlier decision time
        e.at = NEVER
        if e.free <= t:
            node = e.pick(t)
            if node is not None:
                done, end, shared = self.pes[node.pe].price(node, t)
                e.free = done
                e.busy_total += done - t
                if shared:
                    for row in shared:
                        self.shared.add(node.op_id, *row)
                if e.waiting:
                    self._room(e, node.queue, t)
                if OBSERVE is not None:
                    OBSERVE(node)
                if end > done and e.dst >= 0:
                    node.rend = done  # a send reads its source until the link has it
                self.settle(node, t, end, done - t)
        t = e.earliest()
        if t < e.at:
            self.due(e, t)

    def _room(self, e: ChipEngine, queue: Any, t: int) -> None:
        keep = []
        for prog, q in e.waiting:
            if q is queue:
                self.wake(prog, t)
            else:
                keep.append((prog, q))
        e.waiting = keep

    def settle(self, node: Node, start: int, end: int | None = None, busy: int = 0) -> None:
        """``node`` is decided: it started at ``start`` and its result is visible at ``end``
        (``start``: an op of no engine). What waits for it learns when."""
        node.start, node.end, node.busy = start, start if end is None else end, busy
        todo = self.settling
        if todo is not None:  # inside another decision: one level, no recursion
            todo.append(node)
            return
        self.settling = todo = []
        on_ready = self.on_ready
        n = node
        while True:
            n.done = True
            end = n.end
            after = n.after
            if after:
                for w in after:
                    if type(w) is Node:
                        if end > w.ready:
                            w.ready = end
                        w.deps -= 1
                        if not w.deps:
                            on_ready(w)
                    else:
                        w(n)
                n.after = ()  # nothing may wait on it any more
            prog = n.prog
            prog.live -= 1
            if end > prog.last_end:
                prog.last_end = end
            if not prog.live and prog.issued_all:
                self._finish(prog)
            if not todo:
                break
            n = todo.pop()
        self.settling = None
        rows = self.rows
        if rows[0].done:
            writer = self.writer
            times, cmds, pack = writer.times, writer.cmds, _PACK
            while rows and rows[0].done:
                n = rows.popleft()
                times += pack(n.pe, n.prog.program, n.seq, n.parent, n.t_issue, n.start,
                              n.end, n.busy, n.wait, n.cursor, n.depth)
                cmds.append(n.cmd)
                if len(cmds) >= writer.chunk:
                    writer.compact()


def _call(fn: Callable[[int], None], t: int) -> None:
    fn(t)
