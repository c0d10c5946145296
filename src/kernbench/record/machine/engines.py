"""Engine models: one small class per engine, closed-form timing in integer picoseconds.

An engine has capacity 1 and serves in issue order: ``start = max(ready, busy_until)``.
Engines report nothing themselves; the PE driver hands their times to the recorder.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

from kernbench.trace.hw import HwConfig


def _ps_per_byte(gbps: float) -> tuple[int, int]:
    """(num, den) with ps/byte = num/den exactly (GB/s == bytes per ns)."""
    f = Fraction(1000) / Fraction(str(gbps))
    return f.numerator, f.denominator


class EngineModel:
    """Capacity-1 server in closed form."""

    __slots__ = ("busy_until", "busy_total")

    def __init__(self) -> None:
        self.busy_until = 0
        self.busy_total = 0

    def occupy(self, ready: int, busy: int) -> int:
        start = ready if ready > self.busy_until else self.busy_until
        self.busy_until = start + busy
        self.busy_total += busy
        return start


class DmaChannel(EngineModel):
    """One HBM DMA channel (read or write): bandwidth serialises, latency pipelines.

    A transfer is a set of contiguous runs. One run costs ``ceil(nbytes / hbm_bw)``; k > 1
    runs cost ``ceil(burst_bytes / hbm_bw) + (k - 1) * run_overhead``, where
    ``burst_bytes = sum(ceil(run_bytes / dma_burst_bytes)) * dma_burst_bytes``."""

    __slots__ = ("num", "den", "latency_ps", "run_overhead_ps")

    def __init__(self, hw: HwConfig) -> None:
        super().__init__()
        self.num, self.den = _ps_per_byte(hw.hbm_gbps)
        self.latency_ps = hw.dma_latency_ns * 1000
        self.run_overhead_ps = round(hw.dma_run_overhead_ns * 1000)

    def cost(self, nbytes: int, burst_bytes: int = 0, runs: int = 1) -> tuple[int, int]:
        if runs <= 1:
            return -(-nbytes * self.num // self.den), self.latency_ps
        return (-(-burst_bytes * self.num // self.den) + (runs - 1) * self.run_overhead_ps,
                self.latency_ps)


class GemmEngine(EngineModel):
    """Systolic GEMM: ``ceil(M/R) * ceil(N/C) * K + overhead`` cycles."""

    __slots__ = ("rows", "cols", "overhead", "cycle_ps")

    def __init__(self, hw: HwConfig) -> None:
        super().__init__()
        self.rows, self.cols = hw.gemm_rows, hw.gemm_cols
        self.overhead, self.cycle_ps = hw.gemm_overhead_cycles, hw.cycle_ps

    def cost(self, m: int, n: int, k: int) -> tuple[int, int]:
        cycles = -(-m // self.rows) * -(-n // self.cols) * k + self.overhead
        return cycles * self.cycle_ps, 0


class MathEngine(EngineModel):
    """Vector unit: ``ceil(elements / lanes) * op_cost + overhead`` cycles."""

    __slots__ = ("lanes", "overhead", "cycle_ps", "op_cost", "transcendental_cost")

    def __init__(self, hw: HwConfig) -> None:
        super().__init__()
        self.lanes, self.overhead, self.cycle_ps = (hw.math_lanes, hw.math_overhead_cycles,
                                                    hw.cycle_ps)
        self.op_cost, self.transcendental_cost = hw.math_op_cost, hw.math_transcendental_cost

    def cost(self, elements: int, op_cost: int) -> tuple[int, int]:
        return (-(-elements // self.lanes) * op_cost + self.overhead) * self.cycle_ps, 0

    def model(self, op_cost: int) -> Callable[[Any, Any], tuple[int, int]]:
        """``cost`` of one op cost as a timing model ``(pe, cmd)`` with this unit's
        constants bound: one call, no look-ups, on the per-op path (``timing.models``)."""
        lanes, overhead, cycle_ps = self.lanes, self.overhead, self.cycle_ps

        def timed(pe: Any, cmd: Any) -> tuple[int, int]:
            return (-(-cmd.work[0] // lanes) * op_cost + overhead) * cycle_ps, 0

        return timed


class LinkEngine(EngineModel):
    """One direction of an IPCQ ring link: bandwidth serialises, latency pipelines."""

    __slots__ = ("num", "den", "latency_ps")

    def __init__(self, hw: HwConfig) -> None:
        super().__init__()
        self.num, self.den = _ps_per_byte(hw.link_gbps)
        self.latency_ps = hw.link_latency_ns * 1000

    def cost(self, nbytes: int) -> tuple[int, int]:
        return -(-nbytes * self.num // self.den), self.latency_ps


class NoEngine(EngineModel):
    """Bookkeeping rows (scopes, composite parents): no engine time."""

    __slots__ = ()

    def occupy(self, ready: int, busy: int) -> int:
        return ready
