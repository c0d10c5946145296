"""Bump allocator over one PE's kernel scratch, with save-points for scratch scopes."""

from __future__ import annotations

from kernbench.record.handle import Buffer, Scope
from kernbench.record.hints import drop_from, scratch_overflow


class ScratchAllocator:
    """16-byte aligned bump allocation; the cursor only moves back by ``rewind``."""

    __slots__ = ("space", "pe", "budget", "align", "cursor", "peak", "live")

    def __init__(self, space: str, pe: int, budget: int, align: int) -> None:
        self.space, self.pe, self.budget, self.align = space, pe, budget, align
        self.cursor = 0
        self.peak = 0
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
        return buf

    def rewind(self, saved: int) -> None:
        self.cursor = saved
        drop_from(self.live, saved)
