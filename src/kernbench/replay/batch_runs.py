"""Where batching in replay may join positions (replay/batching.py, ADR-0590, ADR-0671):
runs of one class, and runs of two classes taking turns, found with a few vectorised
passes over the window's per-position class ids."""

from __future__ import annotations

import numpy as np

__all__ = ["pairs", "runs"]


def runs(cls: np.ndarray, landing: np.ndarray, deferred: np.ndarray, chunk: int
         ) -> list[tuple[int, int, list[int], bool]]:
    """Runs to batch: ``(start, end, member positions, no member deferred)``; ``cls`` per
    position is a class id (>= 0), -1 (runs alone) or -2 (does nothing: skipped over);
    ``landing``: pending writes land after the position; ``deferred``: its own write waits.
    Members are consecutive in the order of positions that do something, share a class and
    a ``chunk``, and no write lands before the last."""
    q = np.flatnonzero(cls != -2)
    if len(q) < 2:
        return []
    c = cls[q]
    lands = np.concatenate([[0], np.cumsum(landing, dtype=np.int64)])
    # member j joins member j-1: same class, same chunk, no landing in [q[j-1], q[j])
    join = ((c[1:] == c[:-1]) & (c[1:] >= 0) & (q[1:] // chunk == q[:-1] // chunk)
            & (lands[q[1:]] == lands[q[:-1]]))
    edges = np.diff(np.concatenate([[0], join.astype(np.int8), [0]]))
    first, last = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    waits = np.concatenate([[0], np.cumsum(deferred[q], dtype=np.int64)])
    calm = (waits[last + 1] == waits[first]).tolist()
    ql = q.tolist()
    return [(ql[a], ql[b] + 1, ql[a:b + 1], ok)
            for a, b, ok in zip(first.tolist(), last.tolist(), calm, strict=True)]


def pairs(cls: np.ndarray, landing: np.ndarray, taken: np.ndarray, chunk: int
          ) -> list[tuple[int, int, list[int], list[int]]]:
    """Runs of two classes taking turns, X Y X Y ... (at least two of each; as in ``runs``,
    positions doing nothing are skipped over, one ``chunk``, no write landing before the
    last), among positions not ``taken`` by ``runs``: ``(start, end, X members, Y
    members)``. Each PE's next op starting with another PE's store: the stores batch
    apart from the ops."""
    q = np.flatnonzero((cls != -2) & ~taken)
    if len(q) < 4:
        return []
    c = cls[q]
    lands = np.concatenate([[0], np.cumsum(landing, dtype=np.int64)])
    # nothing taken in between: the positions between two untaken ones are idle or taken
    whole = np.concatenate([[0], np.cumsum(cls != -2, dtype=np.int64)])
    link = np.zeros(len(q), bool)  # member j joins member j-2 of its class
    link[2:] = ((c[2:] == c[:-2]) & (c[2:] != c[1:-1]) & (c[2:] >= 0) & (c[1:-1] >= 0)
                & (q[2:] // chunk == q[:-2] // chunk) & (lands[q[2:]] == lands[q[:-2]])
                & (whole[q[2:]] - whole[q[:-2]] == 2))
    edges = np.diff(np.concatenate([[0], link.astype(np.int8), [0]]))
    first, last = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1) - 1
    out: list[tuple[int, int, list[int], list[int]]] = []
    ql, end = q.tolist(), -1
    for a, b in zip((first - 2).tolist(), last.tolist(), strict=True):
        a = max(a, end + 1)  # a run may not share its first member with the one before
        if b - a >= 3:
            out.append((ql[a], ql[b] + 1, ql[a:b + 1:2], ql[a + 1:b + 1:2]))
            end = b
    return out
