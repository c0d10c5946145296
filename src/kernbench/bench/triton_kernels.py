"""The Triton kernels ``kernbench bench`` runs on both sides (``bench/triton_interpreter``):
unmodified Triton source, each with a launch on numpy arguments, a numpy reference and a case.

- ``matmul``: the tutorial's grouped-ordering matmul, fp16 in, fp32 accumulation;
- ``softmax``: the tutorial's fused row softmax, one program per row;
- ``decode``: GQA flash decoding as Llama3-70B runs it (8 KV heads, 8 query heads per KV
  head, head_dim 128, one program per KV head, the query group padded to the 16 rows
  ``tl.dot`` needs and masked), online softmax over ``BLOCK_N`` keys at a time; fp16 so that
  Triton's interpreter (whose bf16 ``dot`` is wrong, triton#11584) is a fair oracle.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import kernbench as kb
from kernbench.case.triton_hook import install
from kernbench.triton import case as triton_case

install()  # the kernels below are Triton source: the stand-in where no triton is installed
import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                  stride_cm, stride_cn, BLOCK_SIZE_M: tl.constexpr,
                  BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                  GROUP_SIZE_M: tl.constexpr):
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
    tl.store(c_ptrs, c, mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


@triton.jit
def softmax_kernel(output_ptr, input_ptr, input_row_stride, output_row_stride, n_cols,
                   BLOCK_SIZE: tl.constexpr):
    row_idx = tl.program_id(0)
    col_offsets = tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < n_cols
    row = tl.load(input_ptr + row_idx * input_row_stride + col_offsets, mask=mask,
                  other=-float("inf"))
    numerator = tl.exp(row - tl.max(row, axis=0))
    out = numerator / tl.sum(numerator, axis=0)
    tl.store(output_ptr + row_idx * output_row_stride + col_offsets, out, mask=mask)


def matmul_launch(size: int = 512, block_m: int = 64, block_n: int = 64, block_k: int = 32,
                  group_m: int = 8, seed: int = 0) -> tuple[Any, tuple, tuple, dict]:
    """(kernel, grid, args, meta) of one matmul launch, numpy arguments."""
    rng = np.random.default_rng(seed)
    a, b = (rng.standard_normal((size, size), dtype=np.float32).astype(np.float16)
            for _ in range(2))
    c = np.zeros((size, size), np.float16)
    grid = (triton.cdiv(size, block_m) * triton.cdiv(size, block_n),)
    meta = {"BLOCK_SIZE_M": block_m, "BLOCK_SIZE_N": block_n, "BLOCK_SIZE_K": block_k,
            "GROUP_SIZE_M": group_m}
    return matmul_kernel, grid, (a, b, c, size, size, size, size, 1, size, 1, size, 1), meta


def softmax_launch(rows: int = 1024, cols: int = 1024, seed: int = 0
                   ) -> tuple[Any, tuple, tuple, dict]:
    x = np.random.default_rng(seed).standard_normal((rows, cols), dtype=np.float32)
    out = np.zeros((rows, cols), np.float32)
    block = 1 << max(cols - 1, 0).bit_length()
    return softmax_kernel, (rows,), (out, x, cols, cols, cols), {"BLOCK_SIZE": block}


def _matmul_reference(a_ptr: np.ndarray, b_ptr: np.ndarray, **_: Any) -> dict[str, Any]:
    return {"c_ptr": (a_ptr.astype(np.float32) @ b_ptr.astype(np.float32)).astype(np.float16)}


def _softmax_reference(input_ptr: np.ndarray, **_: Any) -> dict[str, Any]:
    e = np.exp(input_ptr - input_ptr.max(axis=1, keepdims=True))
    return {"output_ptr": e / e.sum(axis=1, keepdims=True)}


def matmul_case(size: int = 512, block_m: int = 64, block_n: int = 64, block_k: int = 32,
                group_m: int = 8, seed: int = 0) -> kb.Case:
    kernel, grid, args, meta = matmul_launch(size, block_m, block_n, block_k, group_m, seed)
    return triton_case(kernel, grid, *args, name="bench-triton-matmul",
                       reference=_matmul_reference, **meta)


def softmax_case(rows: int = 1024, cols: int = 1024, seed: int = 0) -> kb.Case:
    kernel, grid, args, meta = softmax_launch(rows, cols, seed)
    return triton_case(kernel, grid, *args, name="bench-triton-softmax",
                       reference=_softmax_reference, **meta)


@triton.jit
def gqa_decode_kernel(q_ptr, k_ptr, v_ptr, o_ptr, S_kv, sm_scale, stride_qh, stride_kh,
                      stride_ks, stride_vh, stride_vs, stride_oh, GROUP: tl.constexpr,
                      BLOCK_H: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr):
    kv_head = tl.program_id(0)
    offs_h = tl.arange(0, BLOCK_H)
    offs_d = tl.arange(0, HEAD_DIM)
    offs_n = tl.arange(0, BLOCK_N)
    head_mask = offs_h < GROUP
    q_rows = kv_head * GROUP + offs_h
    q = tl.load(q_ptr + q_rows[:, None] * stride_qh + offs_d[None, :],
                mask=head_mask[:, None], other=0.0)
    m_i = tl.full([BLOCK_H], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_H], tl.float32)
    acc = tl.zeros([BLOCK_H, HEAD_DIM], tl.float32)
    k_base = k_ptr + kv_head * stride_kh
    v_base = v_ptr + kv_head * stride_vh
    for start in range(0, S_kv, BLOCK_N):
        keys = start + offs_n
        kv_mask = keys < S_kv
        k = tl.load(k_base + keys[:, None] * stride_ks + offs_d[None, :],
                    mask=kv_mask[:, None], other=0.0)
        qk = tl.dot(q, tl.trans(k)) * sm_scale
        qk = tl.where(kv_mask[None, :], qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(qk - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_base + keys[:, None] * stride_vs + offs_d[None, :],
                    mask=kv_mask[:, None], other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(o_ptr + q_rows[:, None] * stride_oh + offs_d[None, :],
             out.to(o_ptr.dtype.element_ty), mask=head_mask[:, None])


def decode_launch(s_kv: int = 32768, kv_heads: int = 8, group: int = 8, head_dim: int = 128,
                  block_n: int = 128, seed: int = 0) -> tuple[Any, tuple, tuple, dict]:
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((kv_heads * group, head_dim), dtype=np.float32).astype(np.float16)
    k, v = ((rng.random((kv_heads, s_kv, head_dim), np.float32) * 4 - 2).astype(np.float16)
            for _ in range(2))  # uniform: a third of the normal draws' time at 32k keys
    o = np.zeros_like(q)
    meta = {"GROUP": group, "BLOCK_H": max(16, 1 << (group - 1).bit_length()),
            "HEAD_DIM": head_dim, "BLOCK_N": block_n}
    args = (q, k, v, o, s_kv, float(head_dim ** -0.5), head_dim, s_kv * head_dim, head_dim,
            s_kv * head_dim, head_dim, head_dim)
    return gqa_decode_kernel, (kv_heads,), args, meta


def decode_reference(q_ptr: np.ndarray, k_ptr: np.ndarray, v_ptr: np.ndarray, **_: Any
                      ) -> dict[str, Any]:
    kv_heads, _, head_dim = k_ptr.shape
    q = q_ptr.astype(np.float32).reshape(kv_heads, -1, head_dim)
    s = q @ k_ptr.astype(np.float32).transpose(0, 2, 1) * np.float32(head_dim ** -0.5)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    o = (p / p.sum(axis=-1, keepdims=True)) @ v_ptr.astype(np.float32)
    return {"o_ptr": o.reshape(q_ptr.shape).astype(np.float16)}


def decode_case(s_kv: int = 32768, kv_heads: int = 8, group: int = 8, head_dim: int = 128,
                block_n: int = 128, seed: int = 0) -> kb.Case:
    kernel, grid, args, meta = decode_launch(s_kv, kv_heads, group, head_dim, block_n, seed)
    return triton_case(kernel, grid, *args, name="bench-triton-decode", outputs=["o_ptr"],
                       reference=decode_reference, **meta)
