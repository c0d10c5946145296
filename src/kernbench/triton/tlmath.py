"""kernbench's ``triton.language.math``."""

from __future__ import annotations

from kernbench.errors import UnsupportedError as Unsupported
from kernbench.record.source import src_here
from kernbench.triton import mathops

globals().update(mathops.MATH1)
fma, fdiv, div_rn, maximum, minimum = (mathops.fma, mathops.fdiv, mathops.div_rn,
                                       mathops.maximum, mathops.minimum)
sqrt_rn = mathops.MATH1["sqrt"]
__all__ = [*mathops.MATH1, "fma", "fdiv", "div_rn", "sqrt_rn", "maximum", "minimum"]


def __getattr__(name: str) -> object:  # only names the module lacks: always raises
    if name.startswith("__"):
        raise AttributeError(name)
    raise Unsupported(f"tl.math.{name} is not supported by kernbench: no op of its op table "
                      "computes it",
                      src_here())
