"""Executors of the version-2 math families, thin over the op table's semantics
(``OPS[op].sem``): ternary elementwise (``fma``), scans (``cumsum``), arg-reductions
(``argmax``) and Philox words (``philox``); and the helpers every family's binder shares
(``sem``, ``infer``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

import numpy as np

from kernbench.replay.binding import (
    Bind,
    BindContext,
    Executor,
    ShapeMismatch,
    Step,
    arity,
    check_broadcast,
    elementwise_step,
    need,
    numel,
    reader,
    template,
)
from kernbench.replay.store import Operand
from kernbench.schemas.ops import ARG_REDUCTIONS, OPS, SCANS, TERNARY, Op
from kernbench.schemas.policy import KERNBENCH
from kernbench.schemas.semantics import Semantics

Ins = Sequence[Operand]
Array = Callable[[np.ndarray], np.ndarray]


def sem(op: Op) -> Semantics:
    """The op's semantics object (every op bound here has one)."""
    s = OPS[op].sem
    if s is None:  # pragma: no cover - the table gives every math family one
        raise ShapeMismatch(f"Shape mismatch: {op.value} has no semantics")
    return s


def infer(op: Op, attrs: dict, ins: Ins) -> tuple[int, ...]:
    """The output shape the op's semantics infers for these inputs, or ShapeMismatch."""
    try:
        return sem(op).infer([o.shape for o in ins], [o.dtype for o in ins], attrs,
                             KERNBENCH)[0]
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        raise ShapeMismatch(f"Shape mismatch: {op.value}: {exc}") from None


def reduce_step(fn: Array, read: Callable[[], np.ndarray], shape: tuple[int, ...]) -> Step:
    """A step reducing the input read by ``read`` with ``fn``, in the output's shape."""
    return partial(_reshaped, fn, read, shape)


def _reshaped(fn: Array, read: Callable[[], np.ndarray], shape: tuple[int, ...]
              ) -> np.ndarray:
    return fn(read()).reshape(shape)


def _bind_ternary(op: Op) -> Bind:
    def bind(attrs: dict, ins: Ins, out: Operand | None, ctx: BindContext) -> Step:
        o = arity(ins, out, (1, 2, 3), op.value)
        slots, taken = template(attrs, ins, 3, op.value)
        check_broadcast(ins, o, op.value)
        return elementwise_step(sem(op).evaluator(attrs, KERNBENCH), slots, taken)

    return bind


def _bind_scan(op: Op) -> Bind:
    def bind(attrs: dict, ins: Ins, out: Operand | None, ctx: BindContext) -> Step:
        o = arity(ins, out, (1,), op.value)
        infer(op, attrs, ins)
        need(ins[0].shape == o.shape, f"{op.value} of {list(ins[0].shape)} writes "
             f"{list(o.shape)}")
        return partial(_call, sem(op).evaluator(attrs, KERNBENCH), reader(ins[0]))

    return bind


def _call(fn: Array, read: Callable[[], np.ndarray]) -> np.ndarray:
    return fn(read())


def _bind_arg(op: Op) -> Bind:
    def bind(attrs: dict, ins: Ins, out: Operand | None, ctx: BindContext) -> Step:
        o = arity(ins, out, (1,), op.value)
        shape = infer(op, attrs, ins)  # keepdims only changes the output shape, which is given
        need(int(np.prod(shape)) == numel(o),
             f"{op.value}(axis={attrs.get('axis')}) of {list(ins[0].shape)} writes "
             f"{list(o.shape)}")
        return reduce_step(sem(op).evaluator(attrs, KERNBENCH), reader(ins[0]), o.shape)

    return bind


def _bind_philox(attrs: dict, ins: Ins, out: Operand | None, ctx: BindContext) -> Step:
    """One Philox word of (seed, c0, c1, c2, c3): input handles and ``scalars`` in position
    order, numpy broadcasting (``schemas/philox.py``)."""
    o = arity(ins, out, (1, 2, 3, 4, 5), "philox")
    slots, taken = template(attrs, ins, 5, "philox")
    check_broadcast(ins, o, "philox")
    infer(Op.PHILOX, attrs, ins)
    return elementwise_step(sem(Op.PHILOX).evaluator(attrs, KERNBENCH), slots, taken)


def math_executors() -> dict[Op, Executor]:
    return {
        Op.PHILOX: Executor(_bind_philox),
        **{op: Executor(_bind_ternary(op)) for op in TERNARY},
        **{op: Executor(_bind_scan(op)) for op in SCANS},
        **{op: Executor(_bind_arg(op)) for op in ARG_REDUCTIONS},
    }
