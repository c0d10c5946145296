"""IPCQ: per-direction links between ring neighbours, and the queues at their ends.

A message sent to ``"next"`` lands in the next PE's ``"prev"`` queue (and vice versa). Each
queue holds ``ipcq_depth`` unclaimed messages (credits); a receive (``recv``, or a posted
``recv_async``) claims one and frees its credit. ``send`` blocks only while the receiver's
queue is full (and, under blocking issue, until its source is visible), then hands the
message to its link: the link is busy for ``ceil(nbytes / link_bw)`` from when it is free
and the source visible, and the message is visible ``link_latency`` later. The source
buffer stays pending until the link has read it, so it cannot be overwritten early.

Messages live in the receiver's ``ipcq`` memory space, one slot of ``ipcq_slot_kib`` per
(direction, credit), which is how Phase 2 moves the bytes: ``send`` writes the slot at
arrival, ``recv`` copies it into TCM.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import simpy

from kernbench.errors import IpcqError
from kernbench.record.commands import DIRECTIONS, Cmd, Recv, RecvAsync, Resolve, Send, Sync
from kernbench.record.handle import Buffer, TensorHandle
from kernbench.record.machine.protocol import PE
from kernbench.record.machine.timing import TIMING
from kernbench.schemas.ops import OP

OPPOSITE = {"next": "prev", "prev": "next"}


class Message:
    __slots__ = ("operand", "arrival", "shape", "dtype")

    def __init__(self, operand: TensorHandle, arrival: int) -> None:
        self.operand, self.arrival = operand, arrival
        self.shape, self.dtype = operand.shape, operand.dtype


class Ring:
    """The ring of active PEs: queues, credits and slot counters per (pe, incoming dir)."""

    def __init__(self, env: simpy.Environment, size: int, depth: int, slot_bytes: int) -> None:
        self.env, self.size, self.depth, self.slot_bytes = env, size, depth, slot_bytes
        keys = [(p, d) for p in range(size) for d in DIRECTIONS]
        self.queues = {k: simpy.Store(env) for k in keys}
        self.credits = {k: simpy.Container(env, capacity=depth, init=depth) for k in keys}
        self.sent = {k: 0 for k in keys}

    def neighbour(self, pe: int, direction: str) -> int:
        return (pe + 1) % self.size if direction == "next" else (pe - 1) % self.size

    def slot(self, pe: int, incoming: str) -> int:
        """The ipcq-space address of the next message into (pe, incoming)."""
        k = (pe, incoming)
        n = self.sent[k]
        self.sent[k] = n + 1
        return ((DIRECTIONS.index(incoming) * self.depth) + n % self.depth) * self.slot_bytes


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
    dst = ring.neighbour(pe.index, req.direction)
    incoming = OPPOSITE[req.direction]
    key = (dst, incoming)
    yield ring.credits[key].get(1)  # blocks while the receiver's queue is full
    t_issue = max(ready, int(pe.env.now))
    slot = TensorHandle(Buffer("ipcq", dst, ring.slot(dst, incoming), x.nbytes, None,
                               req.src), x.shape, x.dtype)
    cmd = Cmd(OP.SEND, (x,), slot, x.numel, x.nbytes, (x.nbytes,), req.src,
              attrs=f'{{"dir":"{req.direction}","to":{dst}}}')
    busy, latency = TIMING[OP.SEND](pe, cmd)
    start = pe.links[req.direction].occupy(max(t_issue, visible), busy)
    arrival = start + busy + latency
    ring.queues[key].put(Message(slot, arrival))
    pe.record(cmd, t_issue, start, arrival, busy, t_issue - start_now + pe.take_wait())
    pe.note_access(cmd, arrival)
    if start + busy > x.buf.read_until:  # the link reads the source until start + busy
        x.buf.read_until = start + busy
        pe.pending.append(x.buf)
    pe.now = t_issue


def run_recv(req: Recv, pe: PE) -> Generator[simpy.Event, Any, None]:
    """``tl.recv`` (blocking) and the resolution of a ``tl.recv_async`` handle."""
    t_issue = pe.now if req.t_issue is None else req.t_issue
    if req.event is None:  # blocking recv: match now
        yield from _sync(pe, pe.now)
        msg = yield pe.ring.queues[(pe.index, req.direction)].get()
        t_match = int(pe.env.now)
        pe.ring.credits[(pe.index, req.direction)].put(1)
    else:  # recv_async: the matcher process has (or will have) the message
        yield from _sync(pe, pe.now)
        msg, t_match = yield req.event
    out = req.out
    if msg.shape != out.shape or msg.dtype is not out.dtype:
        raise IpcqError(f"recv from {req.direction!r} expects {list(out.shape)} "
                        f"{out.dtype.name}, the message is {list(msg.shape)} "
                        f"{msg.dtype.name}", req.src)
    cmd = Cmd(OP.RECV, (msg.operand,), out, out.numel, out.nbytes, (out.nbytes,), req.src,
              attrs=f'{{"dir":"{req.direction}"}}')
    visible = max(t_match, msg.arrival, pe.data_ready(cmd))  # async: out's earlier readers
    wait = (max(pe.now, visible) - pe.now) + pe.take_wait() if req.event is None else 0
    pe.record(cmd, t_issue, visible, visible, 0, wait)
    pe.note_access(cmd, visible)
    out.buf.event = None
    if req.event is None:
        pe.now = max(pe.now, visible)
    else:
        out.buf.ready_ps = visible


def matcher(pe: PE, direction: str, event: simpy.Event
            ) -> Generator[simpy.Event, Any, None]:
    """Background half of recv_async: claim the next message; its credit frees at once (a
    posted receive takes the message out of the queue, which only holds unclaimed ones)."""
    key = (pe.index, direction)
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
