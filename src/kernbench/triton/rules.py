"""Triton's arithmetic rules where they differ from numpy's: type promotion (with weak Python
scalars), C-style integer ``//`` and ``%`` (truncate toward zero; the remainder has the sign
of the dividend), wrap-around of fixed-width integers, casts.

The elementwise functions themselves are the op table's (``OPS[op].numpy``) where they match
Triton's semantics; only the Triton-specific ones live here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from kernbench.schemas.ops import OPS, Op
from kernbench.triton import dtypes as d
from kernbench.triton.dtypes import dtype

_KIND_RANK = {"b": 0, "u": 1, "i": 2, "f": 3}  # bool < uint < int < fp
_FLOAT_RANK = {"float16": 1, "bfloat16": 1, "float32": 2, "float64": 3}


class PromotionError(TypeError):
    """Operands Triton's compiler refuses to combine (the caller adds the kernel line)."""


def integer_promote(a: dtype, b: dtype) -> dtype:
    """C's usual arithmetic conversions between two integer types (no promotion to int32)."""
    if a.kind == b.kind or "b" in (a.kind, b.kind):
        return a if a.bits > b.bits else b
    unsigned, signed = (a, b) if a.kind == "u" else (b, a)
    return unsigned if unsigned.bits >= signed.bits else signed


def computation_type(a: dtype, a_scalar: bool, b: dtype, b_scalar: bool,
                     div_or_mod: bool = False) -> dtype:
    """The dtype a binary op computes in. A Python scalar of a kind no higher than the
    tensor's (bool < uint < int < float) does not take part (``x_fp16 * 2.0`` is fp16)."""
    if a_scalar != b_scalar:
        s, t = (a, b) if a_scalar else (b, a)
        if _KIND_RANK[s.kind] <= _KIND_RANK[t.kind]:
            if div_or_mod and t.name in ("float16", "bfloat16"):
                return d.float32
            return t
    if "float64" in (a.name, b.name):
        return d.float64
    if "float32" in (a.name, b.name):
        return d.float32
    if "float16" in (a.name, b.name):
        return d.float32 if div_or_mod or "bfloat16" in (a.name, b.name) else d.float16
    if a.name == b.name == "bfloat16":
        return d.float32 if div_or_mod else d.bfloat16
    if "bfloat16" in (a.name, b.name):
        return d.float32
    if div_or_mod and a.kind != b.kind and "b" not in (a.kind, b.kind):
        raise PromotionError(f"cannot use /, // or % with {a.name} and {b.name}: they differ in "
                             "signedness; cast them to the same signedness")
    return integer_promote(a, b)


def truediv_type(a: dtype, a_scalar: bool, b: dtype, b_scalar: bool) -> dtype:
    """``/``: integers divide in fp32; otherwise the promoted float type."""
    t = computation_type(a, a_scalar, b, b_scalar, True)
    return d.float32 if t.is_int() else t


def check_scalar(x: Any, t: dtype) -> None:
    """A Python integer that meets an integer type must fit it (Triton raises otherwise)."""
    if t.is_int() and not t.is_bool() and isinstance(x, int | np.integer) and not isinstance(
            x, bool):
        info = np.iinfo(t.np)
        if not info.min <= int(x) <= info.max:
            raise PromotionError(f"scalar {x} is out of range for type {t.name}")
        if x < 0 and t.kind == "u":
            raise PromotionError(f"cannot combine unsigned {t.name} with the negative scalar "
                                 f"{x}; cast one of them explicitly")


def cast(v: np.ndarray, t: dtype) -> np.ndarray:
    """Triton's cast of concrete values: integers wrap, floats truncate toward zero into
    integers, anything nonzero is true."""
    v = np.asarray(v)
    if v.dtype == t.np:
        return v
    with np.errstate(all="ignore"):
        if t.is_bool():
            return v != 0
        if t.is_int() and v.dtype.kind == "f":
            v = np.trunc(v.astype(np.float64))
            return v.astype(np.int64).astype(t.np) if t.kind == "i" else v.astype(t.np)
        return v.astype(t.np)


def _c_floordiv(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer division truncating toward zero (C, Triton), not flooring (Python, numpy)."""
    if np.any(b == 0):
        raise ZeroDivisionError("integer division by zero")
    q = np.floor_divide(a, b)
    fix = (q * b != a) & ((a < 0) != (b < 0))
    return (q + fix.astype(q.dtype)).astype(q.dtype)


def _c_mod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The remainder of C's truncating division: the sign of the dividend; floats: fmod."""
    if a.dtype.kind == "f":
        return np.fmod(a, b)
    if np.any(b == 0):
        raise ZeroDivisionError("integer modulo by zero")
    return (a - _c_floordiv(a, b) * b).astype(a.dtype)


def _shr(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.right_shift(a, b)  # arithmetic for signed, logical for unsigned, as Triton


def _table(name: str) -> Callable[..., np.ndarray]:
    return OPS[Op(name)].numpy  # type: ignore[return-value]


#: Triton binary op -> the concrete evaluation (numpy, in the computation dtype)
CONCRETE: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "add": _table("add"), "sub": _table("sub"), "mul": _table("mul"), "div": _table("div"),
    "maximum": _table("maximum"), "minimum": _table("minimum"),
    "lt": _table("lt"), "le": _table("le"), "gt": _table("gt"), "ge": _table("ge"),
    "eq": _table("eq"), "ne": _table("ne"),
    "floordiv": _c_floordiv, "mod": _c_mod,
    "and_": np.bitwise_and, "or_": np.bitwise_or, "xor": np.bitwise_xor,
    "shl": np.left_shift, "shr": _shr,
}
COMPARISONS = frozenset({"lt", "le", "gt", "ge", "eq", "ne"})
INTEGER_ONLY = frozenset({"floordiv", "and_", "or_", "xor", "shl", "shr"})
DIV_OR_MOD = frozenset({"floordiv", "mod"})


def result_types(op: str, a: dtype, a_scalar: bool, b: dtype, b_scalar: bool
                 ) -> tuple[dtype, dtype]:
    """(computation dtype, result dtype) of a binary op, or PromotionError."""
    if op == "div":
        t = truediv_type(a, a_scalar, b, b_scalar)
    else:
        t = computation_type(a, a_scalar, b, b_scalar, op in DIV_OR_MOD)
    if op in INTEGER_ONLY and not t.is_int():
        raise PromotionError(f"{op.rstrip('_')} needs integer operands, got {a.name} and {b.name}")
    return t, (d.int1 if op in COMPARISONS else t)


def evaluate(op: str, a: np.ndarray, b: np.ndarray, t: dtype, out: dtype) -> np.ndarray:
    """``a op b`` on concrete values already cast to ``t``, wrapping fixed-width integers."""
    with np.errstate(all="ignore"):
        r = np.asarray(CONCRETE[op](a, b))
    return r if r.dtype == out.np else cast(r, out)
