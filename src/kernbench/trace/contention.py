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

from kernbench.schemas.arrow import SHARED_PARTS
from kernbench.trace.columns import byte_lengths, chunk, ints, strings
from kernbench.trace.rows import MAX_VALUE
from kernbench.trace.sidefile import read_capped, refuse, refuse_nulls

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
    n_ops = int(manifest.get("n_ops") or 0)
    cap = max_rows(n_ops, manifest.get("hw") or {})
    got = read_capped(path, manifest, FILE, FORMAT, cap,
                      lambda rows: f"{rows:,} rows, over the {cap:,} that {n_ops:,} ops can "
                                   "wait for")
    if got is None:
        return None
    table, where = got
    check_rows(table, n_ops, where)
    return table


def check_rows(table: pa.Table, n_ops: int, where: Path) -> None:
    """TraceFormatError naming the first row that breaks the format, if any."""
    names = ("op_id", "part", "resource", "wait_ps")
    cols = {name: chunk(table.column(name)) for name in names}
    refuse_nulls(cols, names, where)
    op_id, wait = ints(cols["op_id"]), ints(cols["wait_ps"])
    refuse((op_id < 0) | (op_id >= n_ops), where,
           lambda k: f"names op {int(op_id[k])}, not an op of the trace (0..{n_ops - 1})")
    values, codes = strings(cols["part"])
    known = np.array([v in SHARED_PARTS for v in values] + [False], bool)
    refuse(~known[codes], where,
           lambda k: f"has part {values[codes[k]]!r}"[:200] + f", not one of {SHARED_PARTS}")
    refuse(np.array([n == 0 for n in byte_lengths(cols["resource"])], bool), where,
           "has an empty resource")
    refuse((wait < 0) | (wait >= MAX_VALUE), where,
           lambda k: f"has wait_ps {int(wait[k])}, not in 0..{MAX_VALUE - 1}")
