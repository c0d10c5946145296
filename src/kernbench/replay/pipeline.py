"""The replay pipeline: one direction, one bounded window at a time.

    read     reader.window_rows   ops.parquet rows in replay order, a batch at a time
    plan     decode.decode        operands resolved, op signatures bound to numpy steps
             engine.execute       landing order (schedule) and read validity (validity),
    execute                       then the run loop over the window
    log      values.ValueLog      statistics of written values, one Parquet batch per flush

Writes still in flight at a window's end are carried into the next window (as ops that
already ran); read validity carries over in the MemoryStore's valid maps. Nothing here
keeps a per-op object beyond the current window.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kernbench.replay.decode import Program, decode
from kernbench.replay.engine import execute
from kernbench.replay.nogc import no_gc
from kernbench.replay.progress import Progress
from kernbench.replay.reader import BATCH_ROWS, count_rows
from kernbench.replay.reader import window_rows as held_windows
from kernbench.replay.store import MemoryStore
from kernbench.replay.values import ValueLog
from kernbench.trace import Trace

#: distinct operands the store may cache before it starts over (bounds memory)
MAX_CACHED_OPERANDS = 1 << 17


@dataclass(frozen=True)
class Outcome:
    n_ops: int
    executed: int
    error: dict[str, Any] | None = None


def _error_info(program: Program, row: int, message: str) -> dict[str, Any]:
    return {"op_id": int(program.op_id[row]), "name": program.name(row).value,
            "src": program.src(row), "message": message}


def run(trace: Trace, store: MemoryStore, values: ValueLog,
        window_rows: int = BATCH_ROWS, progress: Progress | None = None) -> Outcome:
    """Replay every op of the opened ``trace`` against ``store``, logging values to
    ``values``. The rows come through the trace: its ``ops_file`` (the one open of
    ops.parquet in a replay, the validator's), its rows when the validator decoded them
    already (a small file), and its access.parquet arrays (indexed rows, const values).
    The cyclic collector stays paused from the first window to the last (ADR-0712): paused
    per window only, it ran as each window ended, walking every signature bound so far."""
    with no_gc():
        try:
            return _run(trace, store, values, window_rows, progress)
        finally:  # what the run made goes by reference counting before collection resumes
            values.release()
            store.forget_operands()


def _run(trace: Trace, store: MemoryStore, values: ValueLog, window_rows: int,
         progress: Progress | None) -> Outcome:
    validation = trace.validated().validation
    ops = trace.ops_file
    access = trace.access
    n_ops = count_rows(ops)
    executed = 0
    carry: tuple = ()
    bound: dict = {}  # op signatures bound to steps, kept across windows
    stream = held_windows(ops, window_rows, validation.ops)
    window = next(stream, None)
    while window is not None:
        following = next(stream, None)
        table, rows = window  # a small file's one table and this window's rows
        program = decode(table, store, bound, access, rows)
        out = execute(program, values, carry, last=following is None)
        executed += out.executed
        if progress is not None:
            progress.update(executed)
        if out.error is not None:
            assert out.error_row is not None, "the engine names the row of its error"
            return Outcome(n_ops, executed, _error_info(program, out.error_row,
                                                        str(out.error)))
        carry = out.carry
        window = following
        if store.n_operands > MAX_CACHED_OPERANDS or len(bound) > MAX_CACHED_OPERANDS:
            store.forget_operands()
            bound.clear()
    return Outcome(n_ops, executed)
