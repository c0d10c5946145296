"""Memory access per HBM element: which program, at which kernel line, touched each element of
an HBM tensor, how often, and the traffic per tensor (``kernbench report``'s "HBM tensors",
``kernbench plot --access``).

The elements come from the trace alone (Phase 1): a DMA row's HBM operand is the contiguous
run ``[addr, addr + numel)`` of its dtype, an indexed row's (block pointers, masked loads,
tensor descriptors) the masked-in elements its ``strides`` / ``access`` attrs and
access.parquet name (``kernbench.schemas.elements``). An atomic reads and writes its elements.
Gathers, scatters and atomics at loaded offsets (``"offsets": "input"``) move elements at
offsets known only in Phase 2: they are counted per tensor (``gather_ops``), not placed.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import polars as pl

from kernbench.errors import BadInputError, closest
from kernbench.schemas import elements as ix
from kernbench.schemas.dtypes import DTYPES
from kernbench.schemas.ops import ATOMICS, Op
from kernbench.trace import Trace

_ATOMIC_NAMES = frozenset(op.value for op in ATOMICS)
#: op name -> (reads its HBM operand, writes it, the operand is the output)
_KINDS: dict[str, tuple[bool, bool, bool]] = {
    Op.DMA_READ.value: (True, False, False), Op.DMA_WRITE.value: (False, True, True),
    **{name: (True, True, False) for name in _ATOMIC_NAMES},
}
_UNPLACED = (Op.GATHER.value, Op.SCATTER.value)
SCHEMA = {"tensor": pl.String, "element": pl.Int64, "op_id": pl.Int64, "program": pl.Int64,
          "pe": pl.Int64, "src": pl.String, "read": pl.Boolean, "write": pl.Boolean}


def _tensors(trace: Trace) -> list[dict[str, Any]]:
    return trace.tensors.select("name", "pe", "addr", "dtype", "shape").to_dicts()


def _owner(tensors: list[dict[str, Any]], pe: int, addr: int) -> dict[str, Any] | None:
    for t in tensors:
        size = int(np.prod(t["shape"])) * DTYPES[t["dtype"]].itemsize
        if t["pe"] == pe and t["addr"] <= addr < t["addr"] + size:
            return t
    return None


def _relative(attrs: str, shape: tuple[int, ...], table: ix.AccessTable) -> np.ndarray:
    """The moved element offsets (relative to the operand address) of one HBM operand."""
    parsed = json.loads(attrs) if attrs else {}
    if parsed.get("offsets") == ix.INPUT:  # an atomic at loaded offsets: not placed
        return np.empty(0, np.int64)
    if ix.is_indexed(parsed):
        rel, mask = ix.elements(parsed, shape, table)
        return np.asarray(ix.moved(rel, mask), np.int64)
    return np.arange(int(np.prod(shape)), dtype=np.int64)


def _hbm_rows(trace: Trace, tensors: list[dict[str, Any]]) -> pl.DataFrame:
    """The rows that move placed HBM elements, with their HBM operand and its tensor."""
    ops = trace.ops.filter(pl.col("name").is_in(list(_KINDS)))
    is_out = pl.col("name") == Op.DMA_WRITE.value
    o = pl.when(is_out).then(pl.col("output")).otherwise(pl.col("inputs").list.first())
    rows = ops.select("op_id", "program", "pe", "src", "name", pl.col("attrs").fill_null(""),
                      o=o).filter(pl.col("o").struct.field("space") == "hbm")
    rows = rows.with_columns(
        addr=pl.col("o").struct.field("addr"), mem_pe=pl.col("o").struct.field("pe"),
        shape=pl.col("o").struct.field("shape"), dtype=pl.col("o").struct.field("dtype"),
        read=pl.col("name").replace_strict({k: v[0] for k, v in _KINDS.items()}),
        write=pl.col("name").replace_strict({k: v[1] for k, v in _KINDS.items()})).drop("o")
    which = pl.lit(None, pl.String)
    base = pl.lit(None, pl.Int64)
    for t in tensors:
        size = int(np.prod(t["shape"])) * DTYPES[t["dtype"]].itemsize
        hit = ((pl.col("mem_pe") == t["pe"]) & (pl.col("addr") >= t["addr"])
               & (pl.col("addr") < t["addr"] + size))
        which = pl.when(hit).then(pl.lit(t["name"])).otherwise(which)
        base = pl.when(hit).then(pl.lit(t["addr"])).otherwise(base)
    return rows.with_columns(tensor=which, t_addr=base).filter(pl.col("tensor").is_not_null())


def element_accesses(trace: Trace, tensor: str | None = None) -> pl.DataFrame:
    """One row per (op, HBM element) the op reads or writes: tensor, flat element index,
    op_id, program, pe, src (the kernel line) and whether it reads / writes it."""
    tensors = _tensors(trace)
    if tensor is not None:
        _check_name(tensors, tensor)
    rows = _hbm_rows(trace, tensors)
    if tensor is not None:
        rows = rows.filter(pl.col("tensor") == tensor)
    rows = rows.with_row_index("_i")
    table = trace.access
    idx, elems = [], []
    for (attrs, shape, dtype), grp in rows.group_by("attrs", "shape", "dtype",
                                                     maintain_order=True):
        rel = _relative(str(attrs), tuple(shape or ()), table)
        item = DTYPES[str(dtype)].itemsize
        first = ((grp["addr"] - grp["t_addr"]) // item).to_numpy().astype(np.int64)
        elems.append((first[:, None] + rel[None, :]).reshape(-1))
        idx.append(np.repeat(grp["_i"].to_numpy().astype(np.int64), len(rel)))
    if not elems:
        return pl.DataFrame(schema=SCHEMA)
    at = pl.DataFrame({"_i": np.concatenate(idx), "element": np.concatenate(elems)})
    at = at.with_columns(pl.col("_i").cast(rows.schema["_i"]))
    out = at.join(rows, on="_i", how="left", maintain_order="left")
    return out.select([pl.col(k).cast(v) for k, v in SCHEMA.items()])


def _check_name(tensors: list[dict[str, Any]], name: str) -> dict[str, Any]:
    for t in tensors:
        if t["name"] == name:
            return t
    names = [t["name"] for t in tensors]
    raise BadInputError(f"no HBM tensor {name!r} in the trace{closest(name, names)}; "
                        f"tensors: {names}")


def access_map(trace: Trace, tensor: str) -> pl.DataFrame:
    """Per element of ``tensor`` (every element, in flat order): row and col (all leading
    dimensions flattened into rows), reads, writes, touches, programs (distinct), owner
    (the lowest program that touched it, null if none) and site (the kernel line of the
    owner's first access)."""
    t = _check_name(_tensors(trace), tensor)
    shape = tuple(t["shape"]) or (1,)
    n = int(np.prod(shape))
    cols = shape[-1]
    acc = element_accesses(trace, tensor).sort("element", "program", "op_id")
    per = acc.group_by("element").agg(
        reads=pl.col("read").sum().cast(pl.Int64), writes=pl.col("write").sum().cast(pl.Int64),
        touches=pl.len().cast(pl.Int64), programs=pl.col("program").n_unique().cast(pl.Int64),
        owner=pl.col("program").first(), site=pl.col("src").first())
    grid = pl.DataFrame({"element": np.arange(n, dtype=np.int64)})
    out = grid.join(per, on="element", how="left").sort("element")
    out = out.with_columns(pl.col("reads", "writes", "touches", "programs").fill_null(0))
    return out.with_columns(row=pl.col("element") // cols, col=pl.col("element") % cols
                            ).select("element", "row", "col", "reads", "writes", "touches",
                                     "programs", "owner", "site")


def tensor_traffic(trace: Trace) -> pl.DataFrame:
    """Per HBM tensor: bytes_read (elements read × itemsize, each time), bytes_used
    (distinct elements read × itemsize), rereads (bytes_read / bytes_used), bytes_written
    (elements written × itemsize, each time), gather_ops (gathers, scatters and atomics at
    loaded offsets: counted, not placed)."""
    tensors = _tensors(trace)
    acc = element_accesses(trace)
    item = pl.DataFrame({"tensor": [t["name"] for t in tensors],
                         "itemsize": [DTYPES[t["dtype"]].itemsize for t in tensors]})
    per = acc.group_by("tensor").agg(
        read=pl.col("read").sum().cast(pl.Int64),
        used=pl.col("element").filter(pl.col("read")).n_unique().cast(pl.Int64),
        written=pl.col("write").sum().cast(pl.Int64))
    unplaced = unplaced_ops(trace).group_by("tensor").agg(
        gather_ops=pl.len().cast(pl.Int64))
    out = item.join(per, on="tensor", how="left").join(unplaced, on="tensor", how="left")
    out = out.with_columns(pl.col("read", "used", "written", "gather_ops").fill_null(0))
    return out.select(
        "tensor", bytes_read=pl.col("read") * pl.col("itemsize"),
        bytes_used=pl.col("used") * pl.col("itemsize"),
        rereads=pl.when(pl.col("used") > 0).then(pl.col("read") / pl.col("used"))
        .otherwise(None),
        bytes_written=pl.col("written") * pl.col("itemsize"), gather_ops="gather_ops")


def unplaced_ops(trace: Trace, tensor: str | None = None) -> pl.DataFrame:
    """One row per op that moves elements of an HBM tensor at offsets known only in Phase 2
    (a gather, a scatter, an atomic at loaded offsets): op_id, name and tensor."""
    tensors = _tensors(trace)
    if tensor is not None:
        _check_name(tensors, tensor)
    loaded = pl.col("name").is_in(list(_ATOMIC_NAMES)) & pl.col("attrs").str.contains(
        ix.INPUT, literal=True)
    rows: dict[str, list[Any]] = {"op_id": [], "name": [], "tensor": []}
    for r in trace.ops.filter(pl.col("name").is_in(_UNPLACED) | loaded).select(
            "op_id", "name", "attrs", "inputs", "output").iter_rows(named=True):
        if r["name"] not in _UNPLACED and (
                json.loads(r["attrs"] or "{}").get("offsets") != ix.INPUT):
            continue  # an atomic at concrete offsets (only its mask is loaded): placed
        for o in [*(r["inputs"] or []), r["output"]]:
            if o is not None and o["space"] == "hbm":
                t = _owner(tensors, o["pe"], o["addr"])
                if t is not None:
                    if tensor in (None, t["name"]):
                        rows["op_id"].append(r["op_id"])
                        rows["name"].append(r["name"])
                        rows["tensor"].append(t["name"])
                    break
    return pl.DataFrame(rows, schema={"op_id": pl.Int64, "name": pl.String,
                                      "tensor": pl.String})
