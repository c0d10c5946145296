"""``stream.parquet``, the op stream's events besides its rows: read through the one door,
checked whole (docs/trace-format.md, "The op stream").

Every row must name a program of the grid, a ``seq`` of the range a PE's rows can have, a
kind of ``STREAM_KINDS`` and a list of integers (an event's arguments); a file that breaks
any of it is unreadable (``TraceFormatError``, one line naming the first offending row).
``retime`` reads it; nothing else needs it, so a trace without one is read as
before and only refused by ``retime``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from kernbench.errors import TraceFormatError
from kernbench.schemas.arrow import STREAM_KINDS
from kernbench.trace import limits
from kernbench.trace.columns import chunk, ints, list_parts, nulls, strings
from kernbench.trace.parquet import open_parquet, read
from kernbench.trace.rows import MAX_VALUE

FILE = "stream.parquet"
FORMAT = "kernbench-stream"


@dataclass(frozen=True)
class Events:
    """The events of a trace's stream, in file order: per row its program, seq, kind (an
    index of ``STREAM_KINDS``), arguments (``args[start:start + length]``) and source
    (an index of ``srcs``, -1 for none)."""

    program: np.ndarray
    seq: np.ndarray
    kind: np.ndarray
    start: np.ndarray
    length: np.ndarray
    args: np.ndarray
    src: np.ndarray
    srcs: list[str]

    def __len__(self) -> int:
        return len(self.kind)


def max_rows(n_ops: int, n_programs: int) -> int:
    """The most events a trace may hold: a few per op (an allocation, a free, an access
    array, its work) and per program (its scopes and loops' bookkeeping)."""
    return 16 * (n_ops + n_programs) + 4096


def read_stream(path: Path, manifest: dict[str, Any]) -> Events | None:
    """The events of a trace's ``stream.parquet`` (None when the manifest lists none), its
    footer, size and every row checked."""
    if FILE not in (manifest.get("files") or {}):
        return None
    where = Path(path) / FILE
    pf = open_parquet(where, FORMAT)
    n_ops = int(manifest.get("n_ops") or 0)
    programs = math.prod(int(g) for g in manifest.get("grid") or [1])
    rows, cap = pf.metadata.num_rows, max_rows(n_ops, programs)
    if rows > cap:
        raise limits.TraceLimitError(f"{where}: {rows:,} events, over the {cap:,} that "
                                     f"{n_ops:,} ops of {programs:,} programs can have")
    return check_rows(read(pf, where), programs, where)


def _first(bad: np.ndarray) -> int:
    return int(np.flatnonzero(bad)[0])


def check_rows(table: pa.Table, programs: int, where: Path) -> Events:
    """The events of ``table``; TraceFormatError naming the first row that breaks the
    format."""
    cols = {name: chunk(table.column(name)) for name in table.schema.names}
    for name in ("program", "seq", "kind", "args"):
        col = cols[name]
        null = nulls(col.indices if pa.types.is_dictionary(col.type) else col)
        if null.any():
            raise TraceFormatError(f"{where}: row {_first(null)} has a null {name}")
    program, seq = ints(cols["program"]), ints(cols["seq"])
    bad = (program < 0) | (program >= programs)
    if bad.any():
        k = _first(bad)
        raise TraceFormatError(f"{where}: row {k} names program {int(program[k])}, not a "
                               f"program of the grid (0..{programs - 1})")
    bad = (seq < 0) | (seq >= MAX_VALUE)
    if bad.any():
        k = _first(bad)
        raise TraceFormatError(f"{where}: row {k} has seq {int(seq[k])}, not in "
                               f"0..{MAX_VALUE - 1}")
    values, codes = strings(cols["kind"])
    index = np.array([STREAM_KINDS.index(v) if v in STREAM_KINDS else -1 for v in values]
                     + [-1], np.int64)
    kind = index[codes]
    if (kind < 0).any():
        k = _first(kind < 0)
        raise TraceFormatError(f"{where}: row {k} has kind {values[codes[k]]!r}"[:200]
                               + f", not one of {STREAM_KINDS}")
    start, length, args = list_parts(cols["args"])
    if args.null_count:
        raise TraceFormatError(f"{where}: an event has a null argument")
    srcs, src = strings(cols["src"])
    return Events(program, seq, kind, start, length, ints(args), src, srcs)
