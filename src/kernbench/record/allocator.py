"""Bump allocator over one PE's kernel scratch, with save-points for scratch scopes."""

from __future__ import annotations

from kernbench.errors import ScratchOverflowError
from kernbench.record.handle import Buffer, Scope


class ScratchAllocator:
    """16-byte aligned bump allocation; the cursor only moves back by ``rewind``."""

    __slots__ = ("space", "pe", "budget", "align", "cursor", "peak")

    def __init__(self, space: str, pe: int, budget: int, align: int) -> None:
        self.space, self.pe, self.budget, self.align = space, pe, budget, align
        self.cursor = 0
        self.peak = 0

    def alloc(self, nbytes: int, scope: Scope | None, src: str) -> Buffer:
        addr = self.cursor
        end = addr + ((nbytes + self.align - 1) // self.align) * self.align
        if end > self.budget:
            raise ScratchOverflowError(
                f"scratch overflow: requested {nbytes} bytes at cursor {addr} "
                f"with budget {self.budget} bytes (allocation at {src})", src)
        self.cursor = end
        if end > self.peak:
            self.peak = end
        return Buffer(self.space, self.pe, addr, nbytes, scope, src)

    def rewind(self, saved: int) -> None:
        self.cursor = saved
