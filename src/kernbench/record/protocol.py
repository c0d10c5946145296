"""What the layers below the PE driver see of it: a small structural protocol.

The timing registry, the kernel context and the front end are written against ``PE``;
``record/pe.py``'s ``PEDriver`` satisfies it. So nothing below the driver imports it
(docs/adr/0004-layered-record.md).
"""

from __future__ import annotations

from typing import Protocol

from kernbench.record.allocator import ScratchAllocator
from kernbench.record.engines import DmaChannel, GemmEngine, LinkEngine, MathEngine
from kernbench.trace.hw import HwConfig


class PE(Protocol):
    index: int
    hw: HwConfig
    #: the PE's own clock (ps); ahead of SimPy's for commands in closed form
    now: int
    scratch: ScratchAllocator
    #: recv_async buffers whose message has not matched yet (shared, mutated in place)
    unresolved: list
    dma_rd: DmaChannel
    dma_wr: DmaChannel
    gemm: GemmEngine
    math: MathEngine
    links: dict[str, LinkEngine]
