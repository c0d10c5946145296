"""The command a tl call builds and the PE driver executes."""

from __future__ import annotations

from typing import NamedTuple

from kernbench.record.handle import TensorHandle
from kernbench.schemas.ops import Op


class Cmd(NamedTuple):
    """One op as issued by a kernel (immutable; a NamedTuple because it is built on the
    per-op path, where it is four times cheaper than a frozen dataclass).

    ``work`` is what the engine's closed-form cost reads: ``(elements,)`` for MATH,
    ``(M, N, K)`` for GEMM, ``(nbytes,)`` for DMA and links, ``(lo, hi)`` for a scope exit.
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
