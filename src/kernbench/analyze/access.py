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
from collections.abc import Iterator
from typing import Any

import numpy as np
import polars as pl

from kernbench.analyze.element_counts import ElementCounts
from kernbench.analyze.footprint import Kept, footprint, pieces
from kernbench.errors import BadInputError, TraceFormatError, closest
from kernbench.schemas import elements as ix
from kernbench.schemas import offsets as off
from kernbench.schemas.dtypes import DTYPES
from kernbench.schemas.ops import ATOMICS, Op
from kernbench.trace import Trace, limits

_ATOMIC_NAMES = frozenset(op.value for op in ATOMICS)
#: op name -> (reads its HBM operand, writes it, the operand is the output)
_KINDS: dict[str, tuple[bool, bool, bool]] = {
    Op.DMA_READ.value: (True, False, False), Op.DMA_WRITE.value: (False, True, True),
    **{name: (True, True, False) for name in _ATOMIC_NAMES},
}
_UNPLACED = (Op.GATHER.value, Op.SCATTER.value)
ITEMSIZE = {name: d.itemsize for name, d in DTYPES.items()}
#: bytes one row of ``element_accesses`` takes at its peak (the long frame and its join)
BYTES_PER_ACCESS_ROW = 160
#: bytes ``access_map`` and its picture take per element of the tensor at their peak
BYTES_PER_MAP_ELEMENT = 256
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


class Placed:
    """Rows that move placed HBM elements (``_hbm_rows``, in the given order) with their
    footprints (``analyze.footprint``, one per distinct attrs and shape): row ``r`` moves
    ``prints[which[r]]`` from element ``first[r]`` of its tensor, ``moved[r]`` in all."""

    def __init__(self, rows: pl.DataFrame, table: ix.AccessTable, kept: Kept) -> None:
        self.rows = rows
        keys = rows.select("attrs", "shape").unique(maintain_order=True).with_row_index("_k")
        self.prints = [footprint(json.loads(a) if a else {}, tuple(s or ()), table, kept)
                       for _, a, s in keys.iter_rows()]
        at = rows.select("attrs", "shape").join(keys, on=["attrs", "shape"], how="left",
                                                nulls_equal=True, maintain_order="left")
        self.which = at["_k"].to_numpy().astype(np.int64)
        item = rows["dtype"].replace_strict(ITEMSIZE, return_dtype=pl.Int64)
        self.first = ((rows["addr"] - rows["t_addr"]) // item).to_numpy().astype(np.int64)
        per_print = np.array([p.moved for p in self.prints] + [0], np.int64)
        self.moved = per_print[self.which]

    def pieces(self, only: np.ndarray | None = None, lo: int = -off.LIMIT,
               hi: int = off.LIMIT) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """(elements, weights, row) chunks of the rows (those of the ascending row numbers
        ``only``: the row is then a position in ``only``), in ``[lo, hi)``."""
        if only is None:
            return pieces(self.first, self.prints, self.which, lo, hi)
        return pieces(self.first[only], self.prints, self.which[only], lo, hi)


def _placed(trace: Trace, tensors: list[dict[str, Any]], tensor: str | None, kept: Kept
            ) -> Placed:
    rows = _hbm_rows(trace, tensors)
    if tensor is not None:
        rows = rows.filter(pl.col("tensor") == tensor)
    return Placed(rows.sort("program", "op_id"), trace.access, kept)


def element_accesses(trace: Trace, tensor: str | None = None) -> pl.DataFrame:
    """One row per (op, HBM element) the op reads or writes, repeats included: tensor, flat
    element index, op_id, program, pe, src (the kernel line) and whether it reads / writes
    it; ordered by program and op. Its size is counted first: TraceLimitError when the rows
    would not fit the memory budget (``kernbench report`` and ``plot --access`` aggregate
    instead and never build it)."""
    tensors = _tensors(trace)
    if tensor is not None:
        _check_name(tensors, tensor)
    placed = _placed(trace, tensors, tensor, Kept("the per-element accesses' tiles"))
    total = int(placed.moved.sum(dtype=np.float64))
    limits.require(f"the per-element accesses ({total:,} rows)", total * BYTES_PER_ACCESS_ROW)
    idx, elems = [], []
    for e, w, r in placed.pieces():
        elems.append(np.repeat(e, w))
        idx.append(np.repeat(r, w))
    if not elems:
        return pl.DataFrame(schema=SCHEMA)
    rows = placed.rows.with_row_index("_i")
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
    owner's first access). Accumulated over the ops in program order, a bounded chunk of
    elements at a time; its per-element arrays are counted first (TraceLimitError over the
    memory budget)."""
    t = _check_name(_tensors(trace), tensor)
    shape = tuple(t["shape"]) or (1,)
    n = off.product(shape, f"tensor {tensor}")
    held = n * BYTES_PER_MAP_ELEMENT
    limits.require(f"the access map of {tensor} ({n:,} elements)", held)
    placed = _placed(trace, _tensors(trace), tensor,
                     Kept(f"the access map of {tensor} and its tiles", held))
    rows = placed.rows
    acc = ElementCounts(n, rows["program"].to_numpy().astype(np.int64), rows["src"],
                        rows["read"].to_numpy(), rows["write"].to_numpy())
    for e, w, r in placed.pieces(lo=0, hi=n):
        acc.add(e, w, r)
    return acc.frame(shape[-1])


def tensor_traffic(trace: Trace) -> pl.DataFrame:
    """Per HBM tensor: bytes_read (elements read × itemsize, each time), bytes_used
    (distinct elements read × itemsize), rereads (bytes_read / bytes_used), bytes_written
    (elements written × itemsize, each time), gather_ops (gathers, scatters and atomics at
    loaded offsets: counted, not placed). Elements are counted from the footprints; the
    distinct ones read in a bitmap of one tensor at a time (a byte an element: within the
    tensor's own bytes, which the validator counted)."""
    tensors = _tensors(trace)
    shapes = {t["name"]: tuple(t["shape"]) or (1,) for t in tensors}
    bitmap = max([off.product(s, "tensor") for s in shapes.values()] or [0])
    placed = _placed(trace, tensors, None, Kept("the HBM tensors' tiles and a bitmap", bitmap))
    total = float(placed.moved.sum(dtype=np.float64))
    if total * off.MAX_ITEMSIZE >= off.LIMIT:  # the byte sums below stay inside int64
        raise TraceFormatError(f"{trace.path}: its ops move {total:.3g} elements of HBM "
                               f"tensors, more bytes than a trace may address (2^62)")
    rows = placed.rows.select("tensor", "read", "write", moved=pl.Series(placed.moved))
    per = rows.group_by("tensor").agg(
        read=pl.col("moved").filter(pl.col("read")).sum().cast(pl.Int64),
        written=pl.col("moved").filter(pl.col("write")).sum().cast(pl.Int64))
    readers = rows.with_row_index("_r").filter(pl.col("read")).group_by("tensor").agg("_r")
    used: dict[str, list[Any]] = {"tensor": [], "used": []}
    for name, idx in readers.iter_rows():
        n = off.product(shapes[name], f"tensor {name}")
        seen = np.zeros(n, np.bool_)
        for e, _, _ in placed.pieces(np.asarray(idx, np.int64), 0, n):
            seen[e] = True
        used["tensor"].append(name)
        used["used"].append(int(np.count_nonzero(seen)))
    item = pl.DataFrame({"tensor": [t["name"] for t in tensors],
                         "itemsize": [DTYPES[t["dtype"]].itemsize for t in tensors]})
    unplaced = unplaced_ops(trace).group_by("tensor").agg(
        gather_ops=pl.len().cast(pl.Int64))
    out = (item.join(per, on="tensor", how="left")
           .join(pl.DataFrame(used, schema={"tensor": pl.String, "used": pl.Int64}),
                 on="tensor", how="left").join(unplaced, on="tensor", how="left"))
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
