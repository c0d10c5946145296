"""A helper library as users keep one: ``@triton.jit`` helpers and a ``tl.constexpr`` in a
module of their own, reached from a kernel as ``norm_lib.name``."""

from __future__ import annotations

import triton
import triton.language as tl

EPS: tl.constexpr = tl.constexpr(1e-6)


@triton.jit
def mean_square(x, n):
    return tl.sum(x * x, axis=0) / n


@triton.jit
def inv_rms(x, n):
    # tl.rsqrt: Triton's interpreter (the differential oracle) returns None for a
    # libdevice call inside a helper reached through a module
    return tl.rsqrt(mean_square(x, n) + EPS)
