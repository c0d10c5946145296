"""Batching in replay: identical ops of different programs run as one numpy call.

Programs of one grid run the same op at the same time on their own PEs, at the same TCM
address, with the same shapes, dtypes and attrs: in replay order they are neighbours. Such a
run of positions (its *members*: same op, attrs, shapes, dtypes, strides and memory bank;
positions that do nothing in between are skipped over) runs as one call on stacked views
``(members, *shape)``: the per-PE memories of a space are one bank (``store.Memory.bank``),
so operands at equal addresses of different PEs, or at evenly spaced HBM addresses, are one
strided view; other inputs are gathered into a buffer before the call, other outputs
scattered after it. The op is bound again over the stacked operands by its own executor,
so the semantics are the unbatched ones (a reduction's axis moves by one; an input with
fewer axes than the output gets unit axes after the member axis, ADR-0670).

A run is batched only when that cannot be told from running its members one at a time:
  * no write lands inside the run (``LANDING`` only at its last position), so every member
    reads what it would have read; a member's own write may wait (``DEFERRED``);
  * no byte one member writes is read or written by another member (each member's inputs
    are read before any member writes, unlike in the one-at-a-time order);
  * the run stays inside one ``FLUSH_CHECK_EVERY`` chunk of the loop, so the statistics
    flushes, and so ``values.parquet``, are the same bytes;
  * it has ``MIN_MEMBERS`` members or more (ADR-0710: two run slower batched).
A batched call that raises is run again one member at a time (nothing was written yet), so
errors name the same op. ``engine.BATCH`` False turns batching off (the tests compare).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import chain
from operator import itemgetter
from typing import Any, NamedTuple

import numpy as np

from kernbench.replay.binding import BindContext, ShapeMismatch, nothing
from kernbench.replay.executors import EXECUTORS
from kernbench.replay.math_binders import infer
from kernbench.replay.overlap import independent
from kernbench.replay.program import Program
from kernbench.replay.schedule import DEFERRED, LANDING
from kernbench.replay.store import UNPLACED, Operand
from kernbench.schemas import ops
from kernbench.schemas.ops import Op
from kernbench.trace.columns import distinct

#: ops whose executor is correct over operands with a leading member axis; the value says
#: how attrs change (``_axis``: an integer axis moves by one, None cannot batch)
_KEEP: Callable[[dict], dict | None] = dict


def _axis(default: int | None) -> Callable[[dict], dict | None]:
    def shift(attrs: dict) -> dict | None:
        axis = attrs.get("axis", default)
        if not isinstance(axis, int) or isinstance(axis, bool):
            return None
        return {**attrs, "axis": axis + 1 if axis >= 0 else axis}
    return shift


ATTRS: dict[Op, Callable[[dict], dict | None]] = {
    **{op: _KEEP for op in ops.BINARY | ops.UNARY | ops.TERNARY},
    Op.WHERE: _KEEP, Op.DMA_READ: _KEEP, Op.DMA_WRITE: _KEEP, Op.COPY: _KEEP,
    **{op: _axis(None) for op in ops.REDUCTIONS | ops.ARG_REDUCTIONS},
    **{op: _axis(0) for op in ops.SCANS},
    Op.SOFTMAX: _axis(-1),
}


class Late:
    """The step of a signature that may run batched, bound on first use: members of a batch
    are never bound one by one."""

    __slots__ = ("make", "step")

    def __init__(self, make: Callable[[], Callable[[], Any]]) -> None:
        self.make: Callable[[], Callable[[], Any]] | None = make
        self.step: Callable[[], Any] | None = None

    def bound(self) -> Callable[[], Any]:
        if self.step is None:
            assert self.make is not None
            self.step, self.make = self.make(), None
        return self.step

    def __call__(self) -> Any:
        return self.bound()()


def resolve(steps: list[Any], sig: np.ndarray, found: Sequence[Unit]) -> list[Any]:
    """``steps`` with the late steps of every signature run outside a batch bound."""
    alone = np.ones(len(sig), bool)
    if found:
        alone[np.fromiter(chain.from_iterable(u.members for u in found), np.int64)] = False
    out = list(steps)
    for j in distinct(sig[alone]).tolist():
        if isinstance(out[j], Late):
            out[j] = out[j].bound()
    return out


def _layout(o: Operand) -> tuple[Any, ...] | None:
    """What a member's operand must share with the others' (None: it cannot batch: not
    placed, or a set of elements of an indexed row rather than a range)."""
    if type(o) is not Operand or o.error is not None or o.view is UNPLACED or o.mem is None:
        return None
    return id(o.mem.bank), o.shape, o.dtype, o.view.strides


class KeyMemo(NamedTuple):
    """What ``key`` found per (op, attrs text) and per operand, kept by one decode: a
    window's thousands of signatures share a few attrs and operands."""

    shifts: dict[tuple[Op, str], bool]
    layouts: dict[Operand, tuple[Any, ...] | None]


def key(op: Op, attrs: Any, text: str, ins: Sequence[Operand], out: Operand | None,
        memo: KeyMemo | None = None) -> tuple[Any, ...] | None:
    """The class of an op signature (``attrs`` parsed from ``text``): signatures of one
    class may run as one call (None: this one never batches)."""
    if out is None:
        return None
    memo = memo or KeyMemo({}, {})
    ok = memo.shifts.get((op, text))
    if ok is None:
        shift = ATTRS.get(op)
        ok = memo.shifts[op, text] = (shift is not None and isinstance(attrs, dict)
                                      and shift(attrs) is not None)
    if not ok:
        return None
    layouts = []
    for o in (*ins, out):  # operands are compared by identity: one object per operand
        lay = memo.layouts.get(o, False)
        if lay is False:
            lay = memo.layouts[o] = _layout(o)
        if lay is None:
            return None
        layouts.append(lay)
    return (op, text, *layouts)


#: the fewest members a batch has: two measured slower batched than one at a time
#: (ADR-0710)
MIN_MEMBERS = 3


class Spans(NamedTuple):
    """Runs to batch over the positions ``q`` that do something: run ``r`` is members
    ``q[first[r]:last[r] + 1]``; ``calm[r]``: no member's write waits."""

    q: np.ndarray
    first: list[int]
    last: list[int]
    calm: list[bool]


def spans(cls: np.ndarray, landing: np.ndarray, deferred: np.ndarray, chunk: int) -> Spans:
    """The runs to batch (see ``runs``) as spans of the positions doing something."""
    q = np.flatnonzero(cls != -2)
    if len(q) < 2:
        return Spans(q, [], [], [])
    c = cls[q]
    lands = np.concatenate([[0], np.cumsum(landing, dtype=np.int64)])
    # member j joins member j-1: same class, same chunk, no landing in [q[j-1], q[j])
    join = ((c[1:] == c[:-1]) & (c[1:] >= 0) & (q[1:] // chunk == q[:-1] // chunk)
            & (lands[q[1:]] == lands[q[:-1]]))
    edges = np.diff(np.concatenate([[0], join.astype(np.int8), [0]]))
    first, last = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    long = last - first + 1 >= MIN_MEMBERS
    first, last = first[long], last[long]
    waits = np.concatenate([[0], np.cumsum(deferred[q], dtype=np.int64)])
    calm = waits[last + 1] == waits[first]
    return Spans(q, first.tolist(), last.tolist(), calm.tolist())


def runs(cls: np.ndarray, landing: np.ndarray, deferred: np.ndarray, chunk: int
         ) -> list[tuple[int, int, list[int], bool]]:
    """Runs to batch: ``(start, end, member positions, no member deferred)``; ``cls`` per
    position is a class id (>= 0), -1 (runs alone) or -2 (does nothing: skipped over);
    ``landing``: pending writes land after the position; ``deferred``: its own write waits.
    Members are consecutive in the order of positions that do something, share a class and
    a ``chunk``, and no write lands before the last; a run has ``MIN_MEMBERS`` or more."""
    at, first, last, calm = spans(cls, landing, deferred, chunk)
    q = at.tolist()
    return [(q[a], q[b] + 1, q[a:b + 1], ok) for a, b, ok in zip(first, last, calm,
                                                                  strict=True)]


def _stacked(group: Sequence[Operand]) -> np.ndarray | None:
    """The operands as one view ``(members, *shape)`` when evenly spaced in one bank."""
    first = group[0]
    starts = [o.mem.base + o.lo for o in group]  # type: ignore[union-attr]
    stride = starts[1] - starts[0]
    if stride < 0:
        return None
    at = starts[0]
    for b in starts:
        if b != at:
            return None
        at += stride
    v = first.view
    mem = first.mem
    assert v is not None and mem is not None
    return np.ndarray((len(group), *v.shape), v.dtype, buffer=mem.bank,
                      offset=starts[0], strides=(stride, *v.strides))


#: ops whose inputs broadcast against each other to the output's shape (numpy's rules:
#: trailing axes aligned)
BROADCASTING = ops.BINARY | ops.TERNARY | {Op.WHERE}


def _aligned(op: Op, view: np.ndarray, ndim: int, out_ndim: int) -> np.ndarray:
    """A stacked input ``(members, *shape)`` of a broadcasting op whose members have fewer
    axes than the output, with unit axes after the member axis: each member's value then
    broadcasts against its own row of the others (``(M, 128)`` against ``(M, 8, 128)``
    would pair member axis with row axis)."""
    if op not in BROADCASTING or ndim >= out_ndim:
        return view
    return view.reshape(len(view), *(1,) * (out_ndim - ndim), *view.shape[1:])


REDUCING = ops.REDUCTIONS | ops.ARG_REDUCTIONS


def _inferred(op: Op, attrs: dict, ins: list[Operand], view: np.ndarray) -> np.ndarray:
    """``view`` reshaped to the op table's output shape for the stacked inputs when that
    holds the same elements (each member's in turn: the member axis stays first)."""
    try:
        shape = infer(op, attrs, ins)
    except ShapeMismatch:
        return view
    if shape == view.shape or int(np.prod(shape)) != view.size or shape[:1] != view.shape[:1]:
        return view
    return view.reshape(shape)


def _pseudo(first: Operand, view: np.ndarray) -> Operand:
    """An operand standing for the stacked members (its executor binds to ``view``)."""
    o = Operand(first.space, first.pe, first.addr, view.shape, first.dtype, False)
    o.view, o.npd, o.nbytes = view, first.npd, first.nbytes * len(view)
    o.hi = o.lo + o.nbytes
    return o


class Batch:
    """One batched call: gathers before, the step, and where the stacked value goes."""

    __slots__ = ("step", "gathers", "out", "npd")

    def __init__(self, step: Callable[[], Any], gathers: list[tuple[np.ndarray, list]],
                 out: np.ndarray | None, npd: np.dtype) -> None:
        self.step, self.gathers, self.out, self.npd = step, gathers, out, npd

    def __call__(self) -> np.ndarray:
        """The stacked value: never a gather buffer itself (the next call overwrites it while
        this value may still wait to land or for the statistics); views of one are copied
        by the engine as views of memory are."""
        for flat, views in self.gathers:  # the members' views end to end, one copy
            np.concatenate(views, out=flat)
        res: np.ndarray = self.step()
        for flat, _ in self.gathers:
            if res is flat.base:
                return res.copy()
        return res


def build(op: Op, attrs: dict, ins: Sequence[Sequence[Operand]], outs: Sequence[Operand],
          bind: Callable[[dict, tuple, Operand, BindContext], Any], ctx: BindContext
          ) -> Batch | None:
    """The batched call of members with inputs ``ins`` and outputs ``outs`` (one class), or
    None when they must run one at a time."""
    if not independent(ins, outs):
        return None
    gathers: list[tuple[np.ndarray, list]] = []
    stacked = []
    o0 = outs[0]
    for slot in zip(*ins, strict=True):
        view = _stacked(slot)
        v = slot[0].view
        if view is None:
            view = np.empty((len(slot), *v.shape), v.dtype)
            gathers.append((view.reshape(-1, *v.shape[1:]),
                            [o.view if v.ndim else o.view.reshape(1) for o in slot]))
        stacked.append(_pseudo(slot[0], _aligned(op, view, v.ndim, o0.view.ndim)))
    new = ATTRS[op](attrs)
    if new is None:  # pragma: no cover - ``key`` gave such attrs no class
        return None
    target = _stacked(outs)
    view = target if target is not None else np.empty((len(outs), *o0.view.shape),
                                                     o0.view.dtype)
    if op in REDUCING:  # the stacked output as the op table infers it (a member's (1,)
        view = _inferred(op, new, stacked, view)  # from a 1-D row is (M,), not (M, 1))
        target = view if target is not None else None
    out = _pseudo(o0, view)
    try:
        step = bind(new, tuple(stacked), out, ctx)
    except (ValueError, KeyError, TypeError, IndexError):  # pragma: no cover - same checks
        return None
    if step is nothing:  # pragma: no cover - every batchable op writes
        return None
    return Batch(step, gathers, target, o0.npd)


class Unit(NamedTuple):
    """A batch at positions ``[start, end)``: its members' positions and its call (a named
    tuple: thousands are made per window, and a frozen dataclass's init costs ~4x more)."""

    start: int
    end: int
    members: list[int]
    batch: Batch
    #: no member's write waits for a later landing point
    now: bool


def units(program: Program, sig: np.ndarray, steps: Sequence[Any],
          outs: Sequence[Operand | None], flags: np.ndarray, chunk: int) -> list[Unit]:
    """The batches of one window of the engine, in position order: ``sig`` per position,
    ``steps``/``outs`` per signature (carried writes last), ``flags`` the schedule's."""
    cls = [-1] * len(steps)
    batching = False
    for j, b in enumerate(program.sig_batch):
        if b is not None:
            cls[j], batching = b[0], True
        elif steps[j] is nothing and outs[j] is None:
            cls[j] = -2
    if not batching:
        return []
    at, first, last, calm = spans(np.array(cls, np.int64)[sig], (flags & LANDING) != 0,
                                  (flags & DEFERRED) != 0, chunk)
    q, sig_q = at.tolist(), sig[at].tolist()
    step_q = list(itemgetter(*sig_q)(steps)) if len(sig_q) > 1 else []  # its identity
    found = []
    made = program.batches
    for a, b, now in zip(first, last, calm, strict=True):
        name = tuple(step_q[a:b + 1])
        batch = made.get(name, False)
        if batch is False:
            sigs = sig_q[a:b + 1]
            _, op, attrs, ctx = program.sig_batch[sigs[0]]
            batch = made[name] = build(op, attrs, [program.sig_ins[j] for j in sigs],
                                       [program.sig_out[j] for j in sigs],
                                       EXECUTORS[op].bind, ctx)
        if batch is not None:
            found.append(Unit(q[a], q[b] + 1, q[a:b + 1], batch, now))
    return found
