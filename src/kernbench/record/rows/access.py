"""Writes ``access.parquet``: the arrays indexed rows refer to, each distinct one stored once.

Arrays are deduplicated by a digest of their content (kind, dtype, shape, bytes); ids are
dense in first-seen order, so the same recording gives the same file in any process (no
hash-order dependence). Rows are written in batches: memory holds the digests only.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from kernbench.schemas.arrow import ACCESS
from kernbench.schemas.elements import AccessTable, encode
from kernbench.trace import writing

#: bytes of array data held before a batch is written
BATCH_BYTES = 4 << 20


class AccessWriter:
    """Interns arrays for ``{"access": N}``-style references; the file appears on first use."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._ids: dict[bytes, int] = {}
        self._rows: list[tuple[int, str, str, tuple[int, ...], bytes]] = []
        self._held = 0
        self._pq: pq.ParquetWriter | None = None
        #: every row by id, kept while a recording evaluates guards (``keep``), else None
        self._kept: dict[int, tuple[str, str, tuple[int, ...], bytes]] | None = None
        #: called with the id of every array added, new or seen (the op stream notes it)
        self.on_add: Callable[[int], None] | None = None

    @property
    def used(self) -> bool:
        return bool(self._ids)

    def __len__(self) -> int:
        return len(self._ids)

    def keep(self) -> AccessTable:
        """Keep every array from now on (a recording with guards reads them); the table of
        them, growing as arrays are added."""
        if self._kept is None:
            self._kept = {r[0]: r[1:] for r in self._rows}
        return AccessTable(self._kept)

    def add(self, kind: str, arr: np.ndarray) -> int:
        """The id of ``arr`` (``kind`` offsets/mask/values), storing it on first sight."""
        dtype, shape, data = encode(kind, arr)
        key = hashlib.sha256(f"{kind}|{dtype}|{shape}|".encode() + data).digest()
        got = self._ids.get(key)
        if got is not None:
            if self.on_add is not None:
                self.on_add(got)
            return got
        got = self._ids[key] = len(self._ids)
        self._rows.append((got, kind, dtype, shape, data))
        if self._kept is not None:
            self._kept[got] = (kind, dtype, shape, data)
        self._held += len(data)
        if self._held >= BATCH_BYTES:
            self.flush()
        if self.on_add is not None:
            self.on_add(got)
        return got

    def flush(self) -> None:
        if not self._rows:
            return
        rows = self._rows
        batch = pa.RecordBatch.from_arrays([
            pa.array([r[0] for r in rows], pa.int64()),
            pa.array([r[1] for r in rows], pa.string()),
            pa.array([r[2] for r in rows], pa.string()),
            pa.array([list(r[3]) for r in rows], pa.list_(pa.int64())),
            pa.array([r[4] for r in rows], pa.binary()),
        ], schema=ACCESS)
        if self._pq is None:
            self._pq = writing.open_writer(self.path, ACCESS, "access")
        self._pq.write_batch(batch)
        self._rows, self._held = [], 0

    def close(self) -> None:
        self.flush()
        if self._pq is not None:
            self._pq.close()
            self._pq = None

    def abort(self) -> None:
        self._rows = []
        writing.discard(self._pq)
        self._pq = None
