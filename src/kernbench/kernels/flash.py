"""flash-attn: single-head flash attention sweep (online softmax, O(1) scratch per tile)."""

from __future__ import annotations

import contextlib

import numpy as np

import kernbench as kb
from kernbench import tl
from kernbench.case import references

NEG_BIG = -1.0e30  # the running max before any tile: finite, so exp(NEG_BIG - m) == 0


@kb.kernel
def flash_attn(q, k, v, o, *, s_kv: int, t_kv: int, t_q: int, d: int, scale: float,
               scoped: bool):
    """O = softmax(Q K^T * scale) V for one head, sweeping K/V in tiles of ``t_kv`` rows.
    The running (m, l, acc) live outside the per-tile scope; ``copy_to`` persists them."""
    qh = tl.load(q, (t_q, d), tl.bfloat16)
    m = tl.full((t_q, 1), NEG_BIG, tl.float32)
    l = tl.zeros((t_q, 1), tl.float32)  # noqa: E741 - the flash-attention name
    acc = tl.zeros((t_q, d), tl.float32)
    for j in range(s_kv // t_kv):
        with tl.scratch_scope() if scoped else contextlib.nullcontext():
            kt = tl.load(k + j * t_kv * d, (t_kv, d), tl.bfloat16)
            vt = tl.load(v + j * t_kv * d, (t_kv, d), tl.bfloat16)
            s = tl.dot(qh, tl.trans(kt)) * scale
            m_new = tl.maximum(m, tl.max(s, axis=1, keepdims=True))
            p = tl.exp(s - m_new)
            alpha = tl.exp(m - m_new)
            l_new = l * alpha + tl.sum(p, axis=1, keepdims=True)
            acc_new = acc * alpha + tl.dot(p.to(tl.bfloat16), vt)
            tl.copy_to(m, m_new)
            tl.copy_to(l, l_new)
            tl.copy_to(acc, acc_new)
    tl.store(o, acc / l)


@kb.register_case("flash-attn")
def flash_attn_case(s_kv: int = 4096, t_kv: int = 256, t_q: int = 16, d: int = 128,
                    scoped: bool = True) -> kb.Case:
    """Single-head flash attention over ``s_kv`` keys in ``t_kv`` tiles (bf16 Q/K/V)."""
    if s_kv % t_kv:
        raise kb.BadInputError(f"flash-attn: s_kv={s_kv} is not a multiple of t_kv={t_kv}")
    scale = 1.0 / float(np.sqrt(d))
    return kb.Case(
        name="flash-attn", kernel=flash_attn, grid=(1,),
        tensors={"q": kb.tensor((t_q, d), "bfloat16", init=kb.randn(seed=21)),
                 "k": kb.tensor((s_kv, d), "bfloat16", init=kb.randn(seed=22)),
                 "v": kb.tensor((s_kv, d), "bfloat16", init=kb.randn(seed=23)),
                 "o": kb.tensor((t_q, d), "bfloat16", role="output")},
        params={"s_kv": s_kv, "t_kv": t_kv, "t_q": t_q, "d": d, "scale": scale,
                "scoped": scoped},
        reference=references.flash_attn(d=d),
    )
