"""Which elements of the output tensors the op log writes, from the trace alone (ADR-0811).

Every HBM write of the op log is a byte range: the output operand of a row writing HBM
(``dma_write``; an indexed one as its runs, ``trace/byte_runs.py``) or the HBM operand of an
atomic (a read-modify-write: it writes the elements it names). Per output tensor:

- **never written**: elements of a tensor of role ``output`` that no write covers. An
  ``inout`` tensor starts with contents, so leaving part of it alone is legitimate: only
  ``output`` tensors are checked for this.
- **written by several programs**: elements of an ``output`` or ``inout`` tensor that plain
  writes of two different grid programs cover (which of them lands last decides the value).
  A program rewriting its own output is legitimate (an accumulator stored per step), and
  atomics are made for concurrent updates: neither counts. Nor does a plain write that
  follows an atomic of its program: atomics are acq_rel (ADR-0841), so a lock taken with
  ``atomic_cas`` orders the writes of its critical section, not the timing.
- A tensor written at offsets known only in Phase 2 (``scatter``, an atomic with offsets
  from TCM) has ``unknown`` coverage: it is not checked for never-written elements.

Vectorised over ranges, never over elements: sorting the ranges gives the gaps (a running
maximum of their ends), each program's ranges merge into disjoint runs, and a sweep over
the runs' ends counts how many programs cover each piece. Memory is linear in the number of
write ranges.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from kernbench.schemas.dtypes import DTYPES
from kernbench.schemas.elements import EMPTY, AccessTable
from kernbench.schemas.ops import ATOMICS, Op
from kernbench.trace import limits
from kernbench.trace.byte_runs import INDEXED, patterns
from kernbench.trace.parquet import scan

_ATOMIC = [op.value for op in ATOMICS]
_ROLES = ("output", "inout")
#: bytes a write range takes at the peak of the analysis (its row, the sorts, the merge)
BYTES_PER_RANGE = 256
#: element ranges shown in a message
SHOWN = 3


@dataclass(frozen=True)
class TensorCoverage:
    """What the op log writes of one output (or inout) tensor; ranges are flat element
    ranges ``[lo, hi)`` as an int64 array of shape ``(k, 2)``."""

    name: str
    role: str
    shape: tuple[int, ...]
    unwritten: np.ndarray  # never written (empty for inout and unknown tensors)
    shared: np.ndarray  # written by two programs or more
    shared_ops: tuple[int, int] | None  # two ops of different programs writing shared[0]
    shared_programs: tuple[int, int] | None
    unknown: bool  # written at offsets known only in Phase 2

    @property
    def numel(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def n_unwritten(self) -> int:
        return int((self.unwritten[:, 1] - self.unwritten[:, 0]).sum())

    @property
    def n_shared(self) -> int:
        return int((self.shared[:, 1] - self.shared[:, 0]).sum())

    def unwritten_text(self) -> str:
        return (f"{self.n_unwritten} of {self.numel} elements never written: "
                + ranges_text(self.name, self.shape, self.unwritten))

    def shared_text(self) -> str:
        text = (f"{self.n_shared} elements written by more than one program: "
                + ranges_text(self.name, self.shape, self.shared))
        if self.shared_ops and self.shared_programs:
            (a, b), (pa_, pb) = self.shared_ops, self.shared_programs
            text += f" (the first by op {a} of program {pa_} and op {b} of program {pb})"
        return text

    def note(self) -> dict[str, Any]:
        """The never-written elements as replay's verdict records them."""
        return {"count": self.n_unwritten, "of": self.numel,
                "ranges": self.unwritten[:SHOWN].tolist(), "text": self.unwritten_text()}


def element_index(shape: tuple[int, ...], flat: int) -> str:
    """``[i, j, ...]`` of a flat element index of a row-major tensor."""
    return "[" + ", ".join(str(int(i)) for i in np.unravel_index(flat, shape or (1,))) + "]"


def ranges_text(name: str, shape: tuple[int, ...], ranges: np.ndarray,
                limit: int = SHOWN) -> str:
    """``y[0, 4000]..y[0, 4095], y[1, 4000]..y[1, 4095], ...`` for flat ranges."""
    parts = [f"{name}{element_index(shape, lo)}" + (
        f"..{name}{element_index(shape, hi - 1)}" if hi - lo > 1 else "")
        for lo, hi in ranges[:limit].tolist()]
    return ", ".join(parts) + (f", ... ({len(ranges)} ranges)" if len(ranges) > limit else "")


def _writes(ops: pl.DataFrame, access: AccessTable) -> pl.DataFrame:
    """Every HBM write as a byte range: lo, hi, op_id, program, atomic, unknown."""
    ops = ops.with_columns(pl.col("name").cast(pl.String))
    atomic = pl.col("name").is_in(_ATOMIC)
    hbm = (ops.with_columns(o=pl.when(atomic).then(pl.col("inputs").list.first())
                            .otherwise(pl.col("output")))
           .filter(pl.col("o").struct.field("space") == "hbm"))
    isz = pl.col("o").struct.field("dtype").replace_strict(
        {n: d.itemsize for n, d in DTYPES.items()}, default=1, return_dtype=pl.Int64)
    numel = pl.col("o").struct.field("shape").list.eval(pl.element().product()).list.first()
    unknown = (pl.col("name") == Op.SCATTER.value) | (
        atomic & pl.col("attrs").str.contains('"offsets":"input"', literal=True))
    plain = hbm.filter(~INDEXED).select(
        "op_id", "program", atomic=atomic, unknown=unknown,
        lo=pl.col("o").struct.field("addr"),
        hi=pl.col("o").struct.field("addr") + numel.fill_null(1).cast(pl.Int64) * isz)
    runs = patterns(hbm.filter(INDEXED).drop("o"), access)
    n_runs = int(runs["lo"].list.len().sum() or 0) if runs.height else 0
    limits.require(f"the outputs' coverage ({plain.height:,} writes and {n_runs:,} byte runs "
                   "of indexed stores)", (plain.height + n_runs) * BYTES_PER_RANGE)
    if runs.height:
        runs = (runs.join(hbm.select("op_id", "program", atomic=atomic), on="op_id")
                .explode("lo", "hi").filter(pl.col("lo").is_not_null())
                .select("op_id", "program", "atomic", unknown=pl.lit(False),
                        lo=pl.col("lo") + pl.col("addr"), hi=pl.col("hi") + pl.col("addr")))
        plain = pl.concat([plain, runs.select(plain.columns)], how="vertical_relaxed")
    return plain.filter(pl.col("hi") > pl.col("lo"))


def _gaps(lo: np.ndarray, hi: np.ndarray, start: int, end: int) -> np.ndarray:
    """Byte ranges of ``[start, end)`` no range ``[lo, hi)`` covers (ranges inside it)."""
    order = np.lexsort((hi, lo))
    lo = np.concatenate(([start], lo[order], [end]))
    hi = np.concatenate(([start], hi[order], [end]))
    reach = np.maximum.accumulate(hi)
    gap = np.flatnonzero(lo[1:] > reach[:-1])
    return np.column_stack((reach[gap], lo[gap + 1])).astype(np.int64).reshape(-1, 2)


def _shared(w: pl.DataFrame) -> np.ndarray:
    """Byte ranges that plain writes of two programs or more cover."""
    merged = (w.sort("program", "lo")
              .with_columns(reach=pl.col("hi").cum_max().shift(1).over("program"))
              .with_columns(run=(pl.col("reach").is_null() | (pl.col("lo") > pl.col("reach")))
                            .cum_sum())
              .group_by("run").agg(pl.col("lo").min(), pl.col("hi").max()))
    pos = np.concatenate((merged["lo"].to_numpy(), merged["hi"].to_numpy()))
    delta = np.concatenate((np.ones(merged.height, np.int64), -np.ones(merged.height, np.int64)))
    at, inverse = np.unique(pos, return_inverse=True)
    depth = np.cumsum(np.bincount(inverse, weights=delta, minlength=len(at)).astype(np.int64))
    hot = np.flatnonzero(depth[:-1] >= 2)  # piece [at[k], at[k + 1]) of depth >= 2
    if not len(hot):
        return np.empty((0, 2), np.int64)
    starts = np.concatenate(([True], hot[1:] != hot[:-1] + 1))
    first, last = hot[starts], hot[np.concatenate((starts[1:], [True]))]
    return np.column_stack((at[first], at[last + 1])).astype(np.int64)


def _first_pair(w: pl.DataFrame, byte: int) -> tuple[tuple[int, int], tuple[int, int]] | None:
    hit = w.filter((pl.col("lo") <= byte) & (pl.col("hi") > byte)).sort("op_id")
    first = hit.row(0, named=True)
    other = hit.filter(pl.col("program") != first["program"])
    if not other.height:
        return None
    second = other.row(0, named=True)
    return (first["op_id"], second["op_id"]), (first["program"], second["program"])


def coverage(ops: pl.DataFrame, tensors: pl.DataFrame, access: AccessTable = EMPTY,
             names: list[str] | None = None) -> list[TensorCoverage]:
    """The coverage of every output and inout tensor (or of those in ``names``), in
    ``tensors`` order. ``ops`` needs ``op_id``, ``program``, ``name``, ``inputs``,
    ``output`` and ``attrs``; ``tensors`` the rows of ``tensors.parquet``."""
    wanted = tensors.filter(pl.col("role").is_in(_ROLES))
    if names is not None:
        wanted = wanted.filter(pl.col("name").is_in(names))
    if not wanted.height:
        return []
    writes = _writes(ops, access)
    acquired = (writes.filter(pl.col("atomic")).group_by("program")
                .agg(acquired=pl.col("op_id").min()))
    writes = writes.join(acquired, on="program", how="left").with_columns(
        synced=pl.col("acquired").is_not_null() & (pl.col("op_id") > pl.col("acquired")))
    found = []
    for t in wanted.iter_rows(named=True):
        shape = tuple(int(s) for s in t["shape"])
        isz = DTYPES[t["dtype"]].itemsize
        start = int(t["addr"])
        end = start + int(np.prod(shape, dtype=np.int64)) * isz
        w = writes.filter((pl.col("lo") >= start) & (pl.col("hi") <= end))
        unknown = bool(w["unknown"].any())
        gaps = (np.empty((0, 2), np.int64) if t["role"] != "output" or unknown
                else _gaps(w["lo"].to_numpy(), w["hi"].to_numpy(), start, end))
        plain = w.filter(~pl.col("atomic") & ~pl.col("unknown") & ~pl.col("synced"))
        shared = _shared(plain) if plain["program"].n_unique() > 1 else np.empty((0, 2),
                                                                               np.int64)
        pair = _first_pair(plain, int(shared[0, 0])) if len(shared) else None
        to_el = np.array([[start, start]])
        found.append(TensorCoverage(
            str(t["name"]), str(t["role"]), shape,
            np.column_stack(((gaps - to_el)[:, 0] // isz, -(-(gaps - to_el)[:, 1] // isz))),
            np.column_stack(((shared - to_el)[:, 0] // isz, -(-(shared - to_el)[:, 1] // isz))),
            pair[0] if pair else None, pair[1] if pair else None, unknown))
    return found


#: the op columns coverage reads
COLUMNS = ("op_id", "program", "name", "inputs", "output", "attrs")


def never_written(path: str | Path, tensors: pa.Table, access: AccessTable,
                  names: list[str]) -> dict[str, dict[str, Any]]:
    """The never-written elements of the output tensors ``names`` of the trace at ``path``
    (those that have some, as ``TensorCoverage.note``), scanning only the rows that write
    HBM: what replay's verdict says of an output it found wrong."""
    ops = (scan(Path(path) / "ops.parquet", "kernbench-ops").select(COLUMNS)
           .with_columns(pl.col("name").cast(pl.String))
           .filter((pl.col("output").struct.field("space") == "hbm")
                   | pl.col("name").is_in(_ATOMIC)).collect())
    frame = pl.DataFrame(tensors.select(["name", "role", "addr", "shape", "dtype"]))
    return {c.name: c.note() for c in coverage(ops, frame, access, names) if len(c.unwritten)}
