"""An oracle of the op table's semantics, written apart from ``schemas/semantics.py`` and
``schemas/policy.py`` (it imports neither) from the documented rules: the trace format's
(docs/tl.md "Dtypes": numpy's rules on the stored values, float16/bfloat16 read as float32,
integers wrap) and Triton's language (``semantic.py``'s ``computation_type``: every operand,
Python scalars too, converted to the computation type; C's integer conversions).

``expect(op, policy, args, attrs)`` gives the output's shape and dtype name and its values,
computed exactly (Python ints, float64) from the operand values and converted once to the
output dtype, with the precision to compare at (the coarser of the computation's float and
the output's); ``Refused`` or ``ZeroDivisionError`` when the policy refuses the operands.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from tests.replay.oracle import philox_ref

KIND = {"bool": "b", "int1": "b", "int8": "i", "int16": "i", "int32": "i", "int64": "i",
        "uint8": "u", "uint32": "u", "float16": "f", "bfloat16": "f", "float32": "f",
        "float64": "f"}
BITS = {"bool": 1, "int1": 1, "int8": 8, "int16": 16, "int32": 32, "int64": 64, "uint8": 8,
        "uint32": 32, "float16": 16, "bfloat16": 16, "float32": 32, "float64": 64}
#: the trace format's rank of its six dtypes (bfloat16 with float16 is float32)
KB_RANK = {"bool": 0, "int8": 1, "int32": 2, "float16": 3, "bfloat16": 3, "float32": 4}
COMPARE = {"eq", "ne", "lt", "le", "gt", "ge"}
FLOAT_RESULT = {"div", "exp", "exp2", "log", "sqrt", "rsqrt", "tanh", "erf", "sigmoid", "pow",
                "log2", "floor", "ceil", "cos", "sin", "softmax"}
INTEGER_ONLY = {"floordiv", "and_", "or_", "xor", "not_", "shl", "shr"}
DIVIDES = {"div", "floordiv", "mod"}
#: ops numpy computes in the integer type itself (wrapping) when the operands are integers
INTEGER_ARITHMETIC = {"add", "sub", "mul", "maximum", "minimum", "neg", "abs", "fma", "pow",
                      "floordiv", "mod", "and_", "or_", "xor", "not_", "shl", "shr", "sum",
                      "max", "min", "cumsum", "cumprod", "where", "copy", "broadcast"}


class Refused(Exception):
    """The policy refuses these operand dtypes."""


def np_dtype(name: str) -> np.dtype:
    return np.dtype({"bool": "bool", "int1": "bool", "bfloat16": ml_dtypes.bfloat16}.get(
        name, name))


def name_of(a: Any) -> str:
    dt = np.asarray(a).dtype
    return "bfloat16" if dt == np_dtype("bfloat16") else ("bool" if dt.kind == "b" else
                                                          dt.name)


def scalar_name(v: object) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int32" if -2**31 <= v < 2**31 else "int64"
    return "float32"


# -- dtypes ---------------------------------------------------------------------------------
def _kb_computation(tensors: list[str], scalars: list[object]) -> str:
    dt = tensors[0]
    for n in tensors[1:]:
        if n != dt:
            dt = "float32" if KB_RANK[n] == KB_RANK[dt] else max(dt, n, key=KB_RANK.get)
    if KIND[dt] != "f" and any(isinstance(s, float) for s in scalars):
        return "float32"
    return dt


def _integer_promote(a: str, b: str) -> str:
    """Triton's ``integer_promote_impl`` (int1 is signed there, as ``int1``'s name says)."""
    ua, ub = KIND[a] == "u", KIND[b] == "u"
    if ua == ub:
        return a if BITS[a] > BITS[b] else b
    unsigned, signed = (a, b) if ua else (b, a)
    return unsigned if BITS[unsigned] >= BITS[signed] else signed


def _triton_pair(a: str, a_scalar: bool, b: str, b_scalar: bool, divides: bool) -> str:
    rank = {"b": 0, "u": 1, "i": 2, "f": 3}
    if a_scalar != b_scalar:  # a scalar of a kind no higher than the tensor's takes no part
        s, t = (a, b) if a_scalar else (b, a)
        if rank[KIND[s]] <= rank[KIND[t]]:
            return "float32" if divides and t in ("float16", "bfloat16") else t
    pair = {a, b}
    for wide in ("float64", "float32"):
        if wide in pair:
            return wide
    if "float16" in pair:  # with bfloat16: float32 (kernbench's choice; Triton says fp16)
        return "float32" if divides or "bfloat16" in pair else "float16"
    if "bfloat16" in pair:
        return "float32" if divides or pair != {"bfloat16"} else "bfloat16"
    if divides and KIND[a] != KIND[b] and "b" not in (KIND[a], KIND[b]):
        raise Refused(f"{a} and {b} differ in signedness")
    return _integer_promote(a, b)


def _result(op: str, t: str, triton: bool) -> str:
    if op in COMPARE:
        return "int1" if triton else "bool"
    if op in FLOAT_RESULT:
        return t if KIND[t] == "f" else "float32"
    return t


def _accumulator(op: str, dt: str, triton: bool) -> str:
    if not triton:
        return dt
    small = BITS[dt] < 32
    if op in ("sum", "cumsum", "cumprod"):
        return "int32" if KIND[dt] != "f" and small else dt
    if small or dt == "bfloat16":
        return "float32" if KIND[dt] == "f" else "int32"
    return dt


# -- exact values and the one conversion ----------------------------------------------------
def exact(a: Any) -> np.ndarray:
    """An object array of Python ints (integer and bool values) or float64 numbers."""
    arr = np.asarray(a)
    if arr.dtype.kind in "biu":
        return np.vectorize(int, otypes=[object])(arr.astype(np.int64 if arr.dtype.kind != "u"
                                                             else np.uint64))
    return np.vectorize(np.float64, otypes=[object])(arr.astype(np.float64))


def convert(v: np.ndarray, dt: str) -> np.ndarray:
    """C's conversion of exact values to ``dt``: nonzero is true, integers wrap, floats
    truncate toward zero into integers, round to nearest into floats."""
    v = np.asarray(v, dtype=object)
    if KIND[dt] == "b":
        return np.vectorize(lambda x: bool(x != 0), otypes=[bool])(v).astype(bool)
    if KIND[dt] in "iu":
        mod = 1 << BITS[dt]

        def wrap(x: Any) -> int:
            n = int(x) % mod  # int() truncates a float toward zero
            return n - mod if KIND[dt] == "i" and n >= mod // 2 else n
        return np.vectorize(wrap, otypes=[object])(v).astype(np_dtype(dt))
    with np.errstate(all="ignore"):
        return np.vectorize(float, otypes=[np.float64])(v).astype(np_dtype(dt))


def _f(x: Any) -> np.float64:
    return np.float64(x)


def _cdiv(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


SCALAR = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": lambda a, b: _f(a) / _f(b), "maximum": max, "minimum": min,
    "eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
    "where": lambda c, x, y: x if c else y,
    "exp": lambda a: np.exp(_f(a)), "exp2": lambda a: np.exp2(_f(a)),
    "log": lambda a: np.log(_f(a)), "log2": lambda a: np.log2(_f(a)),
    "sqrt": lambda a: np.sqrt(_f(a)), "rsqrt": lambda a: _f(1) / np.sqrt(_f(a)),
    "abs": abs, "neg": lambda a: -a, "tanh": lambda a: np.tanh(_f(a)),
    "erf": lambda a: _f(math.erf(a)), "sigmoid": lambda a: _f(1) / (1 + np.exp(-_f(a))),
    "fma": lambda a, b, c: a * b + c if all(isinstance(v, int) for v in (a, b, c))
    else _f(a) * _f(b) + _f(c),
    "floordiv": lambda a, b: 0 if b == 0 else _cdiv(a, b),
    "mod": lambda a, b: (0 if b == 0 else a - b * _cdiv(a, b)) if isinstance(a, int)
    and isinstance(b, int) else (_f(math.fmod(a, b)) if b != 0 else _f("nan")),
    "and_": lambda a, b: a & b, "or_": lambda a, b: a | b, "xor": lambda a, b: a ^ b,
    "shl": lambda a, b: a << b if b >= 0 else 0,  # out of range: undefined, not compared
    "shr": lambda a, b: a >> b if b >= 0 else 0,
    "pow": lambda a, b: a ** b if isinstance(a, int) and isinstance(b, int) else _f(a) ** _f(b),
    "floor": lambda a: _f(math.floor(a)) if math.isfinite(a) else _f(a),
    "ceil": lambda a: _f(math.ceil(a)) if math.isfinite(a) else _f(a),
    "cos": lambda a: np.cos(_f(a)), "sin": lambda a: np.sin(_f(a)),
}


@dataclass(frozen=True)
class Expected:
    shape: tuple[int, ...]
    dtype: str
    values: np.ndarray  # in ``dtype``
    precision: str | None  # the float to compare at (None: exactly)
    defined: np.ndarray | None = None  # where the op is defined (shifts in range)


def _precision(out: str, computed: str | None) -> str | None:
    floats = [d for d in (out, computed) if d is not None and KIND[d] == "f"]
    return min(floats, key=lambda d: np.finfo(np_dtype(d)).nmant) if floats else None


def expect(op: str, triton: bool, args: list[Any], attrs: dict[str, Any]) -> Expected:
    scalars = {int(p) for p, _ in attrs.get("scalars") or ()}
    tensors = [a for k, a in enumerate(args) if k not in scalars]
    if op == "philox":
        return _philox(args, scalars, tensors, attrs)
    if op in ("sum", "max", "min", "argmax", "argmin", "cumsum", "cumprod", "softmax", "cast",
              "broadcast", "copy"):
        return _single(op, triton, np.asarray(args[0]), attrs)
    operands = [(scalar_name(a), True) if k in scalars else (name_of(a), False)
                for k, a in enumerate(args)]
    values = [a if k in scalars else exact(a) for k, a in enumerate(args)]
    if op == "where":
        operands, cond = operands[1:], np.asarray(args[0]).astype(bool)
    if triton:
        (t, scalar), *rest = operands
        for n, s in rest:
            t, scalar = _triton_pair(t, scalar, n, s, op in DIVIDES), scalar and s
    else:
        named = [n for n, s in operands if not s] or ["float32"]  # where: no tensor value
        t = _kb_computation(named, [] if op == "where" else  # where's scalars take no part
                            [a for k, a in enumerate(args) if k in scalars])
    if op in INTEGER_ONLY and KIND[t] == "f":
        raise Refused(f"{op} needs integer operands, got {t}")
    out = _result(op, t, triton)
    if triton and KIND[out] == "f" and KIND[t] != "f":
        t = out  # Triton computes a float op of integers in the float
    computed = t
    if triton:  # every operand (scalars too) converted to the computation type
        start = 1 if op == "where" else 0
        values[start:] = [exact(convert(np.asarray(v, dtype=object), t)) for v in
                          values[start:]]
        if op in ("floordiv", "mod") and KIND[t] != "f" and np.any(values[1] == 0):
            raise ZeroDivisionError(f"integer {op} by zero")
    elif KIND[t] != "f" and KIND[out] == "f" and op not in INTEGER_ARITHMETIC:
        # numpy computes a float op of integers in the smallest float holding them
        computed = str(np.promote_types(np_dtype(t), np.float16))
    if op == "where":
        values[0] = cond
    shape = np.broadcast_shapes(*(np.shape(a) for a in tensors))
    with np.errstate(all="ignore"):
        fn = SCALAR[op] if op != "not_" else (lambda v: int(not v)) if KIND[t] == "b" else (
            lambda v: ~v)  # logical for bool, bitwise for integers
        raw = np.frompyfunc(fn, len(values), 1)(*values)
    raw = np.broadcast_to(np.asarray(raw, dtype=object), shape)
    if KIND[t] in "biu" and op in INTEGER_ARITHMETIC and op != "where":
        raw = exact(convert(raw, t))  # computed in the integer type: it wrapped there
    defined = None
    if op in ("shl", "shr"):
        count = np.broadcast_to(np.asarray(values[1], dtype=object), shape)
        defined = np.vectorize(lambda c: 0 <= c < BITS[t], otypes=[bool])(count)
    return Expected(tuple(shape), out, convert(raw, out), _precision(out, computed), defined)


def _philox(args: list[Any], scalars: set[int], tensors: list[Any], attrs: dict[str, Any]
            ) -> Expected:
    """One uint32 word of Philox-4x32 of (seed, c0, c1, c2, c3), by the plain Python
    generator of ``tests/replay/oracle.py``; both policies alike."""
    shape = tuple(np.broadcast_shapes(*(np.shape(a) for a in tensors)))
    vals = [np.broadcast_to(np.asarray(a, dtype=object) if k in scalars else exact(a), shape)
            for k, a in enumerate(args)]
    word, rounds = int(attrs.get("word", 0)), int(attrs.get("n_rounds", 10))
    raw = np.frompyfunc(lambda s, *c: philox_ref(int(s), tuple(int(v) for v in c), rounds
                                                 )[word], 5, 1)(*vals)
    return Expected(shape, "uint32", convert(np.asarray(raw, dtype=object), "uint32"), None)


def _single(op: str, triton: bool, x: np.ndarray, attrs: dict[str, Any]) -> Expected:
    dt = name_of(x)
    if op == "copy":
        return Expected(x.shape, dt, x.copy(), None)
    if op == "broadcast":
        shape = tuple(int(s) for s in attrs["shape"])
        return Expected(shape, dt, np.broadcast_to(x, shape).copy(), None)
    if op == "cast":
        out = str(attrs["dtype"])
        return Expected(x.shape, out, convert(exact(x), out), None)
    if op == "softmax":
        out = dt if KIND[dt] == "f" else "float32"
        f = x.astype(np.float32).astype(np.float64)  # read in float32, then exactly
        e = np.exp(f - f.max(axis=attrs["axis"], keepdims=True))
        return Expected(x.shape, out, (e / e.sum(axis=attrs["axis"], keepdims=True)).astype(
            np_dtype(out)), _precision(out, "float32"))
    acc = _accumulator(op, dt, triton)
    vals = exact(convert(exact(x), acc))
    if op in ("cumsum", "cumprod"):
        axis, fn = attrs.get("axis", 0), (lambda a, b: a + b) if op == "cumsum" else (
            lambda a, b: a * b)
        if attrs.get("reverse"):
            vals = np.flip(vals, axis)
        raw = np.frompyfunc(fn, 2, 1).accumulate(vals, axis=axis, dtype=object)
        if attrs.get("reverse"):
            raw = np.flip(raw, axis)
        raw = exact(convert(raw, acc)) if KIND[acc] != "f" else raw
        return Expected(x.shape, acc, convert(raw, acc), _precision(acc, acc))
    axis, keep = attrs.get("axis"), bool(attrs.get("keepdims"))
    if op in ("argmax", "argmin"):
        f = vals.astype(np.float64)
        pick = np.argmax if op == "argmax" else np.argmin
        raw, out = pick(f, axis=axis, keepdims=keep), "int32"
    else:
        fn = np.frompyfunc({"sum": lambda a, b: a + b, "max": max, "min": min}[op], 2, 1)
        if axis is None:  # over every axis: the flattened values, in the reduced shape
            raw = np.asarray(fn.reduce(vals.ravel(), axis=0, dtype=object), dtype=object
                             ).reshape((1,) * x.ndim if keep else ())
        else:
            raw = fn.reduce(vals, axis=axis, keepdims=keep, dtype=object)
        out = acc
    raw = np.asarray(raw, dtype=object)
    if raw.shape == () and not triton:
        raw = raw.reshape(1)  # the trace format's full reduction is (1,), Triton's 0-d
    return Expected(raw.shape, out, convert(raw, out), _precision(out, acc))


def agree(got: np.ndarray, want: Expected, what: object) -> None:
    """``got`` is ``want``: its shape, its dtype, and its values (exactly for integers and
    bools; within 8 units in the last place of ``want.precision`` for floats)."""
    assert got.shape == want.shape, (what, got.shape, want.shape)
    assert got.dtype == np_dtype(want.dtype), (what, got.dtype, want.dtype)
    g, w = np.asarray(got), np.asarray(want.values)
    if want.defined is not None:
        g, w = g[want.defined], w[want.defined]
    if want.precision is None:
        np.testing.assert_array_equal(g, w, err_msg=str(what))
        return
    g64, w64 = g.astype(np.float64), w.astype(np.float64)
    eps = 8 * float(np.finfo(np_dtype(want.precision)).eps)
    finite = w64[np.isfinite(w64)]
    scale = max(1.0, float(np.abs(finite).max())) if finite.size else 1.0
    np.testing.assert_allclose(g64, w64, rtol=eps, atol=eps * scale, equal_nan=True,
                               err_msg=str(what))
