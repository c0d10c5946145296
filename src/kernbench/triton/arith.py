"""Elementwise arithmetic on Triton values: Triton's promotion picks the dtype; concrete
operands are computed now (``rules``), anything touching data is recorded (``data``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from kernbench.errors import KernelError
from kernbench.record.memo import BoundedMemo
from kernbench.record.source import src_here
from kernbench.triton import data
from kernbench.triton import dtypes as d
from kernbench.triton.dtypes import dtype
from kernbench.triton.value import CONCRETE, POINTER, SYMBOLIC, concrete, plain, pointer, tensor

_SCALAR_TYPES = (bool, int, float, np.bool_, np.integer, np.floating)


def operand(x: Any, src: str, what: str = "operand") -> tensor | int | float | bool:
    x = plain(x)
    if type(x) is tensor or isinstance(x, _SCALAR_TYPES):
        return x.item() if isinstance(x, np.generic) else x
    raise KernelError(f"{what} {x!r} ({type(x).__name__}) is neither a Triton tensor nor a "
                      "scalar", src)


def _dt(x: Any) -> tuple[dtype, bool]:
    return (x.dtype, False) if type(x) is tensor else (d.of_scalar(x), True)


def values(x: Any, t: dtype) -> np.ndarray:
    """Concrete values of ``x`` (a concrete tensor or a scalar) in dtype ``t``."""
    v = x.value if type(x) is tensor else np.asarray(x)
    return v if v.dtype == t.np else d.cast(v, t)


#: (op, a dtype, a is a scalar, b dtype, b is a scalar) -> (computation, result) dtypes
_TYPES: dict[tuple[str, dtype, bool, dtype, bool], tuple[dtype, dtype]] = {}


def types(op: str, a: Any, b: Any, src: str) -> tuple[dtype, dtype]:
    (adt, asc), (bdt, bsc) = _dt(a), _dt(b)
    key = (op, adt, asc, bdt, bsc)
    try:
        got = _TYPES.get(key)
        if got is None:
            got = _TYPES[key] = d.result_types(op, adt, asc, bdt, bsc)
        t, out = got
        for x, sc in ((a, asc), (b, bsc)):
            if sc:
                d.check_scalar(x, t)
    except d.PromotionError as exc:
        raise KernelError(str(exc), src) from None
    return t, out


def binary(op: str, a: Any, b: Any) -> tensor:
    """``a op b`` with Triton's semantics (``op``: a key of ``d.CONCRETE``)."""
    src = src_here()
    a, b = operand(a, src), operand(b, src)
    if (type(a) is tensor and a.kind == POINTER) or (type(b) is tensor and b.kind == POINTER):
        return _pointer_arith(op, a, b, src)
    if (type(a) is not tensor or a.kind == CONCRETE) and (
            type(b) is not tensor or b.kind == CONCRETE):
        return _concrete_binary(op, a, b, src)
    t, out = types(op, a, b, src)
    return data.binary(op, a, b, t, out, src)


#: concrete results by (op, operand keys): every program of a launch computes the same index
#: arithmetic (``offs_k < K - k * BLOCK_K`` in each loop step of each program), so it is
#: computed once; bounded (cleared when full: ``MEMO_LIMIT`` entries, ``MEMO_BYTES``), arrays
#: of at most ``MEMO_ELEMENTS``; the arrays are read only, shared by every value holding
#: them. ``MEMO`` False: no memo.
_MEMO = BoundedMemo()
MEMO = True
MEMO_LIMIT = 4096
MEMO_ELEMENTS = 1 << 14
MEMO_BYTES = 32 << 20  # and at most this many bytes of keys and results


def _nbytes(key: tuple) -> int:
    return sum(len(k[-1]) for k in key[1:] if type(k[-1]) is bytes)


def _key(x: Any) -> tuple | None:
    """A hashable key telling apart every operand that could compute differently (the
    Python type of a scalar, a float's sign of zero) or None: not memoised."""
    if type(x) is tensor:
        v = x.value
        if v.size > MEMO_ELEMENTS:
            return None
        return (x.dtype, v.shape, v.dtype.str, v.tobytes())
    return (type(x), x.hex() if type(x) is float else x)


def _concrete_binary(op: str, a: Any, b: Any, src: str) -> tensor:
    key = None
    if MEMO:
        ka, kb = _key(a), _key(b)
        if ka is not None and kb is not None:
            key = (op, ka, kb)
            got = _MEMO.get(key)
            if got is not None:
                return tensor(CONCRETE, got[1], got[0].shape, got[0])
    t, out = types(op, a, b, src)
    try:
        r = concrete(d.evaluate(op, values(a, t), values(b, t), t, out), out)
    except ZeroDivisionError as exc:
        raise KernelError(f"{exc} in concrete index arithmetic", src) from None
    if key is not None:
        r.value.flags.writeable = False
        _MEMO.keep(key, (r.value, out), _nbytes(key) + r.value.nbytes, MEMO_LIMIT, MEMO_BYTES)
    return r


def _pointer_arith(op: str, a: Any, b: Any, src: str) -> tensor:
    if op == "add" or op == "sub":
        p, k = (a, b) if type(a) is tensor and a.kind == POINTER else (b, a)
        if op == "sub" and p is b:
            raise KernelError("integer - pointer is not a pointer", src)
        if type(k) is tensor and k.kind == POINTER:
            raise KernelError("pointer +/- pointer is not supported by kernbench", src)
        kdt = k.dtype if type(k) is tensor else d.of_scalar(k)
        if not kdt.is_int():
            raise KernelError(f"pointer offsets must be integers, got {kdt.name}", src)
        if op == "sub":
            k = unary("neg", k) if type(k) is tensor else -k
        return _offset(p, k, src)
    raise KernelError(f"operator {op!r} on a pointer is not supported by kernbench (only + and "
                      "-)", src)


def _offset(p: tensor, k: Any, src: str) -> tensor:
    elem = p.dtype.element_ty
    if type(k) is tensor and k.kind == SYMBOLIC or type(p.value) is not np.ndarray:
        return data.symbolic_offsets(p, k, src)
    kv = np.asarray(k.value if type(k) is tensor else k, dtype=np.int64)
    offs = np.add(p.value, kv)  # int64 arrays wrap silently
    return pointer(p.hbm_base, offs, elem)


_UNARY_CONCRETE = {"neg": np.negative, "abs": np.abs}


def unary(op: str, x: Any) -> tensor:
    """``-x``, ``abs(x)`` and the math functions (``op``: an op-table name)."""
    src = src_here()
    x = operand(x, src)
    if type(x) is not tensor:
        x = concrete(np.asarray(x, d.of_scalar(x).np))
    if x.kind == POINTER:
        raise KernelError(f"{op} of a pointer is not supported by kernbench", src)
    if x.kind == CONCRETE:
        return data.unary_concrete(op, x, src)
    return data.unary(op, x, src)


def invert(x: Any) -> tensor:
    """``~x``: bitwise not of integers, logical not of int1."""
    src = src_here()
    x = operand(x, src)
    if type(x) is not tensor:
        x = concrete(np.asarray(x, d.of_scalar(x).np))
    if not x.dtype.is_int():
        raise KernelError(f"~ needs an integer or boolean operand, got {x.dtype!r}", src)
    if x.kind == CONCRETE:
        return concrete(np.invert(x.value), x.dtype)
    if x.dtype.is_bool():
        return data.binary("eq", x, False, x.dtype, d.int1, src)
    ones = -1 if x.dtype.is_int_signed() else x.dtype.get_int_max_value()  # every bit set
    return data.binary("xor", x, ones, x.dtype, x.dtype, src)


def cast(x: Any, dt: Any, bitcast: bool = False) -> tensor:
    """``x.to(dt)``: Triton's cast (float -> int truncates, integers wrap, nonzero is true)."""
    src = src_here()
    x = operand(x, src, "cast operand")
    t = d.by_name(plain(dt))
    if type(x) is not tensor:
        x = concrete(np.asarray(x, d.of_scalar(x).np))
    if bitcast and t.bits != x.dtype.bits:
        raise KernelError(f"bitcast from {x.dtype!r} to {t!r} changes the bit width", src)
    if x.kind == POINTER:
        raise KernelError("casting a pointer (.to(tl.pointer_type(...))) is not supported by "
                          "kernbench", src)
    if x.dtype is t:
        return x
    if x.kind == CONCRETE:
        return concrete(x.value.view(t.np) if bitcast else d.cast(x.value, t), t)
    return data.cast(x, t, src, bitcast)


def where(cond: Any, x: Any, y: Any) -> tensor:
    """``tl.where``: x and y promoted as a binary op; concrete when everything is."""
    src = src_here()
    cond, x, y = operand(cond, src, "where cond"), operand(x, src), operand(y, src)
    t, _ = types("add", x, y, src)
    if type(cond) is not tensor:
        cond = concrete(np.asarray(bool(cond)))
    if all(type(v) is not tensor or v.kind == CONCRETE for v in (cond, x, y)):
        return concrete(np.where(d.cast(cond.value, d.int1), values(x, t), values(y, t)), t)
    return data.where(cond, x, y, t, src)

