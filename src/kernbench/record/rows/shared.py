"""Writes ``shared.parquet``: how long each shared part of the chip delayed an op.

The chip-wide machine calls ``add(op_id, part, resource, wait_ps)`` for every wait it
prices; a row of no wait is dropped, so the file is sparse. Rows are held compactly (every
``CHUNK_ROWS`` adds become four numpy columns, the resource names interned) and written once
at ``close``, sorted by (op_id, part, resource) with repeated keys summed, so the file is
the same bytes in any process. A recording with no wait writes no file (ahbm-v1 and
ahbm-v2 never add one).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

from kernbench.schemas.arrow import SHARED, SHARED_PARTS
from kernbench.trace import writing

#: adds held as Python tuples before they become numpy columns
CHUNK_ROWS = 1 << 16
_PART_CODE = {p: k for k, p in enumerate(SHARED_PARTS)}


class SharedWriter:
    """The waits of a recording's ops on the shared parts; ``close`` writes them."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._rows: list[tuple[int, str, str, int]] = []
        self._names: dict[str, int] = {}
        self._chunks: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []

    def add(self, op_id: int, part: str, resource: str, wait_ps: int) -> None:
        """``resource`` of ``part`` (``issue``, ``hbm``, ``tcm``, ``link``) delayed op
        ``op_id`` by ``wait_ps`` (nothing is kept for no wait)."""
        if wait_ps > 0:
            rows = self._rows
            rows.append((op_id, part, resource, wait_ps))
            if len(rows) >= CHUNK_ROWS:
                self._compact()
        elif wait_ps < 0:
            raise AssertionError(f"op {op_id}: {resource} waited {wait_ps} ps; a wait is "
                                 "never negative")

    def __len__(self) -> int:
        return len(self._rows) + sum(len(c[0]) for c in self._chunks)

    def _compact(self) -> None:
        rows, self._rows = self._rows, []
        if not rows:
            return
        ops, parts, names, waits = zip(*rows, strict=True)
        unknown = set(parts) - _PART_CODE.keys()
        if unknown:
            raise AssertionError(f"unknown shared parts {sorted(unknown)}; one of "
                                 f"{SHARED_PARTS}")
        intern = self._names
        for r in dict.fromkeys(names):  # each new name once, in order of first use
            intern.setdefault(r, len(intern))
        self._chunks.append((
            np.array(ops, np.int64), np.array(list(map(_PART_CODE.__getitem__, parts)), np.int8),
            np.array(list(map(intern.__getitem__, names)), np.int64),
            np.array(waits, np.int64)))

    def table(self) -> pa.Table:
        """The rows as ``shared.parquet`` stores them: sorted, each key once."""
        self._compact()
        if self._chunks:
            ops, parts, res, waits = (np.concatenate(col)
                                      for col in zip(*self._chunks, strict=True))
        else:
            ops, parts, res, waits = (np.zeros(0, t) for t in (np.int64, np.int8, np.int64,
                                                                np.int64))
        names = list(self._names)
        rank = np.empty(len(names), np.int64)  # a resource's place in name order
        rank[sorted(range(len(names)), key=names.__getitem__)] = np.arange(len(names))
        key_res = rank[res]
        order = np.lexsort((key_res, parts, ops))
        ops, parts, res, waits, key_res = (a[order] for a in (ops, parts, res, waits, key_res))
        first = np.ones(len(ops), bool)  # the first row of each (op_id, part, resource)
        first[1:] = (ops[1:] != ops[:-1]) | (parts[1:] != parts[:-1]) | (
            key_res[1:] != key_res[:-1])
        starts = np.flatnonzero(first)
        waits = np.add.reduceat(waits, starts) if len(starts) else waits
        part = pa.DictionaryArray.from_arrays(pa.array(parts[starts].astype(np.int32)),
                                              pa.array(SHARED_PARTS, pa.string()))
        return pa.Table.from_arrays(
            [pa.array(ops[starts], pa.int64()), part,
             pa.array([names[r] for r in res[starts].tolist()], pa.string()),
             pa.array(waits, pa.int64())], schema=SHARED)

    def close(self) -> bool:
        """Write ``shared.parquet`` if any op waited; whether it was written."""
        if not len(self):
            return False
        writing.write_table(self.table(), self.path, "shared")
        self.abort()
        return True

    def abort(self) -> None:
        """Drop every row; nothing is written."""
        self._rows, self._chunks, self._names = [], [], {}
