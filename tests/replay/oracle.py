"""The differential test's oracle: each ``tl`` op's numpy semantics, written out apart from
the op table and the replay executors on purpose (docs/adr/0003-one-op-table.md). A new op
is one name in the lists below and one line in ``Numpy``.
"""

from __future__ import annotations

import contextlib

import ml_dtypes
import numpy as np

from kernbench.schemas.dtypes import DTYPES

FLOATS = ("float32", "bfloat16")
BINARY = ("add", "sub", "mul", "div", "maximum", "minimum")
COMPARE = ("lt", "le", "gt", "ge", "eq", "ne")
UNARY = ("exp", "exp2", "log", "sqrt", "rsqrt", "abs", "neg", "tanh", "erf", "sigmoid")
TRANSCENDENTAL = {"exp", "exp2", "log", "sqrt", "rsqrt", "tanh", "erf", "sigmoid"}
SCALARS = (0.5, 2.0, -1.5, 3.0)
NP_UFUNC = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide,
            "maximum": np.maximum, "minimum": np.minimum, "lt": np.less,
            "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal, "eq": np.equal,
            "ne": np.not_equal}


def f32(a: np.ndarray) -> np.ndarray:
    return a.astype(np.float32) if a.dtype in (ml_dtypes.bfloat16, np.float16) else a


def npd(name: str) -> np.dtype:
    return DTYPES[name].np


def erf_as(v: np.ndarray) -> np.ndarray:
    """Abramowitz & Stegun 7.1.26 in float64 (|error| < 1.5e-7, inside the float32
    tolerance): an oracle written apart from replay's libm erf."""
    x = np.abs(v.astype(np.float64))
    t = 1 / (1 + 0.3275911 * x)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (
        -1.453152027 + t * 1.061405429))))
    return np.sign(v) * (1 - poly * np.exp(-x * x))


def philox_ref(seed: int, c: tuple[int, int, int, int], rounds: int = 10) -> list[int]:
    """Philox-4x32-``rounds`` of one counter under a 64-bit seed, in plain Python integers
    (the ``philox`` op family's oracle, apart from ``schemas/philox.py``'s vectorised one)."""
    m = 0xFFFFFFFF
    x = [v & m for v in c]
    s = seed & 0xFFFFFFFFFFFFFFFF
    k = [s & m, s >> 32]
    for _ in range(rounds):
        p0, p1 = 0xD2511F53 * x[0], 0xCD9E8D57 * x[2]
        x = [(p1 >> 32) ^ x[1] ^ k[0], p1 & m, (p0 >> 32) ^ x[3] ^ k[1], p0 & m]
        k = [(k[0] + 0x9E3779B9) & m, (k[1] + 0xBB67AE85) & m]
    return x


class Numpy:
    scope = staticmethod(contextlib.nullcontext)

    def binary(self, op, a, b, dt):
        return NP_UFUNC[op](*(f32(v) if isinstance(v, np.ndarray) else v for v in (a, b))
                            ).astype(npd(dt))

    def unary(self, op, a, dt):
        fn = {"exp": np.exp, "exp2": np.exp2, "log": np.log, "sqrt": np.sqrt,
              "rsqrt": lambda v: 1 / np.sqrt(v), "abs": np.abs, "neg": np.negative,
              "tanh": lambda v: 1 - 2 / (np.exp(2 * v.astype(np.float64)) + 1),
              "erf": erf_as, "sigmoid": lambda v: 1 / (1 + np.exp(-v.astype(np.float64)))}[op]
        return fn(f32(a)).astype(npd(dt))

    def reduce(self, op, a, axis, keepdims, shape, dt):
        fn = {"sum": np.sum, "max": np.max, "min": np.min}[op]
        return np.reshape(fn(f32(a), axis=axis, keepdims=keepdims), shape).astype(npd(dt))

    def softmax(self, a, axis, dt):
        x = a.astype(np.float32)
        e = np.exp(x - x.max(axis=axis, keepdims=True))
        return (e / e.sum(axis=axis, keepdims=True)).astype(npd(dt))

    def dot(self, a, b, acc):
        r = a.astype(np.float32) @ b.astype(np.float32).T
        return r + acc.astype(np.float32) if acc is not None else r

    def cast(self, a, dt):
        return a.astype(npd(dt))

    def where(self, c, x, y, dt):
        return np.where(c, *(f32(v) if isinstance(v, np.ndarray) else v for v in (x, y))
                        ).astype(npd(dt))

    def broadcast(self, a, shape):
        return np.broadcast_to(a, shape).copy()

    def repeat(self, a, axis, n):
        new = a.shape[:axis] + (n,) + a.shape[axis:]
        return np.broadcast_to(np.expand_dims(a, axis), new).copy()

    def reshape(self, a, shape):
        return a.reshape(shape)

    def full(self, shape, value, dt):
        return np.full(shape, value, dtype=npd(dt))

    def arange(self, n):
        return np.arange(n, dtype=np.int32)

    def copy_to(self, regs, dst, src):
        regs[dst] = regs[src].copy()
