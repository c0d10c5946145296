"""A resident program on the chip, as the kernel's ``tl`` calls see their PE driver, and the
handlers that turn its commands into nodes of the chip.

The kernel issues at its program's clock (``clock``, integer ps) and goes on at once; it
stops only where it needs an answer the chip has not decided yet — room in a full engine
queue, a ``tl.wait``, the issue port, the end of the program — by parking its greenlet
until the chip decides it. ``now`` is the program's count of issued ops: what the lowering
reads as the PE's time (a freed buffer's time, a pipelined loop's start), so that where a
value lands in TCM never depends on the hardware's timing (docs/hardware-model.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from kernbench.record.commands import Cmd, Wait
from kernbench.record.machine.allocator import FreeListAllocator, ScratchAllocator
from kernbench.record.machine.chip.guard import guard
from kernbench.record.machine.chip.node import Node
from kernbench.record.machine.chip.pe import ChipPE
from kernbench.record.machine.chip.protocol import ChipLoop
from kernbench.record.machine.composite import children
from kernbench.record.machine.pipeline import adopt
from kernbench.schemas import ops
from kernbench.schemas.ops import ENGINE, OP, Engine

_NON_BLOCKING = ops.NON_BLOCKING
_PIPELINABLE = frozenset(op for op in _NON_BLOCKING if ops.ENGINE[op] is Engine.DMA_RD
                         and op not in ops.ATOMICS)


class Prog:
    """One resident program: its greenlet's state and the driver protocol the lowering
    reads (``index``, ``hw``, ``writer``, ``scratch``, ``now``, ``seq``, ``loop``...)."""

    def __init__(self, chip: ChipLoop, pe: ChipPE, program: int, slot: int, clock: int,
                 scratch: ScratchAllocator) -> None:
        self.chip, self.cpe, self.program, self.slot = chip, pe, program, slot
        self.pe = self.index = pe.index
        self.hw, self.writer = chip.hw, chip.writer
        self.clock = clock
        self.now = 0  # ops issued: the lowering's clock (see the module doc)
        self.carried_wait = 0
        self.scratch: ScratchAllocator | FreeListAllocator = scratch
        self.unresolved: list = []
        self.loop: Any = None
        self.live = 0  # its nodes not decided yet
        self.last_end = clock
        self.issued_all = False
        self.greenlet: Any = None
        self.ctx: Any = None
        self.by_op = pe.by_op
        self.blocking = chip.hw.engine_issue == "blocking"

    @property
    def seq(self) -> int:
        return self.cpe.seq

    def issue(self, msg: Any) -> Any:
        """A request that is not an op of the table: ``tl.wait``, IPCQ."""
        if type(msg) is Cmd:
            model, engine, handler = self.by_op[msg.op]
            return handler(self, msg, model, engine)
        return self.chip.requests[type(msg)](self, msg)

    def set_loop(self, loop: Any) -> None:
        self.loop = loop
        if type(self.scratch) is FreeListAllocator:
            self.scratch.loop = loop if loop is not None and loop.stages >= 2 else None

    def stall_to(self, t: int) -> None:
        if t > self.clock:
            self.carried_wait += t - self.clock
            self.clock = t

    def take_wait(self) -> int:
        w, self.carried_wait = self.carried_wait, 0
        return w


def _node(prog: Prog, cmd: Cmd, engine: Any, model: Any, t_issue: int) -> Node:
    """A node for ``cmd`` issued now, numbered in op order and held for its row."""
    node = Node(cmd, prog, engine, model, t_issue, prog.take_wait())
    prog.chip.enter(node, prog)
    return node


def _issue_time(prog: Prog) -> int:
    """The program issues now, or once its PE's issue port is free: that stall is part of
    the op's ``wait_ps``, and the issue port's share in ``shared.parquet``."""
    t = prog.cpe.take_issue(prog.clock)
    if t > prog.clock:
        prog.chip.note_issue_wait = t - prog.clock
        prog.stall_to(t)
    return t


def timed(prog: Prog, cmd: Cmd, model: Callable, engine: Any) -> None:
    """An engine op: wait for room in its queue, issue, go on. (The per-op path: the steps
    of ``_issue_time``, ``_node`` and ``Chip.claim`` written out.)"""
    chip = prog.chip
    queue = engine.queue_of(prog.program)
    if len(queue) >= engine.depth:  # full: first the starts due by now, then wait for one
        chip.catch_up(prog.clock)
        queue = engine.queue_of(prog.program)
        while len(queue) >= engine.depth:  # the kernel waits until the oldest starts
            engine.waiting.append((prog, queue))
            chip.park(prog, "a full engine queue", cmd.src)
            queue = engine.queue_of(prog.program)
    loop = prog.loop
    if loop is not None and loop.stages >= 2 and cmd.op in _PIPELINABLE:
        loop.target(cmd.src, prog.now)  # the load site's history, for its buffer ring
        assert cmd.out is not None, "a load writes a buffer"
        if cmd.out.buf.owner is not None:
            adopt(cast(Any, prog), loop, cmd)
    cpe = prog.cpe
    clock = prog.clock
    t = clock
    if cpe.issue_ps:  # the issue port: one op per issue_ns
        if cpe.issue_free > t:
            t = cpe.issue_free
        cpe.issue_free = t + cpe.issue_ps
        if t > clock:
            chip.note_issue_wait = t - clock
            prog.carried_wait += t - clock
            prog.clock = clock = t
    node = _new(Node)  # (start, busy and end are set when it is decided, read after)
    node.cmd, node.prog, node.pe, node.engine, node.model = cmd, prog, prog.pe, engine, model
    node.t_issue = t
    node.wait, prog.carried_wait = prog.carried_wait, 0
    node.parent = -1
    node.deps = node.stamp = 0
    node.rend = -1
    node.done = False
    node.after = []
    chip.enter(node, prog)  # (a call: a recording with guards wraps it, chip/guard.py)
    board = chip.board
    ready = board.op(node, cmd, prog.program)
    t += cpe.dispatch_ps
    node.ready = ready if ready > t else t
    if board.count > board.limit:
        board.noted(chip.time)
    engine.add(node)
    if not node.deps:
        due = engine.ready(node)
        if due < engine.at:
            chip.due(engine, due)
    prog.now += 1
    if prog.blocking and cmd.op not in _NON_BLOCKING:
        chip.wait_for(prog, [node])
    if cpe.dispatch_ps:
        prog.clock += cpe.dispatch_ps
    if prog.clock >= chip.switch_at:
        chip.maybe_yield(prog)


_new = object.__new__


def mark(prog: Prog, cmd: Cmd, model: Callable, engine: Any) -> None:
    """A scope's entry: a row at the program's clock, nothing to wait for."""
    node = _node(prog, cmd, None, model, prog.clock)
    node.start = prog.clock + prog.cpe.dispatch_ps
    prog.chip.settle(node, node.start)
    prog.clock += prog.cpe.dispatch_ps
    prog.chip.maybe_yield(prog)


def scope_exit(prog: Prog, cmd: Cmd, model: Callable, engine: Any) -> None:
    """The rewind happens at issue; the row is timed when the last earlier op touching the
    rewound range has ended (when Phase 2 invalidates it), and later writers of those bytes
    come after it."""
    lo, hi = cmd.work
    node = _node(prog, cmd, None, model, prog.clock)
    t = prog.chip.board.rewind(node, ("tcm", prog.pe), lo, hi)
    if t > node.ready:
        node.ready = t
    if not node.deps:
        prog.chip.on_ready(node)
    prog.chip.maybe_yield(prog)


def composite(prog: Prog, cmd: Cmd, model: Callable, engine: Any) -> None:
    """A composite GEMM: its tiles' DMA reads and dots are issued at once (past the queues'
    depth, as the PE's scheduler issues them); the parent row starts once ``a`` is visible
    and its first tile has started, and ends with its last tile."""
    chip, cpe = prog.chip, prog.cpe
    t = _issue_time(prog)
    parent = _node(prog, cmd, None, model, t)
    a = chip.board.extents(Cmd(cmd.op, cmd.inputs[:1], None, 0, 0, (), cmd.src), prog.program)
    parent.ready = max(t, chip.board.claim(parent, a, note=False))
    parent.engine = _Parent(parent)
    kids = []
    for dma, dot in children(cmd, prog.pe, prog.hw.stage_bytes):
        for child in (dma, dot):
            eng = cpe.engines[ENGINE[child.op]]  # a DMA read, a dot: queued engines
            node = Node(child, prog, eng, cpe.models[child.op], t, 0)
            node.parent = parent.op_id  # before it is entered: a child (chip/guard.py)
            chip.enter(node, prog)
            chip.claim(node)
            eng.add(node)
            kids.append(node)
            if not node.deps:
                chip.on_ready(node)
    parent.engine.kids = kids
    for node in kids:  # the parent waits for every tile
        if not node.done:
            node.after.append(parent.engine.child_done)
            parent.deps += 1
        else:
            parent.engine.child_done(node, counted=False)
    if not parent.deps:
        chip.on_ready(parent)
    prog.now += 1
    prog.clock += cpe.dispatch_ps
    chip.maybe_yield(prog)


class _Parent:
    """What a composite parent waits for: ``a`` visible, and its tiles decided."""

    __slots__ = ("node", "kids", "first", "last")

    def __init__(self, node: Node) -> None:
        self.node, self.first, self.last = node, -1, 0
        self.kids: list[Node] = []

    def child_done(self, child: Node, counted: bool = True) -> None:
        if child is self.kids[0]:
            self.first = child.start
        if child.end > self.last:
            self.last = child.end
        if counted:
            self.node.deps -= 1
            if not self.node.deps:
                self.node.prog.chip.on_ready(self.node)

    def ready(self) -> None:
        self.settle()

    def settle(self) -> None:
        node = self.node
        if self.first < 0:
            self.first = self.kids[0].start
        node.prog.chip.settle(node, max(node.ready, self.first), self.last)


def wait(prog: Prog, msg: Wait) -> None:
    """``tl.wait``: stall until the buffers' writes and in-flight reads have ended."""
    chip = prog.chip
    nodes: list[Node] = []
    t = 0
    for b in msg.bufs:
        pending, end = chip.board.pending(b, prog.program)
        nodes += pending
        t = max(t, end)
    if nodes:
        chip.wait_for(prog, nodes)
    prog.stall_to(t)
    chip.maybe_yield(prog)


#: the chip's handler of each op that is not a plain engine op
SPECIAL: dict[Any, Callable[..., Any]] = {OP.SCOPE_ENTER: mark, OP.SCOPE_EXIT: scope_exit,
                                          OP.GEMM: composite, OP.GUARD: guard}
