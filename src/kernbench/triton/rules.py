"""Triton's arithmetic rules as the front end asks them: the op table's semantics
(``OPS[op].sem``, ``schemas/semantics.py``) under the ``TRITON`` policy
(``schemas/policy.py``: promotion with weak Python scalars, C-style integer ``//`` and ``%``
that refuse a zero divisor, wrap-around of fixed-width integers), on Triton dtypes. No rule
is defined here; this module converts between Triton dtypes and the policy's dtype names.
"""

from __future__ import annotations

import numpy as np

from kernbench.schemas import policy
from kernbench.schemas.ops import OPS, Op
from kernbench.schemas.policy import TRITON, PromotionError
from kernbench.schemas.semantics import Elementwise
from kernbench.triton import dtypes as d
from kernbench.triton.dtypes import dtype

__all__ = ["PromotionError", "cast", "check_scalar", "computation_type", "evaluate",
           "integer_promote", "result_types", "truediv_type"]


def integer_promote(a: dtype, b: dtype) -> dtype:
    """C's usual arithmetic conversions between two integer types (no promotion to int32)."""
    return d.by_name(policy.integer_promote(a.name, b.name))


def computation_type(a: dtype, a_scalar: bool, b: dtype, b_scalar: bool,
                     div_or_mod: bool = False) -> dtype:
    """The dtype a binary op computes in (``TRITON.operands``)."""
    return d.by_name(TRITON.operands(((a.name, a_scalar), (b.name, b_scalar)), div_or_mod))


def truediv_type(a: dtype, a_scalar: bool, b: dtype, b_scalar: bool) -> dtype:
    """``/``: integers divide in fp32; otherwise the promoted float type."""
    return result_types("div", a, a_scalar, b, b_scalar)[0]


def check_scalar(x: object, t: dtype) -> None:
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
    """Triton's cast of concrete values (``TRITON.store``): integers wrap, floats truncate
    toward zero into integers, anything nonzero is true."""
    return TRITON.store(np.asarray(v), t.np)


def _sem(op: str) -> Elementwise:
    s = OPS[Op(op)].sem
    if not isinstance(s, Elementwise):  # pragma: no cover - the front end names table ops
        raise PromotionError(f"{op} is not an elementwise op")
    return s


def result_types(op: str, a: dtype, a_scalar: bool, b: dtype, b_scalar: bool
                 ) -> tuple[dtype, dtype]:
    """(computation dtype, result dtype) of a binary table op, or PromotionError."""
    t, out = _sem(op).dtypes(((a.name, a_scalar), (b.name, b_scalar)), TRITON)
    return d.by_name(t), d.by_name(out)


def evaluate(op: str, a: np.ndarray, b: np.ndarray, t: dtype, out: dtype) -> np.ndarray:
    """``a op b`` on concrete values already cast to ``t``, wrapping fixed-width integers
    (an integer ``//`` or ``%`` by zero is a ZeroDivisionError, as Triton)."""
    with np.errstate(all="ignore"):
        r = np.asarray(_sem(op).evaluator({}, TRITON)(a, b))
    return r if r.dtype == out.np else cast(r, out)
