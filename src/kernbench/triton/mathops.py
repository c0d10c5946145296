"""``tl`` math: elementwise functions, reductions and scans, ``dot``. Each is the op table's
op (``schemas/ops.py``) with Triton's dtype rules checked first."""

from __future__ import annotations

import builtins
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from kernbench.errors import DtypeError, KernelError, ShapeError
from kernbench.record.lowering import semantics as sem_
from kernbench.record.memo import BoundedMemo
from kernbench.record.source import src_here
from kernbench.schemas.ops import OPS, Op
from kernbench.schemas.policy import TRITON, axis_of
from kernbench.schemas.semantics import Reduce, Scan
from kernbench.triton import arith, data
from kernbench.triton import dtypes as d
from kernbench.triton.core import constexpr_int
from kernbench.triton.value import (
    Concrete,
    Pointer,
    Symbolic,
    Value,
    at,
    concrete,
    plain,
    tensor,
)

#: math functions Triton accepts on fp32 (and fp64) only, as libdevice does
_FP32_ONLY = frozenset({"exp", "exp2", "log", "log2", "sqrt", "rsqrt", "erf", "floor", "ceil",
                        "cos", "sin", "sigmoid", "tanh"})


def fp32_or_fp64(x: object, src: str | None, what: str) -> Concrete | Symbolic:
    """``x`` as a float32 or float64 value, or the DtypeError Triton's libdevice gives."""
    v = arith.value_of(x, src)
    if isinstance(v, Pointer) or v.dtype.name not in ("float32", "float64"):
        raise DtypeError(f"{what} expects fp32 or fp64, got {v.dtype!r} (cast with "
                         ".to(tl.float32) first, as Triton requires)", at(src))
    return v


def _math1(op: str) -> Callable[..., Concrete | Symbolic]:
    fp32_only = op in _FP32_ONLY

    def fn(x: object, *_rounding: object, **_kw: object) -> Concrete | Symbolic:
        v = fp32_or_fp64(x, None, f"tl.{op}") if fp32_only else arith.value_of(x)
        return arith.unary(op, v)
    fn.__name__ = fn.__qualname__ = op
    return fn


MATH1 = {name: _math1(name) for name in (
    "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sigmoid", "tanh", "erf", "abs", "floor",
    "ceil", "cos", "sin")}


def maximum(x: object, y: object, propagate_nan: object = None) -> Value:
    return arith.binary("maximum", x, y)


def minimum(x: object, y: object, propagate_nan: object = None) -> Value:
    return arith.binary("minimum", x, y)


def clamp(x: object, min: object, max: object,  # noqa: A002
          propagate_nan: object = None) -> Value:
    return minimum(maximum(x, min), max)


def fdiv(x: object, y: object, ieee_rounding: bool = False) -> Value:
    return arith.binary("div", x, y)


div_rn = fdiv


def fma(x: object, y: object, z: object) -> Value:
    """``x * y + z`` (fused where the semantics layer offers ``fma``, else two ops)."""
    src = src_here()
    vals = [arith.value_of(v, src) for v in (x, y, z)]
    ternary = sem_.ternary
    if any(isinstance(v, Symbolic) for v in vals):
        nums = [arith.number(v, src, "tl.fma") for v in vals]
        t, _ = arith.types("mul", nums[0], nums[1], src)
        t, _ = arith.types("add", concrete(np.zeros((), t.np), t), nums[2], src)
        hs = [data.handle(v, t, src) for v in nums]
        return data.symbolic(ternary(data.table_op("fma", src), *(h.handle for h in hs)))
    return arith.binary("add", arith.binary("mul", vals[0], vals[1]), vals[2])


# -- reductions: the op table's semantics under the TRITON policy ----------------------------
def _axis(x: tensor, axis: object, src: str) -> int | None:
    axis = plain(axis)
    if axis is None:
        return None
    if isinstance(axis, tensor):
        raise KernelError(f"reduction axis must be a tl.constexpr, got a tensor {axis!r}", src)
    try:
        return axis_of(x.shape, constexpr_int(axis, "reduction axis", src))
    except ValueError as exc:
        raise ShapeError(str(exc), src) from None


@dataclass(frozen=True)
class _Reduction:
    """What a reduction of one input shape and dtype, axis and options records."""

    kop: Op
    sem: Reduce
    ax: int | None
    attrs: dict[str, object]
    shape: tuple[int, ...]  # the result's
    out: str  # the result's dtype
    acc: d.dtype  # the dtype the input is read in


#: reductions by (op, input shape, input dtype, axis, keep_dims, dtype=): each program of a
#: launch reduces alike (a few entries per kernel)
_REDUCTIONS = BoundedMemo()
REDUCTIONS_LIMIT = 4096


def _reduction(op: str, x: Concrete | Symbolic, axis: object, keep_dims: object,
               dtype: object) -> _Reduction:
    ax, dt = plain(axis), plain(dtype)  # by type too: axis True is refused, 1 is not
    key = (op, x.shape, x.dtype, type(ax), ax, bool(keep_dims), type(dt), dt)
    try:
        got = _REDUCTIONS.get(key)
        hashable = True
    except TypeError:  # an unhashable axis or dtype: checked (and refused) afresh
        got, hashable = None, False
    if got is None:
        got = _new_reduction(op, x, axis, keep_dims, dtype, src_here())
        if hashable:
            _REDUCTIONS.put(key, got, REDUCTIONS_LIMIT)
    return got


def _new_reduction(op: str, x: Concrete | Symbolic, axis: object, keep_dims: object,
                   dtype: object, src: str) -> _Reduction:
    if not x.shape:
        raise ShapeError(f"tl.{op} of a scalar", src)
    ax = _axis(x, axis, src)
    if op in ("argmax", "argmin") and ax is None:
        raise KernelError(f"tl.{op} needs an axis", src)
    kop = data.table_op(op, src)
    sem = OPS[kop].sem
    if not isinstance(sem, Reduce):  # pragma: no cover - the names above are reductions
        raise KernelError(f"tl.{op} is not a reduction", src)
    attrs: dict[str, object] = {"axis": ax, "keepdims": bool(keep_dims)}
    if plain(dtype) is not None:
        attrs["dtype"] = d.by_name(plain(dtype)).name
    shape, out = sem.infer([x.shape], [x.dtype.name], attrs, TRITON)
    acc = d.by_name(sem.accumulator(x.dtype.name, attrs, TRITON))
    return _Reduction(kop, sem, ax, attrs, shape, out, acc)


def _reduce(op: str, input: object, axis: object, keep_dims: object,  # noqa: A002
            dtype: object = None) -> Concrete | Symbolic:
    x = arith.number(input, None, f"tl.{op}")
    red = _reduction(op, x, axis, keep_dims, dtype)
    if x.dtype is not red.acc:
        x = arith.cast(x, red.acc)
    if isinstance(x, Concrete):
        return concrete(red.sem.evaluate([x.value], red.attrs, TRITON), d.by_name(red.out))
    fn = sem_.arg_reduce if op.startswith("arg") else sem_.reduce
    h = fn(red.kop, x.handle, red.ax, bool(keep_dims))
    r = data.symbolic(h)
    return r if tuple(h.shape) == red.shape else data.reshape(r, red.shape)


def sum(input: object, axis: object = None, keep_dims: bool = False,  # noqa: A001
        dtype: object = None) -> Concrete | Symbolic:
    return _reduce("sum", input, axis, keep_dims, dtype)


Reduced = Concrete | Symbolic | tuple[Concrete | Symbolic, Concrete | Symbolic]


def max(input: object, axis: object = None, return_indices: bool = False,  # noqa: A001
        return_indices_tie_break_left: bool = True, keep_dims: bool = False) -> Reduced:
    if return_indices:
        return (_reduce("max", input, axis, keep_dims),
                _reduce("argmax", input, axis, keep_dims))
    return _reduce("max", input, axis, keep_dims)


def min(input: object, axis: object = None, return_indices: bool = False,  # noqa: A001
        return_indices_tie_break_left: bool = True, keep_dims: bool = False) -> Reduced:
    if return_indices:
        return (_reduce("min", input, axis, keep_dims),
                _reduce("argmin", input, axis, keep_dims))
    return _reduce("min", input, axis, keep_dims)


def argmax(input: object, axis: object, tie_break_left: bool = True,  # noqa: A002
           keep_dims: bool = False) -> Concrete | Symbolic:
    return _reduce("argmax", input, axis, keep_dims)


def argmin(input: object, axis: object, tie_break_left: bool = True,  # noqa: A002
           keep_dims: bool = False) -> Concrete | Symbolic:
    return _reduce("argmin", input, axis, keep_dims)


def _scan(op: str, input: object, axis: object, reverse: object,  # noqa: A002
          dtype: object) -> Concrete | Symbolic:
    src = src_here()
    x = arith.number(input, src, f"tl.{op}")
    ax = _axis(x, axis, src)
    kop = data.table_op(op, src)
    sem = OPS[kop].sem
    if not isinstance(sem, Scan) or ax is None:
        raise KernelError(f"tl.{op} needs a scan axis", src)
    rev = bool(plain(reverse))
    attrs: dict[str, object] = {"axis": ax, "reverse": rev}
    if plain(dtype) is not None:
        attrs["dtype"] = d.by_name(plain(dtype)).name
    x = arith.cast(x, d.by_name(sem.accumulator(x.dtype.name, attrs, TRITON)))
    if isinstance(x, Concrete):
        return concrete(sem.evaluate([x.value], attrs, TRITON), x.dtype)
    return data.symbolic(sem_.scan(kop, x.handle, ax, rev))


def cumsum(input: object, axis: object = 0, reverse: bool = False,  # noqa: A002
           dtype: object = None) -> Concrete | Symbolic:
    return _scan("cumsum", input, axis, reverse, dtype)


def cumprod(input: object, axis: object = 0, reverse: bool = False,  # noqa: A002
            dtype: object = None) -> Concrete | Symbolic:
    return _scan("cumprod", input, axis, reverse, dtype)


def softmax(x: object, dim: object = None, keep_dims: bool = False,
            ieee_rounding: bool = False) -> Symbolic:
    src = src_here()
    v = arith.value_of(x, src)
    ax = 0 if plain(dim) is None else _axis(v, dim, src)
    if not isinstance(v, Symbolic):
        raise KernelError("tl.softmax of concrete values is not supported by kernbench", src)
    return data.symbolic(sem_.softmax(v.handle, ax or 0))


# -- dot -----------------------------------------------------------------------------------
_DOT_IN = ("int8", "float16", "bfloat16", "float32")


def dot(input: object, other: object, acc: object = None,  # noqa: A002
        input_precision: object = None, allow_tf32: object = None,
        max_num_imprecise_acc: object = None, out_dtype: object = None) -> Symbolic:
    # the kernel's line is looked up on an error or for a concrete operand only
    a, b = arith.number(input, None, "tl.dot"), arith.number(other, None, "tl.dot")
    if len(a.shape) != 2 or len(b.shape) != 2:
        raise ShapeError(f"tl.dot supports 2-D blocks, got {list(a.shape)} @ {list(b.shape)}",
                         src_here())
    if a.dtype is not b.dtype or a.dtype.name not in _DOT_IN:
        raise DtypeError(f"tl.dot operands must share one of {_DOT_IN}, got {a.dtype.name} and "
                         f"{b.dtype.name}", src_here())
    (m, k), (k2, n) = a.shape, b.shape
    if k != k2:
        raise ShapeError(f"tl.dot shapes {list(a.shape)} @ {list(b.shape)} do not fit", src_here())
    if builtins_min(m, n, k) < 16:
        raise ShapeError(f"tl.dot needs M, N, K >= 16, got M={m} N={n} K={k}", src_here())
    c = None if plain(acc) is None else arith.number(acc, None, "tl.dot")
    if plain(out_dtype) is not None:
        out = d.by_name(plain(out_dtype))
    else:
        out = d.int32 if a.dtype.is_int() else (c.dtype if c is not None else d.float32)
    if out.name == "bfloat16":
        raise DtypeError("tl.dot out_dtype=bfloat16 is unsupported (Triton); use float32 and "
                         "cast", src_here())
    ha, hb = data.handle(a, a.dtype, None), data.handle(b, b.dtype, None)
    if isinstance(c, Concrete) and data.uniform(c.value) and not c.value.reshape(-1)[0]:
        c = None  # tl.zeros accumulator: the product is the sum
    hacc = None if c is None else data.handle(c, out, None)
    h = sem_.dot(ha.handle, hb.handle, None if hacc is None else hacc.handle, d.to_kb(out))
    return data.symbolic(h, out)


def builtins_min(*xs: int) -> int:
    return builtins.min(xs)

