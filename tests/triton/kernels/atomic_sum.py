"""Atomic-add reduction across programs: each program sums a block of rows and adds its
column sums (a vector atomic, masked columns) and its total (a scalar atomic) into outputs
that already hold values."""

from __future__ import annotations

import numpy as np
import triton
import triton.language as tl

from tests.triton.kernels.spec import Launch


@triton.jit
def colsum_kernel(x_ptr, colsum_ptr, total_ptr, n_rows, n_cols, stride,
                  BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.arange(0, BLOCK_C)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    x = tl.load(x_ptr + rows[:, None] * stride + cols[None, :], mask=mask, other=0.0)
    tl.atomic_add(colsum_ptr + cols, tl.sum(x, axis=0), mask=cols < n_cols)
    tl.atomic_add(total_ptr, tl.sum(x))


def reference(x_ptr: np.ndarray, colsum_ptr: np.ndarray, total_ptr: np.ndarray,
              **_: np.ndarray) -> dict[str, np.ndarray]:
    x = x_ptr.astype(np.float64)
    return {"colsum_ptr": (colsum_ptr + x.sum(axis=0)).astype(np.float32),
            "total_ptr": (total_ptr + x.sum()).astype(np.float32)}


def launch(n_rows: int = 50, n_cols: int = 24, block_r: int = 8, block_c: int = 32,
           seed: int = 0) -> Launch:
    x = np.random.default_rng(seed).standard_normal((n_rows, n_cols), dtype=np.float32)
    colsum = np.ones(n_cols, np.float32)
    total = np.full(1, 10.0, np.float32)
    return Launch("triton-atomic-sum", colsum_kernel,
                  lambda meta: (triton.cdiv(n_rows, meta["BLOCK_R"]),),
                  (x, colsum, total, n_rows, n_cols, n_cols),
                  {"BLOCK_R": block_r, "BLOCK_C": block_c}, reference)


def case(n_rows: int = 50, n_cols: int = 24, block_r: int = 8, block_c: int = 32,
         seed: int = 0):
    return launch(n_rows, n_cols, block_r, block_c, seed).case()
