"""``values.parquet``: per op with an output, a 64-bit checksum and min/max/mean/non-finite.

The run loop only keeps a reference to each value it wrote (a fresh array nobody mutates);
batches of about ``FLUSH_BYTES`` (in cache) are joined with one memcpy per value, grouped
by (dtype, size) and reduced as one matrix per group: row min and max, a sum folded
row-wise before the partials, and the checksum as one uint64 matrix-vector product (values
of mixed sizes fall back to segment reductions, ``reduceat``). A worker thread was tried
and lost to GIL hand-offs. The checksum of an output is a polynomial hash mod 2**64 of its
bytes zero-padded to whole 8-byte words read as little-endian uint64 ``w``
(``sum w[j] * P**j``, P the FNV-64 prime), xor the byte count times P, finished with
splitmix64: deterministic and position sensitive. Each flush becomes one batch of rows
(sorted by op_id) for a ``ParquetWriter``; nothing is kept per op across windows.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pyarrow as pa

from kernbench.replay.convert import BF16, F32, bf16_to_f32
from kernbench.schemas.arrow import VALUES
from kernbench.trace.columns import array

if TYPE_CHECKING:  # numpy declares an ndarray a Buffer for Python >= 3.12 only
    from typing_extensions import Buffer

U64 = np.uint64
PRIME = 0x100000001B3
PRIME_INV = pow(PRIME, -1, 1 << 64)
FLUSH_BYTES = 1 << 18
#: values.parquet rows per row group (batches are held until this many)
SINK_ROWS = 1 << 16
_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_nbytes = operator.attrgetter("nbytes")
#: the Arrow types of the columns of ``VALUES``, in order
_TYPES = tuple(f.type for f in VALUES)

#: (checksum, min, max, mean, nonfinite) of each segment of a group
Stats = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


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
    """Values the reductions can work on: bfloat16 as float32 (a 16-bit shift, exact),
    other low floats as float32, bool as uint8."""
    if arr.dtype == np.bool_:
        return arr.view(np.uint8)
    if arr.dtype == BF16:
        return bf16_to_f32(arr)
    if arr.dtype.kind not in "fiu" or (arr.dtype.kind == "f" and arr.dtype.itemsize < 4):
        return arr.astype(F32)
    return arr


def _fold_width(size: int, widest: int = 1024) -> int:
    """The largest power of two <= ``widest`` dividing ``size`` at least twice (0: none
    above 8): a sum folds [size] into [size / width, width] rows first."""
    w = widest
    while w > 8 and (size % w or size // w < 2):
        w //= 2
    return w if w > 8 else 0


def _uniform_stats(flat: np.ndarray, n: int, size: int, powers: _Powers) -> Stats:
    """Statistics of ``n`` segments of ``size`` elements laid end to end: row reductions of
    one [n, size] matrix (vectorised, in cache) instead of segment reductions."""
    item = flat.dtype.itemsize
    nbytes = size * item
    if nbytes % 8:
        return _segment_stats(flat, np.arange(n, dtype=np.int64) * size,
                              np.full(n, size, np.int64), powers)
    words = flat.view("<u8").reshape(n, nbytes // 8)
    fwd, _ = powers.get(nbytes // 8 + 1)
    # mod 2**64 the order of the products' sum does not matter: einsum is the fastest here
    h = (np.einsum("ij,j->i", words, fwd[:nbytes // 8]) if nbytes >= 512
         else np.dot(words, fwd[:nbytes // 8]))
    h ^= U64(nbytes) * U64(PRIME)
    vals = _as_numbers(flat).reshape(n, size)
    mins, maxs = vals.min(axis=1), vals.max(axis=1)
    width = _fold_width(size) if vals.dtype.kind == "f" else 0
    if width:  # rows of ``width`` added elementwise (vectorised), then the partials
        rows = vals.reshape(n, size // width, width)
        # two rows: one add per element either way, and np.add is faster than the reduce
        part = (np.add(rows[:, 0], rows[:, 1]) if size == 2 * width
                else np.add.reduce(rows, axis=1))
        sums = np.add.reduce(part, axis=1, dtype=np.float64)
    else:
        sums = np.add.reduce(vals, axis=1, dtype=np.float64)
    nonfinite = np.zeros(n, np.int64)
    if vals.dtype.kind == "f":  # a finite sum has no inf/nan terms; count where it is not
        for j in np.flatnonzero(~np.isfinite(sums)).tolist():
            nonfinite[j] = int(size - np.count_nonzero(np.isfinite(vals[j])))
    return h, mins, maxs, sums / size, nonfinite


def _segment_stats(flat: np.ndarray, starts: np.ndarray, sizes: np.ndarray,
                   powers: _Powers) -> Stats:
    """Statistics of segments of different sizes, by segment reductions."""
    checksum = checksums(flat, starts, sizes, powers, mix=False)
    vals = _as_numbers(flat)
    mins = np.minimum.reduceat(vals, starts).astype(np.float64)
    maxs = np.maximum.reduceat(vals, starts).astype(np.float64)
    sums = np.add.reduceat(vals, starts, dtype=np.float64)
    nonfinite = np.zeros(len(sizes), np.int64)
    if vals.dtype.kind == "f":  # a finite float64 sum of float32s has no inf/nan
        for j in np.flatnonzero(~np.isfinite(sums)).tolist():
            seg = vals[starts[j]:starts[j] + sizes[j]]
            nonfinite[j] = int(seg.size - np.count_nonzero(np.isfinite(seg)))
    return checksum, mins, maxs, sums / sizes, nonfinite


def reduce_batch(rows: list[int] | np.ndarray, arrays: list[np.ndarray], powers: _Powers,
                 layout: tuple[np.ndarray, np.ndarray, list[np.dtype]] | None = None,
                 mix: bool = True) -> tuple[np.ndarray, ...]:
    """Statistics of one batch of written values, in commit order: (rows, checksum, min,
    max, mean, nonfinite). ``layout``: (dtype code, element count) of each array and the
    dtypes by code, when the caller knows them. Values are grouped by (dtype, size); a group
    of one size is reduced as a matrix, in few passes. ``mix=False``: checksums not yet
    finished (``_mix`` them later, all at once)."""
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
    key = codes * (int(counts.max()) + 1) + counts
    k0 = int(key[0])
    if (key == k0).all():
        groups: list[tuple[int, Any]] = [(k0, slice(None))]
    else:
        order = np.argsort(key, kind="stable")
        skey = key[order]
        cut = np.flatnonzero(skey[1:] != skey[:-1]) + 1
        groups = [(int(skey[a]), order[a:b]) for a, b in
                  zip([0, *cut.tolist()], [*cut.tolist(), n], strict=True)]
    with np.errstate(all="ignore"):
        for _, ks in groups:
            parts = arrays if isinstance(ks, slice) else [arrays[k] for k in ks.tolist()]
            code, size = int(codes[ks][0]), int(counts[ks][0])
            try:  # one memcpy per part; a part that is not C-contiguous takes numpy's way
                flat = np.frombuffer(b"".join(cast("list[Buffer]", parts)), dtypes[code])
            except (TypeError, BufferError, ValueError):
                flat = np.concatenate([np.ravel(p) for p in parts]).astype(dtypes[code])
            if size == 0:
                stats = _segment_stats(flat, np.zeros(len(parts), np.int64),
                                       np.zeros(len(parts), np.int64), powers)
            else:
                stats = _uniform_stats(flat, len(parts), size, powers)
            checksum[ks], mins[ks], maxs[ks], means[ks], nonfinite[ks] = stats
    if mix:
        checksum = _mix(checksum)
    return row_ids, checksum, mins, maxs, means, nonfinite


class ValueLog:
    """Collects (position, value) per write in landing order and reduces batches in bulk.

    A run goes window by window. ``begin_window`` gives, per position of the window, the
    op_id, the dtype code and element count of what it writes, and a key ordering its
    landing; the run loop appends positions and values to ``rows``/``arrays``; each flush
    turns them into one batch of ``values.parquet`` rows handed to ``sink`` (a
    ``ParquetWriter``'s ``write_batch``, or a list's ``append`` in tests). Nothing is kept
    per op beyond the current window except the first non-finite write seen."""

    def __init__(self, sink: Callable[[pa.RecordBatch], Any] | None = None,
                 flush_bytes: int = FLUSH_BYTES) -> None:
        self.flush_bytes = flush_bytes
        self.sink = sink
        self.batches: list[pa.RecordBatch] = []  # held for the sink (all, without one)
        self._held = 0
        #: per flush not yet in ``batches``: (op_id, checksum, min, max, mean, nonfinite)
        self._columns: list[tuple[np.ndarray, ...]] = []
        #: appended by the run loop: the position of each write and the value written
        self.rows: list[int] = []
        self.arrays: list[np.ndarray] = []
        self._counted = 0
        self._bytes = 0
        self._powers = POWERS
        self.codes: np.ndarray | None = None
        self.counts = self.nbytes = self.op_ids = self.landing = np.zeros(0, np.int64)
        self.dtypes: list[np.dtype] = []
        self.window = 0
        self.n_rows = 0
        #: (window, landing key, position info) of the first non-finite write to land
        self.first_nonfinite: tuple[int, int, Any] | None = None
        self._describe: Callable[[int], Any] = int

    def begin_window(self, op_ids: np.ndarray, codes: np.ndarray, counts: np.ndarray,
                     dtypes: list[np.dtype], nbytes: np.ndarray, landing: np.ndarray,
                     describe: Callable[[int], Any]) -> None:
        self.flush()
        self.window += 1
        self.op_ids, self.codes, self.counts, self.dtypes = op_ids, codes, counts, dtypes
        self.nbytes, self.landing, self._describe = nbytes, landing, describe

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
        pos, checksum, mins, maxs, means, nonfinite = reduce_batch(
            rows, arrays, self._powers, layout)
        bad = np.flatnonzero(nonfinite)
        if len(bad) and len(self.landing):
            j = int(bad[np.argmin(self.landing[pos[bad]])])
            key = (self.window, int(self.landing[pos[j]]))
            if self.first_nonfinite is None or key < self.first_nonfinite[:2]:
                self.first_nonfinite = (*key, self._describe(int(pos[j])))
        elif len(bad) and self.first_nonfinite is None:
            self.first_nonfinite = (self.window, 0, self._describe(int(pos[bad[0]])))
        op_id = self.op_ids[pos] if len(self.op_ids) else pos
        order = np.argsort(op_id, kind="stable")
        self._columns.append(tuple(c[order] for c in (op_id, checksum, mins, maxs, means,
                                                      nonfinite)))
        self.n_rows += len(order)
        self._held += len(order)
        if self.sink is not None and self._held >= SINK_ROWS:
            self._drain()

    def _pack(self) -> None:
        """The flushes' columns since the last call as one batch of ``batches`` (one Arrow
        batch per row group, not per flush: the same rows, a fraction of the calls)."""
        if self._columns:
            cols = [np.concatenate(c) for c in zip(*self._columns, strict=True)]
            self._columns = []
            self.batches.append(pa.RecordBatch.from_arrays(
                [array(c, t) for c, t in zip(cols, _TYPES, strict=True)], schema=VALUES))

    def _drain(self) -> None:
        """Hand the batches held so far to the sink as one batch (one Parquet row group)."""
        self._pack()
        if self.batches and self.sink is not None:
            self.sink(pa.Table.from_batches(self.batches, schema=VALUES).combine_chunks()
                      .to_batches()[0])
            self.batches, self._held = [], 0

    def close(self) -> None:
        """Flush what is waiting and hand everything to the sink."""
        self.flush()
        self._drain()

    def release(self) -> None:
        """Drop the last window's arrays and its view of the program (and so of memory)."""
        self.op_ids = self.landing = self.counts = self.nbytes = np.zeros(0, np.int64)
        self.codes, self._describe = None, int

    def table(self) -> pa.Table:
        """The batches kept without a sink, as one table sorted by op_id."""
        self.flush()
        self._pack()
        table = pa.Table.from_batches(self.batches, schema=VALUES)
        return table.sort_by("op_id")
