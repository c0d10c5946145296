"""kernbench's ``triton.language.extra.libdevice``: the libdevice functions that are ops of
the op table (by libdevice's names); any other is a KernelError naming it."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from kernbench.errors import UnsupportedError as Unsupported
from kernbench.record.source import src_here
from kernbench.triton import arith, data, mathops
from kernbench.triton import dtypes as d
from kernbench.triton.value import Concrete, Symbolic, Value, concrete

_M = mathops.MATH1


def _fp(x: object, src: str, name: str) -> Concrete | Symbolic:
    return mathops.fp32_or_fp64(x, src, f"libdevice.{name}")


def pow(x: object, y: object) -> Concrete | Symbolic:  # noqa: A001 - libdevice's name
    """``x ** y`` (the op table's ``pow``)."""
    src = src_here()
    a, b = _fp(x, src, "pow"), arith.numeric(arith.value_of(y, src), "libdevice.pow", src)
    t, _ = arith.types("add", a, b, src)
    if isinstance(a, Concrete) and isinstance(b, Concrete):
        with np.errstate(all="ignore"):
            return concrete(np.power(arith.values(a, t), arith.values(b, t)), t)
    return data.binary("pow", a, b, t, t, src)


def isnan(x: object) -> Concrete | Symbolic:
    """1 where ``x`` is NaN (``x != x``), int32 as libdevice returns it."""
    x = _fp(x, src_here(), "isnan")
    return arith.cast(arith.binary("ne", x, x), d.int32)


def isinf(x: object) -> Concrete | Symbolic:
    x = _fp(x, src_here(), "isinf")
    return arith.cast(arith.binary("eq", arith.unary("abs", x), float("inf")), d.int32)


def isfinited(x: object) -> Concrete | Symbolic:
    x = _fp(x, src_here(), "isfinited")
    return arith.cast(arith.binary("lt", arith.unary("abs", x), float("inf")), d.int32)


def trunc(x: object) -> Concrete | Symbolic:
    """Rounded toward zero: ceil below zero, floor above."""
    x = _fp(x, src_here(), "trunc")
    return arith.where(arith.binary("lt", x, 0.0), arith.unary("ceil", x), arith.unary("floor", x))
#: libdevice name -> the front end's function
FUNCTIONS: dict[str, Callable[..., Value]] = {
    **_M, "fabs": _M["abs"], "fast_expf": _M["exp"], "fast_logf": _M["log"],
    "exp2f": _M["exp2"], "fast_exp2f": _M["exp2"], "log2f": _M["log2"], "sqrtf": _M["sqrt"],
    "rsqrtf": _M["rsqrt"], "tanhf": _M["tanh"], "erff": _M["erf"], "floorf": _M["floor"],
    "ceilf": _M["ceil"], "fma": mathops.fma, "fmaf": mathops.fma, "fmax": mathops.maximum,
    "fmaxf": mathops.maximum, "fmin": mathops.minimum, "fminf": mathops.minimum,
    "div_rn": mathops.fdiv, "sqrt_rn": _M["sqrt"], "fast_dividef": mathops.fdiv,
    "fdividef": mathops.fdiv, "pow": pow, "powf": pow, "isnan": isnan, "isinf": isinf,
    "isfinited": isfinited, "finitef": isfinited, "trunc": trunc, "truncf": trunc,
    "exp": _M["exp"], "log": _M["log"], "sin": _M["sin"], "cos": _M["cos"],
    # round-to-nearest spellings of plain arithmetic, and the fast variants (approximations
    # on a GPU; the accurate function is within their error)
    "add_rn": lambda x, y: arith.binary("add", x, y),
    "sub_rn": lambda x, y: arith.binary("sub", x, y),
    "mul_rn": lambda x, y: arith.binary("mul", x, y),
    "rcp_rn": lambda x: arith.binary("div", 1.0, x), "fma_rn": mathops.fma,
    "rsqrt_rn": _M["rsqrt"], "fmod": lambda x, y: arith.binary("mod", x, y),
    "fast_powf": pow, "fast_log2f": _M["log2"], "fast_tanhf": _M["tanh"],
    "fast_sinf": _M["sin"], "fast_cosf": _M["cos"],
    "saturatef": lambda x: mathops.clamp(x, 0.0, 1.0),
    "int2float_rn": lambda x: arith.cast(x, d.float32),
    "float2int_rz": lambda x: arith.cast(x, d.int32),
}
globals().update(FUNCTIONS)
__all__ = list(FUNCTIONS)


def __getattr__(name: str) -> object:  # only names the module lacks: always raises
    if name.startswith("__"):
        raise AttributeError(name)
    raise Unsupported(f"libdevice.{name} is not supported by kernbench: no op of kernbench's op "
                      "table computes it (supported: " + ", ".join(sorted(FUNCTIONS)) + ")",
                      src_here())
