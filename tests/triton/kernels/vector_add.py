"""Vector add with a ragged tail: the last program's block runs past ``n`` and is masked."""

from __future__ import annotations

import numpy as np
import triton
import triton.language as tl

from tests.triton.kernels.spec import Launch


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def reference(x_ptr: np.ndarray, y_ptr: np.ndarray, **_: np.ndarray) -> dict[str, np.ndarray]:
    return {"out_ptr": x_ptr + y_ptr}


def launch(n: int = 1000, block: int = 256, seed: int = 0) -> Launch:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n, dtype=np.float32)
    y = rng.standard_normal(n, dtype=np.float32)
    out = np.zeros(n, np.float32)
    return Launch("triton-vector-add", add_kernel,
                  lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),),
                  (x, y, out, n), {"BLOCK_SIZE": block}, reference)


def case(n: int = 1000, block: int = 256, seed: int = 0):
    return launch(n, block, seed).case()
