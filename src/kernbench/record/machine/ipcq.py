"""IPCQ: per-direction links between ring neighbours, and the queues at their ends.

A message sent to ``"next"`` lands in the next PE's ``"prev"`` queue (and vice versa). Each
queue holds ``ipcq_depth`` unclaimed messages (credits); a receive (``recv``, or a posted
``recv_async``) claims one and frees its credit. ``send`` blocks only while the receiver's
queue is full (and, under blocking issue, until its source is visible), then hands the
message to its link: the link is busy for ``ceil(nbytes / link_bw)`` from when it is free
and the source visible, and the message is visible ``link_latency`` later. The source
buffer stays pending until the link has read it, so it cannot be overwritten early.

A message addressed by PE index (docs/adr/0750) lands in the receiver's queue of its source
PE, with credits of its own. To a ring neighbour it goes over that direction's link exactly
as ``"next"`` / ``"prev"``; to any other PE of the ring it is routed hop by hop over the
``next`` links (``trace/topology.route`` of a ``ring``): the PE
injects its routed messages one at a time, in issue order; every link of the route serves
one from when it is injected (its source visible), in the order the sends reach them, and it
arrives ``h * link_latency`` after the slowest link has carried it. A send's row holds its
injection (per direction, and one for routed messages) from when it takes the message until
its last link is done, as on the chip (``machine/chip/ipcq.py``): with no routed traffic a
direction's injection is its link, so direction sends are timed as they always were.

Messages live in the receiver's ``ipcq`` memory space, one slot of ``ipcq_slot_kib`` per
(queue, credit): the two direction queues first, then the queue of each source PE
(``slot``), which is how Phase 2 moves the bytes: ``send`` writes the slot at arrival,
``recv`` copies it into TCM.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import simpy

from kernbench.errors import IpcqError
from kernbench.record.commands import DIRECTIONS, Cmd, Peer, Recv, RecvAsync, Resolve, Send, Sync
from kernbench.record.handle import Buffer, TensorHandle
from kernbench.record.machine.engines import LinkEngine
from kernbench.record.machine.protocol import PE
from kernbench.record.machine.timing import TIMING
from kernbench.schemas.ops import OP
from kernbench.trace.topology import route

OPPOSITE = {"next": "prev", "prev": "next"}


class Message:
    __slots__ = ("operand", "arrival", "shape", "dtype")

    def __init__(self, operand: TensorHandle, arrival: int) -> None:
        self.operand, self.arrival = operand, arrival
        self.shape, self.dtype = operand.shape, operand.dtype


def region(incoming: Peer) -> int:
    """The receiver's slot region of a queue: 0 and 1 the directions, ``2 + s`` the messages
    PE ``s`` sends by index (docs/adr/0750)."""
    return DIRECTIONS.index(incoming) if isinstance(incoming, str) else 2 + incoming


class Ring:
    """The ring of active PEs: queues, credits and slot counters per (pe, incoming), where
    ``incoming`` is a direction or, for messages sent by PE index, the source PE."""

    def __init__(self, env: simpy.Environment, size: int, depth: int, slot_bytes: int) -> None:
        self.env, self.size, self.depth, self.slot_bytes = env, size, depth, slot_bytes
        keys = [(p, d) for p in range(size) for d in DIRECTIONS]
        self.queues: dict[tuple[int, Peer], simpy.Store] = {k: simpy.Store(env) for k in keys}
        self.credits: dict[tuple[int, Peer], simpy.Container] = {
            k: simpy.Container(env, capacity=depth, init=depth) for k in keys}
        self.sent: dict[tuple[int, Peer], int] = {k: 0 for k in keys}
        #: each PE's links by direction (the drivers'), for messages routed across PEs
        self.links: dict[int, dict[str, LinkEngine]] = {}
        #: when each (PE, direction or "routed") injection is free
        self.injected: dict[tuple[int, str], int] = {}

    def neighbour(self, pe: int, direction: str) -> int:
        return (pe + 1) % self.size if direction == "next" else (pe - 1) % self.size

    def key(self, pe: int, incoming: Peer) -> tuple[int, Peer]:
        """The queue (pe, incoming), made on first use for a source PE."""
        k = (pe, incoming)
        if k not in self.queues:
            self.queues[k] = simpy.Store(self.env)
            self.credits[k] = simpy.Container(self.env, capacity=self.depth, init=self.depth)
            self.sent[k] = 0
        return k

    def slot(self, pe: int, incoming: Peer) -> int:
        """The ipcq-space address of the next message into (pe, incoming)."""
        k = self.key(pe, incoming)
        n = self.sent[k]
        self.sent[k] = n + 1
        return (region(incoming) * self.depth + n % self.depth) * self.slot_bytes

    def towards(self, pe: int, dest: Peer) -> tuple[int, Peer, str | None]:
        """(receiver, its queue, the direction whose link carries it; None: routed)."""
        if isinstance(dest, str):
            return self.neighbour(pe, dest), OPPOSITE[dest], dest
        for direction in DIRECTIONS:  # a neighbour: exactly that direction's link
            if self.neighbour(pe, direction) == dest:
                return dest, pe, direction
        return dest, pe, None

    def carry(self, pe: int, dest: int, link: str | None, ready: int, busy: int
              ) -> tuple[int, int, int]:
        """A message from ``pe`` to ``dest`` over the ``link`` direction (None: routed), its
        source visible at ``ready``: (when ``pe`` injects it, when the slowest link of its
        route is done with it, hops)."""
        key = (pe, link or "routed")
        t = max(ready, self.injected.get(key, 0))
        # a direction's own link, or the "next" links of the one-way route
        path = ((pe, dest),) if link is not None else route("ring", self.size, pe, dest)
        end = max(self.links[a][link or "next"].occupy(t, busy) for a, _ in path) + busy
        self.injected[key] = end
        return t, end, len(path)


def _sync(pe: PE, t: int) -> Generator[simpy.Event, Any, None]:
    if t > pe.env.now:
        yield pe.env.timeout(t - pe.env.now)


def run_send(req: Send, pe: PE) -> Generator[simpy.Event, Any, None]:
    """``tl.send``: wait for a credit, occupy the link, queue the message. Blocking issue
    first waits for the source to be visible; ``async`` issue does not: the link starts
    reading it once it is (the scoreboard's RAW edge), and later writers of the source wait
    for the send (its WAR edge)."""
    ring, x = pe.ring, req.x
    start_now = pe.now
    visible = max(x.buf.ready_ps, pe.data_ready(Cmd(OP.SEND, (x,), None, 0, 0, (), req.src)))
    ready = start_now if pe.hw.engine_issue == "async" else max(start_now, visible)
    yield from _sync(pe, ready)
    dst, incoming, link = ring.towards(pe.index, req.direction)
    key = ring.key(dst, incoming)
    yield ring.credits[key].get(1)  # blocks while the receiver's queue is full
    t_issue = max(ready, int(pe.env.now))
    slot = TensorHandle(Buffer("ipcq", dst, ring.slot(dst, incoming), x.nbytes, None,
                               req.src), x.shape, x.dtype)
    attrs = f'{{"dir":"{link}","to":{dst}}}' if link else f'{{"to":{dst}}}'
    cmd = Cmd(OP.SEND, (x,), slot, x.numel, x.nbytes, (x.nbytes,), req.src, attrs=attrs)
    busy, latency = TIMING[OP.SEND](pe, cmd)
    start, end, hops = ring.carry(pe.index, dst, link, max(t_issue, visible), busy)
    arrival = end + hops * latency
    ring.queues[key].put(Message(slot, arrival))
    pe.record(cmd, t_issue, start, arrival, end - start, t_issue - start_now + pe.take_wait())
    pe.note_access(cmd, arrival)
    if end > x.buf.read_until:  # the link reads the source until end
        x.buf.read_until = end
        pe.pending.append(x.buf)
    pe.now = t_issue


def run_recv(req: Recv, pe: PE) -> Generator[simpy.Event, Any, None]:
    """``tl.recv`` (blocking) and the resolution of a ``tl.recv_async`` handle."""
    t_issue = pe.now if req.t_issue is None else req.t_issue
    if req.event is None:  # blocking recv: match now
        yield from _sync(pe, pe.now)
        key = pe.ring.key(pe.index, req.direction)
        msg = yield pe.ring.queues[key].get()
        t_match = int(pe.env.now)
        pe.ring.credits[key].put(1)
    else:  # recv_async: the matcher process has (or will have) the message
        yield from _sync(pe, pe.now)
        msg, t_match = yield req.event
    out = req.out
    if msg.shape != out.shape or msg.dtype is not out.dtype:
        raise IpcqError(f"recv from {peer_name(req.direction)} expects {list(out.shape)} "
                        f"{out.dtype.name}, the message is {list(msg.shape)} "
                        f"{msg.dtype.name}", req.src)
    cmd = Cmd(OP.RECV, (msg.operand,), out, out.numel, out.nbytes, (out.nbytes,), req.src,
              attrs=recv_attrs(req.direction))
    visible = max(t_match, msg.arrival, pe.data_ready(cmd))  # async: out's earlier readers
    wait = (max(pe.now, visible) - pe.now) + pe.take_wait() if req.event is None else 0
    pe.record(cmd, t_issue, visible, visible, 0, wait)
    pe.note_access(cmd, visible)
    out.buf.event = None
    if req.event is None:
        pe.now = max(pe.now, visible)
    else:
        out.buf.ready_ps = visible


def peer_name(peer: Peer) -> str:
    """A peer as an error message names it: ``'next'``, ``PE 3``."""
    return repr(peer) if isinstance(peer, str) else f"PE {peer}"


def recv_attrs(peer: Peer) -> str:
    """A recv row's attrs: ``dir`` for a direction, ``from`` for a source PE."""
    return f'{{"dir":"{peer}"}}' if isinstance(peer, str) else f'{{"from":{peer}}}'


def matcher(pe: PE, direction: Peer, event: simpy.Event
            ) -> Generator[simpy.Event, Any, None]:
    """Background half of recv_async: claim the next message; its credit frees at once (a
    posted receive takes the message out of the queue, which only holds unclaimed ones)."""
    key = pe.ring.key(pe.index, direction)
    msg = yield pe.ring.queues[key].get()
    event.succeed((msg, int(pe.env.now)))
    pe.ring.credits[key].put(1)


def run_recv_async(req: RecvAsync, pe: PE) -> Generator[simpy.Event, Any, None]:
    """``tl.recv_async``: start the background matcher; the handle stays pending."""
    yield from _sync(pe, pe.now)
    event = pe.env.event()
    pe.env.process(matcher(pe, req.direction, event))
    req.out.buf.event = Recv(req.direction, req.out, req.src, pe.now, event)  # type: ignore[assignment]
    pe.unresolved.append(req.out.buf)


def run_resolve(req: Resolve, pe: PE) -> Generator[simpy.Event, Any, None]:
    """Auto-wait on recv_async handles: emit their recv rows once their messages match."""
    for buf in req.bufs:
        if buf.event is not None:
            yield from run_recv(buf.event, pe)
            pe.pending.append(buf)
    pe.unresolved[:] = [b for b in pe.unresolved if b.event is not None]


def run_sync(req: Sync, pe: PE) -> Generator[simpy.Event, Any, None]:
    """A guard's synchronisation (``record/machine/guard.py``): SimPy's clock reaches the
    guard's time, so every other PE has issued everything before it (each PE runs ahead of
    SimPy only until it next waits in SimPy, and then at a clock no earlier than SimPy's).
    Always a timeout, even of 0: the processes due at the same time run first."""
    yield pe.env.timeout(max(0, req.t - pe.env.now))


#: the driver's handler of each request type (pe.PE.process dispatches by type)
RUN: dict[type, Callable[[Any, PE], Generator[simpy.Event, Any, None]]] = {
    Send: run_send, Recv: run_recv, RecvAsync: run_recv_async, Resolve: run_resolve,
    Sync: run_sync}
