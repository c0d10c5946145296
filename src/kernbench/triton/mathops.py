"""``tl`` math: elementwise functions, reductions and scans, ``dot``. Each is the op table's
op (``schemas/ops.py``) with Triton's dtype rules checked first."""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import Any

import numpy as np

from kernbench.errors import DtypeError, KernelError, ShapeError
from kernbench.record import semantics as sem_
from kernbench.record.source import src_here
from kernbench.schemas.ops import OPS
from kernbench.schemas.policy import TRITON, axis_of
from kernbench.schemas.semantics import Reduce, Scan
from kernbench.triton import arith, data
from kernbench.triton import dtypes as d
from kernbench.triton.core import constexpr_int
from kernbench.triton.value import CONCRETE, SYMBOLIC, concrete, plain, tensor

#: math functions Triton accepts on fp32 (and fp64) only, as libdevice does
_FP32_ONLY = frozenset({"exp", "exp2", "log", "log2", "sqrt", "rsqrt", "erf", "floor", "ceil",
                        "cos", "sin", "sigmoid", "tanh"})


def _value(x: Any, src: str) -> tensor:
    x = arith.operand(x, src)
    return x if type(x) is tensor else concrete(np.asarray(x, d.of_scalar(x).np))


def _math1(op: str) -> Callable[[Any], tensor]:
    def fn(x: Any, *_rounding: object, **_kw: object) -> tensor:
        src = src_here()
        x = _value(x, src)
        if op in _FP32_ONLY and x.dtype.name not in ("float32", "float64"):
            raise DtypeError(f"tl.{op} expects fp32 or fp64, got {x.dtype.name} (cast with "
                             ".to(tl.float32) first, as Triton requires)", src)
        return arith.unary(op, x)
    fn.__name__ = fn.__qualname__ = op
    return fn


MATH1 = {name: _math1(name) for name in (
    "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sigmoid", "tanh", "erf", "abs", "floor",
    "ceil", "cos", "sin")}


def maximum(x: Any, y: Any, propagate_nan: object = None) -> tensor:
    return arith.binary("maximum", x, y)


def minimum(x: Any, y: Any, propagate_nan: object = None) -> tensor:
    return arith.binary("minimum", x, y)


def clamp(x: Any, min: Any, max: Any, propagate_nan: object = None) -> tensor:  # noqa: A002
    return minimum(maximum(x, min), max)


def fdiv(x: Any, y: Any, ieee_rounding: bool = False) -> tensor:
    return arith.binary("div", x, y)


div_rn = fdiv


def fma(x: Any, y: Any, z: Any) -> tensor:
    """``x * y + z`` (fused where the semantics layer offers ``fma``, else two ops)."""
    src = src_here()
    vals = [_value(v, src) for v in (x, y, z)]
    ternary = sem_.ternary
    if any(v.kind == SYMBOLIC for v in vals):
        t, _ = arith.types("mul", vals[0], vals[1], src)
        t, _ = arith.types("add", concrete(np.zeros((), t.np), t), vals[2], src)
        hs = [data.handle(v, t, src) for v in vals]
        return data.symbolic(ternary(data.table_op("fma", src), *(h.value for h in hs)))
    return arith.binary("add", arith.binary("mul", vals[0], vals[1]), vals[2])


# -- reductions: the op table's semantics under the TRITON policy ----------------------------
def _axis(x: tensor, axis: Any, src: str) -> int | None:
    axis = plain(axis)
    if axis is None:
        return None
    if type(axis) is tensor:
        raise KernelError(f"reduction axis must be a tl.constexpr, got a tensor {axis!r}", src)
    try:
        return axis_of(x.shape, constexpr_int(axis, "reduction axis", src))
    except ValueError as exc:
        raise ShapeError(str(exc), src) from None


def _reduce(op: str, x: Any, axis: Any, keep_dims: bool, dtype: Any = None) -> tensor:
    src = src_here()
    x = _value(x, src)
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
    x = arith.cast(x, d.by_name(sem.accumulator(x.dtype.name, attrs, TRITON)))
    if x.kind == CONCRETE:
        return concrete(sem.evaluate([x.value], attrs, TRITON), d.by_name(out))
    fn = sem_.arg_reduce if op.startswith("arg") else sem_.reduce
    h = fn(kop, x.value, ax, bool(keep_dims))
    r = data.symbolic(h)
    return r if tuple(h.shape) == shape else data.reshape(r, shape)


def sum(input: Any, axis: Any = None, keep_dims: bool = False, dtype: Any = None  # noqa: A001
        ) -> tensor:
    return _reduce("sum", input, axis, keep_dims, dtype)


def max(input: Any, axis: Any = None, return_indices: bool = False,  # noqa: A001
        return_indices_tie_break_left: bool = True, keep_dims: bool = False) -> Any:
    if return_indices:
        return (_reduce("max", input, axis, keep_dims),
                _reduce("argmax", input, axis, keep_dims))
    return _reduce("max", input, axis, keep_dims)


def min(input: Any, axis: Any = None, return_indices: bool = False,  # noqa: A001
        return_indices_tie_break_left: bool = True, keep_dims: bool = False) -> Any:
    if return_indices:
        return (_reduce("min", input, axis, keep_dims),
                _reduce("argmin", input, axis, keep_dims))
    return _reduce("min", input, axis, keep_dims)


def argmax(input: Any, axis: Any, tie_break_left: bool = True, keep_dims: bool = False
           ) -> tensor:
    return _reduce("argmax", input, axis, keep_dims)


def argmin(input: Any, axis: Any, tie_break_left: bool = True, keep_dims: bool = False
           ) -> tensor:
    return _reduce("argmin", input, axis, keep_dims)


def _scan(op: str, input: Any, axis: Any, reverse: Any, dtype: Any) -> tensor:
    src = src_here()
    x = _value(input, src)
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
    if x.kind == CONCRETE:
        return concrete(sem.evaluate([x.value], attrs, TRITON), x.dtype)
    return data.symbolic(sem_.scan(kop, x.value, ax, rev))


def cumsum(input: Any, axis: Any = 0, reverse: bool = False, dtype: Any = None) -> tensor:
    return _scan("cumsum", input, axis, reverse, dtype)


def cumprod(input: Any, axis: Any = 0, reverse: bool = False, dtype: Any = None) -> tensor:
    return _scan("cumprod", input, axis, reverse, dtype)


def softmax(x: Any, dim: Any = None, keep_dims: bool = False, ieee_rounding: bool = False
            ) -> tensor:
    src = src_here()
    x = _value(x, src)
    ax = 0 if plain(dim) is None else _axis(x, dim, src)
    if x.kind != SYMBOLIC:
        raise KernelError("tl.softmax of concrete values is not supported by kernbench", src)
    return data.symbolic(sem_.softmax(x.value, ax or 0))


# -- dot -----------------------------------------------------------------------------------
_DOT_IN = ("int8", "float16", "bfloat16", "float32")


def dot(input: Any, other: Any, acc: Any = None, input_precision: object = None,
        allow_tf32: object = None, max_num_imprecise_acc: object = None, out_dtype: Any = None
        ) -> tensor:
    src = src_here()
    a, b = _value(input, src), _value(other, src)
    if len(a.shape) != 2 or len(b.shape) != 2:
        raise ShapeError(f"tl.dot supports 2-D blocks, got {list(a.shape)} @ {list(b.shape)}",
                         src)
    if a.dtype is not b.dtype or a.dtype.name not in _DOT_IN:
        raise DtypeError(f"tl.dot operands must share one of {_DOT_IN}, got {a.dtype.name} and "
                         f"{b.dtype.name}", src)
    (m, k), (k2, n) = a.shape, b.shape
    if k != k2:
        raise ShapeError(f"tl.dot shapes {list(a.shape)} @ {list(b.shape)} do not fit", src)
    if builtins_min(m, n, k) < 16:
        raise ShapeError(f"tl.dot needs M, N, K >= 16, got M={m} N={n} K={k}", src)
    acc = plain(acc)
    if plain(out_dtype) is not None:
        out = d.by_name(plain(out_dtype))
    else:
        out = d.int32 if a.dtype.is_int() else (acc.dtype if acc is not None else d.float32)
    if out.name == "bfloat16":
        raise DtypeError("tl.dot out_dtype=bfloat16 is unsupported (Triton); use float32 and "
                         "cast", src)
    ha, hb = data.handle(a, a.dtype, src), data.handle(b, b.dtype, src)
    if acc is not None:
        acc = _value(acc, src)
        if acc.kind == CONCRETE and data.uniform(acc.value) and not acc.value.reshape(-1)[0]:
            acc = None  # tl.zeros accumulator: the product is the sum
    hacc = None if acc is None else data.handle(acc, out, src)
    h = sem_.dot(ha.value, hb.value, None if hacc is None else hacc.value, d.to_kb(out))
    return data.symbolic(h, out)


def builtins_min(*xs: int) -> int:
    return builtins.min(xs)

