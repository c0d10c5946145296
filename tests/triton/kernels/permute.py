"""A permutation by loaded indices: each of two programs scatters its block of ``x`` to the
positions ``idx`` names (disjoint across programs, which only the data shows)."""

from __future__ import annotations

import numpy as np
import triton
import triton.language as tl


@triton.jit
def permute_kernel(x_ptr, idx_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    dst = tl.load(idx_ptr + offs)
    tl.store(out_ptr + dst, tl.load(x_ptr + offs))


def _reference(x_ptr: np.ndarray, idx_ptr: np.ndarray, **_: np.ndarray
               ) -> dict[str, np.ndarray]:
    out = np.zeros_like(x_ptr)
    out[idx_ptr] = x_ptr
    return {"out_ptr": out}


def case(n: int = 64, seed: int = 0):
    from kernbench import triton as kbt

    x = np.arange(n, dtype=np.float32)
    idx = np.random.default_rng(seed).permutation(n).astype(np.int32)
    return kbt.case(permute_kernel, (2,), x, idx, np.zeros_like(x), BLOCK=n // 2,
                    reference=_reference)
