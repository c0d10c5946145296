"""numpy definitions of the op table's ops that numpy has no single function for (the
table, ``schemas/ops.py``, names them; replay executes them)."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["cas", "erf", "fma", "floordiv", "mod", "rsqrt", "sigmoid", "xchg"]


def rsqrt(x: np.ndarray) -> np.ndarray:
    r = np.asarray(np.sqrt(x))  # a 0-d operand (a reduced scalar) gives a numpy scalar
    return np.reciprocal(r, out=r) if r.dtype.kind == "f" else 1.0 / r


def sigmoid(x: np.ndarray) -> np.ndarray:
    """``1 / (1 + exp(-x))`` as ``exp(-log(1 + exp(-x)))``: no overflow, accurate tails."""
    return np.exp(-np.logaddexp(0, -x))


_ERF = np.frompyfunc(math.erf, 1, 1)


def erf(x: np.ndarray) -> np.ndarray:
    """libm's erf in float64, elementwise (numpy has none); exact before the float32 store."""
    return np.asarray(_ERF(np.asarray(x, dtype=np.float64)), np.float64)  # 0-d: an array too


def fma(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``a * b + c`` rounded once: float operands in float64 (a float32 product is exact
    there), integers in their own type (wrapping)."""
    if all(np.asarray(v).dtype.kind in "biu" for v in (a, b, c)):
        return np.add(np.multiply(a, b), c)
    return np.add(np.multiply(np.asarray(a, np.float64), b), c)


def floordiv(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C integer division: the quotient truncated toward zero (``-7 // 2 == -3``)."""
    a, b = np.asarray(a), np.asarray(b)
    q = np.floor_divide(a, b)
    fix = (np.remainder(a, b) != 0) & ((a < 0) != (b < 0))
    return np.where(fix, q + 1, q).astype(q.dtype, copy=False)


def mod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C remainder: the sign of the dividend (``-7 % 2 == -1``); ``fmod`` for floats."""
    return np.fmod(a, b)


def xchg(old: np.ndarray, value: np.ndarray) -> np.ndarray:
    """atomic_xchg's combine: the new value replaces the old."""
    return np.broadcast_to(value, np.shape(old))


def cas(old: np.ndarray, cmp: np.ndarray, value: np.ndarray) -> np.ndarray:
    """atomic_cas's combine: ``value`` where ``old`` equals ``cmp`` bit for bit (as the
    hardware compares: ``-0.0`` is not ``0.0``, a NaN equals its own bits), else ``old``."""
    old = np.asarray(old)
    bits = np.dtype(f"u{old.dtype.itemsize}")
    same = old.view(bits) == np.asarray(cmp, old.dtype).view(bits)
    return np.where(same, np.asarray(value, old.dtype), old)
