"""Evaluate a node of the value graph (``graph.Node``) the way replay will compute it: its
cone only, each op through the op families' one definition in ``schemas/`` (``OPS[op].sem``
for the table ops, ``schemas.given`` for dot/fill/arange, ``schemas.memory_ops`` for reads,
writes and atomics, ``schemas.storage`` for every store conversion), HBM reads at their
place in recorded time order (ADR-0840).

Iterative (an explicit stack): a loop-carried accumulator is a chain as long as its loop.
A value, once computed, stays on its node (a later decision reuses it). What one decision
computes counts against ``KERNBENCH_MAX_MEMORY_GB``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kernbench.errors import KernelError, RecordLimitError
from kernbench.record.guards.graph import Node, Ref, Shadow, static_elements
from kernbench.record.guards.hbm import Access, Effect, TensorState
from kernbench.record.handle import TensorHandle
from kernbench.schemas import given
from kernbench.schemas import memory_ops as mops
from kernbench.schemas.dtypes import by_name
from kernbench.schemas.ops import ATOMICS, OP, OPS, Family
from kernbench.schemas.policy import KERNBENCH
from kernbench.schemas.storage import as_dtype, compute_value, to_f32
from kernbench.trace.limits import LIMIT_ENV, max_memory_bytes

#: the families ``OPS[op].sem.evaluate`` computes (the rest are computed below)
_TABLE = frozenset({Family.BINARY, Family.UNARY, Family.WHERE, Family.TERNARY,
                    Family.REDUCE, Family.ARG, Family.SCAN, Family.SOFTMAX, Family.BROADCAST})
_ELEMENTWISE = frozenset({Family.BINARY, Family.UNARY, Family.WHERE, Family.TERNARY})
_F32 = np.dtype(np.float32)


class Unevaluable(Exception):  # noqa: N818 - carries the reason to decide(), which names the line
    """A value in a decision's cone that Phase 1 cannot compute (the reason)."""


def _storage(dtype: str) -> np.dtype:
    st = _STORAGE.get(dtype)
    if st is None:
        st = _STORAGE[dtype] = np.dtype(by_name(dtype).storage)
    return st


_STORAGE: dict[str, np.dtype] = {}


def read(ref: Ref) -> np.ndarray:
    """The value of an evaluated input as the op read it (its view of the bytes)."""
    node = ref.node
    assert node is not None and node.value is not None
    st = _storage(ref.dtype)
    n = int(np.prod(ref.shape, dtype=np.int64))
    flat = np.ascontiguousarray(node.value).reshape(-1)
    if flat.dtype != st or flat.size != n:
        flat = flat.view(np.uint8)[:n * st.itemsize].view(st)
    if ref.transposed:
        return flat.reshape(ref.shape[::-1]).transpose()
    return flat.reshape(ref.shape)


def decide(shadow: Shadow, h: TensorHandle, src: str) -> np.ndarray:
    """The value of the one element of ``h`` a guard at ``src`` decides on (storage dtype,
    flat); a KernelError at ``src`` when its cone holds a value Phase 1 cannot compute."""
    try:
        node = _node_of(Ref(h.buf.val, h))
        Evaluator(src).value(node)
        return np.ascontiguousarray(read(Ref(node, h))).reshape(-1)
    except Unevaluable as exc:
        raise KernelError(f"a decision on data here needs {exc}, which Phase 1 cannot "
                          "evaluate", src) from None


class Evaluator:
    """Computes nodes' values for one decision (at ``src``)."""

    def __init__(self, src: str) -> None:
        self.src = src
        self.spent = 0  # bytes computed for the decision
        self.limit = max_memory_bytes()

    def value(self, node: Node) -> np.ndarray:
        """``node``'s value (storage dtype, its shape), its cone computed first."""
        stack = [node]
        while stack:
            n = stack[-1]
            if n.value is not None:
                stack.pop()
                continue
            need = self._needs(n)
            if need:
                stack.extend(need)
                continue
            n.value = self._compute(n)
            stack.pop()
        assert node.value is not None
        return node.value

    # -- what a node needs first -----------------------------------------------------------
    def _needs(self, n: Node) -> list[Node]:
        if n.why is not None:
            raise Unevaluable(n.why)
        need = [_node_of(r) for r in n.ins if _node_of(r).value is None]
        if n.pieces:
            need += [p for _, p in n.pieces if p.value is None]
        if need or n.access is None or n.key is None:
            return need
        return self._effect_needs(n.access, n.key)

    def _effect_needs(self, a: Access, key: tuple[int, int, int]) -> list[Node]:
        """The nodes the effects before ``key`` on ``a``'s elements need."""
        index, _ = self.where(a)
        if not len(index):
            return []
        lo, hi = int(index.min()), int(index.max())
        need: list[Node] = []
        for e in a.t.by_key():
            if e.key >= key:
                break
            ea = e.access
            if ea.dynamic:  # offsets in TCM: know them first
                pending = [_node_of(r) for k, r in ea.roles.items()
                           if k in ("offsets", "mask") and _node_of(r).value is None]
                if pending:
                    need += pending
                    continue
            eidx, _ = self.where(ea)
            if not len(eidx) or int(eidx.max()) < lo or int(eidx.min()) > hi:
                continue
            refs = [e.value] if e.value is not None else list(ea.roles.values())
            need += [_node_of(r) for r in refs if _node_of(r).value is None]
        return need

    # -- computing one node ----------------------------------------------------------------
    def _compute(self, n: Node) -> np.ndarray:
        family = OPS[n.op].family
        st = _storage(n.dtype)
        if n.op is OP.GEMM:
            v = self._assemble(n, st)
        elif family in _TABLE:
            v = self._table(n, family)
        elif family is Family.CAST:
            x = read(n.ins[0])
            v = (np.ascontiguousarray(x).view(st).reshape(n.shape) if n.attrs.get("bitcast")
                 else x)
        elif family is Family.COPY or n.op is OP.COPY:
            v = read(n.ins[0])
            if v.dtype != st:
                v = np.ascontiguousarray(v).view(np.uint8).view(st)
        elif family is Family.DOT:
            args = [to_f32(read(r)) if read(r).dtype != _F32 else read(r) for r in n.ins]
            cols = n.attrs.get("a_cols")
            if cols is not None:
                args[0] = args[0][:, int(cols[0]):int(cols[1])]
            v = given.dot(*args)
        elif family is Family.FILL:
            v = given.fill(n.shape, n.attrs["value"], st)
        elif family is Family.ARANGE:
            v = given.arange(int(n.attrs.get("start", 0)), n.shape)
        elif family in (Family.MEMORY, Family.GATHER):
            v = self._load(n)
        elif n.op in ATOMICS:
            v = self._atomic_old(n)
        else:  # pragma: no cover - every family that writes TCM is handled above
            raise Unevaluable(f"an op {n.op.value} Phase 1 does not evaluate")
        out = as_dtype(np.asarray(v), st) if np.asarray(v).dtype != st else np.asarray(v)
        out = np.ascontiguousarray(out).reshape(n.shape)
        self.spent += out.nbytes
        if self.spent > self.limit:
            raise RecordLimitError(
                f"the decision here needs over {self.limit / 2**30:.3g} GiB of values to "
                f"evaluate (set {LIMIT_ENV} to raise it)", self.src)
        return out

    def _table(self, n: Node, family: Family) -> np.ndarray:
        sem = OPS[n.op].sem
        assert sem is not None
        arrays: list[Any] = [compute_value(read(r)) for r in n.ins]
        if family in _ELEMENTWISE:
            scalars = {int(p): v for p, v in n.attrs.get("scalars") or ()}
            it = iter(arrays)
            arity = len(arrays) + len(scalars)
            arrays = [scalars[k] if k in scalars else next(it) for k in range(arity)]
        with np.errstate(all="ignore"):
            return np.asarray(sem.evaluate(arrays, n.attrs, KERNBENCH))

    def _assemble(self, n: Node, st: np.dtype) -> np.ndarray:
        """A composite GEMM's result, from the blocks its children wrote."""
        nbytes = int(np.prod(n.shape, dtype=np.int64)) * st.itemsize
        raw = np.zeros(nbytes, np.uint8)
        for at, piece in n.pieces or ():
            b = np.ascontiguousarray(piece.value).view(np.uint8).reshape(-1)
            raw[at:at + b.size] = b
        return raw.view(st)

    # -- HBM ----------------------------------------------------------------------------
    def where(self, a: Access) -> tuple[np.ndarray, np.ndarray | None]:
        """(flat element positions, tile positions or None) of an access; offsets held in
        TCM are read (their nodes evaluated) and checked against the tensor, once."""
        if a.index is not None:
            return a.index, a.sel
        if a.static is not None:
            a.index, a.sel = static_elements(a)
            return a.index, a.sel
        offs = np.asarray(read(a.roles["offsets"])).reshape(-1).astype(np.int64)
        mask = read(a.roles["mask"]) if "mask" in a.roles else a.mask
        sel = None if mask is None else np.flatnonzero(np.asarray(mask).reshape(-1))
        got = offs if sel is None else offs[sel]
        bad = (got < 0) | (got >= a.t.numel)
        if bad.any():
            raise Unevaluable(f"an offset {int(got[np.flatnonzero(bad)[0]])} outside "
                              f"tensor {a.t.name!r} [0, {a.t.numel})")
        a.index, a.sel = got, sel
        return got, sel

    def state(self, t: TensorState, key: tuple[int, int, int], u: np.ndarray) -> np.ndarray:
        """The values of ``t``'s elements ``u`` (sorted, distinct) just before ``key``: its
        initial contents, then each effect before ``key`` touching them, in key order."""
        vals = t.initial()[u].copy()
        self.spent += vals.nbytes
        if not len(u):
            return vals
        lo, hi = int(u[0]), int(u[-1])
        for e in t.by_key():
            if e.key >= key:
                break
            idx, sel = self.where(e.access)
            if not len(idx) or int(idx.max()) < lo or int(idx.min()) > hi:
                continue
            pos = np.minimum(np.searchsorted(u, idx), len(u) - 1)
            hit = u[pos] == idx
            if hit.any():
                self._apply(e, t, vals, pos, hit, sel)
        return vals

    def _apply(self, e: Effect, t: TensorState, vals: np.ndarray, pos: np.ndarray,
               hit: np.ndarray, sel: np.ndarray | None) -> None:
        a = e.access
        if e.value is not None:  # a write lands: the value in the tensor's dtype
            v = as_dtype(np.asarray(read(e.value)), t.storage).reshape(-1)
            v = v if sel is None else v[sel]
            vals[pos[hit]] = v[hit]
            return
        vs = [op[hit] for op in self._operands(e.op, a, e.attrs, t, sel)]
        where = pos[hit]
        mops.rmw(mops.combine_of(_combine(e.op), t.storage), vals, where, vs,
                 len(np.unique(where)) == len(where))

    def _operands(self, op: Any, a: Access, attrs: dict[str, Any], t: TensorState,
                  sel: np.ndarray | None) -> list[np.ndarray]:
        raws = [compute_value(read(a.roles[k])) if k in a.roles else attrs[k]
                for k in mops.OPERANDS.get(op, ("value",))]
        return [mops.operand(raw, t.storage, a.shape, sel) for raw in raws]

    def _load(self, n: Node) -> np.ndarray:
        a = n.access
        assert a is not None and n.key is not None
        index, sel = self.where(a)
        u, inv = np.unique(index, return_inverse=True)
        vals = self.state(a.t, n.key, u)
        return mops.gathered(vals, inv.reshape(-1), sel, n.attrs.get("other", 0), n.shape)

    def _atomic_old(self, n: Node) -> np.ndarray:
        a = n.access
        assert a is not None and n.key is not None
        index, sel = self.where(a)
        u, inv = np.unique(index, return_inverse=True)
        vals = self.state(a.t, n.key, u)
        inv = inv.reshape(-1)
        vs = self._operands(n.op, a, n.attrs, a.t, sel)
        old = mops.rmw(mops.combine_of(_combine(n.op), a.t.storage), vals, inv, vs,
                       len(u) == len(inv))
        return mops.returned(old, n.shape, sel)


def _combine(op: Any) -> Any:
    fn = OPS[op].numpy
    assert fn is not None, "the op table gives every atomic its combine"
    return fn


def _node_of(r: Ref) -> Node:
    if r.node is None:
        raise Unevaluable("TCM bytes no recorded op wrote")
    return r.node
