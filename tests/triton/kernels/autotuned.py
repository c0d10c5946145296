"""An autotuned kernel (two configs of different block sizes and warps) as a case factory
whose ``config`` a sweep varies."""

from __future__ import annotations

import numpy as np
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": 256}, num_warps=2),
                          triton.Config({"BLOCK": 64}, num_warps=4)], key=["n"])
@triton.jit
def scale_shift_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 3.0 - 1.0, mask=mask)


def case(n: int = 1000, config: int = 0):
    from kernbench import triton as kbt

    x = np.random.default_rng(3).standard_normal(n, dtype=np.float32)
    return kbt.case(scale_shift_kernel, lambda meta: (triton.cdiv(n, meta["BLOCK"]),), x,
                    np.zeros_like(x), n, config=config,
                    reference=lambda x_ptr, **_: {"out_ptr": x_ptr * np.float32(3) - 1})
