"""Read validity decided before the run, exactly, on elementary byte intervals.

Every event that reads, writes or rewinds a checked memory (TCM, staging, IPCQ) covers a byte
range; the boundaries of all those ranges cut each memory into elementary intervals that are
always wholly valid or wholly invalid. Events happen in the engine's schedule order (op runs
at ``(k, 0)``, landings after op k at ``(k, 1..)``), which depends on timestamps alone, so
one sort by (interval, time) tells, for every read of every interval, whether the last
write-or-rewind before it was a write (valid), a rewind (invalid) or absent (the memory's
initial valid map decides). ``Plan.ok``: no op reads an invalid byte; the engine then skips
the per-byte valid map in its loop and ``Plan.settle`` leaves the valid maps as the loop
would have. Otherwise the engine runs its checking loop, which reports the read."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from itertools import chain
from typing import Any

import numpy as np

from kernbench.replay.store import Memory
from kernbench.trace.columns import distinct

READ, WRITE, REWIND = 0, 1, 2


def rewind_of(step: Any) -> tuple[Memory, int, int] | None:
    """(memory, lo, hi) a scope exit's step invalidates, clipped like ``Memory.invalidate``."""
    if isinstance(step, partial) and getattr(step.func, "__func__", None) is Memory.invalidate:
        mem: Memory = step.func.__self__  # type: ignore[attr-defined]
        lo, hi = step.args
        return mem, max(int(lo), 0), min(int(hi), mem.size)
    return None


def expand(lists: list[list[int]], sig: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(position, item) for every item of ``lists[sig[k]]`` at every position k."""
    lens = np.fromiter(map(len, lists), np.int64, len(lists)) if lists else np.zeros(1, np.int64)
    flat = np.fromiter(chain.from_iterable(lists), np.int64)
    counts = lens[sig]
    first = np.cumsum(lens) - lens
    pos = np.repeat(np.arange(len(sig)), counts)
    within = np.arange(len(pos)) - np.repeat(np.cumsum(counts) - counts, counts)
    items = flat[first[sig].repeat(counts) + within] if len(pos) else pos
    return pos, items


@dataclass
class Plan:
    ok: bool
    mems: dict[int, Memory]
    stride: int
    bounds: np.ndarray
    #: write/rewind events sorted by (interval, time): interval, position k, kind
    last_iv: np.ndarray
    last_k: np.ndarray
    last_kind: np.ndarray

    def settle(self, executed: int) -> None:
        """Set each interval's valid bytes as the events of the first ``executed`` ops (and
        the landings after them) left them."""
        keep = self.last_k < executed
        iv, kind = self.last_iv[keep], self.last_kind[keep]
        if not len(iv):
            return
        end = np.ones(len(iv), bool)
        end[:-1] = iv[1:] != iv[:-1]
        for j, kd in zip(iv[end].tolist(), kind[end].tolist(), strict=True):
            g0, g1 = int(self.bounds[j]), int(self.bounds[j + 1])
            mem = self.mems[g0 // self.stride]
            lo = g0 % self.stride
            mem.valid[lo:lo + g1 - g0] = (b"\x01" if kd == WRITE else b"\x00") * (g1 - g0)


@dataclass
class _Intervals:
    """The memory intervals a run names, numbered once: interval j is
    ``[lo[j], hi[j])`` of memory ``mid[j]``; per signature, the intervals it reads,
    writes and rewinds."""

    mems: dict[int, Memory]
    mid: list[int]
    lo: list[int]
    hi: list[int]
    reads: list[list[int]]
    writes: list[list[int]]
    rewinds: list[list[int]]


def _intervals(sig_checks: list[tuple[Any, ...]], sig_out: list[Any],
               sig_rewind: list[Any]) -> _Intervals:
    index: dict[tuple[Memory, int, int], int] = {}  # numbered in order of first use
    num = index.setdefault
    reads = [[num((c.mem, c.lo, c.hi), len(index)) for c in chk
              if c.mem is not None and c.mem.check_reads] for chk in sig_checks]
    writes = [[num((o.mem, o.lo, o.hi), len(index))] if o is not None and o.mem is not None
              and o.mem.check_reads else [] for o in sig_out]
    rewinds = [[num(r, len(index))] if r is not None and r[0].check_reads else []
               for r in sig_rewind]
    return _Intervals({m.mid: m for m, _, _ in index}, [m.mid for m, _, _ in index],
                      [a for _, a, _ in index], [b for _, _, b in index], reads, writes,
                      rewinds)


def _events(iv: _Intervals, sig: np.ndarray, writers: np.ndarray, land_k: np.ndarray,
            land_sub: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every read, landing write and rewind of this window as (position k, sub, kind,
    interval): a write happens where it lands, not where its op runs."""
    r_pos, r_op = expand(iv.reads, sig)
    v_pos, v_op = expand(iv.rewinds, sig)
    w_of = np.full(len(sig), -1, np.int64)
    w_of[writers] = np.arange(len(writers))
    w_pos, w_op = expand(iv.writes, sig)
    w_at = w_of[w_pos]
    lands = land_k[w_at] >= -1  # writes landing in a later window are not events here
    w_pos, w_op, w_at = w_pos[lands], w_op[lands], w_at[lands]
    k = np.concatenate([r_pos, land_k[w_at], v_pos])
    sub = np.concatenate([np.zeros(len(r_pos), np.int64), land_sub[w_at],
                          np.zeros(len(v_pos), np.int64)])
    kind = np.concatenate([np.full(len(r_pos), READ), np.full(len(w_pos), WRITE),
                           np.full(len(v_pos), REWIND)]).astype(np.int8)
    ops = np.concatenate([r_op, w_op, v_op])
    return k, sub, kind, ops


def _pieces(iv: _Intervals, ops: np.ndarray, k: np.ndarray, sub: np.ndarray, n_pos: int
            ) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    """The intervals cut at every bound into disjoint pieces (one global address space,
    ``stride`` per memory), and the (event, piece) pairs in order per piece: by position,
    then sub. Returns (stride, bounds, event of each pair, piece of each pair)."""
    stride = max((m.size for m in iv.mems.values()), default=0) + 1
    base = np.array(iv.mid or [0], np.int64) * stride
    glo = (base + np.array(iv.lo or [0], np.int64))[ops]
    ghi = (base + np.array(iv.hi or [0], np.int64))[ops]
    bounds = distinct(np.concatenate([glo, ghi]))
    a0, a1 = np.searchsorted(bounds, glo), np.searchsorted(bounds, ghi)
    cnt = a1 - a0
    ev = np.repeat(np.arange(len(ops)), cnt)
    piece = np.repeat(a0, cnt) + np.arange(len(ev)) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    span = int(sub.max(initial=0)) + 1
    if (len(bounds) + 1) * (n_pos + 1) * span < 1 << 62:  # one int64 key: a 1-D sort
        srt = np.argsort((piece * (n_pos + 1) + k[ev]) * span + sub[ev], kind="stable")
    else:
        srt = np.lexsort((sub[ev], k[ev], piece))
    return stride, bounds, ev[srt], piece[srt]


def _reads_valid(kd: np.ndarray, iv: np.ndarray, bounds: np.ndarray,
                 mems: dict[int, Memory], stride: int) -> bool:
    """Every read sees a write: the last event before it on its piece is a write, or, with
    none, the memory's initial valid map covers the piece."""
    nonread = kd != READ
    last = (np.maximum.accumulate(np.where(nonread, np.arange(len(kd)), -1)) if len(kd)
            else np.zeros(0, np.int64))
    isread = ~nonread
    prev = last[isread]
    r_iv = iv[isread]
    seen = (prev >= 0) & (iv[np.maximum(prev, 0)] == r_iv)
    if len(prev) and not bool((kd[prev[seen]] == WRITE).all()):
        return False
    for j in distinct(r_iv[~seen]).tolist():  # read before any event: the initial map
        g0, g1 = int(bounds[j]), int(bounds[j + 1])
        mem = mems[g0 // stride]
        if mem.valid.find(0, g0 % stride, g0 % stride + g1 - g0) >= 0:
            return False
    return True


def plan(sig_checks: list[tuple[Any, ...]], sig_out: list[Any], sig_rewind: list[Any],
         sig: np.ndarray, writers: np.ndarray, land_k: np.ndarray, land_sub: np.ndarray
         ) -> Plan:
    """The validity plan of a run: ``sig`` per position, writer positions with the (op,
    sub) after which each write lands."""
    intervals = _intervals(sig_checks, sig_out, sig_rewind)
    k, sub, kind, ops = _events(intervals, sig, writers, land_k, land_sub)
    stride, bounds, ev, iv = _pieces(intervals, ops, k, sub, len(sig))
    kd = kind[ev]
    ok = _reads_valid(kd, iv, bounds, intervals.mems, stride)
    nonread = kd != READ
    return Plan(ok, intervals.mems, stride, bounds, iv[nonread], k[ev][nonread], kd[nonread])
