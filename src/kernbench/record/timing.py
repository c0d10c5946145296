"""The op -> timing-model registry: ``(busy_ps, latency_ps)`` of a command on its engine."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from kernbench.schemas import ops
from kernbench.schemas.ops import Op

if TYPE_CHECKING:
    from kernbench.record.commands import Cmd
    from kernbench.record.pe import PEDriver

TimingModel = Callable[["PEDriver", "Cmd"], tuple[int, int]]


def _dma_read(pe: PEDriver, cmd: Cmd) -> tuple[int, int]:
    return pe.dma_rd.cost(cmd.work[0])


def _dma_write(pe: PEDriver, cmd: Cmd) -> tuple[int, int]:
    return pe.dma_wr.cost(cmd.work[0])


def _gemm(pe: PEDriver, cmd: Cmd) -> tuple[int, int]:
    m, n, k = cmd.work
    return pe.gemm.cost(m, n, k)


def _math(pe: PEDriver, cmd: Cmd) -> tuple[int, int]:
    return pe.math.cost(cmd.work[0], pe.math.op_cost)


def _math_transcendental(pe: PEDriver, cmd: Cmd) -> tuple[int, int]:
    return pe.math.cost(cmd.work[0], pe.math.transcendental_cost)


def _softmax(pe: PEDriver, cmd: Cmd) -> tuple[int, int]:
    return pe.math.cost(cmd.work[0], pe.hw.math_softmax_cost)


def _link(pe: PEDriver, cmd: Cmd) -> tuple[int, int]:
    return pe.links["next"].cost(cmd.work[0])  # both directions share one link model


def _free(pe: PEDriver, cmd: Cmd) -> tuple[int, int]:
    return 0, 0


TIMING: dict[Op, TimingModel] = {
    Op.DMA_READ: _dma_read,
    Op.DMA_WRITE: _dma_write,
    Op.DOT: _gemm,
    **{op: _math for op in ops.MATH - ops.TRANSCENDENTAL - {Op.SOFTMAX}},
    **{op: _math_transcendental for op in ops.TRANSCENDENTAL},
    Op.SOFTMAX: _softmax,
    Op.SEND: _link,
    Op.RECV: _free,
    Op.SCOPE_ENTER: _free,
    Op.SCOPE_EXIT: _free,
    Op.GEMM: _free,
}
