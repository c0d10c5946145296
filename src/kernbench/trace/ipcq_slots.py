"""The ``ipcq`` memory space of a PE: where the messages sent to it land (docs/adr/0750).

A PE's space is regions of ``ipcq_depth`` slots of ``ipcq_slot_kib`` each: regions 0 and 1
hold the messages from the ``"next"`` and ``"prev"`` directions (the space of a trace that
addresses no PE by index, as before), region ``2 + s`` those PE ``s`` sends by index. So a
space is at most ``(2 + n_pe) * depth * slot`` bytes (528 MiB at 64 PEs and 4 MiB slots),
and replay sizes each PE's space by what the trace uses (``IpcqUse``, measured by the
validator), never by that bound.
"""

from __future__ import annotations

import numpy as np

from kernbench.schemas.dtypes import DTYPES
from kernbench.trace.findings import Findings
from kernbench.trace.opbatch import MAX_VALUE, OpBatch, fmt

_ITEMSIZE = {name: float(d.itemsize) for name, d in DTYPES.items()}


def directions_bytes(depth: int, slot_bytes: int) -> int:
    """The two direction regions: the ipcq space of a PE that gets no message by index."""
    return 2 * depth * slot_bytes


def capacity(n_pe: int, depth: int, slot_bytes: int) -> int:
    """The most bytes a PE's ipcq space may span: both directions and every source PE."""
    return (2 + n_pe) * depth * slot_bytes


class IpcqUse:
    """The validator's rule over ipcq operands: each must lie inside the layout (a
    ``schema`` finding otherwise), and ``extent[pe]`` is the end of the highest one on each
    PE, what replay allocates."""

    def __init__(self, n_pe: int, depth: int, slot_bytes: int) -> None:
        self.cap = capacity(n_pe, depth, slot_bytes)
        self.extent: dict[int, int] = {}

    def add(self, b: OpBatch, found: Findings) -> None:
        o = b.operands
        at = np.flatnonzero(o.space.isin(("ipcq",)) & ~o.pe.null & ~o.addr.null
                            & ~o.dtype.null & ~o.shape.null)
        if not len(at):
            return
        size = o.dtype.take(at).map(lambda v: _ITEMSIZE.get(v, 1.0), np.nan, np.float64)
        with np.errstate(invalid="ignore"):
            end = o.addr.vals[at].astype(np.float64) + o.shape.take(at).product * size
        pe = o.pe.vals[at]
        bad = ~(end <= self.cap) | (o.addr.vals[at] < 0) | (pe < 0) | (pe >= MAX_VALUE)
        hit = np.flatnonzero(bad)
        found.add("schema", b.base + o.row[at[hit]], lambda k: fmt(
            "op {} reads or writes ipcq@pe{} [{}, +{} bytes), outside the PE's ipcq space "
            "({} bytes: 2 + n_pe queues of ipcq_depth slots)", b.op(o.row[at[hit[k]]]),
            o.pe.get(at[hit[k]]), o.addr.get(at[hit[k]]),
            int(end[hit[k]] - o.addr.vals[at[hit[k]]]) if np.isfinite(end[hit[k]]) else "?",
            self.cap))
        ok = np.flatnonzero(~bad)
        pes, at_pe = np.unique(pe[ok], return_inverse=True)
        top = np.zeros(len(pes))
        np.maximum.at(top, at_pe, end[ok])
        for p, e in zip(pes.tolist(), top.tolist(), strict=True):
            self.extent[p] = max(self.extent.get(p, 0), int(e))
