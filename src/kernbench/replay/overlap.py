"""Whether the members of a batch are independent (replay/batching.py, ADR-0590):
batched, every member reads before any member writes, so no byte one member writes may be
read or written by another member."""

from __future__ import annotations

from collections.abc import Sequence

from kernbench.replay.store import Operand


def independent(ins: Sequence[Sequence[Operand]], outs: Sequence[Operand]) -> bool:
    """Whether no member writes a byte another member reads or writes."""
    comb = _comb(ins, outs)
    return comb if comb is not None else _clusters(ins, outs)


def _comb(ins: Sequence[Sequence[Operand]], outs: Sequence[Operand]) -> bool | None:
    """``independent`` when the outputs are disjoint and evenly spaced in one bank (a
    member's output ``i`` at ``b + i * s``, ``s >= n`` bytes): each input's span names the
    outputs it touches by arithmetic; None when the outputs are laid out otherwise."""
    n = outs[0].nbytes
    bank, b = _at(outs[0])
    s = _at(outs[1])[1] - b
    if n <= 0 or s < n or any(_at(o) != (bank, b + i * s) for i, o in enumerate(outs)):
        return None
    last = len(outs) - 1
    for m, row in enumerate(ins):
        for o in row:
            where, lo = _at(o)
            if where != bank:
                continue
            # the outputs i with b + i*s < hi and b + i*s + n > lo
            i0 = max((lo - b - n) // s + 1, 0)
            i1 = min((lo + o.nbytes - b - 1) // s, last)
            if i0 <= i1 and (i0 != m or i1 != m):
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
