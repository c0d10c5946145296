"""The kernel-facing ``tl`` API: a thin layer over the semantic checks
(record/lowering/semantics.py).

The table ops (``tl.exp``, ``tl.tanh``, ``tl.sum`` ...) are built from the op table
``kernbench.schemas.ops.OPS`` (docs/adr/0003-one-op-table.md): their names are written out
below, so type checkers and IDEs see them; their docs and checks come from the table."""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import Any, Protocol

from kernbench.record.handle import Pointer, TensorHandle
from kernbench.record.lowering import decide as _decide  # noqa: F401 - binds bool/int/float
from kernbench.record.lowering import semantics as _s
from kernbench.record.lowering.comm import recv, recv_async, send
from kernbench.record.lowering.memory import composite, copy_to, load, ref, store, wait
from kernbench.record.lowering.scope import scratch_scope
from kernbench.record.lowering.semantics import (
    arange,
    broadcast,
    dot,
    full,
    num_programs,
    program_id,
    repeat,
    reshape,
    softmax,
    trans,
    where,
    zeros,
)
from kernbench.schemas.dtypes import (
    DType,
    bfloat16,
    float16,
    float32,
    int8,
    int16,
    int32,
    int64,
    uint8,
    uint32,
)
from kernbench.schemas.dtypes import bool_ as bool  # noqa: A001 - the tl spelling
from kernbench.schemas.ops import OPS, Family, Op

__all__ = [
    "DType", "Pointer", "TensorHandle", "float32", "float16", "bfloat16", "int32", "int8",
    "int64", "int16", "uint8", "uint32", "bool", "program_id", "num_programs", "load", "store",
    "copy_to", "wait", "zeros", "full", "arange", "trans", "reshape", "broadcast", "repeat",
    "dot", "ref", "composite", "where", "softmax", "scratch_scope", "send", "recv", "recv_async",
]


# -- the table ops: one function per OPS entry with ``tl=True``, named here so that type
# checkers and IDEs see them; tests/test_tl_table.py checks this list against the table -----
class _Reduce(Protocol):
    def __call__(self, x: TensorHandle, axis: int | None = None, keepdims: builtins.bool = False
                 ) -> TensorHandle: ...


def _named(fn: Any, op: Op, family: Family) -> None:
    spec = OPS[op]
    if spec.family is not family or not spec.tl:
        raise TypeError(f"tl.{op.value}: the op table has it as {spec.family}, tl={spec.tl}")
    fn.__name__ = fn.__qualname__ = op.value
    fn.__module__ = __name__
    fn.__doc__ = f"``{op.value}``: {spec.doc} (MATH engine, cost class {spec.cost})."
    __all__.append(op.value)


def _unary(op: Op) -> Callable[[TensorHandle], TensorHandle]:
    def fn(x: TensorHandle) -> TensorHandle:
        return _s.unary(op, x)
    _named(fn, op, Family.UNARY)
    return fn


def _binary(op: Op) -> Callable[[Any, Any], TensorHandle]:
    def fn(x: Any, y: Any) -> TensorHandle:
        return _s.binary(op, x, y)
    _named(fn, op, Family.BINARY)
    return fn


def _reduce(op: Op) -> _Reduce:
    def fn(x: TensorHandle, axis: int | None = None, keepdims: builtins.bool = False
           ) -> TensorHandle:
        return _s.reduce(op, x, axis, keepdims)
    _named(fn, op, Family.REDUCE)
    return fn


maximum = _binary(Op.MAXIMUM)
minimum = _binary(Op.MINIMUM)
exp = _unary(Op.EXP)
exp2 = _unary(Op.EXP2)
log = _unary(Op.LOG)
sqrt = _unary(Op.SQRT)
rsqrt = _unary(Op.RSQRT)
abs = _unary(Op.ABS)  # noqa: A001 - the tl spelling
tanh = _unary(Op.TANH)
erf = _unary(Op.ERF)
sigmoid = _unary(Op.SIGMOID)
sum = _reduce(Op.SUM)  # noqa: A001 - the tl spelling
max = _reduce(Op.MAX)  # noqa: A001 - the tl spelling
min = _reduce(Op.MIN)  # noqa: A001 - the tl spelling
