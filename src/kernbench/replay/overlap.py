"""Whether the members of a batch are independent (replay/batching.py, ADR-0590):
batched, every member reads before any member writes, so no byte one member writes may be
read or written by another member."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence

from kernbench.replay.store import Operand


def independent(ins: Sequence[Sequence[Operand]], outs: Sequence[Operand]) -> bool:
    """Whether no member writes a byte another member reads or writes."""
    comb = _comb(ins, outs)
    return comb if comb is not None else _clusters(ins, outs)


def _comb(ins: Sequence[Sequence[Operand]], outs: Sequence[Operand]) -> bool | None:
    """``independent``, exactly, when the outputs are of one size in one bank (as a batch's
    are): outputs sorted by address must not overlap, and each input's span, looked up
    among them by bisection, may touch only its own member's output; None otherwise."""
    n = outs[0].nbytes
    at = [_at(o) for o in outs]
    bank = at[0][0]
    if n <= 0 or any(b != bank for b, _ in at) or any(o.nbytes != n for o in outs):
        return None
    order = sorted(range(len(outs)), key=lambda i: at[i][1])
    starts = [at[i][1] for i in order]
    if any(b - a < n for a, b in zip(starts, starts[1:], strict=False)):
        return False  # two members write one byte
    for m, row in enumerate(ins):
        for o in row:
            where, lo = _at(o)
            if where != bank:
                continue
            # the outputs starting in (lo - n, lo + nbytes) overlap the input's bytes
            a, b = bisect_right(starts, lo - n), bisect_left(starts, lo + o.nbytes)
            if any(order[k] != m for k in range(a, b)):
                return False
    return True


def _at(o: Operand) -> tuple[int, int]:
    """(bank identity, first byte in the bank) of a placed operand."""
    mem = o.mem
    assert mem is not None  # a member's operands are placed (``batching.key``)
    return id(mem.bank), mem.base + o.lo


def _clusters(ins: Sequence[Sequence[Operand]], outs: Sequence[Operand]) -> bool:
    """``independent`` by clusters of overlapping spans (conservative: a cluster holding a
    write and two members is a hazard)."""
    spans: list[tuple[int, int, int, int, int]] = []
    add = spans.append
    for w, rows in ((1, [(o,) for o in outs]), (0, ins)):
        for m, row in enumerate(rows):
            for o in row:
                mem = o.mem
                assert mem is not None  # a member's operands are placed (``key``)
                add((id(mem.bank), mem.base + o.lo, mem.base + o.hi, m, w))
    spans.sort()
    bank: int | None = None
    hi, members, writes = 0, set[int](), False
    for b, lo, h, m, w in spans:
        if b != bank or lo >= hi:  # a new cluster of overlapping spans
            if writes and len(members) > 1:
                return False
            bank, hi, members, writes = b, h, {m}, bool(w)
        else:
            hi, writes = max(hi, h), writes or bool(w)
            members.add(m)
    return not (writes and len(members) > 1)
