"""kernbench: a trace-first record/replay pipeline for Triton-style accelerator kernels.

Imports are lazy (module ``__getattr__``): ``import kernbench`` loads nothing but this file,
so ``kernbench --help`` and the replay child start fast, and the replay child never loads
the recorder (docs/adr/0006-lazy-package-imports.md). ``kb.X`` imports X's module on first
use.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what ``kb.X`` is, for type checkers and IDEs (never imported at run time)
    from kernbench import analyze, tl
    from kernbench.case import Case, arange, data, randn, register_case, tensor, zeros
    from kernbench.errors import (
        BadInputError,
        KernbenchError,
        KernelError,
        ReplayError,
        RetimeError,
        ScratchOverflowError,
        ScratchScopeError,
        TraceFormatError,
    )
    from kernbench.kernels.recording import record
    from kernbench.kernels.registry import build_case, registry
    from kernbench.record.kernel import kernel
    from kernbench.record.retime import retime
    from kernbench.replay import ReplayResult, replay
    from kernbench.replay.pool import ReplayPool
    from kernbench.trace.directory import Trace
    from kernbench.trace.hw import HwConfig, load_hw
    from kernbench.workload import Workload

__version__ = "0.1.0"

#: public name -> the module defining it
_LAZY: dict[str, str] = {
    **dict.fromkeys(["Case", "arange", "data", "randn", "register_case", "tensor", "zeros"],
                    "kernbench.case"),
    **dict.fromkeys(["build_case", "registry"], "kernbench.kernels.registry"),
    **dict.fromkeys(["BadInputError", "KernbenchError", "KernelError", "ReplayError",
                     "RetimeError", "ScratchOverflowError", "ScratchScopeError",
                     "TraceFormatError"],
                    "kernbench.errors"),
    "HwConfig": "kernbench.trace.hw",
    "load_hw": "kernbench.trace.hw",
    "kernel": "kernbench.record.kernel",
    "record": "kernbench.kernels.recording",
    "retime": "kernbench.record.retime",
    "replay": "kernbench.replay",
    "ReplayResult": "kernbench.replay",
    "ReplayPool": "kernbench.replay.pool",
    "Trace": "kernbench.trace.directory",
    "Workload": "kernbench.workload",
}
#: public submodule names -> the module (``kb.references``: the old path of the built-in
#: references, kept for the kernels and users that import it from here)
_SUBMODULES: dict[str, str] = {"tl": "kernbench.tl", "analyze": "kernbench.analyze",
                               "references": "kernbench.case.references"}

__all__ = [
    "__version__", "tl", "analyze", "Case", "tensor", "randn", "zeros", "arange", "data",
    "register_case",
    "registry", "build_case", "KernbenchError", "KernelError", "ScratchOverflowError",
    "ScratchScopeError", "TraceFormatError", "ReplayError", "RetimeError", "BadInputError",
    "HwConfig", "load_hw", "kernel", "record", "retime", "Trace", "replay", "ReplayResult",
    "ReplayPool", "Workload",
]


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(_SUBMODULES[name])
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


class _Package(types.ModuleType):
    """``kb.record`` and ``kb.replay`` are functions, although ``kernbench.record`` and
    ``kernbench.replay`` are also subpackages: the import system's binding of a loaded
    subpackage onto this module is ignored for those two names."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in ("record", "replay") and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
