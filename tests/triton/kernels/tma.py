"""Tensor descriptors (TMA), in the style of Triton's matmul tutorials: a matmul whose A and B
come as host ``TensorDescriptor`` arguments and whose C is an in-kernel
``tl.make_tensor_descriptor``, and a descriptor load/store at shifted offsets, so every
program's block sticks out of the tensor (zero padding on load, clipped stores).

The host descriptors are kernbench's (``kernbench.triton.descriptor.TensorDescriptor``: a
numpy base); the interpreter run (``spec.interpret_main``) rebuilds them as Triton's over
torch tensors. Shapes keep Triton's 16-byte stride alignment."""

from __future__ import annotations

import numpy as np
import triton
import triton.language as tl

from kernbench.triton.descriptor import TensorDescriptor
from tests.triton.kernels.spec import Launch


@triton.jit
def matmul_tma_kernel(a_desc, b_desc, c_ptr, M, N, K, BLOCK_M: tl.constexpr,
                      BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid = tl.program_id(axis=0)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    offs_am = (pid // num_pid_n) * BLOCK_M
    offs_bn = (pid % num_pid_n) * BLOCK_N
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1],
                                       block_shape=[BLOCK_M, BLOCK_N])
    accumulator = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        offs_k = k * BLOCK_K
        a = a_desc.load([offs_am, offs_k])
        b = b_desc.load([offs_k, offs_bn])
        accumulator = tl.dot(a, b, accumulator)
    c_desc.store([offs_am, offs_bn], accumulator.to(tl.float16))


def matmul_reference(a_desc: np.ndarray, b_desc: np.ndarray, **_: np.ndarray
                     ) -> dict[str, np.ndarray]:
    return {"c_ptr": (a_desc.astype(np.float32) @ b_desc.astype(np.float32)
                      ).astype(np.float16)}


def matmul_launch(m: int = 40, n: int = 24, k: int = 40, block_m: int = 16,
                  block_n: int = 16, block_k: int = 16, seed: int = 0) -> Launch:
    """M, N and K are not multiples of the blocks: edge tiles read zeros past K (which add
    nothing to the dot) and store only their in-bounds part of C."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k), dtype=np.float32).astype(np.float16)
    b = rng.standard_normal((k, n), dtype=np.float32).astype(np.float16)
    c = np.zeros((m, n), np.float16)
    a_desc = TensorDescriptor.from_tensor(a, [block_m, block_k])
    b_desc = TensorDescriptor.from_tensor(b, [block_k, block_n])
    grid = (triton.cdiv(m, block_m) * triton.cdiv(n, block_n),)
    return Launch("triton-matmul-tma", matmul_tma_kernel, grid, (a_desc, b_desc, c, m, n, k),
                  {"BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK_K": block_k},
                  matmul_reference)


def matmul_case(**params: int):
    return matmul_launch(**params).case()


@triton.jit
def shifted_tiles_kernel(x_desc, tiles_ptr, y_ptr, M, N, SHIFT_M: tl.constexpr,
                         SHIFT_N: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    om = pm * BM - SHIFT_M
    on = pn * BN + SHIFT_N
    block = x_desc.load([om, on])
    tile = (pm * tl.num_programs(1) + pn) * BM * BN
    rows = tl.arange(0, BM)[:, None]
    cols = tl.arange(0, BN)[None, :]
    tl.store(tiles_ptr + tile + rows * BN + cols, block)
    y_desc = tl.make_tensor_descriptor(y_ptr, shape=[M, N], strides=[N, 1],
                                       block_shape=[BM, BN])
    y_desc.store([om, on], block + 1.0)


def shifted_positions(m: int, n: int, shift_m: int, shift_n: int, bm: int, bn: int
                      ) -> tuple[np.ndarray, np.ndarray, tuple[int, int]]:
    """(rows, cols) of every element of every program's block, and the grid."""
    grid = (triton.cdiv(m + shift_m, bm), triton.cdiv(n - shift_n, bn))
    pm, pn = np.meshgrid(np.arange(grid[0]), np.arange(grid[1]), indexing="ij")
    r = (pm[..., None, None] * bm - shift_m + np.arange(bm)[:, None])
    c = (pn[..., None, None] * bn + shift_n + np.arange(bn)[None, :])
    return np.broadcast_to(r, (*grid, bm, bn)), np.broadcast_to(c, (*grid, bm, bn)), grid


def shifted_launch(m: int = 10, n: int = 12, shift_m: int = 1, shift_n: int = 4, bm: int = 4,
                   bn: int = 8, seed: int = 0) -> Launch:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((m, n), dtype=np.float32)
    _, _, grid = shifted_positions(m, n, shift_m, shift_n, bm, bn)
    tiles = np.zeros((*grid, bm, bn), np.float32)
    y = np.zeros((m, n), np.float32)

    def reference(x_desc: np.ndarray, **_: np.ndarray) -> dict[str, np.ndarray]:
        r, c, _ = shifted_positions(m, n, shift_m, shift_n, bm, bn)
        inside = (r >= 0) & (r < m) & (c >= 0) & (c < n)
        want = np.where(inside, x_desc[np.clip(r, 0, m - 1), np.clip(c, 0, n - 1)], 0.0)
        out = np.zeros((m, n), np.float32)
        out[r[inside], c[inside]] = x_desc[r[inside], c[inside]] + 1.0
        return {"tiles_ptr": want.astype(np.float32), "y_ptr": out}

    return Launch("triton-descriptor-edges", shifted_tiles_kernel, grid,
                  (TensorDescriptor.from_tensor(x, [bm, bn]), tiles, y, m, n),
                  {"SHIFT_M": shift_m, "SHIFT_N": shift_n, "BM": bm, "BN": bn}, reference)


def shifted_case(**params: int):
    return shifted_launch(**params).case()
