"""Matmul in the tutorial's grouped ordering (``GROUP_SIZE_M`` row blocks share B tiles), M
and N wrapped by ``%`` and K masked (K is not a multiple of ``BLOCK_SIZE_K``), fp16 in,
float32 accumulator, fp16 out."""

from __future__ import annotations

import numpy as np
import triton
import triton.language as tl

from tests.triton.kernels.spec import Launch


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                  stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
                  BLOCK_SIZE_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_am = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)

    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_SIZE_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_SIZE_K, other=0.0)
        accumulator = tl.dot(a, b, accumulator)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk
    c = accumulator.to(tl.float16)

    offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, c, mask=c_mask)


def reference(a_ptr: np.ndarray, b_ptr: np.ndarray, **_: np.ndarray) -> dict[str, np.ndarray]:
    return {"c_ptr": (a_ptr.astype(np.float32) @ b_ptr.astype(np.float32)).astype(np.float16)}


def launch(m: int = 48, n: int = 40, k: int = 40, block_m: int = 16, block_n: int = 16,
           block_k: int = 16, group_m: int = 2, seed: int = 0, num_stages: int = 0) -> Launch:
    """``num_stages=0``: the launch gives none (the front end's default applies)."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k), dtype=np.float32).astype(np.float16)
    b = rng.standard_normal((k, n), dtype=np.float32).astype(np.float16)
    c = np.zeros((m, n), np.float16)
    meta = {"BLOCK_SIZE_M": block_m, "BLOCK_SIZE_N": block_n, "BLOCK_SIZE_K": block_k,
            "GROUP_SIZE_M": group_m}
    return Launch("triton-matmul", matmul_kernel,
                  lambda meta: (triton.cdiv(m, meta["BLOCK_SIZE_M"])
                                * triton.cdiv(n, meta["BLOCK_SIZE_N"]),),
                  (a, b, c, m, n, k, k, 1, n, 1, n, 1), meta, reference,
                  num_stages=num_stages or None)


def case(m: int = 48, n: int = 40, k: int = 40, block_m: int = 16, block_n: int = 16,
         block_k: int = 16, group_m: int = 2, seed: int = 0, num_stages: int = 0):
    return launch(m, n, k, block_m, block_n, block_k, group_m, seed, num_stages).case()
