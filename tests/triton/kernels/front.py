"""Kernels of the front-end features of issue 29, each a ``Launch`` (recorded by kernbench,
run under Triton's interpreter by ``test_front_end_language``): kernel parameters named like
launch options, heuristics that set ``num_warps``, 0-d arrays."""

from __future__ import annotations

import numpy as np
import triton
import triton.language as tl

from tests.triton.kernels.spec import Launch


@triton.jit
def warps_param_kernel(x_ptr, out_ptr, n, num_warps: tl.constexpr, num_stages,
                       BLOCK: tl.constexpr):
    """sparsemax-style: ``num_warps`` and ``num_stages`` are the kernel's own parameters."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(out_ptr + offs, x * num_warps + num_stages, mask=m)


def warps_param_launch(n: int = 100, block: int = 64) -> Launch:
    x = np.arange(n, dtype=np.float32)
    return Launch("warps-param", warps_param_kernel, (triton.cdiv(n, block),),
                  (x, np.zeros(n, np.float32), n), {"num_warps": 8, "num_stages": 3,
                                                    "BLOCK": block},
                  lambda x_ptr, **_: {"out_ptr": x_ptr * 8 + 3})


@triton.heuristics({"BLOCK": lambda args: triton.next_power_of_2(args["n"]),
                    "num_warps": lambda args: 8 if args["n"] > 64 else 2})
@triton.jit
def heuristic_warps_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + 1.0, mask=m)


@triton.jit
def zero_d_kernel(x_ptr, scale_ptr, total_ptr, n, BLOCK: tl.constexpr):
    """A 0-d input (a scale) and a 0-d output (a total)."""
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(total_ptr, tl.sum(x * tl.load(scale_ptr)))


def zero_d_launch(n: int = 50) -> Launch:
    x = np.linspace(0.25, 1, n, dtype=np.float32)
    scale, total = np.array(0.5, np.float32), np.array(0.0, np.float32)
    return Launch("zero-d", zero_d_kernel, (1,), (x, scale, total, n), {"BLOCK": 64},
                  lambda x_ptr, scale_ptr, **_: {"total_ptr": np.sum(x_ptr * scale_ptr)})


@triton.jit
def logic_kernel(x_ptr, out_ptr, n, FLAG: tl.constexpr, BLOCK: tl.constexpr):
    """``and`` / ``or`` / ``not`` on constexprs, on concrete scalars and masks (index values)
    and on boolean data; ``tensor.cast``; dtype predicates in a constexpr branch."""
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    inside = (offs < n) and (offs >= 0)
    x = tl.load(x_ptr + offs, mask=inside, other=0.0)
    band = (x > -0.5) and not (x > 0.5) or (x < -1.5)
    y = band.cast(tl.float32)
    if FLAG and not pid > 0 and x.dtype.is_fp32() and not x.dtype.is_int64():
        y = y + x.dtype.primitive_bitwidth
    tl.store(out_ptr + offs, y, mask=inside)


def logic_launch(n: int = 100, block: int = 64) -> Launch:
    x = np.linspace(-2, 2, n, dtype=np.float32)

    def reference(x_ptr: np.ndarray, **_: np.ndarray) -> dict[str, np.ndarray]:
        band = ((x_ptr > -0.5) & ~(x_ptr > 0.5)) | (x_ptr < -1.5)
        y = band.astype(np.float32)
        y[:block] += 32
        return {"out_ptr": y}

    return Launch("logic", logic_kernel, (triton.cdiv(n, block),), (x, np.zeros(n, np.float32), n),
                  {"FLAG": True, "BLOCK": block}, reference)
