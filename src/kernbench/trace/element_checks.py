"""The validator's rules for indexed rows (trace format version 2; ``kernbench.trace.validate``).

``schema`` (refusing): every ``access``/``mask``/``values`` id exists in access.parquet with
the kind, shape (and dtype) of its operand, strides fit the tile, ``const`` values match
the output. ``hbm_bounds`` (check only; replay reports the element): every masked-in
element of an indexed HBM operand lies inside the tensor holding the operand's address.
Patterns are evaluated once per distinct (attrs, operand shape), so a batch costs its
distinct patterns, not its rows. Nothing is evaluated: attrs are JSON, arrays are decoded
from declared dtypes and shapes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from kernbench.errors import TraceFormatError
from kernbench.schemas import elements as ix
from kernbench.schemas import offsets as off
from kernbench.schemas.dtypes import DTYPES
from kernbench.schemas.ops import ATOMICS, Op
from kernbench.trace import limits
from kernbench.trace.columns import chunk
from kernbench.trace.opbatch import OpBatch, Operands, Regions, Strs, fmt

if TYPE_CHECKING:
    from kernbench.trace.findings import Findings

ITEMSIZE = {name: d.itemsize for name, d in DTYPES.items()}
#: ops whose first HBM operand may be indexed (strides/access in attrs)
_ELEMENT_OPS = frozenset([Op.DMA_READ.value, Op.DMA_WRITE.value, *(op.value for op in ATOMICS)])
_MASKED_OPS = frozenset([Op.GATHER.value, Op.SCATTER.value, *(op.value for op in ATOMICS)])
_MASK_ID = re.compile('"mask":[0-9]')


#: access.parquet may hold at most this many rows per op row (offsets, mask, values) ...
ACCESS_ROWS_PER_OP = 3
#: ... plus this many
ACCESS_ROWS_EXTRA = 64


def max_access_rows(n_ops: int) -> int:
    """The most rows an access.parquet of a trace of ``n_ops`` ops may have: each op row
    names at most an offsets, a mask and a values array."""
    return ACCESS_ROWS_PER_OP * n_ops + ACCESS_ROWS_EXTRA


class ColumnRows(Mapping[int, tuple[str, str, tuple[int, ...], Any]]):
    """The rows of an opened access.parquet by id, kept as its Arrow columns: a row
    becomes Python values only when it is looked up (ADR-0536)."""

    def __init__(self, table: pa.Table, where: Path) -> None:
        cols = {k: chunk(table.column(k)) for k in ("id", "kind", "dtype", "shape", "data")}
        if any(c.null_count for c in cols.values()):
            raise TraceFormatError(f"{where}: a row has a null field")
        ids = cols["id"].to_numpy(zero_copy_only=False)
        self.pos = {int(i): k for k, i in enumerate(ids.tolist())}
        if len(self.pos) != len(ids):
            uniq, counts = np.unique(ids, return_counts=True)
            raise TraceFormatError(f"{where}: id {int(uniq[counts > 1][0])} appears twice")
        self.kind, self.dtype = Strs.of(cols["kind"]), Strs.of(cols["dtype"])
        self.shape, self.data = cols["shape"], cols["data"]

    def __getitem__(self, ref: int) -> tuple[str, str, tuple[int, ...], Any]:
        k = self.pos[ref]
        return (str(self.kind.get(k)), str(self.dtype.get(k)), tuple(self.shape[k].as_py()),
                self.data[k].as_buffer())

    def __contains__(self, ref: object) -> bool:
        return ref in self.pos

    def __iter__(self) -> Iterator[int]:
        return iter(self.pos)

    def __len__(self) -> int:
        return len(self.pos)


def access_table(table: pa.Table, where: Path) -> ix.AccessTable:
    """The rows of an opened access.parquet; TraceFormatError for nulls or a repeated id."""
    return ix.AccessTable(ColumnRows(table, where))


def indexed_rows(b: OpBatch) -> np.ndarray:
    """Rows whose HBM operand is a set of elements (excluded from the contiguous rules)."""
    return b.strs("name").isin(_ELEMENT_OPS) & b.strs("attrs").map(
        lambda v: '"strides"' in v or '"access"' in v, False, bool)


def _hbm_operand(b: OpBatch, rows: np.ndarray) -> Operands:
    """The HBM operand of each indexed row of ``rows`` that has one: the first input's (the
    rows that are not ``dma_write``, in row order), then the output's (``dma_write``)."""
    write = b.strs("name").isin((Op.DMA_WRITE.value,))[rows]
    read, at = b.first_input(rows[~write])
    out = rows[write]
    out = out[~b.output_null[out]]
    return b.elements.take(at, row=read).cat(b.output.take(out))


#: bytes replay keeps per element of a bound indexed operand (int64 index and tile position)
KEPT_BYTES_PER_ELEMENT = 16
#: bytes building one indexed operand takes per element, at its peak (offsets, moved
#: offsets, addresses, mask)
BUILD_BYTES_PER_ELEMENT = 40
#: the most elements one indexed tile may have, whatever the budget
MAX_TILE_ELEMENTS = 1 << 26


def _pattern(attrs_text: str, shape: tuple[Any, ...], table: ix.AccessTable
             ) -> tuple[int, int] | str:
    """(lowest, highest) masked-in relative offset ((0, -1) if none), or the problem
    (``shape`` as stored: a null size is one, reported by the offset rules). An
    unmasked strided tile is bounded in closed form; no offset array is built for it."""
    try:
        attrs = json.loads(attrs_text)
        if not isinstance(attrs, dict):
            return "attrs are not a JSON object"
        if len(shape) > 8 or off.product(shape, "tile") > MAX_TILE_ELEMENTS:
            return f"tile {list(shape)} is too large for an indexed operand"
        if "strides" in attrs and attrs.get("mask") is None and all(shape):
            return off.span(shape, *ix.strides_of(attrs, shape))
        rel, mask = ix.elements(attrs, shape, table)
    except (ValueError, TypeError, RecursionError, OverflowError) as exc:
        return str(exc)
    moved = ix.moved(rel, mask)
    return (int(moved.min()), int(moved.max())) if len(moved) else (0, -1)


class TileBudget:
    """The elements of the indexed operands replay will bind (one index array per distinct
    operand), counted from the op rows before any of them is built (ADR-0536)."""

    def __init__(self) -> None:
        self.kept = 0

    def add(self, el: Operands, b: OpBatch) -> None:
        """Count a batch's distinct indexed operands; TraceLimitError over the budget."""
        attrs = b.strs("attrs").codes[el.row].tolist()
        keys = {(attrs[i], _shape(el, i), el.addr.get(i), el.pe.get(i), el.dtype.get(i))
                for i in range(len(el))}
        n = []
        for key in keys:
            prod = 1.0
            for s in key[1] or ():
                prod = prod if s is None else prod * float(s)
            n.append(prod)
        biggest = max(n)
        self.kept += int(min(sum(n), 2.0**62))
        limits.require(f"indexed tiles ({self.kept:,} elements bound, the largest "
                       f"{int(biggest):,})", KEPT_BYTES_PER_ELEMENT * self.kept
                       + BUILD_BYTES_PER_ELEMENT * biggest)


def _shape(el: Operands, i: int) -> tuple[int | None, ...] | None:
    got = el.shape.get(i)
    return None if got is None else tuple(got)


def indexed_findings(b: OpBatch, regions: Regions | None, table: ix.AccessTable,
                     found: Findings, budget: TileBudget | None = None) -> None:
    """Check the indexed rows of one op-log batch; ``budget`` counts their tiles first
    (TraceLimitError when replay could not hold them)."""
    el = _hbm_operand(b, np.flatnonzero(indexed_rows(b)))
    if len(el):
        (budget or TileBudget()).add(el, b)
        _element_rules(el, b, regions, table, found)
    _reference_rules(b, table, found)


def _element_rules(el: Operands, b: OpBatch, regions: Regions | None,
                   table: ix.AccessTable, found: Findings) -> None:
    attrs = b.strs("attrs")
    got: dict[tuple, tuple[int, int] | str] = {}
    problem: list[str | None] = []
    lo = np.zeros(len(el), np.int64)
    hi = np.full(len(el), -1, np.int64)
    for i in range(len(el)):
        text, shape = attrs.get(int(el.row[i])), _shape(el, i)
        res = got.get((text, shape))
        if res is None:
            res = got[(text, shape)] = _pattern(str(text), tuple(shape or ()), table)
        if isinstance(res, str):
            problem.append(res)
            continue
        lo[i], hi[i] = res
        dtype, at = el.dtype.get(i), el.addr.get(i)
        size = ITEMSIZE.get(dtype) if dtype is not None else None
        problem.append(None if at is None or size is None or at % size == 0 else
                       f"address {at} is not aligned to its {dtype} elements")
    name = b.strs("name")
    hit = np.array([i for i, p in enumerate(problem) if p is not None], np.int64)
    found.add("schema", b.base + el.row[hit], lambda k: fmt(
        "op {} ({}): indexed operand: {}", b.op(el.row[hit[k]]), name.get(el.row[hit[k]]),
        problem[hit[k]]))
    if regions is None:
        return
    fine = np.array([p is None for p in problem], bool)
    ok = np.flatnonzero(fine & el.space.isin(("hbm",)) & (hi >= lo))
    if not len(ok):
        return
    isz = el.dtype.map(lambda v: ITEMSIZE.get(v, 1), 0, np.int64)[ok]
    sized = ~el.dtype.null[ok]
    addr, known = el.addr.vals[ok], ~el.addr.null[ok]
    # |rel| < 2^59 (``offsets.check_rel``), isz <= 8 and 0 <= addr < 2^62: no product wraps
    with np.errstate(over="ignore"):
        first = addr + lo[ok] * isz
        last = addr + (hi[ok] + 1) * isz
    held, r_lo, r_hi = regions.holding(addr)
    held &= known
    out = ok[~held | (known & sized & ((first < r_lo) | (last > r_hi))) | (known & (addr >= r_hi))]
    out = out[np.argsort(el.row[out], kind="stable")]
    found.add("hbm_bounds", b.base + el.row[out], lambda k: fmt(
        "op {} ({}) moves hbm elements [{}, {}) outside the tensor holding address {}",
        b.op(el.row[out[k]]), name.get(el.row[out[k]]),
        *_bounds(first, last, sized, int(np.searchsorted(ok, out[k]))), el.addr.get(out[k])))


def _bounds(first: np.ndarray, last: np.ndarray, sized: np.ndarray, k: int
            ) -> tuple[int | None, int | None]:
    return (int(first[k]), int(last[k])) if sized[k] else (None, None)


def _reference_rules(b: OpBatch, table: ix.AccessTable, found: Findings) -> None:
    """``const`` values and gather/scatter/atomic masks name arrays that fit their operand."""
    name, attrs = b.strs("name"), b.strs("attrs")
    const = np.flatnonzero(name.isin((Op.CONST.value,)) & ~attrs.null)
    masked = np.flatnonzero(name.isin(_MASKED_OPS) & attrs.map(
        lambda v: _MASK_ID.search(v) is not None, False, bool))
    scatter = name.isin((Op.SCATTER.value,))
    start, lens, _ = b.inputs
    out = b.output

    def tile(r: int) -> tuple[list | None, str | None]:
        """The output's (shape, dtype); a scatter's tile is its first input's shape."""
        if scatter[r]:
            at = int(start[r])
            if not lens[r] or b.element_null[at]:
                return None, None
            return b.elements.shape.get(at), None
        if b.output_null[r]:
            return None, None
        return out.shape.get(r), out.dtype.get(r)

    for rows, kind in ((const, "values"), (masked, "mask")):
        problems: dict[str, str] = {}
        seen: set = set()
        for r in rows.tolist():
            text = str(attrs.get(r))
            shape, dtype = tile(r)
            if kind == "mask":
                dtype = None
            key = (text, None if shape is None else tuple(shape), dtype)
            if key in seen:
                continue
            seen.add(key)
            why = _reference(text, kind, kind, shape, dtype, table)
            if why and text not in problems:
                problems[text] = why
        if not problems:
            continue
        hit = np.array([r for r in rows.tolist() if attrs.get(r) in problems], np.int64)
        found.add("schema", b.base + hit, partial(_reference_message, b, hit, problems))


def _reference_message(b: OpBatch, hit: np.ndarray, problems: dict[str, str], k: int
                       ) -> str | None:
    return fmt("op {}: {}", b.op(hit[k]), problems[str(b.strs("attrs").get(hit[k]))])


def _reference(attrs_text: str, key: str, kind: str, shape: list | None, dtype: str | None,
               table: ix.AccessTable) -> str | None:
    try:
        attrs = json.loads(attrs_text)
        arr = table.get(attrs.get(key) if isinstance(attrs, dict) else None, kind)
    except (ValueError, TypeError, RecursionError) as exc:
        return str(exc)
    if kind == "mask" and shape is not None and list(arr.shape) != list(shape):
        return f"mask {attrs[key]} has shape {list(arr.shape)}, the output {list(shape)}"
    want = DTYPES.get(dtype or "")
    if kind == "values" and (list(arr.shape) != list(shape or []) or want is None
                             or arr.dtype != want.np):
        return (f"const values {attrs[key]} are {list(arr.shape)} {arr.dtype}, the output "
                f"{list(shape or [])} {dtype}")
    return None
