"""IPCQ on the chip: messages between PEs, routed over the topology (docs/hardware-model.md).

A ``send`` to ``"next"`` / ``"prev"`` goes to PE ``p + 1`` / ``p - 1`` and lands in its
``"prev"`` / ``"next"`` queue, as on ahbm-v1/v2; on any topology but a ring the message is
routed hop by hop (``trace/topology.py``) and costs what it crosses (the fabric). Each
queue holds ``ipcq_depth`` unclaimed messages: a send waits for a credit (its program
parks), and a claim — a blocking ``recv``, or a posted ``recv_async`` matching — frees one.
The send's row is decided when its source is visible, in time order with every other use
of the links it crosses; a receive's row when the message has arrived and its buffer is free.

A message addressed by PE index (docs/adr/0750) lands in the receiver's queue of its source
PE (credits per (source, destination) pair) and in that queue's slots (after the two
direction regions). To a neighbour on the ring of the PEs in
use it leaves through that direction's injection queue, as ``"next"`` / ``"prev"`` would;
to any other PE through the PE's queue of routed messages (one at a time, in issue order).
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any, cast

from kernbench.errors import IpcqError
from kernbench.record.commands import DIRECTIONS, Cmd, Peer, Recv, RecvAsync, Resolve, Send
from kernbench.record.handle import Buffer, TensorHandle
from kernbench.record.machine.chip.node import Node
from kernbench.record.machine.chip.protocol import ChipLoop
from kernbench.record.machine.ipcq import peer_name, recv_attrs, region
from kernbench.record.machine.resident import UsesIpcq
from kernbench.schemas.ops import OP
from kernbench.trace.topology import neighbour

if TYPE_CHECKING:
    from kernbench.record.machine.chip.program import Prog

OPPOSITE = {"next": "prev", "prev": "next"}


class Message:
    __slots__ = ("slot", "node", "at")

    def __init__(self, slot: TensorHandle, node: Node, at: int) -> None:
        self.slot, self.node, self.at = slot, node, at


class Post:
    """A posted ``recv_async``: the message it matched (None: not yet), when, and the
    program waiting to resolve it."""

    __slots__ = ("req", "msg", "at", "waiter", "posted")

    def __init__(self, req: RecvAsync, posted: int) -> None:
        self.req, self.posted = req, posted
        self.msg: Message | None = None
        self.at = 0
        self.waiter: Prog | None = None


class Queue:
    """The messages into one (PE, incoming direction or source PE) and what waits on them."""

    __slots__ = ("messages", "credits", "senders", "posted", "receivers", "sent")

    def __init__(self, depth: int) -> None:
        self.messages: deque[Message] = deque()
        self.credits = depth
        self.senders: deque[Prog] = deque()  # parked for a credit
        self.posted: deque[Post] = deque()  # recv_async posts not matched yet
        self.receivers: deque[Prog] = deque()  # parked in a blocking recv
        self.sent = 0


class Ipcq:
    """Every queue of the chip, and the request handlers of the programs."""

    def __init__(self, chip: ChipLoop, n_pe: int) -> None:
        self.chip = chip
        self.n = n_pe  # the ring "next" and "prev" name PEs on (set by the loop's run)
        self.depth = chip.hw.ipcq_depth
        self.slot_bytes = chip.hw.ipcq_slot_bytes
        self.queues: dict[tuple[int, Peer], Queue] = {}

    def queue(self, pe: int, incoming: Peer) -> Queue:
        q = self.queues.get((pe, incoming))
        if q is None:
            q = self.queues[(pe, incoming)] = Queue(self.depth)
        return q

    def _claim(self, q: Queue, t: int) -> Message:
        """Take the oldest message: its credit frees at ``t`` (a parked sender goes on)."""
        msg = q.messages.popleft()
        q.credits += 1
        if q.senders:
            self.chip.wake(q.senders.popleft(), t)
        return msg

    def send(self, prog: Prog, req: Send) -> None:
        chip = self.chip
        if chip.alone:
            raise UsesIpcq
        x = req.x
        dst, incoming, link = self.towards(prog.pe, req.direction)
        q = self.queue(dst, incoming)
        if prog.hw.engine_issue == "blocking":  # the source is visible before the send
            pending, end = chip.board.pending(x.buf, prog.program)
            chip.wait_for(prog, pending)
            prog.stall_to(end)
        while not q.credits:  # the receiver's queue is full
            q.senders.append(prog)
            chip.park(prog, "send", req.src)
        q.credits -= 1
        t = prog.cpe.take_issue(prog.clock)
        prog.stall_to(t)
        n = q.sent
        q.sent = n + 1
        addr = (region(incoming) * self.depth + n % self.depth) * self.slot_bytes
        slot = TensorHandle(Buffer("ipcq", dst, addr, x.nbytes, None, req.src), x.shape,
                            x.dtype)
        attrs = f'{{"dir":"{link}","to":{dst}}}' if link else f'{{"to":{dst}}}'
        cmd = Cmd(OP.SEND, (x,), slot, x.numel, x.nbytes, (x.nbytes,), req.src, attrs=attrs)
        engine = prog.cpe.link(link or "routed", dst)
        node = Node(cmd, prog, engine, None, t, prog.take_wait())
        chip.enter(node, prog)
        board = chip.board  # the source is read (RAW); credits order the slot's uses
        node.ready = max(t, board.claim(node, board.extents(
            Cmd(OP.SEND, (x,), None, 0, 0, (), req.src), prog.program)))
        q.messages.append(Message(slot, node, t))
        engine.add(node)
        if not node.deps:
            chip.on_ready(node)
        if q.receivers:
            chip.wake(q.receivers.popleft(), t)
        while q.posted and q.messages:
            self._match(q, q.posted.popleft(), t)
        prog.now += 1
        chip.maybe_yield(prog)

    def towards(self, pe: int, dest: Peer) -> tuple[int, Peer, str | None]:
        """(receiver, its queue, the direction whose injection queue carries the message;
        None: the queue of routed messages)."""
        if isinstance(dest, str):
            return neighbour(self.n, pe, dest), OPPOSITE[dest], dest
        for direction in DIRECTIONS:
            if neighbour(self.n, pe, direction) == dest:
                return dest, pe, direction
        return dest, pe, None

    def _match(self, q: Queue, post: Post, t: int) -> None:
        """A posted recv_async takes the oldest message at ``t``; a program waiting to
        resolve it goes on."""
        post.msg = self._claim(q, t)
        post.at = t
        if post.waiter is not None:
            self.chip.wake(post.waiter, t)
            post.waiter = None

    def recv(self, prog: Prog, req: Recv) -> None:
        chip = self.chip
        if chip.alone:
            raise UsesIpcq
        t_issue = prog.clock
        q = self.queue(prog.pe, req.direction)
        while not q.messages:
            q.receivers.append(prog)
            chip.park(prog, "recv", req.src)
        msg = self._claim(q, prog.clock)
        node = self._received(prog, req.direction, req.out, req.src, msg, t_issue,
                              max(prog.clock, msg.at))
        chip.wait_for(prog, [node])
        prog.now += 1
        chip.maybe_yield(prog)

    def _received(self, prog: Prog, direction: Peer, out: TensorHandle, src: str,
                  msg: Message, t_issue: int, t_match: int) -> Node:
        m = msg.slot
        if m.shape != out.shape or m.dtype is not out.dtype:
            raise IpcqError(f"recv from {peer_name(direction)} expects {list(out.shape)} "
                            f"{out.dtype.name}, the message is {list(m.shape)} "
                            f"{m.dtype.name}", src)
        cmd = Cmd(OP.RECV, (m,), out, out.numel, out.nbytes, (out.nbytes,), src,
                  attrs=recv_attrs(direction))
        chip = self.chip
        node = Node(cmd, prog, None, None, t_issue, prog.take_wait())
        chip.enter(node, prog)
        board = chip.board  # its buffer is free (WAR, WAW); its message has arrived (RAW)
        node.ready = max(t_match, board.claim(node, board.extents(
            Cmd(OP.RECV, (), out, 0, 0, (), src), prog.program)))
        sent = msg.node
        if sent.done:
            node.ready = max(node.ready, sent.end)
        else:
            sent.after.append(node)
            node.deps += 1
        out.buf.event = None
        if not node.deps:
            chip.on_ready(node)
        return node

    def recv_async(self, prog: Prog, req: RecvAsync) -> None:
        if self.chip.alone:
            raise UsesIpcq
        q = self.queue(prog.pe, req.direction)
        post = Post(req, prog.clock)
        req.out.buf.event = cast(Any, post)
        prog.unresolved.append(req.out.buf)
        if q.messages and not q.posted:
            self._match(q, post, prog.clock)
        else:
            q.posted.append(post)

    def resolve(self, prog: Prog, req: Resolve) -> None:
        for buf in req.bufs:
            post = buf.event
            if type(post) is not Post:
                continue
            r = post.req
            while post.msg is None:  # not matched yet: wait for the message
                post.waiter = prog
                self.chip.park(prog, "wait", r.src)
            self._received(prog, r.direction, r.out, r.src, post.msg, post.posted, post.at)
            prog.now += 1
        prog.unresolved[:] = [b for b in prog.unresolved if b.event]


def handlers(ipcq: Ipcq) -> dict[type, Any]:
    """The chip's handler of each IPCQ request type."""
    return {Send: ipcq.send, Recv: ipcq.recv, RecvAsync: ipcq.recv_async,
            Resolve: ipcq.resolve}
