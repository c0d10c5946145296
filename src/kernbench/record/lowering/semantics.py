"""Semantic checks of every tl call (shapes, dtypes, spaces, scopes) and the command builder.

Errors are raised here, at emit time, as KernelError subclasses naming the kernel line.
"""

from __future__ import annotations

import sys
from typing import Any

from kernbench.errors import (
    DtypeError,
    KernelError,
    ShapeError,
)
from kernbench.record import handle as _handle
from kernbench.record import hints
from kernbench.record.handle import TensorHandle
from kernbench.record.lowering.emit import attrs_json as _attrs
from kernbench.record.lowering.emit import dtype_arg as _dtype
from kernbench.record.lowering.emit import emit as _emit
from kernbench.record.lowering.emit import prod as _prod
from kernbench.record.lowering.emit import shape_arg as _shape
from kernbench.record.lowering.operands import (
    Operands,
    arguments,
    axis_for,
    infer,
    result_dtype,
)
from kernbench.record.lowering.operands import live as _live
from kernbench.record.machine.context import current
from kernbench.record.memo import BoundedMemo
from kernbench.record.source import src_here
from kernbench.schemas import dtypes, rules
from kernbench.schemas.ops import OP, OPS, Family, Op
from kernbench.schemas.policy import scalar_dtype

__all__ = ["src_here"]

_SCALARS = (int, float, bool)




#: per-signature memos of the front end's answers (bounded: cleared when full)
_MEMO_LIMIT = 4096
_BROADCAST = BoundedMemo()  # (shape, shape) -> broadcast shape
#: a reduction's (output shape, dtype, attrs) by (op, input shape, dtype, axis, keepdims)
_REDUCED = BoundedMemo()


def broadcast_shapes(a: tuple[int, ...], b: tuple[int, ...], src: str) -> tuple[int, ...]:
    """numpy broadcasting of two shapes (the op table's rule), or a ShapeError naming both."""
    if a == b:
        return a
    got = _BROADCAST.get((a, b))
    if got is None:
        try:
            got = rules.broadcast_shapes(a, b)
        except ValueError as exc:
            raise ShapeError(str(exc), src) from None
        _BROADCAST.put((a, b), got, _MEMO_LIMIT)
    return got


# -- ids ---------------------------------------------------------------------------------
def program_id(axis: int) -> int:
    ctx = current()
    if not 0 <= axis < len(ctx.grid):
        raise KernelError(f"program_id axis {axis} outside grid {list(ctx.grid)}", src_here())
    return ctx.pids[axis]


def num_programs(axis: int) -> int:
    ctx = current()
    if not 0 <= axis < len(ctx.grid):
        raise KernelError(f"num_programs axis {axis} outside grid {list(ctx.grid)}", src_here())
    return ctx.grid[axis]


# -- creation ----------------------------------------------------------------------------
def full(shape: Any, value: Any, dtype: Any) -> TensorHandle:
    ctx = current()
    src = src_here()
    shape, dt = _shape(shape, src), _dtype(dtype, src)
    if not isinstance(value, _SCALARS):
        raise KernelError(f"full value must be a Python scalar, got {value!r}", src)
    n = _prod(shape)
    return _emit(ctx, OP.FILL, (), shape, dt, (n,), src, _attrs(value=value))


def zeros(shape: Any, dtype: Any) -> TensorHandle:
    return full(shape, 0, dtype)


def arange(start: int, end: int) -> TensorHandle:
    ctx = current()
    src = src_here()
    if end <= start:
        raise ShapeError(f"arange({start}, {end}) is empty", src)
    n = int(end) - int(start)
    return _emit(ctx, OP.ARANGE, (), (n,), dtypes.int32, (n,), src, _attrs(start=int(start)))


# -- layout views (no op is logged) --------------------------------------------------------
def trans(x: TensorHandle) -> TensorHandle:
    src = src_here()
    _live(x, src)
    return TensorHandle(x.buf, x.shape[::-1], x.dtype, not x.transposed)


def reshape(x: TensorHandle, shape: Any) -> TensorHandle:
    src = src_here()
    _live(x, src)
    if isinstance(shape, int):
        shape = (shape,)
    shape = tuple(int(s) for s in shape)
    if shape.count(-1) == 1:
        rest = _prod([s for s in shape if s != -1])
        if rest > 0 and x.numel % rest == 0:
            shape = tuple(x.numel // rest if s == -1 else s for s in shape)
    shape = _shape(shape, src, "reshape target")
    if _prod(shape) != x.numel:
        raise ShapeError(f"reshape of {list(x.shape)} ({x.nbytes} bytes) to {list(shape)} "
                         f"({_prod(shape) * x.dtype.itemsize} bytes) does not conserve bytes", src)
    if x.transposed:
        raise ShapeError(f"reshape of a transposed view {list(x.shape)} needs a copy; "
                         "reshape before tl.trans", src)
    return TensorHandle(x.buf, shape, x.dtype)


def broadcast(x: TensorHandle, new_shape: Any) -> TensorHandle:
    """Replicate ``x`` along size-1 axes to ``new_shape``: a real output, ``math/broadcast``."""
    ctx = current()
    src = src_here()
    _live(x, src)
    new_shape = _shape(new_shape, src, "broadcast shape")
    try:
        rules.broadcast_to(x.shape, new_shape)
    except ValueError as exc:
        raise ShapeError(str(exc), src) from None
    n = _prod(new_shape)
    return _emit(ctx, OP.BROADCAST, (x,), new_shape, x.dtype, (n,), src,
                 _attrs(shape=new_shape))


def repeat(x: TensorHandle, axis: int, n: int) -> TensorHandle:
    """Insert a new axis at ``axis`` and replicate ``x`` ``n`` times along it."""
    src = src_here()
    _live(x, src)
    nd = x.ndim + 1
    try:  # the new axis: positions of an (ndim + 1)-axis result
        axis = rules.axis_of((1,) * nd, int(axis))
    except ValueError:
        raise ShapeError(f"repeat axis {axis} out of range for {list(x.shape)}", src) from None
    expanded = reshape(x, x.shape[:axis] + (1,) + x.shape[axis:])
    return broadcast(expanded, x.shape[:axis] + (int(n),) + x.shape[axis:])


# -- GEMM --------------------------------------------------------------------------------
def dot(a: TensorHandle, b: TensorHandle, acc: TensorHandle | None = None,
        out_dtype: Any = dtypes.float32) -> TensorHandle:
    ctx = current()
    src = src_here()
    _live(a, src, "dot a")
    _live(b, src, "dot b")
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise ShapeError(f"dot shapes {list(a.shape)} @ {list(b.shape)} do not fit "
                         f"([M, K] @ [K, N]){hints.dot_shapes(a.shape, b.shape)}", src)
    m, k = a.shape
    n = b.shape[1]
    dt = _dtype(out_dtype, src)
    inputs: tuple[TensorHandle, ...] = (a, b)
    if acc is not None:
        _live(acc, src, "dot acc")
        if acc.shape != (m, n):
            raise ShapeError(f"dot acc is {list(acc.shape)}, result is {[m, n]}", src)
        inputs = (a, b, acc)
    return _emit(ctx, OP.DOT, inputs, (m, n), dt, (m, n, k), src, flops=2 * m * n * k)


# -- MATH --------------------------------------------------------------------------------
_PLAIN = frozenset({int, float})
_SCALAR_ATTRS = BoundedMemo()
#: the result dtype of a table op by its signature: (op, dtype, dtype) for two handles,
#: (op, dtype) for one, (op, position, scalar dtype name, dtype) for a handle and a Python
#: scalar; what ``result_dtype`` answers for the operands spelled out (bounded by the table)
_RESULT: dict[tuple, dtypes.DType] = {}


def _with_scalar(op: Op, h: TensorHandle, pos: int, v: int | float, src: str
                 ) -> tuple[tuple[TensorHandle], dtypes.DType, str]:
    """One handle and one Python scalar at argument position ``pos``: (handles, result
    dtype, attrs)."""
    s = h.buf.scope
    if s is not None and not s.alive:
        _live(h, src)
    # the type too (2 == 2.0 must stay distinct) and a zero's spelling (0.0 == -0.0)
    key = (pos, v, type(v)) if v else (pos, repr(v), type(v))
    got = _SCALAR_ATTRS.get(key)
    if got is None:
        got = _SCALAR_ATTRS.put(key, (_attrs(scalars=((pos, v),)), scalar_dtype(v)),
                                _MEMO_LIMIT)
    attrs, scalar = got
    dt = _RESULT.get((op, pos, scalar, h.dtype))
    if dt is None:
        named = (h.dtype.name, False)
        operands = ((scalar, True), named) if pos == 0 else (named, (scalar, True))
        dt = _RESULT[(op, pos, scalar, h.dtype)] = result_dtype(op, operands, src)
    return (h,), dt, attrs


def binary(op: Op, x: Any, y: Any) -> TensorHandle:
    ctx = current()
    src = src_here()
    if type(x) is TensorHandle and type(y) is TensorHandle:  # the common case, kept lean
        sx, sy = x.buf.scope, y.buf.scope
        if (sx is not None and not sx.alive) or (sy is not None and not sy.alive):
            _live(x, src)
            _live(y, src)
        handles: tuple[TensorHandle, ...] = (x, y)
        shape = x.shape if x.shape == y.shape else broadcast_shapes(x.shape, y.shape, src)
        dt = _RESULT.get((op, x.dtype, y.dtype))
        if dt is None:
            operands: Operands = ((x.dtype.name, False), (y.dtype.name, False))
            dt = _RESULT[(op, x.dtype, y.dtype)] = result_dtype(op, operands, src)
        attrs = "{}"
    elif type(x) is TensorHandle and type(y) in _PLAIN:  # handle (op) scalar
        handles, dt, attrs = _with_scalar(op, x, 1, y, src)
        shape = x.shape
    elif type(y) is TensorHandle and type(x) in _PLAIN:  # scalar (op) handle
        handles, dt, attrs = _with_scalar(op, y, 0, x, src)
        shape = y.shape
    else:
        handles, scalars, operands = arguments(op, (x, y), src)
        shape = handles[0].shape
        for h in handles[1:]:
            shape = broadcast_shapes(shape, h.shape, src)
        attrs = _attrs(scalars=scalars)
        dt = result_dtype(op, operands, src)
    return _emit(ctx, op, handles, shape, dt, None, src, attrs)


def where(cond: TensorHandle, x: Any, y: Any) -> TensorHandle:
    ctx = current()
    src = src_here()
    _live(cond, src, "where cond")
    if cond.dtype is not dtypes.bool_:
        raise DtypeError(f"where cond must be bool, got {cond.dtype.name}", src)
    handles, scalars, operands = arguments(OP.WHERE, (cond, x, y), src)
    shape = cond.shape
    for h in handles[1:]:
        shape = broadcast_shapes(shape, h.shape, src)
    dt = result_dtype(OP.WHERE, operands, src)
    return _emit(ctx, OP.WHERE, handles, shape, dt, (_prod(shape),), src,
                 _attrs(scalars=scalars) if scalars else "{}")


def unary(op: Op, x: TensorHandle) -> TensorHandle:
    ctx = current()
    src = src_here()
    if type(x) is not TensorHandle or (x.buf.scope is not None and not x.buf.scope.alive):
        _live(x, src)  # refuses it
    dt = _RESULT.get((op, x.dtype))
    if dt is None:
        dt = _RESULT[(op, x.dtype)] = result_dtype(op, ((x.dtype.name, False),), src)
    return _emit(ctx, op, (x,), x.shape, dt, None, src)


def cast(x: TensorHandle, dtype: Any, bitcast: bool = False) -> TensorHandle:
    """``x.to(dtype)``; ``bitcast``: the same bits as ``dtype`` (equal widths only)."""
    ctx = current()
    src = src_here()
    _live(x, src)
    dt = _dtype(dtype, src)
    if not bitcast:
        return _emit(ctx, OP.CAST, (x,), x.shape, dt, (x.numel,), src, _attrs(dtype=dt.name))
    if dt.itemsize != x.dtype.itemsize or "bfloat16" in (dt.name, x.dtype.name):
        raise DtypeError(f"bitcast of {x.dtype.name} to {dt.name} is not supported by "
                         "kernbench: the widths must be equal and neither bfloat16", src)
    return _emit(ctx, OP.CAST, (x,), x.shape, dt, (x.numel,), src,
                 _attrs(bitcast=True, dtype=dt.name))


def _reduced(op: Op, x: TensorHandle, axis: int | None, keepdims: bool, src: str
             ) -> tuple[tuple[int, ...], dtypes.DType, str]:
    """A reduction's (shape, dtype, attrs), remembered by (op, shape, dtype, axis, keepdims)."""
    ax = None if axis is None else axis_for(x, axis, src)
    keep = bool(keepdims)
    key = (op, x.shape, x.dtype, ax, keep)
    got = _REDUCED.get(key)
    if got is None:
        shape, dt = infer(op, x, {"axis": ax, "keepdims": keep}, src)
        got = _REDUCED.put(key, (shape, dt, _attrs(axis=ax, keepdims=keep)), _MEMO_LIMIT)
    return got


def reduce(op: Op, x: TensorHandle, axis: int | None = None, keepdims: bool = False
           ) -> TensorHandle:
    ctx = current()
    src = src_here()
    _live(x, src)
    shape, dt, attrs = _reduced(op, x, axis, keepdims, src)
    return _emit(ctx, op, (x,), shape, dt, (x.numel,), src, attrs)


def softmax(x: TensorHandle, axis: int = -1) -> TensorHandle:
    ctx = current()
    src = src_here()
    _live(x, src)
    ax = axis_for(x, axis, src)
    shape, dt = infer(OP.SOFTMAX, x, {"axis": ax}, src)
    return _emit(ctx, OP.SOFTMAX, (x,), shape, dt, (x.numel,), src, _attrs(axis=ax))


_handle.bind_front_end(sys.modules[__name__])  # TensorHandle's operators call into this module


# -- ternary, scan and arg-reduce families -------------------------------------------------
def _family(op: Op, family: Family, src: str) -> None:
    if OPS[op].family is not family:
        raise KernelError(f"{op.value} is not a {family.value} op", src)


def ternary(op: Op, x: Any, y: Any, z: Any) -> TensorHandle:
    """An elementwise op of three arguments (handles or Python scalars at any position),
    numpy broadcasting between the handles."""
    ctx = current()
    src = src_here()
    _family(op, Family.TERNARY, src)
    handles, scalars, operands = arguments(op, (x, y, z), src)
    shape = handles[0].shape
    for h in handles[1:]:
        shape = broadcast_shapes(shape, h.shape, src)
    dt = result_dtype(op, operands, src)
    return _emit(ctx, op, handles, shape, dt, (_prod(shape),), src,
                 _attrs(scalars=scalars) if scalars else "{}")


def scan(op: Op, x: TensorHandle, axis: int = 0, reverse: bool = False) -> TensorHandle:
    """Inclusive scan of ``x`` along ``axis`` (``reverse``: from the end), same shape."""
    ctx = current()
    src = src_here()
    _family(op, Family.SCAN, src)
    _live(x, src)
    ax = axis_for(x, axis, src)
    attrs = _attrs(axis=ax, reverse=True) if reverse else _attrs(axis=ax)
    shape, dt = infer(op, x, {"axis": ax}, src)
    return _emit(ctx, op, (x,), shape, dt, (x.numel,), src, attrs)


def arg_reduce(op: Op, x: TensorHandle, axis: int | None = None, keepdims: bool = False
               ) -> TensorHandle:
    """Index (int32) of the maximum/minimum along ``axis`` (None: of the flattened tile);
    the first such index on ties, as Triton."""
    ctx = current()
    src = src_here()
    _family(op, Family.ARG, src)
    _live(x, src)
    shape, dt, attrs = _reduced(op, x, axis, keepdims, src)
    return _emit(ctx, op, (x,), shape, dt, (x.numel,), src, attrs)
