"""Plain-numpy implementations of the library's attention loops, for ``kernbench bench``.

Each is the same tiled loop as the kernel (same tiles, same order, bf16 inputs, float32
compute, P rounded to bf16 before the P·V GEMM, the output rounded to bf16), written the
way a numpy user would: inputs converted to float32 once where the kernel reads them
repeatedly. ``generate`` makes the inputs exactly as ``kb.randn`` defines them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import ml_dtypes
import numpy as np

F32 = np.float32
BF16 = ml_dtypes.bfloat16
NEG_BIG = -1.0e30


def generate(tensors: Mapping[str, tuple[tuple[int, ...], int]]) -> dict[str, np.ndarray]:
    """name -> (shape, seed): ``default_rng(seed).standard_normal(shape, float32) * 1.0``
    cast to bfloat16 (``kb.randn`` as docs/trace-format.md defines it)."""
    return {name: (np.random.default_rng(seed).standard_normal(shape, dtype=F32) * 1.0)
            .astype(BF16) for name, (shape, seed) in tensors.items()}


def _sweep(q: np.ndarray, kf: np.ndarray, vf: np.ndarray, t_kv: int, tiles: int,
           scale: float, masks: Mapping[int, np.ndarray]) -> np.ndarray:
    """One online-softmax sweep of the float32 rows ``q`` over ``tiles`` K/V tiles."""
    rows, d = q.shape
    m = np.full((rows, 1), NEG_BIG, F32)
    l = np.zeros((rows, 1), F32)  # noqa: E741
    acc = np.zeros((rows, d), F32)
    for j in range(tiles):
        kt, vt = kf[j * t_kv:(j + 1) * t_kv], vf[j * t_kv:(j + 1) * t_kv]
        s = (q @ kt.T) * F32(scale)
        if j in masks:
            s = s + masks[j]
        m_new = np.maximum(m, s.max(axis=1, keepdims=True))
        p = np.exp(s - m_new)
        alpha = np.exp(m - m_new)
        l = l * alpha + p.sum(axis=1, keepdims=True)  # noqa: E741
        acc = acc * alpha + p.astype(BF16).astype(F32) @ vt
        m = m_new
    return acc / l


def prefill(q: np.ndarray, k: np.ndarray, v: np.ndarray, *, S: int, T_q: int,  # noqa: N803
            T_kv: int, G: int, D: int, scale: float, **_: Any) -> np.ndarray:
    """gqa-prefill's loop: per KV head, per query tile, the causal sweep of K/V tiles."""
    h_kv = k.shape[0]
    rows = T_q * G
    out = np.empty(q.shape, BF16)
    for h in range(h_kv):
        kf, vf = k[h].astype(F32), v[h].astype(F32)
        for i in range(S // T_q):
            q0 = i * T_q
            qt = q[h, q0:q0 + T_q].reshape(rows, D).astype(F32)
            last = (q0 + T_q - 1) // T_kv
            masks = {}
            for j in range(last + 1):
                k0 = j * T_kv
                if k0 + T_kv - 1 > q0:
                    keep = np.arange(k0, k0 + T_kv)[None, :] <= np.arange(q0, q0 + T_q)[:, None]
                    mask = np.where(keep, F32(0.0), F32(NEG_BIG))
                    masks[j] = np.repeat(mask, G, axis=0)  # rows ordered (t, g)
            res = _sweep(qt, kf, vf, T_kv, last + 1, scale, masks)
            out[h, q0:q0 + T_q] = res.reshape(T_q, G, D).astype(BF16)
    return out


def decode(q: np.ndarray, k: np.ndarray, v: np.ndarray, *, S_kv: int, T_kv: int,  # noqa: N803
           G: int, D: int, scale: float, **_: Any) -> np.ndarray:
    """gqa-decode's loop: per KV head, the sweep of its G query rows over K/V tiles."""
    h_kv = k.shape[0]
    out = np.empty(q.shape, BF16)
    for h in range(h_kv):
        kf, vf = k[h].astype(F32), v[h].astype(F32)
        qh = q[h * G:(h + 1) * G].astype(F32)
        out[h * G:(h + 1) * G] = _sweep(qh, kf, vf, T_kv, S_kv // T_kv, scale, {}).astype(BF16)
    return out
