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


class _Fabric:
    def __init__(self, hw: HwConfig, n: int) -> None:
        from kernbench.trace.topology import link_name, links, route
        self.hw, self.n, self.route, self.name = hw, n, route, link_name
        self.links = {link: _Server(hw.link_gbps) for link in links(hw.topology, n)}
        self.lat = hw.link_latency_ns * 1000

    def carry(self, src: int, dst: int, t: int, nbytes: int, direct: bool = False
              ) -> tuple[int, int, int, list[tuple[str, str, int]]]:
        path = ((src, dst),) if direct else self.route(self.hw.topology, self.n, src, dst)
        first = None
        end, worst = t, None
        for link in path:
            s = self.links[link]
            start = max(t, s.free)
            if first is None:
                first = start
            e = s.serve(t, nbytes)
            if e > end:
                end, worst = e, link
        first = t if first is None else first
        cost = -(-nbytes * self.links[path[0]].num // self.links[path[0]].den) if path else 0
        arrival = end + len(path) * self.lat
        ideal = t + cost + len(path) * self.lat
        rows = [] if arrival <= ideal or worst is None else [
            ("link", f"link.{self.name(worst, self.n)}", arrival - ideal)]
        return first, end - first, arrival, rows


class Parts:
    """What the chip's PEs share: ``hbm`` (None: unlimited), ``tcm`` (one port per PE, None:
    unlimited), ``fabric`` (the links; None: neighbour links as ahbm-v2)."""

    def __init__(self, hw: HwConfig, n_pe: int, span: int) -> None:
        self.hbm: Any = _Hbm(hw) if hw.hbm_total_gbps > 0 else None
        self.tcm: Any = [_Tcm(hw) for _ in range(n_pe)] if hw.tcm_gbps > 0 else None
        self.fabric: Any = _Fabric(hw, span)

    def carry(self, src: int, dst: int, t: int, nbytes: int, direct: bool = False
              ) -> tuple[int, int, int, list[tuple[str, str, int]]]:
        """(start, busy, arrival, shared rows) of a message from ``src`` to ``dst`` whose
        source is visible at ``t`` (``direct``: over the link between them)."""
        return self.fabric.carry(src, dst, t, nbytes, direct)
