"""The guards of two traces of one kernel, side by side (``kernbench diff``, ADR-0840).

A guard is a decision on data: its value chose the path the trace recorded. Two traces of
one kernel on other data (or another kernel version) take other paths from the first guard
whose value differs. Guards are aligned per program by their order in it (the k-th decision
of program p), which is the same whatever the timing; the first differing pair is the one
trace A reached first (its ``t_start_ps``; B's for a guard only B holds).
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from kernbench.schemas import guards
from kernbench.schemas.ops import Op


def _guards(ops: pl.DataFrame) -> pl.DataFrame:
    g = ops.filter(pl.col("name") == Op.GUARD.value).sort("op_id")
    return g.select(
        "program", "op_id", "src", "t_start_ps", "attrs",
        dtype=pl.col("inputs").list.first().struct.field("dtype"),
        k=pl.int_range(pl.len()).over("program"))


def _value(attrs: str | None, dtype: str | None) -> str | None:
    if attrs is None or dtype is None:
        return None
    try:
        return guards.show(int(json.loads(attrs)[guards.BITS]), dtype)
    except (ValueError, KeyError, TypeError):
        return attrs


def first_guard_difference(a: pl.DataFrame, b: pl.DataFrame) -> dict[str, Any] | None:
    """The first guard (program, its k-th decision) whose line or value differs between
    op logs ``a`` and ``b``, or that only one holds; None when every guard agrees (or
    neither trace holds one)."""
    ga, gb = _guards(a), _guards(b)
    if not ga.height and not gb.height:
        return None
    joined = (ga.join(gb, on=["program", "k"], how="full", coalesce=True, suffix="_b")
              .filter(pl.col("op_id").is_null() | pl.col("op_id_b").is_null()
                      | (pl.col("src") != pl.col("src_b")) | (pl.col("attrs") != pl.col("attrs_b")))
              .with_columns(t=pl.coalesce("t_start_ps", "t_start_ps_b"))
              .sort("t", "program", "k"))
    if not joined.height:
        return None
    r = joined.row(0, named=True)

    def side(sfx: str) -> dict[str, Any] | None:
        if r[f"op_id{sfx}"] is None:
            return None
        return {"op_id": r[f"op_id{sfx}"], "src": r[f"src{sfx}"],
                "value": _value(r[f"attrs{sfx}"], r[f"dtype{sfx}"])}

    return {"program": r["program"], "k": r["k"], "a": side(""), "b": side("_b"),
            "n_different": joined.height}


def guard_text(d: dict[str, Any] | None) -> str | None:
    """The diff's line for the first differing guard (None: no guard differs)."""
    if d is None:
        return None

    def side(s: dict[str, Any] | None) -> str:
        return "(no guard)" if s is None else f"op {s['op_id']} at {s['src']} decided {s['value']}"

    return (f"first guard that differs: program {d['program']}, decision {d['k']} "
            f"({d['n_different']} guards differ)\n  a: {side(d['a'])}\n  b: {side(d['b'])}")
