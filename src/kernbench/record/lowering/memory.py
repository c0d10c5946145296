"""Semantic checks of the memory calls: load, store, copy_to, wait, ref, composite."""

from __future__ import annotations

from typing import Any

from kernbench.errors import BoundsError, DtypeError, KernelError, ShapeError, SpaceError
from kernbench.record.commands import Cmd, Resolve, Wait, new_cmd, tile_rows
from kernbench.record.handle import Buffer, Pointer, TensorHandle
from kernbench.record.lowering.emit import attrs_json as _attrs
from kernbench.record.lowering.emit import dtype_arg as _dtype
from kernbench.record.lowering.emit import into
from kernbench.record.lowering.emit import issue as _issue
from kernbench.record.lowering.emit import prod as _prod
from kernbench.record.lowering.emit import shape_arg as _shape
from kernbench.record.lowering.operands import live as _live
from kernbench.record.machine.context import current
from kernbench.record.rows.stream import AUTO_TILE
from kernbench.record.source import src_here
from kernbench.schemas import dtypes
from kernbench.schemas.ops import OP


def _hbm_operand(ptr: Any, shape: tuple[int, ...], what: str, src: str,
                 dtype: Any = None) -> TensorHandle:
    """The HBM bytes ``what`` reads or writes at ``ptr``: inside the tensor, of its dtype."""
    if type(ptr) is not Pointer:
        raise KernelError(f"{what} needs an HBM pointer, got {type(ptr).__name__} {ptr!r}", src)
    t = ptr.tensor
    n = _prod(shape)
    if ptr.offset < 0 or ptr.offset + n > t.numel:
        raise BoundsError(
            f"{what} of {n} elements at {t.name}+{ptr.offset} is outside tensor {t.name!r} "
            f"({t.numel} elements)", src)
    if dtype is not None and _dtype(dtype, src) is not t.dtype:
        raise DtypeError(f"{what} dtype {_dtype(dtype, src).name} differs from tensor "
                         f"{t.name!r} dtype {t.dtype.name}", src)
    buf = Buffer("hbm", t.pe, ptr.addr, n * t.dtype.itemsize, None, src)
    return TensorHandle(buf, shape, t.dtype)


def load(ptr: Pointer, shape: Any, dtype: Any, *, out: TensorHandle | None = None
         ) -> TensorHandle:
    """Issue an HBM->TCM DMA read; returns at once with a pending handle (lazy load)."""
    ctx = current()
    src = src_here()
    shape = _shape(shape, src)
    hbm = _hbm_operand(ptr, shape, "load", src, dtype)
    dt, n, nbytes = hbm.dtype, hbm.numel, hbm.nbytes
    if out is None:
        dst = TensorHandle(ctx.scratch.alloc(nbytes, ctx.scope, src), shape, dt)
    else:
        dst = into(out, shape, dt, "load", src)
    _issue(ctx, new_cmd(Cmd, (OP.DMA_READ, (hbm,), dst, n, nbytes, (nbytes,), src, 0, "{}")))
    return dst


def store(ptr: Pointer, value: TensorHandle) -> None:
    """Write ``value`` contiguously at ``ptr``, converted to the tensor's dtype (blocking)."""
    ctx = current()
    src = src_here()
    _live(value, src, "store value")
    hbm = _hbm_operand(ptr, value.shape, "store", src)
    _issue(ctx, new_cmd(Cmd, (OP.DMA_WRITE, (value,), hbm, hbm.numel, hbm.nbytes, (hbm.nbytes,),
                                src, 0, "{}")))


def copy_to(dst: TensorHandle, src_h: TensorHandle) -> None:
    """Copy ``src_h``'s bytes into ``dst`` (both TCM, same shape and dtype): ``math/copy``."""
    ctx = current()
    src = src_here()
    _live(dst, src, "copy_to dst")
    _live(src_h, src, "copy_to src")
    if dst.buf.space != "tcm" or src_h.buf.space != "tcm":
        raise SpaceError(f"copy_to needs TCM operands, got dst in {dst.space!r} and src in "
                         f"{src_h.space!r}", src)
    if dst.shape != src_h.shape:
        raise ShapeError(f"copy_to shapes differ: dst {list(dst.shape)} vs src "
                         f"{list(src_h.shape)}", src)
    if dst.dtype is not src_h.dtype:
        raise DtypeError(f"copy_to dtypes differ: dst {dst.dtype.name} vs src "
                         f"{src_h.dtype.name}", src)
    if dst.transposed:
        raise SpaceError("copy_to dst must not be a transposed view", src)
    n = dst.numel
    _issue(ctx, new_cmd(Cmd, (OP.COPY, (src_h,), dst, n, n * dst.dtype.itemsize, (n,), src, 0,
                              "{}")))


def wait(*handles: TensorHandle) -> None:
    """Stall until the pending completions of ``handles`` have landed."""
    ctx = current()
    src = src_here()
    bufs = [_live(h, src).buf for h in handles]
    if any(b.event for b in bufs):
        ctx.issue(Resolve([b for b in bufs if b.event]))
    ctx.issue(Wait(bufs))


def ref(ptr: Pointer, shape: Any, dtype: Any) -> TensorHandle:
    """An HBM-resident operand for ``composite`` (no data moves until the scheduler streams)."""
    current()
    src = src_here()
    return _hbm_operand(ptr, _shape(shape, src), "ref", src, dtype)


def composite(op: str = "gemm", *, a: TensorHandle, b: TensorHandle, trans_b: bool = False,
              tile: int | None = None) -> TensorHandle:
    """``a @ b`` (or ``a @ b^T``) with ``b`` streamed from HBM by the PE scheduler."""
    ctx = current()
    src = src_here()
    if op != "gemm":
        raise KernelError(f"composite op {op!r} is not supported (only 'gemm')", src)
    _live(a, src, "composite a")
    if a.space != "tcm" or a.ndim != 2:
        raise SpaceError(f"composite a must be a 2-D TCM handle, got {a!r}", src)
    if b.space != "hbm" or b.ndim != 2:
        raise SpaceError(f"composite b must be a 2-D tl.ref, got {b!r}", src)
    k_b, n = (b.shape[1], b.shape[0]) if trans_b else b.shape
    if a.shape[1] != k_b:
        shape_b = f"{list(b.shape)}{'^T' if trans_b else ''}"
        raise ShapeError(f"composite shapes {list(a.shape)} @ {shape_b} do not fit", src)
    if tile is not None and (not isinstance(tile, int) or tile <= 0):
        raise KernelError(f"composite tile must be a positive int, got {tile!r}", src)
    m = a.shape[0]
    stored = b.shape  # rows as stored in HBM: N with trans_b, K without
    if tile is None and ctx.tape is not None:  # the tiling follows the staging area
        ctx.tape.note(AUTO_TILE)
    rows = tile_rows(stored, b.dtype.itemsize, ctx.hw.stage_bytes, tile)  # type: ignore[arg-type]
    if rows * stored[1] * b.dtype.itemsize > ctx.hw.stage_bytes // 2:
        raise KernelError(f"composite tile of {rows} rows ({rows * stored[1] * b.dtype.itemsize}"
                          f" bytes) does not fit half the staging area "
                          f"({ctx.hw.stage_bytes // 2} bytes)", src)
    nbytes = m * n * 4
    scopes = ctx.scopes
    buf = ctx.scratch.alloc(nbytes, scopes[-1] if scopes else None, src)
    out = (TensorHandle(buf, (n, m), dtypes.float32) if trans_b
           else TensorHandle(buf, (m, n), dtypes.float32))
    _issue(ctx, Cmd(OP.GEMM, (a, b), out, m * n, nbytes, (m, n, a.shape[1], trans_b, rows), src,
                  2 * m * n * a.shape[1],
                  _attrs(tile=rows, trans_b=bool(trans_b))))
    return TensorHandle(buf, (m, n), dtypes.float32, True) if trans_b else out
