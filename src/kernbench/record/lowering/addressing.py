"""Indexed memory: loads and stores at concrete element offsets with masks, gathers and
scatters at offsets loaded into TCM, atomics, and concrete values materialised in TCM.

Rows as ``kernbench.schemas.elements`` describes (docs/trace-format.md): an affine tile keeps
its strides in attrs; other patterns, masks not all true and ``const`` arrays go to
``access.parquet`` once; the contiguous all-true tile is the plain ``tl.load``/``tl.store``
row. Every function runs inside a kernel being recorded."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from kernbench.errors import BoundsError, DtypeError, KernelError, ShapeError
from kernbench.record.commands import Cmd
from kernbench.record.handle import Buffer, HbmTensor, TensorHandle
from kernbench.record.lowering.emit import attrs_json as _attrs
from kernbench.record.lowering.emit import emit as _emit
from kernbench.record.lowering.emit import issue as _issue
from kernbench.record.lowering.indexplan import (
    MASKED,
    MASKS,
    Known,
    Plan,
    access_id,
    canon,
    frozen,
    learn,
    new_plan,
    out_of_bounds,
    remember,
)
from kernbench.record.lowering.operands import live as _live
from kernbench.record.machine.context import KernelContext, current
from kernbench.record.machine.holds import hold_inputs
from kernbench.record.memo import BoundedMemo
from kernbench.schemas import elements as ix
from kernbench.schemas.dtypes import DType
from kernbench.schemas.ops import OP, OPS, Op

Mask = np.ndarray | TensorHandle | None
_SCALARS = (int, float, bool)
#: atomic op names of ``atomic(op, ...)`` -> table op
ATOMIC_OPS = {op.value.removeprefix("atomic_"): op for op in OPS
              if op.value.startswith("atomic_")}


def _scalar(v: Any, what: str, src: str) -> int | float | bool:
    if isinstance(v, np.generic):
        v = v.item()
    if not isinstance(v, _SCALARS):
        raise KernelError(f"{what} must be a Python scalar, got {type(v).__name__} {v!r}", src)
    return v


def _tensor(t: Any, what: str, src: str) -> HbmTensor:
    if type(t) is not HbmTensor:
        raise KernelError(f"{what} needs an HBM tensor, got {type(t).__name__} {t!r}", src)
    return t


def _offsets(offsets: Any, what: str, src: str) -> np.ndarray:
    arr = np.asarray(offsets)
    if arr.dtype.kind not in "iu":
        raise DtypeError(f"{what} offsets must be integers, got {arr.dtype}", src)
    if arr.size == 0:
        raise ShapeError(f"{what} offsets {list(arr.shape)} are empty", src)
    return arr.astype(np.int64, copy=False)


def _mask(mask: Any, shape: tuple[int, ...], what: str, src: str) -> np.ndarray | None:
    """A concrete mask in the offsets' shape, or None when every element is masked in."""
    if mask is None:
        return None
    known = MASKS.get(id(mask))
    if known is not None and known[0] is mask and known[1].shape == shape:
        return known[1]  # a frozen mask already checked: bool, not all true
    m = np.asarray(mask)
    if m.dtype != np.bool_:
        raise DtypeError(f"{what} mask must be bool, got {m.dtype}", src)
    own = m.shape == shape and m is mask and frozen(m)
    try:
        m = np.broadcast_to(m, shape)
    except ValueError:
        raise ShapeError(f"{what} mask {list(m.shape)} does not fit offsets {list(shape)}",
                         src) from None
    if m.all():
        return None
    if own:  # the front end's memoised mask: its C-ordered copy, frozen, is remembered
        c = np.array(m, order="C")
        c.flags.writeable = False
        remember(MASKS, id(mask), (mask, c))
        return c
    return np.ascontiguousarray(m)


def _hbm(t: HbmTensor, addr: int, shape: tuple[int, ...], src: str) -> TensorHandle:
    n = 1
    for s in shape:
        n *= s
    return TensorHandle(Buffer("hbm", t.pe, addr, n * t.dtype.itemsize, None, src), shape,
                        t.dtype)


def _whole(t: HbmTensor, src: str) -> TensorHandle:
    return _hbm(t, t.addr, (t.numel,), src)


#: plans by (tile shape, relative offsets, mask, itemsize, burst bytes), bounded by
#: ``PLAN_LIMIT`` and ``PLAN_BYTES`` (cleared when full: gathers at arbitrary offsets never
#: repeat); ``CACHE`` False plans afresh (the byte-identity tests compare both ways).
_PLANS = BoundedMemo()
CACHE = True
PLAN_LIMIT = 512
PLAN_BYTES = 32 << 20  # and at most this many bytes of keys and stored offsets


def _keep(key: tuple, plan: Plan, nbytes: int) -> None:
    nbytes += 0 if plan.stored is None else plan.stored.nbytes
    _PLANS.keep(key, plan, nbytes, PLAN_LIMIT, PLAN_BYTES)


def _plan(ctx: KernelContext, t: HbmTensor, offs: np.ndarray, m: np.ndarray | None,
          what: str, src: str, known: Known | None = None
          ) -> tuple[TensorHandle, dict[str, Any], Plan]:
    """(HBM operand, attrs, plan) of an access at concrete ``offs``; attrs empty when it is
    the plain contiguous tile. BoundsError for a masked-in offset outside the tensor.
    ``known``: what the caller knows of ``offs`` (``Known``); with it a repeated access
    reads no offset at all."""
    isz, burst = t.dtype.itemsize, ctx.hw.dma_burst_bytes
    rel_of = None if known is None or not CACHE else known.rel
    if rel_of is not None:  # the relative offsets are known: look the plan up by them
        rkey, lo, hi = rel_of
        plan = None
        if m is None:
            plan = _PLANS.get((rkey[0], rkey[1], None, isz, burst))
        elif frozen(m):
            got = MASKED.get((rkey, id(m), isz, burst))
            if got is not None and got[0] is m:
                _, plan, rlo, rhi = got
                lo, hi = lo + rlo, lo + rhi
        if plan is not None and lo >= 0 and hi < t.numel:
            return _finish(ctx, t, offs.shape, m, lo, plan, src)
    flat = offs.reshape(-1)
    sel = flat if m is None else flat[m.reshape(-1)]
    lo = hi = 0
    if sel.size:
        lo, hi = int(sel.min()), int(sel.max())
        if lo < 0 or hi >= t.numel:
            out_of_bounds(t, offs, m, sel, what, src)
    rel = offs - lo  # a new array: a cached plan never shares the caller's
    if CACHE:
        rb = canon(rel, PLAN_LIMIT, PLAN_BYTES)
        key = (offs.shape, rb, None if m is None else m.tobytes(), isz, burst)
        plan = _PLANS.get(key)
        if plan is None:
            plan = new_plan(rel, m, isz, burst)
            _keep(key, plan, len(key[1]) + (offs.size if m is not None else 0))
        if known is not None:
            learn(known, m, key, lo, hi, plan)
    else:
        plan = new_plan(rel, m, isz, burst)
    return _finish(ctx, t, offs.shape, m, lo, plan, src)


def _finish(ctx: KernelContext, t: HbmTensor, shape: tuple[int, ...], m: np.ndarray | None,
            lo: int, plan: Plan, src: str) -> tuple[TensorHandle, dict[str, Any], Plan]:
    hbm = _hbm(t, t.addr + lo * t.dtype.itemsize, shape, src)
    attrs: dict[str, Any] = {}
    if plan.contiguous:
        return hbm, attrs, plan
    writer = ctx.driver.writer
    if plan.strides is not None:
        attrs["strides"] = list(plan.strides)
        if plan.base:
            attrs["base"] = plan.base
    else:  # neither contiguous nor affine: the offsets are stored
        assert plan.stored is not None
        attrs["access"] = access_id(writer, "offsets", plan.stored)
    if m is not None:
        attrs["mask"] = access_id(writer, "mask", m)
    writer.indexed = True
    return hbm, attrs, plan


def _value(ctx: KernelContext, value: Any, shape: tuple[int, ...], t: HbmTensor, what: str,
           src: str) -> TensorHandle:
    """The stored value as a TCM handle of ``shape`` (a scalar becomes a ``fill``)."""
    if isinstance(value, TensorHandle):
        _live(value, src, f"{what} value")
        if value.shape != shape:
            raise ShapeError(f"{what} value {list(value.shape)} does not fit offsets "
                             f"{list(shape)}", src)
        return value
    v = _scalar(value, f"{what} value", src)
    return _emit(ctx, OP.FILL, (), shape, t.dtype, (math.prod(shape),), src, _attrs(value=v))


def _handle(h: Any, what: str, src: str, ints: bool = False) -> TensorHandle:
    if not isinstance(h, TensorHandle):
        raise KernelError(f"{what} must be a TensorHandle, got {type(h).__name__} {h!r}", src)
    _live(h, src, what)
    if ints and (h.dtype.is_float or h.dtype.name == "bool"):
        raise DtypeError(f"{what} must be integers, got {h.dtype.name}", src)
    return h


def _burst_work(ctx: KernelContext, n: int, itemsize: int) -> tuple[int, ...]:
    """A gather/scatter by loaded offsets: one burst per element."""
    burst = ctx.hw.dma_burst_bytes
    return (n * itemsize,) if n <= 1 else (n * itemsize, n * burst, n)


def _const_offsets(offs: np.ndarray, what: str, src: str) -> TensorHandle:
    if offs.min() < np.iinfo(np.int32).min or offs.max() > np.iinfo(np.int32).max:
        raise BoundsError(f"{what} offsets reach {int(offs.max())}, beyond int32", src)
    from kernbench.schemas import dtypes

    return constant(offs.astype(np.int32), dtypes.int32, src=src)


# -- the interface the Triton front end uses (docs/triton.md) -------------------------------
def load_indexed(tensor: HbmTensor, offsets: np.ndarray, mask: Mask = None,
                 other: int | float | bool | None = None, *, src: str,
                 known: Known | None = None) -> TensorHandle:
    """Lazy DMA read of ``tensor``'s elements at ``offsets`` (any shape) into a fresh TCM
    handle; masked-off elements move nothing and read as ``other`` (0 when None).
    ``known``: what the caller knows of ``offsets`` (``Known``), else None."""
    ctx = current()
    t = _tensor(tensor, "load_indexed", src)
    offs = _offsets(offsets, "load_indexed", src)
    if isinstance(mask, TensorHandle):  # which elements move is known in Phase 2 only
        return gather(t, _const_offsets(offs, "load_indexed", src), mask, other, src=src)
    m = _mask(mask, offs.shape, "load_indexed", src)
    hbm, attrs, plan = _plan(ctx, t, offs, m, "load_indexed", src, known)
    if other is not None and m is not None:
        attrs["other"] = _scalar(other, "load_indexed other", src)
    dt, shape = t.dtype, offs.shape
    dst = TensorHandle(ctx.scratch.alloc(hbm.nbytes, ctx.scope, src), shape, dt)
    n = plan.n
    _issue(ctx, Cmd(OP.DMA_READ, (hbm,), dst, n, n * dt.itemsize, plan.work, src, 0,
                    _attrs(**attrs) if attrs else "{}"))
    return dst


def store_indexed(tensor: HbmTensor, offsets: np.ndarray, value: TensorHandle | int | float,
                  mask: Mask = None, *, src: str, known: Known | None = None) -> None:
    """Blocking DMA write of ``value`` (offsets' shape) to ``tensor``'s elements at
    ``offsets``, converted to the tensor's dtype; masked-off elements are not written.
    ``known`` as for ``load_indexed``."""
    ctx = current()
    t = _tensor(tensor, "store_indexed", src)
    offs = _offsets(offsets, "store_indexed", src)
    if isinstance(mask, TensorHandle):
        return scatter(t, _const_offsets(offs, "store_indexed", src), value, mask, src=src)
    m = _mask(mask, offs.shape, "store_indexed", src)
    hbm, attrs, plan = _plan(ctx, t, offs, m, "store_indexed", src, known)
    v = _value(ctx, value, offs.shape, t, "store_indexed", src)
    isz, n = t.dtype.itemsize, plan.n
    _issue(ctx, Cmd(OP.DMA_WRITE, (v,), hbm, n, n * isz, plan.work, src, 0,
                    _attrs(**attrs) if attrs else "{}"))
    return None


def _symbolic_mask(ctx: KernelContext, mask: Mask, shape: tuple[int, ...], what: str,
                   src: str) -> tuple[list[TensorHandle], dict[str, Any], int | None]:
    """(extra inputs, attrs, masked-in count or None when unknown) of a gather/scatter mask."""
    if isinstance(mask, TensorHandle):
        _handle(mask, f"{what} mask", src)
        if mask.dtype.name != "bool" or mask.shape != shape:
            raise ShapeError(f"{what} mask is {list(mask.shape)} {mask.dtype.name}, needs "
                             f"{list(shape)} bool", src)
        return [mask], {"mask": ix.INPUT}, None
    m = _mask(mask, shape, what, src)
    if m is None:
        return [], {}, None
    return [], {"mask": ctx.driver.writer.access.add("mask", m)}, int(m.sum())


def gather(tensor: HbmTensor, offsets: TensorHandle, mask: Mask = None, other: Any = None, *,
           src: str) -> TensorHandle:
    """Lazy read of ``tensor``'s elements at offsets held in TCM (costed one burst per
    element); Phase 2 checks every masked-in offset against the tensor."""
    ctx = current()
    t = _tensor(tensor, "gather", src)
    offs = _handle(offsets, "gather offsets", src, ints=True)
    extra, attrs, count = _symbolic_mask(ctx, mask, offs.shape, "gather", src)
    if other is not None:
        attrs["other"] = _scalar(other, "gather other", src)
    n = offs.numel if count is None else count
    dst = TensorHandle(ctx.scratch.alloc(offs.numel * t.dtype.itemsize, ctx.scope, src),
                       offs.shape, t.dtype)
    ctx.driver.writer.indexed = True
    cmd = Cmd(OP.GATHER, (_whole(t, src), offs, *extra), dst, n, n * t.dtype.itemsize,
              _burst_work(ctx, n, t.dtype.itemsize), src, 0, _attrs(**attrs))
    _issue(ctx, cmd)
    hold_inputs(cmd)
    return dst


def scatter(tensor: HbmTensor, offsets: TensorHandle, value: TensorHandle | int | float,
            mask: Mask = None, *, src: str) -> None:
    """Blocking write of ``value`` to ``tensor``'s elements at offsets held in TCM."""
    ctx = current()
    t = _tensor(tensor, "scatter", src)
    offs = _handle(offsets, "scatter offsets", src, ints=True)
    extra, attrs, count = _symbolic_mask(ctx, mask, offs.shape, "scatter", src)
    v = _value(ctx, value, offs.shape, t, "scatter", src)
    n = offs.numel if count is None else count
    ctx.driver.writer.indexed = True
    _issue(ctx, Cmd(OP.SCATTER, (v, offs, *extra), _whole(t, src), n, n * t.dtype.itemsize,
                    _burst_work(ctx, n, t.dtype.itemsize), src, 0, _attrs(**attrs)))


def atomic(op: str, tensor: HbmTensor, offsets: np.ndarray | TensorHandle,
           value: TensorHandle | int | float, mask: Mask = None, *, src: str,
           cmp: TensorHandle | int | float | None = None) -> TensorHandle:
    """Read-modify-write of ``tensor``'s elements at ``offsets`` with ``op`` (add, max, min,
    xchg, and, or, xor; cas with ``cmp``); returns the old values (a pending TCM handle).
    Phase 2 applies atomics in time order; the race detector never reports them."""
    ctx = current()
    t = _tensor(tensor, f"atomic_{op}", src)
    aop: Op | None = ATOMIC_OPS.get(op)
    if aop is None:
        raise KernelError(f"atomic op {op!r} is not one of {sorted(ATOMIC_OPS)}", src)
    what = aop.value
    if (cmp is None) is (aop is OP.ATOMIC_CAS):
        raise KernelError(f"{what} {'needs a' if cmp is None else 'takes no'} compare value "
                          f"(cmp={cmp!r})", src)
    if OPS[aop].ints and t.dtype.is_float:
        raise DtypeError(f"{what} needs an integer tensor, {t.name!r} is {t.dtype.name}", src)
    if not isinstance(offsets, TensorHandle):
        offs = _offsets(offsets, what, src)
        if isinstance(mask, TensorHandle):
            offsets = _const_offsets(offs, what, src)
    isz = t.dtype.itemsize
    if isinstance(offsets, TensorHandle):
        oh = _handle(offsets, f"{what} offsets", src, ints=True)
        shape = oh.shape
        extra, attrs, count = _symbolic_mask(ctx, mask, shape, what, src)
        hbm, idx = _whole(t, src), [oh, *extra]
        attrs["offsets"] = ix.INPUT
        n = oh.numel if count is None else count
        work = _burst_work(ctx, n, isz)
    else:
        shape = offs.shape
        m = _mask(mask, shape, what, src)
        hbm, attrs, plan = _plan(ctx, t, offs, m, what, src)
        if not attrs:  # contiguous: the row-major strides
            assert plan.strides is not None
            attrs["strides"] = list(plan.strides)
        idx, n, work = [], plan.n, plan.work
    ins: list[TensorHandle] = [hbm]
    for key, v in (("value", value), ("cmp", cmp)):  # inputs: [hbm, value?, cmp?, ...]
        if isinstance(v, TensorHandle):
            ins.append(_value(ctx, v, shape, t, what if key == "value" else f"{what} cmp", src))
            if key == "cmp":  # a TCM value is marked by its absence, a TCM cmp by "input"
                attrs["cmp"] = ix.INPUT
        elif v is not None:
            attrs[key] = _scalar(v, f"{what} {key}", src)
    dst = TensorHandle(ctx.scratch.alloc(math.prod(shape) * isz, ctx.scope, src), shape,
                       t.dtype)
    ctx.driver.writer.indexed = True
    cmd = Cmd(aop, (*ins, *idx), dst, n, n * isz, work, src, 0, _attrs(**attrs))
    _issue(ctx, cmd)
    hold_inputs(cmd)
    return dst


def constant(values: np.ndarray, dtype: DType, *, src: str) -> TensorHandle:
    """Materialise concrete ``values`` (converted to ``dtype``) in TCM: a ``const`` op whose
    values are stored once per distinct array in access.parquet."""
    ctx = current()
    arr = np.asarray(values)
    if arr.size == 0:
        raise ShapeError(f"constant of shape {list(arr.shape)} is empty", src)
    with np.errstate(all="ignore"):
        arr = np.ascontiguousarray(arr.astype(dtype.np))
    ref = ctx.driver.writer.access.add("values", arr)
    ctx.driver.writer.indexed = True
    return _emit(ctx, OP.CONST, (), tuple(arr.shape), dtype, (arr.size,), src,
                 _attrs(values=ref))
