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
from kernbench.replay.store import Operand, check_read
from kernbench.replay.validity import plan, rewind_of
from kernbench.replay.values import ValueLog

FLUSH_CHECK_EVERY = 256
#: position flags: the op's own write waits for a later landing point; writes land after it
DEFERRED, LANDING = 1, 2


@dataclass(frozen=True)
class RunOutcome:
    """What happened: how many ops ran, and the error that stopped replay (if any)."""

    executed: int
    error: ReplayError | None = None
    error_row: int | None = None


class _InvalidRead(Exception):
    def __init__(self, operand: Operand) -> None:
        self.operand = operand


def schedule(t_start: np.ndarray, t_end: np.ndarray, op_id: np.ndarray, writes: np.ndarray
             ) -> tuple[np.ndarray, dict[int, list[int]], np.ndarray, np.ndarray, np.ndarray]:
    """For ops in replay order (``t_start`` sorted): flags per position; position k ->
    positions whose writes land right after op k ran, in landing order, when that is not
    just op k's own write landing first; and, per writer position (ascending), the position
    after which its write lands and its rank there (1, 2, ...).

    A write of the op at position k lands before the first position p > k whose t_start
    is >= its t_end (p = n: after the last op); writes landing at one p in (t_end, op_id)
    order. This is exactly a heap of pending writes popped before each op."""
    n = len(t_start)
    writers = np.flatnonzero(writes)
    land = np.maximum(np.searchsorted(t_start, t_end[writers], side="left"), writers + 1)
    by = np.lexsort((op_id[writers], t_end[writers], land))
    land, w = land[by], writers[by]
    first = np.ones(len(w), bool)
    first[1:] = land[1:] != land[:-1]
    at = np.arange(len(w))
    rank = at - np.maximum.accumulate(np.where(first, at, 0)) if len(w) else at
    now = first & (w == land - 1)
    flags = np.zeros(n, np.int8)
    later = w[~now]
    flags[later] |= DEFERRED
    after: dict[int, list[int]] = {}
    for k, j in zip((land[~now] - 1).tolist(), later.tolist(), strict=True):
        after.setdefault(k, []).append(j)
    if after:
        flags[np.fromiter(after, np.int64, len(after))] |= LANDING
    land_k, land_sub = np.empty(len(w), np.int64), np.empty(len(w), np.int64)
    land_k[by], land_sub[by] = land - 1, rank + 1
    return flags, after, writers, land_k, land_sub


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
    flags, after, writers, land_k, land_sub = schedule(
        program.t_start[order], program.t_end[order], program.op_id[order], writes)
    valid = plan(program.sig_checks, program.sig_out, [rewind_of(s) for s in program.sig_step],
                 sig, writers, land_k, land_sub)
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
    """The loop when ``validity.plan`` proved every read valid: no valid map per op."""
    pending: dict[int, tuple[Operand, np.ndarray]] = {}
    log_row, log_value = values.rows.append, values.arrays.append
    k = -1
    try:
        with np.errstate(all="ignore"):
            for k, (step, o), f in zip(range(len(recs)), recs, flags, strict=True):
                res = step()
                if o is not None:
                    # the value as written: a fresh array of the output dtype (a view of
                    # memory is snapshotted here, at the read time)
                    if res.base is not None or res.dtype is not o.npd:
                        res = res.astype(o.npd)
                    if f & DEFERRED:
                        pending[k] = (o, res)
                    else:
                        o.view[...] = res
                        log_row(k)
                        log_value(res)
                if f & LANDING:
                    for j in after[k]:
                        w, r = pending.pop(j)
                        w.view[...] = r
                        log_row(j)
                        log_value(r)
                if not k % FLUSH_CHECK_EVERY and values.due():
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
