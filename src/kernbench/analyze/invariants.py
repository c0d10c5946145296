"""Built-in invariants (docs/analysis.md): each a named polars query in ``INVARIANTS``.

A query takes a ``TraceData`` and returns its violations as a DataFrame with columns
``op_id`` (nullable), ``other_op_id`` (nullable) and ``message``; an empty frame means the
invariant holds. ``run_invariants`` runs them all (or a chosen few) in registry order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import polars as pl

from kernbench.analyze.frames import ITEMSIZE, hw_of, load_ops, operands, shape_elements
from kernbench.analyze.metrics import lane_expr
from kernbench.analyze.race import hazards
from kernbench.errors import BadInputError
from kernbench.schemas.elements import EMPTY, AccessTable
from kernbench.schemas.ops import ATOMICS, CAPACITY_ONE, Kind, Op
from kernbench.trace import Trace
from kernbench.trace.byte_runs import INDEXED, patterns
from kernbench.trace.coverage import coverage
from kernbench.trace.hw import HwConfig
from kernbench.trace.scalars import as_int
from kernbench.trace.validate import RULES, Validation

VIOLATION = pl.Schema({"op_id": pl.Int64, "other_op_id": pl.Int64, "message": pl.String})


@dataclass(frozen=True)
class TraceData:
    """What an invariant query sees: the trace, its whole op log and its hardware."""

    trace: Trace
    ops: pl.DataFrame
    hw: HwConfig
    validation: Validation | None = None  # None: not validated (synthetic op logs)

    @classmethod
    def load(cls, trace: Trace) -> TraceData:
        return cls(trace, load_ops(trace), hw_of(trace), trace.validation)


@dataclass(frozen=True)
class Invariant:
    name: str
    doc: str
    query: Callable[[TraceData], pl.DataFrame]


def _violations(df: pl.DataFrame, op: str | None, other: str | None, message: pl.Expr
                ) -> pl.DataFrame:
    return df.select(op_id=pl.col(op) if op else pl.lit(None),
                     other_op_id=pl.col(other) if other else pl.lit(None),
                     message=message).cast(VIOLATION)


def _messages(msgs: list[str]) -> pl.DataFrame:
    return pl.DataFrame({"op_id": [None] * len(msgs), "other_op_id": [None] * len(msgs),
                         "message": msgs}, schema=VIOLATION)


def validated(rule: str) -> Callable[[TraceData], pl.DataFrame]:
    """An invariant whose violations are the trace validator's findings of ``rule``."""

    def query(d: TraceData) -> pl.DataFrame:
        if d.validation is None:
            return pl.DataFrame(schema=VIOLATION)
        return d.validation.rule(rule).cast(VIOLATION)

    query.__doc__ = f"The validator's {rule!r} findings (kernbench.trace.validate)."
    return query


def manifest(d: TraceData) -> pl.DataFrame:
    """The manifest's n_ops, t_end_ps and scratch_peak_bytes agree with the op log."""
    ops, m = d.ops, d.trace.manifest
    found = {"n_ops": ops.height, "t_end_ps": as_int(ops["t_end_ps"].max()),
             "scratch_peak_bytes": as_int(ops["scratch_cursor"].max())}
    return _messages([f"manifest {k} = {m[k]} but the op log gives {v}"
                      for k, v in found.items() if k in m and m[k] != v])


def parents(d: TraceData) -> pl.DataFrame:
    """Every ``parent`` names a composite op of the same PE."""
    kids = d.ops.filter(pl.col("parent").is_not_null()).select("op_id", "pe", "parent")
    par = d.ops.select(parent="op_id", p_pe="pe", p_kind="kind")
    bad = kids.join(par, on="parent", how="left").filter(
        pl.col("p_kind").is_null() | (pl.col("p_kind") != Kind.COMPOSITE.value)
        | (pl.col("p_pe") != pl.col("pe")))
    return _violations(bad, "op_id", "parent",
                       pl.format("op {}'s parent {} is not a composite op of pe{}",
                                 pl.col("op_id"), pl.col("parent"), pl.col("pe")))


def engine_overlap(d: TraceData) -> pl.DataFrame:
    """No two ops hold one capacity-1 engine at once; an op holds (pe, engine, lane) over
    ``[t_start, t_start + busy)``; ``lane`` is the link direction for ``link_tx``."""
    grp = ("pe", "engine", "lane")
    held = (d.ops.filter(pl.col("engine").is_in([e.value for e in CAPACITY_ONE])
                         & (pl.col("busy_ps") > 0))
            .select("op_id", "pe", "engine", "t_start_ps", "busy_ps", lane_expr())
            .with_columns(end=pl.col("t_start_ps") + pl.col("busy_ps"))
            .sort(*grp, "t_start_ps", "op_id"))
    run_max = pl.col("end").cum_max()
    held = held.with_columns(
        holder=pl.when(pl.col("end") == run_max).then(pl.col("op_id")).forward_fill().over(grp),
        until=run_max.over(grp))
    held = held.with_columns(prev_holder=pl.col("holder").shift(1).over(grp),
                             prev_until=pl.col("until").shift(1).over(grp))
    bad = held.filter(pl.col("t_start_ps") < pl.col("prev_until"))
    return _violations(bad, "op_id", "prev_holder", pl.format(
        "op {} starts on pe{} {}{} at {} ps while op {} holds it until {} ps", pl.col("op_id"),
        pl.col("pe"), pl.col("engine"),
        pl.when(pl.col("lane") != "").then(pl.format("[{}]", pl.col("lane"))).otherwise(
            pl.lit("")), pl.col("t_start_ps"), pl.col("prev_holder"), pl.col("prev_until")))


def scratch_budget(d: TraceData) -> pl.DataFrame:
    """The scratch cursor stays within ``hw.kernel_scratch_kib``; every tcm/stage operand
    lies inside its area."""
    budget = {"tcm": d.hw.kernel_scratch_bytes, "stage": d.hw.stage_bytes}
    over = d.ops.filter(pl.col("scratch_cursor") > budget["tcm"])
    opnd = operands(d.ops).filter(pl.col("space").is_in(list(budget))).with_columns(
        limit=pl.col("space").replace_strict(budget, return_dtype=pl.Int64)).filter(
        pl.col("addr") + pl.col("nbytes") > pl.col("limit")).collect()
    return pl.concat([
        _violations(over, "op_id", None, pl.format(
            "pe{} scratch cursor {} bytes after op {} exceeds the budget of {} bytes",
            pl.col("pe"), pl.col("scratch_cursor"), pl.col("op_id"), pl.lit(budget["tcm"]))),
        _violations(opnd, "op_id", None, pl.format(
            "op {} {} operand {}@pe{} [{}, {}) ends past the {}-byte area", pl.col("op_id"),
            pl.col("role"), pl.col("space"), pl.col("mem_pe"), pl.col("addr"),
            pl.col("addr") + pl.col("nbytes"), pl.col("limit"))),
    ])


#: how an op's ``nbytes``/``num_elements`` follow from its operands, by kind (None: unchecked)
SIZE_RULE: dict[Kind, str | None] = {
    Kind.MEMORY: "output", Kind.GEMM: "output", Kind.MATH: "output",
    Kind.IPCQ: "output_or_inputs", Kind.SCOPE: "zero", Kind.COMPOSITE: None,
}


#: ops whose moved bytes depend on offsets or masks known in Phase 2 only (unless indexed)
NOT_BY_SHAPE = [Op.GATHER.value, Op.SCATTER.value, *(op.value for op in ATOMICS)]


def nbytes_shapes(d: TraceData) -> pl.DataFrame:
    """``nbytes`` and ``num_elements`` agree with the operand shapes and dtypes: the output's
    (the inputs' for an IPCQ op without output), zero for scope rows."""
    opnd = operands(d.ops)
    bad_dtype = opnd.filter(~pl.col("dtype").is_in(list(ITEMSIZE))).collect()
    out = opnd.filter(pl.col("role") == "out").select(
        "op_id", out_bytes="nbytes", out_elems=shape_elements(pl.col("shape")))
    ins = opnd.filter(pl.col("role") == "in").group_by("op_id").agg(
        in_bytes=pl.col("nbytes").sum(), in_elems=shape_elements(pl.col("shape")).sum())
    moved = patterns(d.ops, _access(d)).select("op_id", moved_n="moved")
    masked = d.ops.filter(~INDEXED & pl.col("name").is_in(NOT_BY_SHAPE)).select("op_id")
    sized = (d.ops.lazy().join(masked.lazy(), on="op_id", how="anti")
             .select("op_id", "kind", "nbytes", "num_elements", "attrs", "name")
             .join(out, on="op_id", how="left").join(ins, on="op_id", how="left")
             .join(moved.lazy(), on="op_id", how="left")
             .with_columns(rule=pl.when(pl.col("moved_n").is_not_null()).then(pl.lit("moved"))
                           .otherwise(pl.col("kind").replace_strict(
                               {k.value: v for k, v in SIZE_RULE.items()}, default=None))))
    expected = {
        "output": (pl.col("out_bytes"), pl.col("out_elems")),
        "output_or_inputs": (pl.coalesce("out_bytes", "in_bytes"),
                             pl.coalesce("out_elems", "in_elems")),
        "zero": (pl.lit(0, pl.Int64), pl.lit(0, pl.Int64)),
        # an indexed row moves its masked-in elements (of the output's or input's dtype)
        "moved": (pl.col("moved_n") * pl.coalesce("out_bytes", "in_bytes")
                  // pl.coalesce("out_elems", "in_elems").clip(1), pl.col("moved_n")),
    }
    parts = [sized.filter(pl.col("rule") == rule).with_columns(want_b=b.fill_null(0),
                                                               want_n=n.fill_null(0))
             for rule, (b, n) in expected.items()]
    bad = pl.concat(parts).filter((pl.col("nbytes") != pl.col("want_b"))
                                  | (pl.col("num_elements") != pl.col("want_n"))).collect()
    return pl.concat([
        _violations(bad_dtype, "op_id", None, pl.format(
            "op {} {} operand has unknown dtype '{}'", pl.col("op_id"), pl.col("role"),
            pl.col("dtype"))),
        _violations(bad.sort("op_id"), "op_id", None, pl.format(
            "op {} ({}) has nbytes {} and num_elements {}; its operands give {} and {}",
            pl.col("op_id"), pl.col("kind"), pl.col("nbytes"), pl.col("num_elements"),
            pl.col("want_b"), pl.col("want_n"))),
    ])


def data_race(d: TraceData) -> pl.DataFrame:
    """No data hazard: every read sees the last program-order write to its bytes, landed
    before the read starts, and no write lands while a read of its bytes is in flight
    (same PE in program order; HBM across PEs). See ``kernbench.analyze.race``."""
    return _violations(hazards(d.ops, _access(d)), "op_id", "other_op_id", pl.col("message"))


def outputs_covered(d: TraceData) -> pl.DataFrame:
    """Every element of every ``output`` tensor is written, and no element of an output or
    ``inout`` tensor is written by two different programs (atomics and a program rewriting
    its own elements excepted; ``kernbench.trace.coverage``, ADR-0811)."""
    if d.trace is None:
        return pl.DataFrame(schema=VIOLATION)
    found = coverage(d.ops, d.trace.tensors, _access(d))
    rows = [(None, None, f"{c.role} {c.name}: {c.unwritten_text()}")
            for c in found if len(c.unwritten)]
    rows += [(*(c.shared_ops or (None, None)), f"{c.role} {c.name}: {c.shared_text()}")
             for c in found if len(c.shared)]
    return pl.DataFrame(rows, schema=VIOLATION, orient="row")


def _access(d: TraceData) -> AccessTable:
    return d.trace.access if d.trace is not None and d.validation is not None else EMPTY


INVARIANTS: dict[str, Invariant] = {inv.name: inv for inv in (
    Invariant("schema", "rows follow the format: no nulls, known ops, operands, attrs JSON",
              validated("schema")),
    Invariant("tensors", "tensor rows usable: role, dtype, shape, init, no HBM overlap",
              validated("tensors")),
    Invariant("hbm_bounds", "every HBM operand lies inside one tensor", validated("hbm_bounds")),
    Invariant("manifest", "manifest totals agree with the op log", manifest),
    Invariant("dense_ids", "op_id dense 0..N-1, seq dense per PE", validated("dense_ids")),
    Invariant("parents", "parent names a composite op of the same PE", parents),
    Invariant("time_order", "t_issue <= t_start <= t_end, t_start + busy <= t_end",
              validated("time_order")),
    Invariant("engine_overlap", "no two ops overlap on one capacity-1 engine", engine_overlap),
    Invariant("scratch_budget", "scratch peak and operands within budget", scratch_budget),
    Invariant("nbytes_shapes", "nbytes and num_elements consistent with shapes",
              nbytes_shapes),
    Invariant("data_race", "no data hazard (race detector)", data_race),
    Invariant("outputs_covered", "every output element written, none by two programs",
              outputs_covered),
)}


def run_invariants(data: TraceData, names: list[str] | None = None
                   ) -> dict[str, pl.DataFrame | None]:
    """Violations per invariant, in registry order (all of them, or those in ``names``).
    On a trace that failed validation only the validator's rules run; the others are
    None (skipped: their queries assume a well-formed op log)."""
    unknown = sorted(set(names or ()) - set(INVARIANTS))
    if unknown:
        raise BadInputError(f"unknown invariants {unknown}; known: {', '.join(INVARIANTS)}")
    chosen = [n for n in INVARIANTS if names is None or n in names]
    valid = data.validation is None or data.validation.ok
    return {n: INVARIANTS[n].query(data) if valid or n in RULES else None for n in chosen}
