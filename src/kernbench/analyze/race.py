"""The race detector: data hazards found from the op log alone, vectorised.

Every operand names bytes ``[addr, addr + nbytes)`` of a memory ``(space, mem_pe)``. Reads
happen at an op's ``t_start_ps`` and stay in flight until its ``t_end_ps``; writes land at
``t_end_ps``; a ``scope_exit`` kills tcm ``[lo, hi)`` at its ``t_start_ps``. Program order
is ``seq`` within the issuing PE, or within the program on a PE whose resident programs
interleave (``order_unit``, docs/hardware-model.md). The hazards (``HAZARDS``; ``raw``, ``war`` and
``waw`` are the async machine's three orders, ``war`` in the scoreboard's strength: a read is in
flight until it ends, ADR-0527):

- ``raw``: a read starts before the last program-order write to its bytes has landed;
- ``dead_read``: the last program-order event on the bytes is a scope exit (rewound scratch);
- ``uninit_read``: tcm/stage bytes read with no earlier write on that PE;
- ``waw``: a write lands before an earlier program-order write to the same bytes;
- ``late_write``: a write lands after a later scope exit rewound its bytes;
- ``war``: a write later in program order lands before a read of its bytes completes;
- ``war_xpe``: a write from another PE lands while a read of its bytes is in flight;
- ``race_ww`` / ``race_rw`` / ``race_wr``: two ops on different PEs touch the same bytes
  (both write / this op reads, the other writes / this op writes, the other reads) and
  nothing orders them: only an IPCQ ``send`` -> ``recv`` orders PEs (``ordering``), so
  whether the trace got the right bytes depended on timing. ``ipcq`` slots are excluded
  (the queue protocol orders them). Each op names, per other PE, its latest unordered
  partner with a smaller op_id, so a pair is reported once and findings stay bounded by
  (accesses x PEs).

Method: all access ranges of one memory are cut at every range boundary into elementary
segments; each access becomes one row per segment it covers. Sorting by (segment, PE, seq)
turns "the last program-order write" into a forward fill and "any later write" into a
reverse cumulative minimum, both per group; cross-PE windows are binary searches over
writes sorted by (segment, landing time). Unordered pairs: per PE ``p``, its accesses
sorted by (segment, seq); an access of another PE sees, on ``p``, a seq window between the
last op of ``p`` that happens before it and the first that happens after it (vector clocks),
and a binary search finds the latest access of ``p`` in that window.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from kernbench.analyze.byte_runs import BYTES_PER_ACCESS, exact_accesses
from kernbench.analyze.frames import operands
from kernbench.analyze.ordering import Clocks, clocks
from kernbench.schemas.elements import EMPTY, AccessTable
from kernbench.schemas.ops import Kind, Op
from kernbench.trace import limits
from kernbench.trace.scalars import as_int

READ, WRITE, KILL = 0, 1, 2
#: spaces whose bytes hold nothing until written on this PE (hbm has initial contents)
SCRATCH_SPACES = frozenset({"tcm", "stage"})
_ORDER_HINT = (" (only an IPCQ send -> recv orders two PEs; give each PE its own bytes or "
               "order the accesses with tl.send/tl.recv)")

#: hazard -> message template (fields: op, other, space, mem_pe, lo, hi, t_op, t_other, and
#: each op's source line and PE: src, pe, other_src, other_pe; ``check`` adds both ops' src)
HAZARDS: dict[str, str] = {
    "raw": "op {op} reads {space}@pe{mem_pe} [{lo}, {hi}) at {t_op} ps, before op {other}'s "
           "earlier write to it lands at {t_other} ps",
    "dead_read": "op {op} reads {space}@pe{mem_pe} [{lo}, {hi}) after scope_exit op {other} "
                 "rewound it (at {t_other} ps)",
    "uninit_read": "op {op} reads {space}@pe{mem_pe} [{lo}, {hi}) that no earlier op on this "
                   "PE wrote",
    "waw": "op {op}'s write to {space}@pe{mem_pe} [{lo}, {hi}) lands at {t_op} ps, before "
           "the earlier write of op {other} (lands at {t_other} ps)",
    "late_write": "op {other}'s write to {space}@pe{mem_pe} [{lo}, {hi}) lands at {t_other} "
                  "ps, after scope_exit op {op} rewound it at {t_op} ps",
    "war": "op {other} (later in program order) writes {space}@pe{mem_pe} [{lo}, {hi}) at "
           "{t_other} ps, before op {op}'s read of it completes at {t_op} ps",
    "war_xpe": "op {other} writes {space}@pe{mem_pe} [{lo}, {hi}) at {t_other} ps while "
               "op {op} is reading it (until {t_op} ps)",
    "race_ww": "op {op} (pe{pe}) and op {other} (pe{other_pe}) both write "
               "{space}@pe{mem_pe} [{lo}, {hi}) and nothing orders them" + _ORDER_HINT,
    "race_rw": "op {op} (pe{pe}) reads {space}@pe{mem_pe} [{lo}, {hi}) that op {other} "
               "(pe{other_pe}) writes, and nothing orders them" + _ORDER_HINT,
    "race_wr": "op {op} (pe{pe}) writes {space}@pe{mem_pe} [{lo}, {hi}) that op {other} "
               "(pe{other_pe}) reads, and nothing orders them" + _ORDER_HINT,
}
#: cross-PE races by (this op's event, the other op's event)
_RACE = {(WRITE, WRITE): "race_ww", (READ, WRITE): "race_rw", (WRITE, READ): "race_wr"}
#: spaces whose cross-PE order the IPCQ protocol itself guarantees
PROTOCOL_SPACES = frozenset({"ipcq"})

_FINDING = pl.Schema({"hazard": pl.String, "op_id": pl.Int64, "other_op_id": pl.Int64,
                      "space": pl.String, "mem_pe": pl.Int32, "lo": pl.Int64, "hi": pl.Int64,
                      "t_op": pl.Int64, "t_other": pl.Int64})


def accesses(ops: pl.DataFrame, access: AccessTable = EMPTY) -> pl.DataFrame:
    """One row per byte range an op reads, writes or kills (composite parents excluded:
    their children carry the data movement; indexed HBM operands as their runs, atomics'
    HBM accesses left out: ``analyze/byte_runs.py``)."""
    base = ops.select("op_id", "pe", "seq", "kind", "name", "t_start_ps", "t_end_ps",
                      unit=order_unit(ops))
    opnd = (operands(ops).collect()
            .select("op_id", ev=pl.when(pl.col("role") == "in").then(READ).otherwise(WRITE),
                    space="space", mem_pe="mem_pe", lo="addr",
                    hi=pl.col("addr") + pl.col("nbytes")))
    opnd = exact_accesses(ops, opnd, access)
    kills = ops.filter(pl.col("name") == Op.SCOPE_EXIT.value).select(
        "op_id", ev=pl.lit(KILL), space=pl.lit("tcm"), mem_pe="pe",
        lo=pl.col("attrs").str.json_path_match("$.lo").cast(pl.Int64),
        hi=pl.col("attrs").str.json_path_match("$.hi").cast(pl.Int64))
    acc = pl.concat([opnd.with_columns(pl.col("ev").cast(pl.Int8)),
                     kills.with_columns(pl.col("ev").cast(pl.Int8))], how="vertical_relaxed")
    acc = acc.join(base, on="op_id").filter(
        (pl.col("kind") != Kind.COMPOSITE.value) & (pl.col("hi") > pl.col("lo")))
    return acc.select("op_id", "pe", "seq", "ev", "space", "mem_pe", "lo", "hi", "unit",
                      t0="t_start_ps", t1="t_end_ps")


def order_unit(ops: pl.DataFrame) -> pl.Series:
    """Per op, the unit whose ``seq`` order is program order: its PE, whose programs run one
    after another (``ahbm-v1``), or, on a PE whose programs interleave (resident programs,
    docs/hardware-model.md), its (PE, program)."""
    span = ops.group_by("pe", "program").agg(lo=pl.col("seq").min(), hi=pl.col("seq").max())
    mixed = (span.sort("pe", "lo")
             .with_columns(before=pl.col("hi").cum_max().shift(1).over("pe"))
             .filter(pl.col("lo") < pl.col("before"))["pe"].unique())
    pe, program = pl.col("pe").cast(pl.Int64), pl.col("program").cast(pl.Int64)
    own = pl.when(pe.is_in(mixed.implode())).then(program + 1).otherwise(0)
    return ops.select(unit=pe * (1 << 32) + own)["unit"]


def segments(acc: pl.DataFrame) -> pl.DataFrame:
    """``acc`` exploded to one row per elementary segment: adds ``seg`` (globally unique per
    memory and byte range) and the segment's own ``seg_lo``/``seg_hi``."""
    mem = acc.select(pl.struct("space", "mem_pe").rank("dense").cast(pl.Int64) - 1)
    k = mem.to_series().to_numpy()
    lo, hi = acc["lo"].to_numpy(), acc["hi"].to_numpy()
    span = int(hi.max()) + 1 if len(hi) else 1
    bounds = np.unique(np.concatenate([k * span + lo, k * span + hi]))
    i0 = np.searchsorted(bounds, k * span + lo)
    i1 = np.searchsorted(bounds, k * span + hi)
    counts = i1 - i0
    total = int(counts.sum())
    limits.require(f"the race detector ({len(counts):,} accesses cut into {total:,} "
                   "segments)", total * BYTES_PER_ACCESS)
    rep = np.repeat(np.arange(len(counts)), counts)
    first = np.cumsum(counts) - counts
    seg = i0[rep] + (np.arange(total) - first[rep])
    base = k[rep] * span
    return acc[rep].with_columns(seg=pl.Series(seg), seg_lo=pl.Series(bounds[seg] - base),
                                 seg_hi=pl.Series(bounds[seg + 1] - base))


def _program_order(seg: pl.DataFrame) -> pl.DataFrame:
    """Per (segment, program-order unit) in program order: the previous write/kill and the
    earliest landing of any later write, for every row."""
    df = seg.sort("seg", "unit", "seq", "ev").with_row_index("pos")
    grp = ("seg", "unit")
    wk = pl.when(pl.col("ev") != READ).then(pl.col("pos"))
    w_end = pl.when(pl.col("ev") == WRITE).then(pl.col("t1"))
    df = df.with_columns(
        prev=wk.shift(1).forward_fill().over(grp),
        next_w_end=w_end.shift(-1).fill_null(np.iinfo(np.int64).max).cum_min(reverse=True)
        .over(grp),
    )
    prev = df.select(prev="pos", p_op="op_id", p_ev="ev", p_t0="t0", p_t1="t1")
    return df.join(prev.with_columns(pl.col("prev").cast(df["prev"].dtype)), on="prev",
                   how="left")


def _program_order_hazards(po: pl.DataFrame) -> pl.DataFrame:
    r, w, k = (pl.col("ev") == READ), (pl.col("ev") == WRITE), (pl.col("ev") == KILL)
    pw, pk = (pl.col("p_ev") == WRITE), (pl.col("p_ev") == KILL)
    rules = [  # (hazard, condition, op, other, t_op, t_other)
        ("raw", r & pw & (pl.col("p_t1") > pl.col("t0")), "op_id", "p_op", "t0", "p_t1"),
        ("dead_read", r & pk, "op_id", "p_op", "t0", "p_t0"),
        ("uninit_read", r & pl.col("prev").is_null() & pl.col("space").is_in(SCRATCH_SPACES),
         "op_id", None, "t0", None),
        ("waw", w & pw & (pl.col("p_t1") > pl.col("t1")), "op_id", "p_op", "t1", "p_t1"),
        ("late_write", k & pw & (pl.col("p_t1") > pl.col("t0")), "op_id", "p_op", "t0", "p_t1"),
    ]
    found = [po.filter(cond).select(
        hazard=pl.lit(name), op_id=op, other_op_id=pl.col(other) if other else pl.lit(None),
        space="space", mem_pe="mem_pe", lo="seg_lo", hi="seg_hi", t_op=t_op,
        t_other=pl.col(t_other) if t_other else pl.lit(None))
        for name, cond, op, other, t_op, t_other in rules]
    # war: some later write on this PE lands before the read completes; name each such write
    late = po.filter(r & (pl.col("next_w_end") < pl.col("t1"))).select(
        "seg", "unit", "seq", "op_id", "space", "mem_pe", "seg_lo", "seg_hi", "t1")
    if late.height:
        writes = po.filter(w).select("seg", "unit", w_seq="seq", other_op_id="op_id",
                                     w_t1="t1")
        found.append(late.join(writes, on=["seg", "unit"])
                     .filter((pl.col("w_seq") > pl.col("seq")) & (pl.col("w_t1") < pl.col("t1")))
                     .select(hazard=pl.lit("war"), op_id="op_id", other_op_id="other_op_id",
                             space="space", mem_pe="mem_pe", lo="seg_lo", hi="seg_hi",
                             t_op="t1", t_other="w_t1"))
    return pl.concat([f.cast(_FINDING) for f in found])


def _cross_pe_hazards(seg: pl.DataFrame) -> pl.DataFrame:
    """Reads with a write from another PE landing strictly inside their (t0, t1) window."""
    reads = seg.filter(pl.col("ev") == READ)
    writes = seg.filter(pl.col("ev") == WRITE)
    empty = pl.DataFrame(schema=_FINDING)
    if not reads.height or not writes.height or seg["pe"].n_unique() < 2:
        return empty
    times = np.unique(np.concatenate([reads["t0"].to_numpy(), reads["t1"].to_numpy(),
                                      writes["t1"].to_numpy()]))
    n_t, n_pe = len(times) + 1, as_int(seg["pe"].max()) + 1

    def rank(col: pl.Series) -> np.ndarray:
        return np.searchsorted(times, col.to_numpy())

    w_seg, w_pe = writes["seg"].to_numpy(), writes["pe"].to_numpy().astype(np.int64)
    w_rank = rank(writes["t1"])
    all_keys = np.sort(w_seg * n_t + w_rank)
    own_keys = np.sort((w_seg * n_pe + w_pe) * n_t + w_rank)
    r_seg, r_pe = reads["seg"].to_numpy(), reads["pe"].to_numpy().astype(np.int64)
    r0, r1 = rank(reads["t0"]), rank(reads["t1"])

    def inside(keys: np.ndarray, base: np.ndarray) -> np.ndarray:
        return (np.searchsorted(keys, base * n_t + r1, "left")
                - np.searchsorted(keys, base * n_t + r0, "right"))

    other = inside(all_keys, r_seg) - inside(own_keys, r_seg * n_pe + r_pe)
    hit = reads.filter(pl.Series(other > 0))
    if not hit.height:
        return empty
    return (hit.join(writes.select("seg", w_pe="pe", other_op_id="op_id", w_t1="t1"), on="seg")
            .filter((pl.col("w_pe") != pl.col("pe")) & (pl.col("w_t1") > pl.col("t0"))
                    & (pl.col("w_t1") < pl.col("t1")))
            .select(hazard=pl.lit("war_xpe"), op_id="op_id", other_op_id="other_op_id",
                    space="space", mem_pe="mem_pe", lo="seg_lo", hi="seg_hi", t_op="t1",
                    t_other="w_t1").cast(_FINDING))


def _latest_in_window(keys: np.ndarray, seg: np.ndarray, n: int, lo: np.ndarray,
                      hi: np.ndarray) -> np.ndarray:
    """Index into ``keys`` (sorted ``seg * (n + 1) + rank``) of the last entry of segment
    ``seg`` with rank in ``[lo, hi)``, or -1."""
    base = seg * (n + 1)
    i0 = np.searchsorted(keys, base + lo, "left")
    i1 = np.searchsorted(keys, base + np.maximum(hi, lo), "left")
    return np.where(i1 > i0, i1 - 1, -1)


def _races_with(p: int, cols: dict[str, np.ndarray], bounds: np.ndarray, ck: Clocks
                ) -> tuple[np.ndarray, np.ndarray]:
    """(row, partner row) of accesses of other PEs racing with an access of PE index ``p``
    (one partner per row and PE). ``cols`` are sorted by (PE index, segment, seq)."""
    lo_p, hi_p = int(bounds[p]), int(bounds[p + 1])
    seq_p, seg_p = cols["seq"][lo_p:hi_p], cols["seg"][lo_p:hi_p]
    uniq, first = np.unique(seq_p, return_index=True)
    n = len(uniq)
    # op_id by seq rank, forced nondecreasing (it is, unless op_id/seq are corrupt)
    op_by_rank = np.maximum.accumulate(cols["op_id"][lo_p:hi_p][first])
    key = seg_p * (n + 1) + np.searchsorted(uniq, seq_p)
    is_w = cols["ev"][lo_p:hi_p] == WRITE
    w_key, w_rows = key[is_w], np.append(np.flatnonzero(is_w), -1)  # [-1] -> -1: none
    rows, partners = [], []
    for q in range(len(bounds) - 1):
        lo_q, hi_q = int(bounds[q]), int(bounds[q + 1])
        if q == p or lo_q == hi_q:
            continue
        seq, seg = cols["seq"][lo_q:hi_q], cols["seg"][lo_q:hi_q]
        lo = np.searchsorted(uniq, ck.known(q, p, seq), "right")  # ranks <= clock
        hi = np.minimum(np.searchsorted(uniq, ck.first_after(p, q, seq), "left"),
                        np.searchsorted(op_by_rank, cols["op_id"][lo_q:hi_q], "left"))
        any_ = _latest_in_window(key, seg, n, lo, hi)
        w = w_rows[_latest_in_window(w_key, seg, n, lo, hi)]
        pick = np.where(cols["ev"][lo_q:hi_q] == WRITE, any_, w)
        hit = np.flatnonzero(pick >= 0)
        rows.append(lo_q + hit)
        partners.append(lo_p + pick[hit])
    return (np.concatenate(rows) if rows else np.zeros(0, np.int64),
            np.concatenate(partners) if partners else np.zeros(0, np.int64))


def _cross_pe_races(seg: pl.DataFrame, ops: pl.DataFrame) -> pl.DataFrame:
    """Access pairs of different PEs on the same bytes, at least one a write, that no chain
    of program order and IPCQ messages orders."""
    acc = seg.filter((pl.col("ev") != KILL) & ~pl.col("space").is_in(PROTOCOL_SPACES)
                     # only segments some write touches and more than one PE accesses
                     & (pl.col("ev") == WRITE).any().over("seg")
                     & (pl.col("pe").n_unique().over("seg") > 1))
    pes = np.unique(acc["pe"].to_numpy()).astype(np.int64)
    if len(pes) < 2:
        return pl.DataFrame(schema=_FINDING)
    ck = clocks(ops, pes)
    acc = acc.with_columns(pe_idx=pl.Series(ck.pe_index(acc["pe"].to_numpy().astype(np.int64)))
                           ).sort("pe_idx", "seg", "seq", "op_id")
    cols = {c: acc[c].to_numpy() for c in ("pe_idx", "seg", "seq", "op_id", "ev")}
    bounds = np.searchsorted(cols["pe_idx"], np.arange(len(ck.pes) + 1))
    pairs = [_races_with(p, cols, bounds, ck) for p in range(len(ck.pes))]
    rows = np.concatenate([r for r, _ in pairs])
    if not len(rows):
        return pl.DataFrame(schema=_FINDING)
    part = acc[np.concatenate([o for _, o in pairs])]
    races = acc[rows].select("op_id", "ev", "space", "mem_pe", lo="seg_lo", hi="seg_hi",
                             t_op="t0").with_columns(other_op_id=part["op_id"],
                                                     o_ev=part["ev"], t_other=part["t0"])
    name = (pl.col("ev").cast(pl.Int32) * 3 + pl.col("o_ev").cast(pl.Int32)).replace_strict(
        {a * 3 + b: hazard for (a, b), hazard in _RACE.items()}, return_dtype=pl.String)
    return races.select(hazard=name, op_id="op_id", other_op_id="other_op_id", space="space",
                        mem_pe="mem_pe", lo="lo", hi="hi", t_op="t_op",
                        t_other="t_other").cast(_FINDING)


#: ops whose HBM addresses come from loaded data: Phase 1 counts their whole tensor
DATA_ADDRESSED = frozenset({Op.GATHER.value, Op.SCATTER.value})


def _data_addressed(row: dict) -> str:
    ops = sorted({f"op {row[i]}" for i, n in (("op_id", "name"), ("other_op_id", "other_name"))
                  if row.get(n) in DATA_ADDRESSED})
    if not ops or not row["hazard"].startswith("race"):
        return ""
    return (f"; {' and '.join(ops)} address the tensor by loaded indices, so Phase 1 counts "
            "all of it: if the indices of the two ops never meet there is no race, which "
            "only the data can show (order them, or accept this finding)")


def hazards(ops: pl.DataFrame, access: AccessTable = EMPTY) -> pl.DataFrame:
    """Every data hazard in an op log: one row per (hazard, op_id, other_op_id) with the
    merged byte range, both ops' ``src`` and a ``message``; sorted by op_id."""
    acc = accesses(ops, access)
    if not acc.height:
        return pl.DataFrame(schema={**_FINDING, "src": pl.String, "other_src": pl.String,
                                    "message": pl.String})
    seg = segments(acc)
    found = pl.concat([_program_order_hazards(_program_order(seg)), _cross_pe_hazards(seg),
                       _cross_pe_races(seg, ops)])
    where = ops.select("op_id", src=pl.col("src").cast(pl.String), pe="pe",
                       name=pl.col("name").cast(pl.String))
    merged = (found.group_by("hazard", "op_id", "other_op_id", "space", "mem_pe",
                             maintain_order=True)
              .agg(pl.col("lo").min(), pl.col("hi").max(), pl.col("t_op").first(),
                   pl.col("t_other").first())
              .sort("op_id", "hazard", "other_op_id", nulls_last=True)
              .join(where, on="op_id", how="left", maintain_order="left")
              .join(where.rename({"op_id": "other_op_id", "src": "other_src", "pe": "other_pe",
                                  "name": "other_name"}),
                    on="other_op_id", how="left", maintain_order="left"))
    messages = [HAZARDS[row["hazard"]].format(op=row["op_id"], other=row["other_op_id"], **{
        k: row[k] for k in ("space", "mem_pe", "lo", "hi", "t_op", "t_other", "src", "pe",
                            "other_src", "other_pe")}) + _data_addressed(row)
        for row in merged.iter_rows(named=True)]
    return merged.drop("pe", "other_pe", "name", "other_name").with_columns(
        message=pl.Series(messages, dtype=pl.String))
