"""An engine of one PE on the chip: the queues its issued ops wait in and the rule that
picks which starts when it is free (``engine_arbitration``, docs/hardware-model.md).

Both policies serve each program's ops in its issue order; they differ in what one
program's waiting op does to the others (SimPy's lesson: "stop at the first request that
cannot be served" against "keep scanning"):

- ``in_order``: one FIFO shared by the PE's resident programs (ahbm-v2): the oldest issued
  op starts once its data are ready, and every op behind it waits, whichever program
  issued it (head-of-line blocking). ``engine_queue_depth`` ops fit in the queue.
- ``ready_first``: one FIFO per resident program (``engine_queue_depth`` each); a free
  engine starts, among the programs' head ops, the one whose data are ready earliest, ties
  by the lower program (how a GPU's warp scheduler hides one program's latency behind
  another's).

An op's readiness is known once every op it waits for is decided (``Node.deps == 0``).
"""

from __future__ import annotations

import heapq
from collections import deque
from typing import Any

from kernbench.record.machine.chip.node import NEVER, Node

#: test-only switch, a deliberately wrong arbitration: under ready_first a free engine starts
#: any queued op of any program once it was issued — out of its program's order and without
#: waiting for its data — which must make a replay fail (tests/record/machine/chip)
OUT_OF_ORDER = False


class ChipEngine:
    """The arbitration base: when the engine frees, its busy time, the programs waiting for
    room in a full queue; ``pick`` (the policy) names the op that starts at ``t``."""

    __slots__ = ("name", "pe", "free", "busy_total", "depth", "at", "waiting", "model", "dst")

    def __init__(self, name: str, pe: int, depth: int, model: Any) -> None:
        self.name, self.pe, self.depth, self.model = name, pe, depth, model
        self.free = 0
        self.busy_total = 0
        self.at = NEVER  # when a decision event for this engine is scheduled (NEVER: none)
        self.waiting: list[Any] = []  # programs waiting for room in one of its queues
        self.dst = -1  # a link queue's destination PE

    def queue_of(self, program: int) -> deque[Node]:
        raise NotImplementedError

    def add(self, node: Node) -> None:
        """``node`` is issued to this engine (its readiness may not be known yet)."""
        raise NotImplementedError

    def ready(self, node: Node) -> int:
        """``node``'s readiness became known (its last dependency was decided): the earliest
        time an op could start here now (``earliest``)."""
        raise NotImplementedError

    def earliest(self) -> int:
        """The earliest time an op could start here (NEVER: no op's readiness is known)."""
        raise NotImplementedError

    def pick(self, t: int) -> Node | None:
        """Take the op that starts at ``t`` out of its queue (None: none is ready by then)."""
        raise NotImplementedError

    def drop(self, program: int) -> None:
        """``program`` ended (its ops have all started): forget its queue, if it has one."""


class InOrder(ChipEngine):
    """One FIFO for every program of the PE: only its oldest op may start."""

    __slots__ = ("queue",)

    def __init__(self, name: str, pe: int, depth: int, model: Any) -> None:
        super().__init__(name, pe, depth, model)
        self.queue: deque[Node] = deque()

    def queue_of(self, program: int) -> deque[Node]:
        return self.queue

    def add(self, node: Node) -> None:
        node.queue = self.queue
        self.queue.append(node)

    def ready(self, node: Node) -> int:
        return self.earliest()

    def earliest(self) -> int:
        q = self.queue
        if not q or q[0].deps:
            return NEVER
        r = q[0].ready
        return r if r > self.free else self.free

    def pick(self, t: int) -> Node | None:
        q = self.queue
        if q and not q[0].deps and q[0].ready <= t:
            return q.popleft()
        return None


class ReadyFirst(ChipEngine):
    """A FIFO per program; of the heads whose readiness is known, the earliest ready (then
    the lower program) starts."""

    __slots__ = ("queues", "heads")

    def __init__(self, name: str, pe: int, depth: int, model: Any) -> None:
        super().__init__(name, pe, depth, model)
        self.queues: dict[int, deque[Node]] = {}
        self.heads: list[tuple[int, int, int, Node]] = []  # (ready, program, op_id, node)

    def queue_of(self, program: int) -> deque[Node]:
        q = self.queues.get(program)
        if q is None:
            q = self.queues[program] = deque()
        return q

    def drop(self, program: int) -> None:
        self.queues.pop(program, None)

    def add(self, node: Node) -> None:
        q = self.queues.get(node.prog.program)
        if q is None:
            q = self.queues[node.prog.program] = deque()
        node.queue = q
        q.append(node)  # a candidate once its readiness is known (``ready``)
        if OUT_OF_ORDER:
            heapq.heappush(self.heads, (node.t_issue, node.prog.program, node.op_id, node))

    def ready(self, node: Node) -> int:
        q = node.queue
        heads = self.heads
        if q and q[0] is node and not OUT_OF_ORDER:
            heapq.heappush(heads, (node.ready, node.prog.program, node.op_id, node))
        if not heads:
            return NEVER
        r = heads[0][0]
        return r if r > self.free else self.free

    def earliest(self) -> int:
        if not self.heads:
            return NEVER
        r = self.heads[0][0]
        return r if r > self.free else self.free

    def pick(self, t: int) -> Node | None:
        heads = self.heads
        if not heads or heads[0][0] > t:
            return None
        node = heapq.heappop(heads)[3]
        q = node.queue
        if OUT_OF_ORDER:
            q.remove(node)
        else:
            q.popleft()
        if q and not q[0].deps and not OUT_OF_ORDER:
            nxt = q[0]
            heapq.heappush(heads, (nxt.ready, nxt.prog.program, nxt.op_id, nxt))
        return node  # an empty queue is kept until its program ends (``drop``)


#: engine_arbitration -> the policy
POLICIES: dict[str, type[ChipEngine]] = {"in_order": InOrder, "ready_first": ReadyFirst}
