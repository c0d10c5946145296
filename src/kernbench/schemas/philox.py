"""The ``philox`` op family: Triton's counter-based Philox-4x32 generator, defined once.

``philox4x32`` is the generator itself (Salmon et al., 2011, as Triton's
``triton.language.random.philox`` computes it): the 64-bit seed's low and high words are
the key, the four 32-bit counters the state, ``n_rounds`` rounds of two 32x32 -> 64-bit
multiplies and key bumps. The Triton front end calls it on concrete seeds and offsets (index
arithmetic, computed while recording); ``Philox`` is the op family's semantics object
(``OPS[Op.PHILOX].sem``) that replay evaluates for a seed or counters that are data.

A ``philox`` row takes five arguments in position order, ``(seed, c0, c1, c2, c3)``: input
handles, and Python integers at the positions ``attrs["scalars"]`` names (``[[pos, value],
...]``, as the elementwise families write theirs). Its output is one of the four words,
``attrs["word"]`` (0-3), a uint32 block of the arguments' broadcast shape, after
``attrs["n_rounds"]`` rounds. The counters are 32-bit integers read as their bits; the seed
is any integer, widened to 64 bits as Triton's ``seed.to(tl.uint64)`` (signed types
sign-extend). See docs/adr/0860-philox-is-an-op-of-the-trace.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from kernbench.schemas.policy import Policy, kind_of, scalar_dtype

__all__ = ["ARGUMENTS", "KEY_A", "KEY_B", "N_ROUNDS", "ROUND_A", "ROUND_B", "Philox",
           "philox4x32"]

#: Philox-4x32 constants: the key's Weyl increments, the round multipliers
KEY_A, KEY_B, ROUND_A, ROUND_B = 0x9E3779B9, 0xBB67AE85, 0xD2511F53, 0xCD9E8D57
#: Triton's default number of rounds
N_ROUNDS = 10
#: argument positions of a ``philox`` row
ARGUMENTS = ("seed", "c0", "c1", "c2", "c3")
_U32 = np.uint64(0xFFFFFFFF)
_WORD_BITS = np.uint64(32)
#: counter dtypes: 32-bit integers (read as their bits)
COUNTER_DTYPES = frozenset({"int32", "uint32"})


def _seed_words(seed: Any) -> tuple[np.ndarray, np.ndarray]:
    """The seed's low and high 32-bit words after Triton's ``seed.to(tl.uint64)``."""
    s = np.asarray(seed)
    if s.dtype.kind == "O" or (s.dtype.kind in "iu" and s.dtype.itemsize > 8):
        s = np.asarray(int(seed) & 0xFFFFFFFFFFFFFFFF, np.uint64)
    wide = s.astype(np.uint64) if s.dtype.kind in "ub" else s.astype(np.int64).view(np.uint64)
    return (wide & _U32).astype(np.uint32), (wide >> _WORD_BITS).astype(np.uint32)


def _counter(c: Any) -> np.ndarray:
    """A counter's 32 bits as uint32 (a Python int: its low 32 bits)."""
    if isinstance(c, int | np.integer) and not isinstance(c, np.ndarray):
        return np.asarray(int(c) & 0xFFFFFFFF, np.uint32)
    v = np.asarray(c)
    return v.view(np.uint32) if v.dtype.itemsize == 4 else v.astype(np.uint32)


def _mulhilo(a: int, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    prod = np.uint64(a) * b.astype(np.uint64)
    return (prod >> _WORD_BITS).astype(np.uint32), (prod & _U32).astype(np.uint32)


def philox4x32(seed: Any, c0: Any, c1: Any = 0, c2: Any = 0, c3: Any = 0,
               n_rounds: int = N_ROUNDS) -> tuple[np.ndarray, ...]:
    """The four uint32 words of Philox-4x32-``n_rounds`` at counter ``(c0, c1, c2, c3)``
    under ``seed`` (each an array or a Python integer; numpy broadcasting between them)."""
    k0, k1 = _seed_words(seed)
    x0, x1, x2, x3 = (_counter(c) for c in (c0, c1, c2, c3))
    shape = np.broadcast_shapes(k0.shape, x0.shape, x1.shape, x2.shape, x3.shape)
    x0, x1, x2, x3 = (np.broadcast_to(x, shape) for x in (x0, x1, x2, x3))
    ka, kb = np.uint32(KEY_A), np.uint32(KEY_B)
    with np.errstate(over="ignore"):
        for _ in range(n_rounds):
            hi_b, lo_b = _mulhilo(ROUND_B, x2)
            hi_a, lo_a = _mulhilo(ROUND_A, x0)
            x0, x1, x2, x3 = hi_b ^ x1 ^ k0, lo_b, hi_a ^ x3 ^ k1, lo_a
            k0, k1 = k0 + ka, k1 + kb
    return tuple(np.array(np.broadcast_to(x, shape), np.uint32) for x in (x0, x1, x2, x3))


def _rounds_and_word(attrs: Mapping[str, Any]) -> tuple[int, int]:
    rounds, word = attrs.get("n_rounds", N_ROUNDS), attrs.get("word", 0)
    if not isinstance(rounds, int) or isinstance(rounds, bool) or rounds < 0:
        raise ValueError(f"philox n_rounds {rounds!r} is not a non-negative integer")
    if not isinstance(word, int) or isinstance(word, bool) or not 0 <= word < 4:
        raise ValueError(f"philox word {word!r} is not 0, 1, 2 or 3")
    return rounds, word


@dataclass(frozen=True, slots=True)
class Philox:
    """One word (``attrs["word"]``) of Philox-4x32-``attrs["n_rounds"]`` of the five
    arguments (module doc): a uint32 block of their broadcast shape."""

    name: str

    def infer(self, shapes: Sequence[tuple[int, ...]], dtypes: Sequence[str],
              attrs: Mapping[str, Any], policy: Policy) -> tuple[tuple[int, ...], str]:
        _rounds_and_word(attrs)
        scalars = {int(p): v for p, v in attrs.get("scalars") or ()}
        if len(shapes) + len(scalars) != len(ARGUMENTS) or any(
                not 0 <= p < len(ARGUMENTS) for p in scalars):
            raise ValueError(f"philox needs 5 arguments (seed, c0, c1, c2, c3), has "
                             f"{len(shapes)} tensors and scalars at {sorted(scalars)}")
        names = iter(dtypes)
        for pos, what in enumerate(ARGUMENTS):
            dt = scalar_dtype(scalars[pos]) if pos in scalars else next(names)
            if pos in scalars and isinstance(scalars[pos], bool | float):
                raise ValueError(f"philox {what} {scalars[pos]!r} is not an integer")
            if pos == 0 and kind_of(dt) not in "iub":
                raise ValueError(f"philox seed must be an integer, got {dt}")
            if pos > 0 and pos not in scalars and dt not in COUNTER_DTYPES:
                raise ValueError(f"philox counter {what} must be a 32-bit integer, got {dt}")
        shape: tuple[int, ...] = ()
        for s in shapes:
            shape = tuple(np.broadcast_shapes(shape, tuple(s)))
        return shape, "uint32"

    def evaluator(self, attrs: Mapping[str, Any], policy: Policy) -> Callable[..., Any]:
        rounds, word = _rounds_and_word(attrs)
        return partial(_word, word, rounds)

    def evaluate(self, arrays: Sequence[Any], attrs: Mapping[str, Any], policy: Policy
                 ) -> np.ndarray:
        """The word of the arguments in position order (arrays or Python integers)."""
        return self.evaluator(attrs, policy)(*arrays)


def _word(word: int, rounds: int, seed: Any, c0: Any, c1: Any, c2: Any, c3: Any
          ) -> np.ndarray:
    return philox4x32(seed, c0, c1, c2, c3, rounds)[word]
