"""The program drawer of the replay property tests (``test_differential.py``,
``test_batching_properties.py``): random small ``tl`` programs over a register file, drawn
with hypothesis, and ``run_program``, which interprets one on ``tl`` (inside a recorded
kernel) or on the numpy oracle (``oracle.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from hypothesis import strategies as st
from tests.replay.oracle import (
    BINARY,
    COMPARE,
    FLOATS,
    SCALARS,
    TRANSCENDENTAL,
    UNARY,
)

from kernbench import tl
from kernbench.schemas.dtypes import DTYPES, promote


@dataclass
class Reg:
    shape: tuple[int, ...]
    dtype: str
    depth: int  # scope depth it was made at; dead once that scope exits
    slot: bool = False  # a persistent copy_to target (never viewed)


# -- the tl side --------------------------------------------------------------------------
class Tl:
    scope = staticmethod(tl.scratch_scope)

    def binary(self, op, a, b, dt):
        if op in COMPARE:
            return {"lt": lambda: a < b, "le": lambda: a <= b, "gt": lambda: a > b,
                    "ge": lambda: a >= b, "eq": lambda: a == b, "ne": lambda: a != b}[op]()
        return {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b,
                "div": lambda: a / b, "maximum": lambda: tl.maximum(a, b),
                "minimum": lambda: tl.minimum(a, b)}[op]()

    def unary(self, op, a, dt):
        return {"neg": lambda: -a, "abs": lambda: tl.abs(a)}.get(
            op, lambda: getattr(tl, op)(a))()

    def reduce(self, op, a, axis, keepdims, shape, dt):
        return getattr(tl, op)(a, axis=axis, keepdims=keepdims)

    def softmax(self, a, axis, dt):
        return tl.softmax(a, axis=axis)

    def dot(self, a, b, acc):
        return tl.dot(a, tl.trans(b), acc=acc)

    def cast(self, a, dt):
        return a.to(DTYPES[dt])

    def where(self, c, x, y, dt):
        return tl.where(c, x, y)

    def broadcast(self, a, shape):
        return tl.broadcast(a, shape)

    def repeat(self, a, axis, n):
        return tl.repeat(a, axis, n)

    def reshape(self, a, shape):
        return tl.reshape(a, shape)

    def full(self, shape, value, dt):
        return tl.full(shape, value, DTYPES[dt])

    def arange(self, n):
        return tl.arange(0, n)

    def copy_to(self, regs, dst, src):
        tl.copy_to(regs[dst], regs[src])


def run_program(prog: list, backend: Any, regs: list) -> None:
    """Interpret ``prog`` on ``backend``; every value instruction appends one register."""
    for ins in prog:
        kind, args = ins[0], ins[1:]
        if kind == "scope":
            slot_shape, slot_dtype, inner, result = args
            regs.append(backend.full(slot_shape, 0.0, slot_dtype))
            slot = len(regs) - 1
            with backend.scope():
                run_program(inner, backend, regs)
                backend.copy_to(regs, slot, result)
            continue
        ref = {"r": lambda k: regs[k]}
        args = [ref["r"](a[1]) if isinstance(a, tuple) and a and a[0] == "r" else a
                for a in args]
        regs.append(getattr(backend, kind)(*args))


# -- drawing programs -----------------------------------------------------------------------
class Drawer:
    """Draws instructions valid for the registers live at the current scope depth."""

    def __init__(self, data: st.DataObject, regs: list[Reg]) -> None:
        self.data, self.regs, self.depth = data, regs, 0

    def draw(self, strategy: st.SearchStrategy) -> Any:
        return self.data.draw(strategy)

    def live(self, pred=lambda r: True) -> list[int]:
        return [k for k, r in enumerate(self.regs) if r.depth <= self.depth and pred(r)]

    def pick(self, pred=lambda r: True) -> int | None:
        ks = self.live(pred)
        return self.draw(st.sampled_from(ks)) if ks else None

    def add(self, shape: tuple[int, ...], dtype: str, slot: bool = False) -> None:
        self.regs.append(Reg(tuple(shape), dtype, self.depth, slot))

    def steps(self, n: int) -> list:
        prog = []
        for _ in range(n):
            kind = self.draw(st.sampled_from(
                ["binary", "binary", "scalar", "unary", "reduce", "softmax", "dot", "cast",
                 "where", "broadcast", "repeat", "reshape", "full", "arange", "scope"]))
            ins = getattr(self, "_" + kind)()
            if ins is not None:
                prog.append(ins)
        return prog

    def _binary(self):
        a = self.pick(lambda r: r.dtype != "bool")
        ra = self.regs[a]
        b = self.pick(lambda r: r.dtype != "bool" and broadcasts(ra.shape, r.shape))
        op = self.draw(st.sampled_from(BINARY + COMPARE))
        rb = self.regs[b]
        shape = tuple(np.broadcast_shapes(ra.shape, rb.shape))
        dt = promote(DTYPES[ra.dtype], DTYPES[rb.dtype]).name
        dt = "bool" if op in COMPARE else ("float32" if op == "div" and dt == "int32" else dt)
        self.add(shape, dt)
        return ("binary", op, ("r", a), ("r", b), dt)

    def _scalar(self):
        a = self.pick(lambda r: r.dtype != "bool")
        ra = self.regs[a]
        op = self.draw(st.sampled_from(BINARY + COMPARE))
        s = self.draw(st.sampled_from(SCALARS))
        dt = "float32" if ra.dtype == "int32" else ra.dtype
        dt = "bool" if op in COMPARE else dt
        self.add(ra.shape, dt)
        left = self.draw(st.booleans())
        return ("binary", op, s, ("r", a), dt) if left else ("binary", op, ("r", a), s, dt)

    def _unary(self):
        a = self.pick(lambda r: r.dtype != "bool")
        op = self.draw(st.sampled_from(UNARY))
        ra = self.regs[a]
        dt = "float32" if op in TRANSCENDENTAL and ra.dtype == "int32" else ra.dtype
        self.add(ra.shape, dt)
        return ("unary", op, ("r", a), dt)

    def _reduce(self):
        a = self.pick(lambda r: r.dtype != "bool")
        ra = self.regs[a]
        op = self.draw(st.sampled_from(("sum", "max", "min")))
        axis = self.draw(st.sampled_from([None, *range(len(ra.shape)), -1]))
        keepdims = self.draw(st.booleans())
        if axis is None:
            shape = (1,) * len(ra.shape) if keepdims else (1,)
        else:
            ax = axis % len(ra.shape)
            shape = tuple(1 if i == ax else s for i, s in enumerate(ra.shape)) if keepdims \
                else (ra.shape[:ax] + ra.shape[ax + 1:] or (1,))
        self.add(shape, ra.dtype)
        return ("reduce", op, ("r", a), axis, keepdims, shape, ra.dtype)

    def _softmax(self):
        a = self.pick(lambda r: r.dtype in FLOATS)
        if a is None:
            return None
        ra = self.regs[a]
        axis = self.draw(st.sampled_from([-1, 0]))
        self.add(ra.shape, ra.dtype)
        return ("softmax", ("r", a), axis, ra.dtype)

    def _dot(self):
        a = self.pick(lambda r: len(r.shape) == 2 and r.dtype != "bool")
        if a is None:
            return None
        k = self.regs[a].shape[1]
        b = self.pick(lambda r: len(r.shape) == 2 and r.shape[1] == k and r.dtype != "bool")
        shape = (self.regs[a].shape[0], self.regs[b].shape[0])
        acc = self.pick(lambda r: r.shape == shape and r.dtype != "bool")
        use_acc = acc is not None and self.draw(st.booleans())
        self.add(shape, "float32")
        return ("dot", ("r", a), ("r", b), ("r", acc) if use_acc else None)

    def _cast(self):
        a = self.pick()
        dt = self.draw(st.sampled_from(FLOATS + ("int32",)))
        if self.regs[a].dtype in FLOATS and dt == "int32":
            dt = "float32"  # float -> int of NaN/inf is platform-defined; keep it portable
        self.add(self.regs[a].shape, dt)
        return ("cast", ("r", a), dt)

    def _where(self):
        c = self.pick(lambda r: r.dtype == "bool")
        if c is None:
            return None
        rc = self.regs[c]
        x = self.pick(lambda r: r.dtype != "bool" and broadcasts(rc.shape, r.shape))
        if x is None:
            return None
        shape = tuple(np.broadcast_shapes(rc.shape, self.regs[x].shape))
        xd = self.regs[x].dtype
        if self.draw(st.booleans()):
            y = self.pick(lambda r: r.dtype != "bool" and broadcasts(shape, r.shape))
            shape = tuple(np.broadcast_shapes(shape, self.regs[y].shape))
            dt = promote(DTYPES[xd], DTYPES[self.regs[y].dtype]).name
            yv: Any = ("r", y)
        else:
            dt, yv = xd, self.draw(st.sampled_from(SCALARS))
        self.add(shape, dt)
        return ("where", ("r", c), ("r", x), yv, dt)

    def _broadcast(self):
        a = self.pick(lambda r: 1 in r.shape)
        if a is None:
            return None
        shape = tuple(self.draw(st.integers(1, 6)) if s == 1 else s
                      for s in self.regs[a].shape)
        self.add(shape, self.regs[a].dtype)
        return ("broadcast", ("r", a), shape)

    def _repeat(self):
        a = self.pick(lambda r: len(r.shape) < 3)
        ra = self.regs[a]
        axis = self.draw(st.integers(0, len(ra.shape)))
        n = self.draw(st.integers(1, 4))
        self.add(ra.shape[:axis] + (n,) + ra.shape[axis:], ra.dtype)
        return ("repeat", ("r", a), axis, n)

    def _reshape(self):
        a = self.pick(lambda r: not r.slot)
        if a is None:
            return None
        ra = self.regs[a]
        n = int(np.prod(ra.shape))
        divisors = [d for d in range(1, n + 1) if n % d == 0]
        d = self.draw(st.sampled_from(divisors))
        shape = self.draw(st.sampled_from([(n,), (d, n // d), (n // d, d)]))
        self.add(shape, ra.dtype)
        return ("reshape", ("r", a), shape)

    def _full(self):
        shape = self.draw(st.sampled_from([r.shape for r in self.regs]))
        dt = self.draw(st.sampled_from(FLOATS))
        value = self.draw(st.sampled_from(SCALARS))
        self.add(shape, dt)
        return ("full", shape, value, dt)

    def _arange(self):
        n = self.draw(st.integers(1, 16))
        self.add((n,), "int32")
        return ("arange", n)

    def _scope(self):
        if self.depth >= 2:
            return None
        a = self.pick(lambda r: r.dtype in FLOATS)
        if a is None:
            return None
        shape, dtype = self.regs[a].shape, self.regs[a].dtype
        self.add(shape, dtype, slot=True)  # the persistent target, made before the scope
        self.depth += 1
        inner = self.steps(self.draw(st.integers(0, 3)))
        # the block's result: an elementwise function of ``a`` of the slot's shape and dtype
        op = self.draw(st.sampled_from(("exp", "abs", "neg", "sqrt")))
        inner.append(("unary", op, ("r", a), dtype))
        self.add(shape, dtype)
        result = len(self.regs) - 1
        self.depth -= 1
        for r in self.regs:
            if r.depth > self.depth:
                r.depth = 10**6  # dead
        return ("scope", shape, dtype, inner, result)


def broadcasts(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    try:
        np.broadcast_shapes(a, b)
    except ValueError:
        return False
    return True
