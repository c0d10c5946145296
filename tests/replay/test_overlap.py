"""replay/overlap.py: whether batch members are independent, against a byte-by-byte
definition (no byte one member writes is read or written by another member)."""

from __future__ import annotations

import random

import pytest

from kernbench.replay import overlap
from kernbench.replay.store import MemoryStore, Operand
from kernbench.trace.hw import HwConfig

HW = HwConfig().to_dict()


def _bytes(o: Operand) -> set[tuple[int, int]]:
    assert o.mem is not None
    return {(id(o.mem.bank), o.mem.base + a) for a in range(o.lo, o.hi)}


def _brute(ins: list[tuple[Operand, ...]], outs: list[Operand]) -> bool:
    for m, out in enumerate(outs):
        written = _bytes(out)
        for other, (row, out2) in enumerate(zip(ins, outs, strict=True)):
            if other != m and any(written & _bytes(o) for o in (*row, out2)):
                return False
    return True


def _draw(rng: random.Random, store: MemoryStore) -> tuple[list, list[Operand]]:
    members = rng.randint(2, 6)
    rows = rng.choice([1, 2, 4])
    shape = (rows, 4)  # float32: 16 * rows bytes

    def where() -> tuple[str, int, int]:
        if rng.random() < 0.5:
            return "hbm", 0, rng.randrange(0, 512, 4)
        return "tcm", rng.randrange(4), rng.randrange(0, 256, 4)

    space, pe, addr = where()
    step = rng.choice([0, 8, 16 * rows, 16 * rows, 48, -16])
    outs = []
    for i in range(members):
        if rng.random() < 0.8:  # mostly evenly spaced outputs: on PEs, or in HBM
            sp, p, a = (space, i % 4, addr) if space == "tcm" else (space, 0,
                                                                    max(addr + i * step, 0))
        else:
            sp, p, a = where()
        outs.append(store.operand(sp, p, a, shape, "float32", False))
    ins = [tuple(store.operand(*where(), shape, "float32", False)
                 for _ in range(rng.randint(0, 2))) for _ in range(members)]
    for i in rng.sample(range(members), rng.randint(0, members)):  # in place, or a neighbour's
        ins[i] = (*ins[i], outs[i] if rng.random() < 0.7 else outs[rng.randrange(members)])
    return ins, outs


@pytest.mark.parametrize("seed", range(4))
def test_independent_never_batches_a_hazard_and_is_exact_on_outputs_in_one_bank(
        seed: int) -> None:
    rng = random.Random(seed)
    store = MemoryStore(HW, [(0, 1024, "x")])
    exact = 0
    for _ in range(500):
        ins, outs = _draw(rng, store)
        want = _brute(ins, outs)
        got = overlap.independent(ins, outs)
        comb = overlap._comb(ins, outs)
        if comb is not None:  # outputs of one size in one bank: the exact answer
            assert comb == want == got, (ins, outs)
            exact += 1
        else:  # by clusters: conservative, never independent when there is a hazard
            assert got <= want
    assert exact > 100  # the arithmetic path was exercised
