"""ring-attention: one GQA group (G query heads sharing a KV head) across ``n_ranks`` PEs.

prefill: KV rotates chunk by chunk: each chunk goes once round the ring, rank r forwarding
  the chunk it holds while it computes on it and ``recv_async``-ing the next one into the
  other half of a persistent double buffer, so the link overlaps the compute.
  causal=False: rank r holds a query tile (T_q tokens x G heads) that attends to all n x S
  keys. causal=True: self-attention over the n x S tokens of the sequence; rank r holds the
  queries and the KV of its S tokens, swept in query tiles of T_q (the KV goes round the ring
  once per query tile). ``layout`` places the tokens (docs/adr/0512): "contiguous" gives rank
  r the tokens r*S .. r*S+S-1, "striped" the tokens r, r+n, r+2n, ... (Striped Attention),
  so that every rank has the same share of the causal triangle. Fully masked chunks are
  skipped (still forwarded), the mask is built on diagonal chunks only.
decode: KV stays in place, every rank sweeps its block into a partial (m, l, O), combined by
  a tree or a chain over the ring (kernels/ring_decode.py); rank 0 writes O.

Layouts: Q/O prefill [n, T_q, G, D] (causal: [n, S, G, D]); Q/O decode [G, D];
K, V [n, S_kv_per_rank, D]. References: kernbench/case/references.py (replay verifies
without importing this module).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

import kernbench as kb
from kernbench import tl
from kernbench.case import references
from kernbench.kernels.gqa import (
    Lookahead,
    causal_mask,
    online_softmax_step,
    pipelined_softmax_step,
    running_state,
    store_normalized,
)
from kernbench.kernels.ring_decode import COMBINES, ring_decode
from kernbench.kernels.tiles import Prefetch


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


#: layout name -> (stride, offset of rank r): local token j of rank r is at stride*j + offset
LAYOUTS: dict[str, Callable[[int, int, int], tuple[int, int]]] = {
    "contiguous": lambda r, n, s: (1, r * s),
    "striped": lambda r, n, s: (n, r),
}


def visible_shift(layout: str, r: int, src: int, n: int, s: int) -> int:
    """Key j' of rank ``src`` is visible to query j of rank ``r`` iff j' <= j + shift."""
    stride, off_q = LAYOUTS[layout](r, n, s)
    _, off_k = LAYOUTS[layout](src, n, s)
    return (off_q - off_k) // stride


def chunk_kind(q0: int, k0: int, t_q: int, c: int, shift: int) -> str:
    """How the query tile at local token ``q0`` sees the chunk at ``k0``: "skip" (no key
    visible), "full" (every key visible to every query) or "diagonal" (masked)."""
    if k0 > q0 + t_q - 1 + shift:
        return "skip"
    return "full" if k0 + c - 1 <= q0 + shift else "diagonal"


def rotated_chunks(layout: str, q0: int, n: int, s: int, t_q: int, c: int) -> int:
    """How many of the S // C chunks go round the ring for the query tiles at local token
    ``q0``: up to the last one some rank sees a key of (a prefix: visibility only shrinks
    with the chunk index). Every rank computes the same count, so sends and receives match."""
    shifts = {visible_shift(layout, r, src, n, s) for r in range(n) for src in range(n)}
    return max(sum(chunk_kind(q0, j * c, t_q, c, sh) != "skip" for j in range(s // c))
               for sh in shifts)


@kb.kernel
def ring_prefill_causal(q, k, v, o, *, n: int, S: int, C: int, T_q: int, G: int,  # noqa: N803
                        D: int, scale: float, layout: str):
    r = tl.program_id(0)
    rows = T_q * G
    kbuf = [tl.zeros((C, D), tl.bfloat16), tl.zeros((C, D), tl.bfloat16)]
    vbuf = [tl.zeros((C, D), tl.bfloat16), tl.zeros((C, D), tl.bfloat16)]
    kbase, vbase = k + r * S * D, v + r * S * D
    shifts = [visible_shift(layout, r, (r - i) % n, n, S) for i in range(n)]
    step = 0
    for t in range(S // T_q):
        with tl.scratch_scope():  # per query tile
            q0 = t * T_q
            qt = tl.reshape(tl.load(q + (r * S + q0) * G * D, (T_q, G, D), tl.bfloat16),
                            (rows, D))
            m, l, acc = running_state(rows, D)  # noqa: E741
            for j in range(rotated_chunks(layout, q0, n, S, T_q, C)):
                cur = step % 2
                tl.load(kbase + j * C * D, (C, D), tl.bfloat16, out=kbuf[cur])
                tl.load(vbase + j * C * D, (C, D), tl.bfloat16, out=vbuf[cur])
                for i in range(n):  # at ring step i the chunk held is rank (r - i)'s
                    cur, nxt = step % 2, (step + 1) % 2
                    if i < n - 1:
                        tl.send("next", kbuf[cur])
                        tl.send("next", vbuf[cur])
                        tl.recv_async("prev", (C, D), tl.bfloat16, out=kbuf[nxt])
                        tl.recv_async("prev", (C, D), tl.bfloat16, out=vbuf[nxt])
                    kind = chunk_kind(q0, j * C, T_q, C, shifts[i])
                    if kind != "skip":
                        with tl.scratch_scope():
                            mask = (causal_mask(q0 + shifts[i], j * C, T_q, C, G)
                                    if kind == "diagonal" else None)
                            online_softmax_step(qt, kbuf[cur], vbuf[cur], m, l, acc, scale,
                                                mask)
                    step += 1 if i < n - 1 else 2  # the next load reuses the received buffer
            tl.store(o + (r * S + q0) * G * D, tl.reshape(acc / l, (T_q, G, D)))


def _chunk_buffers(rows: int, C: int, D: int, tiles: bool) -> Prefetch:  # noqa: N803
    """Three K/V pairs (a chunk is loaded into the pair sent two steps ago), two score
    buffers, and (``tiles``: one store per query tile) the output buffer."""
    buf = Prefetch()
    buf.reserve("k", (C, D), ways=3)
    buf.reserve("v", (C, D), ways=3)
    buf.reserve("s", (rows, C), tl.float32)
    if tiles:
        buf.reserve("o", (rows, D), tl.float32, ways=1)
    return buf


def _next_chunk(buf: Prefetch, last: bool, more: bool, at: tuple, kt, vt):  # noqa: ANN202
    """The K/V the next ring step holds, issued now into the free buffer pair: forward what
    we hold and receive the next rank's (``not last``), or load the next chunk ``at``
    (K, V pointers; ``more``), or nothing."""
    C, D = kt.shape  # noqa: N806
    if not last:
        tl.send("next", kt)
        tl.send("next", vt)
        return (tl.recv_async("prev", (C, D), tl.bfloat16, out=buf.take("k", (C, D))),
                tl.recv_async("prev", (C, D), tl.bfloat16, out=buf.take("v", (C, D))))
    if more:
        return buf.load("k", at[0], (C, D)), buf.load("v", at[1], (C, D))
    return None, None


@kb.kernel
def ring_prefill_pipelined(q, k, v, o, *, n: int, S: int, C: int, T_q: int, G: int,  # noqa: N803
                           D: int, scale: float):
    """``ring_prefill`` with the Q·Kᵀ of ring step i+1 issued inside step i, right after its
    P·V (late: the next chunk is still on the link), and the next chunk's load issued at the
    last ring step of a chunk instead of after it (docs/adr/0530)."""
    r = tl.program_id(0)
    rows = T_q * G
    qt = tl.reshape(tl.load(q + r * rows * D, (T_q, G, D), tl.bfloat16), (rows, D))
    m, l, acc = running_state(rows, D)  # noqa: E741
    buf = _chunk_buffers(rows, C, D, tiles=False)
    kbase, vbase = k + r * S * D, v + r * S * D
    kt, vt = buf.load("k", kbase, (C, D)), buf.load("v", vbase, (C, D))
    ahead = Lookahead(buf)
    for c in range(S // C):
        for i in range(n):
            at = (kbase + (c + 1) * C * D, vbase + (c + 1) * C * D)
            nk, nv = _next_chunk(buf, i == n - 1, c + 1 < S // C, at, kt, vt)
            with tl.scratch_scope():
                s_raw = ahead.scores(qt, kt)
                if nk is not None:
                    ahead.later(qt, nk)
                pipelined_softmax_step(s_raw, vt, m, l, acc, scale, ahead)
            ahead.flush()
            kt, vt = nk, nv
    tl.store(o + r * rows * D, tl.reshape(acc / l, (T_q, G, D)))


@kb.kernel
def ring_prefill_causal_pipelined(q, k, v, o, *, n: int, S: int, C: int, T_q: int,  # noqa: N803
                                  G: int, D: int, scale: float, layout: str):
    """``ring_prefill_causal`` pipelined as ``ring_prefill_pipelined``; a step after a
    skipped one (or the first of a query tile) computes its own Q·Kᵀ."""
    r = tl.program_id(0)
    rows = T_q * G
    buf = _chunk_buffers(rows, C, D, tiles=True)
    kbase, vbase = k + r * S * D, v + r * S * D
    shifts = [visible_shift(layout, r, (r - i) % n, n, S) for i in range(n)]
    ahead = Lookahead(buf)
    for t in range(S // T_q):
        with tl.scratch_scope():  # per query tile
            q0 = t * T_q
            qt = tl.reshape(tl.load(q + (r * S + q0) * G * D, (T_q, G, D), tl.bfloat16),
                            (rows, D))
            m, l, acc = running_state(rows, D)  # noqa: E741
            chunks = rotated_chunks(layout, q0, n, S, T_q, C)
            kt, vt = buf.load("k", kbase, (C, D)), buf.load("v", vbase, (C, D))
            for j in range(chunks):
                for i in range(n):  # at ring step i the chunk held is rank (r - i)'s
                    at = (kbase + (j + 1) * C * D, vbase + (j + 1) * C * D)
                    nk, nv = _next_chunk(buf, i == n - 1, j + 1 < chunks, at, kt, vt)
                    kind = chunk_kind(q0, j * C, T_q, C, shifts[i])
                    following = (chunk_kind(q0, j * C, T_q, C, shifts[i + 1]) if i < n - 1
                                 else chunk_kind(q0, (j + 1) * C, T_q, C, shifts[0]))
                    if kind != "skip":
                        with tl.scratch_scope():
                            s_raw = ahead.scores(qt, kt)
                            if nk is not None and following != "skip":
                                ahead.later(qt, nk)
                            mask = (causal_mask(q0 + shifts[i], j * C, T_q, C, G)
                                    if kind == "diagonal" else None)
                            pipelined_softmax_step(s_raw, vt, m, l, acc, scale, ahead, mask)
                        ahead.flush()
                    kt, vt = nk, nv
            store_normalized(buf, o + (r * S + q0) * G * D, acc, l, (T_q, G, D))


#: (causal, schedule) -> the prefill kernel (docs/adr/0530)
PREFILL_KERNELS = {(False, "serial"): ring_prefill, (True, "serial"): ring_prefill_causal,
                   (False, "pipelined"): ring_prefill_pipelined,
                   (True, "pipelined"): ring_prefill_causal_pipelined}


@kb.register_case("ring-attention")
def ring_attention_case(n_ranks: int = 8, S_kv_per_rank: int = 4096,  # noqa: N803
                        phase: str = "prefill", C: int = 64, T_q: int = 32, G: int = 8,  # noqa: N803
                        D: int = 128, combine: str = "tree", causal: bool = False,
                        layout: str = "contiguous", T_kv: int = 256,  # noqa: N803
                        schedule: str = "serial") -> kb.Case:
    """Ring attention over ``n_ranks`` PEs for one GQA group (Llama3-70B: G = 8, D = 128).
    ``C`` is the prefill's rotating KV chunk, ``T_kv`` the decode's tile (at most
    S_kv_per_rank); ``schedule`` "pipelined" overlaps the prefill's Q·Kᵀ with softmax."""
    if phase not in ("prefill", "decode"):
        raise kb.BadInputError(f"ring-attention: phase {phase!r} is not 'prefill' or 'decode'")
    if schedule not in ("serial", "pipelined"):
        raise kb.BadInputError(f"ring-attention: schedule {schedule!r} is not 'serial' or "
                               "'pipelined'")
    if combine not in COMBINES or layout not in LAYOUTS:
        raise kb.BadInputError(f"ring-attention: combine {combine!r} is not one of "
                               f"{sorted(COMBINES)} or layout {layout!r} not one of "
                               f"{sorted(LAYOUTS)}")
    tile = min(T_kv, S_kv_per_rank)
    if (S_kv_per_rank % (C if phase == "prefill" else tile) or n_ranks < 1
            or (causal and S_kv_per_rank % T_q)):
        raise kb.BadInputError(f"ring-attention: S_kv_per_rank={S_kv_per_rank} must be a "
                               f"multiple of C={C} (prefill; causal: and of T_q={T_q}) or "
                               f"of T_kv={tile} (decode), and n_ranks >= 1")
    if causal and phase != "prefill":
        raise kb.BadInputError("ring-attention: causal=True is a prefill option")
    scale = 1.0 / float(np.sqrt(D))
    kv = {"k": kb.tensor((n_ranks, S_kv_per_rank, D), "bfloat16", init=kb.randn(seed=72)),
          "v": kb.tensor((n_ranks, S_kv_per_rank, D), "bfloat16", init=kb.randn(seed=73))}
    common = {"n": n_ranks, "S": S_kv_per_rank, "C": C, "G": G, "D": D, "scale": scale}
    reference = references.ring_attention(
        n_ranks=n_ranks, phase=phase, T_q=T_q, G=G, D=D, causal=causal, layout=layout)
    if phase == "prefill":
        tokens = S_kv_per_rank if causal else T_q
        extra = {"layout": layout} if causal else {}
        return kb.Case(
            name="ring-attention", kernel=PREFILL_KERNELS[causal, schedule],
            grid=(n_ranks,),
            tensors={"q": kb.tensor((n_ranks, tokens, G, D), "bfloat16", init=kb.randn(seed=71)),
                     **kv, "o": kb.tensor((n_ranks, tokens, G, D), "bfloat16", role="output")},
            params={**common, "T_q": T_q, **extra}, reference=reference)
    return kb.Case(
        name="ring-attention", kernel=ring_decode, grid=(n_ranks,),
        tensors={"q": kb.tensor((G, D), "bfloat16", init=kb.randn(seed=71)), **kv,
                 "o": kb.tensor((G, D), "bfloat16", role="output")},
        params={**common, "C": tile, "combine": combine},
        reference=reference)
