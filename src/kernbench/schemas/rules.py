"""The trace format's shape and dtype inference, as the recorder and the validator ask it:
the op table's semantics objects (``OPS[op].sem``, ``schemas/semantics.py``) under the
``KERNBENCH`` policy, on ``DType`` objects. The recorder allocates outputs with it, replay
validates output operands against it.

Failures are ``ValueError`` with a message naming the shapes; the recorder re-raises it as
a ``ShapeError`` at the kernel line, replay as a "Shape mismatch" at the op.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kernbench.schemas.dtypes import DTYPES, DType
from kernbench.schemas.ops import OPS, Op
from kernbench.schemas.policy import KERNBENCH, PromotionError, axis_of
from kernbench.schemas.semantics import (
    RULES,
    Elementwise,
    broadcast_shapes,
    broadcast_to,
    result_rule,
)

__all__ = ["INFERRED", "RESULT_DTYPE", "PromotionError", "axis_of", "broadcast_shapes",
           "broadcast_to", "infer", "reduce_shape", "result_dtype"]


def _result(rule: Callable[[str, Any], str]) -> Callable[[DType], DType]:
    def result(dt: DType) -> DType:
        return DTYPES[rule(dt.name, KERNBENCH)]

    return result


#: op -> output dtype from the (promoted) operand dtype, for ops whose rule is a function of it
#: (a float operand of an integer-only op is a ValueError naming the op)
RESULT_DTYPE: dict[Op, Callable[[DType], DType]] = {
    op: _result(result_rule(op.value, s.dtype.value, s.ints))
    for op, s in OPS.items() if s.dtype.value in RULES}

#: ops whose output operand ``infer`` determines from the inputs (replay validates those)
INFERRED = frozenset(op for op, s in OPS.items() if s.sem is not None)


@functools.cache
def result_dtype(op: Op, operands: tuple[tuple[str, bool], ...]) -> DType:
    """The output dtype of an elementwise table op from its arguments ``(dtype name, is a
    Python scalar)`` in position order (``policy.scalar_dtype`` names a scalar), cached:
    the recorder asks it once per op. PromotionError (a ValueError) on refused dtypes."""
    sem = OPS[op].sem
    if not isinstance(sem, Elementwise):
        raise TypeError(f"{op.value} is not an elementwise op")
    return DTYPES[sem.dtypes(operands, KERNBENCH)[1]]


def reduce_shape(shape: tuple[int, ...], axis: int | None, keepdims: bool) -> tuple[int, ...]:
    """The shape a reduction over ``axis`` (None: all axes) produces; never 0-d."""
    return KERNBENCH.reduce_shape(shape, axis, keepdims)


def infer(op: Op, shapes: Sequence[tuple[int, ...]], dts: Sequence[DType],
          attrs: Mapping[str, Any]) -> tuple[tuple[int, ...], DType] | None:
    """Output ``(shape, dtype)`` of a table op with these input operands, or None when the
    family's output is not a function of its inputs (memory, dot, ipcq, scope, composite,
    fill). Raises ValueError when the inputs do not fit the op."""
    sem = OPS[op].sem
    if sem is None:
        return None
    shape, name = sem.infer(shapes, [d.name for d in dts], attrs, KERNBENCH)
    return shape, DTYPES[name]
