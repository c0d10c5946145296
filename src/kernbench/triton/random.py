"""``tl.rand``, ``tl.randn``, ``tl.randint``, ``tl.randint4x``: Triton's counter-based
Philox-4x32-10 generator, computed at record time.

Triton derives every random value from the seed (a scalar) and an offset block (index
values), never from loaded data, so the values are concrete, like the rest of the index
arithmetic: a kernel that compares them with data (dropout's ``keep = rand(seed, offs) > p``)
records them as one ``const`` operand. Offsets that come from loaded data are refused.
"""

from __future__ import annotations

import numpy as np

from kernbench.errors import KernelError
from kernbench.record.source import src_here
from kernbench.triton import dtypes as d
from kernbench.triton.value import VALUES, Concrete, concrete, plain

#: Philox-4x32 constants (Salmon et al., 2011): the key's Weyl increments, the round factors
KEY_A, KEY_B, ROUND_A, ROUND_B = 0x9E3779B9, 0xBB67AE85, 0xD2511F53, 0xCD9E8D57
N_ROUNDS = 10
_U32 = np.uint64(0xFFFFFFFF)
#: 2**-31 as Triton spells it: an int32 in [0, 2**31) times it lies in [0, 1)
SCALE = np.float32(4.6566127342e-10)


def _mulhilo(a: int, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    prod = np.uint64(a) * b.astype(np.uint64)
    return (prod >> np.uint64(32)).astype(np.uint32), (prod & _U32).astype(np.uint32)


def philox(seed: int, c0: np.ndarray, c1: np.ndarray, c2: np.ndarray | None = None,
           c3: np.ndarray | None = None, n_rounds: int = N_ROUNDS
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Philox-4x32 of the counter ``(c0, c1, c2, c3)`` (the last two 0 by default) under
    the 64-bit ``seed`` (its low word is the first key word)."""
    s = int(seed) & 0xFFFFFFFFFFFFFFFF
    k0, k1 = np.uint32(s & 0xFFFFFFFF), np.uint32(s >> 32)
    zero = np.zeros_like(c0, dtype=np.uint32)
    x0, x1 = c0.astype(np.uint32), c1.astype(np.uint32)
    x2 = zero if c2 is None else c2.astype(np.uint32)
    x3 = zero.copy() if c3 is None else c3.astype(np.uint32)
    with np.errstate(over="ignore"):
        for _ in range(n_rounds):
            hi_b, lo_b = _mulhilo(ROUND_B, x2)
            hi_a, lo_a = _mulhilo(ROUND_A, x0)
            x0, x1, x2, x3 = hi_b ^ x1 ^ k0, lo_b, hi_a ^ x3 ^ k1, lo_a
            k0, k1 = k0 + np.uint32(KEY_A), k1 + np.uint32(KEY_B)
    return x0, x1, x2, x3


def _uniform(x: np.ndarray) -> np.ndarray:
    """A uint32 as a float32 in [0, 1), as Triton maps it (via int32, folding negatives)."""
    i = x.view(np.int32)
    i = np.where(i < 0, -i - 1, i)
    return i.astype(np.float32) * SCALE


def _operands(name: str, seed: object, offset: object, n_rounds: object
              ) -> tuple[int, np.ndarray, int]:
    src = src_here()
    seed, offset, rounds = plain(seed), plain(offset), plain(n_rounds)
    if isinstance(seed, VALUES):
        if not isinstance(seed, Concrete) or seed.shape != () or not seed.dtype.is_int():
            raise KernelError(f"tl.{name} needs an integer scalar seed, got {seed!r}", src)
        seed = int(seed.value)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise KernelError(f"tl.{name} needs an integer scalar seed, got {seed!r}", src)
    if not isinstance(offset, VALUES):
        offset = concrete(np.asarray(offset, d.of_scalar(offset).np))
    if not isinstance(offset, Concrete) or not offset.dtype.is_int():
        raise KernelError(f"tl.{name} offsets must be integer index values (not loaded data), "
                          f"got {offset!r}", src)
    if not isinstance(rounds, int) or rounds < 1:
        raise KernelError(f"tl.{name} n_rounds must be a positive constexpr, got {rounds!r}",
                          src)
    return seed, offset.value, rounds


def _words(name: str, seed: object, offset: object, n_rounds: object) -> tuple[np.ndarray, ...]:
    s, off, rounds = _operands(name, seed, offset, n_rounds)
    wide = off.astype(np.int64).astype(np.uint64)
    lo = (wide & _U32).astype(np.uint32)
    hi = (wide >> np.uint64(32)).astype(np.uint32) if off.dtype.itemsize > 4 else lo * 0
    return philox(s, lo, hi, n_rounds=rounds)


def randint4x(seed: object, offset: object, n_rounds: object = N_ROUNDS
              ) -> tuple[Concrete, ...]:
    """Four blocks of random uint32, the Philox words of counter ``(offset, 0, 0, 0)``."""
    return tuple(concrete(w, d.uint32) for w in _words("randint4x", seed, offset, n_rounds))


def randint(seed: object, offset: object, n_rounds: object = N_ROUNDS) -> Concrete:
    return concrete(_words("randint", seed, offset, n_rounds)[0], d.uint32)


def rand(seed: object, offset: object, n_rounds: object = N_ROUNDS) -> Concrete:
    """Uniform float32 in [0, 1)."""
    return concrete(_uniform(_words("rand", seed, offset, n_rounds)[0]), d.float32)


def randn(seed: object, offset: object, n_rounds: object = N_ROUNDS) -> Concrete:
    """Standard normal float32: the first of a Box-Muller pair from the first two words."""
    w = _words("randn", seed, offset, n_rounds)
    u1 = np.maximum(np.float32(1.0e-7), _uniform(w[0]))
    th = np.float32(6.283185307179586) * _uniform(w[1])
    r = np.sqrt(np.float32(-2.0) * np.log(u1))
    return concrete((r * np.cos(th)).astype(np.float32), d.float32)


__all__ = ["philox", "rand", "randint", "randint4x", "randn"]
