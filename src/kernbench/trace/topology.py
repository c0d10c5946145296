"""Link topologies (docs/hardware-model.md): which links a message from one PE to another crosses.

Nodes are the PEs ``0 .. n - 1`` (and, on a ``switch``, the switch itself, node ``n``); a
link is the ordered pair of nodes it joins, one direction of a wire. A route is the
deterministic shortest path: from each node, the next hop is the neighbour one step nearer
the destination with the lowest id. ``ring`` keeps today's neighbour links in both
directions, but routes a message addressed by PE index along the ``next`` links only (a
one-way ring); ``bidir_ring`` routes either way. ``mesh2d`` and ``torus2d`` lay the PEs out
row-major on ``grid(n)``. ``next`` and ``prev`` name the PEs ``p + 1`` and ``p - 1`` (mod
``n``); on a ring they are one hop away.

Both the machine (``record/machine``) and the analyses (a link's bytes for the roofline)
route through this one function.
"""

from __future__ import annotations

import functools
import math
from collections import deque

from kernbench.errors import BadInputError
from kernbench.trace.hw import TOPOLOGIES

#: one direction of a wire: (from node, to node)
Link = tuple[int, int]


def grid(n: int) -> tuple[int, int]:
    """(rows, cols) of ``n`` PEs on a 2-D mesh or torus: the most nearly square factoring,
    rows <= cols (8 -> 2 x 4, 16 -> 4 x 4, 32 -> 4 x 8; a prime count is one row)."""
    rows = max(r for r in range(1, math.isqrt(n) + 1) if n % r == 0)
    return rows, n // rows


def _grid_links(n: int, wrap: bool) -> list[Link]:
    rows, cols = grid(n)
    out: list[Link] = []
    for p in range(n):
        r, c = divmod(p, cols)
        for dr, dc in ((0, 1), (0, -1), (1, 0), (-1, 0)):
            rr, cc = r + dr, c + dc
            if wrap:
                rr, cc = rr % rows, cc % cols
            elif not (0 <= rr < rows and 0 <= cc < cols):
                continue
            q = rr * cols + cc
            if q != p:
                out.append((p, q))
    return out


@functools.cache
def links(topology: str, n: int) -> tuple[Link, ...]:
    """Every link of the topology, sorted."""
    if topology not in TOPOLOGIES:
        raise BadInputError(f"unknown topology {topology!r}: one of {TOPOLOGIES}")
    if n < 1:
        raise BadInputError(f"a topology needs at least one PE, got {n!r}")
    if topology in ("ring", "bidir_ring"):
        found = [(p, (p + 1) % n) for p in range(n)] + [(p, (p - 1) % n) for p in range(n)]
    elif topology == "switch":
        found = [(p, n) for p in range(n)] + [(n, p) for p in range(n)]
    else:
        found = _grid_links(n, wrap=topology == "torus2d")
    return tuple(sorted({link for link in found if link[0] != link[1]}))


@functools.cache
def _next_hops(topology: str, n: int) -> dict[tuple[int, int], int]:
    """(node, destination PE) -> the next node of the route (``ring``: next links only)."""
    usable = links(topology, n)
    if topology == "ring":
        usable = tuple((a, b) for a, b in usable if b == (a + 1) % n)
    into: dict[int, list[int]] = {}
    out: dict[int, list[int]] = {}
    for a, b in usable:
        into.setdefault(b, []).append(a)
        out.setdefault(a, []).append(b)
    hops: dict[tuple[int, int], int] = {}
    for dst in range(n):
        dist = {dst: 0}
        todo = deque([dst])
        while todo:  # distances to dst over the links, backwards
            b = todo.popleft()
            for a in into.get(b, ()):
                if a not in dist:
                    dist[a] = dist[b] + 1
                    todo.append(a)
        for node, d in dist.items():
            if node != dst:
                hops[(node, dst)] = min(b for b in out[node] if dist.get(b) == d - 1)
    return hops


def route(topology: str, n: int, src: int, dst: int) -> tuple[Link, ...]:
    """The links a message from PE ``src`` to PE ``dst`` crosses, in order (none to
    itself)."""
    for pe in (src, dst):
        if not 0 <= pe < n:
            raise BadInputError(f"PE {pe!r} is not on a chip of {n} PEs")
    hops = _next_hops(topology, n)
    path: list[Link] = []
    node = src
    while node != dst:
        nxt = hops[(node, dst)]
        path.append((node, nxt))
        node = nxt
    return tuple(path)


def neighbour(n: int, pe: int, direction: str) -> int:
    """The PE ``"next"`` or ``"prev"`` names from ``pe``."""
    return (pe + 1) % n if direction == "next" else (pe - 1) % n


def link_name(link: Link, n: int) -> str:
    """A link as users read it: ``"pe3->pe4"``, ``"pe3->switch"``."""
    def node(x: int) -> str:
        return "switch" if x == n else f"pe{x}"
    return f"{node(link[0])}->{node(link[1])}"
