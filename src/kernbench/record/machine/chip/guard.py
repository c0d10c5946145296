"""A guard on the chip (ADR-0840, docs/adr/0843): the kernel decides its path on a value of
data, on hardware with a shared part.

The value graph (``record/guards``) is noted as ops are issued — TCM values in program
order, as on ahbm-v1/v2 — and each op of HBM gets its place in time order once the chip
decides its times (``attach``: a read's start, a write's end). A guard then needs two
things before it evaluates:

- its operand visible: the guard waits (RAW, the chip's board) for the op that wrote it,
  and decides at ``t = max(clock, operand visible)``, as ahbm-v2's guard does;
- recorded time order complete up to ``t``: every op that could start (read, run an
  atomic, land a write) at or before ``t`` decided. The chip's loop decides in time
  order, and a program runs when its clock is no later than the next decision, so the
  guard parks until the loop has made every decision due at or before ``t`` and no other
  program is runnable by ``t`` (``Chip.at_last``, ``Chip.quiet``). Any op issued after
  that starts after ``t``, after every HBM read of the cone (they ended by ``t``).

It then costs ``branch_cycles`` (``t`` to ``t + busy``) and the kernel goes on at its end;
its ``wait_ps`` is the stall from the kernel's clock to ``t``. The guard reads its operand
but is no reader on the board: the kernel issues nothing until it has ended, so no later
write of the operand can start before it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kernbench.record.commands import Cmd
from kernbench.record.guards.evaluate import decide as evaluate
from kernbench.record.guards.graph import Late, NeedsGuards, Shadow
from kernbench.record.machine.chip.node import Node
from kernbench.record.machine.chip.protocol import ChipLoop
from kernbench.schemas.guards import BITS, encode


class _Land:
    """Gives a noted op of HBM its keys once the chip decides it (a node's ``after``)."""

    __slots__ = ("late",)

    def __init__(self, late: Late) -> None:
        self.late = late

    def __call__(self, node: Node) -> None:
        self.late.land(node.start, node.end)


def attach(chip: Any, shadow: Shadow) -> None:
    """Record on ``chip`` with guards: every op entered is noted in the value graph
    ``shadow`` (the plain ``enter`` is untouched: a recording without guards pays
    nothing)."""
    plain = chip.enter
    issue = shadow.issue

    def enter(node: Node, prog: Any) -> None:
        plain(node, prog)
        late = issue(node.cmd, node.op_id, node.parent != -1)
        if late is not None:
            node.after.append(_Land(late))

    chip.shadow = shadow
    chip.enter = enter


class _Decision:
    """A guard node's stand-in for an engine: once its operand is visible (``ready``), the
    program is woken after every decision due by then."""

    __slots__ = ("node", "dst")

    def __init__(self, node: Node) -> None:
        self.node = node
        self.dst = -1  # not a send (the board asks)

    def ready(self) -> None:
        node = self.node
        node.prog.chip.at_last(node.ready, self.fire)

    def fire(self, t: int) -> None:
        prog = self.node.prog
        prog.chip.wake(prog, t)


def guard(prog: Any, cmd: Cmd, model: Any, engine: Any) -> np.ndarray:
    """Time and log the guard ``cmd`` (its one input the element decided on) on the chip;
    return the element's value (storage dtype, one element). ``NeedsGuards`` when this
    recording keeps no value graph (the recorder records again with one)."""
    chip: ChipLoop = prog.chip
    shadow = chip.shadow
    if shadow is None:
        raise NeedsGuards
    clock, carried = prog.clock, prog.take_wait()
    node = Node(cmd, prog, None, model, clock, 0)
    decision = node.engine = _Decision(node)
    chip.enter(node, prog)
    board = chip.board
    t = board.claim(node, board.extents(cmd, prog.program), note=False)  # RAW
    if t > node.ready:
        node.ready = t
    if node.deps or not chip.quiet(node.ready):
        if not node.deps:
            decision.ready()
        while True:  # woken at its time; anything issued there since goes first
            chip.park(prog, "guard", cmd.src)
            if chip.quiet(node.ready):
                break
            decision.ready()
    t = node.ready
    value = evaluate(shadow, cmd.inputs[0], cmd.src)
    busy, _ = model(prog.cpe, cmd)
    prog.take_wait()  # the stall to ``t`` is this row's wait
    node.t_issue, node.wait = t, carried + t - clock
    node.cmd = cmd._replace(attrs=f'{{"{BITS}":{encode(value)}}}')
    prog.clock = t + busy
    chip.settle(node, t, t + busy, busy)
    chip.maybe_yield(prog)
    return value
