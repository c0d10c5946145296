"""ring-attention decode: KV stays in place, every rank sweeps its block into a partial
(m, l, O), and the partials are combined over the ring's neighbour links (docs/adr/0511).

combine="tree" (default): a reduction tree rooted at rank 0 whose two branches run both ways
  round the ring (ranks 1..n//2 send towards "prev", the others towards "next"); each rank
  merges what its upstream neighbour sends before sending once. Depth: n // 2 link hops, the
  ring's radius, which no combine over neighbour links can beat. n - 1 partials in all.
combine="chain": the all-gather of ADR-0040: n - 1 rounds, every rank forwards the partial
  it last received and merges each one; n (n - 1) partials in all.

Combines that address PEs by index (docs/adr/0750, docs/adr/0751), for topologies
where a message to any PE is routed (switch, torus2d, mesh2d, bidir_ring):
combine="direct": every rank sends its partial straight to rank 0, which posts all n - 1
  receives first and merges them in rank order. One message time deep (the route's hops).
combine="binomial": a binomial tree by PE index: in level k (k = 0 .. log2 n - 1) rank r
  with r mod 2^(k+1) = 2^k sends its merged partial to r - 2^k. log2 n levels, each rank
  merging at most log2 n partials.

A partial is three messages (m [G, 1], l [G, 1], O [G, D], float32). Rank 0 writes O.
"""

from __future__ import annotations

from collections.abc import Callable

import kernbench as kb
from kernbench import tl
from kernbench.kernels.gqa import double_buffered_kv, online_softmax_step, running_state


def merge_partial(m, l, acc, got) -> None:  # noqa: E741
    """Fold a received partial ``got = (m', l', O')`` into the running (m, l, acc)."""
    with tl.scratch_scope():
        m_new = tl.maximum(m, got[0])
        a, b = tl.exp(m - m_new), tl.exp(got[0] - m_new)
        tl.copy_to(l, l * a + got[1] * b)
        tl.copy_to(acc, acc * a + got[2] * b)
        tl.copy_to(m, m_new)


def _post(direction: str | int, state) -> list:
    """Post the receives of one partial (m, l, O): three messages, one more than a depth-2
    queue holds, so the sender's third send waits until they are posted."""
    return [tl.recv_async(direction, h.shape, tl.float32) for h in state]


def tree_links(r: int, n: int) -> tuple[list[str], str | None]:
    """Rank ``r``'s place in the tree: the directions it receives partials from, and the
    direction it sends its merged partial to (None for the root, rank 0)."""
    half = n // 2
    if r == 0:
        return (["next"] if n > 1 else []) + (["prev"] if n - 1 > half else []), None
    if r <= half:  # the branch 1..half, towards "prev"
        return (["next"] if r < half else []), "prev"
    return (["prev"] if r > half + 1 else []), "next"  # the branch half+1..n-1


def combine_tree(r: int, n: int, m, l, acc) -> None:  # noqa: E741
    sources, sink = tree_links(r, n)
    with tl.scratch_scope():  # every receive posted before the first merge waits on one
        for got in [_post(direction, (m, l, acc)) for direction in sources]:
            merge_partial(m, l, acc, got)
    if sink is not None:
        for h in (m, l, acc):
            tl.send(sink, h)


def combine_chain(r: int, n: int, m, l, acc) -> None:  # noqa: E741
    part = [tl.zeros(h.shape, tl.float32) for h in (m, l, acc)]
    for p, h in zip(part, (m, l, acc), strict=True):
        tl.copy_to(p, h)
    got = [tl.zeros(h.shape, tl.float32) for h in part]
    for _ in range(n - 1):
        for g in got:  # post the receives first: three sends would fill a depth-2 queue
            tl.recv_async("prev", g.shape, tl.float32, out=g)
        for h in part:
            tl.send("next", h)
        merge_partial(m, l, acc, got)
        for h, g in zip(part, got, strict=True):
            tl.copy_to(h, g)


def _gather(sources: list, sink: int | None, m, l, acc) -> None:  # noqa: E741
    """Merge the partials of ``sources`` (PE indices, every receive posted before the first
    merge waits on one) into (m, l, acc), then send the result to PE ``sink`` (None: keep
    it in l and acc). The running state is chained through new handles, not copied back per
    partial: where the PE's issue port binds (``issue_ns``), every op counts."""
    with tl.scratch_scope():
        run = (m, l, acc)
        for got in [_post(s, run) for s in sources]:
            m_new = tl.maximum(run[0], got[0])
            a, b = tl.exp(run[0] - m_new), tl.exp(got[0] - m_new)
            run = (m_new, run[1] * a + got[1] * b, run[2] * a + got[2] * b)
        if sink is not None:
            for h in run:
                tl.send(sink, h)
        elif sources:  # the root: only l and acc are read after
            tl.copy_to(l, run[1])
            tl.copy_to(acc, run[2])


def combine_direct(r: int, n: int, m, l, acc) -> None:  # noqa: E741
    _gather(list(range(1, n)) if r == 0 else [], None if r == 0 else 0, m, l, acc)


def binomial_links(r: int, n: int) -> tuple[list[int], int | None]:
    """Rank ``r``'s place in the binomial tree by PE index: the ranks it merges, nearest
    (earliest) first, and the rank it sends to (None for the root, rank 0)."""
    sources, step = [], 1
    while r % (2 * step) == 0 and step < n:
        if r + step < n:
            sources.append(r + step)
        step *= 2
    return sources, (r - step if r else None)


def combine_binomial(r: int, n: int, m, l, acc) -> None:  # noqa: E741
    _gather(*binomial_links(r, n), m, l, acc)


#: combine name -> how the partials of (rank, n_ranks) reach rank 0
COMBINES: dict[str, Callable[..., None]] = {"tree": combine_tree, "chain": combine_chain,
                                            "direct": combine_direct,
                                            "binomial": combine_binomial}


@kb.kernel
def ring_decode(q, k, v, o, *, n: int, S: int, C: int, G: int, D: int, scale: float,  # noqa: N803
                combine: str):
    r = tl.program_id(0)
    qh = tl.load(q, (G, D), tl.bfloat16)
    m, l, acc = running_state(G, D)  # noqa: E741
    for kt, vt in double_buffered_kv(k + r * S * D, v + r * S * D, S // C, C, D):
        with tl.scratch_scope():
            online_softmax_step(qh, kt, vt, m, l, acc, scale)
    COMBINES[combine](r, n, m, l, acc)
    if r == 0:
        tl.store(o, acc / l)
