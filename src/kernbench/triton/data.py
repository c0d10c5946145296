"""Recording: Triton values that touch data become the op table's ops through
``record.semantics``. Concrete operands are materialised: a uniform array becomes the op's
scalar operand (no extra row), an ``arange`` the ``arange`` op, anything else a ``const``."""

from __future__ import annotations

import numpy as np

from kernbench.errors import KernelError
from kernbench.record.handle import TensorHandle
from kernbench.record.lowering import addressing
from kernbench.record.lowering import semantics as sem
from kernbench.schemas.ops import BY_NAME, Op
from kernbench.schemas.rules import broadcast_shapes
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
    at,
    pointer,
    symbolic,
)


def table_op(name: str, src: str | None = None) -> Op:
    """The op-table op called ``name``, or a KernelError when the table lacks it."""
    op = BY_NAME.get(name)
    if op is None:
        raise KernelError(f"op {name!r} is not in kernbench's op table", at(src))
    return op


def uniform(v: np.ndarray) -> bool:
    flat = v.reshape(-1)
    return flat.size > 0 and bool(np.all(flat == flat[0]))


def py_scalar(v: np.ndarray | Scalar, t: dtype) -> Scalar:
    if type(v) is float and t.kind == "f":
        return v  # what float() of its numpy float64 gives
    x = np.asarray(v).reshape(-1)[0]
    if t.is_bool():
        return bool(x)
    return float(x) if t.is_floating() else int(x)


def _arange_start(v: np.ndarray) -> int | None:
    """``start`` when ``v`` is ``start + arange(n)`` laid along one axis, else None."""
    if v.dtype.kind not in "iu" or sum(s != 1 for s in v.shape) != 1:
        return None
    flat = v.reshape(-1).astype(np.int64)
    start = int(flat[0])
    ok = np.array_equal(flat, np.arange(start, start + flat.size))
    return start if ok and -2**31 <= start and start + flat.size <= 2**31 else None


def materialise(x: Concrete, t: dtype, src: str | None) -> Symbolic:
    """A symbolic tensor of dtype ``t`` holding concrete ``x`` (fill, arange or const)."""
    src = at(src)
    kt = d.to_kb(t)
    v = d.cast(x.value, t)
    if uniform(v):
        return symbolic(sem.full(v.shape, py_scalar(v, t), kt), t)
    start = _arange_start(v)
    if start is not None:
        r = reshape(symbolic(sem.arange(start, start + v.size)), v.shape)
        return r if r.dtype is t else cast(r, t, src)
    return symbolic(addressing.constant(v, kt, src=src), t)


def handle(x: Numeric, t: dtype, src: str | None) -> Symbolic:
    """``x`` (symbolic, concrete or a scalar) as a symbolic tensor of dtype ``t``."""
    if isinstance(x, Symbolic):
        return x if x.dtype is t else cast(x, t, src)
    return materialise(x if isinstance(x, Concrete) else Concrete(t, np.asarray(x, t.np)), t,
                       src)


def _shape(x: Operand) -> tuple[int, ...]:
    return x.shape if isinstance(x, VALUES) else ()


#: Python scalars a recorded op takes as its scalar operand as they are
_PY_SCALARS = frozenset({int, float, bool})


def binary(op: str, a: Numeric, b: Numeric, t: dtype, out: dtype, src: str) -> Symbolic:
    """Record ``a op b`` (at least one side symbolic), computed in dtype ``t``."""
    kop = table_op(op, src)
    if type(a) is Symbolic and a.dtype is t:  # the usual cases, as the general path below
        if type(b) is Symbolic and b.dtype is t:
            if b.shape != a.shape:
                try:
                    broadcast_shapes(a.shape, b.shape)
                except ValueError as exc:
                    raise KernelError(f"{op}: {exc}", src) from None
            return _recorded(kop, a.handle, b.handle, out, src)
        if type(b) in _PY_SCALARS and (b or op not in ("add", "sub") or a.dtype is not out):
            return _recorded(kop, a.handle, py_scalar(b, t), out, src)  # type: ignore[arg-type]
    try:
        shape = broadcast_shapes(_shape(a), _shape(b))
    except ValueError as exc:
        raise KernelError(f"{op}: {exc}", src) from None
    sa, sb = _scalar_ok(a, b, shape), _scalar_ok(b, a, shape)
    if op in ("add", "sub") and sb and _is_zero(b) and isinstance(a, Symbolic) and \
            a.dtype is out:
        return a  # x + 0: Triton folds it (the acc = tl.zeros(...) idiom)
    if op == "add" and sa and _is_zero(a) and isinstance(b, Symbolic) and b.dtype is out:
        return b
    xa, xb = _side(a, sa, t, src), _side(b, sb, t, src)  # both alive until the op is recorded
    return _recorded(kop, _operand(xa), _operand(xb), out, src)


def _recorded(kop: Op, x: TensorHandle | Scalar, y: TensorHandle | Scalar, out: dtype,
              src: str) -> Symbolic:
    r = symbolic(sem.binary(kop, x, y))
    return r if r.dtype is out else cast(r, out, src)


def _side(x: Numeric, scalar: bool, t: dtype, src: str) -> Symbolic | Scalar:
    """An operand of a recorded op: the scalar of a uniform side, else a symbolic value
    (which the caller keeps alive until the op is recorded: ``record.lifetime``)."""
    if isinstance(x, Symbolic) or not scalar:
        return handle(x, t, src)
    return py_scalar(x.value if isinstance(x, Concrete) else x, t)


def _operand(x: Symbolic | Scalar) -> TensorHandle | Scalar:
    return x.handle if isinstance(x, Symbolic) else x


def _scalar_ok(x: Operand, other: Operand, shape: tuple[int, ...]) -> bool:
    """``x`` can be the op's scalar operand: a scalar or uniform concrete, and the other
    (symbolic) side already has the result shape."""
    if isinstance(x, VALUES) and (not isinstance(x, Concrete) or not uniform(x.value)):
        return False
    return isinstance(other, Symbolic) and other.shape == shape


def _is_zero(x: Operand) -> bool:
    if isinstance(x, VALUES) and not isinstance(x, Concrete):
        return False
    v = np.asarray(x.value if isinstance(x, Concrete) else x)
    return uniform(v) and not v.reshape(-1)[0]


def unary(op: str, x: Symbolic, src: str | None = None) -> Symbolic:
    return symbolic(sem.unary(table_op(op, src), x.handle))


def unary_concrete(op: str, x: Concrete, src: str | None = None) -> Concrete:
    """A math function of concrete values: the op table's semantics, Triton's policy."""
    from kernbench.schemas.ops import OPS
    from kernbench.schemas.policy import TRITON

    semantics = OPS[table_op(op, src)].sem
    if semantics is None:  # pragma: no cover - every unary table op has its semantics
        raise KernelError(f"{op} of concrete values is not supported by kernbench",
                          at(src))
    try:
        out = semantics.evaluate([x.value], {}, TRITON)
    except ValueError as exc:
        raise KernelError(f"{op}: {exc}", at(src)) from None
    return Concrete(d.by_name(_name(out)), out)


def _name(v: np.ndarray) -> str:
    return "bfloat16" if v.dtype.kind == "V" else str(v.dtype)


def cast(x: Symbolic, t: dtype, src: str | None, bitcast: bool = False) -> Symbolic:
    return symbolic(sem.cast(x.handle, d.to_kb(t), bitcast), t)


def row_major(h: TensorHandle) -> TensorHandle:
    """``h``, or a transposed view of it copied into row-major order on the MATH engine (a
    same-shape ``broadcast``), as Triton converts a layout before a reshape."""
    return sem.broadcast(h, h.shape) if h.transposed else h


def reshape(x: Symbolic, shape: tuple[int, ...]) -> Symbolic:
    return symbolic(sem.reshape(row_major(x.handle), shape), x.dtype)


def where(cond: Concrete | Symbolic, x: Numeric, y: Numeric, t: dtype, src: str) -> Symbolic:
    """Record ``tl.where`` (something symbolic); a uniform concrete condition picks a side."""
    if isinstance(cond, Concrete) and uniform(cond.value):
        pick = x if bool(cond.value.reshape(-1)[0]) else y
        shape = broadcast_shapes(cond.shape, broadcast_shapes(_shape(x), _shape(y)))
        r = handle(pick, t, src)
        return r if r.shape == shape else broadcast(r, shape)
    c = handle(cond, d.int1, src)
    xs = [_side(v, not isinstance(v, VALUES) or (
        isinstance(v, Concrete) and uniform(v.value) and len(v.shape) <= len(c.shape)), t, src)
        for v in (x, y)]
    if all(not isinstance(v, Symbolic) for v in xs):
        xs[0] = handle(x, t, src)
    r = symbolic(sem.where(c.handle, *(_operand(v) for v in xs)))
    return r if r.dtype is t else cast(r, t, src)


def broadcast(x: Symbolic, shape: tuple[int, ...]) -> Symbolic:
    return symbolic(sem.broadcast(x.handle, shape), x.dtype)


def view_handle(h: TensorHandle) -> TensorHandle:
    """A new view of ``h``'s buffer, for a second owner (each wrapper releases its own)."""
    return sem.reshape(h, tuple(h.shape))


def view(h: TensorHandle) -> Symbolic:
    return symbolic(view_handle(h))


def symbolic_offsets(p: Pointer, k: Numeric, src: str) -> Pointer:
    """A pointer whose offsets depend on loaded data (a gather): offsets + k, recorded."""
    base = p.offsets
    t = k.dtype if isinstance(k, VALUES) else d.int32
    b: Concrete | Symbolic
    if isinstance(base, TensorHandle):
        b = view(base)
        t = d.integer_promote(b.dtype, t)
    else:
        b = Concrete(d.int64, base)
        if _fits_int32(base):
            b = Concrete(d.int32, base.astype(np.int32))
    offs = binary("add", b, k, t, t, src)
    return pointer(p.base, view_handle(offs.handle), p.dtype.element_ty)


def _fits_int32(v: np.ndarray) -> bool:
    return v.size == 0 or (int(v.min()) >= -2**31 and int(v.max()) < 2**31)
