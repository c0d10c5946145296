"""The command builder every tl call shares: canonical attrs, shape and dtype arguments,
``out=`` buffers, and ``emit`` (allocate the output in scratch, resolve pending receives,
hand the ``Cmd`` to the driver). Errors are KernelErrors naming the kernel line."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from kernbench.errors import DtypeError, ShapeError, SpaceError
from kernbench.record.commands import Cmd, Resolve, new_cmd
from kernbench.record.handle import TensorHandle
from kernbench.record.lowering.operands import live
from kernbench.record.machine.context import KernelContext
from kernbench.schemas import dtypes
from kernbench.schemas.dtypes import DType
from kernbench.schemas.ops import Op

_ATTRS: dict[str, str] = {}


def attrs_json(**kw: Any) -> str:
    """Canonical JSON of op arguments, cached by their repr."""
    key = repr(kw)  # repr, not the items: 2 == 2.0 and True == 1 must stay distinct
    s = _ATTRS.get(key)
    if s is None:
        if len(_ATTRS) > 4096:
            _ATTRS.clear()
        s = _ATTRS[key] = json.dumps(kw, sort_keys=True, separators=(",", ":"))
    return s


def prod(shape: Sequence[int]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def shape_arg(shape: Any, src: str, what: str = "shape") -> tuple[int, ...]:
    if isinstance(shape, int):
        shape = (shape,)
    try:
        out = tuple(int(s) for s in shape)
    except (TypeError, ValueError):
        raise ShapeError(f"{what} {shape!r} is not a tuple of ints", src) from None
    if any(s <= 0 for s in out):
        raise ShapeError(f"{what} {list(out)} has a non-positive dimension", src)
    return out


def dtype_arg(dtype: Any, src: str) -> DType:
    try:
        return dtypes.by_name(dtype)
    except (KeyError, TypeError):
        raise DtypeError(f"unknown dtype {dtype!r}", src) from None


def into(out: Any, shape: tuple[int, ...], dt: DType, what: str, src: str) -> TensorHandle:
    """The ``out=`` buffer a load or receive writes: a live plain TCM handle of that shape."""
    live(out, src, f"{what} out=")
    if out.space != "tcm" or out.transposed:
        raise SpaceError(f"{what} out= must be a plain TCM handle, got {out!r}", src)
    if out.shape != shape or out.dtype is not dt:
        raise ShapeError(f"{what} out= is {list(out.shape)} {out.dtype.name}, the data is "
                         f"{list(shape)} {dt.name}", src)
    return TensorHandle(out.buf, shape, dt)


def resolve(ctx: KernelContext, cmd: Cmd) -> None:
    """Resolve the recv_async handles ``cmd`` touches whose message has not matched yet."""
    pending = [h.buf for h in (*cmd.inputs, cmd.out) if h is not None and h.buf.event]  # type: ignore[union-attr]
    if pending:
        ctx.issue(Resolve(pending))


def issue(ctx: KernelContext, cmd: Cmd) -> None:
    """Hand ``cmd`` to the driver, first resolving recv_async inputs still unmatched."""
    if ctx.unresolved:
        resolve(ctx, cmd)
    ctx.emit(cmd)


def emit(ctx: KernelContext, op: Op, inputs: tuple[TensorHandle, ...], shape: tuple[int, ...],
          dtype: DType, work: tuple[int, ...] | None, src: str, attrs: str = "{}",
          flops: int = 0) -> TensorHandle:
    """Allocate a fresh scratch output, issue the command, return the output handle.
    ``work`` None: ``(elements of the output,)``, an elementwise op's."""
    n = 1
    for d in shape:
        n *= d
    if work is None:
        work = (n,)
    nbytes = n * dtype.itemsize
    scopes = ctx.scopes
    out = TensorHandle(ctx.scratch.alloc(nbytes, scopes[-1] if scopes else None, src),
                       shape, dtype)
    cmd = new_cmd(Cmd, (op, inputs, out, n, nbytes, work, src, flops, attrs))
    if ctx.unresolved:
        resolve(ctx, cmd)
    model, engine, handler = ctx.by_op[op]  # ``ctx.emit(cmd)``, one call shorter
    handler(ctx.driver, cmd, model, engine)
    return out
