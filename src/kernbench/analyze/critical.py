"""The critical path (docs/analysis.md): the chain of ops that sets a trace's latency, found
from the op log alone, in linear time.

Every op has two events, its issue and its start; each happens at the latest of the
times its predecessors release it (``analyze.path_edges``: engine, issue, queue, slot, data,
war, waw, wait, and on hardware with a shared part issue_port).

An ``engine`` or ``queue`` edge from an op of another program of the PE is a head-of-line
wait: the path names it ``behind``, with that program and its line (ADR-0740). The time each
path op holds the path is split among its engine and the shared parts it waited for
(``analyze.path_parts``).

Walking back from the op that ends last gives the path: each op covers ``[t_from_ps,
t_to_ps)``, from the release that bound it to its release of the next path op, so ``path_ps``
tiles the latency.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from kernbench.analyze.frames import SHARED_SCHEMA, hw_of, load_shared, open_trace, scan_ops
from kernbench.analyze.metrics import lane_expr
from kernbench.analyze.path_edges import (
    EDGES,
    Graph,
    offer_edges,
    offer_issue_port,
    participants,
)
from kernbench.analyze.path_parts import PART_COLUMNS, RESOURCES, attribute
from kernbench.analyze.path_summary import TOP_LINES, summary
from kernbench.trace import Trace

#: edges from a predecessor on the same PE that, from another program, are head-of-line waits
_HOLDING = frozenset({"engine", "queue"})
#: edges where the kernel stalled for the predecessor (its ``wait_ps`` is on the path)
_STALL = frozenset({"data", "queue", "wait"})
_COLUMNS = ("op_id", "pe", "program", "seq", "kind", "name", "engine", "parent", "t_issue_ps",
            "t_start_ps", "t_end_ps", "busy_ps", "wait_ps", "src", "attrs", "inputs", "output")
SCHEMA = pl.Schema({
    "op_id": pl.Int64(), "pe": pl.Int32(), "program": pl.Int32(), "seq": pl.Int64(),
    "name": pl.String(), "engine": pl.String(), "lane": pl.String(), "src": pl.String(),
    "t_issue_ps": pl.Int64(),
    "t_start_ps": pl.Int64(), "t_end_ps": pl.Int64(), "busy_ps": pl.Int64(), "edge": pl.String(),
    "t_from_ps": pl.Int64(), "t_to_ps": pl.Int64(), "path_ps": pl.Int64(),
    "wait_ps": pl.Int64(),
    # a ``behind`` op: the other program, its line, and how long the op waited behind it
    "behind_program": pl.Int32(), "behind_src": pl.String(), "behind_ps": pl.Int64(),
    # the parts of path_ps spent waiting for a shared part (the rest: the op's engine)
    **{c: pl.Int64() for c in PART_COLUMNS}, "resources": RESOURCES,
})


def _walk(g: pl.DataFrame, graph: Graph) -> dict[str, list[int] | list[str]]:
    """Walk back from the op that ends last: per path op (latest first) its row, the edge
    that bound it, its span, its stall on the path and its predecessor's row (-1: none)."""
    t_issue, t_start = g["t_issue_ps"].to_numpy(), g["t_start_ps"].to_numpy()
    wait, rep = g["wait_ps"].to_numpy(), g["rep"].to_numpy()
    ends = g["t_end_ps"].to_numpy()
    last = int(rep[np.lexsort((g["op_id"].to_numpy(), ends))[-1]])
    node, t_to = 2 * last, int(ends[last])
    seen = np.zeros(2 * g.height, np.bool_)
    out: dict[str, list[Any]] = {k: [] for k in ("i", "edge", "from", "to", "wait", "pred")}
    release, pred, code = graph.release.tolist(), graph.pred.tolist(), graph.code.tolist()
    while node >= 0 and not seen[node]:
        seen[node] = True
        row = node // 2
        if node % 2 == 0 and pred[node] == node + 1:  # started when issued
            node += 1
            seen[node] = True
        p = pred[node]
        t_from = release[node] if p >= 0 else int((t_start if node % 2 == 0 else t_issue)[row])
        edge = EDGES[code[node]]
        stalled = min(int(wait[row]), max(0, t_from - int(t_issue[row] - wait[row])))
        for k, v in (("i", row), ("edge", edge), ("from", t_from), ("to", t_to),
                     ("wait", stalled if edge in _STALL else 0),
                     ("pred", p // 2 if p >= 0 else -1)):
            out[k].append(v)
        node, t_to = p, t_from
    return {k: v[::-1] for k, v in out.items()}


def _behind(g: pl.DataFrame, walk: dict[str, Any]) -> dict[str, np.ndarray]:
    """Head-of-line waits (ADR-0740): a path op whose engine or queue edge comes from an op of
    another program of its PE, released exactly when the op started (or issued), is
    ``behind`` it. Per path op: its edge, the other op's row
    (-1) and ``behind_ps``: the time the path spends in that other op (the path op just
    before; each path op is one op's predecessor at most, so these never add up to more than
    the latency)."""
    rows, pred = np.asarray(walk["i"], np.int64), np.asarray(walk["pred"], np.int64)
    edge = np.asarray(walk["edge"], dtype=object)
    prog = g["pe"].cast(pl.Int64).to_numpy() * (1 << 32) + g["program"].cast(pl.Int64).to_numpy()
    # the event the edge released: a held engine, the start; a full queue, the issue
    at = np.where(edge == "queue", g["t_issue_ps"].to_numpy()[rows],
                  g["t_start_ps"].to_numpy()[rows])
    exact = np.asarray(walk["from"], np.int64) == at  # released exactly then: it bound the op
    holding = np.isin(edge, list(_HOLDING)) & (pred >= 0) & exact
    other = holding & (prog[rows] != prog[np.maximum(pred, 0)])
    span = np.asarray(walk["to"], np.int64) - np.asarray(walk["from"], np.int64)
    before, before_row = np.zeros_like(span), np.full_like(rows, -1)
    before[1:], before_row[1:] = span[:-1], rows[:-1]
    ps = np.where(before_row == pred, before, 0)
    return {"edge": np.where(other, "behind", edge).astype(str),
            "behind": np.where(other, pred, -1), "behind_ps": np.where(other, ps, 0)}


def path_of(ops: pl.DataFrame, asynchronous: bool = False, shared: pl.DataFrame | None = None,
            issue_ps: int = 0) -> pl.DataFrame:
    """The critical path of an op log (columns of ``SCHEMA``, earliest op first).
    ``asynchronous``: the trace's hw has ``engine_issue = "async"`` (WAR/WAW and queue
    edges exist); ``shared``: its ``shared.parquet`` rows (``frames.load_shared``), with
    ``issue_ps`` the PE's issue interval."""
    g = participants(ops)
    if not g.height:
        return pl.DataFrame(schema=SCHEMA)
    shared = shared if shared is not None else pl.DataFrame(schema=SHARED_SCHEMA)
    graph = Graph(g["t_start_ps"].to_numpy(), g["t_issue_ps"].to_numpy())
    waited = g.join(shared.filter((pl.col("part") == "issue") & (pl.col("wait_ps") > 0))
                    .select("op_id").unique(), on="op_id")["i"].to_numpy()
    offer_issue_port(g, graph, waited, issue_ps)  # first: it wins ties
    offer_edges(ops, g, graph, asynchronous)
    walk = _walk(g, graph)
    hol = _behind(g, walk)
    ids = g["op_id"].to_numpy()
    rows = np.asarray(walk["i"], np.int64)
    behind_id = np.where(hol["behind"] >= 0, ids[np.maximum(hol["behind"], 0)], -1)
    who = ops.select(behind_op="op_id", behind_program="program", behind_src="src")
    frame = (pl.DataFrame({"op_id": ids[rows], "behind_op": behind_id},
                          schema={"op_id": pl.Int64, "behind_op": pl.Int64})
             .join(ops.select("op_id", "pe", "program", "seq", "name", "engine", "attrs",
                              "src", "t_issue_ps", "t_start_ps", "t_end_ps", "busy_ps"),
                   on="op_id", how="left", maintain_order="left")
             .join(who, on="behind_op", how="left", maintain_order="left")
             .with_columns(lane_expr()).drop("attrs", "behind_op"))
    t_from_s = pl.Series(walk["from"], dtype=pl.Int64)
    t_to_s = pl.Series(walk["to"], dtype=pl.Int64)
    frame = frame.with_columns(
        edge=pl.Series(hol["edge"], dtype=pl.String), t_from_ps=t_from_s, t_to_ps=t_to_s,
        path_ps=t_to_s - t_from_s, wait_ps=pl.Series(walk["wait"], dtype=pl.Int64),
        behind_ps=pl.Series(hol["behind_ps"], dtype=pl.Int64))
    return attribute(frame, shared).select(list(SCHEMA)).cast(SCHEMA)


def critical_path(trace_or_path: Trace | str | Path) -> pl.DataFrame:
    """The critical path of a trace: one row per op on it, earliest first, with the edge
    that bound it (``EDGES``), the span it covers (``t_from_ps``..``t_to_ps``), its share
    ``path_ps`` (the column sums to the latency when the path starts at 0), ``wait_ps``,
    the part of the op's own stall the path covers, the other program a ``behind`` op waited
    behind, and the parts of ``path_ps`` spent waiting for a shared part (``PART_COLUMNS``)."""
    trace = open_trace(trace_or_path)
    hw = hw_of(trace)
    ops = scan_ops(trace).select(_COLUMNS).collect()
    return path_of(ops, asynchronous=hw.engine_issue == "async", shared=load_shared(trace),
                   issue_ps=round(hw.issue_ns * 1000))


#: the path's summary by engine, line and part lives in ``analyze.path_summary``; named here too
__all__ = ["EDGES", "SCHEMA", "critical_path", "path_of", "summary", "TOP_LINES"]
