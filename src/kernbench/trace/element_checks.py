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
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from kernbench.errors import TraceFormatError
from kernbench.schemas import elements as ix
from kernbench.schemas import offsets as off
from kernbench.schemas.dtypes import DTYPES
from kernbench.schemas.ops import ATOMICS, Op
from kernbench.trace import limits
from kernbench.trace.scalars import as_float

ITEMSIZE = {name: d.itemsize for name, d in DTYPES.items()}
#: ops whose first HBM operand may be indexed (strides/access in attrs)
_ELEMENT_OPS = [Op.DMA_READ.value, Op.DMA_WRITE.value, *(op.value for op in ATOMICS)]
_MASKED_OPS = [Op.GATHER.value, Op.SCATTER.value, *(op.value for op in ATOMICS)]
_INDEXED = pl.col("attrs").str.contains('"strides"|"access"', literal=False)


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
        cols = {k: table.column(k).combine_chunks() for k in ("id", "kind", "dtype", "shape",
                                                                "data")}
        if any(c.null_count for c in cols.values()):
            raise TraceFormatError(f"{where}: a row has a null field")
        ids = cols["id"].to_numpy(zero_copy_only=False)
        self.pos = {int(i): k for k, i in enumerate(ids.tolist())}
        if len(self.pos) != len(ids):
            uniq, counts = np.unique(ids, return_counts=True)
            raise TraceFormatError(f"{where}: id {int(uniq[counts > 1][0])} appears twice")
        self.kind = pc.dictionary_encode(cols["kind"].cast(pa.string()))
        self.dtype = pc.dictionary_encode(cols["dtype"].cast(pa.string()))
        self.shape, self.data = cols["shape"], cols["data"]

    def __getitem__(self, ref: int) -> tuple[str, str, tuple[int, ...], Any]:
        k = self.pos[ref]
        return (self.kind[k].as_py(), self.dtype[k].as_py(), tuple(self.shape[k].as_py()),
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


def indexed_rows(df: pl.DataFrame) -> pl.Expr:
    """Rows whose HBM operand is a set of elements (excluded from the contiguous rules)."""
    return pl.col("name").is_in(_ELEMENT_OPS) & _INDEXED


def _hbm_operand(df: pl.DataFrame) -> pl.DataFrame:
    """(row, op_id, name, attrs, addr, shape, dtype) of each indexed row's HBM operand."""
    ins = df.filter(pl.col("name") != Op.DMA_WRITE.value).select(
        "row", "op_id", "name", "attrs", o=pl.col("inputs").list.first())
    out = df.filter(pl.col("name") == Op.DMA_WRITE.value).select(
        "row", "op_id", "name", "attrs", o=pl.col("output"))
    both = pl.concat([ins, out]).filter(pl.col("o").is_not_null())
    return both.select("row", "op_id", "name", "attrs", space=pl.col("o").struct.field("space"),
                       pe=pl.col("o").struct.field("pe"), addr=pl.col("o").struct.field("addr"),
                       shape=pl.col("o").struct.field("shape"),
                       dtype=pl.col("o").struct.field("dtype"))


#: bytes replay keeps per element of a bound indexed operand (int64 index and tile position)
KEPT_BYTES_PER_ELEMENT = 16
#: bytes building one indexed operand takes per element, at its peak (offsets, moved
#: offsets, addresses, mask)
BUILD_BYTES_PER_ELEMENT = 40
#: the most elements one indexed tile may have, whatever the budget
MAX_TILE_ELEMENTS = 1 << 26


def _pattern(attrs_text: str, shape: tuple[int, ...], table: ix.AccessTable
             ) -> tuple[int, int] | str:
    """(lowest, highest) masked-in relative offset ((0, -1) if none), or the problem. An
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

    def add(self, el: pl.DataFrame) -> None:
        """Count a batch's distinct indexed operands; TraceLimitError over the budget."""
        keys = el.select("attrs", "shape", "addr", "pe", "dtype").unique()
        n = keys.select(pl.col("shape").list.eval(pl.element().cast(pl.Float64).product())
                        .list.first().fill_null(1.0)).to_series()
        biggest = as_float(n.max())
        self.kept += int(min(float(n.sum()), 2.0**62))
        limits.require(f"indexed tiles ({self.kept:,} elements bound, the largest "
                       f"{int(biggest):,})", KEPT_BYTES_PER_ELEMENT * self.kept
                       + BUILD_BYTES_PER_ELEMENT * biggest)


def indexed_findings(df: pl.DataFrame, regions: pl.DataFrame | None, table: ix.AccessTable,
                     found, budget: TileBudget | None = None) -> None:
    """Check the indexed rows of one op-log batch (``df`` has ``row`` and plain strings);
    ``budget`` counts their tiles first (TraceLimitError when replay could not hold them)."""
    el = _hbm_operand(df.filter(indexed_rows(df)))
    if el.height:
        (budget or TileBudget()).add(el)
        _element_rules(el, regions, table, found)
    _reference_rules(df, table, found)


def _element_rules(el: pl.DataFrame, regions: pl.DataFrame | None, table: ix.AccessTable,
                   found) -> None:
    keys = el.select("attrs", "shape").unique(maintain_order=True)
    lo, hi, problem = [], [], []
    for attrs_text, shape in keys.iter_rows():
        got = _pattern(attrs_text, tuple(shape or ()), table)
        bad = isinstance(got, str)
        problem.append(got if bad else None)
        lo.append(None if bad else got[0])
        hi.append(None if bad else got[1])
    keys = keys.with_columns(rel_lo=pl.Series(lo, dtype=pl.Int64),
                             rel_hi=pl.Series(hi, dtype=pl.Int64),
                             problem=pl.Series(problem, dtype=pl.String))
    el = el.join(keys, on=["attrs", "shape"], how="left", nulls_equal=True)
    isz = pl.col("dtype").replace_strict(ITEMSIZE, default=None, return_dtype=pl.Int64)
    el = el.with_columns(problem=pl.when(pl.col("problem").is_null()
                                         & (pl.col("addr") % isz != 0)).then(pl.format(
        "address {} is not aligned to its {} elements", "addr", "dtype")).otherwise("problem"))
    found.add("schema", el.filter(pl.col("problem").is_not_null()), pl.format(
        "op {} ({}): indexed operand: {}", "op_id", "name", "problem"), "row")
    if regions is None:
        return
    ok = el.filter(pl.col("problem").is_null() & (pl.col("space") == "hbm")
                   & (pl.col("rel_hi") >= pl.col("rel_lo")))
    if not ok.height:
        return
    isz = pl.col("dtype").replace_strict(ITEMSIZE, default=1, return_dtype=pl.Int64)
    # |rel| < 2^59 (``offsets.check_rel``), isz <= 8 and 0 <= addr < 2^62: no product wraps
    ok = ok.with_columns(first=pl.col("addr") + pl.col("rel_lo") * isz,
                         last=pl.col("addr") + (pl.col("rel_hi") + 1) * isz).sort("addr")
    hit = ok.join_asof(regions, left_on="addr", right_on="r_lo", strategy="backward")
    out = hit.filter(pl.col("r_hi").is_null() | (pl.col("first") < pl.col("r_lo"))
                     | (pl.col("last") > pl.col("r_hi")) | (pl.col("addr") >= pl.col("r_hi")))
    found.add("hbm_bounds", out.sort("row"), pl.format(
        "op {} ({}) moves hbm elements [{}, {}) outside the tensor holding address {}",
        "op_id", "name", "first", "last", "addr"), "row")


def _reference_rules(df: pl.DataFrame, table: ix.AccessTable, found) -> None:
    """``const`` values and gather/scatter/atomic masks name arrays that fit their operand."""
    const = df.filter(pl.col("name") == Op.CONST.value).select(
        "row", "op_id", "attrs", shape=pl.col("output").struct.field("shape"),
        dtype=pl.col("output").struct.field("dtype"))
    tile = pl.when(pl.col("name") == Op.SCATTER.value).then(
        pl.col("inputs").list.first().struct.field("shape")).otherwise(
        pl.col("output").struct.field("shape"))
    masked = df.filter(pl.col("name").is_in(_MASKED_OPS)
                       & pl.col("attrs").str.contains('"mask":[0-9]', literal=False)).select(
        "row", "op_id", "attrs", shape=tile, dtype=pl.lit(None, pl.String))
    bad = []
    for frame, kind, key in ((const, "values", "values"), (masked, "mask", "mask")):
        for attrs_text, shape, dtype in frame.select("attrs", "shape", "dtype").unique(
                maintain_order=True).iter_rows():
            problem = _reference(attrs_text, key, kind, shape, dtype, table)
            if problem:
                bad.append((attrs_text, problem))
        if bad:
            probs = pl.DataFrame(bad, schema={"attrs": pl.String, "problem": pl.String},
                                 orient="row").unique("attrs", keep="first")
            hits = frame.join(probs, on="attrs")
            found.add("schema", hits.sort("row"), pl.format("op {}: {}", "op_id", "problem"),
                      "row")
            bad = []


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
