"""The row rules of the trace validator (``kernbench.trace.validate``): tensors and op-log batches.

Each rule is a numpy mask over a batch's rows or operands (``kernbench.trace.opbatch``)
whose hits become findings ``(rule, op_id, other_op_id, message)``; a ``Findings``
collector keeps exact counts and the first few per rule, formatting only those, so memory
and time stay bounded however bad a trace is. No polars and no ``pyarrow.compute``: the
replay child runs these (ADR-0630).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa

from kernbench.schemas.arrow import OPS
from kernbench.schemas.dtypes import DTYPES
from kernbench.schemas.elements import EMPTY, AccessTable
from kernbench.schemas.ops import ENGINE, KIND, Op
from kernbench.trace.attrs import attrs_findings, version_findings
from kernbench.trace.columns import byte_lengths, nulls
from kernbench.trace.element_checks import TileBudget, indexed_findings, indexed_rows
from kernbench.trace.findings import Findings
from kernbench.trace.guard_checks import guard_findings
from kernbench.trace.ipcq_slots import IpcqUse
from kernbench.trace.opbatch import MAX_VALUE, Ints, OpBatch, Regions, fmt

TENSOR_ROLES = ("input", "output", "inout")
INIT_KINDS = ("randn", "zeros", "arange", "data")
SPACES = ("hbm", "tcm", "stage", "ipcq")
ITEMSIZE = {name: d.itemsize for name, d in DTYPES.items()}
__all__ = ["MAX_VALUE", "ops_findings", "tensor_findings"]
_NAMES = frozenset(o.value for o in Op)
_KIND = {o.value: KIND[o].value for o in Op}
_ENGINE = {o.value: ENGINE[o].value for o in Op}
_TIMES = ("t_issue_ps", "t_start_ps", "t_end_ps", "busy_ps", "wait_ps")
_COUNTS = ("num_elements", "nbytes", "flops", "scratch_cursor")
# -- tensors ---------------------------------------------------------------------------

def _tensor_problem(row: dict[str, Any], n_pe: int) -> tuple[str | None, int]:
    """What is wrong with one tensors.parquet row (None: nothing) and its byte size."""
    name, shape, dtype = row.get("name"), row.get("shape"), row.get("dtype")
    if not isinstance(name, str) or not name:
        return f"tensor name {name!r} is not a non-empty string", 0
    if row.get("role") not in TENSOR_ROLES:
        return f"tensor {name!r} role {row.get('role')!r} is not one of {TENSOR_ROLES}", 0
    pe, addr = row.get("pe"), row.get("addr")
    if not isinstance(pe, int) or not 0 <= pe < n_pe:
        return f"tensor {name!r} pe {pe!r} is outside 0..{n_pe - 1}", 0
    if not isinstance(addr, int) or not 0 <= addr < MAX_VALUE:
        return f"tensor {name!r} addr {addr!r} is negative or out of range", 0
    if dtype not in ITEMSIZE:
        return f"tensor {name!r} dtype {dtype!r} is unknown", 0
    if (not isinstance(shape, list) or not shape
            or not all(isinstance(s, int) and 0 < s < MAX_VALUE for s in shape)):
        return f"tensor {name!r} shape {shape!r} is not a list of positive sizes", 0
    nbytes = ITEMSIZE[dtype]
    for s in shape:
        nbytes *= s
    if addr + nbytes >= MAX_VALUE:
        return f"tensor {name!r} of {nbytes} bytes at {addr} is out of range", nbytes
    try:
        init = json.loads(row.get("init") or "")
    except (ValueError, RecursionError):
        return f"tensor {name!r} init {str(row.get('init'))[:80]!r} is not JSON", nbytes
    if not isinstance(init, dict) or init.get("kind") not in INIT_KINDS:
        return f"tensor {name!r} init {str(row.get('init'))[:80]!r} is not a known init", nbytes
    got = row.get("data_len")
    if init["kind"] == "data" and got != nbytes:
        return f"tensor {name!r} has {got!r} bytes of data, expected {nbytes}", nbytes
    return None, nbytes


def tensor_findings(table: pa.Table, n_pe: int, found: Findings
                    ) -> tuple[Regions | None, int]:
    """Check every tensor row; return the HBM regions (None if the tensors are unusable)
    and the total tensor bytes."""
    total, regions = 0, []
    cols = table.select(["name", "role", "pe", "addr", "dtype", "shape", "init"])
    lens = byte_lengths(table.column("data"))
    for row, data_len in zip(cols.to_pylist(), lens, strict=True):
        row["data_len"] = data_len  # the data bytes themselves are never copied here
        problem, nbytes = _tensor_problem(row, n_pe)
        total += nbytes
        if problem:
            found.one("tensors", f"tensors.parquet: {problem}")
        else:
            regions.append((row["addr"], row["addr"] + nbytes, row["name"]))
    names = [r[2] for r in regions]
    if len(set(names)) != len(names):
        found.one("tensors", "tensors.parquet: tensor names are not unique")
    regions.sort()
    for (_, hi, a), (lo, _, b) in zip(regions, regions[1:], strict=False):
        if lo < hi:
            found.one("tensors", f"tensors.parquet: tensors {a!r} and {b!r} overlap in HBM")
    if found.counts.get("tensors"):
        return None, total
    return Regions(np.array([r[0] for r in regions], np.int64),
                   np.array([r[1] for r in regions], np.int64)), total




# -- ops -------------------------------------------------------------------------------

def _nulls(b: OpBatch, found: Findings) -> None:
    for f in OPS:
        if f.nullable:
            continue
        col = b.cols[f.name]
        if not col.null_count and not pa.types.is_dictionary(col.type):
            continue
        null = b.strs(f.name).null if _is_text(col) else nulls(col)
        hit = np.flatnonzero(null)
        found.add("schema", b.base + hit, partial(_null_message, b, hit, f.name))


def _null_message(b: OpBatch, hit: np.ndarray, column: str, k: int) -> str | None:
    return fmt("op {} has a null {}", b.op(hit[k]), column)


def _is_text(col: pa.Array) -> bool:
    t = col.type.value_type if pa.types.is_dictionary(col.type) else col.type
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def _operand_rules(b: OpBatch, n_pe: int, regions: Regions | None, found: Findings) -> None:
    start, lens, _ = b.inputs
    cs = np.concatenate([[0], np.cumsum(b.element_null)])
    hit = np.flatnonzero((cs[start + lens] - cs[start]) > 0)
    found.add("schema", b.base + hit,
              lambda k: fmt("op {} has a null input operand", b.op(hit[k])))
    o = b.operands
    isz = o.dtype.map(lambda v: float(ITEMSIZE.get(v, 1)), np.nan, np.float64)
    nb = o.shape.product * isz  # NaN where the dtype is null
    with np.errstate(invalid="ignore"):
        bad = (o.space.null | o.pe.null | o.addr.null | o.shape.null | o.dtype.null
               | o.transposed_null | ~o.space.isin(SPACES) | ~o.dtype.isin(frozenset(ITEMSIZE))
               | (o.pe.vals < 0) | (o.pe.vals >= n_pe) | (o.addr.vals < 0)
               | (o.addr.vals >= MAX_VALUE) | o.shape.bad | (nb >= MAX_VALUE))
    hit = np.flatnonzero(bad)

    def operand(k: int) -> str | None:
        i = hit[k]
        shape = o.shape.get(i)
        joined = None if shape is None else ",".join(str(s) for s in shape if s is not None)
        return fmt("op {} has an operand {}@pe{} addr {} shape {} dtype {} outside the "
                   "format", b.op(o.row[i]), o.space.get(i), o.pe.get(i), o.addr.get(i),
                   joined, o.dtype.get(i))

    found.add("schema", b.base + o.row[hit], operand)
    if regions is None:
        return
    skip = indexed_rows(b).copy()
    skip[o.row[hit]] = True  # a row with a bad operand, or a set of elements (indexed)
    hbm = np.flatnonzero(o.space.isin(("hbm",)) & ~skip[o.row])
    if not len(hbm):
        return
    addr = o.addr.vals[hbm]
    held, _, r_hi = regions.holding(addr)
    out = hbm[~held | (addr.astype(np.float64) + nb[hbm] > r_hi.astype(np.float64))]
    out = out[np.argsort(o.row[out], kind="stable")]
    found.add("hbm_bounds", b.base + o.row[out], lambda k: fmt(
        "op {} reads or writes hbm [{}, +{} bytes), outside every tensor", b.op(o.row[out[k]]),
        o.addr.get(out[k]), int(nb[out[k]])))


def _row_rules(b: OpBatch, found: Findings, n_pe: int, seq_next: dict[int, int]) -> None:
    op, pe, program, seq = (b.ints(c) for c in ("op_id", "pe", "program", "seq"))
    local = np.arange(b.n)
    hit = np.flatnonzero(op.where(lambda v: v != local + b.base))
    found.add("dense_ids", b.base + hit,
              lambda k: fmt("row {} has op_id {}", b.base + hit[k], op.get(hit[k])))
    want = _seq_wanted(pe, seq_next)
    hit = np.flatnonzero(seq.where(lambda v: v != want))
    found.add("dense_seq", b.base + hit, lambda k: fmt(
        "op {} on pe{} has seq {}, expected {}", b.op(hit[k]), pe.get(hit[k]),
        seq.get(hit[k]), int(want[hit[k]])))
    hit = np.flatnonzero(pe.where(lambda v: (v < 0) | (v >= n_pe))
                         | program.where(lambda v: v < 0))
    found.add("schema", b.base + hit, lambda k: fmt(
        "op {} has pe {} program {} (hw has {} PEs)", b.op(hit[k]), pe.get(hit[k]),
        program.get(hit[k]), n_pe))
    name, kind, engine = b.strs("name"), b.strs("kind"), b.strs("engine")
    known = name.isin(_NAMES)
    hit = np.flatnonzero(~name.null & ~known)
    found.add("schema", b.base + hit, lambda k: fmt(
        "op {}: unknown op name(s) ['{}']", b.op(hit[k]), name.get(hit[k])))
    ids: dict[str | None, int] = {}
    sid = lambda v: ids.setdefault(v, len(ids))  # noqa: E731 - a string's id, both sides
    vocab = known & (
        (~kind.null & (kind.map(sid, -1) != name.map(lambda v: sid(_KIND.get(v)), -1)))
        | (~engine.null & (engine.map(sid, -1) != name.map(lambda v: sid(_ENGINE.get(v)), -1))))
    hit = np.flatnonzero(vocab)
    found.add("schema", b.base + hit, lambda k: fmt(
        "op {} ({}) has kind/engine {}/{}, not the op's", b.op(hit[k]), name.get(hit[k]),
        kind.get(hit[k]), engine.get(hit[k])))
    cols = [b.ints(c) for c in _TIMES + _COUNTS]
    big = np.zeros(b.n, bool)
    unknown = np.zeros(b.n, bool)
    for c in cols:
        big |= c.where(lambda v: (v >= MAX_VALUE) | (v < 0))
        unknown |= c.null
    hit = np.flatnonzero(big)
    found.add("schema", b.base + hit, lambda k: fmt(
        "op {} has a negative or absurd time/count (t_issue {} t_start {} t_end {} busy {} "
        "wait {}; nbytes {} elements {} flops {} scratch {})", b.op(hit[k]),
        *[c.get(hit[k]) for c in cols]))
    t_issue, t_start, t_end, busy, wait = (c.vals for c in cols[:5])
    bad_t = ~(big | unknown) & ((t_issue > t_start) | (t_start > t_end) | (busy < 0)
                                | (wait < 0) | (t_start + busy > t_end))
    hit = np.flatnonzero(bad_t)
    found.add("time_order", b.base + hit, lambda k: fmt(
        "op {} ({}) has t_issue {} t_start {} busy {} t_end {} wait {} (ps)", b.op(hit[k]),
        name.get(hit[k]), *[cols[j].get(hit[k]) for j in (0, 1, 3, 2, 4)]))


def _seq_wanted(pe: Ints, seq_next: dict[int, int]) -> np.ndarray:
    """Each row's expected seq: its rank among its PE's rows plus the PE's count so far
    (``seq_next``, updated). Rows of a null PE are one more group, counted from 0."""
    want = np.zeros(len(pe.vals), np.int64)
    if not len(want):
        return want
    key = np.where(pe.null, np.iinfo(np.int64).min, pe.vals)  # pe is int32: no clash
    order = np.argsort(key, kind="stable")
    groups, first, sizes = np.unique(key[order], return_index=True, return_counts=True)
    rank = np.arange(len(order)) - np.repeat(first, sizes)
    null_group = bool(pe.null.any())
    base = np.array([0 if null_group and k == 0 else seq_next.get(g, 0)
                     for k, g in enumerate(groups.tolist())], np.int64)
    want[order] = rank + np.repeat(base, sizes)
    for k, (g, n) in enumerate(zip(groups.tolist(), sizes.tolist(), strict=True)):
        if not (null_group and k == 0):
            seq_next[g] = seq_next.get(g, 0) + n
    return want


def _attrs(b: OpBatch, found: Findings) -> None:
    attrs = b.strs("attrs")

    def not_object(text: str) -> bool:
        try:
            return not isinstance(json.loads(text), dict)
        except (ValueError, RecursionError):
            return True

    hit = np.flatnonzero(attrs.map(not_object, False, bool))
    found.add("schema", b.base + hit, lambda k: fmt(
        "op {} attrs {} is not a JSON object", b.op(hit[k]), str(attrs.get(hit[k]))[:80]))


def ops_findings(batches: Iterable[pa.RecordBatch], regions: Regions | None, n_pe: int,
                 found: Findings, access: AccessTable = EMPTY,
                 version: tuple[int, int] = (2, 0), ipcq: IpcqUse | None = None) -> None:
    """Check every op-log row, one record batch at a time (``access``: the trace's
    access.parquet, for indexed rows; ``version``: the manifest's schema version, (major,
    minor); ``ipcq``: the message slots' layout, which measures what each PE's space uses)."""
    major, minor = version
    offset = 0
    seq_next: dict[int, int] = {}  # pe -> the seq its next row must have
    budget = TileBudget()
    for batch in batches:
        b = OpBatch(batch, offset)
        offset += b.n
        _nulls(b, found)
        _row_rules(b, found, n_pe, seq_next)
        _operand_rules(b, n_pe, regions, found)
        if ipcq is not None:
            ipcq.add(b, found)
        _attrs(b, found)
        attrs_findings(b, found)
        version_findings(b, major, found, minor)
        guard_findings(b, found)
        indexed_findings(b, regions, access, found, budget)
