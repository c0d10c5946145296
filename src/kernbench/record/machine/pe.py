"""The PE driver: a SimPy process that runs a PE's programs as greenlets and times their ops.

Each tl call hands a command to this driver, which waits for the command's pending inputs
(the auto-wait), dispatches it through the timing registry to an engine model in closed form
and hands the row to the recorder. A PE keeps its own clock ahead of SimPy's: commands in
closed form run directly on the kernel's greenlet, and only requests that synchronise with
other PEs (IPCQ) switch to the driver's SimPy process, which yields to SimPy. Behaviour is
the same as switching and yielding on every op, because PEs share nothing but IPCQ links.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator
from typing import Any

import simpy
from greenlet import greenlet

from kernbench.record.commands import Cmd, Resolve, Wait
from kernbench.record.guards.graph import Shadow
from kernbench.record.machine import asynchronous, resident
from kernbench.record.machine.allocator import FreeListAllocator, ScratchAllocator
from kernbench.record.machine.composite import run_composite
from kernbench.record.machine.context import KernelContext, ProgramGreenlet
from kernbench.record.machine.engines import (
    DmaChannel,
    GemmEngine,
    LinkEngine,
    MathEngine,
    NoEngine,
)
from kernbench.record.machine.guard import guard
from kernbench.record.machine.ipcq import RUN, Ring, run_resolve
from kernbench.record.machine.pipeline import Loop, adopt, timed_hbm_writer, timed_pipelined
from kernbench.record.machine.scoreboard import Scoreboard, accesses
from kernbench.record.machine.timing import models
from kernbench.record.rows.writer import NO_PARENT, ROW, OpWriter
from kernbench.schemas import ops
from kernbench.schemas.ops import Engine, Op
from kernbench.trace.hw import HwConfig

_NON_BLOCKING = ops.NON_BLOCKING
_PACK = ROW.pack
#: loads a pipelined loop may issue ahead: non-blocking reads of HBM (atomics never move)
_PIPELINABLE = frozenset(op for op in _NON_BLOCKING if ops.ENGINE[op] is Engine.DMA_RD
                         and op not in ops.ATOMICS)
#: the other HBM traffic a pipelined loop watches (a load is never hoisted above a write)
_HBM_WRITERS = frozenset(op for op in ops.ENGINE if op not in _PIPELINABLE
                         and ops.ENGINE[op] in (Engine.DMA_RD, Engine.DMA_WR))


class PEDriver:
    """One processing element: engines, scratch, clock, and the op loop."""

    def __init__(self, index: int, hw: HwConfig, env: simpy.Environment, writer: OpWriter) -> None:
        self.index, self.hw, self.env, self.writer = index, hw, env, writer
        self.now = 0
        self.seq = 0
        self.dispatch_ps = hw.dispatch_cycles * hw.cycle_ps
        self.dma_rd, self.dma_wr = DmaChannel(hw), DmaChannel(hw)
        self.gemm, self.math = GemmEngine(hw), MathEngine(hw)
        self.engines = {Engine.DMA_RD: self.dma_rd, Engine.DMA_WR: self.dma_wr,
                        Engine.GEMM: self.gemm, Engine.MATH: self.math, Engine.NONE: NoEngine()}
        #: op -> (timing model, engine, handler): a command runs as ``handler(pe, cmd, model,
        #: engine)`` (a plain function: the kernel's call to it is a Python call, no binding)
        special = {Op.SCOPE_EXIT: PEDriver._scope_exit, Op.GEMM: PEDriver._composite}
        self._by_op: dict[Op, tuple[Any, Any, Callable[..., Any]]] = {
            op: (model, self.engines.get(ops.ENGINE[op]), special.get(op, PEDriver._timed))
            for op, model in models(self).items()}
        self._plain = dict(self._by_op)  # the handlers outside pipelined loops
        self.loop: Loop | None = None  # the innermost running pipelined loop (pipeline.py)
        self.rewound_ps = 0  # when a scope last rewound scratch: no load is hoisted above it
        self.scratch: ScratchAllocator | FreeListAllocator = ScratchAllocator(
            "tcm", index, hw.kernel_scratch_bytes, hw.tcm_align)
        self.pending: list = []  # buffers with a completion in the future (lazy loads)
        self.carried_wait = 0  # explicit tl.wait stalls, charged to the next op's wait_ps
        self.ctx: KernelContext | None = None
        #: the writer's pending rows, shared and cleared in place (record/rows/writer.py)
        self._times = writer.times.extend
        self._cmds = writer.cmds
        self.links = {"next": LinkEngine(hw), "prev": LinkEngine(hw)}
        self.ring: Ring | None = None  # set by the runner: the IPCQ ring of active PEs
        self.unresolved: list = []  # recv_async buffers whose message has not matched yet
        self.done = False  # set when every program of this PE has finished
        self.blocked_at: Any = None  # the SimPy request this PE is waiting in, if any
        self._switch: Callable[[Any], Any] = greenlet.getcurrent().switch
        #: the engine-issue policy: "blocking" (v1, the handlers above) or "async" (asynchronous.py)
        self.is_async = hw.engine_issue == "async"
        self.queue_depth = hw.engine_queue_depth  # an async engine queue's capacity
        self.board = Scoreboard(self.floor, index)  # the async policy's in-flight accesses
        self.queues: dict[Any, deque[int]] = {}  # the async policy's engine queues (starts)
        self.last_end = 0  # the end of the running program's last op (async)
        self.switch_at = resident.NEVER  # hand over to another resident program from then on
        #: set when the running program hands over waiting for room in this engine queue
        self.stalled_on: deque[int] | None = None
        self.peak = 0  # the scratch peak over this PE's slots (async)
        self.pipelinable = _PIPELINABLE
        self.by_op = self._by_op
        if self.is_async:
            self.queues = {e: deque() for e in (self.dma_rd, self.dma_wr, self.gemm,
                                                    self.math)}
            for op, (model, engine, _) in self._by_op.items():
                self._by_op[op] = (model, engine, asynchronous.SPECIAL.get(op, asynchronous.timed))
        model, engine, _ = self._by_op[Op.GUARD]  # one handler under either policy
        self._by_op[Op.GUARD] = (model, engine, guard)
        self._plain = dict(self._by_op)
        #: the recording's value graph when it runs with guards (``attach``), else None
        self.shadow: Shadow | None = None

    # -- the SimPy process -------------------------------------------------------------
    def process(self, programs: list[int], grid: tuple[int, ...],
                run: Callable[[], Any], k: int = 1) -> Generator[simpy.Event, Any, None]:
        self.blocked_at = None
        if self.is_async:
            yield from resident.run(self, programs, grid, run, k)
            return
        for program in programs:
            self.scratch.rewind(0)
            if self.loop is not None:  # a loop the last program left without closing it
                self.set_loop(None)
            ctx = self.ctx = KernelContext(self, program, grid)
            g = ProgramGreenlet(run)
            g.ctx = ctx
            self._switch = greenlet.getcurrent().switch
            ctx.connect(self.issue, self._by_op)
            msg = g.switch()
            while not g.dead:  # only requests that synchronise with SimPy come here
                self.blocked_at = msg
                result = yield from RUN[type(msg)](msg, self)  # type: ignore[func-returns-value]
                self.blocked_at = None
                msg = g.switch(result)
            if self.unresolved:  # recv_async handles never consumed
                yield from run_resolve(Resolve(list(self.unresolved)), self)
            self.drain()
        if self.now > self.env.now:
            yield self.env.timeout(self.now - self.env.now)
        self.done = True

    def issue(self, msg: Any) -> Any:
        """Execute a command for the kernel greenlet. A command in closed form (every op) runs
        right here; a request that must synchronise with other PEs (IPCQ) switches to
        this driver's SimPy process, which yields to SimPy and switches back with the result."""
        if type(msg) is Cmd:
            model, engine, handler = self._by_op[msg.op]
            return handler(self, msg, model, engine)
        if type(msg) is Wait:
            if self.is_async:
                return asynchronous.wait(self, msg.bufs)
            return self._wait(msg.bufs)
        return self._switch(msg)

    def drain(self) -> None:
        """Wait for every in-flight completion (end of a program)."""
        for buf in self.pending:
            self.now = max(self.now, buf.ready_ps, buf.read_until)
        self.pending = []

    # -- one op ------------------------------------------------------------------------
    def _timed(self, cmd: Cmd, model: Callable, engine: Any) -> None:
        now = self.now
        ready = now
        for h in cmd.inputs:
            r = h.buf.ready_ps
            if r > ready:
                ready = r
        out = cmd.out
        if out is not None:  # a write waits for a pending write and an in-flight read
            ob = out.buf
            if ob.ready_ps > ready:
                ready = ob.ready_ps
            if ob.read_until > ready:
                ready = ob.read_until
        wait = ready - now + self.carried_wait
        self.carried_wait = 0
        busy, latency = model(self, cmd)
        start = ready + self.dispatch_ps  # engine.occupy, inlined: capacity 1, issue order
        if engine.busy_until > start:
            start = engine.busy_until
        engine.busy_until = start + busy
        engine.busy_total += busy
        t_end = start + busy + latency
        if cmd.op in _NON_BLOCKING:
            out.buf.ready_ps = t_end  # type: ignore[union-attr]
            self.pending.append(out.buf)  # type: ignore[union-attr]
            self.now = ready + self.dispatch_ps
        else:
            self.now = t_end
            if out is not None and out.buf.ready_ps < t_end:  # what a load a pipelined
                out.buf.ready_ps = t_end  # loop hoists waits for (gather offsets, masks)
        self.row(ready, start, t_end, busy, wait, cmd)

    def timed(self, cmd: Cmd, model: Callable, engine: Any) -> None:
        """Time one command by the running policy's plain handler (what a pipelined loop's
        HBM writer wraps)."""
        self._timed(cmd, model, engine)

    def stall(self, until: int) -> None:
        """The kernel waits until ``until`` (if later): charged to the next op's wait_ps."""
        if until > self.now:
            self.carried_wait += until - self.now
            self.now = until

    def row(self, t_issue: int, start: int, t_end: int, busy: int, wait: int, cmd: Cmd,
            parent: int = NO_PARENT) -> None:
        """Log one op row: the one place a row is built (every policy and request)."""
        ctx = self.ctx
        seq = self.seq
        self.seq = seq + 1
        self._times(_PACK(self.index, ctx.program, seq, parent, t_issue, start, t_end, busy,  # type: ignore[union-attr]
                          wait, self.scratch.cursor, len(ctx.scopes)))  # type: ignore[union-attr]
        cmds = self._cmds
        cmds.append(cmd)
        if len(cmds) >= self.writer.chunk:
            self.writer.compact()

    def attach(self, shadow: Shadow) -> None:
        """Record with guards: every row is noted in the value graph ``shadow`` first (the
        plain ``row`` is untouched: a recording without guards pays nothing)."""
        self.shadow = shadow
        setattr(self, "row", self._noted_row)  # noqa: B010 - an instance's own row

    def _noted_row(self, t_issue: int, start: int, t_end: int, busy: int, wait: int,
                   cmd: Cmd, parent: int = NO_PARENT) -> None:
        shadow = self.shadow
        assert shadow is not None, "attach() set it"
        shadow.note(cmd, start, t_end, self.writer.next_op_id, parent != NO_PARENT)
        PEDriver.row(self, t_issue, start, t_end, busy, wait, cmd, parent)

    def set_loop(self, loop: Loop | None) -> None:
        """Enter (or leave, to ``loop``) a pipelined loop: with 2+ stages its loads and HBM
        writes take the pipelined handlers; the plain path is untouched otherwise."""
        self.loop = loop
        if type(self.scratch) is FreeListAllocator:
            self.scratch.loop = loop if loop is not None and loop.stages >= 2 else None
        by_op = self._by_op
        if self.is_async:  # async loads are not hoisted: the kernel runs ahead by itself
            return
        by_op.update(self._plain)
        if loop is not None and loop.stages >= 2:
            for op in _PIPELINABLE:
                model, engine, _ = by_op[op]
                by_op[op] = (model, engine, timed_pipelined)
            for op in _HBM_WRITERS:
                model, engine, handler = by_op[op]
                if handler is PEDriver._timed:
                    by_op[op] = (model, engine, timed_hbm_writer)

    def adopt(self, cmd: Cmd) -> None:
        """A pipelined load site's first load in lifetime mode starts its buffer ring."""
        adopt(self, self.loop, cmd)  # type: ignore[arg-type]

    def floor(self) -> int:
        """No op still to be issued on this PE starts before this: the running program's
        clock, or the next resident program's (the scheduler runs the earliest first)."""
        return min(self.now, self.switch_at - 1)

    def maybe_yield(self) -> None:
        """Hand over to the scheduler when another resident program's clock is earlier."""
        if self.now >= self.switch_at:
            self._switch(resident.YIELD)

    def data_ready(self, cmd: Cmd) -> int:
        """When the scoreboard lets ``cmd`` touch its data (0 under the blocking policy)."""
        if not self.is_async:
            return 0
        return self.board.ready(self.ctx.program, *accesses(cmd))  # type: ignore[union-attr]

    def note_access(self, cmd: Cmd, t_end: int) -> None:
        """Tell the scoreboard about an op timed elsewhere (IPCQ), in flight until ``t_end``."""
        if self.is_async:
            self.board.note(self.ctx.program, *accesses(cmd), t_end)  # type: ignore[union-attr]
            if t_end > self.last_end:
                self.last_end = t_end

    def record(self, cmd: Cmd, t_issue: int, start: int, t_end: int, busy: int, wait: int,
               parent: int | None = None) -> int:
        op_id = self.writer.next_op_id
        self.row(t_issue, start, t_end, busy, wait, cmd, NO_PARENT if parent is None else parent)
        return op_id

    # -- scopes and explicit waits -----------------------------------------------------
    def _scope_exit(self, cmd: Cmd, model: Callable, engine: Any) -> None:
        """Rewind ``[lo, hi)`` (``cmd.work``): first wait for in-flight loads landing in it."""
        lo, hi = cmd.work
        ready = self.now
        keep = []
        for buf in self.pending:
            busy = max(buf.ready_ps, buf.read_until)
            if busy > self.now:
                keep.append(buf)
                if buf.space == "tcm" and lo <= buf.addr < hi and busy > ready:
                    ready = busy
        self.pending = keep
        wait = ready - self.now + self.carried_wait
        self.carried_wait = 0
        self.now = self.rewound_ps = ready
        self.record(cmd, ready, ready, ready, 0, wait)

    def _composite(self, cmd: Cmd, model: Callable, engine: Any) -> None:
        free = cmd.out.buf.read_until  # type: ignore[union-attr]  # reused bytes (lifetime mode) still busy: wait first  # type: ignore[union-attr]
        if free > self.now:
            self.carried_wait += free - self.now
            self.now = free
        run_composite(self, cmd)

    def take_wait(self) -> int:
        """The explicit-wait stall carried to the next op (and reset)."""
        w, self.carried_wait = self.carried_wait, 0
        return w

    def _wait(self, bufs: list) -> None:
        ready = self.now
        for b in bufs:
            ready = max(ready, b.ready_ps, b.read_until)
        self.carried_wait += ready - self.now
        self.now = ready
