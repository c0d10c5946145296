"""Executors of the version-2 math families, derived from the op table: ternary
elementwise (``fma``), scans (``cumsum``) and arg-reductions (``argmax``)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np

from kernbench.replay.binding import (
    Bind,
    Executor,
    arity,
    check_broadcast,
    elementwise_step,
    need,
    numel,
    reader,
    template,
)
from kernbench.schemas.ops import ARG_REDUCTIONS, OPS, SCANS, TERNARY, Op


def _bind_ternary(op: Op) -> Bind:
    def bind(attrs, ins, out, ctx):
        arity(ins, out, (1, 2, 3), op.value)
        slots, taken = template(attrs, ins, 3, op.value)
        check_broadcast(ins, out, op.value)
        return elementwise_step(OPS[op].numpy, slots, taken)

    return bind


def _bind_scan(op: Op) -> Bind:
    ufunc = OPS[op].numpy

    def bind(attrs, ins, out, ctx):
        arity(ins, out, (1,), op.value)
        nd = len(ins[0].shape)
        axis = int(attrs.get("axis", 0))
        need(-nd <= axis < nd, f"{op.value} axis {axis} for {list(ins[0].shape)}")
        need(ins[0].shape == out.shape, f"{op.value} of {list(ins[0].shape)} writes "
             f"{list(out.shape)}")
        return partial(_scan, ufunc, reader(ins[0]), axis, bool(attrs.get("reverse", False)))

    return bind


def _scan(ufunc: np.ufunc, read: Callable[[], np.ndarray], axis: int, reverse: bool
          ) -> np.ndarray:
    x = read()
    if reverse:
        return np.flip(ufunc.accumulate(np.flip(x, axis), axis=axis), axis)
    return ufunc.accumulate(x, axis=axis)


def _bind_arg(op: Op) -> Bind:
    fn = OPS[op].numpy

    def bind(attrs, ins, out, ctx):
        arity(ins, out, (1,), op.value)
        axis = attrs.get("axis")  # keepdims only changes the output shape, which is given
        nd = len(ins[0].shape)
        need(axis is None or -nd <= int(axis) < nd, f"axis {axis} for {list(ins[0].shape)}")
        need(numel(out) == (1 if axis is None else numel(ins[0]) // ins[0].shape[int(axis)]),
             f"{op.value}(axis={axis}) of {list(ins[0].shape)} writes {list(out.shape)}")
        return partial(_arg, fn, reader(ins[0]), None if axis is None else int(axis),
                       out.shape)

    return bind


def _arg(fn: Callable, read: Callable[[], np.ndarray], axis: int | None,
         shape: tuple[int, ...]) -> np.ndarray:
    """numpy's argmax/argmin: the first index of the extreme (Triton's tie rule)."""
    return np.asarray(fn(read(), axis=axis)).astype(np.int32).reshape(shape)


def math_executors() -> dict[Op, Executor]:
    return {
        **{op: Executor(_bind_ternary(op)) for op in TERNARY},
        **{op: Executor(_bind_scan(op)) for op in SCANS},
        **{op: Executor(_bind_arg(op)) for op in ARG_REDUCTIONS},
    }
