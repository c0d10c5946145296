"""The arithmetic policies an op's semantics is evaluated under (as Triton's own
``semantic.py`` passes its builder): dtype promotion, integer division by zero, the shape of
a full reduction, the accumulator type of reductions and scans, and the store conversion.

``KERNBENCH`` is the trace format's policy (native ``tl``, the recorder, replay, the
validator); ``TRITON`` is Triton's language (the front end's concrete index arithmetic and
its lowering). Both are data on one set of rules: the op semantics (``schemas/semantics.py``)
take a policy, they never branch on the caller. Dtypes are named by strings: kernbench's
names (``float32`` ... ``bool``) and Triton's (``int1``, ``int64``, ``uint8`` ...).
See docs/adr/0550-one-semantics-per-op-family.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kernbench.schemas.dtypes import V3_DTYPES, by_name, promote_names

__all__ = ["KERNBENCH", "TRITON", "Policy", "PromotionError", "axis_of", "c_floordiv",
           "c_mod", "kind_of", "np_dtype", "wrap_cast"]

_KIND = {"bool": "b", "int1": "b", "int8": "i", "int16": "i", "int32": "i", "int64": "i",
         "uint8": "u", "uint16": "u", "uint32": "u", "uint64": "u", "float16": "f",
         "bfloat16": "f", "float32": "f", "float64": "f"}
_BITS = {"bool": 1, "int1": 1, "bfloat16": 16, **{n: int(np.dtype(n).itemsize * 8) for n in (
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
    "float32", "float64")}}
_KIND_RANK = {"b": 0, "u": 1, "i": 2, "f": 3}  # bool < uint < int < float


class PromotionError(ValueError):
    """Operand dtypes the policy refuses to combine (the caller adds the kernel line: a
    DtypeError; other ValueErrors of the semantics are shape errors)."""


def kind_of(name: str) -> str:
    """numpy's kind letter of a dtype name: ``b``, ``i``, ``u`` or ``f``."""
    try:
        return _KIND[name]
    except KeyError:
        raise PromotionError(f"unknown dtype {name!r}") from None


def np_dtype(name: str) -> np.dtype:
    """The numpy dtype of the values of ``name`` (bfloat16: ``ml_dtypes``; int1: bool)."""
    if name in ("int1", "bool", "bfloat16"):
        return by_name("bool" if name == "int1" else name).np
    return np.dtype(name)


def scalar_dtype(v: object) -> str:
    """The dtype a Python scalar operand stands for (Triton's ``to_tensor_type`` for the
    usual ranges): bool, int32 (int64 beyond), float32."""
    if isinstance(v, bool | np.bool_):
        return "bool"
    if isinstance(v, int | np.integer):
        return "int32" if -2**31 <= int(v) < 2**31 else "int64"
    return "float32"


# -- axes and shapes --------------------------------------------------------------------------
def axis_of(shape: tuple[int, ...], axis: int) -> int:
    """``axis`` normalised into ``[0, ndim)``, or a ValueError naming the shape."""
    if not -len(shape) <= axis < len(shape):
        raise ValueError(f"axis {axis} out of range for shape {list(shape)}")
    return axis % len(shape)


def _reduce_shape(shape: tuple[int, ...], axis: int | None, keepdims: bool, zero_d: bool
                  ) -> tuple[int, ...]:
    if axis is None:
        return (1,) * len(shape) if keepdims else (() if zero_d else (1,))
    ax = axis_of(shape, axis)
    if keepdims:
        return tuple(1 if i == ax else s for i, s in enumerate(shape))
    out = shape[:ax] + shape[ax + 1:]
    return out if out or zero_d else (1,)


# -- C integer division -------------------------------------------------------------------
def c_floordiv(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C integer division: the quotient truncated toward zero (``-7 // 2 == -3``); a zero
    divisor gives numpy's 0 (the policy decides whether it is an error first)."""
    a, b = np.asarray(a), np.asarray(b)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.floor_divide(a, b)
        fix = (np.remainder(a, b) != 0) & ((a < 0) != (b < 0))
    return np.where(fix, q + 1, q).astype(q.dtype, copy=False)


def c_mod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C remainder: the sign of the dividend (``-7 % 2 == -1``); ``fmod`` for floats."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.fmod(a, b)


def wrap_cast(v: np.ndarray, dt: np.dtype) -> np.ndarray:
    """A conversion as C and Triton do it: integers wrap, floats truncate toward zero into
    integers, anything nonzero is true."""
    v = np.asarray(v)
    if v.dtype == dt:
        return v
    with np.errstate(all="ignore"):
        if dt.kind == "b":
            return v != 0
        if dt.kind in "iu" and v.dtype.kind == "f":
            t = np.trunc(v.astype(np.float64))
            return t.astype(np.int64).astype(dt) if dt.kind == "i" else t.astype(dt)
        return v.astype(dt)


def _astype(v: np.ndarray, dt: np.dtype) -> np.ndarray:
    v = np.asarray(v)
    if v.dtype == dt:
        return v
    with np.errstate(all="ignore"):
        return v.astype(dt)


# -- promotion ------------------------------------------------------------------------------
def _kb_operands(operands: Sequence[tuple[str, bool]], divides: bool) -> str:
    """The trace format's rule: tensors promote by rank; a float scalar makes an integer
    computation float32; other scalars take no part."""
    tensors = [n for n, scalar in operands if not scalar]
    if not tensors:
        raise PromotionError("an op of scalars only needs no kernel op")
    dt = tensors[0]
    for n in tensors[1:]:
        dt = _kb_pair(dt, n)
    if kind_of(dt) != "f" and any(s and kind_of(n) == "f" for n, s in operands):
        return "float32"
    return dt


def _kb_pair(a: str, b: str) -> str:
    """The trace format's promotion of two tensor dtypes: by rank, except two integers of
    which one is a version-3 type (int64, uint32 ...), which promote as C's (ADR-0580)."""
    if a != b and "f" not in (kind_of(a), kind_of(b)) and (a in V3_DTYPES or b in V3_DTYPES):
        return integer_promote(a, b)
    return promote_names(a, b)


def integer_promote(a: str, b: str) -> str:
    """C's usual arithmetic conversions between two integer types (no promotion to int32)."""
    ka, kb = kind_of(a), kind_of(b)
    if ka == kb or "b" in (ka, kb):
        return a if _BITS[a] > _BITS[b] else b
    unsigned, signed = (a, b) if ka == "u" else (b, a)
    return unsigned if _BITS[unsigned] >= _BITS[signed] else signed


def _triton_pair(a: str, a_scalar: bool, b: str, b_scalar: bool, divides: bool) -> str:
    """Triton's ``computation_type``: a Python scalar of a kind no higher than the tensor's
    (bool < uint < int < float) takes no part (``x_fp16 * 2.0`` is fp16)."""
    if a_scalar != b_scalar:
        s, t = (a, b) if a_scalar else (b, a)
        if _KIND_RANK[kind_of(s)] <= _KIND_RANK[kind_of(t)]:
            return "float32" if divides and t in ("float16", "bfloat16") else t
    names = (a, b)
    if "float64" in names:
        return "float64"
    if "float32" in names:
        return "float32"
    if "float16" in names:
        return "float32" if divides or "bfloat16" in names else "float16"
    if a == b == "bfloat16":
        return "float32" if divides else "bfloat16"
    if "bfloat16" in names:
        return "float32"
    ka, kb = kind_of(a), kind_of(b)
    if divides and ka != kb and "b" not in (ka, kb):
        raise PromotionError(f"cannot use /, // or % with {a} and {b}: they differ in "
                             "signedness; cast them to the same signedness")
    return integer_promote(a, b)


def _triton_operands(operands: Sequence[tuple[str, bool]], divides: bool) -> str:
    """Triton's promotion folded left over the operands (``fma``: ``x * y``, then ``+ z``)."""
    (dt, scalar), *rest = operands
    for n, s in rest:
        dt = _triton_pair(dt, scalar, n, s, divides)
        scalar = scalar and s
    return dt


def _same(op: str, dt: str) -> str:
    return dt


def _triton_accumulator(op: str, dt: str) -> str:
    """Triton widens a reduction's input: sums and scans of integers under 32 bits to int32,
    max/min (and their arg) of types under 32 bits (or bfloat16) to int32/float32."""
    small = _BITS[dt] < 32
    if op in ("sum", "cumsum", "cumprod"):
        return "int32" if kind_of(dt) != "f" and small else dt
    if small or dt == "bfloat16":
        return "float32" if kind_of(dt) == "f" else "int32"
    return dt


@dataclass(frozen=True, slots=True)
class Policy:
    """One arithmetic policy. ``operands``: the computation dtype of an elementwise op from
    its operands ``(dtype name, is a Python scalar)``; ``accumulator``: the dtype a
    reduction or scan widens its input to; ``store``: the conversion of a computed value to
    the result dtype."""

    name: str
    operands: Callable[[Sequence[tuple[str, bool]], bool], str]
    accumulator: Callable[[str, str], str]
    store: Callable[[np.ndarray, np.dtype], np.ndarray]
    #: an operand as the computation reads it (``computation`` dtype name given)
    load: Callable[[Any, str], Any]
    #: the name of the comparison result type
    bool_name: str
    #: an integer ``//`` or ``%`` by zero raises ZeroDivisionError (else numpy's 0)
    zero_division_raises: bool
    #: a reduction to one element is 0-d (Triton) rather than ``(1,)`` (the trace format)
    zero_d: bool
    #: a float-result op (``/``) of integers computes in float32, not in the integer type
    float_computation: bool
    #: ``where``'s Python scalars take part in the promotion of its value operands
    where_scalars: bool

    def reduce_shape(self, shape: tuple[int, ...], axis: int | None, keepdims: bool
                     ) -> tuple[int, ...]:
        """The shape a reduction over ``axis`` (None: every axis) produces."""
        return _reduce_shape(shape, axis, keepdims, self.zero_d)

    def check_divisor(self, b: object, what: str) -> None:
        """ZeroDivisionError for an integer zero divisor under a policy that refuses it."""
        b = np.asarray(b)
        if self.zero_division_raises and b.dtype.kind in "biu" and np.any(b == 0):
            raise ZeroDivisionError(f"integer {what} by zero")


_LOW_FLOATS = ("float16", "bfloat16")


def _upcast(v: Any, computation: str) -> Any:
    """The trace format computes float16/bfloat16 in float32 (replay's readers); integers as
    they are (numpy's own promotion, then the store conversion); Python scalars stay weak."""
    if not isinstance(v, np.ndarray):
        return v
    return v.astype(np.float32) if v.dtype.kind == "f" and v.dtype.itemsize < 4 or (
        v.dtype.kind == "V") else v


def _to_computation(v: Any, computation: str) -> np.ndarray:
    """Triton computes in the promoted dtype: every operand, scalars too, converted to it."""
    return wrap_cast(np.asarray(v), np_dtype(computation))


KERNBENCH = Policy("kernbench", _kb_operands, _same, _astype, _upcast, "bool",
                   zero_division_raises=False, zero_d=False, float_computation=False,
                   where_scalars=False)
TRITON = Policy("triton", _triton_operands, _triton_accumulator, wrap_cast, _to_computation,
                "int1", zero_division_raises=True, zero_d=True, float_computation=True,
                where_scalars=True)
