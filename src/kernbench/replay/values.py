"""``values.parquet``: per op with an output, a 64-bit checksum and min/max/mean/non-finite.

The run loop only keeps a reference to each value it wrote (a fresh array nobody mutates);
batches of about ``FLUSH_BYTES`` are reduced in bulk with ``reduceat`` (a batch stays in
cache; a worker thread was tried and lost to GIL hand-offs). The checksum of an output is a
polynomial hash mod 2**64 of its elements read as unsigned integers of their width
(``sum x[j] * P**j``, P the FNV-64 prime), mixed with the byte count and finished with
splitmix64: deterministic, position sensitive, and a few numpy passes for a whole batch.
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from kernbench.schemas.arrow import VALUES

if TYPE_CHECKING:
    from kernbench.replay.decode import Program

F32 = np.dtype(np.float32)
U64 = np.uint64
PRIME = 0x100000001B3
PRIME_INV = pow(PRIME, -1, 1 << 64)
FLUSH_BYTES = 1 << 20
_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_nbytes = operator.attrgetter("nbytes")

Chunk = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _powers(base: int, n: int) -> np.ndarray:
    """base**0 .. base**(n-1) mod 2**64, by doubling (each step one vectorised multiply)."""
    p = np.empty(max(n, 1), dtype=U64)
    p[0] = 1
    k = 1
    while k < n:
        m = min(k, n - k)
        np.multiply(p[:m], U64(pow(base, k, 1 << 64)), out=p[k:k + m])
        k += m
    return p[:n]


class _Powers:
    """P**i and P**-i for i < n, grown by doubling and shared by every replay."""

    def __init__(self) -> None:
        self.fwd = self.inv = np.zeros(0, U64)

    def get(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        if n > len(self.fwd):
            size = 1 << max(16, (n - 1).bit_length())
            self.fwd, self.inv = _powers(PRIME, size), _powers(PRIME_INV, size)
        return self.fwd, self.inv


POWERS = _Powers()


def _mix(h: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser, vectorised (uint64 arithmetic wraps)."""
    h = h + U64(0x9E3779B97F4A7C15)
    h = (h ^ (h >> U64(30))) * U64(0xBF58476D1CE4E5B9)
    h = (h ^ (h >> U64(27))) * U64(0x94D049BB133111EB)
    return h ^ (h >> U64(31))


def checksums(flat: np.ndarray, starts: np.ndarray, sizes: np.ndarray,
              powers: _Powers | None = None) -> np.ndarray:
    """The 64-bit checksum of each segment ``flat[starts[k]:starts[k] + sizes[k]]``."""
    fwd, inv = (powers or POWERS).get(len(flat))
    words = flat.view(_UINT[flat.dtype.itemsize]).astype(U64)
    words *= fwd[:len(flat)]
    h = np.add.reduceat(words, starts) * inv[starts]
    return _mix(h ^ (sizes.astype(U64) * U64(flat.dtype.itemsize) * U64(PRIME)))


def _as_numbers(arr: np.ndarray) -> np.ndarray:
    """Values reduceat can work on: low floats as float32, bool as uint8."""
    if arr.dtype == np.bool_:
        return arr.view(np.uint8)
    if arr.dtype.kind not in "fiu" or (arr.dtype.kind == "f" and arr.dtype.itemsize < 4):
        return arr.astype(F32)
    return arr


def reduce_batch(rows: list[int], arrays: list[np.ndarray], powers: _Powers) -> Chunk:
    """Statistics of one batch of written values, in commit order."""
    n = len(rows)
    row_ids = np.asarray(rows, dtype=np.int64)
    checksum = np.zeros(n, U64)
    mins, maxs, means = np.empty(n), np.empty(n), np.empty(n)
    nonfinite = np.zeros(n, np.int64)
    groups: dict[np.dtype, list[int]] = {}
    for k, a in enumerate(arrays):
        groups.setdefault(a.dtype, []).append(k)
    with np.errstate(all="ignore"):
        for ks in groups.values():
            parts = [arrays[k] for k in ks]
            flat = np.concatenate(parts, axis=None)
            sizes = np.fromiter((a.size for a in parts), np.int64, len(parts))
            starts = np.cumsum(sizes) - sizes
            checksum[ks] = checksums(flat, starts, sizes, powers)
            vals = _as_numbers(flat)
            mins[ks] = np.minimum.reduceat(vals, starts)
            maxs[ks] = np.maximum.reduceat(vals, starts)
            sums = np.add.reduceat(vals, starts, dtype=np.float64)
            means[ks] = sums / sizes
            if vals.dtype.kind == "f":  # a finite float64 sum of float32s has no inf/nan
                for j in np.flatnonzero(~np.isfinite(sums)).tolist():
                    seg = vals[starts[j]:starts[j] + sizes[j]]
                    nonfinite[ks[j]] = int(seg.size - np.count_nonzero(np.isfinite(seg)))
    return row_ids, checksum, mins, maxs, means, nonfinite


class ValueLog:
    """Collects (row, value) per write in commit order and reduces batches in bulk."""

    def __init__(self, flush_bytes: int = FLUSH_BYTES) -> None:
        self.flush_bytes = flush_bytes
        #: appended by the run loop: the row of each write and the value written
        self.rows: list[int] = []
        self.arrays: list[np.ndarray] = []
        self._counted = 0
        self._bytes = 0
        self._powers = POWERS
        self._chunks: list[Chunk] = []

    def due(self) -> bool:
        """Whether enough bytes are waiting to be worth a flush (cheap; checks new rows)."""
        arrays = self.arrays
        self._bytes += sum(map(_nbytes, arrays[self._counted:]))
        self._counted = len(arrays)
        return self._bytes >= self.flush_bytes

    def flush(self) -> None:
        if not self.rows:
            return
        # the run loop holds these lists' append methods: take copies, clear in place
        rows, arrays = self.rows[:], self.arrays[:]
        del self.rows[:], self.arrays[:]
        self._counted = self._bytes = 0
        self._chunks.append(reduce_batch(rows, arrays, self._powers))

    def finish(self, program: Program) -> tuple[pa.Table, int | None]:
        """(the VALUES table sorted by op_id, the row of the first non-finite write)."""
        self.flush()
        chunks = self._chunks
        if chunks:
            rows, checksum, mins, maxs, means, nonfinite = (
                np.concatenate(cols) for cols in zip(*chunks, strict=True))
        else:
            rows = np.zeros(0, np.int64)
            checksum, nonfinite = np.zeros(0, U64), np.zeros(0, np.int64)
            mins = maxs = means = np.zeros(0)
        bad = np.flatnonzero(nonfinite)
        first = int(rows[bad[0]]) if len(bad) else None
        op_id = program.op_id[rows]
        order = np.argsort(op_id, kind="stable")
        table = pa.Table.from_arrays([
            pa.array(op_id[order], pa.int64()), pa.array(checksum[order], pa.uint64()),
            pa.array(mins[order], pa.float64()), pa.array(maxs[order], pa.float64()),
            pa.array(means[order], pa.float64()), pa.array(nonfinite[order], pa.int64()),
        ], schema=VALUES)
        return table, first
