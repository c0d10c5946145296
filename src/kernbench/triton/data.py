"""Recording: Triton values that touch data become the op table's ops through
``record.semantics``. Concrete operands are materialised: a uniform array becomes the op's
scalar operand (no extra row), an ``arange`` the ``arange`` op, anything else a ``const``."""

from __future__ import annotations

from typing import Any

import numpy as np

from kernbench.errors import KernelError
from kernbench.record import semantics as sem
from kernbench.record.handle import TensorHandle
from kernbench.schemas.ops import Op
from kernbench.schemas.rules import broadcast_shapes
from kernbench.triton import dtypes as d
from kernbench.triton.dtypes import dtype
from kernbench.triton.value import CONCRETE, SYMBOLIC, pointer, symbolic, tensor


def table_op(name: str, src: str) -> Op:
    """The op-table op called ``name``, or a KernelError when the table lacks it."""
    try:
        return Op(name)
    except ValueError:
        raise KernelError(f"op {name!r} is not in kernbench's op table", src) from None


def indexed(src: str) -> Any:
    """The indexed-memory module (``record/addressing.py``)."""
    try:
        from kernbench.record import addressing as mod
    except ImportError:
        raise KernelError("indexed loads/stores need kernbench.record.addressing", src) from None
    return mod


def uniform(v: np.ndarray) -> bool:
    flat = v.reshape(-1)
    return flat.size > 0 and bool(np.all(flat == flat[0]))


def py_scalar(v: Any, t: dtype) -> int | float | bool:
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


def materialise(x: tensor, t: dtype, src: str) -> tensor:
    """A symbolic tensor of dtype ``t`` holding concrete ``x`` (fill, arange or const)."""
    kt = d.to_kb(t)
    v = d.cast(x.value, t)
    if uniform(v):
        return symbolic(sem.full(v.shape, py_scalar(v, t), kt), t)
    start = _arange_start(v)
    if start is not None:
        r = symbolic(sem.arange(start, start + v.size))
        r = reshape(r, v.shape)
        return r if r.dtype is t else cast(r, t, src)
    return symbolic(indexed(src).constant(v, kt, src=src), t)


def handle(x: Any, t: dtype, src: str) -> tensor:
    """``x`` (symbolic, concrete or a scalar) as a symbolic tensor of dtype ``t``."""
    if type(x) is not tensor:
        x = tensor(CONCRETE, t, (), np.asarray(x, t.np))
    if x.kind == CONCRETE:
        return materialise(x, t, src)
    return x if x.dtype is t else cast(x, t, src)


def _shape(x: Any) -> tuple[int, ...]:
    return x.shape if type(x) is tensor else ()


def binary(op: str, a: Any, b: Any, t: dtype, out: dtype, src: str) -> tensor:
    """Record ``a op b`` (at least one side symbolic), computed in dtype ``t``."""
    kop = table_op(op, src)
    try:
        shape = broadcast_shapes(_shape(a), _shape(b))
    except ValueError as exc:
        raise KernelError(f"{op}: {exc}", src) from None
    sa, sb = _scalar_ok(a, b, shape), _scalar_ok(b, a, shape)
    if op in ("add", "sub") and _is_zero(b) and sb and a.dtype is out:
        return a  # x + 0: Triton folds it (the acc = tl.zeros(...) idiom)
    if op == "add" and _is_zero(a) and sa and b.dtype is out:
        return b
    xa = py_scalar(values_of(a), t) if sa else handle(a, t, src)
    xb = py_scalar(values_of(b), t) if sb else handle(b, t, src)
    h = sem.binary(kop, xa.value if type(xa) is tensor else xa,
                   xb.value if type(xb) is tensor else xb)
    r = symbolic(h)
    return r if r.dtype is out else cast(r, out, src)


def values_of(x: Any) -> Any:
    return x.value if type(x) is tensor else x


def _scalar_ok(x: Any, other: Any, shape: tuple[int, ...]) -> bool:
    """``x`` can be the op's scalar operand: a scalar or uniform concrete, and the other
    (symbolic) side already has the result shape."""
    if type(x) is tensor and (x.kind != CONCRETE or not uniform(x.value)):
        return False
    return type(other) is tensor and other.kind == SYMBOLIC and other.shape == shape


def _is_zero(x: Any) -> bool:
    v = values_of(x)
    return (type(x) is not tensor or x.kind == CONCRETE) and uniform(np.asarray(v)) and \
        not np.asarray(v).reshape(-1)[0]


def unary(op: str, x: tensor, src: str) -> tensor:
    return symbolic(sem.unary(table_op(op, src), x.value))


def unary_concrete(op: str, x: tensor, src: str) -> tensor:
    """A math function of concrete values: the op table's semantics, Triton's policy."""
    from kernbench.schemas.ops import OPS
    from kernbench.schemas.policy import TRITON

    semantics = OPS[table_op(op, src)].sem
    if semantics is None:  # pragma: no cover - every unary table op has its semantics
        raise KernelError(f"{op} of concrete values is not supported by kernbench", src)
    try:
        out = semantics.evaluate([x.value], {}, TRITON)
    except ValueError as exc:
        raise KernelError(f"{op}: {exc}", src) from None
    return tensor(CONCRETE, d.by_name(_name(out)), x.shape, out)


def _name(v: np.ndarray) -> str:
    return "bfloat16" if v.dtype.kind == "V" else str(v.dtype)


def cast(x: tensor, t: dtype, src: str, bitcast: bool = False) -> tensor:
    return symbolic(sem.cast(x.value, d.to_kb(t), bitcast), t)


def row_major(h: TensorHandle) -> TensorHandle:
    """``h``, or a transposed view of it copied into row-major order on the MATH engine (a
    same-shape ``broadcast``), as Triton converts a layout before a reshape."""
    return sem.broadcast(h, h.shape) if h.transposed else h


def reshape(x: tensor, shape: tuple[int, ...]) -> tensor:
    return symbolic(sem.reshape(row_major(x.value), shape), x.dtype)


def where(cond: Any, x: Any, y: Any, t: dtype, src: str) -> tensor:
    """Record ``tl.where`` (something symbolic); a uniform concrete condition picks a side."""
    if cond.kind == CONCRETE and uniform(cond.value):
        pick = x if bool(cond.value.reshape(-1)[0]) else y
        shape = broadcast_shapes(cond.shape, broadcast_shapes(_shape(x), _shape(y)))
        r = handle(pick, t, src)
        return r if r.shape == shape else broadcast(r, shape)
    c = handle(cond, d.int1, src)
    xs = [py_scalar(values_of(v), t) if type(v) is not tensor or (
        v.kind == CONCRETE and uniform(v.value) and len(v.shape) <= len(c.shape))
        else handle(v, t, src) for v in (x, y)]
    if all(type(v) is not tensor for v in xs):
        xs[0] = handle(x, t, src)
    h = sem.where(c.value, *(v.value if type(v) is tensor else v for v in xs))
    r = symbolic(h)
    return r if r.dtype is t else cast(r, t, src)


def broadcast(x: tensor, shape: tuple[int, ...]) -> tensor:
    return symbolic(sem.broadcast(x.value, shape), x.dtype)


def view_handle(h: TensorHandle) -> TensorHandle:
    """A new view of ``h``'s buffer, for a second owner (each wrapper releases its own)."""
    return sem.reshape(h, tuple(h.shape))


def view(h: TensorHandle) -> tensor:
    return symbolic(view_handle(h))


def symbolic_offsets(p: tensor, k: Any, src: str) -> tensor:
    """A pointer whose offsets depend on loaded data (a gather): offsets + k, recorded."""
    base = p.value
    t = k.dtype if type(k) is tensor else d.int32
    if type(base) is TensorHandle:
        b: Any = view(base)
        t = d.integer_promote(b.dtype, t)
    else:
        b = tensor(CONCRETE, d.int64, base.shape, base)
        if _fits_int32(base):
            b = tensor(CONCRETE, d.int32, base.shape, base.astype(np.int32))
    offs = binary("add", b, k, t, t, src)
    return pointer(p.hbm_base, view_handle(offs.value) if offs.kind == SYMBOLIC else offs.value,
                   p.dtype.element_ty)


def _fits_int32(v: np.ndarray) -> bool:
    return v.size == 0 or (int(v.min()) >= -2**31 and int(v.max()) < 2**31)
