"""Flash-attention forward (online softmax) with a causal mask, every operand addressed by
block pointers: K read as K^T straight from memory (a column-major block, ``order=(0, 1)``),
``tl.advance`` along the sequence, ``boundary_check`` for a ragged sequence length."""

from __future__ import annotations

import numpy as np
import triton
import triton.language as tl

from tests.triton.kernels.spec import Launch


@triton.jit
def attn_fwd(Q, K, V, sm_scale, Out,
             stride_qh, stride_qm, stride_qk, stride_kh, stride_kn, stride_kk,
             stride_vh, stride_vn, stride_vk, stride_oh, stride_om, stride_ok,
             N_CTX, BLOCK_M: tl.constexpr, BLOCK_DMODEL: tl.constexpr,
             BLOCK_N: tl.constexpr, IS_CAUSAL: tl.constexpr):
    start_m = tl.program_id(0)
    off_h = tl.program_id(1)
    Q_block_ptr = tl.make_block_ptr(base=Q + off_h * stride_qh, shape=(N_CTX, BLOCK_DMODEL),
                                    strides=(stride_qm, stride_qk), offsets=(start_m * BLOCK_M, 0),
                                    block_shape=(BLOCK_M, BLOCK_DMODEL), order=(1, 0))
    K_block_ptr = tl.make_block_ptr(base=K + off_h * stride_kh, shape=(BLOCK_DMODEL, N_CTX),
                                    strides=(stride_kk, stride_kn), offsets=(0, 0),
                                    block_shape=(BLOCK_DMODEL, BLOCK_N), order=(0, 1))
    V_block_ptr = tl.make_block_ptr(base=V + off_h * stride_vh, shape=(N_CTX, BLOCK_DMODEL),
                                    strides=(stride_vn, stride_vk), offsets=(0, 0),
                                    block_shape=(BLOCK_N, BLOCK_DMODEL), order=(1, 0))
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_DMODEL], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504
    q = tl.load(Q_block_ptr, boundary_check=(0,), padding_option="zero")
    hi = tl.minimum((start_m + 1) * BLOCK_M, N_CTX) if IS_CAUSAL else N_CTX
    for start_n in range(0, hi, BLOCK_N):
        k = tl.load(K_block_ptr, boundary_check=(1,), padding_option="zero")
        v = tl.load(V_block_ptr, boundary_check=(0,), padding_option="zero")
        qk = tl.dot(q, k) * qk_scale
        keep = (start_n + offs_n[None, :]) < N_CTX
        if IS_CAUSAL:
            keep = keep & (offs_m[:, None] >= (start_n + offs_n[None, :]))
        qk = tl.where(keep, qk, float("-inf"))
        m_ij = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_ij[:, None])
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        acc += tl.dot(p.to(tl.float16), v)
        m_i = m_ij
        K_block_ptr = tl.advance(K_block_ptr, (0, BLOCK_N))
        V_block_ptr = tl.advance(V_block_ptr, (BLOCK_N, 0))
    acc = acc / l_i[:, None]
    O_block_ptr = tl.make_block_ptr(base=Out + off_h * stride_oh, shape=(N_CTX, BLOCK_DMODEL),
                                    strides=(stride_om, stride_ok), offsets=(start_m * BLOCK_M, 0),
                                    block_shape=(BLOCK_M, BLOCK_DMODEL), order=(1, 0))
    tl.store(O_block_ptr, acc.to(Out.dtype.element_ty), boundary_check=(0,))


def launch(heads: int = 2, n_ctx: int = 48, d: int = 16, block_m: int = 16,
           block_n: int = 16, causal: bool = True, seed: int = 0) -> Launch:
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((heads, n_ctx, d), dtype=np.float32).astype(np.float16)
               for _ in range(3))
    out = np.zeros((heads, n_ctx, d), np.float16)
    sm_scale = 1.0 / float(np.sqrt(d))

    def reference(Q: np.ndarray, K: np.ndarray, V: np.ndarray, **_: np.ndarray
                  ) -> dict[str, np.ndarray]:
        s = Q.astype(np.float32) @ K.astype(np.float32).transpose(0, 2, 1) * sm_scale
        if causal:
            s = np.where(np.tril(np.ones((n_ctx, n_ctx), bool)), s, -np.inf)
        p = np.exp(s - s.max(axis=-1, keepdims=True))
        p /= p.sum(axis=-1, keepdims=True)
        return {"Out": (p @ V.astype(np.float32)).astype(np.float16)}

    strides = (n_ctx * d, d, 1)
    return Launch("triton-flash-attention", attn_fwd,
                  lambda meta: (triton.cdiv(n_ctx, meta["BLOCK_M"]), heads),
                  (q, k, v, sm_scale, out, *strides, *strides, *strides, *strides, n_ctx),
                  {"BLOCK_M": block_m, "BLOCK_DMODEL": d, "BLOCK_N": block_n,
                   "IS_CAUSAL": causal}, reference)


def case(heads: int = 2, n_ctx: int = 48, d: int = 16, block_m: int = 16, block_n: int = 16,
         causal: bool = True, seed: int = 0):
    return launch(heads, n_ctx, d, block_m, block_n, causal, seed).case()
