"""RMS norm (as in Liger-Kernel) whose helpers live in another module: the kernel calls
``norm_lib.inv_rms`` and reads ``norm_lib.EPS`` through the module, not imported names."""

from __future__ import annotations

import numpy as np
import triton
import triton.language as tl

from tests.triton.kernels import norm_lib
from tests.triton.kernels.spec import Launch


@triton.jit
def rms_norm_kernel(x_ptr, w_ptr, y_ptr, n_cols, row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    y = x * norm_lib.inv_rms(x, n_cols) * w
    tl.store(y_ptr + row * row_stride + cols, y, mask=mask)


def reference(x_ptr: np.ndarray, w_ptr: np.ndarray, **_: np.ndarray) -> dict[str, np.ndarray]:
    x = x_ptr.astype(np.float64)
    inv = 1 / np.sqrt((x * x).mean(axis=1, keepdims=True) + norm_lib.EPS.value)
    return {"y_ptr": (x * inv * w_ptr).astype(np.float32)}


def launch(rows: int = 6, cols: int = 100, seed: int = 0) -> Launch:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, cols), dtype=np.float32)
    w = rng.standard_normal(cols, dtype=np.float32)
    y = np.zeros_like(x)
    block = 1 << (cols - 1).bit_length()
    return Launch("triton-rms-norm", rms_norm_kernel, (rows,), (x, w, y, cols, cols),
                  {"BLOCK": block}, reference)


def case(rows: int = 6, cols: int = 100, seed: int = 0):
    return launch(rows, cols, seed).case()
