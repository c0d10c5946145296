"""``values.parquet``: per op with an output, a 64-bit checksum and min/max/mean/non-finite.

The run loop's only cost per write is appending the written bytes to a per-dtype buffer;
statistics are computed in bulk (``reduceat``) when the buffers are flushed. The checksum is
``crc32 << 32 | adler32`` of the output bytes (zlib; deterministic, no extra dependency).
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from kernbench.replay.store import NP_DTYPES, Operand
from kernbench.schemas.arrow import VALUES

if TYPE_CHECKING:
    from kernbench.replay.decode import Program

F32 = np.dtype(np.float32)
FLUSH_BYTES = 64 << 20


def _as_numbers(arr: np.ndarray) -> np.ndarray:
    """Values reduceat can work on: low floats as float32, bool as uint8."""
    if arr.dtype == np.bool_:
        return arr.view(np.uint8)
    if arr.dtype.kind not in "fiu":
        return arr.astype(F32)
    if arr.dtype.itemsize < 4 and arr.dtype.kind == "f":
        return arr.astype(F32)
    return arr


class ValueLog:
    """Collects the bytes each op wrote, in commit order, and reduces them in bulk."""

    def __init__(self, flush_bytes: int = FLUSH_BYTES) -> None:
        self.flush_bytes = flush_bytes
        #: one buffer per dtype name; the run loop appends ``operand.mv`` to ``bufs[dtype]``
        self.bufs: dict[str, bytearray] = {name: bytearray() for name in NP_DTYPES}
        #: (row, operand) per write, in commit order
        self.rows: list[tuple[int, Operand]] = []
        self._chunks: list[tuple[np.ndarray, ...]] = []
        self.first_nonfinite: int | None = None  # a row

    def full(self) -> bool:
        return sum(len(b) for b in self.bufs.values()) >= self.flush_bytes

    def flush(self) -> None:
        rows, self.rows = self.rows, []
        n = len(rows)
        if not n:
            return
        row_ids = np.fromiter((r for r, _ in rows), np.int64, n)
        checksum = np.zeros(n, np.uint64)
        mins, maxs, means = np.empty(n), np.empty(n), np.empty(n)
        nonfinite = np.zeros(n, np.int64)
        groups: dict[str, list[int]] = {}
        for k, (_, o) in enumerate(rows):
            groups.setdefault(o.dtype, []).append(k)
        for dtype, ks in groups.items():
            buf = self.bufs[dtype]
            sizes = np.fromiter((rows[k][1].nbytes for k in ks), np.int64, len(ks))
            ends = np.cumsum(sizes)
            starts = ends - sizes
            with memoryview(buf) as mv:
                checksum[ks] = [(zlib.crc32(mv[s:e]) << 32) | zlib.adler32(mv[s:e])
                                for s, e in zip(starts.tolist(), ends.tolist(), strict=True)]
            npd = NP_DTYPES[dtype]
            with np.errstate(all="ignore"):
                vals = _as_numbers(np.frombuffer(buf, npd))
                at = starts // npd.itemsize
                mins[ks] = np.minimum.reduceat(vals, at)
                maxs[ks] = np.maximum.reduceat(vals, at)
                sums = np.add.reduceat(vals, at, dtype=np.float64)
                means[ks] = sums / (sizes // npd.itemsize)
                if vals.dtype.kind == "f":  # a finite float64 sum of float32s has no inf/nan
                    for j in np.flatnonzero(~np.isfinite(sums)).tolist():
                        seg = vals[at[j]:at[j] + sizes[j] // npd.itemsize]
                        nonfinite[ks[j]] = int(seg.size - np.count_nonzero(np.isfinite(seg)))
            self.bufs[dtype] = bytearray()  # numpy views still hold the old one
        if self.first_nonfinite is None:
            bad = np.flatnonzero(nonfinite)
            if len(bad):
                self.first_nonfinite = int(row_ids[bad[0]])
        self._chunks.append((row_ids, checksum, mins, maxs, means, nonfinite))

    def table(self, program: Program) -> pa.Table:
        """All flushed rows as a ``VALUES`` table sorted by op_id."""
        self.flush()
        if self._chunks:
            rows, checksum, mins, maxs, means, nonfinite = (
                np.concatenate(cols) for cols in zip(*self._chunks, strict=True))
        else:
            rows = np.zeros(0, np.int64)
            checksum, nonfinite = np.zeros(0, np.uint64), np.zeros(0, np.int64)
            mins = maxs = means = np.zeros(0)
        op_id = np.asarray(program.op_id, dtype=np.int64)[rows] if len(rows) else rows
        order = np.argsort(op_id, kind="stable")
        return pa.Table.from_arrays([
            pa.array(op_id[order], pa.int64()), pa.array(checksum[order], pa.uint64()),
            pa.array(mins[order], pa.float64()), pa.array(maxs[order], pa.float64()),
            pa.array(means[order], pa.float64()), pa.array(nonfinite[order], pa.int64()),
        ], schema=VALUES)
