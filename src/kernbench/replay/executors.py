"""The numpy executor: one binder per op family, thin over the op table's semantics.

``EXECUTORS[op]`` is an ``Executor`` whose ``bind(attrs, ins, out, ctx)`` runs once per op
at decode time: it checks that the operands fit the op (``ShapeMismatch`` otherwise) and
returns a zero-argument *step* closed over the live numpy views of the inputs and the op's
evaluator (``OPS[op].sem.evaluator(attrs, KERNBENCH)``, ``schemas/semantics.py``: the one
definition of each op's semantics; docs/adr/0003-one-op-table.md). The engine calls the
step at the op's ``t_start_ps``; the step returns the value to write into the output
operand (or None). A step may return a view of memory or a value of another dtype: the
engine converts/snapshots it to the output dtype before the write (that conversion is the
policy's store, ``cast``'s and ``dma_write``'s semantics). Floats are computed in float32;
GEMMs accumulate in float32. See docs/trace-format.md for the table this implements.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np

from kernbench.errors import PathDivergence
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
    nothing,
    numel,
    reader,
    same,
    template,
    upcast,
)
from kernbench.replay.math_binders import infer, math_executors, reduce_step, sem
from kernbench.replay.memory_binders import memory_executors
from kernbench.replay.store import NP_DTYPES, UNPLACED, Operand
from kernbench.schemas import given, guards, ops
from kernbench.schemas.ops import Op
from kernbench.schemas.policy import KERNBENCH
from kernbench.schemas.rules import INFERRED

__all__ = ["EXECUTORS", "BindContext", "Executor", "ShapeMismatch"]

Ins = Sequence[Operand]


def _bind_elementwise(op: Op, n_in: tuple[int, ...], n_args: int) -> Bind:
    """binary (1-2 inputs), where (the condition an input), unary: the evaluator over the
    argument slots (inputs and the row's scalars), numpy broadcasting."""
    def bind(attrs: dict, ins: Ins, out: Operand | None, ctx: BindContext) -> Step:
        o = arity(ins, out, n_in, op.value)
        slots, taken = template(attrs, ins, n_args, op.value)
        if op is Op.WHERE:
            need(not taken[0], "where's condition must be an input")
        if n_args == 1:
            need(ins[0].shape == o.shape,
                 f"{op.value} of {list(ins[0].shape)} writes {list(o.shape)}")
        else:
            check_broadcast(ins, o, op.value)
        return elementwise_step(sem(op).evaluator(attrs, KERNBENCH), slots, taken)

    return bind


def _bind_convert(name: str) -> Bind:
    """cast, dma_write: the value itself; the engine's write converts it to the output dtype.
    A bitcast (``attrs["bitcast"]``) is the input's bytes read as the output dtype."""
    def bind(attrs: dict, ins: Ins, out: Operand | None, ctx: BindContext) -> Step:
        o = arity(ins, out, (1,), name)
        if numel(ins[0]) != numel(o):
            need(False, f"{name} of {list(ins[0].shape)} writes {list(o.shape)}")
        v = _view(ins[0])
        if attrs.get("bitcast"):
            need(ins[0].nbytes == o.nbytes, f"bitcast of {ins[0].dtype} to {o.dtype} changes "
                 "the bit width")
            return partial(_reinterpret, v, NP_DTYPES[o.dtype], o.shape)
        return partial(same, v) if ins[0].shape == o.shape else partial(v.reshape, o.shape)

    return bind


def _bind_copy(name: str) -> Bind:
    """dma_read, copy, send, recv: the value (same shape) or the bytes as the output operand."""
    def bind(attrs: dict, ins: Ins, out: Operand | None, ctx: BindContext) -> Step:
        o = arity(ins, out, (1,), name)
        src = ins[0]
        if src.nbytes != o.nbytes:
            need(False, f"{name} reads {src.nbytes} bytes ({list(src.shape)} {src.dtype}), "
                         f"output holds {o.nbytes} bytes")
        v = _view(src)
        if src.dtype == o.dtype:
            return partial(same, v) if src.shape == o.shape else partial(v.reshape, o.shape)
        return partial(_reinterpret, v, NP_DTYPES[o.dtype], o.shape)

    return bind


def _view(o: Operand) -> np.ndarray:
    """The operand's live view (placed before ``bind`` runs; an unplaced one has failed)."""
    if o.view is UNPLACED:
        raise ShapeMismatch(f"Shape mismatch: operand {o.space}:{o.addr} is not placed")
    return o.view


def _reinterpret(v: np.ndarray, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    return np.ascontiguousarray(v).view(np.uint8).view(dtype).reshape(shape)


def _bind_reduce(op: Op) -> Bind:
    def bind(attrs: dict, ins: Ins, out: Operand | None, ctx: BindContext) -> Step:
        o = arity(ins, out, (1,), op.value)
        shape = infer(op, attrs, ins)
        need(int(np.prod(shape)) == numel(o),
             f"{op.value}(axis={attrs.get('axis')}) of {list(ins[0].shape)} writes "
             f"{list(o.shape)}")
        return reduce_step(sem(op).evaluator(attrs, KERNBENCH), reader(ins[0]), o.shape)

    return bind


def _bind_softmax(attrs: dict, ins: Ins, out: Operand | None, ctx: BindContext) -> Step:
    o = arity(ins, out, (1,), "softmax")
    need(ins[0].shape == o.shape, f"softmax of {list(ins[0].shape)} writes {list(o.shape)}")
    infer(Op.SOFTMAX, attrs, ins)
    return partial(_call, sem(Op.SOFTMAX).evaluator(attrs, KERNBENCH),
                   reader(ins[0], force_f32=True))


def _call(fn: Callable[[np.ndarray], np.ndarray], read: Callable[[], np.ndarray]
          ) -> np.ndarray:
    return fn(read())


def _bind_dot(attrs: dict, ins: Ins, out: Operand | None, ctx: BindContext) -> Step:
    """``a @ b (+ acc)``; a composite's K-split child reads columns ``a_cols`` of ``a``."""
    o = arity(ins, out, (2, 3), "dot")
    a, b = ins[0].shape, ins[1].shape
    readers = [reader(x, force_f32=True) for x in ins]
    cols = attrs.get("a_cols")
    if cols is not None:
        k0, k1 = int(cols[0]), int(cols[1])
        need(len(a) == 2 and 0 <= k0 < k1 <= a[1], f"dot a_cols {cols} outside a {list(a)}")
        a = (a[0], k1 - k0)
        view = _view(ins[0])[:, k0:k1]
        readers[0] = upcast(view) if view.dtype != np.float32 else partial(same, view)
    need(len(a) == 2 and len(b) == 2 and a[1] == b[0], f"dot {list(a)} @ {list(b)}")
    need(o.shape == (a[0], b[1]), f"dot {list(a)} @ {list(b)} writes {list(o.shape)}")
    need(len(ins) == 2 or ins[2].shape == o.shape,
         f"dot acc {list(ins[-1].shape)} for a {list(o.shape)} result")
    return partial(_dot, readers[0], readers[1], readers[2] if len(ins) == 3 else None)


def _dot(read_a: Callable[[], np.ndarray], read_b: Callable[[], np.ndarray],
         read_acc: Callable[[], np.ndarray] | None) -> np.ndarray:
    return given.dot(read_a(), read_b(), None if read_acc is None else read_acc())


def _bind_broadcast(attrs: dict, ins: Ins, out: Operand | None, ctx: BindContext) -> Step:
    o = arity(ins, out, (1,), "broadcast")
    shape = tuple(attrs.get("shape", o.shape))
    need(shape == o.shape, f"broadcast to {list(shape)} writes {list(o.shape)}")
    infer(Op.BROADCAST, {"shape": shape}, ins)
    return partial(sem(Op.BROADCAST).evaluator({"shape": shape}, KERNBENCH), _view(ins[0]))


def _constant(arr: np.ndarray) -> Step:
    arr.flags.writeable = False
    return partial(same, arr)


def _bind_fill(attrs: dict, ins: Ins, out: Operand | None, ctx: BindContext) -> Step:
    o = arity(ins, out, (0,), "fill")
    need("value" in attrs, "fill has no 'value' attr")
    return _constant(given.fill(o.shape, attrs["value"], NP_DTYPES[o.dtype]))


def _bind_arange(attrs: dict, ins: Ins, out: Operand | None, ctx: BindContext) -> Step:
    o = arity(ins, out, (0,), "arange")
    return _constant(given.arange(int(attrs.get("start", 0)), o.shape))


def _bind_nothing(attrs: dict, ins: Ins, out: Operand | None, ctx: BindContext) -> Step:
    return nothing


def _bind_guard(attrs: dict, ins: Ins, out: Operand | None, ctx: BindContext) -> Step:
    """A guard (ADR-0840): its operand read at the guard's start, compared bit for bit with
    the value the recorded path took; ``PathDivergence`` when they differ."""
    need(len(ins) == 1, f"guard takes 1 input, got {len(ins)}")
    need(numel(ins[0]) == 1, f"guard decides on one element, not {list(ins[0].shape)}")
    need(guards.fits(attrs.get(guards.BITS), ins[0].dtype),
         f"guard bits {attrs.get(guards.BITS)!r} are not a {ins[0].dtype} value")
    return partial(_guard, _view(ins[0]), int(attrs[guards.BITS]), ins[0].dtype)


def _guard(view: np.ndarray, recorded: int, dtype: str) -> None:
    got = guards.encode(view)
    if got != recorded:
        raise PathDivergence(guards.show(recorded, dtype), guards.show(got, dtype))


def _bind_scope_exit(attrs: dict, ins: Ins, out: Operand | None, ctx: BindContext) -> Step:
    lo, hi = int(attrs["lo"]), int(attrs["hi"])
    need(0 <= lo <= hi, f"scope_exit rewinds [{lo}, {hi})")
    try:
        mem = ctx.store.memory("tcm", ctx.pe)
    except (KeyError, ValueError) as exc:
        raise ShapeMismatch(str(exc.args[0])) from None
    return partial(mem.invalidate, lo, hi)


EXECUTORS: dict[Op, Executor] = {
    **{op: Executor(_bind_elementwise(op, (1, 2), 2)) for op in ops.BINARY},
    Op.WHERE: Executor(_bind_elementwise(Op.WHERE, (1, 2, 3), 3)),
    **{op: Executor(_bind_elementwise(op, (1,), 1)) for op in ops.UNARY - {Op.CAST}},
    Op.CAST: Executor(_bind_convert("cast")),
    **{op: Executor(_bind_reduce(op)) for op in ops.REDUCTIONS},
    Op.SOFTMAX: Executor(_bind_softmax),
    Op.DOT: Executor(_bind_dot),
    Op.DMA_READ: Executor(_bind_copy("dma_read")),
    Op.DMA_WRITE: Executor(_bind_convert("dma_write")),
    Op.COPY: Executor(_bind_copy("copy")),
    Op.BROADCAST: Executor(_bind_broadcast),
    Op.FILL: Executor(_bind_fill),
    Op.ARANGE: Executor(_bind_arange),
    # IPCQ: generic copy semantics (send: its input into its output operand; recv: its input
    # operand into its output operand) until the IPCQ recorder defines more.
    Op.SEND: Executor(_bind_copy("send")),
    Op.RECV: Executor(_bind_copy("recv")),
    Op.SCOPE_ENTER: Executor(_bind_nothing, writes=False),
    Op.SCOPE_EXIT: Executor(_bind_scope_exit, writes=False),
    # a composite parent: its children (dma_read into stage, dot) carry the data
    Op.GEMM: Executor(_bind_nothing, writes=False),
    Op.GUARD: Executor(_bind_guard, writes=False),
}


# -- the op table's shape/dtype inference validates each output operand -----------------------
_CHECKED: set[tuple[Any, ...]] = set()  # (op, operand shapes/dtypes, attrs) already validated


def _check_output(op: Op, attrs: dict, ins: Ins, out: Operand) -> None:
    key = (op, out.shape, out.dtype, repr(attrs), *[(o.shape, o.dtype) for o in ins])
    if key in _CHECKED:
        return
    try:
        shape, dt = sem(op).infer([o.shape for o in ins], [o.dtype for o in ins], attrs,
                                  KERNBENCH)
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        raise ShapeMismatch(f"Shape mismatch: {op.value}: {exc}") from None
    if shape != out.shape or dt != out.dtype:
        need(False, f"{op.value} of {[list(o.shape) for o in ins]} infers {list(shape)} "
                    f"{dt}, output is {list(out.shape)} {out.dtype}")
    if len(_CHECKED) > 4096:
        _CHECKED.clear()
    _CHECKED.add(key)


def _validated(op: Op, ex: Executor) -> Executor:
    def bind(attrs: dict, ins: Ins, out: Operand | None, ctx: BindContext) -> Step:
        step = ex.bind(attrs, ins, out, ctx)  # the executor's own checks speak first
        _check_output(op, attrs, ins, arity(ins, out, (len(ins),), op.value))
        return step

    return Executor(bind, ex.writes, ex.operands)


EXECUTORS.update(memory_executors(_bind_copy("dma_read"), _bind_convert("dma_write")))
EXECUTORS.update(math_executors())
EXECUTORS = {op: _validated(op, ex) if op in INFERRED else ex for op, ex in EXECUTORS.items()}
