"""The scoreboard's interval index (ADR-0595) against a list of every access, scanned: random
overlapping extents in TCM, staging and HBM (per program), reads, writes and atomics (acq_rel:
an atomic orders all of its program's HBM accesses, ADR-0841), with prunes at a rising floor.
Every ``issue`` must give the scan's answer."""

from __future__ import annotations

import random

import pytest

from kernbench.record.commands import Cmd
from kernbench.record.handle import Buffer, TensorHandle
from kernbench.record.machine import scoreboard
from kernbench.record.machine.scoreboard import Scoreboard
from kernbench.schemas import dtypes
from kernbench.schemas.ops import ATOMICS, OP

_ATOMIC = next(iter(sorted(ATOMICS, key=str)))


def _handle(space: str, addr: int, n: int) -> TensorHandle:
    return TensorHandle(Buffer(space, 0, addr, 4 * n, None, ""), (n,), dtypes.float32)


def _extent(h: TensorHandle, strided: bool) -> tuple[str, int, int]:
    b = h.buf
    hi = 1 << 62 if b.space == "hbm" and strided else b.addr + b.nbytes
    return b.space, b.addr, hi


def _scan(done: list, program: int, reads: list, writes: list, floor: int,
          drop_war: bool) -> int:
    """The start rule, scanning every access noted so far (those ended by ``floor`` can no
    longer matter: the answer is compared above it)."""
    t = 0
    for space, lo, hi, prog, is_write, end in done:
        if end <= floor or (space == "hbm" and prog != program):
            continue
        for s, a, b in reads:
            if s == space and lo < b and a < hi and is_write:
                t = max(t, end)
        for s, a, b in writes:
            if s == space and lo < b and a < hi and (is_write or not drop_war):
                t = max(t, end)
    return t


@pytest.mark.parametrize("drop_war", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_claim_gives_the_latest_conflicting_end_a_scan_of_every_access_gives(
        seed, drop_war, monkeypatch) -> None:
    monkeypatch.setattr(scoreboard, "DROP_WAR", drop_war)
    rng = random.Random(seed)
    floor = [0]
    board = Scoreboard(lambda: floor[0], 0)
    done: list = []
    for step in range(600):
        program = rng.randrange(2)
        space = rng.choice(["tcm", "tcm", "staging", "hbm"])

        def operand(space: str = space) -> TensorHandle:
            return _handle(space, 64 * rng.randrange(24), 16 * rng.randrange(1, 9))

        inputs = tuple(operand() for _ in range(rng.randrange(3)))
        out = None if rng.random() < 0.2 else operand(rng.choice(["tcm", space]))
        op = _ATOMIC if space == "hbm" and inputs and rng.random() < 0.2 else OP.ADD
        attrs = '{"strided":1}' if space == "hbm" and rng.random() < 0.2 else "{}"
        cmd = Cmd(op, inputs, out, 0, 0, (0,), "", 0, attrs)
        reads = [_extent(h, attrs != "{}") for h in inputs]
        writes = [] if out is None else [_extent(out, attrs != "{}")]
        if op in ATOMICS:  # acq_rel: it reads and writes all of its program's HBM
            reads = [("hbm", 0, 1 << 62) if r[0] == "hbm" else r for r in reads]
            writes += [r for r in reads if r[0] == "hbm"]
        span = rng.randrange(1, 400)
        start = board.issue(program, cmd, floor[0], span)
        assert start == max(_scan(done, program, reads, writes, floor[0], drop_war),
                            floor[0]), step
        end = start + span
        done += [(s, lo, hi, program, False, end) for s, lo, hi in reads]
        done += [(s, lo, hi, program, True, end) for s, lo, hi in writes]
        floor[0] += rng.randrange(0, 40)  # the PE's clock moves on; prunes drop the past
    board.prune(floor[0])  # bounds are 64-byte multiples below 64 * 32, plus the far end:
    assert board.count <= 4 * 33  # per memory at most that many, however many accesses


@pytest.mark.parametrize("seed", range(4))
def test_a_rewind_gives_and_notes_what_touched_and_note_give_for_its_extent(seed) -> None:
    """``rewound`` (a scope exit's one call) against ``touched`` + ``note`` of the same read
    extent, on two boards given the same random history: the same time, the same index."""
    rng = random.Random(seed)
    floor = [0]
    fast, plain = Scoreboard(lambda: floor[0], 0), Scoreboard(lambda: floor[0], 0)
    key = ("tcm", 0)
    for step in range(400):
        if rng.random() < 0.6:  # an op writing and reading TCM
            inputs = tuple(_handle("tcm", 64 * rng.randrange(24), 16 * rng.randrange(1, 9))
                           for _ in range(rng.randrange(3)))
            out = _handle("tcm", 64 * rng.randrange(24), 16 * rng.randrange(1, 9))
            cmd = Cmd(OP.ADD, inputs, out, 0, 0, (0,), "", 0, "{}")
            end = floor[0] + rng.randrange(1, 400)
            for board in (fast, plain):
                board.issue(0, cmd, end, 0)
        else:  # a scope exit rewinding [lo, hi) at the clock ``now``
            lo = 64 * rng.randrange(24)
            hi = lo + 64 * rng.randrange(0, 6)
            now = floor[0] + rng.randrange(0, 50)
            want = max(now, plain.touched(key, lo, hi))
            if hi > lo:
                plain.note(0, [(key, lo, hi)], [], want)
            assert fast.rewound(lo, hi, now) == want, step
        assert fast.tcm.bounds == plain.tcm.bounds, step
        assert fast.tcm.rw == plain.tcm.rw and fast.tcm.wr == plain.tcm.wr, step
        floor[0] += rng.randrange(0, 40)


class _Counting(Scoreboard):
    """A board that counts the ops its general path took."""

    __slots__ = ("general",)

    def _issue(self, program: int, cmd: Cmd, start: int, span: int) -> int:
        self.general += 1
        return super()._issue(program, cmd, start, span)


@pytest.mark.parametrize("seed", range(4))
def test_the_one_segment_path_gives_what_the_general_path_gives(seed) -> None:
    """``issue``'s path for operands that are whole segments of the PE's TCM against
    ``_issue`` (every operand searched, cut where needed), on two boards given the same
    random history: the same start, the same index after every op; both paths taken."""
    rng = random.Random(seed)
    floor = [0]
    fast, plain = _Counting(lambda: floor[0], 0), Scoreboard(lambda: floor[0], 0)
    fast.general = 0
    steps = 600
    for step in range(steps):
        space = "tcm" if rng.random() < 0.9 else rng.choice(["staging", "hbm"])
        inputs = tuple(_handle(space if k == 0 else "tcm", 64 * rng.randrange(12),
                               16 * rng.randrange(1, 3)) for k in range(rng.randrange(3)))
        out = None if rng.random() < 0.2 else _handle("tcm", 64 * rng.randrange(12),
                                                      16 * rng.randrange(1, 3))
        cmd = Cmd(OP.ADD, inputs, out, 0, 0, (0,), "", 0, "{}")
        start, span = floor[0] + rng.randrange(0, 30), rng.randrange(1, 400)
        want = plain._issue(0, cmd, start, span)
        assert fast.issue(0, cmd, start, span) == want, step
        assert fast.memories.keys() == plain.memories.keys(), step
        for key, m in plain.memories.items():
            assert fast.memories[key].bounds == m.bounds, step
            assert fast.memories[key].rw == m.rw and fast.memories[key].wr == m.wr, step
        floor[0] += rng.randrange(0, 20)
    assert 50 < fast.general < steps - 100  # both paths ran, the short one often
