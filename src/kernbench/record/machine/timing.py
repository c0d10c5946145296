"""The op -> timing-model registry: ``(busy_ps, latency_ps)`` of a command on its engine."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from kernbench.schemas.ops import OPS, Cost, Op

if TYPE_CHECKING:
    from kernbench.record.commands import Cmd
    from kernbench.record.machine.protocol import PE

TimingModel = Callable[["PE", "Cmd"], tuple[int, int]]


def _dma_read(pe: PE, cmd: Cmd) -> tuple[int, int]:
    return pe.dma_rd.cost(*cmd.work)  # (nbytes,) or (nbytes, burst bytes, runs)


def _dma_write(pe: PE, cmd: Cmd) -> tuple[int, int]:
    return pe.dma_wr.cost(*cmd.work)


def _gemm(pe: PE, cmd: Cmd) -> tuple[int, int]:
    m, n, k = cmd.work
    return pe.gemm.cost(m, n, k)


def _math(pe: PE, cmd: Cmd) -> tuple[int, int]:
    return pe.math.cost(cmd.work[0], pe.math.op_cost)


def _math_transcendental(pe: PE, cmd: Cmd) -> tuple[int, int]:
    return pe.math.cost(cmd.work[0], pe.math.transcendental_cost)


def _softmax(pe: PE, cmd: Cmd) -> tuple[int, int]:
    return pe.math.cost(cmd.work[0], pe.hw.math_softmax_cost)


def _link(pe: PE, cmd: Cmd) -> tuple[int, int]:
    return pe.links["next"].cost(cmd.work[0])  # both directions share one link model


def _free(pe: PE, cmd: Cmd) -> tuple[int, int]:
    return 0, 0


def _branch(pe: PE, cmd: Cmd) -> tuple[int, int]:
    """A guard: ``branch_cycles`` of the kernel's time once its operand is visible."""
    return pe.hw.branch_cycles * pe.hw.cycle_ps, 0


#: cost class (the op table's ``cost``) -> closed-form timing model
COST_MODELS: dict[Cost, TimingModel] = {
    Cost.DMA_READ: _dma_read,
    Cost.DMA_WRITE: _dma_write,
    Cost.GEMM: _gemm,
    Cost.MATH: _math,
    Cost.TRANSCENDENTAL: _math_transcendental,
    Cost.SOFTMAX: _softmax,
    Cost.LINK: _link,
    Cost.FREE: _free,
    Cost.BRANCH: _branch,
}

TIMING: dict[Op, TimingModel] = {op: COST_MODELS[spec.cost] for op, spec in OPS.items()}


def models(pe: PE) -> dict[Op, TimingModel]:
    """``TIMING`` for one PE, its math models with the engine's constants bound: the same
    ``(busy_ps, latency_ps)`` in one call, no lookups, on the per-op path (the PE's table)."""
    math = pe.math
    bound = {Cost.MATH: math.model(math.op_cost),
             Cost.TRANSCENDENTAL: math.model(math.transcendental_cost),
             Cost.SOFTMAX: math.model(pe.hw.math_softmax_cost)}
    return {op: bound.get(spec.cost, TIMING[op]) for op, spec in OPS.items()}

