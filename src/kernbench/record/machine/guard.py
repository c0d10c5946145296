"""A guard (ADR-0840): the kernel decides its path on a value of data.

The one place a guard is timed, under either issue policy: an op of no engine whose start
waits for its operand (the kernel stalls until the value is visible: the guard's
``wait_ps``, which the critical path names), that then costs its timing model's
``branch_cycles``; the kernel goes on at its end.

Before it decides, everything that could change what the decision's cone reads is recorded:
the PE's other resident programs catch up with its clock (the scheduler resumes the
earliest program, so once this one runs again every other is at or past it), and the other
PEs with SimPy's (``Sync``: each PE runs ahead of SimPy only until it waits in SimPy). Any
op issued later starts at or after the guard, after every HBM read of its cone. Then the
value graph (``record/guards``) evaluates the operand, and the row records its bits.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from kernbench.record.commands import Cmd, Sync
from kernbench.record.guards.evaluate import decide as evaluate
from kernbench.record.guards.graph import NeedsGuards
from kernbench.record.machine.protocol import PE
from kernbench.schemas.guards import BITS, encode


def guard(pe: PE, cmd: Cmd, model: Callable, engine: Any) -> np.ndarray:
    """Time and log the guard ``cmd`` (its one input the element decided on); return the
    element's value (storage dtype, one element). ``NeedsGuards`` when this recording keeps
    no value graph (the recorder records again with one)."""
    shadow = pe.shadow
    if shadow is None:
        raise NeedsGuards
    h = cmd.inputs[0]
    now = pe.now
    ready = max(now, h.buf.ready_ps, pe.data_ready(cmd))
    wait = ready - now + pe.take_wait()
    pe.now = ready
    if ready >= pe.switch_at:  # resident programs behind this clock go first
        pe.maybe_yield()
    if pe.ring is not None:  # not the occupancy dry run (one program alone)
        pe.issue(Sync(ready))
    value = evaluate(shadow, h, cmd.src)
    busy, _ = model(pe, cmd)
    pe.row(ready, ready, ready + busy, busy, wait,
           cmd._replace(attrs=f'{{"{BITS}":{encode(value)}}}'))
    pe.now = ready + busy
    if pe.now > pe.last_end:
        pe.last_end = pe.now
    if pe.now >= pe.switch_at:
        pe.maybe_yield()
    return value
