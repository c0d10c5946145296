"""The chip's shared parts, built from the hardware config: the HBM stack, each PE's TCM
port, the fabric of links (None where the part is unlimited, so it costs nothing).

TEMPORARY stand-ins until record/machine/shared/ lands (same interface)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from kernbench.trace.hw import HwConfig


class _Server:
    __slots__ = ("num", "den", "free")

    def __init__(self, gbps: float) -> None:
        f = Fraction(1000) / Fraction(str(gbps))
        self.num, self.den = f.numerator, f.denominator
        self.free = 0

    def serve(self, t: int, nbytes: int) -> int:
        start = t if t > self.free else self.free
        self.free = start + -(-nbytes * self.num // self.den)
        return self.free


class _Hbm:
    def __init__(self, hw: HwConfig) -> None:
        self.n, self.block = hw.hbm_channels, hw.hbm_interleave_bytes
        self.ch = [_Server(hw.hbm_total_gbps / hw.hbm_channels) for _ in range(self.n)]

    def transfer(self, t: int, addr: int, nbytes: int) -> tuple[int, int, int]:
        counts = [0] * self.n
        a, end = addr, addr + nbytes
        while a < end:
            b = min(end, (a // self.block + 1) * self.block)
            counts[(a // self.block) % self.n] += b - a
            a = b
        done, which = t, -1
        for c, n in enumerate(counts):
            if n:
                e = self.ch[c].serve(t, n)
                if e > done:
                    done, which = e, c
        return done, done, which


class _Tcm:
    def __init__(self, hw: HwConfig) -> None:
        self.s = _Server(hw.tcm_gbps)

    def move(self, t: int, nbytes: int) -> tuple[int, int]:
        e = self.s.serve(t, nbytes)
        return e, e


class Parts:
    """What the chip's PEs share: ``hbm`` (None: unlimited), ``tcm`` (one port per PE, None:
    unlimited), ``fabric`` (the links; None: neighbour links as ahbm-v2)."""

    def __init__(self, hw: HwConfig, n_pe: int) -> None:
        self.hbm: Any = _Hbm(hw) if hw.hbm_total_gbps > 0 else None
        self.tcm: Any = [_Tcm(hw) for _ in range(n_pe)] if hw.tcm_gbps > 0 else None
        self.fabric: Any = None
