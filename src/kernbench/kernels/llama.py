"""The kernels of a Llama decoder layer as cases, at any shape (docs/llama3-70b.md,
ADR-0920): the tensor-parallel GEMM, RMSNorm, RoPE and SwiGLU (Triton source,
``kernels/llama_triton.py``) and the ring reduce-scatter (``kernels/collective.py``).

They are case factories, not registered names: a trace names its factory
(``kernbench.kernels.llama:matmul_case``) and ``kernbench replay --case`` rebuilds it.
Weights and activations are ``kb.randn`` tensors (regenerated, never stored in the trace),
scaled so the activations keep unit size; only RoPE's ``cos``/``sin`` tables are stored.
A Triton launch's big arrays are shape placeholders replaced by those specs (as
``kernels/paged_decode.py`` does), so building a full-shape case allocates nothing.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

import kernbench as kb
from kernbench.kernels import collective

#: ``split`` -> how a GEMM's ranks share it: "columns" (each rank its N share, the whole K:
#: QKV, gate/up, the LM head) or "rows" (each rank its K share and a partial of the whole
#: output: the output and down projections, reduced across the PEs after)
SPLITS = ("columns", "rows")
reduce_scatter_case = collective.reduce_scatter_case


def _triton() -> Any:
    from kernbench.kernels import llama_triton  # imports triton: only when a case is built

    return llama_triton


def _case(kernel: Any, grid: tuple[int, ...], args: tuple, name: str, outputs: list[str],
          specs: dict[str, kb.TensorSpec], reference: Any, **meta: Any) -> kb.Case:
    from kernbench.triton import case as triton_case

    c = triton_case(kernel, grid, *args, name=name, outputs=outputs, reference=reference,
                    **meta)
    return replace(c, tensors={**c.tensors, **specs})


def _ph(*shape: int) -> np.ndarray:
    """A shape placeholder (never touched: its spec replaces it)."""
    return np.empty(shape, np.float16)


def _bad(name: str, **values: int) -> None:
    if min(values.values()) < 1:
        raise kb.BadInputError(f"{name}: sizes must be positive, got "
                               + " ".join(f"{k}={v}" for k, v in values.items()))


def _unpack(x: np.ndarray) -> np.ndarray:
    """A packed ``[panels, rows, width]`` matrix as the ``[rows, panels * width]`` it holds."""
    return x.transpose(1, 0, 2).reshape(x.shape[1], -1)


def _pack(x: np.ndarray, width: int) -> np.ndarray:
    """``[rows, cols]`` as ``[cols / width, rows, width]`` panels."""
    return np.ascontiguousarray(x.reshape(x.shape[0], -1, width).transpose(1, 0, 2))


def matmul_reference(split: str, ranks: int, BN: int) -> Any:  # noqa: N803
    def reference(a_ptr: np.ndarray, b_ptr: np.ndarray, **_: Any) -> dict[str, Any]:
        x = _unpack(np.asarray(a_ptr, np.float32))
        w = np.asarray(b_ptr, np.float32)
        if split == "columns":  # w: [N / BN, K, BN] panels
            return {"c_ptr": _pack(x @ _unpack(w), BN)}
        kr = x.shape[1] // ranks  # w: [ranks, N / BN, K / ranks, BN]
        return {"c_ptr": np.stack([_pack(x[:, r * kr:(r + 1) * kr] @ _unpack(w[r]), BN)
                                   for r in range(ranks)])}

    return reference


def matmul_case(M: int = 1, N: int = 10240, K: int = 8192, ranks: int = 8,  # noqa: N803
                split: str = "columns", BM: int = 16, BN: int = 128, BK: int = 1024,  # noqa: N803
                group_m: int = 8, stages: int = 2, seed: int = 0) -> kb.Case:
    """``[M, K] @ W`` split over ``ranks`` as tensor parallelism splits it: the Triton
    tutorial's matmul with a rank axis, on packed layouts whose tiles are contiguous: the
    weights in panels of ``BN`` output columns (``[N / BN, K, BN]``; for ``split="rows"`` each
    rank's K share ``[ranks, N / BN, K / ranks, BN]``), the activations in panels of ``BK``
    (``[K / BK, M, BK]``), the output in panels of ``BN`` (for ``split="rows"`` one partial
    sum per rank)."""
    _bad("llama matmul", M=M, N=N, K=K, ranks=ranks, BM=BM, BN=BN, BK=BK, group_m=group_m,
         stages=stages)
    if split not in SPLITS:
        raise kb.BadInputError(f"llama matmul: split {split!r} is not one of {SPLITS}")
    cols = split == "columns"
    n_r, k_r = (N // ranks, K) if cols else (N, K // ranks)
    if (N if cols else K) % ranks or n_r % BN or k_r % BK:
        raise kb.BadInputError(f"llama matmul: need {'N' if cols else 'K'} divisible by ranks, "
                               f"each rank's N by BN and its K by BK, got N={N} K={K} "
                               f"ranks={ranks} split={split} BN={BN} BK={BK}")
    a = _ph(K // BK, M, BK)
    b = _ph(N // BN, K, BN) if cols else _ph(ranks, N // BN, k_r, BN)
    c = _ph(N // BN, M, BN) if cols else _ph(ranks, N // BN, M, BN)
    #    stride_az, am, ak, akt | stride_bz, bp, bk, bn | stride_cz, cp, cm, cn
    strides = ((0 if cols else k_r * M, BK, 1, M * BK)
               + (n_r * K if cols else N * k_r, k_r * BN, BN, 1)
               + (n_r * M if cols else N * M, M * BN, BN, 1))
    tiles = -(-M // BM) * (n_r // BN)
    specs = {"a_ptr": kb.tensor(a.shape, "bfloat16", init=kb.randn(seed=seed + 81)),
             "b_ptr": kb.tensor(b.shape, "bfloat16",
                                init=kb.randn(seed=seed + 82, scale=float(K) ** -0.5)),
             "c_ptr": kb.tensor(c.shape, "bfloat16", role="output")}
    return _case(_triton().matmul_kernel, (ranks, tiles), (a, b, c, M, n_r, k_r, *strides),
                 "llama-matmul", ["c_ptr"], specs, matmul_reference(split, ranks, BN),
                 BLOCK_SIZE_M=BM, BLOCK_SIZE_N=BN, BLOCK_SIZE_K=BK, GROUP_SIZE_M=group_m,
                 num_stages=stages)


def rms_norm_reference(eps: float) -> Any:
    def reference(X_ptr: np.ndarray, W_ptr: np.ndarray, **_: Any) -> dict[str, Any]:  # noqa: N803
        x = np.asarray(X_ptr, np.float32)
        rstd = 1.0 / np.sqrt((x * x).mean(axis=1) + np.float32(eps))
        y = collective._bf16(x * rstd[:, None]) * np.asarray(W_ptr, np.float32)
        return {"Y_ptr": y, "RSTD_ptr": rstd}

    return reference


def rms_norm_case(rows: int = 1, hidden: int = 8192, eps: float = 1e-5, seed: int = 0
                  ) -> kb.Case:
    """Liger-Kernel's RMSNorm forward over ``rows`` tokens of ``hidden``, one program a row."""
    _bad("llama rms-norm", rows=rows, hidden=hidden)
    block = 1 << (hidden - 1).bit_length()
    x, y, w, rstd = _ph(rows, hidden), _ph(rows, hidden), _ph(hidden), _ph(rows)
    specs = {"X_ptr": kb.tensor(x.shape, "bfloat16", init=kb.randn(seed=seed + 91)),
             "W_ptr": kb.tensor(w.shape, "bfloat16", init=kb.randn(seed=seed + 92)),
             "Y_ptr": kb.tensor(y.shape, "bfloat16", role="output"),
             "RSTD_ptr": kb.tensor(rstd.shape, "float32", role="output")}
    return _case(_triton().rms_norm_kernel, (rows,), (y, hidden, x, hidden, w, rstd, hidden, eps),
                 "llama-rms-norm", ["Y_ptr", "RSTD_ptr"], specs, rms_norm_reference(eps),
                 BLOCK_SIZE=block)


def rope_tables(tokens: int, D: int, position: int, prefill: bool,  # noqa: N803
                theta: float = 500000.0) -> tuple[np.ndarray, np.ndarray]:
    """``cos``/``sin`` ``[tokens, D]`` as Hugging Face's Llama builds them (the frequencies
    twice over): a prefill's tokens at ``position, position + 1, ...``, a decode batch's all
    at ``position``."""
    pos = position + (np.arange(tokens) if prefill else np.zeros(tokens))
    inv = 1.0 / theta ** (np.arange(0, D, 2, dtype=np.float64) / D)
    freqs = np.outer(pos, inv)
    emb = np.concatenate([freqs, freqs], axis=1)
    return np.cos(emb).astype(np.float32), np.sin(emb).astype(np.float32)


def rope_reference(q_ptr: np.ndarray, k_ptr: np.ndarray, cos: np.ndarray, sin: np.ndarray,
                   **_: Any) -> dict[str, Any]:
    def rotate(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, np.float32)
        half = x.shape[-1] // 2
        c, s = cos[:, None, :half], sin[:, None, :half]
        x1, x2 = x[..., :half], x[..., half:]
        return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)

    return {"q_ptr": rotate(q_ptr), "k_ptr": rotate(k_ptr)}


def rope_case(tokens: int = 1, H_q: int = 64, H_kv: int = 8, D: int = 128,  # noqa: N803
              position: int = 4096, prefill: bool = False, seed: int = 0) -> kb.Case:
    """Liger-Kernel's RoPE forward, in place on every query and key head of ``tokens``
    tokens, one program a token."""
    _bad("llama rope", tokens=tokens, H_q=H_q, H_kv=H_kv, D=D, position=position + 1)
    cos, sin = rope_tables(tokens, D, position, prefill)
    q, k = _ph(tokens, H_q, D), _ph(tokens, H_kv, D)
    specs = {"q_ptr": kb.tensor(q.shape, "bfloat16", init=kb.randn(seed=seed + 101),
                                role="inout"),
             "k_ptr": kb.tensor(k.shape, "bfloat16", init=kb.randn(seed=seed + 102),
                                role="inout")}

    def pad(n: int) -> int:
        return 1 << (n - 1).bit_length()

    return _case(_triton().rope_kernel, (tokens,),
                 (q, H_q * D, k, H_kv * D, cos, D, sin, D), "llama-rope", ["q_ptr", "k_ptr"],
                 specs, rope_reference, n_qh=H_q, n_kh=H_kv, hd=D, pad_n_qh=pad(H_q),
                 pad_n_kh=pad(H_kv), pad_hd=pad(D))


def swiglu_reference(a_ptr: np.ndarray, b_ptr: np.ndarray, **_: Any) -> dict[str, Any]:
    gate = np.asarray(a_ptr, np.float32)
    silu = collective._bf16(gate / (1.0 + np.exp(-gate)))
    return {"c_ptr": silu * np.asarray(b_ptr, np.float32)}


#: the widest row the SwiGLU kernel takes (a row is one program)
SWIGLU_ROW = 8192


def swiglu_case(tokens: int = 1, ffn: int = 28672, ranks: int = 8, seed: int = 0) -> kb.Case:
    """Liger-Kernel's SwiGLU forward, ``silu(gate) * up`` on each rank's share of the gate
    and up projections (``[ranks, tokens, ffn / ranks]`` each), one program a row: the shares
    seen as rows of 8192 elements where they divide into them (the op is elementwise), else
    one row per (rank, token)."""
    _bad("llama swiglu", tokens=tokens, ffn=ffn, ranks=ranks)
    if ffn % ranks:
        raise kb.BadInputError(f"llama swiglu: ffn={ffn} is not divisible by ranks={ranks}")
    f = ffn // ranks
    cols = SWIGLU_ROW if (tokens * f) % SWIGLU_ROW == 0 else f
    rows = ranks * tokens * f // cols
    a, b, c = _ph(rows, cols), _ph(rows, cols), _ph(rows, cols)
    specs = {"a_ptr": kb.tensor(a.shape, "bfloat16", init=kb.randn(seed=seed + 111)),
             "b_ptr": kb.tensor(b.shape, "bfloat16", init=kb.randn(seed=seed + 112)),
             "c_ptr": kb.tensor(c.shape, "bfloat16", role="output")}
    return _case(_triton().swiglu_kernel, (rows,), (a, b, c, cols), "llama-swiglu", ["c_ptr"],
                 specs, swiglu_reference, n_cols=cols, BLOCK_SIZE=1 << (cols - 1).bit_length())
