"""``values.parquet``: per op with an output, a 64-bit checksum and min/max/mean/non-finite.

The run loop only keeps a reference to each value it wrote (a fresh array nobody mutates);
batches of about ``FLUSH_BYTES`` are joined with one memcpy per value and reduced in bulk
with ``reduceat`` (a batch stays in cache; a worker thread was tried and lost to GIL
hand-offs). The dtype and size of each value are known from the decoded program, so a batch
needs no per-array inspection. The checksum of an output is a polynomial hash mod 2**64 of
its bytes zero-padded to whole 8-byte words read as little-endian uint64 ``w``
(``sum w[j] * P**j``, P the FNV-64 prime), xor the byte count times P, finished with
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
FLUSH_BYTES = 1 << 18
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


def _words(flat: np.ndarray, starts: np.ndarray, sizes: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(uint64 words, word start of each segment, byte count of each segment): each segment's
    bytes zero-padded to a multiple of 8 and read as little-endian uint64 words."""
    item = flat.dtype.itemsize
    nbytes = sizes * item
    raw = np.ascontiguousarray(flat).view(np.uint8)
    if not ((nbytes | starts * item) & 7).any():
        return raw.view("<u8"), starts * item // 8, nbytes
    padded = (nbytes + 7) // 8 * 8
    dest = np.cumsum(padded) - padded
    out = np.zeros(int(padded.sum()), np.uint8)
    first = np.cumsum(nbytes) - nbytes
    within = np.arange(int(nbytes.sum())) - np.repeat(first, nbytes)
    src = np.repeat(starts * item, nbytes) + within
    shift = np.repeat(dest - starts * item, nbytes)
    out[src + shift] = raw[src]
    return out.view("<u8"), dest // 8, nbytes


def checksums(flat: np.ndarray, starts: np.ndarray, sizes: np.ndarray,
              powers: _Powers | None = None, mix: bool = True) -> np.ndarray:
    """The 64-bit checksum of each segment ``flat[starts[k]:starts[k] + sizes[k]]``: its
    bytes zero-padded to whole 8-byte words ``w``, ``sum w[j] * P**j mod 2**64`` xor the
    byte count times P, finished with splitmix64 (``mix=False``: not yet finished)."""
    words, wstart, nbytes = _words(flat, np.asarray(starts, np.int64),
                                   np.asarray(sizes, np.int64))
    if not len(words):
        h = nbytes.astype(U64) * U64(PRIME)
        return _mix(h) if mix else h
    fwd, inv = (powers or POWERS).get(len(words) + 1)
    h = np.add.reduceat(words * fwd[:len(words)], np.minimum(wstart, len(words) - 1))
    h[nbytes == 0] = 0
    h *= inv[wstart]
    h ^= nbytes.astype(U64) * U64(PRIME)
    return _mix(h) if mix else h


def _as_numbers(arr: np.ndarray) -> np.ndarray:
    """Values reduceat can work on: low floats as float32, bool as uint8."""
    if arr.dtype == np.bool_:
        return arr.view(np.uint8)
    if arr.dtype.kind not in "fiu" or (arr.dtype.kind == "f" and arr.dtype.itemsize < 4):
        return arr.astype(F32)
    return arr


def reduce_batch(rows: list[int] | np.ndarray, arrays: list[np.ndarray], powers: _Powers,
                 layout: tuple[np.ndarray, np.ndarray, list[np.dtype]] | None = None,
                 mix: bool = True) -> Chunk:
    """Statistics of one batch of written values, in commit order. ``layout``: (dtype code,
    element count) of each array and the dtypes by code, when the caller knows them.
    ``mix=False``: checksums not yet finished (``_mix`` them later, all at once)."""
    n = len(rows)
    row_ids = np.asarray(rows, dtype=np.int64)
    if layout is None:
        dtypes = list(dict.fromkeys(a.dtype for a in arrays))
        code_of = {d: c for c, d in enumerate(dtypes)}
        codes = np.array([code_of[a.dtype] for a in arrays], np.int64)
        counts = np.array([a.size for a in arrays], np.int64)
    else:
        codes, counts, dtypes = layout
    checksum = np.zeros(n, U64)
    mins, maxs, means = np.empty(n), np.empty(n), np.empty(n)
    nonfinite = np.zeros(n, np.int64)
    if not n:
        return row_ids, checksum, mins, maxs, means, nonfinite
    lo, hi = (0, 0) if len(dtypes) == 1 else (int(codes.min()), int(codes.max()))
    groups = ([(lo, slice(None))] if lo == hi else
              [(c, np.flatnonzero(codes == c)) for c in range(lo, hi + 1)])
    with np.errstate(all="ignore"):
        for code, ks in groups:
            if lo == hi:
                parts = arrays
            else:
                if not len(ks):
                    continue
                parts = [arrays[k] for k in ks.tolist()]
            try:  # one memcpy per part; a part that is not C-contiguous takes numpy's way
                flat = np.frombuffer(b"".join(parts), dtypes[code])
            except TypeError:
                flat = np.concatenate(parts, axis=None, dtype=dtypes[code])
            sizes = counts[ks]
            starts = np.cumsum(sizes) - sizes
            checksum[ks] = checksums(flat, starts, sizes, powers, mix)
            vals = _as_numbers(flat)
            mins[ks] = np.minimum.reduceat(vals, starts)
            maxs[ks] = np.maximum.reduceat(vals, starts)
            sums = np.add.reduceat(vals, starts, dtype=np.float64)
            means[ks] = sums / sizes
            if vals.dtype.kind == "f":  # a finite float64 sum of float32s has no inf/nan
                bad = np.flatnonzero(~np.isfinite(sums))
                out = nonfinite[ks] if lo != hi else nonfinite
                for j in bad.tolist():
                    seg = vals[starts[j]:starts[j] + sizes[j]]
                    out[j] = int(seg.size - np.count_nonzero(np.isfinite(seg)))
                if lo != hi:
                    nonfinite[ks] = out
    return row_ids, checksum, mins, maxs, means, nonfinite


class ValueLog:
    """Collects (position, value) per write in commit order and reduces batches in bulk.

    ``codes``/``counts``/``dtypes``: the dtype code and element count of the value each
    position writes (the output operand's), so a batch needs no per-array inspection."""

    def __init__(self, flush_bytes: int = FLUSH_BYTES) -> None:
        self.flush_bytes = flush_bytes
        #: appended by the run loop: the id (position) of each write and the value written
        self.rows: list[int] = []
        self.arrays: list[np.ndarray] = []
        self._counted = 0
        self._bytes = 0
        self._powers = POWERS
        self._chunks: list[Chunk] = []
        self.codes: np.ndarray | None = None
        self.counts = self.nbytes = np.zeros(0, np.int64)
        self.dtypes: list[np.dtype] = []
        #: per id, a key ordering writes as they land (the engine sets it); None: as logged
        self.landing: np.ndarray | None = None

    def set_layout(self, codes: np.ndarray, counts: np.ndarray, dtypes: list[np.dtype],
                   nbytes: np.ndarray) -> None:
        self.codes, self.counts, self.dtypes, self.nbytes = codes, counts, dtypes, nbytes

    def due(self) -> bool:
        """Whether enough bytes are waiting to be worth a flush (cheap; checks new rows)."""
        rows = self.rows
        if self.codes is not None:
            self._bytes += int(self.nbytes[rows[self._counted:]].sum())
        else:
            self._bytes += sum(map(_nbytes, self.arrays[self._counted:]))
        self._counted = len(rows)
        return self._bytes >= self.flush_bytes

    def flush(self) -> None:
        if not self.rows:
            return
        # the run loop holds these lists' append methods: take copies, clear in place
        rows, arrays = np.array(self.rows, np.int64), self.arrays[:]
        del self.rows[:], self.arrays[:]
        self._counted = self._bytes = 0
        layout = None if self.codes is None else (self.codes[rows], self.counts[rows],
                                                  self.dtypes)
        self._chunks.append(reduce_batch(rows, arrays, self._powers, layout, mix=False))

    def finish(self, op_rows: np.ndarray | None = None) -> tuple[np.ndarray, Chunk]:
        """(ids of the writes as logged, their statistics with ids mapped to op rows).
        ``op_rows`` maps logged ids to op rows (identity if None)."""
        self.flush()
        chunks = self._chunks
        if chunks:
            ids, checksum, mins, maxs, means, nonfinite = (
                np.concatenate(cols) for cols in zip(*chunks, strict=True))
            checksum = _mix(checksum)
        else:
            ids = np.zeros(0, np.int64)
            checksum, nonfinite = np.zeros(0, U64), np.zeros(0, np.int64)
            mins = maxs = means = np.zeros(0)
        rows = ids if op_rows is None else op_rows[ids]
        return ids, (rows, checksum, mins, maxs, means, nonfinite)


def values_table(program: Program, values: ValueLog, op_rows: np.ndarray | None = None
                 ) -> tuple[pa.Table, int | None]:
    """(the VALUES table sorted by op_id, the row of the first non-finite write)."""
    ids, (rows, checksum, mins, maxs, means, nonfinite) = values.finish(op_rows)
    bad = np.flatnonzero(nonfinite)
    if len(bad) and values.landing is not None:  # the first to land, not the first logged
        bad = bad[np.argsort(values.landing[ids[bad]], kind="stable")]
    first = int(rows[bad[0]]) if len(bad) else None
    op_id = program.op_id[rows]
    order = np.argsort(op_id, kind="stable")
    table = pa.Table.from_arrays([
        pa.array(op_id[order], pa.int64()), pa.array(checksum[order], pa.uint64()),
        pa.array(mins[order], pa.float64()), pa.array(maxs[order], pa.float64()),
        pa.array(means[order], pa.float64()), pa.array(nonfinite[order], pa.int64()),
    ], schema=VALUES)
    return table, first
