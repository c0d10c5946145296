"""Software pipelining of a loop's loads (Triton's ``num_stages``), in closed form.

``pipelined(iterable, num_stages, src=...)`` wraps a kernel loop's iterator. While it runs,
the PE driver times the loop's loads (the ops that are non-blocking on the DMA read channel)
with ``timed_pipelined`` instead of its plain path: with ``s = num_stages >= 2`` the load of
iteration i at a site (its source line, and its occurrence within the iteration) is issued
at the time the kernel reached the same site in iteration ``i - (s - 1)``, or at the loop's
start in the first ``s - 1`` iterations (Triton's prologue), but never before

- its inputs are ready, its destination buffer is free (``ready_ps``, ``read_until``: the
  bytes' previous occupant was last touched), a scope rewind of the bump allocator;
- an HBM write of this PE inside the loop to bytes it reads has landed.

The DMA channel still serves in program order (``start = max(issue, busy_until)``); the
row's ``t_issue_ps`` is that effective issue time. In lifetime mode each load site keeps a
ring of ``s`` buffers (``allocator.Ring``): iteration i lands where iteration i - s was, so
the s - 1 loads in flight and the one being consumed all count against TCM. ``s == 1``
issues every load at its use (the plain path). ADR-0510 records the choices.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from kernbench.errors import KernelError
from kernbench.record.commands import Cmd
from kernbench.record.machine.allocator import FreeListAllocator, Ring
from kernbench.record.machine.context import current
from kernbench.record.machine.protocol import PE
from kernbench.record.rows.stream import END, LOOP, NEXT
from kernbench.schemas.ops import ATOMICS

__all__ = ["DEFAULT_NUM_STAGES", "Loop", "adopt", "advance", "begin", "finish", "pipelined",
           "timed_pipelined", "timed_hbm_writer"]

#: the pipelining depth of a loop when neither the launch nor ``tl.range`` gives one
#: (Triton's default on NVIDIA GPUs)
DEFAULT_NUM_STAGES = 3


class Loop:
    """One running pipelined loop: where its load sites were reached, its HBM writes."""

    __slots__ = ("stages", "start_ps", "iteration", "seen", "hist", "writes", "rings")

    def __init__(self, stages: int, start_ps: int) -> None:
        self.stages, self.start_ps = stages, start_ps
        self.iteration = -1
        self.seen: dict[str, int] = {}  # occurrences of each site in this iteration
        #: (src, occurrence) -> (iteration, time the kernel reached it), the last s - 1
        self.hist: dict[tuple[str, int], deque[tuple[int, int]]] = {}
        #: HBM byte ranges written (lo, hi, landed) in the last s iterations, per iteration
        self.writes: deque[list[tuple[int, int, int]]] = deque(maxlen=stages)
        self.rings: dict[str, Ring] = {}  # the load sites' buffer rings (lifetime mode)

    def next_iteration(self) -> None:
        self.iteration += 1
        self.seen = {}
        self.writes.append([])

    def peek(self, src: str) -> int:
        """The issue time the pipeline allows the next load from ``src`` in this iteration:
        when the kernel reached that site ``s - 1`` iterations ago (the loop's start in the
        first ``s - 1`` iterations)."""
        h = self.hist.get((src, self.seen.get(src, 0)))
        want = self.iteration - (self.stages - 1)
        t = self.start_ps
        for it, reached in h or ():  # oldest first
            if it > want:
                break
            t = reached
        return t

    def target(self, src: str, now: int) -> int:
        """``peek``, and remember that the kernel reached this site at ``now``."""
        t = self.peek(src)
        k = self.seen.get(src, 0)
        self.seen[src] = k + 1
        h = self.hist.get((src, k))
        if h is None:
            h = self.hist[(src, k)] = deque(maxlen=self.stages - 1)
        h.append((self.iteration, now))
        return t

    def hbm_ready(self, lo: int, hi: int, t: int) -> int:
        """``t``, or later: when this loop's last write to HBM ``[lo, hi)`` landed."""
        for writes in self.writes:
            for wlo, whi, landed in writes:
                if landed > t and wlo < hi and lo < whi:
                    t = landed
        return t


def pipelined(iterable: Iterable[int], num_stages: int | None, *, src: str) -> Iterator[int]:
    """Iterate ``iterable`` as a loop whose loads run up to ``num_stages - 1`` iterations
    ahead of their use (``None``: ``DEFAULT_NUM_STAGES``; ``1``: no pipelining)."""
    stages = DEFAULT_NUM_STAGES if num_stages is None else num_stages
    if type(stages) is not int or stages < 1:
        raise KernelError(f"num_stages must be an int >= 1, got {num_stages!r}", src)
    return _run(iter(iterable), stages, current())


def _run(it: Iterator[int], stages: int, ctx: Any) -> Iterator[int]:
    running: tuple[Loop, Any, int] | None = None
    try:
        for x in it:
            if running is None:
                running = begin(ctx, stages)
            advance(ctx, running)
            yield x
    finally:
        if running is not None:
            finish(ctx, running)


def begin(ctx: Any, stages: int) -> tuple[Loop, Any, int]:
    """A pipelined loop starts (at its first iteration): (the loop, the loop it is inside,
    its number among the program's loops, as the op stream names it)."""
    driver = ctx.driver
    outer = driver.loop
    loop = Loop(stages, driver.now)
    driver.set_loop(loop)
    number = -1
    if ctx.tape is not None:
        number = ctx.tape.loops
        ctx.tape.loops += 1
        ctx.tape.note(LOOP, (number, stages))
    return loop, outer, number


def advance(ctx: Any, running: tuple[Loop, Any, int]) -> None:
    """The loop's next iteration."""
    if ctx.tape is not None:
        ctx.tape.note(NEXT, (running[2],))
    running[0].next_iteration()


def finish(ctx: Any, running: tuple[Loop, Any, int]) -> None:
    """The loop ended (or was left): back to the loop it was inside; its rings' buffers go
    back to the free list."""
    loop, outer, number = running
    if ctx.tape is not None:
        ctx.tape.note(END, (number,))
    driver = ctx.driver
    if driver.loop is loop:
        driver.set_loop(outer)
        arena = driver.scratch
        if loop.rings and type(arena) is FreeListAllocator:
            arena.dissolve(loop.rings)


def adopt(pe: PE, loop: Loop, cmd: Cmd) -> None:
    """First load from a site in lifetime mode: start the site's ring with its buffer."""
    assert cmd.out is not None, "a load writes a buffer"
    buf = cmd.out.buf
    lease = buf.owner
    if lease is None or lease.ring is not None or lease.arena is None or buf.src != cmd.src:
        return
    arena = lease.arena
    ring = loop.rings.get(cmd.src)
    if ring is None:
        ring = loop.rings[cmd.src] = Ring(loop.stages)
        arena.rings[cmd.src] = ring
    lease.ring = ring
    ring.owned += 1


def timed_pipelined(pe: PE, cmd: Cmd, model: Callable, engine: Any) -> None:
    """``PE.timed`` for a load inside a pipelined loop (see the module doc)."""
    loop = pe.loop
    now = pe.now
    t = loop.target(cmd.src, now)
    for h in cmd.inputs:
        b = h.buf
        if b.ready_ps > t:
            t = b.ready_ps
        if b.space == "hbm" and loop.writes:
            t = loop.hbm_ready(b.addr, _hbm_end(b, cmd), t)
    assert cmd.out is not None, "a load writes a buffer"
    ob = cmd.out.buf
    t = max(t, ob.ready_ps, ob.read_until, pe.rewound_ps)
    if ob.owner is not None:
        adopt(pe, loop, cmd)
    wait = pe.take_wait()
    if t > now:  # the load cannot even issue at its use: the kernel stalls, as unpipelined
        wait += t - now
        pe.now = t + pe.dispatch_ps
    else:
        pe.now = now + pe.dispatch_ps
    busy, latency = model(pe, cmd)
    start = t + pe.dispatch_ps
    if engine.busy_until > start:
        start = engine.busy_until
    engine.busy_until = start + busy
    engine.busy_total += busy
    t_end = start + busy + latency
    ob.ready_ps = t_end
    pe.pending.append(ob)
    pe.row(t, start, t_end, busy, wait, cmd)


def timed_hbm_writer(pe: PE, cmd: Cmd, model: Callable, engine: Any) -> None:
    """``PE.timed`` for an op writing HBM inside a pipelined loop: remember the
    bytes and when they land, so a later iteration's load is not hoisted above it."""
    pe.timed(cmd, model, engine)
    out = cmd.out
    landed = pe.now
    if out is not None and out.buf.ready_ps > landed:
        landed = out.buf.ready_ps
    writes = pe.loop.writes[-1]
    for h in (*cmd.inputs, out):  # a store writes its output; an atomic its HBM input too
        if h is not None and h.buf.space == "hbm" and (h is out or cmd.op in ATOMICS):
            writes.append((h.buf.addr, _hbm_end(h.buf, cmd), landed))


def _hbm_end(buf: Any, cmd: Cmd) -> int:
    """The end of the HBM bytes an access may touch: its operand's extent when contiguous;
    to the end of memory when strided or indexed (``attrs`` describe it), to stay safe."""
    return buf.addr + buf.nbytes if cmd.attrs == "{}" else 1 << 62
