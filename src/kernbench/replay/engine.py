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
             ) -> tuple[np.ndarray, dict[int, list[int]]]:
    """For ops in replay order (``t_start`` sorted): (flags per position, position k ->
    positions whose writes land right after op k ran, in landing order, when that is not
    just op k's own write landing first).

    A write of the op at position k lands before the first position p > k whose t_start
    is >= its t_end (p = n: after the last op); writes landing at one p in (t_end, op_id)
    order. This is exactly a heap of pending writes popped before each op."""
    n = len(t_start)
    w = np.flatnonzero(writes)
    land = np.maximum(np.searchsorted(t_start, t_end[w], side="left"), w + 1)
    by = np.lexsort((op_id[w], t_end[w], land))
    land, w = land[by], w[by]
    first = np.ones(len(w), bool)
    first[1:] = land[1:] != land[:-1]
    now = first & (w == land - 1)
    flags = np.zeros(n, np.int8)
    later = w[~now]
    flags[later] |= DEFERRED
    after: dict[int, list[int]] = {}
    for k, j in zip((land[~now] - 1).tolist(), later.tolist(), strict=True):
        after.setdefault(k, []).append(j)
    if after:
        flags[np.fromiter(after, np.int64, len(after))] |= LANDING
    return flags, after


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
    flags, after = schedule(program.t_start[order], program.t_end[order],
                            program.op_id[order], writes)
    recs = _by_position(list(zip(program.sig_step, program.sig_checks, program.sig_out,
                                 strict=True)), sig_list)
    pending: dict[int, tuple[Operand, np.ndarray]] = {}
    log_row, log_value = values.rows.append, values.arrays.append

    k = -1
    try:
        with np.errstate(all="ignore"):
            for k, (step, checks, o), f in zip(range(len(recs)), recs, flags.tolist(),
                                               strict=True):
                for c in checks:
                    if c.valid.find(0, c.lo, c.hi) >= 0:
                        raise _InvalidRead(c)
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
    except _InvalidRead as exc:
        row = int(order[k])
        index = program.sig_ins[sig_list[k]].index(exc.operand)
        try:
            check_read(exc.operand, program.where(row), index)
        except ReplayError as err:
            return RunOutcome(k, err, row)
        raise AssertionError("check_read accepted an invalid read") from None  # pragma: no cover
    except ReplayError as err:
        row = int(order[k])
        return RunOutcome(k, ReplayError(f"{program.where(row)}: {err}"), row)
    except (ValueError, TypeError, ArithmeticError, IndexError) as exc:
        row = int(order[k])
        return RunOutcome(k, ReplayError(f"{program.where(row)}: {type(exc).__name__}: {exc}"),
                          row)
    return RunOutcome(len(recs))
