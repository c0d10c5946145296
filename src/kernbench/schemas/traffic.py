"""Which bytes of an op cross a PE's TCM port (``tcm_gbps``, docs/hardware-model.md): the
one rule the machine prices and the analyses (the TCM roofline) sum.

An op moves through TCM every byte of its operands that live there: the kernel-scratch
(``tcm``) and staging (``stage``) areas are both TCM. A DMA read writes its tile into TCM and
reads its index and mask operands there; a store reads its tile; a GEMM reads its operands
and writes its result; a MATH op reads its inputs and writes its output; a send reads its
source. HBM operands and message slots (``ipcq``) are not TCM.
"""

from __future__ import annotations

from collections.abc import Iterable

#: the operand spaces that are TCM
TCM_SPACES = frozenset({"tcm", "stage"})


def tcm_bytes(operands: Iterable[tuple[str, int]]) -> int:
    """The TCM bytes of an op whose operands (inputs and output) are ``(space, nbytes)``."""
    return sum(nbytes for space, nbytes in operands if space in TCM_SPACES)
