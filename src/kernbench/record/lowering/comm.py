"""Semantic checks of the IPCQ calls: send, recv, recv_async (driver side: ipcq.py)."""

from __future__ import annotations

from typing import Any

from kernbench.errors import IpcqError, SpaceError
from kernbench.record.commands import DIRECTIONS, Recv, RecvAsync, Resolve, Send, Wait
from kernbench.record.handle import TensorHandle
from kernbench.record.lowering.emit import dtype_arg as _dtype
from kernbench.record.lowering.emit import into
from kernbench.record.lowering.emit import prod as _prod
from kernbench.record.lowering.emit import shape_arg as _shape
from kernbench.record.lowering.operands import live as _live
from kernbench.record.machine.context import KernelContext, current
from kernbench.record.source import src_here


def check_direction(direction: Any, src: str) -> str:
    if direction not in DIRECTIONS:
        raise IpcqError(f"unknown IPCQ direction {direction!r}; use 'next' or 'prev'", src)
    return direction


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


def _recv_buffer(ctx: KernelContext, direction: str, shape: Any, dtype: Any,
                 out: TensorHandle | None, src: str) -> TensorHandle:
    check_direction(direction, src)
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


def _receive(request: type, direction: str, shape: Any, dtype: Any,
             out: TensorHandle | None) -> TensorHandle:
    ctx = current()
    src = src_here()
    dst = _recv_buffer(ctx, direction, shape, dtype, out, src)
    _before_overwrite(ctx, dst, out)
    ctx.issue(request(direction, dst, src))
    return dst


def recv(direction: str, shape: Any, dtype: Any, *, out: TensorHandle | None = None
         ) -> TensorHandle:
    """Receive the next message from the ring neighbour ``direction`` (blocking)."""
    return _receive(Recv, direction, shape, dtype, out)


def recv_async(direction: str, shape: Any, dtype: Any, *, out: TensorHandle | None = None
               ) -> TensorHandle:
    """Like recv, but returns at once; the handle auto-waits on first use like a lazy load.
    ``out=`` receives into an existing TCM handle (double-buffering persistent buffers)."""
    return _receive(RecvAsync, direction, shape, dtype, out)
