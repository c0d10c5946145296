"""The time-faithful run loop.

Ops run in (t_start_ps, op_id) order; each reads its inputs at its start and its output
becomes visible at its t_end_ps: before the first op starting at or after t_end_ps (writes
before reads at equal times), several landing at one point in (t_end_ps, op_id) order. That
order depends on the timestamps alone, so ``schedule`` computes it up front, vectorised: most
writes land right after their own op ran (the loop writes them at once), the others wait in
``pending`` for the op after which they land. A read that overtakes its producer therefore
sees invalid bytes or old data.
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import itemgetter
from typing import Any

import numpy as np

from kernbench.errors import ReplayError
from kernbench.replay.decode import Program
from kernbench.replay.schedule import DEFERRED, LANDING, schedule
from kernbench.replay.store import Operand, check_read
from kernbench.replay.validity import expand, plan, rewind_of
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


def _by_position(items: list[Any], idx: list[int]) -> list[Any]:
    if len(idx) < 2:
        return [items[j] for j in idx]
    return list(itemgetter(*idx)(items))


def _arm(program: Program, values: ValueLog, sig: np.ndarray) -> None:
    """Give each output operand its run of 0x01 bytes; tell ``values`` what each position
    writes (dtype code, element count, bytes)."""
    outs = program.sig_out
    ones = memoryview(b"\x01" * max((o.nbytes for o in outs if o is not None), default=0))
    dtypes: dict[np.dtype, int] = {}
    code = np.zeros(len(outs), np.int64)
    count = np.zeros(len(outs), np.int64)
    for j, o in enumerate(outs):
        if o is not None and o.error is None:
            if o.ones is None:
                o.ones = ones[:o.nbytes]
            code[j] = dtypes.setdefault(o.npd, len(dtypes))
            count[j] = o.nbytes // o.npd.itemsize
    nbytes = np.array([o.nbytes if o is not None else 0 for o in outs], np.int64)
    values.set_layout(code[sig], count[sig], list(dtypes), nbytes[sig])


def execute(program: Program, values: ValueLog) -> RunOutcome:
    """Run every op of ``program`` in time-faithful order, logging written values by
    position in ``program.order``."""
    order = program.order
    sig = program.sig_id[order]
    sig_list = sig.tolist()
    _arm(program, values, sig)
    writes = np.array([o is not None for o in program.sig_out] or [False], bool)[sig]
    rewinds = [rewind_of(s) for s in program.sig_step]
    touched = [sorted({o.mem.mid for o in ins if o.mem is not None}
                      | ({r[0].mid} if r is not None else set()))
               for ins, r in zip(program.sig_ins, rewinds, strict=True)]
    out_mem = np.array([o.mem.mid if o is not None and o.mem is not None else -1
                        for o in program.sig_out] or [-1], np.int64)[sig]
    flags, after, writers, land_k, land_sub = schedule(
        program.t_start[order], program.t_end[order], program.op_id[order], writes,
        expand(touched, sig), out_mem)
    landing = np.full(len(sig), np.iinfo(np.int64).max, np.int64)
    landing[writers] = land_k * (int(land_sub.max(initial=0)) + 1) + land_sub
    values.landing = landing
    valid = plan(program.sig_checks, program.sig_out, rewinds, sig, writers, land_k, land_sub)
    if valid.ok:
        recs = _by_position(list(zip(program.sig_step, program.sig_out, strict=True)),
                            sig_list)
        k, failure = _run(recs, flags.tolist(), after, values)
        valid.settle(k)
    else:
        recs = _by_position(list(zip(program.sig_step, program.sig_checks, program.sig_out,
                                     strict=True)), sig_list)
        k, failure = _run_checked(recs, flags.tolist(), after, values)
    if failure is None:
        return RunOutcome(len(recs))
    row = int(order[k])
    if isinstance(failure, _InvalidRead):
        index = program.sig_ins[sig_list[k]].index(failure.operand)
        try:
            check_read(failure.operand, program.where(row), index)
        except ReplayError as err:
            return RunOutcome(k, err, row)
        raise AssertionError("check_read accepted an invalid read")  # pragma: no cover
    if isinstance(failure, ReplayError):
        return RunOutcome(k, ReplayError(f"{program.where(row)}: {failure}"), row)
    return RunOutcome(k, ReplayError(f"{program.where(row)}: {type(failure).__name__}: "
                                     f"{failure}"), row)


Failure = ReplayError | ValueError | TypeError | ArithmeticError | IndexError | _InvalidRead


def _run(recs: list[tuple[Any, Operand | None]], flags: list[int],
         after: dict[int, list[int]], values: ValueLog) -> tuple[int, Failure | None]:
    """The loop when ``validity.plan`` proved every read valid: no valid map per op.
    Runs in chunks of FLUSH_CHECK_EVERY ops, checking for a statistics flush between."""
    pending: dict[int, tuple[Operand, np.ndarray]] = {}
    log_row, log_value = values.rows.append, values.arrays.append
    k = -1
    n = len(recs)
    try:
        with np.errstate(all="ignore"):
            for k0 in range(0, n, FLUSH_CHECK_EVERY):
                k1 = min(k0 + FLUSH_CHECK_EVERY, n)
                for k, (step, o), f in zip(range(k0, k1), recs[k0:k1], flags[k0:k1],
                                           strict=True):
                    res = step()
                    if o is not None:
                        # the value as written: a fresh array of the output dtype (a view
                        # of memory is snapshotted here, at the read time)
                        if res.base is not None or res.dtype is not o.npd:
                            res = res.astype(o.npd)
                        if not f & DEFERRED:
                            o.view[...] = res
                            log_row(k)
                            log_value(res)
                            if not f:
                                continue
                        else:
                            pending[k] = (o, res)
                    if f & LANDING:
                        for j in after[k]:
                            w, r = pending.pop(j)
                            w.view[...] = r
                            log_row(j)
                            log_value(r)
                if values.due():
                    values.flush()
    except (ReplayError, ValueError, TypeError, ArithmeticError, IndexError) as exc:
        return k, exc
    return k, None


def _run_checked(recs: list[tuple[Any, tuple[Operand, ...], Operand | None]],
                 flags: list[int], after: dict[int, list[int]], values: ValueLog
                 ) -> tuple[int, Failure | None]:
    """The loop with the per-byte valid map: each read is checked, each write marks."""
    pending: dict[int, tuple[Operand, np.ndarray]] = {}
    log_row, log_value = values.rows.append, values.arrays.append
    k = -1
    try:
        with np.errstate(all="ignore"):
            for k, (step, checks, o), f in zip(range(len(recs)), recs, flags, strict=True):
                for c in checks:
                    if c.valid.find(0, c.lo, c.hi) >= 0:
                        raise _InvalidRead(c)
                res = step()
                if o is not None:
                    if res.base is not None or res.dtype is not o.npd:
                        res = res.astype(o.npd)
                    if f & DEFERRED:
                        pending[k] = (o, res)
                    else:
                        o.view[...] = res
                        o.valid[o.lo:o.hi] = o.ones
                        log_row(k)
                        log_value(res)
                if f & LANDING:
                    for j in after[k]:
                        w, r = pending.pop(j)
                        w.view[...] = r
                        w.valid[w.lo:w.hi] = w.ones
                        log_row(j)
                        log_value(r)
                if not k % FLUSH_CHECK_EVERY and values.due():
                    values.flush()
    except (_InvalidRead, ReplayError, ValueError, TypeError, ArithmeticError,
            IndexError) as exc:
        return k, exc
    return k, None
