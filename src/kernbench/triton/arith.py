"""Elementwise arithmetic on Triton values: Triton's promotion picks the dtype; concrete
operands are computed now (``rules``), anything touching data is recorded (``data``)."""

from __future__ import annotations

import numpy as np

from kernbench.errors import KernelError
from kernbench.record.memo import BoundedMemo
from kernbench.record.source import src_here
from kernbench.triton import data
from kernbench.triton import dtypes as d
from kernbench.triton.dtypes import dtype
from kernbench.triton.value import (
    VALUES,
    Concrete,
    Numeric,
    Operand,
    Pointer,
    Scalar,
    Symbolic,
    Value,
    at,
    concrete,
    plain,
    pointer,
    settled,
    tensor,
)

_SCALAR_TYPES = (bool, int, float, np.bool_, np.integer, np.floating)
#: exact types ``operand`` returns as they are (the usual operands: no constexpr to unwrap)
_AS_IS = frozenset({Concrete, Pointer, Symbolic, int, float, bool})


def operand(x: object, src: str | None = None, what: str = "operand") -> Operand:
    if type(x) in _AS_IS:
        return settled(x)
    x = plain(x)
    if isinstance(x, VALUES):
        return x
    if isinstance(x, _SCALAR_TYPES):
        return x.item() if isinstance(x, np.generic) else x
    raise KernelError(f"{what} {x!r} ({type(x).__name__}) is neither a Triton tensor nor a "
                      "scalar", at(src))


def _dt(x: Numeric) -> tuple[dtype, bool]:
    return (x.dtype, False) if isinstance(x, tensor) else (d.of_scalar(x), True)


def values(x: Concrete | Scalar, t: dtype) -> np.ndarray:
    """Concrete values of ``x`` (a concrete tensor or a scalar) in dtype ``t``."""
    v = x.value if isinstance(x, Concrete) else np.asarray(x)
    return v if v.dtype == t.np else d.cast(v, t)


#: (op, a dtype, a is a scalar, b dtype, b is a scalar) -> (computation, result) dtypes
_TYPES: dict[tuple[str, dtype, bool, dtype, bool], tuple[dtype, dtype]] = {}


def numeric(x: Operand, op: str, src: str | None = None) -> Numeric:
    """``x``, or a KernelError for a pointer (no arithmetic but ``+`` / ``-`` takes one)."""
    if isinstance(x, Pointer):
        raise KernelError(f"{op} of a pointer is not supported by kernbench", at(src))
    return x


def types(op: str, a: Numeric, b: Numeric, src: str | None = None) -> tuple[dtype, dtype]:
    (adt, asc) = (a.dtype, False) if isinstance(a, tensor) else _dt(a)
    (bdt, bsc) = (b.dtype, False) if isinstance(b, tensor) else _dt(b)
    key = (op, adt, asc, bdt, bsc)
    try:
        got = _TYPES.get(key)
        if got is None:
            got = _TYPES[key] = d.result_types(op, adt, asc, bdt, bsc)
        t, out = got
        if asc:
            d.check_scalar(a, t)
        if bsc:
            d.check_scalar(b, t)
    except d.PromotionError as exc:
        raise KernelError(str(exc), at(src)) from None
    return t, out


def binary(op: str, a: object, b: object) -> Value:
    """``a op b`` with Triton's semantics (``op``: an elementwise op of the op table). The
    kernel's line is looked up only when an op is recorded or an error raised."""
    # operand() returns operands of these exact types as they are: not called for them
    x: Operand = a if type(a) in _AS_IS else operand(a)  # type: ignore[assignment]
    y: Operand = b if type(b) in _AS_IS else operand(b)  # type: ignore[assignment]
    if type(x) is Symbolic and x.known is not None:  # decided on: its value is known now
        x = x.known
    if type(y) is Symbolic and y.known is not None:
        y = y.known
    if isinstance(x, Pointer) or isinstance(y, Pointer):
        return _pointer_arith(op, x, y)
    if type(x) is not Symbolic and type(y) is not Symbolic:  # no subclasses: exact types
        return _concrete_binary(op, x, y)  # type: ignore[arg-type]
    t, out = types(op, x, y)
    return data.binary(op, x, y, t, out, src_here())


#: concrete results by (op, operand keys): every program of a launch computes the same index
#: arithmetic (``offs_k < K - k * BLOCK_K`` in each loop step of each program), so it is
#: computed once; bounded (cleared when full: ``MEMO_LIMIT`` entries, ``MEMO_BYTES``), arrays
#: of at most ``MEMO_ELEMENTS``; the arrays are read only, shared by every value holding
#: them, and each carries its own key (``Concrete.memo_key``): a result used again as an operand
#: is never turned into bytes again. ``MEMO`` False: no memo.
_MEMO = BoundedMemo()
MEMO = True
MEMO_LIMIT = 4096
MEMO_ELEMENTS = 1 << 14
MEMO_BYTES = 32 << 20  # and at most this many bytes of keys and results


def memo() -> BoundedMemo:
    """The memo of concrete index arithmetic (its users outside this module: masks)."""
    return _MEMO


def _nbytes(key: tuple) -> int:
    return sum(len(k[-1]) for k in key[1:] if type(k[-1]) is bytes)


def array_key(dt: dtype, v: np.ndarray) -> tuple:
    """The memo key of concrete values ``v`` of Triton dtype ``dt``."""
    return (dt, v.shape, v.dtype.str, v.tobytes())


def _key(x: Concrete | Scalar) -> tuple | None:
    """A hashable key telling apart every operand that could compute differently (the
    Python type of a scalar, a float's sign of zero) or None: not memoised."""
    if isinstance(x, Concrete):
        k = x.memo_key
        if k is None:
            v = x.value
            if v.size > MEMO_ELEMENTS:
                return None
            k = x.memo_key = array_key(x.dtype, v)  # a value's array is never written
        return k
    return (type(x), x.hex() if type(x) is float else x)


def _concrete_binary(op: str, a: Concrete | Scalar, b: Concrete | Scalar,
                     src: str | None = None) -> Concrete:
    key = None
    if MEMO:
        ka = a.memo_key if type(a) is Concrete else None
        kb = b.memo_key if type(b) is Concrete else None
        if ka is None:
            ka = _key(a)
        if kb is None:
            kb = _key(b)
        if ka is not None and kb is not None:
            key = (op, ka, kb)
            got = _MEMO.get(key)
            if got is not None:
                return Concrete(got[1], got[0], got[2])
    t, out = types(op, a, b, src)
    try:
        r = concrete(d.evaluate(op, values(a, t), values(b, t), t, out), out)
    except ZeroDivisionError as exc:
        raise KernelError(f"{exc} in concrete index arithmetic", at(src)) from None
    if key is not None:
        v = r.value
        v.flags.writeable = False
        rkey = r.memo_key = array_key(out, v)
        _MEMO.keep(key, (v, out, rkey), _nbytes(key) + 2 * v.nbytes, MEMO_LIMIT, MEMO_BYTES)
    return r


def _pointer_arith(op: str, a: Operand, b: Operand, src: str | None = None) -> Pointer:
    if op == "add" or op == "sub":
        p, k = (a, b) if isinstance(a, Pointer) else (b, a)
        assert isinstance(p, Pointer), "binary() sends only a pointer operation here"
        if op == "sub" and p is b:
            raise KernelError("integer - pointer is not a pointer", at(src))
        if isinstance(k, Pointer):
            raise KernelError("pointer +/- pointer is not supported by kernbench", at(src))
        kdt = k.dtype if isinstance(k, tensor) else d.of_scalar(k)
        if not kdt.is_int():
            raise KernelError(f"pointer offsets must be integers, got {kdt.name}", at(src))
        if type(k) is Symbolic and k.shape == ():  # a scalar of data picks the address:
            k = k.decided("a pointer offset from data")  # decided on (ADR-0840)
        if op == "sub":
            k = unary("neg", k) if isinstance(k, tensor) else -k
        return _offset(p, k, src)
    raise KernelError(f"operator {op!r} on a pointer is not supported by kernbench (only + and "
                      "-)", at(src))


def _offset(p: Pointer, k: Numeric, src: str | None = None) -> Pointer:
    elem = p.dtype.element_ty
    if isinstance(k, Symbolic) or type(p.offsets) is not np.ndarray:
        return data.symbolic_offsets(p, k, at(src))
    if type(k) is Concrete and k.value.dtype.kind == "i":
        kv = k.value  # signed integers add to int64 offsets exactly, as int64
    else:
        kv = np.asarray(k.value if isinstance(k, Concrete) else k, dtype=np.int64)
    offs = np.add(p.offsets, kv)  # int64 arrays wrap silently
    return Pointer(elem, p.base, offs) if type(offs) is np.ndarray else pointer(p.base, offs, elem)


def value_of(x: object, src: str | None = None, what: str = "operand") -> Value:
    """``x`` as a Triton value: a tensor as it is, a Python number a concrete scalar of its
    Triton type (anything else a KernelError)."""
    v = operand(x, src, what)
    return v if isinstance(v, VALUES) else concrete(np.asarray(v, d.of_scalar(v).np))


def number(x: object, src: str | None, what: str) -> Concrete | Symbolic:
    """``x`` as a concrete or symbolic value (a Python number a concrete scalar); a
    KernelError for a pointer."""
    v = value_of(x, src)
    if isinstance(v, Pointer):
        raise KernelError(f"{what} of a pointer is not supported by kernbench", at(src))
    return v


def unary(op: str, x: object) -> Concrete | Symbolic:
    """``-x``, ``abs(x)`` and the math functions (``op``: an op-table name)."""
    v = number(x, None, op)
    if isinstance(v, Concrete):
        return data.unary_concrete(op, v)
    return data.unary(op, v)


def invert(x: object) -> Value:
    """``~x``: bitwise not of integers, logical not of int1."""
    src = src_here()
    v = value_of(x, src)
    if isinstance(v, Pointer) or not v.dtype.is_int():
        raise KernelError(f"~ needs an integer or boolean operand, got {v.dtype!r}", src)
    if isinstance(v, Concrete):
        return concrete(np.invert(v.value), v.dtype)
    if v.dtype.is_bool():
        return data.binary("eq", v, False, v.dtype, d.int1, src)
    ones = -1 if v.dtype.is_int_signed() else v.dtype.get_int_max_value()  # every bit set
    return data.binary("xor", v, ones, v.dtype, v.dtype, src)


def cast(x: object, dt: object, bitcast: bool = False) -> Concrete | Symbolic:
    """``x.to(dt)``: Triton's cast (float -> int truncates, integers wrap, nonzero is true)."""
    v = value_of(x, None, "cast operand")
    t = dt if type(dt) is dtype else d.by_name(plain(dt))
    if isinstance(v, Pointer):
        raise KernelError("casting a pointer (.to(tl.pointer_type(...))) is not supported by "
                          "kernbench", src_here())
    if bitcast and t.bits != v.dtype.bits:
        raise KernelError(f"bitcast from {v.dtype!r} to {t!r} changes the bit width",
                          src_here())
    if v.dtype is t:
        return v
    if isinstance(v, Concrete):
        return concrete(v.value.view(t.np) if bitcast else d.cast(v.value, t), t)
    return data.cast(v, t, None, bitcast)


def where(cond: object, x: object, y: object) -> Concrete | Symbolic:
    """``tl.where``: x and y promoted as a binary op; concrete when everything is."""
    src = src_here()
    c = operand(cond, src, "where cond")
    a, b = (numeric(operand(v, src), "tl.where", src) for v in (x, y))
    t, _ = types("add", a, b, src)
    if not isinstance(c, VALUES):
        c = concrete(np.asarray(bool(c)))
    elif isinstance(c, Pointer):
        raise KernelError(f"tl.where condition {c!r} is a pointer", src)
    if isinstance(c, Concrete) and not isinstance(a, Symbolic) and not isinstance(b, Symbolic):
        return concrete(np.where(d.cast(c.value, d.int1), values(a, t), values(b, t)), t)
    return data.where(c, a, b, t, src)

