"""Run one launch on the machine: every program of the grid as a greenlet running ``body``.

What ``kb.record`` runs with the kernel's body and ``retime`` with a program's recorded op
stream (``record/retime``): one SimPy environment and one driver per PE for hardware timed
PE by PE in closed form (``pe.py``), or the chip for hardware with a shared part
(``chip/``).
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any, cast

import simpy

from kernbench.errors import IpcqError, KernbenchError
from kernbench.record.machine.chip import launch as chip_launch
from kernbench.record.machine.chip.launch import run_chip
from kernbench.record.machine.ipcq import Ring
from kernbench.record.machine.pe import PEDriver
from kernbench.record.rows.writer import OpWriter
from kernbench.trace.hw import HwConfig


def run_launch(hw: HwConfig, writer: OpWriter, grid: tuple[int, ...], body: Callable[[], Any],
               k: int, n_programs: int, alone: bool = False, shadow: Any = None
               ) -> list[int]:
    """Run programs ``0 .. n_programs - 1`` of ``grid`` (program ``p`` on PE ``p % n_pe``,
    ``k`` resident at a time), each running ``body``; the scratch peak of each PE.
    ``alone``: program 0 only, without an IPCQ ring (the occupancy dry run). ``shadow``:
    the value graph guards evaluate (``record/guards``), or None."""
    if hw.shared or chip_launch.ALWAYS:
        return run_chip(hw, writer, grid, body, k, n_programs, alone, shadow)
    env = simpy.Environment()
    drivers = [PEDriver(i, hw, env, writer) for i in range(1 if alone else hw.n_pe)]
    if shadow is not None:
        for d in drivers:
            d.attach(shadow)
    if not alone:
        ring = Ring(env, min(hw.n_pe, n_programs), hw.ipcq_depth, hw.ipcq_slot_bytes)
        for d in drivers:
            d.ring = ring
            ring.links[d.index] = d.links  # messages by PE index cross other PEs' links
    for d in drivers:
        # a range, not a list: a grid of millions of programs costs no memory up front
        programs = cast(list[int], range(d.index, n_programs, hw.n_pe))  # only iterated
        if programs:
            env.process(d.process(programs, grid, body, k))
    # The per-op path allocates many small acyclic objects; the cyclic GC would rescan the
    # pending row batch again and again. Nothing on that path makes cycles, so pause it.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        env.run()
    except KernbenchError as exc:  # SimPy re-raises a copy; hand the caller the original
        if type(exc.__cause__) is type(exc):
            raise exc.__cause__ from None
        raise
    finally:
        if was_enabled:
            gc.enable()
    stuck = [d for d in drivers if not d.done and d.index < n_programs]
    if stuck:
        where = "; ".join(f"PE {d.index} in {type(d.blocked_at).__name__.lower()} at "
                          f"{getattr(d.blocked_at, 'src', '?')}" for d in stuck)
        hint = ("" if n_programs <= hw.n_pe else
                f"; the grid's {n_programs} programs share {hw.n_pe} PEs, and programs on one "
                "PE run one after another, so a program waiting for a later program of its "
                f"own PE never proceeds: launch at most {hw.n_pe} communicating programs or "
                "record on hardware with more PEs (n_pe)")
        raise IpcqError(f"deadlock: no PE can make progress ({where}){hint}",
                        getattr(stuck[0].blocked_at, "src", None))
    return [max(d.scratch.peak, d.peak) for d in drivers]
