"""The time-faithful run loop.

Ops run in (t_start_ps, op_id) order; each reads its inputs at its start and its output
becomes visible at its t_end_ps. Pending writes wait in a heap keyed (t_end_ps, op_id) and
are committed before any op starting at or after their end (writes before reads at equal
times). A write is committed at once when no write into the same memory is pending and no
op touches that memory before it lands (``Program.next_access``): nothing can tell. A read
that overtakes its producer therefore sees invalid bytes or old data.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from kernbench.errors import ReplayError
from kernbench.replay.decode import Program
from kernbench.replay.store import Operand, check_read
from kernbench.replay.values import ValueLog

FLUSH_CHECK_EVERY = 256


@dataclass(frozen=True)
class RunOutcome:
    """What happened: how many ops ran, and the error that stopped replay (if any)."""

    executed: int
    error: ReplayError | None = None
    error_row: int | None = None


class _InvalidRead(Exception):
    def __init__(self, operand: Operand) -> None:
        self.operand = operand


def _arm_outputs(program: Program) -> None:
    """Give each output operand its run of 0x01 bytes for marking writes valid."""
    ones = memoryview(b"\x01" * program.max_nbytes)
    for o in program.out:
        if o is not None and o.ones is None and o.error is None:
            o.ones = ones[:o.nbytes]


def execute(program: Program, values: ValueLog) -> RunOutcome:
    """Run every op of ``program`` in time-faithful order, logging written values."""
    _arm_outputs(program)
    order, next_access = program.order, program.next_access
    t_start, t_end = program.t_start, program.t_end
    steps, checks, outs = program.step, program.checks, program.out
    heap: list[tuple] = []
    push, pop = heapq.heappush, heapq.heappop
    log_row, log_value = values.rows.append, values.arrays.append

    def commit(i: int, o: Operand, res: np.ndarray) -> None:
        o.view[...] = res
        o.valid[o.lo:o.hi] = o.ones
        log_row(i)
        log_value(res)

    k, i = 0, -1
    try:
        with np.errstate(all="ignore"):
            for k, i in enumerate(order):
                t = t_start[i]
                while heap and heap[0][0] <= t:
                    _, j, o, res = pop(heap)
                    o.mem.pending -= 1
                    commit(j, o, res)
                for o in checks[i]:
                    if o.valid.find(0, o.lo, o.hi) >= 0:
                        raise _InvalidRead(o)
                res = steps[i]()
                o = outs[i]
                if o is not None:
                    # the value as written: a fresh array of the output dtype (a view of
                    # memory is snapshotted here, at the read time)
                    if res.base is not None or res.dtype is not o.npd:
                        res = res.astype(o.npd)
                    e = t_end[i]
                    m = o.mem
                    if not m.pending and e <= next_access[k]:
                        commit(i, o, res)  # nothing can see the difference: land it now
                    else:
                        m.pending += 1
                        push(heap, (e, i, o, res))
                if not k % FLUSH_CHECK_EVERY and values.due():
                    values.flush()
            while heap:
                _, j, o, res = pop(heap)
                o.mem.pending -= 1
                commit(j, o, res)
    except _InvalidRead as exc:
        index = program.ins[i].index(exc.operand)
        try:
            check_read(exc.operand, program.where(i), index)
        except ReplayError as err:
            return RunOutcome(k, err, i)
        raise AssertionError("check_read accepted an invalid read") from None  # pragma: no cover
    except ReplayError as err:
        return RunOutcome(k, ReplayError(f"{program.where(i)}: {err}"), i)
    except (ValueError, TypeError, ArithmeticError, IndexError) as exc:
        return RunOutcome(k, ReplayError(f"{program.where(i)}: {type(exc).__name__}: {exc}"), i)
    return RunOutcome(len(order))
