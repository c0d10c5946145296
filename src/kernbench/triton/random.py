"""Triton's random numbers: ``tl.philox``, ``tl.randint``, ``tl.randint4x``, ``tl.rand``,
``tl.rand4x``, ``tl.randn``, ``tl.randn4x`` and the helpers ``tl.uint_to_uniform_float`` and
``tl.pair_uniform_to_normal``, as ``triton.language.random`` defines them.

Every value derives from a seed and counters through Philox-4x32 (``schemas/philox.py``).
When the seed and the offsets are concrete (a kernel argument and index arithmetic) the
numbers are computed now and are concrete, like the rest of the index arithmetic: a kernel
that compares them with data (dropout's ``keep = rand(seed, offs) > p``) records them as one
operand. When either is data (``seed = tl.load(seed_ptr)``, offsets loaded or computed from
loaded values) each Philox word is a ``philox`` row of the trace that replay computes, and
the conversions to floats are the op table's elementwise ops, written as Triton writes them
(ADR-0860).
"""

from __future__ import annotations

import numpy as np

from kernbench.errors import KernelError
from kernbench.record.lowering.philox import word as philox_word
from kernbench.record.source import src_here
from kernbench.schemas.philox import N_ROUNDS, philox4x32
from kernbench.triton import arith, data, mathops
from kernbench.triton import dtypes as d
from kernbench.triton.value import Concrete, Symbolic, Value, concrete, plain

__all__ = ["N_ROUNDS", "pair_uniform_to_normal", "philox", "rand", "rand4x", "randint",
           "randint4x", "randn", "randn4x", "uint_to_uniform_float"]

#: 2**-31 as Triton spells it: an int32 in [0, 2**31) times it lies in [0, 1)
SCALE_32 = 4.6566127342e-10
#: 2**-63 likewise for 64-bit words
SCALE_64 = 1.0842020432385337e-19
_F32 = np.float32
_WORDS = (0, 1, 2, 3)
Number = Concrete | Symbolic


# -- operands ---------------------------------------------------------------------------------
def _integer(x: object, what: str, src: str) -> int | Number:
    """``x`` (a Python integer, a constexpr or an integer value) as an int or a value."""
    x = plain(x)
    if isinstance(x, int | np.integer) and not isinstance(x, bool | np.bool_):
        return int(x)
    if isinstance(x, Concrete | Symbolic) and x.dtype.is_int() and not x.dtype.is_bool():
        return x
    raise KernelError(f"{what} must be an integer, got {x!r}", src)


def _rounds(name: str, n_rounds: object, src: str) -> int:
    r = plain(n_rounds)
    if not isinstance(r, int) or isinstance(r, bool) or r < 0:
        raise KernelError(f"tl.{name} n_rounds must be a non-negative constexpr integer, got "
                          f"{r!r}", src)
    return r


def _values(x: int | Number) -> int | np.ndarray:
    return x if isinstance(x, int) else x.value  # type: ignore[union-attr]


def _argument(x: int | Number, src: str) -> Symbolic | int:
    """A ``philox`` row's argument: a Python integer (a 0-d concrete's value) or a symbolic
    value (concrete blocks materialised: an ``arange``, a ``const``). The caller keeps the
    values alive until its rows are recorded (``record.lifetime``)."""
    if isinstance(x, int):
        return x
    if isinstance(x, Concrete):
        if not x.shape:
            return int(x.value)
        t = d.int64 if x.dtype is d.uint64 else x.dtype  # the same 64 bits, sign-extended
        return data.handle(concrete(x.value.view(t.np), t), t, src)
    return x


def _recorded(args: tuple[int | Number, ...], rounds: int, words: tuple[int, ...], src: str
              ) -> tuple[Symbolic, ...]:
    """The ``philox`` rows of ``words`` (the first priced with the rounds: ADR-0860)."""
    held = tuple(_argument(a, src) for a in args)  # alive until every row is recorded
    ops = tuple(a.handle if isinstance(a, Symbolic) else a for a in held)
    return tuple(data.symbolic(philox_word(ops, rounds, w, w == words[0]), d.uint32)
                 for w in words)


def _counters_of(offset: int | Number, src: str) -> tuple[int | Number, int | Number]:
    """``randint4x``'s counters (lo, hi) of an offset block, as Triton splits it:
    ``offset.to(uint32)`` and, for 64-bit offsets, ``(offset >> 32).to(uint32)``."""
    if isinstance(offset, int):
        offset = concrete(np.asarray(offset, d.of_scalar(offset).np))
    bits = offset.dtype.primitive_bitwidth
    if bits == 32:
        return offset, 0  # philox reads a 32-bit counter's bits: .to(uint32) changes none
    lo = arith.cast(offset, d.uint32)
    if bits <= 32:
        return lo, 0
    return lo, arith.cast(arith.binary("shr", offset, 32), d.uint32)


def _words(name: str, seed: object, offset: object, n_rounds: object,
           words: tuple[int, ...]) -> tuple[Number, ...]:
    """Philox words of counter ``(offset lo, offset hi, 0, 0)``: concrete when the seed and
    the offsets are, else recorded."""
    src = src_here()
    s = _integer(seed, f"tl.{name} seed", src)
    off = _integer(offset, f"tl.{name} offsets", src)
    rounds = _rounds(name, n_rounds, src)
    if not isinstance(s, Symbolic) and not isinstance(off, Symbolic):
        v = np.asarray(_values(off))
        wide = v.astype(np.int64).astype(np.uint64)
        low = (wide & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        high = (wide >> np.uint64(32)).astype(np.uint32) if v.dtype.itemsize > 4 else low * 0
        got = philox4x32(_values(s), low, high, 0, 0, rounds)
        return tuple(concrete(got[w], d.uint32) for w in words)
    lo, hi = _counters_of(off, src)
    return _recorded((s, lo, hi, 0, 0), rounds, words, src)


# -- the language's functions -------------------------------------------------------------
def philox(seed: object, c0: object, c1: object, c2: object, c3: object,
           n_rounds: object = N_ROUNDS) -> tuple[Number, ...]:
    """The four uint32 words of Philox-4x32 of the 32-bit counters ``(c0, c1, c2, c3)``."""
    src = src_here()
    s = _integer(seed, "tl.philox seed", src)
    cs = tuple(_integer(c, "tl.philox counter", src) for c in (c0, c1, c2, c3))
    for c in cs:
        dt = d.of_scalar(c) if isinstance(c, int) else c.dtype
        if dt.primitive_bitwidth != 32:
            raise KernelError(f"tl.philox counters must be 32-bit integers, got {dt.name} "
                              "(Philox-4x64 of 64-bit counters is not supported by kernbench: "
                              "the trace format has no uint64)", src)
    rounds = _rounds("philox", n_rounds, src)
    if not any(isinstance(a, Symbolic) for a in (s, *cs)):
        v0, v1, v2, v3 = (_values(x) for x in cs)
        got = philox4x32(_values(s), v0, v1, v2, v3, rounds)
        return tuple(concrete(w, d.uint32) for w in got)
    return _recorded((s, *cs), rounds, _WORDS, src)


def randint4x(seed: object, offset: object, n_rounds: object = N_ROUNDS
              ) -> tuple[Number, ...]:
    """Four blocks of random uint32, the Philox words of counter ``(offset, 0, 0)``."""
    return _words("randint4x", seed, offset, n_rounds, _WORDS)


def randint(seed: object, offset: object, n_rounds: object = N_ROUNDS) -> Number:
    return _words("randint", seed, offset, n_rounds, (0,))[0]


def uint_to_uniform_float(x: object) -> Value:
    """A random 32- or 64-bit integer as a float32 in [0, 1), as Triton maps it: the bits as
    a signed integer, negatives folded (``~x``), times 2**-31 (2**-63)."""
    src = src_here()
    v = arith.number(x, src, "tl.uint_to_uniform_float")
    if v.dtype in (d.uint32, d.int32):
        t, scale = d.int32, SCALE_32
    elif v.dtype in (d.uint64, d.int64):
        t, scale = d.int64, SCALE_64
    else:
        raise KernelError(f"tl.uint_to_uniform_float needs a 32- or 64-bit integer, got "
                          f"{v.dtype!r}", src)
    if isinstance(v, Concrete):  # the same arithmetic in numpy, as index arithmetic
        bits = v.value.view(t.np)
        return concrete(np.where(bits < 0, ~bits, bits).astype(_F32) * _F32(scale), d.float32)
    i = arith.cast(v, t, bitcast=True)
    return arith.binary("mul", arith.where(arith.binary("lt", i, 0), arith.invert(i), i),
                        scale)


def _normal(u1: Value, u2: Value, second: bool) -> Value:
    """One of Box-Muller's pair: ``r * cos(th)`` (``second``: ``r * sin(th)``)."""
    if isinstance(u1, Concrete) and isinstance(u2, Concrete):
        radius = np.sqrt(_F32(-2.0) * np.log(np.maximum(_F32(1.0e-7), u1.value)))
        angle = _F32(6.283185307179586) * u2.value
        return concrete((radius * (np.sin(angle) if second else np.cos(angle))).astype(_F32),
                        d.float32)
    th = arith.binary("mul", 6.283185307179586, u2)
    log = mathops.MATH1["log"](mathops.maximum(1.0e-7, u1))
    r = mathops.MATH1["sqrt"](arith.binary("mul", -2.0, log))
    return arith.binary("mul", r, mathops.MATH1["sin" if second else "cos"](th))


def pair_uniform_to_normal(u1: object, u2: object) -> tuple[Value, Value]:
    """Box-Muller: two standard normals from two uniforms in [0, 1)."""
    src = src_here()
    a, b = (mathops.fp32_or_fp64(u, src, "tl.pair_uniform_to_normal") for u in (u1, u2))
    return _normal(a, b, False), _normal(a, b, True)


def rand(seed: object, offset: object, n_rounds: object = N_ROUNDS) -> Value:
    """Uniform float32 in [0, 1)."""
    return uint_to_uniform_float(_words("rand", seed, offset, n_rounds, (0,))[0])


def rand4x(seed: object, offset: object, n_rounds: object = N_ROUNDS) -> tuple[Value, ...]:
    """Four blocks of uniform float32 in [0, 1), one from each Philox word."""
    return tuple(uint_to_uniform_float(w) for w in _words("rand4x", seed, offset, n_rounds,
                                                           _WORDS))


def randn(seed: object, offset: object, n_rounds: object = N_ROUNDS) -> Value:
    """Standard normal float32: the first of a Box-Muller pair from the first two words."""
    w = _words("randn", seed, offset, n_rounds, (0, 1))
    return _normal(uint_to_uniform_float(w[0]), uint_to_uniform_float(w[1]), False)


def randn4x(seed: object, offset: object, n_rounds: object = N_ROUNDS) -> tuple[Value, ...]:
    """Four blocks of standard normal float32: Box-Muller of words (0, 1) and (2, 3)."""
    u = [uint_to_uniform_float(w) for w in _words("randn4x", seed, offset, n_rounds, _WORDS)]
    return (_normal(u[0], u[1], False), _normal(u[0], u[1], True),
            _normal(u[2], u[3], False), _normal(u[2], u[3], True))
