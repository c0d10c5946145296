"""``shared.parquet``, the contention file: read through the one door, checked whole.

A trace recorded on hardware with a shared part (docs/hardware-model.md, "What the shared
parts cost") lists it in its manifest when an op waited for one. Every row must name an op
of the trace (``0 <= op_id < n_ops``), one of the parts (``SHARED_PARTS``), a resource
(non-empty) and a wait (``0 <= wait_ps``, below the format's absurd value); a file that
breaks any of it is unreadable (``TraceFormatError``, one line naming the first offending
row): the contention analyses would otherwise sum nonsense. Checked with numpy over the
Arrow buffers, like the op log (ADR-0630).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from kernbench.errors import TraceFormatError
from kernbench.schemas.arrow import SHARED_PARTS
from kernbench.trace import limits
from kernbench.trace.columns import byte_lengths, chunk, ints, nulls, strings
from kernbench.trace.parquet import open_parquet, read
from kernbench.trace.rows import MAX_VALUE

FILE = "shared.parquet"
FORMAT = "kernbench-shared"


def max_rows(n_ops: int, hw: dict[str, Any]) -> int:
    """The most rows a trace of ``n_ops`` ops may have: an op can wait for issue, its TCM
    port, every HBM channel and every link (the chip's PEs and its switch)."""
    per_op = 2 + int(hw.get("hbm_channels") or 0) + 2 * (int(hw.get("n_pe") or 0) + 1)
    return n_ops * per_op + 64


def read_shared(path: Path, manifest: dict[str, Any]) -> pa.Table | None:
    """The rows of a trace's ``shared.parquet`` (None when the manifest lists none), its
    footer, size and every row checked."""
    if FILE not in (manifest.get("files") or {}):
        return None
    where = Path(path) / FILE
    pf = open_parquet(where, FORMAT)
    n_ops = int(manifest.get("n_ops") or 0)
    rows, cap = pf.metadata.num_rows, max_rows(n_ops, manifest.get("hw") or {})
    if rows > cap:
        raise limits.TraceLimitError(f"{where}: {rows:,} rows, over the {cap:,} that "
                                     f"{n_ops:,} ops can wait for")
    table = read(pf, where)
    check_rows(table, n_ops, where)
    return table


def _first(bad: np.ndarray) -> int:
    return int(np.flatnonzero(bad)[0])


def check_rows(table: pa.Table, n_ops: int, where: Path) -> None:
    """TraceFormatError naming the first row that breaks the format, if any."""
    cols = {name: chunk(table.column(name)) for name in ("op_id", "part", "resource",
                                                         "wait_ps")}
    for name, col in cols.items():
        null = nulls(col.indices if pa.types.is_dictionary(col.type) else col)
        if null.any():
            raise TraceFormatError(f"{where}: row {_first(null)} has a null {name}")
    op_id, wait = ints(cols["op_id"]), ints(cols["wait_ps"])
    bad = (op_id < 0) | (op_id >= n_ops)
    if bad.any():
        k = _first(bad)
        raise TraceFormatError(f"{where}: row {k} names op {int(op_id[k])}, not an op of the "
                               f"trace (0..{n_ops - 1})")
    values, codes = strings(cols["part"])
    known = np.array([v in SHARED_PARTS for v in values] + [False], bool)
    bad = ~known[codes]
    if bad.any():
        k = _first(bad)
        raise TraceFormatError(f"{where}: row {k} has part {values[codes[k]]!r}"[:200]
                               + f", not one of {SHARED_PARTS}")
    empty = np.array([n == 0 for n in byte_lengths(cols["resource"])], bool)
    if empty.any():
        raise TraceFormatError(f"{where}: row {_first(empty)} has an empty resource")
    bad = (wait < 0) | (wait >= MAX_VALUE)
    if bad.any():
        k = _first(bad)
        raise TraceFormatError(f"{where}: row {k} has wait_ps {int(wait[k])}, not in "
                               f"0..{MAX_VALUE - 1}")
