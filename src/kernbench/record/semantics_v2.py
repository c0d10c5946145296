"""Record-side entry points of the version-2 op families: ``ternary(op, x, y, z)`` (fma),
``scan(op, x, axis, reverse)`` (cumsum, cumprod) and ``arg_reduce(op, x, axis, keepdims)``
(argmax, argmin). Elementwise unary/binary ops of the table (``floor``, ``and_``, ``mod``
...) and reductions go through ``semantics.unary/binary/reduce`` as before. Shapes and
dtypes follow the op table's semantics (``schemas/semantics.py``); errors are KernelErrors naming
the kernel line."""

from __future__ import annotations

from typing import Any

from kernbench.errors import KernelError
from kernbench.record.context import current
from kernbench.record.handle import TensorHandle
from kernbench.record.operands import arguments, axis_for, infer, live, result_dtype
from kernbench.record.semantics import _attrs, _emit, _prod, broadcast_shapes
from kernbench.record.source import src_here
from kernbench.schemas.ops import OPS, Family, Op


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
    live(x, src)
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
    live(x, src)
    ax = None if axis is None else axis_for(x, axis, src)
    shape, dt = infer(op, x, {"axis": ax, "keepdims": bool(keepdims)}, src)
    return _emit(ctx, op, (x,), shape, dt, (x.numel,), src,
                 _attrs(axis=ax, keepdims=bool(keepdims)))
