"""Indexed operands for the analyses: the byte runs an indexed HBM operand really touches.

An indexed row's HBM operand names a set of elements (``kernbench.schemas.elements``), not
the contiguous ``[addr, addr + nbytes)``; the race detector sees its maximal runs of
consecutive elements instead, so column tiles of one matrix written by different PEs do not
look like overlapping writes. Atomics' HBM accesses are not accesses for the race detector
at all: the memory orders read-modify-writes. Gather/scatter operands (offsets known only in
Phase 2) stay the whole tensor: conservative.
"""

from __future__ import annotations

import json

import polars as pl

from kernbench.analyze.footprint import Kept, footprint
from kernbench.schemas import elements as ix
from kernbench.schemas.dtypes import DTYPES
from kernbench.schemas.ops import ATOMICS, Op
from kernbench.trace import limits

#: bytes the race detector takes per access row (a byte range of an operand, or a piece of
#: one cut at every other range's ends) at its peak: ~480 measured on a 140k-op trace
BYTES_PER_ACCESS = 512
_ITEMSIZE = {name: d.itemsize for name, d in DTYPES.items()}
_ATOMIC_NAMES = [op.value for op in ATOMICS]
_ELEMENT_NAMES = [Op.DMA_READ.value, Op.DMA_WRITE.value, *_ATOMIC_NAMES]
INDEXED = pl.col("name").is_in(_ELEMENT_NAMES) & pl.col("attrs").str.contains(
    '"strides"|"access"', literal=False)


def _runs(attrs_text: str, shape: tuple[int, ...], itemsize: int, table: ix.AccessTable,
          kept: Kept) -> tuple[list[int], list[int], int]:
    """(run starts, run ends) in bytes from the operand address, and the moved elements:
    from the operand's footprint (closed form for a strided tile, ``analyze.footprint``)."""
    try:
        fp = footprint(json.loads(attrs_text), shape, table, kept)
    except (ValueError, TypeError):
        return [], [], 0
    starts, ends = fp.runs()
    return (starts * itemsize).tolist(), (ends * itemsize).tolist(), fp.moved


def patterns(ops: pl.DataFrame, table: ix.AccessTable) -> pl.DataFrame:
    """Per indexed row: op_id, role of its HBM operand, its addr, run byte ranges from it
    (lo, hi lists) and the masked-in element count."""
    rows = ops.filter(INDEXED)
    schema = pl.Schema({"op_id": pl.Int64(), "role": pl.String(), "addr": pl.Int64(),
                        "lo": pl.List(pl.Int64), "hi": pl.List(pl.Int64), "moved": pl.Int64()})
    if not rows.height:
        return pl.DataFrame(schema=schema)
    hbm = rows.select("op_id", "attrs", role=pl.when(pl.col("name") == Op.DMA_WRITE.value)
                      .then(pl.lit("out")).otherwise(pl.lit("in")),
                      o=pl.when(pl.col("name") == Op.DMA_WRITE.value).then(pl.col("output"))
                      .otherwise(pl.col("inputs").list.first()))
    hbm = hbm.with_columns(addr=pl.col("o").struct.field("addr"),
                           shape=pl.col("o").struct.field("shape"),
                           dtype=pl.col("o").struct.field("dtype")).drop("o")
    keys = hbm.select("attrs", "shape", "dtype").unique(maintain_order=True)
    kept = Kept("the indexed operands' byte runs")
    found = [_runs(a, tuple(s or ()), _ITEMSIZE.get(d, 1), table, kept)
             for a, s, d in keys.iter_rows()]
    keys = keys.with_columns(r_lo=pl.Series([f[0] for f in found], dtype=pl.List(pl.Int64)),
                             r_hi=pl.Series([f[1] for f in found], dtype=pl.List(pl.Int64)),
                             moved=pl.Series([f[2] for f in found], dtype=pl.Int64))
    hbm = hbm.join(keys, on=["attrs", "shape", "dtype"], how="left", nulls_equal=True)
    return hbm.select("op_id", "role", "addr", lo="r_lo", hi="r_hi", moved="moved")


def exact_accesses(ops: pl.DataFrame, opnd: pl.DataFrame, table: ix.AccessTable
                   ) -> pl.DataFrame:
    """``opnd`` (op_id, ev, space, mem_pe, lo, hi; ev 0 read / 1 write) with each indexed
    HBM operand replaced by its runs and atomics' HBM accesses dropped."""
    atomic_ids = ops.filter(pl.col("name").is_in(_ATOMIC_NAMES)).select("op_id")
    if atomic_ids.height:
        opnd = opnd.join(atomic_ids.with_columns(_a=pl.lit(True)), on="op_id", how="left")
        opnd = opnd.filter(~(pl.col("_a").fill_null(False) & (pl.col("space") == "hbm")))
        opnd = opnd.drop("_a")
    pat = patterns(ops.filter(~pl.col("name").is_in(_ATOMIC_NAMES)), table)
    if not pat.height:
        return opnd
    is_run = (pl.col("space") == "hbm") & pl.col("op_id").is_in(pat["op_id"].implode())
    first = opnd.filter(is_run).join(pat, on="op_id", how="inner", suffix="_run")
    n_runs = int(first["lo_run"].list.len().sum() or 0)
    limits.require(f"the race detector ({opnd.height:,} accesses and {n_runs:,} byte runs "
                   "of indexed operands)", (n_runs + opnd.height) * BYTES_PER_ACCESS)
    runs = (first.select("op_id", "ev", "space", "mem_pe", "addr", lo="lo_run", hi="hi_run")
            .explode("lo", "hi").filter(pl.col("lo").is_not_null())
            .with_columns(lo=pl.col("lo") + pl.col("addr"), hi=pl.col("hi") + pl.col("addr")))
    return pl.concat([opnd.filter(~is_run), runs.select(opnd.columns).cast(opnd.schema)])
