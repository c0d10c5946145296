"""Decisions on data (ADR-0840): ``if``/``while`` on a value, a ``range`` bound,
``bool()``/``int()``/``float()`` of a value held in TCM.

A kernel that decides on a loaded (or computed-from-loaded) value gets the value Phase 2
will compute for it: the PE machine times a ``guard`` (it waits for its operand), lets every
earlier write be recorded, evaluates the operand's cone (``record/guards``) and logs the
guard row with the value's bits; the recording then follows the path that value selects.
Both front ends call here: ``TensorHandle``'s ``__bool__``/``__index__``/``__int__``/
``__float__`` (bound below) and the Triton front end's values.
"""

from __future__ import annotations

import numpy as np

from kernbench.errors import KernelError, RecordLimitError, SpaceError
from kernbench.record import handle as _handle
from kernbench.record.commands import Cmd
from kernbench.record.handle import TensorHandle
from kernbench.record.lowering.bounds import MAX_OPS_ENV, max_ops
from kernbench.record.lowering.emit import resolve
from kernbench.record.lowering.operands import live
from kernbench.record.machine.context import current
from kernbench.record.source import src_here
from kernbench.schemas import guards
from kernbench.schemas.ops import OP

__all__ = ["decide", "integer", "real", "truth", "value"]


def decide(h: TensorHandle, src: str, what: str = "a decision") -> np.ndarray:
    """The value (storage dtype, one element, flat) of ``h``, the one element a kernel
    decides on at ``src``; the guard row is logged and the path is the value's."""
    ctx = current()
    live(h, src, what)
    if h.buf.space != "tcm":
        raise SpaceError(f"{what} needs a value in TCM, got {h!r}", src)
    if h.numel != 1:
        raise KernelError(f"{what} needs one element; a {list(h.shape)} block holds "
                          f"{h.numel} (decide on a scalar: reduce the block first, as "
                          "Triton requires)", src)
    writer = ctx.driver.writer
    if writer.next_op_id >= max_ops():  # a loop on data counts as it runs
        raise RecordLimitError(f"recording stopped: {writer.next_op_id:,} ops recorded at a "
                               f"decision on data (a loop whose bound comes from data that "
                               f"does not end?), more than {MAX_OPS_ENV}={max_ops():,} "
                               f"allows; set {MAX_OPS_ENV} to raise the bound", src)
    cmd = Cmd(OP.GUARD, (h,), None, 1, 0, (), src)
    if ctx.unresolved:
        resolve(ctx, cmd)
    model, engine, handler = ctx.by_op[OP.GUARD]
    return handler(ctx.driver, cmd, model, engine)


def value(h: TensorHandle, src: str, what: str = "a decision") -> bool | int | float:
    """``decide`` as the Python value of the element (bfloat16 through float32)."""
    v = decide(h, src, what)
    return guards.value(guards.encode(v), h.dtype.name)


def truth(h: TensorHandle) -> bool:
    """``bool(h)``: an ``if``/``while`` on a one-element value."""
    return bool(value(h, src_here(), "an if/while on data"))


def integer(h: TensorHandle) -> int:
    """``int(h)`` and ``range(h)``: an integer (a float truncates, as ``int()`` does)."""
    v = value(h, src_here(), "an int() or a loop bound on data")
    if isinstance(v, float) and not np.isfinite(v):
        raise KernelError(f"int() of {v!r} decided on data", src_here())
    return int(v)


def real(h: TensorHandle) -> float:
    """``float(h)``."""
    return float(value(h, src_here(), "a float() of data"))


_handle.bind_decisions(truth, integer, real)  # TensorHandle's bool/int/float call these
