"""The kernel-facing ``tl`` API (SPEC §3): a thin layer over the semantic checks."""

from __future__ import annotations

from typing import Any

from kernbench.record import semantics as _s
from kernbench.record.comm import recv, recv_async, send
from kernbench.record.handle import Pointer, TensorHandle
from kernbench.record.memory import composite, copy_to, load, ref, store, wait
from kernbench.record.scope import scratch_scope
from kernbench.record.semantics import (
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
from kernbench.schemas.dtypes import DType, bfloat16, float16, float32, int8, int32
from kernbench.schemas.dtypes import bool_ as bool  # noqa: A001 - the tl spelling
from kernbench.schemas.ops import Op

__all__ = [
    "DType", "Pointer", "TensorHandle", "float32", "float16", "bfloat16", "int32", "int8",
    "bool", "program_id", "num_programs", "load", "store", "copy_to", "wait", "zeros", "full",
    "arange", "trans", "reshape", "broadcast", "repeat", "dot", "ref", "composite", "maximum",
    "minimum", "where",
    "exp", "exp2", "log", "sqrt", "rsqrt", "abs", "sum", "max", "min", "softmax",
    "scratch_scope", "send", "recv", "recv_async",
]


def maximum(x: Any, y: Any) -> TensorHandle:
    return _s.binary(Op.MAXIMUM, x, y)


def minimum(x: Any, y: Any) -> TensorHandle:
    return _s.binary(Op.MINIMUM, x, y)


def exp(x: TensorHandle) -> TensorHandle:
    return _s.unary(Op.EXP, x)


def exp2(x: TensorHandle) -> TensorHandle:
    return _s.unary(Op.EXP2, x)


def log(x: TensorHandle) -> TensorHandle:
    return _s.unary(Op.LOG, x)


def sqrt(x: TensorHandle) -> TensorHandle:
    return _s.unary(Op.SQRT, x)


def rsqrt(x: TensorHandle) -> TensorHandle:
    return _s.unary(Op.RSQRT, x)


def abs(x: TensorHandle) -> TensorHandle:  # noqa: A001 - the tl spelling
    return _s.unary(Op.ABS, x)


def sum(x: TensorHandle, axis: int | None = None, keepdims: bool = False) -> TensorHandle:  # noqa: A001
    return _s.reduce(Op.SUM, x, axis, keepdims)


def max(x: TensorHandle, axis: int | None = None, keepdims: bool = False) -> TensorHandle:  # noqa: A001
    return _s.reduce(Op.MAX, x, axis, keepdims)


def min(x: TensorHandle, axis: int | None = None, keepdims: bool = False) -> TensorHandle:  # noqa: A001
    return _s.reduce(Op.MIN, x, axis, keepdims)
