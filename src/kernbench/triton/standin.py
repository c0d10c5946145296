"""kernbench's stand-in ``triton`` module, for machines without the Triton package: the
decorators, ``Config`` and the host helpers kernel modules use (``kbt.install`` maps
``import triton`` here)."""

from __future__ import annotations

from kernbench.triton import language
from kernbench.triton.core import cdiv
from kernbench.triton.jit import (
    Autotuner,
    Config,
    Heuristics,
    JITFunction,
    KernelInterface,
    autotune,
    heuristics,
    jit,
)

__version__ = "0.0.0+kernbench.stand-in"
KERNBENCH_STAND_IN = True


def next_power_of_2(n: int) -> int:
    """The smallest power of two >= ``n`` (1 for n <= 1)."""
    n = int(n)
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


__all__ = ["Autotuner", "Config", "Heuristics", "JITFunction", "KernelInterface", "autotune",
           "cdiv", "heuristics", "jit", "language", "next_power_of_2"]
