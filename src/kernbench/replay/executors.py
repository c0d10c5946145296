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

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import ml_dtypes
import numpy as np

from kernbench.replay.store import NP_DTYPES, MemoryStore, Operand
from kernbench.schemas import ops
from kernbench.schemas.ops import Op

F32 = np.dtype(np.float32)
#: float dtypes computed in float32
LOW_FLOATS = frozenset({np.dtype(ml_dtypes.bfloat16), np.dtype(np.float16)})

Step = Callable[[], "np.ndarray | None"]


@dataclass(frozen=True)
class BindContext:
    """What ``bind`` may need beyond the op's own operands."""

    store: MemoryStore
    pe: int


Bind = Callable[[dict, Sequence[Operand], "Operand | None", BindContext], Step]


@dataclass(frozen=True)
class Executor:
    """How replay executes one op name: ``bind`` specialises it to one op's operands.

    ``writes`` False: the op's step has an effect of its own (or none) and its output
    operand, if the row has one, is not written by it (a composite parent's result is
    written by its children)."""

    bind: Bind
    writes: bool = True


class ShapeMismatch(ValueError):
    """Raised by ``bind`` when operands do not fit the op; replay reports it at the op."""


def _need(cond: bool, message: str) -> None:
    if not cond:
        raise ShapeMismatch(f"Shape mismatch: {message}")


def _arity(ins: Sequence[Operand], out: Operand | None, n_in: tuple[int, ...],
           name: str) -> None:
    if len(ins) not in n_in:
        _need(False, f"{name} takes {' or '.join(map(str, n_in))} inputs, got {len(ins)}")
    if out is None:
        _need(False, f"{name} has no output operand")


def _compute_view(o: Operand, force_f32: bool = False) -> tuple[np.ndarray, bool]:
    """The operand's live view and whether it must be converted to float32 when read."""
    v = o.view
    return v, (v.dtype != F32) if force_f32 else (v.dtype in LOW_FLOATS)


def _reader(o: Operand, force_f32: bool = False) -> Callable[[], np.ndarray]:
    v, up = _compute_view(o, force_f32)
    return partial(v.astype, F32) if up else partial(_same, v)


def _same(v: np.ndarray) -> np.ndarray:
    return v


def _nothing() -> None:
    return None


# -- elementwise with scalars -------------------------------------------------------------
def _template(attrs: dict, ins: Sequence[Operand], arity: int, name: str
              ) -> tuple[list[Any], list[bool]]:
    """One entry per argument position (an input Operand or a Python scalar) and which of
    them are scalars."""
    scalars = attrs.get("scalars") or []
    if len(ins) + len(scalars) != arity:
        _need(False, f"{name} needs {arity} arguments, has {len(ins)} inputs and "
                     f"{len(scalars)} scalars")
    slots: list[Any] = [None] * arity
    taken = [False] * arity
    for pos, value in scalars:
        _need(0 <= int(pos) < arity and not taken[int(pos)], f"bad scalar position {pos}")
        slots[int(pos)], taken[int(pos)] = value, True
    readers = iter(ins)
    for k in range(arity):
        if not taken[k]:
            slots[k] = next(readers)
    return slots, taken


def _check_broadcast(ins: Sequence[Operand], out: Operand, name: str) -> None:
    if all(o.shape == out.shape for o in ins):
        return
    try:
        shape = np.broadcast_shapes(*(o.shape for o in ins)) if ins else out.shape
    except ValueError:
        raise ShapeMismatch(f"Shape mismatch: {name} inputs {[list(o.shape) for o in ins]} do "
                            "not broadcast") from None
    if tuple(shape) != out.shape:
        _need(False, f"{name} inputs broadcast to {list(shape)}, output is {list(out.shape)}")


def _elementwise_step(fn: Callable[..., Any], slots: list, taken: list[bool]) -> Step:
    """``fn`` over the argument slots; a plain ``partial`` when no input needs a cast."""
    args: list[Any] = []
    casts: list[Any] = []
    for s, is_scalar in zip(slots, taken, strict=True):
        if is_scalar:
            args.append(s)
            casts.append(None)
        else:
            v, up = _compute_view(s)
            args.append(v)
            casts.append(up)
    if not any(casts):
        return partial(fn, *args)
    readers = [partial(_same, a) if not c else partial(a.astype, F32)
               for a, c in zip(args, casts, strict=True)]
    return partial(_call_read, fn, readers)


def _call_read(fn: Callable[..., Any], readers: list) -> Any:
    return fn(*[r() for r in readers])


UFUNCS: dict[Op, Callable[..., np.ndarray]] = {
    Op.ADD: np.add, Op.SUB: np.subtract, Op.MUL: np.multiply, Op.DIV: np.true_divide,
    Op.MAXIMUM: np.maximum, Op.MINIMUM: np.minimum,
    Op.EQ: np.equal, Op.NE: np.not_equal, Op.LT: np.less, Op.LE: np.less_equal,
    Op.GT: np.greater, Op.GE: np.greater_equal,
}


def _rsqrt(x: np.ndarray) -> np.ndarray:
    r = np.sqrt(x)
    return np.reciprocal(r, out=r) if r.dtype.kind == "f" else 1.0 / r


UNARY_FNS: dict[Op, Callable[[np.ndarray], np.ndarray]] = {
    Op.EXP: np.exp, Op.EXP2: np.exp2, Op.LOG: np.log, Op.SQRT: np.sqrt, Op.RSQRT: _rsqrt,
    Op.ABS: np.abs, Op.NEG: np.negative,
}

REDUCE_UFUNCS: dict[Op, np.ufunc] = {Op.SUM: np.add, Op.MAX: np.maximum, Op.MIN: np.minimum}


def _bind_binary(op: Op) -> Bind:
    def bind(attrs, ins, out, ctx):
        _arity(ins, out, (1, 2), op.value)
        slots, taken = _template(attrs, ins, 2, op.value)
        _check_broadcast(ins, out, op.value)
        return _elementwise_step(UFUNCS[op], slots, taken)

    return bind


def _bind_where(attrs, ins, out, ctx):
    _arity(ins, out, (1, 2, 3), "where")
    slots, taken = _template(attrs, ins, 3, "where")
    _need(not taken[0], "where's condition must be an input")
    _check_broadcast(ins, out, "where")
    return _elementwise_step(np.where, slots, taken)


def _bind_unary(op: Op) -> Bind:
    def bind(attrs, ins, out, ctx):
        _arity(ins, out, (1,), op.value)
        _need(ins[0].shape == out.shape,
              f"{op.value} of {list(ins[0].shape)} writes {list(out.shape)}")
        return _elementwise_step(UNARY_FNS[op], [ins[0]], [False])

    return bind


def _numel(o: Operand) -> int:
    return o.nbytes // NP_DTYPES[o.dtype].itemsize


def _bind_convert(name: str) -> Bind:
    """cast, dma_write: the value itself; the engine's write converts it to the output dtype."""
    def bind(attrs, ins, out, ctx):
        _arity(ins, out, (1,), name)
        if _numel(ins[0]) != _numel(out):
            _need(False, f"{name} of {list(ins[0].shape)} writes {list(out.shape)}")
        v = ins[0].view
        return partial(_same, v) if ins[0].shape == out.shape else partial(v.reshape, out.shape)

    return bind


def _bind_copy(name: str) -> Bind:
    """dma_read, copy, send, recv: the value (same shape) or the bytes as the output operand."""
    def bind(attrs, ins, out, ctx):
        _arity(ins, out, (1,), name)
        src = ins[0]
        if src.nbytes != out.nbytes:
            _need(False, f"{name} reads {src.nbytes} bytes ({list(src.shape)} {src.dtype}), "
                         f"output holds {out.nbytes} bytes")
        v = src.view
        if src.dtype == out.dtype:
            return partial(_same, v) if src.shape == out.shape else partial(v.reshape, out.shape)
        return partial(_reinterpret, v, NP_DTYPES[out.dtype], out.shape)

    return bind


def _reinterpret(v: np.ndarray, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    return np.ascontiguousarray(v).view(np.uint8).view(dtype).reshape(shape)


def _bind_reduce(op: Op) -> Bind:
    def bind(attrs, ins, out, ctx):
        _arity(ins, out, (1,), op.value)
        axis, keepdims = attrs.get("axis"), bool(attrs.get("keepdims", False))
        nd = len(ins[0].shape)
        _need(axis is None or -nd <= int(axis) < nd, f"axis {axis} for {list(ins[0].shape)}")
        shape = np.empty(ins[0].shape, dtype=np.bool_).sum(axis=axis, keepdims=keepdims).shape
        _need(int(np.prod(shape)) == _numel(out),
              f"{op.value}(axis={axis}) of {list(ins[0].shape)} writes {list(out.shape)}")
        return partial(_reduce, REDUCE_UFUNCS[op], _reader(ins[0]), axis, out.shape)

    return bind


def _reduce(fn: np.ufunc, read: Callable[[], np.ndarray], axis: int | None,
            shape: tuple[int, ...]) -> np.ndarray:
    return fn.reduce(read(), axis=axis, keepdims=True).reshape(shape)


def _bind_softmax(attrs, ins, out, ctx):
    _arity(ins, out, (1,), "softmax")
    nd = len(ins[0].shape)
    axis = int(attrs.get("axis", -1))
    _need(-nd <= axis < nd, f"softmax axis {axis} for {list(ins[0].shape)}")
    _need(ins[0].shape == out.shape, f"softmax of {list(ins[0].shape)} writes {list(out.shape)}")
    return partial(_softmax, _reader(ins[0], force_f32=True), axis)


def _softmax(read: Callable[[], np.ndarray], axis: int) -> np.ndarray:
    x = read()
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    e /= e.sum(axis=axis, keepdims=True)
    return e


def _bind_dot(attrs, ins, out, ctx):
    _arity(ins, out, (2, 3), "dot")
    a, b = ins[0].shape, ins[1].shape
    _need(len(a) == 2 and len(b) == 2 and a[1] == b[0], f"dot {list(a)} @ {list(b)}")
    _need(out.shape == (a[0], b[1]), f"dot {list(a)} @ {list(b)} writes {list(out.shape)}")
    _need(len(ins) == 2 or ins[2].shape == out.shape,
          f"dot acc {list(ins[-1].shape)} for a {list(out.shape)} result")
    readers = [_reader(o, force_f32=True) for o in ins]
    return partial(_dot, *readers) if len(ins) == 3 else partial(_dot, *readers, None)


def _dot(read_a: Callable, read_b: Callable, read_acc: Callable | None) -> np.ndarray:
    r = np.matmul(read_a(), read_b())
    if read_acc is not None:
        r += read_acc()
    return r


def _bind_broadcast(attrs, ins, out, ctx):
    _arity(ins, out, (1,), "broadcast")
    shape = tuple(attrs.get("shape", out.shape))
    _need(shape == out.shape, f"broadcast to {list(shape)} writes {list(out.shape)}")
    try:
        ok = np.broadcast_shapes(ins[0].shape, shape) == shape
    except ValueError:
        ok = False
    _need(ok, f"cannot broadcast {list(ins[0].shape)} to {list(shape)}")
    return partial(np.broadcast_to, ins[0].view, shape)


def _constant(arr: np.ndarray) -> Step:
    arr.flags.writeable = False
    return partial(_same, arr)


def _bind_fill(attrs, ins, out, ctx):
    _arity(ins, out, (0,), "fill")
    _need("value" in attrs, "fill has no 'value' attr")
    with np.errstate(all="ignore"):
        return _constant(np.full(out.shape, attrs["value"], dtype=NP_DTYPES[out.dtype]))


def _bind_arange(attrs, ins, out, ctx):
    _arity(ins, out, (0,), "arange")
    start = int(attrs.get("start", 0))
    return _constant(np.arange(start, start + _numel(out), dtype=np.int32).reshape(out.shape))


def _bind_nothing(attrs, ins, out, ctx):
    return _nothing


def _bind_scope_exit(attrs, ins, out, ctx):
    lo, hi = int(attrs["lo"]), int(attrs["hi"])
    _need(0 <= lo <= hi, f"scope_exit rewinds [{lo}, {hi})")
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
