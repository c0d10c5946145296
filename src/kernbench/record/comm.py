"""Semantic checks of the IPCQ calls: send, recv, recv_async (driver side: ipcq.py)."""

from __future__ import annotations

from typing import Any

from kernbench.errors import IpcqError, SpaceError
from kernbench.record.context import KernelContext, current
from kernbench.record.handle import TensorHandle
from kernbench.record.ipcq import Recv, RecvAsync, Resolve, Send, check_direction
from kernbench.record.semantics import _dtype, _live, _prod, _shape
from kernbench.record.source import src_here


def send(direction: str, x: TensorHandle) -> None:
    """Send ``x`` to the ring neighbour ``direction``; blocks only while its queue is full."""
    ctx = current()
    src = src_here()
    check_direction(direction, src)
    _live(x, src, "send value")
    if x.space != "tcm":
        raise SpaceError(f"send needs a TCM handle, got {x!r}", src)
    if x.nbytes > ctx.hw.ipcq_slot_bytes:
        raise IpcqError(f"send of {x.nbytes} bytes exceeds the IPCQ slot of "
                        f"{ctx.hw.ipcq_slot_bytes} bytes", src)
    if ctx.driver.unresolved and x.buf.event:
        ctx.issue(Resolve([x.buf]))
    ctx.issue(Send(direction, x, src))


def _recv_buffer(ctx: KernelContext, direction: str, shape: Any, dtype: Any, src: str
                 ) -> TensorHandle:
    check_direction(direction, src)
    shape, dt = _shape(shape, src), _dtype(dtype, src)
    nbytes = _prod(shape) * dt.itemsize
    scopes = ctx.scopes
    return TensorHandle(ctx.scratch.alloc(nbytes, scopes[-1] if scopes else None, src), shape, dt)


def recv(direction: str, shape: Any, dtype: Any) -> TensorHandle:
    """Receive the next message from the ring neighbour ``direction`` (blocking)."""
    ctx = current()
    src = src_here()
    out = _recv_buffer(ctx, direction, shape, dtype, src)
    ctx.issue(Recv(direction, out, src))
    return out


def recv_async(direction: str, shape: Any, dtype: Any) -> TensorHandle:
    """Like recv, but returns at once; the handle auto-waits on first use like a lazy load."""
    ctx = current()
    src = src_here()
    out = _recv_buffer(ctx, direction, shape, dtype, src)
    ctx.issue(RecvAsync(direction, out, src))
    return out
