"""kernbench: a trace-first record/replay pipeline for Triton-style accelerator kernels."""

from __future__ import annotations

__version__ = "0.1.0"

from kernbench import analyze, tl  # noqa: E402
from kernbench.case import (  # noqa: E402
    Case,
    arange,
    build_case,
    data,
    randn,
    register_case,
    registry,
    tensor,
    zeros,
)
from kernbench.errors import (  # noqa: E402
    BadInputError,
    KernbenchError,
    KernelError,
    ReplayError,
    ScratchOverflowError,
    ScratchScopeError,
    TraceFormatError,
)
from kernbench.hw import HwConfig, load_hw  # noqa: E402
from kernbench.record.kernel import kernel  # noqa: E402
from kernbench.record.runner import record  # noqa: E402
from kernbench.replay import ReplayResult, replay  # noqa: E402
from kernbench.trace import Trace  # noqa: E402

__all__ = [
    "__version__", "tl", "analyze", "Case", "tensor", "randn", "zeros", "arange", "data",
    "register_case",
    "registry", "build_case", "KernbenchError", "KernelError", "ScratchOverflowError",
    "ScratchScopeError", "TraceFormatError", "ReplayError", "BadInputError", "HwConfig",
    "load_hw", "kernel", "record", "Trace", "replay", "ReplayResult",
]
