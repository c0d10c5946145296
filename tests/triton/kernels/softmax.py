"""Fused row softmax: one program per row, the block wider than the row (masked columns read
as -inf), rows addressed through a row stride wider than the row."""

from __future__ import annotations

import numpy as np
import triton
import triton.language as tl

from tests.triton.kernels.spec import Launch


@triton.jit
def softmax_kernel(output_ptr, input_ptr, input_row_stride, output_row_stride, n_cols,
                   BLOCK_SIZE: tl.constexpr):
    row_idx = tl.program_id(0)
    row_start_ptr = input_ptr + row_idx * input_row_stride
    col_offsets = tl.arange(0, BLOCK_SIZE)
    input_ptrs = row_start_ptr + col_offsets
    mask = col_offsets < n_cols
    row = tl.load(input_ptrs, mask=mask, other=-float("inf"))
    row_minus_max = row - tl.max(row, axis=0)
    numerator = tl.exp(row_minus_max)
    denominator = tl.sum(numerator, axis=0)
    softmax_output = numerator / denominator
    output_row_start_ptr = output_ptr + row_idx * output_row_stride
    tl.store(output_row_start_ptr + col_offsets, softmax_output, mask=mask)


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def launch(rows: int = 6, cols: int = 100, stride: int = 112, block: int = 128,
           seed: int = 0) -> Launch:
    x = np.random.default_rng(seed).standard_normal((rows, stride), dtype=np.float32)
    out = np.zeros((rows, stride), np.float32)

    def reference(input_ptr: np.ndarray, output_ptr: np.ndarray, **_: np.ndarray
                  ) -> dict[str, np.ndarray]:
        expected = output_ptr.copy()  # the padding columns are never written
        expected[:, :cols] = _softmax(input_ptr[:, :cols])
        return {"output_ptr": expected}

    return Launch("triton-softmax", softmax_kernel, (rows,),
                  (out, x, stride, stride, cols), {"BLOCK_SIZE": block}, reference)


def case(rows: int = 6, cols: int = 100, stride: int = 112, block: int = 128, seed: int = 0):
    return launch(rows, cols, stride, block, seed).case()
