"""Kernel-scratch allocators of one PE: the bump allocator with save-points for scratch
scopes (kernbench's own kernels), and the first-fit free list of lifetime mode (Triton)."""

from __future__ import annotations

from bisect import bisect_left
from collections import deque
from collections.abc import Callable
from typing import Any

from kernbench.errors import KernelError, ScratchOverflowError
from kernbench.record.handle import Buffer, Scope
from kernbench.record.hints import _size, drop_from, live_sites, scratch_overflow
from kernbench.record.rows.stream import LIFETIME, LIFETIME_END


class ScratchAllocator:
    """16-byte aligned bump allocation; the cursor only moves back by ``rewind``."""

    __slots__ = ("space", "pe", "budget", "align", "cursor", "peak", "live", "slot_note",
                 "tape")

    def __init__(self, space: str, pe: int, budget: int, align: int) -> None:
        self.space, self.pe, self.budget, self.align = space, pe, budget, align
        self.cursor = 0
        self.peak = 0
        #: the running program's op-stream events (``record/rows/stream.py``), or None
        self.tape: Any = None
        #: what an overflow adds about the resident program's slot (record/machine/resident.py)
        self.slot_note = ""
        self.live: list[Buffer] = []  # the allocations below the cursor (overflow hints)

    def alloc(self, nbytes: int, scope: Scope | None, src: str) -> Buffer:
        addr = self.cursor
        end = addr + ((nbytes + self.align - 1) // self.align) * self.align
        if end > self.budget:
            raise scratch_overflow(self, nbytes, addr, src)
        self.cursor = end
        if end > self.peak:
            self.peak = end
        buf = Buffer(self.space, self.pe, addr, nbytes, scope, src)
        self.live.append(buf)
        if self.tape is not None:
            self.tape.alloc(addr, nbytes, src)
        return buf

    def rewind(self, saved: int) -> None:
        self.cursor = saved
        drop_from(self.live, saved)


class Lease:
    """A lifetime-mode buffer's bookkeeping: who holds it, how many front-end values refer
    to it, and the pipeline ring it belongs to (``Buffer.owner``)."""

    __slots__ = ("arena", "size", "refs", "ring")

    def __init__(self, arena: FreeListAllocator, size: int, ring: Ring | None) -> None:
        self.arena: FreeListAllocator | None = arena
        self.size, self.refs, self.ring = size, 0, ring


class Ring:
    """The buffers of one pipelined load site while its loop runs: up to ``stages`` of them,
    reused oldest-freed first, so the load of iteration i lands where iteration i - stages
    was (each stage's buffer counts against TCM)."""

    __slots__ = ("stages", "owned", "pool", "active")

    def __init__(self, stages: int) -> None:
        self.stages, self.owned, self.active = stages, 0, True
        self.pool: deque[tuple[int, int, int, Buffer]] = deque()  # (addr, size, busy, buf)


class FreeListAllocator:
    """First-fit free list over one PE's kernel scratch (lifetime mode, ADR-0510).

    Blocks are 16-byte aligned; freeing coalesces neighbours. Every free block carries
    ``busy``: the time its bytes' last occupant was last touched (freed, read by an in-flight
    send, written by an in-flight load), which a new buffer there inherits as ``read_until``
    so its first writer waits for it. ``cursor`` is the end of the highest byte in use now
    (live values and pipeline rings), ``peak`` its maximum."""

    __slots__ = ("space", "pe", "budget", "align", "cursor", "peak", "live", "free", "used",
                 "clock", "rings", "loop", "closed", "slot_note", "tape")

    def __init__(self, space: str, pe: int, budget: int, align: int,
                 clock: Callable[[], int]) -> None:
        self.space, self.pe, self.budget, self.align = space, pe, budget, align
        self.clock = clock  # the PE's time now (frees happen at it)
        self.cursor = self.peak = 0
        self.used = 0  # bytes at and above it were never allocated in this program
        self.free: list[list[int]] = []  # [addr, size, busy], address order, coalesced
        self.live: dict[Buffer, None] = {}  # held buffers, allocation order (overflow hints)
        self.rings: dict[str, Ring] = {}  # pipelined load sites of the running loops, by src
        self.loop: Any = None  # the innermost running pipelined loop (record/machine/pipeline.py)
        self.closed = False
        self.slot_note = ""  # what an overflow adds about a resident program's slot
        self.tape: Any = None  # the program's op-stream events, or None

    def alloc(self, nbytes: int, scope: Scope | None, src: str) -> Buffer:
        size = max(self.align, -(-nbytes // self.align) * self.align)
        ring = self.rings.get(src) if self.rings else None
        if ring is not None and ring.owned >= ring.stages and ring.pool:
            addr, got, busy, old = ring.pool.popleft()
            del self.live[old]
            if got < size:  # a larger tile than the ring holds: give its bytes back
                self._release_bytes(addr, got, busy)
                addr, busy = self._take(size, nbytes, src)
                got = size
        else:
            want = None
            if ring is not None and self.loop is not None and src in self.loop.rings:
                want = self.loop.peek(src)  # a pipelined load: bytes free by its issue time
            addr, busy = self._take(size, nbytes, src, want, ring)
            got = size
            if ring is not None:
                ring.owned += 1
        buf = Buffer(self.space, self.pe, addr, nbytes, None, src)
        buf.read_until = busy
        buf.owner = Lease(self, got, ring)
        self.live[buf] = None
        if self.tape is not None:
            self.tape.alloc(addr, nbytes, src)
        return buf

    def _take(self, size: int, nbytes: int, src: str, want: int | None = None,
              ring: Ring | None = None) -> tuple[int, int]:
        """First fit: the lowest free block that holds ``size``, else fresh bytes at the top.
        With ``want`` (a pipelined load's issue time) the lowest block free by then comes
        first, then fresh bytes while the site's ring is still filling."""
        free = self.free
        if want is not None:
            for i, blk in enumerate(free):
                if blk[1] >= size and blk[2] <= want:
                    return self._cut(i, size)
            if ring is not None and ring.owned < ring.stages and self.used + size <= self.budget:
                addr = self.used
                self.used += size
                self._top()
                return addr, 0
        for i, blk in enumerate(free):
            if blk[1] >= size:
                return self._cut(i, size)
        addr, busy = self.used, 0
        if free and free[-1][0] + free[-1][1] == self.used:  # extend the topmost free block
            addr, _, busy = free.pop()
        if addr + size > self.budget:
            raise lifetime_overflow(self, nbytes, addr, src)
        self.used = max(self.used, addr + size)
        self._top()
        return addr, busy

    def _cut(self, i: int, size: int) -> tuple[int, int]:
        """Allocate the low ``size`` bytes of free block ``i``: (addr, busy)."""
        free = self.free
        blk = free[i]
        addr, busy = blk[0], blk[2]
        if blk[1] == size:
            del free[i]
        else:
            blk[0] += size
            blk[1] -= size
        self._top()
        return addr, busy

    def _top(self) -> None:
        """The cursor: the start of the topmost free block if it reaches ``used``."""
        free, top = self.free, self.used
        if free and free[-1][0] + free[-1][1] == top:
            top = free[-1][0]
        self.cursor = top
        if top > self.peak:
            self.peak = top

    def release(self, buf: Buffer) -> None:
        """The last value referring to ``buf`` died: its bytes are free once every in-flight
        op touching them has completed (to its ring while its pipelined loop runs)."""
        lease = buf.owner
        lease.arena = None
        if self.tape is not None:
            self.tape.release(buf.addr)
        busy = max(self.clock(), buf.ready_ps, buf.read_until)
        ring = lease.ring
        if ring is not None and ring.active:
            ring.pool.append((buf.addr, lease.size, busy, buf))
            return
        del self.live[buf]
        self._release_bytes(buf.addr, lease.size, busy)

    def _release_bytes(self, addr: int, size: int, busy: int) -> None:
        free = self.free
        i = bisect_left(free, addr, key=lambda b: b[0])
        if i > 0 and free[i - 1][0] + free[i - 1][1] == addr:  # coalesce with the left block
            left = free[i - 1]
            left[1] += size
            left[2] = max(left[2], busy)
            i -= 1
        else:
            free.insert(i, [addr, size, busy])
        blk = free[i]
        if i + 1 < len(free) and blk[0] + blk[1] == free[i + 1][0]:  # ... and the right one
            right = free.pop(i + 1)
            blk[1] += right[1]
            blk[2] = max(blk[2], right[2])
        self._top()

    def dissolve(self, rings: dict[str, Ring]) -> None:
        """A pipelined loop ended: its rings' spare buffers go back to the free list and its
        live ones are freed as ordinary values."""
        for src, ring in rings.items():
            ring.active = False
            while ring.pool:
                addr, size, busy, old = ring.pool.popleft()
                del self.live[old]
                self._release_bytes(addr, size, busy)
            if self.rings.get(src) is ring:
                del self.rings[src]

    def rewind(self, saved: int) -> None:
        raise KernelError("tl.scratch_scope is not available in lifetime mode (values are "
                          "freed when no handle refers to them)")


def open_lifetime(ctx: Any) -> tuple[FreeListAllocator, ScratchAllocator]:
    """Switch the program ``ctx`` from its bump allocator to a free list over the same bytes
    (lifetime mode: ``record/lowering/lifetime.py``); bytes the bump allocator handed out
    stay reserved below it. (The free list, the bump allocator.)"""
    if ctx.tape is not None:
        ctx.tape.note(LIFETIME)
    driver, bump = ctx.driver, ctx.scratch
    arena = FreeListAllocator(bump.space, bump.pe, bump.budget, bump.align,
                              lambda: driver.now)
    arena.used = arena.cursor = arena.peak = bump.cursor
    arena.slot_note, arena.tape = bump.slot_note, bump.tape
    driver.scratch = ctx.scratch = arena
    return arena, bump


def close_lifetime(ctx: Any, arena: FreeListAllocator, bump: ScratchAllocator) -> None:
    """Back to the bump allocator: later releases are ignored, the free list's peak counts."""
    if ctx.tape is not None:
        ctx.tape.note(LIFETIME_END)
    arena.closed = True
    ctx.driver.scratch = ctx.scratch = bump
    if arena.peak > bump.peak:
        bump.peak = arena.peak


def lifetime_overflow(alloc: FreeListAllocator, nbytes: int, addr: int,
                      src: str) -> ScratchOverflowError:
    """The lifetime-mode overflow: what is live (values and pipeline buffers) by line."""
    sites = live_sites(list(alloc.live))
    shown = "; ".join(f"{s}: {_size(b)} in {n} buffer{'s' if n > 1 else ''}"
                      for s, n, b in sites[:5])
    more = f"; and {len(sites) - 5} more lines" if len(sites) > 5 else ""
    held = sum(b.owner.size for b in alloc.live)
    return ScratchOverflowError(
        f"scratch overflow: requested {nbytes} bytes at {addr} with budget {alloc.budget} "
        f"bytes (allocation at {src}){alloc.slot_note}; {held} bytes held by "
        f"{len(alloc.live)} live allocations: {shown}{more}; hint: smaller BLOCK sizes, "
        "fewer num_stages, or let values die sooner (values stay in scratch while any tensor "
        "refers to them)", src)
