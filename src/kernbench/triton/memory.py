"""``tl.load`` / ``tl.store`` / atomics: a pointer block's offsets and mask select exactly the
elements that move (``record.addressing``); offsets from loaded data are gathers/scatters.
``tl.make_block_ptr`` / ``tl.advance`` are the same accesses in another notation."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from kernbench.errors import DtypeError, KernelError, ShapeError
from kernbench.record.handle import HbmTensor, TensorHandle
from kernbench.record.lowering import addressing as ix
from kernbench.record.lowering.indexplan import fits_int64, remember
from kernbench.record.memo import BoundedMemo
from kernbench.record.source import src_here
from kernbench.schemas.rules import broadcast_shapes
from kernbench.triton import arith, data
from kernbench.triton import dtypes as d
from kernbench.triton.core import block_shape, broadcast_to
from kernbench.triton.value import (
    VALUES,
    Concrete,
    Pointer,
    Scalar,
    Symbolic,
    Value,
    concrete,
    int_value,
    plain,
    settled,
)

#: a load/store mask: None (everything moves), concrete booleans, or booleans from data
Mask = np.ndarray | Symbolic | None

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

    def access(self, boundary_check: object, src: str) -> tuple[np.ndarray, np.ndarray | None]:
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

    def known(self) -> _BlockKnown:
        """What is known of this block's offsets (``indexplan.Known``): the relative offsets
        of every block of this shape and strides, once an unmasked access learnt them,
        placed at this block's origin (ADR-0690)."""
        origin = self.offset + sum(o * s for o, s in zip(self.offsets, self.strides,
                                                         strict=True))
        return _BlockKnown((self.block_shape, self.strides), origin)


#: relative offsets key and lowest/highest element relative to the block origin, by
#: (block shape, strides): the same for every block pointer of that geometry
_BLOCK_RELS = BoundedMemo()


class _BlockKnown:
    """A block access's ``Known``: ``rel`` from ``_BLOCK_RELS`` once the geometry has been
    learnt, placed at the block's origin while no offset leaves int64 (``learnt``: keep
    what an unmasked access taught, when it is the exact extent, so nothing wrapped)."""

    __slots__ = ("geometry", "origin", "rel")

    def __init__(self, geometry: tuple, origin: int) -> None:
        self.geometry, self.origin, self.rel = geometry, origin, None
        got = _BLOCK_RELS.get(geometry)
        if got is not None:
            key, lo, hi = got[0], origin + got[1], origin + got[2]
            if fits_int64(lo, hi):
                self.rel = (key, lo, hi)

    def learnt(self) -> None:
        rel = self.rel
        if rel is None or self.geometry in _BLOCK_RELS:
            return
        shape, strides = self.geometry
        lo = sum(min(0, (n - 1) * st) for n, st in zip(shape, strides, strict=True))
        hi = sum(max(0, (n - 1) * st) for n, st in zip(shape, strides, strict=True))
        if (rel[1] - self.origin, rel[2] - self.origin) == (lo, hi):
            remember(_BLOCK_RELS, self.geometry, (rel[0], lo, hi))


def _ints(xs: object, what: str, src: str) -> tuple[int, ...]:
    xs = plain(xs)
    xs = xs if isinstance(xs, tuple | list) else (xs,)
    return tuple(int_value(x, what, src) for x in xs)


def make_block_ptr(base: object, shape: object, strides: object, offsets: object,
                   block_shape: object, order: object) -> block_ptr:
    src = src_here()
    if not isinstance(base, Pointer) or base.shape != () or type(base.offsets) is not np.ndarray:
        raise KernelError(f"make_block_ptr base must be a scalar pointer, got {base!r}", src)
    shp, st = _ints(shape, "shape", src), _ints(strides, "stride", src)
    offs, blk = _ints(offsets, "offset", src), block_shape_of(block_shape, src)
    if not len(shp) == len(st) == len(offs) == len(blk):
        raise ShapeError(f"make_block_ptr: shape {list(shp)}, strides {list(st)}, offsets "
                         f"{list(offs)} and block_shape {list(blk)} differ in rank", src)
    return block_ptr(base.base, int(base.offsets), shp, st, offs, blk, _ints(order, "order", src))


def block_shape_of(b: object, src: str) -> tuple[int, ...]:
    return block_shape(b, "block_shape", src)


def advance(base: block_ptr, offsets: object) -> block_ptr:
    src = src_here()
    delta = _ints(offsets, "advance offset", src)
    if len(delta) != len(base.offsets):
        raise ShapeError(f"advance by {list(delta)} of a {len(base.offsets)}-D block pointer", src)
    return block_ptr(base.base, base.offset, base.shape, base.strides,
                     tuple(a + b for a, b in zip(base.offsets, delta, strict=True)),
                     base.block_shape, base.order)


# -- masks and operands ----------------------------------------------------------------------
def _mask(mask: object, shape: tuple[int, ...], src: str) -> Mask:
    """None (everything moves), a bool array, or symbolic booleans, of ``shape``."""
    mask = settled(plain(mask))
    if mask is None:
        return None
    m = mask if isinstance(mask, VALUES) else concrete(np.asarray(bool(mask)))
    if isinstance(m, Pointer) or not m.dtype.is_bool():
        raise DtypeError(f"mask must be boolean (int1), got {m.dtype!r}", src)
    if isinstance(m, Concrete):
        return _concrete_mask(m, shape)
    return m if m.shape == shape else data.broadcast(m, shape)


def _concrete_mask(m: Concrete, shape: tuple[int, ...]) -> np.ndarray | None:
    """A concrete mask broadcast to ``shape``: None when all true, else a read-only array,
    kept in the index-arithmetic memo by the mask's memo key when it has one (each program
    of a launch masks alike)."""
    mk = m.memo_key
    key = None if mk is None or not arith.MEMO else ("mask", mk, shape)
    if key is not None:
        got = arith.memo().get(key)
        if got is not None:
            return got[0]
    v = m.value if m.shape == shape else np.broadcast_to(m.value, shape)
    out = None if v.all() else np.array(v)
    if key is not None:
        nbytes = len(key[1][-1])
        if out is not None:
            out.flags.writeable = False
            nbytes += out.nbytes
        arith.memo().keep(key, (out,), nbytes, arith.MEMO_LIMIT, arith.MEMO_BYTES)
    return out


def _shape_of(src: str, what: str, *named: tuple[str, object]) -> tuple[int, ...]:
    """The broadcast shape of the named operands; a ShapeError at the kernel's line naming
    each operand's shape when they do not broadcast (a mask of the wrong shape)."""
    shapes = [(n, _shape(x)) for n, x in named]
    first = shapes[0][1]
    for _, s in shapes:
        if s != first and s != ():
            return _broadcast(shapes, what, src)
    return tuple(first)  # the usual case: no broadcasting


def _common(p: Pointer, mask: object, other: object) -> tuple[int, ...] | None:
    """``_shape_of`` of a load/store's pointer block, mask and ``other`` (None: absent)
    when it is the pointer block's shape or a broadcast seen before, else None
    (``_shape_of`` works it out, or names the operands that do not broadcast)."""
    ps = p.shape
    ms = _shape(mask)
    os_ = None if other is None else _shape(other)
    if ps != () and ms in (ps, ()) and os_ in (None, ps, ()):
        return ps
    # a broadcast worked out before, under ``_shape_of``'s key (its operands in order)
    return _BROADCASTS.get((ps, ms) if os_ is None else (ps, ms, os_))


#: types of operands without a shape (a scalar or no mask)
_UNSHAPED = frozenset({type(None), int, float, bool})


def _shape(x: object) -> tuple[int, ...]:
    if type(x) in _UNSHAPED:
        return ()
    return x.shape if isinstance(x, VALUES) else getattr(plain(x), "shape", ())


#: broadcast shapes of load/store operands by their shapes (a launch has a few)
_BROADCASTS = BoundedMemo()


def _broadcast(shapes: list[tuple[str, tuple[int, ...]]], what: str, src: str) -> tuple[int, ...]:
    key = tuple(tuple(s) for _, s in shapes)
    got = _BROADCASTS.get(key)
    if got is not None:
        return got
    try:
        got = tuple(np.broadcast_shapes(*key))
        remember(_BROADCASTS, key, got)
        return got
    except ValueError:
        told = ", ".join(f"{n} {list(s)}" for n, s in shapes)
        raise ShapeError(f"{what}: {told} do not broadcast to one shape", src) from None


def _offsets(p: Pointer, shape: tuple[int, ...]) -> np.ndarray | TensorHandle:
    offs = p.offsets
    if isinstance(offs, np.ndarray):
        if offs.shape == shape and offs.dtype == np.int64:
            return offs  # read only below: the pointer's own offsets
        return np.array(np.broadcast_to(offs, shape), dtype=np.int64)
    got = broadcast_to(p, shape)
    assert isinstance(got, Pointer), "a pointer broadcasts to a pointer"
    return got.offsets


def _pointer(ptr: object, src: str, what: str) -> Pointer:
    if not isinstance(ptr, Pointer):
        raise KernelError(f"{what} needs a pointer, got {ptr!r}", src)
    return ptr


def _mvalue(m: Mask) -> np.ndarray | TensorHandle | None:
    return m.handle if isinstance(m, Symbolic) else m


def _vvalue(v: Scalar | Symbolic) -> Scalar | TensorHandle:
    return v.handle if isinstance(v, Symbolic) else v


# -- load / store ----------------------------------------------------------------------------
_PADDING = {"": None, "zero": 0, "nan": float("nan")}


def load(pointer: object, mask: object = None, other: object = None,
         boundary_check: object = (), padding_option: object = "", cache_modifier: object = "",
         eviction_policy: object = "", volatile: object = False) -> Concrete | Symbolic:
    src = src_here()
    if isinstance(pointer, block_ptr):
        if plain(mask) is not None or plain(other) is not None:
            raise KernelError("tl.load of a block pointer takes boundary_check/padding_option, "
                              "not mask/other", src)
        pad = plain(padding_option)
        if pad not in _PADDING:
            raise KernelError(f"padding_option {pad!r} is not one of 'zero', 'nan'", src)
        at, inside = pointer.access(boundary_check, src)
        t = d.from_kb(pointer.base.dtype)
        known = pointer.known()
        h = ix.load_indexed(pointer.base, at, inside, _PADDING[pad], src=src, known=known)
        known.learnt()
        return data.symbolic(h, t)
    p = _pointer(pointer, src, "tl.load")
    other = plain(other)
    shape = _common(p, mask, other) or _shape_of(
        src, "tl.load", ("pointer block", p), ("mask", mask),
        *((("other", other),) if other is not None else ()))
    elem = p.dtype.element_ty
    m = _mask(mask, shape, src)
    oth: Scalar | None = None
    rest: Value | None = None
    if other is not None:
        o = arith.operand(other, src, "load other")
        if isinstance(o, VALUES) and (not isinstance(o, Concrete) or not data.uniform(o.value)):
            rest = o
        else:
            oth = data.py_scalar(o.value if isinstance(o, Concrete) else o, elem)
    offs = _offsets(p, shape)
    if isinstance(offs, np.ndarray):
        h = ix.load_indexed(p.base, offs, _mvalue(m), oth, src=src,
                            known=p if offs is p.offsets else None)
    else:
        h = ix.gather(p.base, offs, _mvalue(m), oth, src=src)
    r = data.symbolic(h, elem)
    if rest is not None and m is not None:
        return arith.where(m if isinstance(m, Symbolic) else concrete(m), r, rest)
    return r


def _value(value: object, shape: tuple[int, ...], elem: d.dtype, src: str) -> Scalar | Symbolic:
    """The stored value: a Python scalar when uniform, else a symbolic block of ``shape``."""
    v = arith.operand(value, src, "store value")
    if type(v) is Symbolic and v.shape == shape:
        return v  # the usual case: a block of the pointer block's shape
    if not isinstance(v, VALUES) or (isinstance(v, Concrete) and data.uniform(v.value)):
        return data.py_scalar(v.value if isinstance(v, Concrete) else v, elem)
    if isinstance(v, Pointer):
        raise KernelError("storing pointers is not supported by kernbench", src)
    try:
        broadcast_shapes(v.shape, shape)
    except ValueError:
        raise ShapeError(f"store value {list(v.shape)} does not broadcast to the pointer block "
                         f"{list(shape)}", src) from None
    if len(v.shape) > len(shape) or any(a > b for a, b in zip(v.shape[::-1], shape[::-1],
                                                              strict=False)):
        raise ShapeError(f"store value {list(v.shape)} is larger than the pointer block "
                         f"{list(shape)}", src)
    h = data.materialise(v, v.dtype, src) if isinstance(v, Concrete) else v
    return h if h.shape == shape else data.broadcast(h, shape)


def store(pointer: object, value: object, mask: object = None, boundary_check: object = (),
          cache_modifier: object = "", eviction_policy: object = "") -> None:
    src = src_here()
    if isinstance(pointer, block_ptr):
        if plain(mask) is not None:
            raise KernelError("tl.store of a block pointer takes boundary_check, not mask", src)
        at, inside = pointer.access(boundary_check, src)
        v = _value(value, pointer.block_shape, d.from_kb(pointer.base.dtype), src)
        STORED.add(pointer.base.name)
        known = pointer.known()
        ix.store_indexed(pointer.base, at, _vvalue(v), inside, src=src, known=known)
        known.learnt()
        return
    p = _pointer(pointer, src, "tl.store")
    shape = _common(p, mask, None) or _shape_of(src, "tl.store", ("pointer block", p),
                                                ("mask", mask))
    m = _mask(mask, shape, src)
    v = _value(value, shape, p.dtype.element_ty, src)
    offs = _offsets(p, shape)
    STORED.add(p.base.name)
    if isinstance(offs, np.ndarray):
        ix.store_indexed(p.base, offs, _vvalue(v), _mvalue(m), src=src,
                         known=p if offs is p.offsets else None)
    else:
        ix.scatter(p.base, offs, _vvalue(v), _mvalue(m), src=src)


def _atomic(op: str) -> Callable[..., Symbolic]:
    def fn(pointer: object, val: object, mask: object = None, sem: object = None,
           scope: object = None) -> Symbolic:
        src = src_here()
        p = _pointer(pointer, src, f"tl.atomic_{op}")
        shape = _shape_of(src, f"tl.atomic_{op}", ("pointer block", p), ("mask", mask),
                          ("value", val))
        m = _mask(mask, shape, src)
        elem = p.dtype.element_ty
        v = _as(_value(val, shape, elem, src), elem)
        STORED.add(p.base.name)
        h = ix.atomic(op, p.base, _offsets(p, shape), _vvalue(v), _mvalue(m), src=src)
        return data.symbolic(h, elem)
    fn.__name__ = fn.__qualname__ = f"atomic_{op}"
    return fn


def _as(v: Scalar | Symbolic, elem: d.dtype) -> Scalar | Symbolic:
    """A stored symbolic value converted to the pointer's element type."""
    return data.cast(v, elem, src_here()) if isinstance(v, Symbolic) and v.dtype is not elem \
        else v


def atomic_cas(pointer: object, cmp: object, val: object, sem: object = None,
               scope: object = None) -> Symbolic:
    """Per element, atomically: ``old = *p; if old == cmp: *p = val``; returns ``old``."""
    src = src_here()
    p = _pointer(pointer, src, "tl.atomic_cas")
    shape = _shape_of(src, "tl.atomic_cas", ("pointer block", p), ("compare", cmp),
                      ("value", val))
    elem = p.dtype.element_ty
    c, v = (_value(x, shape, elem, src) for x in (cmp, val))
    c, v = _as(c, elem), _as(v, elem)  # both stored values alive until both are converted
    STORED.add(p.base.name)
    h = ix.atomic("cas", p.base, _offsets(p, shape), _vvalue(v), None, src=src, cmp=_vvalue(c))
    return data.symbolic(h, elem)


ATOMICS = {f"atomic_{op}": _atomic(op) for op in ("add", "max", "min", "xchg", "and", "or",
                                                   "xor")} | {"atomic_cas": atomic_cas}
