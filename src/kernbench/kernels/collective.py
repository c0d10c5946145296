"""The cross-PE reduction of a tensor-parallel layer: a ring reduce-scatter over IPCQ, with
the residual add folded into its last step (docs/llama3-70b.md, ADR-0921).

After a row-parallel GEMM (the output and down projections) PE ``p`` holds a partial sum
``partial[p]`` of the whole ``[M, H]`` output. The reduction treats each partial as one flat
buffer of ``M * H`` elements cut into ``n`` chunks (as NCCL cuts a buffer: the sum is
elementwise, so any cut is a valid one) and runs the ring algorithm: at step ``s`` PE ``p``
sends its running sum of chunk ``(p - s) mod n`` to the next PE and receives chunk
``(p - s - 1) mod n`` from the previous one, adding its own partial of it. After ``n - 1``
steps PE ``p`` holds the whole sum of chunk ``(p + 1) mod n``; it adds the residual and
stores that chunk of the layer's output. The messages are bfloat16, as a bf16 all-reduce
sends them (each running sum is rounded once per hop); chunks longer than ``block``
elements go round the ring block by block.

``ring_reduce_scatter`` needs neighbour links only (the ring presets). On a topology that
routes a message to any PE (``ahbm-v3``'s torus, a switch), ``direct_reduce_scatter`` sends
each chunk straight to the PE that owns it: every PE posts its ``n - 1`` receives, sends its
``n - 1`` partial chunks and sums what it receives — one message deep instead of ``n - 1``,
no rounding on the way (the partials are summed in float32 in the order ``p + 1, p + 2, ...``).

There is no all-gather: the PEs share one HBM address space, so the next kernel reads the
whole output where the chunks were stored.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import kernbench as kb
from kernbench import tl


@kb.kernel
def ring_reduce_scatter(partial, residual, out, *, n: int, L: int, block: int):
    p = tl.program_id(0)
    chunks = [(p - s) % n for s in range(n)]
    buffers: dict[int, tuple] = {}  # per block width: the running sums sent and the
    for b0 in range(0, L, block):   # messages received (two each, in turn), the f32 sum
        w = min(block, L - b0)
        if w not in buffers:
            buffers[w] = ([tl.zeros((w,), tl.bfloat16) for _ in range(4)],
                          tl.zeros((w,), tl.float32))
        (sum_a, sum_b, in_a, in_b), total = buffers[w]
        with tl.scratch_scope():
            own = [tl.load(partial + (p * n + c) * L + b0, (w,), tl.bfloat16) for c in chunks]
            res = tl.load(residual + chunks[-1] * L + b0, (w,), tl.bfloat16)
            run = own[0]
            for s in range(1, n):
                got = tl.recv_async("prev", (w,), tl.bfloat16, out=(in_a, in_b)[s % 2])
                tl.send("next", run)
                with tl.scratch_scope():  # the float32 sum's temporaries
                    tl.copy_to(total, got.to(tl.float32) + own[s].to(tl.float32))
                    if s < n - 1:
                        run = (sum_a, sum_b)[s % 2]
                        tl.copy_to(run, total.to(tl.bfloat16))
            tl.store(out + chunks[-1] * L + b0, total + res.to(tl.float32))


@kb.kernel
def direct_reduce_scatter(partial, residual, out, *, n: int, L: int, block: int):
    p = tl.program_id(0)
    for b0 in range(0, L, block):
        w = min(block, L - b0)
        with tl.scratch_scope():
            others = [(p + s) % n for s in range(1, n)]
            got = [tl.recv_async(q, (w,), tl.bfloat16) for q in others]
            for q in others:
                tl.send(q, tl.load(partial + (p * n + q) * L + b0, (w,), tl.bfloat16))
            run = tl.load(partial + (p * n + p) * L + b0, (w,), tl.bfloat16).to(tl.float32)
            res = tl.load(residual + p * L + b0, (w,), tl.bfloat16)
            for g in got:
                with tl.scratch_scope():  # the running sum in place: O(1) float32 blocks
                    tl.copy_to(run, run + g.to(tl.float32))
            tl.store(out + p * L + b0, run + res.to(tl.float32))


ALGORITHMS = {"ring": ring_reduce_scatter, "direct": direct_reduce_scatter}


def _f32(x: np.ndarray) -> np.ndarray:
    return np.asarray(x).astype(np.float32)


def _bf16(x: np.ndarray) -> np.ndarray:
    """float32 rounded to bfloat16 (round to nearest even) and back, as the kernel's casts."""
    bits = np.ascontiguousarray(x, np.float32).view(np.uint32)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & np.uint32(0xFFFF0000)
    return rounded.astype(np.uint32).view(np.float32)


def reduce_scatter_reference(n: int, algorithm: str = "ring") -> Any:
    """``out = residual + sum_p partial[p]``, summed in the kernel's order with its rounding:
    ring: chunk ``c`` starts at PE ``c`` and gains PE ``c + s``'s partial at hop ``s``
    (rounded to bfloat16 for each hop but the last); direct: PE ``c`` sums its own, then
    ``c + 1``'s, ... in float32."""
    hops = algorithm == "ring"

    def reference(partial: np.ndarray, residual: np.ndarray, **_: Any) -> dict[str, Any]:
        parts = _f32(partial).reshape(n, n, -1)  # [rank, chunk, L]
        res = _f32(residual).reshape(n, -1)
        out = np.empty_like(res)
        for c in range(n):
            run = parts[c, c]
            for s in range(1, n):
                total = run + parts[(c + s) % n, c]
                run = _bf16(total) if hops and s < n - 1 else total
            out[c] = run + res[c]
        return {"out": out.reshape(np.shape(residual))}

    return reference


def reduce_scatter_case(M: int = 1, H: int = 8192, ranks: int = 8,  # noqa: N803
                        block: int = 16384, algorithm: str = "ring", seed: int = 0
                        ) -> kb.Case:
    """Reduce-scatter of ``ranks`` partial ``[M, H]`` sums plus the residual over IPCQ, one
    program per PE (the cross-PE reduction after a row-parallel GEMM): round the ``ring``, or
    ``direct`` to each chunk's PE (routed topologies)."""
    if min(M, H, ranks, block) < 1 or (M * H) % ranks:
        raise kb.BadInputError(f"reduce-scatter: need positive sizes and M*H divisible by "
                               f"ranks, got M={M} H={H} ranks={ranks} block={block}")
    if algorithm not in ALGORITHMS:
        raise kb.BadInputError(f"reduce-scatter: algorithm {algorithm!r} is not one of "
                               f"{sorted(ALGORITHMS)}")
    return kb.Case(
        name="llama-reduce-scatter", kernel=ALGORITHMS[algorithm], grid=(ranks,),
        tensors={"partial": kb.tensor((ranks, M, H), "bfloat16",
                                      init=kb.randn(seed=seed + 71)),
                 "residual": kb.tensor((M, H), "bfloat16", init=kb.randn(seed=seed + 72)),
                 "out": kb.tensor((M, H), "bfloat16", role="output")},
        params={"n": ranks, "L": M * H // ranks, "block": block},
        reference=reduce_scatter_reference(ranks, algorithm),
    )
