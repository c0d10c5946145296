"""Run a launch on the chip: the programs of each PE, ``k`` resident at a time."""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any, cast

from kernbench.record.guards.graph import Shadow
from kernbench.record.machine.chip.guard import attach
from kernbench.record.machine.chip.loop import Chip
from kernbench.record.machine.chip.parts import Parts
from kernbench.record.rows.writer import OpWriter
from kernbench.trace.hw import HwConfig

#: test-only switch: time every recording on the chip, also hardware without a shared part
#: (the chip on ahbm-v2's fields must time a kernel as ahbm-v2's closed form does)
ALWAYS = False


def run_chip(hw: HwConfig, writer: OpWriter, grid: tuple[int, ...], body: Callable[[], Any],
             k: int, n_programs: int, alone: bool = False,
             shadow: Shadow | None = None) -> list[int]:
    """Record ``n_programs`` programs of ``grid`` on the chip; each PE's scratch peak.
    ``alone``: program 0 by itself (the occupancy dry run: IPCQ refuses it). ``shadow``:
    the value graph decisions on data evaluate (else a decision raises ``NeedsGuards``)."""
    n_pe = 1 if alone else hw.n_pe
    # a ring is the ring of the PEs in use (as ahbm-v1/v2); other topologies are the chip's
    span = min(n_pe, n_programs) if hw.topology in ("ring", "bidir_ring") else n_pe
    chip = Chip(hw, writer, n_pe, Parts(hw, n_pe, span))
    chip.alone = alone
    if shadow is not None:
        attach(chip, shadow)
    programs = [cast(list[int], range(i, n_programs, hw.n_pe)) for i in range(n_pe)]
    was_enabled = gc.isenabled()
    gc.disable()  # the per-op path makes no cycles (as record/recorder.py)
    try:
        chip.run(programs, grid, body, k)
    finally:
        if was_enabled:
            gc.enable()
    return [pe.peak for pe in chip.pes]
