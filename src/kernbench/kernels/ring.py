"""ring-attention: one GQA group (G query heads sharing a KV head) across ``n_ranks`` PEs.

prefill (non-causal): rank r holds a query tile (T_q tokens x G heads) and its KV block of
  S_kv_per_rank tokens. KV rotates chunk by chunk: each chunk goes once round the ring, rank
  r forwarding the chunk it holds while it computes on it and ``recv_async``-ing the next one
  into the other half of a persistent double buffer, so the link overlaps the compute.
decode: KV stays in place; every rank sweeps its block (double-buffered lazy loads) into a
  partial (m, l, O), then the partials travel round the ring (all-gather) and each rank merges
  them; rank 0 writes O.

Layouts: Q/O prefill [n, T_q, G, D]; Q/O decode [G, D]; K, V [n, S_kv_per_rank, D].
References: kernbench/case/references.py (replay verifies without importing this module).
"""

from __future__ import annotations

import numpy as np

import kernbench as kb
from kernbench import references, tl
from kernbench.kernels.gqa import double_buffered_kv, online_softmax_step, running_state


@kb.kernel
def ring_prefill(q, k, v, o, *, n: int, S: int, C: int, T_q: int, G: int, D: int,  # noqa: N803
                 scale: float):
    r = tl.program_id(0)
    rows = T_q * G
    qt = tl.reshape(tl.load(q + r * rows * D, (T_q, G, D), tl.bfloat16), (rows, D))
    m, l, acc = running_state(rows, D)  # noqa: E741
    kbuf = [tl.zeros((C, D), tl.bfloat16), tl.zeros((C, D), tl.bfloat16)]
    vbuf = [tl.zeros((C, D), tl.bfloat16), tl.zeros((C, D), tl.bfloat16)]
    kbase, vbase = k + r * S * D, v + r * S * D
    step = 0
    for c in range(S // C):
        cur = step % 2
        tl.load(kbase + c * C * D, (C, D), tl.bfloat16, out=kbuf[cur])
        tl.load(vbase + c * C * D, (C, D), tl.bfloat16, out=vbuf[cur])
        for i in range(n):
            cur, nxt = step % 2, (step + 1) % 2
            if i < n - 1:  # forward what we hold, and post the receive of what comes next
                tl.send("next", kbuf[cur])
                tl.send("next", vbuf[cur])
                tl.recv_async("prev", (C, D), tl.bfloat16, out=kbuf[nxt])
                tl.recv_async("prev", (C, D), tl.bfloat16, out=vbuf[nxt])
            with tl.scratch_scope():
                online_softmax_step(qt, kbuf[cur], vbuf[cur], m, l, acc, scale)
            step += 1 if i < n - 1 else 2  # the next chunk's load goes to the free buffer
    tl.store(o + r * rows * D, tl.reshape(acc / l, (T_q, G, D)))


@kb.kernel
def ring_decode(q, k, v, o, *, n: int, S: int, C: int, G: int, D: int, scale: float):  # noqa: N803
    r = tl.program_id(0)
    qh = tl.load(q, (G, D), tl.bfloat16)
    m, l, acc = running_state(G, D)  # noqa: E741
    for kt, vt in double_buffered_kv(k + r * S * D, v + r * S * D, S // C, C, D):
        with tl.scratch_scope():
            online_softmax_step(qh, kt, vt, m, l, acc, scale)
    # all-gather the partials round the ring, merging each one that arrives
    part = (tl.zeros((G, 1), tl.float32), tl.zeros((G, 1), tl.float32),
            tl.zeros((G, D), tl.float32))
    tl.copy_to(part[0], m)
    tl.copy_to(part[1], l)
    tl.copy_to(part[2], acc)
    got = [tl.zeros(h.shape, tl.float32) for h in part]
    for _ in range(n - 1):
        for g in got:  # post the receives first: three sends would fill a depth-2 queue
            tl.recv_async("prev", g.shape, tl.float32, out=g)
        for h in part:
            tl.send("next", h)
        with tl.scratch_scope():
            m_new = tl.maximum(m, got[0])
            a, b = tl.exp(m - m_new), tl.exp(got[0] - m_new)
            tl.copy_to(l, l * a + got[1] * b)
            tl.copy_to(acc, acc * a + got[2] * b)
            tl.copy_to(m, m_new)
        for h, g in zip(part, got, strict=True):
            tl.copy_to(h, g)
    if r == 0:
        tl.store(o, acc / l)


@kb.register_case("ring-attention")
def ring_attention_case(n_ranks: int = 8, S_kv_per_rank: int = 4096,  # noqa: N803
                        phase: str = "prefill", C: int = 64, T_q: int = 32, G: int = 8,  # noqa: N803
                        D: int = 128) -> kb.Case:  # noqa: N803
    """Ring attention over ``n_ranks`` PEs for one GQA group (Llama3-70B: G = 8, D = 128)."""
    if phase not in ("prefill", "decode"):
        raise kb.BadInputError(f"ring-attention: phase {phase!r} is not 'prefill' or 'decode'")
    if S_kv_per_rank % C or n_ranks < 1:
        raise kb.BadInputError(f"ring-attention: S_kv_per_rank={S_kv_per_rank} must be a "
                               f"multiple of C={C} and n_ranks >= 1")
    scale = 1.0 / float(np.sqrt(D))
    kv = {"k": kb.tensor((n_ranks, S_kv_per_rank, D), "bfloat16", init=kb.randn(seed=72)),
          "v": kb.tensor((n_ranks, S_kv_per_rank, D), "bfloat16", init=kb.randn(seed=73))}
    common = {"n": n_ranks, "S": S_kv_per_rank, "C": C, "G": G, "D": D, "scale": scale}
    reference = references.ring_attention(n_ranks=n_ranks, phase=phase, T_q=T_q, G=G, D=D)  # type: ignore[attr-defined]
    if phase == "prefill":
        return kb.Case(
            name="ring-attention", kernel=ring_prefill, grid=(n_ranks,),
            tensors={"q": kb.tensor((n_ranks, T_q, G, D), "bfloat16", init=kb.randn(seed=71)),
                     **kv, "o": kb.tensor((n_ranks, T_q, G, D), "bfloat16", role="output")},
            params={**common, "T_q": T_q}, reference=reference)
    return kb.Case(
        name="ring-attention", kernel=ring_decode, grid=(n_ranks,),
        tensors={"q": kb.tensor((G, D), "bfloat16", init=kb.randn(seed=71)), **kv,
                 "o": kb.tensor((G, D), "bfloat16", role="output")},
        params=common,
        reference=reference)
