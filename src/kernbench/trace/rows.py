"""The row rules of the trace validator (``kernbench.trace.validate``): tensors and op-log batches.

Each rule is a polars filter whose hits become findings ``(rule, op_id, other_op_id,
message)``; a ``Findings`` collector keeps exact counts and the first few rows per rule, so
memory stays bounded however bad a trace is.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from kernbench.schemas.arrow import OPS
from kernbench.schemas.dtypes import DTYPES
from kernbench.schemas.elements import EMPTY, AccessTable
from kernbench.schemas.ops import ENGINE, KIND, Op
from kernbench.trace.attrs import attrs_findings, version_findings
from kernbench.trace.element_checks import TileBudget, indexed_findings, indexed_rows

TENSOR_ROLES = ("input", "output", "inout")
INIT_KINDS = ("randn", "zeros", "arange", "data")
SPACES = ("hbm", "tcm", "stage", "ipcq")
ITEMSIZE = {name: d.itemsize for name, d in DTYPES.items()}
#: times, sizes and addresses above this are refused (sums of two stay inside int64)
MAX_VALUE = 1 << 62
FINDING = pl.Schema({"rule": pl.String, "op_id": pl.Int64, "other_op_id": pl.Int64,
                     "message": pl.String})
DICT_COLUMNS = ("kind", "name", "engine", "src")
_NAMES = [o.value for o in Op]
_KIND = {o.value: KIND[o].value for o in Op}
_ENGINE = {o.value: ENGINE[o].value for o in Op}
_TIMES = ("t_issue_ps", "t_start_ps", "t_end_ps", "busy_ps", "wait_ps")
_COUNTS = ("num_elements", "nbytes", "flops", "scratch_cursor")


class Findings:
    """Exact counts per rule and the first ``keep`` findings of each."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.counts: dict[str, int] = {}
        self.parts: list[pl.DataFrame] = []

    def add(self, rule: str, frame: pl.DataFrame, message: pl.Expr,
            op: str | None = "op_id", other: str | None = None) -> None:
        if not frame.height:
            return
        have = self.counts.get(rule, 0)
        self.counts[rule] = have + frame.height
        room = self.keep - min(have, self.keep)
        if room:
            self.parts.append(frame.head(room).select(
                rule=pl.lit(rule), op_id=pl.col(op) if op else pl.lit(None),
                other_op_id=pl.col(other) if other else pl.lit(None),
                message=pl.coalesce(message.cast(pl.String), pl.format(
                    "op {} breaks the {} rule", pl.col(op) if op else pl.lit("?"),
                    pl.lit(rule)))).cast(FINDING))

    def one(self, rule: str, message: str, op_id: int | None = None, n: int = 1) -> None:
        self.add(rule, pl.DataFrame({"op_id": [op_id] * n}, schema={"op_id": pl.Int64}),
                 pl.lit(message))

    def frame(self) -> pl.DataFrame:
        return pl.concat(self.parts) if self.parts else pl.DataFrame(schema=FINDING)


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
                    ) -> tuple[pl.DataFrame | None, int]:
    """Check every tensor row; return the HBM regions (None if the tensors are unusable)
    and the total tensor bytes."""
    total, regions = 0, []
    cols = table.select(["name", "role", "pe", "addr", "dtype", "shape", "init"])
    cols = cols.append_column("data_len", pc.binary_length(table.column("data")))
    for row in cols.to_pylist():  # the data bytes themselves are never copied here
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
    frame = pl.DataFrame(regions, schema={"r_lo": pl.Int64, "r_hi": pl.Int64,
                                          "tensor": pl.String}, orient="row")
    return frame.sort("r_lo"), total


# -- ops -------------------------------------------------------------------------------

def _nulls(df: pl.DataFrame, found: Findings) -> None:
    for f in OPS:
        if not f.nullable and df[f.name].null_count():
            hit = df.filter(pl.col(f.name).is_null())
            found.add("schema", hit, pl.format("op {} has a null {}", pl.col("op_id"),
                                               pl.lit(f.name)), op="row")


def _operands(df: pl.DataFrame) -> pl.DataFrame:
    ins = (df.select("row", "op_id", o=pl.col("inputs")).explode("o")
           .filter(pl.col("o").is_not_null()))
    out = df.select("row", "op_id", o=pl.col("output")).filter(pl.col("o").is_not_null())
    both = pl.concat([ins, out]).unnest("o")
    return both.select("row", "op_id", "space", "pe", "addr", "shape", "dtype", "transposed")


def _elements(shape: pl.Expr, frame: pl.DataFrame) -> pl.Expr:
    """``prod(shape)`` as float64 (no overflow): one ``list.get`` per dimension, which is
    far faster than ``list.eval`` for the short shapes traces hold."""
    width = int(frame.select(shape.list.len().max()).item() or 0)
    if width > 16:  # a hostile shape: the general (slow) form
        return shape.list.eval(pl.element().cast(pl.Float64).product()).list.first().fill_null(
            1.0)
    prod = pl.lit(1.0, pl.Float64)
    for i in range(width):
        prod = prod * shape.list.get(i, null_on_oob=True).cast(pl.Float64).fill_null(1.0)
    return prod


def _operand_rules(df: pl.DataFrame, n_pe: int, regions: pl.DataFrame | None,
                   found: Findings) -> None:
    null_elem = df.filter(pl.col("inputs").list.eval(pl.element().is_null()).list.any())
    found.add("schema", null_elem, pl.format("op {} has a null input operand", "op_id"), "row")
    opnd = _operands(df)
    opnd = opnd.with_columns(nb=_elements(pl.col("shape"), opnd) * pl.col("dtype").replace_strict(
        ITEMSIZE, default=1, return_dtype=pl.Float64))
    fields = ("space", "pe", "addr", "shape", "dtype", "transposed")
    bad_shape = pl.col("shape").list.eval(pl.element().is_null() | (pl.element() < 0)
                                          | (pl.element() >= MAX_VALUE)).list.any()
    bad = opnd.filter(pl.any_horizontal(*[pl.col(c).is_null() for c in fields])
                      | ~pl.col("space").is_in(SPACES) | ~pl.col("dtype").is_in(list(ITEMSIZE))
                      | (pl.col("pe") < 0) | (pl.col("pe") >= n_pe) | (pl.col("addr") < 0)
                      | (pl.col("addr") >= MAX_VALUE) | bad_shape.fill_null(True)
                      | (pl.col("nb") >= MAX_VALUE))
    found.add("schema", bad, pl.format("op {} has an operand {}@pe{} addr {} shape {} dtype {}"
                                       " outside the format", "op_id", "space", "pe", "addr",
                                       pl.col("shape").cast(pl.List(pl.String)).list.join(","),
                                       "dtype"), "row")
    if regions is None:
        return
    hbm = opnd.filter(pl.col("space") == "hbm")
    indexed = df.filter(indexed_rows(df))
    if indexed.height:  # a set of elements, checked by validate_indexed
        hbm = hbm.join(indexed.select("row"), on="row", how="anti")
    if bad.height:
        hbm = hbm.join(bad.select("row"), on="row", how="anti")
    hbm = hbm.sort("addr")
    if not hbm.height:
        return
    hit = hbm.join_asof(regions, left_on="addr", right_on="r_lo", strategy="backward")
    out = hit.filter(pl.col("r_hi").is_null()
                     | (pl.col("addr").cast(pl.Float64) + pl.col("nb") > pl.col("r_hi")))
    found.add("hbm_bounds", out.sort("row"), pl.format(
        "op {} reads or writes hbm [{}, +{} bytes), outside every tensor", "op_id", "addr",
        pl.col("nb").cast(pl.Int64, strict=False)), "row")


def _row_rules(df: pl.DataFrame, found: Findings, n_pe: int, seq_next: dict[int, int]
               ) -> None:
    c = pl.col
    found.add("dense_ids", df.filter(c("op_id") != c("row")),
              pl.format("row {} has op_id {}", "row", "op_id"), "row")
    offset = c("pe").replace_strict(seq_next, default=0, return_dtype=pl.Int64)
    seqd = df.with_columns(want=pl.int_range(pl.len()).over("pe").cast(pl.Int64) + offset)
    found.add("dense_seq", seqd.filter(c("seq") != c("want")), pl.format(
        "op {} on pe{} has seq {}, expected {}", "op_id", "pe", "seq", "want"), "row")
    for pe, n in df.group_by("pe").len().iter_rows():
        if pe is not None:
            seq_next[pe] = seq_next.get(pe, 0) + n
    found.add("schema", df.filter((c("pe") < 0) | (c("pe") >= n_pe) | (c("program") < 0)),
              pl.format("op {} has pe {} program {} (hw has {} PEs)", "op_id", "pe",
                        "program", pl.lit(n_pe)), "row")
    unknown = df.filter(~c("name").is_in(_NAMES))
    found.add("schema", unknown, pl.format("op {}: unknown op name(s) ['{}']", "op_id", "name"),
              "row")
    vocab = df.filter(c("name").is_in(_NAMES) & (
        (c("kind") != c("name").replace_strict(_KIND, default=None))
        | (c("engine") != c("name").replace_strict(_ENGINE, default=None))))
    found.add("schema", vocab, pl.format("op {} ({}) has kind/engine {}/{}, not the op's",
                                         "op_id", "name", "kind", "engine"), "row")
    big = pl.any_horizontal(*[(c(k) >= MAX_VALUE) | (c(k) < 0) for k in _TIMES + _COUNTS])
    found.add("schema", df.filter(big), pl.format(
        "op {} has a negative or absurd time/count (t_issue {} t_start {} t_end {} busy {} "
        "wait {}; nbytes {} elements {} flops {} scratch {})", "op_id", *_TIMES, *_COUNTS),
        "row")
    bad_t = df.filter(~big.fill_null(True) & ((c("t_issue_ps") > c("t_start_ps"))
                              | (c("t_start_ps") > c("t_end_ps")) | (c("busy_ps") < 0)
                              | (c("wait_ps") < 0)
                              | (c("t_start_ps") + c("busy_ps") > c("t_end_ps"))))
    found.add("time_order", bad_t, pl.format(
        "op {} ({}) has t_issue {} t_start {} busy {} t_end {} wait {} (ps)", "op_id", "name",
        "t_issue_ps", "t_start_ps", "busy_ps", "t_end_ps", "wait_ps"), "row")


def _attrs(df: pl.DataFrame, found: Findings) -> None:
    bad = []
    for text in df["attrs"].drop_nulls().unique().to_list():
        try:
            ok = isinstance(json.loads(text), dict)
        except (ValueError, RecursionError):
            ok = False
        if not ok:
            bad.append(text)
    if bad:
        found.add("schema", df.filter(pl.col("attrs").is_in(bad)), pl.format(
            "op {} attrs {} is not a JSON object", "op_id", pl.col("attrs").str.slice(0, 80)),
            "row")


def _plain_strings(batch: pa.RecordBatch) -> pa.RecordBatch:
    """The batch with its dictionary columns decoded in Arrow: polars keeps every category
    it ever saw for the life of the process, which would grow with the op count."""
    arrays = [pc.cast(col, pa.string()) if pa.types.is_dictionary(col.type) else col
              for col in batch.columns]
    fields = [pa.field(f.name, pa.string()) if pa.types.is_dictionary(f.type) else f
              for f in batch.schema]
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


def ops_findings(batches: Iterable[pa.RecordBatch], regions: pl.DataFrame | None, n_pe: int,
                 found: Findings, access: AccessTable = EMPTY, major: int = 2) -> None:
    """Check every op-log row, one record batch at a time (``access``: the trace's
    access.parquet, for indexed rows; ``major``: the manifest's schema version)."""
    offset = 0
    seq_next: dict[int, int] = {}  # pe -> the seq its next row must have
    budget = TileBudget()
    for batch in batches:
        df = pl.from_arrow(_plain_strings(batch))
        assert isinstance(df, pl.DataFrame)
        df = df.with_columns(row=pl.int_range(offset, offset + df.height, dtype=pl.Int64))
        offset += df.height
        _nulls(df, found)
        _row_rules(df, found, n_pe, seq_next)
        _operand_rules(df, n_pe, regions, found)
        _attrs(df, found)
        attrs_findings(df, found)
        version_findings(df, major, indexed_rows(df), found)
        indexed_findings(df, regions, access, found, budget)
