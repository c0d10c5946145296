"""Record-side entry points of the version-2 op families: ``ternary(op, x, y, z)`` (fma),
``scan(op, x, axis, reverse)`` (cumsum, cumprod) and ``arg_reduce(op, x, axis, keepdims)``
(argmax, argmin). Elementwise unary/binary ops of the table (``floor``, ``and_``, ``mod``
...) and reductions go through ``semantics.unary/binary/reduce`` as before. Shapes and
dtypes follow the op table's rules (``schemas/rules.py``); errors are KernelErrors naming
the kernel line."""

from __future__ import annotations

from typing import Any

from kernbench.errors import DtypeError, KernelError, ShapeError
from kernbench.record.context import current
from kernbench.record.handle import TensorHandle
from kernbench.record.semantics import _SCALARS, _attrs, _emit, _live, _prod, broadcast_shapes
from kernbench.record.source import src_here
from kernbench.schemas import dtypes, rules
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
    handles, scalars, shape, dt = [], [], None, None
    for pos, v in enumerate((x, y, z)):
        if isinstance(v, TensorHandle):
            handles.append(_live(v, src))
            shape = v.shape if shape is None else broadcast_shapes(shape, v.shape, src)
            dt = v.dtype if dt is None else dtypes.promote(dt, v.dtype)
        elif isinstance(v, _SCALARS) or hasattr(v, "item"):
            scalars.append((pos, v.item() if hasattr(v, "item") else v))
        else:
            raise KernelError(f"{op.value}: operand {v!r} is neither a handle nor a scalar", src)
    if shape is None or dt is None:
        raise KernelError(f"{op.value} of three scalars needs no kernel op", src)
    if not dt.is_float and any(isinstance(v, float) for _, v in scalars):
        dt = dtypes.float32
    try:
        dt = rules.RESULT_DTYPE[op](dt)
    except ValueError as exc:
        raise DtypeError(str(exc), src) from None
    return _emit(ctx, op, tuple(handles), shape, dt, (_prod(shape),), src,
                 _attrs(scalars=tuple(scalars)) if scalars else "{}")


def _axis(x: TensorHandle, axis: int, src: str) -> int:
    try:
        return rules.axis_of(x.shape, int(axis))
    except ValueError as exc:
        raise ShapeError(str(exc), src) from None


def scan(op: Op, x: TensorHandle, axis: int = 0, reverse: bool = False) -> TensorHandle:
    """Inclusive scan of ``x`` along ``axis`` (``reverse``: from the end), same shape."""
    ctx = current()
    src = src_here()
    _family(op, Family.SCAN, src)
    _live(x, src)
    ax = _axis(x, axis, src)
    attrs = _attrs(axis=ax, reverse=True) if reverse else _attrs(axis=ax)
    return _emit(ctx, op, (x,), x.shape, rules.RESULT_DTYPE[op](x.dtype), (x.numel,), src,
                 attrs)


def arg_reduce(op: Op, x: TensorHandle, axis: int | None = None, keepdims: bool = False
               ) -> TensorHandle:
    """Index (int32) of the maximum/minimum along ``axis`` (None: of the flattened tile);
    the first such index on ties, as Triton."""
    ctx = current()
    src = src_here()
    _family(op, Family.ARG, src)
    _live(x, src)
    if axis is not None:
        axis = _axis(x, axis, src)
    shape = rules.reduce_shape(x.shape, axis, keepdims)
    return _emit(ctx, op, (x,), shape, dtypes.int32, (x.numel,), src,
                 _attrs(axis=axis, keepdims=bool(keepdims)))
