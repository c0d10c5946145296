"""The numpy executor: one handler per op name, the living definition of every op's semantics.

``EXECUTORS[op]`` is an ``Executor``: ``prepare`` runs once per op at decode time (it reads
the op's attrs and operand shapes, checks that they fit, and returns the op's parameter);
``run(values, out, param)`` runs at the op's ``t_start_ps`` on the input views and returns
the value to write into ``out`` (or None). ``run`` may return a view of memory: the engine
copies it if the write is deferred. Floats are computed in float32 and cast to the output
dtype by the write; GEMMs accumulate in float32. See docs/trace-format.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from kernbench.replay.store import NP_DTYPES, MemoryStore, Operand
from kernbench.schemas import ops
from kernbench.schemas.ops import Op

F32 = np.dtype(np.float32)
#: float dtypes computed in float32
LOW_FLOATS = frozenset({np.dtype(ml_dtypes.bfloat16), np.dtype(np.float16)})


@dataclass(frozen=True)
class PrepareContext:
    """What ``prepare`` may need beyond the op's own operands."""

    store: MemoryStore
    pe: int


Run = Callable[[list, Any, Any], Any]
Prepare = Callable[[dict, Sequence[Operand], "Operand | None", PrepareContext], Any]


def _no_param(attrs: dict, ins: Sequence[Operand], out: Operand | None,
              ctx: PrepareContext) -> None:
    return None


@dataclass(frozen=True)
class Executor:
    """How replay executes one op name."""

    run: Run
    prepare: Prepare = _no_param


class ShapeMismatch(ValueError):
    """Raised by ``prepare`` when operands do not fit the op; replay reports it at the op."""


def _f(a: np.ndarray) -> np.ndarray:
    """bfloat16/float16 values as float32 (other dtypes unchanged)."""
    return a.astype(F32) if a.dtype in LOW_FLOATS else a


def _f32(a: np.ndarray) -> np.ndarray:
    return a if a.dtype == F32 else a.astype(F32)


def _need(cond: bool, message: str) -> None:
    if not cond:
        raise ShapeMismatch(f"Shape mismatch: {message}")


def _arity(ins: Sequence[Operand], out: Operand | None, n_in: tuple[int, ...],
           name: str) -> None:
    _need(len(ins) in n_in, f"{name} takes {' or '.join(map(str, n_in))} inputs, got {len(ins)}")
    _need(out is not None, f"{name} has no output operand")


# -- elementwise with scalars -------------------------------------------------------------
def _scalar_template(attrs: dict, n_inputs: int, arity: int, name: str) -> tuple | None:
    """None (no scalars) or one (is_scalar, value) per argument position."""
    scalars = attrs.get("scalars") or []
    _need(n_inputs + len(scalars) == arity,
          f"{name} needs {arity} arguments, has {n_inputs} inputs and {len(scalars)} scalars")
    if not scalars:
        return None
    slots: list[tuple[bool, Any]] = [(False, None)] * arity
    for pos, value in scalars:
        _need(0 <= int(pos) < arity and not slots[int(pos)][0], f"bad scalar position {pos}")
        slots[int(pos)] = (True, value)
    return tuple(slots)


def _args(vals: list, template: tuple) -> list:
    it = iter(vals)
    return [v if is_scalar else _f(next(it)) for is_scalar, v in template]


def _check_broadcast(ins: Sequence[Operand], out: Operand, name: str) -> None:
    try:
        shape = np.broadcast_shapes(*(o.shape for o in ins)) if ins else out.shape
    except ValueError:
        raise ShapeMismatch(f"Shape mismatch: {name} inputs {[list(o.shape) for o in ins]} do "
                            "not broadcast") from None
    _need(tuple(shape) == out.shape,
          f"{name} inputs broadcast to {list(shape)}, output is {list(out.shape)}")


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

REDUCE_FNS: dict[Op, Callable[..., np.ndarray]] = {Op.SUM: np.sum, Op.MAX: np.max,
                                                   Op.MIN: np.min}


def _prep_binary(op: Op) -> Prepare:
    def prepare(attrs, ins, out, ctx):
        _arity(ins, out, (1, 2), op.value)
        template = _scalar_template(attrs, len(ins), 2, op.value)
        _check_broadcast(ins, out, op.value)
        return UFUNCS[op], template

    return prepare


def _binary(vals, out, p):
    fn, template = p
    if template is None:
        return fn(_f(vals[0]), _f(vals[1]))
    return fn(*_args(vals, template))


def _prep_where(attrs, ins, out, ctx):
    _arity(ins, out, (1, 2, 3), "where")
    template = _scalar_template(attrs, len(ins), 3, "where")
    _need(template is None or not template[0][0], "where's condition must be an input")
    _check_broadcast(ins, out, "where")
    return template or ((False, None),) * 3


def _where(vals, out, template):
    return np.where(*_args(vals, template))


def _prep_unary(op: Op) -> Prepare:
    def prepare(attrs, ins, out, ctx):
        _arity(ins, out, (1,), op.value)
        _need(ins[0].shape == out.shape, f"{op.value} of {list(ins[0].shape)} writes "
                                         f"{list(out.shape)}")
        return UNARY_FNS[op]

    return prepare


def _unary(vals, out, fn):
    return fn(_f(vals[0]))


def _prep_same_numel(name: str) -> Prepare:
    def prepare(attrs, ins, out, ctx):
        _arity(ins, out, (1,), name)
        _need(ins[0].nbytes // NP_DTYPES[ins[0].dtype].itemsize
              == out.nbytes // NP_DTYPES[out.dtype].itemsize,
              f"{name} of {list(ins[0].shape)} writes {list(out.shape)}")
        return None if ins[0].shape == out.shape else out.shape

    return prepare


def _convert(vals, out, shape):
    """The value itself (the write converts to the output dtype): cast, dma_write."""
    return vals[0] if shape is None else vals[0].reshape(shape)


def _prep_copy(name: str) -> Prepare:
    def prepare(attrs, ins, out, ctx):
        _arity(ins, out, (1,), name)
        src = ins[0]
        _need(src.nbytes == out.nbytes, f"{name} reads {src.nbytes} bytes ({list(src.shape)} "
                                        f"{src.dtype}), output holds {out.nbytes} bytes")
        if src.dtype == out.dtype:
            return None if src.shape == out.shape else ("reshape", out.shape)
        return ("bytes", NP_DTYPES[out.dtype], out.shape)

    return prepare


def _copy(vals, out, p):
    """Same shape: the value; otherwise the bytes reinterpreted as the output operand."""
    x = vals[0]
    if p is None:
        return x
    if p[0] == "reshape":
        return x.reshape(p[1])
    return np.ascontiguousarray(x).view(np.uint8).view(p[1]).reshape(p[2])


def _prep_reduce(op: Op) -> Prepare:
    def prepare(attrs, ins, out, ctx):
        _arity(ins, out, (1,), op.value)
        axis, keepdims = attrs.get("axis"), bool(attrs.get("keepdims", False))
        nd = len(ins[0].shape)
        _need(axis is None or -nd <= int(axis) < nd, f"axis {axis} for {list(ins[0].shape)}")
        shape = np.empty(ins[0].shape, dtype=np.bool_).sum(axis=axis, keepdims=keepdims).shape
        _need(int(np.prod(shape)) == int(np.prod(out.shape)),
              f"{op.value}(axis={axis}) of {list(ins[0].shape)} writes {list(out.shape)}")
        return REDUCE_FNS[op], axis, keepdims, out.shape

    return prepare


def _reduce(vals, out, p):
    fn, axis, keepdims, shape = p
    return np.asarray(fn(_f(vals[0]), axis=axis, keepdims=keepdims)).reshape(shape)


def _prep_softmax(attrs, ins, out, ctx):
    _arity(ins, out, (1,), "softmax")
    nd = len(ins[0].shape)
    axis = int(attrs.get("axis", -1))
    _need(-nd <= axis < nd, f"softmax axis {axis} for {list(ins[0].shape)}")
    _need(ins[0].shape == out.shape, f"softmax of {list(ins[0].shape)} writes {list(out.shape)}")
    return axis


def _softmax(vals, out, axis):
    x = _f32(vals[0])
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    e /= e.sum(axis=axis, keepdims=True)
    return e


def _prep_dot(attrs, ins, out, ctx):
    _arity(ins, out, (2, 3), "dot")
    a, b = ins[0].shape, ins[1].shape
    _need(len(a) == 2 and len(b) == 2 and a[1] == b[0], f"dot {list(a)} @ {list(b)}")
    _need(out.shape == (a[0], b[1]), f"dot {list(a)} @ {list(b)} writes {list(out.shape)}")
    _need(len(ins) == 2 or ins[2].shape == out.shape,
          f"dot acc {list(ins[-1].shape)} for a {list(out.shape)} result")
    return len(ins) == 3


def _dot(vals, out, has_acc):
    r = np.matmul(_f32(vals[0]), _f32(vals[1]))
    if has_acc:
        r += _f32(vals[2])
    return r


def _prep_broadcast(attrs, ins, out, ctx):
    _arity(ins, out, (1,), "broadcast")
    shape = tuple(attrs.get("shape", out.shape))
    _need(shape == out.shape, f"broadcast to {list(shape)} writes {list(out.shape)}")
    try:
        np.broadcast_shapes(ins[0].shape, shape)
    except ValueError:
        raise ShapeMismatch(f"Shape mismatch: cannot broadcast {list(ins[0].shape)} to "
                            f"{list(shape)}") from None
    _need(np.broadcast_shapes(ins[0].shape, shape) == shape,
          f"cannot broadcast {list(ins[0].shape)} to {list(shape)}")
    return shape


def _broadcast(vals, out, shape):
    return np.broadcast_to(vals[0], shape)


def _constant(arr: np.ndarray) -> np.ndarray:
    arr.flags.writeable = False
    return arr


def _prep_fill(attrs, ins, out, ctx):
    _arity(ins, out, (0,), "fill")
    _need("value" in attrs, "fill has no 'value' attr")
    with np.errstate(all="ignore"):
        return _constant(np.full(out.shape, attrs["value"], dtype=NP_DTYPES[out.dtype]))


def _prep_arange(attrs, ins, out, ctx):
    _arity(ins, out, (0,), "arange")
    start = int(attrs.get("start", 0))
    n = int(np.prod(out.shape))
    return _constant(np.arange(start, start + n, dtype=np.int32).reshape(out.shape))


def _constant_value(vals, out, arr):
    return arr


def _nothing(vals, out, p):
    return None


def _prep_scope_exit(attrs, ins, out, ctx):
    lo, hi = int(attrs["lo"]), int(attrs["hi"])
    _need(0 <= lo <= hi, f"scope_exit rewinds [{lo}, {hi})")
    try:
        mem = ctx.store.memory("tcm", ctx.pe)
    except (KeyError, ValueError) as exc:
        raise ShapeMismatch(str(exc.args[0])) from None
    return mem, lo, hi


def _scope_exit(vals, out, p):
    mem, lo, hi = p
    mem.invalidate(lo, hi)


EXECUTORS: dict[Op, Executor] = {
    **{op: Executor(_binary, _prep_binary(op)) for op in ops.BINARY},
    Op.WHERE: Executor(_where, _prep_where),
    **{op: Executor(_unary, _prep_unary(op)) for op in ops.UNARY - {Op.CAST}},
    Op.CAST: Executor(_convert, _prep_same_numel("cast")),
    **{op: Executor(_reduce, _prep_reduce(op)) for op in ops.REDUCTIONS},
    Op.SOFTMAX: Executor(_softmax, _prep_softmax),
    Op.DOT: Executor(_dot, _prep_dot),
    Op.DMA_READ: Executor(_copy, _prep_copy("dma_read")),
    Op.DMA_WRITE: Executor(_convert, _prep_same_numel("dma_write")),
    Op.COPY: Executor(_copy, _prep_copy("copy")),
    Op.BROADCAST: Executor(_broadcast, _prep_broadcast),
    Op.FILL: Executor(_constant_value, _prep_fill),
    Op.ARANGE: Executor(_constant_value, _prep_arange),
    # IPCQ: generic copy semantics (send: its input into its output operand; recv: its input
    # operand into its output operand) until the IPCQ recorder defines more.
    Op.SEND: Executor(_copy, _prep_copy("send")),
    Op.RECV: Executor(_copy, _prep_copy("recv")),
    Op.SCOPE_ENTER: Executor(_nothing),
    Op.SCOPE_EXIT: Executor(_scope_exit, _prep_scope_exit),
    # a composite parent: its children (dma_read into stage, dot) carry the data
    Op.GEMM: Executor(_nothing),
}
