"""The scoreboard of an ``async`` PE (docs/hardware-model.md): when an issued op may start.

An op starts at the latest of its issue time, its engine being free (the engine serves its
queue in issue order), its inputs being visible (RAW: the overlapping earlier writes' ends)
and its output range being free (WAR and WAW: every earlier op that reads or writes an
overlapping range has ended). TCM and staging ranges are the PE's (resident programs own
disjoint slots of TCM and share staging, so a PE-wide check is the per-program rule plus the
staging area); HBM ranges only order the ops of one program (between programs ordering is
the kernel's business). A ``scope_exit`` is a write of its rewound range at the time it is
timed, so the next writer of those bytes comes after Phase 2 invalidated them.

A record is dropped once it ended before the earliest clock of the PE's programs: no op that
is still to be issued can start before that clock.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kernbench.schemas.ops import ATOMICS

#: test-only switch: drop the WAR edge (a writer no longer waits for earlier readers), which
#: must make a replay that reuses a buffer still read by an async op fail (tests/record)
DROP_WAR = False

#: an HBM access whose bytes are not its operand's contiguous extent (strided, indexed)
#: covers the rest of memory, to stay safe
_FAR = 1 << 62
_HBM = "hbm"
#: records held before the first prune (then twice what survived the last one)
_PRUNE_AT = 32


def extent(h: Any, cmd: Any) -> tuple[Any, int, int]:
    """(key, lo, hi) of the bytes an operand covers: its whole buffer; for HBM operands of a
    strided or indexed access, everything from its address on."""
    buf = h.buf
    if buf.space == _HBM:
        hi = buf.addr + buf.nbytes if cmd.attrs == "{}" else _FAR
        return (_HBM, buf.pe), buf.addr, hi
    return (buf.space, buf.pe), buf.addr, buf.addr + buf.nbytes


def accesses(cmd: Any) -> tuple[list[tuple[Any, int, int]], list[tuple[Any, int, int]]]:
    """(reads, writes) of a command as extents; an atomic also writes its HBM input."""
    reads = [extent(h, cmd) for h in cmd.inputs]
    writes = [] if cmd.out is None else [extent(cmd.out, cmd)]
    if cmd.op in ATOMICS:
        writes += [r for r in reads if r[0][0] == _HBM]
    return reads, writes


class Scoreboard:
    """The in-flight accesses of one PE: per memory, ``[lo, hi, program, is_write, t_end]``."""

    __slots__ = ("records", "count", "limit", "floor")

    def __init__(self, floor: Callable[[], int]) -> None:
        self.records: dict[Any, list[list[int]]] = {}
        self.count = 0
        self.limit = _PRUNE_AT
        #: the earliest time an op still to be issued on this PE can start (the earliest clock
        #: of its programs): a record that ended by then can no longer delay anything
        self.floor = floor

    def ready(self, program: int, reads: list, writes: list) -> int:
        """The earliest start the data allows: RAW for ``reads``, WAR and WAW for ``writes``."""
        t = 0
        records = self.records
        for key, lo, hi in reads:
            hbm = key[0] == _HBM
            for r in records.get(key, ()):
                if r[3] and r[0] < hi and lo < r[1] and r[4] > t and (not hbm or r[2] == program):
                    t = r[4]
        war = not DROP_WAR
        for key, lo, hi in writes:
            hbm = key[0] == _HBM
            for r in records.get(key, ()):
                if (r[0] < hi and lo < r[1] and r[4] > t and (war or r[3])
                        and (not hbm or r[2] == program)):
                    t = r[4]
        return t

    def note(self, program: int, reads: list, writes: list, t_end: int) -> None:
        """Remember an issued op's accesses; they are in flight until ``t_end``."""
        records = self.records
        for key, lo, hi in reads:
            records.setdefault(key, []).append([lo, hi, program, 0, t_end])
        for key, lo, hi in writes:
            records.setdefault(key, []).append([lo, hi, program, 1, t_end])
        self.count += len(reads) + len(writes)
        if self.count > self.limit:  # amortised: the scans above stay as long as what flies
            self.prune(self.floor())
            self.limit = max(_PRUNE_AT, 2 * self.count)

    def touched(self, key: Any, lo: int, hi: int) -> int:
        """When the last access overlapping ``[lo, hi)`` of memory ``key`` ends (0: none)."""
        t = 0
        for r in self.records.get(key, ()):
            if r[0] < hi and lo < r[1] and r[4] > t:
                t = r[4]
        return t

    def prune(self, before: int) -> None:
        """Forget the accesses that ended at or before ``before``."""
        n = 0
        for key, recs in self.records.items():
            keep = [r for r in recs if r[4] > before]
            self.records[key] = keep
            n += len(keep)
        self.count = n
