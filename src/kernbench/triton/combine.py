"""``tl.reduce`` and ``tl.associative_scan`` with a user ``@triton.jit`` combine function.

The combine function runs on blocks, so every step is the op table's ops (ADR-0560), in a
fixed tree order that the trace records and replay therefore repeats:

* reduce: the axis is combined in adjacent pairs, ``c(x[2i], x[2i+1])``, halving it until
  one element is left (a balanced tree in index order, so an associative combine needs no
  commutativity);
* scan (inclusive): ``p[i] = c(x[2i], x[2i+1])`` is scanned recursively into ``s``; then
  ``out[2i+1] = s[i]``, ``out[2i] = c(s[i-1], x[2i])`` (``out[0] = x[0]``). ``reverse=True``
  scans the flipped block and flips the result.

A combine over k operands takes 2k blocks and returns k (a tuple); kernbench cuts the blocks
with ``blocks.pairs`` and joins them with ``blocks.interleave_axis``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from kernbench.errors import KernelError, ShapeError
from kernbench.record.source import src_here
from kernbench.triton import arith, blocks
from kernbench.triton.core import constexpr_axis, reshape
from kernbench.triton.value import Value, concrete, plain

Blocks = tuple[Value, ...]
#: a user ``@triton.jit`` combine function: 2k blocks in, k blocks (or one) out
CombineFn = Callable[..., object]


def _operands(input: object, src: str) -> tuple[Blocks, bool]:  # noqa: A002
    single = not isinstance(input, tuple | list)
    items = tuple(input) if isinstance(input, tuple | list) else (input,)
    xs = tuple(arith.value_of(x, src) for x in items)
    if not xs or any(x.shape != xs[0].shape for x in xs) or not xs[0].shape:
        raise ShapeError(f"combine operands must be blocks of one shape, got "
                         f"{[list(x.shape) for x in xs]}", src)
    return xs, single


def _combine(fn: CombineFn, a: Blocks, b: Blocks, src: str) -> Blocks:
    got = fn(*a, *b)
    got = tuple(got) if isinstance(got, tuple | list) else (got,)
    if len(got) != len(a):
        raise KernelError(f"combine_fn {getattr(fn, '__name__', fn)} returned {len(got)} "
                          f"values for {len(a)} operands", src)
    out = []
    for x, want in zip(got, a, strict=True):
        v = arith.value_of(x, src)
        if v.dtype != want.dtype:
            raise KernelError(f"combine_fn {getattr(fn, '__name__', fn)} turned a "
                              f"{want.dtype!r} operand into {v.dtype!r} (Triton requires "
                              "the combine to keep the operand types)", src)
        out.append(v if v.shape == want.shape else blocks.broadcast_to(v, want.shape))
    return tuple(out)


def _axis(xs: Blocks, axis: object, src: str) -> tuple[Blocks, int]:
    if plain(axis) is None:
        return tuple(reshape(x, (x.numel,)) for x in xs), 0
    return xs, constexpr_axis(axis, xs[0].shape, "combine axis", src)


def reduce(input: object, axis: object, combine_fn: CombineFn,  # noqa: A002
           keep_dims: bool = False) -> Value | Blocks:
    """``tl.reduce``: adjacent pairs combined until one element is left."""
    src = src_here()
    xs, single = _operands(input, src)
    shape = xs[0].shape
    xs, ax = _axis(xs, axis, src)
    while xs[0].shape[ax] > 1:
        halves = [blocks.pairs(x, ax, src) for x in xs]
        xs = _combine(combine_fn, tuple(e for e, _ in halves), tuple(o for _, o in halves), src)
    if plain(axis) is None:
        out_shape = (1,) * len(shape) if keep_dims else ()
    else:
        out_shape = tuple(1 if i == ax else s for i, s in enumerate(shape))
        if not keep_dims:
            out_shape = out_shape[:ax] + out_shape[ax + 1:]
    out = tuple(reshape(x, out_shape) for x in xs)
    return out[0] if single else out


def _shift(xs: Blocks, ax: int, src: str) -> Blocks:
    """``s[i - 1]`` at ``i`` along ``ax`` (index 0 holds an unused element):
    shift(s) = interleave(shift(odd), even)."""
    if xs[0].shape[ax] == 1:
        return xs
    halves = [blocks.pairs(x, ax, src) for x in xs]
    od = _shift(tuple(o for _, o in halves), ax, src)
    return tuple(blocks.interleave_axis(o, e, ax, src)
                 for o, (e, _) in zip(od, halves, strict=True))


def _scan(xs: Blocks, ax: int, fn: CombineFn, src: str) -> Blocks:
    n = xs[0].shape[ax]
    if n == 1:
        return xs
    halves = [blocks.pairs(x, ax, src) for x in xs]
    ev, od = tuple(e for e, _ in halves), tuple(o for _, o in halves)
    s = _scan(_combine(fn, ev, od, src), ax, fn, src)
    evens = _combine(fn, _shift(s, ax, src), ev, src)
    first = (np.arange(n // 2) == 0).reshape([n // 2 if i == ax else 1
                                              for i in range(len(ev[0].shape))])
    evens = tuple(arith.where(concrete(first), e, v) for e, v in zip(ev, evens, strict=True))
    return tuple(blocks.interleave_axis(e, o, ax, src) for e, o in zip(evens, s, strict=True))


def associative_scan(input: object, axis: object, combine_fn: CombineFn,  # noqa: A002
                     reverse: bool = False) -> Value | Blocks:
    """``tl.associative_scan``: an inclusive scan in the tree order of the module doc."""
    src = src_here()
    xs, single = _operands(input, src)
    ax = constexpr_axis(axis, xs[0].shape, "scan axis", src)
    rev = bool(plain(reverse))
    if rev:
        xs = tuple(blocks.flip_axis(x, ax, src) for x in xs)
    out = _scan(xs, ax, combine_fn, src)
    if rev:
        out = tuple(blocks.flip_axis(x, ax, src) for x in out)
    return out[0] if single else out
