"""``tl.load`` / ``tl.store`` / atomics: a pointer block's offsets and mask select exactly the
elements that move (``record.addressing``); offsets from loaded data are gathers/scatters.
``tl.make_block_ptr`` / ``tl.advance`` are the same accesses in another notation."""

from __future__ import annotations

from typing import Any

import numpy as np

from kernbench.errors import DtypeError, KernelError, ShapeError
from kernbench.record.handle import HbmTensor
from kernbench.record.source import src_here
from kernbench.triton import arith, data
from kernbench.triton import dtypes as d
from kernbench.triton.core import block_shape, broadcast_to
from kernbench.triton.value import CONCRETE, POINTER, concrete, int_value, plain, tensor

#: names of the HBM tensors stores/atomics of the current launch wrote (default outputs)
STORED: set[str] = set()


class block_ptr:  # noqa: N801 - what tl.make_block_ptr returns
    """A block pointer: parent tensor geometry, current offsets, block shape (all concrete)."""

    __slots__ = ("base", "offset", "shape", "strides", "offsets", "block_shape", "order")

    def __init__(self, base: HbmTensor, offset: int, shape: tuple[int, ...],
                 strides: tuple[int, ...], offsets: tuple[int, ...],
                 block: tuple[int, ...], order: tuple[int, ...]) -> None:
        self.base, self.offset, self.shape, self.strides = base, offset, shape, strides
        self.offsets, self.block_shape, self.order = offsets, block, order

    def access(self, boundary_check: Any, src: str) -> tuple[np.ndarray, np.ndarray | None]:
        """(element offsets of the block, mask of the checked dimensions or None)."""
        nd = len(self.block_shape)
        checks = plain(boundary_check) or ()
        checks = [checks] if isinstance(checks, int) else [int(plain(c)) for c in checks]
        offs = np.full(self.block_shape, self.offset, np.int64)
        mask = None
        for k in range(nd):
            idx = self.offsets[k] + np.arange(self.block_shape[k], dtype=np.int64)
            idx = idx.reshape([-1 if i == k else 1 for i in range(nd)])
            offs = offs + idx * self.strides[k]
            if k in checks:
                ok = (idx >= 0) & (idx < self.shape[k])
                mask = np.broadcast_to(ok, self.block_shape) if mask is None else mask & ok
        bad = [c for c in checks if not 0 <= c < nd]
        if bad:
            raise KernelError(f"boundary_check dimension {bad[0]} outside a {nd}-D block", src)
        return offs, None if mask is None else np.array(mask)


def _ints(xs: Any, what: str, src: str) -> tuple[int, ...]:
    xs = plain(xs)
    xs = xs if isinstance(xs, tuple | list) else (xs,)
    return tuple(int_value(x, what, src) for x in xs)


def make_block_ptr(base: Any, shape: Any, strides: Any, offsets: Any, block_shape: Any,
                   order: Any) -> block_ptr:
    src = src_here()
    if type(base) is not tensor or base.kind != POINTER or base.shape != () or type(
            base.value) is not np.ndarray:
        raise KernelError(f"make_block_ptr base must be a scalar pointer, got {base!r}", src)
    shp, st = _ints(shape, "shape", src), _ints(strides, "stride", src)
    offs, blk = _ints(offsets, "offset", src), block_shape_of(block_shape, src)
    if not len(shp) == len(st) == len(offs) == len(blk):
        raise ShapeError(f"make_block_ptr: shape {list(shp)}, strides {list(st)}, offsets "
                         f"{list(offs)} and block_shape {list(blk)} differ in rank", src)
    return block_ptr(base.hbm_base, int(base.value), shp, st, offs, blk, _ints(order, "order", src))


def block_shape_of(b: Any, src: str) -> tuple[int, ...]:
    return block_shape(b, "block_shape", src)


def advance(base: block_ptr, offsets: Any) -> block_ptr:
    src = src_here()
    delta = _ints(offsets, "advance offset", src)
    if len(delta) != len(base.offsets):
        raise ShapeError(f"advance by {list(delta)} of a {len(base.offsets)}-D block pointer", src)
    return block_ptr(base.base, base.offset, base.shape, base.strides,
                     tuple(a + b for a, b in zip(base.offsets, delta, strict=True)),
                     base.block_shape, base.order)


# -- masks and operands ----------------------------------------------------------------------
def _mask(mask: Any, shape: tuple[int, ...], src: str) -> Any:
    """None (everything moves), a bool array, or a bool TCM handle, of ``shape``."""
    mask = plain(mask)
    if mask is None:
        return None
    if type(mask) is not tensor:
        mask = concrete(np.asarray(bool(mask)))
    if not mask.dtype.is_bool():
        raise DtypeError(f"mask must be boolean (int1), got {mask.dtype.name}", src)
    if mask.shape != shape:
        mask = broadcast_to(mask, shape)
    if mask.kind == CONCRETE:
        return None if mask.value.all() else np.array(mask.value)
    return mask


def _shape_of(src: str, what: str, *named: tuple[str, Any]) -> tuple[int, ...]:
    """The broadcast shape of the named operands; a ShapeError at the kernel's line naming
    each operand's shape when they do not broadcast (a mask of the wrong shape)."""
    shapes = [(n, getattr(plain(x), "shape", ())) for n, x in named]
    first = shapes[0][1]
    if all(s == first or s == () for _, s in shapes):  # the usual case: no broadcasting
        return tuple(first)
    return _broadcast(shapes, what, src)


def _broadcast(shapes: list[tuple[str, Any]], what: str, src: str) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(*(s for _, s in shapes)))
    except ValueError:
        told = ", ".join(f"{n} {list(s)}" for n, s in shapes)
        raise ShapeError(f"{what}: {told} do not broadcast to one shape", src) from None


def _offsets(p: tensor, shape: tuple[int, ...]) -> Any:
    if type(p.value) is np.ndarray:
        if p.value.shape == shape and p.value.dtype == np.int64:
            return p.value  # read only below: the pointer's own offsets
        return np.array(np.broadcast_to(p.value, shape), dtype=np.int64)
    return broadcast_to(p, shape).value


def _pointer(ptr: Any, src: str, what: str) -> tensor:
    if type(ptr) is not tensor or ptr.kind != POINTER:
        raise KernelError(f"{what} needs a pointer, got {ptr!r}", src)
    return ptr


def _mvalue(m: Any) -> Any:
    return m.value if type(m) is tensor else m


# -- load / store ----------------------------------------------------------------------------
_PADDING = {"": None, "zero": 0, "nan": float("nan")}


def load(pointer: Any, mask: Any = None, other: Any = None, boundary_check: Any = (),
         padding_option: Any = "", cache_modifier: Any = "", eviction_policy: Any = "",
         volatile: Any = False) -> tensor:
    src = src_here()
    ix = data.indexed(src)
    if isinstance(pointer, block_ptr):
        if plain(mask) is not None or plain(other) is not None:
            raise KernelError("tl.load of a block pointer takes boundary_check/padding_option, "
                              "not mask/other", src)
        pad = plain(padding_option)
        if pad not in _PADDING:
            raise KernelError(f"padding_option {pad!r} is not one of 'zero', 'nan'", src)
        offs, m = pointer.access(boundary_check, src)
        t = d.from_kb(pointer.base.dtype)
        h = ix.load_indexed(pointer.base, offs, m, _PADDING[pad], src=src)
        return data.symbolic(h, t)
    p = _pointer(pointer, src, "tl.load")
    other = plain(other)
    shape = _shape_of(src, "tl.load", ("pointer block", p), ("mask", mask),
                      *((("other", other),) if other is not None else ()))
    elem = p.dtype.element_ty
    m = _mask(mask, shape, src)
    oth, rest = None, None
    if other is not None:
        o = arith.operand(other, src, "load other")
        if type(o) is tensor and (o.kind != CONCRETE or not data.uniform(o.value)):
            rest = o
        else:
            oth = data.py_scalar(o.value if type(o) is tensor else o, elem)
    offs = _offsets(p, shape)
    if type(offs) is np.ndarray:
        h = ix.load_indexed(p.base, offs, _mvalue(m), oth, src=src)
    else:
        h = ix.gather(p.base, offs, _mvalue(m), oth, src=src)
    r = data.symbolic(h, elem)
    if rest is not None and m is not None:
        cond = m if type(m) is tensor else concrete(m)
        return arith.where(cond, r, rest)
    return r


def _value(value: Any, shape: tuple[int, ...], elem: d.dtype, src: str) -> Any:
    """The stored value: a Python scalar when uniform, else a symbolic block of ``shape``."""
    v = arith.operand(value, src, "store value")
    if type(v) is not tensor or (v.kind == CONCRETE and data.uniform(v.value)):
        return data.py_scalar(v.value if type(v) is tensor else v, elem)
    if v.kind == POINTER:
        raise KernelError("storing pointers is not supported by kernbench", src)
    try:
        np.broadcast_shapes(v.shape, shape)
    except ValueError:
        raise ShapeError(f"store value {list(v.shape)} does not broadcast to the pointer block "
                         f"{list(shape)}", src) from None
    if len(v.shape) > len(shape) or any(a > b for a, b in zip(v.shape[::-1], shape[::-1],
                                                              strict=False)):
        raise ShapeError(f"store value {list(v.shape)} is larger than the pointer block "
                         f"{list(shape)}", src)
    if v.kind == CONCRETE:
        v = data.materialise(v, v.dtype, src)
    return broadcast_to(v, shape)


def store(pointer: Any, value: Any, mask: Any = None, boundary_check: Any = (),
          cache_modifier: Any = "", eviction_policy: Any = "") -> None:
    src = src_here()
    ix = data.indexed(src)
    if isinstance(pointer, block_ptr):
        if plain(mask) is not None:
            raise KernelError("tl.store of a block pointer takes boundary_check, not mask", src)
        offs, m = pointer.access(boundary_check, src)
        v = _value(value, pointer.block_shape, d.from_kb(pointer.base.dtype), src)
        STORED.add(pointer.base.name)
        ix.store_indexed(pointer.base, offs, _mvalue(v), m, src=src)
        return
    p = _pointer(pointer, src, "tl.store")
    shape = _shape_of(src, "tl.store", ("pointer block", p), ("mask", mask))
    m = _mask(mask, shape, src)
    v = _value(value, shape, p.dtype.element_ty, src)
    offs = _offsets(p, shape)
    STORED.add(p.hbm_base.name)
    if type(offs) is np.ndarray:
        ix.store_indexed(p.base, offs, _mvalue(v), _mvalue(m), src=src)
    else:
        ix.scatter(p.base, offs, _mvalue(v), _mvalue(m), src=src)


def _atomic(op: str) -> Any:
    def fn(pointer: Any, val: Any, mask: Any = None, sem: Any = None, scope: Any = None
           ) -> tensor:
        src = src_here()
        ix = data.indexed(src)
        p = _pointer(pointer, src, f"tl.atomic_{op}")
        shape = _shape_of(src, f"tl.atomic_{op}", ("pointer block", p), ("mask", mask),
                          ("value", val))
        m = _mask(mask, shape, src)
        elem = p.dtype.element_ty
        v = _value(val, shape, elem, src)
        if type(v) is tensor and v.dtype is not elem:
            v = arith.cast(v, elem)
        STORED.add(p.hbm_base.name)
        h = ix.atomic(op, p.base, _offsets(p, shape), _mvalue(v), _mvalue(m), src=src)
        return data.symbolic(h, elem)
    fn.__name__ = fn.__qualname__ = f"atomic_{op}"
    return fn


def atomic_cas(pointer: Any, cmp: Any, val: Any, sem: Any = None, scope: Any = None) -> tensor:
    """Per element, atomically: ``old = *p; if old == cmp: *p = val``; returns ``old``."""
    src = src_here()
    ix = data.indexed(src)
    p = _pointer(pointer, src, "tl.atomic_cas")
    shape = _shape_of(src, "tl.atomic_cas", ("pointer block", p), ("compare", cmp),
                      ("value", val))
    elem = p.dtype.element_ty
    c, v = (_value(x, shape, elem, src) for x in (cmp, val))
    c, v = (arith.cast(x, elem) if type(x) is tensor and x.dtype is not elem else x
            for x in (c, v))
    STORED.add(p.hbm_base.name)
    h = ix.atomic("cas", p.base, _offsets(p, shape), _mvalue(v), None, src=src, cmp=_mvalue(c))
    return data.symbolic(h, elem)


ATOMICS = {f"atomic_{op}": _atomic(op) for op in ("add", "max", "min", "xchg", "and", "or",
                                                   "xor")} | {"atomic_cas": atomic_cas}
