"""kernbench's stand-in ``triton.language.extra`` package (holds ``libdevice``)."""

from __future__ import annotations

from kernbench.triton import libdevice

__path__: list[str] = []  # a package, so ``triton.language.extra.libdevice`` imports
__all__ = ["libdevice"]
