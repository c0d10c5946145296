"""GQA fused flash attention (docs/adr/0037, 0061-0063): one KV head per program, the G query
heads of its group folded into the GEMM M dimension with byte-conserving reshapes only.
Layouts (contiguous loads only, so Q/O are stored grouped by KV head):
  decode:  Q, O [H_q, D] (= [H_kv, G, D]);          K, V [H_kv, S_kv, D]
  prefill: Q, O [H_kv, S, G, D] (rows ordered t, g); K, V [H_kv, S, D]
"""

from __future__ import annotations

from typing import Any

import numpy as np

import kernbench as kb
from kernbench import tl
from kernbench.case import references
from kernbench.kernels.flash import NEG_BIG
from kernbench.kernels.tiles import Prefetch, Step, by_query_tile, causal_steps, started

LLAMA3_70B = {"H_q": 64, "H_kv": 8, "D": 128}


def online_softmax_step(q, kt, vt, m, l, acc, scale, mask=None):  # noqa: E741
    """Fold one K/V tile into the running (m, l, acc); call inside a scratch_scope."""
    s = tl.dot(q, tl.trans(kt)) * scale
    if mask is not None:
        s = s + mask
    m_new = tl.maximum(m, tl.max(s, axis=1, keepdims=True))
    p = tl.exp(s - m_new)
    alpha = tl.exp(m - m_new)
    tl.copy_to(l, l * alpha + tl.sum(p, axis=1, keepdims=True))
    tl.copy_to(acc, acc * alpha + tl.dot(p.to(tl.bfloat16), vt))
    tl.copy_to(m, m_new)


class Lookahead:
    """The raw scores Q·Kᵀ of the next K/V tile, computed while this tile's softmax runs
    (FA3's intra-warpgroup overlap, docs/adr/0530) and kept in one of two persistent f32
    buffers per shape (``Prefetch`` role "s", reserved by the kernel). ``issue`` queues the
    next tile's GEMM before this tile's softmax (its copy is issued by ``keep`` after this
    tile's P·V); ``later`` defers it to ``flush``, after this tile's scope (for K/V that are
    still arriving: the GEMM would hold up the P·V behind it on the engine)."""

    def __init__(self, buf: Prefetch) -> None:
        self.buf = buf
        self.ready: Any = None
        self._early: tuple | None = None
        self._late: tuple | None = None

    def scores(self, q, kt):
        """This tile's raw scores: the buffer kept by the step before, else the GEMM now."""
        s, self.ready = self.ready, None
        return s if s is not None else tl.dot(q, tl.trans(kt))

    def _into(self, s, q, kt) -> None:
        self.ready = self.buf.take("s", (q.shape[0], kt.shape[0]))
        tl.copy_to(self.ready, s)

    def issue(self, q, kt) -> None:
        """Queue the next tile's Q·Kᵀ now (inside this tile's scratch scope)."""
        self._early = (tl.dot(q, tl.trans(kt)), q, kt)

    def later(self, q, kt) -> None:
        """Compute the next tile's Q·Kᵀ at ``flush``."""
        self._late = (q, kt)

    def keep(self) -> None:
        """The scores ``issue``d this step into their buffer (still inside its scope)."""
        if self._early is not None:
            self._into(*self._early)
            self._early = None

    def flush(self) -> None:
        """The scores deferred by ``later``: GEMM and copy in a scope of their own."""
        if self._late is not None:
            q, kt = self._late
            self._late = None
            with tl.scratch_scope():
                self._into(tl.dot(q, tl.trans(kt)), q, kt)


def pipelined_softmax_step(s_raw, vt, m, l, acc, scale, ahead: Lookahead,  # noqa: E741
                           mask=None):
    """``online_softmax_step`` in pipelined issue order (call inside a scratch_scope):
    ``s_raw`` is this tile's Q·Kᵀ, the next tile's is ``ahead``'s. The P·V GEMM adds the
    rescaled accumulator itself (``dot(acc=)``), and the MATH work that does not need P·V
    is issued after it, so the GEMMs run under the softmax: the MATH engine does the serial
    step's work minus its ``acc + pv`` plus one copy of the next tile's scores."""
    s = s_raw * scale
    if mask is not None:
        s = s + mask
    m_new = tl.maximum(m, tl.max(s, axis=1, keepdims=True))
    p = tl.exp(s - m_new)
    alpha = tl.exp(m - m_new)
    pv = tl.dot(p.to(tl.bfloat16), vt, acc=acc * alpha)
    tl.copy_to(l, l * alpha + tl.sum(p, axis=1, keepdims=True))
    tl.copy_to(m, m_new)
    tl.copy_to(acc, pv)
    ahead.keep()


def store_normalized(buf: Prefetch, ptr, acc, l, shape: tuple[int, ...]) -> None:  # noqa: E741
    """``tl.store(ptr, acc / l)`` through a persistent f32 buffer (``Prefetch`` role "o",
    reserved by the kernel): under async engines the store then reads no byte that the
    enclosing scope rewinds, so the next query tile's first ops need not wait for it."""
    out = buf.take("o", tuple(acc.shape))
    tl.copy_to(out, acc / l)
    tl.store(ptr, tl.reshape(out, shape))


def running_state(rows: int, d: int):
    """The persistent (m, l, acc) of a flash sweep, allocated outside every scope."""
    return (tl.full((rows, 1), NEG_BIG, tl.float32), tl.zeros((rows, 1), tl.float32),
            tl.zeros((rows, d), tl.float32))


def double_buffered_kv(kbase, vbase, tiles: int, rows: int, d: int):
    """Yield the (K, V) tiles of a sweep, [rows, d] bf16 each. Before tile j is yielded, the
    loads of tile j+1 are in flight into the other of two persistent buffer pairs (the ones
    tile j-1 used), so they overlap the compute on tile j."""
    tile = rows * d
    kbuf = [tl.load(kbase, (rows, d), tl.bfloat16)]
    vbuf = [tl.load(vbase, (rows, d), tl.bfloat16)]
    for j in range(tiles):
        if j + 1 < tiles:
            nk, nv = kbase + (j + 1) * tile, vbase + (j + 1) * tile
            if len(kbuf) < 2:
                kbuf.append(tl.load(nk, (rows, d), tl.bfloat16))
                vbuf.append(tl.load(nv, (rows, d), tl.bfloat16))
            else:
                tl.load(nk, (rows, d), tl.bfloat16, out=kbuf[(j + 1) % 2])
                tl.load(nv, (rows, d), tl.bfloat16, out=vbuf[(j + 1) % 2])
        yield kbuf[j % 2], vbuf[j % 2]


@kb.kernel
def gqa_decode_lazy(q, k, v, o, *, S_kv: int, T_kv: int, G: int, D: int, scale: float):  # noqa: N803
    """Decode: K/V streamed by double-buffered lazy loads into persistent buffers. The first
    two tiles' loads are issued before the running state is filled, so the read channel
    starts with the kernel and never waits on the MATH engine."""
    h = tl.program_id(0)
    qh = tl.load(q + h * G * D, (G, D), tl.bfloat16)
    sweep = started(double_buffered_kv(k + h * S_kv * D, v + h * S_kv * D, S_kv // T_kv,
                                       T_kv, D))  # the loads of tiles 0 and 1 are issued
    m, l, acc = running_state(G, D)  # noqa: E741
    for kt, vt in sweep:
        with tl.scratch_scope():
            online_softmax_step(qh, kt, vt, m, l, acc, scale)
    tl.store(o + h * G * D, acc / l)


@kb.kernel
def gqa_decode_composite(q, k, v, o, *, S_kv: int, T_kv: int, G: int, D: int,  # noqa: N803
                         scale: float):
    """Decode: K/V streamed by the PE scheduler (composite GEMMs over tl.ref operands), one
    [T_kv, D] chunk of K and of V per step, each double-buffered through the staging area."""
    h = tl.program_id(0)
    qh = tl.load(q + h * G * D, (G, D), tl.bfloat16)
    m, l, acc = running_state(G, D)  # noqa: E741
    for j in range(S_kv // T_kv):
        with tl.scratch_scope():
            row = (h * S_kv + j * T_kv) * D
            s = tl.composite(op="gemm", a=qh, b=tl.ref(k + row, (T_kv, D), tl.bfloat16),
                             trans_b=True) * scale
            m_new = tl.maximum(m, tl.max(s, axis=1, keepdims=True))
            p = tl.exp(s - m_new)
            alpha = tl.exp(m - m_new)
            tl.copy_to(l, l * alpha + tl.sum(p, axis=1, keepdims=True))
            pv = tl.composite(op="gemm", a=p.to(tl.bfloat16),
                              b=tl.ref(v + row, (T_kv, D), tl.bfloat16))
            tl.copy_to(acc, acc * alpha + pv)
            tl.copy_to(m, m_new)
    tl.store(o + h * G * D, acc / l)


# The numpy references of the GQA cases: kernbench/case/references.py, one definition that the
# case factories below and replay share. Replay looks a built-in case's reference up there
# by name, so verifying a trace never imports tl or this module
# (docs/adr/0005-isolated-replay.md). The names stay importable from here for callers that
# used them before the move.
decode_reference = references.decode_reference
prefill_reference = references.prefill_reference
attention_reference = references.attention_reference


DECODE_KERNELS = {"lazy": gqa_decode_lazy, "composite": gqa_decode_composite}


@kb.register_case("gqa-decode")
def gqa_decode_case(S_kv: int = 32768, T_kv: int = 256, H_q: int = 64, H_kv: int = 8,  # noqa: N803
                    D: int = 128, stream: str = "lazy") -> kb.Case:
    """GQA decode (T_q = 1), one KV head per program/PE, Llama3-70B shapes by default."""
    if stream not in DECODE_KERNELS:
        raise kb.BadInputError(f"gqa-decode: stream {stream!r} is not one of "
                               f"{sorted(DECODE_KERNELS)}")
    if H_q % H_kv or S_kv % T_kv:
        raise kb.BadInputError(f"gqa-decode: need H_q % H_kv == 0 and S_kv % T_kv == 0, got "
                               f"H_q={H_q} H_kv={H_kv} S_kv={S_kv} T_kv={T_kv}")
    scale = 1.0 / float(np.sqrt(D))
    return kb.Case(
        name="gqa-decode", kernel=DECODE_KERNELS[stream], grid=(H_kv,),
        tensors={"q": kb.tensor((H_q, D), "bfloat16", init=kb.randn(seed=41)),
                 "k": kb.tensor((H_kv, S_kv, D), "bfloat16", init=kb.randn(seed=42)),
                 "v": kb.tensor((H_kv, S_kv, D), "bfloat16", init=kb.randn(seed=43)),
                 "o": kb.tensor((H_q, D), "bfloat16", role="output")},
        params={"S_kv": S_kv, "T_kv": T_kv, "G": H_q // H_kv, "D": D, "scale": scale},
        reference=references.gqa_decode(D=D),
    )


def causal_mask(q0: int, k0: int, t_q: int, t_kv: int, g: int):
    """Additive causal mask for rows (t, g) x keys: built once for T_q rows, then replicated
    across the G heads of the group with tl.broadcast (ADR-0061)."""
    rows = tl.reshape(tl.arange(q0, q0 + t_q), (t_q, 1))
    cols = tl.reshape(tl.arange(k0, k0 + t_kv), (1, t_kv))
    mask = tl.where(cols <= rows, 0.0, NEG_BIG)  # [T_q, T_kv]
    wide = tl.broadcast(tl.reshape(mask, (t_q, 1, t_kv)), (t_q, g, t_kv))
    return tl.reshape(wide, (t_q * g, t_kv))


@kb.kernel
def gqa_prefill(q, k, v, o, *, S: int, T_q: int, T_kv: int, G: int, D: int,  # noqa: N803
                scale: float):
    """Causal prefill: program h sweeps its query tiles, each against the KV tiles up to the
    diagonal only (``causal_steps``: fully masked tiles are never loaded), the mask built on
    the diagonal tiles only. The sweep is one flat sequence of (query tile, KV tile) steps:
    before step n is computed the loads of step n+1 (its K, V, and Q when it opens a query
    tile) are in flight into the other buffer of each pair, across query-tile boundaries."""
    h = tl.program_id(0)
    qbase, kbase, vbase = q + h * S * G * D, k + h * S * D, v + h * S * D
    steps = list(causal_steps(S, T_q, T_kv))
    buf = Prefetch()
    for st in steps:  # every tile shape (the last tiles may be short), before any scope
        buf.reserve("q", (st.tq, G, D))
        buf.reserve("k", (st.tkv, D))
        buf.reserve("v", (st.tkv, D))

    def issue(st: Step) -> tuple:
        qt = buf.load("q", qbase + st.q0 * G * D, (st.tq, G, D)) if st.first else None
        return (qt, buf.load("k", kbase + st.k0 * D, (st.tkv, D)),
                buf.load("v", vbase + st.k0 * D, (st.tkv, D)))

    ahead = iter(steps[1:])
    nxt = issue(steps[0])
    for q0, tile in by_query_tile(steps):
        with tl.scratch_scope():  # per query tile
            for st in tile:
                cur = nxt
                following = next(ahead, None)
                nxt = issue(following) if following is not None else ()
                if st.first:
                    rows = st.tq * G
                    qt = tl.reshape(cur[0], (rows, D))
                    m, l, acc = running_state(rows, D)  # noqa: E741
                with tl.scratch_scope():  # per K/V tile
                    mask = causal_mask(q0, st.k0, st.tq, st.tkv, G) if st.needs_mask else None
                    online_softmax_step(qt, cur[1], cur[2], m, l, acc, scale, mask)
            tl.store(o + (h * S + q0) * G * D, tl.reshape(acc / l, (st.tq, G, D)))


@kb.kernel
def gqa_prefill_pipelined(q, k, v, o, *, S: int, T_q: int, T_kv: int, G: int,  # noqa: N803
                          D: int, scale: float):
    """Causal prefill, software-pipelined (docs/adr/0530): the steps of ``gqa_prefill``, but
    the Q·Kᵀ of step n+1 is issued before the softmax of step n (``Lookahead``), so under
    async engines the GEMM runs under the softmax. Q and K are loaded two steps ahead (the
    GEMM of step n+1 needs them during step n), V one step ahead."""
    h = tl.program_id(0)
    qbase, kbase, vbase = q + h * S * G * D, k + h * S * D, v + h * S * D
    steps = list(causal_steps(S, T_q, T_kv))
    buf = Prefetch()
    for st in steps:  # every tile shape (the last tiles may be short), before any scope
        buf.reserve("q", (st.tq, G, D))
        buf.reserve("k", (st.tkv, D))
        buf.reserve("v", (st.tkv, D))
        buf.reserve("s", (st.tq * G, st.tkv), tl.float32)
        buf.reserve("o", (st.tq * G, D), tl.float32, ways=1)
    qk: list[tuple] = []  # (Q rows, K tile) of step i
    vs: list = []

    def issue_qk(i: int) -> None:
        st = steps[i]
        qt = (tl.reshape(buf.load("q", qbase + st.q0 * G * D, (st.tq, G, D)), (st.tq * G, D))
              if st.first else qk[i - 1][0])
        qk.append((qt, buf.load("k", kbase + st.k0 * D, (st.tkv, D))))

    def issue_v(i: int) -> None:
        vs.append(buf.load("v", vbase + steps[i].k0 * D, (steps[i].tkv, D)))

    for i in range(min(2, len(steps))):
        issue_qk(i)
    issue_v(0)
    ahead = Lookahead(buf)
    with tl.scratch_scope():  # step 0's scores, before step 0 reloads its K buffer
        ahead.issue(*qk[0])
        ahead.keep()
    i = 0
    for q0, tile in by_query_tile(steps):
        with tl.scratch_scope():  # per query tile
            for st in tile:
                if i + 2 < len(steps):
                    issue_qk(i + 2)
                if i + 1 < len(steps):
                    issue_v(i + 1)
                if st.first:
                    m, l, acc = running_state(st.tq * G, D)  # noqa: E741
                with tl.scratch_scope():  # per K/V tile
                    s_raw = ahead.scores(*qk[i])  # kept one step ago
                    if i + 1 < len(steps):
                        ahead.issue(*qk[i + 1])
                    mask = causal_mask(q0, st.k0, st.tq, st.tkv, G) if st.needs_mask else None
                    pipelined_softmax_step(s_raw, vs[i], m, l, acc, scale, ahead, mask)
                i += 1
            store_normalized(buf, o + (h * S + q0) * G * D, acc, l, (st.tq, G, D))


#: schedule -> the causal prefill kernel (docs/adr/0530)
PREFILL_KERNELS = {"serial": gqa_prefill, "pipelined": gqa_prefill_pipelined}


@kb.register_case("gqa-prefill")
def gqa_prefill_case(S: int = 8192, T_q: int = 16, T_kv: int = 128, H_q: int = 64,  # noqa: N803
                     H_kv: int = 8, D: int = 128, schedule: str = "serial") -> kb.Case:
    """Causal GQA prefill, tiled over queries and keys (S need not be a multiple of either
    tile), one KV head per program; ``schedule`` "pipelined" overlaps Q·Kᵀ with softmax."""
    if schedule not in PREFILL_KERNELS:
        raise kb.BadInputError(f"gqa-prefill: schedule {schedule!r} is not one of "
                               f"{sorted(PREFILL_KERNELS)}")
    if H_q % H_kv or min(S, T_q, T_kv) < 1:
        raise kb.BadInputError(f"gqa-prefill: need H_q % H_kv == 0 and S, T_q, T_kv >= 1, got "
                               f"H_q={H_q} H_kv={H_kv} S={S} T_q={T_q} T_kv={T_kv}")
    g = H_q // H_kv
    scale = 1.0 / float(np.sqrt(D))
    return kb.Case(
        name="gqa-prefill", kernel=PREFILL_KERNELS[schedule], grid=(H_kv,),
        tensors={"q": kb.tensor((H_kv, S, g, D), "bfloat16", init=kb.randn(seed=51)),
                 "k": kb.tensor((H_kv, S, D), "bfloat16", init=kb.randn(seed=52)),
                 "v": kb.tensor((H_kv, S, D), "bfloat16", init=kb.randn(seed=53)),
                 "o": kb.tensor((H_kv, S, g, D), "bfloat16", role="output")},
        params={"S": S, "T_q": T_q, "T_kv": T_kv, "G": g, "D": D, "scale": scale},
        reference=references.gqa_prefill(D=D),
    )
