"""Cross-PE order from the op log alone: vector clocks over IPCQ ``send`` -> ``recv`` and
over atomics.

Within a PE, ops are ordered by ``seq`` (programs on one PE run one after another). Across
PEs the order is a message: everything a PE did up to a ``send`` happens before
everything the receiver does from the matching ``recv`` on; and an atomic, which is acq_rel
(Triton's default ``sem``, ADR-0841): everything before an atomic happens before everything
after the next atomic on overlapping bytes in the memory's order (``t_start_ps``, then
op_id), as a lock's release happens before the next acquire. A send writes an ``ipcq`` slot
of the receiver (operand ``(ipcq, receiver, slot)``) and the receive reads it, so the k-th
send into a slot matches the k-th receive from it (in op_id order). A ``recv_async`` row
is logged where the kernel waits for it, so program order after a recv row is after the
message arrived.

``clocks(ops)`` gives, for every sync op (send or recv), a vector clock: per PE, the largest
``seq`` of that PE known to happen before it (``-1``: nothing). An op at ``(pe q, seq s)``
knows the clock of the last sync op on ``q`` with ``seq <= s``. Then for ops ``A`` on ``p``
and ``B`` on ``q != p``: ``A`` happens before ``B`` iff ``seq(A) <= clock_B[p]``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from kernbench.analyze.frames import operands
from kernbench.schemas.ops import ATOMICS, Op

NONE = -1


@dataclass(frozen=True)
class Clocks:
    """Vector clocks of the sync ops. ``pes``: the distinct PE ids (column order of
    ``vc``); per PE index ``i``: ``seqs[i]`` the sync ops' seq (ascending) and ``vc[i]`` their
    clocks (one row each, every column nondecreasing down the rows)."""

    pes: np.ndarray
    seqs: list[np.ndarray]
    vc: list[np.ndarray]

    def pe_index(self, pe: np.ndarray) -> np.ndarray:
        """Column index of each PE id (every id must be in ``pes``)."""
        return np.searchsorted(self.pes, pe)

    def known(self, q: int, p: int, seq: np.ndarray) -> np.ndarray:
        """Per ``seq`` on PE index ``q``: the largest seq of PE index ``p`` that happens
        before it (``NONE``: none)."""
        pos = np.searchsorted(self.seqs[q], seq, "right") - 1
        return np.concatenate(([NONE], self.vc[q][:, p]))[pos + 1]

    def first_after(self, p: int, q: int, seq: np.ndarray) -> np.ndarray:
        """Per ``seq`` on PE index ``q``: the smallest seq on PE index ``p`` from which on
        every op of ``p`` happens after it (int64 max if none)."""
        col = self.vc[p][:, q]
        pos = np.searchsorted(col, seq, "left")
        ext = np.append(self.seqs[p], np.iinfo(np.int64).max)
        return ext[pos]


def _matches(ops: pl.DataFrame) -> pl.DataFrame:
    """Sync ops: op_id, pe, seq, and ``match`` (the op_id of a recv's send, else null)."""
    names = [Op.SEND.value, Op.RECV.value]
    sync = ops.filter(pl.col("name").is_in(names)).select("op_id", "pe", "seq", "name")
    if not sync.height:
        return sync.with_columns(match=pl.lit(None, pl.Int64))
    slots = (operands(ops.filter(pl.col("name").is_in(names))).collect()
             .filter(pl.col("space") == "ipcq")
             .join(sync.select("op_id", "name"), on="op_id")
             .filter(((pl.col("name") == Op.SEND.value) & (pl.col("role") == "out"))
                     | ((pl.col("name") == Op.RECV.value) & (pl.col("role") == "in")))
             .unique(["op_id"], keep="first", maintain_order=True)
             .sort("op_id")
             .with_columns(k=pl.int_range(pl.len()).over("name", "mem_pe", "addr")))
    sends = slots.filter(pl.col("name") == Op.SEND.value).select("mem_pe", "addr", "k",
                                                                  match="op_id")
    recvs = slots.filter(pl.col("name") == Op.RECV.value).join(
        sends, on=["mem_pe", "addr", "k"], how="left").select("op_id", "match")
    return sync.join(recvs, on="op_id", how="left").sort("pe", "seq", "op_id")


def _atomic_matches(ops: pl.DataFrame) -> pl.DataFrame:
    """Atomics as sync ops: op_id, pe, seq, name, and ``match``, the latest atomic before it
    in the memory's order whose HBM bytes overlap its own (null: none)."""
    names = [op.value for op in ATOMICS]
    atoms = ops.filter(pl.col("name").is_in(names))
    cols = ("op_id", "pe", "seq", "name")
    if not atoms.height:
        return atoms.select(cols).with_columns(match=pl.lit(None, pl.Int64))
    hbm = (operands(atoms).collect().filter((pl.col("role") == "in") & (pl.col("idx") == 0))
           .select("op_id", "mem_pe", lo="addr", hi=pl.col("addr") + pl.col("nbytes")))
    run = (atoms.select(*cols, "t_start_ps").join(hbm, on="op_id", how="left")
           .sort("t_start_ps", "op_id"))
    last: dict[tuple[int, int, int], tuple[int, int]] = {}  # byte range -> (rank, op_id)
    match: list[int | None] = []
    for rank, (pe_mem, lo, hi, op_id) in enumerate(run.select(
            "mem_pe", "lo", "hi", "op_id").iter_rows()):
        best = None
        for (m, a, b), (r, o) in last.items():
            if m == pe_mem and a < hi and lo < b and (best is None or r > best[0]):
                best = (r, o)
        match.append(None if best is None else best[1])
        last[(pe_mem, lo, hi)] = (rank, op_id)
    return run.select(cols).with_columns(match=pl.Series(match, dtype=pl.Int64))


def clocks(ops: pl.DataFrame, pes: np.ndarray) -> Clocks:
    """Vector clocks of every send/recv and atomic in ``ops``; ``pes`` the sorted PE ids to
    cover (the PEs of every sync op are added)."""
    sync = pl.concat([_matches(ops), _atomic_matches(ops)]).sort("pe", "seq", "op_id")
    pes = np.union1d(pes, sync["pe"].to_numpy()).astype(np.int64)
    n_pe, n = len(pes), sync.height
    pe_i = np.searchsorted(pes, sync["pe"].to_numpy())
    seq = sync["seq"].to_numpy().astype(np.int64)
    op_ids = sync["op_id"].to_numpy()
    row_of = {int(o): i for i, o in enumerate(op_ids)}
    match = [row_of.get(m, NONE) if m is not None else NONE for m in sync["match"].to_list()]
    vc = np.full((n, n_pe), NONE, np.int64)
    done = np.zeros(n, np.bool_)
    # rows are sorted by (pe, seq): each PE's sync ops are one contiguous run
    starts = np.searchsorted(pe_i, np.arange(n_pe + 1))
    ptr = starts[:-1].copy()
    progressed = True
    while (ptr < starts[1:]).any():
        if not progressed:  # a cycle (only in a corrupt log): drop the first waiting edge
            p = int(np.argmax(ptr < starts[1:]))
            match[ptr[p]] = NONE
        progressed = False
        for p in range(n_pe):
            i, end = int(ptr[p]), int(starts[p + 1])
            while i < end:
                m = match[i]
                if m != NONE and not done[m]:
                    break
                row = vc[i - 1].copy() if i > starts[p] else vc[i]
                if m != NONE:
                    np.maximum(row, vc[m], out=row)
                row[p] = seq[i]
                vc[i], done[i] = row, True
                i += 1
                progressed = True
            ptr[p] = i
    return Clocks(pes, [seq[starts[p]:starts[p + 1]] for p in range(n_pe)],
                  [vc[starts[p]:starts[p + 1]] for p in range(n_pe)])
