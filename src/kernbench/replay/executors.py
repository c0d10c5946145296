"""The numpy executor: one handler per op name, the living definition of every op's semantics.

``EXECUTORS[op]`` is an ``Executor`` whose ``bind(attrs, ins, out, ctx)`` runs once per op
at decode time: it checks that the operands fit the op (``ShapeMismatch`` otherwise) and
returns a zero-argument *step* closed over the live numpy views of the inputs. The engine
calls the step at the op's ``t_start_ps``; the step returns the value to write into the
output operand (or None). A step may return a view of memory or a value of another dtype:
the engine converts/snapshots it to the output dtype before the write (that conversion is
``cast``'s and ``dma_write``'s semantics). Floats are computed in float32; GEMMs accumulate
in float32. See docs/trace-format.md for the table this implements.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np

from kernbench.replay.binding import (
    REDUCE_UFUNCS,
    UFUNCS,
    UNARY_FNS,
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
from kernbench.replay.families import math_executors
from kernbench.replay.indexed import memory_executors
from kernbench.replay.store import NP_DTYPES
from kernbench.schemas import bf16, ops
from kernbench.schemas.dtypes import DTYPES
from kernbench.schemas.ops import Op
from kernbench.schemas.rules import INFERRED, infer

__all__ = ["EXECUTORS", "BindContext", "Executor", "ShapeMismatch"]


def _bind_binary(op: Op) -> Bind:
    def bind(attrs, ins, out, ctx):
        arity(ins, out, (1, 2), op.value)
        slots, taken = template(attrs, ins, 2, op.value)
        check_broadcast(ins, out, op.value)
        return elementwise_step(UFUNCS[op], slots, taken)

    return bind


def _bind_where(attrs, ins, out, ctx):
    arity(ins, out, (1, 2, 3), "where")
    slots, taken = template(attrs, ins, 3, "where")
    need(not taken[0], "where's condition must be an input")
    check_broadcast(ins, out, "where")
    return elementwise_step(np.where, slots, taken)


def _bind_unary(op: Op) -> Bind:
    def bind(attrs, ins, out, ctx):
        arity(ins, out, (1,), op.value)
        need(ins[0].shape == out.shape,
              f"{op.value} of {list(ins[0].shape)} writes {list(out.shape)}")
        return elementwise_step(UNARY_FNS[op], [ins[0]], [False])

    return bind


def _bind_convert(name: str) -> Bind:
    """cast, dma_write: the value itself; the engine's write converts it to the output dtype."""
    def bind(attrs, ins, out, ctx):
        arity(ins, out, (1,), name)
        if numel(ins[0]) != numel(out):
            need(False, f"{name} of {list(ins[0].shape)} writes {list(out.shape)}")
        v = ins[0].view
        return partial(same, v) if ins[0].shape == out.shape else partial(v.reshape, out.shape)

    return bind


def _bind_copy(name: str) -> Bind:
    """dma_read, copy, send, recv: the value (same shape) or the bytes as the output operand."""
    def bind(attrs, ins, out, ctx):
        arity(ins, out, (1,), name)
        src = ins[0]
        if src.nbytes != out.nbytes:
            need(False, f"{name} reads {src.nbytes} bytes ({list(src.shape)} {src.dtype}), "
                         f"output holds {out.nbytes} bytes")
        v = src.view
        if src.dtype == out.dtype:
            return partial(same, v) if src.shape == out.shape else partial(v.reshape, out.shape)
        return partial(_reinterpret, v, NP_DTYPES[out.dtype], out.shape)

    return bind


def _reinterpret(v: np.ndarray, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    return np.ascontiguousarray(v).view(np.uint8).view(dtype).reshape(shape)


def _bind_reduce(op: Op) -> Bind:
    def bind(attrs, ins, out, ctx):
        arity(ins, out, (1,), op.value)
        axis, keepdims = attrs.get("axis"), bool(attrs.get("keepdims", False))
        nd = len(ins[0].shape)
        need(axis is None or -nd <= int(axis) < nd, f"axis {axis} for {list(ins[0].shape)}")
        shape = np.empty(ins[0].shape, dtype=np.bool_).sum(axis=axis, keepdims=keepdims).shape
        need(int(np.prod(shape)) == numel(out),
              f"{op.value}(axis={axis}) of {list(ins[0].shape)} writes {list(out.shape)}")
        return partial(_reduce, REDUCE_UFUNCS[op], reader(ins[0]), axis, out.shape)

    return bind


def _reduce(fn: np.ufunc, read: Callable[[], np.ndarray], axis: int | None,
            shape: tuple[int, ...]) -> np.ndarray:
    return fn.reduce(read(), axis=axis, keepdims=True).reshape(shape)


def _bind_softmax(attrs, ins, out, ctx):
    arity(ins, out, (1,), "softmax")
    nd = len(ins[0].shape)
    axis = int(attrs.get("axis", -1))
    need(-nd <= axis < nd, f"softmax axis {axis} for {list(ins[0].shape)}")
    need(ins[0].shape == out.shape, f"softmax of {list(ins[0].shape)} writes {list(out.shape)}")
    return partial(_softmax, reader(ins[0], force_f32=True), axis)


def _softmax(read: Callable[[], np.ndarray], axis: int) -> np.ndarray:
    x = read()
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    e /= e.sum(axis=axis, keepdims=True)
    return e


def _bind_dot(attrs, ins, out, ctx):
    """``a @ b (+ acc)``; a composite's K-split child reads columns ``a_cols`` of ``a``."""
    arity(ins, out, (2, 3), "dot")
    a, b = ins[0].shape, ins[1].shape
    readers = [reader(o, force_f32=True) for o in ins]
    cols = attrs.get("a_cols")
    if cols is not None:
        k0, k1 = int(cols[0]), int(cols[1])
        need(len(a) == 2 and 0 <= k0 < k1 <= a[1], f"dot a_cols {cols} outside a {list(a)}")
        a = (a[0], k1 - k0)
        view = ins[0].view[:, k0:k1]
        readers[0] = upcast(view) if view.dtype != np.float32 else partial(same, view)
    need(len(a) == 2 and len(b) == 2 and a[1] == b[0], f"dot {list(a)} @ {list(b)}")
    need(out.shape == (a[0], b[1]), f"dot {list(a)} @ {list(b)} writes {list(out.shape)}")
    need(len(ins) == 2 or ins[2].shape == out.shape,
          f"dot acc {list(ins[-1].shape)} for a {list(out.shape)} result")
    return partial(_dot, *readers) if len(ins) == 3 else partial(_dot, *readers, None)


def _dot(read_a: Callable, read_b: Callable, read_acc: Callable | None) -> np.ndarray:
    r = np.matmul(read_a(), read_b())
    if read_acc is not None:
        r += read_acc()
    return r


def _bind_broadcast(attrs, ins, out, ctx):
    arity(ins, out, (1,), "broadcast")
    shape = tuple(attrs.get("shape", out.shape))
    need(shape == out.shape, f"broadcast to {list(shape)} writes {list(out.shape)}")
    try:
        ok = np.broadcast_shapes(ins[0].shape, shape) == shape
    except ValueError:
        ok = False
    need(ok, f"cannot broadcast {list(ins[0].shape)} to {list(shape)}")
    return partial(np.broadcast_to, ins[0].view, shape)


def _constant(arr: np.ndarray) -> Step:
    arr.flags.writeable = False
    return partial(same, arr)


def _bind_fill(attrs, ins, out, ctx):
    arity(ins, out, (0,), "fill")
    need("value" in attrs, "fill has no 'value' attr")
    value = attrs["value"]
    with np.errstate(all="ignore"):
        if out.dtype == "bfloat16":
            return _constant(bf16.full(out.shape, value))
        return _constant(np.full(out.shape, value, dtype=NP_DTYPES[out.dtype]))


def _bind_arange(attrs, ins, out, ctx):
    arity(ins, out, (0,), "arange")
    start = int(attrs.get("start", 0))
    return _constant(np.arange(start, start + numel(out), dtype=np.int32).reshape(out.shape))


def _bind_nothing(attrs, ins, out, ctx):
    return nothing


def _bind_scope_exit(attrs, ins, out, ctx):
    lo, hi = int(attrs["lo"]), int(attrs["hi"])
    need(0 <= lo <= hi, f"scope_exit rewinds [{lo}, {hi})")
    try:
        mem = ctx.store.memory("tcm", ctx.pe)
    except (KeyError, ValueError) as exc:
        raise ShapeMismatch(str(exc.args[0])) from None
    return partial(mem.invalidate, lo, hi)


EXECUTORS: dict[Op, Executor] = {
    **{op: Executor(_bind_binary(op)) for op in ops.BINARY},
    Op.WHERE: Executor(_bind_where),
    **{op: Executor(_bind_unary(op)) for op in ops.UNARY - {Op.CAST}},
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
}


# -- the op table's shape/dtype inference (schemas/rules.py) validates each output operand --
_CHECKED: set = set()  # (op, operand shapes/dtypes, attrs) already validated


def _check_output(op: Op, attrs: dict, ins, out) -> None:
    key = (op, out.shape, out.dtype, repr(attrs), *[(o.shape, o.dtype) for o in ins])
    if key in _CHECKED:
        return
    try:
        got = infer(op, [o.shape for o in ins], [DTYPES[o.dtype] for o in ins], attrs)
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        raise ShapeMismatch(f"Shape mismatch: {op.value}: {exc}") from None
    if got is not None and (got[0] != out.shape or got[1].name != out.dtype):
        need(False, f"{op.value} of {[list(o.shape) for o in ins]} infers {list(got[0])} "
                    f"{got[1].name}, output is {list(out.shape)} {out.dtype}")
    if len(_CHECKED) > 4096:
        _CHECKED.clear()
    _CHECKED.add(key)


def _validated(op: Op, ex: Executor) -> Executor:
    def bind(attrs, ins, out, ctx):
        step = ex.bind(attrs, ins, out, ctx)  # the executor's own checks speak first
        _check_output(op, attrs, ins, out)
        return step

    return Executor(bind, ex.writes, ex.operands)


EXECUTORS.update(memory_executors(_bind_copy("dma_read"), _bind_convert("dma_write")))
EXECUTORS.update(math_executors())
EXECUTORS = {op: _validated(op, ex) if op in INFERRED else ex for op, ex in EXECUTORS.items()}
