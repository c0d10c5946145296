"""Shape and dtype inference of the op table, defined once: the recorder allocates outputs
with it, replay validates output operands against it.

Failures are ``ValueError`` with a message naming the shapes; the recorder re-raises it as
a ``ShapeError`` at the kernel line, replay as a "Shape mismatch" at the op.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kernbench.schemas import dtypes
from kernbench.schemas.dtypes import DType
from kernbench.schemas.ops import OPS, Dt, Family, Op


def _float(dt: DType) -> DType:
    return dt if dt.is_float else dtypes.float32


def _same(dt: DType) -> DType:
    return dt


def _bool(dt: DType) -> DType:
    return dtypes.bool_


def _int32(dt: DType) -> DType:
    return dtypes.int32


def _float32(dt: DType) -> DType:
    return dtypes.float32


_RULES: dict[Dt, Callable[[DType], DType]] = {
    Dt.SAME: _same, Dt.FLOAT: _float, Dt.BOOL: _bool, Dt.INT32: _int32, Dt.FLOAT32: _float32}

def _ints_only(op: Op, rule: Callable[[DType], DType]) -> Callable[[DType], DType]:
    """``rule`` for an op of integer (and bool) operands: a float operand is a ValueError."""
    def result(dt: DType) -> DType:
        if dt.is_float:
            raise ValueError(f"{op.value} needs integer or bool operands, got {dt.name}")
        return rule(dt)

    return result


#: op -> output dtype from the (promoted) operand dtype, for ops whose rule is a function of it
RESULT_DTYPE: dict[Op, Callable[[DType], DType]] = {
    op: _ints_only(op, _RULES[s.dtype]) if s.ints else _RULES[s.dtype]
    for op, s in OPS.items() if s.dtype in _RULES}


#: ops whose output operand ``infer`` determines from the inputs (replay validates those)
INFERRED = frozenset(op for op, s in OPS.items() if s.family in (
    Family.BINARY, Family.WHERE, Family.UNARY, Family.SOFTMAX, Family.COPY, Family.CAST,
    Family.REDUCE, Family.BROADCAST, Family.TERNARY, Family.SCAN, Family.ARG))


def broadcast_shapes(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """numpy broadcasting of two shapes, or a ValueError naming both."""
    if a == b:
        return a
    n = max(len(a), len(b))
    pa_, pb = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    out = []
    for x, y in zip(pa_, pb, strict=True):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            raise ValueError(f"shapes {list(a)} and {list(b)} do not broadcast")
    return tuple(out)


def broadcast_to(shape: tuple[int, ...], new_shape: tuple[int, ...]) -> tuple[int, ...]:
    """``new_shape`` if ``shape`` expands to it (every axis equal or from 1), else ValueError."""
    ok = len(new_shape) >= len(shape) and all(
        a == b or a == 1 for a, b in zip(shape[::-1], new_shape[::-1], strict=False))
    if not ok:
        raise ValueError(f"cannot broadcast {list(shape)} to {list(new_shape)}")
    return new_shape


def axis_of(shape: tuple[int, ...], axis: int) -> int:
    if not -len(shape) <= axis < len(shape):
        raise ValueError(f"axis {axis} out of range for shape {list(shape)}")
    return axis % len(shape)


def reduce_shape(shape: tuple[int, ...], axis: int | None, keepdims: bool) -> tuple[int, ...]:
    """The shape a reduction over ``axis`` (None: all axes) produces; never 0-d."""
    if axis is None:
        return (1,) * len(shape) if keepdims else (1,)
    ax = axis_of(shape, axis)
    if keepdims:
        return tuple(1 if i == ax else s for i, s in enumerate(shape))
    return shape[:ax] + shape[ax + 1:] or (1,)


def _elementwise(shapes: Sequence[tuple[int, ...]]) -> tuple[int, ...]:
    out = shapes[0]
    for s in shapes[1:]:
        out = broadcast_shapes(out, s)
    return out


def _operand_dtype(op: Op, dts: Sequence[DType], scalars: Sequence) -> DType:
    """Promotion of the handle operands; a float scalar makes an integer operand float32."""
    if OPS[op].family is Family.WHERE:
        vals = dts[1:]
        dt = vals[0] if vals else dtypes.float32
        for d in vals[1:]:
            dt = dtypes.promote(dt, d)
        return dt
    dt = dts[0]
    for d in dts[1:]:
        dt = dtypes.promote(dt, d)
    if not dt.is_float and any(isinstance(v, float) for _, v in scalars):
        dt = dtypes.float32
    return dt


def infer(op: Op, shapes: Sequence[tuple[int, ...]], dts: Sequence[DType],
          attrs: Mapping[str, Any]) -> tuple[tuple[int, ...], DType] | None:
    """Output ``(shape, dtype)`` of a table op with these input operands, or None when the
    family's output is not a function of its inputs (memory, dot, ipcq, scope, composite,
    fill). Raises ValueError when the inputs do not fit the op."""
    spec = OPS[op]
    fam = spec.family
    if fam in (Family.BINARY, Family.WHERE, Family.TERNARY):
        shape = _elementwise(shapes)
        dt = _operand_dtype(op, dts, attrs.get("scalars") or ())
    elif fam in (Family.UNARY, Family.SOFTMAX, Family.COPY, Family.SCAN):
        shape, dt = shapes[0], dts[0]
        if fam in (Family.SOFTMAX, Family.SCAN):
            axis_of(shape, int(attrs.get("axis", -1)))
    elif fam is Family.CAST:
        return shapes[0], dtypes.by_name(attrs["dtype"])
    elif fam in (Family.REDUCE, Family.ARG):
        axis = attrs.get("axis")
        shape = reduce_shape(shapes[0], None if axis is None else int(axis),
                             bool(attrs.get("keepdims", False)))
        dt = dts[0]
    elif fam is Family.BROADCAST:
        shape, dt = broadcast_to(shapes[0], tuple(int(s) for s in attrs["shape"])), dts[0]
    else:
        return None
    return shape, RESULT_DTYPE[op](dt)
