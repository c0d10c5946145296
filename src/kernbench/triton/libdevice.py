"""kernbench's ``triton.language.extra.libdevice``: the libdevice functions that are ops of
the op table (by libdevice's names); any other is a KernelError naming it."""

from __future__ import annotations

from typing import Any

from kernbench.errors import UnsupportedError as Unsupported
from kernbench.record.source import src_here
from kernbench.triton import mathops

_M = mathops.MATH1
#: libdevice name -> the front end's function
FUNCTIONS: dict[str, Any] = {
    **_M, "fabs": _M["abs"], "fast_expf": _M["exp"], "fast_logf": _M["log"],
    "exp2f": _M["exp2"], "fast_exp2f": _M["exp2"], "log2f": _M["log2"], "sqrtf": _M["sqrt"],
    "rsqrtf": _M["rsqrt"], "tanhf": _M["tanh"], "erff": _M["erf"], "floorf": _M["floor"],
    "ceilf": _M["ceil"], "fma": mathops.fma, "fmaf": mathops.fma, "fmax": mathops.maximum,
    "fmaxf": mathops.maximum, "fmin": mathops.minimum, "fminf": mathops.minimum,
    "div_rn": mathops.fdiv, "sqrt_rn": _M["sqrt"],
}
globals().update(FUNCTIONS)
__all__ = list(FUNCTIONS)


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    raise Unsupported(f"libdevice.{name} is not supported by kernbench's Triton front end",
                      src_here())
