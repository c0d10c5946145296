"""Stage 1 of the replay pipeline: ``ops.parquet`` as bounded windows in replay order.

Replay runs ops in ``(t_start_ps, op_id)`` order; the file holds them in emission order.
The recorder emits each PE's ops in issue order, often one PE after another, so the file is
a few *runs* (maximal stretches where ``t_issue_ps`` never decreases), each close to start
order. A first pass reads only the two time columns and keeps, per piece of a run (at most
``PIECE_ROWS`` rows), its row range and smallest start time. The second pass merges the runs:
it holds the rows read so far, and releases, in order, every held row that starts before
the smallest start time of all unread pieces; no unread row can come before it. It reads
next from the run whose unread rest starts earliest. What is held is about one piece per
run plus the ops in flight, so memory does not grow with the op count.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from kernbench.errors import TraceFormatError
from kernbench.trace.columns import ints, take
from kernbench.trace.parquet import batches, open_parquet, read

#: the least rows of a window (but the last)
BATCH_ROWS = 1 << 14
#: rows per piece read from ops.parquet: pieces of all runs are held at once, so a few
#: runs' pieces together stay about one window
PIECE_ROWS = 1 << 12
FORMAT = "kernbench-ops"
#: a file of at most this many rows is decoded once and sliced (its runs would otherwise
#: each decode the one row group from its start)
SMALL_FILE_ROWS = 1 << 17
#: a larger file is read by one streaming reader per run (a stretch of rows in issue
#: order), each holding a decoded batch; past this many runs it is decoded once instead
MAX_CURSORS = 256
#: the columns replay reads
COLUMNS = ("op_id", "pe", "program", "t_start_ps", "t_end_ps", "name", "attrs", "src", "inputs",
           "output")
NEVER = np.iinfo(np.int64).max


def open_ops(path: Path) -> pq.ParquetFile:
    """``ops.parquet`` opened for streaming, its footer checked (metadata, columns and types,
    size budget). Its rows were validated when the trace was opened (``Trace.validated``)."""
    return open_parquet(path, FORMAT)


def count_rows(source: Path | pq.ParquetFile) -> int:
    """Rows of ops.parquet, from its footer."""
    return _opened(source).metadata.num_rows


def _opened(source: Path | pq.ParquetFile) -> pq.ParquetFile:
    return source if isinstance(source, pq.ParquetFile) else open_ops(source)


@dataclass
class _Run:
    """A stretch of rows [lo, hi) cut into pieces; ``rest_min[j]``: the smallest start
    time of pieces j.. (NEVER past the end); ``next`` the first unread piece."""

    bounds: list[int]
    rest_min: list[int]
    next: int = 0

    @property
    def pending(self) -> int:
        return self.rest_min[self.next] if self.next < len(self.bounds) - 1 else NEVER


def _time_batches(pf: pq.ParquetFile, chunk: int, whole: pa.Table | None
                  ) -> Iterator[pa.RecordBatch | pa.Table]:
    """(t_issue_ps, t_start_ps) of the file in batches of ``chunk`` rows: read from the file,
    or sliced from the ``whole`` table already read (a small file is read once)."""
    if whole is None:
        yield from batches(pf, Path("ops.parquet"), chunk, ["t_issue_ps", "t_start_ps"])
        return
    times = whole.select(["t_issue_ps", "t_start_ps"])
    for lo in range(0, times.num_rows, chunk):
        yield times.slice(lo, chunk)


def _runs(pf: pq.ParquetFile, chunk: int, whole: pa.Table | None = None) -> list[_Run]:
    """Pass 1: the runs of the file, cut into pieces of at most ``chunk`` rows."""
    starts: list[int] = [0]  # run starts
    pieces: list[tuple[int, int, int]] = []  # (lo, hi, min t_start)
    row, last_issue = 0, None
    try:
        for b in _time_batches(pf, chunk, whole):
            if b.column(0).null_count or b.column(1).null_count:
                raise TraceFormatError("ops.parquet: t_issue_ps/t_start_ps has nulls")
            issue, start = ints(b.column(0)), ints(b.column(1))
            cuts = np.flatnonzero(np.diff(issue) < 0) + 1
            if last_issue is not None and len(issue) and issue[0] < last_issue:
                cuts = np.concatenate([[0], cuts])
            edges = [0, *cuts.tolist(), len(issue)]
            for a, z in zip(edges, edges[1:], strict=False):
                if z > a:
                    pieces.append((row + a, row + z, int(start[a:z].min())))
            starts.extend((row + cuts).tolist())
            row += len(issue)
            last_issue = int(issue[-1]) if len(issue) else last_issue
    except (pa.ArrowException, OSError) as exc:
        raise TraceFormatError(f"ops.parquet: corrupt Parquet data ({exc})") from None
    starts = sorted(set(s for s in starts if s < row))
    runs: list[_Run] = []
    k = 0
    for r in range(len(starts)):
        hi = starts[r + 1] if r + 1 < len(starts) else row
        mine = []
        while k < len(pieces) and pieces[k][1] <= hi:
            mine.append(pieces[k])
            k += 1
        rest = [NEVER] * (len(mine) + 1)
        for j in range(len(mine) - 1, -1, -1):
            rest[j] = min(rest[j + 1], mine[j][2])
        runs.append(_Run([p[0] for p in mine] + [hi], rest[:len(mine)] or [NEVER]))
    return runs


class _Cursor:
    """Rows of one run, read front to back with its own streaming reader: the file's
    compressed row group and one decoded batch at a time, never a whole decoded group."""

    def __init__(self, pf: pq.ParquetFile, first: np.ndarray, lo: int) -> None:
        self.pf, self.first = pf, first
        self.g = int(np.searchsorted(first, lo, side="right")) - 1  # row group of ``lo``
        self.batches: Iterator[pa.RecordBatch] | None = None
        self.buf: pa.Table | None = None
        self.at = int(first[self.g]) if len(first) > 1 else 0  # file row of buf[0]

    def _more(self) -> pa.RecordBatch:
        if self.batches is None:
            groups = list(range(self.g, self.pf.metadata.num_row_groups))
            self.batches = batches(self.pf, Path("ops.parquet"), PIECE_ROWS, list(COLUMNS),
                                   groups)
        try:
            return next(self.batches)
        except StopIteration:
            raise TraceFormatError("ops.parquet: fewer rows than its footer says") from None

    def read(self, lo: int, hi: int) -> pa.Table:
        """Rows [lo, hi) (``lo`` at or after every row read before)."""
        parts = []
        while lo < hi:
            if self.buf is None or self.at + self.buf.num_rows <= lo:
                if self.buf is not None:
                    self.at += self.buf.num_rows
                self.buf = pa.Table.from_batches([self._more()])
                continue
            a = lo - self.at
            b = min(hi - self.at, self.buf.num_rows)
            parts.append(self.buf.slice(a, b - a))
            lo = self.at + b
        table = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
        return table


class _Whole:
    """A small file's rows, decoded once; a piece is its row numbers, and a window the
    whole table with the numbers of its rows (nothing is taken or copied per window)."""

    def __init__(self, pf: pq.ParquetFile, decoded: pa.Table | None = None) -> None:
        cols = [*COLUMNS, "t_issue_ps"]
        self.table = (read(pf, Path("ops.parquet"), cols) if decoded is None
                      else decoded.select(cols))
        self.op_id = ints(self.table.column("op_id"))
        self.start = ints(self.table.column("t_start_ps"))

    def read(self, lo: int, hi: int) -> np.ndarray:
        return np.arange(lo, hi)


def windows(source: Path | pq.ParquetFile, batch_rows: int = BATCH_ROWS,
            decoded: pa.Table | None = None) -> Iterator[pa.Table]:
    """Tables of op rows in replay order ``(t_start_ps, op_id)``; together, every row once.
    Each but the last has at least ``batch_rows`` rows when the file has that many.
    ``source``: the path, or the file already opened (``open_ops``; opened once per replay);
    ``decoded``: the file's rows if the validator already decoded them (a small file)."""
    for table, rows in window_rows(source, batch_rows, decoded):
        yield table if rows is None else take(table, rows).combine_chunks()


def window_rows(source: Path | pq.ParquetFile, batch_rows: int = BATCH_ROWS,
                decoded: pa.Table | None = None
                ) -> Iterator[tuple[pa.Table, np.ndarray | None]]:
    """``windows``, each as (table, rows): a small file's whole table and the numbers of the
    window's rows in replay order (the decoder reads the table's columns once, ADR-0711);
    a larger file's window as its own table (rows None)."""
    pf = _opened(source)
    meta = pf.metadata
    first = np.cumsum([0, *(meta.row_group(g).num_rows for g in range(meta.num_row_groups))])
    if decoded is not None and decoded.num_rows != meta.num_rows:
        raise TraceFormatError(f"ops.parquet: {meta.num_rows} rows, {decoded.num_rows} decoded")
    whole = None
    if meta.num_rows <= SMALL_FILE_ROWS:  # read once: the first pass slices what was read
        whole = _Whole(pf, decoded)
        runs = _runs(pf, min(PIECE_ROWS, batch_rows), whole.table)
        cursors: dict[int, _Cursor | _Whole] = {id(r): whole for r in runs}
    else:
        runs = _runs(pf, min(PIECE_ROWS, batch_rows))
        if len(runs) <= MAX_CURSORS:
            cursors = {id(r): _Cursor(pf, first, r.bounds[0]) for r in runs}
        else:  # a log far from time order (PEs interleaved at their guards, ADR-0840): a
            whole = _Whole(pf, decoded)  # reader per run would hold a row group each
            cursors = {id(r): whole for r in runs}
    live = [(r.pending, i) for i, r in enumerate(runs) if r.pending < NEVER]
    heapq.heapify(live)  # (pending, run index) of the runs with unread pieces
    held: list[Any] = []  # pieces read, not yet released (row numbers of a whole file)
    starts: list[np.ndarray] = []
    below = _Below()
    while True:
        if live:
            _, i = heapq.heappop(live)
            run = runs[i]
            piece: Any = cursors[id(run)].read(run.bounds[run.next], run.bounds[run.next + 1])
            run.next += 1
            if run.pending < NEVER:
                heapq.heappush(live, (run.pending, i))
            held.append(piece)
            starts.append(whole.start[piece] if whole is not None
                          else piece.column("t_start_ps").to_numpy())
            below.add(starts[-1])
            bound = live[0][0] if live else NEVER
            if live and below.count(bound) < batch_rows:
                continue
        else:
            bound = NEVER
        if not held:
            break
        start = np.concatenate(starts)
        out = np.flatnonzero(start < bound)
        if whole is not None:
            table, numbers = whole.table, np.concatenate(held)
            op_id = whole.op_id[numbers]
        else:
            table = pa.concat_tables(held)
            op_id = table.column("op_id").to_numpy()
        order = out[np.lexsort((op_id[out], start[out]))]
        rest = np.flatnonzero(start >= bound)
        if not len(rest):
            held = []
        else:
            held = [numbers[rest] if whole is not None else take(table, rest)]
        starts = [start[rest]] if len(rest) else []
        below = _Below()
        for st in starts:
            below.add(st)
        if len(order):
            yield ((table, numbers[order]) if whole is not None
                   else (take(table, order).combine_chunks(), None))
        if not live:
            break


class _Below:
    """How many held rows start before a bound that never decreases: each piece's sorted
    start times with a cursor, in a heap by the first start not yet counted."""

    def __init__(self) -> None:
        self.heap: list[tuple[int, int]] = []
        self.pieces: list[np.ndarray] = []
        self.at: list[int] = []
        self.n = 0

    def add(self, start: np.ndarray) -> None:
        if len(start):
            self.pieces.append(np.sort(start))
            self.at.append(0)
            heapq.heappush(self.heap, (int(self.pieces[-1][0]), len(self.pieces) - 1))

    def count(self, bound: int) -> int:
        while self.heap and self.heap[0][0] < bound:
            _, k = heapq.heappop(self.heap)
            piece = self.pieces[k]
            j = int(np.searchsorted(piece, bound, side="left"))
            self.n += j - self.at[k]
            self.at[k] = j
            if j < len(piece):
                heapq.heappush(self.heap, (int(piece[j]), k))
        return self.n
