"""How a critical-path op's time splits among its engine and the shared parts it waited for
(ADR-0741).

``shared.parquet`` says how much each shared part delayed an op. An ``hbm``, ``tcm`` or
``link`` wait made the op end later than its own cost: its ``busy_ps`` includes it, so the
waits are the ``W`` ps before ``t_start + busy`` (``W``: the op's waits summed; a message
that queued for its first link before it started waits longer than its busy time, and the
rest lies before its start), laid out in part order (hbm, tcm, link) then by resource. A
path op's span ``[t_from, t_to)`` gives each wait the part of it that the span covers.

An ``issue`` wait made the op issue later than its program wanted: the path reaches it
through an ``issue_port`` edge from the PE's previous issue, and the predecessor's span from
its own issue on is the control processor's time issuing it, so it is the ``issue`` part of
that predecessor (of its engine and line). What is left of a span is its engine's. The parts
are disjoint pieces of the span, so the path still tiles the latency.
"""

from __future__ import annotations

import polars as pl

#: the shared parts, in the order a report lists them
PARTS = ("hbm", "tcm", "link", "issue")
#: the parts that lengthen an op's duration, in the order its extension is laid out
EXTENDING = ("hbm", "tcm", "link")
#: the path's per-op columns: the ps of ``path_ps`` each part holds
PART_COLUMNS = tuple(f"{p}_ps" for p in PARTS)
#: per path op: the shared resources it waited for on the path, and for how long
RESOURCES = pl.List(pl.Struct({"part": pl.String(), "resource": pl.String(),
                               "ps": pl.Int64()}))
_ORDER = {p: i for i, p in enumerate(PARTS)}


def _overlap(lo: pl.Expr, hi: pl.Expr, a: pl.Expr, b: pl.Expr) -> pl.Expr:
    """Length of ``[lo, hi) ∩ [a, b)`` (0 when they miss)."""
    return pl.max_horizontal(pl.min_horizontal(hi, b) - pl.max_horizontal(lo, a), pl.lit(0))


def _extensions(path: pl.DataFrame, shared: pl.DataFrame) -> pl.DataFrame:
    """Per (path row ``k``, part, resource): the ps of the row's window the wait covers."""
    waits = (shared.filter(pl.col("part").is_in(EXTENDING) & (pl.col("wait_ps") > 0))
             .group_by("op_id", "part", "resource").agg(pl.col("wait_ps").sum())
             .with_columns(order=pl.col("part").replace_strict(_ORDER, return_dtype=pl.Int64)))
    rows = path.select("k", "op_id", "t_from_ps", "hi",
                       end=pl.col("t_start_ps") + pl.col("busy_ps"))
    x = (rows.join(waits, on="op_id").sort("k", "order", "resource")
         .with_columns(before=pl.col("wait_ps").cum_sum().over("k") - pl.col("wait_ps"),
                       total=pl.col("wait_ps").sum().over("k")))
    first = pl.col("end") - pl.col("total")  # where the extension begins
    lo = pl.min_horizontal(first + pl.col("before"), pl.col("end"))
    hi = pl.min_horizontal(first + pl.col("before") + pl.col("wait_ps"), pl.col("end"))
    return x.select("k", "part", "resource",
                    ps=_overlap(lo, hi, pl.col("t_from_ps"), pl.col("hi")))


def attribute(path: pl.DataFrame, shared: pl.DataFrame) -> pl.DataFrame:
    """``path`` (the walk's frame, with ``busy_ps``) with ``PART_COLUMNS`` and ``resources``
    (``RESOURCES``) added; all zero / empty without shared waits."""
    path = path.with_row_index("k").with_columns(
        nxt=pl.col("edge").shift(-1).fill_null(""))
    port = pl.col("nxt") == "issue_port"  # the next path op waited for this one's issue
    issue_lo = pl.max_horizontal("t_from_ps", "t_issue_ps")
    path = path.with_columns(
        hi=pl.when(port).then(pl.min_horizontal(issue_lo, "t_to_ps")).otherwise("t_to_ps"))
    path = path.with_columns(issue_ps=pl.col("t_to_ps") - pl.col("hi"))
    parts = pl.concat([
        _extensions(path, shared),
        path.filter(pl.col("issue_ps") > 0).select(
            "k", part=pl.lit("issue"), resource=pl.format("issue.pe{}", "pe"), ps="issue_ps"),
    ]).filter(pl.col("ps") > 0)
    per = (parts.sort("k", "ps", "resource", descending=[False, True, False])
           .group_by("k", maintain_order=True)
           .agg(resources=pl.struct("part", "resource", "ps"),
                **{f"{p}_ps": pl.col("ps").filter(pl.col("part") == p).sum()
                   for p in EXTENDING}))
    out = path.drop("issue_ps").join(per, on="k", how="left", maintain_order="left")
    return out.with_columns(
        *[pl.col(f"{p}_ps").fill_null(0) for p in EXTENDING],
        issue_ps=pl.col("t_to_ps") - pl.col("hi"),
        resources=pl.col("resources").fill_null(pl.lit([], RESOURCES)).cast(RESOURCES),
    ).drop("k", "nxt", "hi")
