"""A PE of the chip: its engines and their queues, its issue port, its slots, and what an op
costs when it starts (its own engine's closed form, then the shared parts it crosses)."""

from __future__ import annotations

import heapq
from typing import Any, cast

from kernbench.record.machine.chip.engines import POLICIES, ChipEngine, InOrder
from kernbench.record.machine.chip.node import NEVER, Node
from kernbench.record.machine.engines import DmaChannel, GemmEngine, LinkEngine, MathEngine
from kernbench.record.machine.timing import models
from kernbench.schemas.ops import ENGINE, Engine, Op
from kernbench.schemas.traffic import TCM_SPACES
from kernbench.trace.hw import HwConfig

#: the engines whose ops wait in a queue (sends, receives, scopes and composite parents
#: wait for nothing but their data)
QUEUED = (Engine.DMA_RD, Engine.DMA_WR, Engine.GEMM, Engine.MATH)
#: the injection queues whose messages cross one link on a ring (a neighbour's)
DIRECT = frozenset({"link.next", "link.prev"})
_NO_ROWS: list[tuple[str, str, int]] = []  # a price that no shared part lengthened (read only)


def _hbm_operand(cmd: Any) -> Any:
    """A DMA's HBM operand (its first, inputs then output), or None."""
    for h in cmd.inputs:
        if h.buf.space == "hbm":
            return h
    out = cmd.out
    return out if out is not None and out.buf.space == "hbm" else None


class ChipPE:
    """One PE: cost models (the closed forms of ``machine/engines.py``), the chip engines
    that queue and arbitrate its ops, the issue port, the slots of its resident programs."""

    def __init__(self, index: int, hw: HwConfig, parts: Any) -> None:
        self.index, self.hw = index, hw
        self.seq = 0
        # the closed-form cost models the timing registry reads (``timing.models``)
        self.dma_rd, self.dma_wr = DmaChannel(hw), DmaChannel(hw)
        self.gemm, self.math = GemmEngine(hw), MathEngine(hw)
        self.links = {"next": LinkEngine(hw), "prev": LinkEngine(hw)}
        policy = POLICIES[hw.engine_arbitration]
        self.engines: dict[Engine, ChipEngine] = {
            e: policy(e.value, index, hw.engine_queue_depth, None) for e in QUEUED}
        self.models = models(cast(Any, self))  # op -> (pe, cmd) -> (busy, latency)
        self.by_op: dict[Any, tuple[Any, Any, Any]] = {}  # op -> (model, engine, handler)
        self.issue_ps = round(hw.issue_ns * 1000)
        self.dispatch_ps = hw.dispatch_cycles * hw.cycle_ps
        self.issue_free = 0  # the issue port takes the next op no earlier than this
        self.issue_resource = f"issue.pe{index}"  # the port as shared.parquet names it
        self.parts = parts  # the chip's shared parts (HBM stack, TCM ports, fabric)
        self.free: list[tuple[int, int]] = []  # the slots nobody holds: (free at, slot)
        self.waiting: list[int] = []  # programs not started, last first
        self.peak = 0
        self.links_out: dict[str, ChipEngine] = {}
        self.ring = hw.topology in ("ring", "bidir_ring")
        # what ``price`` reads per op: the stack, this PE's TCM port, the DMA queues
        self.hbm = parts.hbm
        port = parts.tcm[index] if parts.tcm is not None else None
        self.tcm = port.server if port is not None else None
        self.tcm_resource = port.resource if port is not None else ""
        self.dma = (self.engines[Engine.DMA_RD], self.engines[Engine.DMA_WR])

    def engine_of(self, op: Op) -> ChipEngine | None:
        return self.engines.get(ENGINE[op])

    def take_issue(self, t: int) -> int:
        """The issue port: an op the kernel issues at ``t`` goes out then, or once the port
        is free (one op per ``issue_ns``)."""
        if self.issue_ps:
            if self.issue_free > t:
                t = self.issue_free
            self.issue_free = t + self.issue_ps
        return t

    def price(self, node: Node, t: int) -> tuple[int, int, list[tuple[str, str, int]]]:
        """Starting at ``t``: when ``node``'s engine is free again, when its result is
        visible, and which shared part kept it longer, by how much. Its own cost is the
        engine's closed form; it takes no less than its HBM bytes through the stack and its
        TCM bytes through this PE's port; a message crosses the links of its route."""
        cmd = node.cmd
        if cmd.op is Op.SEND:
            # on a ring, "next" and "prev" are the links to the neighbours themselves; a
            # message to any other PE (by index) is routed
            start, busy, arrival, rows = self.parts.carry(
                self.index, cmd.out.buf.pe, t, cmd.nbytes,
                self.ring and node.engine.name in DIRECT)
            return start + busy, arrival, rows
        busy, latency = node.model(self, cmd)
        done = own = t + busy
        why: tuple[str, str] | None = None
        hbm = self.hbm
        if hbm is not None and node.engine in self.dma:
            h = _hbm_operand(cmd)
            if h is not None:
                work = cmd.work
                end, _, channel = hbm.transfer(t, h.buf.addr,
                                               work[1] if len(work) > 1 else cmd.nbytes)
                if end > done:
                    done, why = end, ("hbm", f"hbm.ch{channel}")
        tcm = self.tcm
        if tcm is not None:
            nbytes = 0  # the operands in TCM, whole buffers (schemas/traffic.py's rule)
            for h in cmd.inputs:
                if h.buf.space in TCM_SPACES:
                    nbytes += h.buf.nbytes
            out = cmd.out
            if out is not None and out.buf.space in TCM_SPACES:
                nbytes += out.buf.nbytes
            if nbytes:
                end = tcm.serve(t, nbytes)
                if end > done:
                    done, why = end, ("tcm", self.tcm_resource)
        if why is None:
            return done, done + latency, _NO_ROWS
        return done, done + latency, [(why[0], why[1], done - own)]

    def link(self, direction: str, dst: int) -> ChipEngine:
        """The in-order injection queue of this PE's messages towards ``direction`` (a ring
        direction, or ``routed``: messages by PE index to a PE that is not a neighbour, each
        to the receiver of its slot): one message at a time, in issue order (as ahbm-v2's
        per-direction link)."""
        e = self.links_out.get(direction)
        if e is None:
            e = self.links_out[direction] = InOrder(f"link.{direction}", self.index, NEVER,
                                                     None)
            e.dst = dst
        return e

    # -- slots ---------------------------------------------------------------------------
    def open_slots(self, k: int, programs: list[int]) -> None:
        self.free = [(0, s) for s in range(k)]
        self.waiting = list(reversed(programs))

    def next_start(self) -> tuple[int, int, int] | None:
        """(program, slot, at) of the next program to start here, or None."""
        if not self.waiting or not self.free:
            return None
        at, slot = heapq.heappop(self.free)
        return self.waiting.pop(), slot, at

    def release(self, slot: int, at: int) -> None:
        heapq.heappush(self.free, (at, slot))
