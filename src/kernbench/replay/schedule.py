"""When each write lands, computed before the run from timestamps alone, vectorised.

A write of the op at position k (replay order) lands before the first position p > k whose
t_start is >= its t_end (p = n: after the last op); several landing at one point land in
(t_end, op_id) order: exactly a heap of pending writes popped before each op. A write whose
memory sees no other event (a read, a rewind, another landing) between its op's run and its
landing lands at once instead: nothing can tell, and the loop keeps no pending value.
"""

from __future__ import annotations

import numpy as np

#: position flags: the op's own write waits for a later landing point; writes land after it
DEFERRED, LANDING = 1, 2


def schedule(t_start: np.ndarray, t_end: np.ndarray, op_id: np.ndarray, writes: np.ndarray,
             touch: tuple[np.ndarray, np.ndarray] | None = None, out_mem: np.ndarray | None = None,
             last: bool = True
             ) -> tuple[np.ndarray, dict[int, list[int]], np.ndarray, np.ndarray, np.ndarray]:
    """For ops in replay order (``t_start`` sorted): flags per position; position k ->
    positions whose writes land right after op k ran, in landing order, when that is not
    just op k's own write landing first; and, per writer position (ascending), the position
    after which its write lands and its rank there (1, 2, ...).

    A write of the op at position k lands before the first position p > k whose t_start
    is >= its t_end (p = n: after the last op); writes landing at one p in (t_end, op_id)
    order. This is exactly a heap of pending writes popped before each op.

    ``touch``: (position, memory id) of every memory each op reads or rewinds at its run;
    ``out_mem``: the memory id each position writes. Given both, a write lands at once when
    nothing else happens to its memory before it would land.

    ``last`` False: this is a window of a longer run; a write that would land after its last
    op stays pending (flag DEFERRED, in no ``after`` list, ``land_k`` = -2) and lands in a
    later window."""
    n = len(t_start)
    writers = np.flatnonzero(writes)
    land = np.maximum(np.searchsorted(t_start, t_end[writers], side="left"), writers + 1)
    by = np.lexsort((op_id[writers], t_end[writers], land))
    land, w = land[by], writers[by]
    first = np.ones(len(w), bool)
    first[1:] = land[1:] != land[:-1]
    at = np.arange(len(w))
    rank = at - np.maximum.accumulate(np.where(first, at, 0)) if len(w) else at
    beyond = np.zeros(len(w), bool) if last else land >= n
    now = first & (w == land - 1) & ~beyond
    if touch is not None and out_mem is not None and len(w):
        now |= _unobserved(touch, out_mem, w, land - 1, rank + 1) & ~beyond
    flags = np.zeros(n, np.int8)
    later = w[~now]
    flags[later] |= DEFERRED
    after: dict[int, list[int]] = {}
    lands = ~now & ~beyond
    for k, j in zip((land[lands] - 1).tolist(), w[lands].tolist(), strict=True):  # in order
        after.setdefault(k, []).append(j)
    if after:
        flags[np.fromiter(after, np.int64, len(after))] |= LANDING
    land_k, land_sub = np.empty(len(w), np.int64), np.empty(len(w), np.int64)
    land_k[by], land_sub[by] = np.where(beyond, -2, land - 1), rank + 1
    return flags, after, writers, land_k, land_sub


def _unobserved(touch: tuple[np.ndarray, np.ndarray], out_mem: np.ndarray, w: np.ndarray,
                land_k: np.ndarray, land_sub: np.ndarray) -> np.ndarray:
    """Per write (writer positions ``w``, landing after op ``land_k`` at rank ``land_sub``):
    whether no event on its memory lies strictly between its op's run and its landing.

    Events: runs reading or rewinding the memory at (k, 0), landings at (land_k, land_sub).
    Moving such writes to just after their run is exact jointly: a moved write's window
    held no event of its memory, and a later write moved into it would have had this
    write's landing in its own window."""
    span = int(land_sub.max()) + 1
    mem = out_mem[w]
    big = (int(land_k.max()) + 2) * span
    pos, mids = touch
    keys = np.sort(np.concatenate([mids * big + pos * span, mem * big + land_k * span
                                   + land_sub]))
    lo = mem * big + w * span
    hi = mem * big + land_k * span + land_sub
    inside = np.searchsorted(keys, hi, side="left") - np.searchsorted(keys, lo, side="right")
    return (inside == 0) & (mem >= 0)
