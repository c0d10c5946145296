"""The ``async`` engine-issue policy of the PE machine (docs/hardware-model.md): op handlers.

Every engine op is queued on its engine and the kernel goes on at once: it stalls only when
the engine's queue already holds ``engine_queue_depth`` issued-but-not-started ops (until the
oldest starts; that stall is the op's ``wait_ps``), on an explicit ``tl.wait`` and in IPCQ
requests. The op starts when the scoreboard (``record/machine/scoreboard.py``) and its engine allow.
After every op the PE hands over to another resident program if that one's clock is now
earlier (``PE.maybe_yield``), so each engine sees its ops in issue-time order.

The blocking policy (``ahbm-v1``) stays in ``record/machine/pe.py``, untouched.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kernbench.record.commands import Cmd
from kernbench.record.machine.composite import children
from kernbench.record.machine.protocol import PE
from kernbench.record.machine.scoreboard import accesses
from kernbench.record.machine.timing import TIMING
from kernbench.schemas.ops import OP


def schedule(pe: PE, cmd: Cmd, model: Callable, engine: Any, t_issue: int,
             queue: Any = None) -> tuple[int, int, int]:
    """Time one op issued at ``t_issue`` through the scoreboard and its engine: (start, busy,
    end). ``queue``: the engine's queue, where a start after the issue is queued."""
    busy, latency = model(pe, cmd)
    start = t_issue + pe.dispatch_ps
    if engine.busy_until > start:
        start = engine.busy_until
    start = pe.board.issue(pe.ctx.program, cmd, start, busy + latency)
    engine.busy_until = start + busy
    engine.busy_total += busy
    t_end = start + busy + latency
    if start > t_issue and queue is not None:
        queue.append(start)
    out = cmd.out
    if out is not None and out.buf.ready_ps < t_end:  # what tl.wait and lifetime frees see
        out.buf.ready_ps = t_end
    for h in cmd.inputs:
        if h.buf.read_until < t_end:
            h.buf.read_until = t_end
    if t_end > pe.last_end:
        pe.last_end = t_end
    return start, busy, t_end


def timed(pe: PE, cmd: Cmd, model: Callable, engine: Any) -> None:
    """An engine op (or a load) under ``async``: queue it, go on."""
    queue = pe.queues.get(engine)
    now = pe.now
    if queue is not None:  # room in the engine's queue
        while queue and queue[0] <= now:
            queue.popleft()
        depth = pe.queue_depth
        while len(queue) >= depth:  # full: the kernel stalls until a slot frees
            until = queue[len(queue) - depth]
            if until > now:
                pe.carried_wait += until - now
                pe.now = now = until
            if now >= pe.switch_at:  # hand over as a program waiting for room in the
                pe.stalled_on = queue  # queue: the scheduler moves its clock as it grows
                pe.maybe_yield()
                now = pe.now
            while queue and queue[0] <= now:
                queue.popleft()
    wait = pe.carried_wait
    pe.carried_wait = 0
    loop = pe.loop
    if loop is not None and loop.stages >= 2 and cmd.op in pe.pipelinable:
        loop.target(cmd.src, now)  # the load site's history, for its buffer ring
        if cmd.out.buf.owner is not None:  # type: ignore[union-attr]
            pe.adopt(cmd)
    start, busy, t_end = schedule(pe, cmd, model, engine, now, queue)
    pe.row(now, start, t_end, busy, wait, cmd)
    pe.now = now = now + pe.dispatch_ps
    if now >= pe.switch_at:
        pe.maybe_yield()


def scope_exit(pe: PE, cmd: Cmd, model: Callable, engine: Any) -> None:
    """The rewind happens at issue; the row is timed when the last earlier op touching the
    rewound range has ended (when Phase 2 invalidates it), and later writers of those bytes
    come after it."""
    lo, hi = cmd.work
    now = pe.now
    t = pe.board.rewound(lo, hi, now)
    wait = pe.carried_wait
    pe.carried_wait = 0
    pe.row(now, t, t, 0, wait, cmd)
    if now >= pe.switch_at:
        pe.maybe_yield()


def mark(pe: PE, cmd: Cmd, model: Callable, engine: Any) -> None:
    """An op without operands on an engine without a queue (a scope's entry) under
    ``async``: ``timed`` and ``schedule`` without the steps that have nothing to do (no queue
    to wait for, no access to claim or note)."""
    now = pe.now
    wait = pe.carried_wait
    pe.carried_wait = 0
    start = now + pe.dispatch_ps
    busy, latency = model(pe, cmd)
    if engine.busy_until > start:
        start = engine.busy_until
    engine.busy_until = start + busy
    engine.busy_total += busy
    t_end = start + busy + latency
    if t_end > pe.last_end:
        pe.last_end = t_end
    pe.row(now, start, t_end, busy, wait, cmd)
    now += pe.dispatch_ps
    pe.now = now
    if now >= pe.switch_at:
        pe.maybe_yield()


def composite(pe: PE, cmd: Cmd, model: Callable, engine: Any) -> None:
    """A composite GEMM under ``async``: its tiles' DMA reads and dots are issued at once; the
    scoreboard orders them (a staging slot is rewritten after the dot that read it)."""
    t_issue = pe.now
    wait = pe.take_wait()
    reads, _ = accesses(cmd)  # the parent starts once ``a`` is visible (Phase 2 reads it)
    a_ready = pe.board.ready(pe.ctx.program, reads[:1], [])
    timed = []
    for dma, dot in children(cmd, pe.index, pe.hw.stage_bytes):
        for child, eng in ((dma, pe.dma_rd), (dot, pe.gemm)):
            timed.append((child, *schedule(pe, child, TIMING[child.op], eng, t_issue,
                                            pe.queues.get(eng))))
    t_end = max(row[3] for row in timed)
    cmd.out.buf.ready_ps = max(cmd.out.buf.ready_ps, t_end)  # type: ignore[union-attr]
    parent = pe.record(cmd, t_issue, max(timed[0][1], a_ready, t_issue), t_end, 0, wait)
    for child, start, busy, end in timed:
        pe.record(child, t_issue, start, end, busy, 0, parent)
    pe.now = t_issue + pe.dispatch_ps
    pe.maybe_yield()


def wait(pe: PE, bufs: list) -> None:
    """``tl.wait`` under ``async``: stall until the buffers' in-flight ops have ended."""
    for b in bufs:
        pe.stall(max(b.ready_ps, b.read_until))
    pe.maybe_yield()


#: the async handler of the ops that are not plain engine ops
SPECIAL = {OP.SCOPE_ENTER: mark, OP.SCOPE_EXIT: scope_exit, OP.GEMM: composite}
