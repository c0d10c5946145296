"""Semantic checks of the IPCQ calls: send, recv, recv_async (driver side: ipcq.py).

A peer is a ring direction (``"next"``, ``"prev"``) or a PE index (docs/adr/0750):
``0 <= dest <`` the PEs the launch uses (program ``p`` runs on PE ``p``), never the
program's own PE.
"""

from __future__ import annotations

import operator
from typing import Any

from kernbench.errors import IpcqError, SpaceError
from kernbench.record.commands import DIRECTIONS, Peer, Recv, RecvAsync, Resolve, Send, Wait
from kernbench.record.handle import TensorHandle
from kernbench.record.lowering.emit import dtype_arg as _dtype
from kernbench.record.lowering.emit import into
from kernbench.record.lowering.emit import prod as _prod
from kernbench.record.lowering.emit import shape_arg as _shape
from kernbench.record.lowering.operands import live as _live
from kernbench.record.machine.context import KernelContext, current
from kernbench.record.source import src_here


def pes_in_use(ctx: KernelContext) -> int:
    """The PEs a launch runs on: program ``p`` on PE ``p % n_pe``."""
    programs = 1
    for g in ctx.grid:
        programs *= g
    return max(1, min(ctx.hw.n_pe, programs))


def check_peer(peer: Any, src: str, ctx: KernelContext, verb: str) -> Peer:
    """``peer`` as the machine takes it: a direction, or a PE index (an ``int``) of another
    PE of the launch; anything else is one line naming the value."""
    if isinstance(peer, str):
        if peer not in DIRECTIONS:
            raise IpcqError(f"unknown IPCQ direction {peer!r}; use 'next', 'prev' or a PE "
                            "index", src)
        return peer
    if isinstance(peer, bool) or not hasattr(type(peer), "__index__"):
        raise IpcqError(f"{verb} names {peer!r} ({type(peer).__name__}): an IPCQ peer is "
                        "'next', 'prev' or a PE index (an int)", src)
    pe = operator.index(peer)
    n = pes_in_use(ctx)
    if not 0 <= pe < n:
        raise IpcqError(f"{verb} names PE {pe}, not a PE of this launch (PEs 0..{n - 1}: "
                        f"n_pe = {ctx.hw.n_pe}, program p runs on PE p)", src)
    if pe == ctx.pe:
        raise IpcqError(f"{verb} names PE {pe}, the program's own PE: a message goes "
                        "between two PEs", src)
    return pe


def send(direction: Peer, x: TensorHandle) -> None:
    """Send ``x`` to ``direction``: the ring neighbour ``"next"`` / ``"prev"``, or the PE of
    that index (routed over the topology); blocks only while its queue is full."""
    ctx = current()
    src = src_here()
    direction = check_peer(direction, src, ctx, "send")
    _live(x, src, "send value")
    if x.space != "tcm":
        raise SpaceError(f"send needs a TCM handle, got {x!r}", src)
    if x.nbytes > ctx.hw.ipcq_slot_bytes:
        raise IpcqError(f"send of {x.nbytes} bytes exceeds the IPCQ slot of "
                        f"{ctx.hw.ipcq_slot_bytes} bytes", src)
    if ctx.driver.unresolved and x.buf.event:
        ctx.issue(Resolve([x.buf]))
    ctx.issue(Send(direction, x, src))


def _recv_buffer(ctx: KernelContext, shape: Any, dtype: Any, out: TensorHandle | None,
                 src: str) -> TensorHandle:
    shape, dt = _shape(shape, src), _dtype(dtype, src)
    if out is not None:
        return into(out, shape, dt, "recv", src)
    nbytes = _prod(shape) * dt.itemsize
    scopes = ctx.scopes
    return TensorHandle(ctx.scratch.alloc(nbytes, scopes[-1] if scopes else None, src), shape, dt)


def _before_overwrite(ctx: KernelContext, dst: TensorHandle, out: TensorHandle | None) -> None:
    """Receiving into an existing buffer waits until nothing else writes or reads it."""
    if out is None:
        return
    buf = dst.buf
    if buf.event:
        ctx.issue(Resolve([buf]))
    ctx.issue(Wait([buf]))  # the machine knows whether it is busy (a no-op if not)


def _receive(request: type, direction: Peer, shape: Any, dtype: Any,
             out: TensorHandle | None) -> TensorHandle:
    ctx = current()
    src = src_here()
    direction = check_peer(direction, src, ctx, "recv")
    dst = _recv_buffer(ctx, shape, dtype, out, src)
    _before_overwrite(ctx, dst, out)
    ctx.issue(request(direction, dst, src))
    return dst


def recv(direction: Peer, shape: Any, dtype: Any, *, out: TensorHandle | None = None
         ) -> TensorHandle:
    """Receive the next message from ``direction`` (blocking): from the ring neighbour
    ``"next"`` / ``"prev"``, or the next one PE ``direction`` sent to this PE by index."""
    return _receive(Recv, direction, shape, dtype, out)


def recv_async(direction: Peer, shape: Any, dtype: Any, *, out: TensorHandle | None = None
               ) -> TensorHandle:
    """Like recv, but returns at once; the handle auto-waits on first use like a lazy load.
    ``out=`` receives into an existing TCM handle (double-buffering persistent buffers)."""
    return _receive(RecvAsync, direction, shape, dtype, out)
