"""A trace's op stream, read program by program as the player issues it (bounded memory).

``ops.parquet`` and ``stream.parquet`` are written in row groups, in the order the
recording made them. A program's script is its kernel's rows merged with its events in
the order they happened: an event noted at ``seq`` comes before the program's first row of
a higher ``seq`` (``record/rows/stream.py``); the ``recv`` row a posted ``recv_async``
resolves into is the machine's (it makes it again), so the post carries that row's operand
instead. Each program reads only the row groups that hold its rows and events (an index
of their ``program`` columns, read first); a decoded row group is kept for the other
programs in it while a few are cached, so memory holds a few row groups, never the trace.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from kernbench.errors import TraceFormatError
from kernbench.record.retime.script import Event, Row, read_events, read_rows
from kernbench.record.rows.stream import RECV_ASYNC
from kernbench.schemas.ops import Op
from kernbench.trace import limits
from kernbench.trace.columns import ints, nulls
from kernbench.trace.op_stream import FILE, FORMAT, check_rows, max_rows
from kernbench.trace.parquet import open_parquet

#: the op log's columns a script needs (the times are the new machine's)
COLUMNS = ["op_id", "program", "seq", "name", "parent", "inputs", "output", "num_elements",
           "nbytes", "flops", "attrs", "src"]
#: decoded row groups kept for the programs still to read them
CACHED = 8


class Part:
    """One Parquet file read a row group at a time: which groups hold each program's rows,
    and the groups decoded lately (``decode`` turns a group's table into per-program
    values)."""

    def __init__(self, pf: Any, path: Path, index: list[str],
                 keep: Callable[[Any], np.ndarray], decode: Callable[[Any], dict[int, Any]],
                 columns: list[str] | None) -> None:
        self.pf, self.path, self.decode, self.columns = pf, path, decode, columns
        self.groups: dict[int, list[int]] = {}
        for g in range(pf.num_row_groups):
            got = read_group(pf, path, g, index)
            for p in np.unique(ints(got.column("program"))[keep(got)]).tolist():
                self.groups.setdefault(p, []).append(g)
        self.cache: OrderedDict[int, dict[int, Any]] = OrderedDict()

    def group(self, g: int) -> dict[int, Any]:
        got = self.cache.get(g)
        if got is None:
            got = self.decode(read_group(self.pf, self.path, g, self.columns))
            self.cache[g] = got
            if len(self.cache) > CACHED:
                self.cache.popitem(last=False)
        else:
            self.cache.move_to_end(g)
        return got

    def of(self, program: int) -> Iterator[Any]:
        """The program's values, group by group, in file order."""
        for g in self.groups.get(program, ()):
            got = self.group(g).get(program)
            if got is not None:
                yield got


def read_group(pf: Any, path: Path, g: int, columns: list[str] | None) -> Any:
    try:
        return pf.read_row_group(g, columns=columns)
    except (OSError, ValueError) as exc:
        raise TraceFormatError(f"{path}: corrupt Parquet data ({exc})"[:300]) from None


def _kernel(table: Any) -> np.ndarray:
    return nulls(table.column("parent").combine_chunks())


def _every(table: Any) -> np.ndarray:
    return np.ones(table.num_rows, bool)


class Source:
    """The op stream of the trace at ``path``: each program's steps and works."""

    def __init__(self, path: Path, manifest: dict[str, Any], programs: int) -> None:
        ops = path / "ops.parquet"
        self.ops = Part(open_parquet(ops, "kernbench-ops"), ops, ["program", "parent"], _kernel,
                        read_rows, COLUMNS)
        where = path / FILE
        spf = open_parquet(where, FORMAT)
        n_ops = int(manifest.get("n_ops") or 0)
        if spf.metadata.num_rows > max_rows(n_ops, programs):
            raise limits.TraceLimitError(f"{where}: {spf.metadata.num_rows:,} events, over "
                                         f"the {max_rows(n_ops, programs):,} a trace can have")
        self.events = Part(spf, where, ["program"], _every,
                           lambda t: read_events(check_rows(t, programs, where)), None)
        self.programs = programs

    def rows(self, program: int) -> Iterator[Row]:
        for part in self.ops.of(program):
            yield from part

    def program_events(self, program: int) -> Iterator[Event]:
        for evs, _ in self.events.of(program):
            yield from evs

    def works(self, program: int) -> Iterator[tuple[int, tuple[int, ...]]]:
        for _, works in self.events.of(program):
            yield from works

    def script(self, program: int) -> Script:
        return Script(self, program)


class Script:
    """One program's op stream as it is issued: ``steps()`` (a ``Row`` to issue, an
    ``Event`` to apply, in order) and ``work(seq)``, the work its row of ``seq`` priced
    where the row does not say it (asked in seq order)."""

    def __init__(self, source: Source, program: int) -> None:
        self.source, self.program = source, program
        self._works = source.works(program)
        self._next: tuple[int, tuple[int, ...]] | None = next(self._works, None)

    def work(self, seq: int) -> tuple[int, ...] | None:
        nxt = self._next
        while nxt is not None and nxt[0] < seq:
            nxt = next(self._works, None)
        self._next = nxt
        return nxt[1] if nxt is not None and nxt[0] == seq else None

    def steps(self) -> Iterator[Row | Event]:
        rows = self.source.rows(self.program)
        ahead: deque[Row] = deque()  # rows read while looking for a post's recv row
        posted: set[int] = set()  # op ids of recv rows a posted receive resolves into

        def next_row() -> Row | None:
            while True:
                r = ahead.popleft() if ahead else next(rows, None)
                if r is None or r.op_id not in posted:
                    return r

        row = next_row()
        for e in self.source.program_events(self.program):
            while row is not None and row.seq < e.seq:
                yield row
                row = next_row()
            if e.kind == RECV_ASYNC:
                row = self._post(e, row, rows, ahead, posted)
                if row is not None and row.op_id in posted:
                    row = next_row()
            yield e
        while row is not None:
            yield row
            row = next_row()

    def _post(self, e: Event, row: Row | None, rows: Iterator[Row], ahead: deque[Row],
              posted: set[int]) -> Row | None:
        """Pair the posted receive ``e`` with the first later ``recv`` row writing its
        buffer (the current row, one already read ahead, or one read ahead now)."""
        addr = e.args[0]

        def matches(r: Row) -> bool:
            return (r.op is Op.RECV and r.op_id not in posted and r.seq >= e.seq
                    and r.out is not None and r.out[2] == addr)

        for r in ([row] if row is not None else []) + list(ahead):
            if matches(r):
                posted.add(r.op_id)
                e.out = r.out
                return row
        for r in rows:
            ahead.append(r)
            if matches(r):
                posted.add(r.op_id)
                e.out = r.out
                return row
        raise TraceFormatError(f"program {self.program}: the recv_async posted at seq "
                               f"{e.seq} into TCM {addr} has no recv row")

