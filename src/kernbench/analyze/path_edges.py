"""The edges of the critical path's event graph (``analyze.critical``): which event released
which, found from the op log alone, in linear time.

Every op has two events: its issue ``I`` (``t_issue_ps``) and its start ``S``
(``t_start_ps``). Each event happens at the latest of the times its predecessors release it
(the machine is exact: the binding one releases it at exactly that time):

- ``S(X)``: its own issue ``I(X)``; the previous op on its engine (same PE, engine and lane)
  freeing it at ``S + busy`` (``engine``); the producer of an input landing at ``E``
  (``data``); under async issue, an earlier op of its program that reads (``war``) or writes
  (``waw``) the bytes X writes, ending at ``E``.
- ``I(X)``: the kernel's previous op of the program (``issue``: at its end when it blocked
  the kernel, else at its issue); when the kernel stalled (``wait_ps > 0``), the producer of
  an input landing at ``I`` (``data``), the oldest op of a full engine queue starting at
  ``I`` (``queue``), or any op of the program ending then (``wait``); the first op of a
  program, the end of the previous program on its PE (``slot``: it took that program's place);
  when the PE's control processor delayed it (an ``issue`` row of ``shared.parquet``, SPEC
  §15), the PE's previous issue plus ``issue_ns`` (``issue_port``); after the receives a
  kernel waited for (on the chip it goes on once each message is sent, before it lands),
  the latest of their sends' issues (``message``).

Candidates are matched by time equality (joins on ``(memory, time)``), the latest release
wins, ties go to the first kind in ``EDGES``. Composite parents are bookkeeping: their end is
their last child's, a first child is issued at its parent's issue. ``analyze.critical`` walks
the best releases back from the op that ends last.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from kernbench.analyze.frames import ITEMSIZE
from kernbench.analyze.metrics import lane_expr
from kernbench.schemas.ops import Engine, Kind, Op
from kernbench.trace.scalars import as_int

#: edge kinds, in tie-break order (the first binds when two release at the same time);
#: ``behind`` is never offered: ``analyze.critical`` names a head-of-line ``engine`` or
#: ``queue`` edge so
EDGES: tuple[str, ...] = ("issue_port", "engine", "issue", "queue", "slot", "data", "war",
                          "waw", "wait", "start", "decision", "message", "behind")
_SPLIT = 1 << 40  # packs (role, row) into one sortable int
CODE = {e: i for i, e in enumerate(EDGES)}


class Graph:
    """Best predecessor per event node (``2 * row`` start, ``2 * row + 1`` issue)."""

    def __init__(self, t_start: np.ndarray, t_issue: np.ndarray) -> None:
        n = len(t_start)
        self.time = np.empty(2 * n, np.int64)  # each event's own time
        self.time[0::2], self.time[1::2] = t_start, t_issue
        self.release = np.full(2 * n, -1, np.int64)
        self.pred = np.full(2 * n, -1, np.int64)
        self.code = np.full(2 * n, CODE["start"], np.int64)

    def offer(self, node: np.ndarray, pred: np.ndarray, release: np.ndarray, edge: str) -> None:
        """Offer edges ``pred -> node`` (each node at most once) released at ``release``; a
        strictly later release replaces the current best (so kinds offered first win
        ties); a release after the event (a hand-edited trace) is no predecessor."""
        better = (release > self.release[node]) & (release <= self.time[node])
        node, pred, release = node[better], pred[better], release[better]
        self.release[node], self.pred[node], self.code[node] = release, pred, CODE[edge]


#: operand spaces as join keys
_SPACES = {"hbm": 0, "tcm": 1, "stage": 2, "ipcq": 3}
_ENGINE_CODE = {e.value: i for i, e in enumerate(Engine)}


def participants(ops: pl.DataFrame) -> pl.DataFrame:
    """The ops that take part (no scope rows; scalar columns), with a dense row index
    ``i``, ``lane`` and ``rep``: the row whose end stands for the op's end (a composite's
    last child)."""
    g = (ops.select("op_id", "pe", "program", "seq", "kind", "name", "engine", "parent",
                    "t_issue_ps", "t_start_ps", "t_end_ps", "busy_ps", "wait_ps")
         .filter(pl.col("kind") != Kind.SCOPE.value).sort("op_id")
         .with_row_index("i").with_columns(pl.col("i").cast(pl.Int64)))
    lanes = (ops.filter(pl.col("engine") == Engine.LINK_TX.value)  # the only laned engine
             .select("op_id", lane_expr()).select("op_id", lane=pl.col("lane").rank("dense")))
    engine = pl.col("engine").replace_strict(_ENGINE_CODE, default=len(_ENGINE_CODE),
                                             return_dtype=pl.Int64)
    g = g.join(lanes, on="op_id", how="left", maintain_order="left").with_columns(
        server=pl.col("pe").cast(pl.Int64) * 4096 + engine * 64
        + pl.col("lane").fill_null(0).cast(pl.Int64))
    last = (g.filter(pl.col("parent").is_not_null())
            .sort("t_end_ps", "seq").group_by("parent").agg(pl.col("i").last().alias("rep")))
    return (g.join(last, left_on="op_id", right_on="parent", how="left", maintain_order="left")
            .with_columns(rep=pl.col("rep").fill_null(pl.col("i"))))


def _operands(ops: pl.DataFrame, op_ids: np.ndarray) -> pl.DataFrame:
    """Per operand of a participating row: i (its row), out (written), mem (space and PE as
    one key), lo, hi (bytes)."""
    ins = (ops.select("op_id", o="inputs").explode("o").filter(pl.col("o").is_not_null())
           .with_columns(out=pl.lit(False)))
    out = ops.select("op_id", o="output").filter(pl.col("o").is_not_null()).with_columns(
        out=pl.lit(True))
    both = pl.concat([ins, out]).unnest("o")
    rank = as_int(both["shape"].list.len().max())
    n = pl.lit(1, pl.Int64)
    for k in range(rank):  # prod(shape) without a per-row list evaluation
        n = n * pl.col("shape").list.get(k, null_on_oob=True).fill_null(1)
    size = pl.col("dtype").replace_strict(ITEMSIZE, default=None, return_dtype=pl.Int64)
    space = pl.col("space").replace_strict(_SPACES, default=len(_SPACES), return_dtype=pl.Int64)
    frame = both.select("op_id", "out", mem=space * (1 << 32) + pl.col("pe").cast(pl.Int64),
                        lo="addr", hi=pl.col("addr") + n * size)
    ids = frame["op_id"].to_numpy()
    i = np.minimum(np.searchsorted(op_ids, ids), max(len(op_ids) - 1, 0))
    keep = op_ids[i] == ids if len(op_ids) else np.zeros(len(ids), np.bool_)
    return frame.with_columns(i=pl.Series(i, dtype=pl.Int64)).filter(pl.Series(keep)).drop(
        "op_id")


def _at(frame: pl.DataFrame, **cols: np.ndarray) -> pl.DataFrame:
    """``frame`` with per-row values of its op (``values[i]``) as columns."""
    i = frame["i"].to_numpy()
    return frame.with_columns(**{k: pl.Series(v[i]) for k, v in cols.items()})


def _overlap_pairs(a: pl.DataFrame, b: pl.DataFrame) -> pl.DataFrame:
    """Pairs (a's ``i``, b's ``i_b``) whose byte ranges overlap in one memory at the same
    time ``t``, ``i_b`` earlier in emission order."""
    pairs = a.join(b.rename({c: f"{c}_b" for c in b.columns if c not in ("mem", "t")}),
                   on=["mem", "t"])
    return pairs.filter((pl.col("lo") < pl.col("hi_b")) & (pl.col("lo_b") < pl.col("hi"))
                        & (pl.col("i_b") < pl.col("i")))


def offer_edges(ops: pl.DataFrame, g: pl.DataFrame, graph: Graph, asynchronous: bool) -> None:
    """Offer every edge kind; the operand-matching kinds (data, war, waw) only to the events
    the cheap kinds leave unexplained, so operands of a few ops are decoded, not all."""
    col = {c: g[c].to_numpy() for c in ("op_id", "t_issue_ps", "t_start_ps", "t_end_ps",
                                        "wait_ps", "rep")}
    rows = np.arange(g.height, dtype=np.int64)
    _offer_decisions(g, graph, col)  # first: a kernel held by a guard wins a tie
    _offer_engine(g, graph)
    graph.offer(2 * rows, 2 * rows + 1, col["t_issue_ps"], "issue")  # started when issued
    stalled = g.filter(pl.col("wait_ps") > 0).select("i", "pe", "program", "engine",
                                                     t="t_issue_ps")
    if asynchronous:
        _offer_queue(g, stalled, graph)
    _offer_kernel(g, graph, col)
    _offer_slots(g, graph)
    # events still unexplained: S (even) or I (odd) later than their best release
    open_ = np.flatnonzero(graph.release < graph.time)
    if len(open_):
        _offer_operands(ops, g, graph, col, open_, graph.time, asynchronous)
    _offer_messages(g, graph, col)
    _offer_wait(g, stalled, graph)


def _offer_messages(g: pl.DataFrame, graph: Graph, col: dict[str, np.ndarray]) -> None:
    """A kernel that waited for messages goes on when the last of them is sent: the op after
    a run of ``recv`` rows of its program is released by the issue of each recv's send (the
    producer its start's ``data`` edge found; the graph keeps the latest)."""
    top = (g.filter(pl.col("parent").is_null()).select("pe", "program", "seq", "i", "name")
           .sort("pe", "program", "seq"))
    is_recv = pl.col("name") == Op.RECV.value
    runs = (top.with_columns(nxt=pl.when(is_recv).then(None).otherwise(pl.col("i"))
                             .backward_fill().over("pe", "program"))
            .filter(is_recv & pl.col("nxt").is_not_null()))
    r, x = runs["i"].to_numpy(), runs["nxt"].to_numpy().astype(np.int64)
    sent = graph.code[2 * r] == CODE["data"]
    r, x = r[sent], x[sent]
    send = graph.pred[2 * r] // 2
    exact = col["t_issue_ps"][send] == col["t_issue_ps"][x] - col["wait_ps"][x]
    graph.offer(2 * x[exact] + 1, 2 * send[exact] + 1, col["t_issue_ps"][send[exact]],
                "message")


def _offer_operands(ops: pl.DataFrame, g: pl.DataFrame, graph: Graph,
                    col: dict[str, np.ndarray], open_: np.ndarray, node_t: np.ndarray,
                    asynchronous: bool) -> None:
    """Data (a producer of an input lands as the op starts, or as its stalled kernel
    issues), and under async issue WAR/WAW, for the ``open_`` event nodes."""
    times = np.unique(node_t[open_])
    consumers = np.unique(open_ // 2)
    producers = np.flatnonzero(np.isin(col["t_end_ps"], times))
    ids = col["op_id"][np.union1d(consumers, producers)]
    opnd = _operands(ops.filter(pl.col("op_id").is_in(pl.Series(ids).implode())), col["op_id"])
    opnd = opnd.with_columns(node=pl.col("i") * 2)
    ends = _at(opnd.filter(pl.col("out")), t=col["t_end_ps"], rep=col["rep"])
    is_open = np.zeros(2 * g.height + 1, np.bool_)
    is_open[open_] = True
    ins = opnd.filter(~pl.col("out"))
    for kind in (0, 1):  # S nodes, then I nodes
        x = ins.filter(pl.Series(is_open[ins["node"].to_numpy() + kind]))
        x = x.with_columns(t=pl.Series(node_t[x["node"].to_numpy() + kind]))
        p = _first(_overlap_pairs(x.drop("node"), ends.drop("node"))
                   .select("i", "rep_b", "t"), "rep_b")
        graph.offer(2 * p["i"].to_numpy() + kind, 2 * p["rep_b"].to_numpy(),
                    p["t"].to_numpy(), "data")
    if asynchronous:
        out = opnd.filter(pl.col("out") & pl.Series(is_open[opnd["node"].to_numpy()]))
        _offer_hazards(g, out.drop("node"), opnd.drop("node"), col, graph)


def _offer_decisions(g: pl.DataFrame, graph: Graph, col: dict[str, np.ndarray]) -> None:
    """A guard held the kernel (ADR-0840): the next op of its program is issued when the
    guard decided (``decision``) and starts when issued — the path runs through the guard,
    whose own issue waited for its operand (a ``data`` edge naming that wait)."""
    if not (g["name"] == Op.GUARD.value).any():
        return
    top = (g.filter(pl.col("parent").is_null()).select("pe", "program", "seq", "i", "name")
           .sort("pe", "program", "seq")
           .with_columns(prev=pl.when(_same(("pe", "program"))).then(pl.col("i").shift(1)),
                         prev_name=pl.when(_same(("pe", "program")))
                         .then(pl.col("name").shift(1)))
           .filter(pl.col("prev_name") == Op.GUARD.value))
    x, q = top["i"].to_numpy(), top["prev"].to_numpy().astype(np.int64)
    held = col["t_end_ps"][q] == col["t_issue_ps"][x] - col["wait_ps"][x]
    x, q = x[held], q[held]
    graph.offer(2 * x, 2 * x + 1, col["t_issue_ps"][x], "issue")
    graph.offer(2 * x + 1, 2 * q, col["t_end_ps"][q], "decision")


def _offer_engine(g: pl.DataFrame, graph: Graph) -> None:
    """Engine order: the previous op on the same capacity-1 server frees it."""
    held = (g.filter((pl.col("engine") != Engine.NONE.value)
                     & (pl.col("kind") != Kind.COMPOSITE.value))
            .select("server", "i", "t_start_ps", "busy_ps").sort("server", "t_start_ps", "i")
            .with_columns(prev=pl.col("i").shift(1),
                          free=(pl.col("t_start_ps") + pl.col("busy_ps")).shift(1))
            .filter(_same(("server",))))
    graph.offer(2 * held["i"].to_numpy(), 2 * held["prev"].to_numpy(),
                held["free"].to_numpy(), "engine")


def _first(pairs: pl.DataFrame, by: str) -> pl.DataFrame:
    """One pair per ``i``: the smallest ``by`` (deterministic), with its time ``t``."""
    return pairs.group_by("i").agg(pl.col(by).min(), pl.col("t").first())


def _same(key: tuple[str, ...]) -> pl.Expr:
    """True where a (sorted) row has the same ``key`` as the row before it."""
    same = pl.lit(True)
    for c in key:
        same = same & (pl.col(c) == pl.col(c).shift(1))
    return same.fill_null(False)


def _offer_hazards(g: pl.DataFrame, out: pl.DataFrame, opnd: pl.DataFrame,
                   col: dict[str, np.ndarray], graph: Graph) -> None:
    """WAR/WAW: an earlier op of the program touching the bytes X writes (``out``) ends as X
    starts."""
    who = {"pe": g["pe"].to_numpy(), "program": g["program"].to_numpy()}
    out = _at(out, t=col["t_start_ps"], **who)
    touch = _at(opnd, t=col["t_end_ps"], rep=col["rep"], **who)
    p = (_overlap_pairs(out, touch)
         .filter((pl.col("pe") == pl.col("pe_b")) & (pl.col("program") == pl.col("program_b")))
         .select("i", "t", k=pl.col("out_b").cast(pl.Int64) * _SPLIT + pl.col("rep_b")))
    p = _first(p, "k")  # a reader before a writer: war first
    for writes, edge in ((0, "war"), (1, "waw")):
        q = p.filter(pl.col("k") // _SPLIT == writes)
        graph.offer(2 * q["i"].to_numpy(), 2 * (q["k"].to_numpy() % _SPLIT), q["t"].to_numpy(),
                    edge)


def _offer_queue(g: pl.DataFrame, stalled: pl.DataFrame, graph: Graph) -> None:
    """A stalled issue released by a slot of its engine's full queue: an earlier op of that
    engine starting."""
    starts = g.select(j="i", pe="pe", engine="engine", t="t_start_ps")
    q = _first(stalled.join(starts, on=["pe", "engine", "t"]).filter(pl.col("j") < pl.col("i")),
               "j")
    graph.offer(2 * q["i"].to_numpy() + 1, 2 * q["j"].to_numpy(), q["t"].to_numpy(), "queue")


def _offer_wait(g: pl.DataFrame, stalled: pl.DataFrame, graph: Graph) -> None:
    """A stalled issue released by any earlier op of its program ending then."""
    ends = g.select(j="rep", pe="pe", program="program", t="t_end_ps", k="i")
    w = _first(stalled.join(ends, on=["pe", "program", "t"]).filter(pl.col("k") < pl.col("i")),
               "j")
    graph.offer(2 * w["i"].to_numpy() + 1, 2 * w["j"].to_numpy(), w["t"].to_numpy(), "wait")


def _offer_kernel(g: pl.DataFrame, graph: Graph, col: dict[str, np.ndarray]) -> None:
    """Program order: the previous kernel-level op of the program (children: the previous
    child of their composite; a first child: its parent's issue)."""
    top = (g.filter(pl.col("parent").is_null()).select("pe", "program", "seq", "i")
           .sort("pe", "program", "seq"))
    top = top.with_columns(prev=pl.when(_same(("pe", "program"))).then(pl.col("i").shift(1)))
    kids = (g.filter(pl.col("parent").is_not_null()).select("parent", "seq", "i")
            .sort("parent", "seq").join(g.select(parent="op_id", parent_i="i"), on="parent",
                                        how="left"))
    kids = kids.with_columns(prev=pl.when(_same(("parent",))).then(pl.col("i").shift(1)))
    first = kids.filter(pl.col("prev").is_null() & pl.col("parent_i").is_not_null())
    graph.offer(2 * first["i"].to_numpy() + 1, 2 * first["parent_i"].to_numpy() + 1,
                col["t_issue_ps"][first["parent_i"].to_numpy()], "issue")
    both = pl.concat([top.select("i", "prev"), kids.select("i", "prev")]).drop_nulls()
    x, q = both["i"].to_numpy(), both["prev"].to_numpy()
    rep = col["rep"][q]
    ready = col["t_issue_ps"][x] - col["wait_ps"][x]  # when the kernel could issue x
    blocked = col["t_end_ps"][rep] == ready  # q held the kernel until it ended
    pred = np.where(blocked, 2 * rep, 2 * q + 1)
    release = np.where(blocked, col["t_end_ps"][rep], col["t_issue_ps"][q])
    graph.offer(2 * x + 1, pred, release, "issue")


def _offer_slots(g: pl.DataFrame, graph: Graph) -> None:
    """A program's first op is issued when an earlier program on its PE has ended."""
    top = g.filter(pl.col("parent").is_null())
    first = (top.sort("seq").group_by("pe", "program").agg(pl.col("i").first(),
                                                           pl.col("t_issue_ps").first())
             .sort("t_issue_ps"))
    ends = (g.sort("t_end_ps", "i").group_by("pe", "program")
            .agg(j=pl.col("rep").last(), t=pl.col("t_end_ps").last())
            .rename({"program": "prev_program"}).sort("t"))
    s = (first.join_asof(ends, left_on="t_issue_ps", right_on="t", by="pe",
                         strategy="backward", check_sortedness=False)
         .filter(pl.col("j").is_not_null() & (pl.col("prev_program") != pl.col("program"))))
    graph.offer(2 * s["i"].to_numpy() + 1, 2 * s["j"].to_numpy(), s["t"].to_numpy(), "slot")



def offer_issue_port(g: pl.DataFrame, graph: Graph, waited: np.ndarray, issue_ps: int) -> None:
    """An op the PE's control processor delayed is issued ``issue_ps`` after the PE's
    previous issue (the latest op issued at or before then; ties: the last emitted)."""
    if not (issue_ps and len(waited)):
        return
    issues = g.select("pe", j="i", t="t_issue_ps").sort("t", "j")
    x = (g.filter(pl.col("i").is_in(pl.Series(waited).implode()))
         .select("i", "pe", key=pl.col("t_issue_ps") - issue_ps).sort("key"))
    m = x.join_asof(issues, left_on="key", right_on="t", by="pe", strategy="backward",
                    check_sortedness=False).filter(pl.col("j").is_not_null())
    graph.offer(2 * m["i"].to_numpy() + 1, 2 * m["j"].to_numpy() + 1,
                m["t"].to_numpy() + issue_ps, "issue_port")
