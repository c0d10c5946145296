"""Replay of indexed memory (trace format version 2): strided/masked/access-referenced
``dma_read``/``dma_write``, ``gather``, ``scatter``, atomics and ``const``.

An indexed HBM operand is an ``ElementOperand``: the set of elements the row moves
(``kernbench.schemas.elements``), checked once at bind time — masked-in elements only — to
lie in the tensor holding the operand's address. Reading it gathers (masked-off elements
take ``other``); writing it (the engine's ``view[...] = value`` at the landing time)
scatters the masked-in elements only. Offsets loaded in TCM (gather, scatter, atomics) are
read when the op runs and an offset outside the tensor is a ReplayError naming the op.
Atomics read-modify-write HBM when they run (``t_start_ps`` order) and return the old values.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from kernbench.errors import ReplayError
from kernbench.replay.binding import BindContext, Executor, need, reader, same
from kernbench.replay.convert import BF16
from kernbench.replay.store import NP_DTYPES, Memory, MemoryStore, Operand
from kernbench.schemas import elements as ix
from kernbench.schemas import memory_ops as mops
from kernbench.schemas import offsets as off
from kernbench.schemas.ops import ATOMICS, OPS, Op
from kernbench.trace.columns import distinct


def _flat(mem: Memory, npd: np.dtype) -> np.ndarray:
    return np.frombuffer(mem.buf, dtype=npd, count=mem.size // npd.itemsize)


class _Scatter:
    """The write side of an element operand: ``view[...] = value`` stores the masked-in
    elements of ``value`` at their addresses (the operand's ``index`` into the memory's
    elements)."""

    __slots__ = ("operand",)

    def __init__(self, operand: ElementOperand) -> None:
        self.operand = operand

    def __setitem__(self, key: Any, value: np.ndarray) -> None:
        o = self.operand
        mops.written(o.flat, o.index, o.sel, value)  # type: ignore[arg-type]


class ElementOperand(Operand):
    """An HBM operand that is a set of elements: ``index`` of the masked-in elements,
    ``sel`` their tile positions (None: all); ``tile`` a strided view of memory when the
    tile is unmasked, strided and inside one tensor (ADR-0640)."""

    __slots__ = ("moved", "_index", "sel", "flat", "region", "tile")
    moved: np.ndarray | None
    _index: np.ndarray | None
    sel: np.ndarray | None
    flat: np.ndarray | None
    region: tuple[int, int, str] | None
    tile: np.ndarray | None

    def __init__(self, raw: Operand, store: MemoryStore, rel: np.ndarray,
                 mask: np.ndarray | None, geometry: ix.Geometry | None = None) -> None:
        super().__init__(raw.space, raw.pe, raw.addr, raw.shape, raw.dtype, raw.transposed)
        self.moved = self._index = self.sel = self.flat = self.region = self.tile = None
        npd = NP_DTYPES.get(raw.dtype)
        if npd is None:
            self.error = f"unknown dtype {raw.dtype!r}"
            return
        mem = store.memory(raw.space, raw.pe)
        isz = npd.itemsize
        region = mem.region_of(raw.addr, raw.addr + isz)
        self.npd, self.nbytes = npd, int(rel.size) * isz
        moved = ix.moved(rel, mask)
        sel = None if mask is None else np.flatnonzero(mask.reshape(-1))
        if geometry is not None and region is not None and not raw.addr % isz:
            strides, base, first, last = geometry
            lo, hi = raw.addr + first * isz, raw.addr + (last + 1) * isz
            if region[0] <= lo and hi <= region[1]:  # every element inside: none to check
                if mask is None:
                    self.tile = np.ndarray(raw.shape, npd, buffer=mem.buf,
                                           offset=raw.addr + base * isz,
                                           strides=tuple(s * isz for s in strides))
                if mask is not None:  # the bytes of the moved elements only
                    lo, hi = ((raw.addr + int(moved.min()) * isz, raw.addr + (
                        int(moved.max()) + 1) * isz) if len(moved) else (raw.addr,) * 2)
                self._place(mem, region, npd, moved, sel, lo, hi)
                return
        if raw.addr % isz:
            self.error = f"address {raw.addr} is not aligned to its {raw.dtype} elements"
            return
        if len(moved) and region is None:
            self.error = f"address {raw.addr} is inside no tensor of {raw.space}"
            return
        try:  # checked, never wrapped (ADR-0535)
            addrs = off.addresses(raw.addr, moved, isz)
        except off.OffsetError as exc:
            self.error = str(exc)
            return
        if len(moved):
            lo, hi = region[0], region[1]  # type: ignore[index]
            bad = (addrs < lo) | (addrs + isz > hi)
            if bad.any():
                k = int(np.flatnonzero(bad)[0])
                pos = k if sel is None else int(sel[k])
                at = [int(i) for i in np.unravel_index(pos, rel.shape)]
                self.error = (f"element at tile index {at} (offset {int(moved[k])} from "
                              f"{raw.addr}) is outside tensor {region[2]!r} [{lo}, {hi})")  # type: ignore[index]
                return
        lo, hi = (int(addrs.min()), int(addrs.max()) + isz) if len(moved) else (raw.addr,) * 2
        self._place(mem, region, npd, moved, sel, lo, hi)

    def _place(self, mem: Memory, region: tuple[int, int, str] | None, npd: np.dtype,
               moved: np.ndarray, sel: np.ndarray | None, lo: int, hi: int) -> None:
        """Bind the checked elements ``moved`` (relative, tile order; ``sel`` their tile
        positions, None: all) in bytes ``[lo, hi)``."""
        self.lo, self.hi = lo, hi
        self.mem, self.valid, self.region = mem, mem.valid, region
        self.flat = _flat(mem, npd)
        self.moved, self.sel = moved, sel
        self.view = _Scatter(self)  # type: ignore[assignment]

    @property
    def index(self) -> np.ndarray | None:
        """The masked-in elements' indices into the memory (as an array of the dtype), in
        tile order; made on first use (a load read as a strided ``tile`` never needs it)."""
        if self._index is None and self.moved is not None:
            self._index = self.moved + self.addr // self.npd.itemsize
        return self._index

    def gather(self, other: Any = 0) -> np.ndarray:
        """The tile as read now: masked-off elements take ``other``."""
        if self.tile is not None:  # a view: the engine copies it at the read time
            return self.tile
        return mops.gathered(self.flat, self.index, self.sel, other,  # type: ignore[arg-type]
                             self.shape)


def _elements(attrs: dict, ins: tuple, out: Any, ctx: BindContext, pos: str
              ) -> tuple[tuple, Any]:
    """Replace the HBM operand (``pos``: the first input or the output) of an indexed row."""
    if not ix.is_indexed(attrs):
        return ins, out
    raw = ins[0] if pos == "in" else out
    need(raw is not None, "an indexed row needs its HBM operand")
    need(raw.space == "hbm", f"an indexed operand must be in hbm, not {raw.space!r}")
    rel, mask = ix.elements(attrs, raw.shape, ctx.access)
    # a grid's programs load the same tiles: one operand per (operand, element arrays); the
    # arrays are memoised, read-only and kept alive by the entry: their ids name them.
    cache = ctx.store.elements if rel.size <= _SHARED_ELEMENTS else {}
    key = (raw, id(rel), id(mask))
    hit = cache.get(key)
    if hit is None:
        if len(cache) >= _MAX_SHARED:
            cache.clear()
        hit = cache[key] = (ElementOperand(raw, ctx.store, rel, mask,
                                           ix.geometry(attrs, raw.shape)), rel, mask)
    el = hit[0]
    return ((el, *ins[1:]), out) if pos == "in" else (ins, el)


#: element operands kept for sharing, of tiles of at most so many elements (an entry holds
#: its offsets, mask and, once used, index array: at most ~100 MiB in all)
_MAX_SHARED, _SHARED_ELEMENTS = 1024, 4096


def _bind_read(plain: Callable) -> Callable:
    def bind(attrs, ins, out, ctx):
        src = ins[0] if ins else None
        if not isinstance(src, ElementOperand):
            return plain(attrs, ins, out, ctx)
        need(len(ins) == 1 and out is not None, "an indexed dma_read takes 1 input and an output")
        need(out.shape == src.shape and out.dtype == src.dtype,
             f"dma_read of {list(src.shape)} {src.dtype} writes {list(out.shape)} {out.dtype}")
        return partial(src.gather, attrs.get("other", 0))

    return bind


# -- gather / scatter / atomics: offsets known when the op runs -------------------------------
def _roles(attrs: dict, ins: tuple, first: int) -> dict[str, Operand]:
    """The TCM operands after the first ``first`` inputs: value?, cmp?, offsets?, mask?."""
    names = [n for n, on in (("value", "value" not in attrs and first == 1),
                             ("cmp", attrs.get("cmp") == ix.INPUT),
                             ("offsets", attrs.get("offsets") == ix.INPUT),
                             ("mask", attrs.get("mask") == ix.INPUT)) if on]
    need(len(ins) == first + len(names), f"expected {first + len(names)} inputs "
         f"({', '.join(['hbm', *names])}), got {len(ins)}")
    return dict(zip(names, ins[first:], strict=True))


def _extent(o: Operand) -> tuple[int, int]:
    """(first element index in its memory, element count) of a whole-tensor operand."""
    return o.lo // o.npd.itemsize, (o.hi - o.lo) // o.npd.itemsize


def _index(table: tuple[int, int], offsets: np.ndarray, mask: np.ndarray | None, what: str
           ) -> tuple[np.ndarray, np.ndarray | None]:
    """(element indices into the memory, tile positions or None) of a run-time offset array
    into the tensor ``table`` (first element, count); ReplayError for a masked-in offset
    outside it."""
    flat = np.asarray(offsets).reshape(-1).astype(np.int64)
    sel = None if mask is None else np.flatnonzero(np.asarray(mask).reshape(-1))
    got = flat if sel is None else flat[sel]
    first, n = table
    bad = (got < 0) | (got >= n)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        pos = k if sel is None else int(sel[k])
        at = [int(i) for i in np.unravel_index(pos, np.shape(offsets))]
        raise ReplayError(f"{what} offset {int(got[k])} at tile index {at} is outside the "
                          f"tensor [0, {n})")
    return first + got, sel


def _static_mask(attrs: dict, shape: tuple[int, ...], ctx: BindContext) -> np.ndarray | None:
    return ix.mask_of(attrs, shape, ctx.access)


def _bind_gather(attrs, ins, out, ctx):
    need(len(ins) >= 2 and out is not None, "gather takes the tensor, offsets[, mask]")
    t, roles = ins[0], _roles(attrs, ins, 2) | {"offsets": ins[1]}
    need(out.shape == roles["offsets"].shape and out.dtype == t.dtype,
         f"gather of {t.dtype} at {list(roles['offsets'].shape)} writes {list(out.shape)} "
         f"{out.dtype}")
    static = _static_mask(attrs, out.shape, ctx)
    read_mask = partial(same, roles["mask"].view) if "mask" in roles else None
    return partial(_gather, t, roles["offsets"].view, read_mask, static,
                   attrs.get("other", 0), out.shape)


def _gather(t: Operand, offsets: np.ndarray, read_mask: Callable | None,
            static: np.ndarray | None, other: Any, shape: tuple[int, ...]) -> np.ndarray:
    mask = read_mask() if read_mask is not None else static
    index, sel = _index(_extent(t), offsets, mask, "gather")
    return mops.gathered(_flat(t.mem, t.npd), index, sel, other, shape)  # type: ignore[arg-type]


class _Pending:
    """A scatter's HBM side: each run queues its element indices; the engine's write at
    the landing time takes the oldest (same-signature scatters land in run order)."""

    __slots__ = ("flat", "queue")

    def __init__(self, flat: np.ndarray) -> None:
        self.flat, self.queue = flat, deque()  # type: ignore[var-annotated]

    def __setitem__(self, key: Any, value: np.ndarray) -> None:
        index, sel = self.queue.popleft()
        mops.written(self.flat, index, sel, value)


def _scatter_operands(attrs, ins, out, ctx):
    need(out is not None and len(ins) >= 2, "scatter takes value, offsets[, mask] and the tensor")
    if out.error is not None:
        return ins, out
    el = Operand(out.space, out.pe, out.addr, ins[0].shape, out.dtype, False)
    n = 1
    for d in ins[0].shape:
        n *= d
    el.npd, el.nbytes, el.mem, el.valid = out.npd, n * out.npd.itemsize, out.mem, out.mem.valid
    el.lo, el.hi = out.lo, out.hi
    el.view = _Pending(_flat(out.mem, out.npd))  # type: ignore[assignment, unused-ignore]
    return ins, el


def _bind_scatter(attrs, ins, out, ctx):
    need(out is not None and len(ins) >= 2, "scatter takes value, offsets[, mask]")
    value, offsets = ins[0], ins[1]
    roles = _roles(attrs, ins, 2)
    need(value.shape == offsets.shape, f"scatter value {list(value.shape)} for offsets "
         f"{list(offsets.shape)}")
    need(isinstance(out.view, _Pending), "scatter's tensor operand is not placed")
    static = _static_mask(attrs, offsets.shape, ctx)
    read_mask = partial(same, roles["mask"].view) if "mask" in roles else None
    return partial(_scatter, out.view, _extent(out), offsets.view, read_mask, static,
                   value.view)


def _scatter(pending: _Pending, table: tuple[int, int], offsets: np.ndarray,
             read_mask: Callable | None, static: np.ndarray | None, value: np.ndarray
             ) -> np.ndarray:
    mask = read_mask() if read_mask is not None else static
    pending.queue.append(_index(table, offsets, mask, "scatter"))
    return value


def _bind_atomic(op: Op) -> Callable:
    combine = OPS[op].numpy
    if combine is None:  # pragma: no cover - the op table gives every atomic its combine
        raise TypeError(f"{op.value} has no combine function")

    def bind(attrs, ins, out, ctx):
        need(len(ins) >= 1 and out is not None, f"{op.value} needs the tensor and an output")
        t = ins[0]
        roles = _roles(attrs, ins, 1)
        for key in _OPERANDS.get(op, ("value",)):
            if key in roles:
                need(roles[key].shape == out.shape, f"{op.value} {key} "
                     f"{list(roles[key].shape)} for a {list(out.shape)} result")
            need(key in roles or key in attrs, f"{op.value} needs attrs {key!r} or an input")
        values = tuple(reader(roles[key]) if key in roles else partial(same, attrs[key])
                       for key in _OPERANDS.get(op, ("value",)))
        if isinstance(t, ElementOperand):
            need(t.shape == out.shape, f"{op.value} of {list(t.shape)} writes {list(out.shape)}")
            where = partial(same, (t.index, t.sel))
        else:
            need("offsets" in roles, f"{op.value} needs strides, access or offsets")
            static = _static_mask(attrs, out.shape, ctx)
            read_mask = partial(same, roles["mask"].view) if "mask" in roles else None
            where = partial(_runtime_index, t, roles["offsets"].view, read_mask, static, op)
        return partial(_atomic, mops.combine_of(combine, t.npd), _flat(t.mem, t.npd), where,
                       values, out.shape)

    return bind


_OPERANDS = mops.OPERANDS


def _runtime_index(t, offsets, read_mask, static, op):
    return _index(_extent(t), offsets, read_mask() if read_mask is not None else static, op.value)


def _atomic(combine: Callable, flat: np.ndarray, where: Callable, values: tuple[Callable, ...],
            shape: tuple[int, ...]) -> np.ndarray:
    index, sel = where()
    vs = [mops.operand(value(), flat.dtype, shape, sel) for value in values]
    old = mops.rmw(combine, flat, index, vs, len(distinct(index)) == len(index))
    return mops.returned(old, shape, sel)


def _bind_const(attrs, ins, out, ctx):
    need(not ins and out is not None, "const takes no inputs and writes an output")
    arr = ctx.access.get(attrs.get("values"), "values", out.shape)
    if out.npd == BF16 and arr.dtype.name == "bfloat16":  # ml_dtypes' own: its bits
        arr = arr.view(BF16)
    need(arr.dtype == out.npd, f"const values are {arr.dtype}, the output {out.dtype}")
    return partial(same, arr)


def memory_executors(plain_read: Callable, plain_write: Callable) -> dict[Op, Executor]:
    """The version-2 memory executors (the plain dma_read/dma_write binds are wrapped)."""
    atomics = {op: Executor(_bind_atomic(op), operands=_elements_in) for op in ATOMICS}
    return {
        Op.DMA_READ: Executor(_bind_read(plain_read), operands=_elements_in),
        Op.DMA_WRITE: Executor(plain_write, operands=_elements_out),
        Op.GATHER: Executor(_bind_gather),
        Op.SCATTER: Executor(_bind_scatter, operands=_scatter_operands),
        Op.CONST: Executor(_bind_const),
        **atomics,
    }


def _elements_in(attrs, ins, out, ctx):
    return _elements(attrs, ins, out, ctx, "in")


def _elements_out(attrs, ins, out, ctx):
    return _elements(attrs, ins, out, ctx, "out")
