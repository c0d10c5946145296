"""The kernel-facing ``tl`` API: a thin layer over the semantic checks (record/semantics.py).

The table ops (``tl.exp``, ``tl.tanh``, ``tl.sum`` ...) are generated from the op table
``kernbench.schemas.ops.OPS`` (docs/adr/0003-one-op-table.md)."""

from __future__ import annotations

from collections.abc import Callable
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
from kernbench.schemas.ops import OPS, Family, Op

__all__ = [
    "DType", "Pointer", "TensorHandle", "float32", "float16", "bfloat16", "int32", "int8",
    "bool", "program_id", "num_programs", "load", "store", "copy_to", "wait", "zeros", "full",
    "arange", "trans", "reshape", "broadcast", "repeat", "dot", "ref", "composite", "where",
    "softmax", "scratch_scope", "send", "recv", "recv_async",
]


# -- the table ops: one generated function per OPS entry with ``tl=True`` -------------------
def _unary(op: Op) -> Callable[..., TensorHandle]:
    def fn(x: TensorHandle) -> TensorHandle:
        return _s.unary(op, x)
    return fn


def _binary(op: Op) -> Callable[..., TensorHandle]:
    def fn(x: Any, y: Any) -> TensorHandle:
        return _s.binary(op, x, y)
    return fn


def _reduce(op: Op) -> Callable[..., TensorHandle]:
    def fn(x: TensorHandle, axis: int | None = None, keepdims: bool = False) -> TensorHandle:
        return _s.reduce(op, x, axis, keepdims)
    return fn


_CALLING_CONVENTION = {Family.UNARY: _unary, Family.BINARY: _binary, Family.REDUCE: _reduce}

for _op, _spec in OPS.items():
    if _spec.tl:
        _fn = _CALLING_CONVENTION[_spec.family](_op)
        _fn.__name__ = _fn.__qualname__ = _op.value
        _fn.__module__ = __name__
        _fn.__doc__ = f"``{_op.value}``: {_spec.doc} (MATH engine, cost class {_spec.cost})."
        globals()[_op.value] = _fn
        __all__.append(_op.value)
del _op, _spec, _fn


