"""The time-faithful run loop.

Ops run in (t_start_ps, op_id) order; each reads its inputs at its start and its output
becomes visible at its t_end_ps: before the first op starting at or after t_end_ps (writes
before reads at equal times), several landing at one point in (t_end_ps, op_id) order. That
order depends on the timestamps alone, so ``schedule`` computes it up front, vectorised: most
writes land right after their own op ran (the loop writes them at once), the others wait in
``pending`` for the op after which they land. A read that overtakes its producer therefore
sees invalid bytes or old data.

``execute`` runs one window of the pipeline (``replay/pipeline.py``): writes still pending
at the window's end are returned as ``Carried`` and enter the next window first, as ops
that already ran, with their own end time and op_id, so the landing order is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from operator import itemgetter
from typing import Any

import numpy as np

from kernbench.errors import PathDivergence, ReplayError
from kernbench.replay import batching
from kernbench.replay.binding import nothing
from kernbench.replay.convert import as_dtype
from kernbench.replay.decode import Program
from kernbench.replay.nogc import no_gc
from kernbench.replay.schedule import DEFERRED, LANDING, schedule
from kernbench.replay.store import Operand, check_read
from kernbench.replay.validity import expand, plan, rewind_of
from kernbench.replay.values import ValueLog
from kernbench.schemas.guards import diverges

FLUSH_CHECK_EVERY = 256
#: run identical ops of different programs as one call where that cannot be told
#: (replay/batching.py); False: one op at a time (the tests compare the two)
BATCH = True


@dataclass(frozen=True)
class Carried:
    """A write computed in an earlier window that has not landed yet."""

    op_id: int
    t_end: int
    operand: Operand
    value: np.ndarray


@dataclass(frozen=True)
class RunOutcome:
    """What happened in one window: how many of its ops ran, the error that stopped replay
    (if any) and its row, and the writes still in flight at the window's end."""

    executed: int
    error: ReplayError | None = None
    error_row: int | None = None
    carry: tuple[Carried, ...] = ()


class _InvalidRead(Exception):
    def __init__(self, operand: Operand) -> None:
        self.operand = operand


def _by_position(items: list[Any], idx: list[int]) -> list[Any]:
    if len(idx) < 2:
        return [items[j] for j in idx]
    return list(itemgetter(*idx)(items))


def _layout(outs: list[Operand | None], sig: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray, list[np.dtype], np.ndarray]:
    """Give each output operand its run of 0x01 bytes; per position, the dtype code and
    element count of what it writes, the dtypes by code, and the bytes written."""
    ones = memoryview(b"\x01" * max((o.nbytes for o in outs if o is not None), default=0))
    dtypes: dict[np.dtype, int] = {}
    code = np.zeros(len(outs), np.int64)
    count = np.zeros(len(outs), np.int64)
    for j, o in enumerate(outs):
        if o is not None and o.error is None:
            if len(o.ones) != o.nbytes:
                o.ones = ones[:o.nbytes]
            code[j] = dtypes.setdefault(o.npd, len(dtypes))
            count[j] = o.nbytes // o.npd.itemsize
    nbytes = np.array([o.nbytes if o is not None else 0 for o in outs] or [0], np.int64)
    return code[sig], count[sig], list(dtypes), nbytes[sig]


def _const(value: np.ndarray) -> np.ndarray:
    return value


@dataclass
class _Window:
    """One window in run order: the carried writes first (positions ``< c``), then the
    program's ops; the signature lists extended by one entry per carried write."""

    c: int
    sig_step: list[Any]
    sig_out: list[Operand | None]
    sig_ins: list[tuple[Operand, ...]]
    sig_checks: list[Any]
    sig: np.ndarray
    t_start: np.ndarray
    t_end: np.ndarray
    op_id: np.ndarray

    @property
    def sig_list(self) -> list[int]:
        return self.sig.tolist()


def _window(program: Program, carry: tuple[Carried, ...]) -> _Window:
    """The parallel arrays of one window: carried writes (as ops that already ran) first."""
    c = len(carry)
    n_sig = len(program.sig_step)
    order = program.order
    return _Window(
        c=c,
        sig_step=program.sig_step + [partial(_const, w.value) for w in carry],
        sig_out=program.sig_out + [w.operand for w in carry],
        sig_ins=program.sig_ins + [()] * c,
        sig_checks=program.sig_checks + [()] * c,
        sig=np.concatenate([np.arange(n_sig, n_sig + c, dtype=np.int64),
                            program.sig_id[order]]),
        t_start=np.concatenate([np.full(c, np.iinfo(np.int64).min, np.int64),
                                program.t_start[order]]),
        t_end=np.concatenate([np.array([w.t_end for w in carry], np.int64),
                              program.t_end[order]]),
        op_id=np.concatenate([np.array([w.op_id for w in carry], np.int64),
                              program.op_id[order]]))


def _schedule(win: _Window, rewinds: list[Any], last: bool) -> tuple[Any, ...]:
    """Time-faithful order of the window: ``schedule``'s flags, hazards and landing slots,
    and each position's landing rank (max for positions that write nothing)."""
    sig = win.sig
    writes = np.array([o is not None for o in win.sig_out] or [False], bool)[sig]
    # the memories each signature reads or rewinds (a memory named twice is one more
    # event at the same point: ``schedule`` only asks whether there is any)
    touched = [[o.mem.mid for o in ins if o.mem is not None]
               + ([r[0].mid] if r is not None else [])
               for ins, r in zip(win.sig_ins, rewinds, strict=True)]
    out_mem = np.array([o.mem.mid if o is not None and o.mem is not None else -1
                        for o in win.sig_out] or [-1], np.int64)[sig]
    flags, after, writers, land_k, land_sub = schedule(
        win.t_start, win.t_end, win.op_id, writes, expand(touched, sig), out_mem, last)
    landing = np.full(len(sig), np.iinfo(np.int64).max, np.int64)
    landing[writers] = (land_k + 1) * (int(land_sub.max(initial=0)) + 1) + land_sub
    return flags, after, writers, land_k, land_sub, landing


def _describer(program: Program, win: _Window) -> Any:
    """What the value log names a position by: its op id, and op name and source if any."""
    c, op_id, order = win.c, win.op_id, program.order

    def describe(pos: int) -> dict[str, Any]:
        if pos < c:
            return {"op_id": int(op_id[pos]), "name": None, "src": None}
        row = int(order[pos - c])
        return {"op_id": int(program.op_id[row]), "name": program.name(row).value,
                "src": program.src(row)}
    return describe


def _explain(program: Program, win: _Window, k: int, failure: Failure) -> RunOutcome:
    """The outcome of a window that failed at position ``k``, its error naming the op."""
    c = win.c
    row = int(program.order[k - c])
    if isinstance(failure, _InvalidRead):
        index = program.sig_ins[win.sig_list[k]].index(failure.operand)
        try:
            check_read(failure.operand, program.where(row), index)
        except ReplayError as err:
            return RunOutcome(k - c, err, row)
        raise AssertionError("check_read accepted an invalid read")  # pragma: no cover
    if isinstance(failure, PathDivergence):  # ADR-0840: the guard's line and program
        return RunOutcome(k - c, ReplayError(diverges(
            program.src(row), program.program(row), failure.recorded, failure.computed)), row)
    if isinstance(failure, ReplayError):
        return RunOutcome(k - c, ReplayError(f"{program.where(row)}: {failure}"), row)
    return RunOutcome(k - c, ReplayError(f"{program.where(row)}: {type(failure).__name__}: "
                                         f"{failure}"), row)


def execute(program: Program, values: ValueLog, carry: tuple[Carried, ...] = (),
            last: bool = True) -> RunOutcome:
    """See ``_execute``; the cyclic collector paused meanwhile (replay/nogc.py)."""
    with no_gc():
        return _execute(program, values, carry, last)


def _execute(program: Program, values: ValueLog, carry: tuple[Carried, ...] = (),
             last: bool = True) -> RunOutcome:
    """Run one window: the writes carried in from earlier windows (as ops that already ran,
    placed first), then every op of ``program`` in time-faithful order. Written values go
    to ``values`` in landing order. ``last`` False: writes landing after the window's last
    op come back in ``RunOutcome.carry``."""
    win = _window(program, carry)
    sig_list = win.sig_list
    rewinds = [rewind_of(s) for s in win.sig_step]
    flags, after, writers, land_k, land_sub, landing = _schedule(win, rewinds, last)
    values.begin_window(win.op_id, *_layout(win.sig_out, win.sig), landing,
                        _describer(program, win))
    valid = plan(win.sig_checks, win.sig_out, rewinds, win.sig, writers, land_k, land_sub)
    pending: dict[int, tuple[Operand, np.ndarray]] = {}
    if valid.ok:  # the plan settles the valid maps: rewinds need not touch them now
        steps = [nothing if r is not None else st
                 for st, r in zip(win.sig_step, rewinds, strict=True)]
        units = (batching.units(program, win.sig, steps, win.sig_out, flags, FLUSH_CHECK_EVERY)
                 if BATCH else [])
        steps = batching.resolve(steps, win.sig, units)
        recs = _by_position(list(zip(steps, win.sig_out, strict=True)), sig_list)
        k, failure = _run(recs, flags.tolist(), after, values, pending, units)
        valid.settle(k + 1 if failure is None else k)
    else:
        recs = _by_position(list(zip(win.sig_step, win.sig_checks, win.sig_out, strict=True)),
                            sig_list)
        k, failure = _run_checked(recs, flags.tolist(), after, values, pending)
    values.flush()
    if failure is not None:
        return _explain(program, win, k, failure)
    left = tuple(Carried(int(win.op_id[j]), int(win.t_end[j]), o, r)
                 for j, (o, r) in sorted(pending.items()))
    return RunOutcome(len(recs) - win.c, carry=left)


Failure = ReplayError | ValueError | TypeError | ArithmeticError | IndexError | _InvalidRead


def _run(recs: list[tuple[Any, Operand | None]], flags: list[int],
         after: dict[int, list[int]], values: ValueLog,
         pending: dict[int, tuple[Operand, np.ndarray]],
         batches: list[batching.Unit] | None = None) -> tuple[int, Failure | None]:
    """The loop when ``validity.plan`` proved every read valid: no valid map per op.
    Runs in chunks of FLUSH_CHECK_EVERY ops, checking for a statistics flush between;
    ``batches`` (inside chunks, in order) run as one call each. Returns the last position
    run and the failure that stopped it (if any)."""
    todo = iter(batches or ())
    unit = next(todo, None)
    n = len(recs)
    k = -1
    with np.errstate(all="ignore"):
        for k0 in range(0, n, FLUSH_CHECK_EVERY):
            a, k1 = k0, min(k0 + FLUSH_CHECK_EVERY, n)
            while unit is not None and unit.start < k1:
                failure = None
                if a < unit.start:  # most batches follow one another directly
                    k, failure = _plain(recs, flags, after, values, pending, a, unit.start)
                if failure is None:
                    k, failure = _batched(unit, recs, flags, after, values, pending)
                if failure is not None:
                    return k, failure
                a, unit = unit.end, next(todo, None)
            k, failure = _plain(recs, flags, after, values, pending, a, k1)
            if failure is not None:
                return k, failure
            if values.due():
                values.flush()
    return k, None


def _plain(recs: list[tuple[Any, Operand | None]], flags: list[int],
           after: dict[int, list[int]], values: ValueLog,
           pending: dict[int, tuple[Operand, np.ndarray]], k0: int, k1: int
           ) -> tuple[int, Failure | None]:
    """Positions ``[k0, k1)`` one at a time."""
    log_row, log_value = values.rows.append, values.arrays.append
    k = k0 - 1
    try:
        for k, (step, o), f in zip(range(k0, k1), recs[k0:k1], flags[k0:k1], strict=True):
            res = step()
            if o is not None:
                # the value as written: a fresh array of the output dtype (a view of
                # memory is snapshotted here, at the read time)
                if res.dtype is not o.npd:
                    res = as_dtype(res, o.npd)
                elif res.base is not None:
                    res = res.copy()
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
    except (ReplayError, ValueError, TypeError, ArithmeticError, IndexError) as exc:
        return k, exc
    return k, None


def _batched(unit: batching.Unit, recs: list[tuple[Any, Operand | None]], flags: list[int],
             after: dict[int, list[int]], values: ValueLog,
             pending: dict[int, tuple[Operand, np.ndarray]]) -> tuple[int, Failure | None]:
    """One batch: its members' values computed by one call, then written and logged as the
    one-at-a-time loop would; if the call fails, the members run one at a time."""
    batch, members = unit.batch, unit.members
    try:
        res = batch()
        if res.dtype is not batch.npd:
            res = as_dtype(res, batch.npd)
        elif res.base is not None:
            res = res.copy()
    except (ReplayError, ValueError, TypeError, ArithmeticError, IndexError):
        return _plain(recs, flags, after, values, pending, unit.start, unit.end)
    log_row, log_value = values.rows.append, values.arrays.append  # as in ``_plain``
    if unit.now and batch.out is not None:
        batch.out[...] = res
        values.rows.extend(members)
        values.arrays.extend(res)
    else:
        for i, k in enumerate(members):
            o = recs[k][1]
            assert o is not None  # a batch member writes an output
            if flags[k] & DEFERRED:
                pending[k] = (o, res[i])
            else:
                o.view[...] = res[i]
                log_row(k)
                log_value(res[i])
    k = members[-1]
    if flags[k] & LANDING:
        for j in after[k]:
            w, r = pending.pop(j)
            w.view[...] = r
            log_row(j)
            log_value(r)
    return k, None


def _run_checked(recs: list[tuple[Any, tuple[Operand, ...], Operand | None]],
                 flags: list[int], after: dict[int, list[int]], values: ValueLog,
                 pending: dict[int, tuple[Operand, np.ndarray]]
                 ) -> tuple[int, Failure | None]:
    """The loop with the per-byte valid map: each read is checked, each write marks."""
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
                    if res.dtype is not o.npd:
                        res = as_dtype(res, o.npd)
                    elif res.base is not None:
                        res = res.copy()
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
