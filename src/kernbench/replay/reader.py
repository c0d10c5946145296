"""Stage 1 of the replay pipeline: ``ops.parquet`` as bounded windows in replay order.

Replay runs ops in ``(t_start_ps, op_id)`` order; the file holds them in emission order,
which is close to it (an op starts at or after it was issued). A first pass reads only the
``t_start_ps`` column, one batch at a time, and keeps one number per batch: the smallest
start time of all later batches. The second pass reads whole batches and releases every
buffered row that starts before that bound; no later row can come before it. What is held
is one batch plus the rows still waiting for earlier-starting ops (the ops in flight), so
memory does not grow with the op count.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from kernbench.errors import TraceFormatError
from kernbench.schemas.arrow import SCHEMAS, check_metadata

#: rows per batch read from ops.parquet (one window is at most about this many ops)
BATCH_ROWS = 1 << 15
FORMAT = "kernbench-ops"
#: the columns replay reads
COLUMNS = ("op_id", "pe", "t_start_ps", "t_end_ps", "name", "attrs", "src", "inputs",
           "output")


def validate_batch(batch: pa.RecordBatch | pa.Table) -> None:
    """The one place a batch of ``ops.parquet`` is checked before replay uses it.

    Replay does not go through ``Trace.ops_table`` (it would hold the whole file); a
    validator of op rows hooks in here, once per batch."""


def open_ops(path: Path) -> pq.ParquetFile:
    """``ops.parquet`` opened for streaming, its schema metadata and columns checked."""
    try:
        pf = pq.ParquetFile(path)
        schema = pf.schema_arrow
    except (pa.ArrowException, OSError) as exc:
        raise TraceFormatError(f"{path}: not a readable Parquet file ({exc})") from None
    check_metadata(schema.metadata, FORMAT, path)
    missing = [n for n in SCHEMAS[FORMAT].names if n not in schema.names]
    if missing:
        raise TraceFormatError(f"{path}: missing columns {missing}")
    return pf


def _batches(pf: pq.ParquetFile, columns: list[str], batch_rows: int
             ) -> Iterator[pa.RecordBatch]:
    try:
        yield from pf.iter_batches(batch_size=batch_rows, columns=columns)
    except (pa.ArrowException, OSError) as exc:
        raise TraceFormatError(f"ops.parquet: corrupt Parquet data ({exc})") from None


def _later_minima(pf: pq.ParquetFile, batch_rows: int) -> list[int]:
    """Per batch, the smallest t_start_ps of all later batches (a large value after the
    last)."""
    mins = []
    for b in _batches(pf, ["t_start_ps"], batch_rows):
        col = b.column(0).to_numpy(zero_copy_only=False)
        mins.append(int(col.min()) if len(col) else np.iinfo(np.int64).max)
    later = [np.iinfo(np.int64).max] * len(mins)
    for k in range(len(mins) - 2, -1, -1):
        later[k] = min(later[k + 1], mins[k + 1])
    return later


def _sorted(table: pa.Table) -> pa.Table:
    start = table.column("t_start_ps").to_numpy()
    op_id = table.column("op_id").to_numpy()
    order = np.lexsort((op_id, start))
    if (np.diff(order) == 1).all():
        return table
    return table.take(pa.array(order))


def windows(path: Path, batch_rows: int = BATCH_ROWS) -> Iterator[pa.Table]:
    """Tables of op rows in replay order ``(t_start_ps, op_id)``; together, every row once."""
    pf = open_ops(path)
    later = _later_minima(pf, batch_rows)
    held: pa.Table | None = None
    for k, batch in enumerate(_batches(pf, list(COLUMNS), batch_rows)):
        validate_batch(batch)
        table = pa.Table.from_batches([batch])
        if held is not None and held.num_rows:
            table = pa.concat_tables([held, table]).combine_chunks()
        table = _sorted(table)
        bound = later[k] if k < len(later) else np.iinfo(np.int64).max
        cut = int(np.searchsorted(table.column("t_start_ps").to_numpy(), bound, side="left"))
        held = table.slice(cut)
        if cut:
            yield table.slice(0, cut)
    if held is not None and held.num_rows:
        yield held


def count_rows(path: Path) -> int:
    """Rows of ops.parquet, from its footer."""
    return open_ops(path).metadata.num_rows
