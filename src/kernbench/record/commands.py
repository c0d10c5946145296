"""The command a tl call builds and the PE driver executes."""

from __future__ import annotations

from dataclasses import dataclass

from kernbench.record.handle import TensorHandle
from kernbench.schemas.ops import Op


@dataclass(frozen=True, slots=True)
class Cmd:
    """One op as issued by a kernel.

    ``work`` is what the engine's closed-form cost reads: ``(elements,)`` for MATH,
    ``(M, N, K)`` for GEMM, ``(nbytes,)`` for DMA and links, ``()`` for scope rows.
    ``out`` is the written operand: a TCM handle, or for a DMA write an HBM operand.
    """

    op: Op
    inputs: tuple[TensorHandle, ...]
    out: TensorHandle | None
    num_elements: int
    nbytes: int
    work: tuple[int, ...]
    src: str
    flops: int = 0
    attrs: str = "{}"
