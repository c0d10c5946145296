"""Triton kernels on kernbench (docs/triton.md): ``kbt.case``, ``kbt.capture``, ``kbt.install``.

A ``@triton.jit`` kernel's Python body runs against kernbench's own ``triton.language``
(``kernbench.triton.language``); Triton's compiler and interpreter never run. Importing this
package installs the stand-in ``triton`` modules when no Triton package is importable.
Names are imported lazily (``kbt.case`` loads the recorder on first use).
"""

from __future__ import annotations

import importlib
from typing import Any

from kernbench.case.triton_hook import install, real_triton_available, uninstall

_LAZY = {"case": "kernbench.triton.launch", "capture": "kernbench.triton.capture",
         "Capture": "kernbench.triton.capture", "language": "kernbench.triton.language"}

__all__ = ["case", "capture", "Capture", "install", "uninstall", "real_triton_available",
           "language"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    mod = importlib.import_module(module)
    # importing ``kernbench.triton.capture`` made ``capture`` the submodule: every lazy name
    # of the module is bound now, so ``kbt.Capture`` first leaves ``kbt.capture`` the function
    for lazy, of in _LAZY.items():
        if of == module:
            globals()[lazy] = mod if lazy == "language" else getattr(mod, lazy)
    return globals()[name]


install()
