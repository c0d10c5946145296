"""Resident programs (docs/hardware-model.md): several programs of the grid share one ``async`` PE.

A PE holds ``k = min(max_programs_per_pe, floor(kernel_scratch / P))`` programs at once
(``k >= 1``), where ``P`` is the kernel-scratch peak of program 0 recorded alone first
(``occupancy``). Each resident program owns a slot of ``kernel_scratch / k`` bytes (aligned
down); program ``p`` runs on PE ``p % n_pe`` and takes the first slot that frees on its PE,
in program order. A slot frees when the last op of the program holding it has ended.

The programs of a PE interleave exactly and deterministically: the scheduler always runs
the program with the earliest clock (ties: the lower program), and a running program hands
over after any op that moves its clock past the next one's (``PE.maybe_yield``), so
every engine of the PE sees its ops in issue-time order. A waiting program counts as a
program whose clock is its slot's free time; programs waiting for room in a full engine
queue count as one, whose clock is when the queue has room (ADR-0636). IPCQ kernels run with
``k = 1`` (ADR-0522).
"""

from __future__ import annotations

import dataclasses
import heapq
import tempfile
from collections import deque
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

import simpy

from kernbench.record.commands import Resolve
from kernbench.record.machine.allocator import ScratchAllocator
from kernbench.record.machine.context import KernelContext, ProgramGreenlet
from kernbench.record.machine.ipcq import RUN, run_resolve
from kernbench.record.machine.protocol import PE
from kernbench.trace.hw import HwConfig

#: what a program hands the driver when another resident program's clock is earlier
YIELD = object()
NEVER = 1 << 62


class UsesIpcq(Exception):  # noqa: N818 - a control-flow signal of the dry run, not an error
    """Program 0's dry run reached an IPCQ request: the kernel communicates (k = 1)."""


class Resident:
    """One resident program: its greenlet, slot and the PE machine state it carries."""

    __slots__ = ("program", "greenlet", "slot", "ctx", "now", "pending", "carried_wait",
                 "loop", "last_end", "started")

    def __init__(self, program: int, slot: int, ctx: KernelContext, g: ProgramGreenlet,
                 now: int) -> None:
        self.program, self.slot, self.ctx, self.greenlet = program, slot, ctx, g
        self.now = self.last_end = now
        self.pending: list = []
        self.carried_wait = 0
        self.loop: Any = None
        self.started = False


def slot_bytes(hw: HwConfig, k: int) -> int:
    """The bytes of one of ``k`` slots of kernel scratch (aligned down)."""
    return hw.kernel_scratch_bytes // k // hw.tcm_align * hw.tcm_align


def programs_per_pe(hw: HwConfig, peak: int | None) -> int:
    """``k`` from program 0's scratch peak (None: the kernel communicates, k = 1)."""
    if peak is None or hw.engine_issue != "async":
        return 1
    fits = hw.kernel_scratch_bytes // peak if peak > 0 else hw.max_programs_per_pe
    return max(1, min(hw.max_programs_per_pe, fits))


def occupancy(hw: HwConfig, n_programs: int,
              run_alone: Callable[[HwConfig, Path], int]) -> int:
    """``k`` for a launch: 1 unless some PE holds 2+ programs under ``async`` issue; else
    from the scratch peak ``run_alone`` measures recording program 0 alone (into a throwaway
    op log) with every slot's budget."""
    if hw.engine_issue != "async" or hw.max_programs_per_pe <= 1 or n_programs <= hw.n_pe:
        return 1
    alone = dataclasses.replace(hw, max_programs_per_pe=1)
    with tempfile.TemporaryDirectory(prefix="kb-occupancy-") as tmp:
        try:
            peak = run_alone(alone, Path(tmp) / "ops.parquet")
        except UsesIpcq:
            return 1
    return programs_per_pe(hw, peak)


def _load(pe: PE, r: Resident) -> None:
    pe.ctx, pe.scratch, pe.now, pe.pending = r.ctx, r.ctx.scratch, r.now, r.pending
    pe.carried_wait, pe.loop, pe.last_end = r.carried_wait, r.loop, r.last_end
    pe.set_loop(r.loop)


def _save(pe: PE, r: Resident) -> None:
    r.now, r.pending, r.carried_wait, r.loop = pe.now, pe.pending, pe.carried_wait, pe.loop
    r.last_end = pe.last_end


class _Full:
    """The programs of a PE waiting for room in one engine's queue (``asynchronous.timed``).

    The queue holds the starts of its queued ops, ascending, minus those popped at some
    program's clock; a program finds room at clock ``t`` once fewer than ``depth`` of them are
    later than ``t``. So every waiting program may go on at the same time, ``until``: the
    ``depth``-th latest start ever queued (it only grows), and the first of them to go on is
    the lowest program. One key stands for them all; re-waking each one as the queue grows
    (programs x ops hand-overs) changes nothing but its clock (ADR-0636)."""

    __slots__ = ("queue", "until", "programs")

    def __init__(self, queue: deque[int]) -> None:
        self.queue = queue
        self.until = 0
        self.programs: list[tuple[int, Resident]] = []  # a heap by program

    def key(self, depth: int) -> tuple[int, int]:
        """(when the first waiting program goes on, which one). While a program waits, no
        start at or after ``until`` is popped before this is asked again (each hand-over asks
        it), so the ``depth``-th latest start still queued is the one ever queued."""
        q = self.queue
        if len(q) >= depth and q[len(q) - depth] > self.until:
            self.until = q[len(q) - depth]
        return self.until, self.programs[0][0]


class _Schedule:
    """The started, unfinished programs of a PE but the running one: a heap of those that
    go on at their clock, and per engine the programs waiting for room in its queue."""

    __slots__ = ("ready", "full", "depth")

    def __init__(self, depth: int) -> None:
        self.ready: list[tuple[int, int, Resident]] = []
        self.full: dict[int, _Full] = {}  # by id of the engine queue
        self.depth = depth

    def put(self, r: Resident, engine_queue: deque[int] | None) -> None:
        """``r`` handed over: at its clock, or waiting for room in ``engine_queue``."""
        if engine_queue is None:
            heapq.heappush(self.ready, (r.now, r.program, r))
            return
        full = self.full.get(id(engine_queue))
        if full is None:
            full = self.full[id(engine_queue)] = _Full(engine_queue)
        if r.now > full.until:
            full.until = r.now
        heapq.heappush(full.programs, (r.program, r))

    def earliest(self) -> tuple[tuple[int, int], _Full | None] | None:
        """(key, where: its group or None for the heap) of the program to run next, by
        (clock, program); None when there is none."""
        best: tuple[tuple[int, int], _Full | None] | None = None
        if self.ready:
            now, program, _ = self.ready[0]
            best = ((now, program), None)
        for full in self.full.values():
            if full.programs:
                key = full.key(self.depth)
                if best is None or key < best[0]:
                    best = (key, full)
        return best

    def take(self, where: _Full | None) -> Resident:
        """Remove the program ``earliest`` named; a waiting one's clock moves to ``until``
        (the wait charged to its next op, as if it had stalled there itself)."""
        if where is None:
            return heapq.heappop(self.ready)[2]
        _, r = heapq.heappop(where.programs)
        if where.until > r.now:
            r.carried_wait += where.until - r.now
            r.now = where.until
        return r


def run(pe: PE, programs: list[int], grid: tuple[int, ...], body: Callable[[], Any],
        k: int) -> Generator[simpy.Event, Any, None]:
    """The SimPy process of an ``async`` PE: its programs, ``k`` at a time."""
    size = slot_bytes(pe.hw, k)
    free_at = [pe.now] * k  # when each slot frees
    free = [(pe.now, s) for s in range(k)]  # the slots nobody holds: a heap by (free_at, slot)
    waiting = list(reversed(programs))
    others = _Schedule(pe.hw.engine_queue_depth)
    live = 0  # programs started and not finished
    peak = 0
    while waiting or live:
        slot = free[0][1] if waiting and free else -1  # the first to free, then the lowest
        nxt = None if slot < 0 else (free_at[slot], waiting[-1])
        best = others.earliest()
        if best is None or (nxt is not None and nxt < best[0]):
            cur = _start(pe, waiting.pop(), slot, free_at[slot], size, k, grid, body)
            heapq.heappop(free)
            live += 1
            nxt = (free[0][0], waiting[-1]) if waiting and free else None
        else:
            cur = others.take(best[1])
        after = others.earliest()
        h = nxt if after is None or (nxt is not None and nxt < after[0]) else after[0]
        pe.switch_at = NEVER if h is None else h[0] + (1 if cur.program < h[1] else 0)
        _load(pe, cur)
        while True:  # a request's handler answers in its buffers: the program resumes with None
            msg = cur.greenlet.switch(None) if cur.started else cur.greenlet.switch()
            cur.started = True
            if cur.greenlet.dead or msg is YIELD:
                break
            if pe.ring is None:  # program 0 alone (occupancy): it communicates
                raise UsesIpcq
            pe.blocked_at = msg
            yield from RUN[type(msg)](msg, pe)
            pe.blocked_at = None
        full, pe.stalled_on = pe.stalled_on, None
        if cur.greenlet.dead:
            if pe.unresolved:  # recv_async handles never consumed
                yield from run_resolve(Resolve(list(pe.unresolved)), pe)
            pe.drain()
            end = max(pe.now, pe.last_end)
            peak = max(peak, cur.ctx.scratch.peak)
            free_at[cur.slot] = end
            heapq.heappush(free, (end, cur.slot))
            live -= 1
        _save(pe, cur)
        if not cur.greenlet.dead:
            others.put(cur, full)
    pe.set_loop(None)
    pe.peak = max(pe.peak, peak)
    pe.now = max(free_at)
    if pe.now > pe.env.now:
        yield pe.env.timeout(pe.now - pe.env.now)
    pe.done = True


def _start(pe: PE, program: int, slot: int, at: int, size: int, k: int,
           grid: tuple[int, ...], body: Callable[[], Any]) -> Resident:
    """Program ``program`` takes ``slot`` at ``at``: its own scratch allocator over the slot."""
    hw = pe.hw
    scratch = ScratchAllocator("tcm", pe.index, slot * size + size, hw.tcm_align)
    scratch.cursor = scratch.peak = slot * size
    scratch.slot_note = (f"; this program holds slot {slot} of {k} on PE {pe.index} "
                         f"(slot size {size} bytes, k = {k} resident programs per PE, "
                         "from program 0's scratch peak)") if k > 1 else ""
    pe.scratch = scratch
    ctx = KernelContext(pe, program, grid)
    ctx.connect(pe.issue, pe.by_op)
    g = ProgramGreenlet(body)
    g.ctx = ctx
    return Resident(program, slot, ctx, g, at)
